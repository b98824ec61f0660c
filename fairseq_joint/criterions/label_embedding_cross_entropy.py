"""``label_embedding_cross_entropy``: the soft loss of the Label Embedding Network (Sun et al. 2017, Eq. 14).

For every target token y with decoder features h::

    L = H(y, z1') + H(e', z1') + H(y, z2') + ||max(0, (z2')_y - α)||_p + H(z2''(τ), e')

* z1 = o1(h): the model's own output layer (any ``--output-layer``; it alone is used for prediction);
* z2 = o2(h.detach()): a second output layer, a plain softmax layer (Eq. 3) owned by the criterion and
  fed the *detached* features (Eq. 8), so none of its terms reaches the network;
* e = e_y: the label embedding of y, full (Eq. 5, m x m, identity init) or compressed ``ReLU(A_y B)``
  (Eq. 16, ``--label-embedding-dim h``, the default with h = 100: the only practical form for NMT
  vocabularies); it learns only from the tokens o2 predicts correctly (Sec. 2.3).

o2 and the embedding are criterion parameters: fairseq-train optimizes and checkpoints them (the
checkpoint's ``criterion`` state), fairseq-generate loads the model without them.

Its options are those it serves: V' (``--sampler``, ``--sample-rate``, ``--num-samples``, ``--unigram-alpha``, named
and checked as ``sampled_cross_entropy``'s, whose sampler and metrics it uses), ``--ignore-prefix-size`` and
``--label-embedding-*``. Label smoothing (H(e', z1') already softens the target, Eq. 13), the chunked softmax, the
logq correction and accidental-hit removal are ``sampled_cross_entropy``'s alone: the soft terms compare whole
distributions over V'.

With ``--sample-rate``/``--num-samples`` (the sampled softmax of ``sampled_cross_entropy``, same sampler)
every distribution — z1, z2 and e — is over the update's candidate set V': only V' rows of o1 and o2 and
the V' columns of the embedding (of B, compressed) are computed. Validation uses the full vocabulary.

``--label-embedding-from CHECKPOINT`` (Appendix B, Eq. 17) loads the embedding learned by an earlier run,
frozen, without o2: ``L = H(y, z1') + H(e', z1')``.

Variants of the original code: ``--label-embedding-beta β`` weighs o1's terms ``β H(y, z1') + (1-β) H(e', z1')``;
``--label-embedding-warmup-updates N`` adds H(e', z1') only after N updates (o2 and the embedding learn from
the start); ``--label-embedding-two-sided-hinge`` penalises |(z2')_y - α|. The defaults are the paper's.

The GILE task's multi-class use (labels instead of target words, the head instead of the decoder's output layer)
is the subclass :class:`~fairseq_joint.criterions.gile_label_embedding.GileLabelEmbeddingCriterion`, ``--criterion
gile_label_embedding_cross_entropy`` (that task refuses this name and says so).

Logged besides ``loss`` (Eq. 14, or Eq. 17) and ``nll_loss`` (H(y, z1'), hence ``ppl``): each term per token
(``le_hard1``, ``le_soft1``, ``le_hard2``, ``le_hinge``, ``le_emb``, in base 2 like fairseq's ``loss``) and ``le_o2_acc``, the share of tokens
o2 predicts correctly (those the embedding learns from).
"""

import inspect
import logging
import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

from fairseq import checkpoint_utils, metrics
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion
from omegaconf import II, open_dict

from fairseq_joint.checkpoints import dictionary_fingerprint
from fairseq_joint.criterions.decoder_features import (
    DecoderFeaturesCriterion,
    check_translation_model,
    features_and_target,
    output_layer_of,
)
from fairseq_joint.criterions.sampled_cross_entropy import (
    CandidateSamplingConfig,
    log_candidates,
    target_dictionary_sampler,
)
from fairseq_joint.errors import CheckpointError, InputError, OptionError, one_line
from fairseq_joint.modules.label_embedding import (
    LABEL_EMBEDDING_TERMS,
    LabelEmbedding,
    full_embedding_bytes,
    label_embedding_terms,
)
from fairseq_joint.modules.output_layers import OutputLayer, OutputLayerSpec
from fairseq_joint.modules.sampling import sampling_requested
from fairseq_joint.options import NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, PROBABILITY, Range, flag, registered
from fairseq_joint.tasks.gile_classification import GileClassificationTask
from fairseq_joint.text_files import check_exists

logger = logging.getLogger(__name__)


