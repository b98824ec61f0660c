"""The one reader of the text files users give (examples, label files, texts to predict, corpora, word vectors).

UTF-8, with or without a byte-order mark (Windows editors write one: it must not become part of the first label
or word); a byte sequence that is not UTF-8 is refused with the file, the line and the fix, instead of a
``UnicodeDecodeError`` traceback that names neither, and so is a file that does not exist. :func:`check_exists` is
the one check that a file or directory a user names is there, for those read by other libraries (torch, fairseq,
sentence-transformers).
"""

import codecs
import io
import os
import sys
from typing import Iterable, Iterator, List, Optional, Tuple

from fairseq_joint.errors import InputError, MissingFileError


def text_lines(path: str, what: str = "", fix: str = "give the path of an existing file") -> Iterator[Tuple[int, str]]:
    """``(line number, line without its line end)`` of a UTF-8 text file; ``what`` names the file's role in errors
    (e.g. ``"--labels"``). The file is opened at the call: one that is not there (or a directory) is refused then, as
    a ``MissingFileError`` that ends in ``fix``, before any line is read; the readers built on this rely on that
    check."""
    name = f"{what} {path}".strip()
    try:
        f = open(path, "rb")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise MissingFileError(f"{name}: no such file: {fix}") from None
    return _closing(f, name)


def check_exists(path: str, what: str, fix: str, directory: bool = False) -> str:
    """``path`` if it is a file (a ``directory``), else a ``MissingFileError`` ``<what> <path>: no such file: <fix>``
    (``what``: the option or role that names it), the message of :func:`text_lines` too."""
    if not (os.path.isdir(path) if directory else os.path.isfile(path)):
        raise MissingFileError(f"{what} {path}".strip() + f": no such {'directory' if directory else 'file'}: {fix}")
    return path


def check_new_output(path: str, option: str, inputs: Iterable[Tuple[str, Optional[str]]]) -> str:
    """``path``, where ``option`` writes, if it is none of the command's ``inputs`` (``(option, path)`` pairs; a
    symbolic link to one too), which writing would destroy; else an ``InputError`` naming both."""
    for given, source in inputs:
        if source and os.path.exists(source) and os.path.exists(path) and os.path.samefile(path, source):
            raise InputError(f"{option} {path} is {given} {source}, which writing it would destroy: give a new file")
    return path


def _closing(f, name: str) -> Iterator[Tuple[int, str]]:
    with f:
        yield from _decoded(f, name)


def _decoded(f, name: str, encoding: str = "utf-8") -> Iterator[Tuple[int, str]]:
    utf8 = codecs.lookup(encoding).name == "utf-8"
    for lineno, raw in enumerate(f, 1):
        if lineno == 1 and utf8 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8):]
        try:
            line = raw.decode(encoding)
        except UnicodeDecodeError as err:
            raise InputError(f"{name}:{lineno}: not {'UTF-8' if utf8 else encoding} (byte 0x{raw[err.start]:02x} at "
                             f"column {err.start + 1}): save the file as UTF-8 (e.g. iconv -f LATIN1 -t UTF-8)"
                             + ("" if utf8 else " and read it in a UTF-8 locale")) from None
        yield lineno, line.rstrip("\n").rstrip("\r")


def content_lines(path: str, what: str = "", holds: str = "lines", fix: str = "give the path of an existing file"
                  ) -> Iterator[Tuple[int, str]]:
    """The lines of :func:`text_lines` that are not blank; a file without one is refused once it is read (``holds``:
    what its lines are, e.g. ``"labels"``; ``fix``: the file to give, of a missing one and of an empty one). The file
    is opened at the call, as by :func:`text_lines`."""
    return _not_blank(text_lines(path, what, fix), f"{what} {path}".strip(), holds, fix)


def _not_blank(lines: Iterator[Tuple[int, str]], name: str, holds: str, fix: str) -> Iterator[Tuple[int, str]]:
    found = False
    for lineno, line in lines:
        if line.strip():
            found = True
            yield lineno, line
    if not found:
        raise InputError(f"{name} holds no {holds}: {fix}")


def read_text(path: str, what: str = "") -> List[str]:
    """Every line of a UTF-8 text file (see :func:`text_lines`)."""
    return [line for _, line in text_lines(path, what)]


def buffered_read(original, input: str, buffer_size: int) -> Iterator[List[str]]:
    """fairseq-interactive's ``buffered_read`` (``original``, replaced) through :func:`text_lines` (the ``utf8_input``
    patch of ``fairseq_joint.fairseq_patches``): the lines of ``--input`` (``-``: stdin, read as it comes) in lists of
    ``buffer_size``, each stripped as fairseq strips them. A line that is not UTF-8 is refused with its number:
    fairseq read stdin with Python's surrogate escapes under a C or C.UTF-8 locale, so that its bytes were translated
    as unknown words without a word (a file's failed in a ``UnicodeDecodeError`` traceback); a byte order mark is
    dropped (fairseq kept it in the first word)."""
    if input == "-":  # in the locale's encoding, as fairseq read it (Python's UTF-8 under a C or C.UTF-8 locale)
        source = getattr(sys.stdin, "buffer", None)  # a text stream put in its place (io.StringIO) has none
        lines = _decoded(source if source is not None else (line.encode("utf-8", "surrogateescape")
                                                             for line in sys.stdin), "stdin",
                         sys.stdin.encoding if source is not None and sys.stdin.encoding else "utf-8")
    else:
        lines = text_lines(input, "--input")
    buffer = []
    for _, line in lines:
        for part in line.split("\r"):  # a bare carriage return ends a line too, as in fairseq's universal newlines
            buffer.append(part.strip())
            if len(buffer) >= buffer_size:
                yield buffer
                buffer = []
    if buffer:
        yield buffer


def read_stdin() -> List[str]:
    """Every line of the standard input, read as a file is (:func:`text_lines`: UTF-8, a byte-order mark dropped, lines
    ended by \\n alone, not by a form feed or U+2028 as ``str.splitlines`` ends them)."""
    source = getattr(sys.stdin, "buffer", None)  # a text stream put in its place (io.StringIO) has none
    if source is None:
        source = io.BytesIO(sys.stdin.read().encode("utf-8", "surrogateescape"))
    return [line for _, line in _decoded(source, "stdin")]  # stdin stays open
