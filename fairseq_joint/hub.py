"""The Python API: load a model once, then classify or translate texts (docs/python.md).

* :class:`LabelPredictor` ranks the labels of any label set for texts, labels never seen in training included (their
  vectors come from their descriptions, GILE Sec. 2.2). Three ways to get one, with the same calls:

  - :meth:`LabelPredictor.from_checkpoint`: a trained ``gile_classifier`` (GILE, Pappas & Henderson 2019), scored by
    its head (the logit of Eqs. 13-14, minus γ for the training labels: calibrated stacking, by default the γ the
    checkpoint holds, :meth:`~LabelPredictor.gamma`) with the probability the model's training criterion gives it
    (σ of the logit for the ``bce`` loss, Eq. 13; the softmax over the label set for the softmax losses and
    ``--classification-mode multiclass``); ``fairseq-joint-predict-labels`` ranks with this same code;
  - :meth:`LabelPredictor.from_pretrained`: one such model saved with :meth:`~LabelPredictor.save` as one
    self-contained directory (checksummed parts: :mod:`fairseq_joint.bundles`);
  - :meth:`LabelPredictor.from_encoder`: a sentence encoder alone, no training: each label scored by the cosine of
    the text and the label's description (the zero-shot start that a trained model is measured against).

  :meth:`~LabelPredictor.predict` (rankings; ``threshold=`` keeps the labels at or above a threshold, by default
  the one calibrated on validation in training), :meth:`~LabelPredictor.scores` (the score matrix),
  :meth:`~LabelPredictor.embeddings` (the text vectors h, or the label vectors e_j); one string in, one result out,
  as sentence-transformers' ``encode`` does. ``device=`` / :meth:`~LabelPredictor.to` put the model, its sentence
  encoder and the label sets it has encoded on a device. A label set is encoded once and reused by every later call
  with the same descriptions.
* :func:`load_translator` — a trained NMT-joint translation model (``joint_transformer``, ``joint_lstm``, any of the
  plugin's ``--output-layer``), as fairseq's ``GeneratorHubInterface``: ``.translate("raw text", beam=5)`` applies the
  tokenizer and subword model on the way in and removes them on the way out, as ``fairseq-interactive`` does.

User mistakes are refused as the commands refuse them, with the same messages and the types of
:mod:`fairseq_joint.errors` (a missing checkpoint: ``MissingFileError``; a checkpoint of the other kind or an altered
saved predictor: ``CheckpointError``; an unknown language, device or a threshold out of range: ``OptionError``; a label
file with an empty description, a label name the model's label file lacks, a text that is not a string:
``InputError``).
"""

import abc
import collections.abc
import logging
import os
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from omegaconf.errors import MissingMandatoryValue

from fairseq_joint import errors
from fairseq_joint.checks import SUBWORD_FILES
from fairseq_joint.criterions.multilabel_classification import MultilabelClassificationConfig, probabilities
from fairseq_joint.data.gile_files import (
    LABEL_FILE,
    LANGUAGE_FILE,
    LEXICAL_FILE,
    TRAIN_LABELS,
    check_label,
    read_label_file,
)
from fairseq_joint.data.label_set import LabelSet, check_description_language
from fairseq_joint.errors import CheckpointError, InputError, OptionError
from fairseq_joint.loaders import load_checkpoint, load_gile_checkpoint
from fairseq_joint.modules.tokenizer import tokenize
from fairseq_joint.options import FLOAT32, POSITIVE_INT, PROBABILITY, Range, check_number, flag
from fairseq_joint.tasks.gile_classification import last_validation
from fairseq_joint.text_files import check_exists

logger = logging.getLogger(__name__)

#: what the calls take as ``labels``: a ``label<TAB>description`` file, {label: description}, or label names whose
#: descriptions are the model's label file's
Labels = Union[str, "os.PathLike[str]", Dict[str, str], Sequence[str]]
#: what the calls take as ``texts``: one text, or a list of them
Texts = Union[str, Sequence[str]]
#: ``threshold=`` of :meth:`LabelPredictor.predict` for the threshold the checkpoint holds
CALIBRATED = "calibrated"
#: the values of a cosine (what :meth:`LabelPredictor.from_encoder` scores and thresholds)
COSINE = Range(-1, 1)
#: the files of a GILE data directory (of each language's with ``--languages``) a trained model reads to load
#: (``train.labels``: every training document's labels, from which the model's label priors were built)
MODEL_DATA_FILES = ("dict.txt", TRAIN_LABELS, "train.labels", LABEL_FILE, LEXICAL_FILE, LANGUAGE_FILE)


class LabelScore(NamedTuple):
    """One label of a text's ranking."""

    label: str
    #: the ranking score: a trained model's logit (Eqs. 13-14), minus γ (:meth:`LabelPredictor.gamma`) for a label
    #: seen in training, what ``fairseq-joint-predict-labels`` prints; the cosine of text and description for
    #: :meth:`LabelPredictor.from_encoder`
    score: float
    #: the model's probability of the label, from the logit without γ: σ for the ``bce`` loss (Eq. 13), the softmax
    #: over the scored label set for the softmax losses and multiclass models; None without a trained model
    probability: Optional[float]
    #: whether the label was seen in training (is in ``labels.train.txt``)
    seen: bool


class Arguments(NamedTuple):
    """What a refusal calls the numbers of a ranking: the Python API's keywords (:data:`KEYWORDS`), or a command's
    options (:data:`OPTIONS`, ``fairseq-joint-predict-labels``')."""

    topk: str = "topk"
    batch_size: str = "batch_size"
    seen_score_offset: str = "seen_score_offset"

    def check(self, topk: Optional[int] = None, batch_size: Optional[int] = None,
              seen_score_offset: Optional[float] = None) -> None:
        """The one check of a ranking's numbers, each one given refused under its name here: ``topk`` and
        ``batch_size`` positive integers, γ (``seen_score_offset``) a float32 number."""
        for name, value, allowed in ((self.topk, topk, POSITIVE_INT), (self.batch_size, batch_size, POSITIVE_INT),
                                     (self.seen_score_offset, seen_score_offset, FLOAT32)):
            if value is not None:
                check_number(name, value, allowed)


