"""Translation scores of Pappas et al. (2018), Sec. 4.1, with sacreBLEU.

* sacreBLEU (detokenized hypotheses vs the raw references) and chrF, each with its signature;
* tokenized BLEU "as the paper reported it" (multi-bleu.perl on Moses-tokenized text): sacreBLEU's BLEU
  with ``tokenize='none'`` on the tokenized hypotheses and references;
* paired bootstrap resampling (Koehn 2004; the paper's bootstrap-hypothesis-difference-significance.pl)
  between this system and a baseline, with sacreBLEU's implementation (``PairedTest``, ``test_type='bs'``,
  1000 resamples, seed 12345 unless SACREBLEU_SEED says otherwise); equal corpus BLEU reports p = 1.

    fairseq-joint-score --hyp hyp.detok --ref ref.raw [--hyp-tok hyp.tok --ref-tok ref.tok]
        [--baseline-hyp base/hyp.detok --baseline-name nmt] [--lowercase] [--json scores.json]
"""

import json
import os
import sys
from typing import Dict, List, Optional, Sequence

from sacrebleu.metrics import BLEU, CHRF

from fairseq_joint.cli.common import console_script, fail, number, parser
from fairseq_joint.options import Range, as_number, check_number
from fairseq_joint.text_files import check_new_output, read_text

PROG = "fairseq-joint-score"
#: the paired bootstrap's resamples: sacreBLEU draws them as one array of resamples x sentences
BOOTSTRAP_SAMPLES = Range(1, 100_000, integer=True)
#: the paired bootstrap's resamples when --bootstrap-samples is not given (sacreBLEU's default)
DEFAULT_BOOTSTRAP_SAMPLES = 1000
#: sacreBLEU's environment variable of the bootstrap's seed: 'none' (unseeded) or what numpy's default_rng takes
SEED_ENV, SEED = "SACREBLEU_SEED", Range(0, integer=True)


def check_same_length(hyp: List[str], ref: List[str], hyp_path: str, ref_path: str) -> None:
    if len(hyp) != len(ref):
        raise fail(f"{hyp_path} has {len(hyp):,d} lines but the reference {ref_path} has {len(ref):,d}; score "
                   "hypotheses of this very test set (same prepare run, no filtered test lines)")


def significance_mark(p: float) -> str:
    """The paper's marks (Table 2): * p < .05, † p < .01, ‡ p < .001."""
    return "‡" if p < 0.001 else "†" if p < 0.01 else "*" if p < 0.05 else ""


def paired_bootstrap(baseline: List[str], system: List[str], refs: List[str], lowercase: bool,
                     names=("baseline", "system"), n_samples: int = 1000) -> Dict[str, object]:
    """sacreBLEU's paired bootstrap resampling of BLEU between ``system`` and ``baseline``."""
    from sacrebleu.significance import PairedTest

    metrics = {"BLEU": BLEU(lowercase=lowercase)}
    test = PairedTest([(names[0], baseline), (names[1], system)], metrics, [refs], test_type="bs",
                      n_samples=n_samples)
    signatures, results = test()
    base_res, sys_res = results["BLEU"]
    # with equal corpus BLEU sacreBLEU's statistic is 0 and its p-value degenerates to 1/(n+1): no difference
    p = 1.0 if sys_res.score == base_res.score else float(sys_res.p_value)
    return {
        "baseline": names[0], "system": names[1], "baseline_bleu": base_res.score, "system_bleu": sys_res.score,
        "delta": sys_res.score - base_res.score, "p_value": p, "mark": significance_mark(p),
        "n_samples": n_samples, "signature": str(signatures["BLEU"]),
    }


