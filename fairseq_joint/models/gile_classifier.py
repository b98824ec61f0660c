"""Model ``gile_classifier``: a WAN/HAN document encoder and a label-scoring head (Pappas & Henderson 2019).

Every head is one configuration of :class:`~fairseq_joint.modules.output_layers.OutputLayer`
(``logits = g_ctx(h) · g_out(X)ᵀ + b``), with X the label vectors: the mean of the description's word
vectors from the embedding E that the encoder shares (Sec. 2.2, padding masked).

================  ==============================  ==========================  ============================
head              scores                          paper                       OutputLayer
================  ==============================  ==========================  ============================
linear            Wᵀh + b                         Eq. 3 (WAN/HAN baseline)    softmax (free W, |Y| rows)
bil_yh15          σ(E W) W' h                     Yazdani & Henderson 2015    label + linear context side
bil_n16           E W h                           Nam et al. 2016, Eq. 5      bilinear
gile              σ(E U + b_u)(σ(V h + b_v)⊙w)+b  Eq. 14 (one shared b)       joint, shared b, scale w
gile_label_only   σ(E W) h                        Eq. 6a ablation             label
gile_input_only   E σ(W h)                        Eq. 6b ablation             context
================  ==============================  ==========================  ============================

``--encoder pretrained`` replaces the encoder and the averaged word vectors by a sentence-transformers model: h and
the label vectors are its normalized embeddings of the text and of the description (``--similarity-init`` then
starts ``gile`` and ``bil_n16`` exactly at their cosine); ``--seen-label-bias`` adds b_y per training label.
``--encoder hybrid`` puts a lexical channel beside the frozen embedding, for texts and descriptions alike: their
TF-IDF vectors (fitted on the training texts at preprocessing, ``DATA/lexical.json``) projected by a learned map
(:mod:`fairseq_joint.modules.lexical_encoder`), so h = [e ; Pᵀx] and the start is sentence + lexical cosine. With
``--languages`` that one encoder serves every language (a multilingual sentence encoder, e.g. one made by
``fairseq-joint-distill-encoder``; with ``hybrid``, one lexical model fitted on every language's training texts, which
each language's directory holds), the joint space is shared and the classification unit per language (Sec. 3.3).

``--joint-dim auto`` sets d_j by Eq. 19, ``d_j = dh·|Y| / (dh + d)``, the capacity of the linear head; with
``--languages`` (M of them, a linear head of |Y| rows each) its multilingual form, ``d_j = dh·M·|Y| / (dh + d)``.
Only ``linear`` has label-set-size dependent parameters, so only it cannot score labels unseen in training.
"""

import logging
import math
import os
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
from fairseq.data import Dictionary
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import BaseFairseqModel, register_model, register_model_architecture

from fairseq_joint.data.gile_files import LEXICAL_FILE, label_counts
from fairseq_joint.errors import CheckpointError, InputError, OptionError
from fairseq_joint.models.output_layer_model import DataFingerprintMixin, ResumeStateMixin, UpdateCountMixin
from fairseq_joint.modules.cooccurrence_init import COOCCURRENCE_INIT_CHOICES, cooccurrence_init_, label_patterns
from fairseq_joint.modules.lexical_encoder import HybridTextEncoder, LexicalModel, check_signature
from fairseq_joint.modules.output_layers import ACTIVATION_CHOICES, OutputLayer, OutputLayerSpec
from fairseq_joint.modules.pretrained_embedding import header_dim, load_word_vectors_
from fairseq_joint.modules.sentence_encoder import PretrainedSentenceEncoder, cosine
from fairseq_joint.modules.text_encoders import ENCODER_CHOICES as TEXT_ENCODER_CHOICES
from fairseq_joint.modules.text_encoders import LAYER_CHOICES, HierarchicalAttentionEncoder, WordAttentionEncoder
from fairseq_joint.options import (
    DROPOUT,
    NON_NEGATIVE_FLOAT32,
    NON_NEGATIVE_INT,
    POSITIVE_INT,
    arch,
    as_number,
    flag,
    named_values,
    number_problem,
    registered,
)
from fairseq_joint.text_files import content_lines

logger = logging.getLogger(__name__)

HEAD_CHOICES = ("linear", "bil_yh15", "bil_n16", "gile", "gile_label_only", "gile_input_only")

#: head -> its OutputLayerSpec settings (preset and per-side overrides)
HEADS = {
    "linear": dict(kind="softmax", bias="per_class"),
    "bil_yh15": dict(kind="label", context_projection="linear", bias="none"),
    "bil_n16": dict(kind="bilinear", bias="none"),
    "gile": dict(kind="joint", bias="shared", context_scale=True),
    "gile_label_only": dict(kind="label", bias="none"),
    "gile_input_only": dict(kind="context", bias="none"),
}
#: the heads whose both sides project, into a joint space of size --joint-dim (bil_yh15, gile)
NEEDS_JOINT_DIM = tuple(head for head, spec in HEADS.items() if OutputLayerSpec(**spec).has_joint_space)
#: the heads whose σ (--joint-activation) acts: a side projected non-linearly (not linear, bil_n16)
READS_ACTIVATION = tuple(head for head, spec in HEADS.items() if OutputLayerSpec(**spec).reads_activation)
ENCODER_CHOICES = TEXT_ENCODER_CHOICES + ("pretrained", "hybrid")
#: the encoders over a pretrained sentence encoder (--pretrained-encoder)
SENTENCE_ENCODERS = ("pretrained", "hybrid")
#: the options only WAN and HAN read (their word embedding E and word encoder), which a sentence encoder replaces
WORD_ENCODER_OPTIONS = ("embed_path", "freeze_embed", "word_encoder", "attention_dim", "encoder_activation", "dropout")


#: the head's parameters one joint space shares across the languages of a multilingual model (GILE Sec. 3.3):
#: U, b_u, V, b_v; the rest (w and b of Eq. 14; W and b of --head linear) is each language's classification unit
SHARED_HEAD_PARAMETERS = ("class_weight", "class_bias", "context_weight", "context_bias")


def share_encoder_parts_(encoder: nn.Module, source: nn.Module, share_encoder: bool, share_attention: bool) -> None:
    """Make ``encoder`` use ``source``'s word/sentence encoders (MHAN-Enc) and/or attentions (MHAN-Att)."""
    word_level = (encoder, source) if isinstance(encoder, WordAttentionEncoder) else (encoder.words, source.words)
    if share_encoder:
        word_level[0].word = word_level[1].word
    if share_attention:
        word_level[0].attention = word_level[1].attention
    if isinstance(encoder, HierarchicalAttentionEncoder):
        if share_encoder:
            encoder.sentence = source.sentence
        if share_attention:
            encoder.attention = source.attention


