"""Every figure the user pages quote from a result file agrees with that file.

The pages are ``PAGES`` (README.md, docs/*.md, studies/README.md); the result files are ``examples/*/results/*`` and
the study pages ``studies/*.md``. ``tests/unit/quoted_figures.py`` ties each quote to its source, one row each:

* ``Q(quote, source, *excerpts)``: ``quote`` is text of the page, ``excerpts`` are texts of ``source`` (or, for a
  ``.json`` source, ``json:`` paths into it, ``*`` for every key or item; ``@PATH excerpt`` reads one excerpt in
  another result file). Every number of the quote must be a number of the excerpts, rounded to the quote's decimals
  (``36`` quotes 36.44, ``0.11x`` quotes 0.113). Text inside ``{...}``, in a quote or an excerpt, must stand there
  too, but its numbers are context (seeds, budgets, sizes), not compared.
* ``R(quote, source, *excerpts)``: the quote's one range ``a-b`` is the smallest and the largest number of the
  excerpts, rounded to the quote's decimals (so ``39-41`` cannot quote 38.50 ... 41.77).
* ``C(quote, source, excerpts, formula)``: the quote's numbers, in order, are ``formula`` (a Python expression over
  ``n``, the excerpts' numbers in order) rounded: ratios and differences the source does not print.
* ``N(quote, why)``: figures that come from no result file (the paper's, a setting, a test's outcome), said why.

Both sides are checked on every run: a quote that is no longer on its page, an excerpt that is no longer in its
source, or a number that changed on either side fails, naming the row. ``test_every_figure_has_a_source`` then
finds every figure of the pages' prose and tables (decimals, ``1,500``-style counts, ratios ``3.6x``, percentages,
``N BLEU``; not code blocks, inline code or link targets) and fails on one that no row covers, so that a figure
added to a page without its source is caught.
"""

import json
import re
import statistics
from pathlib import Path

import pytest
from quoted_figures import FIGURES, C, N, Q, R

REPO = Path(__file__).resolve().parents[2]
PAGES = ["README.md", "docs/*.md", "studies/README.md"]
SOURCES = ["examples/*/results/*.md", "examples/*/results/*.json", "studies/*.md"]

# a number: 1,500 / 12.31 / .05 / 1e-10; its sign is read apart (a hyphen after a digit is a range, not a sign)
NUMBER = re.compile(r"(?<![\w.])(?<![A-Za-z_][-−])(?P<sign>[−+-]?)(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:e[−-]?\d+)?|\.\d+)"
                    r"(?!\d|,\d{3}(?!\d))")
RANGE = re.compile(rf"{NUMBER.pattern}\s?[-–]\s?(?P<sign2>[−+-]?)(?P<num2>\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
                   r"(?!\d|,\d{3}(?!\d))")
CONTEXT = re.compile(r"\{[^{}]*\}")
# what counts as a figure when the pages are searched for unsourced ones
FIGURE = re.compile(r"(?<![\w.])(?<!Sec\. )[−+-]?(?:\d+\.\d+|\.\d+|\d{1,3}(?:,\d{3})+)(?![\w]|\.\d)"  # 12.31, .05, 1,500
                    r"|(?<![\w.])\d+(?:\.\d+)?[x×%](?!\w)"  # 16x, 3.6x, 25%
                    r"|(?<![\w.])\d+(?:[-–]\d+)? (?:sacre)?BLEU\b")  # 36 BLEU, 39-41 BLEU


# ------------------------------------------------------------------------------------------------------ reading
def normalized(text: str) -> str:
    """One line: runs of white space as one space (quotes cross the pages' line breaks)."""
    return re.sub(r"\s+", " ", text).strip()


def prose(markdown: str) -> str:
    """A page without its fenced code blocks and HTML comments (commands, not figures), normalized."""
    markdown = re.sub(r"^ *```.*?^ *```[^\n]*$", " ", markdown, flags=re.M | re.S)
    return normalized(re.sub(r"<!--.*?-->", " ", markdown, flags=re.S))


