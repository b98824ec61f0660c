"""The README and the Python guides run as written, and the guides' links lead somewhere.

``test_the_readme_runs_as_written`` runs every ```bash and ```python block of README.md verbatim, in order, in a fresh
copy of the repository's tracked files (a clone's root, with ``.venv`` linked in and ``.venv/bin`` first on PATH), each
block in its own shell (a Python block as a file beside the README) and within ``BLOCK_SECONDS`` (the console scripts
and Python files run warm, as every other test's: tests/warm_commands.py).
``test_the_python_guides_run_after_the_readme`` then runs the ```python blocks of each page of ``PYTHON_GUIDES`` (they
use the README's models in ``work/``) in that directory, the blocks of a page one after another in one interpreter, as
a reader pastes them. Two kinds of lines or blocks are left
out, and only these:

* the set-up lines ``make ...`` of a bash block (``make demo``/``make test`` build the environment this test runs in);
* a block whose fence is preceded by the marker ``<!-- not run: REASON -->`` (e.g. the CUDA install): REASON must be
  given, and a marker that marks no block is an error.
"""

import os
import re
import shutil
import subprocess
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import pytest
from conftest import BIN, REPO, WARM

README = REPO / "README.md"
#: the user guides whose Python snippets run after the README's quick starts (on the models they trained)
PYTHON_GUIDES = ["docs/python.md", "docs/translation.md"]
BLOCK_SECONDS = 300  # one block's limit on 2 cores (the whole README takes a few minutes)
MARKER = re.compile(r"^<!--\s*not run:(?P<reason>.*?)-->\s*$")
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)\s*$")  # indented: a block inside a list item
SETUP_LINE = re.compile(r"^\s*make(\s|$)")
RUN_LANGS = ("bash", "python")


@dataclass
class Block:
    lang: str
    code: str
    line: int  # 1-based line of the opening fence
    not_run: Optional[str] = None  # the marker's reason


def readme_blocks(text: str) -> List[Block]:
    """The fenced code blocks of a Markdown text, each with the reason of a ``<!-- not run: ... -->`` marker on the
    last non-blank line before its fence. A marker with no reason, or one followed by anything but a fence, is
    refused (ValueError), so that a marker cannot silently stop marking its block."""
    blocks, lines = [], text.splitlines()
    pending = None  # (line, reason) of a marker waiting for its fence
    i = 0
    while i < len(lines):
        line = lines[i]
        marker, fence = MARKER.match(line.strip()), FENCE.match(line)
        if marker:
            reason = marker.group("reason").strip()
            if not reason:
                raise ValueError(f"line {i + 1}: a '<!-- not run: REASON -->' marker must give its reason")
            pending = (i + 1, reason)
        elif fence:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].lstrip(" ").startswith("```")), None)
            if end is None:
                raise ValueError(f"line {i + 1}: the code block is never closed")
            code = textwrap.dedent("\n".join(lines[i + 1:end]) + "\n")
            blocks.append(Block(fence.group("lang"), code, i + 1, pending[1] if pending else None))
            pending, i = None, end
        elif line.strip() and pending:
            raise ValueError(f"line {pending[0]}: the 'not run' marker is not followed by a code block")
        i += 1
    if pending:
        raise ValueError(f"line {pending[0]}: the 'not run' marker is not followed by a code block")
    return blocks


def runnable(block: Block) -> Optional[str]:
    """The code this test runs for a block, or None: blocks of other languages and marked blocks are not run, and a
    bash block loses its ``make ...`` set-up lines (None when nothing else is left)."""
    if block.lang not in RUN_LANGS or block.not_run:
        return None
    if block.lang == "python":
        return block.code
    kept = [line for line in block.code.splitlines() if not SETUP_LINE.match(line)]
    return "\n".join(kept) + "\n" if any(line.strip() for line in kept) else None