def score(hyp_path: str, ref_path: str, hyp_tok: Optional[str] = None, ref_tok: Optional[str] = None,
          baseline_hyp: Optional[str] = None, baseline_name: str = "baseline", system_name: str = "system",
          lowercase: bool = False, n_samples: int = DEFAULT_BOOTSTRAP_SAMPLES) -> Dict[str, object]:
    if bool(hyp_tok) != bool(ref_tok):  # tokenized BLEU was dropped without a word
        raise fail("tokenized BLEU needs both --hyp-tok and --ref-tok: give the other, or drop it")
    hyp, ref = read_text(hyp_path, "hypotheses"), read_text(ref_path, "reference")
    if not ref:
        raise fail(f"--ref {ref_path} holds no line: give the test set's references, one per line")
    check_same_length(hyp, ref, hyp_path, ref_path)
    bleu, chrf = BLEU(lowercase=lowercase), CHRF(lowercase=lowercase)
    b, c = bleu.corpus_score(hyp, [ref]), chrf.corpus_score(hyp, [ref])
    out = {
        "sentences": len(hyp),
        "bleu": b.score, "bleu_signature": str(bleu.get_signature()), "bleu_verbose": str(b),
        "chrf": c.score, "chrf_signature": str(chrf.get_signature()),
    }
    if hyp_tok and ref_tok:
        ht, rt = read_text(hyp_tok, "tokenized hypotheses"), read_text(ref_tok, "tokenized reference")
        check_same_length(ht, rt, hyp_tok, ref_tok)
        tok_bleu = BLEU(tokenize="none", lowercase=lowercase, force=True)
        out["tok_bleu"] = tok_bleu.corpus_score(ht, [rt]).score
        out["tok_bleu_signature"] = str(tok_bleu.get_signature())
    if baseline_hyp:
        base = read_text(baseline_hyp, "baseline hypotheses")
        check_same_length(base, ref, baseline_hyp, ref_path)
        out["significance"] = paired_bootstrap(base, hyp, ref, lowercase, (baseline_name, system_name), n_samples)
    return out


def report(s: Dict[str, object]) -> str:
    lines = [f"sacreBLEU {s['bleu']:.2f}  {s['bleu_signature']}", f"  {s['bleu_verbose']}",
             f"chrF {s['chrf']:.2f}  {s['chrf_signature']}"]
    if "tok_bleu" in s:
        lines.append(f"tokenized BLEU {s['tok_bleu']:.2f}  (multi-bleu style; {s['tok_bleu_signature']})")
    if "significance" in s:
        g = s["significance"]
        lines.append(
            f"paired bootstrap ({g['n_samples']} samples): {g['system']} {g['system_bleu']:.2f} vs "
            f"{g['baseline']} {g['baseline_bleu']:.2f}: delta {g['delta']:+.2f}, p = {g['p_value']:.4f} {g['mark']}".rstrip()
        )
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = parser(__doc__.split("\n\n")[0], prog=PROG)
    p.add_argument("--hyp", required=True, help="detokenized hypotheses, one per line")
    p.add_argument("--ref", required=True, help="raw (untokenized) references, one per line")
    p.add_argument("--hyp-tok", help="Moses-tokenized hypotheses, for the paper's tokenized BLEU")
    p.add_argument("--ref-tok", help="Moses-tokenized references, for the paper's tokenized BLEU")
    p.add_argument("--baseline-hyp", help="detokenized hypotheses of the baseline for the paired bootstrap")
    p.add_argument("--baseline-name", help="--baseline-hyp: name of the baseline system in the report (default: "
                   "baseline)")
    p.add_argument("--system-name", help="--baseline-hyp: name of this system in the report (default: system)")
    p.add_argument("--lowercase", action="store_true", help="case-insensitive scores (lowercased corpora)")
    p.add_argument("--bootstrap-samples", type=number(BOOTSTRAP_SAMPLES),
                   help=f"--baseline-hyp: paired bootstrap resamples (default {DEFAULT_BOOTSTRAP_SAMPLES}; at most "
                   f"{BOOTSTRAP_SAMPLES.high}: sacreBLEU holds them all)")
    p.add_argument("--json", help="also write the scores to this JSON file")
    a = p.parse_args(argv)
    paired = [option for option, value in (("--baseline-name", a.baseline_name), ("--system-name", a.system_name),
                                           ("--bootstrap-samples", a.bootstrap_samples)) if value is not None]
    if paired and not a.baseline_hyp:  # they were ignored without a word
        raise fail(f"{' and '.join(paired)} set the paired bootstrap against --baseline-hyp, which is not given: add "
                   f"--baseline-hyp, or drop {' and '.join(paired)}")
    seed = os.environ.get(SEED_ENV, "none")  # read by sacreBLEU's bootstrap, which failed in a traceback
    if a.baseline_hyp and seed.lower() != "none":
        check_number(SEED_ENV, as_number(seed, integer=True), SEED)
    if a.json:
        check_new_output(a.json, "--json", [("--hyp", a.hyp), ("--ref", a.ref), ("--hyp-tok", a.hyp_tok),
                                            ("--ref-tok", a.ref_tok), ("--baseline-hyp", a.baseline_hyp)])
    s = score(a.hyp, a.ref, a.hyp_tok, a.ref_tok, a.baseline_hyp, a.baseline_name or "baseline",
              a.system_name or "system", a.lowercase, a.bootstrap_samples or DEFAULT_BOOTSTRAP_SAMPLES)
    print(report(s))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(s, f, indent=1)
    return 0


command = console_script(main, PROG)


if __name__ == "__main__":
    sys.exit(command())
