#!/usr/bin/env python
"""Speed of every output layer of Pappas et al. 2018 against weight tying and against the GEMM limit (issue #2).

Two measurements, each side by side in one run (round-robin repetitions, medians after warm-up, so that
background load on a shared machine hits every contender alike):

1. **Training step**: forward + backward of output layer + cross-entropy, at |V| = 32K, 4096 target
   tokens, d = dh = 512, for ``softmax`` (Eq. 3), ``tied`` (Eq. 4), ``bilinear`` (Eq. 6), ``label``
   (Eq. 7a), ``context`` (Eq. 7b) and ``joint`` (Eqs. 12-15) at dj ∈ {512, 2048, 4096}. Each layer is
   an :class:`~fairseq_joint.modules.output_layers.OutputLayer` preset. Its time is printed as a ratio to
   ``tied`` and its GFLOP/s as a fraction of the *GEMM limit*: the time a plain ``torch.mm`` chain of the
   same GEMMs takes (each forward GEMM ``A Bᵀ`` and its two backward GEMMs ``G B`` and ``Gᵀ A``, timed at
   the same shapes in the same rounds).
2. **Beam search** (fairseq's ``SequenceGenerator``, beam 5, a fixed number of steps) of a small random
   ``joint_transformer`` with ``--output-layer joint`` vs ``tied`` at |V| = 32K, in sentences/s, and
   ``joint`` with its eval-mode cache of σ(E U + b_u) disabled, to show what the cache buys.

Targets (issue #2): ``joint`` dj=512 step ≥ 0.85× ``tied`` (FLOP limit ≈ 0.88×); every layer ≥ 70% of its
GEMM limit; ``joint`` decoding ≥ 0.95× ``tied``. Each is printed PASS/FAIL.

Initialization is realistic, as in a fairseq model: E ~ N(0, d^-1/2) (fairseq's ``Embedding``), the
output-layer weights by ``OutputLayer``'s ``fairseq`` init (N(0, fan_in^-1/2)), and decoder features h ~
N(0, 1) (what a LayerNorm'd decoder emits), so logits have unit variance. Unit-variance E would drive the
softmax into denormal floats and make the backward GEMMs ~20x slower; the script reports the fraction of
subnormal probabilities per layer to show it measures the normal regime.

Usage::

    python scripts/benchmark_output_layers.py [--json results.json] [--plot results.png]
    python scripts/benchmark_output_layers.py --quick          # tiny configuration, a few seconds
"""

import argparse
import gc
import json
import logging
import os
import statistics
import sys
import time
from typing import Callable, Dict, List, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger("benchmark_output_layers")

# ---------------------------------------------------------------------------------------------- targets
TARGET_JOINT_VS_TIED = 0.85  # joint dj=512 training step, speed relative to tied
TARGET_GEMM_FRACTION = 0.70  # every layer's GFLOP/s relative to its plain torch.mm chain
TARGET_DECODING = 0.95  # joint beam-search sentences/s relative to tied

PRESETS = ("softmax", "tied", "bilinear", "label", "context")

Gemm = Tuple[int, int, int]  # (M, K, N): an (M x K) matrix times the transpose of an (N x K) one


# ---------------------------------------------------------------------------------------------- timing
def round_robin(cases: Dict[str, Callable[[], None]], rounds: int, warmup: int, what: str) -> Dict[str, List[float]]:
    """Run every case once per round, rotating the order each round; return the timed seconds per case.

    The first ``warmup`` rounds are run but not kept. Rotating the order means no case always follows the
    same neighbour (whose freed memory or cache state it would inherit).
    """
    names = list(cases)
    times: Dict[str, List[float]] = {n: [] for n in names}
    for r in range(warmup + rounds):
        shift = r % len(names)
        order = names[shift:] + names[:shift]
        line = []
        gc.collect()  # not inside the timed loop's neighbourhood: once per round
        for name in order:
            t0 = time.perf_counter()
            cases[name]()
            dt = time.perf_counter() - t0
            if r >= warmup:
                times[name].append(dt)
            line.append(f"{name} {dt:.3f}s")
        label = "warm-up" if r < warmup else f"round {r - warmup + 1}/{rounds}"
        logger.info("%s %s: %s", what, label, ", ".join(line))
    return times


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