# ------------------------------------------------------------------------------------------------ the marker logic
def test_blocks_markers_and_setup_lines():
    text = "\n".join([
        "# title", "```bash", "make demo   # set-up", "make test", "```", "",
        "<!-- not run: needs a GPU -->", "```bash", "pip install x", "```",
        "```python", "print(1)", "```",
        "```bash", "make demo", "echo hi", "```",
        "<!--not run:   takes an hour-->", "", "```python", "print(2)", "```",
        "```console", "$ echo hi", "```",
        "* a list item:", "", "  ```python", "  if True:", "      print(3)", "  ```",
    ])
    blocks = readme_blocks(text)
    assert [(b.lang, b.line, b.not_run) for b in blocks] == [
        ("bash", 2, None), ("bash", 8, "needs a GPU"), ("python", 11, None), ("bash", 14, None),
        ("python", 20, "takes an hour"), ("console", 23, None), ("python", 28, None)]
    assert [runnable(b) for b in blocks] == [None, None, "print(1)\n", "echo hi\n", None, None,
                                             "if True:\n    print(3)\n"]


@pytest.mark.parametrize("text, message", [
    ("<!-- not run: -->\n```bash\necho\n```\n", "must give its reason"),
    ("<!-- not run: GPU -->\nsome prose\n```bash\necho\n```\n", "not followed by a code block"),
    ("text\n<!-- not run: GPU -->\n", "not followed by a code block"),
    ("```bash\necho\n", "never closed"),
])
def test_a_bad_marker_or_fence_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        readme_blocks(text)


def test_the_readme_marks_only_what_cannot_run_here():
    blocks = readme_blocks(README.read_text(encoding="utf-8"))
    assert [b.not_run for b in blocks if b.not_run] == [
        "needs a CUDA machine with Python 3.12 and a CUDA build of torch"]
    first = blocks[0]  # the install block: make demo, make test, then what the user runs
    assert first.lang == "bash" and "make demo" in first.code and "make test" in first.code
    assert sum(runnable(b) is not None for b in blocks) >= 6


# ----------------------------------------------------------------------------------------------- the README, run
@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A fresh clone's root: the repository's tracked files as they are in the working tree, and its .venv."""
    root = tmp_path_factory.mktemp("readme") / "fairseq-joint"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        src = REPO / name
        if src.is_file():  # deleted in the working tree: not in a clone of it either
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / name)
    (root / ".venv").symlink_to(BIN.parent)
    return root


def run_block(cmd: List[str], cwd: Path, env: dict, where: str) -> str:
    """Run one block's command within ``BLOCK_SECONDS``; its stdout, or the test fails naming ``where``."""
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{where} ran over {BLOCK_SECONDS} s")
    seconds = time.monotonic() - start
    assert proc.returncode == 0, (f"{where} exited {proc.returncode} after {seconds:.0f} s\n--- code\n{cmd[-1]}"
                                  f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-5000:]}")
    return proc.stdout


def python_file(root: Path, name: str, code: str) -> List[str]:
    """The command that runs ``code`` as ``python FILE`` (a file in ``root`` beside the README: the directory it
    runs in, ``sys.path``'s first entry as for ``python -c``), which the warm servers can start."""
    path = root / f".{name}.py"
    path.write_text(code, encoding="utf-8")
    return [str(BIN / "python"), str(path)]


