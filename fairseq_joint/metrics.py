"""Multi-label classification metrics of GILE (Pappas & Henderson 2019, Sec. 4, Tables 2-5) and
Kurata et al. (2016, Sec. 4).

All functions take a score matrix ``scores`` (n x L; higher = more likely) and a binary relevance matrix
``targets`` (n x L) over one label subset (the *seen* or the *unseen* labels, Table 2's two halves) and
return **sums over documents** so that fairseq can add them across validation batches:

* rank loss (RL): scikit-learn's ``label_ranking_loss`` — fraction of (relevant, irrelevant) label
  pairs ordered wrongly;
* average precision (AvgPr): scikit-learn's ``label_ranking_average_precision_score``;
* one-error (OneErr): the top-ranked label is not relevant (no scikit-learn function; hand-computed);
  Kurata's 1-best accuracy is ``100 - OneErr`` (Kurata et al. footnote 2);
* recall@5 (Kurata): one of the 5 best labels is relevant;
* full accuracy (Kurata): the j best labels are exactly the j relevant ones;
* micro-F1 at a threshold on the probabilities: true/false positives and false negatives, combined by
  :func:`micro_f1` (equal to scikit-learn's ``f1_score(average="micro")``).

Ranking metrics are defined only for documents with at least one relevant label in the subset; the
others are not counted (``n`` says how many were). Micro-F1 counts every document given.
"""

from typing import Dict, Optional

import numpy as np
from sklearn.metrics import label_ranking_average_precision_score, label_ranking_loss

RANKING_KEYS = ("rl", "avgpr", "oneerr", "r5", "fullacc")


def ranking_metric_sums(scores, targets, probs=None, threshold: Optional[float] = None) -> Dict[str, float]:
    """Per-document sums of RL, AvgPr, OneErr, recall@5, full accuracy (+ tp/fp/fn if ``probs``)."""
    scores = np.asarray(scores, dtype=np.float64)
    targets = np.asarray(targets) > 0
    if scores.shape != targets.shape or scores.ndim != 2:
        raise ValueError(f"scores {scores.shape} and targets {targets.shape} must be equal n x L matrices")
    out = {"n": 0.0, **{k: 0.0 for k in RANKING_KEYS}}
    if probs is not None:
        pred = np.asarray(probs) >= threshold
        out["tp"] = float((pred & targets).sum())
        out["fp"] = float((pred & ~targets).sum())
        out["fn"] = float((~pred & targets).sum())
    rows = targets.any(axis=1)
    n = int(rows.sum())
    if n == 0 or scores.shape[1] == 0:
        return out
    s, y = scores[rows], targets[rows]
    out["n"] = float(n)
    if s.shape[1] > 1:
        out["rl"] = float(label_ranking_loss(y, s)) * n
    out["avgpr"] = float(label_ranking_average_precision_score(y, s)) * n
    order = np.argsort(-s, axis=1, kind="stable")
    ranked = np.take_along_axis(y, order, axis=1)
    out["oneerr"] = float((~ranked[:, 0]).sum())
    out["r5"] = float(ranked[:, :5].any(axis=1).sum())
    num_gold = y.sum(axis=1)
    hits_at_j = np.cumsum(ranked, axis=1)[np.arange(n), num_gold - 1]
    out["fullacc"] = float((hits_at_j == num_gold).sum())
    return out


def micro_f1(tp: float, fp: float, fn: float) -> float:
    """Micro-averaged F1 = 2 TP / (2 TP + FP + FN) (0 when there is nothing to count)."""
    denom = 2 * tp + fp + fn
    return 2 * tp / denom if denom > 0 else 0.0


def summarize(sums: Dict[str, float]) -> Dict[str, float]:
    """Percentages from the sums: RL, AvgPr, OneErr, 1-best, R@5, full accuracy (and micro-F1)."""
    n = sums.get("n", 0.0)
    out = {"docs": n}
    if n > 0:
        for k in RANKING_KEYS:
            out[k] = 100.0 * sums[k] / n
        out["1best"] = 100.0 - out["oneerr"]
    if "tp" in sums:
        out["f1"] = 100.0 * micro_f1(sums["tp"], sums["fp"], sums["fn"])
    return out


def chance_level(targets, seed: int = 0, repeats: int = 5) -> Dict[str, float]:
    """The metrics of uniformly random scores (averaged over ``repeats`` seeded draws)."""
    targets = np.asarray(targets) > 0
    rng = np.random.default_rng(seed)
    runs = [summarize(ranking_metric_sums(rng.random(targets.shape), targets)) for _ in range(repeats)]
    return {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
