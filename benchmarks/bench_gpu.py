#!/usr/bin/env python
"""The GPU speed tables of docs/gpu.md, in one run that fits one device call: every figure measured side by side.

Three parts (``--parts``), each timed in the harness's round-robin rounds (every case once per round, the order
rotating; medians and their spread), on ``--device`` under ``torch.autocast`` in ``--dtype`` (bf16 by default, on
the CPU too; ``fp32``: no autocast), parameters in fp32 as in fairseq's ``--amp``:

a. ``layers``: the training step (forward + backward) of every output layer of Pappas et al. 2018 + its loss:
   ``softmax`` (Eq. 3), ``tied`` (Eq. 4), ``bilinear`` (Eq. 6), ``label`` (Eq. 7a), ``context`` (Eq. 7b) and ``joint``
   (Eqs. 14-15) at each dj of ``--joint-dims``, at each |V| of ``--vocabs``, three ways of scoring: the ``full``
   softmax, ``sampled`` (``--sample-rate`` of |V| scored, uniform negatives, Sec. 3.2) and the ``chunked`` exact
   softmax (``--vocab-chunk-size --chunk``); target tokens/s and the ratio to ``tied`` at the same |V| and scoring.
   The steps are benchmarks/bench_large_vocab.py's (fairseq's initialization scales, Zipf-like targets).
b. ``table4``: the paper's Table 4, target tokens/s of a whole training step (forward, backward, Adam) of the
   ``joint_lstm_wmt17`` model (2+2 LSTM layers, d = ``--dim``, 512 in the paper; fairseq's build with the plugin's
   model, :func:`fairseq_joint.loaders.model_from_flags`) with ``sampled_cross_entropy`` at each rate of
   ``--table4-rates`` (the paper's 50/25/5%) at the largest |V| of ``--vocabs`` (the paper's |V| ≈ 128K), for NMT
   (``softmax``), NMT-tied (``tied``) and NMT-joint at each dj; the batch is benchmarks/bench_label_embedding.py's
   (``--tokens`` // 32 sentences of 32 target and 32 source tokens).
c. ``exact``: the exact softmax of ``--vocab-chunk-size --chunk`` (``ours``: on a CUDA GPU the fused kernels of
   fairseq_joint/modules/fused_cross_entropy.py) against the plain ``cross_entropy(layer(h))`` for every output layer
   (``tied`` also without its bias; ``joint`` at each dj of ``--exact-joint-dims``), at each |V|: with fp32
   parameters under ``--dtype``'s autocast (fairseq's ``--amp``) and with 16-bit parameters (``--bf16``), and for
   ``tied`` the fused kernels users have for a plain class matrix, where installed: Cut Cross-Entropy (the bias as an
   extra column), Liger's fused linear cross-entropy, torch's ``linear_cross_entropy``. Time, peak memory
   (``torch.cuda.max_memory_allocated`` above the inputs, the step's gradients included; ``n/a`` on the CPU, where this
   process's resident set would not isolate one step: benchmarks/bench_exact_softmax.py has fresh-process figures on
   the CPU), both as ratios to the plain path of the same parameters, and the loss against an fp64 reference.

Time budget (``--time-budget-s``, counted from the start of the run): each part runs one warm-up round and one round
that estimates the round's seconds, then as many timed rounds as fit its share of the budget left (layers 3 : table4
3 : exact 1), at least 3 and at most ``--repeats``. Estimated from the FLOPs (about 95 TFLOP per round of part a) and
not yet measured: on one H100 or H200 at the defaults a round takes about 1 s (layers), 1-3 s (table4) and well under
1 s (exact), so the parts run their 10 rounds in about a minute, and building the models and the imports add about a
minute: the script fits one device call of under 8 minutes; a slower device gets fewer timed rounds (at least 3).

Targets: ``joint`` at the first dj, full softmax, smallest |V|: ≥ 0.85x ``tied`` (bench_output_layers' target); the
exact softmax at the largest |V|, every layer, both parameter dtypes: ≤ 1.2x the plain path's time and ≤ 0.1x its
peak memory, and for ``tied`` without bias no slower than Cut Cross-Entropy.

    python benchmarks/bench_gpu.py --json gpu.json --markdown gpu-tables.md     # on the GPU: the tables of docs/gpu.md
    python benchmarks/bench_gpu.py --quick                                       # tiny sizes on the CPU, seconds
"""

import contextlib
import functools
import gc
import importlib.util
import logging
import math
import os
import platform
import time
from typing import Callable, Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F
from bench_harness import Timing, bars_with_spread, parse_args, parser, print_table, round_robin, target, training_step
from bench_harness import main as run_benchmark
from bench_label_embedding import SRC_LEN, make_batch
from bench_large_vocab import embedding, step_fn
from bench_output_layers import TARGET_JOINT_VS_TIED, layer_names