def embedding_paths(value: str, languages: List[str]) -> Dict[str, str]:
    """``--embed-path`` of a multilingual model: ``LANG=FILE,...`` or a path with ``{lang}`` -> {lang: file}; the
    files' vectors must all have one dimension (read from their first lines with content)."""
    if not value:
        return {}
    if "{lang}" in value:
        paths = {lang: value.replace("{lang}", lang) for lang in languages}
    else:
        paths = named_values("--embed-path", value.split(","), "LANG=FILE,LANG=FILE or a path with {lang} (e.g. "
                             "vectors.{lang}.txt)", languages)
    dims = {}
    for lang, path in paths.items():  # content_lines refuses a missing file, or one without a line
        line = next(content_lines(path, f"--embed-path ({lang})", "vectors", "give a word2vec text file per "
                                  "language"))[1]
        header = header_dim(line)
        dims[lang] = len(line.split()) - 1 if header is None else header
    first, first_dim = next(iter(dims.items()), (None, None))
    for lang, dim in dims.items():
        if dim != first_dim:
            raise InputError(f"--embed-path: {paths[lang]} ({lang}) has {dim}-d vectors but {paths[first]} ({first}) "
                             f"{first_dim}-d: give aligned vectors of one dimension")
    return paths


@dataclass(frozen=True)
class GileModelInputs:
    """What a :class:`GileClassifier` is built from besides its configuration: the data's side of the model, made by
    the task (:meth:`~fairseq_joint.tasks.gile_classification.GileClassificationTask.model_inputs`)."""

    #: the dictionary E is built over; a multilingual model's label language's (it embeds the descriptions)
    dictionary: Dictionary
    #: the training labels, in the order of the linear head's rows (|Y| of Eq. 19 is their number)
    train_labels: Tuple[str, ...]
    #: every training example's labels as positions in ``train_labels`` (label priors, Kurata's patterns)
    train_label_rows: Sequence[Sequence[int]]
    #: whether the labels have descriptions (every head but linear scores them)
    has_label_descriptions: bool
    #: GILE-MHAN (Sec. 3.3): the languages trained on, and the one that embeds the label descriptions
    languages: Tuple[str, ...] = ()
    label_language: str = ""
    #: GILE-MHAN: the dictionary of every language (and of the label language)
    dictionaries: Dict[str, Dictionary] = field(default_factory=dict)
    #: ``--encoder pretrained``/``hybrid``: the sentence encoder, which also embeds the task's texts and descriptions
    sentence_encoder: Optional[PretrainedSentenceEncoder] = None


class GileDataProvider:
    """What a :class:`GileClassifier` needs from the task that builds it (``--task gile_classification``): the data's
    side of the model."""

    def model_inputs(self, cfg) -> GileModelInputs:
        raise NotImplementedError


def pretrained_sentence_encoder(cfg, data: Union[str, Sequence[str]] = "") -> Optional[PretrainedSentenceEncoder]:
    """The sentence encoder of ``--encoder pretrained`` (``--pretrained-encoder``, trained with
    ``--finetune-encoder``), or of ``--encoder hybrid`` (frozen, with the lexical model of the ``lexical.json`` of
    ``data``: a data directory, or every language's of a multilingual model, which must all hold the same model),
    else None; ``cfg`` holds those options."""
    if cfg.encoder == "hybrid":
        models = {}
        for directory in [data] if isinstance(data, str) else data:
            path = os.path.join(directory, LEXICAL_FILE)
            models[path] = LexicalModel.load(path, "--encoder hybrid")
        (first, lexical), *others = models.items()
        for path, model in others:
            if model.fingerprint != lexical.fingerprint:
                raise InputError(f"{path} is not the lexical model of {first}: the languages of a multilingual "
                                 f"--encoder hybrid read one; preprocess each with --lexical-model {first}")
        return HybridTextEncoder(cfg.pretrained_encoder, lexical, cfg.lexical_dim)
    if cfg.encoder != "pretrained":
        return None
    return PretrainedSentenceEncoder(cfg.pretrained_encoder, finetune=bool(cfg.finetune_encoder))


def equal_capacity_joint_dim(hidden_dim: int, embed_dim: int, num_labels: int) -> int:
    """Eq. 19: ``d_j ≈ dh·|Y| / (dh + d)`` (at least 1); its multilingual form ``dh·Σ_i |k(i)| / (dh + d)`` with
    ``num_labels`` the labels of every language's classification unit together."""
    return max(1, round(hidden_dim * num_labels / (hidden_dim + embed_dim)))


