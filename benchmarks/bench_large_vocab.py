#!/usr/bin/env python
"""Large vocabularies: sampled-softmax speed (Pappas et al. 2018, Table 4 layout) and the memory of the
exact softmax, plain vs chunked (``--vocab-chunk-size``).

1. ``speed``: training-step tokens/s of output layer + loss (forward + backward) for softmax, tied and
   joint (dj ∈ {512, 2048, 4096}) at |V| ∈ {32K, 128K} with 100/50/25/5% of the vocabulary scored
   (uniform negatives, as the paper), side by side in one run (round-robin repetitions, medians after a
   warm-up), absolute and as a ratio to tied at 100%.
2. ``memory``: peak memory and time of joint (dj = 4096) output layer + exact cross-entropy at |V| = 128K,
   plain (T x |V| logits) vs chunked. Method on CPU: each configuration runs in a fresh subprocess; a
   thread samples the process's resident set (/proc/self/statm) every millisecond during forward +
   backward; the peak minus the resident set just before the step (inputs and parameters allocated and
   touched) is what the step added on top of the model.

Targets (issue #3): 25% sampling makes the joint dj=2048 step ≥ 2.5x faster than its full softmax at 32K;
the chunked path needs ≤ 0.25x the plain peak memory at 128K with ≤ 1.3x its time.

    python scripts/benchmark_large_vocab.py [--tokens 1024] [--json out.json]
    python scripts/benchmark_large_vocab.py --quick
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fairseq_joint.modules.chunked_softmax import chunked_cross_entropy  # noqa: E402
from fairseq_joint.modules.output_layers import OutputLayer  # noqa: E402
from fairseq_joint.modules.sampling import CandidateSampler, candidate_logits  # noqa: E402


def make_layer(kind, vocab, dim, joint_dim, seed=0):
    torch.manual_seed(seed)
    E = nn.Embedding(vocab, dim)
    nn.init.normal_(E.weight, 0, dim ** -0.5)  # fairseq's embedding scale: no denormal softmax
    return OutputLayer(kind, vocab, dim, None if kind == "softmax" else E, joint_dim=joint_dim), E


def step_fn(layer, E, tokens, rate, seed=0):
    """One training step of output layer + loss at sample ``rate``; layers are shared across rates."""
    vocab, dim = layer.num_classes, layer.input_dim
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(tokens, dim, generator=g).requires_grad_()
    # Zipf-like targets: a realistic number of distinct positives per batch
    probs = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float64)
    targets = torch.multinomial(probs, tokens, replacement=True, generator=g)
    sampler = CandidateSampler(vocab, "uniform", sample_rate=rate) if rate < 1 else None
    params = list(layer.parameters()) + ([] if layer.output_layer == "softmax" else [E.weight])

    def step():
        for p in params + [h]:
            p.grad = None
        if sampler is None:
            loss = F.cross_entropy(layer(h), targets, reduction="sum")
        else:
            c = sampler.sample(targets, generator=g)
            loss = F.cross_entropy(candidate_logits(layer, h, c), c.targets, reduction="sum")
        loss.backward()
        for p in params + [h]:
            p.grad = None  # free the gradients before the next case runs

    return step


def bench_speed(args):
    cases = {}
    for vocab in args.vocabs:
        torch.manual_seed(0)
        E = nn.Embedding(vocab, args.dim)  # one E per vocabulary, shared by tied and joint
        nn.init.normal_(E.weight, 0, args.dim ** -0.5)  # fairseq's embedding scale: no denormal softmax
        for kind, dj in [("softmax", None), ("tied", None)] + [("joint", d) for d in args.joint_dims]:
            layer = OutputLayer(kind, vocab, args.dim, None if kind == "softmax" else E, joint_dim=dj or args.dim)
            for rate in args.rates:
                name = f"{kind}{'-' + str(dj) if dj else ''}|{vocab}|{rate}"
                cases[name] = step_fn(layer, E, args.tokens, rate)
    times = {k: [] for k in cases}
    for f in cases.values():  # warm-up
        f()
    for r in range(args.reps):
        for k, f in cases.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
        print(f"  round {r + 1}/{args.reps} done", file=sys.stderr, flush=True)
    rows = []
    for k, ts in times.items():
        layer, vocab, rate = k.split("|")
        med = statistics.median(ts)
        rows.append(dict(layer=layer, vocab=int(vocab), rate=float(rate), seconds=med, tokens_per_s=args.tokens / med))
    for row in rows:
        tied = next(r for r in rows if r["layer"] == "tied" and r["vocab"] == row["vocab"] and r["rate"] == 1.0)
        full = next(r for r in rows if r["layer"] == row["layer"] and r["vocab"] == row["vocab"] and r["rate"] == 1.0)
        row["vs_tied_full"] = row["tokens_per_s"] / tied["tokens_per_s"]
        row["speedup_vs_own_full"] = full["seconds"] / row["seconds"]
    return rows


def memory_child(mode, vocab, dim, joint_dim, tokens, chunk):
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    layer, E = make_layer("joint", vocab, dim, joint_dim)
    h = torch.randn(tokens, dim).requires_grad_()
    targets = torch.randint(0, vocab, (tokens,))
    _ = [p.sum().item() for p in layer.parameters()] + [E.weight.sum().item(), h.sum().item()]  # touch pages
    base = _rss()
    peak = [base]
    done = threading.Event()

    def poll():
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.001)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    t0 = time.perf_counter()
    if mode == "plain":
        loss = F.cross_entropy(layer(h), targets, reduction="sum")
    else:
        loss, _ = chunked_cross_entropy(layer, h, targets, chunk)
    loss.backward()
    seconds = time.perf_counter() - t0
    done.set()
    watcher.join()
    print(json.dumps(dict(mode=mode, peak_mib=(peak[0] - base) / 2**20, seconds=seconds, loss=float(loss))))


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def bench_memory(args):
    out = []
    for mode in ("plain", "chunked"):
        cmd = [sys.executable, os.path.abspath(__file__), "--memory-child", mode, "--mem-vocab", str(args.mem_vocab),
               "--mem-tokens", str(args.mem_tokens), "--mem-joint-dim", str(args.mem_joint_dim),
               "--chunk", str(args.chunk), "--dim", str(args.dim)]
        print(f"  memory: {mode} ...", file=sys.stderr, flush=True)
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        out.append(json.loads(res.stdout.strip().splitlines()[-1]))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=1024, help="target tokens per step (speed part)")
    p.add_argument("--dim", type=int, default=512, help="d = dh")
    p.add_argument("--vocabs", type=int, nargs="+", default=[32768, 131072])
    p.add_argument("--joint-dims", type=int, nargs="+", default=[512, 2048, 4096])
    p.add_argument("--rates", type=float, nargs="+", default=[1.0, 0.5, 0.25, 0.05])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--mem-vocab", type=int, default=131072)
    p.add_argument("--mem-tokens", type=int, default=4096)
    p.add_argument("--mem-joint-dim", type=int, default=4096)
    p.add_argument("--chunk", type=int, default=4096, help="--vocab-chunk-size of the chunked path")
    p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--skip-memory", action="store_true")
    p.add_argument("--quick", action="store_true", help="a tiny configuration (seconds), for tests")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--memory-child", choices=["plain", "chunked"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.memory_child:
        return memory_child(args.memory_child, args.mem_vocab, args.dim, args.mem_joint_dim, args.mem_tokens, args.chunk)
    if args.quick:
        args.tokens, args.dim, args.vocabs, args.joint_dims, args.reps = 64, 32, [2048], [64], 2
        args.mem_vocab, args.mem_tokens, args.mem_joint_dim, args.chunk = 4096, 256, 64, 512
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    result = {"config": {k: v for k, v in vars(args).items() if k != "memory_child"},
              "torch_threads": torch.get_num_threads()}
    targets = []
    if not args.skip_speed:
        rows = bench_speed(args)
        result["speed"] = rows
        print(f"\nTraining step, output layer + loss, {args.tokens} tokens, d = dh = {args.dim} (Table 4 layout)")
        print(f"{'layer':<12}{'|V|':>8}{'scored':>8}{'tokens/s':>11}{'vs tied 100%':>14}{'vs own 100%':>13}")
        for r in rows:
            print(f"{r['layer']:<12}{r['vocab']:>8}{r['rate']:>8.0%}{r['tokens_per_s']:>11.0f}"
                  f"{r['vs_tied_full']:>13.2f}x{r['speedup_vs_own_full']:>12.2f}x")
        dj = 2048 if 2048 in args.joint_dims else args.joint_dims[0]
        v = min(args.vocabs)
        sel = [r for r in rows if r["layer"] == f"joint-{dj}" and r["vocab"] == v and r["rate"] == 0.25]
        if sel:
            targets.append(dict(target=f"25% sampling speed-up of joint dj={dj} at |V|={v}",
                                value=sel[0]["speedup_vs_own_full"], threshold=2.5, higher_is_better=True))
    if not args.skip_memory:
        mem = bench_memory(args)
        result["memory"] = mem
        plain, chunked = mem
        print(f"\nExact softmax, joint dj={args.mem_joint_dim}, |V|={args.mem_vocab}, {args.mem_tokens} tokens "
              f"(peak RSS above the model, fresh process each)")
        for m in mem:
            print(f"  {m['mode']:<8} peak {m['peak_mib']:>9.0f} MiB   time {m['seconds']:>7.2f} s   loss {m['loss']:.4f}")
        targets.append(dict(target="chunked / plain peak memory", value=chunked["peak_mib"] / max(plain["peak_mib"], 1e-9),
                            threshold=0.25, higher_is_better=False))
        targets.append(dict(target="chunked / plain time", value=chunked["seconds"] / plain["seconds"],
                            threshold=1.3, higher_is_better=False))
    for t in targets:
        t["pass"] = t["value"] >= t["threshold"] if t["higher_is_better"] else t["value"] <= t["threshold"]
        op = ">=" if t["higher_is_better"] else "<="
        print(f"  {'PASS' if t['pass'] else 'FAIL'}  {t['target']}: {t['value']:.3f} (target {op} {t['threshold']})")
    result["targets"] = targets
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
