"""The refusals no test reaches: every ``raise`` statement of fairseq_joint that a run of the tests under coverage never
executed (a refusal without a test may be one that cannot fire, or one whose message or condition is wrong).

    make coverage                            # the tests under coverage (the commands they run included), then this
    python scripts/untested_refusals.py      # again, from that run's data (.coverage-data/)

Prints ``file:line  the raise statement's first line`` for each, then how many of the package's raise statements
the tests reach.
"""

import argparse
import ast
import os
from typing import Dict, Iterable, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "fairseq_joint")
DATA = os.path.join(ROOT, ".coverage-data", ".coverage")


def raise_lines(source: str) -> List[int]:
    """The first line of every ``raise`` statement of ``source`` that raises an exception of its own (not a bare
    ``raise``, which passes on the one being handled), in order."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Raise) and node.exc)


def untested(source: str, executed: Iterable[int]) -> List[Tuple[int, str]]:
    """``(line, text)`` of each raise statement of ``source`` whose first line is not among ``executed``."""
    ran, lines = set(executed), source.splitlines()
    return [(n, lines[n - 1].strip()) for n in raise_lines(source) if n not in ran]


def executed_lines(data_file: str) -> Dict[str, set]:
    """``{absolute path: lines executed}`` of a combined coverage data file."""
    import coverage

    data = coverage.CoverageData(basename=data_file)
    data.read()
    return {os.path.realpath(path): set(data.lines(path) or ()) for path in data.measured_files()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=DATA, help="the combined coverage data file (default: %(default)s)")
    args = parser.parse_args()
    if not os.path.isfile(args.data):
        parser.error(f"--data {args.data}: no such file: run make coverage first")
    executed = executed_lines(args.data)
    total = missed = 0
    for root, _, names in sorted(os.walk(PACKAGE)):
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.realpath(os.path.join(root, name))
            with open(path, encoding="utf-8") as f:
                source = f.read()
            total += len(raise_lines(source))
            for line, text in untested(source, executed.get(path, ())):
                missed += 1
                print(f"{os.path.relpath(path, ROOT)}:{line}  {text}")
    print(f"{total - missed} of the package's {total} raise statements run in the tests; {missed} never do")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
