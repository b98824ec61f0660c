#!/usr/bin/env python
"""Cost of the Label Embedding Network loss (Sun et al. 2017) over plain cross-entropy, side by side in one run.

Two levels, each at the full softmax and at 25% sampling (uniform negatives), |V| = 32K by default:

1. ``output layer + loss``: the criteria's own code (``sampled_cross_entropy`` vs
   ``label_embedding_cross_entropy`` with the compressed embedding, h = 100) on fixed decoder features h
   (T tokens, dh = 512, output layer ``joint`` dj = 512), forward + backward. The second head o2 and the
   embedding roughly double the output layer's FLOPs, so ≈ 2.2x is the limit here.
2. ``whole step``: a small joint_transformer (the shape of fairseq's transformer_iwslt_de_en: 6+6 layers,
   512-d, FFN 1024, 4 heads; ``joint`` dj = 512) trained by each criterion: forward, backward and an Adam
   step over model and criterion parameters, on a batch of T target tokens (32 x 32 tokens, 32-token sources).

Targets: whole step ≤ 1.5x at the full softmax and ≤ 1.25x with 25% sampling. Method: every case runs in a fresh
process (one warm-up step, then ``--repeats`` timed steps), the cases one after the other in rotating order, for
``--rounds`` rounds; medians and their spread over all timed steps are reported. Each process keeps freed memory
in its heap (glibc ``mallopt``): on this VM a fresh page costs a fault to the host, which would otherwise add noise
and time the allocator.

    python benchmarks/bench_label_embedding.py [--vocab 32768] [--tokens 1024] [--json out.json] [--plot out.png]
    python benchmarks/bench_label_embedding.py --quick
"""

import ctypes
import time
from types import SimpleNamespace
from typing import Dict, List, Sequence, Tuple

import torch
from bench_harness import Timing, fresh_process_rounds, parse_args, parser, print_table, spread_chart, target
from bench_harness import config as run_config
from bench_harness import main as run_benchmark

LEVELS = ("output layer + loss", "whole step")
CRITERIA = {
    "cross_entropy": ["--criterion", "sampled_cross_entropy"],
    "label_embedding": ["--criterion", "label_embedding_cross_entropy", "--label-embedding-dim", "100"],
}
TARGETS = {"full": 1.5, "sampled": 1.25}  # whole step, label embedding / cross-entropy
SRC_LEN = TGT_LEN = 32


class FeaturesModel(torch.nn.Module):
    """Stands in for a decoder that returns fixed features h: the criteria see only h and the output layer."""

    def __init__(self, layer, features, target):
        super().__init__()
        self.decoder = SimpleNamespace(output_projection=layer)
        self.layer = layer
        self.features = features
        self.target = target

    def forward(self, features_only=True, **kwargs):
        return self.features, None

    def get_targets(self, sample, net_output):
        return self.target


