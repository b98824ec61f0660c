#!/usr/bin/env python
"""Large vocabularies: sampled-softmax speed (Pappas et al. 2018, Table 4 layout) and the memory of the
exact softmax, plain vs chunked (``--vocab-chunk-size``).

1. ``speed``: training-step tokens/s of output layer + loss (forward + backward) for softmax, tied and
   joint (dj ∈ {512, 2048, 4096}) at |V| ∈ {32K, 128K} with 100/50/25/5% of the vocabulary scored
   (uniform negatives, as the paper), side by side in one run (the harness's round-robin rounds: medians and
   their spread after a warm-up round), absolute and as a ratio to tied at 100%.
2. ``memory``: peak memory and time of joint (dj = 4096) output layer + exact cross-entropy at |V| = 128K,
   plain (T x |V| logits) vs chunked. Method on CPU: each configuration runs in a fresh subprocess; a
   thread samples the process's resident set (/proc/self/statm) every millisecond during forward +
   backward; the peak minus the resident set just before the step (inputs and parameters allocated and
   touched) is what the step added on top of the model.

Targets: 25% sampling makes the joint dj=2048 step ≥ 2.5x faster than its full softmax at 32K; the chunked path
needs ≤ 0.25x the plain peak memory at 128K with ≤ 1.3x its time.

    python benchmarks/bench_large_vocab.py [--tokens 1024] [--json out.json] [--plot out.png]
    python benchmarks/bench_large_vocab.py --quick
"""

import statistics
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from bench_harness import (
    Timing,
    add_rounds,
    bars_with_spread,
    fresh_process_rounds,
    parse_args,
    parser,
    peak_memory,
    print_table,
    round_robin,
    rounds_note,
    target,
)
from bench_harness import config as run_config
from bench_harness import main as run_benchmark

from fairseq_joint.modules.chunked_softmax import chunked_cross_entropy
from fairseq_joint.modules.output_layers import OutputLayer, OutputLayerSpec
from fairseq_joint.modules.sampling import CandidateSampler, candidate_logits

MiB = 2 ** 20
TARGET_SAMPLING_SPEEDUP = 2.5  # 25% sampling vs the same layer's full softmax, joint dj=2048, smallest |V|
TARGET_MEMORY = 0.25  # chunked / plain peak memory
TARGET_TIME = 1.3  # chunked / plain time


def embedding(vocab: int, dim: int) -> nn.Embedding:
    """E at fairseq's scale N(0, d^-1/2): logits of unit variance, no denormal softmax."""
    torch.manual_seed(0)
    E = nn.Embedding(vocab, dim)
    nn.init.normal_(E.weight, 0, dim ** -0.5)
    return E


def layer_name(kind: str, joint_dim: int) -> str:
    return f"{kind}-{joint_dim}" if kind == "joint" else kind


def step_fn(layer: OutputLayer, E: nn.Embedding, tokens: int, rate: float, seed: int = 0, device: str = "cpu",
            chunk: Optional[int] = None):
    """One training step of output layer + loss at sample ``rate``; layers are shared across rates. Features, targets
    and candidates are drawn on ``device`` (where layer and E must be); at rate 1 with ``chunk`` the exact softmax
    runs in chunks of that many vocabulary rows (:func:`chunked_cross_entropy`, ``--vocab-chunk-size``)."""
    vocab, dim = layer.num_classes, layer.input_dim
    g = torch.Generator(device=device).manual_seed(seed)
    h = torch.randn(tokens, dim, generator=g, device=device).requires_grad_()
    # Zipf-like targets: a realistic number of distinct positives per batch
    probs = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float64, device=device)
    targets = torch.multinomial(probs, tokens, replacement=True, generator=g)
    sampler = CandidateSampler(vocab, "uniform", sample_rate=rate) if rate < 1 else None
    params = list(layer.parameters()) + ([] if layer.output_layer == "softmax" else [E.weight]) + [h]

    def step() -> None:
        if sampler is None and chunk:
            loss = chunked_cross_entropy(layer, h, targets, chunk)[0]
        elif sampler is None:
            loss = F.cross_entropy(layer(h), targets, reduction="sum")
        else:
            c = sampler.sample(targets, generator=g)
            loss = F.cross_entropy(candidate_logits(layer, h, c), c.targets, reduction="sum")
        loss.backward()
        for p in params:
            p.grad = None  # free the gradients before the next case runs

    return step