from fairseq_joint.modules.chunked_softmax import chunked_cross_entropy
from fairseq_joint.modules.output_layers import PAPER_EQUATION, OutputLayer, OutputLayerSpec

logger = logging.getLogger("bench_gpu")

MiB = 2 ** 20
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
PARTS = ("layers", "table4", "exact")
PART_WEIGHTS = {"layers": 3, "table4": 3, "exact": 1}  # shares of the time budget left
MIN_REPEATS = 3
MODES = ("full", "sampled", "chunked")
PAPER_MODEL = {"softmax": "NMT", "tied": "NMT-tied", "joint": "NMT-joint"}
#: the exact path's targets against the plain path of the same parameters' dtype, at the largest |V|: time and peak
#: memory above the inputs; and against Cut Cross-Entropy where it applies (tied without bias), time
TARGET_EXACT_TIME = 1.2
TARGET_EXACT_MEMORY = 0.1
TARGET_EXACT_VS_CCE = 1.0


# ---------------------------------------------------------------------------------------------- device and budget
def has_linear_cross_entropy() -> bool:
    """Whether this torch has ``torch.nn.functional.linear_cross_entropy`` (2.13 has; older ones do not)."""
    return hasattr(F, "linear_cross_entropy")


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({platform.machine()})"


def precision(args) -> contextlib.AbstractContextManager:
    """``torch.autocast`` in ``--dtype`` on ``--device`` (fp32: none)."""
    if args.dtype == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(args.device).type, dtype=DTYPES[args.dtype])


def runs_lstm(device: str, dtype: str) -> bool:
    """Whether an LSTM (Table 4's joint_lstm_wmt17) runs under ``dtype``'s autocast on ``device``: oneDNN has no
    16-bit LSTM on a CPU without AVX512-BF16 (an AVX2 AMD EPYC failed in "could not create a primitive descriptor for
    the LSTM forward propagation primitive")."""
    if dtype == "fp32" or torch.device(device).type != "cpu":
        return True
    lstm = torch.nn.LSTM(4, 4)
    try:
        with torch.autocast(device_type="cpu", dtype=DTYPES[dtype]):
            lstm(torch.zeros(2, 1, 4))
    except RuntimeError:
        return False
    return True


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously: a step's time ends when its kernels have)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_case(step: Callable[[], object], args, autocast: bool = True) -> Callable[[], None]:
    """``step`` (under ``--dtype``'s autocast unless ``autocast`` is False: it sets its own), finished on the device
    before the harness stops its clock."""
    device = torch.device(args.device)

    def case() -> None:
        with precision(args) if autocast else contextlib.nullcontext():
            step()
        synchronize(device)

    return case


def free_device_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


