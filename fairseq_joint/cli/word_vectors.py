"""Train word vectors for GILE's shared embedding E (``--embed-path``) with gensim's word2vec.

GILE scores a label by the mean of its description's word vectors (Sec. 2.2), so a label never seen in
training is scored well only if its description words lie near the words of the texts it fits; E "can be
pre-trained" (Sec. 2.1). This script pre-trains it on the training texts, the label descriptions and any
extra raw text, with the tokenization of ``fairseq-joint-preprocess-gile`` (lowercased, punctuation split), and writes
word2vec's text format, which ``--embed-path`` (and fairseq's ``--encoder-embed-path``) read.

Example::

    fairseq-joint-word-vectors --data data/debtags-sample/train.jsonl \\
        --labels data/debtags-sample/labels.tsv --dim 100 --output vectors.txt

**Aligned vectors for several languages** (GILE-MHAN's shared space; the paper uses multi-CCA vectors):
``--aligned LANG=FILE ...`` takes one JSONL file per language whose documents are joined across languages by
their ``id`` (as in debtags-multilingual) and trains one skip-gram space for all of them on pseudo-bilingual
documents (Vulić & Moens 2015): the words of every version of a document, each tagged with its language, merged
and shuffled into one document, so translations share contexts. ``--labels`` descriptions are text of the first
language. It writes ``OUTPUT/vectors.LANG.txt`` per language (its own words, untagged; each file an
``--embed-path``) and ``OUTPUT/alignment.json``: how well the spaces align, as precision@1 of nearest-neighbour
translation retrieval on ``--heldout-docs`` parallel documents left out of training (each document of LANG,
the centred mean of its word vectors, retrieves its version in the first language among all the held-out ones
by cosine; chance = 1 / documents)::

    fairseq-joint-word-vectors --aligned en=ml/en/train.jsonl pl=ml/pl/train.jsonl \\
        --labels ml/labels.tsv --dim 100 --window 10 --output vectors/
"""

import collections
import json
import logging
import os
import random
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np

from fairseq_joint.cli.common import console_script, fail, non_negative_int, number, parser, positive_int, setup_logging
from fairseq_joint.data.gile_files import read_label_file
from fairseq_joint.data.inputs import check_min_count, heldout_parallel_ids, read_aligned, read_examples
from fairseq_joint.metrics import retrieval_precision_at_1
from fairseq_joint.modules.tokenizer import tokenize
from fairseq_joint.options import Range
from fairseq_joint.text_files import check_new_output, read_text

PROG = "fairseq-joint-word-vectors"
#: gensim's worker threads: each holds its own buffers (1e11 of them exhausted 24 GiB before training)
WORKERS = Range(1, 1024, integer=True)
logger = logging.getLogger("train_word_vectors")


def sentences(args):
    out = []
    for path in args.data:
        out += [tokenize(text) for _, text, _ in read_examples(path, args.format, args.text_field, args.labels_field)]
    for path in args.text:
        out += [tokenize(line) for line in read_text(path, "--text") if line.strip()]
    if args.labels:
        out += [tokenize(d) for d in read_label_file(args.labels).values()]
    out = [s for s in out if s]
    if not out:
        raise fail("no text to train on: give --data and/or --text")
    return out


def train_word2vec(corpus: List[List[str]], args, what: str):
    """gensim's word2vec with the command's options (``--dim``, ``--window``, ...) on ``corpus``."""
    from gensim.models import Word2Vec

    check_min_count(args.min_count, collections.Counter(w for words in corpus for w in words), what)
    logger.info(f"training {args.dim}-d {'CBOW' if args.cbow else 'skip-gram'} vectors on {len(corpus)} {what} "
                f"({sum(map(len, corpus))} tokens)")
    return Word2Vec(corpus, vector_size=args.dim, window=args.window, min_count=args.min_count,
                    sg=0 if args.cbow else 1, epochs=args.epochs, seed=args.seed, workers=args.workers)


def pseudo_bilingual_corpus(docs: Dict[str, Dict[str, List[str]]], heldout: set, extra: List[List[str]],
                            rng: random.Random) -> List[List[str]]:
    """Every document id not held out -> the language-tagged words of all its versions, merged and shuffled
    (Vulić & Moens 2015); ``extra``: more tagged texts (label descriptions)."""
    ids = sorted(set().union(*(d.keys() for d in docs.values())) - heldout)
    corpus = []
    for key in ids:
        words = [f"{lang}:{w}" for lang, d in docs.items() if key in d for w in d[key]]
        rng.shuffle(words)
        corpus.append(words)
    return [c for c in corpus + extra if c]


def split_by_language(wv, langs: Sequence[str]):
    """The joint space's vectors -> {lang: KeyedVectors of that language's words, untagged}."""
    from gensim.models import KeyedVectors

    out = {}
    for lang in langs:
        tag = f"{lang}:"
        words = [w for w in wv.index_to_key if w.startswith(tag)]
        kv = KeyedVectors(wv.vector_size)
        if words:
            kv.add_vectors([w[len(tag):] for w in words], np.stack([wv[w] for w in words]))
            # the counts keep the file in frequency order (add_vectors' own `extras` fails in gensim 4.4)
            kv.allocate_vecattrs(["count"], [np.int64])
            kv.expandos["count"][:] = [wv.get_vecattr(w, "count") for w in words]
        out[lang] = kv
    return out


