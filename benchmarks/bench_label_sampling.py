#!/usr/bin/env python
"""Label-sampling speed (GILE Sec. 3.4, Eq. 17): training-step time of a WAN + ``gile`` classifier at
|Y| = 10,000 labels when scoring 10 / 25 / 50 / 100 % of the labels per batch, side by side in one run.

A step is the ``multilabel_classification`` criterion's forward (label vectors from descriptions, the
joint projections of the candidate labels, BCE) + backward + an Adam update, on synthetic data: random
texts and label descriptions over a shared vocabulary, each text with a few positive labels. Weights keep
the model's realistic initialization (N(0, d^-0.5), no denormals). Reports the median of ``--repeats``
timed steps after ``--warmup`` steps per rate, and the speed-up of every rate over 100 %.
Target: 10 % sampling at least 3x faster than 100 %.

    python scripts/benchmark_label_sampling.py [--quick] [--json results.json]
"""

import argparse
import json
import logging
import os
import statistics
import sys
import time
from types import SimpleNamespace

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fairseq_joint.criterions.multilabel_classification import MultilabelClassificationCriterion  # noqa: E402
from fairseq_joint.models.gile_classifier import GileClassifier, GileClassifierConfig  # noqa: E402
from fairseq_joint.modules.text_encoders import WordAttentionEncoder  # noqa: E402

logging.basicConfig(format="%(asctime)s | %(message)s", level=logging.INFO)
logger = logging.getLogger("benchmark_label_sampling")
PAD = 1


def build(num_labels, vocab, dim, joint_dim, seed):
    torch.manual_seed(seed)
    cfg = GileClassifierConfig(head="gile", embed_dim=dim, encoder_dim=dim, attention_dim=dim, joint_dim=str(joint_dim))
    embed = torch.nn.Embedding(vocab, dim, padding_idx=PAD)
    torch.nn.init.normal_(embed.weight, 0.0, dim ** -0.5)
    encoder = WordAttentionEncoder(dim, dim, dim)
    return GileClassifier(cfg, embed, encoder, GileClassifier.build_head(cfg, num_labels))


def make_batch(num_labels, vocab, batch, length, desc_len, positives, gen):
    src = torch.randint(2, vocab, (batch, length), generator=gen)
    target = torch.zeros(batch, num_labels)
    for row in range(batch):
        target[row, torch.randperm(num_labels, generator=gen)[:positives]] = 1.0
    return {
        "net_input": {"src_tokens": src, "src_lengths": torch.full((batch,), length)},
        "target": target, "nsentences": batch, "ntokens": batch * length,
        "label_tokens": torch.randint(2, vocab, (num_labels, desc_len), generator=gen),
        "label_train_index": torch.arange(num_labels),
    }


def time_rate(rate, args):
    model = build(args.labels, args.vocab, args.dim, args.joint_dim, args.seed).train()
    task = SimpleNamespace(cfg=SimpleNamespace(classification_mode="multilabel"))
    criterion = MultilabelClassificationCriterion(task, "bce", rate, 0.5)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(args.seed)
    sample = make_batch(args.labels, args.vocab, args.batch, args.length, args.desc_len, args.positives, gen)
    times = []
    for step in range(args.warmup + args.repeats):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss, size, _ = criterion(model, sample)
        (loss / size).backward()
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--labels", type=int, default=10000, help="|Y|")
    p.add_argument("--rates", default="0.1,0.25,0.5,1.0", help="label sample rates")
    p.add_argument("--vocab", type=int, default=20000, help="shared vocabulary size")
    p.add_argument("--dim", type=int, default=100, help="d = dh (the paper: 100)")
    p.add_argument("--joint-dim", type=int, default=512, help="d_j")
    p.add_argument("--batch", type=int, default=16, help="texts per batch (the paper: 16)")
    p.add_argument("--length", type=int, default=64, help="words per text")
    p.add_argument("--desc-len", type=int, default=8, help="words per label description")
    p.add_argument("--positives", type=int, default=4, help="positive labels per text")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="tiny configuration (|Y| = 500) for tests")
    p.add_argument("--json", help="write the figures to this JSON file")
    args = p.parse_args()
    if args.quick:
        args.labels, args.vocab, args.joint_dim, args.warmup, args.repeats = 500, 2000, 64, 1, 3
    if args.threads:
        torch.set_num_threads(args.threads)
    rates = [float(r) for r in args.rates.split(",")]
    if any(not 0 < r <= 1 for r in rates):
        raise SystemExit("error: --rates must lie in (0, 1]")
    logger.info(f"|Y|={args.labels}, d=dh={args.dim}, d_j={args.joint_dim}, batch {args.batch}x{args.length} words, "
                f"{torch.get_num_threads()} threads")
    results = {}
    for rate in rates:
        results[rate] = time_rate(rate, args)
        logger.info(f"rate {rate:.2f}: median step {1000 * results[rate]:.1f} ms")
    full = results.get(1.0)
    rows = []
    for rate, t in results.items():
        speedup = full / t if full else None
        rows.append({"rate": rate, "step_ms": 1000 * t, "speedup_vs_100": speedup})
        print(f"rate {100 * rate:5.1f}%  step {1000 * t:8.2f} ms" + (f"  speed-up vs 100%: {speedup:.2f}x" if speedup else ""))
    out = {"config": {k: v for k, v in vars(args).items() if k != "json"}, "threads": torch.get_num_threads(), "results": rows}
    if full and min(rates) <= 0.1:
        out["target_10pct_at_least_3x"] = bool(full / results[min(rates)] >= 3.0)
        print(f"target (10% >= 3x faster than 100%): {'met' if out['target_10pct_at_least_3x'] else 'NOT met'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
