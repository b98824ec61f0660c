"""The math of the output layers (Pappas et al. 2018, Eqs. 3-18): degenerate forms, candidate scoring,
gradients, the eval cache, capacities, and the errors for bad configurations."""

import dataclasses

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from fairseq_joint.errors import CheckpointError, InputError, OptionError
from fairseq_joint.modules.output_layers import OUTPUT_LAYER_CHOICES, OutputLayer, OutputLayerSpec

V, D, DH, DJ = 37, 6, 6, 9


def make(kind, d=D, dh=DH, dj=DJ, seed=0, **kw):
    torch.manual_seed(seed)
    E = nn.Embedding(V, d)
    layer = OutputLayer(OutputLayerSpec(kind, joint_dim=dj, **kw), V, dh, None if kind == "softmax" else E).double()
    E.double()
    # non-zero biases so that they are exercised too
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if name.endswith("bias"):
                p.normal_()
    return layer, E


def feats(*shape, dh=DH, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dh, generator=g, dtype=torch.float64)


# ---------------------------------------------------------------- each layer is its equation
def test_each_preset_computes_its_equation():
    h = feats(4, 3)
    for kind in OUTPUT_LAYER_CHOICES:
        layer, E = make(kind)
        b = layer.bias
        if kind == "softmax":
            expected = h @ layer.weight.t() + b  # Eq. 3 (W stored as |V| x dh)
        elif kind == "tied":
            expected = h @ E.weight.t() + b  # Eq. 4
        elif kind == "bilinear":
            W = layer.context_weight  # d x dh
            expected = (E.weight @ W @ h.unsqueeze(-1)).squeeze(-1) + b  # Eq. 6: E W h
        elif kind == "label":
            W = layer.class_weight.t()  # d x dh
            expected = h @ torch.tanh(E.weight @ W).t() + b  # Eq. 7a: σ(E W) h
        elif kind == "context":
            W = layer.context_weight  # d x dh
            expected = torch.tanh(h @ W.t()) @ E.weight.t() + b  # Eq. 7b: E σ(W h)
        else:
            U, bu, Vm, bv = layer.class_weight, layer.class_bias, layer.context_weight, layer.context_bias
            expected = torch.tanh(h @ Vm.t() + bv) @ torch.tanh(E.weight @ U.t() + bu).t() + b  # Eq. 14
        torch.testing.assert_close(layer(h), expected, msg=kind)


# ---------------------------------------------------------------- degenerate forms
def test_joint_degenerates_to_weight_tying_eq18():
    joint, E = make("joint", dj=D, activation="identity")
    tied = OutputLayer(OutputLayerSpec("tied"), V, DH, E).double()
    with torch.no_grad():
        joint.class_weight.copy_(torch.eye(D))
        joint.context_weight.copy_(torch.eye(D))
        joint.class_bias.zero_()
        joint.context_bias.zero_()
        tied.bias.copy_(joint.bias)
    h = feats(5, 2)
    torch.testing.assert_close(joint(h), tied(h))
    torch.testing.assert_close(joint(h), h @ E.weight.t() + joint.bias)


def test_bilinear_with_identity_is_tied():
    bil, E = make("bilinear")
    tied = OutputLayer(OutputLayerSpec("tied"), V, DH, E).double()
    with torch.no_grad():
        bil.context_weight.copy_(torch.eye(D))
        tied.bias.copy_(bil.bias)
    h = feats(3)
    torch.testing.assert_close(bil(h), tied(h))


@pytest.mark.parametrize("kind", ["label", "context"])
def test_label_and_context_with_identity_sigma_are_bilinear(kind):
    layer, E = make(kind, activation="identity")
    bil = OutputLayer(OutputLayerSpec("bilinear"), V, DH, E).double()
    with torch.no_grad():
        W = layer.class_weight.t() if kind == "label" else layer.context_weight  # d x dh
        bil.context_weight.copy_(W)
        bil.bias.copy_(layer.bias)
    h = feats(4)
    torch.testing.assert_close(layer(h), bil(h))


