#!/usr/bin/env python
"""Speed of every output layer of Pappas et al. 2018 against weight tying and against the GEMM limit.

Two measurements, each side by side in one run (the harness's round-robin rounds: medians and their spread after
warm-up, so that background load on a shared machine hits every contender alike):

1. **Training step**: forward + backward of output layer + cross-entropy, at |V| = 32K, 4096 target
   tokens, d = dh = 512, for ``softmax`` (Eq. 3), ``tied`` (Eq. 4), ``bilinear`` (Eq. 6), ``label``
   (Eq. 7a), ``context`` (Eq. 7b) and ``joint`` (Eqs. 12-15) at dj ∈ {512, 2048, 4096}. Each layer is
   an :class:`~fairseq_joint.modules.output_layers.OutputLayer` preset. Its time is printed as a ratio to
   ``tied`` and its GFLOP/s as a fraction of the *GEMM limit*: the time a plain ``torch.mm`` chain of the
   same GEMMs takes (each forward GEMM ``A Bᵀ`` and its two backward GEMMs ``G B`` and ``Gᵀ A``, timed at
   the same shapes in the same rounds).
2. **Beam search** (fairseq's ``SequenceGenerator``, beam 5, a fixed number of steps) of a small random
   ``joint_transformer`` with ``--output-layer joint`` vs ``tied`` at |V| = 32K, in sentences/s, and
   ``joint`` with its eval-mode cache of σ(E U + b_u) switched off (``use_eval_cache``), to show what it buys.

Targets: ``joint`` dj=512 step ≥ 0.85× ``tied`` (FLOP limit ≈ 0.88×); every layer ≥ 70% of its GEMM limit;
``joint`` decoding ≥ 0.95× ``tied``. Each is printed PASS/FAIL.

Initialization is realistic, as in a fairseq model: E ~ N(0, d^-1/2) (fairseq's ``Embedding``), the
output-layer weights by ``OutputLayer``'s ``fairseq`` init (N(0, fan_in^-1/2)), and decoder features h ~
N(0, 1) (what a LayerNorm'd decoder emits), so logits have unit variance. Unit-variance E would drive the
softmax into denormal floats and make the backward GEMMs ~20x slower; the script reports the fraction of
subnormal probabilities per layer to show it measures the normal regime.

Usage::

    python benchmarks/bench_output_layers.py [--json results.json] [--plot results.png]
    python benchmarks/bench_output_layers.py --quick          # tiny configuration, a few seconds
"""

import gc
import logging
import time
from typing import Callable, Dict, List, NamedTuple, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from bench_harness import Timing, add_rounds, bars_with_spread, parse_args, parser, round_robin, rounds_note, target
from bench_harness import main as run_benchmark

from fairseq_joint.modules.output_layers import PAPER_EQUATION, OutputLayer, OutputLayerSpec

logger = logging.getLogger("bench_output_layers")

TARGET_JOINT_VS_TIED = 0.85  # joint dj=512 training step, speed relative to tied
TARGET_GEMM_FRACTION = 0.70  # every layer's GFLOP/s relative to its plain torch.mm chain
TARGET_DECODING = 0.95  # joint beam-search sentences/s relative to tied

PRESETS = ("softmax", "tied", "bilinear", "label", "context")

Gemm = Tuple[int, int, int]  # (M, K, N): an (M x K) matrix times the transpose of an (N x K) one


