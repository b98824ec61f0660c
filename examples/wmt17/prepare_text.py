#!/usr/bin/env python
"""Text steps of the examples/wmt17 recipes (Pappas et al. 2018, Sec. 4.1): extraction from the raw
archives' formats, Moses-style normalisation and tokenization (sacremoses), cleaning (length <= 50 and a
length-ratio filter, as clean-corpus-n.perl), BPE (subword-nmt) or sentencepiece, and the checks that a
BPE model matches the data.

Every sub-command writes its output atomically (``OUT.tmp`` then a rename), so an interrupted run never
leaves a half-written file that a re-run would take as done. Errors are one line naming the file and the fix.
"""

import argparse
import hashlib
import html
import logging
import os
import re
import sys
import unicodedata
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, List

logging.basicConfig(format="%(asctime)s | prepare_text | %(message)s", level=logging.INFO, stream=sys.stderr)
log = logging.getLogger("prepare_text")


class RecipeError(Exception):
    """A one-line user error (missing or malformed file, mismatched model)."""


@contextmanager
def atomic_write(path: str):
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        yield f
    os.replace(tmp, path)


def read_lines(path: str) -> List[str]:
    """The lines of a UTF-8 corpus file, a leading byte-order mark dropped; bytes that are not UTF-8 are refused with
    the file and line. (fairseq_joint.text_files does the same for the package; this script runs once per recipe step
    and must not import the package, which loads fairseq and torch.)"""
    if not os.path.isfile(path):
        raise RecipeError(f"{path}: file not found")
    with open(path, "rb") as f:
        data = f.read()
    lines = data[3:].split(b"\n") if data.startswith(b"\xef\xbb\xbf") else data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    try:
        return [line.decode("utf-8").rstrip("\r") for line in lines]
    except UnicodeDecodeError:
        bad = next(i for i, line in enumerate(lines, 1) if not _utf8(line))
        raise RecipeError(f"{path}:{bad}: not UTF-8: save the file as UTF-8 (e.g. iconv -f LATIN1 -t UTF-8)") from None


def _utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def write_lines(path: str, lines: Iterable[str]) -> int:
    n = 0
    with atomic_write(path) as f:
        for line in lines:
            if "\n" in line:
                raise RecipeError(f"{path}: a segment contains a newline; the extractor would misalign the corpus")
            f.write(line + "\n")
            n += 1
    return n


# ---------------------------------------------------------------- extraction from archive formats
SEG = re.compile(r"<seg[^>]*>(.*?)</seg>", re.IGNORECASE | re.DOTALL)


def extract_segments(path: str) -> List[str]:
    """The ``<seg id=..>`` contents of a WMT SGM or an IWSLT XML file, unescaped, in file order."""
    text = Path(path).read_text(encoding="utf-8") if os.path.isfile(path) else None
    if text is None:
        raise RecipeError(f"{path}: file not found")
    segs = [html.unescape(s).strip().replace("\n", " ") for s in SEG.findall(text)]
    if not segs:
        raise RecipeError(f"{path}: no <seg> elements; is it a WMT .sgm / IWSLT .xml file?")
    return segs


IWSLT_KEEP = re.compile(r"^\s*<(title|description)>(.*)</\1>\s*$")


def extract_iwslt_train(path: str) -> List[str]:
    """The sentences of an IWSLT ``train.tags.*`` file: the text lines, plus the contents of <title> and
    <description> (as fairseq's prepare-iwslt14.sh keeps them); every other markup line is dropped."""
    out = []
    for line in read_lines(path):
        m = IWSLT_KEEP.match(line)
        if m:
            out.append(m.group(2).strip())
        elif not line.lstrip().startswith("<"):
            out.append(line.strip())
    return out


# ---------------------------------------------------------------- normalisation, tokenization, cleaning
def tokenize_lines(lines: List[str], lang: str, lowercase: bool = False, aggressive: bool = True) -> Iterator[str]:
    """Moses pipeline: normalize-punctuation.perl, remove-non-printing-char.perl, tokenizer.perl -a."""
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    norm = MosesPunctNormalizer(lang=lang)
    tok = MosesTokenizer(lang=lang)
    for i, line in enumerate(lines):
        line = norm.normalize(line)
        line = "".join(c if unicodedata.category(c)[0] != "C" else " " for c in line)
        line = tok.tokenize(line, aggressive_dash_splits=aggressive, escape=False, return_str=True).strip()
        if lowercase:
            line = line.lower()
        if i and i % 100000 == 0:
            log.info(f"tokenized {i:,d} lines ({lang})")
        yield line


