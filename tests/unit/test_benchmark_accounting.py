"""The benchmarks' shared harness (benchmarks/bench_harness.py) and their math: FLOP counts worked out by hand, the
GEMM-limit chain, and every figure derived from timings (fed here with made-up seconds whose results are known).

No timing is asserted (speed targets live in the benchmarks themselves); the ``--quick`` runs are in
tests/cli/test_benchmarks.py.
"""

import json
import time

import bench_harness as harness
import bench_label_embedding
import bench_label_sampling
import bench_large_vocab
import bench_output_layers as bench
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from fairseq_joint.modules.output_layers import OutputLayer, OutputLayerSpec

V, D, DJ, T = 10, 4, 6, 3


def _layer(preset, dj=DJ):
    emb = None if preset == "softmax" else nn.Embedding(V, D)
    return OutputLayer(OutputLayerSpec(preset, joint_dim=dj), V, D, embedding=emb)


def _timing(*seconds):
    return harness.Timing(tuple(seconds))


# ---------------------------------------------------------------------------------------------- FLOP accounting
@pytest.mark.parametrize(
    "preset, gemms, flops",
    [
        ("softmax", [(T, D, V)], 720),  # Wᵀh (Eq. 3): 6·3·4·10
        ("tied", [(T, D, V)], 720),  # E h (Eq. 4)
        ("bilinear", [(T, D, D), (T, D, V)], 1008),  # W h, then E (W h) (Eq. 6): 6·(48 + 120)
        ("label", [(V, D, D), (T, D, V)], 1680),  # E W, then σ(E W) h (Eq. 7a): 6·(160 + 120)
        ("context", [(T, D, D), (T, D, V)], 1008),  # W h, then E σ(W h) (Eq. 7b)
        ("joint", [(V, D, DJ), (T, D, DJ), (T, DJ, V)], 2952),  # E Uᵀ, V h, joint product (Eqs. 12-14): 6·(240+72+180)
    ],
)
def test_gemm_accounting_by_hand(preset, gemms, flops):
    layer = _layer(preset)
    assert bench.layer_gemms(layer, T) == gemms
    # forward + backward = 3 GEMMs of 2·M·K·N FLOPs per forward GEMM
    assert bench.train_flops(gemms) == flops


def test_joint_flops_at_the_issue_sizes_give_the_088_limit():
    v, t, d, dj = 32768, 4096, 512, 512
    emb = nn.Embedding(v, d)
    tied = bench.train_flops(bench.layer_gemms(OutputLayer(OutputLayerSpec("tied"), v, d, embedding=emb), t))
    joint = bench.train_flops(bench.layer_gemms(OutputLayer(OutputLayerSpec("joint", joint_dim=dj), v, d, embedding=emb), t))
    assert tied == 412_316_860_416  # the README's 412.3 GFLOP: 6 · 4096 · 512 · 32768
    assert joint == 470_298_918_912  # 470.3 GFLOP: tied + 6 · (32768 · 512 · 512 + 4096 · 512 · 512)
    assert tied / joint == pytest.approx(0.877, abs=1e-3)  # the "FLOP limit ≈ 0.88×"


def test_gemm_chain_is_forward_and_autograd_backward():
    chain = bench.GemmChain((5, 3, 7), seed=0, grads={})
    out, grad_a, grad_b = chain()
    a = chain.a.clone().requires_grad_()
    b = chain.b.clone().requires_grad_()
    c = F.linear(a, b)  # what OutputLayer runs: A Bᵀ
    (c * chain.g).sum().backward()  # upstream gradient G
    torch.testing.assert_close(out, c.detach())
    torch.testing.assert_close(grad_a, a.grad)
    torch.testing.assert_close(grad_b, b.grad)
    assert chain.flops == 630  # 3 GEMMs of 2 · 5 · 3 · 7


def test_train_step_gradients_reach_features_embedding_and_layer():
    step = bench.TrainStep("joint", V, T, D, DJ, seed=0)
    step()
    for p in step.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all()
    assert step.subnormal_fraction() == 0.0


