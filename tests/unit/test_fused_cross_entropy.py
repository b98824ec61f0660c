"""The fused GPU path of the exact softmax (fairseq_joint/modules/fused_cross_entropy.py): its Triton kernels run here
in Triton's CPU interpreter (``TRITON_INTERPRET=1``, set by tests/conftest.py when there is no CUDA; on a GPU they run
compiled). Every output layer, per-class, shared and no bias, label smoothing, ignored tokens: the loss and every
gradient equal the plain ``log_softmax`` path's; non-finite logits give what the plain path gives, on every path."""

import logging

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss

from fairseq_joint.modules import chunked_softmax, fused_cross_entropy
from fairseq_joint.modules.chunked_softmax import chunked_cross_entropy, exact_softmax_path
from fairseq_joint.modules.fused_cross_entropy import ROW_ALIGNMENT, fused_chunk_rows, fused_path_problem
from fairseq_joint.modules.output_layers import OUTPUT_LAYER_CHOICES, OutputLayer, OutputLayerSpec

pytest.importorskip("triton")

V, D, DJ, N = 300, 16, 24, 21
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
PAD = -100


def make(kind, bias="per_class", dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    E = nn.Embedding(V, D)
    nn.init.normal_(E.weight, 0, D ** -0.5)
    layer = OutputLayer(OutputLayerSpec(kind, joint_dim=DJ, bias=bias), V, D, None if kind == "softmax" else E)
    with torch.no_grad():  # non-zero biases, so that their gradients are exercised
        for name, p in layer.named_parameters():
            if name.endswith("bias"):
                p.normal_()
    layer.to(DEVICE, dtype)
    E.to(DEVICE, dtype)
    h = torch.randn(N, D, device=DEVICE, dtype=dtype, requires_grad=True)
    t = torch.randint(0, V, (N,), device=DEVICE)
    t[[3, 11]] = PAD
    return layer, [h] + list(layer.parameters()) + ([] if kind == "softmax" else [E.weight]), h, t


def plain(layer, h, t, eps):
    keep = t != PAD
    return label_smoothed_nll_loss(F.log_softmax(layer(h).float(), -1)[keep], t[keep], eps)


@pytest.mark.parametrize("kind", OUTPUT_LAYER_CHOICES)
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_loss_and_every_gradient_equal_the_plain_path(kind, eps):
    layer, params, h, t = make(kind)
    ref, ref_nll = plain(layer, h, t, eps)
    out, nll = chunked_cross_entropy(layer, h, t, 128, ignore_index=PAD, label_smoothing=eps, path="fused")
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(nll, ref_nll, rtol=1e-5, atol=1e-4)
    assert not nll.requires_grad
    for p, a, b in zip(params, torch.autograd.grad(out, params), torch.autograd.grad(ref, params)):
        assert a.dtype == p.dtype
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bias", ["shared", "none"])
@pytest.mark.parametrize("kind", ["tied", "joint"])
def test_shared_bias_and_no_bias(kind, bias):
    """GILE's one scalar bias (Eq. 14) and a layer without b: the same loss and gradients as the plain path."""
    layer, params, h, t = make(kind, bias=bias)
    ref, _ = plain(layer, h, t, 0.0)
    out, _ = chunked_cross_entropy(layer, h, t, 100, ignore_index=PAD, path="fused")
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-4)
    for a, b in zip(torch.autograd.grad(out, params), torch.autograd.grad(ref, params)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_chunk_rows_are_aligned_and_cover_the_vocabulary():
    assert fused_chunk_rows(8192, 128_000) == 8192
    assert fused_chunk_rows(1000, 128_000) == 1024  # the nearest multiple of 128
    assert fused_chunk_rows(10, 128_000) == ROW_ALIGNMENT  # at least one aligned block
    assert fused_chunk_rows(300, 300) == fused_chunk_rows(10 ** 6, 300) == 300  # one chunk: the whole vocabulary
    layer, params, h, t = make("joint")
    ref, _ = plain(layer, h, t, 0.1)
    grads = torch.autograd.grad(ref, params)
    for chunk in (1, 129, 299, 300, 5000):  # one chunk of 128, uneven last chunks, one chunk
        out, _ = chunked_cross_entropy(layer, h, t, chunk, ignore_index=PAD, label_smoothing=0.1, path="fused")
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-4)
        for a, b in zip(torch.autograd.grad(out, params), grads):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_validation_computes_the_loss_alone_and_repeats_exactly():
    layer, params, h, t = make("joint")
    layer.eval()
    with torch.no_grad():
        ref, ref_nll = plain(layer, h, t, 0.1)
        out, nll = chunked_cross_entropy(layer, h, t, 128, ignore_index=PAD, label_smoothing=0.1, path="fused")
    assert not out.requires_grad
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(nll, ref_nll, rtol=1e-5, atol=1e-4)
    layer.train()
    first = [g.clone() for g in torch.autograd.grad(chunked_cross_entropy(layer, h, t, 128, ignore_index=PAD,
                                                                          path="fused")[0], params)]
    again = torch.autograd.grad(chunked_cross_entropy(layer, h, t, 128, ignore_index=PAD, path="fused")[0], params)
    for a, b in zip(first, again):  # no atomics: the same bits every time
        assert torch.equal(a, b)


