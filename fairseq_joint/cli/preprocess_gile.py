"""Binarize (text, labels) data and label descriptions for ``--task gile_classification``.

Inputs are JSONL (one object per line with a text field and a list of labels) or TSV
(``text<TAB>label1 label2 ...``, labels whitespace-separated); the format follows the file extension
(``.jsonl``/``.json`` or ``.tsv``) unless ``--format`` says otherwise. ``--labels`` is a
``label<TAB>description`` file; every label of the data must be in it (unseen validation/test labels too).

Writes to ``--destdir``: ``dict.txt`` (one fairseq Dictionary for the words of the training texts and of
every label description: GILE shares E between words and label words), ``{split}.input.{bin,idx}``,
``{split}.labels``, ``{split}.text`` (the raw texts, one JSON string per line, for a pretrained sentence encoder),
``labels.train.txt`` (the labels training examples carry) and ``labels.tsv``. With ``--lang`` (one language of a
multilingual model, ``--task gile_classification --languages``), every JSONL record's ``lang`` field must name that
language, and ``language.txt`` records it for the task to check against the directory it is read from. With
``--lexical-features N``, ``lexical.json``: a TF-IDF model (word uni+bigrams, sublinear tf, at most N terms) fitted on
the training texts (or on ``--lexical-texts``: e.g. every language's training file, one model for the languages of a
multilingual model; ``--lexical-tokenizer gile`` for languages written without spaces), the lexical channel of
``--encoder hybrid``; ``--lexical-model FILE`` copies one fitted before (every language of a multilingual model reads
the same). In a ``--destdir`` of an earlier run, a split this run is not given stays if it was binarized with the
same dictionary, and is refused otherwise, before anything is written; so is the earlier run's label file when this
run is given none; its language and lexical model, which this run does not write, are removed (logged).

Example::

    fairseq-joint-preprocess-gile --train data/debtags-sample/train.jsonl \\
        --valid data/debtags-sample/valid.jsonl --labels data/debtags-sample/labels.tsv --destdir data-bin/debtags
"""

import contextlib
import json
import logging
import multiprocessing
import os
import shutil
import sys
import time
from collections import Counter
from typing import List, Optional, Sequence

import torch
from fairseq.data import Dictionary
from fairseq.data.indexed_dataset import make_builder

from fairseq_joint.cli.common import console_script, fail, number, parser, positive_int, setup_logging
from fairseq_joint.data.gile_files import (
    LABEL_FILE,
    LANGUAGE_FILE,
    LEXICAL_FILE,
    RAW_TEXTS,
    TRAIN_LABELS,
    is_language_name,
    read_label_file,
)
from fairseq_joint.data.inputs import check_min_count, read_examples
from fairseq_joint.modules.lexical_encoder import DEFAULT_MAX_FEATURES, MAX_FEATURES, TOKENIZERS, LexicalModel
from fairseq_joint.modules.tokenizer import tokenize

PROG = "fairseq-joint-preprocess-gile"
logger = logging.getLogger("preprocess_gile")


#: seconds between two progress lines of a long tokenization
PROGRESS_SECONDS = 30


