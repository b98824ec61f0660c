"""Multi-label classification metrics of GILE (Pappas & Henderson 2019, Sec. 4, Tables 2-5) and
Kurata et al. (2016, Sec. 4).

All functions take a score matrix ``scores`` (n x L; higher = more likely) and a binary relevance matrix
``targets`` (n x L) over one label subset (the *seen* or the *unseen* labels, Table 2's two halves) and
return **sums over documents** so that fairseq can add them across validation batches:

* rank loss (RL): the fraction of (relevant, irrelevant) label pairs ordered wrongly (a tie counts as wrong), as
  scikit-learn's ``label_ranking_loss`` defines it;
* average precision (AvgPr): for each relevant label, the share of relevant labels among those scored at least as
  high, averaged, as scikit-learn's ``label_ranking_average_precision_score`` defines it;
* one-error (OneErr): the top-ranked label is not relevant (no scikit-learn function; hand-computed);
  Kurata's 1-best accuracy is ``100 - OneErr`` (Kurata et al. footnote 2);
* recall@5 (Kurata): one of the 5 best labels is relevant;
* full accuracy (Kurata): the j best labels are exactly the j relevant ones;
* micro-F1 at a threshold on the probabilities: true/false positives and false negatives, combined by
  :func:`micro_f1` (equal to scikit-learn's ``f1_score(average="micro")``).

Generalized zero-shot evaluation (GZSL, :func:`gzsl_metric_sums`) ranks every label, seen and unseen, for every
document, and scores each group's relevant labels within that one ranking; calibrated stacking (Chao et al. 2016)
subtracts a constant γ from the seen labels' scores first, against the bias toward the labels training saw.

RL and AvgPr are computed for all documents at once from one sort a document (:func:`rank`), where scikit-learn's
functions rank each document in a Python loop; the calibration of γ ranks each group once and counts, for each γ
tried, the other group's labels above each relevant label (:func:`gzsl_average_precision`), where ranking every label
anew at each of the 42 γ took seconds per thousand validation documents. The unit tests compare them with
scikit-learn's functions and with :func:`gzsl_metric_sums` at each γ, ties included.

Ranking metrics are defined only for documents with at least one relevant label in the subset; the
others are not counted (``n`` says how many were). Micro-F1 counts every document given.

The probability threshold that turns a ranking into a label set is calibrated on validation like γ: the threshold t of
:data:`THRESHOLDS` that maximizes micro-F1 over the documents (:func:`threshold_counts` of each batch, pooled by
:func:`calibrate_threshold`).
"""

from typing import Callable, Dict, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

RANKING_KEYS = ("rl", "avgpr", "oneerr", "r5", "fullacc")
#: the label groups a validation scores (each logs its ranking metrics, ``{group}_{key}``)
LABEL_GROUPS = ("seen", "unseen", "gzsl_seen", "gzsl_unseen")
#: the validation metrics of a label group that are better lower: ranking loss and one-error (AvgPr, R@5, full accuracy,
#: 1-best, F1 are better higher)
LOWER_IS_BETTER = ("rl", "oneerr")
#: how many scores are ranked or compared at once (documents in chunks: bounds the memory of a validation's thousands
#: of documents over thousands of labels)
CHUNK = 2 ** 22


def better_higher(name: str) -> Optional[bool]:
    """Whether the validation metric ``name`` (``seen_avgpr``, ``gzsl_h``, ``loss``; a language's with its prefix,
    ``pl_seen_rl``) is better higher; None for a name no validation of the task logs as a metric."""
    for group in LABEL_GROUPS:
        for key in (*RANKING_KEYS, "1best", "f1"):
            if name == f"{group}_{key}" or name.endswith(f"_{group}_{key}"):
                return key not in LOWER_IS_BETTER
    return False if name == "loss" or name.endswith("_loss") else True if name.endswith("gzsl_h") else None


