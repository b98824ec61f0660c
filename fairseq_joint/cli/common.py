"""What every fairseq-joint command shares: one error style, argument parsing, reading the inputs users give
(JSONL/TSV examples, text files, ``NAME=PATH`` pairs), loading a checkpoint's model, and matplotlib.

One error style for all commands: a refusal is one line ``error: <what>, <the fix>`` on stderr and exit status 2,
whether it comes from the command's own checks (:class:`CommandError`) or from the package's validation (the
:class:`fairseq_joint.errors.Refusal` types). ``FAIRSEQ_JOINT_DEBUG=1`` shows the traceback instead. Any other error (a
bug's ``ValueError`` included, a library's own failure) keeps its traceback.
"""

import argparse
import contextlib
import json
import logging
import os
import pickle
import random
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from fairseq_joint import checks, errors, options
from fairseq_joint.options import Range, number_problem
from fairseq_joint.text_files import read_text, text_lines

#: set to 1 to see the traceback of a refusal
DEBUG_ENV = errors.DEBUG_ENV


class CommandError(errors.Refusal):
    """A refusal of a command or a recipe tool: the message names the file or option and the fix."""


def fail(message: str) -> "CommandError":
    """``raise fail("...")``: a refusal (see :class:`CommandError`)."""
    return CommandError(message)


def run(main: Callable[[Optional[Sequence[str]]], Optional[int]], argv: Optional[Sequence[str]] = None) -> int:
    """Run a command's ``main(argv)``; a refusal (:func:`fairseq_joint.errors.refusal`: a ``Refusal``, also one a
    library wrapped) becomes one ``error:`` line on stderr and exit status 2."""
    try:
        return int(main(argv) or 0)
    except Exception as err:
        if errors.print_refusal(err):
            return 2
        raise


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the commands' error style: ``error: <message> (see --help)`` on one line, exit status 2
    (:func:`fairseq_joint.errors.usage_problem`: a misspelled option's close names too)."""

    def error(self, message):
        self.exit(2, f"error: {errors.usage_problem(self, message)}\n")


def parser(doc: str, **kwargs) -> ArgumentParser:
    """An :class:`ArgumentParser` whose description is the command's module docstring."""
    return ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)


def number(allowed: Range) -> Callable[[str], float]:
    """An argparse ``type`` for a numeric option: the text as an int (``allowed.integer``) or a float, refused by
    argparse (one ``error: argument --x: must be ...`` line) unless :func:`fairseq_joint.options.number_problem` finds
    it finite and in ``allowed``."""
    def parse(text: str):
        try:
            value = int(text) if allowed.integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}") from None
        problem = number_problem(value, allowed)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = "integer" if allowed.integer else "number"
    return parse


#: the argparse types of the commands' numeric options (:func:`number`)
finite_float = number(options.ANY)
positive_float = number(options.POSITIVE)
probability = number(options.PROBABILITY)
positive_int = number(options.POSITIVE_INT)
non_negative_int = number(options.NON_NEGATIVE_INT)
seed = number(options.SEED)


def setup_logging(levels: bool = False) -> None:
    """Progress lines on stderr: ``time | message`` (``levels``: ``time | LEVEL | message``), INFO and up."""
    fmt = "%(asctime)s | %(levelname)s | %(message)s" if levels else "%(asctime)s | %(message)s"
    logging.basicConfig(format=fmt, level=logging.INFO)


# ---------------------------------------------------------------------------------------------- reading inputs
def read_lines(path: str, what: str) -> List[str]:
    """The lines of a UTF-8 text file (without line ends; :mod:`fairseq_joint.text_files`); a missing file is a
    refusal naming ``what``."""
    try:
        return read_text(path, what)
    except FileNotFoundError:
        raise fail(f"{what} {path}: file not found") from None


