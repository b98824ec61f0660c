"""Shared helpers and fixtures of the two test suites.

* ``tests/unit``: the math, in process, without the command-line tools (``make test-fast``, under a minute);
* ``tests/cli``: fairseq's CLIs, our commands, recipes and benchmarks end to end on tiny real data (marked ``slow``).

Test modules import helpers from here only, never from each other.
"""

import contextlib
import os
import random
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from warm_commands import WarmServers

#: without CUDA, Triton's kernels (the fused exact softmax) run in Triton's CPU interpreter: set before anything imports
#: Triton, which reads it then
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

REPO = Path(__file__).resolve().parents[1]
USER_DIR = str(REPO / "fairseq_joint")
DEMO = REPO / "data" / "demo-en-de"
SAMPLE = REPO / "data" / "debtags-sample"
BIN = Path(sys.executable).parent
#: the warm-start servers of this pytest process (tests/warm_commands.py)
WARM = WarmServers()


#: the modules whose tests take longest (10 s to minutes on 2 cores, as measured), longest first: they are collected
#: first, so that `make test`'s two pytest-xdist workers start them first and neither is left alone with a long test
#: at the end
LONGEST_FIRST = ("test_readme.py", "test_gile_commands.py", "test_gile_pretrained.py", "test_gile_multilingual.py",
                 "test_nmt_study.py", "test_benchmarks.py", "test_bench_gpu.py", "test_fairseq_patches.py",
                 "test_recipes.py", "test_fairseq_clis.py", "test_hub.py", "test_resume.py",
                 "test_checkpoint_safety.py", "test_refusals.py", "test_distill_encoder.py",
                 "test_label_embedding_training.py", "test_demo.py", "test_option_checks.py", "test_command_errors.py")


def pytest_collection_modifyitems(config, items):
    """Everything under tests/cli runs real commands: mark it ``slow``; the longest modules first."""
    cli_dir = Path(__file__).parent / "cli"
    for item in items:
        if cli_dir in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.slow)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))  # stable: file order kept


# ---------------------------------------------------------------------------------------------- running commands
def log_records(text: str, kind: str, subset: str = "valid") -> list:
    """The figures of fairseq's ``train_inner`` / ``train`` / ``valid`` log lines (studies/fairseq_joint_studies/fairseq_log.py)."""
    from fairseq_joint_studies import fairseq_log

    return fairseq_log.records(text, kind, subset)



def cli(tool: str, *args, check: bool = True, env=None, timeout: int = 600, cwd=None, stdin=None
        ) -> subprocess.CompletedProcess:
    """Run a console script of the environment (``fairseq-train``, ``fairseq-joint-...``) or any program; fail with
    its output. Runs in the repository root unless ``cwd`` says otherwise, reading the file ``stdin`` (its bytes as
    they are) if given. A console script starts warm (fairseq already imported: tests/warm_commands.py) unless
    ``FAIRSEQ_JOINT_TESTS_COLD=1``."""
    exe = str(BIN / tool) if (BIN / tool).exists() else tool
    cmd = [exe, *map(str, args)]
    run_env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    run_env.update(env or {})
    cmd, run_env = WARM.command(cmd, run_env)
    with open(stdin, "rb") if stdin is not None else contextlib.nullcontext() as source:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=run_env, timeout=timeout, cwd=str(cwd or REPO),
                              stdin=source)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-6000:]}"
        )
    return proc