class Budget:
    """``--time-budget-s`` from the start of the run, shared by the parts still to run (``PART_WEIGHTS``)."""

    def __init__(self, seconds: float, parts: Sequence[str]):
        self.deadline = time.perf_counter() + seconds
        self.pending = list(parts)

    def rounds(self, part: str, round_seconds: float, most: int) -> int:
        """Timed rounds of ``part`` that fit its share of the time left: at least MIN_REPEATS, at most ``most``."""
        share = PART_WEIGHTS[part] / sum(PART_WEIGHTS[p] for p in self.pending)
        allowed = max(0.0, self.deadline - time.perf_counter()) * share
        self.pending.remove(part)
        fit = int(allowed // max(round_seconds, 1e-9))
        rounds = max(MIN_REPEATS, min(most, fit))
        logger.info("%s: one round takes %.2f s; %d timed rounds (%.0f s of the budget left to it)", part,
                    round_seconds, rounds, allowed)
        if fit < MIN_REPEATS:
            logger.warning("%s: %d rounds (%.0f s) run past the time budget; lower --vocabs/--tokens or raise "
                           "--time-budget-s", part, rounds, rounds * round_seconds)
        return rounds


def budgeted_rounds(cases: Dict[str, Callable[[], None]], part: str, budget: Budget, args) -> Dict[str, Timing]:
    """A warm-up round, a round that estimates the round's seconds (neither kept), then the timed rounds."""
    estimate = round_robin(cases, 1, 1, f"{part} (warm-up, estimate)")
    rounds = budget.rounds(part, sum(t.median for t in estimate.values()), args.repeats)
    return round_robin(cases, rounds, 0, part)


def vs_tied(rows: List[Dict[str, object]], group: Callable[[Dict[str, object]], tuple]) -> None:
    """``vs_tied`` of every row: tied's median seconds in the same ``group`` over the row's (a speed ratio)."""
    tied = {group(r): r["seconds_median"] for r in rows if r["output_layer"] == "tied"}
    for row in rows:
        row["vs_tied"] = tied[group(row)] / row["seconds_median"]


# ---------------------------------------------------------------------------------------------- a. output layers
def bench_layers(args, budget: Budget) -> Dict[str, object]:
    device = torch.device(args.device)
    keys, cases = [], {}
    for vocab in args.vocabs:
        E = embedding(vocab, args.dim).to(device)  # one E per vocabulary, shared by every layer but softmax
        for name, preset, dj in layer_names(args.joint_dims):
            layer = OutputLayer(OutputLayerSpec(preset, joint_dim=dj or args.dim), vocab, args.dim,
                                None if preset == "softmax" else E).to(device)
            for mode in MODES:
                rate = args.sample_rate if mode == "sampled" else 1.0
                chunk = args.chunk if mode == "chunked" else None
                step = step_fn(layer, E, args.tokens, rate, args.seed, device=str(device), chunk=chunk)
                keys.append((name, preset, dj, vocab, mode))
                cases[f"{name}|{vocab}|{mode}"] = timed_case(step, args)
    logger.info("layers: %d cases (%d layers x %d |V| x %s), %d tokens, d = dh = %d", len(cases),
                len(layer_names(args.joint_dims)), len(args.vocabs), "/".join(MODES), args.tokens, args.dim)
    times = budgeted_rounds(cases, "layers", budget, args)
    del cases
    free_device_memory(device)
    rows = []
    for name, preset, dj, vocab, mode in keys:
        t = times[f"{name}|{vocab}|{mode}"]
        rows.append({"layer": name, "output_layer": preset, "equation": PAPER_EQUATION[preset],
                     "joint_dim": dj or None, "vocab": vocab, "mode": mode, **t.fields(),
                     "tokens_per_s": args.tokens / t.median})
    vs_tied(rows, lambda r: (r["vocab"], r["mode"]))
    return {"tokens": args.tokens, "dim": args.dim, "sample_rate": args.sample_rate, "chunk": args.chunk,
            "rounds": len(rows[0]["seconds_all"]), "rows": rows}


# ---------------------------------------------------------------------------------------------- b. Table 4
def table4_models(joint_dims: Sequence[int]) -> List[tuple]:
    """(name, output layer, dj) of the models of the paper's Table 4: NMT, NMT-tied, NMT-joint at each dj."""
    return [("softmax", "softmax", 0), ("tied", "tied", 0)] + [(f"joint-{dj}", "joint", dj) for dj in joint_dims]


def table4_model(kind: str, joint_dim: int, vocab: int, args):
    """A random ``joint_lstm_wmt17`` (2+2 LSTM layers, embeddings, states and decoder output of size ``--dim``) with
    output layer ``kind``, |V| source and target symbols, in training mode on ``--device``."""
    from fairseq_joint.loaders import model_from_flags

    d = str(args.dim)
    flags = ["--arch", "joint_lstm_wmt17", "--output-layer", kind, *(["--joint-dim", str(joint_dim)] if joint_dim else []),
             "--encoder-embed-dim", d, "--decoder-embed-dim", d, "--encoder-hidden-size", d,
             "--decoder-hidden-size", d, "--decoder-out-embed-dim", d]
    torch.manual_seed(args.seed)
    return model_from_flags(flags, vocab, vocab).to(args.device).train()


def bench_table4(args, budget: Budget) -> Dict[str, object]:
    from fairseq import utils

    from fairseq_joint.criterions.sampled_cross_entropy import SampledCrossEntropyCriterion
    from fairseq_joint.loaders import translation_task

    device = torch.device(args.device)
    vocab = max(args.vocabs)
    task = translation_task(vocab, vocab)
    sample = utils.apply_to_sample(lambda t: t.to(device),
                                   make_batch(task.target_dictionary, args.tokens, SRC_LEN, args.seed))
    criteria = {rate: SampledCrossEntropyCriterion(task, False, 0.0, sample_rate=rate).train()
                for rate in args.table4_rates}
    keys, cases = [], {}
    for name, kind, dj in table4_models(args.joint_dims):
        model = table4_model(kind, dj, vocab, args)
        for rate in args.table4_rates:
            keys.append((name, kind, dj, rate))
            cases[f"{name}|{rate:g}"] = timed_case(training_step(model, criteria[rate], sample), args)
    logger.info("table4: %d cases, joint_lstm_wmt17 d = %d, |V| = %d, %d sentences x %d target tokens", len(cases),
                args.dim, vocab, sample["nsentences"], sample["target"].size(1))
    times = budgeted_rounds(cases, "table4", budget, args)
    del cases
    free_device_memory(device)
    rows = []
    for name, kind, dj, rate in keys:
        t = times[f"{name}|{rate:g}"]
        rows.append({"model": name, "paper_model": PAPER_MODEL[kind], "output_layer": kind, "joint_dim": dj or None,
                     "rate": rate, **t.fields(), "tokens_per_s": sample["ntokens"] / t.median})
    vs_tied(rows, lambda r: r["rate"])
    return {"arch": "joint_lstm_wmt17", "vocab": vocab, "dim": args.dim, "tokens": sample["ntokens"],
            "sentences": sample["nsentences"], "rounds": len(rows[0]["seconds_all"]), "rows": rows}


# ---------------------------------------------------------------------------------------------- c. exact softmax
def exact_layers(joint_dims: Sequence[int]) -> List[tuple]:
    """(name, preset, dj, bias) of the exact part: every layer with its per-class bias, ``tied`` also without one
    (where Cut Cross-Entropy applies as it is), ``joint`` at each dj."""
    return ([("softmax", "softmax", 0, "per_class"), ("tied", "tied", 0, "per_class"), ("tied no-bias", "tied", 0, "none"),
             ("bilinear", "bilinear", 0, "per_class"), ("label", "label", 0, "per_class"),
             ("context", "context", 0, "per_class")]
            + [(f"joint-{dj}", "joint", dj, "per_class") for dj in joint_dims])


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def exact_impls(preset: str, bias: str) -> List[str]:
    """The implementations of one layer: the plain path and ours, with fp32 parameters under autocast (``--amp``) and
    with 16-bit parameters (``--bf16``/``--fp16``); for ``tied`` the fused kernels of others where installed: Cut
    Cross-Entropy (the bias as an extra column, as a user would give it), Liger's fused linear cross-entropy, torch's
    ``linear_cross_entropy`` (torch 2.13 and later)."""
    impls = ["plain", "ours", "plain 16-bit", "ours 16-bit"]
    if preset == "tied":
        if has_module("cut_cross_entropy"):
            impls.append("cce" if bias == "none" else "cce bias-column")
        if has_module("liger_kernel"):
            impls.append("liger")
        if has_linear_cross_entropy():
            impls.append("torch")
    return impls


def exact_layer(preset: str, dj: int, bias: str, vocab: int, dim: int, dtype: torch.dtype, device: torch.device, seed):
    """A layer of fairseq's scales (N(0, d^-1/2) weights) and its E, in ``dtype`` (the same values whatever dtype)."""
    torch.manual_seed(seed)
    E = torch.nn.Embedding(vocab, dim)
    torch.nn.init.normal_(E.weight, 0, dim ** -0.5)
    layer = OutputLayer(OutputLayerSpec(preset, joint_dim=dj or dim, bias=bias), vocab, dim,
                        None if preset == "softmax" else E)
    return layer.to(device, dtype), E.to(device, dtype)


def exact_step(impl: str, layer: OutputLayer, h: torch.Tensor, targets: torch.Tensor, chunk: int,
               half: torch.dtype) -> torch.Tensor:
    """The summed exact cross-entropy of ``layer(h)`` by ``impl`` (see :func:`exact_impls`)."""
    if impl.startswith("plain"):
        return F.cross_entropy(layer(h).float(), targets, reduction="sum")
    if impl.startswith("ours"):
        return chunked_cross_entropy(layer, h, targets, chunk)[0]
    classes, bias = layer.class_side()
    if impl.startswith("cce"):
        from cut_cross_entropy import linear_cross_entropy

        x, c = h.to(half), classes.to(half)  # CCE takes 16-bit inputs: the casts of an --amp step
        if bias is not None:  # the bias as an extra column of the classes, a column of ones beside the features
            x = torch.cat([x, x.new_ones(x.size(0), 1)], 1)
            c = torch.cat([c, bias.to(half).unsqueeze(1)], 1)
        return linear_cross_entropy(x, c, targets, reduction="sum")
    if impl == "liger":
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss

        return LigerFusedLinearCrossEntropyLoss(reduction="sum")(classes, h, targets, bias)
    if impl == "torch":
        return F.linear_cross_entropy(h, classes, targets, linear_bias=bias, reduction="sum",
                                      options=torch.nn.LinearCrossEntropyOptions())
    raise ValueError(f"unknown implementation {impl!r}")


def peak_mib(step: Callable[[], torch.Tensor], device: torch.device) -> tuple:
    """``(peak MiB above the memory allocated before it, None on the CPU; loss)`` of one ``step`` (whose gradients
    count in its peak; it frees them when done)."""
    free_device_memory(device)
    if device.type != "cuda":
        return None, float(step())
    synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    loss = float(step())
    synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - base) / MiB, loss


