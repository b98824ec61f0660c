"""Task ``gile_classification``: texts with one or more labels, every label described by a text
(Pappas & Henderson 2019, "GILE", Secs. 2-3).

The data directory is written by ``fairseq-joint-preprocess-gile`` (its files: :mod:`fairseq_joint.data.gile_files`);
the task reads it into a :class:`~fairseq_joint.data.gile_files.GileCorpus`, describes it to the model
(:meth:`GileClassificationTask.model_inputs`, a :class:`~fairseq_joint.models.gile_classifier.GileModelInputs`) and
loads the splits as :mod:`fairseq_joint.data.gile_datasets`. With ``--encoder pretrained``/``hybrid`` the task owns the
sentence encoder (:attr:`GileClassificationTask.sentence_encoder`, built once from the model's options, which its
configuration reads): it reads the texts and descriptions, whose embeddings are cached in ``embeddings/`` beside the
data (see :mod:`fairseq_joint.modules.sentence_encoder`), and the model is built around it. It trains with a
:class:`LabelCriterion`, whose :class:`LabelStep` hands it every label's scores at validation.

Training scores the training labels only. Validation/test score every label of ``--eval-label-file``
(default ``--label-file``), which may be a larger set; labels absent from ``labels.train.txt`` are the
*unseen* (zero-shot) labels and are reported separately from the *seen* ones (Table 2's two halves).
Label descriptions are tokenized with :func:`~fairseq_joint.modules.tokenizer.tokenize` and binarized with the shared
dictionary when the task loads them, so any label file can be used at evaluation or prediction time.
γ of calibrated stacking (``--seen-score-offset``, default: calibrated on each validation of ``valid`` with unseen labels,
:meth:`~GileClassificationTask.post_validate`) is saved in checkpoints: :attr:`~GileClassificationTask.seen_score_offset`;
so is the probability threshold of the best micro-F1 on ``valid``: :attr:`~GileClassificationTask.calibrated_threshold`.

**Several languages** (GILE-MHAN, Sec. 3.3): ``--languages en,pl`` reads one such directory per language,
``DATA/en`` and ``DATA/pl`` (each binarized with ``fairseq-joint-preprocess-gile --lang``: its own dictionary, the
same label file). One label space serves every language: the training labels are those any language's training
documents carry, and the descriptions are embedded with the word embedding of ``--label-language``. Each update
takes one batch of every language and sums their losses, λ_l-weighted (Eq. 16; ``--language-weights``): an epoch is
one pass over the largest language, the smaller ones cycled in a new order each time. Validation scores every
language's documents once, in batches of one language; it logs each language's metrics with its prefix
(``pl_seen_avgpr``, ``pl_gzsl_h``, ``pl_loss``, ...) and, unprefixed, their macro average over the languages
(``seen_avgpr``, ...: what ``--best-checkpoint-metric`` selects on). With ``--encoder pretrained`` one sentence
encoder embeds every language's texts and the descriptions (a multilingual one, e.g. made by
``fairseq-joint-distill-encoder``), each language's embeddings cached in its own directory.

The criteria: ``multilabel_classification`` (GILE Eqs. 15-17), or in ``--classification-mode multiclass``
``gile_label_embedding_cross_entropy`` (the label-embedding loss over labels); ``--criterion
label_embedding_cross_entropy`` scores a translation model's target words and is refused here with the GILE name.
"""

import contextlib
import copy
import functools
import inspect
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, NamedTuple, Optional

import torch
from fairseq import metrics as fairseq_metrics
from fairseq.criterions import CRITERION_REGISTRY, FairseqCriterion
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.distributed import utils as distributed_utils
from fairseq.tasks import FairseqTask, register_task
from omegaconf import MISSING, OmegaConf, open_dict

from fairseq_joint import errors
from fairseq_joint.data.gile_datasets import MultilingualGileDataset, load_gile_split
from fairseq_joint.data.gile_files import (
    TRAIN_LABELS,
    GileCorpus,
    parse_language_weights,
    parse_languages,
    read_corpus,
)
from fairseq_joint.data.label_set import LabelSet, encode_label_set
from fairseq_joint.errors import OptionError
from fairseq_joint.metrics import (
    LabelScores,
    ThresholdCounts,
    better_higher,
    calibrate_threshold,
    macro_average,
    pooled_seen_offset,
)
from fairseq_joint.models.gile_classifier import (
    GileClassifier,
    GileDataProvider,
    GileModelInputs,
    pretrained_sentence_encoder,
)
from fairseq_joint.options import FLOAT32, arch, registered

