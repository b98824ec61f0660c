#!/usr/bin/env python
"""Fig. 2 of Pappas et al. (2018): BLEU of NMT-joint as a function of the joint space size dj, against the
NMT and NMT-tied baselines (horizontal lines), from runs evaluated by examples/wmt17/evaluate.sh.

    python examples/wmt17/plot_bleu_vs_dj.py RUNS/nmt RUNS/nmt-tied RUNS/nmt-joint-512 RUNS/nmt-joint-2048 --output fig2.png
"""

import sys
from typing import Optional, Sequence

from results_table import load_run  # one reader of evaluated runs, beside this script

from fairseq_joint.cli.common import fail, parser, run
from fairseq_joint.plots import figure


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="evaluated train.sh SAVE_DIRs (joint runs give the curve, others lines)")
    p.add_argument("--output", required=True, help="PNG file to write")
    p.add_argument("--metric", default="bleu", choices=["bleu", "chrf", "tok_bleu"], help="score on the y axis")
    p.add_argument("--eval-dir", default="eval", help="the runs' evaluation directory (evaluate.sh --eval-dir)")
    a = p.parse_args(argv)
    runs = [load_run(r, a.eval_dir) for r in a.runs]
    joint = sorted((int(r["joint_dim"]), r["scores"][a.metric]) for r in runs if r["joint_dim"])
    if not joint:
        raise fail("no NMT-joint run among the given runs, nothing to plot against dj; give at least one run of "
                   "train.sh SYSTEM nmt-joint-DJ")
    with figure(a.output, figsize=(5, 3.5), dpi=120) as (_, ax):
        ax.plot([d for d, _ in joint], [b for _, b in joint], "o-", label="NMT-joint", color="C2")
        for i, r in enumerate(r for r in runs if not r["joint_dim"]):
            ax.axhline(r["scores"][a.metric], ls="--", color=f"C{i}", label=r["system"])
        ax.set_xscale("log", base=2)
        ax.set_xticks([d for d, _ in joint], [str(d) for d, _ in joint])
        ax.set_xlabel("joint space size dj")
        ax.set_ylabel({"bleu": "sacreBLEU", "chrf": "chrF", "tok_bleu": "tokenized BLEU"}[a.metric])
        ax.set_title(f"{runs[0]['pair']}, BPE {runs[0]['bpe_ops']}")
        ax.legend(fontsize=8)
    print(f"wrote {a.output} ({len(joint)} NMT-joint points)")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