def speed_rows(times: Sequence[Tuple[str, int, float, Timing]], tokens: int) -> List[Dict[str, object]]:
    """Rows (layer, |V|, rate) with tokens/s at the median, vs tied at 100% and vs the layer's own 100%."""
    rows = [{"layer": layer, "vocab": vocab, "rate": rate, **t.fields(), "tokens_per_s": tokens / t.median}
            for layer, vocab, rate, t in times]
    full = {(r["layer"], r["vocab"]): r for r in rows if r["rate"] == 1.0}
    for row in rows:
        tied, own = full[("tied", row["vocab"])], full[(row["layer"], row["vocab"])]
        row["vs_tied_full"] = tied["seconds_median"] / row["seconds_median"]
        row["speedup_vs_own_full"] = own["seconds_median"] / row["seconds_median"]
    return rows


def bench_speed(args) -> List[Dict[str, object]]:
    keys, cases = [], {}
    for vocab in args.vocabs:
        E = embedding(vocab, args.dim)  # one E per vocabulary, shared by tied and joint
        for kind, dj in [("softmax", 0), ("tied", 0)] + [("joint", d) for d in args.joint_dims]:
            layer = OutputLayer(OutputLayerSpec(kind, joint_dim=dj or args.dim), vocab, args.dim,
                                    None if kind == "softmax" else E)
            for rate in args.rates:
                keys.append((layer_name(kind, dj), vocab, rate))
                cases["{}|{}|{}".format(*keys[-1])] = step_fn(layer, E, args.tokens, rate)
    times = round_robin(cases, args.repeats, args.warmup, "speed")
    return speed_rows([(*key, times["{}|{}|{}".format(*key)]) for key in keys], args.tokens)


def memory_child(cfg, mode: str) -> Dict[str, object]:
    """One exact-softmax step (``plain`` or ``chunked``) in this fresh process: its peak memory above the model."""
    E = embedding(cfg.mem_vocab, cfg.dim)
    layer = OutputLayer(OutputLayerSpec("joint", joint_dim=cfg.mem_joint_dim), cfg.mem_vocab, cfg.dim, E)
    h = torch.randn(cfg.mem_tokens, cfg.dim).requires_grad_()
    targets = torch.randint(0, cfg.mem_vocab, (cfg.mem_tokens,))
    _ = [p.sum().item() for p in layer.parameters()] + [E.weight.sum().item(), h.sum().item()]  # touch pages

    def step() -> float:
        if mode == "plain":
            loss = F.cross_entropy(layer(h), targets, reduction="sum")
        else:
            loss, _ = chunked_cross_entropy(layer, h, targets, cfg.chunk)
        loss.backward()
        return float(loss)

    peak, seconds, loss = peak_memory(step)
    return {"mode": mode, "peak_mib": peak / MiB, "seconds": seconds, "loss": loss}


def memory_row(runs: Sequence[Dict[str, object]]) -> Dict[str, object]:
    """One mode's memory rounds (a fresh process each) as one row: the medians of peak and time, every round's
    values beside them (``*_all``; the time's as the harness's :class:`Timing` keeps them), the loss of the first
    round (every round computes the same step)."""
    timing = Timing(tuple(r["seconds"] for r in runs))
    return {"mode": runs[0]["mode"], "peak_mib": statistics.median(r["peak_mib"] for r in runs),
            "seconds": timing.median, "loss": runs[0]["loss"], "peak_mib_all": [r["peak_mib"] for r in runs],
            "seconds_all": list(timing.seconds)}


def run(args) -> Dict[str, object]:
    result: Dict[str, object] = {}
    targets = []
    if not args.skip_speed:
        result["speed"] = rows = bench_speed(args)
        dj = 2048 if 2048 in args.joint_dims else args.joint_dims[0]
        v = min(args.vocabs)
        sel = [r for r in rows if r["layer"] == f"joint-{dj}" and r["vocab"] == v and r["rate"] == 0.25]
        if sel:
            targets.append(target(f"25% sampling speed-up of joint dj={dj} at |V|={v}", sel[0]["speedup_vs_own_full"],
                                  TARGET_SAMPLING_SPEEDUP))
    if not args.skip_memory:
        runs = fresh_process_rounds(__file__, {"plain": "plain", "chunked": "chunked"}, run_config(args),
                                    args.mem_rounds, "memory")
        result["memory"] = [memory_row(runs[mode]) for mode in ("plain", "chunked")]
        plain, chunked = result["memory"]
        targets.append(target("chunked / plain peak memory", chunked["peak_mib"] / max(plain["peak_mib"], 1e-9),
                              TARGET_MEMORY, higher_is_better=False))
        targets.append(target("chunked / plain time", chunked["seconds"] / plain["seconds"], TARGET_TIME,
                              higher_is_better=False))
    result["targets"] = targets
    return result