def test_joint_with_one_identity_side_is_bilinear_gile_eq18():
    """GILE Eq. 18: identity σ, g_out = I, zero biases  =>  E V h."""
    layer, E = make("joint", dj=D, activation="identity", bias="none")
    with torch.no_grad():
        layer.class_weight.copy_(torch.eye(D))
        layer.class_bias.zero_()
        layer.context_bias.zero_()
    h = feats(4)
    torch.testing.assert_close(layer(h), h @ layer.context_weight.t() @ E.weight.t())


# ---------------------------------------------------------------- candidate scoring and gradients
@pytest.mark.parametrize("kind", OUTPUT_LAYER_CHOICES)
def test_candidate_logits_equal_full_logits_restricted(kind):
    layer, E = make(kind)
    h = feats(3, 4)
    ids = torch.tensor([5, 0, 17, 36, 2])
    torch.testing.assert_close(layer(h, ids=ids), layer(h)[..., ids])


@pytest.mark.parametrize("kind", OUTPUT_LAYER_CHOICES)
def test_gradients_reach_only_scored_rows(kind):
    layer, E = make(kind)
    h = feats(6).requires_grad_()
    ids = torch.tensor([3, 11, 20])
    (layer(h, ids=ids) ** 2).sum().backward()
    table = layer.weight if kind == "softmax" else E.weight
    rows_with_grad = table.grad.abs().sum(-1).nonzero().flatten().tolist()
    assert rows_with_grad == ids.tolist()
    if layer.bias is not None:
        assert layer.bias.grad.nonzero().flatten().tolist() == ids.tolist()
    assert h.grad.abs().sum() > 0
    for name, p in layer.named_parameters():
        if name not in ("weight", "bias"):
            assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("kind", OUTPUT_LAYER_CHOICES)
def test_gradcheck(kind):
    layer, E = make(kind)
    h = feats(2, seed=3).requires_grad_()
    params = [h] + [p for p in layer.parameters()] + ([] if kind == "softmax" else [E.weight])
    assert torch.autograd.gradcheck(lambda x: layer(x), (h,), eps=1e-6)
    # parameter gradients against a finite difference on the scalar loss
    loss = F.cross_entropy(layer(h), torch.tensor([1, 4]))
    grads = torch.autograd.grad(loss, params[1:])
    for p, g in zip(params[1:], grads):
        idx = tuple(0 for _ in p.shape)
        with torch.no_grad():
            old = p[idx].item()
            p[idx] = old + 1e-6
            up = F.cross_entropy(layer(h), torch.tensor([1, 4])).item()
            p[idx] = old - 1e-6
            down = F.cross_entropy(layer(h), torch.tensor([1, 4])).item()
            p[idx] = old
        assert abs((up - down) / 2e-6 - g[idx].item()) < 1e-5


# ---------------------------------------------------------------- eval cache
def projections(layer):
    """The class tables the layer projects (g_out(X)) from now on, as (rows, dtype): what the eval cache saves."""
    projected = []
    project = layer.project_classes
    layer.project_classes = lambda table: projected.append((table.size(0), table.dtype)) or project(table)
    return projected


def uncached(layer, h):
    """The layer's scores with autograd on, which the eval cache never serves: g_out(X) projected afresh."""
    with torch.enable_grad():
        return layer(h).detach()


