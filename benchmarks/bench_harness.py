"""The one harness of the benchmarks in this folder: timing, statistics, fresh processes, memory, targets, options.

A benchmark is a script ``benchmarks/bench_<name>.py`` run as ``python benchmarks/bench_<name>.py [...]`` (its
folder is on the import path, so it imports this module by name). It builds its options on :func:`parser`, and hands
:func:`main` three functions: ``run(args) -> dict`` (its figures, with a ``targets`` list made by :func:`target`),
``report(result)`` (its tables) and ``plot(result, path)`` (its PNG); a benchmark that runs cases in fresh
processes gives ``child(config, case)`` too. The harness does the rest, the same way for all of them:

* **Timing** (:func:`round_robin`): every case once per round, the order rotated each round, so that each case takes
  every position once in every cycle of as many rounds as cases and background load on a shared machine hits every
  contender alike; each cycle after the first rotates a seeded shuffle of the cases (:func:`round_order`), so that no
  case follows the same neighbour, whose freed memory or cache state it may inherit, in every round. Warm-up rounds
  run but are not kept.
* **Statistics** (:class:`Timing`): the median of the kept rounds and, next to every median, the spread (min-max):
  report the spread, not the best run.
* **Fresh processes** (:func:`fresh_process_rounds`, :func:`run_fresh`): a case runs in its own
  ``sys.executable`` subprocess of the benchmark script (absolute path, so any working directory works), started
  with ``--child '{"case": ..., "config": {the parent's options}}'``; its result is the JSON on the last line of
  its stdout.
* **Peak memory** (:func:`peak_memory`): the resident set sampled from ``/proc/self/statm`` every millisecond
  during a step, minus the resident set just before it; run in a fresh process, it is what the step adds.
* **Targets** (:func:`target`): printed as ``  PASS  <target>: <value> (target >= x)`` (or ``FAIL``, ``<=``).
* **Reports** (:func:`print_table`, :func:`spread_chart`): a fixed-width table whose headings and cells share one
  alignment and width per column; a one-panel chart of the timings' medians with their spread.
* **Options** (:func:`parser`, :func:`parse_args`): ``--threads N`` (torch intra-op threads), ``--quick`` (a tiny
  configuration for a smoke test; size flags given explicitly still win), ``--json FILE`` (every figure) and
  ``--plot FILE`` (a PNG through matplotlib's Agg backend); relative paths are taken from the working directory.
"""

import argparse
import functools
import gc
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

logger = logging.getLogger("bench")


# ---------------------------------------------------------------------------------------------- statistics
@dataclass(frozen=True)
class Timing:
    """The kept repetitions of one case, in seconds: their median and their spread (min-max)."""

    seconds: Tuple[float, ...]

    def __post_init__(self):
        if not self.seconds:
            raise ValueError("a timing needs at least one timed repetition")

    @classmethod
    def of(cls, row: Dict[str, object]) -> "Timing":
        """The timing of a row of figures (its ``seconds_all``, see :meth:`fields`)."""
        return cls(tuple(row["seconds_all"]))

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def low(self) -> float:
        return min(self.seconds)

    @property
    def high(self) -> float:
        return max(self.seconds)

    def fields(self) -> Dict[str, object]:
        """The JSON fields of every timed row: median, spread and every kept repetition."""
        return {"seconds_median": self.median, "seconds_min": self.low, "seconds_max": self.high,
                "seconds_all": list(self.seconds)}

    def show(self, scale: float = 1.0, fmt: str = ".3f") -> str:
        """``median (min-max)`` of the seconds times ``scale`` (1000: milliseconds)."""
        return f"{self.median * scale:{fmt}} ({self.low * scale:{fmt}}-{self.high * scale:{fmt}})"

    def show_rate(self, amount: float, fmt: str = ".1f") -> str:
        """``amount / median (amount / max - amount / min)``: a throughput (tokens/s, sentences/s) and its spread."""
        return f"{amount / self.median:{fmt}} ({amount / self.high:{fmt}}-{amount / self.low:{fmt}})"


def rounds_note(cfg: Dict[str, object]) -> str:
    """How a round-robin benchmark's medians were taken, for its report's headline."""
    return f"median (min-max) of {cfg['repeats']} rounds after {cfg['warmup']} warm-up"


