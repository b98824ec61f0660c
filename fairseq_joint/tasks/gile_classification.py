"""Task ``gile_classification``: texts with one or more labels, every label described by a text
(Pappas & Henderson 2019, "GILE", Secs. 2-3).

Data directory (written by ``fairseq-joint-preprocess-gile``):

* ``dict.txt`` — one fairseq Dictionary shared by the input words and the label-description words
  (the paper shares E between both, Sec. 2.2);
* ``{split}.input.{bin,idx}`` — the tokenized texts; ``{split}.labels`` — their labels, one line per
  text, whitespace-separated;
* ``labels.train.txt`` — the labels that training examples carry (training sees only those; their order
  is the row order of the ``linear`` head's W);
* ``labels.tsv`` — ``label<TAB>description`` for every label (optional for ``--head linear``);
* ``{split}.text`` — the raw texts, one JSON string per line, read by a pretrained sentence encoder
  (``--encoder pretrained``), whose embeddings are cached in ``embeddings/`` (see
  :mod:`fairseq_joint.modules.sentence_encoder`).

Training scores the training labels only. Validation/test score every label of ``--eval-label-file``
(default ``--label-file``), which may be a larger set; labels absent from ``labels.train.txt`` are the
*unseen* (zero-shot) labels and are reported separately from the *seen* ones (Table 2's two halves).
Label descriptions are tokenized with :func:`tokenize` and binarized with the shared dictionary when the
task loads them, so any label file can be used at evaluation or prediction time.

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
"""

import contextlib
import copy
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional

import numpy as np
import torch
from fairseq import metrics as fairseq_metrics
from fairseq.data import Dictionary, FairseqDataset, data_utils
from fairseq.data.indexed_dataset import make_dataset
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.tasks import FairseqTask, register_task
from omegaconf import MISSING, OmegaConf, open_dict

from fairseq_joint.modules.sentence_encoder import EmbeddingCache
from fairseq_joint.text_files import read_text, text_lines

logger = logging.getLogger(__name__)

MODE_CHOICES = ("multilabel", "multiclass")
TRAIN_LABELS = "labels.train.txt"
LABEL_FILE = "labels.tsv"
LANGUAGE_FILE = "language.txt"
RAW_TEXTS = "{split}.text"

_moses = None

#: characters of scripts written without spaces between words: hiragana, katakana, CJK ideographs, Thai
UNSPACED = frozenset(chr(c) for lo, hi in ((0x3040, 0x30FF), (0x4E00, 0x9FFF), (0x0E00, 0x0E7F)) for c in range(lo, hi + 1))
UNSPACED_CLASS = "\u3040-\u30ff\u4e00-\u9fff\u0e00-\u0e7f"


def tokenize(text: str) -> List[str]:
    """Lower-cased Moses tokens (sacremoses): the one tokenizer of inputs and label descriptions. Characters of
    scripts written without spaces (Japanese, Chinese, Thai: :data:`UNSPACED`) are tokens of their own, so such a
    text is not one 'word' per clause; other tokens are Moses'."""
    global _moses
    if _moses is None:
        from sacremoses import MosesTokenizer

        _moses = MosesTokenizer(lang="en")
    tokens = _moses.tokenize(text.lower(), escape=False)
    if not any(c in UNSPACED for t in tokens for c in t):
        return tokens
    out: List[str] = []
    for token in tokens:
        if not any(c in UNSPACED for c in token):
            out.append(token)
            continue
        # each unspaced-script character alone; runs of other characters (Latin, digits) stay together
        out += [piece for piece in re.findall(r"[%s]|[^%s]+" % (UNSPACED_CLASS, UNSPACED_CLASS), token) if piece]
    return out


