"""Train word vectors for GILE's shared embedding E (``--embed-path``) with gensim's word2vec.

GILE scores a label by the mean of its description's word vectors (Sec. 2.2), so a label never seen in
training is scored well only if its description words lie near the words of the texts it fits; E "can be
pre-trained" (Sec. 2.1). This script pre-trains it on the training texts, the label descriptions and any
extra raw text, with the tokenization of ``fairseq-joint-preprocess-gile`` (lowercased, punctuation split), and writes
word2vec's text format, which ``--embed-path`` (and fairseq's ``--encoder-embed-path``) read.

Example::

    fairseq-joint-word-vectors --data data/debtags-sample/train.jsonl \\
        --labels data/debtags-sample/labels.tsv --dim 100 --output vectors.txt
"""

import logging
import os
import random
import sys
from typing import Optional, Sequence

from fairseq_joint.cli.common import fail, parser, read_examples, read_lines, run, setup_logging
from fairseq_joint.tasks.gile_classification import read_label_file, tokenize

PROG = "fairseq-joint-word-vectors"
logger = logging.getLogger("train_word_vectors")


def sentences(args):
    out = []
    for path in args.data:
        out += [tokenize(text) for _, text, _ in read_examples(path, args.format, args.text_field, args.labels_field)]
    for path in args.text:
        out += [tokenize(line) for line in read_lines(path, "--text") if line.strip()]
    if args.labels:
        out += [tokenize(d) for d in read_label_file(args.labels).values()]
    out = [s for s in out if s]
    if not out:
        raise fail("no text to train on: give --data and/or --text")
    return out


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
    p.add_argument("--dim", type=int, default=100, help="vector size (= --embed-dim of the model)")
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--min-count", type=int, default=1, help="ignore rarer words (they keep a random vector in E)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--cbow", action="store_true", help="CBOW instead of skip-gram")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=1, help="threads (1 makes the vectors reproducible)")
    p.add_argument("--output", required=True, help="word2vec text file to write")
    args = p.parse_args(argv)
    if args.dim <= 0:
        raise fail(f"--dim must be positive, got {args.dim}")
    from gensim.models import Word2Vec

    corpus = sentences(args)
    random.Random(args.seed).shuffle(corpus)
    logger.info(f"training {args.dim}-d {'CBOW' if args.cbow else 'skip-gram'} vectors on {len(corpus)} texts "
                f"({sum(map(len, corpus))} tokens)")
    model = Word2Vec(corpus, vector_size=args.dim, window=args.window, min_count=args.min_count, sg=0 if args.cbow else 1,
                     epochs=args.epochs, seed=args.seed, workers=args.workers)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    model.wv.save_word2vec_format(args.output, binary=False)
    logger.info(f"wrote {len(model.wv)} vectors to {args.output}")
    return 0


def command() -> int:
    """The ``fairseq-joint-word-vectors`` console script."""
    return run(main)


if __name__ == "__main__":
    sys.exit(command())