def clean_pairs(src: List[str], tgt: List[str], min_len: int, max_len: int, ratio: float):
    """clean-corpus-n.perl: keep pairs with min_len <= words <= max_len on both sides and a length ratio <=
    ``ratio``; returns the kept pairs and the count of each reason a pair was dropped. An empty side is always
    dropped (it has no length ratio), whatever ``min_len``."""
    if min_len < 0 or max_len < max(min_len, 1):
        raise RecipeError(f"--min-len {min_len} / --max-len {max_len}: give 0 <= --min-len <= --max-len, --max-len >= 1")
    if ratio < 0:
        raise RecipeError(f"--ratio {ratio}: give the largest length ratio (>= 1), or 0 to switch the filter off")
    kept_s, kept_t, dropped = [], [], Counter()
    for s, t in zip(src, tgt):
        ns, nt = len(s.split()), len(t.split())
        if min(ns, nt) < max(min_len, 1):
            dropped["empty/short"] += 1
        elif max(ns, nt) > max_len:
            dropped[f"longer than {max_len}"] += 1
        elif ratio > 0 and (ns / nt > ratio or nt / ns > ratio):
            dropped[f"length ratio > {ratio}"] += 1
        else:
            kept_s.append(s)
            kept_t.append(t)
    return kept_s, kept_t, dropped


# ---------------------------------------------------------------- BPE / sentencepiece
def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def learn_bpe(inputs: List[str], codes: str, ops: int) -> None:
    """subword-nmt's learn_bpe (Sennrich et al. 2016) on the concatenation of ``inputs`` (joint BPE when
    both languages are given)."""
    import io

    from subword_nmt.learn_bpe import learn_bpe as _learn

    text = io.StringIO("".join(Path(p).read_text(encoding="utf-8") for p in inputs))
    with atomic_write(codes) as out:
        _learn(text, out, ops, min_frequency=2, is_dict=False, total_symbols=False)
    merges = sum(1 for line in read_lines(codes) if line and not line.startswith("#"))
    log.info(f"learned {merges:,d} BPE merges (asked for {ops:,d}) from {', '.join(inputs)} -> {codes}")


def check_codes_match(codes: str, lines: List[str], what: str, min_coverage: float = 0.9) -> None:
    """A BPE model matches the data when the characters its merges were learned from cover the data's
    characters; codes learned on another language/script (or a corrupt file) fail with one line."""
    header = read_lines(codes)
    if not header or not header[0].startswith("#version"):
        raise RecipeError(f"{codes}: not a subword-nmt codes file (no '#version' header); pass the codes that learn_bpe wrote")
    chars = set()
    for line in header[1:]:
        parts = line.split()
        if len(parts) != 2:
            raise RecipeError(f"{codes}: malformed merge line {line!r}; pass the codes that learn_bpe wrote")
        for p in parts:
            chars.update(p.replace("</w>", ""))
    counts = Counter(c for line in lines for c in line if not c.isspace())
    total = sum(counts.values())
    covered = sum(n for c, n in counts.items() if c in chars)
    if total and covered / total < min_coverage:
        raise RecipeError(
            f"{codes} does not match {what}: its merges cover only {100 * covered / total:.1f}% of the data's "
            f"characters (< {100 * min_coverage:.0f}%); learn BPE on this corpus (drop --bpe-codes) or pass its own codes"
        )


def apply_bpe(codes: str, lines: List[str], what: str) -> List[str]:
    from subword_nmt.apply_bpe import BPE

    check_codes_match(codes, lines, what)
    with open(codes, encoding="utf-8") as f:
        bpe = BPE(f)
    return [bpe.process_line(line) for line in lines]


