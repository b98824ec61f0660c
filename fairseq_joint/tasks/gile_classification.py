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
"""

import contextlib
import copy
import logging
import os
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional

import numpy as np
import torch
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
RAW_TEXTS = "{split}.text"

_moses = None


def tokenize(text: str) -> List[str]:
    """Lower-cased Moses tokens (sacremoses): the one tokenizer of inputs and label descriptions."""
    global _moses
    if _moses is None:
        from sacremoses import MosesTokenizer

        _moses = MosesTokenizer(lang="en")
    return _moses.tokenize(text.lower(), escape=False)


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


@register_task("gile_classification", dataclass=GileClassificationConfig)
class GileClassificationTask(FairseqTask):
    """Multi-label / multi-class text classification with label descriptions (GILE, Secs. 2-3)."""

    def __init__(self, cfg: GileClassificationConfig, dictionary: Dictionary, train_labels: List[str],
                 descriptions: Optional[Dict[str, str]], eval_descriptions: Optional[Dict[str, str]]):
        super().__init__(cfg)
        self.dictionary = dictionary
        self.train_labels = train_labels
        self.descriptions = descriptions
        self.eval_descriptions = eval_descriptions
        self.label_sets: Dict[str, LabelSet] = {}
        #: the model's pretrained sentence encoder (``--encoder pretrained``), set by :meth:`build_model`
        self.sentence_encoder = None

    @classmethod
    def setup_task(cls, cfg: GileClassificationConfig, **kwargs):
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
        if descriptions is not None:
            missing = [n for n in train_labels if n not in descriptions]
            if missing:
                raise ValueError(
                    f"{label_file}: {len(missing)} training label(s) have no description (first: {missing[0]!r}); "
                    "add a 'label<TAB>description' line for each"
                )
        eval_descriptions = read_label_file(cfg.eval_label_file) if cfg.eval_label_file else descriptions
        logger.info(f"dictionary: {len(dictionary)} types; {len(train_labels)} training labels; "
                    f"label file {label_file}; eval label file {cfg.eval_label_file or label_file}")
        return cls(cfg, dictionary, train_labels, descriptions, eval_descriptions)

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
            tokens = EmbeddingCache(self.cfg.data).get(encoder, cache_name, texts)
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
        """Every training example's labels as rows of ``labels.train.txt`` (for Kurata's patterns)."""
        position = {n: i for i, n in enumerate(self.train_labels)}
        path = os.path.join(self.cfg.data, "train.labels")
        rows = []
        for lineno, names in enumerate(read_label_lines(path), 1):
            unknown = [n for n in names if n not in position]
            if unknown:
                raise ValueError(f"{path}:{lineno}: label {unknown[0]!r} is not in {TRAIN_LABELS}: re-run preprocessing")
            rows.append([position[n] for n in names])
        return rows

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        prefix = os.path.join(self.cfg.data, f"{split}.input")
        texts = make_dataset(prefix, impl="mmap")
        if texts is None:
            raise FileNotFoundError(f"{prefix}.bin/.idx not found: binarize split {split!r} with fairseq-joint-preprocess-gile")
        labels_path = os.path.join(self.cfg.data, f"{split}.labels")
        rows = read_label_lines(labels_path)
        if len(rows) != len(texts):
            raise ValueError(f"{labels_path} has {len(rows)} lines but {prefix}.bin {len(texts)} texts: re-run preprocessing")
        label_set = self.label_set(split)
        embeddings, pad = None, self.dictionary.pad()
        if self.sentence_encoder is not None:
            raw = read_raw_texts(self.cfg.data, split, len(texts))
            if self.sentence_encoder.finetune:
                texts, pad = [torch.LongTensor(ids) for ids in self.sentence_encoder.tokenize(raw)], self.sentence_encoder.pad_id
            else:
                embeddings = EmbeddingCache(self.cfg.data).get(self.sentence_encoder, split, raw)
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
        self.datasets[split] = GileDataset(texts, label_ids, label_set, pad, multiclass, shuffle=split == "train",
                                           embeddings=embeddings)
        logger.info(f"{split}: {len(texts)} texts, {len(label_set.names)} labels "
                    f"({int(label_set.seen.sum())} seen, {int((~label_set.seen).sum())} unseen)")

    def get_batch_iterator(self, dataset, *args, **kwargs):
        # fairseq's --required-batch-size-multiple (default 8) drops the documents of a last partial batch
        # (fairseq issue #5036); every document must be trained on and scored, so batches are any size here
        if len(args) >= 5:
            args = list(args)
            args[4] = 1
        else:
            kwargs["required_batch_size_multiple"] = 1
        return super().get_batch_iterator(dataset, *args, **kwargs)

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
