"""The inputs users give the plugin's commands, read or refused with the file, the line and the fix: (text, labels)
examples in JSONL or TSV, id-aligned documents of several languages (``--aligned LANG=FILE``), and a ``--min-count``
that would keep no word. Every text file is read through :mod:`fairseq_joint.text_files`."""

import json
import random
import re
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_joint.errors import InputError, OptionError, one_line
from fairseq_joint.options import named_values
from fairseq_joint.text_files import content_lines


def read_examples(path: str, fmt: str = "auto", text_field: str = "text", labels_field: str = "labels",
                  lang: Optional[str] = None) -> List[Tuple[int, str, List[str]]]:
    """``[(line number, text, [labels])]`` of a JSONL (objects with a text and a list of labels) or TSV
    (``text<TAB>label1 label2``) file; the format follows the extension unless ``fmt`` says. Bad lines are refused
    with file:line (a missing or empty file in :func:`~fairseq_joint.text_files.content_lines`), and with ``lang``
    (``--lang``) a JSONL record whose ``lang`` field names another language (:func:`json_record`)."""
    if fmt == "auto":
        fmt = "tsv" if path.endswith(".tsv") else "jsonl" if path.endswith((".jsonl", ".json")) else None
        if fmt is None:
            raise OptionError(f"{path}: cannot tell the format from the extension; pass --format jsonl|tsv")
    rows = []
    for lineno, line in content_lines(path, holds="examples", fix="give a JSONL or TSV file of (text, labels)"):
        if fmt == "jsonl":
            obj = json_record(path, lineno, line, (text_field, labels_field), "set --text-field/--labels-field", lang)
            text, labels = obj[text_field], obj[labels_field]
            if isinstance(labels, str):
                labels = labels.split()
            if not isinstance(text, str) or not isinstance(labels, list):
                raise InputError(f"{path}:{lineno}: {text_field!r} must be a string and {labels_field!r} a list")
        else:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 2:
                raise InputError(f"{path}:{lineno}: expected 'text<TAB>labels', found {len(parts)} fields")
            text, labels = parts[0], parts[1].split()
        # a label is a string or an integer id (the label '3'); JSON's null, true or 1.5 is none (refused below)
        labels = [str(x) if type(x) is int else x for x in labels]
        labels = [x.strip() if isinstance(x, str) else x for x in labels]
        if not text.strip():
            raise InputError(f"{path}:{lineno}: empty text")
        if not labels or any(not isinstance(x, str) or not x or any(c.isspace() for c in x) for x in labels):
            raise InputError(f"{path}:{lineno}: needs at least one label, each a string (or an integer id) without "
                             f"whitespace, got {labels!r}")
        rows.append((lineno, text, labels))
    return rows


def load_dictionary(path: str, what: str, fix: str = "give the dict file fairseq-preprocess wrote"):
    """fairseq's ``Dictionary.load`` of the dictionary ``path`` (``what`` names it); a file it cannot read (a line
    without a count, a word given twice, bytes that are not UTF-8) refused naming the file, what fairseq says and
    ``fix``."""
    from fairseq.data import Dictionary

    try:
        return Dictionary.load(path)
    except Exception as e:  # fairseq's ValueError, RuntimeError, and a bare Exception for the encoding
        if type(e) not in (Exception, ValueError, RuntimeError):
            raise
        raise InputError(f"{what} {path} is not a fairseq dictionary ({one_line(e)}): {fix}") from None


def check_min_count(min_count: int, counts: Dict[str, int], what: str) -> None:
    """``--min-count`` keeps at least one word of ``counts`` (the words of ``what``): above every word's count, the
    vocabulary would be empty (every word ``<unk>``; gensim fails in "you must first build vocabulary")."""
    most = max(counts.values(), default=0)
    if min_count > most:
        raise OptionError(f"--min-count {min_count} is above every word's count in the {what}: give at most {most}")


