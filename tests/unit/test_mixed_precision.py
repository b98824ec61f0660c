"""Mixed precision: every output layer, the sampled and chunked softmax, the label-embedding loss and the GILE heads
under ``torch.autocast("cpu", torch.bfloat16)`` against fp32 on the same batch; the eval cache across autocast;
gradients in the parameters' dtype. The same tests run on CUDA in fp16 and bf16 (``-m gpu``; skipped without one).

Tolerance: the losses (sums over the batch, in fp32) within 1% of fp32 — bf16 keeps 8 significant bits, so each
logit is off by up to ~0.4% of its size; nothing may be inf or NaN.
"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from fairseq_joint.criterions.multilabel_classification import classification_loss
from fairseq_joint.modules.chunked_softmax import chunked_cross_entropy
from fairseq_joint.modules.label_embedding import LabelEmbedding, label_embedding_terms
from fairseq_joint.modules.output_layers import OUTPUT_LAYER_CHOICES, OutputLayer, OutputLayerSpec
from fairseq_joint.modules.sampling import CandidateSampler, candidate_logits

V, D, DJ, T = 300, 16, 24, 64
RTOL = 1e-2

DEVICES = [("cpu", torch.bfloat16)]
if torch.cuda.is_available():
    DEVICES += [("cuda", torch.float16), ("cuda", torch.bfloat16)]
PRECISIONS = [pytest.param(dev, dt, id=f"{dev}-{str(dt).split('.')[-1]}",
                           marks=[pytest.mark.gpu] if dev == "cuda" else []) for dev, dt in DEVICES]


def make(kind, device, seed=0):
    torch.manual_seed(seed)
    E = nn.Embedding(V, D).to(device)
    nn.init.normal_(E.weight, 0, D ** -0.5)
    layer = OutputLayer(OutputLayerSpec(kind, joint_dim=DJ), V, D, None if kind == "softmax" else E).to(device)
    h = torch.randn(T, D, device=device, requires_grad=True)
    t = torch.randint(0, V, (T,), device=device)
    return layer, E, h, t


def params_of(layer, E):
    return list(layer.parameters()) + ([] if layer.output_layer == "softmax" else [E.weight])


def close(value, reference):
    assert torch.isfinite(value).all(), value
    torch.testing.assert_close(value.float(), reference.float(), rtol=RTOL, atol=1e-3)


@pytest.mark.parametrize("device, dtype", PRECISIONS)
@pytest.mark.parametrize("kind", OUTPUT_LAYER_CHOICES)
def test_every_loss_of_every_layer_under_autocast(kind, device, dtype):
    layer, E, h, t = make(kind, device)
    reference = F.cross_entropy(layer(h), t, reduction="sum")
    grads_ref = torch.autograd.grad(reference, [h] + params_of(layer, E))
    sampler = CandidateSampler(V, "uniform", sample_rate=0.5)
    torch.manual_seed(1)
    cands = sampler.sample(t)
    sampled_ref = F.cross_entropy(candidate_logits(layer, h, cands), cands.targets, reduction="sum")
    with torch.autocast(device, dtype):
        logits = layer(h)
        assert logits.dtype == dtype
        plain = F.cross_entropy(logits.float(), t, reduction="sum")
        losses = {path: chunked_cross_entropy(layer, h, t, 50, path=path, label_smoothing=0.1)[0]
                  for path in ("tokens", "vocabulary")}
        sampled = F.cross_entropy(candidate_logits(layer, h, cands).float(), cands.targets, reduction="sum")
    close(plain, reference)
    close(sampled, sampled_ref)
    smoothed_ref = chunked_cross_entropy(layer, h, t, 50, path="tokens", label_smoothing=0.1)[0]
    for loss in losses.values():
        close(loss, smoothed_ref)
    for path, loss in losses.items():
        grads = torch.autograd.grad(loss, [h] + params_of(layer, E))
        for g, p in zip(grads, [h] + params_of(layer, E)):
            assert g.dtype == p.dtype == torch.float32 and torch.isfinite(g).all(), path
    # the gradients of the bf16 plain path point where fp32's do
    grads = torch.autograd.grad(plain, [h] + params_of(layer, E))
    for g, r in zip(grads, grads_ref):
        assert F.cosine_similarity(g.flatten().float(), r.flatten(), dim=0) > 0.99


@pytest.mark.parametrize("device, dtype", PRECISIONS)
def test_eval_cache_is_not_shared_between_autocast_and_full_precision(device, dtype):
    layer, _, h, _ = make("joint", device)
    layer.eval()
    with torch.no_grad():
        full = layer(h)
        with torch.autocast(device, dtype):
            low = layer(h)
            assert low.dtype == dtype and layer._cache.dtype == dtype
        again = layer(h)
    assert again.dtype == torch.float32 and layer._cache.dtype == torch.float32
    torch.testing.assert_close(again, full)
    # each bf16 logit: 8 significant bits of values of order 1 (the fp16 ones are closer)
    assert torch.isfinite(low).all() and (low.float() - full).abs().max() < 5e-2


@pytest.mark.parametrize("device, dtype", PRECISIONS)
def test_label_embedding_terms_under_autocast(device, dtype):
    torch.manual_seed(0)
    emb = LabelEmbedding(V, 8).to(device)
    layer, _, h, t = make("joint", device)
    o2 = OutputLayer(OutputLayerSpec("softmax"), V, D).to(device)
    reference = label_embedding_terms(layer(h), o2(h.detach()), emb(t), t)
    with torch.autocast(device, dtype):
        terms = label_embedding_terms(layer(h), o2(h.detach()), emb(t), t)
    for key in ("hard1", "soft1", "hard2", "hinge", "emb"):
        close(terms[key], reference[key])
    (terms["o1"] + terms["o2"]).backward()
    for p in list(layer.parameters()) + list(o2.parameters()) + list(emb.parameters()):
        assert p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all()


@pytest.mark.parametrize("device, dtype", PRECISIONS)
@pytest.mark.parametrize("head", ["linear", "bil_yh15", "bil_n16", "gile", "gile_label_only", "gile_input_only"])
def test_gile_heads_under_autocast(head, device, dtype):
    from fairseq_joint.models.gile_classifier import GileClassifier, GileClassifierConfig

    cfg = GileClassifierConfig(head=head, embed_dim=D, encoder_dim=D, joint_dim="12")
    torch.manual_seed(0)
    layer = GileClassifier.build_head(cfg, 40).to(device)
    h = torch.randn(T, D, device=device)
    labels = torch.randn(40, D, device=device)
    target = (torch.rand(T, 40, device=device) < 0.1).float()

    def scores():
        if head == "linear":
            return layer(h, ids=torch.arange(40, device=device))
        return layer(h, class_inputs=labels)

    reference = classification_loss(scores(), target, "bce")
    with torch.autocast(device, dtype):
        loss = classification_loss(scores().float(), target, "bce")
    close(loss, reference)
    loss.backward()
    assert all(p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all() for p in layer.parameters())


def test_fixed_size_candidates_are_drawn_without_unique_or_multinomial(monkeypatch):
    """With a sample rate that holds every target token, V' is drawn on the device without the data-dependent ops
    (torch.unique, torch.multinomial) that make the host wait."""
    sampler = CandidateSampler(V, "unigram", sample_rate=0.3, counts=torch.arange(V, 0, -1).double(),
                               ignore_ids=[1], never_sample=[0, 1])
    targets = torch.randint(2, V, (4, 9))
    targets[0, :3] = 1

    def forbidden(*args, **kwargs):
        raise AssertionError("a host synchronisation")

    monkeypatch.setattr(torch, "unique", forbidden)
    monkeypatch.setattr(torch, "multinomial", forbidden)
    c = sampler.sample(targets)
    assert c.ids.numel() == round(0.3 * V) and torch.is_tensor(c.num_positives)
    positives = set(targets[targets != 1].tolist())
    assert set(c.ids[: int(c.num_positives)].tolist()) == positives and int(c.num_positives) == len(positives)
    assert not {0, 1} & set(c.ids.tolist()) and len(set(c.ids.tolist())) == c.ids.numel()
    assert torch.equal(c.ids[c.targets[targets != 1]], targets[targets != 1])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_sampling_and_chunked_softmax_never_wait_for_the_host():
    layer, E, h, t = make("joint", "cuda")
    sampler = CandidateSampler(V, "uniform", sample_rate=0.5)

    def one_update():
        cands = sampler.sample(t)
        # (with the logQ correction: the inclusion probabilities' bisection runs on the device too)
        loss = F.cross_entropy(candidate_logits(layer, h, cands, logq_correction=True), cands.targets, reduction="sum")
        loss.backward()
        for path in ("tokens", "vocabulary"):
            chunked_cross_entropy(layer, h, t, 50, path=path)[0].backward()

    one_update()  # the first one copies the sampler's tables to the GPU, once per run (a host-to-device copy)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        one_update()  # every later update: no synchronising operation
    finally:
        torch.cuda.set_sync_debug_mode("default")


def common(**options):
    """fairseq's ``common`` group of a command line that sets ``options`` (``bf16=True, tpu=True``: what fairseq's
    ``--bf16`` parses to)."""
    from fairseq.dataclass.configs import CommonConfig
    from omegaconf import OmegaConf

    return OmegaConf.structured(CommonConfig(**options))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only refusals")
@pytest.mark.parametrize("flag", ["fp16", "memory_efficient_fp16", "bf16", "amp"])
def test_precision_flags_without_cuda_are_refused_before_any_work(flag):
    from types import SimpleNamespace

    from fairseq.distributed import utils as distributed_utils

    import fairseq_joint  # noqa: F401  (installs the configuration checks)
    from fairseq_joint.errors import OptionError
    from fairseq_joint.precision import check_precision

    name = "--" + flag.replace("_", "-")
    with pytest.raises(OptionError, match=f"{name} needs a CUDA GPU.* drop {name} to train in fp32 on the CPU"):
        check_precision(common(**{flag: True}, tpu=flag == "bf16"))
    check_precision(common())  # nothing asked: nothing to check
    # fairseq's commands hand their configuration to call_main: the check runs there first
    assert distributed_utils.call_main.fairseq_joint_checks
    cfg = SimpleNamespace(common=common(**{flag: True}, tpu=flag == "bf16"))

    def main(*args, **kwargs):  # stands in for fairseq_cli.train.main
        pytest.fail("fairseq's main ran")

    import fairseq_cli.train  # noqa: F401  (the module whose main this stands in for)

    main.__module__ = "fairseq_cli.train"
    with pytest.raises(OptionError, match=name):
        distributed_utils.call_main(cfg, main)


@pytest.mark.parametrize("program, xla, gpu, tpu", [
    ("fairseq_cli.train", False, True, False),  # the one case: fairseq-train, a CUDA GPU with bf16, no torch_xla
    ("fairseq_cli.train", True, True, True),  # torch_xla installed: fairseq's own TPU path
    ("fairseq_cli.train", False, False, True),  # no GPU: left to the refusal of the checks
    ("fairseq_cli.validate", False, True, True),  # not a training run
])
def test_bf16_on_a_cuda_gpu_drops_the_tpu_fairseq_implies_through_the_patch_table(monkeypatch, program, xla, gpu, tpu):
    """fairseq's --bf16 sets --tpu, whose XLA path crashes without torch_xla: the bf16_on_cuda change, installed on
    fairseq's call_main with the others of the patch table (and with them switched off by FAIRSEQ_JOINT_PATCHES=0:
    tests/cli/test_fairseq_patches.py), drops it for fairseq-train on a CUDA GPU with bf16 without torch_xla only,
    before fairseq's call_main runs."""
    from types import SimpleNamespace

    import fairseq_cli.train  # noqa: F401  (the modules whose main it stands in for)
    import fairseq_cli.validate  # noqa: F401
    from fairseq.distributed import utils as distributed_utils

    from fairseq_joint import fairseq_patches, precision

    assert distributed_utils.call_main.fairseq_joint_bf16_on_cuda
    assert fairseq_patches.Patch("bf16_on_cuda", "fairseq.distributed.utils:call_main",
                                 "precision.bf16_call_main") in fairseq_patches.PATCHES
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    monkeypatch.setattr(precision, "xla_installed", lambda: xla)
    seen = []

    def fairseq_call_main(cfg, main):  # stands in for the call_main the change wraps
        seen.append((cfg.common.tpu, main))

    def main(*args, **kwargs):
        pytest.fail("fairseq's main ran")

    main.__module__ = program  # fairseq's command whose main it stands in for
    cfg = SimpleNamespace(common=common(bf16=True, tpu=True))
    precision.bf16_call_main(fairseq_call_main, cfg, main)
    assert seen == [(tpu, main)]
    assert cfg.common.bf16  # bf16 itself is kept