MODE_CHOICES = ("multilabel", "multiclass")
CALIBRATED_OFFSET = "calibrated_seen_score_offset"  #: the key of γ calibrated on validation in the task's state
CALIBRATED_THRESHOLD = "calibrated_threshold"  #: the key of the probability threshold calibrated on validation
LAST_VALIDATION = "last_validation"  #: the key of the figures of the last validation of ``valid``
#: what fairseq logs beside a validation's figures that is not one of them (throughput, the best so far)
NOT_FIGURES = ("wps", "wpb", "bsz", "ups", "wall", "gnorm", "clip", "lr", "num_updates", "train_wall", "gb_free")


def last_validation(task_state: Optional[dict]) -> Dict[str, float]:
    """The figures of the last validation of ``valid`` in training that a checkpoint's ``task_state`` holds, as
    fairseq-train logged them (loss, AvgPr, F1, H, ...; not γ and the threshold, which the task's state holds apart),
    and the update it ran after (``num_updates``, where recorded); empty for a run without one (or validated on another
    subset, or trained by an earlier fairseq-joint)."""
    return dict((task_state or {}).get(LAST_VALIDATION) or {})


def all_processes(items: list) -> list:
    """``items`` of every process of a distributed run (fairseq's data-parallel group), concatenated."""
    parts = [items]
    if distributed_utils.get_data_parallel_world_size() > 1:
        parts = [None] * distributed_utils.get_data_parallel_world_size()
        torch.distributed.all_gather_object(parts, items, group=distributed_utils.get_data_parallel_group())
    return [item for part in parts for item in part]


def model_option(name: str) -> str:
    """The interpolation of the model's option ``name`` (a ``gile_classifier``'s; None where the model has no such
    option: a translation model, which the task refuses, :meth:`GileClassificationConfig.validate`)."""
    return f"${{oc.select:model.{name},null}}"


@dataclass
class GileClassificationConfig(FairseqDataclass):
    data: str = field(default=MISSING, metadata={"help": "data directory written by fairseq-joint-preprocess-gile"})
    label_file: Optional[str] = field(
        default=None,
        metadata={"help": "label<TAB>description file of the training labels (default: DATA/labels.tsv if present)"},
    )
    eval_label_file: Optional[str] = field(
        default=None,
        metadata={"help": "label file scored at validation/test; may hold more labels than training "
                  "(the unseen, zero-shot ones); default: --label-file"},
    )
    seen_score_offset: Optional[float] = field(
        default=None,
        metadata={"help": "γ of calibrated stacking, subtracted from the seen labels' scores when all labels are "
                  "ranked together; default: calibrated on every validation of split 'valid' with unseen labels (the γ "
                  "maximizing gzsl_h), logged as gamma, saved in the checkpoint for fairseq-joint-predict-labels, and "
                  "the gzsl_* validation metrics at γ = 0; a value fixes γ for both (no calibration)", "range": FLOAT32},
    )
    classification_mode: ChoiceEnum(MODE_CHOICES) = field(
        default="multilabel",
        metadata={"help": "multilabel: sigmoid per label (GILE Eqs. 13, 15); multiclass: one label per text, softmax"},
    )
    languages: str = field(
        default="",
        metadata={"help": "comma-separated languages (e.g. en,pl) of a multilingual model (GILE-MHAN, Sec. 3.3): DATA "
                  "holds one binarized directory per language (DATA/en, DATA/pl: fairseq-joint-preprocess-gile "
                  "--lang, one label file); each update takes a batch of every language (Eq. 16); empty: DATA is "
                  "one directory"},
    )
    label_language: str = field(
        default="",
        metadata={"help": "--languages: the language whose word embedding embeds the label descriptions (default "
                  "the first of --languages); may be one not trained on, whose DATA/LANG/dict.txt is then read"},
    )
    language_weights: str = field(
        default="",
        metadata={"help": "--languages: λ of each language's loss in Eq. 16, LANG=W,... (default 1 for each)"},
    )
    #: the model's sentence-encoder options (no options of the task's: fairseq reads them from the model's
    #: configuration), so that the task embeds its texts and label descriptions with the encoder the model is built
    #: around (:attr:`GileClassificationTask.sentence_encoder`) without the model having been built; typed Any, as
    #: fairseq would make the interpolation of a bool that the command line leaves unset True
    encoder: Any = model_option("encoder")
    pretrained_encoder: Any = model_option("pretrained_encoder")
    finetune_encoder: Any = model_option("finetune_encoder")
    lexical_dim: Any = model_option("lexical_dim")

    @staticmethod
    def validate(cfg) -> None:
        """The task trains a gile_classifier with a criterion that scores labels; every λ of --language-weights
        finite; a multilingual model's training split is not among the subsets fairseq-train validates; the best
        checkpoint is chosen in the direction of its metric (fairseq minimizes unless told: ``--best-checkpoint-metric
        gzsl_h`` alone kept the worst validation's checkpoint as the best)."""
        model, criterion = registered(cfg, "model"), registered(cfg, "criterion")
        if not issubclass(model, GileClassifier):
            raise OptionError(f"--task gile_classification trains a gile_classifier model, not --arch {arch(cfg.model)}"
                              f" ({model.__name__}): use --arch gile_classifier (or a preset, e.g. gile_pretrained)")
        if not issubclass(criterion, LabelCriterion):
            names = sorted(n for n, c in CRITERION_REGISTRY.items() if issubclass(c, LabelCriterion))
            raise OptionError(f"--task gile_classification trains with a criterion that scores labels, not "
                              f"--criterion {cfg.criterion._name}: use --criterion {' or '.join(names)}")
        metric, maximize = cfg.checkpoint.best_checkpoint_metric, cfg.checkpoint.maximize_best_checkpoint_metric
        higher = better_higher(metric)  # (None: a name the task does not log, e.g. a criterion's own term)
        if higher is not None and higher != maximize:
            fix = "add --maximize-best-checkpoint-metric" if higher else "drop --maximize-best-checkpoint-metric"
            raise OptionError(f"--best-checkpoint-metric {metric} is better {'higher' if higher else 'lower'}, and "
                              f"fairseq {'maximizes' if maximize else 'minimizes'} it: {fix}")
        task = cfg.task
        if task.languages:  # without them, read_corpus refuses --language-weights
            parse_language_weights(task.language_weights, parse_languages(task.languages))  # refuses a bad LANG=W
            train = cfg.dataset.train_subset
            if train in str(cfg.dataset.valid_subset).split(",") and not cfg.dataset.disable_validation:
                raise OptionError(f"--valid-subset {cfg.dataset.valid_subset}: fairseq-train batches a multilingual "
                                  f"model's {train} split in pairs of languages to train on, which its validation "
                                  f"cannot score: drop {train} there, and score it with fairseq-validate "
                                  f"--valid-subset {train}")


