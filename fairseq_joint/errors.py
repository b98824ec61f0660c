"""The package's exception types for user mistakes, one-line refusals and interruption notes.

A refusal is a :class:`Refusal` (or one of its subclasses, which say what was wrong): raised by fairseq-joint's own
code for a user's mistake, its message says what is wrong and the fix. fairseq prints it after a ~30-line traceback, or
hides it in the chain of its own exception ("Cannot load model parameters from checkpoint ...; please ensure that the
architectures match" when a checkpoint of another ``--joint-dim`` is resumed). One printer, :func:`report`, prints
``error: <the refusal>`` as the only line on stderr instead, with one exit status, :data:`REFUSED` (argparse's for a
command line it refuses), for the plugin's commands and under ``fairseq-*`` programs (the exception hook
:func:`uncaught`, installed by ``fairseq_joint.fairseq_patches``); ``FAIRSEQ_JOINT_DEBUG=1`` shows the traceback too.
A refusal is no builtin exception type (not a ``ValueError``): anything else (a bug's ``ValueError`` included) keeps its
traceback, except the errors fairseq and torch raise for a user's mistake, which :func:`translate` turns into the
refusal they mean, by their type and what they say (a file torch's ``weights_only`` unpickler refuses, a file named on
the command line that does not exist or already does, an empty binarized corpus, fairseq-validate without ``--task``
or a batch size).

A training run stopped by SIGINT (Ctrl-C) or SIGTERM ends with one line: the run can be resumed with the same command,
and from which checkpoint (resumes are exact: fairseq_joint/resume.py).
"""

import difflib
import glob
import os
import pickle
import re
import signal
import sys
import traceback
from typing import Optional

from omegaconf import DictConfig
from omegaconf.errors import MissingMandatoryValue

#: set to 1 to see the traceback of a refusal
DEBUG_ENV = "FAIRSEQ_JOINT_DEBUG"
#: the exit status of a refused command, whichever command: argparse's for a command line it refuses
REFUSED = 2
#: the save directory of the training run in this process (set before fairseq-train starts; for the note)
_training = {}


class Refusal(Exception):
    """A user's mistake, refused: the message names the option, file or checkpoint and says how to fix it.

    Printed as one ``error: ...`` line by the plugin's commands and under ``fairseq-*`` programs (:func:`report`); any
    other exception (a bug's ``ValueError`` included) keeps its traceback. Raise the subclass that says what was
    wrong."""


class OptionError(Refusal):
    """An option's value is out of range, not finite, unknown, or incompatible with another option."""


class InputError(Refusal):
    """An input file or value is malformed or inconsistent (a line, a label, a dimension, a text that is not one)."""


class MissingFileError(InputError):
    """A file the user must provide (data, label file, encoder directory) does not exist."""


class CheckpointError(Refusal):
    """A checkpoint is damaged, unsafe to unpickle, of another kind, or does not match the data or options."""


