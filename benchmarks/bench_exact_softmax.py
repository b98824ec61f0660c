#!/usr/bin/env python
"""The exact softmax over the full vocabulary, side by side with the libraries: time and peak memory of output layer +
cross-entropy (forward + backward), one fresh process per case.

Implementations (``--impls``):

* ``plain``: ``F.cross_entropy(layer(h), y)``, the T x |V| logits materialized;
* ``chunked-N``: fairseq-joint's ``chunked_cross_entropy`` (``--vocab-chunk-size N``; ``--chunks`` lists the N);
* ``torch``: ``torch.nn.functional.linear_cross_entropy`` without options (its reference path), and
  ``torch-chunked`` with ``LinearCrossEntropyOptions()`` (torch's chunked path, gradients in forward) and
  ``torch-chunked-B`` with ``batch_chunk_size=B`` (``--torch-batch-chunks``): presets whose class side is a plain
  matrix only (``softmax``, ``tied``), with the layer's bias;
* ``cce``: Apple's Cut Cross-Entropy (``cut_cross_entropy.linear_cross_entropy``, ``impl="torch_compile"``, its path
  that runs on the CPU), when it is installed; it takes no bias, so the bias enters as one more column of the
  class matrix (``[h, 1] · [C, b]ᵀ``, a copy of C per step).

Layers (``--layers``): ``softmax``, ``tied`` and ``joint-DJ`` at |V| in ``--vocabs``; d = dh = ``--dim``, ``--tokens``
target tokens, fairseq's initialization scales. Memory is the peak resident set during the first timed step minus the
resident set before it (inputs, parameters allocated and touched), sampled every millisecond; the time is the
median (min-max) of ``--repeats`` steps after one warm-up step.

Targets (issue #17): at |V| = 128K, joint dj = 4096, the chunked path within 1.0x the plain path's time at ≤ 0.12x its
peak memory; at |V| = 32K, ``tied``: the chunked path at no more memory than torch's chunked op and no slower.

    python benchmarks/bench_exact_softmax.py [--json FILE] [--plot FILE]
    python benchmarks/bench_exact_softmax.py --quick
"""

import importlib.util
import time
from typing import Dict, List

import torch
import torch.nn as nn
import torch.nn.functional as F
from bench_harness import Timing, fresh_process_rounds, parse_args, parser, peak_memory, target
from bench_harness import config as run_config
from bench_harness import main as run_benchmark

from fairseq_joint.modules.chunked_softmax import chunked_cross_entropy
from fairseq_joint.modules.output_layers import OutputLayer, OutputLayerSpec

MiB = 2 ** 20
TARGET_LARGE_TIME = 1.0  # chunked / plain time, joint dj=4096 at the largest |V|
TARGET_LARGE_MEMORY = 0.12  # chunked / plain peak memory, likewise
TARGET_VS_TORCH = 1.0  # chunked / torch's chunked op at its fastest setting, time and memory, tied at the smallest |V|
LOSS_TOLERANCE_PPM = 10  # |loss / plain - 1| of every contender, in 1e-6: fp32 sums of 4096 losses agree to ~0.3
PLAIN_CLASS_SIDE = ("softmax", "tied")


def has_cce() -> bool:
    return importlib.util.find_spec("cut_cross_entropy") is not None


def build(layer_name: str, vocab: int, dim: int):
    """The layer, E, features and targets of a case (fairseq's scales: N(0, d^-1/2) weights, unit-variance h)."""
    kind, _, dj = layer_name.partition("-")
    torch.manual_seed(0)
    E = nn.Embedding(vocab, dim)
    nn.init.normal_(E.weight, 0, dim ** -0.5)
    layer = OutputLayer(OutputLayerSpec(kind, joint_dim=int(dj) if dj else dim), vocab, dim,
                        None if kind == "softmax" else E)
    return layer, E


