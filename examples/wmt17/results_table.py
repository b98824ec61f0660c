#!/usr/bin/env python
"""Collect evaluated runs into the layout of Table 2 of Pappas et al. (2018): |Θ|, BLEU and its difference Δ to
the NMT baseline with the paper's significance marks (* p < .05, † p < .01, ‡ p < .001, paired bootstrap).

    python examples/wmt17/results_table.py --baseline RUNS/nmt RUNS/nmt RUNS/nmt-tied RUNS/nmt-joint-512 [--markdown t.md]

Each run directory is a train.sh SAVE_DIR evaluated by evaluate.sh (``eval/scores.json``, ``eval/params.json``,
``train-data.env``); the significance comes from the run's own paired bootstrap against ``--baseline``.
"""

import json
import os
import sys
from typing import Dict, List, Optional, Sequence

from fairseq_joint.cli.common import fail, parser, run
from fairseq_joint_studies.study_reports import write_report


def load_run(path: str, eval_dir: str = "eval") -> Dict[str, object]:
    """A train.sh SAVE_DIR evaluated by evaluate.sh (into ``eval_dir``, evaluate.sh's --eval-dir)."""
    scores, params, env = (os.path.join(path, eval_dir, "scores.json"), os.path.join(path, eval_dir, "params.json"),
                           os.path.join(path, "train-data.env"))
    for f in (scores, params, env):
        if not os.path.isfile(f):
            raise fail(f"{f} not found: train {path} with train.sh and run evaluate.sh on it")
    with open(env, encoding="utf-8") as f:
        meta = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    with open(scores, encoding="utf-8") as f:
        s = json.load(f)
    with open(params, encoding="utf-8") as f:
        p = json.load(f)
    return {"dir": path, "system": meta.get("TRAIN_SYSTEM", os.path.basename(path)),
            "joint_dim": meta.get("TRAIN_JOINT_DIM") or None, "pair": f"{meta.get('RECIPE_SRC')}→{meta.get('RECIPE_TGT')}",
            "bpe_ops": meta.get("RECIPE_BPE_OPS"), "scores": s, "params": p}


def human(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n / 1e3:.0f}K" if n >= 1e3 else str(n)


def table(runs: List[Dict[str, object]], baseline: Dict[str, object]) -> str:
    rows = ["| Model | \\|Θ\\| | output layer | BLEU (Δ) | chrF | tok. BLEU | p vs NMT |", "|---|---|---|---|---|---|---|"]
    base_bleu = baseline["scores"]["bleu"]
    for r in runs:
        s, p = r["scores"], r["params"]
        if r["dir"] == baseline["dir"]:
            delta, pval = "–", "–"
        else:
            sig = s.get("significance")
            if sig is None or abs(sig["baseline_bleu"] - base_bleu) > 1e-6:
                raise fail(f"{r['dir']} was not evaluated with --baseline {baseline['dir']}; re-run evaluate.sh with it")
            delta, pval = f"{sig['delta']:+.2f}{sig['mark']}", f"{sig['p_value']:.3f}"
        name = r["system"]
        rows.append(f"| {name} | {human(p['total'])} | {human(p['output_layer'])} | {s['bleu']:.2f} ({delta}) | "
                    f"{s['chrf']:.2f} | {s.get('tok_bleu', float('nan')):.2f} | {pval} |")
    sig = baseline["scores"]["bleu_signature"]
    rows.append("")
    rows.append(f"{baseline['pair']}, BPE {baseline['bpe_ops']}. BLEU: sacreBLEU `{sig}`; Δ to {baseline['system']} "
                "with * p < .05, † p < .01, ‡ p < .001 (paired bootstrap, 1000 resamples).")
    return "\n".join(rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="train.sh SAVE_DIRs evaluated with evaluate.sh, in table order")
    p.add_argument("--baseline", required=True, help="the NMT run the Δ and significance refer to")
    p.add_argument("--markdown", help="also write the table to this file")
    p.add_argument("--json", help="also write the collected figures to this JSON file")
    a = p.parse_args(argv)
    runs = [load_run(r) for r in a.runs]
    base = load_run(a.baseline)
    write_report(table(runs, base), a.markdown, a.json, runs)
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
