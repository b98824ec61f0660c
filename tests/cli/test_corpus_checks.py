"""examples/wmt17's data preparation refuses a parallel corpus fairseq-preprocess would binarize without a word
(lib.sh ``check_pair``): two sides of other line counts and an empty side, named in one ``error:`` line before
anything is copied, tokenized or binarized; and a corpus that cleaning leaves empty."""

import os
import sys

import pytest
from conftest import BIN, DEMO, REPO, cli

ENV = {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHON": sys.executable}
SCRIPT = REPO / "examples" / "wmt17" / "prepare-parallel.sh"


def corpus(dest, n=30, **lines):
    """dest/{train,valid,test}.{en,de}: the first n pairs of the demo corpus; ``lines``: e.g. ``train_de=29``."""
    dest.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            keep = lines.get(f"{split}_{lang}", n)
            text = (DEMO / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:keep]
            (dest / f"{split}.{lang}").write_text("".join(line + "\n" for line in text), encoding="utf-8")
    return dest


def prepare(data, work, *extra):
    return cli("bash", SCRIPT, "--train", data / "train", "--valid", data / "valid", "--test", data / "test",
               "--src", "en", "--tgt", "de", "--work", work, "--bpe-ops", "50", "--workers", "1", *extra, env=ENV,
               check=False)


def refusal(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize("split,lines,said", [
    ("train", {"train_de": 29}, "is misaligned: {en} has 30 lines but {de} has 29; give files whose line i translate"),
    ("valid", {"valid_en": 0, "valid_de": 0}, "is empty ({en} has 0 lines, {de} 0): give a corpus with sentences"),
    ("test", {"test_de": 0}, "is empty ({en} has 30 lines, {de} 0): give a corpus with sentences"),
])
def test_a_misaligned_or_empty_corpus_is_refused_before_anything_is_written(tmp_path, split, lines, said):
    data = corpus(tmp_path / "data", **lines)
    line = refusal(prepare(data, tmp_path / "work"))
    prefix = data / split
    assert line.startswith(f"error: --{split} {prefix} " + said.format(en=f"{prefix}.en", de=f"{prefix}.de")), line
    assert not any((tmp_path / "work").rglob("*.*")), "nothing is copied, tokenized or binarized"


def test_a_corpus_that_cleaning_empties_is_refused_before_binarizing(tmp_path):
    line = refusal(prepare(corpus(tmp_path / "data"), tmp_path / "work", "--max-len", "1"))
    assert "corpus left by cleaning is empty" in line and "--max-len 1 and --ratio 1.5 dropped every pair" in line
    assert not list((tmp_path / "work").glob("bin-*")), "nothing binarized"
