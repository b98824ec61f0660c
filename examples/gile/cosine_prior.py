#!/usr/bin/env python
"""The checkpoints of a ``gile_study.py`` work directory evaluated with ``--cosine-prior λ``: each run's last checkpoint
scores the validation documents as ``GileClassifier.label_scores`` does in evaluation with the flag set (the head's
logits, + λ · the frozen sentence encoder's cosine of text and description for the labels unseen in training), for
every λ given, and every figure is
the study's (``gile_study.matrix_stats``: seen / unseen AvgPr, GZSL H at γ = 0 and cross-calibrated). The prior is
not part of training, so these are the very checkpoints the study trained; only their scores change. Each
checkpoint's figures are kept beside it (``cosine_prior_<λs>.json``) and reused while the checkpoint is the same file:
a work directory that gathers runs of several studies (links to their ``ckpt_*`` folders) scores only the new ones.

Writes ``cosine_prior.json``, ``cosine_prior.md`` (mean ± std over seeds per system and λ, beside the study's
baselines from its ``results.json``) and ``cosine_prior.png`` into the work directory.

    python examples/gile/cosine_prior.py --workdir work/gile_study --lambdas 0,10
"""

import glob
import json
import os
import re

import numpy as np
from gile_study import BASELINES, matrix_stats, valid_matrix

from fairseq_joint.cli.common import CommandError, fail, parser, run
from fairseq_joint.loaders import load_gile_model
from fairseq_joint.plots import pyplot
from fairseq_joint_studies.study_metrics import split_scores
from fairseq_joint_studies.study_reports import aggregate
from fairseq_joint_studies.study_reports import cell as mean_std_cell
from fairseq_joint_studies.study_runs import cached_evaluation

COLUMNS = ("seen_avgpr", "unseen_avgpr", "gzsl_h", "cal_gzsl_seen_avgpr", "cal_gzsl_unseen_avgpr", "cal_gzsl_h",
           "gamma")
HEADINGS = ("seen AvgPr", "unseen AvgPr", "GZSL H, γ = 0", "GZSL seen AvgPr, γ cal.", "GZSL unseen AvgPr, γ cal.",
            "GZSL H, γ cal.", "γ")


def scores_with_prior(checkpoint, bin_dir, lambdas):
    """``{λ: score matrix}`` of one checkpoint on the validation documents (the model's own evaluation path)."""
    model, task = load_gile_model(checkpoint, bin_dir)
    if model.sentence_encoder is None or model.sentence_encoder.finetune:
        raise fail(f"{checkpoint}: --cosine-prior needs a frozen sentence encoder (--encoder pretrained or hybrid)")
    out = {}
    for lam in lambdas:
        model.cfg.cosine_prior = lam
        out[lam], _, _ = split_scores(model, task, "valid")
    return out


def main(argv=None) -> int:
    p = parser(__doc__)
    p.add_argument("--workdir", required=True, help="a gile_study.py --workdir (bin/, ckpt_<system>_seed<N>/)")
    p.add_argument("--lambdas", default="0,10", help="comma-separated λ of --cosine-prior")
    args = p.parse_args(argv)
    lambdas = [float(x) for x in args.lambdas.split(",")]
    bin_dir = os.path.join(args.workdir, "bin")
    targets, seen, _ = valid_matrix(bin_dir)
    runs = sorted(glob.glob(os.path.join(args.workdir, "ckpt_*", "checkpoint_last.pt")))
    if not runs:
        raise fail(f"{args.workdir}: no ckpt_<system>/checkpoint_last.pt; run gile_study.py there first")
    study = os.path.join(args.workdir, "results.json")
    study_seed = 1
    if os.path.isfile(study):
        with open(study) as f:
            study_seed = json.load(f)["settings"]["seed"]  # a single-seed study's folders carry no _seed<N>
    table = {}
    for checkpoint in runs:
        system, seed = re.fullmatch(r"ckpt_(.*?)(?:_seed(\d+))?", os.path.basename(os.path.dirname(checkpoint))).groups()
        seed = seed or str(study_seed)
        system = re.sub(r"\+pretrained-encoder=[^+]*", "", system)  # the encoder's path, made a file name
        cache = os.path.join(os.path.dirname(checkpoint), f"cosine_prior_{'_'.join(f'{lam:g}' for lam in lambdas)}.json")
        try:
            stats = cached_evaluation(checkpoint, cache, lambda checkpoint=checkpoint: {
                f"{lam:g}": matrix_stats(matrix, targets, seen)
                for lam, matrix in scores_with_prior(checkpoint, bin_dir, lambdas).items()})
        except CommandError:
            continue  # a system without a frozen sentence encoder
        for lam, row in stats.items():
            table.setdefault(f"{system} + --cosine-prior {lam}", {})[seed] = row
    with open(os.path.join(args.workdir, "cosine_prior.json"), "w") as f:
        json.dump(table, f, indent=1)
    baselines = {}
    if os.path.isfile(study):
        with open(study) as f:
            heads = json.load(f)["heads"]
        baselines = {name: heads[name] for name in BASELINES if name in heads}
    lines = ["| system | seeds | " + " | ".join(HEADINGS) + " |", "|---|---|" + "---|" * len(HEADINGS)]
    for name, stats in baselines.items():
        lines.append(f"| {name} | – | " + " | ".join(cell([stats], k) for k in COLUMNS) + " |")
    for name, by_seed in table.items():
        lines.append(f"| {name} | {len(by_seed)} | " + " | ".join(cell(list(by_seed.values()), k) for k in COLUMNS)
                     + " |")
    with open(os.path.join(args.workdir, "cosine_prior.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(table, baselines, os.path.join(args.workdir, "cosine_prior.png"))
    return 0


def cell(rows, key) -> str:
    """Mean ± std over seeds (the sample std, as every study table) of ``key``'s finite values, "–" without one."""
    values = [{key: r[key]} for r in rows if isinstance(r.get(key), (int, float)) and np.isfinite(r[key])]
    return mean_std_cell(aggregate(values), key) if values else "–"


def plot(table, baselines, path) -> None:
    plt = pyplot()
    names = list(baselines) + list(table)
    groups = [[r] for r in baselines.values()] + [list(s.values()) for s in table.values()]
    keys = (("seen_avgpr", "seen AvgPr"), ("unseen_avgpr", "unseen AvgPr"), ("cal_gzsl_h", "GZSL H, γ calibrated"))
    fig, ax = plt.subplots(figsize=(14, 0.45 * len(names) + 2))
    y = np.arange(len(names))
    for i, (key, label) in enumerate(keys):
        values = [[r[key] for r in g if np.isfinite(r.get(key, np.nan))] or [0.0] for g in groups]
        means = [np.mean(v) for v in values]
        stds = [np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in values]  # the tables' sample std
        ax.barh(y + (i - 1) * 0.27, means, height=0.27, xerr=stds, label=label)
    ax.set_yticks(y, [n.replace("+", " + ").replace("  ", " ") for n in names], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("% (validation documents, last epoch; mean ± std over seeds)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.06 * 12 / len(names)), ncol=3, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    raise SystemExit(run(main))