# ---------------------------------------------------------------------------------------------- training step
def layer_gemms(layer, tokens: int) -> List[Gemm]:
    """The forward GEMMs of ``layer`` (an OutputLayer) scoring all |V| classes for ``tokens`` features.

    Class side g_out (Eq. 7a / 12): E (|V| x d) times Uᵀ (d x k); context side g_ctx (Eq. 6 / 7b / 13):
    h (T x dh) times Vᵀ (dh x k); logits (Eq. 14): g_ctx(h) (T x k) times g_out(E)ᵀ (k x |V|).
    """
    v, d, dh, k = layer.num_classes, layer.class_dim, layer.input_dim, layer.joint_dim
    gemms = []
    if layer.projects_classes:
        gemms.append((v, d, k))
    if layer.projects_context:
        gemms.append((tokens, dh, k))
    gemms.append((tokens, k, v))
    return gemms


def train_flops(gemms: Sequence[Gemm]) -> int:
    """Forward + backward FLOPs: each forward GEMM (2·M·K·N) has two backward GEMMs of the same size."""
    return sum(3 * 2 * m * k * n for m, k, n in gemms)


class TrainStep:
    """One output layer + cross-entropy, forward and backward, on fixed random features and targets."""

    def __init__(self, preset: str, vocab: int, tokens: int, dim: int, joint_dim: int, seed: int):
        from fairseq_joint.modules.output_layers import OutputLayer

        g = torch.Generator().manual_seed(seed)
        self.embedding = None
        if preset != "softmax":
            self.embedding = nn.Embedding(vocab, dim)
            with torch.no_grad():  # fairseq's Embedding: N(0, d^-1/2)
                self.embedding.weight.normal_(0.0, dim ** -0.5, generator=g)
        torch.manual_seed(seed)
        self.layer = OutputLayer(preset, vocab, dim, embedding=self.embedding, joint_dim=joint_dim)
        self.layer.train()
        # decoder features after a LayerNorm: unit variance; they receive gradients as in a model
        self.features = torch.randn(tokens, dim, generator=g).requires_grad_()
        self.target = torch.randint(vocab, (tokens,), generator=g)
        self.gemms = layer_gemms(self.layer, tokens)

    def parameters(self):
        params = list(self.layer.parameters()) + [self.features]
        if self.embedding is not None:
            params.append(self.embedding.weight)
        return params

    def __call__(self) -> None:
        for p in self.parameters():
            p.grad = None
        logits = self.layer(self.features)
        F.cross_entropy(logits, self.target, reduction="sum").backward()

    @torch.no_grad()
    def subnormal_fraction(self, rows: int = 256) -> float:
        """Fraction of the softmax probabilities (first ``rows`` tokens) that are subnormal floats."""
        p = torch.softmax(self.layer(self.features[:rows]), dim=-1)
        tiny = torch.finfo(p.dtype).tiny
        return ((p != 0) & (p.abs() < tiny)).double().mean().item()


class GemmChain:
    """A plain ``torch.mm`` chain of the GEMMs autograd runs for one forward GEMM ``A Bᵀ``:
    forward ``A Bᵀ`` (M x N), ``G B`` (M x K, grad of A) and ``Gᵀ A`` (N x K, grad of B)."""

    def __init__(self, gemm: Gemm, seed: int, grads: Dict[Tuple[int, int], torch.Tensor]):
        m, k, n = gemm
        g = torch.Generator().manual_seed(seed)
        self.a = torch.randn(m, k, generator=g)
        self.b = torch.randn(n, k, generator=g) * k ** -0.5
        key = (m, n)  # the (M x N) output gradient is shared by chains of the same output shape
        if key not in grads:
            grads[key] = torch.randn(m, n, generator=g) * (m * n) ** -0.5
        self.g = grads[key]
        self.flops = train_flops([gemm])

    def __call__(self) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return torch.mm(self.a, self.b.t()), torch.mm(self.g, self.b), torch.mm(self.g.t(), self.a)