def value(sign: str, num: str) -> float:
    v = float(num.replace(",", "").replace("−", "-"))
    return -v if sign in ("-", "−") else v


def decimals(num: str) -> int:
    """The precision a quoted number claims: its digits after the point (1e-10: exact to its last digit)."""
    if "e" in num:
        mantissa, _, exponent = num.partition("e")
        return max(0, -int(exponent.replace("−", "-")) + (len(mantissa.split(".")[1]) if "." in mantissa else 0))
    return len(num.split(".")[1]) if "." in num else 0


def numbers(text: str) -> list:
    """The numbers of a text in order, each as (value, decimals); a range a-b gives both ends."""
    out = []
    for m in NUMBER.finditer(text):
        sign = m.group("sign")
        if sign == "-" and m.start() > 0 and (text[m.start() - 1].isalnum() or text[m.start() - 1] in ")]"):
            sign = ""  # 0.86-0.95: a range, 1.6-3.1x likewise
        out.append((value(sign, m.group("num")), decimals(m.group("num"))))
    return out


def checked_numbers(quote: str) -> list:
    """The numbers of a quote that its source must hold: all but those inside ``{...}``."""
    return numbers(CONTEXT.sub(" ", quote))


def agrees(quoted: float, places: int, source: float) -> bool:
    """``quoted`` is ``source`` rounded to ``places`` decimals (either way at a tie)."""
    return abs(source - quoted) <= 0.5 * 10 ** -places * (1 + 1e-9) + 1e-12


def json_values(data, path: str) -> list:
    """The numbers at a ``/``-separated path of a JSON document; ``*`` takes every key or item."""
    found = [data]
    for key in path.split("/"):
        step = []
        for node in found:
            if key == "*":
                step.extend(node.values() if isinstance(node, dict) else node)
            elif isinstance(node, list):
                step.append(node[int(key)])
            else:
                step.append(node[key])
        found = step
    flat = []
    for v in found:
        flat.extend(v if isinstance(v, list) else [v])
    assert flat and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in flat), \
        f"json:{path} is not a number or a list of numbers: {flat[:5]}"
    return [(float(v), 99) for v in flat]


_SOURCE_CACHE = {}


def read_source(name: str):
    """A source's normalized text and, for a JSON file, its data (read once)."""
    if name not in _SOURCE_CACHE:
        path = REPO / name
        assert path.is_file(), f"{name}: no such source file"
        text = path.read_text(encoding="utf-8")
        _SOURCE_CACHE[name] = (normalized(text), json.loads(text) if path.suffix == ".json" else None)
    return _SOURCE_CACHE[name]


def excerpt_sources(row) -> list:
    """(source, excerpt) of each excerpt of a row: ``@PATH rest`` reads ``rest`` in PATH instead of the row's source
    (a figure that spans two result files)."""
    pairs = []
    for excerpt in row.excerpts:
        if excerpt.startswith("@"):
            name, _, excerpt = excerpt[1:].partition(" ")
            pairs.append((name, excerpt))
        else:
            pairs.append((row.source, excerpt))
    return pairs


def source_numbers(row) -> list:
    """The numbers of a row's excerpts, in order; fails when an excerpt is not in its source."""
    out = []
    for name, excerpt in excerpt_sources(row):
        text, data = read_source(name)
        if excerpt.startswith("json:"):
            assert data is not None, f"{excerpt}: {name} is not a JSON file"
            out.extend(json_values(data, excerpt[5:]))
        else:
            plain = normalized(excerpt.replace("{", "").replace("}", ""))
            assert plain in text, f"{name} no longer says {plain!r}"
            out.extend(numbers(normalized(CONTEXT.sub(" ", excerpt))))
    assert out, "the excerpts hold no number"
    return out


