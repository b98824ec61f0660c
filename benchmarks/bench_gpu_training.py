#!/usr/bin/env python
"""Whole-model training speed: fairseq-train's own loop, target tokens/s and model FLOPs utilization, per model.

Every case is one ``fairseq-train`` run in a fresh process (``fairseq_cli.train``, with the plugin through
``--user-dir`` or, for fairseq alone, without it) on a synthetic binarized corpus written here (Zipf-distributed
words, sentence lengths uniform in [``--min-len``, ``--max-len``], one dictionary of |V| symbols per side), timed by a
wrapper of fairseq's ``Trainer.train_step`` in that process: the first ``--warmup-updates`` updates are not timed,
then ``--updates`` updates are (the device synchronized at both ends of the window; nothing in between), then
``--profile-updates`` updates run under ``torch.profiler``. With ``--rounds N`` every case runs N times, one run of
each a round in the harness's rotating order, and its row is its median run, every run's tokens/s beside it. Cases,
at each |V| of ``--vocabs``:

* ``fairseq``: fairseq's own ``--arch`` (``transformer_wmt_en_de`` by default; input and output embeddings tied:
  ``--share-decoder-input-output-embed``) without the plugin, fairseq's ``label_smoothed_cross_entropy``;
* ``fairseq+plugin``: the same command with ``--user-dir fairseq_joint`` (what loading the plugin costs);
* ``tied``, ``joint-DJ`` (each dj of ``--joint-dims``): ``joint_<arch>`` with that ``--output-layer``, the full
  softmax (``label_smoothed_cross_entropy``);
* ``tied exact``, ``joint-DJ exact``: the same with the exact softmax in chunks (``--criterion
  sampled_cross_entropy --vocab-chunk-size --chunk``: the fused kernels on a GPU).

Precision: ``--precision amp`` (default: fairseq's ``--amp``, which fairseq runs without the plugin too), ``bf16`` or
``fp16`` (fairseq's flags), ``fp32``. Model FLOPs per target token are counted, not estimated: one untimed update runs
under ``torch.utils.flop_counter.FlopCounterMode`` (forward and backward GEMMs, attention included); MFU is that
count times tokens/s over the peak of a bf16 (CPU: fp32) 8192³ matmul measured in the parent process (``--peak-tflops``
gives a nominal peak instead). The profile lists each case's top operations by device time (CPU time on the CPU) and
the share of the profiled window the device was busy.

Decoding (``--decode-cases``, ``tied`` and ``joint-DJ`` by default, at the largest |V|): beam search (``--beam``) of
``fairseq-generate`` on the corpus's ``--decode-sentences`` validation sentences with a model trained for
``--warmup-updates`` updates (the same command, saved), every hypothesis forced to ``--decode-len`` tokens
(``--min-len`` = ``--max-len-b``, so that untrained models decode the same amount): sentences/s as fairseq-generate
reports them (its model time, not loading), and the ratio to ``tied``; the joint layers decode with their eval cache of
σ(E Uᵀ + b_u).

Targets (on a CUDA GPU): fairseq's model with the plugin loaded ≥ 150K target tokens/s, and at most 3% slower than
fairseq alone; joint at the first dj ≥ 0.9x tied; the exact chunked softmax ≥ 0.8x the full softmax of the same layer,
at each |V|.

    python benchmarks/bench_gpu_training.py --json training.json --markdown training.md   # on the GPU
    python benchmarks/bench_gpu_training.py --quick                                       # tiny sizes on the CPU
"""

import argparse
import logging
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from bench_harness import main as run_benchmark
from bench_harness import parse_args, parser, print_table, round_order, run_fresh, target, write_json

logger = logging.getLogger("bench_gpu_training")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER_DIR = os.path.join(REPO, "fairseq_joint")
PRECISIONS = {"amp": ["--amp"], "bf16": ["--bf16"], "fp16": ["--fp16"], "fp32": []}
#: fairseq's dictionaries start with these four symbols
SPECIALS = 4
TARGET_PLUGIN_TOKENS_PER_S = 150_000
TARGET_PLUGIN_COST = 0.03
TARGET_JOINT_VS_TIED = 0.9
TARGET_EXACT_VS_FULL = 0.8


