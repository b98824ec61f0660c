"""Candidate sampling (Pappas et al. 2018, Sec. 3.2) and the chunked exact softmax: the math."""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss
from scipy.optimize import brentq
from scipy.stats import chisquare

from fairseq_joint.errors import InputError, OptionError
from fairseq_joint.modules.chunked_softmax import chunked_cross_entropy
from fairseq_joint.modules.output_layers import OUTPUT_LAYER_CHOICES, OutputLayer, OutputLayerSpec
from fairseq_joint.modules.sampling import ACCIDENTAL_HIT_LOGIT, CandidateSampler, candidate_logits, log_inclusion

V, PAD = 200, 1


def layer_for(kind, v=V, d=8, dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    E = nn.Embedding(v, d).to(dtype)
    layer = OutputLayer(OutputLayerSpec(kind, joint_dim=10), v, d, None if kind == "softmax" else E).to(dtype)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if name.endswith("bias"):
                p.normal_()
    return layer, E


def params_of(layer, E):
    return list(layer.parameters()) + ([] if layer.output_layer == "softmax" else [E.weight])


# ------------------------------------------------------------------ the candidate set
@pytest.mark.parametrize("sampler", ["uniform", "unigram", "log_uniform"])
def test_positives_always_in_candidates_negatives_never_duplicate(sampler):
    counts = torch.arange(V, 0, -1).double()
    s = CandidateSampler(V, sampler, sample_rate=0.3, counts=counts, ignore_ids=[PAD], never_sample=[0, PAD])
    g = torch.Generator().manual_seed(0)
    targets = torch.randint(2, V, (4, 9), generator=g)
    targets[0, -3:] = PAD
    c = s.sample(targets, generator=g)
    positives = set(targets[targets != PAD].tolist())
    ids = c.ids.tolist()
    assert len(ids) == len(set(ids)) == round(0.3 * V)
    assert set(ids[: c.num_positives]) == positives
    assert not set(ids[c.num_positives:]) & positives
    assert 0 not in ids and PAD not in ids
    valid = targets != PAD
    assert torch.equal(c.ids[c.targets[valid]], targets[valid])
    assert (c.targets[~valid] == -100).all()


def test_count_of_negatives_and_all_positives_when_they_exceed_the_rate():
    s = CandidateSampler(V, "uniform", num_samples=7)
    c = s.sample(torch.tensor([3, 4, 4, 9]))
    assert (c.num_positives, c.ids.numel()) == (3, 10)
    s = CandidateSampler(V, "uniform", sample_rate=0.01)  # 2 rows: fewer than the positives
    c = s.sample(torch.arange(10, 20))
    assert c.ids.numel() == 10 and c.num_positives == 10


@pytest.mark.parametrize("sampler", ["uniform", "unigram", "log_uniform"])
def test_sampler_distributions_match_their_definitions(sampler):
    v = 12
    counts = torch.tensor([0, 0, 50, 30, 20, 10, 8, 6, 5, 4, 3, 2], dtype=torch.float64)
    s = CandidateSampler(v, sampler, num_samples=1, counts=counts, alpha=0.75, never_sample=[0, 1])
    if sampler == "uniform":
        expected = torch.tensor([0, 0] + [1.0] * 10, dtype=torch.float64)
    elif sampler == "unigram":
        expected = counts ** 0.75
    else:
        r = torch.arange(v, dtype=torch.float64)
        expected = torch.log((r + 2) / (r + 1))
        expected[:2] = 0
    expected = expected / expected.sum()
    torch.testing.assert_close(s.q, expected)
    g = torch.Generator().manual_seed(1234)
    no_positives = torch.full((1,), -7)  # an id that is ignored: the draw is all negatives
    s.ignore_ids = torch.tensor([-7])
    draws = torch.stack([s.sample(no_positives, generator=g).ids[0] for _ in range(6000)])
    observed = torch.bincount(draws, minlength=v)[2:].double()
    assert observed.sum() == 6000
    assert chisquare(observed.numpy(), (expected[2:] * 6000).numpy()).pvalue > 1e-3


@pytest.mark.parametrize("sampler", ["uniform", "unigram", "log_uniform"])
def test_fixed_size_draws_follow_the_sampler_without_replacement(sampler):
    """The host-sync-free path (Gumbel-top-k): one target id, |V'| = 2, so one negative per draw, whose frequency
    must be q restricted to the other ids, renormalized (multinomial without replacement draws the same)."""
    v = 12
    counts = torch.tensor([0, 0, 50, 30, 20, 10, 8, 6, 5, 4, 3, 2], dtype=torch.float64)
    s = CandidateSampler(v, sampler, sample_rate=2 / v, counts=counts, alpha=0.75, never_sample=[0, 1])
    target = torch.tensor([4])
    assert s.fixed_size(target.numel()) == 2
    q = s.q.clone()
    q[4] = 0.0
    expected = q / q.sum()
    g = torch.Generator().manual_seed(99)
    draws = torch.stack([s.sample(target, generator=g).ids for _ in range(6000)])
    assert (draws[:, 0] == 4).all()  # the positive first
    observed = torch.bincount(draws[:, 1], minlength=v).double()
    assert observed[[0, 1, 4]].sum() == 0
    keep = expected > 0
    assert chisquare(observed[keep].numpy(), (expected[keep] * 6000).numpy()).pvalue > 1e-3


def test_logq_corrected_loss_matches_hand_computation():
    """The logQ correction subtracts log π(v), π(v) = 1 - (1 - q'(v))^t with t solving Σ π = n over q' (q without the
    positives, renormalised), from each negative's logit and nothing from the positives', which V' always holds."""
    layer, _ = layer_for("joint")
    counts = torch.arange(1, V + 1).double()
    s = CandidateSampler(V, "unigram", num_samples=5, counts=counts, alpha=1.0)
    torch.manual_seed(3)
    h = torch.randn(2, 8, dtype=torch.float64)
    targets = torch.tensor([10, 150])
    c = s.sample(targets)
    logits = candidate_logits(layer, h, c, logq_correction=True)
    q = counts.clone()
    q[[10, 150]] = 0
    q /= q.sum()
    t = brentq(lambda t: float((1 - (1 - q) ** t).sum()) - 5, 5, 1e9)
    full = layer(h)
    for row in range(2):
        z = torch.stack([full[row, i] - (0 if i in (10, 150) else math.log(1 - (1 - q[i]) ** t))
                         for i in c.ids.tolist()])
        torch.testing.assert_close(logits[row], z)
        hand = -(z[c.targets[row]] - torch.logsumexp(z, 0))
        torch.testing.assert_close(F.cross_entropy(logits[row:row + 1], c.targets[row:row + 1]), hand)


@pytest.mark.parametrize("fixed", [False, True])
def test_the_expected_counts_are_the_draws_inclusion_probabilities(fixed):
    """exp of the logQ correction is each negative's probability of being in V' (measured over 4000 draws without
    replacement, by both draws: Gumbel-top-k and torch.multinomial): n·q(v), the count of draws with replacement,
    overstated a frequent id's; the positives' is 1."""
    v = 12
    counts = torch.tensor([0, 0, 40, 30, 20, 12, 8, 5, 3, 2, 1, 1], dtype=torch.float64)
    s = CandidateSampler(v, "unigram", counts=counts, never_sample=[0, 1],
                         **(dict(sample_rate=5 / v) if fixed else dict(num_samples=4)))
    target = torch.tensor([3])
    g = torch.Generator().manual_seed(5)
    seen = torch.zeros(v, dtype=torch.float64)
    for _ in range(4000):
        seen[s.sample(target, generator=g).ids[1:]] += 1
    c = s.sample(target, generator=g)
    expected = torch.zeros(v, dtype=torch.float64)
    expected[c.ids] = c.log_expected_counts().double().exp()
    assert expected[3] == 1  # the positive, always in V'
    inclusion = log_inclusion(c.drawn_log_q(), c.num_negatives).exp()
    assert math.isclose(float(inclusion.sum()), 4, rel_tol=1e-5)  # Σ π = n
    drawn = torch.tensor([i for i in range(2, v) if i != 3])
    assert set(c.ids[1:].tolist()) <= set(drawn.tolist())
    q = counts.clone()
    q[3] = 0
    q /= q.sum()
    for i in c.ids[1:].tolist():
        assert abs(expected[i] - seen[i] / 4000) < 0.04, (i, expected[i], seen[i] / 4000)
    top = int(c.ids[1:][q[c.ids[1:]].argmax()])  # the most frequent negative drawn
    assert abs(4 * q[top] - seen[top] / 4000) > 0.1  # what n·q(v) said of it


def test_accidental_hits_are_removed():
    """A negative equal to a positive (a row's own target, or another row's, whose class V' holds as a positive
    column: it would count twice in that row's softmax) is masked in every row."""
    s = CandidateSampler(6, "uniform", num_samples=5, exclude_positives=False)
    layer6, _ = layer_for("tied", v=6)
    c = s.sample(torch.tensor([2, 4]))
    # 5 distinct negatives out of 6 ids: both targets among them
    assert len(c.ids) == 7 and len(set(c.ids[2:].tolist())) == 5 and set(c.ids[2:].tolist()) >= {2, 4}
    logits = candidate_logits(layer6, torch.randn(2, 8, dtype=torch.float64), c, remove_accidental_hits=True)
    negatives = c.ids[c.num_positives:]
    for row in range(2):
        masked = (logits[row, c.num_positives:] == ACCIDENTAL_HIT_LOGIT)
        assert torch.equal(masked, (negatives == 2) | (negatives == 4))
        assert (logits[row, : c.num_positives] != ACCIDENTAL_HIT_LOGIT).all()
        kept = c.ids[logits[row] != ACCIDENTAL_HIT_LOGIT]
        assert sorted(kept.tolist()) == sorted(set(c.ids.tolist()))  # every class once


@pytest.mark.parametrize("kind", OUTPUT_LAYER_CHOICES)
def test_full_candidate_set_equals_full_softmax_loss_and_gradients(kind):
    layer, E = layer_for(kind)
    s = CandidateSampler(V, "uniform", sample_rate=1.0, ignore_ids=[PAD])
    torch.manual_seed(5)
    h = torch.randn(3, 4, 8, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(2, V, (3, 4))
    targets[2, 3] = PAD
    c = s.sample(targets)
    assert sorted(c.ids.tolist()) == list(range(V))
    keep = c.targets.view(-1) != -100
    sampled = F.cross_entropy(candidate_logits(layer, h, c).view(-1, V)[keep], c.targets.view(-1)[keep], reduction="sum")
    full = F.cross_entropy(layer(h).view(-1, V), targets.view(-1), ignore_index=PAD, reduction="sum")
    torch.testing.assert_close(sampled, full)
    ps = [h] + params_of(layer, E)
    for a, b in zip(torch.autograd.grad(sampled, ps), torch.autograd.grad(full, ps)):
        torch.testing.assert_close(a, b)


def test_sampler_errors():
    """What the sampler alone knows (its options in their ranges and together: tests/unit/test_option_checks.py)."""
    with pytest.raises(OptionError, match="--num-samples 500 is larger than the 198 samplable ids"):
        CandidateSampler(V, "uniform", num_samples=500, never_sample=[0, 1])
    with pytest.raises(OptionError, match="--sampler: unknown 'zipf'; choose one of uniform, unigram, log_uniform"):
        CandidateSampler(V, "zipf", sample_rate=0.5)
    with pytest.raises(InputError, match="^the unigram sampler has no id to draw from \\(all counts are zero\\)$"):
        CandidateSampler(V, "unigram", sample_rate=0.5, counts=torch.zeros(V))
    # the target dictionary's words without counts (a --tgtdict of zeros): only the special symbols were drawn
    from types import SimpleNamespace

    from fairseq.data import Dictionary

    from fairseq_joint.criterions.sampled_cross_entropy import target_dictionary_sampler

    d = Dictionary()
    for word in ("a", "b", "c"):
        d.add_symbol(word, n=0)
    with pytest.raises(InputError, match=r"^--sampler unigram draws words by their counts in the target dictionary, "
                                         r"where every word's count is 0 .*or use --sampler uniform or log_uniform$"):
        target_dictionary_sampler(SimpleNamespace(target_dictionary=d), "unigram", None, 2, 1.0)
    assert target_dictionary_sampler(SimpleNamespace(target_dictionary=d), "uniform", None, 2, 1.0).num_negatives(1) == 2
    d.add_symbol("a", n=3)
    q = target_dictionary_sampler(SimpleNamespace(target_dictionary=d), "unigram", None, 2, 1.0).q
    assert q[d.index("a")] == 3 / 5 and q[d.index("b")] == 0  # a word counted: drawn by its count (eos, unk: 1)


# ------------------------------------------------------------------ chunked exact softmax
@pytest.mark.parametrize("kind", OUTPUT_LAYER_CHOICES)
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("chunk", [64, 200, 37])
@pytest.mark.parametrize("path", ["tokens", "vocabulary"])
def test_chunked_loss_and_every_gradient_equal_the_plain_path(kind, eps, chunk, path):
    layer, E = layer_for(kind)
    torch.manual_seed(7)
    h = torch.randn(13, 8, dtype=torch.float64, requires_grad=True)
    t = torch.randint(0, V, (13,))
    t[[2, 9]] = -100
    keep = t != -100
    ps = [h] + params_of(layer, E)
    ref, ref_nll = label_smoothed_nll_loss(F.log_softmax(layer(h), -1)[keep], t[keep], eps)
    out, nll = chunked_cross_entropy(layer, h, t, chunk, label_smoothing=eps, path=path)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-10)
    torch.testing.assert_close(nll, ref_nll, rtol=0, atol=1e-10)
    for _p, a, b in zip(ps, torch.autograd.grad(out, ps), torch.autograd.grad(ref, ps)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


@pytest.mark.parametrize("kind", ["tied", "joint"])
@pytest.mark.parametrize("path", ["tokens", "vocabulary"])
def test_chunked_fp32_within_tolerance_and_fp32_combined_gradient(kind, path):
    layer, E = layer_for(kind, dtype=torch.float32)
    h = torch.randn(32, 8, requires_grad=True)
    t = torch.randint(0, V, (32,))
    ps = [h] + params_of(layer, E)
    ref = F.cross_entropy(layer(h), t, reduction="sum")
    out, _ = chunked_cross_entropy(layer, h, t, 50, path=path)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-4)
    for a, b in zip(torch.autograd.grad(out, ps), torch.autograd.grad(ref, ps)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


