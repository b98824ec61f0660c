"""Unit tests of generalized zero-shot evaluation (all labels ranked together, calibrated stacking), of the probability
threshold calibrated on validation, and of the cosine start of GILE's joint head over a pretrained sentence encoder."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fairseq_joint import metrics
from fairseq_joint.errors import OptionError
from fairseq_joint.metrics import (
    THRESHOLDS,
    calibrate_seen_offset,
    calibrate_threshold,
    gzsl_average_precision,
    gzsl_metric_sums,
    gzsl_summary,
    harmonic_mean,
    seen_offsets,
    summarize,
    threshold_counts,
)
from fairseq_joint.models.gile_classifier import GileClassifier, GileClassifierConfig, GileModelInputs
from fairseq_joint_studies.study_metrics import cross_calibrated_gzsl


def test_gzsl_by_hand():
    # labels: s0, s1 seen; u0, u1 unseen. One document, gold {s1, u0}.
    seen = np.array([True, True, False, False])
    scores = np.array([[0.9, 0.5, 0.7, 0.1]])
    gold = np.array([[0, 1, 1, 0]])
    sums = gzsl_metric_sums(scores, gold, seen)
    # unseen: u0 ranks among {s0, u0, u1} (gold s1 taken out): s0 0.9 > u0 0.7 -> rank 2, AvgPr 1/2
    assert summarize(sums["unseen"])["avgpr"] == pytest.approx(50.0)
    assert summarize(sums["unseen"])["oneerr"] == pytest.approx(100.0)
    # seen: s1 among {s0, s1, u1} (gold u0 taken out): s0 0.9 > s1 0.5 -> rank 2
    assert summarize(sums["seen"])["avgpr"] == pytest.approx(50.0)
    # γ = 0.3: s0 0.6 < u0 0.7 -> u0 first (AvgPr 1); s1 0.2 still below s0 0.6 and above u1 0.1 -> rank 2
    sums = gzsl_metric_sums(scores, gold, seen, seen_score_offset=0.3)
    assert summarize(sums["unseen"])["avgpr"] == pytest.approx(100.0)
    assert summarize(sums["seen"])["avgpr"] == pytest.approx(50.0)
    # γ = 0.45: s1 0.05 < u1 0.1 -> s1 at rank 3 among {s0, s1, u1}
    assert summarize(gzsl_metric_sums(scores, gold, seen, 0.45)["seen"])["avgpr"] == pytest.approx(100.0 / 3)
    out = gzsl_summary(scores, gold, seen, 0.3)
    assert out["gzsl_h"] == pytest.approx(2 * 100 * 50 / 150)
    assert harmonic_mean(0.0, 0.0) == 0.0


def test_gzsl_counts_only_documents_with_a_label_of_the_group():
    seen = np.array([True, False])
    gold = np.array([[1, 0], [0, 1], [1, 1]])
    sums = gzsl_metric_sums(np.random.default_rng(0).random((3, 2)), gold, seen)
    assert sums["seen"]["n"] == 2 and sums["unseen"]["n"] == 2
    with pytest.raises(ValueError, match="expected n x L"):
        gzsl_metric_sums(np.zeros((3, 2)), gold, np.array([True]))


@pytest.mark.parametrize("gamma,scores", [(float("nan"), 0.5), (float("inf"), 0.5), (1e308, -1e308), (0.0, np.nan)])
def test_gzsl_refuses_scores_less_gamma_that_are_not_numbers(gamma, scores):
    """A NaN γ, or scores less γ that overflow to infinity, ranked the labels wrong: the metrics of both routes (one
    γ, many) refuse them instead of returning numbers; a large γ that does not overflow is ranked as any other."""
    seen, gold = np.array([True, False]), np.array([[1, 0], [0, 1]])
    message = "the scores to rank hold a non-finite value" if np.isnan(scores) else \
        r"^γ \(seen_score_offset\) \[.*\]: the scores less γ must be finite numbers$"
    for metric in (lambda s: gzsl_metric_sums(s, gold, seen, gamma), lambda s: gzsl_summary(s, gold, seen, gamma),
                   lambda s: gzsl_average_precision(s, gold, seen, [0.0, gamma])):
        with pytest.raises(ValueError, match=message):
            metric(np.full((2, 2), scores))
    assert gzsl_summary(np.array([[2e307, 0.0], [0.0, 1e307]]), gold, seen, 1e307)["gzsl_h"] == pytest.approx(100.0)
    # scores less γ that stay finite, however large both are, are ranked (1e308 less 1e308 is 0)
    assert gzsl_metric_sums(np.full((2, 2), 1e308), gold, seen, 1e308)["seen"]["n"] == 1


@pytest.mark.parametrize("chunk", [metrics.CHUNK, 7])  # 7 scores at a time: a relevant label per chunk
def test_gzsl_average_precision_at_many_offsets_equals_one_ranking_at_each(monkeypatch, chunk):
    """Each group ranked once, the other group's labels counted for each γ, equals gzsl_metric_sums at each γ (all
    labels ranked together), ties included: scores on a coarse grid, γ on the same grid and between it, a document
    without a relevant label of a group; and the calibration picks the best of them, the one nearest 0 of equals."""
    monkeypatch.setattr(metrics, "CHUNK", chunk)
    rng = np.random.default_rng(3)
    for ties in (False, True):
        scores = rng.normal(size=(40, 9))
        scores = np.round(scores * 2) / 2 if ties else scores
        gold = rng.random(scores.shape) < 0.25
        gold[:4] = False
        gold[0, 0] = True  # a document with a seen gold label only
        seen = np.arange(9) < 6
        offsets = np.array([-1.0, -0.25, 0.0, 0.3, 0.5, 1.0, 1.75, 4.0])
        sums, counts = gzsl_average_precision(scores, gold, seen, offsets)
        for k, gamma in enumerate(offsets):
            expected = gzsl_metric_sums(scores, gold, seen, gamma)
            assert counts.tolist() == [expected["seen"]["n"], expected["unseen"]["n"]]
            assert sums[k].tolist() == pytest.approx([expected["seen"]["avgpr"], expected["unseen"]["avgpr"]],
                                                     abs=1e-12), (ties, gamma)
        # the calibration: of the tried γ, the best H of one ranking at each, the first nearest 0 of equals
        grid = seen_offsets(scores)
        h = [harmonic_mean(*(summarize(s).get("avgpr", 0.0) for s in gzsl_metric_sums(scores, gold, seen, g).values()))
             for g in grid]
        best = max(range(len(grid)), key=lambda i: (round(h[i], 9), -abs(grid[i])))
        assert calibrate_seen_offset(scores, gold, seen) == grid[best]
        assert len(set(np.round(h, 9))) > 3  # the grid crosses rankings: something to choose


def test_calibration_takes_equal_h_up_to_rounding_as_equal():
    """Two rankings of the same H (75 here: 100 and 60, 75 and 75), whose sums round differently, are a tie: the γ
    nearest 0 wins, whichever rounds up."""
    scores = np.array([[1.0, -1.0, -0.5, -1.0, 0.5], [-2.5, 0.5, 2.0, 0.5, 0.5], [0.5, -0.5, 0.5, 0.5, -0.5],
                       [-2.5, 0.5, -0.5, 1.0, 1.0], [-0.5, 2.0, 1.5, -1.0, -1.0]])
    gold = np.array([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0], [1, 1, 1, 0, 0], [0, 1, 0, 1, 1], [0, 0, 1, 1, 0]])
    seen = np.array([True, True, False, False, False])
    assert gzsl_summary(scores, gold, seen, -1.125)["gzsl_h"] == pytest.approx(75.0)
    assert gzsl_summary(scores, gold, seen, 0.5625)["gzsl_h"] == pytest.approx(75.0)
    assert calibrate_seen_offset(scores, gold, seen) == 0.5625


def test_calibration_needs_gold_labels_of_both_groups():
    """A validation whose documents carry no unseen (or no seen) gold label has nothing to calibrate γ on: None, not
    the γ = 0 of an all-zero gzsl_h grid that passed for a calibrated one."""
    scores = np.array([[2.0, 1.0, 0.5], [0.0, 1.5, 1.0]])
    seen = np.array([True, True, False])
    batches = [metrics.LabelScores(scores, np.array([[1, 0, 0], [0, 1, 0]]), seen)]
    assert metrics.pooled_seen_offset(batches) is None
    assert metrics.pooled_seen_offset([batches[0]._replace(gold=np.array([[0, 0, 1], [0, 0, 1]]))]) is None
    both = [batches[0]._replace(gold=np.array([[1, 0, 0], [0, 0, 1]]))]
    assert metrics.pooled_seen_offset(both) == calibrate_seen_offset(scores, both[0].gold, seen) is not None
    assert calibrate_seen_offset(scores, batches[0].gold, seen) is None  # the one check, whoever calibrates


def test_calibrated_stacking_removes_a_seen_bias():
    # a ranking that is right within each group, with every seen score pushed up by 2: GZSL suffers, γ ≈ 2 repairs it
    rng = np.random.default_rng(0)
    n, num_seen, num_unseen = 200, 8, 4
    seen = np.array([True] * num_seen + [False] * num_unseen)
    gold = rng.random((n, num_seen + num_unseen)) < 0.2
    gold[np.arange(n), rng.integers(0, num_seen + num_unseen, n)] = True
    scores = gold * 1.0 + rng.normal(0, 0.3, gold.shape) + 2.0 * seen
    before = gzsl_summary(scores, gold, seen)
    gamma = calibrate_seen_offset(scores, gold, seen)
    after = gzsl_summary(scores, gold, seen, gamma)
    assert 1.0 < gamma < 3.0
    assert after["gzsl_h"] > before["gzsl_h"] + 20
    cross = cross_calibrated_gzsl(scores, gold, seen)
    assert 1.0 < cross["gamma"] < 3.0 and cross["gzsl_h"] > before["gzsl_h"] + 20
    # no bias: γ stays near 0 and H does not drop
    unbiased = scores - 2.0 * seen
    assert gzsl_summary(unbiased, gold, seen, calibrate_seen_offset(unbiased, gold, seen))["gzsl_h"] >= \
        gzsl_summary(unbiased, gold, seen)["gzsl_h"]


def gile_head(d=6, joint_dim="auto", activation="relu", head="gile"):
    cfg = GileClassifierConfig(head=head, embed_dim=d, encoder_dim=d, joint_dim=joint_dim, joint_activation=activation,
                               similarity_init=True)
    torch.manual_seed(0)
    return GileClassifier.build_head(cfg, num_labels=5)


def test_the_calibrated_threshold_has_the_best_micro_f1_of_every_candidate():
    """calibrate_threshold over the counts of several batches: the t of THRESHOLDS whose "p >= t" has scikit-learn's
    best micro-F1 over all the documents (the counts by hand on one batch); no relevant label: nothing calibrated."""
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(0)
    gold = rng.random((40, 7)) < 0.3
    probs = np.clip(np.where(gold, 0.55, 0.35) + rng.normal(0, 0.2, gold.shape), 0, 1)
    probs[0, :3] = [0.0, 1.0, THRESHOLDS[700]]  # the ends and a grid value itself (">=": counted at that t)
    counts = threshold_counts(probs[:2], gold[:2])
    k = 700
    assert counts.relevant[k] == (probs[:2][gold[:2]] >= THRESHOLDS[k]).sum()
    assert counts.irrelevant[k] == (probs[:2][~gold[:2]] >= THRESHOLDS[k]).sum()
    assert counts.relevant[0] == gold[:2].sum() and counts.irrelevant[0] == (~gold[:2]).sum()
    t = calibrate_threshold([counts, threshold_counts(probs[2:25], gold[2:25]), threshold_counts(probs[25:], gold[25:])])
    f1 = np.array([f1_score(gold, probs >= c, average="micro", zero_division=0.0) for c in THRESHOLDS])
    assert t in THRESHOLDS and f1_score(gold, probs >= t, average="micro") == pytest.approx(f1.max())
    assert 0.3 < t < 0.6  # between the two groups' centres, not at a grid end
    assert calibrate_threshold([threshold_counts(probs, np.zeros_like(gold))]) is None and calibrate_threshold([]) is None
    # a softmax over many labels: probabilities near 1/L are told apart by the geometric part of the grid
    small = np.where(gold, 3e-3, 1e-3)
    assert f1_score(gold, small >= calibrate_threshold([threshold_counts(small, gold)]), average="micro") == 1.0


def test_cosine_start_of_the_gile_head_is_exact():
    x = F.normalize(torch.randn(9, 6), dim=-1)  # label vectors
    h = F.normalize(torch.randn(4, 6), dim=-1)  # text vectors
    for joint_dim, tolerance in (("24", 1e-6), ("27", 1e-2)):  # 4d exactly; 3 extra coordinates that start small
        layer = gile_head(joint_dim=joint_dim)
        layer.cosine_init_()
        scores = layer(h, class_inputs=x)
        assert torch.allclose(scores - layer.bias, h @ x.T, atol=tolerance)
    assert layer.class_weight.requires_grad and layer.context_scale.requires_grad  # still GILE: everything trains
    with pytest.raises(OptionError, match="joint-dim >= 4d"):  # (σ must be relu: tests/unit/test_option_checks.py)
        gile_head(joint_dim="12").cosine_init_()
    with pytest.raises(ValueError, match="both projections"):  # not GILE's head: the caller's bug
        gile_head(head="bil_n16").cosine_init_()


def test_seen_label_bias_is_the_training_log_odds_and_the_mean_for_unseen_labels():
    import math

    from fairseq.data import Dictionary

    dictionary = Dictionary()
    for w in ("apple", "pear", "car"):
        dictionary.add_symbol(w)
    rows = [[0], [0, 1], [0], [2]]  # label frequencies 3/4, 1/4, 1/4
    inputs = GileModelInputs(dictionary, ("a", "b", "c"), rows, has_label_descriptions=True)
    cfg = GileClassifierConfig(head="gile", embed_dim=4, encoder_dim=4, attention_dim=4, joint_dim="8",
                               seen_label_bias=True)
    model = GileClassifier.build(cfg, inputs)
    logit = lambda p: math.log(p / (1 - p))  # noqa: E731
    assert torch.allclose(model.label_bias, torch.tensor([logit(0.75), logit(0.25), logit(0.25)]))
    assert model.head.bias.item() == 0.0  # the prior lives in b_y, not twice
    h, tokens = torch.randn(2, 4), torch.tensor([[4, 5], [6, 4], [5, 6], [4, 4]])
    train_index = torch.tensor([2, -1, 0, -1])  # labels c, unseen, a, unseen
    scores = model.label_scores(h, tokens, train_index)
    plain = model.head(h, class_inputs=model.label_vectors(tokens))
    b = model.label_bias.detach()
    assert torch.allclose(scores - plain, torch.stack([b[2], b.mean(), b[0], b.mean()]).expand(2, 4))
    scores.sum().backward()
    assert model.label_bias.grad is not None


def test_retrieval_precision_at_1_centres_each_language_and_counts_the_diagonal():
    from fairseq_joint.metrics import retrieval_precision_at_1

    src = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    # the same documents in a language whose every vector carries a large common offset: centring removes it
    assert retrieval_precision_at_1(src, src + 10.0) == 1.0
    # documents 2 and 3 swapped on the target side: half are found
    assert retrieval_precision_at_1(src, src[[0, 1, 3, 2]]) == 0.5
    # rotated by 90 degrees: every document finds its neighbour's version, none its own
    assert retrieval_precision_at_1(src, src @ np.array([[0.0, 1.0], [-1.0, 0.0]])) == 0.0
    with pytest.raises(ValueError, match="two n x d matrices"):
        retrieval_precision_at_1(src, src[:3])


def test_calibration_reaches_gamma_below_zero_as_far_as_above():
    """Unseen labels scored far above the seen ones (a cosine prior adds to them) need γ well below 0: the grid spans
    -1 to 1 times the scores' spread; it stopped at -1/4, so the best γ there was out of reach and a worse one saved."""
    rng = np.random.default_rng(0)
    gold = rng.random((60, 10)) < 0.3
    seen = np.arange(10) < 5
    scores = gold + rng.normal(0, 0.3, gold.shape) + np.where(seen, 0.0, 8.0)  # unseen shifted up by 8
    span = np.percentile(scores, 99) - np.percentile(scores, 1)
    grid = seen_offsets(scores)
    assert grid.min() == pytest.approx(-span) and grid.max() == pytest.approx(span)
    on_grid = grid / (span / 32)  # one step throughout: whole steps from -32 to 32 (and γ = 0)
    assert np.allclose(on_grid[np.abs(grid) > 1e-9], np.round(on_grid[np.abs(grid) > 1e-9])) and len(grid) in (65, 66)
    gamma = calibrate_seen_offset(scores, gold, seen)
    assert gamma < -0.25 * span and gamma == pytest.approx(-8.0, abs=1.0), (gamma, span)  # the shift, out of reach
