#!/usr/bin/env python
"""Zero-shot label prediction with a trained ``gile_classifier``: texts in, ranked labels out.

Scores every label of ``--labels`` (any ``label<TAB>description`` file, including labels the model never
saw in training: their vectors are the mean word vectors of their descriptions, GILE Sec. 2.2) for each
input text (one per line, ``--input`` or stdin) and prints, per text, the ``--topk`` best labels with
their scores (the head's logit), tab-separated, or JSON lines with ``--json``. The ``linear`` head can only
score its training labels and says so.

Example::

    python scripts/predict_labels.py --checkpoint ckpt/checkpoint_best.pt --labels labels.tsv \\
        --topk 5 < texts.txt
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fairseq import checkpoint_utils  # noqa: E402
from fairseq.data import data_utils  # noqa: E402

import fairseq_joint  # noqa: E402,F401  (registers the task/model, allowlists checkpoint classes)
from fairseq_joint.tasks.gile_classification import encode_label_set, read_label_file, tokenize  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, help="a gile_classifier checkpoint")
    p.add_argument("--labels", required=True, help="label<TAB>description file to rank (may hold unseen labels)")
    p.add_argument("--data", help="the preprocessed data directory (dict.txt, labels.train.txt); "
                   "default: the one recorded in the checkpoint")
    p.add_argument("--input", help="texts, one per line (default: stdin)")
    p.add_argument("--topk", type=int, default=5, help="labels printed per text")
    p.add_argument("--batch-size", type=int, default=64, help="texts scored at once")
    p.add_argument("--json", action="store_true", help="print JSON lines {text, labels: [[label, score], ...]}")
    args = p.parse_args(argv)
    if args.topk < 1:
        raise SystemExit("error: --topk must be >= 1")
    if not os.path.isfile(args.checkpoint):
        raise SystemExit(f"error: checkpoint {args.checkpoint} does not exist")
    try:
        descriptions = read_label_file(args.labels)
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"error: {e}") from None
    overrides = {"data": args.data} if args.data else None
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([args.checkpoint], arg_overrides=overrides)
    model = models[0].eval()
    if not hasattr(model, "label_scores"):
        raise SystemExit(f"error: {args.checkpoint} is not a gile_classifier checkpoint")
    names = list(descriptions)
    label_set = encode_label_set(names, descriptions, task.dictionary, task.train_labels)
    if not model.scores_unseen_labels:
        unseen = [n for n, i in zip(names, label_set.train_index.tolist()) if i < 0]
        if unseen:
            raise SystemExit(f"error: --head linear cannot score the {len(unseen)} label(s) of {args.labels} it never "
                             f"saw in training (e.g. {unseen[0]!r}): train a joint head (--head gile) for unseen labels")

    lines = open(args.input, encoding="utf-8").read().splitlines() if args.input else sys.stdin.read().splitlines()
    texts = [t for t in lines if t.strip()]
    if len(texts) != len(lines):
        print(f"note: skipped {len(lines) - len(texts)} empty input line(s)", file=sys.stderr)
    k = min(args.topk, len(names))
    d = task.dictionary
    with torch.no_grad():
        for start in range(0, len(texts), args.batch_size):
            batch = texts[start:start + args.batch_size]
            rows = [torch.LongTensor([d.index(w) for w in tokenize(t)] or [d.unk()]) for t in batch]
            src = data_utils.collate_tokens(rows, d.pad(), left_pad=False)
            scores = model.label_scores(model(src), label_set.tokens, label_set.train_index, names)
            top = scores.topk(k, dim=-1)
            for text, vals, idx in zip(batch, top.values.tolist(), top.indices.tolist()):
                ranked = [[names[i], round(v, 4)] for v, i in zip(vals, idx)]
                if args.json:
                    print(json.dumps({"text": text, "labels": ranked}))
                else:
                    print(text + "\t" + "\t".join(f"{n} ({v:.3f})" for n, v in ranked))


if __name__ == "__main__":
    main()
