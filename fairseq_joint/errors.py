"""One-line refusals and interruption notes under fairseq's commands.

A refusal is a ``ValueError`` / ``FileNotFoundError`` raised by fairseq-joint's own code: its message says what is
wrong and the fix. fairseq prints it after a ~30-line traceback, or hides it in the chain of its own exception
("Cannot load model parameters from checkpoint ...; please ensure that the architectures match" when a checkpoint of
another ``--joint-dim`` is resumed). Under ``fairseq-*`` programs the plugin installs an exception hook that prints
``error: <the refusal>`` as the only line on stderr instead (exit status 1); ``FAIRSEQ_JOINT_DEBUG=1`` shows the
traceback. Everything else (a bug, fairseq's own errors) keeps its traceback.

A training run stopped by SIGINT (Ctrl-C) or SIGTERM ends with one line: the run can be resumed with the same command,
and from which checkpoint (resumes are exact: fairseq_joint/resume.py).
"""

import contextlib
import logging
import os
import signal
import sys
import traceback
import warnings
from typing import Optional

#: set to 1 to see the traceback of a refusal
DEBUG_ENV = "FAIRSEQ_JOINT_DEBUG"
_PACKAGE = os.path.dirname(os.path.abspath(__file__))
#: the save directory of the training run in this process (set before fairseq-train starts; for the note)
_training = {}


#: warnings fairseq 0.12 causes on every run with this hydra and torch (regular expressions of their start)
FAIRSEQ_NOTICES = (
    r"\s*The version_base parameter is not specified",
    r"\s*'config' is validated against ConfigStore schema",
    r"\s*The strict flag in the compose API is deprecated",
    r"\s*.*'pin_memory' argument is set as true but no accelerator is found",
    r"\s*`torch.cuda.amp.autocast\(args...\)` is deprecated",
    r"\s*`torch.cuda.amp.GradScaler\(args...\)` is deprecated",
)


class Refusal(ValueError):
    """A user's mistake, refused: the message names the option, file or checkpoint and says how to fix it.

    Printed as one ``error: ...`` line by the plugin's commands and under ``fairseq-*`` programs; any other exception
    (a bug included) keeps its traceback. A ``ValueError`` so that callers that caught the plain ``ValueError`` of
    earlier versions still catch it. Raise the subclass that says what was wrong."""


class OptionError(Refusal):
    """An option's value is out of range, not finite, unknown, or incompatible with another option."""


class InputError(Refusal):
    """An input file or value is malformed or inconsistent (a line, a label, a dimension, a text that is not one)."""


class MissingFileError(InputError, FileNotFoundError):
    """A file the user must provide (data, label file, encoder directory) does not exist."""


class CheckpointError(Refusal):
    """A checkpoint is damaged, unsafe to unpickle, of another kind, or does not match the data or options."""


class Interrupted(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C's KeyboardInterrupt so that fairseq stops as it does for Ctrl-C."""


@contextlib.contextmanager
def quiet_fairseq_import():
    """Importing fairseq calls ``logging.basicConfig`` in some of its modules (a DEBUG root handler) and logs an
    INFO line about tensorboardX on stderr. When fairseq is imported here first (our commands, ``import
    fairseq_joint``), that line is dropped and an unconfigured root logger is left unconfigured, so that a
    command's stderr holds its own messages and its own logging setup applies. Under fairseq's CLIs (``--user-dir``)
    fairseq is already imported and nothing changes here (see :func:`install`)."""
    if "fairseq" in sys.modules:
        yield
        return
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    logging.disable(logging.INFO)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)
        if not handlers:
            for handler in [h for h in root.handlers if h not in handlers]:
                root.removeHandler(handler)
            root.setLevel(level)


def raised_by_package(err: BaseException) -> bool:
    """Whether ``err`` was raised in fairseq_joint's own code (its messages are written for users)."""
    tb, last = err.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and os.path.abspath(last.tb_frame.f_code.co_filename).startswith(_PACKAGE + os.sep)