def bench_exact(args, budget: Budget) -> Dict[str, object]:
    device = torch.device(args.device)
    half = DTYPES[args.dtype] if args.dtype != "fp32" else torch.bfloat16
    steps, cases, references = {}, {}, {}
    for vocab in args.vocabs:
        g = torch.Generator(device=device).manual_seed(args.seed)
        h32 = torch.randn(args.tokens, args.dim, generator=g, device=device)
        probs = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float64, device=device)  # Zipf-like targets
        targets = torch.multinomial(probs, args.tokens, replacement=True, generator=g)
        for name, preset, dj, bias in exact_layers(args.exact_joint_dims):
            with torch.no_grad():  # the loss in fp64, the reference of every implementation's
                layer64, _ = exact_layer(preset, dj, bias, vocab, args.dim, torch.float64, device, args.seed)
                references[(name, vocab)] = float(F.cross_entropy(layer64(h32.double()), targets, reduction="sum"))
                del layer64
            built = {}
            for impl in exact_impls(preset, bias):
                sixteen = impl.endswith("16-bit")
                dtype = half if sixteen else torch.float32
                if dtype not in built:
                    layer, E = exact_layer(preset, dj, bias, vocab, args.dim, dtype, device, args.seed)
                    h = h32.to(dtype).requires_grad_()
                    built[dtype] = layer, h, [*layer.parameters(), *([] if preset == "softmax" else [E.weight]), h]
                layer, h, params = built[dtype]
                # fp32 parameters run under --dtype's autocast (--amp); 16-bit ones without (--bf16, --fp16)
                context = contextlib.nullcontext if sixteen else functools.partial(precision, args)

                def step(impl=impl, layer=layer, h=h, params=params, context=context, targets=targets) -> torch.Tensor:
                    with context():
                        loss = exact_step(impl, layer, h, targets, args.chunk, half)
                        loss.backward()
                    for p in params:
                        p.grad = None
                    return loss.detach()

                steps[(name, vocab, impl)] = step
                cases[f"{name}|{vocab}|{impl}"] = timed_case(step, args, autocast=False)
    logger.info("exact: %d cases (%d layers at |V| = %s), %d tokens", len(cases),
                len(exact_layers(args.exact_joint_dims)), "/".join(map(str, args.vocabs)), args.tokens)
    times = budgeted_rounds(cases, "exact", budget, args)
    rows = []
    for (name, vocab, impl), step in steps.items():
        peak, loss = peak_mib(step, device)
        t = times[f"{name}|{vocab}|{impl}"]
        rows.append({"layer": name, "vocab": vocab, "impl": impl, **t.fields(), "tokens_per_s": args.tokens / t.median,
                     "peak_mib": peak, "loss": loss, "loss_vs_fp64": loss / references[(name, vocab)] - 1.0})
    del steps, cases
    free_device_memory(device)
    by = {(r["layer"], r["vocab"], r["impl"]): r for r in rows}
    for row in rows:  # ours and the others against the plain path of the same parameters' dtype
        plain = by[(row["layer"], row["vocab"], "plain 16-bit" if row["impl"].endswith("16-bit") else "plain")]
        row["time_vs_plain"] = row["seconds_median"] / plain["seconds_median"]
        row["memory_vs_plain"] = (row["peak_mib"] / max(plain["peak_mib"], 1e-9)
                                  if row["peak_mib"] is not None else None)
    return {"tokens": args.tokens, "dim": args.dim, "chunk": args.chunk, "half": str(half).split(".")[-1],
            "rounds": len(rows[0]["seconds_all"]), "rows": rows}