def spm_train(inputs: List[str], model_prefix: str, vocab_size: int) -> None:
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(
        input=",".join(inputs), model_prefix=model_prefix, vocab_size=vocab_size, model_type="bpe",
        character_coverage=1.0, input_sentence_size=2000000, shuffle_input_sentence=True, seed_sentencepiece_size=1000000,
        minloglevel=2, hard_vocab_limit=False,
    )


def spm_encode(model: str, lines: List[str]) -> List[str]:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=model)
    return [" ".join(sp.encode(line, out_type=str)) for line in lines]


def generated_hypotheses(path: str, expect: int) -> List[str]:
    """Hypotheses (``H-<id>\\tscore\\ttext``) of a fairseq-generate log, ordered by sentence id; every id
    0..expect-1 must occur once (fairseq skips over-long test sentences unless told otherwise)."""
    hyps = {}
    for line in read_lines(path):
        if line.startswith("H-"):
            parts = line.split("\t", 2)
            hyps[int(parts[0][2:])] = parts[2] if len(parts) > 2 else ""
    missing = [i for i in range(expect) if i not in hyps]
    if missing:
        raise RecipeError(f"{path}: no hypothesis for {len(missing):,d} of {expect:,d} test sentences (first id {missing[0]}); "
                          "generation skipped them (check --max-len-a/--max-len-b and --skip-invalid-size-inputs-valid-test)")
    return [hyps[i] for i in range(expect)]