def read_label_file(path: str) -> Dict[str, str]:
    """``label<TAB>description`` lines -> {label: description}, in file order; bad lines fail by line."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"label file {path} does not exist: give a label<TAB>description file")
    labels: Dict[str, str] = {}
    for lineno, line in text_lines(path, "label file"):
        if not line.strip():
            continue
        if "\t" not in line:
            raise ValueError(f"{path}:{lineno}: expected 'label<TAB>description', found no tab")
        label, desc = line.split("\t", 1)
        label = label.strip()
        if not label or any(c.isspace() for c in label):
            raise ValueError(f"{path}:{lineno}: label {label!r} is empty or contains whitespace")
        if not desc.strip():
            raise ValueError(f"{path}:{lineno}: label {label!r} has an empty description: describe it")
        if label in labels:
            raise ValueError(f"{path}:{lineno}: duplicate label {label!r}: each label must appear once")
        labels[label] = desc.strip()
    if not labels:
        raise ValueError(f"label file {path} holds no labels")
    return labels


def read_label_lines(path: str) -> List[List[str]]:
    """The ``{split}.labels`` file: whitespace-separated labels per example (at least one each)."""
    rows = []
    for lineno, line in text_lines(path):
        names = line.split()
        if not names:
            raise ValueError(f"{path}:{lineno}: example without labels: every example needs one")
        rows.append(names)
    return rows


def read_raw_texts(data: str, split: str, count: int) -> List[str]:
    """The raw texts of ``split`` (``{split}.text``: one JSON string per line), checked against the binarized count."""
    import json

    path = os.path.join(data, RAW_TEXTS.format(split=split))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} is missing: a pretrained encoder reads the raw texts; binarize again with "
                                "fairseq-joint-preprocess-gile (it keeps them)")
    texts = []
    for lineno, line in text_lines(path):
        try:
            text = json.loads(line)
        except ValueError:
            text = None
        if not isinstance(text, str):
            raise ValueError(f"{path}:{lineno}: not a JSON string: binarize again with fairseq-joint-preprocess-gile")
        texts.append(text)
    if len(texts) != count:
        raise ValueError(f"{path} has {len(texts)} texts but {split}.input.bin {count}: binarize again with "
                         "fairseq-joint-preprocess-gile")
    return texts


def check_described(label_file: Optional[str], descriptions: Optional[Dict[str, str]], train_labels) -> None:
    """Every training label has a line in the label file (when there is one)."""
    missing = [n for n in train_labels if n not in descriptions] if descriptions is not None else []
    if missing:
        raise ValueError(f"{label_file}: {len(missing)} training label(s) have no description (first: {missing[0]!r}); "
                         "add a 'label<TAB>description' line for each")


def parse_languages(value: str) -> List[str]:
    """``--languages en,pl`` -> ["en", "pl"]; empty names, repeats and path characters fail."""
    languages = [x.strip() for x in value.split(",")]
    bad = [x for x in languages if not x or any(c.isspace() or c in "=/\\" for c in x)]
    if bad or len(set(languages)) != len(languages):
        raise ValueError(f"--languages {value!r}: give distinct language names separated by commas (e.g. en,pl), "
                         "each the name of its directory under DATA")
    return languages


def parse_language_weights(value: str, languages: List[str]) -> Dict[str, float]:
    """``--language-weights en=0.5,pl=1`` -> λ of every language (1 where not given)."""
    weights = {lang: 1.0 for lang in languages}
    for item in filter(None, (x.strip() for x in value.split(","))):
        lang, _, number = item.partition("=")
        try:
            weight = float(number)
        except ValueError:
            weight = -1.0
        if lang not in weights or weight < 0:
            raise ValueError(f"--language-weights {item!r}: give LANG=W with LANG one of --languages "
                             f"({', '.join(languages)}) and W >= 0")
        weights[lang] = weight
    return weights


def language_dir(data: str, lang: str) -> str:
    """``DATA/LANG``: where --languages finds a language's binarized data."""
    return os.path.join(data, lang)


def macro_average(meters, keys) -> float:
    """The mean of the logged values of ``keys`` present in ``meters`` (a fairseq MetersDict); 0 without any."""
    values = [meters.get_smoothed_value(k) for k in keys if k in meters]
    return round(float(np.mean(values)), 2) if values else 0.0


