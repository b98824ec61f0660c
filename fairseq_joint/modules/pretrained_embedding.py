"""Pre-trained word vectors for a shared embedding E (GILE Sec. 2.1: "E can be pre-trained or learned
jointly with the rest of the model").

The file is word2vec's text format, as fairseq's ``--encoder-embed-path`` reads it: an optional header line
``<count> <dim>`` (the first line with content: :func:`header_dim`), then one ``word v_1 ... v_d`` line per
word. Rows of dictionary words that the file lacks keep their random initialization; the caller logs the coverage.
"""

import logging
from typing import Optional, Tuple

import torch
import torch.nn as nn

from fairseq_joint.errors import InputError
from fairseq_joint.text_files import content_lines

logger = logging.getLogger(__name__)


def header_dim(first_line: str) -> Optional[int]:
    """The ``<dim>`` of a word2vec text file whose first line with content is the header ``<count> <dim>``, or None
    where that line is a vector."""
    parts = first_line.split()
    return int(parts[1]) if len(parts) == 2 and all(p.isdecimal() for p in parts) else None


def load_word_vectors_(embedding: nn.Embedding, dictionary, path: str, option: str = "--embed-path") -> Tuple[int, int]:
    """Copy the vectors of ``path`` into the rows of ``embedding`` of the words of ``dictionary``.

    Returns (dictionary words found in the file, vectors in the file). Refuses in one line that names the file (and
    line) a missing file (a ``MissingFileError``) or one without a line
    (:func:`~fairseq_joint.text_files.content_lines`), and as an ``InputError`` a malformed line, a value that is not
    a finite float32 number, a dimension other than the embedding's, a header whose count of vectors is not the
    file's, or a file that covers no dictionary word. A word given twice keeps its first vector, said in the log.
    """
    dim = embedding.embedding_dim
    found, lines, count, repeated = set(), {}, None, []  # lines: the line of each word's vector
    with torch.no_grad():
        for i, (lineno, line) in enumerate(content_lines(path, option, "vectors", "give a word2vec text file")):
            parts = line.rstrip().split(" ")
            header = header_dim(line) if i == 0 else None
            if header is not None and header != dim:
                raise InputError(f"{option} {path}: the vectors have {header} dimensions but --embed-dim is {dim}; set "
                                 f"--embed-dim {header}")
            if header is not None:
                count = int(line.split()[0])
                continue
            if len(parts) != dim + 1:
                raise InputError(f"{path}:{lineno}: expected a word and {dim} numbers (--embed-dim {dim}), got "
                                 f"{len(parts) - 1}; fix the line or set --embed-dim")
            try:
                vector = torch.tensor([float(x) for x in parts[1:]])
            except ValueError:
                raise InputError(f"{path}:{lineno}: a value of the vector of {parts[0]!r} is not a number") from None
            if not torch.isfinite(vector).all():  # nan, inf, or beyond float32 (1e39): training ended in NaN gradients
                raise InputError(f"{path}:{lineno}: the vector of {parts[0]!r} holds a value that is not a finite "
                                 "float32 number: fix the line, or leave the word out (it keeps a random vector)")
            if parts[0] in lines:  # as gensim reads word2vec files (fastText's .vec hold a few): the first is kept
                repeated.append(f"{parts[0]!r} (lines {lines[parts[0]]} and {lineno})")
                continue
            lines[parts[0]] = lineno
            index = dictionary.index(parts[0])
            if index != dictionary.unk() or parts[0] == dictionary.unk_word:
                embedding.weight[index] = vector
                found.add(index)
    total = len(lines) + len(repeated)
    if repeated:
        logger.warning(f"{option} {path}: {len(repeated)} word(s) given twice, the first vector of each kept: "
                       + ", ".join(repeated[:3]) + (", ..." if len(repeated) > 3 else ""))
    if count is not None and count != total:
        raise InputError(f"{option} {path}: its header says {count} vectors but it holds {total}: give the whole file "
                         "(a copy cut short?), or correct the header's count")
    if not found:
        raise InputError(f"{option} {path}: none of its {total} words is in the dictionary: give vectors of this "
                         "corpus's words (same tokenization, lowercased)")
    if embedding.padding_idx is not None:
        with torch.no_grad():
            embedding.weight[embedding.padding_idx].zero_()
    return len(found), total