class Interrupted(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C's KeyboardInterrupt so that fairseq stops as it does for Ctrl-C."""


def refusal(err: BaseException) -> Optional[BaseException]:
    """The :class:`Refusal` in ``err``'s chain (itself, then what caused it: fairseq wraps the errors of loading a
    checkpoint in its own), or the refusal :func:`translate` makes of a link, or None. Only the type (and for
    :func:`translate`, what the error says) decides: a plain ``ValueError`` is a bug's or a library's."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, Refusal):
            return err
        translated = translate(err)
        if translated is not None:
            return translated
        err = err.__cause__ or err.__context__
    return None


def unsafe_checkpoint(path: str, err: BaseException) -> CheckpointError:
    """The refusal of a file torch's ``weights_only`` unpickler refused (``err``): it pickles an object that is not
    data (a function, a class the plugin does not allowlist), as a malicious file does."""
    found = re.search(r"(?:Unsupported global: GLOBAL|unsupported GLOBAL) ([\w.]+)", str(err))
    what = f"it pickles {found.group(1)}" if found else "it pickles objects that are not data"
    return CheckpointError(f"{path} is not a checkpoint torch can load safely (weights_only: {what}): use a checkpoint "
                           "written by fairseq-train; do not turn the check off for a file you did not make")


def weights_only_refusal(err: BaseException) -> bool:
    """Whether ``err`` is torch's ``weights_only`` unpickler refusing a file (not another unpickling error)."""
    return isinstance(err, pickle.UnpicklingError) and "Weights only load failed" in str(err)


def _raised_in(err: BaseException, function: str, module: str) -> dict:
    """The local variables of the innermost frame of ``err``'s traceback if it is ``function`` of fairseq's
    ``module`` (``fairseq_cli.train``: the error is that function's own, not of one it called), else empty."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code if tb is not None else None
    path = os.path.join(*module.split(".")) + ".py"
    return tb.tb_frame.f_locals if code is not None and code.co_name == function and \
        code.co_filename.endswith(os.sep + path) else {}


def _frame_locals(err: BaseException, function: str) -> dict:
    """The local variables of the innermost frame of ``function`` in ``err``'s traceback (none: empty)."""
    found, tb = {}, err.__traceback__
    while tb is not None:
        found = tb.tb_frame.f_locals if tb.tb_frame.f_code.co_name == function else found
        tb = tb.tb_next
    return found


def program() -> str:
    """This process's command as a user types it: ``fairseq-train`` for fairseq-train, ``torchrun --no-python
    fairseq-train`` and ``python -m fairseq_cli.train`` alike (the module Python runs as ``__main__``), the plugin's
    ``fairseq-joint-*``; "this command" where there is none (``python -c``, an interactive session)."""
    spec = sys.modules["__main__"].__spec__
    if spec is not None and spec.name.startswith("fairseq_cli."):
        return "fairseq-" + spec.name.split(".")[1]
    name = os.path.basename(sys.argv[0]) if sys.argv else ""
    return name if name not in ("", "-", "-c") else "this command"


def fairseq_program(main) -> str:
    """The module of fairseq's command whose ``main`` this is (``fairseq_cli.train``): its name also when Python runs
    it as ``__main__`` (``python -m fairseq_cli.train``), from the module's spec."""
    spec = sys.modules[main.__module__].__spec__
    return spec.name if spec is not None else main.__module__


def option_of(value: str) -> str:
    """``--option VALUE`` (or ``--option=VALUE``) as the command line gave ``value``; the value itself if none."""
    argv = sys.argv[1:]
    for i, arg in enumerate(argv):
        if arg.startswith("-") and "=" in arg and arg.split("=", 1)[1] == value:
            return f"{arg.split('=', 1)[0]} {value}"
        if arg == value and i > 0 and argv[i - 1].startswith("-"):
            return f"{argv[i - 1]} {value}"
    return value


#: what an error of the OS about a file the command line named means, by its type ({given}: the option and file)
FILE_ERRORS = {
    FileExistsError: "{given} exists: give a new name, or delete it first",
    IsADirectoryError: "{given} is a directory: give a file",
    NotADirectoryError: "{given} is a file, not a directory: give a directory",
    PermissionError: "{given}: permission denied: give a path this user may read (and write, for an output)",
    FileNotFoundError: "{given}: no such file or directory (give an existing path; a relative one is read from {cwd})",
}


def translate(err: BaseException) -> Optional[Refusal]:
    """The refusal an error of fairseq's, torch's or Python's own means, when it is a user's mistake; else None:

    * torch's ``weights_only`` unpickler refused a file (:func:`unsafe_checkpoint`; the file from ``torch.load``'s
      frame);
    * fairseq's translation task found no dictionary of ``--source-lang`` or ``--target-lang`` in DATA;
    * a file named on the command line that fairseq opens itself does not exist, exists where a new one is written,
      is a directory (``--path``), is under a file (``--results-path``), or may not be read;
    * fairseq's translation task found no split of that name in DATA (``--gen-subset``, ``--valid-subset``, the
      default ``train``: "Dataset not found");
    * fairseq read a binarized corpus whose ``.bin`` file is empty (fairseq-preprocess of an empty text), or whose
      source and target sides hold different numbers of sentences;
    * fairseq read a dictionary whose line is not ``WORD COUNT``, or that gives a word twice (``--srcdict``, a data
      directory's ``dict.LANG.txt``);
    * an option a chosen ``--bpe`` (or another choice of fairseq's) needs was not given (omegaconf's
      ``MissingMandatoryValue``: ``--bpe subword_nmt`` without ``--bpe-codes``);
    * fairseq-validate was not told the task (``KeyError: None`` of fairseq's task registry) or the batch size (an
      ``AssertionError``);
    * fairseq refused a combination of options itself, in an ``AssertionError`` or ``ValueError`` whose message
      starts with the option (``--sampling requires --nbest to be equal to --beam``, ``--finetune-from-model X does
      not exist``; the plugin raises no such error: it refuses with :class:`Refusal`);
    * fairseq's translation task found no language pair in DATA's file names (e.g. a GILE data directory given to
      fairseq-generate);
    * fairseq-train's validation logged no figure of the ``--best-checkpoint-metric`` (a ``KeyError`` after the first
      epoch: which figures the criterion and task log is known only then);
    * a sentence of the data longer than ``--max-tokens`` or than the model's positions (fairseq's assertion, its
      ``Exception``), fairseq-generate's ``--print-step`` of a beam search (a ``KeyError``), a task of several
      encoder-decoders (``--task multilingual_translation``) given one model."""
    if weights_only_refusal(err):
        path = _frame_locals(err, "load").get("f")
        return unsafe_checkpoint(path if isinstance(path, (str, os.PathLike)) else "the checkpoint", err)
    dictionary = isinstance(err, FileNotFoundError) and err.filename is not None and re.fullmatch(
        r"dict\.(.+)\.txt", os.path.basename(os.fsdecode(err.filename)))
    if dictionary:  # fairseq's translation task reads DATA/dict.LANG.txt of --source-lang and --target-lang
        data = os.path.dirname(os.fsdecode(err.filename))
        return MissingFileError(f"{os.fsdecode(err.filename)}: no such file: {data} holds no dictionary of "
                                f"'{dictionary.group(1)}': give the directory fairseq-preprocess wrote for these "
                                f"languages, or --source-lang and --target-lang of a pair binarized there (ls "
                                f"{data}/dict.*.txt)")
    said = next((m for kind, m in FILE_ERRORS.items() if isinstance(err, kind)), None)
    if said and err.filename is not None:
        name = os.fsdecode(err.filename)
        if isinstance(err, NotADirectoryError):  # the file the command line named, under which a path was made
            name = next((a for a in sys.argv[1:] if a and name.startswith(a.rstrip(os.sep) + os.sep)), name)
        if name not in sys.argv[1:] and not any(a.endswith("=" + name) for a in sys.argv[1:]):
            return None
        under = os.path.dirname(name.rstrip(os.sep))
        while under and not os.path.exists(under) and os.path.dirname(under) != under:
            under = os.path.dirname(under)
        if isinstance(err, NotADirectoryError) and not os.path.isfile(name) and os.path.isfile(under):
            said = "{given}: " + under + " is a file, not a directory: give a path under a directory"  # FILE/out
        kind = MissingFileError if isinstance(err, FileNotFoundError) else InputError
        return kind(said.format(given=option_of(name), cwd=os.getcwd()))
    message, found = str(err), re.fullmatch(r"Dataset not found: (\S+) \((.*)\)", str(err))
    if isinstance(err, FileNotFoundError) and found:
        split, data = found.groups()
        given = option_of(split)
        default = {"train": "--train-subset", "valid": "--valid-subset", "test": "--gen-subset"}.get(split, "the split")
        which = f"{given}: " if given != split else f"{default} {split} (the default): "
        text = [p for p in sorted(glob.glob(os.path.join(glob.escape(data), f"{glob.escape(split)}.*-*.*")))
                if not p.endswith((".bin", ".idx"))]
        if text:  # fairseq looks for binaries unless told
            return OptionError(f"{which}{data} holds the '{split}' split as text ({os.path.basename(text[0])}: "
                               "fairseq-preprocess --dataset-impl raw), which fairseq reads only when told: add "
                               "--dataset-impl raw")
        return MissingFileError(f"{which}{data} holds no binarized '{split}' split of this language pair: give a split "
                                "it holds (ls it: SPLIT.SRC-TGT.SRC.bin), or binarize one with fairseq-preprocess "
                                "(--trainpref/--validpref/--testpref write train/valid/test)")
    if message == "cannot mmap an empty file" or isinstance(err, AttributeError) and "_bin_buffer_mmap" in message:
        path = _frame_locals(err, "_do_init").get("path") or _frame_locals(err, "__init__").get("path")
        return InputError(f"{f'{path}.bin' if path else 'a .bin file of the data directory'} is empty (no sentence "
                          "was binarized): run fairseq-preprocess again on a text that holds sentences")
    if isinstance(err, KeyError) and err.args == (None,) and "parser" in _frame_locals(err, "parse_args_and_arch"):
        return OptionError("no task was given: add --task (translation, or gile_classification for a "
                           "gile_classifier checkpoint)")
    if isinstance(err, ValueError) and message.endswith("requires a FairseqMultiModel architecture"):
        return OptionError(f"{message} (one encoder-decoder per language pair): fairseq-joint's models are one "
                           "encoder-decoder; for several language pairs use --task translation_multi_simple_epoch")
    too_long = re.fullmatch(r"Sentences lengths should not exceed max_tokens=(\d+)", message)
    if isinstance(err, AssertionError) and too_long:
        return OptionError(f"--max-tokens {too_long.group(1)} (--max-tokens-valid where given) is below the length "
                           "of a sentence of the data, in subwords with </s>: raise it")
    if message.startswith("Size of sample #") and "--skip-invalid-size-inputs-valid-test" in message:
        return OptionError(f"a sentence of the data is longer than the model's positions ({one_line(err)}), or "
                           "give a split of shorter sentences")
    generating = _raised_in(err, "_main", "fairseq_cli.generate") if isinstance(err, KeyError) else {}
    if err.args == ("steps",) and "cfg" in generating and generating["cfg"].generation.print_step:
        return OptionError("--print-step prints the steps of an iterative refinement model's decoding (fairseq's "
                           "non-autoregressive models); a beam search has none: drop --print-step")
    logged = (_raised_in(err, "get_valid_stats", "fairseq_cli.train")
              or _raised_in(err, "validate", "fairseq_cli.train")) if isinstance(err, KeyError) else {}
    if {"cfg", "stats"} <= logged.keys() and err.args == (logged["cfg"].checkpoint.best_checkpoint_metric,) \
            and err.args[0] not in logged["stats"]:
        figures = ", ".join(k for k in logged["stats"] if k != "num_updates" and not k.startswith("best_"))
        return OptionError(f"--best-checkpoint-metric {err.args[0]}: validation logs no such figure (it logged "
                           f"{figures}; this epoch was not saved): give one of those")
    if isinstance(err, (AssertionError, ValueError)) and message.startswith("--"):  # the plugin refuses as Refusals
        fix = next((fix for said, fix in FAIRSEQ_FIXES.items() if message.startswith(said)), None)
        return OptionError(f"{one_line(err).rstrip('!.')}: {fix or f'change the options (see {program()} --help)'}")
    if message == "Source and target must contain the same number of examples":
        pair = _frame_locals(err, "load_langpair_dataset")
        where = "{prefix}{src} and {prefix}{tgt}".format(**pair) if {"prefix", "src", "tgt"} <= pair.keys() else \
            "the source and target sides"
        return InputError(f"{where} hold different numbers of sentences: line i of the source text must translate "
                          "line i of the target text; fix them (wc -l) and run fairseq-preprocess again")
    if message.startswith(("Incorrect dictionary format", "Duplicate word found when loading Dictionary")):
        reading = _frame_locals(err, "add_from_file")  # its file object and lines, the word it refused
        path = getattr(reading.get("f"), "name", "a dictionary")
        if message.startswith("Incorrect"):  # fairseq's message quotes the line cut at its last space: find it
            bad = next(((i, line) for i, line in enumerate(reading.get("lines") or [], 1)
                        if not re.fullmatch(r".*\S.* -?\d+( #fairseq:overwrite)?", line.rstrip("\r\n"))), None)
            problem = f"line {bad[0]} ({bad[1].strip()!r}) is not 'WORD COUNT'" if bad else "a line is not 'WORD COUNT'"
        else:
            problem = f"it gives the word {reading.get('word')!r} twice"
        return InputError(f"{path}: {problem}: give a dictionary fairseq-preprocess wrote (dict.LANG.txt: one 'WORD "
                          "COUNT' a line, each word once)")
    missing = missing_value(err)
    if missing is not None:
        group, name, chosen = missing
        option = "--" + name.replace("_", "-")
        return OptionError(f"{option} is missing: --{group}{f' {chosen}' if chosen else ''} needs it: add {option}")
    if message == "Must specify batch size either with --max-tokens or --batch-size":
        return OptionError("no batch size was given: add --max-tokens or --batch-size")
    if message == "Could not infer language pair, please provide it explicitly":
        cfg = _frame_locals(err, "setup_task").get("cfg")  # TranslationTask.setup_task(cls, cfg), which reads cfg.data
        data = cfg.data if cfg is not None else "DATA"
        return InputError(f"{data} holds no binarized translation corpus whose languages fairseq can read from its "
                          "file names (train.SRC-TGT.SRC.idx): give the directory fairseq-preprocess wrote, or "
                          "--source-lang and --target-lang (a gile_classifier checkpoint is scored with "
                          "fairseq-joint-predict-labels, or fairseq-validate --task gile_classification)")
    return None


#: the fix of a refusal of fairseq's own that names no fix, by how its message starts
FAIRSEQ_FIXES = {"--share-all-embeddings requires a joined dictionary": "binarize DATA with fairseq-preprocess "
                 "--joined-dictionary, or drop --share-all-embeddings"}


def missing_value(err: BaseException) -> Optional[tuple]:
    """``(group, option, choice)`` of omegaconf's refusal to read an option a chosen group's configuration needs and
    was not given (``--bpe subword_nmt`` without ``--bpe-codes``: ``("bpe", "bpe_codes", "subword_nmt")``), or
    None."""
    if not isinstance(err, MissingMandatoryValue) or "." not in str(err.full_key):
        return None
    group, name = str(err.full_key).split(".", 1)
    return group, name, err.parent_node.get("_name") if isinstance(err.parent_node, DictConfig) else None


def one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


#: an argparse error's list of choices longer than this is replaced by the choices close to what was given
MAX_CHOICES = 12
#: how close (difflib's ratio) a name must be to what was given to be suggested
CLOSE = 0.8


def closest(name: str, names) -> Optional[str]:
    """The one of ``names`` a misspelled ``name`` is closest to (compared as options are typed, ``--name``: difflib's
    ratio at least :data:`CLOSE`), or None."""
    found = difflib.get_close_matches(f"--{name}", [f"--{n}" for n in names], n=1, cutoff=CLOSE)
    return found[0][2:] if found else None


def usage_problem(parser, message: str) -> str:
    """The one line of an argparse ``parser``'s error ``message``, with the fix: a misspelled option's close names,
    a long list of choices cut to those close to what was given, and where the options are listed (``--help``; that
    of fairseq's commands lists the options of the ``--task``, ``--arch`` and ``--criterion`` given: the
    ``full_help`` patch)."""
    choice = re.fullmatch(r"(argument .*?: invalid choice: '(.*?)') \(choose from (.*)\)", message, re.S)
    if choice:
        choices = re.findall(r"'((?:[^'\\]|\\.)*)'", choice.group(3))
        if len(choices) > MAX_CHOICES:
            close = [c for c in choices if c.startswith(choice.group(2))][:3] or difflib.get_close_matches(
                choice.group(2), choices, n=3, cutoff=CLOSE)
            message = choice.group(1) + (f" (did you mean {' or '.join(map(repr, close))}?)" if close
                                         else f" (one of {len(choices)} choices)")
    unknown = re.fullmatch(r"unrecognized arguments: (.*)", message, re.S)
    if unknown:
        names = [o for o in parser._option_string_actions if o.startswith("--")]
        for arg in unknown.group(1).split():
            close = closest(arg.split("=")[0][2:], [name[2:] for name in names]) if arg.startswith("--") else None
            if close:
                message += f"; {arg.split('=')[0]}: did you mean --{close}?"
    message = message.replace("invalid <lambda> value", "invalid value")  # fairseq's types are lambdas
    chosen = [o for o in ("--task", "--arch", "--criterion") if o in parser._option_string_actions
              and not parser.prog.startswith("fairseq-joint-")]  # fairseq's parsers only
    given = " and ".join(filter(None, (", ".join(chosen[:-1]), chosen[-1]))) if chosen else ""
    where = f"see {parser.prog} --help" + (f"; given {given} it lists their options too" if chosen else "")
    return f"{one_line(message)} ({where})"


def argparse_error(original, parser, message: str) -> None:
    """``ArgumentParser.error`` under ``fairseq-*`` programs (``original``: argparse's, kept with
    :data:`DEBUG_ENV`): :func:`usage_problem` as one ``error:`` line instead of the usage block, exit status
    :data:`REFUSED`."""
    if os.environ.get(DEBUG_ENV):
        return original(parser, message)
    parser.exit(REFUSED, f"error: {usage_problem(parser, message)}\n")


def interruption_note(save_dir: Optional[str], signal_name: str) -> str:
    """What to do after an interrupted training run."""
    if not save_dir:
        return f"fairseq-train stopped by {signal_name}; nothing was saved (--no-save): the run starts over when run again"
    last = os.path.join(save_dir, "checkpoint_last.pt")
    if not os.path.isfile(last):
        return f"fairseq-train stopped by {signal_name} before its first checkpoint: the same command starts over"
    return (f"fairseq-train stopped by {signal_name}: run the same command to resume from {last} (exactly as if it "
            "had not stopped)")


def uncaught(original, kind, err, tb) -> None:
    """The exception hook under ``fairseq-*`` programs (``original``: the hook it wraps): the resume note of an
    interrupted training run, :func:`report` of a refusal, ``original`` (the traceback) for anything else.

    Its line goes to the process's own stderr (``sys.__stderr__``): once a run of several processes starts its process
    group, torch wraps this hook in its own, which hands it a buffer as ``sys.stderr`` and writes the buffer out only
    after the hook returns, and this one does not return (the refusals of every rank but the first were lost)."""
    status, stderr = REFUSED, sys.__stderr__ or sys.stderr
    if isinstance(err, KeyboardInterrupt) and "save_dir" in _training and not os.environ.get(DEBUG_ENV):
        stop = signal.SIGTERM if isinstance(err, Interrupted) else signal.SIGINT
        print(f"error: {interruption_note(_training['save_dir'], stop.name)}", file=stderr)
        status = 128 + stop  # as the signal would have: fairseq's background threads die with the process
    elif not report(err, stderr):
        return original(kind, err, tb)
    for stream in {sys.stdout, sys.stderr, stderr}:
        stream.flush()
    # the line is all: exit now, before the destructors of what the traceback held print their own errors
    # (fairseq's MMapIndexedDataset of an empty .bin file does)
    os._exit(status)


def training_started(save_dir: Optional[str]) -> None:
    """fairseq-train is about to start: SIGTERM stops it as Ctrl-C does, and either ends with the resume note."""
    _training["save_dir"] = save_dir

    def on_sigterm(signum, frame):
        raise Interrupted()

    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, on_sigterm)


def report(err: BaseException, stderr=None) -> bool:
    """The one printer of refusals: the ``error: ...`` line of the refusal in ``err`` (:func:`refusal`) on ``stderr``
    (``sys.stderr`` by default), after the traceback with :data:`DEBUG_ENV` (True); nothing for anything else (False:
    its traceback is its own)."""
    found = refusal(err)
    if found is None:
        return False
    stderr = stderr or sys.stderr
    if os.environ.get(DEBUG_ENV):
        traceback.print_exception(type(err), err, err.__traceback__, file=stderr)
    print(f"error: {one_line(found)}", file=stderr)
    return True
