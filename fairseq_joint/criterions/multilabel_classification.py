"""Criterion ``multilabel_classification`` for the ``gile_classification`` task.

Losses over the labels of a batch's label set (y the multi-hot target, o the head's logits):

* ``bce`` (GILE Eq. 15, Nam et al. 2014): ``L = -1/(N k) Σ_i Σ_j H(y_ij, σ(o_ij))``. With
  ``--label-sample-rate r < 1`` (GILE Eq. 17) only the candidate labels are scored: every label that is
  positive for some example of the batch plus negatives drawn uniformly from the other labels, ``r·k``
  candidates in all (never fewer than the positives); Z stays N k, so with r = 1 it is Eq. 15 exactly.
* ``copy_nll`` (Kurata et al. 2016 Sec. 2, copy transformation): one softmax example per positive label,
  ``-Σ_i Σ_{j ∈ y_i} log softmax(o_i)_j`` over the number of copies.
* ``distribution_ce`` (Kurata et al. Sec. 2): cross-entropy to the label distribution y_i / |y_i|.

In ``--classification-mode multiclass`` the loss is softmax cross-entropy (one label per text), which is
``distribution_ce`` with one-hot y.

A batch of one language of a multilingual model (``sample["lang"]``) is scored by that language's classification
unit; the task logs each language's metrics with its prefix (``reduce_metrics(..., prefix="pl_")``).

At validation the seen labels (those of training) and the unseen ones are scored separately and the
metrics of :mod:`fairseq_joint.metrics` are logged as ``seen_*`` / ``unseen_*``; with unseen labels, the
generalized zero-shot metrics too (all labels ranked together, the seen ones' scores lowered by the task's
``--seen-score-offset`` γ, 0 when the task calibrates γ): ``gzsl_seen_*``, ``gzsl_unseen_*`` and ``gzsl_h``, the
harmonic mean of their AvgPr; the batch's scores of every label go back to the task in the criterion's
:class:`~fairseq_joint.tasks.gile_classification.LabelStep` (its calibration of γ,
:meth:`~fairseq_joint.tasks.gile_classification.GileClassificationTask.valid_step`).
All are usable with ``--best-checkpoint-metric``, e.g. ``gzsl_h --maximize-best-checkpoint-metric``.
:func:`evaluate_labels` and :func:`log_classification_metrics` compute and log them, for this criterion and for
``gile_label_embedding_cross_entropy``.
"""

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq import metrics as fairseq_metrics
from fairseq.criterions import register_criterion
from fairseq.dataclass import ChoiceEnum

from fairseq_joint.errors import OptionError
from fairseq_joint.metrics import (
    LABEL_GROUPS,
    RANKING_KEYS,
    LabelScores,
    ThresholdCounts,
    gzsl_metric_sums,
    meter_f1,
    meter_gzsl_h,
    ranking_metric_sums,
    threshold_counts,
)
from fairseq_joint.modules.sampling import CandidateSampler
from fairseq_joint.options import FRACTION, PROBABILITY
from fairseq_joint.tasks.gile_classification import LabelCriterion, LabelCriterionConfig, LabelStep

LOSS_CHOICES = ("bce", "copy_nll", "distribution_ce")


@dataclass
class MultilabelClassificationConfig(LabelCriterionConfig):
    multilabel_loss: ChoiceEnum(LOSS_CHOICES) = field(
        default="bce", metadata={"help": "bce (GILE Eq. 15), copy_nll (NLL with copy transformation) or "
                                 "distribution_ce (cross-entropy to the label distribution), Kurata et al. Sec. 2"}
    )
    label_sample_rate: float = field(
        default=1.0, metadata={"help": "fraction of the training labels scored per batch in (0, 1]: all positives "
                               "plus uniformly sampled negatives (GILE Eq. 17); bce only", "range": FRACTION}
    )
    threshold: float = field(default=0.5, metadata={"help": "probability threshold of micro-F1 (a label scored at "
                                                             "least that likely counts as predicted)",
                                                     "range": PROBABILITY})

    @staticmethod
    def validate(cfg) -> None:
        """The loss of --classification-mode multiclass is softmax cross-entropy, and only bce samples labels (the task
        checked: :class:`LabelCriterionConfig`)."""
        c, task = cfg.criterion, cfg.task
        multiclass = task.classification_mode == "multiclass"
        if multiclass and c.multilabel_loss != "bce":
            raise OptionError(f"--multilabel-loss {c.multilabel_loss} is for --classification-mode multilabel: drop it")
        if c.label_sample_rate < 1.0 and (multiclass or c.multilabel_loss != "bce"):
            raise OptionError(f"--label-sample-rate {c.label_sample_rate} samples labels for the bce loss (Eq. 17) "
                              "only; use --multilabel-loss bce or --label-sample-rate 1")


