#!/usr/bin/env python
"""Label-sampling speed (GILE Sec. 3.4, Eq. 17): training-step time of a WAN + ``gile`` classifier at
|Y| = 10,000 labels when scoring 10 / 25 / 50 / 100 % of the labels per batch, side by side in one run.

A step is the ``multilabel_classification`` criterion's forward (label vectors from descriptions, the
joint projections of the candidate labels, BCE) + backward + an Adam update, on synthetic data: random
texts and label descriptions over a shared vocabulary, each text with a few positive labels. Weights keep
the model's realistic initialization (N(0, d^-0.5), no denormals). Every rate has its own model; the harness
runs one step of each per round in rotating order (``--warmup`` untimed rounds, then ``--repeats`` timed ones)
and reports the median step and its spread, and the speed-up of every rate over 100 %.
Target: 10 % sampling at least 3x faster than 100 %.

    python benchmarks/bench_label_sampling.py [--json results.json] [--plot results.png]
    python benchmarks/bench_label_sampling.py --quick
"""

from types import SimpleNamespace
from typing import Dict, List

import bench_harness
import torch
from bench_harness import Timing, add_rounds, parse_args, parser, round_robin, rounds_note, spread_chart, target
from bench_harness import main as run_benchmark

from fairseq_joint.criterions.multilabel_classification import MultilabelClassificationCriterion
from fairseq_joint.models.gile_classifier import GileClassifier, GileClassifierConfig
from fairseq_joint.modules.text_encoders import WordAttentionEncoder

PAD = 1
TARGET_SPEEDUP = 3.0  # the smallest rate (10 %) vs 100 %


def build(num_labels, vocab, dim, joint_dim, seed):
    torch.manual_seed(seed)
    cfg = GileClassifierConfig(head="gile", embed_dim=dim, encoder_dim=dim, attention_dim=dim, joint_dim=str(joint_dim))
    embed = torch.nn.Embedding(vocab, dim, padding_idx=PAD)
    torch.nn.init.normal_(embed.weight, 0.0, dim ** -0.5)
    encoder = WordAttentionEncoder(dim, dim, dim)
    return GileClassifier(cfg, embed, encoder, GileClassifier.build_head(cfg, num_labels))


def step_fn(rate, args):
    """One training step (criterion forward, backward, Adam) of a fresh model scoring ``rate`` of the labels."""
    model = build(args.labels, args.vocab, args.dim, args.joint_dim, args.seed).train()
    task = SimpleNamespace(cfg=SimpleNamespace(classification_mode="multilabel"))
    criterion = MultilabelClassificationCriterion(task, "bce", rate, 0.5)
    gen = torch.Generator().manual_seed(args.seed)
    descriptions = torch.randint(2, args.vocab, (args.labels, args.desc_len), generator=gen)
    sample = bench_harness.multilabel_batch(args.labels, args.vocab, args.batch, args.length, args.positives, gen,
                                            descriptions)
    return bench_harness.training_step(model, criterion, sample)


def rate_rows(times: Dict[float, Timing]) -> List[Dict[str, object]]:
    """Rows by rate: the median step in ms and the speed-up over 100 % (None without a 100 % rate)."""
    full = times.get(1.0)
    return [{"rate": rate, **t.fields(), "step_ms": 1000 * t.median,
             "speedup_vs_100": full.median / t.median if full else None} for rate, t in times.items()]


def run(args) -> Dict[str, object]:
    cases = {f"rate {rate:g}": step_fn(rate, args) for rate in args.rates}
    times = round_robin(cases, args.repeats, args.warmup, "label sampling")
    rows = rate_rows({rate: times[f"rate {rate:g}"] for rate in args.rates})
    targets = []
    low = min(rows, key=lambda r: r["rate"])
    if low["speedup_vs_100"] is not None and low["rate"] <= 0.1:
        targets.append(target(f"{low['rate']:.0%} sampling speed-up vs 100%", low["speedup_vs_100"], TARGET_SPEEDUP))
    return {"results": rows, "targets": targets}


def report(result: Dict[str, object]) -> None:
    cfg = result["config"]
    print(f"\nGILE label sampling, |Y|={cfg['labels']}, d=dh={cfg['dim']}, d_j={cfg['joint_dim']}, batch "
          f"{cfg['batch']}x{cfg['length']} words, {cfg['threads']} threads, "
          f"{rounds_note(cfg)}")
    for r in result["results"]:
        speedup = f"  speed-up vs 100%: {r['speedup_vs_100']:.2f}x" if r["speedup_vs_100"] else ""
        print(f"rate {100 * r['rate']:5.1f}%  step {Timing.of(r).show(1000, '.2f'):>26} ms{speedup}")


def plot(result: Dict[str, object], path: str) -> None:
    rows = result["results"]
    spread_chart(path, [f"{r['rate']:.0%}" for r in rows], [Timing.of(r) for r in rows], lambda s: 1000 * s,
                 "ms per training step (median, min-max)", f"GILE label sampling, |Y|={result['config']['labels']}",
                 figsize=(7, 3.5), ylabel="labels scored")


QUICK = dict(labels=500, vocab=2000, joint_dim=64, warmup=1, repeats=3)


def parse(argv=None):
    p = parser(__doc__)
    p.add_argument("--labels", type=int, default=10000, help="|Y|")
    p.add_argument("--rates", type=float, nargs="+", default=[0.1, 0.25, 0.5, 1.0], help="label sample rates")
    p.add_argument("--vocab", type=int, default=20000, help="shared vocabulary size")
    p.add_argument("--dim", type=int, default=100, help="d = dh (the paper: 100)")
    p.add_argument("--joint-dim", type=int, default=512, help="d_j")
    p.add_argument("--batch", type=int, default=16, help="texts per batch (the paper: 16)")
    p.add_argument("--length", type=int, default=64, help="words per text")
    p.add_argument("--desc-len", type=int, default=8, help="words per label description")
    p.add_argument("--positives", type=int, default=4, help="positive labels per text")
    add_rounds(p, repeats=7, warmup=2)
    p.add_argument("--seed", type=int, default=1, help="random seed of weights and data")
    return parse_args(p, argv, QUICK, positive=("labels", "rates", "vocab", "dim", "joint_dim", "batch", "length",
                                                 "desc_len", "positives", "repeats"),
                      check=lambda a: "--rates must lie in (0, 1]" if max(a.rates) > 1 else None)


if __name__ == "__main__":
    run_benchmark(parse(), run, report, plot)
