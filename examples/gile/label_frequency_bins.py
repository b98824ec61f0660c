#!/usr/bin/env python
"""Per-label average precision of trained ``gile_classifier`` models, by the labels' training frequency.

Document-ranking AvgPr (the study's metric) is dominated by frequent labels. This script asks the other
question: how well is each *label* retrieved? For every seen label with at least one positive document in
``--subset``, it ranks the documents by the label's score and takes scikit-learn's
``average_precision_score``; labels are grouped into bins by their number of training documents
(``--bins 20,100`` gives 1-20, 21-100, >100) and each bin reports the macro mean. Several checkpoints are
compared side by side on the same documents and labels (e.g. ``linear`` vs ``gile``: does sharing through
label texts help the rare labels?). Writes a table to stdout, and ``--json`` / ``--plot`` (PNG) on request.

Example::

    python examples/gile/label_frequency_bins.py --data data-bin/debtags \\
        --checkpoint linear=ckpt_linear/checkpoint_last.pt --checkpoint gile=ckpt_gile/checkpoint_last.pt \\
        --bins 20,100 --plot bins.png
"""

import json
import logging
import os
import sys
from collections import Counter
from typing import Optional, Sequence

import numpy as np

from fairseq_joint.cli.common import fail, parser, run, setup_logging
from fairseq_joint.data.gile_files import read_label_lines
from fairseq_joint.loaders import load_gile_model
from fairseq_joint.options import named_values
from fairseq_joint.plots import figure
from fairseq_joint_studies.study_metrics import split_scores


def parse_bins(text):
    try:
        edges = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise fail(f"--bins must be comma-separated integers, got {text!r}") from None
    if not edges or edges[0] < 1 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise fail(f"--bins {text!r} must be increasing positive document counts, e.g. 20,100")
    return edges


def bin_names(edges):
    lows = [1] + [e + 1 for e in edges]
    return [f"{lo}-{hi}" for lo, hi in zip(lows, edges)] + [f">{edges[-1]}"]


def seen_label_scores(checkpoint, data, subset, batch_size):
    """(scores, targets, seen label names) over the seen labels for every document of ``subset``."""
    model, task = load_gile_model(checkpoint, data)
    scores, targets, label_set = split_scores(model, task, subset, batch_size, seen_only=True)
    names = [n for n, i in zip(label_set.names, label_set.train_index.tolist()) if i >= 0]
    return scores, targets, names


def main(argv: Optional[Sequence[str]] = None) -> int:
    setup_logging()
    p = parser(__doc__)
    p.add_argument("--data", required=True, help="the preprocessed data directory (train.labels, SUBSET.*)")
    p.add_argument("--checkpoint", action="append", required=True,
                   help="NAME=PATH or PATH of a gile_classifier checkpoint; repeat to compare models")
    p.add_argument("--subset", default="valid", help="split to score (default: valid)")
    p.add_argument("--bins", default="20,100", help="upper edges of the training-frequency bins (documents)")
    p.add_argument("--batch-size", type=int, default=64, help="documents scored at once")
    p.add_argument("--json", help="write the figures to this file")
    p.add_argument("--plot", help="write a bar chart (PNG) to this file")
    args = p.parse_args(argv)
    edges = parse_bins(args.bins)
    train_labels = os.path.join(args.data, "train.labels")
    if not os.path.isfile(train_labels):
        raise fail(f"{train_labels} not found: --data must be a directory written by fairseq-joint-preprocess-gile")
    freq = Counter(n for row in read_label_lines(train_labels) for n in row)

    from sklearn.metrics import average_precision_score

    results, label_names = {}, None
    def run_name(path: str) -> str:  # a bare checkpoint is named by its directory
        return os.path.basename(os.path.dirname(os.path.abspath(path))) or path

    checkpoints = named_values("--checkpoint", args.checkpoint, "NAME=CHECKPOINT", unnamed=run_name).items()
    for name, path in checkpoints:
        scores, targets, names = seen_label_scores(path, args.data, args.subset, args.batch_size)
        if label_names is not None and names != label_names:
            raise fail(f"{path} was trained on other labels than the first checkpoint: compare models "
                       "trained on the same data")
        label_names = names
        per_label = {}
        for j, label in enumerate(names):
            if targets[:, j].any():
                per_label[label] = float(average_precision_score(targets[:, j], scores[:, j]))
        results[name] = per_label
        logging.info(f"{name}: {len(per_label)} labels with a positive document in {args.subset}")

    bins = bin_names(edges)

    def which(label):
        return int(np.searchsorted(edges, freq[label], side="left"))

    members = [[lab for lab in results[next(iter(results))] if which(lab) == b] for b in range(len(bins))]
    table = {"bins": bins, "labels": [len(m) for m in members], "models": {}}
    for name, per_label in results.items():
        table["models"][name] = {
            "macro_ap": [100.0 * float(np.mean([per_label[lab] for lab in m])) if m else None for m in members],
            "all": 100.0 * float(np.mean(list(per_label.values()))),
        }
    header = f"{'training docs':>14} {'labels':>7} " + " ".join(f"{n:>12}" for n in results)
    print(f"per-label average precision (%) on {args.subset}, macro mean per bin")
    print(header)
    for b, name in enumerate(bins):
        cells = [table["models"][m]["macro_ap"][b] for m in results]
        print(f"{name:>14} {table['labels'][b]:>7} " + " ".join(f"{c:>12.2f}" if c is not None else f"{'–':>12}" for c in cells))
    print(f"{'all':>14} {sum(table['labels']):>7} " + " ".join(f"{table['models'][m]['all']:>12.2f}" for m in results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)
    if args.plot:
        with figure(args.plot, figsize=(1.5 + 1.6 * len(bins), 3.5), dpi=100) as (_, ax):
            width = 0.8 / len(results)
            for k, name in enumerate(results):
                vals = [v if v is not None else 0.0 for v in table["models"][name]["macro_ap"]]
                ax.bar(np.arange(len(bins)) + k * width, vals, width, label=name)
            ax.set_xticks(np.arange(len(bins)) + width * (len(results) - 1) / 2,
                          [f"{n}\n({c} labels)" for n, c in zip(bins, table["labels"])])
            ax.set_xlabel("training documents per label")
            ax.set_ylabel("macro per-label AP (%)")
            ax.legend(fontsize=8)
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