@pytest.mark.parametrize("kind", ["joint", "label"])
def test_eval_cache_equals_uncached_and_refreshes_after_update(kind):
    layer, E = make(kind)
    h = feats(2)
    layer.eval()
    projected = projections(layer)
    with torch.no_grad():
        cached = layer(h)
        again = layer(h)
    assert projected == [(V, torch.float64)]  # the second call is served from the cache: projected once
    torch.testing.assert_close(again, cached)
    torch.testing.assert_close(cached, uncached(layer, h))
    # an optimizer step changes E and U in place: the cache must follow
    opt = torch.optim.SGD(list(layer.parameters()) + [E.weight], lr=0.5)
    layer.train()
    F.cross_entropy(layer(h), torch.tensor([0, 1])).backward()
    opt.step()
    layer.eval()
    with torch.no_grad():
        before = len(projected)
        after = layer(h)
        assert len(projected) == before + 1  # the step was seen: the class side projected again
        layer(h)
        assert len(projected) == before + 1  # and cached again
    torch.testing.assert_close(after, uncached(layer, h))
    assert not torch.allclose(after, cached)


def test_eval_cache_refreshes_after_load_state_dict_and_direct_edit():
    layer, E = make("joint")
    other, E2 = make("joint", seed=5)
    h = feats(3)
    layer.eval()
    with torch.no_grad():
        before = layer(h)
        layer.load_state_dict(other.state_dict())
        E.weight.copy_(E2.weight)  # the decoder's embedding is loaded by its owner
        torch.testing.assert_close(layer(h), other.eval()(h))
        assert not torch.allclose(layer(h), before)
        cached = layer(h)  # fills the cache from the loaded E
        projected = projections(layer)
        E.weight[3] += 1.0  # any in-place change of E, without telling the layer
        after = layer(h)
        assert projected == [(V, torch.float64)]  # the edit was seen: the class side projected again
        torch.testing.assert_close(after, uncached(layer, h))  # what a fresh projection gives
        assert not torch.allclose(after[:, 3], cached[:, 3])  # so the cached scores of word 3 were not reused