class LabelSet(NamedTuple):
    """The labels one split is scored against."""

    names: List[str]
    #: (L, T) description token ids, right-padded with the dictionary's pad; with a pretrained sentence encoder its
    #: (L, d) cached embeddings of the descriptions, or its (L, T) token ids when it is fine-tuned
    tokens: torch.Tensor
    train_index: torch.Tensor  # (L,) row in the training label list, -1 for unseen labels

    @property
    def seen(self) -> torch.Tensor:
        return self.train_index >= 0


def encode_label_set(names, descriptions: Optional[Dict[str, str]], dictionary: Dictionary, train_labels) -> LabelSet:
    """Binarize the descriptions of ``names`` with the shared dictionary (no EOS)."""
    train_pos = {n: i for i, n in enumerate(train_labels)}
    rows, unknown = [], []
    for name in names:
        words = tokenize(descriptions[name]) if descriptions is not None else []
        ids = [dictionary.index(w) for w in words]
        if words and all(i == dictionary.unk() for i in ids):
            unknown.append(name)
        rows.append(torch.LongTensor(ids or [dictionary.unk()]))
    if unknown:
        shown = ", ".join(repr(n) for n in unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
        raise ValueError(f"label(s) {shown}: no word of the description is in the dictionary ({len(dictionary)} "
                         "entries), so every such label would get the same score: describe them with words of the "
                         "training texts (or binarize again with these descriptions in --labels)")
    tokens = data_utils.collate_tokens(rows, dictionary.pad(), left_pad=False)
    index = torch.LongTensor([train_pos.get(n, -1) for n in names])
    return LabelSet(list(names), tokens, index)


class GileDataset(FairseqDataset):
    """Texts with their label positions in a :class:`LabelSet`; batches carry a multi-hot target."""

    def __init__(self, texts, label_ids: List[List[int]], label_set: LabelSet, pad: int, multiclass: bool, shuffle: bool,
                 embeddings: Optional[torch.Tensor] = None):
        self.texts, self.label_ids, self.label_set = texts, label_ids, label_set
        self.pad, self.multiclass, self.shuffle = pad, multiclass, shuffle
        self.sizes = np.array([len(t) for t in texts] if isinstance(texts, list) else texts.sizes)
        #: (N, d) text vectors of a frozen pretrained encoder (``net_input["src_embeddings"]``), else None
        self.embeddings = embeddings

    def __getitem__(self, index):
        item = {"id": index, "source": self.texts[index].long(), "labels": self.label_ids[index]}
        if self.embeddings is not None:
            item["embedding"] = self.embeddings[index]
        return item

    def __len__(self):
        return len(self.texts)

    def num_tokens(self, index):
        return int(self.sizes[index])

    def size(self, index):
        return int(self.sizes[index])

    def ordered_indices(self):
        order = np.random.permutation(len(self)) if self.shuffle else np.arange(len(self))
        return order[np.argsort(self.sizes[order], kind="mergesort")]

    def collater(self, samples):
        if not samples:
            return {}
        src = data_utils.collate_tokens([s["source"] for s in samples], self.pad, left_pad=False)
        num_labels = len(self.label_set.names)
        target = torch.zeros(len(samples), num_labels)
        for row, s in enumerate(samples):
            target[row, s["labels"]] = 1.0
        batch = {
            "id": torch.LongTensor([s["id"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": int(sum(s["source"].numel() for s in samples)),
            "net_input": {"src_tokens": src, "src_lengths": torch.LongTensor([s["source"].numel() for s in samples])},
            "target": target,
            "label_tokens": self.label_set.tokens,
            "label_train_index": self.label_set.train_index,
        }
        if self.embeddings is not None:
            batch["net_input"]["src_embeddings"] = torch.stack([s["embedding"] for s in samples])
        if self.multiclass:
            batch["target_class"] = torch.LongTensor([s["labels"][0] for s in samples])
        return batch


class MultilingualGileDataset(FairseqDataset):
    """One :class:`GileDataset` per language behind one index space (language after language).

    Batches never mix languages. ``paired`` (training, Eq. 16): batch i of the update holds one batch of every
    language; the languages with fewer batches are cycled, in a new random order each cycle, up to the largest one's
    count, and the collater returns ``{"languages": {lang: batch}}``. Otherwise (validation) every document is in
    exactly one batch and a batch carries its ``lang``.
    """

    def __init__(self, datasets: Dict[str, GileDataset], paired: bool):
        self.languages = list(datasets)
        self.datasets = datasets
        self.paired = paired
        self.offsets = np.cumsum([0] + [len(d) for d in datasets.values()])
        self.sizes = np.concatenate([d.sizes for d in datasets.values()])
        self.seed, self.epoch = 1, 1

    def __len__(self):
        return int(self.offsets[-1])

    def locate(self, index: int):
        """(language position, index within that language's dataset) of a global index."""
        pos = int(np.searchsorted(self.offsets, index, side="right")) - 1
        return pos, index - int(self.offsets[pos])

    def __getitem__(self, index):
        pos, local = self.locate(index)
        item = self.datasets[self.languages[pos]][local]
        item["id"], item["lang"] = index, self.languages[pos]
        return item

    def num_tokens(self, index):
        return int(self.sizes[index])

    def size(self, index):
        return int(self.sizes[index])

    def set_epoch(self, epoch):
        self.epoch = epoch

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return False  # the cycled languages are paired anew every epoch

    def ordered_indices(self):
        return np.concatenate([d.ordered_indices() + off for d, off in zip(self.datasets.values(), self.offsets)])

    def batch_by_size(self, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
        per_language = []
        for pos, dataset in enumerate(self.datasets.values()):
            lo, hi = self.offsets[pos], self.offsets[pos + 1]
            local = indices[(indices >= lo) & (indices < hi)] - lo
            batches = dataset.batch_by_size(local, max_tokens, max_sentences, required_batch_size_multiple)
            per_language.append([np.asarray(b) + lo for b in batches])
        if not self.paired:
            return [b for batches in per_language for b in batches]
        count = max(len(b) for b in per_language)
        rng = np.random.RandomState([self.seed, self.epoch])
        paired = []
        for batches in per_language:
            if not batches:
                raise ValueError("a language has no training documents: every language of --languages needs some")
            cycled = list(batches)
            while len(cycled) < count:
                cycled += [batches[i] for i in rng.permutation(len(batches))]
            paired.append(cycled[:count])
        return [np.concatenate(group) for group in zip(*paired)]

    def collater(self, samples):
        if not samples:
            return {}
        groups: Dict[str, list] = {}
        for s in samples:
            groups.setdefault(s["lang"], []).append(s)
        batches = {}
        for lang in self.languages:
            if lang in groups:
                batch = self.datasets[lang].collater(groups[lang])
                batch["lang"] = batch["net_input"]["lang"] = lang
                batches[lang] = batch
        if not self.paired:
            if len(batches) != 1:
                raise ValueError(f"a validation batch mixes languages ({', '.join(batches)}): batch with "
                                 "MultilingualGileDataset.batch_by_size")
            return next(iter(batches.values()))
        return {"languages": batches, "nsentences": sum(b["nsentences"] for b in batches.values()),
                "ntokens": sum(b["ntokens"] for b in batches.values())}


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
    seen_score_offset: float = field(
        default=0.0,
        metadata={"help": "γ of calibrated stacking: subtracted from the seen labels' scores when all labels are "
                  "ranked together (the gzsl_* validation metrics; fairseq-joint-predict-labels' default), "
                  "against the bias toward labels seen in training; pick it on validation"},
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


@register_task("gile_classification", dataclass=GileClassificationConfig)
class GileClassificationTask(FairseqTask):
    """Multi-label / multi-class text classification with label descriptions (GILE, Secs. 2-3)."""

    def __init__(self, cfg: GileClassificationConfig, dictionary: Dictionary, train_labels: List[str],
                 descriptions: Optional[Dict[str, str]], eval_descriptions: Optional[Dict[str, str]],
                 dictionaries: Optional[Dict[str, Dictionary]] = None):
        super().__init__(cfg)
        #: the dictionary of the texts; with --languages, the label language's (it binarizes the descriptions)
        self.dictionary = dictionary
        #: --languages: the languages trained on, in order, and the dictionary of each (and of the label language)
        self.languages: List[str] = parse_languages(cfg.languages) if getattr(cfg, "languages", "") else []
        self.dictionaries: Dict[str, Dictionary] = dictionaries or {}
        self.label_language = (getattr(cfg, "label_language", "") or self.languages[0]) if self.languages else ""
        self.language_weights = parse_language_weights(getattr(cfg, "language_weights", ""), self.languages)
        self.train_labels = train_labels
        self.descriptions = descriptions
        self.eval_descriptions = eval_descriptions
        self.label_sets: Dict[str, LabelSet] = {}
        #: the model's pretrained sentence encoder (``--encoder pretrained``), set by :meth:`build_model`
        self.sentence_encoder = None

    @classmethod
    def setup_task(cls, cfg: GileClassificationConfig, **kwargs):
        if getattr(cfg, "languages", ""):
            return cls.setup_multilingual(cfg)
        for option in ("label_language", "language_weights"):
            if getattr(cfg, option, ""):
                raise ValueError(f"--{option.replace('_', '-')} is for a multilingual model: give --languages too, "
                                 "or drop it")
        dict_path = os.path.join(cfg.data, "dict.txt")
        labels_path = os.path.join(cfg.data, TRAIN_LABELS)
        for path in (dict_path, labels_path):
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{path} is missing: binarize the data with fairseq-joint-preprocess-gile")
        dictionary = Dictionary.load(dict_path)
        train_labels = [line.strip() for line in read_text(labels_path) if line.strip()]
        label_file = cfg.label_file
        if label_file is None and os.path.isfile(os.path.join(cfg.data, LABEL_FILE)):
            label_file = os.path.join(cfg.data, LABEL_FILE)
        descriptions = read_label_file(label_file) if label_file else None
        check_described(label_file, descriptions, train_labels)
        eval_descriptions = read_label_file(cfg.eval_label_file) if cfg.eval_label_file else descriptions
        logger.info(f"dictionary: {len(dictionary)} types; {len(train_labels)} training labels; "
                    f"label file {label_file}; eval label file {cfg.eval_label_file or label_file}")
        return cls(cfg, dictionary, train_labels, descriptions, eval_descriptions)

    @classmethod
    def setup_multilingual(cls, cfg: GileClassificationConfig):
        """``--languages``: every language's directory, dictionary and training labels; one label file for all."""
        languages = parse_languages(cfg.languages)
        label_language = cfg.label_language or languages[0]
        dictionaries, train_seen = {}, set()
        label_files: Dict[str, str] = {}
        for lang in dict.fromkeys(languages + [label_language]):
            directory = language_dir(cfg.data, lang)
            path = os.path.join(directory, "dict.txt")
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{path} is missing: binarize language {lang} into {directory} with "
                                        f"fairseq-joint-preprocess-gile --lang {lang}")
            recorded = os.path.join(directory, LANGUAGE_FILE)
            if os.path.isfile(recorded):
                said = "".join(read_text(recorded)).strip()
                if said != lang:
                    raise ValueError(f"{recorded} says its documents are {said!r}, but --languages reads the directory "
                                     f"as {lang!r}: move it to {language_dir(cfg.data, said)} or binarize {lang}'s "
                                     "documents there")
            dictionaries[lang] = Dictionary.load(path)
            if lang in languages:
                labels_path = os.path.join(directory, TRAIN_LABELS)
                if not os.path.isfile(labels_path):
                    raise FileNotFoundError(f"{labels_path} is missing: binarize {lang} with fairseq-joint-preprocess-gile")
                train_seen.update(line.strip() for line in read_text(labels_path) if line.strip())
            if os.path.isfile(os.path.join(directory, LABEL_FILE)):
                label_files[lang] = os.path.join(directory, LABEL_FILE)
        label_file = cfg.label_file or label_files.get(label_language)
        descriptions = read_label_file(label_file) if label_file else None
        if cfg.label_file is None:
            for path in label_files.values():
                other = read_label_file(path)
                if other != descriptions:
                    diff = next((n for n in list(descriptions or {}) + list(other)
                                 if (descriptions or {}).get(n) != other.get(n)), None)
                    raise ValueError(f"{path} disagrees with {label_file} (label {diff!r}): the languages of one model "
                                     "share one label space; binarize every language with the same --labels file")
        check_described(label_file, descriptions, sorted(train_seen))
        if descriptions is not None:
            train_labels = [n for n in descriptions if n in train_seen]
        else:
            train_labels = sorted(train_seen)
        eval_descriptions = read_label_file(cfg.eval_label_file) if cfg.eval_label_file else descriptions
        logger.info(f"languages {', '.join(languages)} (label descriptions embedded as {label_language}): "
                    + ", ".join(f"{lang} {len(d)} types" for lang, d in dictionaries.items())
                    + f"; {len(train_labels)} training labels of any language")
        return cls(cfg, dictionaries[label_language], train_labels, descriptions, eval_descriptions, dictionaries)

    def data_dir(self, lang: str = "") -> str:
        """The binarized directory of ``lang`` (``DATA/LANG`` with --languages), or DATA."""
        return language_dir(self.cfg.data, lang) if lang else self.cfg.data

    @property
    def has_label_descriptions(self) -> bool:
        return self.descriptions is not None

    def encode_labels(self, names, descriptions: Optional[Dict[str, str]], cache_name: str) -> LabelSet:
        """The :class:`LabelSet` of ``names``: description word ids, or with a pretrained sentence encoder its cached
        embeddings of the descriptions (its token ids when fine-tuned)."""
        encoder = self.sentence_encoder
        if encoder is None or descriptions is None:
            return encode_label_set(names, descriptions, self.dictionary, self.train_labels)
        texts = [descriptions[n] for n in names]
        if encoder.finetune:
            rows = [torch.LongTensor(ids) for ids in encoder.tokenize(texts)]
            tokens = data_utils.collate_tokens(rows, encoder.pad_id, left_pad=False)
        else:
            tokens = EmbeddingCache(self.data_dir(self.label_language)).get(encoder, cache_name, texts)
        train_pos = {n: i for i, n in enumerate(self.train_labels)}
        return LabelSet(list(names), tokens, torch.LongTensor([train_pos.get(n, -1) for n in names]))

    def label_set(self, split: str) -> LabelSet:
        """Training labels for ``train``, every label of the evaluation label file otherwise."""
        key = "train" if split == "train" else "eval"
        if key not in self.label_sets:
            if key == "train":
                self.label_sets[key] = self.encode_labels(self.train_labels, self.descriptions, "train-labels")
            elif self.eval_descriptions is not None:
                self.label_sets[key] = self.encode_labels(list(self.eval_descriptions), self.eval_descriptions,
                                                          "eval-labels")
            else:
                self.label_sets[key] = self.label_set("train")
        return self.label_sets[key]

    def train_label_rows(self) -> List[List[int]]:
        """Every training example's labels (of every language) as positions in the training label list (for the
        label priors and Kurata's patterns)."""
        position = {n: i for i, n in enumerate(self.train_labels)}
        rows = []
        for lang in self.languages or [""]:
            path = os.path.join(self.data_dir(lang), "train.labels")
            for lineno, names in enumerate(read_label_lines(path), 1):
                unknown = [n for n in names if n not in position]
                if unknown:
                    raise ValueError(f"{path}:{lineno}: label {unknown[0]!r} is not in {TRAIN_LABELS}: re-run "
                                     "preprocessing")
                rows.append([position[n] for n in names])
        return rows

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        if self.languages:
            datasets = {lang: self.load_language(split, lang) for lang in self.languages}
            self.datasets[split] = MultilingualGileDataset(datasets, paired=split == "train")
            return
        self.datasets[split] = self.load_language(split)

    def load_language(self, split: str, lang: str = "") -> GileDataset:
        """The :class:`GileDataset` of ``split`` of one directory (``lang``'s with --languages)."""
        data = self.data_dir(lang)
        dictionary = self.dictionaries[lang] if lang else self.dictionary
        prefix = os.path.join(data, f"{split}.input")
        texts = make_dataset(prefix, impl="mmap")
        if texts is None:
            raise FileNotFoundError(f"{prefix}.bin/.idx not found: binarize split {split!r} with fairseq-joint-preprocess-gile")
        labels_path = os.path.join(data, f"{split}.labels")
        rows = read_label_lines(labels_path)
        if len(rows) != len(texts):
            raise ValueError(f"{labels_path} has {len(rows)} lines but {prefix}.bin {len(texts)} texts: re-run preprocessing")
        label_set = self.label_set(split)
        embeddings, pad = None, dictionary.pad()
        if self.sentence_encoder is not None:
            raw = read_raw_texts(data, split, len(texts))
            if self.sentence_encoder.finetune:
                texts, pad = [torch.LongTensor(ids) for ids in self.sentence_encoder.tokenize(raw)], self.sentence_encoder.pad_id
            else:
                embeddings = EmbeddingCache(data).get(self.sentence_encoder, split, raw)
        position = {n: i for i, n in enumerate(label_set.names)}
        label_ids = []
        multiclass = self.cfg.classification_mode == "multiclass"
        for lineno, names in enumerate(rows, 1):
            for n in names:
                if n not in position:
                    source = self.cfg.eval_label_file or self.cfg.label_file or os.path.join(self.cfg.data, TRAIN_LABELS)
                    raise ValueError(f"{labels_path}:{lineno}: label {n!r} is not in {source}: add it to that label file")
            if multiclass and len(names) != 1:
                raise ValueError(f"{labels_path}:{lineno}: {len(names)} labels in --classification-mode multiclass: "
                                 "use multilabel or give one label per text")
            label_ids.append(sorted({position[n] for n in names}))
        logger.info(f"{split}{' ' + lang if lang else ''}: {len(texts)} texts, {len(label_set.names)} labels "
                    f"({int(label_set.seen.sum())} seen, {int((~label_set.seen).sum())} unseen)")
        return GileDataset(texts, label_ids, label_set, pad, multiclass, shuffle=split == "train", embeddings=embeddings)

    def get_batch_iterator(self, dataset, *args, **kwargs):
        # fairseq's --required-batch-size-multiple (default 8) drops the documents of a last partial batch
        # (fairseq issue #5036); every document must be trained on and scored, so batches are any size here
        if len(args) >= 5:
            args = list(args)
            args[4] = 1
        else:
            kwargs["required_batch_size_multiple"] = 1
        if isinstance(dataset, MultilingualGileDataset):
            dataset.seed = kwargs.get("seed", args[5] if len(args) > 5 else 1)
        return super().get_batch_iterator(dataset, *args, **kwargs)

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

    def valid_step(self, sample, model, criterion):
        loss, size, logging_output = super().valid_step(sample, model, criterion)
        if "lang" in sample:
            logging_output["lang"] = sample["lang"]
        return loss, size, logging_output

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

    def build_model(self, cfg, from_checkpoint=False):
        if from_checkpoint and getattr(cfg, "embed_path", ""):
            # E comes from the checkpoint: the word-vector file is not read (it need not exist any more)
            cfg = copy.deepcopy(cfg)
            with open_dict(cfg) if OmegaConf.is_config(cfg) else contextlib.nullcontext():
                cfg.embed_path = ""
        model = super().build_model(cfg, from_checkpoint)
        # a pretrained sentence encoder embeds the texts and descriptions the datasets and label sets carry
        self.sentence_encoder = getattr(model, "sentence_encoder", None)
        self.label_sets = {}
        return model

    def build_criterion(self, cfg, from_checkpoint=False):
        """``--criterion label_embedding_cross_entropy`` scores labels here, not target words: its GILE form."""
        if self.languages and getattr(cfg, "_name", None) != "multilabel_classification":
            raise ValueError(f"--criterion {getattr(cfg, '_name', None)}: a multilingual model (--languages) trains with "
                             "--criterion multilabel_classification (Eq. 16 sums its per-language losses)")
        if getattr(cfg, "_name", None) == "label_embedding_cross_entropy":
            from fairseq_joint.criterions.gile_label_embedding import GileLabelEmbeddingCriterion

            return GileLabelEmbeddingCriterion.build_criterion(cfg, self)
        return super().build_criterion(cfg, from_checkpoint)

    def max_positions(self):
        return None

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return self.dictionary