class LabelStep(NamedTuple):
    """What a :class:`LabelCriterion` makes of a batch: fairseq's ``(loss, sample_size, logging_output)`` and, at
    validation, every label's scores of the batch (:meth:`GileClassificationTask.valid_step` calibrates γ on them)
    and how many of its labels each probability threshold keeps (the threshold is calibrated on them)."""

    loss: torch.Tensor
    sample_size: float
    logging_output: dict
    scores: Optional[LabelScores] = None
    threshold_counts: Optional[ThresholdCounts] = None


@dataclass
class LabelCriterionConfig(FairseqDataclass):
    """The rule of every criterion that scores labels (a base of its configuration dataclass; the task's rule is the
    converse one, :meth:`GileClassificationConfig.validate`)."""

    @staticmethod
    def validate(cfg) -> None:
        if not issubclass(registered(cfg, "task"), GileClassificationTask):
            raise OptionError(f"--criterion {cfg.criterion._name} scores labels of --task gile_classification, not "
                              f"--task {cfg.task._name}: add --task gile_classification, or for translation use "
                              "--criterion cross_entropy, sampled_cross_entropy or label_embedding_cross_entropy")


class LabelCriterion(FairseqCriterion):
    """What ``--task gile_classification`` trains with: a criterion that scores a batch's labels, its loss in
    ``compute_loss(model, features, sample, reduce)`` (a :class:`LabelStep`) over the document vectors the model
    returns; ``forward`` is fairseq's view of it."""

    def forward(self, model, sample, reduce=True):
        step = self.compute_loss(model, model(**sample["net_input"]), sample, reduce=reduce)
        return step.loss, step.sample_size, self.logged(step, sample)

    def compute_loss(self, model, features, sample, reduce=True) -> LabelStep:
        raise NotImplementedError

    @staticmethod
    def logged(step: LabelStep, sample) -> dict:
        """fairseq's logging output of ``step``: its own values, the loss, the sample size and the batch's counts."""
        return {**step.logging_output, "loss": step.loss.data, "sample_size": step.sample_size,
                "nsentences": sample["nsentences"], "ntokens": sample["ntokens"]}