def sample_label_candidates(target: torch.Tensor, rate: float, generator=None) -> torch.Tensor:
    """Candidate label columns for Eq. 17: all positives of the batch, then uniform negatives, ``rate·k`` in all
    (the project's one sampler, :class:`~fairseq_joint.modules.sampling.CandidateSampler`)."""
    positives = target.gt(0).any(0).nonzero().flatten()
    sampler = CandidateSampler(target.size(1), "uniform", sample_rate=rate)
    return sampler.sample(positives, generator=generator).ids


def classification_loss(logits: torch.Tensor, target: torch.Tensor, kind: str) -> torch.Tensor:
    """The summed loss ``kind`` of logits and a multi-hot target of equal shape (see the module doc)."""
    if kind == "bce":
        return F.binary_cross_entropy_with_logits(logits, target, reduction="sum")
    logp = F.log_softmax(logits, dim=-1)
    if kind == "copy_nll":
        return -(logp * target).sum()
    count = target.sum(-1, keepdim=True).clamp(min=1.0)
    return -(logp * target / count).sum()


def loss_normalizer(target: torch.Tensor, kind: str) -> float:
    """Z: N k for bce (Eqs. 15, 17; k = all labels, sampled or not), the copies for copy_nll, N otherwise."""
    if kind == "bce":
        return float(target.numel())
    if kind == "copy_nll":
        return float(target.sum())
    return float(target.gt(0).any(-1).sum())


def label_scores(model, features, tokens, train_index, lang=None):
    """The model's logits of the labels; a batch of one language of a multilingual model names it (``lang``)."""
    if lang is None:
        return model.label_scores(features, tokens, train_index)
    return model.label_scores(features, tokens, train_index, lang=lang)


def probabilities(logits: torch.Tensor, kind: str) -> torch.Tensor:
    """σ per label for ``bce`` (Eq. 13), the softmax over the labels otherwise."""
    return torch.sigmoid(logits) if kind == "bce" else torch.softmax(logits, dim=-1)


def evaluate_labels(model, features, sample, kind: str, seen_score_offset: float, threshold: float
                    ) -> Tuple[torch.Tensor, torch.Tensor, Dict[str, float], Optional[LabelScores], ThresholdCounts]:
    """Validation/test of one batch, its document vectors ``features``: ``(logits, target, logged, scores, counts)``:
    the logits of the labels seen in training and their targets (what the loss ``kind`` is over), the ranking metrics
    of the seen and of the unseen labels (``seen_*`` / ``unseen_*``) and with unseen labels the GZSL ones at γ =
    ``seen_score_offset`` (``gzsl_*``), then the batch's scores of every label (else None), and the
    :func:`~fairseq_joint.metrics.threshold_counts` of the probabilities of every label scored (the probability
    threshold is calibrated on them)."""
    target = sample["target"].to(features.dtype)
    tokens, train_index = sample["label_tokens"], sample["label_train_index"]
    seen, lang = train_index >= 0, sample.get("lang")
    if model.scores_unseen_labels:
        logits_all = label_scores(model, features, tokens, train_index, lang)
        logits_seen = logits_all[:, seen]
    else:
        logits_all = None
        logits_seen = label_scores(model, features, tokens[seen], train_index[seen], lang)
    probs = probabilities(logits_seen, kind).detach().float().cpu().numpy()
    # the gold labels as booleans: under --bf16 fairseq hands over the target in bf16, which numpy cannot hold
    gold = (sample["target"] > 0).cpu().numpy()
    seen_np = seen.cpu().numpy()
    sums = ranking_metric_sums(logits_seen.detach().float().cpu().numpy(), gold[:, seen_np], probs=probs,
                               threshold=threshold)
    logged = {f"seen_{k}": v for k, v in sums.items()}
    scores = None
    if logits_all is not None and (~seen).any():
        scores = LabelScores(logits_all.detach().float().cpu().numpy(), gold, seen_np)
        unseen = ~seen_np
        sums = ranking_metric_sums(scores.scores[:, unseen], gold[:, unseen])
        logged.update({f"unseen_{k}": v for k, v in sums.items()})
        for group, sums in gzsl_metric_sums(scores.scores, gold, ~unseen, seen_score_offset).items():
            logged.update({f"gzsl_{group}_{k}": v for k, v in sums.items()})
    if logits_all is None:
        counts = threshold_counts(probs, gold[:, seen_np])
    else:
        counts = threshold_counts(probabilities(logits_all, kind).detach().float().cpu().numpy(), gold)
    return logits_seen, target[:, seen], logged, scores, counts