@pytest.mark.parametrize("convert", ["half", "float", "to_float32"])
def test_eval_cache_follows_a_dtype_change(convert):
    """A model moved to another dtype (``.half()``, ``.to(...)``) must not be scored with the old dtype's cache."""
    layer, E = make("joint")
    h = feats(3)
    layer.eval()
    projected = projections(layer)
    with torch.no_grad():
        layer(h)
        for module in (layer, E):  # the decoder converts E and the output layer together
            {"half": module.half, "float": module.float, "to_float32": lambda m=module: m.to(torch.float32)}[convert]()
        dtype = torch.float16 if convert == "half" else torch.float32
        h = h.to(dtype)
        scores = layer(h)
        layer(h)
        # projected again in the new dtype (not served from the fp64 cache), then cached in it
        assert projected == [(V, torch.float64), (V, dtype)] and scores.dtype == dtype
        U, bu = layer.class_weight, layer.class_bias
        expected = layer.encode_context(h).float() @ torch.tanh(E.weight.float() @ U.float().t() + bu.float()).t()
        torch.testing.assert_close(scores.float(), expected + layer.bias.float(), rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- capacities (Eqs. 8-10, 16)
def test_output_layer_capacity_equations():
    v, d, dh, dj = 1000, 64, 48, 128
    E = nn.Embedding(v, d)
    E_tied = nn.Embedding(v, dh)
    def count(kind, emb, **kw):
        return OutputLayer(OutputLayerSpec(kind, joint_dim=dj, **kw), v, dh, emb).num_output_parameters()
    assert count("softmax", None) == v * dh + v  # Eq. 8
    assert count("tied", E_tied) == v  # Eq. 9: only b is the output layer's own
    assert count("bilinear", E) == d * dh + v  # Eq. 10
    assert count("label", E) == d * dh + v
    assert count("context", E) == d * dh + v
    # Eq. 16, plus the two joint-space biases b_u, b_v (dj each) that the equation leaves out
    assert count("joint", E) == d * dj + dj * dh + v + 2 * dj
    assert count("joint", E, bias="none") == d * dj + dj * dh + 2 * dj


# ---------------------------------------------------------------- configuration errors
def test_errors_are_one_line_and_name_the_fix():
    E = nn.Embedding(V, 8)
    with pytest.raises(OptionError, match=r"tied needs the embedding dim d=8 to equal the decoder output dim dh=6.*--output-layer joint"):
        OutputLayer(OutputLayerSpec("tied"), V, 6, E)
    with pytest.raises(OptionError, match=r"--output-layer: unknown 'jiont'; choose one of softmax, tied, bilinear, label, context, joint"):
        OutputLayer(OutputLayerSpec("jiont"), V, 6, E)
    with pytest.raises(OptionError, match="--joint-activation"):
        OutputLayer(OutputLayerSpec("joint", joint_dim=4, activation="gelu"), V, 6, E)
    with pytest.raises(InputError, match="same dictionary"):
        OutputLayer(OutputLayerSpec("joint", joint_dim=4), V + 1, 6, E)
    with pytest.raises(OptionError, match="^output layer 'softmax' has its own weights; do not pass an embedding$"):
        OutputLayer(OutputLayerSpec("softmax"), V, 6, E)
    with pytest.raises(OptionError, match="^output layer 'joint' needs the shared embedding E$"):
        OutputLayer(OutputLayerSpec("joint", joint_dim=4), V, 6)


def test_the_spec_checks_its_settings_once_and_is_frozen():
    for kw, message in [
        (dict(kind="jiont"), "--output-layer: unknown 'jiont'"),
        (dict(kind="joint", joint_dim=4, bias="each"), "the output layer's bias: unknown 'each'; choose one of per_class, shared, none"),
        (dict(kind="joint", joint_dim=4, init="xavier"), "--output-layer-init: unknown 'xavier'"),
        (dict(kind="joint", joint_dim=4, activation="gelu"), "--joint-activation: unknown 'gelu'"),
        (dict(kind="label", context_projection="cubic"), "context_projection: unknown 'cubic'; choose one of none, linear, nonlinear"),
    ]:
        with pytest.raises(OptionError, match=message):
            OutputLayerSpec(**kw)
    spec = OutputLayerSpec("label", joint_dim=8, context_projection="linear")  # GILE's bil_yh15
    assert (spec.class_proj, spec.ctx_proj, spec.proj_bias) == ("nonlinear", "linear", False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.kind = "joint"
    E = nn.Embedding(V, D)
    layer = OutputLayer(spec, V, DH, E)
    assert layer.spec is spec and layer.configuration()["context_projection"] == "linear" and layer.joint_dim == 8
    # E is referenced, not registered: no sub-module (the context side's dropout is the one), no state-dict entry
    assert layer.embedding is E and [name for name, _ in layer.named_children()] == ["context_dropout"]
    assert set(layer.state_dict()) == {"class_weight", "context_weight", "bias", "_extra_state"}


def test_checkpoint_into_other_configuration_says_what_differs():
    E = nn.Embedding(V, D)
    saved = OutputLayer(OutputLayerSpec("joint", joint_dim=8), V, DH, E).state_dict()
    with pytest.raises(CheckpointError, match=r"joint_dim: checkpoint 8 vs model 16.*--joint-dim"):
        OutputLayer(OutputLayerSpec("joint", joint_dim=16), V, DH, E).load_state_dict(saved)
    with pytest.raises(CheckpointError, match=r"output_layer: checkpoint 'joint' vs model 'context'"):
        OutputLayer(OutputLayerSpec("context"), V, DH, E).load_state_dict(saved, strict=False)
    OutputLayer(OutputLayerSpec("joint", joint_dim=8), V, DH, E).load_state_dict(saved)  # same config loads


def test_dropout_only_in_training():
    layer, _ = make("joint", dropout=0.5)
    h = feats(50)
    layer.eval()
    torch.testing.assert_close(layer(h), layer(h))
    layer.train()
    assert not torch.allclose(layer(h), layer(h))


def test_uniform_init_bounds():
    layer, _ = make("joint", init="uniform")
    layer.reset_parameters()
    for name, p in layer.named_parameters():
        assert p.abs().max() <= 0.1 and p.abs().max() > 0.05, name