@dataclass
class LabelEmbeddingOptions(CandidateSamplingConfig):
    """The options of Eq. 14 for target words and for labels alike: the candidate set V' (as
    ``sampled_cross_entropy``'s), the label embedding, o2."""

    ignore_prefix_size: int = field(default=0, metadata={"help": "Ignore first N tokens", "range": NON_NEGATIVE_INT})
    sentence_avg: bool = II("optimization.sentence_avg")
    label_embedding_dim: int = field(
        default=100,
        metadata={"help": "h of the compressed label embedding e = ReLU(A_y B) (Eq. 16); 0 = the full m x m "
                          "embedding of Eq. 5 (m² numbers: only for small label sets)", "range": NON_NEGATIVE_INT},
    )
    label_embedding_tau: float = field(
        default=2.0, metadata={"help": "temperature τ of z2'' (Eq. 10; the paper: 2)", "range": POSITIVE}
    )
    label_embedding_alpha: float = field(
        default=0.9, metadata={"help": "α of the hinge on o2's probability of the true label (Eq. 12; the paper: 0.9)",
                               "range": PROBABILITY}
    )
    label_embedding_hinge_p: int = field(
        default=1, metadata={"help": "p of the hinge ||max(0, (z2')_y - α)||_p (Eq. 12): 1 (the paper's) or 2 (squared)",
                             "range": Range(1, 2, integer=True, name="1 or 2")}
    )
    label_embedding_two_sided_hinge: bool = field(
        default=False, metadata={"help": "penalise |(z2')_y - α| on both sides instead of max(0, ·) (Eq. 12)"}
    )
    label_embedding_beta: Optional[float] = field(
        default=None,
        metadata={"help": "weigh o1's terms β H(y, z1') + (1-β) H(e', z1') (the original code uses 0.5); "
                          "default: the paper's unweighted sum (Eq. 14)", "range": PROBABILITY},
    )
    label_embedding_warmup_updates: int = field(
        default=0,
        metadata={"help": "add the soft term H(e', z1') only after this many updates (o2 and the embedding "
                          "learn from the start)", "range": NON_NEGATIVE_INT},
    )
    label_embedding_from: Optional[str] = field(
        default=None,
        metadata={"help": "a checkpoint of an earlier label_embedding_cross_entropy run: use its label "
                          "embedding, frozen, without o2 (Appendix B, Eq. 17)"},
    )
    label_embedding_state_from: Optional[str] = field(
        default=None,
        metadata={"help": "a checkpoint of a run of this criterion: start o2 and the label embedding from the values "
                          "it saved (its criterion state). fairseq-validate sets it to --path: it builds the "
                          "checkpoint's criterion afresh, and its loss was that of an o2 drawn at random on each run"},
    )

    #: the options of o2 and of the embedding it learns (Eqs. 10-12, 16), which Eq. 17 (--label-embedding-from) has not
    O2_OPTIONS = ("label_embedding_dim", "label_embedding_tau", "label_embedding_alpha", "label_embedding_hinge_p",
                  "label_embedding_two_sided_hinge")

    @staticmethod
    def validate(cfg) -> None:
        """With --label-embedding-from, neither --label-embedding-state-from nor the options of o2 given: the loaded
        embedding is used frozen, without o2 (Eq. 17); they were ignored without a word, and the checkpoint recorded a
        --label-embedding-dim other than the loaded embedding's."""
        c, unset = cfg.criterion, LabelEmbeddingOptions()
        if c.label_embedding_from and c.label_embedding_state_from:  # which embedding: one was dropped without a word
            raise OptionError("--label-embedding-state-from starts o2 and the embedding Eq. 14 trains; "
                              "--label-embedding-from freezes a trained embedding without o2 (Eq. 17): give one of "
                              "them")
        if c.label_embedding_from:
            given = [flag(name) for name in LabelEmbeddingOptions.O2_OPTIONS if getattr(c, name) != getattr(unset, name)]
            if given:
                raise OptionError(f"--label-embedding-from uses its checkpoint's embedding, frozen, without o2 (Eq. 17): "
                                  f"{' and '.join(given)} shape o2 and the embedding it learns: drop them")


@dataclass
class LabelEmbeddingCrossEntropyConfig(LabelEmbeddingOptions):
    label_embedding_input_dim: Optional[int] = field(
        default=None,
        metadata={"help": "dh, the size of the decoder features o2 reads; default: the size of the features the "
                          "output layer of the fairseq-joint model reads (its architecture records it)",
                  "range": POSITIVE_INT},
    )

    @staticmethod
    def validate(cfg) -> None:
        """Target words of a fairseq-joint translation model (whose architecture records dh, the default of
        ``--label-embedding-input-dim``): not the GILE task's labels."""
        if issubclass(registered(cfg, "task"), GileClassificationTask):
            raise OptionError("--criterion label_embedding_cross_entropy scores target words; for --task "
                              "gile_classification use --criterion gile_label_embedding_cross_entropy")
        check_translation_model(cfg)