#: the escape of a UTF-16 surrogate in a JSON line (a pair is one character; a lone one none)
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _object(pairs: List[Tuple[str, object]]) -> Dict[str, object]:
    """A JSON object whose keys are distinct (json's ``object_pairs_hook``)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        twice = next(key for i, (key, _) in enumerate(pairs) if key in dict(pairs[:i]))
        raise ValueError(f"the key {twice!r} is given twice")
    return obj


def json_record(path: str, lineno: int, line: str, fields: Sequence[str], fix: str, lang: Optional[str] = None,
                option: str = "--lang") -> Dict[str, object]:
    """One JSONL line as an object holding ``fields``; anything else fails with file:line and ``fix``, and so does,
    with ``lang`` (the language ``option`` gave), a ``lang`` field that names another language. Not JSON that a
    text file holds: a key given twice in an object (the last would win), a number Python will not read (over 4300
    digits), nesting deeper than Python recurses, a lone surrogate (``"\\ud800"``, which no UTF-8 file can hold)."""
    try:
        obj = json.loads(line, object_pairs_hook=_object)
        if SURROGATE_ESCAPE.search(line):  # written as an escape; a surrogate pair encodes, a lone one is no text
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError, UnicodeEncodeError) as e:
        said = {RecursionError: "nested too deeply", UnicodeEncodeError: "a lone surrogate, which is no text"}.get(
            type(e), getattr(e, "msg", str(e).split(":")[0]))  # a JSONDecodeError's msg; ours, or Python's int limit
        raise InputError(f"{path}:{lineno}: not valid JSON ({said}): give one JSON object a line") from None
    if not isinstance(obj, dict) or any(f not in obj for f in fields):
        raise InputError(f"{path}:{lineno}: needs the fields {' and '.join(map(repr, fields))} ({fix})")
    if lang is not None and obj.get("lang") is not None and str(obj["lang"]) != lang:
        raise InputError(f"{path}:{lineno}: lang {obj['lang']!r} contradicts {option} {lang}: give each language its "
                         "own file")
    return obj


def read_parallel_documents(lang: str, path: str, text_field: str = "text") -> Dict[str, str]:
    """One language's JSONL documents of ``--aligned LANG=FILE``: {id: text}. A document whose ``lang`` field names
    another language, or an ``id`` given twice, fails with file:line (a missing or empty file in
    :func:`~fairseq_joint.text_files.content_lines`)."""
    docs: Dict[str, str] = {}
    for lineno, line in content_lines(path, f"--aligned {lang}:", "documents", "give a JSONL file of documents"):
        obj = json_record(path, lineno, line, ("id", text_field), "documents are joined across languages by id", lang,
                          "--aligned")
        key, text = obj["id"], obj[text_field]
        if not isinstance(text, str) or isinstance(key, bool) or not isinstance(key, (str, int)):
            raise InputError(f"{path}:{lineno}: needs an id (a string or an integer) and a {text_field!r} string, "
                             f"got {key!r} and {text!r}")
        if str(key) in docs:
            raise InputError(f"{path}:{lineno}: id {key} is given twice: one document per id and language")
        docs[str(key)] = text
    return docs


def read_aligned(items: Sequence[str], text_field: str = "text") -> Dict[str, Dict[str, str]]:
    """``--aligned LANG=FILE ...`` -> {lang: {id: text}} in the order given (the first language is the pivot)."""
    named = named_values("--aligned", items, "LANG=FILE (e.g. pl=pl/train.jsonl)")
    if len(named) < 2:
        raise OptionError("--aligned needs at least two LANG=FILE (the first language's documents are the pivot)")
    return {lang: read_parallel_documents(lang, path, text_field) for lang, path in named.items()}


def heldout_parallel_ids(docs: Dict[str, Dict[str, str]], heldout_docs: int, rng: random.Random) -> List[str]:
    """``--heldout-docs`` ids, drawn with ``rng`` from the documents every language of ``docs`` has (left out of
    training to measure how well the languages' spaces align)."""
    langs = list(docs)
    shared = sorted(k for k in docs[langs[0]] if all(k in docs[lang] for lang in langs[1:]))
    if not shared:
        raise InputError(f"no document id is in every --aligned file ({', '.join(langs)}): documents are joined by id")
    if heldout_docs > len(shared) // 2:
        raise OptionError(f"--heldout-docs {heldout_docs} is over half the {len(shared)} parallel docs: use at most "
                          f"{len(shared) // 2}")
    return sorted(rng.sample(shared, heldout_docs))