# ---------------------------------------------------------------------------------------------- corpus
def write_corpus(folder: str, vocab: int, sentences: int, min_len: int, max_len: int, seed: int,
                 valid: int = 64) -> str:
    """A binarized translation corpus src→tgt in ``folder`` as fairseq-preprocess writes it (dict.{src,tgt}.txt,
    {train,valid}.src-tgt.{src,tgt}.{bin,idx}): ``sentences`` training pairs (and ``valid`` validation pairs) of
    Zipf-distributed word ids, every one of the |V| = ``vocab`` symbols in the dictionaries (counts by Zipf's law)."""
    from fairseq.data import indexed_dataset

    os.makedirs(folder, exist_ok=True)
    words = vocab - SPECIALS
    counts = np.maximum(1, (1e7 / np.arange(1, words + 1))).astype(np.int64)
    rng = np.random.default_rng(seed)
    probs = 1.0 / np.arange(1, words + 1)
    probs /= probs.sum()
    for side in ("src", "tgt"):
        with open(os.path.join(folder, f"dict.{side}.txt"), "w", encoding="utf-8") as f:
            f.writelines(f"w{i} {c}\n" for i, c in enumerate(counts))
        for split, n in (("train", sentences), ("valid", valid)):
            prefix = os.path.join(folder, f"{split}.src-tgt.{side}")
            builder = indexed_dataset.make_builder(prefix + ".bin", "mmap", vocab_size=vocab)
            lengths = rng.integers(min_len, max_len + 1, size=n)
            ids = rng.choice(words, size=int(lengths.sum()), p=probs) + SPECIALS
            eos = 2  # fairseq's </s>
            start = 0
            for length in lengths:
                builder.add_item(torch.from_numpy(np.append(ids[start:start + length], eos).astype(np.int32)))
                start += length
            builder.finalize(prefix + ".idx")
    return folder


# ---------------------------------------------------------------------------------------------- cases
def cases(args) -> List[Dict[str, object]]:
    """Every run: ``{name, vocab, plugin, flags}``."""
    out = []
    joint_arch = f"joint_{args.arch}"
    full = ["--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"]
    exact = ["--criterion", "sampled_cross_entropy", "--label-smoothing", "0.1",
             "--vocab-chunk-size", str(args.chunk)]
    layers = [("tied", ["--output-layer", "tied"])] + [
        (f"joint-{dj}", ["--output-layer", "joint", "--joint-dim", str(dj)]) for dj in args.joint_dims]
    for vocab in args.vocabs:
        fairseq = ["--arch", args.arch, "--share-decoder-input-output-embed"] + full
        out.append({"name": "fairseq", "vocab": vocab, "plugin": False, "flags": fairseq})
        out.append({"name": "fairseq+plugin", "vocab": vocab, "plugin": True, "flags": fairseq})
        for name, layer in layers:
            out.append({"name": name, "vocab": vocab, "plugin": True, "flags": ["--arch", joint_arch] + layer + full})
            out.append({"name": f"{name} exact", "vocab": vocab, "plugin": True,
                        "flags": ["--arch", joint_arch] + layer + exact})
    return [c for c in out if not args.cases or c["name"] in args.cases]


def decode_cases(args) -> List[Dict[str, object]]:
    """The decoding runs: ``--decode-cases`` (layers of :func:`cases`, full softmax) at the largest |V|."""
    full = {(c["name"], c["vocab"]): c for c in cases(argparse.Namespace(**dict(vars(args), cases=None)))}
    return [dict(full[(name, max(args.vocabs))], decode=True) for name in args.decode_cases]