def report(result: Dict[str, object]) -> None:
    cfg = result["config"]
    if "speed" in result:
        print(f"\nTraining step, output layer + loss, {cfg['tokens']} tokens, d = dh = {cfg['dim']} (Table 4 layout), "
              f"{rounds_note(cfg)}")
        print_table([("layer", "<12", lambda r: r["layer"]), ("|V|", ">8", lambda r: r["vocab"]),
                     ("scored", ">8", lambda r: f"{r['rate']:.0%}"),
                     ("tokens/s (min-max)", ">24", lambda r: Timing.of(r).show_rate(cfg["tokens"], ".0f")),
                     ("vs tied 100%", ">14", lambda r: f"{r['vs_tied_full']:.2f}x"),
                     ("vs own 100%", ">13", lambda r: f"{r['speedup_vs_own_full']:.2f}x")], result["speed"])
    if "memory" in result:
        print(f"\nExact softmax, joint dj={cfg['mem_joint_dim']}, |V|={cfg['mem_vocab']}, {cfg['mem_tokens']} tokens "
              f"(peak RSS above the model and time of one first step, no warm-up, in a fresh process each; the median "
              f"of {cfg['mem_rounds']} such rounds, min-max beside it: bench_exact_softmax.py times warm steps)")
        for m in result["memory"]:
            peaks = m["peak_mib_all"]
            print(f"  {m['mode']:<8} peak {m['peak_mib']:>9.0f} MiB ({min(peaks):.0f}-{max(peaks):.0f})   "
                  f"time {Timing.of(m).show(fmt='.2f')} s   loss {m['loss']:.4f}")


def plot(result: Dict[str, object], path: str) -> None:
    from fairseq_joint.plots import figure

    cfg = result["config"]
    panels = [p for p in ("speed", "memory") if p in result]
    rows = result.get("speed", [])
    with figure(path, 1, len(panels), figsize=(12, max(4.5, 0.22 * len(rows))), squeeze=False) as (fig, axes):
        for ax, panel in zip(axes[0], panels):
            if panel == "speed":
                labels = [f"{r['layer']} |V|={r['vocab']} {r['rate']:.0%}" for r in rows]
                bars_with_spread(ax, labels, [Timing.of(r) for r in rows], lambda s: cfg["tokens"] / s,
                                 color=[f"C{cfg['rates'].index(r['rate']) % 10}" for r in rows])
                ax.set_xlabel("tokens / s (median, min-max)")
                ax.set_title(f"output layer + loss, {cfg['tokens']} tokens, d = dh = {cfg['dim']}")
            else:
                mem = result["memory"]
                ax.bar([m["mode"] for m in mem], [m["peak_mib"] for m in mem], color=["C3", "C2"])
                ax.set_ylabel("peak MiB above the model")
                ax.set_title(f"exact softmax, joint dj={cfg['mem_joint_dim']}, |V|={cfg['mem_vocab']}")


QUICK = dict(tokens=64, dim=32, vocabs=[2048], joint_dims=[64], repeats=2,
             mem_vocab=4096, mem_tokens=256, mem_joint_dim=64, chunk=512)


def parse(argv=None):
    p = parser(__doc__)
    p.add_argument("--tokens", type=int, default=1024, help="target tokens per step (speed part)")
    p.add_argument("--dim", type=int, default=512, help="d = dh")
    p.add_argument("--vocabs", type=int, nargs="+", default=[32768, 131072], help="|V| of the speed part")
    p.add_argument("--joint-dims", type=int, nargs="+", default=[512, 2048, 4096], help="dj of the joint layers")
    p.add_argument("--rates", type=float, nargs="+", default=[1.0, 0.5, 0.25, 0.05],
                   help="fractions of the vocabulary scored (1.0 must be among them: the ratios' base)")
    add_rounds(p, repeats=3, warmup=1)
    p.add_argument("--mem-vocab", type=int, default=131072, help="|V| of the memory part")
    p.add_argument("--mem-tokens", type=int, default=4096, help="target tokens of the memory part")
    p.add_argument("--mem-joint-dim", type=int, default=4096, help="dj of the memory part")
    p.add_argument("--mem-rounds", type=int, default=1, help="fresh-process rounds of the memory part (each mode "
                   "once a round; the medians of peak and time are reported, with their spread)")
    p.add_argument("--chunk", type=int, default=4096, help="--vocab-chunk-size of the chunked path")
    p.add_argument("--skip-speed", action="store_true", help="skip the speed part")
    p.add_argument("--skip-memory", action="store_true", help="skip the memory part")
    return parse_args(p, argv, QUICK, positive=("tokens", "dim", "vocabs", "joint_dims", "rates", "repeats",
                                                 "mem_vocab", "mem_tokens", "mem_joint_dim", "mem_rounds", "chunk"),
                      check=lambda a: "--rates must lie in (0, 1] and include 1.0"
                      if 1.0 not in a.rates or max(a.rates) > 1 else None)


if __name__ == "__main__":
    run_benchmark(parse(), run, report, plot, child=memory_child)
