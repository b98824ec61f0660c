"""``gile_label_embedding_cross_entropy``: the label-embedding loss of Sun et al. (2017, Eq. 14) for the GILE task in
``--classification-mode multiclass``: the labels are the training labels, o1 is the model's label-scoring head
(``--head``), o2 a plain softmax over the training labels fed the detached document vectors h, so its input size
is the model's dh (``--encoder-dim``, or the sentence encoder's dimension with ``--encoder pretrained``/``hybrid``).

``--criterion label_embedding_cross_entropy`` is the translation form (target words, a decoder's output layer);
``--task gile_classification`` refuses it and names this one. Texts whose label is unseen in training have no row in
Eq. 14: they are left out of the loss and scored at validation by the metrics of ``multilabel_classification``
(:func:`~fairseq_joint.criterions.multilabel_classification.evaluate_labels`: ``seen_*`` / ``unseen_*`` / ``gzsl_*``).
"""

from dataclasses import dataclass
from typing import Optional

import torch
from fairseq.criterions import register_criterion
from omegaconf import II

from fairseq_joint.criterions.label_embedding_cross_entropy import (
    LabelEmbeddingCrossEntropyCriterion,
    LabelEmbeddingOptions,
    log_terms,
)
from fairseq_joint.criterions.multilabel_classification import (
    MultilabelClassificationConfig,
    evaluate_labels,
    log_classification_metrics,
)
from fairseq_joint.criterions.sampled_cross_entropy import log_candidates
from fairseq_joint.data.gile_files import label_counts
from fairseq_joint.errors import InputError, OptionError
from fairseq_joint.modules.sampling import CandidateSampler
from fairseq_joint.tasks.gile_classification import LabelCriterion, LabelCriterionConfig, LabelStep


@dataclass
class GileLabelEmbeddingConfig(LabelEmbeddingOptions, LabelCriterionConfig):
    #: --encoder-dim, dh of o2 unless the model reads the texts through a sentence encoder, whose dimension the task
    #: gives (:meth:`~fairseq_joint.tasks.gile_classification.GileClassificationTask.document_dim`); no option of its own
    label_embedding_input_dim: Optional[int] = II("model.encoder_dim")

    @staticmethod
    def validate(cfg) -> None:
        """One label per text, one language (the task checked: :class:`LabelCriterionConfig`)."""
        name = "--criterion gile_label_embedding_cross_entropy"
        if cfg.task.classification_mode != "multiclass":
            raise OptionError(f"{name} needs one label per text: use --classification-mode multiclass (for "
                              "multi-label data use --criterion multilabel_classification)")
        if cfg.task.languages:
            raise OptionError(f"{name}: a multilingual model (--languages) trains with --criterion "
                              "multilabel_classification (Eq. 16 sums its per-language losses)")


@register_criterion("gile_label_embedding_cross_entropy", dataclass=GileLabelEmbeddingConfig)
class GileLabelEmbeddingCriterion(LabelCriterion, LabelEmbeddingCrossEntropyCriterion):
    """Eq. 14 over the training labels: what differs from the translation form is where the rows come from (the
    documents whose label was seen in training), what o1 is (the model's label-scoring head), dh (the task's document
    vectors) and the validation metrics of ``multilabel_classification``."""

    name = "gile_label_embedding_cross_entropy"

    @classmethod
    def build_criterion(cls, cfg, task):
        """The criterion (fairseq's build), once every training label is known to be in the label set validation
        scores: Eq. 14's rows are the training labels, in every split (before, a --eval-label-file without one of them
        was refused at the first validation, after an epoch's training)."""
        corpus = task.corpus
        missing = [n for n in corpus.train_labels if n not in (corpus.eval_descriptions or corpus.train_labels)]
        if missing:
            raise InputError(f"--eval-label-file {task.cfg.eval_label_file} lacks {len(missing)} training label(s) "
                             f"(first: {missing[0]!r}), which --criterion {cls.name} scores at validation too (Eq. 14): "
                             "add a 'label<TAB>description' line for each")
        return super().build_criterion(cfg, task)

    @staticmethod
    def num_labels(task) -> int:
        """m: the training labels."""
        return len(task.corpus.train_labels)

    @staticmethod
    def label_names(task):
        """The training labels in order."""
        return list(task.corpus.train_labels)

    @staticmethod
    def feature_dim(task, label_embedding_input_dim: int) -> int:
        """dh: the size of the task's document vectors h."""
        return task.document_dim(label_embedding_input_dim)

    @staticmethod
    def build_sampler(task, sampler, sample_rate, num_samples, unigram_alpha, exclude_positives=True):
        """Candidate labels: the batch's labels and negatives over the training labels (unigram: label frequency)."""
        counts = label_counts(task.corpus.train_label_rows(), len(task.corpus.train_labels))
        return CandidateSampler(len(counts), sampler, sample_rate=sample_rate, num_samples=num_samples, counts=counts,
                                alpha=unigram_alpha, exclude_positives=exclude_positives)

    def inputs(self, model, features, sample):
        """The document vectors of the texts whose label was seen in training, their training-label ids, and o1 = the
        model's head over training labels as ``score(h, ids)``."""
        tokens, train_index = sample["label_tokens"], sample["label_train_index"]
        position = torch.full((self.label_embedding.num_labels,), -1, dtype=torch.long, device=tokens.device)
        seen = (train_index >= 0).nonzero().flatten()
        position[train_index[seen]] = seen  # training label id -> its row in this batch's label set
        y = train_index[sample["target_class"]]
        keep = y >= 0

        def score(x, ids):
            ids = torch.arange(position.numel(), device=x.device) if ids is None else ids
            return model.label_scores(x, tokens[position[ids]], ids)

        return features[keep], y[keep], score

    def compute_loss(self, model, features, sample, reduce=True) -> LabelStep:
        """Eq. 14 over the texts of the batch whose label was seen in training; at validation also the metrics of
        :func:`~fairseq_joint.criterions.multilabel_classification.evaluate_labels` (softmax probabilities, micro-F1
        at the default threshold), every label's scores and the threshold counts."""
        terms, num_candidates, num_rows = self.compute_terms(model, features, sample)
        loss, logged = self.terms_loss(terms, num_candidates, num_rows)
        scores = counts = None
        if not model.training:
            _, _, metrics, scores, counts = evaluate_labels(model, features, sample, "distribution_ce",
                                                            self.task.validation_seen_score_offset,
                                                            MultilabelClassificationConfig.threshold)
            logged.update(metrics)
        return LabelStep(loss, max(num_rows, 1), logged, scores, counts)

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        log_classification_metrics(logging_outputs)  # loss, seen_*/unseen_*/gzsl_* metrics
        log_candidates(logging_outputs)
        log_terms(logging_outputs)