# ---------------------------------------------------------------- command line
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("extract-sgm", help="<seg> contents of a WMT .sgm or IWSLT .xml file, one per line")
    s.add_argument("input"), s.add_argument("output")
    s = sub.add_parser("extract-iwslt-train", help="sentences of an IWSLT train.tags.* file")
    s.add_argument("input"), s.add_argument("output")
    s = sub.add_parser("concat", help="concatenate plain-text corpora (checks they exist)")
    s.add_argument("output"), s.add_argument("inputs", nargs="+")
    s = sub.add_parser("tokenize", help="Moses normalisation + tokenization (sacremoses)")
    s.add_argument("--lang", required=True, help="language code for the Moses rules")
    s.add_argument("--lowercase", action="store_true", help="lowercase after tokenization (IWSLT14 recipe)")
    s.add_argument("input"), s.add_argument("output")
    s = sub.add_parser("clean", help="length (<= --max-len words) and ratio filter on a parallel corpus")
    s.add_argument("--min-len", type=int, default=1, help="fewest words per side")
    s.add_argument("--max-len", type=int, default=50, help="most words per side (the paper: 50)")
    s.add_argument("--ratio", type=float, default=1.5, help="largest length ratio (0 disables it)")
    s.add_argument("src_in"), s.add_argument("tgt_in"), s.add_argument("src_out"), s.add_argument("tgt_out")
    s = sub.add_parser("split-every", help="split a parallel corpus: every N-th pair to the held-out files")
    s.add_argument("--every", type=int, default=23, help="take every N-th pair (fairseq's IWSLT14 valid split)")
    s.add_argument("src_in"), s.add_argument("tgt_in"), s.add_argument("out_prefix"), s.add_argument("held_prefix")
    s.add_argument("--langs", nargs=2, required=True, help="source and target language suffixes")
    s = sub.add_parser("learn-bpe", help="learn BPE codes (subword-nmt) on the given corpora")
    s.add_argument("--ops", type=int, required=True, help="number of merge operations (32000, 64000, 128000)")
    s.add_argument("codes"), s.add_argument("inputs", nargs="+")
    s = sub.add_parser("apply-bpe", help="segment a corpus with BPE codes (checked against the data first)")
    s.add_argument("codes"), s.add_argument("input"), s.add_argument("output")
    s = sub.add_parser("spm-train", help="train a sentencepiece BPE model")
    s.add_argument("--vocab-size", type=int, required=True, help="sentencepiece vocabulary size")
    s.add_argument("model_prefix"), s.add_argument("inputs", nargs="+")
    s = sub.add_parser("spm-encode", help="segment a corpus with a sentencepiece model")
    s.add_argument("model"), s.add_argument("input"), s.add_argument("output")
    s = sub.add_parser("detokenize", help="Moses detokenization (sacremoses) of tokenized, BPE-free text")
    s.add_argument("--lang", required=True, help="language code for the Moses rules")
    s.add_argument("input"), s.add_argument("output")
    s = sub.add_parser("hypotheses", help="the H- lines of fairseq-generate output, in test-set order")
    s.add_argument("--expect", type=int, required=True, help="number of test sentences (all must be present)")
    s.add_argument("input"), s.add_argument("output")
    s = sub.add_parser("sha256", help="print a file's sha256 (for the recipe manifest)")
    s.add_argument("input")
    args = p.parse_args(argv)

    if args.cmd == "extract-sgm":
        n = write_lines(args.output, extract_segments(args.input))
        log.info(f"{args.input}: {n:,d} segments -> {args.output}")
    elif args.cmd == "extract-iwslt-train":
        n = write_lines(args.output, extract_iwslt_train(args.input))
        log.info(f"{args.input}: {n:,d} sentences -> {args.output}")
    elif args.cmd == "concat":
        lines = [line for path in args.inputs for line in read_lines(path)]
        write_lines(args.output, lines)
        log.info(f"{len(args.inputs)} files, {len(lines):,d} lines -> {args.output}")
    elif args.cmd == "tokenize":
        n = write_lines(args.output, tokenize_lines(read_lines(args.input), args.lang, args.lowercase))
        log.info(f"tokenized {args.input} ({n:,d} lines, {args.lang}) -> {args.output}")
    elif args.cmd == "clean":
        src, tgt = read_lines(args.src_in), read_lines(args.tgt_in)
        if len(src) != len(tgt):
            raise RecipeError(f"{args.src_in} has {len(src):,d} lines but {args.tgt_in} has {len(tgt):,d}; the corpus is misaligned")
        ks, kt, dropped = clean_pairs(src, tgt, args.min_len, args.max_len, args.ratio)
        write_lines(args.src_out, ks), write_lines(args.tgt_out, kt)
        why = ", ".join(f"{k}: {v:,d}" for k, v in sorted(dropped.items())) or "none"
        log.info(f"cleaning kept {len(ks):,d} of {len(src):,d} pairs (dropped {why})")
    elif args.cmd == "split-every":
        src, tgt = read_lines(args.src_in), read_lines(args.tgt_in)
        if len(src) != len(tgt):
            raise RecipeError(f"{args.src_in} has {len(src):,d} lines but {args.tgt_in} has {len(tgt):,d}; the corpus is misaligned")
        held = [(i + 1) % args.every == 0 for i in range(len(src))]  # awk 'NR % 23 == 0'
        for prefix, want in ((args.out_prefix, False), (args.held_prefix, True)):
            for lang, lines in zip(args.langs, (src, tgt)):
                write_lines(f"{prefix}.{lang}", [x for x, h in zip(lines, held) if h == want])
        log.info(f"split {len(src):,d} pairs: {sum(held):,d} held out (every {args.every}th)")
    elif args.cmd == "learn-bpe":
        learn_bpe(args.inputs, args.codes, args.ops)
    elif args.cmd == "apply-bpe":
        n = write_lines(args.output, apply_bpe(args.codes, read_lines(args.input), args.input))
        log.info(f"BPE {args.input} ({n:,d} lines) -> {args.output}")
    elif args.cmd == "spm-train":
        spm_train(args.inputs, args.model_prefix, args.vocab_size)
        log.info(f"sentencepiece model {args.model_prefix}.model ({args.vocab_size:,d} pieces)")
    elif args.cmd == "spm-encode":
        n = write_lines(args.output, spm_encode(args.model, read_lines(args.input)))
        log.info(f"sentencepiece {args.input} ({n:,d} lines) -> {args.output}")
    elif args.cmd == "detokenize":
        from sacremoses import MosesDetokenizer

        detok = MosesDetokenizer(lang=args.lang)
        write_lines(args.output, (detok.detokenize(line.split()) for line in read_lines(args.input)))
    elif args.cmd == "hypotheses":
        write_lines(args.output, generated_hypotheses(args.input, args.expect))
    elif args.cmd == "sha256":
        print(sha256(args.input))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RecipeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