@dataclass
class GileClassifierConfig(FairseqDataclass):
    encoder: ChoiceEnum(ENCODER_CHOICES) = field(
        default="wan", metadata={"help": "wan: word attention network; han: word + sentence attention (Sec. 2.1); "
                                 "pretrained: a sentence-transformers model (--pretrained-encoder) encodes the texts "
                                 "and the label descriptions; hybrid: its frozen embedding beside the texts' and "
                                 "descriptions' TF-IDF features (DATA/lexical.json: fairseq-joint-preprocess-gile "
                                 "--lexical-features) projected by a learned map"}
    )
    pretrained_encoder: str = field(
        default="", metadata={"help": "--encoder pretrained/hybrid: a local sentence-transformers model directory "
                              "(never downloaded); its dimension sets d = dh (plus --lexical-dim for hybrid)"}
    )
    lexical_dim: int = field(
        default=64, metadata={"help": "--encoder hybrid: d_l, the size of the TF-IDF features' learned projection "
                               "(h = [sentence embedding ; projection], d + d_l)", "range": POSITIVE_INT}
    )
    finetune_encoder: bool = field(
        default=False, metadata={"help": "--encoder pretrained: train the sentence encoder too (saved in the "
                                 "checkpoint); default frozen, with the embeddings cached beside the data"}
    )
    finetune_label_refresh: int = field(
        default=0, metadata={"help": "--finetune-encoder: 0 encodes the label descriptions with gradient at every "
                             "update; N > 0 encodes each training label's description without gradient once every N "
                             "updates (e.g. an epoch's), so that only the texts train the encoder: a step costs the "
                             "texts' pass alone (the descriptions' vectors lag the encoder by at most N updates)",
                             "range": NON_NEGATIVE_INT}
    )
    word_encoder: ChoiceEnum(LAYER_CHOICES) = field(default="dense", metadata={"help": "g_w of Eq. 1"})
    sentence_encoder: ChoiceEnum(LAYER_CHOICES) = field(default="dense", metadata={"help": "g_s of HAN"})
    embed_dim: int = field(default=100, metadata={"help": "d, the size of the shared word/label embedding E",
                                                  "range": POSITIVE_INT})
    embed_path: str = field(
        default="", metadata={"help": "pre-trained word vectors for E (word2vec text format, e.g. from "
                              "fairseq-joint-word-vectors); words the file lacks keep the random init. With "
                              "--languages, one file per language: LANG=FILE,LANG=FILE or a path with {lang} "
                              "(aligned vectors of one dimension, e.g. fairseq-joint-word-vectors --aligned)"}
    )
    freeze_embed: bool = field(default=False, metadata={"help": "do not train E (words and label descriptions)"})
    encoder_dim: int = field(default=100, metadata={"help": "dh, the size of the encoders and of h",
                                                    "range": POSITIVE_INT})
    attention_dim: int = field(default=100, metadata={"help": "size of the attention MLP f_w / f_s (Eq. 2)",
                                                      "range": POSITIVE_INT})
    encoder_activation: ChoiceEnum(("relu", "tanh", "sigmoid")) = field(
        default="relu", metadata={"help": "activation of the dense encoders (the paper: ReLU)"}
    )
    dropout: float = field(default=0.0, metadata={"help": "dropout on the word embeddings", "range": DROPOUT})
    sentence_end_tokens: str = field(
        default=". ! ? 。 ！ ？", metadata={"help": "space-separated tokens that end a sentence (HAN); those not in the "
                                        "dictionary are ignored"}
    )
    head: ChoiceEnum(HEAD_CHOICES) = field(
        default="gile", metadata={"help": "label-scoring head: linear (Eq. 3), bil_yh15, bil_n16 (Eq. 5), "
                                  "gile (Eq. 14), gile_label_only (Eq. 6a), gile_input_only (Eq. 6b)"}
    )
    joint_dim: str = field(
        default="auto", metadata={"help": "d_j of bil_yh15/gile: an integer, or auto for Eq. 19 (linear-head capacity; "
                                  "with --languages, of every language's classification unit)"}
    )
    joint_activation: ChoiceEnum(ACTIVATION_CHOICES) = field(
        default="relu", metadata={"help": "σ of the label/input projections (Eqs. 7-8)"}
    )
    joint_dropout: float = field(default=0.0, metadata={"help": "dropout on the input side in the joint space",
                                                        "range": DROPOUT})
    similarity_init: bool = field(
        default=False, metadata={"help": "start the dense word/sentence encoders and the head's projections as "
                                 "identity maps (zero biases), so the first scores are the similarity of the label "
                                 "vector and the text vector: a zero-shot prior that training on few labels keeps "
                                 "(a text that contains a label's description words scores that label high)"}
    )
    cosine_prior: float = field(
        default=0.0, metadata={"help": "--encoder pretrained/hybrid, frozen: at evaluation and prediction, add λ times "
                               "the sentence encoder's cosine of text and description to the logit of every label "
                               "unseen in training (the zero-shot prior beside the head, which scores the labels it "
                               "was trained on by itself; training does not see it); 0: off", "range": NON_NEGATIVE_FLOAT32}
    )
    seen_label_bias: bool = field(
        default=False, metadata={"help": "a bias b_y per label seen in training, started at its log-odds in the "
                                 "training data, so the head's projections need not learn the label prior; a label "
                                 "unseen in training gets the mean of the seen ones' (then --seen-score-offset "
                                 "calibrates the two groups); not for --head linear (it has one already)"}
    )
    share_encoder: bool = field(
        default=False, metadata={"help": "--languages: one word (and sentence) encoder g_w (g_s) for every language "
                                 "(MHAN-Enc; with --share-attention, MHAN-Both); default one per language"}
    )
    share_attention: bool = field(
        default=False, metadata={"help": "--languages: one word (and sentence) attention for every language "
                                 "(MHAN-Att; with --share-encoder, MHAN-Both); default one per language"}
    )
    cooccurrence_init: ChoiceEnum(COOCCURRENCE_INIT_CHOICES) = field(
        default="none", metadata={"help": "Kurata et al. 2016 init of the linear head's W: dedicated units per "
                                  "label co-occurrence pattern with weight UB, f*UB or sqrt(f)*UB"}
    )

    @staticmethod
    def validate(cfg) -> None:
        """The options of one model that belong together (and with the task's: a gile_classifier is trained by
        ``--task gile_classification``, ``--languages`` makes it multilingual)."""
        m, gile_task = cfg.model, issubclass(registered(cfg, "task"), GileDataProvider)
        multilingual = gile_task and bool(cfg.task.languages)
        sentence, linear = m.encoder in SENTENCE_ENCODERS, m.head == "linear"
        unset = PRESETS.get(arch(m), GileClassifierConfig())  # what --arch sets: an option of another value was given
        words = [flag(name) for name in WORD_ENCODER_OPTIONS if str(getattr(m, name)) != str(getattr(unset, name))]
        needs = (("--arch {arch} is a gile_classifier, which only --task gile_classification trains (not --task "
                  "{cfg.task._name}): add --task gile_classification", not gile_task),
                 ("--joint-dim must be a positive integer or auto, got {m.joint_dim!r}",
                  str(m.joint_dim) != "auto" and number_problem(as_number(str(m.joint_dim), True), POSITIVE_INT)
                  is not None),
                 ("--cooccurrence-init initializes the linear head's hidden->output weight W; --head {m.head} has "
                  "none: use --head linear or --cooccurrence-init none", m.cooccurrence_init != "none" and not linear),
                 ("--cooccurrence-init dedicates hidden units to sets of two or more labels a text carries together; "
                  "--classification-mode multiclass gives each text one label: drop --cooccurrence-init",
                  m.cooccurrence_init != "none" and gile_task and cfg.task.classification_mode == "multiclass"),
                 ("--similarity-init starts the head at the label-text similarity, but --head linear has no label "
                  "vectors: use a joint head (--head gile, bil_n16, ...)", m.similarity_init and linear),
                 ("--seen-label-bias adds a bias per training label, which --head linear has already: drop "
                  "--seen-label-bias or use a joint head", m.seen_label_bias and linear),
                 ("--cosine-prior {m.cosine_prior} adds a frozen sentence encoder's cosine of text and description to "
                  "a joint head's logits: use it with --encoder pretrained or hybrid, without --finetune-encoder, and "
                  "a joint head (--head gile, ...), or drop it",
                  m.cosine_prior and (not sentence or m.finetune_encoder or linear)),
                 ("--finetune-label-refresh {m.finetune_label_refresh} sets how often a fine-tuned encoder re-encodes "
                  "the label descriptions: add --finetune-encoder, or drop it",
                  m.finetune_label_refresh and not m.finetune_encoder),
                 ("--finetune-encoder trains the sentence encoder of --encoder pretrained, not --encoder {m.encoder} "
                  "(han and wan have none, hybrid's stays frozen): use --encoder pretrained, or drop --finetune-encoder",
                  m.finetune_encoder and m.encoder != "pretrained"),
                 ("--share-encoder/--share-attention share parts of per-language HAN/WAN encoders; --encoder "
                  "{m.encoder} is one sentence encoder for every language: drop them",
                  (m.share_encoder or m.share_attention) and sentence),
                 ("--share-encoder/--share-attention share parts of the encoders of several languages: give "
                  "--languages (e.g. en,pl), or drop them",
                  (m.share_encoder or m.share_attention) and not sentence and not multilingual),
                 ("--encoder-dim {m.encoder_dim} must be even for bigru (two directions of dim/2)",
                  not sentence and m.encoder_dim % 2 and "bigru" in encoder_layers(m)),
                 ("--similarity-init starts the dense encoders as identity maps; a bigru or gru encoder has no "
                  "identity form: use --word-encoder/--sentence-encoder dense",
                  m.similarity_init and not sentence and set(encoder_layers(m)) != {"dense"}),
                 ("--similarity-init starts --head gile at the cosine exactly for --joint-activation relu, not "
                  "{m.joint_activation}: use relu, or --head bil_n16",
                  m.similarity_init and sentence and m.head == "gile" and m.joint_activation != "relu"),
                 # options the chosen head or encoder does not read: given, they were ignored without a word (and a
                 # --pretrained-encoder recorded by a WAN model was then asked for by every command loading it)
                 ("--joint-dim {m.joint_dim} is d_j of --head bil_yh15 or gile; --head {m.head} has no joint space of "
                  "that size: drop --joint-dim", str(m.joint_dim) != unset.joint_dim and m.head not in NEEDS_JOINT_DIM),
                 ("--joint-activation {m.joint_activation} is σ of a head's non-linear projection; --head {m.head} "
                  "has none: drop --joint-activation",
                  m.head not in READS_ACTIVATION and str(m.joint_activation) != unset.joint_activation),
                 ("--pretrained-encoder {m.pretrained_encoder} is the sentence encoder of --encoder pretrained or "
                  "hybrid; --encoder {m.encoder} reads none: drop it, or use --encoder pretrained",
                  m.pretrained_encoder and not sentence),
                 ("{words} shape{s} the word encoder of --encoder wan and han (its embedding E, g_w, the attention); "
                  "--encoder {m.encoder} reads the texts with its sentence encoder: drop {words}", sentence and words),
                 ("--lexical-dim {m.lexical_dim} sizes the TF-IDF channel of --encoder hybrid; --encoder {m.encoder} "
                  "has none: drop it", m.lexical_dim != unset.lexical_dim and m.encoder != "hybrid"),
                 ("--sentence-encoder and --sentence-end-tokens shape HAN's sentence level; --encoder {m.encoder} has "
                  "none: use --encoder han, or drop them", m.encoder != "han" and (
                      str(m.sentence_encoder) != unset.sentence_encoder or m.sentence_end_tokens != unset.sentence_end_tokens)))
        for message, refused in needs:
            if refused:
                raise OptionError(message.format(m=m, cfg=cfg, arch=arch(m), words=" and ".join(words),
                                                 s="s" if len(words) == 1 else ""))


