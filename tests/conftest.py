"""Shared fixtures: a tiny binarized slice of the bundled corpus and a runner for fairseq's CLIs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
USER_DIR = str(REPO / "fairseq_joint")
DEMO = REPO / "data" / "demo-en-de"
BIN = Path(sys.executable).parent


def cli(tool: str, *args, check: bool = True, env=None, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run a fairseq console script (``fairseq-train`` ...) or a repo script; fail with its output."""
    exe = str(BIN / tool) if (BIN / tool).exists() else tool
    cmd = [exe, *map(str, args)]
    run_env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    run_env.update(env or {})
    proc = subprocess.run(cmd, capture_output=True, text=True, env=run_env, timeout=timeout, cwd=str(REPO))
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-6000:]}"
        )
    return proc


def python_script(script: str, *args, **kw) -> subprocess.CompletedProcess:
    return cli(sys.executable, str(REPO / script), *args, **kw)


def write_slice(dest: Path, n_train: int = 300, n_eval: int = 40) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("valid", n_eval), ("test", n_eval)):
        for lang in ("en", "de"):
            lines = (DEMO / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
            (dest / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


@pytest.fixture(scope="session")
def tiny_text(tmp_path_factory) -> Path:
    """300/40/40 real sentence pairs (whitespace tokens), raw text."""
    return write_slice(tmp_path_factory.mktemp("tiny_text"))


@pytest.fixture(scope="session")
def tiny_bin(tiny_text, tmp_path_factory) -> Path:
    """The tiny slice binarized by fairseq-preprocess (en -> de)."""
    dest = tmp_path_factory.mktemp("tiny_bin")
    cli(
        "fairseq-preprocess", "--source-lang", "en", "--target-lang", "de",
        "--trainpref", tiny_text / "train", "--validpref", tiny_text / "valid", "--testpref", tiny_text / "test",
        "--destdir", dest, "--workers", "1",
    )
    return dest


TRAIN_FAST = [
    "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1000", "--no-progress-bar", "--log-interval", "1",
    "--seed", "1", "--num-workers", "0", "--no-epoch-checkpoints", "--disable-validation",
]