# ---------------------------------------------------------------------------------------------- FLOP accounting
def layer_gemms(layer: OutputLayer, tokens: int) -> List[Gemm]:
    """The forward GEMMs of ``layer`` scoring all |V| classes for ``tokens`` features.

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


def gemm_name(gemm: Gemm) -> str:
    """The case name of the plain torch.mm chain of ``gemm``."""
    return "mm{}x{}x{}".format(*gemm)


# ---------------------------------------------------------------------------------------------- training step
class TrainStep:
    """One output layer + cross-entropy, forward and backward, on fixed random features and targets."""

    def __init__(self, preset: str, vocab: int, tokens: int, dim: int, joint_dim: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.embedding = None
        if preset != "softmax":
            self.embedding = nn.Embedding(vocab, dim)
            with torch.no_grad():  # fairseq's Embedding: N(0, d^-1/2)
                self.embedding.weight.normal_(0.0, dim ** -0.5, generator=g)
        torch.manual_seed(seed)
        self.layer = OutputLayer(OutputLayerSpec(preset, joint_dim=joint_dim), vocab, dim, embedding=self.embedding)
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


class LayerCase(NamedTuple):
    """A benchmarked layer: its name, preset, dj (0: the preset's own k), forward GEMMs and subnormal fraction."""

    name: str
    preset: str
    joint_dim: int
    gemms: List[Gemm]
    subnormal_fraction: float


def layer_names(joint_dims: Sequence[int]) -> List[Tuple[str, str, int]]:
    """(name, preset, dj) of every layer benchmarked; only ``joint`` has a free joint dimension dj."""
    return [(p, p, 0) for p in PRESETS] + [(f"joint-{dj}", "joint", dj) for dj in joint_dims]


def training_figures(layers: Sequence[LayerCase], times: Dict[str, Timing]) -> Dict[str, object]:
    """The training-step figures from the timings of every layer and of every GEMM chain (named by gemm_name)."""
    gemm_rows = []
    mm_seconds: Dict[Gemm, float] = {}
    for gm in sorted({gm for case in layers for gm in case.gemms}):
        t = times[gemm_name(gm)]
        mm_seconds[gm] = t.median
        flops = train_flops([gm])
        gemm_rows.append({"shape_mkn": list(gm), "flops": flops, **t.fields(), "gflops_per_s": flops / t.median / 1e9})
    rows: Dict[str, Dict[str, object]] = {}
    for case in layers:
        t = times[case.name]
        flops = train_flops(case.gemms)
        limit = sum(mm_seconds[gm] for gm in case.gemms)
        rows[case.name] = {
            "preset": case.preset, "equation": PAPER_EQUATION[case.preset], "joint_dim": case.joint_dim or None,
            "gemms_mkn": [list(gm) for gm in case.gemms], "train_flops": flops, **t.fields(),
            "gflops_per_s": flops / t.median / 1e9, "gemm_limit_seconds": limit,
            "gemm_limit_gflops_per_s": flops / limit / 1e9, "gemm_fraction": limit / t.median,
            "subnormal_fraction": case.subnormal_fraction,
        }
    tied = rows["tied"]
    for row in rows.values():
        row["speed_vs_tied"] = tied["seconds_median"] / row["seconds_median"]
        row["flop_limit_vs_tied"] = tied["train_flops"] / row["train_flops"]
        row["gemm_limit_vs_tied"] = tied["gemm_limit_seconds"] / row["gemm_limit_seconds"]
    return {"gemms": gemm_rows, "layers": rows}


def benchmark_training(args) -> Dict[str, object]:
    steps = {name: TrainStep(preset, args.vocab, args.tokens, args.dim, dj or args.dim, args.seed)
             for name, preset, dj in layer_names(args.joint_dims)}
    shapes = sorted({gm for s in steps.values() for gm in s.gemms})
    grads: Dict[Tuple[int, int], torch.Tensor] = {}
    cases: Dict[str, Callable[[], object]] = dict(steps)
    cases.update({gemm_name(gm): GemmChain(gm, args.seed, grads) for gm in shapes})
    logger.info("training step: %d layers and %d GEMM chains, %d warm-up + %d timed rounds",
                len(steps), len(shapes), args.warmup, args.repeats)
    times = round_robin(cases, args.repeats, args.warmup, "train")
    layers = [LayerCase(name, preset, dj, steps[name].gemms, steps[name].subnormal_fraction())
              for name, preset, dj in layer_names(args.joint_dims)]
    del steps, cases, grads
    gc.collect()
    return training_figures(layers, times)


# ---------------------------------------------------------------------------------------------- beam search
def decoding_model(kind: str, args):
    """A random ``joint_transformer`` with a fake |V|-symbol dictionary, in eval mode."""
    from fairseq_joint.loaders import model_from_flags

    d = args.dec_dim
    flags = [
        "--arch", "joint_transformer", "--output-layer", kind,
        *(["--joint-dim", str(args.dec_joint_dim)] if kind == "joint" else []),  # dj of the joint layer alone
        "--encoder-layers", str(args.dec_layers), "--decoder-layers", str(args.dec_layers),
        "--encoder-embed-dim", str(d), "--decoder-embed-dim", str(d),
        "--encoder-ffn-embed-dim", str(4 * d), "--decoder-ffn-embed-dim", str(4 * d),
        "--encoder-attention-heads", str(max(1, d // 64)), "--decoder-attention-heads", str(max(1, d // 64)),
        "--dropout", "0.0",
    ]
    torch.manual_seed(args.seed)
    return model_from_flags(flags, args.vocab, args.vocab).eval()


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
            joint_layer.use_eval_cache = cache  # without it, σ(E U + b_u) is recomputed at every step
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
    # the one-time cost of filling the cache: σ(E U + b_u) for all |V| classes, outside the timed rounds
    with torch.no_grad():
        joint_layer.use_eval_cache = False
        t0 = time.perf_counter()
        joint_layer.class_side()
        cache_fill = time.perf_counter() - t0
        joint_layer.use_eval_cache = True
    times = round_robin(cases, args.repeats, args.warmup, "decode")
    rows = {name: {**t.fields(), "sentences_per_s": args.dec_batch / t.median} for name, t in times.items()}
    return {
        "beam": args.beam, "steps": args.dec_steps, "batch": args.dec_batch, "src_len": args.dec_src_len,
        "vocab": args.vocab, "dim": args.dec_dim, "joint_dim": args.dec_joint_dim, "layers": args.dec_layers,
        "models": rows,
        "joint_vs_tied": rows["joint"]["sentences_per_s"] / rows["tied"]["sentences_per_s"],
        "joint_no_cache_vs_tied": rows["joint_no_cache"]["sentences_per_s"] / rows["tied"]["sentences_per_s"],
        "cache_fill_seconds": cache_fill,
        # the cache must not change what is decoded
        "cache_same_hypotheses": outputs["joint"] == outputs["joint_no_cache"],
    }


# ---------------------------------------------------------------------------------------------- report
def evaluate_targets(result: Dict[str, object]) -> List[Dict[str, object]]:
    layers = result["training"]["layers"]
    first_joint = next(n for n in layers if n.startswith("joint-"))
    targets = [target(f"{first_joint} training step vs tied", layers[first_joint]["speed_vs_tied"],
                      TARGET_JOINT_VS_TIED)]
    targets += [target(f"{name} GFLOP/s vs its GEMM limit", row["gemm_fraction"], TARGET_GEMM_FRACTION)
                for name, row in layers.items()]
    if "decoding" in result:
        targets.append(target("joint beam search sentences/s vs tied", result["decoding"]["joint_vs_tied"],
                              TARGET_DECODING))
    return targets


def run(args) -> Dict[str, object]:
    result: Dict[str, object] = {}
    with torch.random.fork_rng():
        result["training"] = benchmark_training(args)
        if not args.no_decoding:
            result["decoding"] = benchmark_decoding(args)
    result["targets"] = evaluate_targets(result)
    return result


def report(result: Dict[str, object]) -> None:
    cfg = result["config"]
    tr = result["training"]
    print(f"\nOutput layer + cross-entropy, forward+backward: |V|={cfg['vocab']} T={cfg['tokens']} "
          f"d=dh={cfg['dim']}, {cfg['threads']} threads, {rounds_note(cfg)}")
    print("plain torch.mm chains (forward A·Bᵀ + backward G·B, Gᵀ·A):")
    for g in tr["gemms"]:
        m, k, n = g["shape_mkn"]
        print(f"  M={m:<6d} K={k:<5d} N={n:<6d} {Timing.of(g).show():>23} s  {g['gflops_per_s']:7.1f} GFLOP/s")
    hdr = (f"{'layer':<11} {'eq.':<10} {'GFLOP':>7} {'time s (min-max)':>23} {'vs tied':>8} {'FLOP lim':>8} "
           f"{'GFLOP/s':>8} {'mm GF/s':>8} {'of mm':>6} {'subnorm':>8}")
    print(hdr)
    print("-" * len(hdr))
    for name, r in tr["layers"].items():
        print(f"{name:<11} {r['equation']:<10} {r['train_flops'] / 1e9:7.1f} {Timing.of(r).show():>23} "
              f"{r['speed_vs_tied']:7.2f}x {r['flop_limit_vs_tied']:7.2f}x {r['gflops_per_s']:8.1f} "
              f"{r['gemm_limit_gflops_per_s']:8.1f} {r['gemm_fraction']:5.0%} {r['subnormal_fraction']:8.1e}")
    print("(vs tied: speed t_tied/t; FLOP lim: FLOPs_tied/FLOPs; of mm: GEMM-limit time / time; medians)")
    if "decoding" in result:
        dc = result["decoding"]
        print(f"\nBeam search (SequenceGenerator, beam {dc['beam']}, {dc['steps']} steps, batch {dc['batch']}, "
              f"joint_transformer |V|={dc['vocab']} d={dc['dim']} dj={dc['joint_dim']} layers={dc['layers']}):")
        tied = dc["models"]["tied"]["sentences_per_s"]
        for name, r in dc["models"].items():
            t = Timing.of(r)
            print(f"  {name:<15} {t.show():>23} s  {t.show_rate(dc['batch'], '.2f'):>23} sentences/s  "
                  f"{r['sentences_per_s'] / tied:5.2f}x tied")
        print(f"  one-time cache fill σ(E U + b_u): {dc['cache_fill_seconds']:.3f} s; "
              f"cached and uncached joint decode the same hypotheses: {dc['cache_same_hypotheses']}")


def plot(result: Dict[str, object], path: str) -> None:
    from fairseq_joint.plots import figure

    layers = result["training"]["layers"]
    names = list(layers)
    cfg = result["config"]
    with figure(path, 1, 2 if "decoding" in result else 1, figsize=(12, 4.5), squeeze=False) as (fig, axes):
        ax = axes[0][0]
        bars_with_spread(ax, names, [Timing.of(layers[n]) for n in names], lambda s: s, offset=0.2, height=0.4,
                         label="output layer + CE")
        ax.barh([i - 0.2 for i in range(len(names))], [layers[n]["gemm_limit_seconds"] for n in names], height=0.4,
                label="plain torch.mm chain (GEMM limit)")
        ax.set_xlabel("seconds per forward+backward (median, min-max)")
        ax.set_title(f"training step, |V|={cfg['vocab']} T={cfg['tokens']} d=dh={cfg['dim']}")
        ax.legend(loc="best")
        if "decoding" in result:
            dc = result["decoding"]
            models = list(dc["models"])
            bars_with_spread(axes[0][1], models, [Timing.of(dc["models"][m]) for m in models],
                             lambda s: dc["batch"] / s, color=["C0", "C1", "C3"])
            axes[0][1].set_xlabel("sentences / s (median, min-max)")
            axes[0][1].set_title(f"beam search (beam {dc['beam']}, {dc['steps']} steps)")


# ---------------------------------------------------------------------------------------------- CLI
QUICK = dict(vocab=2048, tokens=256, dim=64, joint_dims=[64, 256], repeats=3, warmup=1,
             dec_dim=64, dec_joint_dim=64, dec_layers=1, dec_batch=4, dec_steps=5, dec_src_len=8)


def parse(argv=None):
    p = parser(__doc__)
    p.add_argument("--vocab", type=int, default=32768, help="|V|, the number of classes")
    p.add_argument("--tokens", type=int, default=4096, help="T, target tokens per training step")
    p.add_argument("--dim", type=int, default=512, help="d = dh, embedding and decoder-output size")
    p.add_argument("--joint-dims", type=int, nargs="+", default=[512, 2048, 4096],
                   help="dj values of the joint layer; the first is the one held to the vs-tied target")
    add_rounds(p, repeats=3, warmup=1)
    p.add_argument("--beam", type=int, default=5, help="beam size of the decoding benchmark")
    p.add_argument("--dec-steps", type=int, default=20, help="decoding steps (every hypothesis runs all of them)")
    p.add_argument("--dec-batch", type=int, default=16, help="source sentences per beam-search batch")
    p.add_argument("--dec-src-len", type=int, default=20, help="source length (tokens, before EOS)")
    p.add_argument("--dec-dim", type=int, default=512, help="embedding/model size of the decoding model")
    p.add_argument("--dec-joint-dim", type=int, default=512, help="dj of the decoding joint model")
    p.add_argument("--dec-layers", type=int, default=2, help="encoder and decoder layers of the decoding model")
    p.add_argument("--no-decoding", action="store_true", help="skip the beam-search benchmark")
    p.add_argument("--seed", type=int, default=1, help="random seed of weights, features and targets")
    return parse_args(p, argv, QUICK,
                      positive=("vocab", "tokens", "dim", "joint_dims", "repeats", "beam", "dec_steps", "dec_batch",
                                "dec_src_len", "dec_dim", "dec_joint_dim", "dec_layers"),
                      check=lambda a: f"--beam {a.beam} must be smaller than --vocab {a.vocab}"
                      if a.beam >= a.vocab else None)


if __name__ == "__main__":
    run_benchmark(parse(), run, report, plot)