# ---------------------------------------------------------------------------------------------- derived figures
def test_output_layer_figures_from_timings():
    tied_gemms = [(T, D, V)]
    joint_gemms = [(V, D, DJ), (T, D, DJ), (T, DJ, V)]
    layers = [bench.LayerCase("tied", "tied", 0, tied_gemms, 0.0),
              bench.LayerCase("joint-6", "joint", DJ, joint_gemms, 0.25)]
    times = {"tied": _timing(0.2, 0.4, 0.3), "joint-6": _timing(1.0, 0.6, 0.8),
             "mm3x4x10": _timing(0.1, 0.2, 0.15), "mm10x4x6": _timing(0.3), "mm3x4x6": _timing(0.05, 0.05),
             "mm3x6x10": _timing(0.25, 0.2, 0.3)}
    fig = bench.training_figures(layers, times)
    assert [g["shape_mkn"] for g in fig["gemms"]] == [[3, 4, 6], [3, 4, 10], [3, 6, 10], [10, 4, 6]]
    assert fig["gemms"][1]["seconds_median"] == 0.15 and fig["gemms"][1]["flops"] == 720
    tied, joint = fig["layers"]["tied"], fig["layers"]["joint-6"]
    assert (tied["seconds_median"], tied["seconds_min"], tied["seconds_max"]) == (0.3, 0.2, 0.4)
    assert tied["gemm_limit_seconds"] == pytest.approx(0.15)
    assert tied["gemm_fraction"] == pytest.approx(0.5)  # 0.15 / 0.3
    assert joint["gemm_limit_seconds"] == pytest.approx(0.6)  # 0.3 + 0.05 + 0.25
    assert joint["gemm_fraction"] == pytest.approx(0.75)  # 0.6 / 0.8
    assert joint["speed_vs_tied"] == pytest.approx(0.375)  # 0.3 / 0.8
    assert joint["flop_limit_vs_tied"] == pytest.approx(720 / 2952)
    assert joint["gemm_limit_vs_tied"] == pytest.approx(0.25)  # 0.15 / 0.6
    assert joint["gflops_per_s"] == pytest.approx(2952 / 0.8 / 1e9)
    assert joint["equation"] == "Eqs. 14-15" and joint["joint_dim"] == DJ and tied["joint_dim"] is None


def test_large_vocab_memory_rows_are_the_medians_of_their_rounds():
    runs = [{"mode": "plain", "peak_mib": p, "seconds": s, "loss": 2.0 + s} for p, s in ((30, 1.0), (10, 3.0),
                                                                                       (20, 2.5))]
    assert bench_large_vocab.memory_row(runs) == {"mode": "plain", "peak_mib": 20, "seconds": 2.5, "loss": 3.0,
                                                   "peak_mib_all": [30, 10, 20], "seconds_all": [1.0, 3.0, 2.5]}


def test_large_vocab_speed_rows_from_timings():
    rows = bench_large_vocab.speed_rows([
        ("tied", 100, 1.0, _timing(0.5, 0.4, 0.6)),
        ("tied", 100, 0.25, _timing(0.1)),
        ("joint-8", 100, 1.0, _timing(2.0, 2.0)),
        ("joint-8", 100, 0.25, _timing(0.4, 0.6, 0.5)),
        ("tied", 200, 1.0, _timing(1.0)),
    ], tokens=64)
    by = {(r["layer"], r["vocab"], r["rate"]): r for r in rows}
    assert by[("tied", 100, 1.0)]["tokens_per_s"] == pytest.approx(128)  # 64 / 0.5
    assert by[("joint-8", 100, 0.25)]["tokens_per_s"] == pytest.approx(128)
    assert by[("joint-8", 100, 0.25)]["speedup_vs_own_full"] == pytest.approx(4)  # 2.0 / 0.5
    assert by[("joint-8", 100, 0.25)]["vs_tied_full"] == pytest.approx(1)  # 0.5 / 0.5
    assert by[("joint-8", 100, 1.0)]["vs_tied_full"] == pytest.approx(0.25)
    assert by[("tied", 100, 0.25)]["speedup_vs_own_full"] == pytest.approx(5)
    assert by[("tied", 200, 1.0)]["vs_tied_full"] == 1.0  # its own vocabulary's tied, not the other's


def test_label_embedding_ratios_from_timings():
    times = {
        ("whole step", "full", "cross_entropy"): _timing(2.0, 1.0, 3.0),
        ("whole step", "full", "label_embedding"): _timing(3.0, 3.5),
        ("output layer + loss", "full", "cross_entropy"): _timing(0.5),
        ("output layer + loss", "full", "label_embedding"): _timing(1.0),
        ("whole step", "25%", "cross_entropy"): _timing(4.0),
        ("whole step", "25%", "label_embedding"): _timing(5.0),
    }
    rows = {(r["level"], r["rate"], r["criterion"]): r for r in bench_label_embedding.ratio_rows(times, tokens=1000)}
    assert rows[("whole step", "full", "label_embedding")]["ratio"] == pytest.approx(1.625)  # 3.25 / 2
    assert rows[("output layer + loss", "full", "label_embedding")]["ratio"] == pytest.approx(2)
    assert rows[("whole step", "25%", "label_embedding")]["ratio"] == pytest.approx(1.25)
    assert rows[("whole step", "full", "cross_entropy")]["tokens_per_s"] == pytest.approx(500)
    assert bench_label_embedding.rate_names(0.25) == {"full": "full", "sampled": "25%"}