#: the names of the Python API's keywords
KEYWORDS = Arguments()
#: the names of fairseq-joint-predict-labels' options
OPTIONS = Arguments(*map(flag, Arguments._fields))


class ScoreMatrix(NamedTuple):
    """Every label's scores for every text (:meth:`LabelPredictor.scores`), on the CPU."""

    #: the labels, in the order of the columns
    labels: List[str]
    #: (texts, labels) the ranking scores of :class:`LabelScore` (one row, (labels,), for one text given as a string)
    scores: torch.Tensor
    #: the probabilities of :class:`LabelScore`, shaped as ``scores``; None without a trained model
    probabilities: Optional[torch.Tensor]
    #: (labels,) whether each label was seen in training
    seen: torch.Tensor


def check_device(device, argument: str = "device") -> torch.device:
    """The ``torch.device`` of ``device`` (a name such as ``"cpu"``, ``"cuda"``, ``"cuda:1"``, a GPU's index N for
    ``"cuda:N"``, or a ``torch.device``); None: the first CUDA GPU when there is one, else the CPU (as
    sentence-transformers picks). A device that is not there (``"cuda"`` without CUDA, a GPU index past the last) or
    not known is refused, naming ``argument``."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        found = torch.device(f"cuda:{device}" if isinstance(device, int) else device)  # True: "cuda:True", refused
    except (RuntimeError, ValueError, TypeError):  # not a device name, index or torch.device
        found = None
    if found is None or found.type not in ("cpu", "cuda") or isinstance(device, bytes):  # torch takes b"cpu"
        raise OptionError(f"{argument}={device!r}: unknown device; give 'cpu', 'cuda' or 'cuda:N' (the N-th GPU)")
    if found.type == "cpu":
        return torch.device("cpu")
    count = torch.cuda.device_count()  # 0 without CUDA (a torch built without it, or no GPU visible)
    if not count:
        raise OptionError(f"{argument}={device!r}: no CUDA GPU is visible: use device='cpu' (or leave it out)")
    index = torch.cuda.current_device() if found.index is None else found.index
    if index >= count:
        raise OptionError(f"{argument}={device!r}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    return torch.device("cuda", index)


def as_texts(texts: Texts) -> Tuple[List[str], bool]:
    """``(the texts as a list, whether one string was given)``: a string is one text; a text that is not a string or
    is empty is refused (nothing is dropped: the command skips empty input lines and says so, a Python caller gets its
    own texts back scored in full)."""
    # None, bytes and any other object that holds no texts (5): one text that is not a string
    single = isinstance(texts, (str, bytes)) or not isinstance(texts, collections.abc.Iterable)
    texts = [texts] if single else list(texts)
    for i, text in enumerate(texts):
        where = "texts" if single else f"texts[{i}]"
        if not isinstance(text, str):
            what = {type(None): "None", bytes: "bytes (decode them first)"}.get(type(text), f"a {type(text).__name__}")
            raise InputError(f"{where} is {what}, not a string: give every text as a str")
        if not text.strip():
            raise InputError(f"{where} is empty: give a text to classify (or leave it out)")
    if not texts:
        raise InputError("texts holds no text: give a string or a non-empty list of strings")
    return texts, single


def text_vectors(model, texts: Sequence[str], dictionary, lang: Optional[str], device: torch.device) -> torch.Tensor:
    """h of raw texts on ``device``: the pretrained encoder's embeddings, or the WAN/HAN encoder (``lang``'s) over the
    dictionary's ids (texts tokenized as the data were, :func:`~fairseq_joint.modules.tokenizer.tokenize`)."""
    from fairseq.data import data_utils

    encoder = model.sentence_encoder
    if encoder is not None:
        if not encoder.finetune:
            return model.embed_texts(texts, device)
        rows = [torch.LongTensor(ids) for ids in encoder.tokenize(texts)]
        return model(data_utils.collate_tokens(rows, encoder.pad_id, left_pad=False).to(device), lang=lang)
    rows = [torch.LongTensor([dictionary.index(w) for w in tokenize(t)] or [dictionary.unk()]) for t in texts]
    return model(data_utils.collate_tokens(rows, dictionary.pad(), left_pad=False).to(device), lang=lang)


def probability_kind(task, criterion_cfg) -> Optional[str]:
    """How the checkpoint's criterion turns logits into probabilities, as the ``kind`` of
    :func:`~fairseq_joint.criterions.multilabel_classification.probabilities` (None: it defines none).
    ``multilabel_classification`` says it itself (its loss kind); ``gile_label_embedding_cross_entropy`` is multiclass
    and validates with the softmax."""
    if criterion_cfg._name == "multilabel_classification":
        return task.build_criterion(criterion_cfg).loss_kind
    if criterion_cfg._name == "gile_label_embedding_cross_entropy":
        return "distribution_ce"
    return None


def criterion_threshold(criterion_cfg) -> float:
    """The probability threshold the checkpoint's criterion validated micro-F1 at: ``--threshold`` of
    ``multilabel_classification``; its default for ``gile_label_embedding_cross_entropy``, which validates at it."""
    if criterion_cfg._name == "multilabel_classification":
        return float(criterion_cfg.threshold)
    return float(MultilabelClassificationConfig.threshold)


