"""``--encoder hybrid``: a frozen sentence encoder's embedding beside a lexical channel, TF-IDF features of the same
text projected into the joint space by a learned linear map; used for texts and label descriptions alike, so a label
never seen in training is scored from its description's words as well as from its sentence embedding.

* :class:`LexicalModel` is the TF-IDF model (scikit-learn's ``TfidfVectorizer``: word uni- and bigrams, sublinear tf,
  terms in at least two documents, the ``max_features`` most frequent, rows L2-normalized), fitted on the training
  texts by ``fairseq-joint-preprocess-gile --lexical-features N`` and stored with the data (``lexical.json``: terms,
  idf weights, options, a fingerprint of them all). A checkpoint records the fingerprint; data with another lexical
  model are refused. Its words are scikit-learn's (runs of two or more word characters), or with the ``gile``
  tokenizer (:data:`TOKENIZERS`) the tokens of GILE's one tokenizer (:func:`~fairseq_joint.modules.tokenizer.tokenize`):
  every character of a script written without spaces (Japanese) is a word, so such texts get character uni- and
  bigrams where scikit-learn's pattern would make each clause one word. One model may serve several languages
  (fitted on all their training texts): a multilingual model's texts and the descriptions then share the terms the
  languages share (names of programs, formats, protocols), and each language keeps its own.
* :class:`HybridTextEncoder` is a :class:`~fairseq_joint.modules.sentence_encoder.PretrainedSentenceEncoder` (frozen,
  its embeddings cached beside the data as for ``--encoder pretrained``) that adds the lexical channel: the vector of a
  text is the concatenation ``[e ; Pᵀx]`` of its normalized sentence embedding e (d) and the projection of its TF-IDF
  vector x (V) by P (V x d_l, ``--lexical-dim``), so its dimension is d + d_l.

**Concatenation, not a sum**: the dot product of two hybrid vectors is then exactly ``e_j·e + (Pᵀx_j)·(Pᵀx)``, the
sentence similarity plus the lexical one, with no cross terms ``e_j·Pᵀx`` (noise of standard deviation ~d^-1/2 for a
random P, and channels the head could not tell apart); the head's projections weigh the two channels separately.

**Initialisation** (Johnson-Lindenstrauss): P's entries are drawn from N(0, 1/d_l), so ``E[(Pᵀx)·(Pᵀy)] = x·y``, the
TF-IDF cosine of the two texts, with a standard deviation of about ``sqrt((1 + (x·y)²) / d_l)``. ``--similarity-init``
(which starts ``--head gile`` at the dot product of its inputs) then starts at "sentence cosine + lexical cosine".

**Efficiency**: a text's TF-IDF row is sparse. A frozen model reads each text as one float64 row ``[e | ids | w]``:
its d embedding values, then the K column ids of its TF-IDF row and their K weights, padded per batch (id 0, weight 0:
no contribution). ``Pᵀx`` is ``embedding_bag`` over the ids with the weights as ``per_sample_weights`` (a weighted sum
of K rows of P), never a dense V-wide product. float64 keeps the ids exact (to 2^53) and is left alone by fairseq's
``--fp16``/``--bf16``, which halve float32 tensors only; one tensor per text set keeps the label sets' row indexing
(``tokens[seen]``) and device moves working unchanged.
"""

import hashlib
import json
import os
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_joint.errors import CheckpointError, InputError
from fairseq_joint.modules.sentence_encoder import PretrainedSentenceEncoder
from fairseq_joint.modules.tokenizer import tokenize
from fairseq_joint.options import Range, check_number
from fairseq_joint.text_files import check_exists

#: the TfidfVectorizer settings of the lexical channel (the study's TF-IDF + logistic regression baseline's)
TFIDF_OPTIONS = {"ngram_range": [1, 2], "sublinear_tf": True, "min_df": 2, "lowercase": True}
#: how a lexical model splits texts into words: scikit-learn's pattern (``words``, the default) or GILE's tokenizer
#: (``gile``, for languages written without spaces), its tokens without a letter or digit left out
TOKENIZERS = ("words", "gile")
FORMAT = "fairseq-joint lexical features 1"
DEFAULT_MAX_FEATURES = 2 ** 15
#: the TF-IDF features a model may have (--lexical-features): feature ids travel as float64 in a packed row, exact
#: below 2^53; a cap far below that
MAX_FEATURES = Range(1, 2 ** 24, integer=True)
REFIT = "re-run fairseq-joint-preprocess-gile with --lexical-features"


def tokens_with_word_characters(text: str) -> List[str]:
    """The ``gile`` tokenizer's words: :func:`~fairseq_joint.modules.tokenizer.tokenize` (lower-cased), punctuation
    tokens left out."""
    return [t for t in tokenize(text) if any(c.isalnum() for c in t)]


