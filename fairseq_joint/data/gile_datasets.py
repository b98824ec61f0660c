"""GILE's datasets: one split of one directory (:func:`load_gile_split`, a :class:`GileDataset`) and the paired
batches of several languages (:class:`MultilingualGileDataset`, GILE-MHAN's Eq. 16).

A batch holds ``id``, ``nsentences``, ``ntokens``, ``net_input`` (``src_tokens``, ``src_lengths``; with a frozen
pretrained encoder ``src_embeddings``, its cached text vectors), ``target`` (the multi-hot (B, L) relevance of the
label set's L labels), ``target_class`` (--classification-mode multiclass: the one label's column) and the label
set: ``label_tokens`` and ``label_train_index`` (:class:`~fairseq_joint.data.label_set.LabelSet`), and ``split``, the
split's name (the task calibrates γ on ``valid``'s batches only). The fields are fairseq's stock datasets in a
:class:`~fairseq.data.NestedDictionaryDataset`.
"""

import logging
import os
from typing import Dict, List, Optional

import numpy as np
import torch
from fairseq.data import (
    FairseqDataset,
    IdDataset,
    NestedDictionaryDataset,
    NumelDataset,
    NumSamplesDataset,
    RawLabelDataset,
    RightPadDataset,
)
from fairseq.data.indexed_dataset import make_dataset

from fairseq_joint.data.gile_files import REBINARIZE, GileCorpus, label_positions, read_raw_texts
from fairseq_joint.data.label_set import LabelSet
from fairseq_joint.errors import InputError, MissingFileError
from fairseq_joint.modules.sentence_encoder import EmbeddingCache, PretrainedSentenceEncoder

logger = logging.getLogger(__name__)


class ListDataset(FairseqDataset):
    """Items of a list or tensor, collated by ``collate`` (a fairseq dataset over in-memory rows)."""

    def __init__(self, items, collate):
        super().__init__()
        self.items, self.collate = items, collate

    def __getitem__(self, index):
        return self.items[index]

    def __len__(self):
        return len(self.items)

    def collater(self, samples):
        return self.collate(samples)


def multi_hot(label_ids: List[List[int]], num_labels: int) -> ListDataset:
    """The (B, L) 0/1 relevance of each document's label columns (GILE's y of Eq. 15)."""
    def collate(samples):
        target = torch.zeros(len(samples), num_labels)
        for row, ids in enumerate(samples):
            target[row, ids] = 1.0
        return target

    return ListDataset(label_ids, collate)


class GileDataset(NestedDictionaryDataset):
    """The documents of split ``split`` (fairseq's nested dictionary of fields) and the :class:`LabelSet` they are
    scored against; ordered by length, the ties in a new random order each epoch when ``shuffle``."""

    def __init__(self, defn, lengths: np.ndarray, label_set: LabelSet, shuffle: bool, split: str):
        super().__init__(defn, sizes=lengths)
        self.lengths, self.label_set, self.shuffle, self.split = lengths, label_set, shuffle, split

    def ordered_indices(self):
        order = np.random.permutation(len(self)) if self.shuffle else np.arange(len(self))
        return order[np.argsort(self.lengths[order], kind="mergesort")]

    def collater(self, samples):
        batch = super().collater(samples)
        if batch:
            batch["label_tokens"], batch["label_train_index"] = self.label_set.tokens, self.label_set.train_index
            batch["split"] = self.split
        return batch


def load_gile_split(corpus: GileCorpus, split: str, label_set: LabelSet, lang: str = "",
                    sentence_encoder: Optional[PretrainedSentenceEncoder] = None, multiclass: bool = False,
                    label_source: str = "") -> GileDataset:
    """The :class:`GileDataset` of ``split`` of one directory (``lang``'s with --languages): its texts (or the
    sentence encoder's embeddings or word pieces of them) and its labels' columns in ``label_set`` (``label_source``:
    the file that lists those labels, for the error when a document's label is not there)."""
    data = corpus.data_dir(lang)
    prefix = os.path.join(data, f"{split}.input")
    texts = make_dataset(prefix, impl="mmap")
    if texts is None:
        raise MissingFileError(f"{prefix}.bin/.idx not found: binarize split {split!r} with "
                               "fairseq-joint-preprocess-gile")
    labels_path = os.path.join(data, f"{split}.labels")
    rows = label_positions(labels_path, {n: i for i, n in enumerate(label_set.names)}, label_source,
                           "add it to that label file")
    if len(rows) != len(texts):
        raise InputError(f"{labels_path} has {len(rows)} lines but {prefix}.bin {len(texts)} texts: {REBINARIZE}")
    embeddings, pad, lengths = None, corpus.dictionary_of(lang).pad(), np.array(texts.sizes)
    if sentence_encoder is not None:
        raw = read_raw_texts(data, split, len(texts))
        if sentence_encoder.finetune:
            pieces = [torch.LongTensor(ids) for ids in sentence_encoder.tokenize(raw)]
            texts, pad, lengths = ListDataset(pieces, None), sentence_encoder.pad_id, np.array([len(p) for p in pieces])
        else:
            embeddings = sentence_encoder.inputs(EmbeddingCache(data).get(sentence_encoder, split, raw), raw)
    label_ids = []
    for lineno, ids in enumerate(rows, 1):
        if multiclass and len(ids) != 1:
            raise InputError(f"{labels_path}:{lineno}: {len(ids)} labels in --classification-mode multiclass: "
                             "use multilabel or give one label per text")
        label_ids.append(sorted(set(ids)))
    logger.info(f"{split}{' ' + lang if lang else ''}: {len(texts)} texts, {len(label_set.names)} labels "
                f"({int(label_set.seen.sum())} seen, {int((~label_set.seen).sum())} unseen)")
    if lang and split != "train" and not any(not label_set.seen[i] for ids in label_ids for i in ids):
        logger.warning(f"{split} {lang}: no document carries a label unseen in training, so {lang}_unseen_avgpr and "
                       f"{lang}_gzsl_h are not logged and the unprefixed unseen_avgpr and gzsl_h average the other "
                       "languages' (--best-checkpoint-metric gzsl_h selects on those)")
    net_input = {"src_tokens": RightPadDataset(texts, pad), "src_lengths": NumelDataset(texts, reduce=False)}
    if embeddings is not None:
        net_input["src_embeddings"] = ListDataset(embeddings, sentence_encoder.collate)
    defn = {"id": IdDataset(), "nsentences": NumSamplesDataset(), "ntokens": NumelDataset(texts, reduce=True),
            "net_input": net_input, "target": multi_hot(label_ids, len(label_set.names))}
    if multiclass:
        defn["target_class"] = RawLabelDataset([ids[0] for ids in label_ids])
    return GileDataset(defn, lengths, label_set, shuffle=split == "train", split=split)


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
        self.sizes = np.concatenate([d.lengths for d in datasets.values()])
        #: the seed of the cycled languages' order (the task sets fairseq's --seed), and the epoch
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
                raise InputError("a language has no training documents: every language of --languages needs some")
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
                raise RuntimeError(f"a validation batch mixes languages ({', '.join(batches)}): batch with "
                                   "batch_by_size")
            return next(iter(batches.values()))
        return {"languages": batches, "nsentences": sum(b["nsentences"] for b in batches.values()),
                "ntokens": sum(b["ntokens"] for b in batches.values())}