def log_classification_metrics(logging_outputs, prefix: str = "") -> list:
    """Log the loss and the metrics of :func:`evaluate_labels`, each name with ``prefix`` (a multilingual task's
    ``pl_``); returns the names logged (without the prefix)."""
    def total(key):
        return sum(float(log.get(key, 0.0)) for log in logging_outputs)

    logged = ["loss"]
    size = total("sample_size")
    fairseq_metrics.log_scalar(f"{prefix}loss", total("loss") / max(size, 1.0), size, round=4)
    if any("seen_n" in log for log in logging_outputs):  # evaluation: how many documents were scored
        fairseq_metrics.log_scalar_sum(f"{prefix}docs", total("nsentences"), round=0)
        logged.append("docs")
    for group in LABEL_GROUPS:
        n = total(f"{group}_n")
        if n > 0:
            for k in RANKING_KEYS:
                fairseq_metrics.log_scalar(f"{prefix}{group}_{k}", 100.0 * total(f"{group}_{k}") / n, n, round=2)
            fairseq_metrics.log_scalar(f"{prefix}{group}_1best", 100.0 - 100.0 * total(f"{group}_oneerr") / n, n,
                                       round=2)
            logged += [f"{group}_{k}" for k in RANKING_KEYS] + [f"{group}_1best"]
        if any(f"{group}_tp" in log for log in logging_outputs):
            for k in ("tp", "fp", "fn"):
                fairseq_metrics.log_scalar_sum(f"_{prefix}{group}_{k}", total(f"{group}_{k}"))
            fairseq_metrics.log_derived(f"{prefix}{group}_f1", meter_f1(prefix + group))
            logged.append(f"{group}_f1")
    if total("gzsl_seen_n") > 0 and total("gzsl_unseen_n") > 0:
        fairseq_metrics.log_derived(f"{prefix}gzsl_h", meter_gzsl_h(prefix))
        logged.append("gzsl_h")
    return logged


@register_criterion("multilabel_classification", dataclass=MultilabelClassificationConfig)
class MultilabelClassificationCriterion(LabelCriterion):
    def __init__(self, task, multilabel_loss="bce", label_sample_rate=1.0, threshold=0.5):
        super().__init__(task)
        self.loss_kind = "distribution_ce" if task.cfg.classification_mode == "multiclass" else str(multilabel_loss)
        self.label_sample_rate = label_sample_rate
        self.threshold = threshold

    def compute_loss(self, model, features, sample, reduce=True) -> LabelStep:
        """The loss of the document vectors ``features`` over the batch's labels (Eqs. 15-17); at validation over
        the labels seen in training, with the metrics and every label's scores of :func:`evaluate_labels`."""
        if not model.training:
            logits, target, logged, scores, counts = evaluate_labels(model, features, sample, self.loss_kind,
                                                                     self.task.validation_seen_score_offset,
                                                                     self.threshold)
            return LabelStep(classification_loss(logits, target, self.loss_kind),
                             loss_normalizer(target, self.loss_kind), logged, scores, counts)
        target = sample["target"].to(features.dtype)
        tokens, train_index, scored = sample["label_tokens"], sample["label_train_index"], target
        if self.label_sample_rate < 1.0:
            cols = sample_label_candidates(target, self.label_sample_rate)
            tokens, train_index, scored = tokens[cols], train_index[cols], target[:, cols]
        logits = label_scores(model, features, tokens, train_index, sample.get("lang"))
        return LabelStep(classification_loss(logits, scored, self.loss_kind), loss_normalizer(target, self.loss_kind),
                         {})

    @staticmethod
    def reduce_metrics(logging_outputs, prefix: str = ""):
        """:func:`log_classification_metrics` (the task calls it with a language's ``prefix``)."""
        return log_classification_metrics(logging_outputs, prefix)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return False