class LexicalModel:
    """A fitted TF-IDF model: its terms in column order, their idf weights and the vectorizer's options."""

    def __init__(self, terms: Sequence[str], idf: Sequence[float], options: Dict, documents: int, path: str = ""):
        self.terms, self.options, self.documents, self.path = list(terms), dict(options), int(documents), path
        self.idf = np.asarray(idf, dtype=np.float64)  # one a term: fit makes them so, load refuses a file otherwise
        self._vectorizer = None

    @property
    def num_features(self) -> int:
        return len(self.terms)

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the options, terms and idf weights (hex): equal for two files iff they transform texts alike."""
        content = json.dumps({"options": self.options, "terms": self.terms, "idf": [repr(float(x)) for x in self.idf]},
                             sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(content.encode("utf-8")).hexdigest()

    @classmethod
    def fit(cls, texts: Sequence[str], max_features: int = DEFAULT_MAX_FEATURES, where: str = "the training texts",
            tokenizer: str = "words") -> "LexicalModel":
        """Fit the vocabulary (at most ``max_features`` terms) and idf weights on ``texts``, split into words by
        ``tokenizer`` (one of :data:`TOKENIZERS`)."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        check_number("--lexical-features", max_features, MAX_FEATURES)
        options = dict(TFIDF_OPTIONS, min_df=min(TFIDF_OPTIONS["min_df"], len(texts)))
        if tokenizer != "words":  # the default is not recorded: the models fitted before the option keep their print
            options["tokenizer"] = tokenizer
        vectorizer = TfidfVectorizer(**cls._sklearn_options(options), max_features=max_features, dtype=np.float32)
        try:
            vectorizer.fit(texts)
        except ValueError as e:  # e.g. an empty vocabulary
            raise InputError(f"--lexical-features: no TF-IDF vocabulary can be fitted on {where} ({e}): give texts "
                             "with words, or preprocess without --lexical-features") from None
        return cls(vectorizer.get_feature_names_out().tolist(), vectorizer.idf_, options, len(texts))

    @staticmethod
    def _sklearn_options(options: Dict) -> Dict:
        out = dict(options, ngram_range=tuple(options["ngram_range"]))
        if out.pop("tokenizer", "words") == "gile":
            out.update(tokenizer=tokens_with_word_characters, token_pattern=None, lowercase=False)
        return out

    def vectorizer(self):
        """The fitted ``TfidfVectorizer`` (vocabulary and idf from this model)."""
        if self._vectorizer is None:
            from sklearn.feature_extraction.text import TfidfVectorizer

            options = dict(self._sklearn_options(self.options))
            options.pop("min_df")  # a given vocabulary is not pruned again
            vectorizer = TfidfVectorizer(**options, vocabulary={t: i for i, t in enumerate(self.terms)},
                                         dtype=np.float32)
            vectorizer.idf_ = self.idf
            self._vectorizer = vectorizer
        return self._vectorizer

    def transform(self, texts: Sequence[str]):
        """The (N, V) scipy CSR matrix of the texts' L2-normalized TF-IDF rows."""
        return self.vectorizer().transform(list(texts)).tocsr()

    def save(self, path: str) -> None:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"format": FORMAT, "fingerprint": self.fingerprint, "documents": self.documents,
                       "options": self.options, "terms": self.terms, "idf": self.idf.tolist()}, f, ensure_ascii=False)
        os.replace(tmp, path)
        self.path = path

    @classmethod
    def load(cls, path: str, option: str = "") -> "LexicalModel":
        """The model of ``path``; a missing, unreadable or altered file is refused in one line naming ``option`` (what
        needs or gave it: ``--encoder hybrid``)."""
        check_exists(path, f"{option}:" if option else "", f"{REFIT} (e.g. {DEFAULT_MAX_FEATURES})")
        try:
            with open(path, encoding="utf-8") as f:
                content = json.load(f)
        except (OSError, ValueError) as e:  # unreadable, or not JSON
            raise InputError(f"{path} is not a lexical feature file ({type(e).__name__}: {str(e)[:120]}): "
                             f"{REFIT}") from e
        fields = {"terms": list, "idf": list, "options": dict, "documents": int, "fingerprint": str}
        if (not isinstance(content, dict) or content.get("format") != FORMAT or not content.get("terms")
                or any(not isinstance(content.get(k), kind) for k, kind in fields.items())
                or len(content["terms"]) != len(content["idf"])):
            raise InputError(f"{path} is not a lexical feature file (format {FORMAT}, one idf weight a term): {REFIT}")
        model = cls(content["terms"], content["idf"], content["options"], content["documents"], path)
        if model.fingerprint != content.get("fingerprint"):
            raise InputError(f"{path} was changed after it was written (its fingerprint does not match): {REFIT}")
        return model


def signature(lexical: LexicalModel, lexical_dim: int) -> Tensor:
    """What a checkpoint records of its lexical channel: (V, d_l, the fingerprint's first 60 bits)."""
    return torch.tensor([lexical.num_features, lexical_dim, int(lexical.fingerprint[:15], 16)], dtype=torch.long)


