"""scripts/untested_refusals.py (``make coverage``): which raise statements of the package no test executed."""

import importlib.util
import os

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts",
                      "untested_refusals.py")
spec = importlib.util.spec_from_file_location("untested_refusals", SCRIPT)
untested_refusals = importlib.util.module_from_spec(spec)
spec.loader.exec_module(untested_refusals)

SOURCE = '''def check(x):
    if x < 0:
        raise ValueError(
            "negative")
    try:
        return 1 / x
    except ZeroDivisionError:
        raise
    finally:
        if x > 9:
            raise OverflowError("too big")
'''


def test_a_raise_statement_is_untested_when_its_first_line_never_ran():
    """A multi-line raise counts by its first line (coverage's line of the statement); a bare ``raise`` passes on the
    error being handled and is no refusal of its own."""
    assert untested_refusals.raise_lines(SOURCE) == [3, 11]
    assert untested_refusals.untested(SOURCE, {1, 2, 5, 6, 10}) == [(3, "raise ValueError("),
                                                                    (11, 'raise OverflowError("too big")')]
    assert untested_refusals.untested(SOURCE, {1, 2, 3, 5, 6, 10, 11}) == []
