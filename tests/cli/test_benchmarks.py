"""The ``--quick`` run of every benchmark in benchmarks/, as a user runs it.

No timing is asserted (speed targets live in the benchmarks themselves): every case must be measured (its rounds
all there), every ratio and target value derived from timings is recomputed here from the raw per-round seconds in
the JSON (``seconds_all``), every verdict against its threshold, and the FLOP counts from shapes worked out by hand.
The harness (medians, a row's figures from its rounds) and the math are tested in
tests/unit/test_benchmark_accounting.py.
"""

import json
import os
import statistics
import sys

import bench_label_embedding
import bench_output_layers
import pytest
from conftest import REPO, cli, python_script


def median(row):
    return statistics.median(row["seconds_all"])


def assert_target_lines(result, stdout):
    """Every target's verdict is its value against its threshold in its direction, and is printed as such."""
    for t in result["targets"]:
        op = ">=" if t["higher_is_better"] else "<="
        assert t["pass"] == (t["value"] >= t["threshold"] if t["higher_is_better"] else t["value"] <= t["threshold"])
        assert f"{'PASS' if t['pass'] else 'FAIL'}  {t['target']}: {t['value']:.3f} (target {op} {t['threshold']})" in stdout


def assert_png(path):
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def quick_run(script, tmp_path, *extra):
    """``python benchmarks/<script> --quick`` run from ``tmp_path`` with relative ``--json``/``--plot`` paths: its
    figures and stdout, once its targets' lines and its PNG are checked."""
    proc = python_script(f"benchmarks/{script}", "--quick", *extra, "--json", "result.json", "--plot",
                         "plots/result.png", cwd=tmp_path)
    result = json.loads((tmp_path / "result.json").read_text())
    assert_target_lines(result, proc.stdout)
    assert_png(tmp_path / "plots" / "result.png")
    return result, proc.stdout


# the quick configuration (|V|=2048, T=256, d=dh=64, dj ∈ {64, 256}): each layer's forward GEMMs (M, K, N) and
# its forward + backward FLOPs, 6·M·K·N summed, worked out by hand
QUICK_GEMMS = {
    "softmax": [(256, 64, 2048)],
    "tied": [(256, 64, 2048)],
    "bilinear": [(256, 64, 64), (256, 64, 2048)],
    "label": [(2048, 64, 64), (256, 64, 2048)],
    "context": [(256, 64, 64), (256, 64, 2048)],
    "joint-64": [(2048, 64, 64), (256, 64, 64), (256, 64, 2048)],
    "joint-256": [(2048, 64, 256), (256, 64, 256), (256, 256, 2048)],
}
QUICK_FLOPS = {"softmax": 201_326_592, "tied": 201_326_592, "bilinear": 207_618_048, "label": 251_658_240,
               "context": 207_618_048, "joint-64": 257_949_696, "joint-256": 1_031_798_784}


