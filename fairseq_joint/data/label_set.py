"""The labels one split is scored against, with what the model turns into label vectors (GILE Sec. 2.2): the
description's word ids in the shared dictionary, or with a pretrained sentence encoder its embeddings of the
descriptions (its word-piece ids when it is fine-tuned)."""

import logging
from typing import Dict, List, NamedTuple, Optional, Sequence

import torch
from fairseq.data import Dictionary, data_utils

from fairseq_joint.errors import InputError
from fairseq_joint.modules.sentence_encoder import EmbeddingCache, PretrainedSentenceEncoder
from fairseq_joint.modules.tokenizer import tokenize

logger = logging.getLogger(__name__)


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


#: the share of the label descriptions' words that the dictionary of the model's description language may lack before
#: prediction warns that they seem to be in another language: a third (debtags, the English dictionary: 4% of English
#: validation texts' words are not in it, 39-92% of the other eight languages' texts'; a few English descriptions
#: against a small dictionary lack more than 4%: the README's two, 3 of 11 words against debtags-sample's)
FOREIGN_WORD_SHARE = 1 / 3


def check_description_language(descriptions: Dict[str, str], dictionary: Dictionary, language: str,
                               dictionary_path: str, source: str) -> None:
    """Warn (one line) when more than a third (:data:`FOREIGN_WORD_SHARE`) of ``descriptions``' words are unknown to
    ``dictionary``, that of the language the model reads label descriptions in (``language``; empty for a monolingual
    model): the descriptions are likely in another language, which the model's lexical features and word embeddings
    do not read. Nothing is refused: a multilingual sentence encoder still embeds them."""
    words = [w for text in descriptions.values() for w in tokenize(text)]
    unknown = sum(dictionary.index(w) == dictionary.unk() for w in words)
    if words and unknown > FOREIGN_WORD_SHARE * len(words):
        named = language or "the language of its training texts"
        logger.warning(f"{source}: {unknown} of the descriptions' {len(words)} words ({100 * unknown / len(words):.0f}%) "
                       f"are not in {dictionary_path}, the dictionary of the model's description language ({named}): "
                       f"the descriptions look like another language, which its lexical features and tokenizer "
                       f"mostly do not know; describe the labels in {named} for reliable scores")


def train_positions(names: Sequence[str], train_labels: Sequence[str]) -> torch.Tensor:
    """(L,) the row of each label in the training label list, -1 for a label unseen in training."""
    position = {n: i for i, n in enumerate(train_labels)}
    return torch.LongTensor([position.get(n, -1) for n in names])


def encode_label_set(names, descriptions: Optional[Dict[str, str]], dictionary: Dictionary, train_labels,
                     sentence_encoder: Optional[PretrainedSentenceEncoder] = None, cache_dir: str = "",
                     cache_name: str = "") -> LabelSet:
    """The :class:`LabelSet` of ``names``: their descriptions binarized with the shared dictionary (no EOS); with a
    ``sentence_encoder``, its embeddings of the descriptions (cached in ``cache_dir`` as ``cache_name``), or its token
    ids when it is fine-tuned."""
    if sentence_encoder is not None and descriptions is not None:
        texts = [descriptions[n] for n in names]
        if sentence_encoder.finetune:
            rows = [torch.LongTensor(ids) for ids in sentence_encoder.tokenize(texts)]
            tokens = data_utils.collate_tokens(rows, sentence_encoder.pad_id, left_pad=False)
        else:
            vectors = EmbeddingCache(cache_dir).get(sentence_encoder, cache_name, texts)
            tokens = sentence_encoder.collate(sentence_encoder.inputs(vectors, texts))  # + TF-IDF: hybrid
        return LabelSet(list(names), tokens, train_positions(names, train_labels))
    rows, unknown, partly = [], [], {}
    for name in names:
        words = tokenize(descriptions[name]) if descriptions is not None else []
        ids = [dictionary.index(w) for w in words]
        if words and all(i == dictionary.unk() for i in ids):
            unknown.append(name)
        elif dictionary.unk() in ids:
            partly[name] = [w for w, i in zip(words, ids) if i == dictionary.unk()]
        rows.append(torch.LongTensor(ids or [dictionary.unk()]))
    if unknown:
        shown = ", ".join(repr(n) for n in unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
        raise InputError(f"label(s) {shown}: no word of the description is in the dictionary: describe them with words "
                         "of the training texts (or binarize again with these descriptions in --labels)")
    if partly:  # nothing dropped without a word: these words are read as <unk>
        examples = "; ".join(f"{n!r}: {', '.join(map(repr, w[:3]))}" for n, w in list(partly.items())[:3])
        logger.warning(f"{len(partly)} of {len(names)} label descriptions have words that are not in the dictionary "
                       f"({sum(map(len, partly.values()))} in all, read as <unk>), e.g. {examples}: describe the "
                       "labels with words of the training texts, or binarize again with these descriptions in --labels")
    tokens = data_utils.collate_tokens(rows, dictionary.pad(), left_pad=False)
    return LabelSet(list(names), tokens, train_positions(names, train_labels))