def check_signature(saved: Tensor, own: Tensor, path: str) -> None:
    """A checkpoint's lexical channel (``saved``, :func:`signature`) is the one the data's ``path`` gives (``own``):
    refused in one line otherwise."""
    saved, own = saved.cpu(), own.cpu()
    if torch.equal(saved, own):
        return
    if int(saved[0]) == int(own[0]) and int(saved[2]) == int(own[2]):
        raise CheckpointError(f"the checkpoint's lexical projection has {int(saved[1])} dimensions, not --lexical-dim "
                              f"{int(own[1])}: drop --lexical-dim")
    then, here = int(saved[0]), int(own[0])
    raise CheckpointError(f"{path} is not the lexical model the checkpoint was trained with ({then} features then, "
                          f"{here} here): give the data directory it was trained on (--data), or train a model on "
                          f"this one")


def pack(rows: Sequence[Tuple[Tensor, Tensor, Tensor]]) -> Tensor:
    """The packed (B, d + 2K) float64 rows ``[e | ids | w]`` of ``(e, ids, w)`` triples, K the longest TF-IDF row of
    the batch (at least 1; shorter rows padded with id 0, weight 0)."""
    rows = list(rows)
    d = rows[0][0].numel()
    k = max(1, max(len(ids) for _, ids, _ in rows))
    out = torch.zeros(len(rows), d + 2 * k, dtype=torch.float64)
    for i, (vector, ids, weights) in enumerate(rows):
        out[i, :d] = vector
        out[i, d:d + len(ids)] = ids.double()
        out[i, d + k:d + k + len(ids)] = weights.double()
    return out


def unpack(packed: Tensor, dim: int) -> Tuple[Tensor, Tensor, Tensor]:
    """``(e (B, d), ids (B, K), w (B, K))`` of packed rows whose embeddings have ``dim`` values."""
    k = (packed.size(1) - dim) // 2
    if packed.dim() != 2 or k < 1 or packed.size(1) != dim + 2 * k:
        raise ValueError(f"expected packed hybrid rows of width {dim} + 2K, got {tuple(packed.shape)}")
    return packed[:, :dim], packed[:, dim:dim + k].long(), packed[:, dim + k:]


def project(ids: Tensor, weights: Tensor, projection: Tensor) -> Tensor:
    """``Pᵀx`` (B, d_l) of sparse TF-IDF rows x given as column ids and weights (B, K): the weighted sum of K rows of
    P (V, d_l), ``embedding_bag`` with ``per_sample_weights``."""
    return F.embedding_bag(ids, projection, per_sample_weights=weights.to(projection.dtype), mode="sum")


def init_projection(num_features: int, dim: int, generator=None) -> Tensor:
    """P (V, d_l) with N(0, 1/d_l) entries: ``E[(Pᵀx)·(Pᵀy)] = x·y`` (Johnson-Lindenstrauss)."""
    return torch.randn(num_features, dim, generator=generator) / dim ** 0.5


class HybridTextEncoder(PretrainedSentenceEncoder):
    """A frozen sentence encoder plus the lexical channel ``Pᵀx`` (see the module doc). :attr:`dim` stays the sentence
    encoder's (its cached embeddings); :attr:`output_dim` is ``d + d_l``, the dimension of h and of the label vectors.
    P (:attr:`projection`) is a parameter of the model (trained, saved); :attr:`lexical_signature` a buffer that the
    checkpoint keeps to recognise the lexical model."""

    def __init__(self, path: str, lexical: LexicalModel, lexical_dim: int, option: str = "--pretrained-encoder"):
        super().__init__(path, finetune=False, option=option)
        self.lexical, self.lexical_dim = lexical, int(lexical_dim)
        self.projection = nn.Parameter(init_projection(lexical.num_features, self.lexical_dim))
        self.register_buffer("lexical_signature", signature(lexical, self.lexical_dim), persistent=True)

    @property
    def output_dim(self) -> int:
        return self.dim + self.lexical_dim

    def inputs(self, vectors: Tensor, texts: Sequence[str]) -> List[Tuple[Tensor, Tensor, Tensor]]:
        """Per text: its embedding (a row of ``vectors``), the column ids of its TF-IDF row and their weights."""
        rows = self.lexical.transform(texts)
        ids, weights = torch.from_numpy(rows.indices.astype(np.int64)), torch.from_numpy(rows.data)
        bounds = rows.indptr.tolist()
        return [(vectors[i], ids[a:b], weights[a:b]) for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]

    @staticmethod
    def collate(rows: Sequence[Tuple[Tensor, Tensor, Tensor]]) -> Tensor:
        """The packed rows of a batch (:func:`pack`)."""
        return pack(rows)

    def features(self, packed: Tensor) -> Tensor:
        """``[e ; Pᵀx]`` (B, d + d_l) of packed rows."""
        vectors, ids, weights = unpack(packed, self.dim)
        lexical = project(ids, weights, self.projection)
        return torch.cat([vectors.to(lexical.dtype), lexical], dim=-1)
