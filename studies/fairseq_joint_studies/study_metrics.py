"""The studies' figures beyond the package's metrics (:mod:`fairseq_joint.metrics`, GILE's ranking metrics and
generalized zero-shot evaluation, Pappas & Henderson 2019, Sec. 4): a model's scores of every document of a split
(:func:`split_scores`), the metrics of random scores (:func:`chance_level`) and GZSL with γ chosen on held-apart
documents (:func:`cross_calibrated_gzsl`). Used by the GILE studies (examples/gile/) and their tests; not part of
fairseq_joint.
"""

from typing import Dict

import numpy as np

from fairseq_joint.metrics import calibrate_seen_offset, gzsl_metric_sums, harmonic_mean, ranking_metric_sums, summarize


def split_scores(model, task, subset: str, batch_size: int = 64, seen_only: bool = False, any_language: bool = False):
    """``(scores, targets, label_set)`` of every document of ``subset`` (in file order) over its label set (only the seen
    labels with ``seen_only``, e.g. for ``--head linear``); scores are the head's logits, as numpy arrays. A
    multilingual model scores each batch as its language's (``any_language``: as a text of no given language, the
    mean of its languages' classification units)."""
    import torch

    task.load_dataset(subset)
    itr = task.get_batch_iterator(task.dataset(subset), max_sentences=batch_size).next_epoch_itr(shuffle=False)
    scores, targets, ids = [], [], []
    with torch.no_grad():
        for sample in itr:
            cols = sample["label_train_index"] >= 0 if seen_only else torch.ones_like(sample["label_train_index"]).bool()
            logits = model.label_scores(model(**sample["net_input"]), sample["label_tokens"][cols],
                                        sample["label_train_index"][cols],
                                        lang=None if any_language else sample.get("lang"))
            scores.append(logits.float().numpy())
            targets.append(sample["target"][:, cols].numpy() > 0)
            ids.append(sample["id"].numpy())
    order = np.argsort(np.concatenate(ids))
    return np.concatenate(scores)[order], np.concatenate(targets)[order], task.label_set(subset)


def chance_level(targets, seed: int = 0, repeats: int = 5) -> Dict[str, float]:
    """The metrics of uniformly random scores (averaged over ``repeats`` seeded draws)."""
    targets = np.asarray(targets) > 0
    rng = np.random.default_rng(seed)
    runs = [summarize(ranking_metric_sums(rng.random(targets.shape), targets)) for _ in range(repeats)]
    return {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}


def cross_calibrated_gzsl(scores, targets, seen) -> Dict[str, float]:
    """GZSL with γ chosen without looking at the documents it is scored on: the documents are split in two folds
    (even and odd positions); each fold is scored with the γ calibrated on the other, and the two folds' sums are
    pooled. Returns the pooled ``gzsl_*`` figures and ``gamma``, the mean of the two γ."""
    scores, targets = np.asarray(scores), np.asarray(targets) > 0
    folds = [np.arange(len(scores))[i::2] for i in (0, 1)]
    # (a fold whose gold labels lack a group has no γ to calibrate: none is subtracted there)
    gammas = [calibrate_seen_offset(scores[f], targets[f], seen) or 0.0 for f in folds]
    total = {"seen": {}, "unseen": {}}
    for fold, gamma in zip(folds, reversed(gammas)):
        for g, s in gzsl_metric_sums(scores[fold], targets[fold], seen, gamma).items():
            for k, v in s.items():
                total[g][k] = total[g].get(k, 0.0) + v
    out = {f"gzsl_{g}_avgpr": summarize(s).get("avgpr", 0.0) for g, s in total.items()}
    out["gzsl_h"] = harmonic_mean(out["gzsl_seen_avgpr"], out["gzsl_unseen_avgpr"])
    out["gamma"] = float(np.mean(gammas))
    return out