def layer_names(joint_dims: Sequence[int]) -> List[Tuple[str, str, int]]:
    """(name, preset, dj) of every layer benchmarked; only ``joint`` has a free joint dimension dj."""
    return [(p, p, 0) for p in PRESETS] + [(f"joint-{dj}", "joint", dj) for dj in joint_dims]


def benchmark_training(args) -> Dict[str, object]:
    from fairseq_joint.modules.output_layers import PAPER_EQUATION

    steps: Dict[str, TrainStep] = {}
    for name, preset, dj in layer_names(args.joint_dims):
        steps[name] = TrainStep(preset, args.vocab, args.tokens, args.dim, dj or args.dim, args.seed)
    shapes = sorted({gm for s in steps.values() for gm in s.gemms})
    grads: Dict[Tuple[int, int], torch.Tensor] = {}
    chains = {gm: GemmChain(gm, args.seed, grads) for gm in shapes}
    cases: Dict[str, Callable[[], None]] = dict(steps)
    cases.update({f"mm{m}x{k}x{n}": c for (m, k, n), c in chains.items()})
    logger.info("training step: %d layers and %d GEMM chains, %d warm-up + %d timed rounds",
                len(steps), len(chains), args.warmup, args.repeats)
    times = round_robin(cases, args.repeats, args.warmup, "train")

    gemm_rows = []
    mm_seconds: Dict[Gemm, float] = {}
    for gm, chain in chains.items():
        sec = median(times[f"mm{gm[0]}x{gm[1]}x{gm[2]}"])
        mm_seconds[gm] = sec
        gemm_rows.append({"shape_mkn": list(gm), "flops": chain.flops, "seconds_median": sec,
                          "seconds_all": times[f"mm{gm[0]}x{gm[1]}x{gm[2]}"],
                          "gflops_per_s": chain.flops / sec / 1e9})

    layers: Dict[str, Dict[str, object]] = {}
    for name, preset, dj in layer_names(args.joint_dims):
        step = steps[name]
        sec = median(times[name])
        flops = train_flops(step.gemms)
        limit = sum(mm_seconds[gm] for gm in step.gemms)
        layers[name] = {
            "preset": preset,
            "equation": PAPER_EQUATION[preset],
            "joint_dim": dj or None,
            "gemms_mkn": [list(gm) for gm in step.gemms],
            "train_flops": flops,
            "seconds_median": sec,
            "seconds_all": times[name],
            "gflops_per_s": flops / sec / 1e9,
            "gemm_limit_seconds": limit,
            "gemm_limit_gflops_per_s": flops / limit / 1e9,
            "gemm_fraction": limit / sec,
            "subnormal_fraction": step.subnormal_fraction(),
        }
    tied = layers["tied"]
    for row in layers.values():
        row["speed_vs_tied"] = tied["seconds_median"] / row["seconds_median"]
        row["flop_limit_vs_tied"] = tied["train_flops"] / row["train_flops"]
        row["gemm_limit_vs_tied"] = tied["gemm_limit_seconds"] / row["gemm_limit_seconds"]
    del steps, chains, cases, grads
    gc.collect()
    return {"gemms": gemm_rows, "layers": layers}