def read_checkpoint(path: str, option: str) -> dict:
    """The checkpoint dict of ``path``, whose criterion state (``criterion``) a label-embedding criterion reads; a
    missing file is refused naming ``option``, the option that gave it."""
    check_exists(path, option, "give the checkpoint_*.pt of a run trained with --criterion "
                 "label_embedding_cross_entropy")
    return checkpoint_utils.load_checkpoint_to_cpu(path)


def load_label_embedding(path: str, num_labels: Optional[int] = None, labels: Optional[Sequence[str]] = None,
                         option: str = "--label-embedding-from", state: Optional[dict] = None,
                         fix: str = "use a checkpoint trained on the same binarized data") -> LabelEmbedding:
    """The label embedding saved in the criterion state of checkpoint ``path`` (fairseq format; ``state``: the dict
    already loaded from it); ``num_labels`` / ``labels``: the labels it must be for (compared with the checkpoint's
    model's record of its labels: the target dictionary, or GILE's training labels); ``option``: what gave ``path``,
    named in a refusal, with ``fix``."""
    state = read_checkpoint(path, option) if state is None else state
    crit = state.get("criterion") or {}
    weights = {k[len("label_embedding."):]: v for k, v in crit.items() if k.startswith("label_embedding.")}
    if not weights:
        raise CheckpointError(f"{option} {path}: the checkpoint holds no label embedding (no criterion "
                         "state label_embedding.*); train one with --criterion label_embedding_cross_entropy first")
    if "weight" in weights:
        emb = LabelEmbedding(weights["weight"].size(0), None)
    else:
        emb = LabelEmbedding(weights["A"].size(0), weights["A"].size(1))
    recorded = (state.get("model") or {}).get("data_fingerprints")
    if num_labels is not None and emb.num_labels != num_labels:
        raise CheckpointError(f"{option} {path}: its embedding has {emb.num_labels} labels but the target dictionary "
                              f"has {num_labels}; {fix}")
    # the second fingerprint is of the labels: a translation model's target dictionary, a GILE model's training labels
    if labels is not None and recorded is not None and int(recorded[1]) != dictionary_fingerprint(labels):
        raise CheckpointError(f"{option} {path}: its embedding is for other labels than this data's; {fix}")
    emb.load_state_dict(weights)
    return emb