@pytest.fixture(scope="module")
def readme_run(clone):
    """Every runnable block of the clone's README run in order: ``(environment, [(block, stdout), ...])``."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    env.pop("VIRTUAL_ENV", None)
    outputs = []
    for block in readme_blocks((clone / "README.md").read_text(encoding="utf-8")):
        code = runnable(block)
        if code is None:
            continue
        cmd = ["bash", "-e", "-o", "pipefail", "-c", code] if block.lang == "bash" else \
            python_file(clone, f"readme-line-{block.line}", code)
        # a bash block as written, its fairseq and fairseq-joint commands started warm (tests/warm_commands.py: the
        # console scripts themselves run, in a process that imported torch and fairseq already); so is a Python block
        cmd, block_env = WARM.command(cmd, env)
        outputs.append((block, run_block(cmd, clone, block_env, f"README.md line {block.line}: the {block.lang} "
                                                                f"block")))
    return env, outputs


def test_the_readme_runs_as_written(clone, readme_run):
    _, outputs = readme_run
    # what the quick starts promise, beyond exiting 0
    test_lines = (clone / "data" / "demo-en-de" / "test.en").read_text(encoding="utf-8").count("\n")
    hyps = (clone / "work" / "en-de" / "test.hyp.de").read_text(encoding="utf-8")
    assert hyps.count("\n") == test_lines and hyps.strip(), "every test sentence gets a translation"
    stdout = "".join(out for _, out in outputs)
    assert re.search(r'"name": "BLEU"', stdout) and re.search(r'"name": "chrF2"', stdout), "sacreBLEU's scores"
    assert re.search(r"^D-0\t", stdout, re.M), "fairseq-interactive translated the sentence from stdin"
    # zero-shot: each text ranks first the new label that describes it (labels in no training file)
    predicted = dict(line.split("\t", 2)[:2] for line in stdout.splitlines()
                     if line.startswith(("A 3D car racing game\t", "A sky map of the stars")))
    assert [re.sub(r" \(-?[\d.]+\)$", "", best) for best in predicted.values()] == ["new::racing", "new::astronomy"]
    assert (clone / "work" / "tags" / "ckpt" / "checkpoint_last.pt").is_file()
    # the same ranking from Python, with the probability beside the score
    assert re.search(r"^\[\('new::racing', -?[\d.]+, [01]\.\d+\), \('new::astronomy', ", stdout, re.M), "Python API"


def test_the_python_guides_run_after_the_readme(clone, readme_run):
    env, _ = readme_run
    for page in PYTHON_GUIDES:
        blocks = [b for b in readme_blocks((clone / page).read_text(encoding="utf-8")) if b.lang == "python"]
        code = "".join(runnable(b) or "" for b in blocks)
        assert code, f"{page}: no Python block to run"
        cmd, page_env = WARM.command(python_file(clone, page.replace("/", "-"), code), env)
        stdout = run_block(cmd, clone, page_env, f"{page}: its Python blocks")
        if page == "docs/python.md":  # each text's best label of the bundled set, and the new labels ranked
            assert "new::racing" in stdout and "new::astronomy" in stdout, stdout
            assert re.search(r"score +-?[\d.]+ +p [01]\.\d{3} +(seen|unseen)", stdout), stdout
        else:  # fairseq's from_pretrained translated the sentence: one non-empty line
            assert stdout.strip() and "\n" not in stdout.strip(), stdout


# --------------------------------------------------------------------------------------------------------- links
GUIDES = ["README.md", "CONTRIBUTING.md", "docs/*.md", "studies/*.md", "examples/*/README.md", "data/*/README.md"]
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def github_anchors(markdown: str) -> set:
    """The anchors GitHub gives a page's headings: lower case, punctuation but ``-`` and ``_`` dropped, spaces to
    hyphens, and -1, -2, ... for repeats."""
    seen, anchors = {}, set()
    for line in strip_code(markdown).splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1)).lower()
            slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
            count = seen.get(slug, 0)
            anchors.add(slug if count == 0 else f"{slug}-{count}")
            seen[slug] = count + 1
    return anchors


def strip_code(markdown: str) -> str:
    return re.sub(r"^```.*?^```", "", markdown, flags=re.M | re.S)


def test_the_guides_links_lead_somewhere():
    broken = []
    for page in sorted({p for pattern in GUIDES for p in REPO.glob(pattern)}):
        for match in LINK.finditer(strip_code(page.read_text(encoding="utf-8"))):
            target = match.group("target")
            if re.match(r"^[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in github_anchors(dest.read_text(encoding="utf-8")):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_github_anchors():
    page = "# A `load_translator` b\n## 5.1 On a GPU: x's\n# A `load_translator` b\n```\n# not a heading\n```\n"
    assert github_anchors(page) == {"a-load_translator-b", "51-on-a-gpu-xs", "a-load_translator-b-1"}
