"""benchmarks/bench_gpu.py (the GPU speed tables of docs/gpu.md) run on the CPU at tiny sizes, as a user runs it.

No speed is asserted: every part and case must be measured (its rows complete, each with its rounds), the figures of
a row must agree with each other (the median is one of its rounds, its tokens/s the tokens over that median), every
ratio must agree with the figures it compares, and the Markdown rows must hold the same figures.
"""

import json
import math

import bench_gpu
import pytest
import torch
from conftest import python_script

LAYERS = ["softmax", "tied", "bilinear", "label", "context", "joint-8", "joint-16"]
VOCABS = [64, 128]
TOKENS = 16
TABLE4_RATES = [0.5, 0.25]
TABLE4_TOKENS = 32  # bench_label_embedding's batch: at least one sentence of 32 target tokens
REPEATS = 3
#: bf16 autocast as on a GPU, where the CPU runs a bf16 LSTM (oneDNN needs AVX512-BF16 for one); else fp32
DTYPE = "bf16" if bench_gpu.runs_lstm("cpu", "bf16") else "fp32"
SIZES = ["--device", "cpu", "--dtype", DTYPE, "--vocabs", *map(str, VOCABS), "--tokens", str(TOKENS), "--dim", "8",
         "--joint-dims", "8", "16", "--exact-joint-dims", "8", "16", "--chunk", "16", "--table4-rates",
         *map(str, TABLE4_RATES), "--repeats", str(REPEATS)]
EXACT_LAYERS = ["softmax", "tied", "tied no-bias", "bilinear", "label", "context", "joint-8", "joint-16"]


def assert_timed(row, amount):
    """``REPEATS`` timed rounds (an odd number: the median is one of them), and ``amount`` tokens per median second."""
    assert len(row["seconds_all"]) == REPEATS and row["seconds_median"] in row["seconds_all"]
    assert row["tokens_per_s"] * row["seconds_median"] == pytest.approx(amount)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench_gpu")
    proc = python_script("benchmarks/bench_gpu.py", *SIZES, "--json", "r.json", "--markdown", "tables/gpu.md",
                         "--plot", "r.png", cwd=tmp)
    result = json.loads((tmp / "r.json").read_text())
    return result, (tmp / "tables" / "gpu.md").read_text().splitlines(), proc.stdout, tmp


def test_output_layers_every_layer_vocabulary_and_scoring_against_tied(run):
    result, _, stdout, _ = run
    assert result["device_name"].startswith("CPU") and result["dtype"] == DTYPE
    assert result["autocast"] is (DTYPE != "fp32")
    rows = {(r["layer"], r["vocab"], r["mode"]): r for r in result["layers"]["rows"]}
    assert list(rows) == [(name, v, m) for v in VOCABS for name in LAYERS for m in ("full", "sampled", "chunked")]
    for (_, vocab, mode), row in rows.items():
        assert_timed(row, TOKENS)
        assert row["vs_tied"] == pytest.approx(row["tokens_per_s"] / rows[("tied", vocab, mode)]["tokens_per_s"])
    assert rows[("joint-16", 64, "full")]["equation"] == "Eqs. 14-15" and rows[("tied", 128, "chunked")]["vs_tied"] == 1
    assert "a. Output layer + loss" in stdout and "chunked exact (16)" in stdout


def test_table4_whole_joint_lstm_step_at_the_largest_vocabulary(run):
    result, _, _, _ = run
    part = result["table4"]
    assert (part["arch"], part["vocab"], part["tokens"]) == ("joint_lstm_wmt17", max(VOCABS), TABLE4_TOKENS)
    rows = {(r["model"], r["rate"]): r for r in part["rows"]}
    models = ["softmax", "tied", "joint-8", "joint-16"]
    assert list(rows) == [(m, rate) for m in models for rate in TABLE4_RATES]
    assert [rows[(m, 0.5)]["paper_model"] for m in models] == ["NMT", "NMT-tied", "NMT-joint", "NMT-joint"]
    for (_, rate), row in rows.items():
        assert_timed(row, TABLE4_TOKENS)
        assert row["vs_tied"] == pytest.approx(row["tokens_per_s"] / rows[("tied", rate)]["tokens_per_s"])