def exact_loss(impl: str, layer: OutputLayer, h: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The summed exact cross-entropy of ``layer(h)`` against ``targets`` by implementation ``impl`` (see above)."""
    if impl == "plain":
        return F.cross_entropy(layer(h), targets, reduction="sum")
    if impl.startswith("chunked-"):
        return chunked_cross_entropy(layer, h, targets, int(impl.split("-")[1]))[0]
    classes, bias = layer.class_side()
    if impl == "cce":
        from cut_cross_entropy import linear_cross_entropy

        ones = h.new_ones(h.size(0), 1)
        return linear_cross_entropy(torch.cat([h, ones], 1), torch.cat([classes, bias.unsqueeze(1)], 1), targets,
                                    reduction="sum", impl="torch_compile")
    options = None
    if impl == "torch-chunked":
        options = torch.nn.LinearCrossEntropyOptions()
    elif impl.startswith("torch-chunked-"):
        options = torch.nn.LinearCrossEntropyOptions(batch_chunk_size=int(impl.split("-")[2]), chunking_method=None)
    return F.linear_cross_entropy(h, classes, targets, linear_bias=bias, reduction="sum", options=options)


def child(cfg, case) -> Dict[str, object]:
    """One case in this fresh process: peak memory and time of the first timed step, then more timed steps."""
    layer_name, vocab, impl = case
    layer, E = build(layer_name, vocab, cfg.dim)
    g = torch.Generator().manual_seed(1)
    h = torch.randn(cfg.tokens, cfg.dim, generator=g).requires_grad_()
    probs = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float64)  # Zipf-like targets
    targets = torch.multinomial(probs, cfg.tokens, replacement=True, generator=g)
    params = list(layer.parameters()) + ([] if layer.output_layer == "softmax" else [E.weight]) + [h]
    _ = [p.sum().item() for p in params]  # touch every page before the baseline

    def step() -> float:
        for p in params:
            p.grad = None
        loss = exact_loss(impl, layer, h, targets)
        loss.backward()
        return float(loss)

    step()  # warm-up (and torch.compile's compilation for cce)
    for p in params:
        p.grad = None
    peak, first, loss = peak_memory(step)
    seconds = [first]
    for _ in range(cfg.repeats - 1):
        t0 = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - t0)
    return {"layer": layer_name, "vocab": vocab, "impl": impl, "peak_mib": peak / MiB, "loss": loss,
            **Timing(seconds).fields()}


def cases(args) -> List[tuple]:
    out = []
    for vocab in args.vocabs:
        for layer_name in args.layers:
            for impl in args.impls:
                if impl.startswith(("torch", "cce")) and layer_name not in PLAIN_CLASS_SIDE:
                    continue
                if impl == "cce" and not has_cce():
                    continue
                if impl == "chunked":
                    out += [(layer_name, vocab, f"chunked-{n}") for n in args.chunks]
                elif impl == "torch-chunked":
                    out += [(layer_name, vocab, "torch-chunked")]
                    out += [(layer_name, vocab, f"torch-chunked-{b}") for b in args.torch_batch_chunks]
                else:
                    out.append((layer_name, vocab, impl))
    return out


def run(args) -> Dict[str, object]:
    todo = {"|".join(map(str, c)): list(c) for c in cases(args)}
    runs = fresh_process_rounds(__file__, todo, run_config(args), 1, "exact softmax")
    rows = [runs[k][0] for k in todo]
    plain = {(r["layer"], r["vocab"]): r for r in rows if r["impl"] == "plain"}
    for r in rows:
        base = plain.get((r["layer"], r["vocab"]))
        r["time_vs_plain"] = r["seconds_median"] / base["seconds_median"] if base else None
        r["memory_vs_plain"] = r["peak_mib"] / max(base["peak_mib"], 1e-9) if base else None
        r["loss_vs_plain"] = r["loss"] / base["loss"] - 1.0 if base else None
    targets = []
    large = max(args.vocabs)
    joints = sorted((r for r in rows if r["layer"].startswith("joint-") and r["vocab"] == large
                     and r["impl"].startswith("chunked-")), key=lambda r: r["peak_mib"])
    if joints and plain.get((joints[0]["layer"], large)):
        fit = [r for r in joints if r["memory_vs_plain"] <= TARGET_LARGE_MEMORY] or joints[:1]
        best = min(fit, key=lambda r: r["seconds_median"])
        targets.append(target(f"{best['layer']} |V|={large}: {best['impl']} / plain peak memory",
                              best["memory_vs_plain"], TARGET_LARGE_MEMORY, higher_is_better=False))
        targets.append(target(f"{best['layer']} |V|={large}: {best['impl']} / plain time", best["time_vs_plain"],
                              TARGET_LARGE_TIME, higher_is_better=False))
    small = min(args.vocabs)
    torch_rows = [r for r in rows if r["layer"] == "tied" and r["vocab"] == small
                  and r["impl"].startswith("torch-chunked")]
    ours = [r for r in rows if r["layer"] == "tied" and r["vocab"] == small and r["impl"].startswith("chunked-")]
    if torch_rows and ours:
        ref = min(torch_rows, key=lambda r: r["seconds_median"])  # torch's fastest setting, not its default's
        fit = [r for r in ours if r["peak_mib"] <= ref["peak_mib"]] or [min(ours, key=lambda r: r["peak_mib"])]
        best = min(fit, key=lambda r: r["seconds_median"])
        targets.append(target(f"tied |V|={small}: {best['impl']} / {ref['impl']} time",
                              best["seconds_median"] / ref["seconds_median"], TARGET_VS_TORCH, higher_is_better=False))
        targets.append(target(f"tied |V|={small}: {best['impl']} / {ref['impl']} peak memory",
                              best["peak_mib"] / max(ref["peak_mib"], 1e-9), TARGET_VS_TORCH, higher_is_better=False))
    compared = [r for r in rows if r["loss_vs_plain"] is not None]
    if compared:  # a contender that computes another loss is no contender: its time says nothing
        worst = max(compared, key=lambda r: abs(r["loss_vs_plain"]))
        targets.append(target(f"every contender's |loss / plain - 1| in ppm, largest ({worst['layer']} "
                              f"|V|={worst['vocab']} {worst['impl']})", 1e6 * abs(worst["loss_vs_plain"]),
                              LOSS_TOLERANCE_PPM, higher_is_better=False))
    return {"rows": rows, "cce_installed": has_cce(), "targets": targets}


def report(result: Dict[str, object]) -> None:
    cfg = result["config"]
    print(f"\nExact softmax, output layer + loss, forward + backward, {cfg['tokens']} tokens, d = dh = {cfg['dim']}, "
          f"{cfg['threads']} threads; fresh process per case, time = median (min-max) of {cfg['repeats']} steps")
    if not result["cce_installed"]:
        print("(Cut Cross-Entropy is not installed: `pip install cut-cross-entropy` adds its rows)")
    print(f"{'layer':<11}{'|V|':>8}  {'implementation':<20}{'seconds (min-max)':>24}{'peak MiB':>10}"
          f"{'time/plain':>11}{'mem/plain':>10}{'loss/plain-1':>13}")
    for r in result["rows"]:
        rel = (f"{r['time_vs_plain']:>10.2f}x{r['memory_vs_plain']:>9.3f}x{r['loss_vs_plain']:>13.1e}"
               if r["time_vs_plain"] is not None else "")
        print(f"{r['layer']:<11}{r['vocab']:>8}  {r['impl']:<20}{Timing.of(r).show():>24}{r['peak_mib']:>10.0f}{rel}")


def plot(result: Dict[str, object], path: str) -> None:
    from fairseq_joint.plots import figure

    rows = result["rows"]
    groups = list(dict.fromkeys((r["layer"], r["vocab"]) for r in rows))
    with figure(path, 1, 2, figsize=(13, 0.35 * len(rows) + 1.5)) as (fig, axes):
        labels = [f"{r['layer']} {r['vocab'] // 1024}K {r['impl']}" for r in rows]
        colors = [f"C{groups.index((r['layer'], r['vocab'])) % 10}" for r in rows]
        y = list(range(len(rows)))[::-1]
        axes[0].barh(y, [r["seconds_median"] for r in rows], color=colors,
                     xerr=[[r["seconds_median"] - r["seconds_min"] for r in rows],
                           [r["seconds_max"] - r["seconds_median"] for r in rows]])
        axes[0].set_yticks(y, labels, fontsize=7)
        axes[0].set_xlabel("seconds per step (median, min-max)")
        axes[1].barh(y, [r["peak_mib"] for r in rows], color=colors)
        axes[1].set_yticks(y, [""] * len(rows))
        axes[1].set_xscale("log")
        axes[1].set_xlabel("peak MiB above the inputs (log)")
        fig.suptitle("exact softmax: plain, fairseq-joint chunked, torch.nn.functional.linear_cross_entropy"
                     + (", Cut Cross-Entropy" if result["cce_installed"] else ""), fontsize=9)


QUICK = dict(tokens=128, dim=32, vocabs=[2048, 4096], layers=["softmax", "tied", "joint-128"], chunks=[512, 128],
             torch_batch_chunks=[32], repeats=2)


def parse(argv=None):
    p = parser(__doc__)
    p.add_argument("--tokens", type=int, default=4096, help="target tokens per step")
    p.add_argument("--dim", type=int, default=512, help="d = dh")
    p.add_argument("--vocabs", type=int, nargs="+", default=[32768, 131072], help="|V|")
    p.add_argument("--layers", nargs="+", default=["softmax", "tied", "joint-4096"],
                   help="softmax, tied, bilinear, label, context or joint-DJ")
    p.add_argument("--impls", nargs="+", default=["plain", "chunked", "torch", "torch-chunked", "cce"],
                   help="plain, chunked, torch, torch-chunked, cce (see above)")
    p.add_argument("--chunks", type=int, nargs="+", default=[4096, 1024], help="--vocab-chunk-size values of ours")
    p.add_argument("--torch-batch-chunks", type=int, nargs="+", default=[256],
                   help="batch_chunk_size values of torch's chunked op (besides its automatic choice)")
    p.add_argument("--repeats", type=int, default=3, help="timed steps per case (after one warm-up step)")
    return parse_args(p, argv, QUICK, positive=("tokens", "dim", "vocabs", "chunks", "torch_batch_chunks", "repeats"))


if __name__ == "__main__":
    run_benchmark(parse(), run, report, plot, child=child)