def tokenize_all(texts: Sequence[str], workers: int) -> List[List[str]]:
    """:func:`~fairseq_joint.modules.tokenizer.tokenize` of each text, in order, by ``workers`` processes (the Moses
    tokenizer's time is most of the preprocessing of a large corpus), with a progress line every
    :data:`PROGRESS_SECONDS`."""
    logger.info(f"tokenizing {len(texts)} texts and label descriptions" + (f" in {workers} processes" if workers > 1
                                                                          else ""))
    out, last = [], time.monotonic()
    with multiprocessing.Pool(workers) if workers > 1 else contextlib.nullcontext() as pool:
        chunk = max(1, min(1000, len(texts) // (8 * workers)))
        for words in pool.imap(tokenize, texts, chunksize=chunk) if pool else map(tokenize, texts):
            out.append(words)
            if time.monotonic() - last >= PROGRESS_SECONDS:
                logger.info(f"tokenized {len(out)} of {len(texts)} texts and label descriptions")
                last = time.monotonic()
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    setup_logging(levels=True)
    p = parser(__doc__, prog=PROG)
    p.add_argument("--train", required=True, help="training examples (JSONL or TSV)")
    p.add_argument("--valid", help="validation examples")
    p.add_argument("--test", help="test examples")
    p.add_argument("--labels", help="label<TAB>description file (needed by every head but linear)")
    p.add_argument("--destdir", required=True, help="output directory")
    p.add_argument("--format", choices=("auto", "jsonl", "tsv"), default="auto", help="input format")
    p.add_argument("--text-field", default="text", help="JSONL field of the text")
    p.add_argument("--labels-field", default="labels", help="JSONL field of the label list")
    p.add_argument("--lang", help="the language of every text (e.g. pl): JSONL records whose 'lang' field names "
                   "another are refused; written to DESTDIR/language.txt for --task gile_classification --languages")
    p.add_argument("--min-count", type=positive_int, default=1, help="keep words seen at least this often (others -> <unk>)")
    p.add_argument("--lexical-features", type=number(MAX_FEATURES), nargs="?", const=DEFAULT_MAX_FEATURES,
                   default=0, metavar="N",
                   help=f"fit a TF-IDF model (word uni+bigrams, sublinear tf, terms of >= 2 training texts, the N most "
                   f"frequent; N {DEFAULT_MAX_FEATURES} when not given) on the training texts into DESTDIR/{LEXICAL_FILE}: "
                   "the lexical channel of --encoder hybrid")
    p.add_argument("--lexical-texts", nargs="+", metavar="FILE",
                   help="--lexical-features: fit the TF-IDF model on the texts of these files (JSONL or TSV, as --train) "
                   "instead of --train's: e.g. every language's training file, one lexical model for a multilingual "
                   "model's languages")
    p.add_argument("--lexical-tokenizer", choices=TOKENIZERS, default="words",
                   help="--lexical-features: words are scikit-learn's (runs of word characters), or GILE's tokens (gile: "
                   "each character of a script written without spaces, e.g. Japanese, is a word)")
    p.add_argument("--workers", type=positive_int, default=1,
                   help="processes that tokenize the texts and the label descriptions, as fairseq-preprocess's option "
                   "(the output is the same for any number)")
    p.add_argument("--lexical-model", metavar="FILE",
                   help=f"copy this {LEXICAL_FILE}, fitted before (e.g. by the first language's preprocessing with "
                   "--lexical-texts), into DESTDIR instead of fitting one")
    args = p.parse_args(argv)
    fitting = [option for option, given in (("--lexical-features", args.lexical_features),
                                            ("--lexical-texts", args.lexical_texts),
                                            ("--lexical-tokenizer", args.lexical_tokenizer != "words")) if given]
    if args.lexical_model and fitting:
        raise fail(f"--lexical-model copies a fitted lexical model: drop {' and '.join(fitting)}")
    if fitting and not args.lexical_features:
        raise fail(f"{' and '.join(fitting)} without --lexical-features: add --lexical-features N (e.g. 65536)")
    texts = [os.path.realpath(path) for path in args.lexical_texts or ()]
    twice = [path for i, path in enumerate(args.lexical_texts or ()) if texts[i] in texts[:i]]
    if twice:  # its texts would count twice in the terms' document frequencies
        raise fail(f"--lexical-texts {twice[0]} is given twice: give each file once")

    if os.path.lexists(args.destdir) and not os.path.isdir(args.destdir):  # (the OS's error named --labels' path)
        raise fail(f"--destdir {args.destdir} is a file, not a directory: give a directory to write to")
    descriptions = read_label_file(args.labels) if args.labels else None
    if args.lang is not None and not is_language_name(args.lang):
        raise fail(f"--lang {args.lang!r}: give a language name without spaces or , = / \\ (e.g. pl, pt_BR)")
    # a JSONL record's lang field names --lang
    splits = {s: read_examples(getattr(args, s), args.format, args.text_field, args.labels_field, args.lang)
              for s in ("train", "valid", "test") if getattr(args, s)}
    train_seen = {x for _, _, labels in splits["train"] for x in labels}
    if descriptions is not None:  # every label is described in --labels, else occurs in training
        known, problem = descriptions, f"is missing from {args.labels}: add a 'label<TAB>description' line for it"
    else:
        known, problem = train_seen, "never occurs in training and no --labels file describes it: pass --labels"
    for split, rows in splits.items():
        for lineno, _, labels in rows:
            for x in labels:
                if x not in known:
                    raise fail(f"{getattr(args, split)}:{lineno}: label {x!r} {problem}")
    train_labels = [x for x in descriptions if x in train_seen] if descriptions else sorted(train_seen)

    texts = [text for rows in splits.values() for _, text, _ in rows] + list((descriptions or {}).values())
    words = tokenize_all(texts, args.workers)
    tokenized = {}
    for split, rows in splits.items():
        tokenized[split], words = words[:len(rows)], words[len(rows):]
    counts = Counter(w for text in tokenized["train"] for w in text)
    counts.update(w for description in words for w in description)  # the label descriptions' words
    check_min_count(args.min_count, counts, "training texts and label descriptions")
    os.makedirs(args.destdir, exist_ok=True)
    dictionary = Dictionary()
    for word, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if c >= args.min_count:
            dictionary.add_symbol(word, c)
    dictionary.finalize(padding_factor=8)
    check_earlier_files(args.destdir, splits, dictionary, args.labels)
    dictionary.save(os.path.join(args.destdir, "dict.txt"))

    for split, rows in splits.items():
        prefix = os.path.join(args.destdir, f"{split}.input")
        builder = make_builder(prefix + ".bin", impl="mmap", vocab_size=len(dictionary))
        unk = total = 0
        for (lineno, _, _), words in zip(rows, tokenized[split]):
            if not words:
                raise fail(f"{getattr(args, split)}:{lineno}: the text has no tokens")
            ids = torch.IntTensor([dictionary.index(w) for w in words])
            unk += int((ids == dictionary.unk()).sum())
            total += ids.numel()
            builder.add_item(ids)
        builder.finalize(prefix + ".idx")
        with open(os.path.join(args.destdir, f"{split}.labels"), "w", encoding="utf-8") as f:
            for _, _, labels in rows:
                f.write(" ".join(dict.fromkeys(labels)) + "\n")
        with open(os.path.join(args.destdir, RAW_TEXTS.format(split=split)), "w", encoding="utf-8") as f:
            for _, text, _ in rows:
                f.write(json.dumps(text, ensure_ascii=False) + "\n")
        labels = {x for _, _, ls in rows for x in ls}
        logger.info(f"{split}: {len(rows)} examples, {total} tokens ({100.0 * unk / total:.2f}% <unk>), "
                    f"{len(labels)} labels ({len(labels - train_seen)} unseen in training)")
    with open(os.path.join(args.destdir, TRAIN_LABELS), "w", encoding="utf-8") as f:
        f.write("".join(x + "\n" for x in train_labels))
    copy = os.path.join(args.destdir, LABEL_FILE)
    if args.labels and not (os.path.exists(copy) and os.path.samefile(args.labels, copy)):  # a re-run reads its copy
        shutil.copyfile(args.labels, copy)
    if args.lang is not None:
        with open(os.path.join(args.destdir, LANGUAGE_FILE), "w", encoding="utf-8") as f:
            f.write(args.lang + "\n")
    lexical_path = os.path.join(args.destdir, LEXICAL_FILE)
    if args.lexical_model:
        LexicalModel.load(args.lexical_model, "--lexical-model").save(lexical_path)
        logger.info(f"lexical features: copied {args.lexical_model} to {lexical_path}")
    elif args.lexical_features:
        sources = args.lexical_texts or [args.train]
        texts = [text for path in sources for _, text, _ in
                 (splits["train"] if path == args.train else read_examples(path, args.format, args.text_field,
                                                                             args.labels_field))]
        lexical = LexicalModel.fit(texts, args.lexical_features, f"the texts of {', '.join(sources)}",
                                   tokenizer=args.lexical_tokenizer)
        lexical.save(lexical_path)
        logger.info(f"lexical features: {lexical.num_features} TF-IDF terms ({args.lexical_tokenizer}) fitted on "
                    f"{lexical.documents} texts of {len(sources)} file(s); wrote {lexical_path}")
    remove_derived_files(args.destdir, [name for name, written in ((LANGUAGE_FILE, args.lang is not None), (
        LEXICAL_FILE, bool(args.lexical_model or args.lexical_features))) if not written])
    logger.info(f"dictionary: {len(dictionary)} types; {len(train_labels)} training labels; wrote {args.destdir}")
    return 0


def check_earlier_files(destdir: str, splits, dictionary: Dictionary, labels: Optional[str]) -> None:
    """Refuse, before anything is written, a DESTDIR of an earlier run whose files this run would leave beside its
    own to be read with them: a split it is not given, binarized with another dictionary than this run's (read with
    this one, its documents would be other words; a split of the same dictionary stays), and the label file the
    earlier run copied when this one is given none (its descriptions would be read with this run's data)."""
    earlier = [split for split in ("train", "valid", "test") if split not in splits
               and os.path.isfile(os.path.join(destdir, f"{split}.input.bin"))]
    old_dictionary = os.path.join(destdir, "dict.txt")
    if earlier and not (os.path.isfile(old_dictionary) and Dictionary.load(old_dictionary).symbols == dictionary.symbols):
        given = " and ".join(f"--{split}" for split in earlier)
        raise fail(f"--destdir {destdir} holds the {'/'.join(earlier)} split of an earlier run, binarized with another "
                   f"dictionary than this run's: give {given} again, remove it ({destdir}/{earlier[0]}.*), or give "
                   "another --destdir")
    if not labels and os.path.isfile(os.path.join(destdir, LABEL_FILE)):
        raise fail(f"--destdir {destdir} holds {LABEL_FILE} of an earlier run: give --labels "
                   f"{os.path.join(destdir, LABEL_FILE)} to use it again, or remove it")


def remove_derived_files(destdir: str, names) -> None:
    """The files ``names`` of DESTDIR that an earlier run derived and this run does not write (its language, a
    lexical model fitted on other texts) removed, each said in the log."""
    for name in names:
        path = os.path.join(destdir, name)
        if os.path.isfile(path):
            os.remove(path)
            logger.info(f"removed {path}: an earlier run's, which this run's files do not go with")


command = console_script(main, PROG)


if __name__ == "__main__":
    sys.exit(command())