def test_exact_softmax_every_layer_against_the_plain_path(run):
    result, _, stdout, _ = run
    part = result["exact"]
    rows = {(r["layer"], r["vocab"], r["impl"]): r for r in part["rows"]}
    impls = ["plain", "ours", "plain 16-bit", "ours 16-bit"]
    # CCE and Liger are not installed here; torch 2.13 has linear_cross_entropy
    assert list(rows) == [(name, v, i) for v in VOCABS for name in EXACT_LAYERS
                          for i in impls + (["torch"] if name.startswith("tied") else [])]
    for (name, vocab, impl), row in rows.items():
        assert_timed(row, TOKENS)
        assert row["peak_mib"] is None and row["memory_vs_plain"] is None  # no honest per-step peak on the CPU
        assert math.isfinite(row["loss"]) and row["loss"] > 0
        assert abs(row["loss_vs_fp64"]) < 0.01  # every implementation computes the same loss, in bf16 at worst
        plain = rows[(name, vocab, "plain 16-bit" if impl.endswith("16-bit") else "plain")]
        assert row["time_vs_plain"] == pytest.approx(row["seconds_median"] / plain["seconds_median"])
    assert part["half"] == "bfloat16"
    targets = {t["target"]: t for t in result["targets"]}
    exact = [t for t in targets if t.startswith("exact softmax")]
    assert len(exact) == 2 * len(EXACT_LAYERS)  # time only: no memory figure on the CPU, no CCE installed
    joint = targets["exact softmax, joint-16 |V|=128 (bfloat16 parameters): time / plain"]
    assert joint["value"] == rows[("joint-16", 128, "ours 16-bit")]["time_vs_plain"] and joint["threshold"] == 1.2
    for t in targets.values():
        assert f"{'PASS' if t['pass'] else 'FAIL'}  {t['target']}: {t['value']:.3f}" in stdout
    assert "c. Exact softmax, every output layer" in stdout and "n/a" in stdout