class LabelPredictor(abc.ABC):
    """Ranks the labels of any label set for texts: :meth:`predict`, :meth:`scores`, :meth:`embeddings`.

    Made by :meth:`from_checkpoint` (a trained ``gile_classifier``), :meth:`from_pretrained` (one saved with
    :meth:`save`) or :meth:`from_encoder` (a sentence encoder alone). Label sets are encoded once per distinct set of
    (label, description) pairs and kept in :attr:`label_sets`, on :attr:`device`."""

    #: what a threshold is compared with (:class:`LabelScore`'s ``probability`` or ``score``) and the values it takes
    threshold_on = "probability"
    threshold_range = PROBABILITY

    def __init__(self, device: torch.device, probability_kind: Optional[str]):
        self._device = device
        #: ``kind`` of :func:`~fairseq_joint.criterions.multilabel_classification.probabilities`, or None
        self.probability_kind = probability_kind
        #: the label sets encoded so far, by their (label, description) pairs in order
        self.label_sets: Dict[Tuple[Tuple[str, str], ...], LabelSet] = {}

    # ------------------------------------------------------------------------------------------ loading
    @classmethod
    def from_checkpoint(cls, path: Union[str, "os.PathLike[str]"], data: Optional[str] = None,
                        pretrained_encoder: Optional[str] = None, *, label_file: Optional[str] = None,
                        eval_label_file: Optional[str] = None, device=None,
                        command: str = "LabelPredictor.from_checkpoint") -> "LabelPredictor":
        """Load a ``gile_classifier`` checkpoint. ``data``: its preprocessed directory (``dict.txt``,
        ``labels.train.txt``; default: the one recorded in the checkpoint); ``pretrained_encoder``: where the sentence
        encoder of an ``--encoder pretrained`` model is now (default: where training found it); ``label_file``,
        ``eval_label_file``: where the label files training was given (``--label-file``, ``--eval-label-file``) are
        now, if they moved. ``device``: where to predict (:func:`check_device`; default a GPU when there is one).
        ``command``: who a checkpoint of the other kind is refused for (``fairseq-joint-predict-labels`` passes its
        name)."""
        device = check_device(device)
        path = os.fspath(path)
        model, task, cfg = load_gile_checkpoint(path, data and os.fspath(data),
                                                pretrained_encoder and os.fspath(pretrained_encoder), command,
                                                label_file=label_file and os.fspath(label_file),
                                                eval_label_file=eval_label_file and os.fspath(eval_label_file))
        return TrainedLabelPredictor(model, task, path, probability_kind(task, cfg.criterion),
                                     criterion_threshold(cfg.criterion), device)

    @classmethod
    def from_pretrained(cls, directory: Union[str, "os.PathLike[str]"], *, device=None,
                        pretrained_encoder: Optional[str] = None) -> "LabelPredictor":
        """Load a predictor :meth:`save` wrote into ``directory``, once every part of it is there as saved (a missing
        part: ``MissingFileError``, an altered one: ``CheckpointError``, naming the file). ``pretrained_encoder``:
        where its sentence encoder is, when it was saved as a reference (``copy_encoder=False``) and is no longer
        where it was (it must be the same files; a copied encoder is the directory's own)."""
        from fairseq_joint import bundles

        device = check_device(device)
        directory = os.fspath(directory)
        manifest = bundles.read_bundle(directory)
        reference = manifest.get("encoder_reference")
        encoder = bundles.bundle_part(directory, manifest, "encoder")
        if pretrained_encoder is not None:
            if reference is None:
                what = "its own copy of its sentence encoder" if encoder else "a model without a sentence encoder"
                raise OptionError(f"pretrained_encoder: {directory} holds {what}: drop pretrained_encoder")
            encoder = os.fspath(pretrained_encoder)
        elif encoder is None and reference is not None:
            encoder = check_exists(reference["path"], f"sentence encoder of {directory} (saved as a reference)",
                                   "give its directory now as from_pretrained(..., pretrained_encoder=PATH)",
                                   directory=True)
        label_file = bundles.bundle_part(directory, manifest, "label_file")
        if manifest["kind"] == "encoder":  # a kind read_bundle knows
            predictor = cls.from_encoder(encoder, label_file=label_file, device=device)
        else:
            predictor = cls.from_checkpoint(bundles.bundle_part(directory, manifest, "checkpoint"),
                                            bundles.bundle_part(directory, manifest, "data"), encoder,
                                            label_file=label_file,
                                            eval_label_file=bundles.bundle_part(directory, manifest, "eval_label_file"),
                                            device=device, command="LabelPredictor.from_pretrained")
        if reference is not None:
            bundles.check_encoder_reference(encoder, predictor.sentence_encoder.fingerprint, reference["fingerprint"],
                                            directory)
        return predictor

    @classmethod
    def from_encoder(cls, path: Union[str, "os.PathLike[str]"], *, label_file: Optional[str] = None,
                     device=None) -> "LabelPredictor":
        """A sentence encoder alone (a local sentence-transformers directory, never downloaded), no training: each
        label is scored by the cosine of the text and the label's description (:func:`~fairseq_joint.modules.
        sentence_encoder.cosine`), every label unseen. ``label_file``: where label names given as a list find their
        descriptions."""
        from fairseq_joint.modules.sentence_encoder import PretrainedSentenceEncoder

        device = check_device(device)
        encoder = PretrainedSentenceEncoder(os.fspath(path), option="LabelPredictor.from_encoder")
        descriptions = None if label_file is None else read_label_file(os.fspath(label_file))
        return EncoderLabelPredictor(encoder, label_file and os.fspath(label_file), descriptions, device)

    # ------------------------------------------------------------------------------------------ device
    @property
    def device(self) -> torch.device:
        """Where the model and the encoded label sets are, and texts are scored."""
        return self._device

    def to(self, device) -> "LabelPredictor":
        """Move the model, its sentence encoder and every label set encoded so far to ``device`` (as
        :func:`check_device` reads it); returns the predictor."""
        device = check_device(device)
        self.move(device)
        for key, label_set in self.label_sets.items():
            self.label_sets[key] = LabelSet(label_set.names, label_set.tokens.to(device),
                                            label_set.train_index.to(device))
        self._device = device
        return self

    # ------------------------------------------------------------------------------------------ what each kind does
    @abc.abstractmethod
    def move(self, device: torch.device) -> None:
        """Put the model (and its sentence encoder) on ``device``."""

    @property
    @abc.abstractmethod
    def languages(self) -> List[str]:
        """The languages of a multilingual model (trained with ``--languages``), else empty."""

    def check_language(self, lang: Optional[str]) -> Optional[str]:
        """``lang`` as the model takes it, or a refusal: here, of a model without :attr:`languages` (which takes
        none)."""
        if lang is not None:
            raise OptionError(f"--lang {lang}: {self.source} is no model trained with --languages: drop --lang")
        return None

    @property
    @abc.abstractmethod
    def label_descriptions(self) -> Optional[Dict[str, str]]:
        """{label: description} of the model's label file (where label names given as a list find their
        descriptions), None without one."""

    @abc.abstractmethod
    def encode_labels(self, descriptions: Dict[str, str], source: str) -> LabelSet:
        """The :class:`LabelSet` of ``{label: description}`` on the CPU (``source`` names them in a refusal or a
        warning)."""

    @abc.abstractmethod
    def text_vectors(self, texts: Sequence[str], lang: Optional[str]) -> torch.Tensor:
        """h of ``texts`` (N, dh) on :attr:`device`."""

    @abc.abstractmethod
    def label_vectors(self, label_set: LabelSet) -> torch.Tensor:
        """e_j of a label set (L, d) on :attr:`device`."""

    @abc.abstractmethod
    def logits(self, vectors: torch.Tensor, label_set: LabelSet, lang: Optional[str]) -> torch.Tensor:
        """(N, L) the scores of the texts whose vectors are ``vectors`` for the labels, before γ."""

    @abc.abstractmethod
    def model_gamma(self) -> Tuple[float, str]:
        """``(γ, where it comes from)`` of the model, when none is given (:meth:`gamma`)."""

    @abc.abstractmethod
    def calibrated_threshold(self) -> Tuple[float, str]:
        """``(t, where it comes from)`` of ``threshold="calibrated"``."""

    @abc.abstractmethod
    def save(self, directory: Union[str, "os.PathLike[str]"], *, copy_encoder: bool = True) -> str:
        """Write the predictor as one self-contained directory (:meth:`from_pretrained`)."""

    # ------------------------------------------------------------------------------------------ checks
    def gamma(self, seen_score_offset: Optional[float] = None, names: Arguments = KEYWORDS) -> Tuple[float, str]:
        """``(γ, where it comes from)``: γ of calibrated stacking, what the training labels' scores are lowered by:
        ``seen_score_offset`` when given (a finite number, refused under its name in ``names``), else the model's
        (:meth:`model_gamma`)."""
        if seen_score_offset is None:
            return self.model_gamma()
        names.check(seen_score_offset=seen_score_offset)
        return float(seen_score_offset), names.seen_score_offset

    def threshold(self, threshold: Union[float, str] = CALIBRATED) -> Tuple[float, str]:
        """``(t, where it comes from)``: the threshold :meth:`predict` keeps the labels at or above, on
        :attr:`threshold_on`: ``"calibrated"``, the one the checkpoint holds (the best micro-F1 on validation in
        training; a checkpoint saved without one falls back to its criterion's ``--threshold``, said once), or a
        number in :attr:`threshold_range`."""
        if self.threshold_on == "probability" and self.probability_kind is None:
            raise OptionError(f"threshold: the criterion of {self.source} defines no probability to threshold")
        if isinstance(threshold, str) and threshold == CALIBRATED:
            return self.calibrated_threshold()
        if isinstance(threshold, str):  # a misspelled "calibrated" was refused as a number out of range
            raise OptionError(f"threshold={threshold!r}: give {CALIBRATED!r} or {self.threshold_range}")
        if torch.is_tensor(threshold) or isinstance(threshold, np.ndarray):  # torch.tensor(0.05): refused as no number
            if threshold.ndim:
                raise OptionError(f"threshold is a {type(threshold).__name__} of shape {tuple(threshold.shape)}: give "
                                  "one number (a float, or a 0-d tensor)")
            threshold = threshold.item()
        return check_number(f"threshold (on the {self.threshold_on})", threshold, self.threshold_range), "given"

    def label_set(self, descriptions: Dict[str, str], source: str = "the labels given") -> LabelSet:
        """The encoded :class:`~fairseq_joint.data.label_set.LabelSet` of ``{label: description}`` on :attr:`device`
        (encoded at the first call, then from :attr:`label_sets`); ``source`` names them in a refusal."""
        key = tuple(descriptions.items())
        if key not in self.label_sets:
            encoded = self.encode_labels(descriptions, source)
            self.label_sets[key] = LabelSet(encoded.names, encoded.tokens.to(self.device),
                                            encoded.train_index.to(self.device))
        return self.label_sets[key]

    def read_labels(self, labels: Labels) -> Tuple[Dict[str, str], str]:
        """``({label: description}, what to call them in a refusal)`` of a label file, a dict (checked as a label
        file's lines are, :func:`~fairseq_joint.data.gile_files.read_label_file`) or a list of label names (their
        descriptions the model's label file's, :attr:`label_descriptions`)."""
        if isinstance(labels, (str, os.PathLike)):
            path = os.fspath(labels)
            return read_label_file(path), path
        if not isinstance(labels, (dict, list, tuple)):
            raise InputError(f"labels is a {type(labels).__name__}: give a label<TAB>description file's path, a "
                             "{label: description} dict or a list of label names")
        if not labels:
            raise InputError("labels holds no labels: give {label: description, ...}, label names or a label file")
        if isinstance(labels, dict):
            return {label: check_label(label, desc, "labels") for label, desc in labels.items()}, "the labels given"
        known = self.label_descriptions
        if known is None:
            raise InputError(f"labels is a list of names, but {self.source} has no label file to find their "
                             "descriptions in: give {label: description} or a label<TAB>description file")
        descriptions = {}
        for i, name in enumerate(labels):
            if not isinstance(name, str):
                raise InputError(f"labels[{i}] is a {type(name).__name__}: give label names as strings")
            if name not in known:
                raise InputError(f"labels[{i}] {name!r} is not in {self.source}'s label file ({len(known)} labels): "
                                 "give one of its labels, or {label: description} for a new one")
            if name in descriptions:
                raise InputError(f"labels[{i}] {name!r} is given twice: give each label once")
            descriptions[name] = known[name]
        return descriptions, "the labels given"

    def prepare(self, texts: Texts, labels: Labels, lang: Optional[str]) -> Tuple[List[str], bool, LabelSet,
                                                                                     Optional[str]]:
        """``(texts, one string given, the label set, lang)`` of a call, each checked (labels first, as the command
        reads them before the texts)."""
        descriptions, source = self.read_labels(labels)
        texts, single = as_texts(texts)
        lang = self.check_language(lang)
        return texts, single, self.label_set(descriptions, source), lang

    # ------------------------------------------------------------------------------------------ scoring
    def scored_batches(self, texts: Sequence[str], label_set: LabelSet, lang: Optional[str], gamma: float,
                       batch_size: int) -> Iterator[Tuple[List[str], torch.Tensor, Optional[torch.Tensor]]]:
        """``(texts, their scores (B, L), probabilities or None)`` of ``batch_size`` texts at a time on
        :attr:`device`: the scores are the logits minus ``gamma`` (:meth:`gamma`) for the training labels. The numbers
        are the caller's to check (:meth:`Arguments.check`)."""
        offset = label_set.seen.float() * float(gamma)
        with torch.no_grad():
            step = int(batch_size)  # 64.0 passes the integer check
            for start in range(0, len(texts), step):
                batch = list(texts[start:start + step])
                logits = self.logits(self.text_vectors(batch, lang), label_set, lang).float()
                probs = None if self.probability_kind is None else probabilities(logits, self.probability_kind)
                yield batch, logits - offset, probs

    def rank(self, texts: Sequence[str], label_set: LabelSet, topk: Optional[int], lang: Optional[str], gamma: float,
             batch_size: int, threshold: Optional[float] = None) -> Iterator[Tuple[str, List[LabelScore]]]:
        """``(text, its topk labels best first)`` for each text in order (``topk`` None: every label), the training
        labels' scores lowered by ``gamma`` (:meth:`gamma`), of those at or above ``threshold`` when given (a number
        :meth:`threshold` has checked). ``lang`` must have passed :meth:`check_language`, the numbers
        :meth:`Arguments.check`."""
        names, seen = label_set.names, label_set.seen.tolist()
        k = len(names) if topk is None else min(int(topk), len(names))
        for batch, scores, probs in self.scored_batches(texts, label_set, lang, gamma, batch_size):
            top = scores.topk(k, dim=-1)
            kept = probs if self.threshold_on == "probability" else scores
            values, indices = top.values.tolist(), top.indices.tolist()
            above = None if threshold is None else (kept.gather(1, top.indices) >= threshold).tolist()
            chances = None if probs is None else probs.gather(1, top.indices).tolist()
            for row, text in enumerate(batch):
                yield text, [LabelScore(names[i], v, None if chances is None else chances[row][j], seen[i])
                             for j, (v, i) in enumerate(zip(values[row], indices[row]))
                             if above is None or above[row][j]]

    def predict(self, texts: Texts, labels: Labels, topk: Optional[int] = 5, threshold: Union[None, float, str] = None,
                lang: Optional[str] = None, seen_score_offset: Optional[float] = None, batch_size: int = 64
                ) -> Union[List[LabelScore], List[List[LabelScore]]]:
        """For each text (a string, or a list of them), its ``topk`` best labels of ``labels`` (a
        ``label<TAB>description`` file, ``{label: description}``, or label names of the model's label file; labels
        unseen in training included), best first, as :class:`LabelScore` records (``topk`` None: every label); with
        ``threshold``, those of them at or above it (:meth:`threshold`: ``"calibrated"`` or a number). One list per
        text, or one list for one string. ``lang``: the texts' language, for a multilingual model (one of
        :attr:`languages`). ``seen_score_offset``: γ of calibrated stacking (default: the checkpoint's,
        :meth:`gamma`). The same rankings as ``fairseq-joint-predict-labels`` (which rounds the scores to 4 digits)."""
        KEYWORDS.check(topk=topk, batch_size=batch_size)
        gamma, _ = self.gamma(seen_score_offset)
        limit = None if threshold is None else self.threshold(threshold)[0]
        texts, single, label_set, lang = self.prepare(texts, labels, lang)
        rows = [ranked for _, ranked in self.rank(texts, label_set, topk, lang, gamma, batch_size, limit)]
        return rows[0] if single else rows

    def scores(self, texts: Texts, labels: Labels, lang: Optional[str] = None,
               seen_score_offset: Optional[float] = None, batch_size: int = 64) -> ScoreMatrix:
        """Every label's score (and probability) for every text, the label set's order kept: a :class:`ScoreMatrix`
        of (texts, labels) tensors on the CPU, (labels,) for one string. Arguments as for :meth:`predict`."""
        KEYWORDS.check(batch_size=batch_size)
        gamma, _ = self.gamma(seen_score_offset)
        texts, single, label_set, lang = self.prepare(texts, labels, lang)
        parts = [(scores.cpu(), None if probs is None else probs.cpu())
                 for _, scores, probs in self.scored_batches(texts, label_set, lang, gamma, batch_size)]
        scores = torch.cat([s for s, _ in parts])
        probs = None if self.probability_kind is None else torch.cat([p for _, p in parts])
        if single:
            scores, probs = scores[0], None if probs is None else probs[0]
        return ScoreMatrix(list(label_set.names), scores, probs, label_set.seen.cpu())

    def embeddings(self, texts: Optional[Texts] = None, *, labels: Optional[Labels] = None,
                   lang: Optional[str] = None, batch_size: int = 64) -> torch.Tensor:
        """The vectors the model scores, on the CPU: of ``texts`` their vectors h (texts, dh) (GILE Sec. 2.1, or the
        sentence encoder's), or of ``labels`` their vectors e_j (labels, d) in the label set's order (the mean word
        vector of each description, Sec. 2.2, or the encoder's embedding of it). One of the two; one string gives one
        vector."""
        if (texts is None) == (labels is None):
            raise InputError("embeddings: give texts or labels=, one of the two")
        KEYWORDS.check(batch_size=batch_size)
        if labels is not None:
            if lang is not None:
                raise OptionError("lang is the texts' language; label vectors are the label language's: drop lang")
            with torch.no_grad():
                return self.label_vectors(self.label_set(*self.read_labels(labels))).float().cpu()
        texts, single = as_texts(texts)
        lang = self.check_language(lang)
        with torch.no_grad():
            step = int(batch_size)  # 64.0 passes the integer check
            vectors = torch.cat([self.text_vectors(texts[i:i + step], lang).float().cpu()
                                 for i in range(0, len(texts), step)])
        return vectors[0] if single else vectors