def encoder_layers(cfg) -> Tuple[str, ...]:
    """The layers g_w (and g_s of HAN) of a WAN/HAN encoder's configuration."""
    return (str(cfg.word_encoder), str(cfg.sentence_encoder)) if cfg.encoder == "han" else (str(cfg.word_encoder),)


@register_model("gile_classifier", dataclass=GileClassifierConfig)
class GileClassifier(UpdateCountMixin, DataFingerprintMixin, ResumeStateMixin, BaseFairseqModel):
    """Document encoder + head; ``forward`` gives h, :meth:`label_scores` the logits over a label set."""

    data_names = (
        ("dictionary", "use the data directory the model was trained on (its dict.txt; with --languages every "
         "DATA/LANG/dict.txt), --data of the fairseq-joint-* commands, or binarize with it"),
        ("training label list", "use the data directory the model was trained on (its labels.train.txt; with "
         "--languages every DATA/LANG/labels.train.txt), --data of the fairseq-joint-* commands"),
    )

    def __init__(self, cfg: GileClassifierConfig, embed_tokens: Optional[nn.Module], encoder: nn.Module,
                 head: nn.Module, languages: Optional[List[str]] = None, label_language: str = ""):
        super().__init__()
        self.cfg = cfg
        #: E, the encoder and the head; a multilingual model's are ModuleDicts by language (E also of the label
        #: language), their shared parts the same modules/parameters
        self.embed_tokens = embed_tokens
        self.encoder = encoder
        self.head = head
        self.head_name = str(cfg.head)
        #: the languages of a multilingual model (--languages), else empty
        self.languages: List[str] = list(languages or [])
        self.label_language = label_language
        #: b_y of the labels seen in training (``--seen-label-bias``), else None
        self.label_bias: Optional[nn.Parameter] = None
        #: the pretrained sentence encoder (``--encoder pretrained``), else None
        self.sentence_encoder = encoder if isinstance(encoder, PretrainedSentenceEncoder) else None
        #: --finetune-label-refresh: the training labels' vectors by training row, encoded without gradient since the
        #: last refresh
        self.label_vector_cache: Dict[int, torch.Tensor] = {}
        #: a fine-tuned encoder's vectors of the label set being evaluated (:meth:`evaluated_label_vectors`)
        self.evaluation_label_vectors: Dict[tuple, torch.Tensor] = {}
        if self.sentence_encoder is not None:
            enc = self.sentence_encoder
            self.register_buffer("encoder_signature", torch.tensor([enc.dim, int(enc.fingerprint[:15], 16)]),
                                 persistent=True)

    @classmethod
    def build_model(cls, cfg: GileClassifierConfig, task):
        """fairseq's entry point: :meth:`build` over the task's description of the data (``task.model_inputs``)."""
        return cls.build(cfg, task.model_inputs(cfg))

    @classmethod
    def build(cls, cfg: GileClassifierConfig, inputs: GileModelInputs):
        """The model of ``cfg`` (its options checked together by :meth:`GileClassifierConfig.validate`) over the data
        ``inputs`` describes."""
        if cfg.head != "linear" and not inputs.has_label_descriptions:
            raise InputError(f"--head {cfg.head} scores label descriptions but none were given: pass --label-file "
                             "label<TAB>description (or preprocess with --labels), or use --head linear")
        if (cfg.encoder in SENTENCE_ENCODERS) != (inputs.sentence_encoder is not None):
            raise ValueError(f"--encoder {cfg.encoder}, but the task embeds its texts with "
                             f"{inputs.sentence_encoder or 'no sentence encoder'}: give it the model's encoder options")
        if cfg.encoder in SENTENCE_ENCODERS:
            return cls.build_pretrained(cfg, inputs)
        if inputs.languages:
            return cls.build_multilingual(cfg, inputs)
        embed = cls.build_embedding(cfg, inputs.dictionary, cfg.embed_path)  # no path when built for a checkpoint
        encoder = cls.build_encoder(cfg, inputs.dictionary)
        head = cls.build_head(cfg, len(inputs.train_labels))
        return cls.finish(cfg, inputs, embed, encoder, head)

    @classmethod
    def build_multilingual(cls, cfg, inputs: GileModelInputs):
        """GILE-MHAN (Sec. 3.3): per language an embedding and an encoder (their word/sentence encoders shared with
        --share-encoder, their attentions with --share-attention: MHAN-Enc/-Att/-Both) and a head whose joint space
        (U, b_u, V, b_v) is one for all languages; only the classification unit (w, b; W, b of --head linear) is the
        language's own. The label language's embedding embeds the label descriptions."""
        languages = list(inputs.languages)
        embed_languages = list(dict.fromkeys(languages + [inputs.label_language]))
        paths = embedding_paths(cfg.embed_path, embed_languages)
        embeds = nn.ModuleDict({lang: cls.build_embedding(cfg, inputs.dictionaries[lang], paths.get(lang, ""),
                                                          f"--embed-path ({lang})") for lang in embed_languages})
        encoders = nn.ModuleDict({lang: cls.build_encoder(cfg, inputs.dictionaries[lang]) for lang in languages})
        first = encoders[languages[0]]
        for lang in languages[1:]:
            share_encoder_parts_(encoders[lang], first, bool(cfg.share_encoder), bool(cfg.share_attention))
        heads = cls.build_language_heads(cfg, inputs)
        sharing = {(False, False): "none", (True, False): "MHAN-Enc", (False, True): "MHAN-Att",
                   (True, True): "MHAN-Both"}[(bool(cfg.share_encoder), bool(cfg.share_attention))]
        logger.info(f"multilingual {cfg.encoder} + {cfg.head} over {', '.join(languages)}: shared encoder parts: "
                    f"{sharing}; one joint space, a classification unit per language")
        return cls.finish(cfg, inputs, embeds, encoders, heads)

    @classmethod
    def build_language_heads(cls, cfg, inputs: GileModelInputs) -> nn.ModuleDict:
        """A head per language, the joint space (U, b_u, V, b_v) the first language's for all (Sec. 3.3); d_j of
        ``--joint-dim auto`` by Eq. 19's multilingual form (|Y| labels in each of M classification units)."""
        languages = inputs.languages
        dim = inputs.sentence_encoder.output_dim if inputs.sentence_encoder is not None else None
        heads = nn.ModuleDict({lang: cls.build_head(cfg, len(inputs.train_labels), dim, dim, len(languages))
                               for lang in languages})
        return cls.share_joint_space(heads)

    @staticmethod
    def share_joint_space(heads: nn.ModuleDict) -> nn.ModuleDict:
        """``heads`` (one per language) with the first one's joint space (U, b_u, V, b_v) for all (Sec. 3.3)."""
        languages = list(heads)
        for lang in languages[1:]:
            for name in SHARED_HEAD_PARAMETERS:
                if getattr(heads[languages[0]], name) is not None:
                    setattr(heads[lang], name, getattr(heads[languages[0]], name))
        return heads

    @staticmethod
    def build_embedding(cfg, dictionary, embed_path: str, option: str = "--embed-path") -> nn.Embedding:
        """E for ``dictionary`` (N(0, d^-1/2), padding zero), with the vectors of ``embed_path`` where given."""
        embed = nn.Embedding(len(dictionary), cfg.embed_dim, padding_idx=dictionary.pad())
        nn.init.normal_(embed.weight, 0.0, cfg.embed_dim ** -0.5)
        nn.init.zeros_(embed.weight[dictionary.pad()])
        if embed_path:
            found, total = load_word_vectors_(embed, dictionary, embed_path, option)
            logger.info(f"{option} {embed_path}: {found} of {len(dictionary)} dictionary words have a pre-trained "
                        f"vector ({total} vectors in the file)")
        if cfg.freeze_embed:
            embed.weight.requires_grad = False
        return embed

    @staticmethod
    def build_encoder(cfg, dictionary) -> nn.Module:
        """WAN or HAN (Sec. 2.1) over ``dictionary``'s ids; identity-started with --similarity-init."""
        if cfg.encoder == "wan":
            encoder = WordAttentionEncoder(cfg.embed_dim, cfg.encoder_dim, cfg.attention_dim, str(cfg.word_encoder),
                                           str(cfg.encoder_activation), cfg.dropout)
        else:
            ends = [dictionary.index(t) for t in cfg.sentence_end_tokens.split()]
            ends = [i for i in ends if i != dictionary.unk()]
            if not ends:
                raise OptionError(f"--sentence-end-tokens {cfg.sentence_end_tokens!r}: none is in the dictionary; "
                                 "give tokens that end sentences in the data")
            encoder = HierarchicalAttentionEncoder(cfg.embed_dim, cfg.encoder_dim, cfg.attention_dim, ends,
                                                   str(cfg.word_encoder), str(cfg.sentence_encoder), str(cfg.encoder_activation),
                                                   cfg.dropout)
        if cfg.similarity_init:
            layers = [encoder.word] if cfg.encoder == "wan" else [encoder.words.word, encoder.sentence]
            for layer in layers:
                layer.identity_init_()
        return encoder

    @classmethod
    def finish(cls, cfg, inputs: GileModelInputs, embed, encoder, head):
        """Bias and Kurata initialisation, the model, the data fingerprints (``head`` is one OutputLayer, or a
        ModuleDict of one per language)."""
        num_labels = len(inputs.train_labels)
        rows = inputs.train_label_rows
        heads = list(head.values()) if isinstance(head, nn.ModuleDict) else [head]
        label_bias = None
        if cfg.seen_label_bias:
            counts = label_counts(rows, num_labels).float()
            p = (counts / max(1, len(rows))).clamp(1e-6, 1 - 1e-6)
            label_bias = nn.Parameter(torch.log(p / (1 - p)))
            with torch.no_grad():
                for h in heads:
                    if h.bias is not None:
                        h.bias.zero_()  # the prior is in b_y
        else:
            # b starts at the log-odds of the mean label density (the sigmoids of Eq. 13 start at the prior
            # rather than at 0.5, which a shared scalar b would need thousands of updates to leave)
            density = sum(len(r) for r in rows) / max(1, len(rows) * num_labels)
            with torch.no_grad():
                for h in heads:
                    if h.bias is not None:
                        h.bias.fill_(math.log(density / (1.0 - density)) if 0.0 < density < 1.0 else 0.0)
        if cfg.cooccurrence_init != "none":
            patterns = label_patterns(rows)
            for h in heads:
                used = cooccurrence_init_(h.weight, patterns, str(cfg.cooccurrence_init))
            log = logger.info if patterns else logger.warning  # (no text of two labels or more: W stays random)
            log(f"Kurata init ({cfg.cooccurrence_init}): {used} of {cfg.encoder_dim} hidden units dedicated to the "
                f"most frequent of {len(patterns)} label co-occurrence patterns (sets of two or more labels)")
        model = cls(cfg, embed, encoder, head, list(inputs.languages), inputs.label_language)
        if label_bias is not None:
            model.label_bias = label_bias
        if inputs.languages:
            symbols = [f"{lang} {w}" for lang, d in sorted(inputs.dictionaries.items()) for w in d.symbols]
        else:
            symbols = inputs.dictionary.symbols
        model.record_data(symbols, list(inputs.train_labels))
        return model

    @classmethod
    def build_pretrained(cls, cfg, inputs: GileModelInputs):
        """``--encoder pretrained``: h and the label vectors are the sentence encoder's normalized embeddings of the
        text and of the descriptions, so d = dh = its dimension; ``--similarity-init`` starts the head at their
        cosine (see :meth:`OutputLayer.cosine_init_`)."""
        encoder = inputs.sentence_encoder
        defaults, dim = GileClassifierConfig(), encoder.output_dim
        for name in ("embed_dim", "encoder_dim"):
            value = getattr(cfg, name)
            if value not in (dim, getattr(defaults, name)):
                lexical = f" with --lexical-dim {encoder.lexical_dim}" if isinstance(encoder, HybridTextEncoder) else ""
                raise OptionError(f"{flag(name)} {value} disagrees with --pretrained-encoder {cfg.pretrained_encoder}"
                                  f"{lexical} ({dim}-d vectors): drop {flag(name)} (the encoder sets d = dh = {dim})")
        languages = inputs.languages
        logger.info(f"--pretrained-encoder {cfg.pretrained_encoder}: {encoder.dim}-d sentence vectors, "
                    + ("fine-tuned" if encoder.finetune else "frozen (embeddings cached beside the data)")
                    + (f", beside {encoder.lexical.num_features} TF-IDF features of {encoder.lexical.path} projected "
                       f"to {encoder.lexical_dim} dimensions (d = {dim})" if isinstance(encoder, HybridTextEncoder)
                       else "")
                    + (f", one encoder for {', '.join(languages)}; one joint space, a classification unit per language"
                       if languages else ""))
        head = cls.build_language_heads(cfg, inputs) if languages else cls.build_head(cfg, len(inputs.train_labels),
                                                                                      dim, dim)
        if cfg.similarity_init and cfg.head == "gile":
            for h in (head.values() if languages else [head]):
                h.cosine_init_()  # the shared U, V once per language: the same values
        return cls.finish(cfg, inputs, None, encoder, head)

    @staticmethod
    def build_head(cfg: GileClassifierConfig, num_labels: int, embed_dim: Optional[int] = None,
                   encoder_dim: Optional[int] = None, num_languages: int = 1) -> OutputLayer:
        """The head over d-dimensional label vectors (``embed_dim``) and dh-dimensional texts (``encoder_dim``; both
        the sentence encoder's dimension for ``--encoder pretrained``/``hybrid``, by default ``cfg``'s
        ``--embed-dim``/``--encoder-dim``); ``--joint-dim auto`` is Eq. 19 (of ``num_languages`` classification
        units of ``num_labels``: its multilingual form), or ``4 d`` for ``--head gile --similarity-init`` over a
        sentence encoder (the cosine start's four blocks of d, :meth:`OutputLayer.cosine_init_`)."""
        embed_dim, encoder_dim = embed_dim or cfg.embed_dim, encoder_dim or cfg.encoder_dim
        joint_dim = None
        if cfg.head in NEEDS_JOINT_DIM:
            if str(cfg.joint_dim) != "auto":
                joint_dim = int(cfg.joint_dim)
            elif cfg.similarity_init and cfg.head == "gile" and cfg.encoder in SENTENCE_ENCODERS:
                joint_dim = 4 * embed_dim
            else:
                joint_dim = equal_capacity_joint_dim(encoder_dim, embed_dim, num_labels * num_languages)
        class_dim = None if cfg.head == "linear" else embed_dim
        spec = OutputLayerSpec(**HEADS[str(cfg.head)], joint_dim=joint_dim, activation=str(cfg.joint_activation),
                               dropout=cfg.joint_dropout, init="identity" if cfg.similarity_init else "fairseq")
        return OutputLayer(spec, num_classes=num_labels, input_dim=encoder_dim, class_dim=class_dim)

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        """A checkpoint's sentence encoder (``encoder_signature``: its dimension and files) and lexical channel
        (``--encoder hybrid``'s ``lexical_signature``: the TF-IDF model and projection size) are the model's."""
        self.evaluation_label_vectors.clear()
        encoder, own = self.sentence_encoder, getattr(self, "encoder_signature", None)
        lexical = encoder.lexical_signature if isinstance(encoder, HybridTextEncoder) else None
        for what, key, built in (("a pretrained sentence encoder", "encoder_signature", own),
                                 ("the lexical channel of --encoder hybrid", "encoder.lexical_signature", lexical)):
            if (state_dict.get(key) is None) != (built is None):
                raise CheckpointError(f"the checkpoint was trained {'with' if built is None else 'without'} {what}, "
                                      f"but the model is built with --encoder {self.cfg.encoder}: load it with the "
                                      "configuration it was trained with")
        if lexical is not None:
            check_signature(state_dict["encoder.lexical_signature"], lexical, encoder.lexical.path)
        saved = state_dict.get("encoder_signature")
        if saved is not None:
            if int(saved[0]) != int(own[0]):
                raise CheckpointError(f"the checkpoint was trained with a {int(saved[0])}-d sentence encoder, but "
                                      f"--pretrained-encoder {encoder.path} gives {int(own[0])}-d vectors: give the "
                                      "encoder it was trained with")
            if int(saved[1]) != int(own[1]):  # a fine-tuned encoder's tokenizer and architecture are the directory's
                raise CheckpointError(f"--pretrained-encoder {encoder.path} " + (
                    "is not the encoder directory the checkpoint was fine-tuned from (its files differ)"
                    if encoder.finetune else "holds other weights than the frozen encoder the checkpoint was trained "
                    "with") + ": give that encoder's directory")
        state_dict = self.check_data(state_dict)
        self.keep_saved_joint_dim(state_dict)
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)

    def keep_saved_joint_dim(self, state_dict) -> None:
        """A multilingual checkpoint of ``--joint-dim auto`` saved when it took Eq. 19's monolingual form (d_j of one
        classification unit's labels) keeps its d_j: the heads are built again at the saved size."""
        if not self.languages or str(self.cfg.joint_dim) != "auto" or self.head_name not in NEEDS_JOINT_DIM:
            return
        first = self.head[self.languages[0]]
        saved = state_dict.get(f"head.{self.languages[0]}.class_weight")
        if saved is None or saved.shape[1:] != first.class_weight.shape[1:] or saved.shape[0] == first.joint_dim:
            return
        old_rule = equal_capacity_joint_dim(first.input_dim, first.class_dim, first.num_classes)
        if saved.shape[0] != old_rule:
            return  # another model: the load refuses it
        said = (f"the checkpoint's d_j is {old_rule}, what --joint-dim auto gave of one classification unit's labels "
                f"(Eq. 19 as fairseq-joint took it before its multilingual form, {first.joint_dim} here)")
        if torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
            # the heads built again would be outside the data-parallel wrapper fairseq built around the model
            raise CheckpointError(f"{said}: train on from it with --joint-dim {old_rule}")
        logger.info(f"{said}: the model keeps it")
        spec = replace(first.spec, joint_dim=old_rule)
        self.head = self.share_joint_space(nn.ModuleDict({
            lang: OutputLayer(spec, num_classes=head.num_classes, input_dim=head.input_dim, class_dim=head.class_dim)
            for lang, head in self.head.items()}).to(first.class_weight))

    @property
    def scores_unseen_labels(self) -> bool:
        """Every head but ``linear`` scores any label from its description (zero-shot)."""
        return self.head_name != "linear"

    @property
    def head_dtype(self):
        return next(self.head.parameters()).dtype

    @property
    def reads_any_language(self) -> bool:
        """A multilingual model over one sentence encoder reads a text without being told its language: the encoder
        and the joint space are every language's, and only the classification units are each language's (a text of
        no given language is scored with their mean, :meth:`label_scores`); one over per-language word encoders
        (WAN/HAN) needs the language to pick its dictionary and encoder."""
        return bool(self.languages) and self.sentence_encoder is not None

    def check_language(self, lang: Optional[str]) -> Optional[str]:
        """``lang`` for a multilingual model (it must be one of its languages; None where :attr:`reads_any_language`),
        None for a monolingual one."""
        if not self.languages:
            return None
        if lang is None and self.reads_any_language:
            return None
        trained = f"the model was trained on {', '.join(self.languages)}"
        if lang is None:  # per-language word encoders need it
            raise OptionError(f"{trained} over per-language word encoders: give the texts' language (--lang), one of "
                              "them")
        if lang not in self.languages:
            raise OptionError(f"{trained}, not {lang!r}: give one of them (--lang), or train a model with {lang}")
        return lang

    def forward(self, src_tokens, src_lengths=None, src_embeddings=None, lang=None, **kwargs):
        """The document vectors h (B, dh); with a frozen pretrained encoder, ``src_embeddings`` (its cached vectors);
        a multilingual model encodes with the encoder of ``lang``."""
        if self.languages:
            lang = self.check_language(lang)
        if self.languages and self.sentence_encoder is None:
            embed = self.embed_tokens[lang]
            return self.encoder[lang](embed(src_tokens), src_tokens.ne(embed.padding_idx), src_tokens)
        if self.sentence_encoder is not None:
            if src_embeddings is not None:
                return self.sentence_encoder.features(src_embeddings).to(self.head_dtype)
            if not self.sentence_encoder.finetune:
                raise ValueError("a frozen pretrained encoder reads the texts' embeddings (src_embeddings: "
                                 "model.embed_texts(texts, device)), not token ids")
            return self.sentence_encoder(src_tokens).to(self.head_dtype)
        mask = src_tokens.ne(self.embed_tokens.padding_idx)
        return self.encoder(self.embed_tokens(src_tokens), mask, src_tokens)

    def embed_texts(self, texts, device: torch.device) -> torch.Tensor:
        """h of raw texts with the pretrained encoder (normalized sentence embeddings, no autograd; with the hybrid
        encoder's lexical features beside them), on ``device`` (the model's)."""
        encoder = self.sentence_encoder
        with torch.no_grad():
            inputs = encoder.collate(encoder.inputs(encoder.embed(texts), texts)).to(device)
            return encoder.features(inputs).to(self.head_dtype)

    def label_vectors(self, label_tokens: torch.Tensor) -> torch.Tensor:
        """e_j: the mean of the description's word vectors in E (Sec. 2.2), padding masked; with a pretrained encoder,
        its embedding of the description (``label_tokens`` then holds the cached vectors, or the encoder's token ids
        when it is fine-tuned)."""
        if self.sentence_encoder is not None:
            if label_tokens.is_floating_point():
                return self.sentence_encoder.features(label_tokens).to(self.head_dtype)
            return self.sentence_encoder(label_tokens).to(self.head_dtype)
        embed = self.embed_tokens[self.label_language] if self.languages else self.embed_tokens
        mask = label_tokens.ne(embed.padding_idx).unsqueeze(-1).type_as(embed.weight)
        return (embed(label_tokens) * mask).sum(1) / mask.sum(1).clamp(min=1.0)

    def refreshed_label_vectors(self, label_tokens: torch.Tensor, train_index: torch.Tensor) -> torch.Tensor:
        """``--finetune-label-refresh N``: the vectors of the training labels ``train_index`` (rows of ``label_tokens``),
        each encoded without gradient the first time it is asked for since the last refresh (:meth:`set_num_updates`)."""
        rows = train_index.tolist()
        missing = [i for i, row in enumerate(rows) if row not in self.label_vector_cache]
        if missing:
            with torch.no_grad():
                vectors = self.label_vectors(label_tokens[missing])
            for i, vector in zip(missing, vectors):
                self.label_vector_cache[rows[i]] = vector
        return torch.stack([self.label_vector_cache[row] for row in rows])

    def evaluated_label_vectors(self, label_tokens: torch.Tensor) -> torch.Tensor:
        """A fine-tuned encoder's vectors of a label set in evaluation without gradient, encoded once per set of
        descriptions (token ids) while the weights stay as they are: a validation scores every batch against the same
        descriptions. :meth:`train` and :meth:`load_state_dict` drop them."""
        key = (tuple(label_tokens.shape), label_tokens.cpu().numpy().tobytes())
        if key not in self.evaluation_label_vectors:
            self.evaluation_label_vectors.clear()  # one label set at a time
            self.evaluation_label_vectors[key] = self.label_vectors(label_tokens)
        return self.evaluation_label_vectors[key]

    def train(self, mode: bool = True):
        self.evaluation_label_vectors.clear()  # the weights may change from here on
        return super().train(mode)

    def _apply(self, fn, *args, **kwargs):
        """``.to()``, ``.cuda()``, ``.half()``: the label vectors kept between calls are computed again where (and as)
        the weights are now."""
        self.evaluation_label_vectors.clear()
        self.label_vector_cache.clear()
        return super()._apply(fn, *args, **kwargs)

    def resume_state(self) -> Optional[dict]:
        """``--finetune-label-refresh``: the training labels' vectors encoded since the last refresh, by training row
        (a resume encoding them again with the encoder of the resumed update ended elsewhere than the run that never
        stopped)."""
        if not self.label_vector_cache:
            return None
        rows = sorted(self.label_vector_cache)
        return {"label_vector_rows": torch.tensor(rows),
                "label_vectors": torch.stack([self.label_vector_cache[row] for row in rows]).cpu()}

    def load_resume_state(self, state: Optional[dict]) -> None:
        self.label_vector_cache.clear()
        if state:
            vectors = state["label_vectors"].to(next(self.head.parameters()))
            self.label_vector_cache.update(zip(state["label_vector_rows"].tolist(), vectors))

    def set_num_updates(self, num_updates):
        """fairseq's update count; every ``--finetune-label-refresh`` updates the cached label vectors are dropped (the
        next batches encode them again with the encoder as trained so far)."""
        super().set_num_updates(num_updates)
        if self.cfg.finetune_label_refresh and num_updates % self.cfg.finetune_label_refresh == 0:
            self.label_vector_cache.clear()

    def check_scorable(self, train_index: torch.Tensor, label_names: Optional[Sequence[str]] = None,
                       source: str = "") -> None:
        """Refuse, for ``--head linear``, the labels unseen in training (``train_index`` -1), naming the first of
        ``label_names`` and where they come from (``source``, e.g. ``" of labels.tsv"``)."""
        unseen = (train_index < 0).nonzero().flatten()
        if not self.scores_unseen_labels and unseen.numel():
            first = f" (e.g. {label_names[int(unseen[0])]!r})" if label_names else ""
            raise InputError(f"--head linear cannot score the {unseen.numel()} label(s){source} it never saw in "
                             f"training{first}: train a joint head (--head gile) to score unseen labels")

    def label_scores(self, features, label_tokens=None, train_index=None, label_names=None, lang=None):
        """Logits (B, L) of the given labels: descriptions ``label_tokens`` (L, T), training rows ``train_index``;
        a multilingual model scores with the classification unit of ``lang``, and a text of no given language (where
        :attr:`reads_any_language`) with the mean of every language's unit's logits."""
        lang = self.check_language(lang)
        if not self.languages:
            heads = [self.head]
        else:
            heads = [self.head[lang]] if lang is not None else [self.head[other] for other in self.languages]

        def head(*args, **kwargs):  # the one unit, or the mean of the units' logits
            logits = [unit(*args, **kwargs) for unit in heads]
            return logits[0] if len(logits) == 1 else torch.stack(logits).mean(0)

        if self.head_name == "linear":
            self.check_scorable(train_index, label_names)
            return head(features, ids=train_index)
        finetuned = self.sentence_encoder is not None and self.sentence_encoder.finetune
        if finetuned and self.training and self.cfg.finetune_label_refresh:
            label_vectors = self.refreshed_label_vectors(label_tokens, train_index)
        elif finetuned and not self.training and not torch.is_grad_enabled():
            label_vectors = self.evaluated_label_vectors(label_tokens)
        else:
            label_vectors = self.label_vectors(label_tokens)
        logits = head(features, class_inputs=label_vectors)
        if self.cfg.cosine_prior and not self.training:  # the frozen encoder's vectors: the first d coordinates
            d = self.sentence_encoder.dim
            unseen = (train_index < 0).to(logits.dtype)  # the head scores the labels it was trained on by itself
            prior = cosine(features[:, :d], label_vectors[:, :d]).to(logits.dtype)
            logits = logits + self.cfg.cosine_prior * prior * unseen
        if self.label_bias is not None:
            bias = torch.where(train_index >= 0, self.label_bias[train_index.clamp(min=0)], self.label_bias.mean())
            logits = logits + bias.to(logits.dtype)
        return logits