def retrieval_precision(src_kv, src_docs: List[List[str]], tgt_kv, tgt_docs: List[List[str]]) -> float:
    """Precision@1 of finding document i of ``tgt_docs`` from document i of ``src_docs``, each document the mean
    of its known words' vectors (:func:`~fairseq_joint.metrics.retrieval_precision_at_1`)."""
    def matrix(kv, texts):
        rows = []
        for words in texts:
            known = [w for w in words if w in kv.key_to_index]
            rows.append(np.mean([kv[w] for w in known], axis=0) if known else np.zeros(kv.vector_size))
        return np.asarray(rows, dtype=np.float64)

    return retrieval_precision_at_1(matrix(src_kv, src_docs), matrix(tgt_kv, tgt_docs))


def aligned_vectors(args) -> int:
    """``--aligned``: one space for several languages from id-parallel documents, per-language files, alignment."""
    if args.data or args.text:
        raise fail("--aligned takes every language's documents itself: drop --data/--text, or give them as LANG=FILE")
    docs = {lang: {key: tokenize(text) for key, text in texts.items()}
            for lang, texts in read_aligned(args.aligned, args.text_field).items()}
    langs = list(docs)
    pivot = langs[0]
    for lang in langs:
        logger.info(f"{lang}: {len(docs[lang])} documents, {sum(map(len, docs[lang].values()))} tokens")
    rng = random.Random(args.seed)
    heldout = heldout_parallel_ids(docs, args.heldout_docs, rng)
    extra = []
    if args.labels:
        extra = [[f"{pivot}:{w}" for w in tokenize(d)] for d in read_label_file(args.labels).values()]
    corpus = pseudo_bilingual_corpus(docs, set(heldout), extra, rng)
    rng.shuffle(corpus)
    logger.info(f"{len(heldout)} parallel documents held out to measure the alignment")
    model = train_word2vec(corpus, args, f"pseudo-bilingual texts of {', '.join(langs)}")
    spaces = split_by_language(model.wv, langs)
    os.makedirs(args.output, exist_ok=True)
    report = {"languages": langs, "pivot": pivot, "heldout_docs": len(heldout), "dim": args.dim, "alignment": {}}
    for lang in langs:
        path = os.path.join(args.output, f"vectors.{lang}.txt")
        spaces[lang].save_word2vec_format(path, binary=False)
        logger.info(f"wrote {len(spaces[lang])} {lang} vectors to {path}")
    for lang in langs[1:]:
        if not heldout:
            break
        p1 = retrieval_precision(spaces[lang], [docs[lang][k] for k in heldout],
                                 spaces[pivot], [docs[pivot][k] for k in heldout])
        report["alignment"][lang] = {"precision_at_1": p1, "chance": 1.0 / len(heldout)}
        logger.info(f"alignment {lang} -> {pivot}: precision@1 {100 * p1:.1f}% of {len(heldout)} held-out documents "
                    f"(chance {100 / len(heldout):.1f}%)")
    with open(os.path.join(args.output, "alignment.json"), "w") as f:
        json.dump(report, f, indent=1)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    setup_logging(levels=True)
    p = parser(__doc__, prog=PROG)
    p.add_argument("--data", nargs="*", default=[],
                   help="JSONL/TSV (text, labels) files, as fairseq-joint-preprocess-gile reads")
    p.add_argument("--text", nargs="*", default=[], help="raw text files, one text per line")
    p.add_argument("--labels", help="label<TAB>description file: its descriptions are training text too")
    p.add_argument("--format", choices=["auto", "jsonl", "tsv"], default="auto")
    p.add_argument("--text-field", default="text")
    p.add_argument("--labels-field", default="labels")
    p.add_argument("--dim", type=positive_int, default=100, help="vector size (= --embed-dim of the model)")
    p.add_argument("--window", type=positive_int, default=5)
    p.add_argument("--min-count", type=positive_int, default=1,
                   help="ignore rarer words (they keep a random vector in E)")
    p.add_argument("--epochs", type=positive_int, default=10)
    p.add_argument("--cbow", action="store_true", help="CBOW instead of skip-gram")
    p.add_argument("--seed", type=non_negative_int, default=1)
    p.add_argument("--workers", type=number(WORKERS), default=1,
                   help=f"threads (1 makes the vectors reproducible; at most {WORKERS.high})")
    p.add_argument("--output", required=True,
                   help="word2vec text file to write (with --aligned: a directory for vectors.LANG.txt)")
    p.add_argument("--aligned", nargs="*", default=[], metavar="LANG=FILE",
                   help="one JSONL file per language, documents joined by 'id': one aligned space for all "
                        "(pseudo-bilingual skip-gram); the first language is the pivot and the labels' language")
    p.add_argument("--heldout-docs", type=non_negative_int, default=200,
                   help="with --aligned: parallel documents left out of training to measure the alignment")
    args = p.parse_args(argv)
    if args.aligned and os.path.isfile(args.output):  # --aligned writes a directory
        raise fail(f"--output {args.output} is a file: give a directory (for vectors.LANG.txt) with --aligned")
    if not args.aligned and os.path.isdir(args.output):
        raise fail(f"--output {args.output} is a directory: give the word2vec text file to write")
    if args.aligned:
        return aligned_vectors(args)
    check_new_output(args.output, "--output", [("--labels", args.labels), *(("--data", d) for d in args.data),
                                               *(("--text", t) for t in args.text)])
    corpus = sentences(args)
    random.Random(args.seed).shuffle(corpus)
    model = train_word2vec(corpus, args, "texts")
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    model.wv.save_word2vec_format(args.output, binary=False)
    logger.info(f"wrote {len(model.wv)} vectors to {args.output}")
    return 0


command = console_script(main, PROG)


if __name__ == "__main__":
    sys.exit(command())