# ---------------------------------------------------------------------------------------------- beam search
def decoding_model(kind: str, args):
    """A random ``joint_transformer`` with a fake |V|-symbol dictionary (built by count_params' helper)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from count_params import model_from_config

    d = args.dec_dim
    flags = [
        "--arch", "joint_transformer", "--output-layer", kind, "--joint-dim", str(args.dec_joint_dim),
        "--encoder-layers", str(args.dec_layers), "--decoder-layers", str(args.dec_layers),
        "--encoder-embed-dim", str(d), "--decoder-embed-dim", str(d),
        "--encoder-ffn-embed-dim", str(4 * d), "--decoder-ffn-embed-dim", str(4 * d),
        "--encoder-attention-heads", str(max(1, d // 64)), "--decoder-attention-heads", str(max(1, d // 64)),
        "--dropout", "0.0",
    ]
    torch.manual_seed(args.seed)
    model = model_from_config(flags, args.vocab, args.vocab)
    model.eval()
    return model


def benchmark_decoding(args) -> Dict[str, object]:
    from fairseq.sequence_generator import SequenceGenerator

    g = torch.Generator().manual_seed(args.seed)
    models = {"tied": decoding_model("tied", args), "joint": decoding_model("joint", args)}
    tgt_dict = models["tied"].decoder.dictionary
    src = torch.randint(tgt_dict.nspecial, args.vocab, (args.dec_batch, args.dec_src_len), generator=g)
    src = torch.cat([src, torch.full((args.dec_batch, 1), tgt_dict.eos())], dim=1)
    sample = {"net_input": {"src_tokens": src, "src_lengths": torch.full((args.dec_batch,), src.size(1))}}
    # min_len = max length: every hypothesis runs exactly dec_steps steps, whatever the random model scores
    generators = {
        name: SequenceGenerator([m], tgt_dict, beam_size=args.beam, max_len_a=0, max_len_b=args.dec_steps,
                                min_len=args.dec_steps)
        for name, m in models.items()
    }
    joint_layer = models["joint"].decoder.output_projection
    outputs: Dict[str, List[List[int]]] = {}

    def run(name: str, cache: bool) -> Callable[[], None]:
        def decode() -> None:
            if not cache:  # this instance recomputes σ(E U + b_u) at every step
                joint_layer.use_eval_cache = False
            try:
                hyps = generators[name].generate([models[name]], sample)
            finally:
                joint_layer.use_eval_cache = True
            outputs[name if cache else "joint_no_cache"] = [h[0]["tokens"].tolist() for h in hyps]
        return decode

    cases = {"tied": run("tied", True), "joint": run("joint", True), "joint_no_cache": run("joint", False)}
    logger.info("beam search: batch %d, beam %d, %d steps, |V|=%d, d=%d, %d layers; %d warm-up + %d timed rounds",
                args.dec_batch, args.beam, args.dec_steps, args.vocab, args.dec_dim, args.dec_layers,
                args.warmup, args.repeats)
    # the one-time cost of filling the cache (σ(E U + b_u) for all |V| classes), outside the timed rounds
    with torch.no_grad():
        joint_layer._invalidate_cache()
        t0 = time.perf_counter()
        joint_layer.class_side()
        cache_fill = time.perf_counter() - t0
    times = round_robin(cases, args.repeats, args.warmup, "decode")
    rows = {}
    for name, ts in times.items():
        sec = median(ts)
        rows[name] = {"seconds_median": sec, "seconds_all": ts, "sentences_per_s": args.dec_batch / sec}
    out = {
        "beam": args.beam, "steps": args.dec_steps, "batch": args.dec_batch, "src_len": args.dec_src_len,
        "vocab": args.vocab, "dim": args.dec_dim, "joint_dim": args.dec_joint_dim, "layers": args.dec_layers,
        "models": rows,
        "joint_vs_tied": rows["joint"]["sentences_per_s"] / rows["tied"]["sentences_per_s"],
        "joint_no_cache_vs_tied": rows["joint_no_cache"]["sentences_per_s"] / rows["tied"]["sentences_per_s"],
        "cache_fill_seconds": cache_fill,
        # the cache must not change what is decoded
        "cache_same_hypotheses": outputs["joint"] == outputs["joint_no_cache"],
    }
    return out


# ---------------------------------------------------------------------------------------------- report
def evaluate_targets(result: Dict[str, object]) -> List[Dict[str, object]]:
    layers = result["training"]["layers"]
    first_joint = next(n for n in layers if n.startswith("joint-"))
    targets = [{
        "target": f"{first_joint} training step vs tied",
        "value": layers[first_joint]["speed_vs_tied"], "threshold": TARGET_JOINT_VS_TIED,
    }]
    for name, row in layers.items():
        targets.append({"target": f"{name} GFLOP/s vs its GEMM limit", "value": row["gemm_fraction"],
                        "threshold": TARGET_GEMM_FRACTION})
    if "decoding" in result:
        targets.append({"target": "joint beam search sentences/s vs tied",
                        "value": result["decoding"]["joint_vs_tied"], "threshold": TARGET_DECODING})
    for t in targets:
        t["pass"] = bool(t["value"] >= t["threshold"])
    return targets


def print_report(result: Dict[str, object]) -> None:
    cfg = result["config"]
    tr = result["training"]
    print(f"\nOutput layer + cross-entropy, forward+backward: |V|={cfg['vocab']} T={cfg['tokens']} "
          f"d=dh={cfg['dim']}, {cfg['threads']} threads, median of {cfg['repeats']} after {cfg['warmup']} warm-up")
    print("plain torch.mm chains (forward A·Bᵀ + backward G·B, Gᵀ·A):")
    for g in tr["gemms"]:
        m, k, n = g["shape_mkn"]
        print(f"  M={m:<6d} K={k:<5d} N={n:<6d} {g['seconds_median']:8.3f} s  {g['gflops_per_s']:7.1f} GFLOP/s")
    hdr = (f"{'layer':<11} {'eq.':<10} {'GFLOP':>7} {'time s':>8} {'vs tied':>8} {'FLOP lim':>8} "
           f"{'GFLOP/s':>8} {'mm GF/s':>8} {'of mm':>6} {'subnorm':>8}")
    print(hdr)
    print("-" * len(hdr))
    for name, r in tr["layers"].items():
        print(f"{name:<11} {r['equation']:<10} {r['train_flops'] / 1e9:7.1f} {r['seconds_median']:8.3f} "
              f"{r['speed_vs_tied']:7.2f}x {r['flop_limit_vs_tied']:7.2f}x {r['gflops_per_s']:8.1f} "
              f"{r['gemm_limit_gflops_per_s']:8.1f} {r['gemm_fraction']:5.0%} {r['subnormal_fraction']:8.1e}")
    print("(vs tied: speed t_tied/t; FLOP lim: FLOPs_tied/FLOPs; of mm: GEMM-limit time / time)")
    if "decoding" in result:
        dc = result["decoding"]
        print(f"\nBeam search (SequenceGenerator, beam {dc['beam']}, {dc['steps']} steps, batch {dc['batch']}, "
              f"joint_transformer |V|={dc['vocab']} d={dc['dim']} dj={dc['joint_dim']} layers={dc['layers']}):")
        tied = dc["models"]["tied"]["sentences_per_s"]
        for name, r in dc["models"].items():
            print(f"  {name:<15} {r['seconds_median']:8.3f} s  {r['sentences_per_s']:8.2f} sentences/s  "
                  f"{r['sentences_per_s'] / tied:5.2f}x tied")
        print(f"  one-time cache fill σ(E U + b_u): {dc['cache_fill_seconds']:.3f} s; "
              f"cached and uncached joint decode the same hypotheses: {dc['cache_same_hypotheses']}")
    print("\nTargets (issue #2)" + (" -- quick configuration: not meaningful at these sizes" if cfg["quick"] else ""))
    for t in result["targets"]:
        print(f"  {'PASS' if t['pass'] else 'FAIL'}  {t['target']}: {t['value']:.3f} (target >= {t['threshold']})")


def plot(result: Dict[str, object], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = result["training"]["layers"]
    names = list(layers)
    fig, axes = plt.subplots(1, 2 if "decoding" in result else 1, figsize=(12, 4.5), squeeze=False)
    ax = axes[0][0]
    y = range(len(names))
    ax.barh([i + 0.2 for i in y], [layers[n]["seconds_median"] for n in names], height=0.4, label="output layer + CE")
    ax.barh([i - 0.2 for i in y], [layers[n]["gemm_limit_seconds"] for n in names], height=0.4,
            label="plain torch.mm chain (GEMM limit)")
    ax.set_yticks(list(y), names)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per forward+backward (median)")
    cfg = result["config"]
    ax.set_title(f"training step, |V|={cfg['vocab']} T={cfg['tokens']} d=dh={cfg['dim']}")
    ax.legend(loc="lower right")
    if "decoding" in result:
        dc = result["decoding"]
        ax = axes[0][1]
        models = list(dc["models"])
        ax.bar(models, [dc["models"][m]["sentences_per_s"] for m in models], color=["C0", "C1", "C3"])
        ax.set_ylabel("sentences / s")
        ax.set_title(f"beam search (beam {dc['beam']}, {dc['steps']} steps)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------- CLI
QUICK = dict(vocab=2048, tokens=256, dim=64, joint_dims=[64, 256], repeats=3, warmup=1,
             dec_dim=64, dec_joint_dim=64, dec_layers=1, dec_batch=4, dec_steps=5, dec_src_len=8)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--vocab", type=int, default=32768, help="|V|, the number of classes")
    p.add_argument("--tokens", type=int, default=4096, help="T, target tokens per training step")
    p.add_argument("--dim", type=int, default=512, help="d = dh, embedding and decoder-output size")
    p.add_argument("--joint-dims", type=int, nargs="+", default=[512, 2048, 4096],
                   help="dj values of the joint layer; the first is the one held to the vs-tied target")
    p.add_argument("--repeats", type=int, default=3, help="timed round-robin rounds (the median is reported)")
    p.add_argument("--warmup", type=int, default=1, help="untimed round-robin rounds before the timed ones")
    p.add_argument("--beam", type=int, default=5, help="beam size of the decoding benchmark")
    p.add_argument("--dec-steps", type=int, default=20, help="decoding steps (every hypothesis runs all of them)")
    p.add_argument("--dec-batch", type=int, default=16, help="source sentences per beam-search batch")
    p.add_argument("--dec-src-len", type=int, default=20, help="source length (tokens, before EOS)")
    p.add_argument("--dec-dim", type=int, default=512, help="embedding/model size of the decoding model")
    p.add_argument("--dec-joint-dim", type=int, default=512, help="dj of the decoding joint model")
    p.add_argument("--dec-layers", type=int, default=2, help="encoder and decoder layers of the decoding model")
    p.add_argument("--no-decoding", action="store_true", help="skip the beam-search benchmark")
    p.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch intra-op threads")
    p.add_argument("--seed", type=int, default=1, help="random seed of weights, features and targets")
    p.add_argument("--quick", action="store_true",
                   help="tiny configuration (|V|=2048, T=256, d=64, ...) for a smoke test; explicit size flags still win")
    p.add_argument("--json", metavar="FILE", help="write all figures to FILE as JSON")
    p.add_argument("--plot", metavar="FILE", help="write a PNG bar chart of the figures to FILE")
    args = p.parse_args(argv)
    if args.quick:  # the tiny sizes replace the defaults; flags given explicitly still win
        p.set_defaults(**QUICK)
        args = p.parse_args(argv)
    for flag in ("vocab", "tokens", "dim", "repeats", "beam", "dec_steps", "dec_batch", "dec_src_len", "dec_dim",
                 "dec_joint_dim", "dec_layers", "threads"):
        if getattr(args, flag) <= 0:
            p.error(f"--{flag.replace('_', '-')} must be a positive integer, got {getattr(args, flag)}")
    if args.warmup < 0:
        p.error(f"--warmup must be >= 0, got {args.warmup}")
    if any(dj <= 0 for dj in args.joint_dims):
        p.error(f"--joint-dims must be positive integers, got {args.joint_dims}")
    if args.beam >= args.vocab:
        p.error(f"--beam {args.beam} must be smaller than --vocab {args.vocab}")
    return args


def main(argv=None) -> Dict[str, object]:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        stream=sys.stderr)
    torch.set_num_threads(args.threads)
    import fairseq_joint  # noqa: F401  (registers joint_transformer)

    t0 = time.perf_counter()
    result: Dict[str, object] = {
        "config": {
            "vocab": args.vocab, "tokens": args.tokens, "dim": args.dim, "joint_dims": args.joint_dims,
            "repeats": args.repeats, "warmup": args.warmup, "threads": args.threads, "seed": args.seed,
            "quick": args.quick, "torch": torch.__version__,
        }
    }
    with torch.random.fork_rng():
        result["training"] = benchmark_training(args)
        if not args.no_decoding:
            result["decoding"] = benchmark_decoding(args)
    result["targets"] = evaluate_targets(result)
    result["wall_seconds"] = time.perf_counter() - t0
    print_report(result)
    print(f"\nwall time {result['wall_seconds']:.0f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
        logger.info("wrote %s", args.json)
    if args.plot:
        plot(result, args.plot)
        logger.info("wrote %s", args.plot)
    return result


if __name__ == "__main__":
    main()