def test_markdown_rows_hold_the_json_figures(run):
    result, lines, _, tmp = run
    assert lines[0].startswith("<!-- benchmarks/bench_gpu.py on CPU")
    assert ("bf16 autocast" if DTYPE == "bf16" else "fp32") in lines[0]
    table_rows = [line for line in lines if line.startswith("| ") and not line.startswith(("| layer", "| model", "| \\|V"))]
    exact = {(r["layer"], r["vocab"], r["impl"]): r for r in result["exact"]["rows"]}
    assert len(table_rows) == len(LAYERS) * len(VOCABS) + 4 + len(exact)
    layers = {(r["layer"], r["vocab"], r["mode"]): r for r in result["layers"]["rows"]}
    joint = next(line for line in table_rows if line.startswith("| joint-16 | Eqs. 14-15 | 128 |"))
    for mode in ("full", "sampled", "chunked"):
        row = layers[("joint-16", 128, mode)]
        assert f"{bench_gpu.per_second(row['tokens_per_s'])} ({row['vs_tied']:.2f}x)" in joint
    assert "| NMT-tied (tied) | - | " in "\n".join(lines) and "| 50% | 25% |" in "\n".join(lines)
    row = exact[("joint-16", 128, "ours")]
    assert (f"| joint-16 | 128 | ours | {1000 * row['seconds_median']:.2f} | n/a | {row['time_vs_plain']:.2f}x | n/a | "
            f"{row['loss_vs_fp64']:.1e} |") in table_rows
    assert (tmp / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_budget_bounds_the_timed_rounds():
    budget = bench_gpu.Budget(100.0, ["layers", "table4", "exact"])
    assert budget.rounds("layers", 1.0, 1000) == 42  # 3/7 of the (just under) 100 s left
    assert budget.rounds("table4", 1000.0, 10) == bench_gpu.MIN_REPEATS  # too slow: still a median of 3
    assert budget.rounds("exact", 1e-6, 10) == 10  # fast: at most --repeats


def test_per_second_prints_rates_as_the_paper():
    assert [bench_gpu.per_second(x) for x in (950, 4321, 43_210, 1_234_567)] == ["950", "4.3K", "43K", "1.23M"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available")
def test_cuda_without_cuda_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        bench_gpu.parse(["--device", "cuda"])
    assert exit_.value.code == 2
    assert "--device cuda: CUDA is not available" in capsys.readouterr().err.strip().splitlines()[-1]


# ---------------------------------------------------------------------------------------------- bench_gpu_training.py
def test_whole_model_training_runs_fairseq_train_per_case_and_counts_its_flops(tmp_path):
    """bench_gpu_training.py --quick: each case a fresh fairseq-train run on the synthetic corpus; the timed window's
    tokens/s, the counted FLOPs (the same model's for its exact softmax), the ratios and the Markdown row agree."""
    python_script("benchmarks/bench_gpu_training.py", "--quick", "--cases", "fairseq+plugin", "tied", "tied exact",
                  "--decode-cases", "tied", "--json", "t.json", "--markdown", "t.md", cwd=tmp_path)
    result = json.loads((tmp_path / "t.json").read_text())
    rows = {r["name"]: r for r in result["rows"]}
    assert list(rows) == ["fairseq+plugin", "tied", "tied exact"] and result["device"] == "CPU"
    for row in rows.values():
        assert row["tokens"] > 0 and row["tokens_per_s"] == pytest.approx(row["tokens"] / row["seconds"])
        assert row["flops_per_token"] > 0 and row["mfu"] == pytest.approx(
            row["model_flops_per_token"] * row["tokens_per_s"] / (result["peak_tflops"] * 1e12))
        assert row["profile"]["clock"] == "cpu" and row["profile"]["top"]
    assert "--vocab-chunk-size 128" in rows["tied exact"]["flags"]
    assert rows["tied exact"]["reference"] == "tied"
    assert rows["tied exact"]["vs"] == pytest.approx(rows["tied exact"]["tokens_per_s"] / rows["tied"]["tokens_per_s"])
    # the exact path's recomputed GEMM is not the model's work: its MFU counts the model's FLOPs
    assert rows["tied exact"]["model_flops_per_token"] == rows["tied"]["flops_per_token"]
    assert rows["fairseq+plugin"]["vs"] is None  # fairseq alone did not run
    assert result["targets"] == [] and result["skipped"] == []  # the targets are a GPU's; every case ran
    # beam search: fairseq-generate's own count and rate of the forced-length hypotheses
    (decoded,) = result["decoding"]
    assert (decoded["name"], decoded["sentences"], decoded["vs_tied"]) == ("tied", 16, 1.0)
    assert decoded["tokens"] == 16 * (6 + 1)  # fairseq counts </s>
    # fairseq's rate is its sentences over its seconds, which it prints to 0.1 s
    assert decoded["sentences"] / decoded["sentences_per_s"] == pytest.approx(decoded["seconds"], abs=0.051)
    lines = (tmp_path / "t.md").read_text().splitlines()
    exact = rows["tied exact"]
    assert (f"| tied exact | 512 | {exact['tokens_per_s'] / 1e3:.1f}K | {100 * exact['mfu']:.1f}% | - | "
            f"{exact['vs']:.2f}x tied |") in lines
    assert f"| tied | 512 | {decoded['sentences_per_s']:.1f} | 1.00x |" in lines


def test_whole_model_rows_are_each_cases_median_run():
    import bench_gpu_training as bgt

    runs = [{"name": n, "vocab": 512, "tokens_per_s": t, "seconds": 1000 / t} for n, t in (
        ("tied", 100.0), ("joint-32", 80.0), ("joint-32", 90.0), ("tied", 130.0), ("tied", 120.0), ("joint-32", 70.0))]
    rows = {r["name"]: r for r in bgt.median_runs(runs)}
    assert rows["tied"] == {"name": "tied", "vocab": 512, "tokens_per_s": 120.0, "seconds": 1000 / 120.0,
                            "tokens_per_s_all": [100.0, 130.0, 120.0]}  # the median run's own figures
    assert rows["joint-32"]["tokens_per_s"] == 80.0 and bgt.spread(rows["joint-32"]) == (70.0, 90.0)
    even = bgt.median_runs([{"name": "tied", "vocab": 512, "tokens_per_s": t} for t in (100.0, 130.0)])
    assert even[0]["tokens_per_s"] == 100.0  # the lower middle run: a run that happened, not a mean of two
    # a case the time budget cut short says its median is of fewer runs, in the table and under the Markdown's
    assert [bgt.runs_cell(rows["tied"], 3), bgt.runs_cell(even[0], 3), bgt.runs_cell(even[0], 1)] == [
        "3: 100-130", "2 of 3: 100-130", ""]
    cfg = {"torch": "2.13.0", "precision": "bf16", "arch": "transformer", "max_tokens": 4096, "updates": 20,
           "rounds": 3}
    for r in [rows["tied"], *even]:
        r.update(mfu=0.1, vs=None, reference=None)
    lines = bgt.markdown({"config": cfg, "device": "CPU", "wall_seconds": 1.0, "peak_tflops": 1.0, "skipped": [],
                          "decoding": [], "rows": [rows["tied"], dict(even[0], vocab=1024)]})
    assert "20 timed updates, the median of 3 runs a case;" in lines[2]
    assert lines[-1] == "Median of fewer than 3 runs (the time budget was spent): tied |V|=1024 (2)"


def test_whole_model_ratios_and_targets():
    import bench_gpu_training as bgt

    args = bgt.parse(["--vocabs", "1024", "--joint-dims", "64"])
    rows = [{"name": n, "vocab": 1024, "tokens_per_s": t, "flops_per_token": f} for n, t, f in (
        ("fairseq", 200_000, 10.0), ("fairseq+plugin", 196_000, 10.0), ("tied", 100_000, 11.0),
        ("tied exact", 85_000, 12.0), ("joint-64", 88_000, 13.0), ("joint-64 exact", 60_000, 15.0))]
    bgt.ratios(rows, args)
    vs = {r["name"]: (r["reference"], r["vs"]) for r in rows}
    assert vs == {"fairseq": (None, None), "fairseq+plugin": ("fairseq", pytest.approx(0.98)),
                  "tied": (None, None), "tied exact": ("tied", pytest.approx(0.85)),
                  "joint-64": ("tied", pytest.approx(0.88)), "joint-64 exact": ("joint-64", pytest.approx(60 / 88))}
    assert [r["model_flops_per_token"] for r in rows] == [10.0, 10.0, 11.0, 11.0, 13.0, 13.0]
    targets = {t["target"]: t["pass"] for t in bgt.targets(rows, args, torch.device("cuda"))}
    assert targets == {
        "transformer_wmt_en_de with the plugin loaded, |V|=1024: target tokens/s": True,  # 196K >= 150K
        "transformer_wmt_en_de, |V|=1024: tokens/s with the plugin / without": True,  # 0.98 >= 0.97
        "tied exact / full softmax, |V|=1024": True,  # 0.85 >= 0.8
        "joint-64 / tied, |V|=1024, full softmax": False,  # 0.88 < 0.9
        "joint-64 exact / full softmax, |V|=1024": False,  # 0.68 < 0.8
    }