def read_examples(path: str, fmt: str = "auto", text_field: str = "text",
                  labels_field: str = "labels") -> List[Tuple[int, str, List[str]]]:
    """``[(line number, text, [labels])]`` of a JSONL (objects with a text and a list of labels) or TSV
    (``text<TAB>label1 label2``) file; the format follows the extension unless ``fmt`` says. Bad lines are refused
    with file:line."""
    if not os.path.isfile(path):
        raise fail(f"{path} does not exist: give a JSONL or TSV file of (text, labels) examples")
    if fmt == "auto":
        fmt = "tsv" if path.endswith(".tsv") else "jsonl" if path.endswith((".jsonl", ".json")) else None
        if fmt is None:
            raise fail(f"{path}: cannot tell the format from the extension; pass --format jsonl|tsv")
    rows = []
    for lineno, line in text_lines(path):
        if not line.strip():
            continue
        if fmt == "jsonl":
            obj = json_record(path, lineno, line, (text_field, labels_field), "set --text-field/--labels-field")
            text, labels = obj[text_field], obj[labels_field]
            if isinstance(labels, str):
                labels = labels.split()
            if not isinstance(text, str) or not isinstance(labels, list):
                raise fail(f"{path}:{lineno}: {text_field!r} must be a string and {labels_field!r} a list")
        else:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 2:
                raise fail(f"{path}:{lineno}: expected 'text<TAB>labels', found {len(parts)} fields")
            text, labels = parts[0], parts[1].split()
        labels = [str(x).strip() for x in labels]
        if not text.strip():
            raise fail(f"{path}:{lineno}: empty text")
        if not labels or any(not x or any(c.isspace() for c in x) for x in labels):
            raise fail(f"{path}:{lineno}: needs at least one label, without whitespace in labels")
        rows.append((lineno, text, labels))
    if not rows:
        raise fail(f"{path} holds no examples")
    return rows


def check_min_count(min_count: int, counts: Dict[str, int], what: str) -> None:
    """``--min-count`` keeps at least one word of ``counts`` (the words of ``what``): above every word's count, the
    vocabulary would be empty (every word ``<unk>``; gensim fails in "you must first build vocabulary")."""
    most = max(counts.values(), default=0)
    if min_count > most:
        raise fail(f"--min-count {min_count} is above every word's count (the most frequent word of the {what} "
                   f"occurs {most} times): give at most {most}")