def score_matrices(scores, targets, seen=None, offsets=()):
    """``scores`` as float64, ``targets`` as bool (n x L each) and ``seen`` as bool (L,), checked: equal shapes,
    finite scores, and finite scores still with the seen labels' lowered by each γ of ``offsets`` (a NaN γ, or
    scores less γ that overflow to infinity, ranked the labels wrong without a word)."""
    scores, targets = np.asarray(scores, dtype=np.float64), np.asarray(targets) > 0
    seen = None if seen is None else np.asarray(seen, dtype=bool)
    shapes = f"scores {scores.shape}, targets {targets.shape}" + ("" if seen is None else f", seen {seen.shape}")
    if scores.shape != targets.shape or scores.ndim != 2 or seen is not None and seen.shape != scores.shape[1:]:
        raise ValueError(f"{shapes}: expected n x L, n x L" + ("" if seen is None else ", L"))
    if not np.isfinite(scores).all():
        raise ValueError("the scores to rank hold a non-finite value")
    offsets = np.asarray(offsets, dtype=np.float64).ravel()
    lowered = scores[:, seen] if seen is not None else scores  # the scores γ is subtracted from
    with np.errstate(over="ignore", invalid="ignore"):  # the overflow is what is refused
        # the extremes of every score less every γ: the largest less the smallest γ, the smallest less the largest
        extremes = [lowered.max() - offsets.min(), lowered.min() - offsets.max()] if lowered.size and offsets.size \
            else list(offsets)
    if not np.isfinite(offsets).all() or not np.isfinite(extremes).all():
        raise ValueError(f"γ (seen_score_offset) {offsets.tolist()}: the scores less γ must be finite numbers")
    return scores, targets, seen


class Ranking(NamedTuple):
    """Each document's labels from the best score down (ties in label order), and at each position what the ranking
    metrics count; tied labels share the rank of their group, as scikit-learn ranks them."""

    #: (n x L) whether the label at each position is relevant
    relevant: np.ndarray
    #: (n x L) the score at each position
    value: np.ndarray
    #: (n x L) the relevant labels at or above each position, in this order
    hits: np.ndarray
    #: (n x L) the labels that score at least as high as the label at each position (itself and its ties included)
    at_least: np.ndarray
    #: (n x L) the relevant ones among them
    relevant_at_least: np.ndarray
    #: (n x L) the relevant labels that score higher
    relevant_above: np.ndarray


def rank(scores: np.ndarray, targets: np.ndarray) -> Ranking:
    """The :class:`Ranking` of a float score matrix and its bool relevance matrix (n x L each): one sort a document,
    every count for all documents at once (scikit-learn's RL and AvgPr rank each document in a Python loop, two
    ``rankdata`` calls a document)."""
    n, labels = scores.shape
    order = np.argsort(-scores, axis=1, kind="stable")
    relevant, value = np.take_along_axis(targets, order, axis=1), np.take_along_axis(scores, order, axis=1)
    hits = np.cumsum(relevant, axis=1)
    last = np.append(value[:, :-1] != value[:, 1:], np.ones((n, 1), bool), axis=1)  # the last position of a tie
    position = np.arange(labels)
    at_least = np.minimum.accumulate(np.where(last, position, labels - 1)[:, ::-1], axis=1)[:, ::-1] + 1
    above = np.maximum.accumulate(np.where(np.roll(last, 1, axis=1), position, 0), axis=1)  # labels scoring higher
    relevant_above = np.where(above > 0, np.take_along_axis(hits, np.maximum(above - 1, 0), axis=1), 0)
    return Ranking(relevant, value, hits, at_least, np.take_along_axis(hits, at_least - 1, axis=1), relevant_above)


def average_precision_sum(ranking: Ranking, beside=0):
    """AvgPr summed over the documents of ``ranking`` (each with a relevant label): the mean, over a document's
    relevant labels, of the share of relevant labels among the labels that score at least as high. ``beside``: for
    each relevant label (in ``np.nonzero(ranking.relevant)`` order), how many labels outside the ranking score at
    least as high too (GZSL: the other group's, :func:`gzsl_average_precision`); a (k x relevant labels) array gives
    k sums."""
    doc, position = np.nonzero(ranking.relevant)
    share = ranking.relevant_at_least[doc, position] / (ranking.at_least[doc, position] + beside)
    return (share / ranking.hits[doc, -1]).sum(axis=-1)