class TrainedLabelPredictor(LabelPredictor):
    """A trained ``gile_classifier`` (:meth:`LabelPredictor.from_checkpoint`): ``model``/``task`` are fairseq's
    (``task.corpus`` holds the training data's dictionary and labels)."""

    def __init__(self, model, task, checkpoint: str, probability_kind: Optional[str], criterion_threshold: float,
                 device: torch.device):
        super().__init__(torch.device("cpu"), probability_kind)
        self.model = model
        self.task = task
        #: the checkpoint's path (named in refusals)
        self.checkpoint = checkpoint
        self.source = checkpoint
        #: the threshold of :meth:`calibrated_threshold` for a checkpoint saved without a calibrated one
        self.criterion_threshold = criterion_threshold
        self._fallback_said = False
        self.to(device)

    @property
    def sentence_encoder(self):
        """The model's pretrained sentence encoder, None for WAN/HAN."""
        return self.model.sentence_encoder

    def move(self, device: torch.device) -> None:
        self.model.to(device)
        if self.sentence_encoder is not None:  # a frozen one is held outside the model's modules
            self.sentence_encoder.st.to(device)

    @property
    def languages(self) -> List[str]:
        """The languages of a multilingual model (trained with ``--languages``), else empty."""
        return list(self.model.languages)

    def check_language(self, lang: Optional[str]) -> Optional[str]:
        """``lang`` for a multilingual model (one of its languages; required over per-language word encoders, optional
        over a sentence encoder, which scores a text of no given language with the mean of its languages'
        classification units), None for a monolingual one (which refuses a ``lang``)."""
        if self.model.languages:
            return self.model.check_language(lang)  # its refusal names --lang
        return super().check_language(lang)

    @property
    def label_descriptions(self) -> Optional[Dict[str, str]]:
        """The label file training was given (``--label-file``, default ``DATA/labels.tsv``), with the labels its
        ``--eval-label-file`` adds; None for a ``--head linear`` model trained without descriptions."""
        corpus = self.task.corpus
        if corpus.descriptions is None and corpus.eval_descriptions is None:
            return None
        return {**(corpus.eval_descriptions or {}), **(corpus.descriptions or {})}

    def label_set(self, descriptions: Dict[str, str], source: str = "the labels given") -> LabelSet:
        """:meth:`LabelPredictor.label_set`; ``--head linear`` refuses labels unseen in training, naming ``source``."""
        label_set = super().label_set(descriptions, source)
        self.model.check_scorable(label_set.train_index, label_set.names, f" of {source}")
        return label_set

    def encode_labels(self, descriptions: Dict[str, str], source: str) -> LabelSet:
        """The task's encoding of the labels (which refuses descriptions it cannot read), then a warning when they
        seem to be in another language than the model's
        (:func:`~fairseq_joint.data.label_set.check_description_language`). A model that scores no label unseen in
        training (``--head linear``: a row of its own per training label) reads their names alone: their
        descriptions are neither encoded nor checked (an unknown word was warned about, a description of none
        refused)."""
        if not self.model.scores_unseen_labels:
            return self.task.encode_labels(list(descriptions), None, "predict-labels")
        encoded = self.task.encode_labels(list(descriptions), descriptions, "predict-labels")
        corpus = self.task.corpus
        check_description_language(descriptions, corpus.dictionary, corpus.label_language,
                                   os.path.join(corpus.data_dir(corpus.label_language), "dict.txt"), source)
        return encoded

    def text_vectors(self, texts: Sequence[str], lang: Optional[str]) -> torch.Tensor:
        dictionary = self.task.corpus.dictionary_of(lang if self.model.languages else "")
        return text_vectors(self.model, texts, dictionary, lang, self.device)

    def label_vectors(self, label_set: LabelSet) -> torch.Tensor:
        if not self.model.scores_unseen_labels:
            raise InputError(f"{self.checkpoint}: --head linear has no label vectors: train with --head gile for them")
        return self.model.label_vectors(label_set.tokens)

    def logits(self, vectors: torch.Tensor, label_set: LabelSet, lang: Optional[str]) -> torch.Tensor:
        return self.model.label_scores(vectors, label_set.tokens, label_set.train_index, label_set.names, lang=lang)

    def model_gamma(self) -> Tuple[float, str]:
        """The checkpoint's γ (:attr:`~fairseq_joint.tasks.gile_classification.GileClassificationTask.
        seen_score_offset`: the ``--seen-score-offset`` of its training, else the γ calibrated on validation in
        training, else 0)."""
        return self.task.seen_score_offset, self.task.seen_score_offset_origin

    def calibrated_threshold(self) -> Tuple[float, str]:
        """The probability threshold the checkpoint holds (calibrated on validation in training:
        :attr:`~fairseq_joint.tasks.gile_classification.GileClassificationTask.calibrated_threshold`); for one saved
        without it, the ``--threshold`` its criterion validated at, said once."""
        value = self.task.calibrated_threshold
        if value is not None:
            return value, "calibrated on the validation documents in training"
        origin = (f"the --threshold {self.criterion_threshold:g} of training: {self.checkpoint} holds no threshold "
                  "calibrated on validation (saved by an earlier fairseq-joint, or without a validation)")
        if not self._fallback_said:
            logger.warning(f"threshold: {origin}")
            self._fallback_said = True
        return self.criterion_threshold, origin

    def save(self, directory: Union[str, "os.PathLike[str]"], *, copy_encoder: bool = True) -> str:
        """Write the model into ``directory`` (new, or empty) as one self-contained directory that
        :meth:`LabelPredictor.from_pretrained` loads, on this machine or another: the checkpoint, the files of its
        data directory the model reads (dictionaries, label lists, label file, lexical features), the label files
        training was given, the sentence encoder's directory (``copy_encoder=False``: a reference to where it is,
        pinned by its fingerprint), a model card (``README.md``) and the SHA-256 of every file. Returns the path."""
        from fairseq_joint import bundles

        files: Dict[str, str] = {"checkpoint.pt": self.checkpoint}
        corpus, task_cfg = self.task.corpus, self.task.cfg
        directories = [""] + [d for d in dict.fromkeys([*corpus.languages, corpus.label_language]) if d]
        for lang in directories:
            for name in MODEL_DATA_FILES:
                if os.path.isfile(os.path.join(corpus.data_dir(lang), name)):
                    files["/".join(["data", lang, name] if lang else ["data", name])] = os.path.join(
                        corpus.data_dir(lang), name)
        manifest = {"kind": "gile_classifier", "checkpoint": "checkpoint.pt", "data": "data"}
        for key, path in (("label_file", task_cfg.label_file), ("eval_label_file", task_cfg.eval_label_file)):
            if path:
                files[f"{key}.tsv"], manifest[key] = path, f"{key}.tsv"
        trees = {}
        encoder = self.sentence_encoder
        if encoder is not None and copy_encoder:
            trees["encoder"], manifest["encoder"] = encoder.path, "encoder"
        elif encoder is not None:
            manifest["encoder_reference"] = {"path": os.path.abspath(encoder.path), "fingerprint": encoder.fingerprint}
        state = load_checkpoint(self.checkpoint)
        return bundles.write_bundle(directory, files, trees, manifest, self.model_card(state, files, manifest))

    def model_card(self, state: dict, files: Dict[str, str], manifest: dict) -> str:
        """The ``README.md`` of a saved model: what it is, how to load it, the options it was trained with, its last
        validation's figures, γ and the threshold."""
        from fairseq_joint import bundles
        from fairseq_joint.checks import checkpoint_cfg

        cfg = checkpoint_cfg(state)
        model = cfg.model
        encoder = self.sentence_encoder
        updates = (state.get("optimizer_history") or [{}])[-1].get("num_updates")
        figures = last_validation(state.get("task_state"))  # of the checkpoint saved, which may be newer
        validated = figures.pop("num_updates", None)  # (--validate-interval: maybe before the checkpoint's update)
        gamma, gamma_origin = self.gamma()
        lines = [
            "# A fairseq-joint label predictor", "",
            f"A `gile_classifier` (GILE, Pappas & Henderson 2019) with the `{model.head}` head over "
            + (f"the sentence encoder `{os.path.basename(encoder.path.rstrip('/'))}` (`--encoder {model.encoder}`)"
               if encoder is not None else f"a `{model.encoder}` encoder")
            + f", trained {updates} updates ({cfg.task.classification_mode}, criterion `{cfg.criterion._name}`) on "
            f"{len(self.task.corpus.train_labels)} labels"
            + (f" of the languages {', '.join(self.languages)}" if self.languages else "") + ". It ranks the labels "
            "of any label file (`label<TAB>description`), labels never seen in training included.", "",
            "```python", "from fairseq_joint.hub import LabelPredictor", "",
            "predictor = LabelPredictor.from_pretrained(\"THIS_DIRECTORY\")",
            f"print(predictor.predict(\"a text to classify\", labels={list(self.task.corpus.train_labels)[:3]!r}, "
            "topk=3))", "# labels: names of its label file, {label: description}, or a label<TAB>description file",
            "```", "",
            "## Training", "",
            "The options of its configuration that are not fairseq's defaults, as a command (paths of the machine it "
            "was trained on):", "", "```bash", bundles.training_command(cfg), "```", "",
            "## Validation", "",
        ]
        if figures:
            lines += ["The last validation before this checkpoint was saved"
                      + (f", after update {validated:.0f}" if validated is not None else "") + ":", "",
                      "| figure | value |", "|---|---|"] + [f"| {k} | {v:g} |" for k, v in figures.items()]
        else:
            lines += ["The checkpoint holds no validation figures (trained without a validation of `valid`, "
                      "or by an earlier fairseq-joint, which did not record them)."]
        lines += ["", f"γ = {gamma:g} ({gamma_origin}) is subtracted from the scores of the training labels."]
        if self.probability_kind is not None:
            threshold = self.task.calibrated_threshold
            lines += ["Probability threshold: " + (f"{threshold:g}, calibrated on the validation documents in "
                                                   "training (`threshold=\"calibrated\"`)." if threshold is not None
                                                   else "none calibrated in this checkpoint.")]
        reference = manifest.get("encoder_reference")
        lines += ["", "## Files", "", "Every file's SHA-256 is in `fairseq-joint-model.json`; "
                  "`LabelPredictor.from_pretrained` refuses a missing or altered one.", ""]
        lines += [f"* `{name}`" for name in sorted(files)]
        if encoder is not None:
            lines += ["* `encoder/`: the sentence encoder" if reference is None else
                      f"* the sentence encoder is not copied: {reference['path']} (fingerprint "
                      f"{reference['fingerprint'][:16]}...), or `pretrained_encoder=` where it is"]
        return "\n".join(lines) + "\n"