def test_a_weighted_loss_scales_every_gradient():
    """Backward takes the upstream gradient (fp16 loss scaling, a weighted sum of losses) as the plain path does."""
    layer, params, h, t = make("label")
    out, _ = chunked_cross_entropy(layer, h, t, 128, ignore_index=PAD, label_smoothing=0.1, path="fused")
    ref, _ = plain(layer, h, t, 0.1)
    for a, b in zip(torch.autograd.grad(3.0 * out, params), torch.autograd.grad(3.0 * ref, params)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_16_bit_parameters_and_features():
    """``--fp16``/``--bf16`` keep the parameters in 16 bits: the logits GEMMs run in that dtype, the log-sum-exp and
    the gradients accumulate in fp32 and come back in the parameters' dtype, within 16-bit rounding of fp32 (fp16
    here: Triton's interpreter reads no bf16; the GPU tests run bf16)."""
    ref_layer, ref_params, ref_h, t = make("joint")
    ref, _ = plain(ref_layer, ref_h, t, 0.1)
    layer, params, h, _ = make("joint", dtype=torch.float16)
    out, _ = chunked_cross_entropy(layer, h, t, 128, ignore_index=PAD, label_smoothing=0.1, path="fused")
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, ref, rtol=1e-2, atol=1e-2)
    for p, a, b in zip(params, torch.autograd.grad(out, params), torch.autograd.grad(ref, ref_params)):
        assert a.dtype == p.dtype == torch.float16 and torch.isfinite(a).all()
        assert F.cosine_similarity(a.float().flatten(), b.flatten(), dim=0) > 0.999


# ---------------------------------------------------------------------------------------------- non-finite logits
def poisoned(layer, h, t, case):
    """A batch whose logits hold the non-finite value of ``case`` (through the features of one token, or the bias)."""
    h, t = h.detach().clone(), t.clone()
    row = 0
    if case == "nan feature":
        h[row, 0] = float("nan")
    elif case == "+inf logit":
        with torch.no_grad():
            layer.bias[5] = float("inf")
    elif case == "-inf at the target":
        with torch.no_grad():
            layer.bias[7] = float("-inf")
        t[row] = 7
    elif case == "-inf elsewhere":  # a masked class: every loss stays finite
        with torch.no_grad():
            layer.bias[7] = float("-inf")
        t[t == 7] = 8
    elif case == "nan in an ignored token":  # padding is not scored, whatever its logits
        h[3, 0] = float("nan")
    return h.requires_grad_(), t


CASES = ["nan feature", "+inf logit", "-inf at the target", "-inf elsewhere", "nan in an ignored token"]


def plain_terms(layer, h, t, eps):
    """The plain path's loss and nll with ``log_softmax``, each term counted only when its weight is not 0: equal to
    fairseq's ``label_smoothed_nll_loss`` except where that multiplies an infinite smoothing term (a -inf logit) by
    ε_i = 0 and gets NaN."""
    keep = t != PAD
    lprobs = F.log_softmax(layer(h).float(), -1)[keep]
    nll = -lprobs.gather(-1, t[keep].unsqueeze(-1)).sum()
    eps_i = eps / (V - 1)
    loss = (1 - eps - eps_i) * nll
    return (loss - eps_i * lprobs.sum() if eps else loss), nll


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("path", ["fused", "tokens", "vocabulary"])
@pytest.mark.parametrize("kind", ["tied", "joint"])
def test_non_finite_logits_give_the_plain_paths_loss(kind, path, case):
    layer, _, h, t = make(kind)
    h, t = poisoned(layer, h, t, case)
    for eps in (0.0, 0.1):
        ref, ref_nll = plain_terms(layer, h, t, eps)
        out, nll = chunked_cross_entropy(layer, h, t, 128, ignore_index=PAD, label_smoothing=eps, path=path)
        for ours, theirs in ((out, ref), (nll, ref_nll)):
            assert torch.isnan(ours) == torch.isnan(theirs) and torch.isinf(ours) == torch.isinf(theirs), (ours, theirs)
            if torch.isfinite(theirs):
                torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------------------------------------- which path runs
