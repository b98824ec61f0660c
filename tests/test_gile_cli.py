"""End-to-end tests of GILE through the real CLIs: preprocessing, fairseq-train + validation for every
head, checkpoint round trips (fairseq-validate), zero-shot prediction, bad input, the benchmark's --quick."""

import importlib.util
import json
import random
import re

import pytest

from conftest import REPO, cli, python_script

SAMPLE = REPO / "data" / "debtags-sample"
HEADS = ["linear", "bil_yh15", "bil_n16", "gile", "gile_label_only", "gile_input_only"]
FAST = ["--optimizer", "adam", "--lr", "2e-3", "--batch-size", "32", "--no-progress-bar", "--log-interval", "1",
        "--seed", "1", "--num-workers", "0", "--no-epoch-checkpoints", "--embed-dim", "16", "--encoder-dim", "16",
        "--attention-dim", "16"]


def load_preprocess():
    spec = importlib.util.spec_from_file_location("preprocess_gile", REPO / "scripts" / "preprocess_gile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def preprocess(*args):
    python_script("scripts/preprocess_gile.py", *args)


@pytest.fixture(scope="session")
def gile_bin(tmp_path_factory):
    """150 training and 40 validation documents of the bundled sample, binarized with all 469 labels."""
    raw = tmp_path_factory.mktemp("gile_raw")
    for name, n in (("train.jsonl", 150), ("valid.jsonl", 40)):
        lines = (SAMPLE / name).read_text(encoding="utf-8").splitlines()[:n]
        (raw / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    dest = tmp_path_factory.mktemp("gile_bin")
    preprocess("--train", raw / "train.jsonl", "--valid", raw / "valid.jsonl", "--labels", SAMPLE / "labels.tsv",
               "--destdir", dest)
    return dest


def valid_line(output: str) -> dict:
    lines = [line for line in output.splitlines() if "valid on 'valid' subset" in line]
    assert lines, output[-3000:]
    return {k: float(v) for k, v in re.findall(r"\| (\w+) ([-\d.]+)", lines[-1])}


@pytest.mark.parametrize("head,extra", [(h, []) for h in HEADS] + [("gile", ["--encoder", "han", "--word-encoder", "bigru"])])
def test_train_validate_and_checkpoint_round_trip(gile_bin, tmp_path, head, extra):
    save = tmp_path / "ckpt"
    train = cli("fairseq-train", gile_bin, "--user-dir", "fairseq_joint", "--task", "gile_classification",
                "--arch", "gile_classifier", "--head", head, "--joint-dim", "8", "--criterion", "multilabel_classification",
                "--max-epoch", "2", "--save-dir", save, "--best-checkpoint-metric", "seen_avgpr",
                "--maximize-best-checkpoint-metric", *FAST, *extra)
    stats = valid_line(train.stdout + train.stderr)
    for key in ("seen_rl", "seen_avgpr", "seen_oneerr", "seen_f1", "seen_1best", "seen_r5", "seen_fullacc"):
        assert key in stats
    assert ("unseen_avgpr" in stats) == (head != "linear")  # only the joint heads score unseen labels
    assert 0 <= stats["seen_avgpr"] <= 100
    assert stats["docs"] == 40  # every validation document was scored (nothing dropped by batching)
    if head in ("bil_yh15", "gile_label_only", "gile_input_only"):
        return  # the round trip below runs for linear, bil_n16 and gile (WAN and HAN) only, to save time
    # the saved checkpoint gives the same validation figures when loaded again
    val = cli("fairseq-validate", gile_bin, "--user-dir", "fairseq_joint", "--task", "gile_classification",
              "--path", save / "checkpoint_last.pt", "--batch-size", "32", "--num-workers", "0")
    again = valid_line(val.stdout + val.stderr)
    for key in ("docs", "loss", "seen_rl", "seen_avgpr", "seen_oneerr", "unseen_rl", "unseen_avgpr"):
        if key in stats:
            assert again[key] == pytest.approx(stats[key], abs=0.011), key
    if head == "linear":
        (tmp_path / "t.txt").write_text("a text\n")
        out = python_script("scripts/predict_labels.py", "--checkpoint", save / "checkpoint_last.pt",
                            "--labels", SAMPLE / "labels.tsv", "--input", tmp_path / "t.txt", check=False)
        assert out.returncode != 0 and "--head linear cannot score" in out.stderr and "--head gile" in out.stderr


def write_zero_shot_data(raw, num_seen=12, words_per_label=4, seed=0):
    """Labels L0..L11 seen in training (texts drawn from their description words), L12 never seen."""
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


def test_zero_shot_ranks_unseen_label_first(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    texts = write_zero_shot_data(raw)
    preprocess("--train", raw / "train.tsv", "--valid", raw / "valid.tsv", "--labels", raw / "labels.tsv",
               "--destdir", tmp_path / "bin")
    assert "L12" not in (tmp_path / "bin" / "labels.train.txt").read_text().split()
    cli("fairseq-train", tmp_path / "bin", "--user-dir", "fairseq_joint", "--task", "gile_classification",
        "--arch", "gile_classifier", "--head", "bil_n16", "--embed-dim", "8", "--encoder-dim", "8", "--attention-dim", "8",
        "--criterion", "multilabel_classification", "--optimizer", "adam", "--lr", "1e-2", "--batch-size", "16",
        "--max-epoch", "10", "--seed", "1", "--num-workers", "0", "--no-progress-bar", "--disable-validation",
        "--save-dir", tmp_path / "ckpt", "--no-epoch-checkpoints")
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    out = python_script("scripts/predict_labels.py", "--checkpoint", tmp_path / "ckpt" / "checkpoint_last.pt",
                        "--labels", raw / "labels.tsv", "--input", tmp_path / "texts.txt", "--topk", "3", "--json")
    ranked = [json.loads(line)["labels"] for line in out.stdout.splitlines()]
    assert len(ranked) == len(texts)
    first = [r[0][0] for r in ranked]
    assert first.count("L12") >= 0.8 * len(texts), first


def test_multiclass_kurata_init_and_copy_loss(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    write_zero_shot_data(raw, num_seen=4)
    preprocess("--train", raw / "train.tsv", "--valid", raw / "train.tsv", "--labels", raw / "labels.tsv",
               "--destdir", tmp_path / "bin")
    common = ["--user-dir", "fairseq_joint", "--task", "gile_classification", "--arch", "gile_classifier",
              "--criterion", "multilabel_classification", "--max-epoch", "1", *FAST]
    out = cli("fairseq-train", tmp_path / "bin", "--head", "linear", "--cooccurrence-init", "sqrt_f_ub",
              "--classification-mode", "multiclass", "--save-dir", tmp_path / "ck1", *common)
    assert "Kurata init (sqrt_f_ub): 4 of 16 hidden units" in out.stdout + out.stderr
    assert valid_line(out.stdout + out.stderr)["seen_avgpr"] > 0
    out = cli("fairseq-train", tmp_path / "bin", "--head", "gile", "--multilabel-loss", "copy_nll",
              "--save-dir", tmp_path / "ck2", *common)
    assert "seen_avgpr" in valid_line(out.stdout + out.stderr)


def test_bad_input_errors(tmp_path):
    pre = load_preprocess()
    labels, data = tmp_path / "labels.tsv", tmp_path / "train.jsonl"
    good_labels, good_data = "A\tapples and pears\nB\tcars and trucks\n", '{"text": "an apple", "labels": ["A"]}\n'
    cases = [
        (good_labels, good_data + '{"text": "a truck", "labels": ["C"]}\n', r"train.jsonl:2: label 'C' is missing from .*labels.tsv"),
        (good_labels, good_data + '{"text": "a truck"\n', r"train.jsonl:2: not valid JSON"),
        ("A\tapples\nA\tpears\n", good_data, r"labels.tsv:2: duplicate label 'A'"),
        ("A\tapples\nB\t\n", good_data, r"labels.tsv:2: label 'B' has an empty description"),
    ]
    for label_text, data_text, message in cases:
        labels.write_text(label_text)
        data.write_text(data_text)
        with pytest.raises(SystemExit, match=message):
            pre.main(["--train", str(data), "--labels", str(labels), "--destdir", str(tmp_path / "out")])
    # a joint head without any label descriptions
    tsv = tmp_path / "train.tsv"
    tsv.write_text("an apple\tA\na truck\tB\n")
    pre.main(["--train", str(tsv), "--valid", str(tsv), "--destdir", str(tmp_path / "nolabels")])
    out = cli("fairseq-train", tmp_path / "nolabels", "--user-dir", "fairseq_joint", "--task", "gile_classification",
              "--arch", "gile_classifier", "--head", "gile", "--criterion", "multilabel_classification",
              "--max-epoch", "1", "--save-dir", tmp_path / "ck", *FAST, check=False)
    assert out.returncode != 0 and "--head gile scores label descriptions but none were given" in out.stderr


def test_benchmark_label_sampling_quick(tmp_path):
    out = python_script("scripts/benchmark_label_sampling.py", "--quick", "--json", tmp_path / "b.json")
    result = json.loads((tmp_path / "b.json").read_text())
    assert [r["rate"] for r in result["results"]] == [0.1, 0.25, 0.5, 1.0]
    assert all(r["step_ms"] > 0 for r in result["results"])
    assert "speed-up vs 100%" in out.stdout