def train_command(case: Dict[str, object], data: str, args) -> List[str]:
    """fairseq-train's arguments of ``case`` (the program name first, as fairseq-train's console script sets it)."""
    cmd = ["fairseq-train", data] + (["--user-dir", USER_DIR] if case["plugin"] else [])
    cmd += case["flags"] + PRECISIONS[args.precision]
    cmd += ["--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "5e-4", "--lr-scheduler", "inverse_sqrt",
            "--warmup-updates", "100", "--dropout", "0.1", "--max-tokens", str(args.max_tokens),
            "--max-update", str(args.warmup_updates + args.updates + args.profile_updates + 1),
            "--seed", str(args.seed), "--disable-validation", "--log-interval", "1000",
            "--num-workers", str(args.num_workers), "--no-progress-bar"]
    cmd += ["--save-dir", case["save_dir"], "--no-epoch-checkpoints"] if case.get("save_dir") else ["--no-save"]
    if args.quick_model:  # tiny sizes for a smoke test on the CPU
        cmd += ["--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "32",
                "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
                "--encoder-attention-heads", "2", "--decoder-attention-heads", "2"]
    if not torch.cuda.is_available():
        cmd += ["--cpu"]
    return cmd


# ---------------------------------------------------------------------------------------------- one run (child)
class StepClock:
    """A wrapper of fairseq's ``Trainer.train_step``: counts the updates; at update ``flop_step`` counts the model's
    FLOPs; times updates (warmup, warmup + updates]; profiles the next ``profile`` updates."""

    def __init__(self, warmup: int, updates: int, profile: int, device: torch.device):
        self.warmup, self.updates, self.profile, self.device = warmup, updates, profile, device
        self.step, self.tokens, self.t0, self.t1 = 0, 0, None, None
        self.flops = self.flop_tokens = None
        self.profiler = None
        self.profile_start = None
        self.profile_seconds = None

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def wrap(self, original):
        def train_step(trainer, samples, *args, **kwargs):
            self.step += 1
            ntokens = sum(int(s["ntokens"]) for s in samples if s)
            if self.step == self.warmup:  # the last untimed update: count its FLOPs
                from torch.utils.flop_counter import FlopCounterMode

                with FlopCounterMode(display=False) as counter:
                    out = original(trainer, samples, *args, **kwargs)
                self.flops, self.flop_tokens = counter.get_total_flops(), ntokens
                return out
            if self.step == self.warmup + 1:
                self.sync()
                self.t0 = time.perf_counter()
            first_profiled = self.warmup + self.updates + 1
            if self.step == first_profiled and self.profile:
                self.sync()
                self.profiler = torch.profiler.profile(activities=self.activities())
                self.profiler.__enter__()
                self.profile_start = time.perf_counter()
            out = original(trainer, samples, *args, **kwargs)
            if self.warmup < self.step <= self.warmup + self.updates:
                self.tokens += ntokens
            if self.step == self.warmup + self.updates:
                self.sync()
                self.t1 = time.perf_counter()
            if self.profiler is not None and self.step == first_profiled + self.profile - 1:
                self.sync()
                self.profile_seconds = time.perf_counter() - self.profile_start
                self.profiler.__exit__(None, None, None)
            return out
        return train_step

    def activities(self) -> list:
        acts = [torch.profiler.ProfilerActivity.CPU]
        if self.device.type == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        return acts

    def profile_summary(self, top: int) -> Optional[Dict[str, object]]:
        """The profiled updates' top operations by device (CUDA) or CPU self time, and the device's busy share."""
        if self.profiler is None or self.profile_seconds is None:
            return None
        events = self.profiler.key_averages()
        cuda = self.device.type == "cuda"

        def self_time(e) -> float:
            return (getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)) if cuda \
                else e.self_cpu_time_total

        rows = sorted(events, key=self_time, reverse=True)[:top]
        busy = sum(self_time(e) for e in events) / 1e6 if cuda else None  # µs of kernels → s
        return {"seconds": self.profile_seconds, "updates": self.profile, "clock": "device" if cuda else "cpu",
                "device_busy": busy / self.profile_seconds if busy is not None else None,
                "top": [{"op": e.key, "self_ms": self_time(e) / 1e3 / self.profile, "calls": e.count // self.profile}
                        for e in rows]}


def decode(args, case: Dict[str, object]) -> Dict[str, object]:
    """Train ``case`` for ``--warmup-updates`` updates, save it, and time fairseq-generate's beam search with it."""
    import re
    import subprocess

    with tempfile.TemporaryDirectory(prefix="bench_decode_") as save_dir:
        train = train_command(dict(case, save_dir=save_dir), case["data"], args)
        train[train.index("--max-update") + 1] = str(args.warmup_updates)
        subprocess.run([sys.executable, "-m", "fairseq_cli.train", *train[1:]], check=True, capture_output=True)
        cmd = [sys.executable, "-m", "fairseq_cli.generate", case["data"], "--path",
               os.path.join(save_dir, "checkpoint_last.pt"), "--gen-subset", "valid", "--beam", str(args.beam),
               "--max-len-a", "0", "--max-len-b", str(args.decode_len), "--min-len", str(args.decode_len),
               "--batch-size", str(args.decode_batch), "--seed", str(args.seed)]
        cmd += (["--user-dir", USER_DIR] if case["plugin"] else []) + ([] if torch.cuda.is_available() else ["--cpu"])
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"fairseq-generate failed:\n{proc.stderr[-3000:]}")
    found = re.search(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s \(([\d.]+) sentences/s",
                      proc.stdout + proc.stderr)
    if found is None:
        raise SystemExit(f"fairseq-generate printed no 'Translated ...' line:\n{(proc.stdout + proc.stderr)[-3000:]}")
    sentences, tokens, seconds, rate = found.groups()
    return {"sentences": int(sentences.replace(",", "")), "tokens": int(tokens.replace(",", "")),
            "seconds": float(seconds), "sentences_per_s": float(rate)}


def child(args, case: Dict[str, object]) -> Dict[str, object]:
    """One fairseq-train run of ``case`` in this fresh process (or, for a decoding case, a short training run saved and
    fairseq-generate with it); its figures."""
    if case.get("decode"):
        return decode(args, case)
    from fairseq import trainer as fairseq_trainer

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    clock = StepClock(args.warmup_updates, args.updates, args.profile_updates, device)
    fairseq_trainer.Trainer.train_step = clock.wrap(fairseq_trainer.Trainer.train_step)
    sys.argv = train_command(case, case["data"], args)
    from fairseq_cli import train

    train.cli_main()
    if clock.t1 is None:
        raise SystemExit(f"fairseq-train stopped after {clock.step} updates, before the timed window ended: "
                         "give a larger corpus (--sentences) or fewer --updates")
    seconds = clock.t1 - clock.t0
    return {"tokens": clock.tokens, "seconds": seconds, "tokens_per_s": clock.tokens / seconds,
            "updates_per_s": args.updates / seconds, "flops_per_token": clock.flops / max(clock.flop_tokens, 1),
            "profile": clock.profile_summary(args.profile_top)}


# ---------------------------------------------------------------------------------------------- the run (parent)
def matmul_peak_tflops(device: torch.device, size: int = 8192, reps: int = 10) -> float:
    """TFLOP/s of a ``size``³ matmul, bf16 on a GPU (fp32 on the CPU), median of ``reps`` after a warm-up."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    times = []
    for i in range(reps + 1):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i:
            times.append(time.perf_counter() - t0)
    return 2 * size ** 3 / sorted(times)[len(times) // 2] / 1e12


def run(args) -> Dict[str, object]:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    peak = args.peak_tflops or matmul_peak_tflops(device, args.peak_size)
    logger.info("peak: %.1f TFLOP/s (%s)", peak, "given" if args.peak_tflops else f"{args.peak_size}³ matmul measured")
    rows, decoding, skipped = [], [], []
    deadline = time.perf_counter() + args.time_budget_s
    with tempfile.TemporaryDirectory(prefix="bench_gpu_training_") as tmp:
        corpora = {v: write_corpus(os.path.join(tmp, str(v)), v, args.sentences, args.min_len, args.max_len, args.seed,
                                   valid=args.decode_sentences) for v in args.vocabs}
        todo = [("train", c) for r in range(args.rounds) for c in round_order(cases(args), r)]
        todo += [("decode", c) for c in decode_cases(args)]
        for i, (kind, case) in enumerate(todo, 1):
            what = f"{'decoding ' if kind == 'decode' else ''}{case['name']} |V|={case['vocab']}"
            if time.perf_counter() > deadline:  # the budget is spent: the rest is listed, not run
                skipped.append({"case": what, "why": f"--time-budget-s {args.time_budget_s:g} spent"})
                continue
            t0 = time.perf_counter()
            try:
                figures = run_fresh(__file__, dict(case, data=corpora[case["vocab"]]), vars_of(args))
            except SystemExit as failed:  # one case's failure is reported; the others still run
                skipped.append({"case": what, "why": str(failed)[-2000:]})
                logger.error("%d/%d %s failed:\n%s", i, len(todo), what, str(failed)[-2000:])
                continue
            if kind == "decode":
                decoding.append({"name": case["name"], "vocab": case["vocab"], **figures})
                logger.info("%d/%d %s: %.1f sentences/s (%.0f s)", i, len(todo), what, figures["sentences_per_s"],
                            time.perf_counter() - t0)
            else:
                rows.append({**{k: case[k] for k in ("name", "vocab", "plugin")}, "flags": " ".join(case["flags"]),
                             **figures})
                logger.info("%d/%d %s: %.0f target tokens/s (%.0f s)", i, len(todo), what, figures["tokens_per_s"],
                            time.perf_counter() - t0)
            if args.json:  # what is measured so far survives a run cut short
                write_json(args.json + ".partial", {"rows": rows, "decoding": decoding, "skipped": skipped})
    rows = median_runs(rows)
    ratios(rows, args)
    for r in rows:
        r["mfu"] = r["model_flops_per_token"] * r["tokens_per_s"] / (peak * 1e12)
    tied = {r["vocab"]: r["sentences_per_s"] for r in decoding if r["name"] == "tied"}
    for r in decoding:
        r["vs_tied"] = r["sentences_per_s"] / tied[r["vocab"]] if r["vocab"] in tied else None
    return {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU", "peak_tflops": peak,
            "peak_given": bool(args.peak_tflops), "rows": rows, "decoding": decoding, "skipped": skipped,
            "targets": targets(rows, args, device)}


def median_runs(runs: List[Dict[str, object]]) -> List[Dict[str, object]]:
    """One row per case of its ``--rounds`` runs: the run whose tokens/s is the median (the lower of the two middle
    ones for an even count), with every run's tokens/s beside it (``tokens_per_s_all``, in the order they ran)."""
    by_case: Dict[tuple, List[Dict[str, object]]] = {}
    for r in runs:
        by_case.setdefault((r["name"], r["vocab"]), []).append(r)
    rows = []
    for done in by_case.values():
        rates = [r["tokens_per_s"] for r in done]
        median = statistics.median_low(rates)
        rows.append({**next(r for r in done if r["tokens_per_s"] == median), "tokens_per_s_all": rates})
    return rows


def vars_of(args) -> Dict[str, object]:
    return {k: v for k, v in vars(args).items() if k not in ("json", "plot", "child", "markdown")}


def ratios(rows: List[Dict[str, object]], args) -> None:
    """``vs``: each row's tokens/s over its reference's (fairseq alone for fairseq+plugin, tied for the joint layers'
    full softmax, the same layer's full softmax for its exact chunked softmax); ``model_flops_per_token``: the FLOPs
    of the model, counted on its full-softmax run (the exact path's recomputed GEMM is not the model's work)."""
    by = {(r["name"], r["vocab"]): r for r in rows}
    for r in rows:
        name = r["name"]
        ref = ("fairseq" if name == "fairseq+plugin" else name[: -len(" exact")] if name.endswith(" exact")
               else "tied" if name.startswith("joint-") else None)
        ran = by.get((ref, r["vocab"]))
        r["reference"] = ref if ran else None
        r["vs"] = r["tokens_per_s"] / ran["tokens_per_s"] if ran else None
        r["model_flops_per_token"] = (ran if ran and name.endswith(" exact") else r)["flops_per_token"]


def targets(rows: List[Dict[str, object]], args, device: torch.device) -> List[Dict[str, object]]:
    out = []
    if device.type != "cuda":
        return out  # the targets are a GPU's
    first = f"joint-{args.joint_dims[0]}"
    for r in rows:
        v = f"|V|={r['vocab']}"
        if r["name"] == "fairseq+plugin":
            out.append(target(f"{args.arch} with the plugin loaded, {v}: target tokens/s", r["tokens_per_s"],
                              TARGET_PLUGIN_TOKENS_PER_S))
            if r["vs"] is not None:
                out.append(target(f"{args.arch}, {v}: tokens/s with the plugin / without", r["vs"],
                                  1 - TARGET_PLUGIN_COST))
        elif r["vs"] is None:
            continue
        elif r["name"] == first:
            out.append(target(f"{first} / tied, {v}, full softmax", r["vs"], TARGET_JOINT_VS_TIED))
        elif r["name"].endswith(" exact"):
            out.append(target(f"{r['name']} / full softmax, {v}", r["vs"], TARGET_EXACT_VS_FULL))
    return out


# ---------------------------------------------------------------------------------------------- report
def report(result: Dict[str, object]) -> None:
    cfg = result["config"]
    print(f"\nfairseq-train on {result['device']}, torch {cfg['torch']}, --{cfg['precision']}, {cfg['max_tokens']} "
          f"tokens a batch, updates {cfg['warmup_updates'] + 1}-{cfg['warmup_updates'] + cfg['updates']} timed, the "
          f"median of {cfg['rounds']} run(s) a case; MFU "
          f"against {result['peak_tflops']:.3g} TFLOP/s ({'given' if result['peak_given'] else 'measured matmul'})")
    print_table([("model", "<16", lambda r: r["name"]), ("|V|", ">7", lambda r: str(r["vocab"])),
                 ("tokens/s", ">10", lambda r: f"{r['tokens_per_s']:.0f}"),
                 ("runs: min-max", ">20", lambda r: runs_cell(r, cfg["rounds"])),
                 ("updates/s", ">10", lambda r: f"{r['updates_per_s']:.2f}"),
                 ("GFLOP/token", ">12", lambda r: f"{r['model_flops_per_token'] / 1e9:.3g}"),
                 ("MFU", ">7", lambda r: f"{100 * r['mfu']:.1f}%"),
                 ("vs", ">16", lambda r: f"{r['vs']:.2f}x {r['reference']}" if r["vs"] else ""),
                 ("busy", ">6", lambda r: busy(r))], result["rows"])
    for skip in result["skipped"]:
        print(f"\nnot measured: {skip['case']}: {skip['why']}")
    if result["decoding"]:
        print(f"\nbeam search, fairseq-generate --beam {cfg['beam']}, {cfg['decode_sentences']} sentences of "
              f"{cfg['decode_len']} tokens, batch {cfg['decode_batch']}")
        print_table([("model", "<16", lambda r: r["name"]), ("|V|", ">7", lambda r: str(r["vocab"])),
                     ("sentences/s", ">12", lambda r: f"{r['sentences_per_s']:.1f}"),
                     ("vs tied", ">8", lambda r: f"{r['vs_tied']:.2f}x" if r["vs_tied"] else "")], result["decoding"])
    for r in result["rows"]:
        profile = r.get("profile")
        if not profile:
            continue
        print(f"\n{r['name']} |V|={r['vocab']}: top operations by {profile['clock']} self time, ms per update "
              f"({profile['updates']} profiled updates)")
        for op in profile["top"]:
            print(f"  {op['self_ms']:9.3f} ms  {op['calls']:6d} calls  {op['op'][:90]}")


def spread(row: Dict[str, object]) -> tuple:
    """The lowest and highest tokens/s of a case's runs."""
    return min(row["tokens_per_s_all"]), max(row["tokens_per_s_all"])


def runs_cell(row: Dict[str, object], rounds: int) -> str:
    """How many runs a row's median is of, with their spread: ``3: 70-90``, or ``2 of 3: 70-90`` for a case the time
    budget cut short (its median is of fewer runs than the others'); empty for one run of one."""
    runs = row["tokens_per_s_all"]
    if rounds == 1:
        return ""
    count = str(len(runs)) if len(runs) == rounds else f"{len(runs)} of {rounds}"
    return f"{count}: " + "{:.0f}-{:.0f}".format(*spread(row))


def vocab_label(vocab: int) -> str:
    return f"{vocab // 1024}K" if vocab % 1024 == 0 else str(vocab)


def busy(row: Dict[str, object]) -> str:
    profile = row.get("profile") or {}
    share = profile.get("device_busy")
    return "" if share is None else f"{100 * share:.0f}%"


def markdown(result: Dict[str, object]) -> List[str]:
    cfg = result["config"]
    median = f", the median of {cfg['rounds']} runs a case" if cfg["rounds"] > 1 else ""
    lines = [f"<!-- benchmarks/bench_gpu_training.py on {result['device']}, torch {cfg['torch']}, --{cfg['precision']}, "
             f"{result['wall_seconds']:.0f} s -->", "",
             f"Whole-model training, `{cfg['arch']}` and its joint_ counterpart, fairseq-train --{cfg['precision']}, "
             f"{cfg['max_tokens']} tokens a batch, {cfg['updates']} timed updates{median}; MFU: model FLOPs "
             f"(counted) per second over {result['peak_tflops']:.3g} TFLOP/s", "",
             "| model | \\|V\\| | target tokens/s | MFU | GPU busy | vs |", "|---|---|---|---|---|---|"]
    for r in result["rows"]:
        vs = f"{r['vs']:.2f}x {r['reference']}" if r["vs"] else "-"
        lines.append(f"| {r['name']} | {vocab_label(r['vocab'])} | {r['tokens_per_s'] / 1e3:.1f}K | {100 * r['mfu']:.1f}% "
                     f"| {busy(r) or '-'} | {vs} |")
    cut = [f"{r['name']} |V|={r['vocab']} ({len(r['tokens_per_s_all'])})" for r in result["rows"]
           if len(r["tokens_per_s_all"]) < cfg["rounds"]]
    if cut:
        lines += ["", f"Median of fewer than {cfg['rounds']} runs (the time budget was spent): {', '.join(cut)}"]
    if result["skipped"]:
        lines += [""] + [f"Not measured: {skip['case']} ({skip['why'].splitlines()[-1][:120]})"
                         for skip in result["skipped"]]
    if result["decoding"]:
        lines += ["", f"Beam search, fairseq-generate --beam {cfg['beam']}, {cfg['decode_sentences']} sentences forced to "
                      f"{cfg['decode_len']} tokens, batch {cfg['decode_batch']}: sentences/s (model time)", "",
                  "| model | \\|V\\| | sentences/s | vs tied |", "|---|---|---|---|"]
        for r in result["decoding"]:
            vs = f"{r['vs_tied']:.2f}x" if r["vs_tied"] else "-"
            lines.append(f"| {r['name']} | {vocab_label(r['vocab'])} | {r['sentences_per_s']:.1f} | {vs} |")
    return lines


def plot(result: Dict[str, object], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    fig, ax = plt.subplots(figsize=(7, max(3.0, 0.3 * len(rows))))
    labels = [f"{r['name']} {vocab_label(r['vocab'])}" for r in rows]
    ax.barh(labels, [r["tokens_per_s"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("target tokens / s")
    ax.set_title(f"fairseq-train on {result['device']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------- CLI
QUICK = dict(vocabs=[512], joint_dims=[32], sentences=400, min_len=4, max_len=12, max_tokens=256, warmup_updates=2,
             updates=3, profile_updates=1, chunk=128, quick_model=True, peak_size=512, precision="fp32",
             decode_sentences=16, decode_len=6, decode_batch=8, time_budget_s=300.0)


def check(args) -> Optional[str]:
    if any(v <= SPECIALS for v in args.vocabs):
        return f"--vocabs must exceed the {SPECIALS} special symbols, got {args.vocabs}"
    if args.min_len > args.max_len:
        return f"--min-len {args.min_len} is above --max-len {args.max_len}"
    if args.warmup_updates < 1:
        return f"--warmup-updates must be at least 1 (its last update counts the FLOPs), got {args.warmup_updates}"
    if args.decode_cases is None:
        args.decode_cases = ["tied", f"joint-{args.joint_dims[0]}"]
    names = {c["name"] for c in cases(argparse.Namespace(**dict(vars(args), cases=None)))}
    unknown = sorted((set(args.cases or ()) | set(args.decode_cases)) - names)
    if unknown:
        return f"--cases/--decode-cases: unknown {', '.join(unknown)}; choose from {', '.join(sorted(names))}"
    if args.profile_updates < 0:
        return f"--profile-updates must be >= 0, got {args.profile_updates}"
    if args.peak_tflops is not None and not (math.isfinite(args.peak_tflops) and args.peak_tflops > 0):
        return f"--peak-tflops must be a positive number, got {args.peak_tflops}"
    return None


def parse(argv: Optional[Sequence[str]] = None):
    p = parser(__doc__)
    p.add_argument("--arch", default="transformer_wmt_en_de", help="fairseq's architecture (joint_ARCH for the plugin)")
    p.add_argument("--vocabs", type=int, nargs="+", default=[32768, 131072], help="|V| of source and target")
    p.add_argument("--joint-dims", type=int, nargs="+", default=[512], help="dj of the joint cases")
    p.add_argument("--precision", choices=list(PRECISIONS), default="amp", help="fairseq's precision flag")
    p.add_argument("--max-tokens", type=int, default=8192, help="fairseq's --max-tokens")
    p.add_argument("--chunk", type=int, default=8192, help="--vocab-chunk-size of the exact cases")
    p.add_argument("--sentences", type=int, default=30000, help="training pairs of the synthetic corpus")
    p.add_argument("--min-len", type=int, default=10, help="shortest sentence (tokens)")
    p.add_argument("--max-len", type=int, default=50, help="longest sentence (tokens)")
    p.add_argument("--warmup-updates", type=int, default=10, help="untimed updates first (the last counts FLOPs)")
    p.add_argument("--updates", type=int, default=30, help="timed updates")
    p.add_argument("--profile-updates", type=int, default=3, help="updates profiled after the timed ones (0: none)")
    p.add_argument("--profile-top", type=int, default=12, help="operations listed per profile")
    p.add_argument("--decode-cases", nargs="*", metavar="NAME",
                   help="the models whose beam search is timed (default: tied and joint at the first --joint-dims; "
                        "none given: no decoding)")
    p.add_argument("--decode-sentences", type=int, default=512, help="validation sentences decoded")
    p.add_argument("--decode-len", type=int, default=40, help="tokens every hypothesis is forced to")
    p.add_argument("--decode-batch", type=int, default=128, help="fairseq-generate's --batch-size")
    p.add_argument("--beam", type=int, default=5, help="beam size")
    p.add_argument("--cases", nargs="+", metavar="NAME",
                   help="run these cases only (fairseq, fairseq+plugin, tied, joint-DJ, and each with ' exact')")
    p.add_argument("--num-workers", type=int, default=1, help="fairseq's --num-workers (data loading processes)")
    p.add_argument("--peak-tflops", type=float, help="the device's peak for MFU (default: a measured matmul)")
    p.add_argument("--peak-size", type=int, default=8192, help="size of the measured matmul")
    p.add_argument("--seed", type=int, default=1, help="fairseq's --seed and the corpus's")
    p.add_argument("--rounds", type=int, default=1, help="runs of every training case, one of each case a round in "
                   "the harness's rotating order; a case's row is its median run (every run's tokens/s beside it)")
    p.add_argument("--time-budget-s", type=float, default=420.0,
                   help="no case starts after this many seconds; the cases left are listed as not measured (with "
                        "--rounds, a case cut short is the median of the runs it had, and says how many)")
    p.add_argument("--quick-model", action="store_true", help="1+1 layers of 32 (a smoke test)")
    p.add_argument("--markdown", metavar="FILE", help="write the Markdown table of docs/gpu.md to FILE")
    args = parse_args(p, argv, QUICK, positive=("vocabs", "joint_dims", "max_tokens", "chunk", "sentences", "min_len",
                                                 "updates", "rounds", "peak_size", "decode_sentences", "decode_len",
                                                 "decode_batch", "beam"), check=check)
    if args.markdown:
        args.markdown = os.path.abspath(args.markdown)
    return args


if __name__ == "__main__":
    arguments = parse()
    finished = run_benchmark(arguments, run, report, plot, child=child)
    if finished is not None and arguments.markdown:
        with open(arguments.markdown, "w", encoding="utf-8") as f:
            f.write("\n".join(markdown(finished)) + "\n")