@register_model_architecture("gile_classifier", "gile_pretrained")
def gile_pretrained(args) -> None:
    """``--arch gile_pretrained --pretrained-encoder PATH``: GILE (Eq. 14) over a pretrained sentence encoder with what
    measured best on debtags (studies/gile.md, "One model against the two tools"): the hybrid encoder (the frozen
    sentence embedding beside the texts' TF-IDF features projected to 64 dimensions; the data preprocessed with
    ``fairseq-joint-preprocess-gile --lexical-features``), the head started at the cosine of text and description
    (``--similarity-init``), a bias per training label (``--seen-label-bias``), and the encoder's cosine added to the
    unseen labels' logits at prediction (``--cosine-prior 20``). Trained 2 epochs with the learning rate decayed
    linearly to 0, it scored seen AvgPr above TF-IDF + logistic regression and unseen AvgPr above the encoder's cosine.
    ``--encoder pretrained`` drops the lexical channel (data without ``lexical.json``). Other options keep
    ``gile_classifier``'s defaults; any of these can still be given."""
    preset(args, "gile_pretrained")


@register_model_architecture("gile_classifier", "gile_multilingual")
def gile_multilingual(args) -> None:
    """``--arch gile_multilingual --pretrained-encoder STUDENT`` with ``--task gile_classification --languages
    en,it,...``: one model for texts in many languages and English label descriptions (GILE-MHAN, Sec. 3.3, over one
    encoder): ``gile_pretrained``'s hybrid encoder and head, the sentence encoder a multilingual student of an English
    one (``fairseq-joint-distill-encoder``), the lexical model one for every language (``fairseq-joint-preprocess-gile
    --lexical-texts`` over every language's training texts, ``--lexical-tokenizer gile``) and its projection wider than
    in English (``--lexical-dim 128``: nine languages' words share it); the joint space shared, the classification unit
    each language's. Trained 1 epoch with the learning rate decayed linearly to 0 (a second one overfits the smaller
    languages' seen labels). examples/gile/multilingual.sh makes the student, the data and the model;
    studies/gile-multilingual.md measured it."""
    preset(args, "gile_multilingual")


#: the options of the preset architectures, by ``--arch``; every other option keeps ``gile_classifier``'s default
PRESETS = {"gile_pretrained": GileClassifierConfig(encoder="hybrid", head="gile", similarity_init=True,
                                                   seen_label_bias=True, cosine_prior=20.0),
           "gile_multilingual": GileClassifierConfig(encoder="hybrid", head="gile", similarity_init=True,
                                                     seen_label_bias=True, cosine_prior=20.0, lexical_dim=128)}


def preset(args, name: str) -> None:
    """Fill the options ``args`` leaves unset with :data:`PRESETS` ``[name]`` (a preset architecture's), then refuse an
    encoder that is not a pretrained sentence encoder."""
    for field_name in GileClassifierConfig.__dataclass_fields__:
        if not field_name.startswith("_") and getattr(args, field_name, None) is None:
            setattr(args, field_name, getattr(PRESETS[name], field_name))
    if getattr(args, "encoder", None) not in SENTENCE_ENCODERS:
        raise OptionError(f"--arch {name} is GILE over a pretrained sentence encoder (--encoder hybrid or "
                          f"pretrained), not --encoder {args.encoder}: use --arch gile_classifier")
