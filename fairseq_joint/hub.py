"""The Python API: load a trained model once, then classify or translate texts (docs/python.md).

* :class:`LabelPredictor` — a trained ``gile_classifier`` (GILE, Pappas & Henderson 2019):
  ``LabelPredictor.from_checkpoint(path).predict(texts, labels=...)`` ranks the labels of any label set for each
  text, labels never seen in training included (their vectors come from their descriptions, Sec. 2.2), with the
  head's score (the logit of Eqs. 13-14, minus γ for the training labels: calibrated stacking, by default the γ the
  checkpoint holds, calibrated on validation in training: :meth:`LabelPredictor.gamma`) and the probability
  the model's training criterion gives it (σ of the logit for the ``bce`` loss, Eq. 13; the softmax over the label
  set for the softmax losses and ``--classification-mode multiclass``). A label set is encoded once and reused by
  every later call with the same descriptions. ``fairseq-joint-predict-labels`` ranks with this same code.
* :func:`load_translator` — a trained NMT-joint translation model (``joint_transformer``, ``joint_lstm``, any of the
  plugin's ``--output-layer``), as fairseq's ``GeneratorHubInterface``: ``.translate("raw text", beam=5)`` applies the
  tokenizer and subword model on the way in and removes them on the way out, as ``fairseq-interactive`` does.

User mistakes are refused as the commands refuse them, with the same messages and the types of
:mod:`fairseq_joint.errors` (a missing checkpoint: ``MissingFileError``; a checkpoint of the other kind:
``CheckpointError``; an unknown language: ``OptionError``; a label file with an empty description, a text that is not
a string: ``InputError``).
"""

import os
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import torch

from fairseq_joint.criterions.multilabel_classification import probabilities
from fairseq_joint.data.gile_files import check_label, read_label_file
from fairseq_joint.data.gile_text import tokenize
from fairseq_joint.data.label_set import LabelSet
from fairseq_joint.errors import CheckpointError, InputError, MissingFileError, OptionError
from fairseq_joint.loaders import load_checkpoint, load_gile_checkpoint
from fairseq_joint.options import ANY, POSITIVE_INT, check_number

#: what :meth:`LabelPredictor.predict` takes as ``labels``: a ``label<TAB>description`` file or {label: description}
Labels = Union[str, "os.PathLike[str]", Dict[str, str]]


class LabelScore(NamedTuple):
    """One label of a text's ranking."""

    label: str
    #: the head's logit (Eqs. 13-14), minus γ (:meth:`LabelPredictor.gamma`) for a label seen in training: the ranking
    #: score, what ``fairseq-joint-predict-labels`` prints
    score: float
    #: the model's probability of the label, from the logit without γ: σ for the ``bce`` loss (Eq. 13), the softmax
    #: over the scored label set for the softmax losses and multiclass models; None when the checkpoint's criterion
    #: defines none
    probability: Optional[float]
    #: whether the label was seen in training (is in ``labels.train.txt``)
    seen: bool


def check_texts(texts: Sequence[str]) -> List[str]:
    """The texts to classify as a list; a bare string, a non-string or an empty text is refused (nothing is dropped:
    the command skips empty input lines and says so, a Python caller gets its own list back scored in full)."""
    if isinstance(texts, (str, bytes)):
        raise InputError("texts must be a list of strings, not one string: wrap a single text in a list, [text]")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(f"texts[{i}] is a {type(text).__name__}, not a string: give every text as a str")
        if not text.strip():
            raise InputError(f"texts[{i}] is empty: give a text to classify (or leave it out)")
    return texts


def text_vectors(model, texts: Sequence[str], dictionary, lang: Optional[str] = None) -> torch.Tensor:
    """h of raw texts: the pretrained encoder's embeddings, or the WAN/HAN encoder (``lang``'s) over the dictionary's
    ids (texts tokenized as the data were, :func:`~fairseq_joint.data.gile_text.tokenize`)."""
    from fairseq.data import data_utils

    encoder = model.sentence_encoder
    if encoder is not None:
        if not encoder.finetune:
            return model.embed_texts(texts)
        rows = [torch.LongTensor(ids) for ids in encoder.tokenize(texts)]
        return model(data_utils.collate_tokens(rows, encoder.pad_id, left_pad=False), lang=lang)
    rows = [torch.LongTensor([dictionary.index(w) for w in tokenize(t)] or [dictionary.unk()]) for t in texts]
    return model(data_utils.collate_tokens(rows, dictionary.pad(), left_pad=False), lang=lang)


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