def print_table(columns: Sequence[object], rows: Sequence[Dict[str, object]]) -> None:
    """A fixed-width table of a report: the headings, then a line per row. A column is ``(heading, spec, cell)``:
    ``spec`` an alignment and width (``"<11"``, ``">9"``) that the heading and ``cell(row)`` both take, so that the
    two stay aligned; a string between two columns is printed as it is (a gap)."""
    def line(row: Optional[Dict[str, object]]) -> str:  # the headings without a row
        return "".join(c if isinstance(c, str) else f"{c[0] if row is None else c[2](row):{c[1]}}" for c in columns)

    print(line(None))
    for r in rows:
        print(line(r))


# ---------------------------------------------------------------------------------------------- timing
def round_order(names: Sequence[str], round_index: int) -> List[str]:
    """The order of round ``round_index``: in cycle ``c = round_index // len(names)``, a base order rotated left by the
    round's place in the cycle (each case takes every position once a cycle); the base order is ``names`` in the
    first cycle and a shuffle seeded with ``c`` in every later one (the same rounds on every run), so that the case
    before each case changes from cycle to cycle."""
    cycle, shift = divmod(round_index, len(names))
    base = list(names)
    if cycle:
        random.Random(cycle).shuffle(base)
    return base[shift:] + base[:shift]


def _rounds(cases: Dict[str, Callable[[], object]], rounds: int, warmup: int, what: str,
            keep_values: bool = True) -> Dict[str, List[Tuple[float, object]]]:
    """Run every case once per round in rotating order; ``(seconds, value returned)`` of the kept rounds.

    Without ``keep_values`` a case's return value is dropped as soon as it is timed: timed cases that return
    large tensors (the GEMM chains) would otherwise hold gigabytes across rounds, and the process's growing
    memory slowed the next case's allocations (issue #17: ``softmax``, always timed after the largest chain,
    measured 0.66x ``tied`` in a round-robin run while the two steps take the same time alone)."""
    names = list(cases)
    kept: Dict[str, List[Tuple[float, object]]] = {n: [] for n in names}
    for r in range(warmup + rounds):
        gc.collect()  # once per round, outside the timed calls
        line = []
        label = "warm-up" if r < warmup else f"round {r - warmup + 1}/{rounds}"
        for i, name in enumerate(round_order(names, r), 1):
            t0 = time.perf_counter()
            value = cases[name]()
            dt = time.perf_counter() - t0
            if r >= warmup:
                kept[name].append((dt, value if keep_values else None))
            del value
            line.append(f"{name} {dt:.3f}s")
            if len(names) > 1:  # progress of a long round (cases in fresh processes take minutes)
                logger.info("%s %s: case %d/%d %s %.3fs", what, label, i, len(names), name, dt)
        logger.info("%s %s: %s", what, label, ", ".join(line))
    return kept


def round_robin(cases: Dict[str, Callable[[], object]], rounds: int, warmup: int, what: str) -> Dict[str, Timing]:
    """Time every case in this process: ``warmup`` untimed rounds, then ``rounds`` timed ones, order rotating."""
    timed = _rounds(cases, rounds, warmup, what, keep_values=False)
    return {name: Timing(tuple(dt for dt, _ in runs)) for name, runs in timed.items()}


CHILD_OPTION = "--child"


def last_json_line(stdout: str) -> object:
    """The result of a child: the JSON on the last non-empty line of its stdout."""
    lines = stdout.strip().splitlines()
    if not lines:
        raise ValueError("the benchmark's child process printed no result")
    return json.loads(lines[-1])


def run_fresh(script: str, case: object, config: Dict[str, object]) -> object:
    """Run ``case`` of ``script`` in a fresh ``sys.executable`` process with the parent's ``config``; its result."""
    payload = json.dumps({"case": case, "config": config})
    cmd = [sys.executable, os.path.abspath(script), CHILD_OPTION, payload]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: benchmark case {case} failed in its fresh process (exit {proc.returncode}):\n"
                         f"{proc.stderr[-3000:]}")
    return last_json_line(proc.stdout)


def fresh_process_rounds(script: str, cases: Dict[str, object], config: Dict[str, object], rounds: int,
                         what: str) -> Dict[str, List[object]]:
    """Run every case in its own fresh process once per round, order rotating; each case's results by round."""
    calls = {name: functools.partial(run_fresh, script, case, config) for name, case in cases.items()}
    return {name: [value for _, value in runs] for name, runs in _rounds(calls, rounds, 0, what).items()}