def test_label_sampling_speedups_from_timings():
    rows = bench_label_sampling.rate_rows({0.1: _timing(0.01, 0.02, 0.03), 1.0: _timing(0.08, 0.06)})
    assert [(r["rate"], r["step_ms"]) for r in rows] == [(0.1, pytest.approx(20)), (1.0, pytest.approx(70))]
    assert rows[0]["speedup_vs_100"] == pytest.approx(3.5)
    assert rows[1]["speedup_vs_100"] == pytest.approx(1)
    assert bench_label_sampling.rate_rows({0.5: _timing(1.0)})[0]["speedup_vs_100"] is None


# ---------------------------------------------------------------------------------------------- harness
def test_timing_reports_median_and_spread():
    t = _timing(0.3, 0.1, 0.4, 0.2)
    assert (t.median, t.low, t.high) == (pytest.approx(0.25), 0.1, 0.4)
    assert t.show() == "0.250 (0.100-0.400)"
    assert t.show(1000, ".0f") == "250 (100-400)"
    assert t.show_rate(2, ".1f") == "8.0 (5.0-20.0)"  # 2 / 0.25, 2 / 0.4 - 2 / 0.1
    assert t.fields() == {"seconds_median": pytest.approx(0.25), "seconds_min": 0.1, "seconds_max": 0.4,
                          "seconds_all": [0.3, 0.1, 0.4, 0.2]}
    assert harness.Timing.of(t.fields()) == t
    with pytest.raises(ValueError):
        harness.Timing(())


def test_round_robin_rotates_and_drops_warmup():
    calls = []
    cases = {n: (lambda n=n: calls.append(n)) for n in "abc"}
    times = harness.round_robin(cases, rounds=2, warmup=1, what="test")
    assert calls == list("abc" "bca" "cab")
    assert {n: len(t.seconds) for n, t in times.items()} == {"a": 2, "b": 2, "c": 2}


def test_round_order_puts_each_case_everywhere_each_cycle_and_changes_its_neighbour():
    names = list("abcd")
    orders = [harness.round_order(names, r) for r in range(4 * 6)]
    assert orders[:4] == [list("abcd"), list("bcda"), list("cdab"), list("dabc")]  # the first cycle: a rotation
    for c in range(6):  # every cycle: each case once in each position
        cycle = orders[4 * c:4 * c + 4]
        assert all(sorted(order) == names for order in cycle)
        assert all(sorted(order[i] for order in cycle) == names for i in range(4))
    # the case before "a" (in the round order, wrapping around) is not the same in every cycle
    before = {c: {o[o.index("a") - 1] for o in orders[4 * c:4 * c + 4]} for c in range(6)}
    assert len(set().union(*before.values())) > 1
    assert orders == [harness.round_order(names, r) for r in range(4 * 6)]  # seeded: the same on every run


def test_round_robin_times_each_call():
    times = harness.round_robin({"slow": lambda: time.sleep(0.05), "fast": lambda: None}, rounds=1, warmup=0, what="t")
    assert times["slow"].median >= 0.05 and times["fast"].median < times["slow"].median


def test_fresh_process_rounds_rotate_and_collect_by_case(monkeypatch):
    calls = []

    def fake_run_fresh(script, case, config):
        calls.append(case)
        return {"case": case, "round": sum(c == case for c in calls), "config": config}

    monkeypatch.setattr(harness, "run_fresh", fake_run_fresh)
    out = harness.fresh_process_rounds("x.py", {"a": ["A"], "b": ["B"]}, {"vocab": 8}, rounds=2, what="t")
    assert calls == [["A"], ["B"], ["B"], ["A"]]
    assert [r["round"] for r in out["a"]] == [1, 2] and out["b"][0] == {"case": ["B"], "round": 1, "config": {"vocab": 8}}