class LabelPredictor:
    """A trained ``gile_classifier`` loaded once: ranks the labels of any label set for texts (:meth:`predict`).

    ``model``/``task`` are fairseq's (``task.corpus`` holds the training data's dictionary and labels); label sets
    are encoded once per distinct set of (label, description) pairs and kept in :attr:`label_sets`."""

    def __init__(self, model, task, checkpoint: str, probability_kind: Optional[str]):
        self.model = model
        self.task = task
        #: the checkpoint's path (named in refusals)
        self.checkpoint = checkpoint
        #: ``kind`` of :func:`~fairseq_joint.criterions.multilabel_classification.probabilities`, or None
        self.probability_kind = probability_kind
        #: the label sets encoded so far, by their (label, description) pairs in order
        self.label_sets: Dict[Tuple[Tuple[str, str], ...], LabelSet] = {}

    @classmethod
    def from_checkpoint(cls, path: Union[str, "os.PathLike[str]"], data: Optional[str] = None,
                        pretrained_encoder: Optional[str] = None, *, label_file: Optional[str] = None,
                        eval_label_file: Optional[str] = None,
                        command: str = "LabelPredictor.from_checkpoint") -> "LabelPredictor":
        """Load a ``gile_classifier`` checkpoint. ``data``: its preprocessed directory (``dict.txt``,
        ``labels.train.txt``; default: the one recorded in the checkpoint); ``pretrained_encoder``: where the sentence
        encoder of an ``--encoder pretrained`` model is now (default: where training found it); ``label_file``,
        ``eval_label_file``: where the label files training was given (``--label-file``, ``--eval-label-file``) are
        now, if they moved. ``command``: who a checkpoint of the other kind is refused for
        (``fairseq-joint-predict-labels`` passes its name)."""
        path = os.fspath(path)
        model, task, cfg = load_gile_checkpoint(path, data and os.fspath(data),
                                                pretrained_encoder and os.fspath(pretrained_encoder), command,
                                                label_file=label_file and os.fspath(label_file),
                                                eval_label_file=eval_label_file and os.fspath(eval_label_file))
        return cls(model, task, path, probability_kind(task, cfg.criterion))

    # ------------------------------------------------------------------------------------------ checks
    @property
    def languages(self) -> List[str]:
        """The languages of a multilingual model (trained with ``--languages``), else empty."""
        return list(self.model.languages)

    def check_language(self, lang: Optional[str]) -> Optional[str]:
        """``lang`` for a multilingual model (one of its languages: required), None for a monolingual one (which
        refuses a ``lang``)."""
        if self.model.languages:
            try:
                return self.model.check_language(lang)
            except OptionError as e:
                raise OptionError(f"--lang: {e}") from None
        if lang is not None:
            raise OptionError(f"--lang {lang}: {self.checkpoint} is a monolingual model (no --languages): drop --lang")
        return None

    def label_set(self, descriptions: Dict[str, str], source: str = "the labels given") -> LabelSet:
        """The encoded :class:`~fairseq_joint.data.label_set.LabelSet` of ``{label: description}`` (encoded at the first
        call, then from :attr:`label_sets`); ``--head linear`` refuses labels unseen in training, naming ``source``."""
        key = tuple(descriptions.items())
        if key not in self.label_sets:
            names = list(descriptions)
            self.label_sets[key] = self.task.encode_labels(names, descriptions, "predict-labels")
        label_set = self.label_sets[key]
        if not self.model.scores_unseen_labels:
            unseen = [n for n, i in zip(label_set.names, label_set.train_index.tolist()) if i < 0]
            if unseen:
                raise InputError(f"--head linear cannot score the {len(unseen)} label(s) of {source} it never "
                                 f"saw in training (e.g. {unseen[0]!r}): train a joint head (--head gile) for unseen "
                                 "labels")
        return label_set

    def read_labels(self, labels: Labels) -> Tuple[Dict[str, str], str]:
        """``({label: description}, what to call them in a refusal)`` of a label file or a dict, checked as a label
        file's lines are (:func:`~fairseq_joint.data.gile_files.read_label_file`)."""
        if not isinstance(labels, (dict, str, os.PathLike)):
            raise InputError(f"labels is a {type(labels).__name__}: give a label<TAB>description file's path or a "
                             "{label: description} dict (a label needs its description)")
        if isinstance(labels, dict):
            if not labels:
                raise InputError("labels holds no labels: give {label: description, ...} or a label file")
            return {label: check_label(label, desc, "labels") for label, desc in labels.items()}, "the labels given"
        path = os.fspath(labels)
        return read_label_file(path), path

    def gamma(self, seen_score_offset: Optional[float] = None) -> Tuple[float, str]:
        """``(γ, where it comes from)``: γ of calibrated stacking, subtracted from the training labels' scores, is
        ``seen_score_offset`` when given (a finite number), else the checkpoint's
        (:attr:`~fairseq_joint.tasks.gile_classification.GileClassificationTask.seen_score_offset`: the
        ``--seen-score-offset`` of its training, else the γ calibrated on validation in training, else 0)."""
        if seen_score_offset is None:
            seen_score_offset, origin = self.task.seen_score_offset, self.task.seen_score_offset_origin
        else:
            origin = "--seen-score-offset"
        return check_number("--seen-score-offset", seen_score_offset, ANY), origin

    # ------------------------------------------------------------------------------------------ scoring
    def rank(self, texts: Sequence[str], label_set: LabelSet, topk: Optional[int], lang: Optional[str] = None,
             seen_score_offset: Optional[float] = None, batch_size: int = 64
             ) -> Iterator[Tuple[str, List[LabelScore]]]:
        """``(text, its topk labels best first)`` for each text in order, scored ``batch_size`` texts at a time
        (``topk`` None: every label). ``seen_score_offset``: γ subtracted from the training labels' scores (default:
        the checkpoint's, :meth:`gamma`). ``lang`` must have passed :meth:`check_language`."""
        check_number("--batch-size", batch_size, POSITIVE_INT)
        model = self.model
        names = label_set.names
        seen = label_set.train_index >= 0
        gamma, _ = self.gamma(seen_score_offset)
        offset = seen.float() * float(gamma)
        k = len(names) if topk is None else min(int(topk), len(names))
        dictionary = self.task.corpus.dictionary_of(lang if model.languages else "")
        with torch.no_grad():
            for start in range(0, len(texts), batch_size):
                batch = texts[start:start + batch_size]
                logits = model.label_scores(text_vectors(model, batch, dictionary, lang), label_set.tokens,
                                            label_set.train_index, names, lang=lang).float()
                probs = None if self.probability_kind is None else probabilities(logits, self.probability_kind)
                top = (logits - offset).topk(k, dim=-1)
                for row, (text, values, indices) in enumerate(zip(batch, top.values.tolist(), top.indices.tolist())):
                    yield text, [LabelScore(names[i], v, None if probs is None else float(probs[row, i]),
                                            bool(seen[i])) for v, i in zip(values, indices)]

    def predict(self, texts: Sequence[str], labels: Labels, topk: Optional[int] = 5, lang: Optional[str] = None,
                seen_score_offset: Optional[float] = None, batch_size: int = 64) -> List[List[LabelScore]]:
        """For each of ``texts`` (a list of strings), its ``topk`` best labels of ``labels`` (a
        ``label<TAB>description`` file or ``{label: description}``; labels unseen in training included), best first,
        as :class:`LabelScore` records (``topk`` None: every label). ``lang``: the texts' language, for a
        multilingual model (one of :attr:`languages`). ``seen_score_offset``: γ of calibrated stacking (default: the
        checkpoint's, :meth:`gamma`). The same rankings as ``fairseq-joint-predict-labels`` (which rounds the scores to 4 digits)."""
        if topk is not None:
            check_number("--topk", topk, POSITIVE_INT)
        descriptions, source = self.read_labels(labels)
        texts = check_texts(texts)
        lang = self.check_language(lang)
        label_set = self.label_set(descriptions, source)
        return [ranked for _, ranked in self.rank(texts, label_set, topk, lang, seen_score_offset, batch_size)]


# ---------------------------------------------------------------------------------------------- translation
#: options of fairseq's tokenizers/subword models that name a file
FILE_OPTIONS = ("bpe_codes", "sentencepiece_model", "bpe_vocab", "bpe_merges")


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
    files = {name: os.fspath(overrides[name]) for name in FILE_OPTIONS if overrides.get(name) is not None}
    overrides.update({name: os.path.abspath(path) for name, path in files.items()}, data=os.path.abspath(data))
    state = load_checkpoint(checkpoint, labels=False, overrides=overrides, command="load_translator")
    if not os.path.isdir(data):
        raise MissingFileError(f"data directory {data} does not exist: give the binarized directory of the training "
                               "data (fairseq-preprocess --destdir)")
    for name, path in files.items():
        if not os.path.isfile(path):
            raise MissingFileError(f"{name}={path}: file not found")
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], arg_overrides=overrides,
                                                                      state=state)
    if not isinstance(models[0], FairseqEncoderDecoderModel):
        raise CheckpointError(f"{checkpoint} is not a translation checkpoint (its model is a "
                              f"{type(models[0]).__name__}, not an encoder-decoder)")
    return GeneratorHubInterface(cfg, task, models)