def json_record(path: str, lineno: int, line: str, fields: Sequence[str], fix: str) -> Dict[str, object]:
    """One JSONL line as an object holding ``fields``; anything else fails with file:line and ``fix``."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise fail(f"{path}:{lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(obj, dict) or any(f not in obj for f in fields):
        raise fail(f"{path}:{lineno}: needs the fields {' and '.join(map(repr, fields))} ({fix})")
    return obj


def read_parallel_documents(lang: str, path: str, text_field: str = "text") -> Dict[str, str]:
    """One language's JSONL documents of ``--aligned LANG=FILE``: {id: text}. A document whose ``lang`` field names
    another language, or an ``id`` given twice, fails with file:line."""
    if not os.path.isfile(path):
        raise fail(f"--aligned {lang}={path}: the file does not exist")
    docs: Dict[str, str] = {}
    for lineno, line in text_lines(path):
        if not line.strip():
            continue
        obj = json_record(path, lineno, line, ("id", text_field), "documents are joined across languages by id")
        if "lang" in obj and str(obj["lang"]) != lang:
            raise fail(f"{path}:{lineno}: the document's lang {obj['lang']!r} contradicts --aligned {lang}={path}: "
                       "give each language its own file, named by its language")
        key = str(obj["id"])
        if key in docs:
            raise fail(f"{path}:{lineno}: id {key} is given twice in one language: one document per id and language")
        docs[key] = str(obj[text_field])
    if not docs:
        raise fail(f"{path} holds no documents")
    return docs


def read_aligned(items: Sequence[str], text_field: str = "text") -> Dict[str, Dict[str, str]]:
    """``--aligned LANG=FILE ...`` -> {lang: {id: text}} in the order given (the first language is the pivot)."""
    def no_language(item):
        raise fail(f"--aligned {item}: name the file's language, LANG=FILE (e.g. pl=pl/train.jsonl)")

    named = named_paths(items, default_name=no_language)
    if len(named) < 2:
        raise fail("--aligned needs at least two LANG=FILE (the first language's documents are the pivot)")
    return {lang: read_parallel_documents(lang, path, text_field) for lang, path in named}


def heldout_parallel_ids(docs: Dict[str, Dict[str, str]], heldout_docs: int, rng: random.Random) -> List[str]:
    """``--heldout-docs`` ids, drawn with ``rng`` from the documents every language of ``docs`` has (left out of
    training to measure how well the languages' spaces align)."""
    langs = list(docs)
    if heldout_docs < 0:
        raise fail(f"--heldout-docs must be >= 0, got {heldout_docs}")
    shared = sorted(k for k in docs[langs[0]] if all(k in docs[lang] for lang in langs[1:]))
    if not shared:
        raise fail(f"no document id is in every --aligned file ({', '.join(langs)}): documents are joined by id")
    if heldout_docs > len(shared) // 2:
        raise fail(f"--heldout-docs {heldout_docs} would leave fewer parallel documents for training than it "
                   f"holds out ({len(shared)} are parallel): use at most {len(shared) // 2}")
    return sorted(rng.sample(shared, heldout_docs))


def named_paths(items: Sequence[str], default_name: Callable[[str], str] = lambda path: path) -> List[Tuple[str, str]]:
    """``NAME=PATH`` (or a bare ``PATH``, named by ``default_name(PATH)``) -> [(name, path)]; names must differ."""
    out: Dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep:
            name, path = default_name(item), item
        if not name or not path:
            raise fail(f"{item!r}: give NAME=PATH (or a PATH)")
        if name in out:
            raise fail(f"the name {name!r} is given twice ({out[name]} and {path}): give each NAME=PATH a distinct name")
        out[name] = path
    return list(out.items())


# ---------------------------------------------------------------------------------------------- models
def _dictionary(n: int):
    from fairseq.data import Dictionary

    d = Dictionary()
    for i in range(n - len(d)):
        d.add_symbol(f"w{i}")
    return d


def translation_task(src_vocab: int, tgt_vocab: int):
    """A fairseq translation task whose dictionaries have the given sizes (symbols w0, w1, ...): enough to build
    a model without data, e.g. to count its parameters or to benchmark it."""
    from fairseq.tasks.translation import TranslationConfig, TranslationTask

    return TranslationTask(TranslationConfig(), _dictionary(src_vocab), _dictionary(tgt_vocab))


def model_from_flags(flags: Sequence[str], src_vocab: int, tgt_vocab: int):
    """A fairseq-joint translation model built from fairseq-train model flags (``--arch ...``), without data."""
    from fairseq import options

    import fairseq_joint  # noqa: F401  (registers the models)

    parser = options.get_training_parser()
    # a mistake in the model flags: one line in the commands' style, not fairseq's page of usage
    parser.error = lambda message: parser.exit(2, f"error: {message} (model flags are fairseq-train's)\n")
    args = options.parse_args_and_arch(parser, ["/nonexistent-data-dir", *flags])
    return translation_task(src_vocab, tgt_vocab).build_model(args)


def load_checkpoint(path: str, labels: Optional[bool] = None, overrides: Optional[dict] = None,
                    command: Optional[str] = None) -> dict:
    """The checkpoint dict of ``path`` (``overrides``: fairseq's ``arg_overrides``), the one loader of the plugin's
    commands and tools: a missing file is a ``MissingFileError``; a damaged file, one torch's ``weights_only``
    unpickler refuses (:func:`fairseq_joint.errors.unsafe_checkpoint`, also with ``FAIRSEQ_JOINT_PATCHES=0``) a
    ``CheckpointError``; with ``labels`` True (False) one that is not a ``gile_classifier`` (a translation) checkpoint
    too, naming ``command`` (default: this process's command; :func:`fairseq_joint.checks.check_checkpoint_kind`)."""
    from fairseq import checkpoint_utils

    import fairseq_joint  # noqa: F401  (registers the models, allowlists checkpoint classes)
    from fairseq_joint.fairseq_patches import program

    if not os.path.isfile(path):
        raise errors.MissingFileError(f"checkpoint {path}: file not found; give a checkpoint written by fairseq-train")
    try:
        state = checkpoint_utils.load_checkpoint_to_cpu(path, overrides)
    except pickle.UnpicklingError as err:
        raise errors.unsafe_checkpoint(path, err) from err
    if labels is not None:
        checks.check_checkpoint_kind(path, checks.checkpoint_cfg(state), labels, command or program())
    return state


def load_translation_model(path: str):
    """The model of a fairseq-joint translation checkpoint (:func:`load_checkpoint`), built with dictionaries of the
    checkpoint's sizes (the data directory is not needed)."""
    state = load_checkpoint(path, labels=False)
    cfg = checks.checkpoint_cfg(state)
    weights = state["model"]
    if "decoder.embed_tokens.weight" not in weights:
        raise fail(f"{path} is not a translation checkpoint of fairseq-joint (no decoder embedding)")
    task = translation_task(weights["encoder.embed_tokens.weight"].shape[0], weights["decoder.embed_tokens.weight"].shape[0])
    model = task.build_model(cfg.model)
    if "data_fingerprints" in weights and getattr(model, "data_fingerprints", None) is not None:
        model.data_fingerprints.copy_(weights["data_fingerprints"])  # stand-in dictionaries: take the checkpoint's
    model.load_state_dict(weights, strict=True, model_cfg=cfg.model)
    return model


def load_gile_model(path: str, data: Optional[str] = None, pretrained_encoder: Optional[str] = None, *,
                    label_file: Optional[str] = None, eval_label_file: Optional[str] = None):
    """``(model, task)`` of a ``gile_classifier`` checkpoint; ``data``: the preprocessed directory (default: the one
    recorded in the checkpoint); ``pretrained_encoder``: where its sentence encoder is now (default: where it was);
    ``label_file``, ``eval_label_file``: where its --label-file / --eval-label-file are now (default: where they
    were)."""
    model, task, _ = load_gile_checkpoint(path, data, pretrained_encoder, label_file=label_file,
                                          eval_label_file=eval_label_file)
    return model, task


def load_gile_checkpoint(path: str, data: Optional[str] = None, pretrained_encoder: Optional[str] = None,
                         command: Optional[str] = None, *, label_file: Optional[str] = None,
                         eval_label_file: Optional[str] = None):
    """``(model, task, cfg)`` of a ``gile_classifier`` checkpoint (:func:`load_gile_model` and the checkpoint's
    configuration, whose ``criterion`` says how its logits become probabilities). A missing file is a
    ``MissingFileError`` (a label file the checkpoint records too: :func:`fairseq_joint.checks.check_recorded_files`),
    a checkpoint of another kind a ``CheckpointError`` naming ``command`` (default: this process's program), refused
    before any model is built."""
    from fairseq import checkpoint_utils

    from fairseq_joint.fairseq_patches import program
    from fairseq_joint.models.gile_classifier import GileClassifier

    given = {"data": data, "pretrained_encoder": pretrained_encoder, "label_file": label_file,
             "eval_label_file": eval_label_file}
    overrides = {key: value for key, value in given.items() if value}
    state = load_checkpoint(path, labels=True, overrides=overrides or None, command=command)
    checks.check_recorded_files(path, checks.checkpoint_cfg(state), overrides, command or program())
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides or None,
                                                                      state=state)
    model = models[0].eval()
    if not isinstance(model, GileClassifier):
        raise errors.CheckpointError(f"{path} is not a gile_classifier checkpoint")
    return model, task, cfg


# ---------------------------------------------------------------------------------------------- plots
def pyplot():
    """matplotlib's pyplot on the file-only Agg backend, without its font-search debug lines."""
    import matplotlib

    matplotlib.use("Agg")
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib.pyplot as plt

    return plt


@contextlib.contextmanager
def figure(path: str, *args, dpi: int = 110, **kwargs):
    """``with figure("out.png", figsize=...) as (fig, ax):`` draws and saves a PNG (tight layout); ``args`` and
    ``kwargs`` go to ``plt.subplots``."""
    plt = pyplot()
    fig, ax = plt.subplots(*args, **kwargs)
    try:
        yield fig, ax
        fig.tight_layout()
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