# ---------------------------------------------------------------------------------------------- run and targets
def evaluate_targets(result: Dict[str, object], args) -> List[Dict[str, object]]:
    targets = []
    small = min(args.vocabs)
    if "layers" in result:
        dj = args.joint_dims[0]
        row = next(r for r in result["layers"]["rows"]
                   if r["layer"] == f"joint-{dj}" and r["vocab"] == small and r["mode"] == "full")
        targets.append(target(f"joint-{dj} |V|={small} full softmax step vs tied", row["vs_tied"],
                              TARGET_JOINT_VS_TIED))
    if "exact" in result:
        rows = result["exact"]["rows"]
        large = max(args.vocabs)
        by = {(r["layer"], r["vocab"], r["impl"]): r for r in rows}
        for name, _, _, _ in exact_layers(args.exact_joint_dims):
            for impl, what in (("ours", f"{args.dtype} autocast, fp32 parameters"),
                               ("ours 16-bit", f"{result['exact']['half']} parameters")):
                row = by[(name, large, impl)]
                targets.append(target(f"exact softmax, {name} |V|={large} ({what}): time / plain",
                                      row["time_vs_plain"], TARGET_EXACT_TIME, higher_is_better=False))
                if row["memory_vs_plain"] is not None:
                    targets.append(target(f"exact softmax, {name} |V|={large} ({what}): peak memory / plain",
                                          row["memory_vs_plain"], TARGET_EXACT_MEMORY, higher_is_better=False))
        cce = by.get(("tied no-bias", large, "cce"))
        if cce is not None:
            ours = by[("tied no-bias", large, "ours")]
            targets.append(target(f"exact softmax, tied no-bias |V|={large}: ours / Cut Cross-Entropy time",
                                  ours["seconds_median"] / cce["seconds_median"], TARGET_EXACT_VS_CCE,
                                  higher_is_better=False))
    return targets