def python_script(script: str, *args, **kw) -> subprocess.CompletedProcess:
    """Run a Python file of the repository (a benchmark, an example's tool) with this interpreter (``script``
    relative to the repository, whatever ``cwd`` is)."""
    return cli(sys.executable, str(REPO / script), *args, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------- examples/wmt17
RECIPE = REPO / "examples" / "wmt17"
#: the recipes' environment: this environment's bin first on PATH, its interpreter as $PYTHON
RECIPE_ENV = {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHON": sys.executable}
#: the prepare scripts' options for the tiny mirror: 200 BPE merges, one worker, nothing downloaded
TINY_BPE = ["--bpe-ops", "200", "--workers", "1", "--offline"]


def recipe(script, *args, check=True):
    """Run a script of examples/wmt17 with bash in :data:`RECIPE_ENV`."""
    return cli("bash", RECIPE / script, *args, check=check, env=RECIPE_ENV)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """A tiny local mirror of the raw archives the prepare scripts read (tests/make_mirror.py)."""
    import make_mirror

    return make_mirror.build(tmp_path_factory.mktemp("mirror"))


def prepare_recipe(mirror, work, script, *args) -> Path:
    """Run a prepare script on the mirror into ``work``; its data-bin."""
    proc = recipe(script, *args, "--raw", mirror, "--work", work, *TINY_BPE)
    return Path(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------- translation data
def write_slice(dest: Path, n_train: int = 300, n_eval: int = 40) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("valid", n_eval), ("test", n_eval)):
        for lang in ("en", "de"):
            lines = (DEMO / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
            (dest / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


def binarize(text: Path, dest: Path, *extra) -> Path:
    """fairseq's preprocessing of a slice (en -> de), in process (fairseq_cli.preprocess.main)."""
    from fairseq import options
    from fairseq_cli.preprocess import main

    parser = options.get_preprocessing_parser()
    main(parser.parse_args(["--source-lang", "en", "--target-lang", "de", "--trainpref", str(text / "train"),
                            "--validpref", str(text / "valid"), "--testpref", str(text / "test"),
                            "--destdir", str(dest), "--workers", "1", *map(str, extra)]))
    return dest


@pytest.fixture(scope="session")
def tiny_text(tmp_path_factory) -> Path:
    """300/40/40 real sentence pairs (whitespace tokens), raw text."""
    return write_slice(tmp_path_factory.mktemp("tiny_text"))


@pytest.fixture(scope="session")
def tiny_bin(tiny_text, tmp_path_factory) -> Path:
    """The tiny slice binarized (en -> de, one dictionary per language)."""
    return binarize(tiny_text, tmp_path_factory.mktemp("tiny_bin"))


@pytest.fixture(scope="session")
def joined_bin(tiny_text, tmp_path_factory) -> Path:
    """The tiny slice binarized with one joined dictionary (for --share-all-embeddings)."""
    return binarize(tiny_text, tmp_path_factory.mktemp("joined_bin"), "--joined-dictionary")


TRAIN_FAST = [
    "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1000", "--no-progress-bar", "--log-interval", "1",
    "--seed", "1", "--num-workers", "0", "--no-epoch-checkpoints", "--disable-validation",
]
SMALL_TRANSFORMER = ["--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "16",
                     "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
                     "--encoder-attention-heads", "2", "--decoder-attention-heads", "2"]
SMALL_LSTM = ["--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "16",
              "--decoder-embed-dim", "16", "--encoder-hidden-size", "24", "--decoder-hidden-size", "24",
              "--decoder-out-embed-dim", "16"]


def train_joint(data, save_dir, arch, updates, *extra, check=True):
    """fairseq-train of an NMT-joint model (dj 24) of ``arch`` for ``updates`` updates into ``save_dir``."""
    return cli("fairseq-train", data, "--user-dir", USER_DIR, "--arch", arch, "--output-layer", "joint",
               "--joint-dim", 24, "--save-dir", save_dir, "--max-update", updates, *TRAIN_FAST, *extra, check=check)


@pytest.fixture(scope="session")
def joint_checkpoint(tiny_bin, tmp_path_factory) -> Path:
    """The checkpoint of an NMT-joint joint_transformer_tiny (dj 24) trained 3 updates by fairseq-train on the tiny
    slice: for the tests that only read a trained model (generate, interactive, count-params, refusals)."""
    save_dir = tmp_path_factory.mktemp("joint_checkpoint")
    train_joint(tiny_bin, save_dir, "joint_transformer_tiny", 3)
    return save_dir / "checkpoint_last.pt"


def training_args(data, arch, *extra):
    """fairseq-train's parsed arguments (architecture applied) for ``data`` and ``arch``, in process."""
    from fairseq import options

    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, [str(data), "--arch", arch, "--user-dir", USER_DIR, *map(str, extra)])


def build(data, arch, *extra):
    """(task, model) as fairseq-train builds them, in process, with seed 0."""
    from fairseq import tasks

    args = training_args(data, arch, *extra)
    task = tasks.setup_task(args)
    torch.manual_seed(0)
    return task, task.build_model(args)


def random_batch(task, n=3):
    """n random (source, length, previous target) triples of the task's dictionaries."""
    src_dict = task.src_dict
    g = torch.Generator().manual_seed(0)
    src = torch.randint(src_dict.nspecial, len(src_dict), (n, 7), generator=g)
    src[:, -1] = src_dict.eos()
    prev = torch.randint(task.tgt_dict.nspecial, len(task.tgt_dict), (n, 5), generator=g)
    prev[:, 0] = task.tgt_dict.eos()
    return src, torch.full((n,), 7), prev


def valid_batch(tiny_bin, n=8, *extra):
    """(task, model, the first n validation pairs as one batch) of a small joint_transformer (joint, dj 12)."""
    task, model = build(tiny_bin, "joint_transformer", "--output-layer", "joint", "--joint-dim", 12, "--dropout", "0",
                        *SMALL_TRANSFORMER, *extra)
    task.load_dataset("valid")
    ds = task.dataset("valid")
    return task, model, ds.collater([ds[i] for i in range(n)])


def state(path):
    """A checkpoint as torch loads it with weights_only=True (the plugin allowlists what fairseq pickles)."""
    import fairseq_joint  # noqa: F401

    return torch.load(path, map_location="cpu", weights_only=True)


def assert_same_tensors(a, b, what=""):
    for key, value in a.items():
        if torch.is_tensor(value):
            assert torch.equal(value, b[key]), (what, key)


# ---------------------------------------------------------------------------------------------- GILE data
#: the training options of the GILE tests over a sentence encoder, which has no word encoder to size (--attention-dim
#: is refused there)
GILE_SENTENCE_FAST = ["--optimizer", "adam", "--lr", "2e-3", "--batch-size", "32", "--no-progress-bar", "--log-interval",
                      "1", "--seed", "1", "--num-workers", "0", "--no-epoch-checkpoints", "--embed-dim", "16",
                      "--encoder-dim", "16"]
GILE_FAST = [*GILE_SENTENCE_FAST, "--attention-dim", "16"]
GILE_TRAIN = ["--user-dir", USER_DIR, "--task", "gile_classification", "--arch", "gile_classifier"]


def preprocess_gile(*args, **kw):
    """Binarize GILE data with the preprocessing command (in a subprocess, as a user runs it)."""
    return cli("fairseq-joint-preprocess-gile", *args, **kw)


def valid_lines(output: str, subset: str = "valid") -> list:
    """The figures of every ``valid on '<subset>' subset`` line of a fairseq log, in order."""
    return log_records(output, "valid", subset)


def valid_line(output: str, subset: str = "valid") -> dict:
    """The figures of the last ``valid on '<subset>' subset`` line of a fairseq log."""
    lines = valid_lines(output, subset)
    assert lines, output[-3000:]
    return lines[-1]


def write_zero_shot_data(raw, num_seen=12, words_per_label=4, seed=0):
    """Labels L0..L{num_seen-1} seen in training (texts drawn from their description words), L{num_seen} never seen;
    returns the validation texts (of the unseen label)."""
    rng = random.Random(seed)
    labels = {f"L{j}": " ".join(f"w{j * words_per_label + i}" for i in range(words_per_label)) for j in range(num_seen + 1)}
    (raw / "labels.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in labels.items()))
    with open(raw / "train.tsv", "w") as f:
        for i in range(60 * num_seen):
            words = labels[f"L{i % num_seen}"].split()
            f.write(" ".join(rng.choice(words) for _ in range(rng.randint(3, 6))) + f"\tL{i % num_seen}\n")
    unseen_words = labels[f"L{num_seen}"].split()
    texts = [" ".join(rng.choice(unseen_words) for _ in range(4)) for _ in range(20)]
    (raw / "valid.tsv").write_text("".join(f"{t}\tL{num_seen}\n" for t in texts))
    return texts


@pytest.fixture(scope="session")
def gile_bin(tmp_path_factory):
    """150 training and 45 validation documents of the bundled sample, binarized with all 469 labels (and the TF-IDF
    model of ``--encoder hybrid``, which the other encoders ignore)."""
    raw = tmp_path_factory.mktemp("gile_raw")
    for name, n in (("train.jsonl", 150), ("valid.jsonl", 45)):
        lines = (SAMPLE / name).read_text(encoding="utf-8").splitlines()[:n]
        (raw / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    dest = tmp_path_factory.mktemp("gile_bin")
    preprocess_gile("--train", raw / "train.jsonl", "--valid", raw / "valid.jsonl", "--labels", SAMPLE / "labels.tsv",
                    "--destdir", dest, "--lexical-features", 3000)
    return dest


def sample_corpus(dest: Path, n_train: int = 120, n_valid: int = 30) -> Path:
    """``dest`` with the first documents of the bundled sample (train.jsonl, valid.jsonl) and all its labels."""
    dest.mkdir(parents=True, exist_ok=True)
    for name, n in (("train.jsonl", n_train), ("valid.jsonl", n_valid)):
        lines = (SAMPLE / name).read_text(encoding="utf-8").splitlines()[:n]
        (dest / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (dest / "labels.tsv").write_text((SAMPLE / "labels.tsv").read_text(encoding="utf-8"), encoding="utf-8")
    return dest


def build_sentence_encoder(dest: Path, dim: int = 16, seed: int = 0, words: int = 600) -> Path:
    """A tiny randomly initialised sentence-transformers model (BERT, 1 layer, mean pooling, normalization) saved in
    ``dest``; its word-piece vocabulary is the bundled sample's most frequent words. No download."""
    import collections
    import json

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    counts = collections.Counter()
    for line in (SAMPLE / "train.jsonl").read_text(encoding="utf-8").splitlines():
        counts.update(re.findall(r"[a-z]+", json.loads(line)["text"].lower()))
    for line in (SAMPLE / "labels.tsv").read_text(encoding="utf-8").splitlines():
        counts.update(re.findall(r"[a-z]+", line.lower()))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [w for w, _ in counts.most_common(words)]
    hf = dest / "hf"
    hf.mkdir(parents=True, exist_ok=True)
    (hf / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), hidden_size=dim, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=2 * dim, max_position_embeddings=128)
    BertModel(config).save_pretrained(hf)
    BertTokenizerFast(vocab_file=str(hf / "vocab.txt"), do_lower_case=True).save_pretrained(hf)
    transformer = models.Transformer(str(hf), max_seq_length=64)
    model = SentenceTransformer(modules=[transformer, models.Pooling(dim, "mean"), models.Normalize()], device="cpu")
    out = dest / "st"
    model.save(str(out))
    return out


@pytest.fixture(scope="session")
def sentence_encoder(tmp_path_factory) -> Path:
    """A tiny random sentence-transformers model directory (16-d)."""
    return build_sentence_encoder(tmp_path_factory.mktemp("sentence_encoder"))


# ---------------------------------------------------------------------------------------------- devices
@pytest.fixture
def fake_cuda(monkeypatch):
    """One CUDA GPU as torch reports it, on a CPU-only machine: ``torch.cuda`` says one device is there, and
    ``Tensor.to`` a CUDA device records the tensor and leaves it on the CPU. Returns the ids of the tensors sent to
    CUDA (a ``.to(device)`` that reaches every tensor a model, its encoder and its caches hold records them all)."""
    moved = set()
    original = torch.Tensor.to

    def to(self, *args, **kwargs):
        args = list(args)
        where = ("device", kwargs) if "device" in kwargs else (0, args) if args else None
        if where is not None and isinstance(where[1][where[0]], (str, torch.device)) and \
                torch.device(where[1][where[0]]).type == "cuda":
            moved.add(id(self))
            where[1][where[0]] = torch.device("cpu")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", to)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    return moved