# ---------------------------------------------------------------------------------------------- memory
def rss_bytes() -> int:
    """The resident set of this process (``/proc/self/statm``), in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_memory(step: Callable[[], object], interval: float = 0.001) -> Tuple[int, float, object]:
    """``(peak bytes above the start, seconds, step's value)`` of ``step()``: a thread samples the resident set
    every ``interval`` seconds during the step; the resident set just before it is the base. Allocate and touch
    the inputs before, and run it in a fresh process, so that the figure is what the step itself adds."""
    base = rss_bytes()
    peak = [base]
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_bytes())
            time.sleep(interval)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    t0 = time.perf_counter()
    try:
        value = step()
        seconds = time.perf_counter() - t0
    finally:
        done.set()
        watcher.join()
    peak[0] = max(peak[0], rss_bytes())
    return peak[0] - base, seconds, value


# ---------------------------------------------------------------------------------------------- targets
def target(name: str, value: float, threshold: float, higher_is_better: bool = True) -> Dict[str, object]:
    """One target: ``value`` must be ``>= threshold`` (or ``<=`` where lower is better)."""
    ok = value >= threshold if higher_is_better else value <= threshold
    return {"target": name, "value": value, "threshold": threshold, "higher_is_better": higher_is_better,
            "pass": bool(ok)}


def target_line(t: Dict[str, object]) -> str:
    op = ">=" if t["higher_is_better"] else "<="
    return f"  {'PASS' if t['pass'] else 'FAIL'}  {t['target']}: {t['value']:.3f} (target {op} {t['threshold']})"


def print_targets(targets: Sequence[Dict[str, object]], quick: bool) -> None:
    print("\nTargets" + (" -- quick configuration: not meaningful at these sizes" if quick else ""))
    for t in targets:
        print(target_line(t))


# ---------------------------------------------------------------------------------------------- GILE training steps
def multilabel_batch(num_labels: int, vocab: int, batch: int, length: int, positives: int, gen: torch.Generator,
                     label_inputs: torch.Tensor) -> Dict[str, object]:
    """A synthetic GILE training batch: ``batch`` texts of ``length`` random word ids, each with ``positives`` of the
    ``num_labels`` labels drawn at random, every label a training label, described by ``label_inputs`` (word ids
    of its description, or its embedding)."""
    target = torch.zeros(batch, num_labels)
    for row in range(batch):
        target[row, torch.randperm(num_labels, generator=gen)[:positives]] = 1.0
    src = torch.randint(2, vocab, (batch, length), generator=gen)
    return {"net_input": {"src_tokens": src, "src_lengths": torch.full((batch,), length)}, "target": target,
            "nsentences": batch, "ntokens": batch * length, "label_tokens": label_inputs,
            "label_train_index": torch.arange(num_labels)}


def training_step(model: torch.nn.Module, criterion: Callable, sample: Dict[str, object]) -> Callable[[], None]:
    """One training step of ``model`` on ``sample`` to time: the criterion's forward, the backward of the loss per
    sample, an Adam update (lr 1e-3) of the trainable parameters."""
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss, size, _ = criterion(model, sample)
        (loss / size).backward()
        opt.step()

    return step


# ---------------------------------------------------------------------------------------------- plots
def bars_with_spread(ax, labels: Sequence[str], timings: Sequence[Timing], value: Callable[[float], float],
                     offset: float = 0.0, height: float = 0.8, **kwargs) -> None:
    """Horizontal bars at ``value(median seconds)`` with whiskers over ``value`` of the spread (min-max)."""
    mids = [value(t.median) for t in timings]
    ends = [sorted((value(t.low), value(t.high))) for t in timings]
    err = [[m - lo for m, (lo, _) in zip(mids, ends)], [hi - m for m, (_, hi) in zip(mids, ends)]]
    ax.barh([i + offset for i in range(len(labels))], mids, height=height, xerr=err, capsize=2, **kwargs)
    ax.set_yticks(list(range(len(labels))), labels)
    if not ax.yaxis_inverted():
        ax.invert_yaxis()


def spread_chart(path: str, labels: Sequence[str], timings: Sequence[Timing], value: Callable[[float], float],
                 xlabel: str, title: str, figsize: Tuple[float, float], title_size: Optional[float] = None,
                 ylabel: Optional[str] = None, target_x: Optional[float] = None, log_x: bool = False,
                 **kwargs) -> None:
    """A one-panel PNG at ``path``: :func:`bars_with_spread` (``kwargs`` go to the bars), the axis labels, the title
    (in ``title_size`` points, else matplotlib's title size) and, at ``target_x``, a dashed grey line (a target);
    ``log_x``: a logarithmic value axis (values that differ by orders of magnitude)."""
    from fairseq_joint.plots import figure

    with figure(path, figsize=figsize) as (fig, ax):
        bars_with_spread(ax, labels, timings, value, **kwargs)
        if log_x:
            ax.set_xscale("log")
        if target_x is not None:
            ax.axvline(target_x, color="grey", linestyle="--", linewidth=1)
        ax.set_xlabel(xlabel)
        if ylabel is not None:
            ax.set_ylabel(ylabel)
        ax.set_title(title, **({} if title_size is None else {"fontsize": title_size}))


# ---------------------------------------------------------------------------------------------- options
def parser(doc: str) -> argparse.ArgumentParser:
    """The options every benchmark has; the benchmark adds its own sizes."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch intra-op threads")
    p.add_argument("--quick", action="store_true",
                   help="a tiny configuration (seconds) for a smoke test; size flags given explicitly still win")
    p.add_argument("--json", metavar="FILE", help="write every figure to FILE as JSON")
    p.add_argument("--plot", metavar="FILE", help="write a PNG chart of the figures to FILE")
    p.add_argument(CHILD_OPTION, help=argparse.SUPPRESS)
    return p


def add_rounds(p: argparse.ArgumentParser, repeats: int, warmup: int) -> None:
    """``--repeats`` / ``--warmup`` of a round-robin benchmark."""
    p.add_argument("--repeats", type=int, default=repeats, help="timed round-robin rounds (median and spread reported)")
    p.add_argument("--warmup", type=int, default=warmup, help="untimed round-robin rounds before the timed ones")


def parse_args(p: argparse.ArgumentParser, argv: Optional[Sequence[str]], quick: Dict[str, object],
               positive: Sequence[str] = (), check: Optional[Callable[[argparse.Namespace], Optional[str]]] = None):
    """Parse ``argv``; with ``--quick`` the ``quick`` sizes replace the defaults (explicit flags still win). Every
    option in ``positive`` (and ``--threads``) must be positive, ``--warmup`` >= 0, and ``check(args)`` may return
    one more error. ``--json`` and ``--plot`` become absolute paths (relative to the working directory)."""
    args = p.parse_args(argv)
    if args.quick:
        p.set_defaults(**quick)
        args = p.parse_args(argv)
    for name in (*positive, "threads"):
        value = getattr(args, name)
        flag = "--" + name.replace("_", "-")
        if isinstance(value, list):
            if not value or any(v <= 0 for v in value):
                p.error(f"{flag} must be positive numbers, got {value}")
        elif value <= 0:
            p.error(f"{flag} must be a positive integer, got {value}")
    if getattr(args, "warmup", 0) < 0:
        p.error(f"--warmup must be >= 0, got {args.warmup}")
    message = check(args) if check else None
    if message:
        p.error(message)
    for name in ("json", "plot"):
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    return args


def config(args: argparse.Namespace) -> Dict[str, object]:
    """The options of a run (what a fresh process of it needs, and what the JSON records)."""
    return {k: v for k, v in vars(args).items() if k not in ("json", "plot", "child")}


def write_json(path: str, result: Dict[str, object]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    logger.info("wrote %s", path)


def main(args: argparse.Namespace, run: Callable[[argparse.Namespace], Dict[str, object]],
         report: Callable[[Dict[str, object]], None], plot: Callable[[Dict[str, object], str], None],
         child: Optional[Callable[[argparse.Namespace, object], object]] = None) -> Optional[Dict[str, object]]:
    """Run a benchmark (or, with ``--child``, one of its cases in this fresh process) with parsed ``args``."""
    if args.child is not None:  # one case in this fresh process, with the parent's options
        payload = json.loads(args.child)
        torch.set_num_threads(payload["config"]["threads"])
        print(json.dumps(child(argparse.Namespace(**payload["config"]), payload["case"])))
        return None
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        stream=sys.stderr, force=True)  # fairseq's import configures DEBUG logging
    t0 = time.perf_counter()
    result: Dict[str, object] = {"config": dict(config(args), torch=torch.__version__)}
    result.update(run(args))
    result["wall_seconds"] = time.perf_counter() - t0
    report(result)
    print_targets(result["targets"], args.quick)
    print(f"\nwall time {result['wall_seconds']:.0f} s")
    if args.json:
        write_json(args.json, result)
    if args.plot:
        os.makedirs(os.path.dirname(args.plot), exist_ok=True)
        plot(result, args.plot)
        logger.info("wrote %s", args.plot)
    return result
