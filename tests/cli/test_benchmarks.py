"""scripts/benchmark_output_layers.py: its FLOP accounting, its GEMM-limit chain, and a ``--quick`` run.

No timing is asserted here (speed targets live in the benchmark itself); the quick run checks that every
layer is measured and that the figures are consistent with each other.
"""

import importlib.util
import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import REPO, python_script

from fairseq_joint.modules.output_layers import OutputLayer

_spec = importlib.util.spec_from_file_location("benchmark_output_layers", REPO / "scripts" / "benchmark_output_layers.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

V, D, DJ, T = 10, 4, 6, 3


def _layer(preset, dj=DJ):
    emb = None if preset == "softmax" else nn.Embedding(V, D)
    return OutputLayer(preset, V, D, embedding=emb, joint_dim=dj)


@pytest.mark.parametrize(
    "preset, gemms",
    [
        ("softmax", [(T, D, V)]),  # Wᵀh (Eq. 3)
        ("tied", [(T, D, V)]),  # E h (Eq. 4)
        ("bilinear", [(T, D, D), (T, D, V)]),  # W h, then E (W h) (Eq. 6)
        ("label", [(V, D, D), (T, D, V)]),  # E W, then σ(E W) h (Eq. 7a)
        ("context", [(T, D, D), (T, D, V)]),  # W h, then E σ(W h) (Eq. 7b)
        ("joint", [(V, D, DJ), (T, D, DJ), (T, DJ, V)]),  # E Uᵀ, V h, then the joint-space product (Eqs. 12-14)
    ],
)
def test_gemm_accounting_by_hand(preset, gemms):
    layer = _layer(preset)
    assert bench.layer_gemms(layer, T) == gemms
    # forward + backward = 3 GEMMs of 2·M·K·N FLOPs per forward GEMM
    assert bench.train_flops(gemms) == sum(6 * m * k * n for m, k, n in gemms)


def test_joint_flops_at_the_issue_sizes_give_the_088_limit():
    v, t, d, dj = 32768, 4096, 512, 512
    tied = bench.train_flops([(t, d, v)])
    joint = bench.train_flops([(v, d, dj), (t, d, dj), (t, dj, v)])
    assert tied == 3 * 2 * t * d * v
    assert tied / joint == pytest.approx(0.877, abs=1e-3)  # the issue's "FLOP limit ≈ 0.88×"


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
    assert chain.flops == 3 * 2 * 5 * 3 * 7


def test_round_robin_rotates_and_drops_warmup():
    calls = []
    cases = {n: (lambda n=n: calls.append(n)) for n in "abc"}
    times = bench.round_robin(cases, rounds=2, warmup=1, what="test")
    assert calls == list("abc" "bca" "cab")
    assert {n: len(ts) for n, ts in times.items()} == {"a": 2, "b": 2, "c": 2}


def test_train_step_gradients_reach_features_embedding_and_layer():
    step = bench.TrainStep("joint", V, T, D, DJ, seed=0)
    step()
    for p in step.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all()
    assert step.subnormal_fraction() == 0.0


def test_quick_run_reports_every_layer(tmp_path):
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    proc = python_script("scripts/benchmark_output_layers.py", "--quick", "--json", out, "--plot", png)
    r = json.loads(out.read_text())
    layers = r["training"]["layers"]
    assert list(layers) == ["softmax", "tied", "bilinear", "label", "context", "joint-64", "joint-256"]
    for name, row in layers.items():
        assert len(row["seconds_all"]) == r["config"]["repeats"]
        assert row["seconds_median"] > 0 and row["gemm_limit_seconds"] > 0
        assert row["gemm_fraction"] == pytest.approx(row["gemm_limit_seconds"] / row["seconds_median"])
        assert row["speed_vs_tied"] == pytest.approx(layers["tied"]["seconds_median"] / row["seconds_median"])
        assert 0.05 < row["gemm_fraction"] < 5, (name, row["gemm_fraction"])
        assert row["subnormal_fraction"] == 0.0  # realistic init: the softmax stays out of denormals
    assert layers["tied"]["speed_vs_tied"] == 1.0
    assert layers["joint-256"]["train_flops"] == 6 * (2048 * 64 * 256 + 256 * 64 * 256 + 256 * 256 * 2048)
    dec = r["decoding"]
    assert set(dec["models"]) == {"tied", "joint", "joint_no_cache"}
    assert all(m["sentences_per_s"] > 0 for m in dec["models"].values())
    assert dec["cache_same_hypotheses"] is True
    targets = r["targets"]
    assert len(targets) == 1 + len(layers) + 1
    for t in targets:
        assert ("PASS" if t["pass"] else "FAIL") + "  " + t["target"] in proc.stdout
    assert png.stat().st_size > 10_000


def test_bad_option_is_one_clear_line():
    proc = python_script("scripts/benchmark_output_layers.py", "--quick", "--beam", "0", check=False)
    assert proc.returncode != 0
    assert "--beam must be a positive integer, got 0" in proc.stderr