@register_criterion("label_embedding_cross_entropy", dataclass=LabelEmbeddingCrossEntropyConfig)
class LabelEmbeddingCrossEntropyCriterion(DecoderFeaturesCriterion):
    name = "label_embedding_cross_entropy"

    def __init__(self, task, sentence_avg, ignore_prefix_size=0, sampler="uniform", sample_rate=None, num_samples=None,
                 unigram_alpha=0.75, label_embedding_dim=100, label_embedding_tau=2.0, label_embedding_alpha=0.9,
                 label_embedding_hinge_p=1, label_embedding_two_sided_hinge=False, label_embedding_beta=None,
                 label_embedding_warmup_updates=0, label_embedding_from=None, label_embedding_state_from=None,
                 label_embedding_input_dim=None):
        super().__init__(task)
        self.sentence_avg = sentence_avg
        self.ignore_prefix_size = ignore_prefix_size
        self.sampler = None
        if sampling_requested(sample_rate, num_samples):
            self.sampler = self.build_sampler(task, sampler, sample_rate, num_samples, unigram_alpha)
        self.tau = label_embedding_tau
        self.alpha = label_embedding_alpha
        self.hinge_p = label_embedding_hinge_p
        self.two_sided_hinge = label_embedding_two_sided_hinge
        self.beta = label_embedding_beta
        self.warmup_updates = label_embedding_warmup_updates
        num_labels = self.num_labels(task)

        if label_embedding_from:
            # Appendix B: a learned embedding, fixed; no o2 (Eq. 17). Scoring a checkpoint of such a run
            # (label_embedding_state_from), the copy it saved (the frozen_criterion patch) is the one it was trained
            # with: its source may have changed since; a checkpoint saved before then holds none
            saved = read_checkpoint(label_embedding_state_from, "--label-embedding-state-from") \
                if label_embedding_state_from else {}
            source, option = (label_embedding_state_from, "--label-embedding-state-from") if saved.get("criterion") \
                else (label_embedding_from, "--label-embedding-from")
            self.label_embedding = load_label_embedding(source, num_labels, self.label_names(task), option,
                                                        state=saved if saved.get("criterion") else None).freeze_()
            self.o2 = None
            logger.info(f"label embedding ({self.label_embedding.extra_repr()}) from {source}, frozen (Eq. 17)")
        else:
            self.o2 = OutputLayer(OutputLayerSpec("softmax"), num_classes=num_labels,
                                  input_dim=self.feature_dim(task, label_embedding_input_dim))
            self.label_embedding = LabelEmbedding(num_labels, label_embedding_dim)
            if not label_embedding_dim:
                logger.info(f"full {num_labels} x {num_labels} label embedding: {full_embedding_bytes(num_labels)} "
                            "(use --label-embedding-dim h for the compressed form)")
        if label_embedding_state_from and not label_embedding_from:
            self.load_state_from(label_embedding_state_from)

    def load_state_from(self, path: str) -> None:
        """o2 and the label embedding as checkpoint ``path`` saved them (its criterion state, as fairseq-train's
        resume loads it)."""
        saved = read_checkpoint(path, "--label-embedding-state-from").get("criterion")
        if not saved:
            raise CheckpointError(f"--label-embedding-state-from {path}: the checkpoint holds no criterion state; give "
                                  f"one of a run trained with --criterion {self.name}")
        try:
            self.load_state_dict(saved)
        except RuntimeError as err:  # torch names each tensor that differs
            raise CheckpointError(f"--label-embedding-state-from {path}: its o2 and label embedding are not of this "
                                  f"criterion's options ({one_line(err)}): give a checkpoint trained with the "
                                  "same --label-embedding-* options and data") from None
        logger.info(f"o2 and the label embedding from {path}'s criterion state")

    #: the candidate sampler over the labels (:func:`target_dictionary_sampler`: the target words)
    build_sampler = staticmethod(target_dictionary_sampler)

    @staticmethod
    def num_labels(task) -> int:
        """m, the labels of Eq. 14: the target words."""
        return len(task.target_dictionary)

    @staticmethod
    def label_names(task) -> Sequence[str]:
        """The labels of Eq. 14 in order (the target dictionary's entries)."""
        return task.target_dictionary.symbols

    @staticmethod
    def feature_dim(task, label_embedding_input_dim: int) -> int:
        """dh, the size of the features o2 reads: ``--label-embedding-input-dim`` (the decoder's, recorded by the
        architecture)."""
        return int(label_embedding_input_dim)

    # ------------------------------------------------------------------ loss
    def soft_term_on(self, model) -> bool:
        if not model.training or self.warmup_updates == 0:
            return True
        return getattr(model, "num_updates", 0) >= self.warmup_updates

    def compute_terms(self, model, net_output, sample, candidates=None):
        """The terms of Eq. 14 (Eq. 17 without o2) for ``sample``, whose features the model gave as ``net_output``,
        over V' = ``candidates`` (drawn by the sampler in training when sampling is on; all labels otherwise); also
        the number of candidates and of scored rows (target tokens, or texts for GILE)."""
        h, y, score = self.inputs(model, net_output, sample)
        if self.o2 is not None and h.size(-1) != self.o2.input_dim:
            raise InputError(f"the model returns {h.size(-1)}-d features but o2 reads {self.o2.input_dim}-d: "
                             f"set --label-embedding-input-dim {h.size(-1)}")
        if candidates is None and model.training and self.sampler is not None:
            candidates = self.sampler.sample(y)
        ids, columns = (None, y) if candidates is None else (candidates.ids, candidates.targets)
        z1 = score(h, ids)
        z2 = self.o2(h.detach(), ids=ids) if self.o2 is not None else None
        e = self.label_embedding(y, columns=ids)
        soft_on = self.soft_term_on(model)
        terms = label_embedding_terms(
            z1, z2, e, columns, tau=self.tau, alpha=self.alpha, p=self.hinge_p, two_sided_hinge=self.two_sided_hinge,
            hard_weight=1.0 if self.beta is None or not soft_on else self.beta,
            soft_weight=0.0 if not soft_on else (1.0 if self.beta is None else 1.0 - self.beta),
        )
        return terms, z1.size(-1), y.numel()

    def inputs(self, model, net_output, sample):
        """``(h, y, score)``: the decoder features of the non-pad target tokens (rows of Eq. 14), their ids, and
        o1 = the decoder's output layer as ``score(h, ids)``."""
        layer = output_layer_of(model)
        features, target = features_and_target(model, net_output, sample, self.ignore_prefix_size)
        keep = target.reshape(-1).ne(self.padding_idx)  # padding is never scored
        h = features.reshape(-1, features.size(-1))[keep]
        return h, target.reshape(-1)[keep], lambda x, ids: layer(x, ids=ids)

    def compute_loss(self, model, net_output, sample, reduce=True, candidates=None):
        """``(loss, sample_size, logged)``: Eq. 14's loss (Eq. 17's with ``--label-embedding-from``) summed over the
        target tokens, and each of its terms (``nll_loss``: H(y, z1'))."""
        if not reduce:
            raise NotImplementedError(f"{self.name} computes Eq. 14's terms summed over the tokens (reduce=True)")
        terms, num_candidates, num_rows = self.compute_terms(model, net_output, sample, candidates)
        loss, logged = self.terms_loss(terms, num_candidates, num_rows)
        return loss, self.sample_size(sample), {**logged, "nll_loss": terms["hard1"]}

    @staticmethod
    def terms_loss(terms, num_candidates, num_rows):
        """Eq. 14's loss (o1's terms + o2's) and what is logged of it: each term, |V'| and the rows scored."""
        loss = terms["o1"] + terms["o2"] if "o2" in terms else terms["o1"]
        logged = {"candidates": num_candidates, "candidates_n": 1, "le_tokens": num_rows}
        logged.update({f"le_{k}": terms[k] for k in LABEL_EMBEDDING_TERMS + ("correct",) if k in terms})
        return loss, logged

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        """fairseq's loss, nll_loss and ppl (label_smoothed_cross_entropy's), |V'| and each term of Eq. 14."""
        LabelSmoothedCrossEntropyCriterion.reduce_metrics(logging_outputs)
        log_candidates(logging_outputs)
        log_terms(logging_outputs)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True