def make_batch(dictionary, tokens: int, src_len: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    vocab = len(dictionary)
    probs = 1.0 / torch.arange(1, vocab - dictionary.nspecial + 1, dtype=torch.float64)  # Zipf-like targets
    bsz = max(1, tokens // TGT_LEN)
    draw = lambda n: torch.multinomial(probs, n, replacement=True, generator=g) + dictionary.nspecial  # noqa: E731
    target = draw(bsz * TGT_LEN).view(bsz, TGT_LEN)
    prev = torch.cat([torch.full((bsz, 1), dictionary.eos()), target[:, :-1]], 1)
    src = draw(bsz * src_len).view(bsz, src_len)
    return {
        "net_input": {"src_tokens": src, "src_lengths": torch.full((bsz,), src_len), "prev_output_tokens": prev},
        "target": target, "ntokens": target.numel(), "nsentences": bsz,
    }


def keep_freed_memory() -> bool:
    """Ask glibc to serve every allocation from the heap and keep freed memory there (no mmap/munmap per
    T x |V| tensor): on this VM each fresh page costs a fault to the host, which would time the allocator
    instead of the criteria. The same for every case; returns whether glibc accepted."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(-4, 0)) and bool(libc.mallopt(-1, 2**31 - 1))  # M_MMAP_MAX = 0, M_TRIM_THRESHOLD


def model_flags(cfg) -> List[str]:
    return ["--arch", "joint_transformer", "--output-layer", "joint", "--joint-dim", str(cfg.joint_dim),
            "--encoder-layers", str(cfg.layers), "--decoder-layers", str(cfg.layers),
            "--encoder-embed-dim", str(cfg.dim), "--decoder-embed-dim", str(cfg.dim),
            "--encoder-ffn-embed-dim", str(2 * cfg.dim), "--decoder-ffn-embed-dim", str(2 * cfg.dim),
            "--encoder-attention-heads", "4", "--decoder-attention-heads", "4", "--dropout", "0.1"]


def run_case(cfg, case: Sequence[str]) -> List[float]:
    """One case (level, rate, criterion) in this fresh process: build, warm up, time ``--repeats`` steps."""
    from fairseq import options

    import fairseq_joint  # noqa: F401  (registers the models and criteria)
    from fairseq_joint.loaders import translation_task

    level, rate, crit_name = case
    keep_freed_memory()
    rate_flags = [] if rate == "full" else ["--sample-rate", str(cfg.sample_rate)]
    args = options.parse_args_and_arch(options.get_training_parser(),
                                       ["/nonexistent-data-dir", *model_flags(cfg), *CRITERIA[crit_name], *rate_flags])
    task = translation_task(cfg.vocab, cfg.vocab)
    torch.manual_seed(0)
    model = task.build_model(args)
    criterion = task.build_criterion(args)
    model.train()
    criterion.train()
    sample = make_batch(task.target_dictionary, cfg.tokens, SRC_LEN, seed=1)
    if level == "output layer + loss":
        g = torch.Generator().manual_seed(2)
        h = torch.randn(sample["target"].size(0), sample["target"].size(1), cfg.dim, generator=g).requires_grad_()
        feats = FeaturesModel(model.decoder.output_projection, h, sample["target"])
        feats.train()
        params = list(model.decoder.output_projection.parameters()) + [model.decoder.embed_tokens.weight]
        params += list(criterion.parameters()) + [h]

        def step():
            for q in params:
                q.grad = None
            loss, _, _ = criterion(feats, sample)
            loss.backward()
    else:
        params = [q for q in list(model.parameters()) + list(criterion.parameters()) if q.requires_grad]
        opt = torch.optim.Adam(params, lr=1e-4)

        def step():
            opt.zero_grad(set_to_none=True)
            loss, _, _ = criterion(model, sample)
            loss.backward()
            opt.step()

    step()  # warm-up (Adam state, allocator)
    times = []
    for _ in range(cfg.repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return times


def rate_names(sample_rate: float) -> Dict[str, str]:
    """The two scoring settings: ``full`` and the sampled one, named by its percentage."""
    return {"full": "full", "sampled": f"{round(100 * sample_rate)}%"}


def case_name(case: Tuple[str, str, str]) -> str:
    return " | ".join(case)


def ratio_rows(times: Dict[Tuple[str, str, str], Timing], tokens: int) -> List[Dict[str, object]]:
    """Rows (level, rate, criterion): median ms/step, tokens/s and the ratio to cross-entropy at the same level
    and rate (of the medians)."""
    rows = [{"level": level, "rate": rate, "criterion": crit, **t.fields(), "tokens_per_s": tokens / t.median}
            for (level, rate, crit), t in times.items()]
    base = {(r["level"], r["rate"]): r["seconds_median"] for r in rows if r["criterion"] == "cross_entropy"}
    for row in rows:
        row["ratio"] = row["seconds_median"] / base[(row["level"], row["rate"])]
    return rows


def run(args) -> Dict[str, object]:
    names = rate_names(args.sample_rate)
    cases = [(level, rate, crit) for rate in names.values() for crit in CRITERIA for level in LEVELS]
    runs = fresh_process_rounds(__file__, {case_name(c): list(c) for c in cases}, run_config(args), args.rounds,
                                "label embedding")
    times = {c: Timing(tuple(t for steps in runs[case_name(c)] for t in steps)) for c in cases}
    rows = ratio_rows(times, args.tokens)
    targets = []
    for key, limit in TARGETS.items():
        ratio = next(r["ratio"] for r in rows if r["level"] == "whole step" and r["rate"] == names[key]
                     and r["criterion"] == "label_embedding")
        targets.append(target(f"whole step, {names[key]}, label embedding / cross-entropy", ratio, limit,
                              higher_is_better=False))
    return {"rows": rows, "targets": targets}


def report(result: Dict[str, object]) -> None:
    cfg = result["config"]
    print(f"\nLabel Embedding Network loss vs cross-entropy, |V|={cfg['vocab']}, {cfg['tokens']} tokens, "
          f"joint dj={cfg['joint_dim']}, {cfg['layers']}+{cfg['layers']} layers, label embedding compressed h=100; "
          f"median (min-max) of {cfg['rounds']} x {cfg['repeats']} steps")
    print_table([("level", "<22", lambda r: r["level"]), ("scored", ">8", lambda r: r["rate"]), "  ",
                 ("criterion", "<18", lambda r: r["criterion"]),
                 ("ms/step (min-max)", ">26", lambda r: Timing.of(r).show(1000, ".1f")),
                 ("tokens/s", ">10", lambda r: f"{r['tokens_per_s']:.0f}"),
                 ("ratio", ">8", lambda r: f"{r['ratio']:.2f}x")], result["rows"])


def plot(result: Dict[str, object], path: str) -> None:
    rows = result["rows"]
    cfg = result["config"]
    spread_chart(path, [f"{r['level']}, {r['rate']}, {r['criterion']}" for r in rows], [Timing.of(r) for r in rows],
                 lambda s: 1000 * s, "ms per step (median, min-max)",
                 f"label embedding loss vs cross-entropy, |V|={cfg['vocab']}, {cfg['tokens']} tokens", figsize=(9, 4.5),
                 color=["C0" if r["criterion"] == "cross_entropy" else "C1" for r in rows])


QUICK = dict(vocab=2048, tokens=128, dim=32, joint_dim=32, layers=1, repeats=1, rounds=1)


def parse(argv=None):
    p = parser(__doc__)
    p.add_argument("--vocab", type=int, default=32768, help="|V|")
    p.add_argument("--tokens", type=int, default=1024, help="target tokens per step")
    p.add_argument("--dim", type=int, default=512, help="model and embedding dimension (d = dh)")
    p.add_argument("--joint-dim", type=int, default=512, help="dj of the joint output layer")
    p.add_argument("--layers", type=int, default=6,
                   help="encoder and decoder layers of the whole-step model (6: the shape of transformer_iwslt_de_en)")
    p.add_argument("--sample-rate", type=float, default=0.25, help="the sampled case")
    p.add_argument("--repeats", type=int, default=3, help="timed steps per case and round (after one warm-up step)")
    p.add_argument("--rounds", type=int, default=2, help="rounds over all cases, each case in a fresh process")
    return parse_args(p, argv, QUICK, positive=("vocab", "tokens", "dim", "joint_dim", "layers", "sample_rate",
                                                 "repeats", "rounds"),
                      check=lambda a: "--sample-rate must be below 1" if a.sample_rate >= 1 else
                      f"--tokens {a.tokens}: a batch is of whole sentences of {TGT_LEN} target tokens (tokens/s counts "
                      f"them): give a multiple of {TGT_LEN}" if a.tokens % TGT_LEN else None)


if __name__ == "__main__":
    run_benchmark(parse(), run, report, plot, child=run_case)