class EncoderLabelPredictor(LabelPredictor):
    """A sentence encoder alone (:meth:`LabelPredictor.from_encoder`): each label scored by the cosine of the text's
    and the description's embeddings, every label unseen in training (there was none)."""

    threshold_on = "score"
    threshold_range = COSINE

    def __init__(self, encoder, label_file: Optional[str], descriptions: Optional[Dict[str, str]],
                 device: torch.device):
        super().__init__(torch.device("cpu"), None)
        #: the :class:`~fairseq_joint.modules.sentence_encoder.PretrainedSentenceEncoder`
        self.sentence_encoder = encoder
        self.label_file = label_file
        self.source = f"LabelPredictor.from_encoder({encoder.path!r})"
        self._descriptions = descriptions
        self.to(device)

    def move(self, device: torch.device) -> None:
        self.sentence_encoder.st.to(device)

    @property
    def languages(self) -> List[str]:
        return []

    @property
    def label_descriptions(self) -> Optional[Dict[str, str]]:
        """The ``label_file`` given to :meth:`LabelPredictor.from_encoder`, None without one."""
        return self._descriptions

    def encode_labels(self, descriptions: Dict[str, str], source: str) -> LabelSet:
        vectors = self.sentence_encoder.embed(list(descriptions.values()), "label descriptions")
        return LabelSet(list(descriptions), vectors, torch.full((len(descriptions),), -1, dtype=torch.long))

    def text_vectors(self, texts: Sequence[str], lang: Optional[str]) -> torch.Tensor:
        return self.sentence_encoder.embed(texts).to(self.device)

    def label_vectors(self, label_set: LabelSet) -> torch.Tensor:
        return label_set.tokens

    def logits(self, vectors: torch.Tensor, label_set: LabelSet, lang: Optional[str]) -> torch.Tensor:
        from fairseq_joint.modules.sentence_encoder import cosine

        return cosine(vectors, label_set.tokens)

    def model_gamma(self) -> Tuple[float, str]:
        """γ lowers the training labels' scores; an encoder alone has none (a γ given lowers no label)."""
        return 0.0, "no label was seen in training (a sentence encoder alone)"

    def calibrated_threshold(self) -> Tuple[float, str]:
        raise OptionError(f"threshold={CALIBRATED!r}: a sentence encoder has no calibrated threshold: give a cosine")

    def save(self, directory: Union[str, "os.PathLike[str]"], *, copy_encoder: bool = True) -> str:
        """Write the encoder (or with ``copy_encoder=False`` a reference to it, pinned by its fingerprint), the label
        file and a model card into ``directory`` (new, or empty), for :meth:`LabelPredictor.from_pretrained`."""
        from fairseq_joint import bundles

        encoder = self.sentence_encoder
        manifest, files, trees = {"kind": "encoder"}, {}, {}
        if copy_encoder:
            trees["encoder"], manifest["encoder"] = encoder.path, "encoder"
        else:
            manifest["encoder_reference"] = {"path": os.path.abspath(encoder.path), "fingerprint": encoder.fingerprint}
        if self.label_file is not None:
            files["label_file.tsv"], manifest["label_file"] = self.label_file, "label_file.tsv"
        card = "\n".join([
            "# A fairseq-joint zero-shot label predictor", "",
            f"The sentence encoder `{os.path.basename(encoder.path.rstrip('/'))}` ({encoder.dim}-d) alone, no "
            "training: a label's score for a text is the cosine of their embeddings (the text's and the label "
            "description's). Load it with `LabelPredictor.from_pretrained(\"THIS_DIRECTORY\")`"
            + (f"; label names given as a list find their descriptions in `label_file.tsv` "
               f"({len(self._descriptions)} labels)." if self.label_file is not None else "."), "",
            "Every file's SHA-256 is in `fairseq-joint-model.json`.",
        ]) + "\n"
        return bundles.write_bundle(directory, files, trees, manifest, card)


