#!/usr/bin/env python
"""Translation quality on high-, medium- and low-frequency target words (Pappas et al. 2018, Sec. 4.1/4.6, Fig. 3).

The paper splits the target vocabulary V into three bins of |V|/3 words each by training frequency and
scores each bin with METEOR, declaring the bin's words as METEOR's "function words". METEOR is not
available here, so each bin is scored with a word-level F-measure instead:

* the vocabulary is the training target side's word types (tokenized, BPE removed), ranked by count
  (ties broken alphabetically, so the bins are reproducible) and cut into three equal thirds;
* for every test sentence, a bin's matches are the clipped counts sum_w min(#hyp(w), #ref(w)) over the
  bin's words w, as in BLEU's unigram precision; precision = matches / hypothesis tokens in the bin,
  recall = matches / reference tokens in the bin, F1 their harmonic mean, all summed over the corpus;
* tokens never seen in training form a fourth row, ``unseen``, so no token is dropped from the counts.

    python examples/wmt17/frequency_bins.py --train-tgt train.tok.en --ref test.tok.en \\
        --hyp nmt=nmt/hyp.tok --hyp nmt-joint-512=joint/hyp.tok [--json bins.json] [--markdown bins.md]
"""

import sys
from collections import Counter
from typing import Dict, Optional, Sequence

from fairseq_joint.cli.common import fail, parser, run
from fairseq_joint.options import named_values
from fairseq_joint.text_files import read_text
from fairseq_joint_studies.study_reports import write_report

BINS = ("high", "medium", "low")


def frequency_bins(train_lines: Sequence[str]) -> Dict[str, str]:
    """word -> 'high' | 'medium' | 'low': the training vocabulary ranked by count, cut into |V|/3 thirds."""
    counts = Counter(w for line in train_lines for w in line.split())
    if not counts:
        raise fail("the training target file is empty; pass the tokenized training target side")
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    n = len(ranked)
    cuts = (n + 2) // 3, (2 * n + 2) // 3
    return {w: BINS[0] if i < cuts[0] else BINS[1] if i < cuts[1] else BINS[2] for i, w in enumerate(ranked)}


def bin_scores(word_bin: Dict[str, str], hyps: Sequence[str], refs: Sequence[str]) -> Dict[str, Dict[str, float]]:
    """Per bin: clipped word matches, hypothesis/reference token counts, precision, recall and F1 (in %)."""
    names = BINS + ("unseen",)
    matches, n_hyp, n_ref = Counter(), Counter(), Counter()
    for hyp, ref in zip(hyps, refs):
        h, r = Counter(hyp.split()), Counter(ref.split())
        for w, c in h.items():
            n_hyp[word_bin.get(w, "unseen")] += c
        for w, c in r.items():
            b = word_bin.get(w, "unseen")
            n_ref[b] += c
            matches[b] += min(c, h.get(w, 0))
    out = {}
    for b in names:
        p = matches[b] / n_hyp[b] if n_hyp[b] else 0.0
        r = matches[b] / n_ref[b] if n_ref[b] else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        out[b] = {"matches": matches[b], "hyp_tokens": n_hyp[b], "ref_tokens": n_ref[b],
                  "precision": 100 * p, "recall": 100 * r, "f1": 100 * f}
    return out


def markdown(results: Dict[str, Dict[str, Dict[str, float]]], vocab_sizes: Dict[str, int]) -> str:
    systems = list(results)
    head = "| bin (train words) | ref tokens | " + " | ".join(f"{s} F1 (P/R)" for s in systems) + " |"
    rows = [head, "|" + "---|" * (2 + len(systems))]
    for b in BINS + ("unseen",):
        first = results[systems[0]][b]
        cells = [f"{results[s][b]['f1']:.1f} ({results[s][b]['precision']:.1f}/{results[s][b]['recall']:.1f})"
                 for s in systems]
        rows.append(f"| {b} ({vocab_sizes.get(b, 0):,d}) | {first['ref_tokens']:,d} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--train-tgt", required=True, help="tokenized training target side (defines the bins)")
    p.add_argument("--ref", required=True, help="tokenized test references")
    p.add_argument("--hyp", action="append", required=True, help="NAME=FILE tokenized hypotheses (BPE removed); repeatable")
    p.add_argument("--json", help="write the per-bin figures to this JSON file")
    p.add_argument("--markdown", help="write the table to this Markdown file")
    a = p.parse_args(argv)
    word_bin = frequency_bins(read_text(a.train_tgt, "--train-tgt"))
    refs = read_text(a.ref, "--ref")
    results = {}
    for name, path in named_values("--hyp", a.hyp, "NAME=FILE", unnamed=str).items():
        hyps = read_text(path, "--hyp")
        if len(hyps) != len(refs):
            raise fail(f"{path} has {len(hyps):,d} lines but {a.ref} has {len(refs):,d}; use the same test set")
        results[name] = bin_scores(word_bin, hyps, refs)
    sizes = Counter(word_bin.values())
    write_report(markdown(results, sizes), a.markdown, a.json, {"bin_sizes": dict(sizes), "systems": results})
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