def test_output_layers_quick_reports_every_layer(tmp_path):
    r, _ = quick_run("bench_output_layers.py", tmp_path)
    layers = r["training"]["layers"]
    assert list(layers) == ["softmax", "tied", "bilinear", "label", "context", "joint-64", "joint-256"]
    chain_median = {tuple(g["shape_mkn"]): median(g) for g in r["training"]["gemms"]}
    assert set(chain_median) == {gm for gemms in QUICK_GEMMS.values() for gm in gemms}
    tied = median(layers["tied"])
    for name, row in layers.items():
        assert len(row["seconds_all"]) == r["config"]["repeats"]
        assert [tuple(gm) for gm in row["gemms_mkn"]] == QUICK_GEMMS[name]
        assert row["train_flops"] == QUICK_FLOPS[name]
        limit = sum(chain_median[gm] for gm in QUICK_GEMMS[name])
        assert row["gemm_limit_seconds"] == pytest.approx(limit)
        assert row["gemm_fraction"] == pytest.approx(limit / median(row))
        assert row["speed_vs_tied"] == pytest.approx(tied / median(row))
        assert row["flop_limit_vs_tied"] == pytest.approx(201_326_592 / QUICK_FLOPS[name])
        assert row["subnormal_fraction"] == 0.0  # realistic init: the softmax stays out of denormals
    assert layers["joint-256"]["train_flops"] == 6 * (2048 * 64 * 256 + 256 * 64 * 256 + 256 * 256 * 2048)
    dec = r["decoding"]
    assert set(dec["models"]) == {"tied", "joint", "joint_no_cache"}
    assert dec["models"]["joint"]["sentences_per_s"] == pytest.approx(4 / median(dec["models"]["joint"]))  # batch 4
    assert dec["joint_vs_tied"] == pytest.approx(median(dec["models"]["tied"]) / median(dec["models"]["joint"]))
    assert dec["cache_same_hypotheses"] is True
    targets = r["targets"]
    assert len(targets) == 1 + len(layers) + 1
    assert targets[0]["target"] == "joint-64 training step vs tied" and targets[0]["higher_is_better"]
    gemm_targets = {t["target"]: t for t in targets[1:-1]}
    assert set(gemm_targets) == {f"{name} GFLOP/s vs its GEMM limit" for name in layers}
    for name, row in layers.items():
        t = gemm_targets[f"{name} GFLOP/s vs its GEMM limit"]
        assert t["value"] == row["gemm_fraction"]
    assert targets[-1]["value"] == dec["joint_vs_tied"]
    assert targets[0]["value"] == pytest.approx(tied / median(layers["joint-64"]))