@register_task("gile_classification", dataclass=GileClassificationConfig)
class GileClassificationTask(FairseqTask, GileDataProvider):
    """Multi-label / multi-class text classification with label descriptions (GILE, Secs. 2-3)."""

    def __init__(self, cfg: GileClassificationConfig, corpus: GileCorpus):
        super().__init__(cfg)
        #: the dictionaries, labels and descriptions of DATA (of every language's directory with --languages)
        self.corpus = corpus
        #: λ_l of Eq. 16 (--language-weights)
        self.language_weights = parse_language_weights(cfg.language_weights, list(corpus.languages))
        #: the label sets already encoded, by split kind and sentence encoder
        self.label_sets: Dict[tuple, LabelSet] = {}
        #: fairseq-train's validation when γ is calibrated: the ``valid`` batches' (scores, gold, seen), else None
        self.calibration_batches: Optional[list] = None

    @classmethod
    def setup_task(cls, cfg: GileClassificationConfig, **kwargs):
        return cls(cfg, read_corpus(cfg.data, cfg.label_file, cfg.eval_label_file, cfg.languages, cfg.label_language,
                                    cfg.language_weights))

    @staticmethod
    def updates_per_epoch(data: str, languages: str, split: str, batch_size: Optional[int], workers: int,
                          update_freq: int) -> Optional[int]:
        """fairseq-train's updates in an epoch of ``split`` of ``data`` (of every language of ``languages``):
        ⌈documents / ``batch_size``⌉ batches of its largest language (each update takes a batch of every language; no
        batch is dropped, :meth:`get_batch_iterator`), shared by the data-parallel ``workers``, ``update_freq`` batches
        an update; None without a ``batch_size`` (batches of --max-tokens depend on the texts) or a split to count."""
        directories = parse_languages(languages) if languages else [""]
        files = [os.path.join(data, lang, f"{split}.labels") for lang in directories]
        if not batch_size or not all(os.path.isfile(f) for f in files):
            return None
        documents = 0
        for name in files:
            with open(name, "rb") as f:
                documents = max(documents, sum(1 for _ in f))
        return math.ceil(math.ceil(documents / batch_size / workers) / update_freq)

    @property
    def languages(self) -> List[str]:
        """The languages of a multilingual model (--languages), else empty."""
        return list(self.corpus.languages)

    @property
    def multiclass(self) -> bool:
        """--classification-mode multiclass: one label per text, softmax."""
        return self.cfg.classification_mode == "multiclass"

    @property
    def seen_score_offset(self) -> float:
        """γ of calibrated stacking for predictions (``LabelPredictor``'s default): --seen-score-offset, else γ
        calibrated at the last validation (a checkpoint's ``task_state``), else 0 (:attr:`seen_score_offset_origin`)."""
        if self.cfg.seen_score_offset is not None:
            return float(self.cfg.seen_score_offset)
        return float(self.state.state_dict.get(CALIBRATED_OFFSET, 0.0))

    @property
    def seen_score_offset_origin(self) -> str:
        """Where :attr:`seen_score_offset` comes from, in words."""
        if self.cfg.seen_score_offset is not None:
            return "the --seen-score-offset of training"
        return ("calibrated on the validation documents in training" if CALIBRATED_OFFSET in self.state.state_dict
                else "no γ calibrated in this checkpoint (no validation with unseen labels)")

    @property
    def calibrated_threshold(self) -> Optional[float]:
        """The probability threshold calibrated at the last validation (the best micro-F1 on ``valid``,
        :func:`~fairseq_joint.metrics.calibrate_threshold`; a checkpoint's ``task_state``), None before any."""
        value = self.state.state_dict.get(CALIBRATED_THRESHOLD)
        return None if value is None else float(value)

    @property
    def validation_seen_score_offset(self) -> float:
        """γ of the ``gzsl_*`` validation metrics: --seen-score-offset, 0 when γ is calibrated."""
        return float(self.cfg.seen_score_offset or 0.0)

    @functools.cached_property
    def sentence_encoder(self):
        """The sentence encoder of ``--encoder pretrained``/``hybrid`` (None for WAN/HAN), built once, here: it embeds
        this task's texts and label descriptions, and the model is built around it (:meth:`model_inputs`)."""
        c = self.corpus
        # a multilingual hybrid encoder reads the lexical model every language's directory holds (one, checked)
        lexical = [c.data_dir(lang) for lang in dict.fromkeys([*c.languages, c.label_language])] if c.languages \
            else c.data_dir()
        return pretrained_sentence_encoder(self.cfg, lexical)

    def document_dim(self, encoder_dim: int) -> int:
        """dh, the size of the document vectors h: the sentence encoder's (its lexical channel included) when the
        model reads the texts through one, else the WAN/HAN encoder's ``encoder_dim``."""
        return encoder_dim if self.sentence_encoder is None else self.sentence_encoder.output_dim

    def model_inputs(self, cfg) -> GileModelInputs:
        """What the ``gile_classifier`` of model configuration ``cfg`` is built from: the data's side of it, and the
        task's :attr:`sentence_encoder`."""
        c = self.corpus
        return GileModelInputs(c.dictionary, c.train_labels, c.train_label_rows(), c.descriptions is not None,
                               c.languages, c.label_language, c.dictionaries, self.sentence_encoder)

    def build_model(self, cfg, from_checkpoint=False):
        if from_checkpoint and cfg.embed_path:
            # E comes from the checkpoint: the word-vector file is not read (it need not exist any more)
            cfg = copy.deepcopy(cfg)
            with open_dict(cfg) if OmegaConf.is_config(cfg) else contextlib.nullcontext():
                cfg.embed_path = ""
        return super().build_model(cfg, from_checkpoint)

    def encode_labels(self, names, descriptions: Optional[Dict[str, str]], cache_name: str) -> LabelSet:
        """The :class:`LabelSet` of ``names``: description word ids, or with a pretrained sentence encoder its cached
        embeddings of the descriptions (its token ids when fine-tuned)."""
        c = self.corpus
        return encode_label_set(names, descriptions, c.dictionary, c.train_labels, self.sentence_encoder,
                                c.data_dir(c.label_language), cache_name)

    def label_set(self, split: str) -> LabelSet:
        """Training labels for ``train``, every label of the evaluation label file otherwise."""
        kind = "train" if split == "train" else "eval"
        encoder = self.sentence_encoder
        key = (kind, None if encoder is None else (encoder.fingerprint, encoder.finetune))
        if key not in self.label_sets:
            c = self.corpus
            if kind == "train":
                self.label_sets[key] = self.encode_labels(list(c.train_labels), c.descriptions, "train-labels")
            elif c.eval_descriptions is not None:
                self.label_sets[key] = self.encode_labels(list(c.eval_descriptions), c.eval_descriptions, "eval-labels")
            else:
                self.label_sets[key] = self.label_set("train")
        return self.label_sets[key]

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        """``split`` of every language; with --languages, the training split as fairseq-train trains on it (which
        loads it, whatever --train-subset names it, with ``combine``, as it loads no other split but ``valid`` with
        --combine-valid-subsets) is batched in pairs of languages (Eq. 16), any split else one language a batch, each
        document once (fairseq-validate ``--valid-subset train``)."""
        source = self.cfg.eval_label_file or self.cfg.label_file or os.path.join(self.cfg.data, TRAIN_LABELS)
        datasets = {lang: load_gile_split(self.corpus, split, self.label_set(split), lang, self.sentence_encoder,
                                          self.multiclass, source) for lang in self.languages or [""]}
        self.datasets[split] = MultilingualGileDataset(datasets, paired=combine and split != "valid") \
            if self.languages else datasets[""]

    def get_batch_iterator(self, dataset, *args, **kwargs):
        # fairseq's --required-batch-size-multiple (default 8) drops the documents of a last partial batch
        # (fairseq issue #5036); every document must be trained on and scored, so batches are any size here
        bound = inspect.signature(FairseqTask.get_batch_iterator).bind(self, dataset, *args, **kwargs)
        bound.arguments["required_batch_size_multiple"] = 1
        if isinstance(dataset, MultilingualGileDataset):
            dataset.seed = bound.arguments.get("seed", 1)
        return super().get_batch_iterator(*bound.args[1:], **bound.kwargs)

    def build_generator(self, models, args, **kwargs):
        """fairseq-generate and fairseq-interactive decode sequences; a gile_classifier ranks labels."""
        raise OptionError(f"{errors.program()} generates text and a gile_classifier ranks labels: rank them with "
                          "fairseq-joint-predict-labels --checkpoint CHECKPOINT --labels LABEL_FILE (or "
                          "fairseq_joint.hub.LabelPredictor in Python); fairseq-validate --task gile_classification "
                          "scores a split")

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        """Eq. 16 with --languages: one batch per language, ``L = Σ_l λ_l L_l``, each language's backward in turn."""
        if "languages" not in sample:
            return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)
        loss_sum, size_sum, by_language = 0.0, 0, {}
        for lang, batch in sample["languages"].items():
            weight = self.language_weights[lang]

            def weighted(m, b, weight=weight):
                loss, size, log = criterion(m, b)
                return loss * weight, size, log

            loss, size, log = super().train_step(batch, model, weighted, optimizer, update_num, ignore_grad)
            loss_sum, size_sum, by_language[lang] = loss_sum + loss.detach(), size_sum + size, log
        logging_output = {"loss": loss_sum, "sample_size": size_sum, "nsentences": sample["nsentences"],
                          "ntokens": sample["ntokens"], "by_language": by_language}
        return loss_sum, size_sum, logging_output

    def valid_step(self, sample, model, criterion: LabelCriterion):
        """fairseq's, with the criterion's :class:`LabelStep`: at fairseq-train's validation of ``valid`` the batch's
        scores of every label (while γ is calibrated) and its threshold counts are kept."""
        model.eval()
        with torch.no_grad():
            step = criterion.compute_loss(model, model(**sample["net_input"]), sample)
        logging_output = criterion.logged(step, sample)
        if self.calibration_batches is not None and sample.get("split") == "valid":
            scores = step.scores if self.cfg.seen_score_offset is None else None
            self.calibration_batches.append((scores, step.threshold_counts))
        if "lang" in sample:
            logging_output["lang"] = sample["lang"]
        return step.loss, step.sample_size, logging_output

    def begin_valid_epoch(self, epoch, model):
        """fairseq-train starts a validation: γ is calibrated on it unless --seen-score-offset fixes it, and so is the
        probability threshold."""
        self.calibration_batches = []

    def post_validate(self, model, stats, agg):
        """fairseq-train, after each validation subset: γ = :func:`~fairseq_joint.metrics.calibrate_seen_offset` over
        the ``valid`` documents collected (every process's) and the probability threshold of
        :func:`~fairseq_joint.metrics.calibrate_threshold` over them, each logged (``gamma``, ``threshold``) and kept
        in the task's state, and so are the validation's figures as fairseq-train logged them (:func:`last_validation`;
        fairseq's own ``valid`` meters, which a checkpoint also saves, add up every validation of the run)."""
        batches = all_processes(self.calibration_batches or [])
        self.calibration_batches = []
        if batches:  # the ``valid`` subset (another subset's batches are not collected)
            self.state.merge_state_dict({LAST_VALIDATION: {
                name: float(value) for name, value in stats.items() if name == "num_updates" or
                name not in NOT_FIGURES and not name.startswith("best_") and isinstance(value, (int, float))}})
        scores = [s for s, _ in batches if s is not None]
        offset = pooled_seen_offset(scores) if scores else None  # (None: no gold label of one group, seen or unseen)
        if offset is not None:
            self.state.merge_state_dict({CALIBRATED_OFFSET: offset})
            stats["gamma"] = round(self.seen_score_offset, 4)
        threshold = calibrate_threshold([c for _, c in batches if c is not None])
        if threshold is not None:
            self.state.merge_state_dict({CALIBRATED_THRESHOLD: threshold})
            stats["threshold"] = round(threshold, 4)

    def reduce_metrics(self, logging_outputs, criterion):
        """With --languages: the total loss, each language's metrics with its prefix (``pl_seen_avgpr``), and
        unprefixed the macro average over the languages of each metric (for --best-checkpoint-metric)."""
        if not self.languages:
            return super().reduce_metrics(logging_outputs, criterion)
        groups: Dict[str, list] = {}
        for log in logging_outputs:
            for lang, sub in (log.get("by_language") or {log.get("lang"): log}).items():
                groups.setdefault(lang, []).append(sub)
        totals = [{k: log.get(k, 0) for k in ("loss", "sample_size", "nsentences", "ntokens")} for log in logging_outputs]
        super().reduce_metrics(totals, criterion)
        names = set()
        for lang, group in groups.items():
            if lang is not None:
                names.update(criterion.__class__.reduce_metrics(group, prefix=f"{lang}_"))
        for name in sorted(names - {"loss", "docs"}):
            keys = [f"{lang}_{name}" for lang in self.languages]
            fairseq_metrics.log_derived(name, lambda m, keys=keys: macro_average(m, keys))

    def max_positions(self):
        return None

    @property
    def source_dictionary(self):
        return self.corpus.dictionary

    @property
    def target_dictionary(self):
        return self.corpus.dictionary
