"""The package's exception types for user mistakes, one-line refusals and interruption notes.

A refusal is a :class:`Refusal` (or one of its subclasses, which say what was wrong): raised by fairseq-joint's own
code for a user's mistake, its message says what is wrong and the fix. fairseq prints it after a ~30-line traceback, or
hides it in the chain of its own exception ("Cannot load model parameters from checkpoint ...; please ensure that the
architectures match" when a checkpoint of another ``--joint-dim`` is resumed). Under ``fairseq-*`` programs the
plugin's exception hook (:func:`uncaught`, installed by ``fairseq_joint.fairseq_patches``) prints ``error: <the
refusal>`` as the only line on stderr instead (exit status 1); ``FAIRSEQ_JOINT_DEBUG=1`` shows the traceback. Anything
that is not a ``Refusal`` (a bug's ``ValueError`` included, fairseq's own errors) keeps its traceback.

A training run stopped by SIGINT (Ctrl-C) or SIGTERM ends with one line: the run can be resumed with the same command,
and from which checkpoint (resumes are exact: fairseq_joint/resume.py).
"""

import os
import signal
import sys
import traceback
from typing import Optional

#: set to 1 to see the traceback of a refusal
DEBUG_ENV = "FAIRSEQ_JOINT_DEBUG"
#: the save directory of the training run in this process (set before fairseq-train starts; for the note)
_training = {}


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


def refusal(err: BaseException) -> Optional[BaseException]:
    """The :class:`Refusal` in ``err``'s chain (itself, then what caused it: fairseq wraps the errors of loading a
    checkpoint in its own), or None. Only the type decides: a plain ``ValueError`` is a bug's or a library's."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, Refusal):
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


def uncaught(original, kind, err, tb) -> None:
    """The exception hook under ``fairseq-*`` programs (``original``: the hook it wraps): the resume note of an
    interrupted training run, one ``error:`` line for a refusal, ``original`` (the traceback) for anything else."""
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