# ------------------------------------------------------------------------------------------------------ checking
#: what a C row's formula may call
FORMULA_NAMES = {"min": min, "max": max, "abs": abs, "sum": sum, "len": len, "round": round,
                 "mean": statistics.mean, "std": statistics.stdev}  # std: over seeds, ddof 1, as the study tables


def check(row) -> None:
    """Raise AssertionError when the row's figures disagree with its source."""
    if isinstance(row, N):
        assert row.why.strip(), "say where the figure comes from"
        return
    have = source_numbers(row)
    if type(row) is Q:
        quoted = checked_numbers(row.quote)
        assert quoted, "the quote has no number to check"
        for q, places in quoted:
            assert any(agrees(q, places, s) for s, _ in have), \
                f"{q:g} is not in {row.source} (its excerpts hold {sorted({s for s, _ in have})})"
    elif type(row) is R:
        ranges = list(RANGE.finditer(CONTEXT.sub(" ", row.quote)))
        assert len(ranges) == 1, "an R row's quote holds one range a-b outside {...}"
        m = ranges[0]
        low, high = value(m.group("sign"), m.group("num")), value(m.group("sign2"), m.group("num2"))
        values = [s for s, _ in have]
        assert agrees(low, decimals(m.group("num")), min(values)) and agrees(high, decimals(m.group("num2")), max(values)), \
            f"{m.group(0)} does not span {min(values):g} ... {max(values):g} of {row.source}"
    elif type(row) is C:
        n = [s for s, _ in have]
        result = eval(row.formula, {"__builtins__": {}, **FORMULA_NAMES}, {"n": n})
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        quoted = checked_numbers(row.quote)
        assert len(quoted) == len(results), f"{len(quoted)} numbers quoted, the formula gives {len(results)}"
        for (q, places), r in zip(quoted, results):
            assert agrees(q, places, r), f"{q:g} quoted, {row.formula} = {r:g}"
    else:
        raise TypeError(row)


def page_text(page: str) -> str:
    return prose((REPO / page).read_text(encoding="utf-8"))


def quote_on_page(row, text: str) -> list:
    """The spans of ``text`` the row's quote covers (it must stand there at least once)."""
    target = normalized(row.quote.replace("{", "").replace("}", ""))
    spans, start = [], text.find(target)
    while start >= 0:
        spans.append((start, start + len(target)))
        start = text.find(target, start + 1)
    return spans


def all_pages() -> list:
    return sorted({str(p.relative_to(REPO)) for pattern in PAGES for p in REPO.glob(pattern)})


ROWS = [(page, i, row) for page, rows in FIGURES.items() for i, row in enumerate(rows)]


def row_id(item) -> str:
    page, i, row = item
    return f"{page}:{i}:{row.quote[:40]}"


@pytest.mark.parametrize("item", ROWS, ids=[row_id(item) for item in ROWS])
def test_each_quoted_figure_agrees_with_its_source(item):
    page, _, row = item
    assert quote_on_page(row, page_text(page)), f"{page} no longer says {row.quote!r}: update the row"
    check(row)


def uncovered_figures(page: str) -> list:
    """The figures of a page that no row of ``FIGURES[page]`` covers, each with its context."""
    text = page_text(page)
    covered = [span for row in FIGURES.get(page, []) for span in quote_on_page(row, text)]
    skipped = [m.span() for m in re.finditer(r"`[^`]*`|\]\([^)]*\)", text)]  # inline code, link targets
    missing = []
    for m in FIGURE.finditer(text):
        start, end = m.span()
        if any(a <= start and end <= b for a, b in skipped + covered):
            continue
        missing.append(f"{m.group(0)!r} in ...{text[max(0, start - 60):end + 40]}...")
    return missing


@pytest.mark.parametrize("page", all_pages())
def test_every_figure_has_a_source(page):
    missing = uncovered_figures(page)
    assert not missing, (f"{page}: {len(missing)} figures with no row in tests/unit/quoted_figures.py (Q/R/C: the "
                         "result file it comes from; N: why none):\n" + "\n".join(missing))