def refusal(err: BaseException) -> Optional[BaseException]:
    """The fairseq-joint refusal in ``err``'s chain (itself, then what caused it), or None."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, Refusal) or (isinstance(err, (ValueError, FileNotFoundError)) and raised_by_package(err)):
            return err
        err = err.__cause__ or err.__context__
    return None


def one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


def interruption_note(save_dir: Optional[str], signal_name: str) -> str:
    """What to do after an interrupted training run."""
    if not save_dir:
        return f"fairseq-train stopped by {signal_name}; nothing was saved (--no-save): the run starts over when run again"
    last = os.path.join(save_dir, "checkpoint_last.pt")
    if not os.path.isfile(last):
        return (f"fairseq-train stopped by {signal_name} before its first checkpoint: running the same command starts "
                "over")
    return (f"fairseq-train stopped by {signal_name}: run the same command to resume from {last} (exactly as if it "
            "had not stopped)")


def _excepthook(original):
    def hook(kind, err, tb):
        if os.environ.get(DEBUG_ENV):
            return original(kind, err, tb)
        if isinstance(err, KeyboardInterrupt) and "save_dir" in _training:
            name = "SIGTERM" if isinstance(err, Interrupted) else "SIGINT"
            print(f"error: {interruption_note(_training['save_dir'], name)}", file=sys.stderr)
            sys.stdout.flush()
            sys.stderr.flush()
            # exit now, as the signal would have: fairseq's background threads die with the process
            os._exit(128 + (signal.SIGTERM if name == "SIGTERM" else signal.SIGINT))
        found = refusal(err)
        if found is None:
            return original(kind, err, tb)
        print(f"error: {one_line(found)}", file=sys.stderr)
        return None

    hook.fairseq_joint = True
    return hook


def install() -> None:
    """Under a ``fairseq-*`` program: one-line refusals (see above), without the notices that fairseq 0.12's own use
    of hydra and of torch prints on every run (nothing a user can act on; they would stand above the refusal)."""
    if not os.path.basename(sys.argv[0] if sys.argv else "").startswith("fairseq-"):
        return
    if not getattr(sys.excepthook, "fairseq_joint", False):
        sys.excepthook = _excepthook(sys.excepthook)
        warnings.filterwarnings("ignore", module=r"hydra(\.|$)")
        for notice in FAIRSEQ_NOTICES:
            warnings.filterwarnings("ignore", message=notice)
        _replace_debug_root_handler()


def _replace_debug_root_handler() -> None:
    """fairseq's wav2vec2_classification module calls ``logging.basicConfig(level=DEBUG)`` on import: when a command
    has not configured logging before that (fairseq-generate), every log line, hydra's DEBUG lines included, goes to
    stderr in Python's default format. Give that command the logging fairseq's other commands set up (INFO, or
    $LOGLEVEL, on stdout, fairseq's format), so that stderr holds its refusals only."""
    root = logging.getLogger()
    rogue = [h for h in root.handlers if type(h) is logging.StreamHandler and h.stream is sys.stderr
             and h.formatter is not None and h.formatter._fmt == logging.BASIC_FORMAT]
    if root.level != logging.DEBUG or len(rogue) != len(root.handlers) or not rogue:
        return
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", datefmt="%Y-%m-%d %H:%M:%S",
                        level=os.environ.get("LOGLEVEL", "INFO").upper(), stream=sys.stdout, force=True)


def training_started(save_dir: Optional[str]) -> None:
    """fairseq-train is about to start: SIGTERM stops it as Ctrl-C does, and either ends with the resume note."""
    _training["save_dir"] = save_dir

    def on_sigterm(signum, frame):
        raise Interrupted()

    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, on_sigterm)


def print_refusal(err: BaseException) -> bool:
    """For commands that catch errors themselves: print the one line of a refusal in ``err`` (True), or nothing."""
    found = refusal(err)
    if found is None:
        return False
    if os.environ.get(DEBUG_ENV):
        traceback.print_exception(type(err), err, err.__traceback__)
    print(f"error: {one_line(found)}", file=sys.stderr)
    return True