def test_the_cpu_keeps_its_paths_and_a_gpu_without_the_kernels_says_why(monkeypatch, caplog):
    layer, _, _, _ = make("tied")
    cpu = torch.device("cpu")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert fused_path_problem(cpu) == "cpu is not a CUDA device"
    with caplog.at_level(logging.INFO, logger=chunked_softmax.__name__):
        assert exact_softmax_path(layer, cpu, N, 128) == "tokens"
    assert not caplog.records  # the CPU path is the CPU's own: nothing to say
    monkeypatch.setattr(chunked_softmax, "fused_path_problem", lambda device: "Triton is not installed (pip install "
                        "triton; CUDA builds of torch ship it)")
    monkeypatch.setattr(chunked_softmax, "_said", set())
    gpu = torch.device("cuda", 0)
    with caplog.at_level(logging.INFO, logger=chunked_softmax.__name__):
        for _ in range(3):
            assert exact_softmax_path(layer, gpu, N, 128) == "tokens"
    notices = [r.getMessage() for r in caplog.records]
    assert notices == ["the exact softmax in chunks of 128 vocabulary rows runs the CPU-tuned tokens path on cuda:0, not "
                       "the fused GPU path: Triton is not installed (pip install triton; CUDA builds of torch ship it)"]
    monkeypatch.setattr(chunked_softmax, "fused_path_problem", lambda device: None)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=chunked_softmax.__name__):
        assert exact_softmax_path(layer, gpu, N, 1000) == "fused"
    assert [r.getMessage() for r in caplog.records] == [
        "the exact softmax in chunks of 1000 vocabulary rows runs fused on cuda:0"]  # 1000 > |V|: one chunk of 300


def test_the_fused_path_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("FAIRSEQ_JOINT_FUSED", "0")
    assert fused_path_problem(torch.device("cuda", 0)) == "FAIRSEQ_JOINT_FUSED=0 switches it off"


@pytest.mark.parametrize("path", ["fused", "tokens", "vocabulary"])
def test_a_target_outside_the_vocabulary_stops_every_path(path):
    """A target id ≥ |V| is a bug of the data or the caller: every path stops (the vocabulary walks would otherwise
    never find its logit and return a finite loss)."""
    layer, _, h, t = make("tied")
    t[0] = V
    with pytest.raises(RuntimeError, match="a target id is not in the vocabulary"):
        chunked_cross_entropy(layer, h, t, 128, ignore_index=PAD, path=path)


@pytest.mark.parametrize("fused", [True, False])
def test_per_token_scores_are_the_log_softmax_of_the_target(fused, monkeypatch):
    """``exact_target_log_probs`` (fairseq-generate --score-reference): every token's log p(y | h), by the fused
    forward or the CPU's vocabulary walk, without the N x |V| logits."""
    if not fused:
        monkeypatch.setenv("FAIRSEQ_JOINT_FUSED", "0")
    monkeypatch.setattr(chunked_softmax, "_said", set())
    layer, _, h, t = make("joint")
    t[t == PAD] = 5
    layer.eval()
    if fused and DEVICE == "cpu":  # the interpreter stands in for a GPU
        monkeypatch.setattr(chunked_softmax, "exact_softmax_path", lambda *args: "fused")
    scores = chunked_softmax.exact_target_log_probs(layer, h.view(3, 7, D), t.view(3, 7), 128)
    with torch.no_grad():
        expected = F.log_softmax(layer(h), -1).gather(-1, t.unsqueeze(-1)).view(3, 7)
    assert scores.shape == (3, 7) and not scores.requires_grad
    torch.testing.assert_close(scores, expected, rtol=1e-5, atol=1e-5)


def test_an_old_gpu_is_named_with_its_capability(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (6, 1))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla P100")
    monkeypatch.setattr(fused_cross_entropy, "_triton_problem", lambda: None)
    assert fused_path_problem(torch.device("cuda", 0)) == ("Tesla P100 has compute capability 6.1; the kernels need "
                                                           "7.0 or newer")


# ---------------------------------------------------------------------------------------------- on a GPU (-m gpu)
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("kind", OUTPUT_LAYER_CHOICES)
def test_cuda_bf16_autocast_and_bf16_parameters_against_fp32(kind):
    """The compiled kernels under --amp (fp32 parameters, bf16 autocast) and --bf16 (bf16 parameters): the loss
    within bf16 rounding of fp32's, every gradient in its parameter's dtype pointing where fp32's does."""
    layer, params, h, t = make(kind)
    ref, _ = plain(layer, h, t, 0.1)
    grads_ref = torch.autograd.grad(ref, params)
    assert exact_softmax_path(layer, h.device, N, 128) == "fused"
    with torch.autocast("cuda", torch.bfloat16):
        amp, _ = chunked_cross_entropy(layer, h, t, 128, ignore_index=PAD, label_smoothing=0.1)
    layer16, params16, h16, _ = make(kind, dtype=torch.bfloat16)
    bf16, _ = chunked_cross_entropy(layer16, h16, t, 128, ignore_index=PAD, label_smoothing=0.1)
    for loss, ps in ((amp, params), (bf16, params16)):
        torch.testing.assert_close(loss, ref, rtol=1e-2, atol=1e-2)
        for p, g, r in zip(ps, torch.autograd.grad(loss, ps), grads_ref):
            assert g.dtype == p.dtype and torch.isfinite(g).all()
            assert F.cosine_similarity(g.float().flatten(), r.flatten(), dim=0) > 0.99


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fused_path_never_waits_for_the_host():
    layer, params, h, t = make("joint")

    def step():
        with torch.autocast("cuda", torch.bfloat16):
            loss, _ = chunked_cross_entropy(layer, h, t, 128, ignore_index=PAD, label_smoothing=0.1)
        loss.backward()

    step()  # compiles the kernels
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