def test_the_registry_names_only_user_pages_and_result_files():
    pages = set(all_pages())
    assert set(FIGURES) <= pages, set(FIGURES) - pages
    sources = {str(p.relative_to(REPO)) for pattern in SOURCES for p in REPO.glob(pattern)}
    for page, _, row in ROWS:
        if not isinstance(row, N):
            for name, _ in excerpt_sources(row):
                assert name in sources, f"{page}: {name} is not a result file or study page"


# ------------------------------------------------------------------------------------------------ the checker itself
@pytest.mark.parametrize("text, expected", [
    ("12.31 ± 0.94", [(12.31, 2), (0.94, 2)]),
    ("at 1,500 updates, seeds 1,2", [(1500, 0), (1, 0), (2, 0)]),
    ("0.86-0.95x, 1.6–3.1x", [(0.86, 2), (0.95, 2), (1.6, 1), (3.1, 1)]),
    ("Δ −0.72 (p = .050), γ = -2.5, +1.15", [(-0.72, 2), (0.05, 3), (-2.5, 1), (1.15, 2)]),
    ("float64: 1e-10", [(1e-10, 10)]),
])
def test_numbers_are_read_with_their_precision(text, expected):
    assert [(pytest.approx(v), d) for v, d in numbers(text)] == expected


def test_a_changed_figure_fails_on_either_side(tmp_path, monkeypatch):
    source = tmp_path / "examples" / "x" / "results" / "r.md"
    source.parent.mkdir(parents=True)
    source.write_text("| joint | 26.14 ± 1.49 | 38.50 | 41.77 |\n", encoding="utf-8")
    (tmp_path / "r.json").write_text('{"runs": [{"bleu": 38.504}, {"bleu": 41.77}]}', encoding="utf-8")
    monkeypatch.setattr(__import__(__name__), "REPO", tmp_path)
    _SOURCE_CACHE.clear()
    try:
        check(Q("joint {at 1,500}: 26.14 ± 1.49", "examples/x/results/r.md", "26.14 ± 1.49"))
        check(Q("about 26 BLEU", "examples/x/results/r.md", "26.14 ± 1.49"))
        check(R("38.50-41.77 BLEU", "examples/x/results/r.md", "| 38.50 | 41.77 |"))
        check(R("38.5-41.8", "r.json", "json:runs/*/bleu"))
        check(C("1.08x", "examples/x/results/r.md", ["| 38.50 | 41.77 |"], "n[1] / n[0]"))
        with pytest.raises(AssertionError, match="is not in"):
            check(Q("26.41 ± 1.49", "examples/x/results/r.md", "26.14 ± 1.49"))
        with pytest.raises(AssertionError, match="does not span"):
            check(R("39-41 BLEU", "examples/x/results/r.md", "| 38.50 | 41.77 |"))
        with pytest.raises(AssertionError, match="quoted"):
            check(C("1.1x", "examples/x/results/r.md", ["| 38.50 | 41.77 |"], "n[0] / n[1]"))
        source.write_text("| joint | 26.41 ± 1.49 |\n", encoding="utf-8")
        _SOURCE_CACHE.clear()
        with pytest.raises(AssertionError, match="no longer says"):
            check(Q("26.14 ± 1.49", "examples/x/results/r.md", "26.14 ± 1.49"))
    finally:
        _SOURCE_CACHE.clear()


def test_uncovered_figures_are_found(monkeypatch):
    text = "Seen 73.30 ± 0.13 in `--lr 2e-3` and [x](a-1.5.md); at 36 BLEU, 3.6x, 25% and 1,500.\n```\n9.99\n```\n"
    monkeypatch.setattr(__import__(__name__), "page_text", lambda page: prose(text))
    monkeypatch.setitem(FIGURES, "fake.md", [Q("{Seen} 73.30 ± 0.13", "s", "x")])
    assert [m.split(" in ")[0] for m in uncovered_figures("fake.md")] == ["'36 BLEU'", "'3.6x'", "'25%'", "'1,500'"]