BENCHES = {"layers": bench_layers, "table4": bench_table4, "exact": bench_exact}


def run(args) -> Dict[str, object]:
    device = torch.device(args.device)
    result: Dict[str, object] = {"device_name": device_name(device), "dtype": args.dtype,
                                 "autocast": args.dtype != "fp32"}
    budget = Budget(args.time_budget_s, args.parts)
    for part in args.parts:
        t0 = time.perf_counter()
        logger.info("part %s: start (%.0f s of the %.0f s budget left)", part, budget.deadline - time.perf_counter(),
                    args.time_budget_s)
        result[part] = BENCHES[part](args, budget)
        result[part]["wall_seconds"] = time.perf_counter() - t0
        logger.info("part %s: done in %.1f s", part, result[part]["wall_seconds"])
    result["targets"] = evaluate_targets(result, args)
    return result


# ---------------------------------------------------------------------------------------------- report
def vocab_label(vocab: int) -> str:
    return f"{vocab // 1024}K" if vocab >= 1024 and vocab % 1024 == 0 else str(vocab)


def rate_label(rate: float) -> str:
    return f"{100 * rate:g}%"


def per_second(value: float) -> str:
    """A rate as the paper prints it: 4.3K, 1.25M."""
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    if value >= 1e3:
        return f"{value / 1e3:.{1 if value < 1e4 else 0}f}K"
    return f"{value:.0f}"


def mode_label(mode: str, part: Dict[str, object]) -> str:
    return {"full": "full softmax", "sampled": f"sampled {rate_label(part['sample_rate'])}",
            "chunked": f"chunked exact ({part['chunk']})"}[mode]


def headline(result: Dict[str, object]) -> str:
    cfg = result["config"]
    how = f"{cfg['dtype']} autocast" if result["autocast"] else "fp32"
    return f"{result['device_name']}, torch {cfg['torch']}, {how}"


def speed_columns(part: Dict[str, object]) -> List[tuple]:
    """The last columns of the speed tables (parts a and b): tokens/s (min-max) and the ratio to tied."""
    return [("tokens/s (min-max)", ">30", lambda r: Timing.of(r).show_rate(part["tokens"], ".0f")),
            ("vs tied", ">9", lambda r: f"{r['vs_tied']:.2f}x")]


def report(result: Dict[str, object]) -> None:
    print(f"\nbench_gpu on {headline(result)}; median (min-max) of the timed rounds")
    if "layers" in result:
        part = result["layers"]
        print(f"\na. Output layer + loss, training step, {part['tokens']} tokens, d = dh = {part['dim']}, "
              f"{part['rounds']} rounds: tokens/s (min-max), x tied at the same |V| and scoring")
        print_table([("layer", "<11", lambda r: r["layer"]), ("eq.", "<12", lambda r: r["equation"]),
                     ("|V|", ">7", lambda r: vocab_label(r["vocab"])), "  ",
                     ("scoring", "<22", lambda r: mode_label(r["mode"], part)), *speed_columns(part)], part["rows"])
    if "table4" in result:
        part = result["table4"]
        print(f"\nb. Table 4: {part['arch']} d = {part['dim']}, |V| = {part['vocab']}, whole training step (Adam), "
              f"{part['sentences']} sentences, {part['tokens']} target tokens, {part['rounds']} rounds")
        print_table([("model", "<11", lambda r: r["model"]), ("paper", "<11", lambda r: r["paper_model"]),
                     ("scored", ">8", lambda r: rate_label(r["rate"])), *speed_columns(part)], part["rows"])
    if "exact" in result:
        part = result["exact"]
        print(f"\nc. Exact softmax, every output layer, training step, {part['tokens']} tokens, d = dh = {part['dim']}, "
              f"--vocab-chunk-size {part['chunk']}, {part['rounds']} rounds; peak: memory allocated above the inputs "
              f"(CUDA only); ratios to the plain path with parameters of the same dtype; loss against fp64")
        print_table([("layer", "<13", lambda r: r["layer"]), ("|V|", ">7", lambda r: vocab_label(r["vocab"])), "  ",
                     ("implementation", "<16", lambda r: r["impl"]),
                     ("ms/step (min-max)", ">26", lambda r: Timing.of(r).show(1000, ".2f")),
                     ("peak MiB", ">10", lambda r: fmt(r["peak_mib"], ".0f")),
                     ("time/plain", ">11", lambda r: f"{r['time_vs_plain']:.2f}x"),
                     ("mem/plain", ">10", lambda r: fmt(r["memory_vs_plain"], ".3f", "x")),
                     ("loss/fp64-1", ">12", lambda r: f"{r['loss_vs_fp64']:.1e}")], part["rows"])


