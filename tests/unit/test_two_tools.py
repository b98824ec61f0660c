"""The study's two-tools baseline (examples/gile/gile_study.py): logistic regression's probability for the labels seen
in training, the sentence encoder's cosine for the unseen ones, one γ between them calibrated as for every system."""

import gile_study as study  # examples/gile (pytest.ini's pythonpath)
import numpy as np
import pytest

from fairseq_joint.metrics import gzsl_summary
from fairseq_joint_studies.study_metrics import cross_calibrated_gzsl

LR = np.array([[0.9, 0.2, 0.0, 0.0],
               [0.1, 0.7, 0.0, 0.0],
               [0.6, 0.5, 0.0, 0.0],
               [0.3, 0.8, 0.0, 0.0]])
COSINE = np.array([[0.1, 0.3, 0.5, 0.2],
                   [0.5, 0.1, 0.2, 0.4],
                   [0.2, 0.2, 0.1, 0.6],
                   [0.4, 0.0, 0.3, 0.1]])
SEEN = np.array([True, True, False, False])


def test_seen_labels_take_the_probability_unseen_ones_the_cosine():
    scores = study.two_tools(LR, COSINE, SEEN)
    assert scores.tolist() == [[0.9, 0.2, 0.5, 0.2], [0.1, 0.7, 0.2, 0.4], [0.6, 0.5, 0.1, 0.6], [0.3, 0.8, 0.3, 0.1]]
    mean = study.two_tools(LR, COSINE, SEEN, mean=True)
    assert mean[:, :2] == pytest.approx((LR[:, :2] + COSINE[:, :2]) / 2) and (mean[:, 2:] == COSINE[:, 2:]).all()
    assert LR[0, 0] == 0.9 and COSINE[0, 0] == 0.1  # the inputs are not changed
    with pytest.raises(ValueError, match="disagree"):
        study.two_tools(LR[:, :3], COSINE, SEEN)


def test_the_two_tools_figures_are_those_of_their_matrix_and_gamma_is_cross_calibrated():
    targets = np.array([[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 0, 1], [0, 1, 1, 0]], dtype=bool)
    matrices = {"tfidf_lr": LR, "cosine": COSINE}
    stats = study.baseline_stats("two_tools", matrices, targets, SEEN)
    # seen-only: the LR ranks every document's seen label first; unseen-only: the cosine's ranking
    assert stats["seen_avgpr"] == pytest.approx(100.0) and stats["unseen_avgpr"] == pytest.approx(100.0)
    scores = study.two_tools(LR, COSINE, SEEN)
    assert stats["gzsl_h"] == pytest.approx(gzsl_summary(scores, targets, SEEN)["gzsl_h"])
    calibrated = cross_calibrated_gzsl(scores, targets, SEEN)
    assert stats["cal_gzsl_h"] == pytest.approx(calibrated["gzsl_h"]) and stats["gamma"] == calibrated["gamma"]
    # the LR's probabilities outrank every cosine in document 1 at γ = 0 (H < 100); a γ of ~0.5 fixes that
    assert stats["gzsl_h"] < 100.0 and calibrated["gzsl_h"] >= stats["gzsl_h"]
    mean = study.baseline_stats("two_tools_mean", matrices, targets, SEEN)
    assert mean["unseen_avgpr"] == stats["unseen_avgpr"] and "seen_avgpr" in mean
    assert "unseen_avgpr" not in study.baseline_stats("tfidf_lr", matrices, targets, SEEN)