def ranking_metric_sums(scores, targets, probs=None, threshold: Optional[float] = None) -> Dict[str, float]:
    """Per-document sums of RL, AvgPr, OneErr, recall@5, full accuracy (+ tp/fp/fn if ``probs``)."""
    scores, targets, _ = score_matrices(scores, targets)
    out = {"n": 0.0, **{k: 0.0 for k in RANKING_KEYS}}
    if probs is not None:
        pred = np.asarray(probs) >= threshold
        out["tp"] = float((pred & targets).sum())
        out["fp"] = float((pred & ~targets).sum())
        out["fn"] = float((~pred & targets).sum())
    rows = np.flatnonzero(targets.any(axis=1))
    labels = scores.shape[1]
    if len(rows) == 0 or labels == 0:
        return out
    out["n"] = float(len(rows))
    at_once = max(1, CHUNK // labels)  # documents ranked at once
    for start in range(0, len(rows), at_once):
        ranking = rank(scores[rows[start:start + at_once]], targets[rows[start:start + at_once]])
        num_gold = ranking.hits[:, -1]
        out["avgpr"] += float(average_precision_sum(ranking))
        # each irrelevant label is ordered wrongly against the relevant ones it does not score below
        wrong = np.where(ranking.relevant, 0, num_gold[:, None] - ranking.relevant_above).sum(axis=1)
        pairs = num_gold * (labels - num_gold)
        out["rl"] += float((wrong / np.maximum(pairs, 1)).sum())  # a document without irrelevant labels: 0
        out["oneerr"] += float((~ranking.relevant[:, 0]).sum())
        out["r5"] += float(ranking.relevant[:, :5].any(axis=1).sum())
        out["fullacc"] += float((ranking.hits[np.arange(len(num_gold)), num_gold - 1] == num_gold).sum())
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


def gzsl_metric_sums(scores, targets, seen, seen_score_offset: float = 0.0) -> Dict[str, Dict[str, float]]:
    """Generalized zero-shot sums ``{"seen": ..., "unseen": ...}`` (:func:`ranking_metric_sums` of each group).

    Every document ranks *all* labels, the seen ones' scores lowered by ``seen_score_offset`` (γ of calibrated
    stacking). The "unseen" sums score the document's unseen gold labels against every label that is not gold
    (seen or unseen), "seen" the seen gold labels likewise: the document's gold labels of the *other* group are
    taken out of the ranking (moved below every other label, where no metric counts them), so a correct seen label
    does not count as an error of the unseen ranking, nor the reverse.
    """
    scores, targets, seen = score_matrices(scores, targets, seen, [seen_score_offset])
    scores = scores - seen_score_offset * seen
    floor = scores.min() - 1.0 if scores.size else 0.0
    out = {}
    for group, mask in (("seen", seen), ("unseen", ~seen)):
        relevant = targets & mask
        out[group] = ranking_metric_sums(np.where(targets & ~mask, floor, scores), relevant)
    return out


def harmonic_mean(a: float, b: float) -> float:
    """2ab / (a + b), the GZSL summary of the seen and unseen AvgPr (0 when both are 0)."""
    return 2.0 * a * b / (a + b) if a + b > 0 else 0.0


def meter_f1(group: str) -> Callable[[Mapping], float]:
    """``{group}_f1`` of a validation's fairseq meters ``m``: the micro-F1 (%) of the counts ``_{group}_tp``,
    ``_{group}_fp`` and ``_{group}_fn`` it summed (``group`` with its language prefix), rounded as logged."""
    return lambda m: round(100.0 * micro_f1(m[f"_{group}_tp"].sum, m[f"_{group}_fp"].sum, m[f"_{group}_fn"].sum), 2)


def meter_gzsl_h(prefix: str = "") -> Callable[[Mapping], float]:
    """``{prefix}gzsl_h`` of a validation's fairseq meters ``m``: the harmonic mean of the validation-wide seen and
    unseen AvgPr (not an average of per-batch means), rounded as logged."""
    return lambda m: round(harmonic_mean(m[f"{prefix}gzsl_seen_avgpr"].avg, m[f"{prefix}gzsl_unseen_avgpr"].avg), 2)


def gzsl_average_precision(scores, targets, seen, offsets) -> Tuple[np.ndarray, np.ndarray]:
    """GZSL's AvgPr sums of the seen and the unseen group at each γ of ``offsets`` (k x 2), and each group's number of
    documents (2,): :func:`gzsl_metric_sums`'s ``avgpr`` and ``n`` at k values of γ at once. Each group is ranked once
    (:func:`rank`): a shift of the seen labels' scores leaves the order within each group as it is, and changes only
    how many labels of the other group (its gold ones out of the ranking) score at least as high as each relevant
    label, which is counted for every γ (the seen labels' scores lowered by γ, as :func:`gzsl_metric_sums` does).
    Within a group the scores are compared as they are, not less γ: the same order as :func:`gzsl_metric_sums`'s but
    for two scores that subtracting γ rounds to one (float32 logits closer than |γ| x 2^-29 to each other and to 0)."""
    offsets = np.asarray(offsets, dtype=np.float64).reshape(-1)
    scores, targets, seen = score_matrices(scores, targets, seen, offsets)
    sums, counts = np.zeros((len(offsets), 2)), np.zeros(2)
    at_once = max(1, CHUNK // max(scores.shape[1], 1))  # documents ranked at once
    for g, own in enumerate((seen, ~seen)):
        docs = np.flatnonzero((targets & own).any(axis=1))
        counts[g] = len(docs)
        for start in range(0, len(docs), at_once):
            chunk_scores, chunk_targets = scores[docs[start:start + at_once]], targets[docs[start:start + at_once]]
            ranking = rank(chunk_scores[:, own], chunk_targets[:, own])
            doc, position = np.nonzero(ranking.relevant)
            value = ranking.value[doc, position]
            other = np.where(chunk_targets[:, ~own], -np.inf, chunk_scores[:, ~own])  # its gold labels: out
            beside = np.zeros((len(offsets), len(doc)))
            step = max(1, CHUNK // max(other.shape[1], 1))
            for first in range(0, len(doc), step):
                o, v = other[doc[first:first + step]], value[first:first + step, None]
                for k, gamma in enumerate(offsets):
                    beside[k, first:first + step] = ((o >= v - gamma) if g == 0 else (o - gamma >= v)).sum(axis=1)
            sums[:, g] += average_precision_sum(ranking, beside)
    return sums, counts


def gzsl_avgpr(scores, targets, seen, offsets) -> np.ndarray:
    """GZSL's seen and unseen AvgPr (%) at each γ of ``offsets`` (k x 2; a group without documents: 0)."""
    sums, counts = gzsl_average_precision(scores, targets, seen, offsets)
    return 100.0 * sums / np.maximum(counts, 1)


def gzsl_summary(scores, targets, seen, seen_score_offset: float = 0.0) -> Dict[str, float]:
    """``gzsl_seen_avgpr``, ``gzsl_unseen_avgpr`` (%) and their harmonic mean ``gzsl_h`` at one γ."""
    ((seen_avgpr, unseen_avgpr),) = gzsl_avgpr(scores, targets, seen, [seen_score_offset]).tolist()
    return {"gzsl_seen_avgpr": seen_avgpr, "gzsl_unseen_avgpr": unseen_avgpr,
            "gzsl_h": harmonic_mean(seen_avgpr, unseen_avgpr)}


def seen_offsets(scores, steps: int = 41) -> np.ndarray:
    """The values of γ calibration tries: a grid over the spread of the scores, the 1st-99th percentile range, from -1
    to 1 times it (``steps`` of them from -1/4 up, the grid of earlier versions, then as far below at the same step:
    unseen labels scored above the seen ones, as a cosine prior adds to them, need γ < 0), and γ = 0."""
    scores = np.asarray(scores, dtype=np.float64)
    span = float(np.percentile(scores, 99) - np.percentile(scores, 1)) or 1.0
    step = 1.25 * span / max(steps - 1, 1)
    below = -0.25 * span - step * np.arange(1, round(0.75 * span / step) + 1)
    return np.unique(np.concatenate([below, np.linspace(-0.25 * span, span, steps), [0.0]]))


#: values of ``gzsl_h`` (%) closer than this are equal to calibration: the same H reached by two rankings differs by
#: the rounding of its sums
H_TOLERANCE = 1e-9


def calibrate_seen_offset(scores, targets, seen, steps: int = 41) -> Optional[float]:
    """The γ of calibrated stacking of :func:`seen_offsets` that maximizes ``gzsl_h`` on these documents (of equal
    ``gzsl_h``, up to :data:`H_TOLERANCE`, the one nearest 0; of -γ and γ, -γ); None where their gold labels are not
    of both groups, seen and unseen (``gzsl_h`` is 0 at every γ: there is nothing to calibrate on, and the γ = 0
    chosen passed for a calibrated one)."""
    gold, seen = np.asarray(targets) > 0, np.asarray(seen, dtype=bool)
    if not (gold[:, seen].any() and gold[:, ~seen].any()):
        return None
    grid = seen_offsets(scores, steps)
    h = np.array([harmonic_mean(a, b) for a, b in gzsl_avgpr(scores, targets, seen, grid)])
    best = np.flatnonzero(h >= h.max() - H_TOLERANCE)
    return float(grid[best[np.argmin(np.abs(grid[best]))]])


def macro_average(meters, keys) -> float:
    """The mean of the logged values of ``keys`` present in ``meters`` (a fairseq MetersDict: a multilingual model's
    metric of each language); 0 without any."""
    values = [meters.get_smoothed_value(k) for k in keys if k in meters]
    return round(float(np.mean(values)), 2) if values else 0.0


class LabelScores(NamedTuple):
    """One batch's scores of every label of a label set: what γ is calibrated on."""

    #: (n x L) the logits
    scores: np.ndarray
    #: (n x L) the gold labels
    gold: np.ndarray
    #: (L,) whether each label was seen in training
    seen: np.ndarray


def pooled_seen_offset(batches: Sequence[LabelScores]) -> Optional[float]:
    """:func:`calibrate_seen_offset` over the documents of several batches of one label set (a validation's batches,
    collected by the task when it calibrates γ)."""
    seen = np.asarray(batches[0].seen, dtype=bool)
    if any(not np.array_equal(np.asarray(b.seen, dtype=bool), seen) for b in batches):
        raise ValueError("the batches to calibrate γ on were scored against different label sets")
    return calibrate_seen_offset(np.concatenate([b.scores for b in batches]), np.concatenate([b.gold for b in batches]),
                                 seen)


#: the probability thresholds calibration chooses from: steps of 0.001 over [0, 1] and a geometric grid down to 1e-6 (a
#: softmax over hundreds of labels gives each a probability near 1/L, finer than the linear steps)
THRESHOLDS = np.unique(np.concatenate([np.linspace(0.0, 1.0, 1001), np.geomspace(1e-6, 1.0, 601)]))


class ThresholdCounts(NamedTuple):
    """One batch's labels at or above each threshold of :data:`THRESHOLDS`: what the probability threshold is
    calibrated on (``relevant[0]``, at t = 0, counts every relevant label)."""

    #: (len(THRESHOLDS),) the relevant labels whose probability is at least each threshold
    relevant: np.ndarray
    #: (len(THRESHOLDS),) the irrelevant ones
    irrelevant: np.ndarray


def threshold_counts(probs, targets) -> ThresholdCounts:
    """:class:`ThresholdCounts` of a probability matrix ``probs`` and the relevance matrix ``targets`` (n x L each)."""
    probs = np.asarray(probs, dtype=np.float64)
    targets = np.asarray(targets) > 0
    if probs.shape != targets.shape:
        raise ValueError(f"probabilities {probs.shape} and targets {targets.shape} must be equal n x L matrices")

    def at_least(values):  # how many values are >= each threshold t_k: those with more than k thresholds <= them
        below = np.searchsorted(THRESHOLDS, values, side="right")
        return np.cumsum(np.bincount(below, minlength=len(THRESHOLDS) + 1)[::-1])[::-1][1:]

    return ThresholdCounts(at_least(probs[targets]), at_least(probs[~targets]))


def calibrate_threshold(batches: Sequence[ThresholdCounts]) -> Optional[float]:
    """The threshold of :data:`THRESHOLDS` at which "probability >= t" has the best micro-F1 over the documents of
    ``batches`` (the middle one of those that tie); None without a relevant label (nothing to calibrate on)."""
    if not batches:
        return None
    relevant = sum(b.relevant for b in batches)
    irrelevant = sum(b.irrelevant for b in batches)
    total = float(relevant[0])
    if total == 0:
        return None
    f1 = np.array([micro_f1(float(tp), float(fp), total - float(tp)) for tp, fp in zip(relevant, irrelevant)])
    best = np.flatnonzero(f1 == f1.max())
    return float(THRESHOLDS[best[len(best) // 2]])


def retrieval_precision_at_1(src, tgt) -> float:
    """Precision@1 of finding row i of ``tgt`` from row i of ``src`` (n x d each: the same n documents in two
    languages) by cosine among all n rows, after centring each matrix on its own mean row (the languages' offsets
    removed); chance is 1 / n."""
    def unit(m):
        m = np.asarray(m, dtype=np.float64)
        m = m - m.mean(axis=0, keepdims=True)
        return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)

    if np.shape(src) != np.shape(tgt) or np.ndim(src) != 2:
        raise ValueError(f"retrieval needs two n x d matrices, got {np.shape(src)} and {np.shape(tgt)}")
    src, tgt = unit(src), unit(tgt)
    return float(((src @ tgt.T).argmax(axis=1) == np.arange(len(src))).mean())