def fmt(value: Optional[float], spec: str, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{suffix}"


def markdown(result: Dict[str, object]) -> List[str]:
    """The rows of docs/gpu.md's speed tables, as Markdown: one table per part run."""
    cfg = result["config"]
    lines = [f"<!-- benchmarks/bench_gpu.py on {headline(result)}, {cfg['time_budget_s']} s budget, "
             f"{result['wall_seconds']:.0f} s -->"]
    if "layers" in result:
        part = result["layers"]
        modes = [mode_label(m, part) for m in MODES]
        lines += ["", f"Output layer + loss, training step, {part['tokens']} target tokens, d = dh = {part['dim']}: "
                      f"tokens/s (x tied at the same \\|V\\| and scoring), median of {part['rounds']} rounds", "",
                  "| layer | eq. | \\|V\\| | " + " | ".join(modes) + " |", "|---|---|---|" + "---|" * len(modes)]
        cells = {(r["layer"], r["vocab"], r["mode"]): r for r in part["rows"]}
        for vocab in dict.fromkeys(r["vocab"] for r in part["rows"]):
            for name in dict.fromkeys(r["layer"] for r in part["rows"]):
                row = cells[(name, vocab, MODES[0])]
                lines.append(f"| {name} | {row['equation']} | {vocab_label(vocab)} | " + " | ".join(
                    f"{per_second(cells[(name, vocab, m)]['tokens_per_s'])} "
                    f"({cells[(name, vocab, m)]['vs_tied']:.2f}x)" for m in MODES) + " |")
    if "table4" in result:
        part = result["table4"]
        rates = list(dict.fromkeys(r["rate"] for r in part["rows"]))
        lines += ["", f"Table 4: `{part['arch']}` (d = {part['dim']}), \\|V\\| = {part['vocab']}, whole training "
                      f"step, {part['tokens']} target tokens: tokens/s (x tied at the same rate), median of "
                      f"{part['rounds']} rounds", "",
                  "| model | dj | " + " | ".join(rate_label(r) for r in rates) + " |", "|---|---|" + "---|" * len(rates)]
        cells = {(r["model"], r["rate"]): r for r in part["rows"]}
        for name in dict.fromkeys(r["model"] for r in part["rows"]):
            row = cells[(name, rates[0])]
            lines.append(f"| {row['paper_model']} ({row['output_layer']}) | {row['joint_dim'] or '-'} | " + " | ".join(
                f"{per_second(cells[(name, r)]['tokens_per_s'])} ({cells[(name, r)]['vs_tied']:.2f}x)"
                for r in rates) + " |")
    if "exact" in result:
        part = result["exact"]
        lines += ["", f"Exact softmax, training step (output layer + loss), {part['tokens']} target tokens, d = dh = "
                      f"{part['dim']}, `--vocab-chunk-size {part['chunk']}`: fp32 parameters under {cfg['dtype']} "
                      f"autocast (`--amp`) and {part['half']} parameters; median of {part['rounds']} rounds; peak: "
                      "memory allocated above the inputs; ratios to the plain path of the same parameters", "",
                  "| layer | \\|V\\| | implementation | ms per step | peak MiB | time x plain | memory x plain | loss vs fp64 |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in part["rows"]:
            lines.append(f"| {r['layer']} | {vocab_label(r['vocab'])} | {r['impl']} | {1000 * r['seconds_median']:.2f} | "
                         f"{fmt(r['peak_mib'], '.0f')} | {r['time_vs_plain']:.2f}x | "
                         f"{fmt(r['memory_vs_plain'], '.3f', 'x')} | {r['loss_vs_fp64']:.1e} |")
    return lines


def write_markdown(path: str, result: Dict[str, object]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(markdown(result)) + "\n")
    logger.info("wrote %s", path)


def plot(result: Dict[str, object], path: str) -> None:
    from fairseq_joint.plots import figure

    panels = [p for p in PARTS if p in result]
    height = max(4.5, 0.18 * max(len(result[p]["rows"]) for p in panels))
    with figure(path, 1, len(panels), figsize=(6 * len(panels), height), squeeze=False) as (fig, axes):
        for ax, part in zip(axes[0], panels):
            rows = result[part]["rows"]
            if part == "layers":
                labels = [f"{r['layer']} {vocab_label(r['vocab'])} {r['mode']}" for r in rows]
            elif part == "table4":
                labels = [f"{r['model']} {rate_label(r['rate'])}" for r in rows]
            else:
                labels = [f"{r['layer']} {vocab_label(r['vocab'])} {r['impl']}" for r in rows]
            tokens = result[part]["tokens"]
            bars_with_spread(ax, labels, [Timing.of(r) for r in rows], lambda s, n=tokens: n / s)
            ax.tick_params(axis="y", labelsize=6)
            ax.set_xlabel("tokens / s (median, min-max)")
            ax.set_title(part)
        fig.suptitle(headline(result), fontsize=9)


# ---------------------------------------------------------------------------------------------- CLI
QUICK = dict(device="cpu", vocabs=[256], tokens=64, dim=16, joint_dims=[16, 32], exact_joint_dims=[16, 32], chunk=64,
             repeats=3, time_budget_s=60)


def check(args) -> Optional[str]:
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        return f"--device {args.device}: CUDA is not available to this torch ({torch.__version__}); use --device cpu"
    if not 0 < args.sample_rate < 1:
        return f"--sample-rate must be in (0, 1), got {args.sample_rate}"
    if any(not 0 < r <= 1 for r in args.table4_rates):
        return f"--table4-rates must lie in (0, 1], got {args.table4_rates}"
    if len(set(args.parts)) < len(args.parts):
        return f"--parts: name each part once, got {' '.join(args.parts)}"
    if not math.isfinite(args.time_budget_s):
        return f"--time-budget-s must be a finite number of seconds, got {args.time_budget_s}"
    if "table4" in args.parts and not runs_lstm(args.device, args.dtype):
        return (f"--dtype {args.dtype} on {device_name(torch.device(args.device))}: this CPU's oneDNN has no "
                f"{args.dtype} LSTM, which part table4 (joint_lstm_wmt17) runs: give --dtype fp32, or --parts without "
                "table4")
    return None


def parse(argv=None):
    p = parser(__doc__)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="torch device")
    p.add_argument("--dtype", choices=list(DTYPES), default="bf16", help="autocast dtype (fp32: no autocast)")
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="the parts to run, in this order")
    p.add_argument("--vocabs", type=int, nargs="+", default=[32768, 131072],
                   help="|V| of the output-layer and exact parts; Table 4 at the largest")
    p.add_argument("--tokens", type=int, default=4096, help="target tokens per step")
    p.add_argument("--dim", type=int, default=512, help="d = dh (and the LSTM's sizes in Table 4)")
    p.add_argument("--joint-dims", "--joint-dim", type=int, nargs="+", default=[512, 2048, 4096],
                   help="dj of the joint layers (the first is held to the vs-tied target)")
    p.add_argument("--sample-rate", type=float, default=0.25, help="|V'| / |V| of the sampled scoring (part a)")
    p.add_argument("--table4-rates", type=float, nargs="+", default=[0.5, 0.25, 0.05],
                   help="sample rates of Table 4 (the paper's 50/25/5%%)")
    p.add_argument("--chunk", type=int, default=8192, help="--vocab-chunk-size of the chunked exact softmax")
    p.add_argument("--exact-joint-dims", type=int, nargs="+", default=[512, 2048],
                   help="dj of the joint layers of the exact part (c)")
    p.add_argument("--repeats", type=int, default=10, help="timed rounds per part at most (at least 3)")
    p.add_argument("--time-budget-s", type=float, default=360.0,
                   help="seconds for the whole run; each part's rounds are bounded by its share of what is left")
    p.add_argument("--seed", type=int, default=1, help="random seed of weights, features and targets")
    p.add_argument("--markdown", metavar="FILE", help="write the Markdown rows of docs/gpu.md's speed tables to FILE")
    args = parse_args(p, argv, QUICK, positive=("vocabs", "tokens", "dim", "joint_dims", "exact_joint_dims", "chunk",
                                                 "repeats", "time_budget_s"), check=check)
    if args.markdown:
        args.markdown = os.path.abspath(args.markdown)
    return args


if __name__ == "__main__":
    arguments = parse()
    finished = run_benchmark(arguments, run, report, plot)
    if arguments.markdown:
        write_markdown(arguments.markdown, finished)
