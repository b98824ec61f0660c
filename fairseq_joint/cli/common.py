"""What every fairseq-joint command shares: one error style and argument parsing (the commands' library code, the
readers of their inputs, the loaders of checkpoints and the plots, is :mod:`fairseq_joint.data.inputs`,
:mod:`fairseq_joint.loaders` and :mod:`fairseq_joint.plots`).

One error style for all commands and fairseq's programs alike: a refusal is one line ``error: <what>, <the fix>`` on
stderr and exit status 2 (:func:`fairseq_joint.errors.report`), whether it comes from the command's own checks
(:class:`CommandError`) or from the package's validation (the :class:`fairseq_joint.errors.Refusal` types), and so is a
command line argparse refuses. ``FAIRSEQ_JOINT_DEBUG=1`` shows the traceback too. Any other error (a bug's, a
library's own failure) keeps its traceback.
"""

import argparse
import logging
from typing import Callable, Optional, Sequence

from fairseq_joint import errors, options
from fairseq_joint.options import Range, as_number, number_problem

#: set to 1 to see the traceback of a refusal
DEBUG_ENV = errors.DEBUG_ENV


class CommandError(errors.Refusal):
    """A refusal of a command or a recipe tool: the message names the file or option and the fix."""


def fail(message: str) -> "CommandError":
    """``raise fail("...")``: a refusal (see :class:`CommandError`)."""
    return CommandError(message)


def run(main: Callable[[Optional[Sequence[str]]], Optional[int]], argv: Optional[Sequence[str]] = None) -> int:
    """Run a command's ``main(argv)``; a refusal (:func:`fairseq_joint.errors.refusal`: a ``Refusal``, also one a
    library wrapped) becomes one ``error:`` line on stderr and exit status :data:`fairseq_joint.errors.REFUSED`."""
    try:
        return int(main(argv) or 0)
    except Exception as err:
        if errors.report(err):
            return errors.REFUSED
        raise


def console_script(main: Callable[[Optional[Sequence[str]]], Optional[int]], prog: str) -> Callable[[], int]:
    """The console script ``prog`` (setup.py's entry point, and ``python -m``): :func:`run` of ``main`` on the
    command line."""
    def command() -> int:
        return run(main)

    command.__doc__ = f"The ``{prog}`` console script."
    return command


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the commands' error style: ``error: <message> (see --help)`` on one line, exit status
    :data:`fairseq_joint.errors.REFUSED` (:func:`fairseq_joint.errors.usage_problem`: a misspelled option's close
    names too)."""

    def error(self, message):
        self.exit(errors.REFUSED, f"error: {errors.usage_problem(self, message)}\n")


def parser(doc: str, **kwargs) -> ArgumentParser:
    """An :class:`ArgumentParser` whose description is the command's module docstring."""
    return ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)


def number(allowed: Range) -> Callable[[str], float]:
    """An argparse ``type`` for a numeric option: the text as an int (``allowed.integer``) or a float, refused by
    argparse (one ``error: argument --x: must be ...`` line) unless :func:`fairseq_joint.options.number_problem` finds
    it finite and in ``allowed``."""
    def parse(text: str):
        value = as_number(text, allowed.integer)
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

