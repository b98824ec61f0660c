"""How much of fairseq_joint's code guards or refuses, and whether its import graph has a circle.

    python scripts/code_shape.py            # the totals
    python scripts/code_shape.py --files    # guard lines per file, most first

A code line is a line of a statement (no blank line, comment or docstring). Guard lines are every code line of the
modules whose concern is refusing and recovering (:data:`GUARD_MODULES`), and elsewhere the lines of each ``raise``
statement, of the condition of an ``if`` whose body raises, and of a table of rules a loop refuses from.
"""

import argparse
import ast
import io
import os
import tokenize

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fairseq_joint")
#: the modules whose whole code guards, refuses or recovers
GUARD_MODULES = ("errors.py", "checks.py", "fairseq_patches.py", "checkpoints.py", "checkpoint_allowlist.py",
                 "resume.py")
SKIPPED = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)


def code_lines(source: str, tree: ast.AST) -> set:
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in SKIPPED:
            lines.update(range(token.start[0], token.end[0] + 1))
    return lines - docstrings


def raises(node: ast.AST) -> bool:
    """Whether ``node`` holds an ``if`` whose body raises."""
    return any(isinstance(n, ast.If) and any(isinstance(s, ast.Raise) for s in n.body) for n in ast.walk(node))


def span(node: ast.AST) -> range:
    return range(node.lineno, node.end_lineno + 1)


def guard_lines(tree: ast.AST) -> set:
    """The lines of each ``raise``, of the condition of each ``if`` whose body raises, and of each table of rules a
    loop refuses from (``for message, refused in needs: if refused: raise ...``: the loop's iterable, and where it is
    a name, the assignment of that name in the same function)."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise):
            lines.update(span(node))
        elif isinstance(node, ast.If) and any(isinstance(s, ast.Raise) for s in node.body):
            lines.update(range(node.lineno, node.test.end_lineno + 1))
    for scope in [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef))]:
        for loop in [n for n in ast.walk(scope) if isinstance(n, ast.For) and raises(n)]:
            lines.update(span(loop.iter))
            if isinstance(loop.iter, ast.Name):
                lines.update(line for n in ast.walk(scope) if isinstance(n, ast.Assign)
                             and any(isinstance(t, ast.Name) and t.id == loop.iter.id for t in n.targets)
                             for line in span(n))
    return lines


def measure(package: str = PACKAGE):
    """``{file: (code lines, guard lines)}`` of every module of ``package``."""
    found = {}
    for root, _, names in os.walk(package):
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as f:
                source = f.read()
            tree = ast.parse(source)
            code = code_lines(source, tree)
            whole = root == package and name in GUARD_MODULES
            found[os.path.relpath(path, os.path.dirname(package))] = (len(code), len(code if whole else
                                                                               guard_lines(tree) & code))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", action="store_true", help="guard lines per file, most first")
    found = measure()
    if parser.parse_args().files:
        for path, (code, guard) in sorted(found.items(), key=lambda item: -item[1][1]):
            print(f"{guard:5d} / {code:5d}  {path}")
    code, guard = (sum(column) for column in zip(*found.values()))
    print(f"{guard} guard lines of {code} code lines: {guard / code:.1%}")


if __name__ == "__main__":
    main()