def test_run_fresh_starts_the_script_by_absolute_path_and_reads_its_last_line(tmp_path, monkeypatch):
    (tmp_path / "child.py").write_text(
        "import json, os, sys\n"
        "assert sys.argv[1] == '--child'\n"
        "print('a log line first')\n"
        "print(json.dumps({'payload': json.loads(sys.argv[2]), 'script': os.path.abspath(sys.argv[0])}))\n"
        "print()\n")
    monkeypatch.chdir(tmp_path)
    result = harness.run_fresh("child.py", ["plain", 1], {"dim": 4})
    assert result == {"payload": {"case": ["plain", 1], "config": {"dim": 4}}, "script": str(tmp_path / "child.py")}
    (tmp_path / "fails.py").write_text("import sys\nsys.stderr.write('boom\\n')\nsys.exit(3)\n")
    with pytest.raises(SystemExit, match=r"case chunked failed in its fresh process \(exit 3\):\nboom"):
        harness.run_fresh("fails.py", "chunked", {})


def test_last_json_line():
    assert harness.last_json_line('noise\n{"a": 1}\n\n') == {"a": 1}
    with pytest.raises(ValueError, match="no result"):
        harness.last_json_line("\n")


def test_peak_memory_sees_what_the_step_allocates():
    def step():
        x = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
        time.sleep(0.05)  # held for 50 samples
        return float(x[0])

    peak, seconds, value = harness.peak_memory(step)
    assert value == 1.0 and seconds >= 0.05
    assert 56 * 2**20 <= peak <= 128 * 2**20
    peak, _, _ = harness.peak_memory(lambda: time.sleep(0.02))
    assert peak < 16 * 2**20


@pytest.mark.parametrize("value, higher, ok, line", [
    (0.9, True, True, "  PASS  speed: 0.900 (target >= 0.85)"),
    (0.85, True, True, "  PASS  speed: 0.850 (target >= 0.85)"),
    (0.8, True, False, "  FAIL  speed: 0.800 (target >= 0.85)"),
    (0.8, False, True, "  PASS  speed: 0.800 (target <= 0.85)"),
    (0.9, False, False, "  FAIL  speed: 0.900 (target <= 0.85)"),
])
def test_targets_pass_fail_and_their_line(value, higher, ok, line):
    t = harness.target("speed", value, 0.85, higher_is_better=higher)
    assert t["pass"] is ok
    assert harness.target_line(t) == line
    json.dumps(t)  # goes into --json as is


# ---------------------------------------------------------------------------------------------- options
def test_quick_sizes_replace_defaults_but_explicit_flags_win():
    args = bench.parse(["--quick", "--vocab", "4096"])
    assert (args.vocab, args.tokens, args.joint_dims) == (4096, 256, [64, 256])
    args = bench.parse([])
    assert (args.vocab, args.tokens, args.threads, args.quick) == (32768, 4096, torch.get_num_threads(), False)


def test_json_and_plot_paths_are_taken_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = bench_label_sampling.parse(["--quick", "--json", "out/r.json", "--plot", "r.png"])
    assert (args.json, args.plot) == (str(tmp_path / "out" / "r.json"), str(tmp_path / "r.png"))
    assert "json" not in harness.config(args) and harness.config(args)["labels"] == 500


@pytest.mark.parametrize("parse, argv, message", [
    (bench.parse, ["--beam", "0"], "--beam must be a positive integer, got 0"),
    (bench.parse, ["--quick", "--beam", "4096"], "--beam 4096 must be smaller than --vocab 2048"),
    (bench.parse, ["--joint-dims", "512", "0"], "--joint-dims must be positive numbers, got [512, 0]"),
    (bench.parse, ["--warmup", "-1"], "--warmup must be >= 0, got -1"),
    (bench_large_vocab.parse, ["--rates", "0.5", "0.25"], "--rates must lie in (0, 1] and include 1.0"),
    (bench_label_sampling.parse, ["--rates", "0.1", "1.5"], "--rates must lie in (0, 1]"),
    (bench_label_sampling.parse, ["--threads", "0"], "--threads must be a positive integer, got 0"),
    (bench_label_embedding.parse, ["--sample-rate", "1"], "--sample-rate must be below 1"),
])
def test_bad_options_are_refused(parse, argv, message, capsys):
    with pytest.raises(SystemExit):
        parse(argv)
    assert message in capsys.readouterr().err



def test_round_robin_drops_what_a_timed_case_returns():
    """A timed case's result is freed before the next case runs: GEMM chains return gigabytes, and holding them
    across rounds slowed whichever case came next (issue #17, softmax at 0.66x tied)."""
    import weakref

    class Result:
        pass

    alive = []

    def case():
        result = Result()
        alive.append(weakref.ref(result))
        return result

    def probe():
        return sum(ref() is not None for ref in alive)

    seen = []
    timings = harness.round_robin({"a": case, "b": lambda: seen.append(probe())}, rounds=2, warmup=1, what="t")
    assert seen == [0, 0, 0] and probe() == 0
    assert set(timings) == {"a", "b"} and len(timings["a"].seconds) == 2