def log_terms(logging_outputs) -> None:
    """Each term of Eq. 14 per scored row (``le_*``, base 2 like fairseq's loss) and ``le_o2_acc``."""
    tokens = sum(log.get("le_tokens", 0) for log in logging_outputs)
    if not tokens:
        return
    for k in LABEL_EMBEDDING_TERMS:
        if any(f"le_{k}" in log for log in logging_outputs):
            total = sum(float(log.get(f"le_{k}", 0.0)) for log in logging_outputs)
            metrics.log_scalar(f"le_{k}", total / tokens / math.log(2), tokens, round=3)
    if any("le_correct" in log for log in logging_outputs):
        correct = sum(float(log.get("le_correct", 0)) for log in logging_outputs)
        metrics.log_scalar("le_o2_acc", 100.0 * correct / tokens, tokens, round=2)


def trained_criterion(original, filenames, *args, **kwargs):
    """fairseq's ``load_model_ensemble_and_task`` (the ``trained_criterion`` patch), the configuration it returns of a
    checkpoint of this criterion (either form) pointing it at the checkpoint's criterion state
    (``label_embedding_state_from``): fairseq-validate builds the criterion from that configuration afresh, so the
    loss it printed (Eq. 14's o2 terms) was that of an o2 drawn at random, another on each run. An ensemble's is the
    first checkpoint's."""
    from fairseq.criterions import CRITERION_DATACLASS_REGISTRY

    bound = inspect.signature(original).bind(filenames, *args, **kwargs)
    if "label_embedding_state_from" in (bound.arguments.get("arg_overrides") or {}):
        raise OptionError("--label-embedding-state-from: fairseq-validate scores a checkpoint with the criterion state "
                          "it saved, which --path gives: drop --label-embedding-state-from")
    models, cfg, task = original(filenames, *args, **kwargs)
    criterion = cfg.get("criterion") if cfg is not None else None
    declared = CRITERION_DATACLASS_REGISTRY.get(criterion.get("_name")) if criterion is not None else None
    # (a run of Eq. 17 saved its frozen embedding there; one saved before the frozen_criterion patch, none: the
    # criterion reads it from --label-embedding-from then)
    if declared is not None and issubclass(declared, LabelEmbeddingOptions):
        suffix, shards = bound.arguments.get("suffix", ""), bound.arguments.get("num_shards", 1)
        with open_dict(criterion):
            criterion.label_embedding_state_from = checkpoint_utils.get_maybe_sharded_checkpoint_filename(
                filenames[0], suffix, 0, shards)
    return models, cfg, task