def test_bad_option_is_one_clear_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        bench_output_layers.parse(["--quick", "--beam", "0"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("--beam must be a positive integer, got 0")


def test_large_vocab_quick_runs(tmp_path):
    # a relative script path and relative output paths, from a working directory outside the repository: the
    # memory cases' fresh processes must still find the script
    script = os.path.relpath(REPO / "benchmarks" / "bench_large_vocab.py", tmp_path)
    proc = cli(sys.executable, script, "--quick", "--json", "r.json", "--plot", "plots/r.png", cwd=tmp_path)
    result = json.loads((tmp_path / "r.json").read_text())
    layers = {(r["layer"], r["rate"]) for r in result["speed"]}
    assert {("softmax", 1.0), ("tied", 0.25), ("joint-64", 0.05)} <= layers
    full = {r["layer"]: median(r) for r in result["speed"] if r["rate"] == 1.0}
    for row in result["speed"]:
        assert len(row["seconds_all"]) == 2
        assert row["tokens_per_s"] == pytest.approx(64 / median(row))  # --quick: 64 tokens
        assert row["speedup_vs_own_full"] == pytest.approx(full[row["layer"]] / median(row))
        assert row["vs_tied_full"] == pytest.approx(full["tied"] / median(row))
    plain, chunked = result["memory"]
    assert (plain["mode"], chunked["mode"]) == ("plain", "chunked")
    for row in (plain, chunked):  # --quick: one fresh-process round of each mode
        assert row["peak_mib_all"] == [row["peak_mib"]] and row["seconds_all"] == [row["seconds"]]
    assert chunked["peak_mib"] < plain["peak_mib"]  # the chunks' logits, not the T x |V| ones (about 5 MiB less)
    assert abs(plain["loss"] - chunked["loss"]) < 1e-2 * abs(plain["loss"])
    assert {t["target"] for t in result["targets"]} >= {"chunked / plain peak memory", "chunked / plain time"}
    values = {t["target"]: t["value"] for t in result["targets"]}
    assert values["chunked / plain peak memory"] == pytest.approx(chunked["peak_mib"] / plain["peak_mib"])
    assert values["chunked / plain time"] == pytest.approx(chunked["seconds"] / plain["seconds"])
    joint25 = next(r for r in result["speed"] if r["layer"] == "joint-64" and r["rate"] == 0.25)
    assert values["25% sampling speed-up of joint dj=64 at |V|=2048"] == pytest.approx(full["joint-64"] / median(joint25))
    assert_target_lines(result, proc.stdout)
    assert_png(tmp_path / "plots" / "r.png")


def test_label_embedding_quick_runs_every_case_in_a_fresh_process(tmp_path):
    result, _ = quick_run("bench_label_embedding.py", tmp_path)  # each case runs in a child process
    rows = {(r["level"], r["rate"], r["criterion"]): r for r in result["rows"]}
    assert set(rows) == {(level, rate, crit) for level in ("output layer + loss", "whole step")
                         for rate in ("full", "25%") for crit in ("cross_entropy", "label_embedding")}
    for (level, rate, _), row in rows.items():
        assert len(row["seconds_all"]) == 1  # --quick: 1 round x 1 step
        base = rows[(level, rate, "cross_entropy")]
        assert row["ratio"] == pytest.approx(median(row) / median(base))
        assert row["tokens_per_s"] == pytest.approx(128 / median(row))  # --quick: 128 tokens
    targets = {t["target"]: t for t in result["targets"]}
    for rate, limit in (("full", bench_label_embedding.TARGETS["full"]), ("25%", bench_label_embedding.TARGETS["sampled"])):
        t = targets[f"whole step, {rate}, label embedding / cross-entropy"]
        assert t["threshold"] == limit and t["higher_is_better"] is False
        assert t["value"] == pytest.approx(median(rows[("whole step", rate, "label_embedding")])
                                           / median(rows[("whole step", rate, "cross_entropy")]))


def test_label_sampling_quick(tmp_path):
    result, stdout = quick_run("bench_label_sampling.py", tmp_path)
    assert [r["rate"] for r in result["results"]] == [0.1, 0.25, 0.5, 1.0]
    assert "speed-up vs 100%" in stdout
    full = median(result["results"][-1])
    for row in result["results"]:
        assert len(row["seconds_all"]) == 3  # --quick: 3 timed rounds
        assert row["speedup_vs_100"] == pytest.approx(full / median(row))
    (t,) = result["targets"]
    assert t["target"] == "10% sampling speed-up vs 100%" and t["higher_is_better"]
    assert t["value"] == pytest.approx(full / median(result["results"][0]))


def test_exact_softmax_compares_every_implementation_on_the_same_loss(tmp_path):
    # one |V| (so both targets are about it), tied and a joint layer, ours at one chunk size, torch's chunked op
    result, _ = quick_run("bench_exact_softmax.py", tmp_path, "--vocabs", "2048", "--layers", "tied", "joint-128",
                          "--impls", "plain", "chunked", "torch-chunked", "--chunks", "256", "--torch-batch-chunks", "32")
    rows = {(r["layer"], r["impl"]): r for r in result["rows"]}
    assert set(rows) == {("tied", "plain"), ("tied", "chunked-256"), ("tied", "torch-chunked"),
                         ("tied", "torch-chunked-32"), ("joint-128", "plain"), ("joint-128", "chunked-256")}
    for (layer, _), row in rows.items():
        plain = rows[(layer, "plain")]
        assert len(row["seconds_all"]) == 2 and row["peak_mib"] >= 0  # --quick: 2 timed steps
        assert abs(row["loss"] / plain["loss"] - 1) < 1e-5  # every implementation computes the same loss
        assert row["time_vs_plain"] == pytest.approx(median(row) / median(plain))
    targets = {t["target"]: t for t in result["targets"]}
    fastest = min(("torch-chunked", "torch-chunked-32"), key=lambda impl: median(rows[("tied", impl)]))
    worst = max(rows.items(), key=lambda item: abs(item[1]["loss_vs_plain"]))[0]
    loss_target = f"every contender's |loss / plain - 1| in ppm, largest ({worst[0]} |V|=2048 {worst[1]})"
    assert set(targets) == {"joint-128 |V|=2048: chunked-256 / plain peak memory",
                            "joint-128 |V|=2048: chunked-256 / plain time",
                            f"tied |V|=2048: chunked-256 / {fastest} time",  # against torch's fastest setting
                            f"tied |V|=2048: chunked-256 / {fastest} peak memory", loss_target}
    assert targets["joint-128 |V|=2048: chunked-256 / plain time"]["value"] == pytest.approx(
        median(rows[("joint-128", "chunked-256")]) / median(rows[("joint-128", "plain")]))
    assert targets[f"tied |V|=2048: chunked-256 / {fastest} time"]["value"] == pytest.approx(
        median(rows[("tied", "chunked-256")]) / median(rows[("tied", fastest)]))
    assert targets[loss_target]["pass"] and targets[loss_target]["value"] == pytest.approx(
        1e6 * abs(rows[worst]["loss_vs_plain"]))


def test_gile_epoch_quick(tmp_path, sentence_encoder):
    result, stdout = quick_run("bench_gile_epoch.py", tmp_path, "--pretrained-encoder", sentence_encoder)
    assert [r["case"] for r in result["results"]] == ["pretrained + gile", "pretrained + bil_n16",
                                                       "pretrained + linear", "hybrid + gile", "WAN + gile",
                                                       "fine-tuned + gile"]
    assert result["steps_per_epoch"] == 20 and result["encoder_dim"] == 16  # 640 documents in batches of 32
    rows = {r["case"]: r for r in result["results"]}
    wan = rows["WAN + gile"]
    for row in result["results"]:
        assert len(row["seconds_all"]) == 3
        assert row["epoch_s"] == pytest.approx(20 * median(row))
        assert row["vs_wan_gile"] == pytest.approx(row["epoch_s"] / wan["epoch_s"])
    # the fine-tuned step reads the bundled sample's texts as word pieces (the tiny encoder reads 64) and trains the
    # encoder with the head: its parameters are among the trained ones
    shapes = result["finetuned_batch"]
    assert result["config"]["texts"].endswith(os.path.join("data", "debtags-sample"))
    assert shapes["max_seq_length"] == 64 and 0 < shapes["text_pieces_mean"] <= shapes["text_pieces_padded"] <= 64
    assert 0 < shapes["encoder_parameters"] < shapes["trainable_parameters"]
    assert "fine-tuned + gile: " in stdout and "re-encoded with gradient every update" in stdout
    (t,) = result["targets"]
    assert not t["higher_is_better"]
    assert t["value"] == pytest.approx(result["results"][0]["epoch_s"])
    # a validation's metrics, the package's and scikit-learn's, computed alike (the script refuses otherwise)
    ours, sklearn = result["validation"]
    assert (ours["impl"], sklearn["impl"]) == ("fairseq-joint", "scikit-learn") and len(ours["seconds_all"]) == 1
    assert ours["gamma"] == sklearn["gamma"] and ours["avgpr_sum"] == pytest.approx(sklearn["avgpr_sum"], rel=1e-9)
    assert ours["avgpr_sum"] > 0 and ours["gamma"] != 0  # 100 documents over 80 labels: something to calibrate
    assert ours["speedup_vs_sklearn"] == pytest.approx(sklearn["seconds_median"] / ours["seconds_median"])
    assert "GILE validation: the ranking metrics of 100 documents" in stdout


def test_gile_multilingual_quick_compares_one_joint_update_with_the_two_apart(tmp_path):
    result, _ = quick_run("bench_gile_multilingual.py", tmp_path)
    rows = result["results"]
    assert [r["case"] for r in rows] == ["en alone", "pl alone", "en + pl"]
    for row in rows:
        assert len(row["seconds_all"]) == 3
    assert result["ratio"] == pytest.approx(median(rows[2]) / (median(rows[0]) + median(rows[1])))
    (t,) = result["targets"]
    assert not t["higher_is_better"]
    assert t["value"] == pytest.approx(result["ratio"])