# ---------------------------------------------------------------------------------------------- translation
def load_translator(checkpoint: Union[str, "os.PathLike[str]"], data: Union[str, "os.PathLike[str]"],
                    **overrides):
    """fairseq's ``GeneratorHubInterface`` of a fairseq-joint translation checkpoint (``joint_transformer``,
    ``joint_lstm``): ``.translate(text, beam=5)`` / ``.translate([texts])``.

    ``data``: the binarized directory (its ``dict.*.txt``). ``overrides``: fairseq's options as keywords, the ones
    ``fairseq-interactive`` is given, e.g. ``bpe="sentencepiece", sentencepiece_model="spm.model"`` (``make demo``) or
    ``tokenizer="moses", moses_no_escape=True, bpe="subword_nmt", bpe_codes="bpe.codes"`` (the README's quick start),
    ``source_lang``/``target_lang``. Paths are the caller's (relative to the working directory), unlike
    ``from_pretrained``'s ``data_name_or_path``, which a leading ``.`` makes relative to the checkpoint."""
    from fairseq import checkpoint_utils
    from fairseq.hub_utils import GeneratorHubInterface
    from fairseq.models import FairseqEncoderDecoderModel

    checkpoint, data = os.fspath(checkpoint), os.fspath(data)
    if "generation_args" in overrides:  # from_pretrained's; fairseq's loader would set it on the model's options
        raise OptionError("generation_args: give load_translator the generation options themselves (max_len_b=10), "
                          "or translate's (beam=5)")
    if "path" in overrides:  # fairseq's option of the checkpoint, which the first argument gives: ignored before
        raise OptionError(f"path={overrides['path']!r}: load_translator's checkpoint argument gives it: drop path=")
    files = {name: os.fspath(overrides[name]) for name in SUBWORD_FILES if overrides.get(name) is not None}
    overrides.update({name: os.path.abspath(path) for name, path in files.items()}, data=os.path.abspath(data))
    state = load_checkpoint(checkpoint, labels=False, overrides=overrides, command="load_translator")
    check_exists(data, "data directory", "give fairseq-preprocess's --destdir", directory=True)
    for name, path in files.items():
        check_exists(path, f"load_translator's {name}", "give an existing file (relative to the working directory)")
    try:
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], arg_overrides=overrides,
                                                                          state=state)
    except Exception as err:  # fairseq's errors of a user's mistake, as the commands translate them
        refusal = errors.translate(err)  # e.g. a data directory of no language pair
        if refusal is None:
            raise
        raise refusal from err
    if not isinstance(models[0], FairseqEncoderDecoderModel):
        kind = type(models[0]).__name__
        raise CheckpointError(f"{checkpoint} holds a {kind}, not an encoder-decoder: give a translation checkpoint")
    try:
        return GeneratorHubInterface(cfg, task, models)  # builds the tokenizer and the BPE
    except MissingMandatoryValue as err:  # bpe="subword_nmt" without bpe_codes=
        missing = errors.missing_value(err)
        if missing is None:
            raise
        group, name, chosen = missing
        raise OptionError(f"{name} is missing: {group}={chosen!r} needs it: give load_translator {name}=") from err
