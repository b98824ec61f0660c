"""End-to-end tests of GILE through the real CLIs: preprocessing, fairseq-train + validation for every
head, checkpoint round trips (fairseq-validate), --eval-label-file, zero-shot prediction, bad input, the study
and the per-label tools of examples/gile, relative paths from the user's directory."""

import json
import random
import re

import numpy as np
import pytest
from conftest import (
    GILE_FAST,
    GILE_TRAIN,
    SAMPLE,
    cli,
    preprocess_gile,
    python_script,
    sample_corpus,
    valid_line,
    write_zero_shot_data,
)

from fairseq_joint.cli import preprocess_gile as preprocess_command
from fairseq_joint.cli.common import CommandError, run
from fairseq_joint.errors import InputError
from fairseq_joint.hub import LabelPredictor
from fairseq_joint.models.gile_classifier import NEEDS_JOINT_DIM
from fairseq_joint_studies.study_metrics import chance_level

HEADS = ["linear", "bil_yh15", "bil_n16", "gile", "gile_label_only", "gile_input_only"]
FAST = GILE_FAST
preprocess = preprocess_gile


def joint_dim(head):
    """``--joint-dim 8`` for the heads with a joint space of that size (the others refuse it: they do not read it)."""
    return ["--joint-dim", "8"] if head in NEEDS_JOINT_DIM else []


def seen_chance(bin_dir, subset="valid"):
    """The metrics of random scores over the training labels on ``subset``'s documents (the floor a trained model must
    clear)."""
    train = (bin_dir / "labels.train.txt").read_text().split()
    rows = [line.split() for line in (bin_dir / f"{subset}.labels").read_text().splitlines()]
    return chance_level(np.array([[n in row for n in train] for row in rows]))


@pytest.mark.parametrize("head,extra", [(h, []) for h in HEADS] + [("gile", ["--encoder", "han", "--word-encoder", "bigru"])])
def test_train_validate_and_checkpoint_round_trip(gile_bin, tmp_path, head, extra):
    save = tmp_path / "ckpt"
    train = cli("fairseq-train", gile_bin, "--user-dir", "fairseq_joint", "--task", "gile_classification",
                "--arch", "gile_classifier", "--head", head, *joint_dim(head), "--criterion", "multilabel_classification",
                "--max-epoch", "2", "--save-dir", save, "--best-checkpoint-metric", "seen_avgpr",
                "--maximize-best-checkpoint-metric", *FAST, *extra)
    stats = valid_line(train.stdout + train.stderr)
    for key in ("seen_rl", "seen_avgpr", "seen_oneerr", "seen_f1", "seen_1best", "seen_r5", "seen_fullacc"):
        assert key in stats
    assert ("unseen_avgpr" in stats) == (head != "linear")  # only the joint heads score unseen labels
    assert ("gamma" in stats) == (head != "linear")  # and γ is calibrated on them (no --seen-score-offset)
    chance = seen_chance(gile_bin)
    assert chance["avgpr"] < stats["seen_avgpr"] <= 100, (stats["seen_avgpr"], chance["avgpr"])  # it learned
    assert stats["docs"] == 45  # every validation document was scored (no partial batch dropped, fairseq #5036)
    # the saved checkpoint gives the same validation figures when loaded again
    val = cli("fairseq-validate", gile_bin, "--user-dir", "fairseq_joint", "--task", "gile_classification",
              "--path", save / "checkpoint_last.pt", "--batch-size", "32", "--num-workers", "0")
    again = valid_line(val.stdout + val.stderr)
    for key in ("docs", "loss", "seen_rl", "seen_avgpr", "seen_oneerr", "unseen_rl", "unseen_avgpr"):
        if key in stats:
            assert again[key] == pytest.approx(stats[key], abs=0.011), key
    # and they are the checkpoint's own figures: its scores of every valid document, ranked here by hand
    scores, targets, _ = seen_label_scores_by_hand(save / "checkpoint_last.pt", gile_bin)
    ranked = [(s, t) for s, t in zip(scores, targets) if any(t)]
    assert ranked
    by_hand = [ranking_by_hand(s, t) for s, t in ranked]
    assert again["seen_avgpr"] == pytest.approx(100 * np.mean([ap for ap, _ in by_hand]), abs=0.011)
    assert again["seen_rl"] == pytest.approx(100 * np.mean([rl for _, rl in by_hand]), abs=0.011)
    if head == "linear":
        (tmp_path / "t.txt").write_text("a text\n")
        out = cli("fairseq-joint-predict-labels", "--checkpoint", save / "checkpoint_last.pt",
                  "--labels", SAMPLE / "labels.tsv", "--input", tmp_path / "t.txt", check=False)
        assert out.returncode != 0 and "--head linear cannot score" in out.stderr and "--head gile" in out.stderr
        # its label vectors (the Python API's embeddings of labels): a linear head has none
        predictor = LabelPredictor.from_checkpoint(save / "checkpoint_last.pt")
        with pytest.raises(InputError, match=r"--head linear has no label vectors: train with --head gile for them$"):
            predictor.embeddings(labels=(gile_bin / "labels.train.txt").read_text().split()[:1])  # a seen one


def test_preprocessing_again_into_a_directory_of_an_earlier_run(tmp_path, caplog):
    """A second run into the same --destdir read the earlier run's validation split with its new dictionary (other
    words, and an index past the embedding when the new one was smaller), and its language, label file and lexical
    model with the new data. A split of the same dictionary stays; one of another dictionary, and a label file when
    this run is given none, are refused before anything is written; the derived files are removed, each logged."""
    raw, dest = sample_corpus(tmp_path / "raw", n_train=40, n_valid=10), tmp_path / "bin"
    labels = ["--labels", str(raw / "labels.tsv")]
    preprocess_command.main(["--train", str(raw / "train.jsonl"), "--valid", str(raw / "valid.jsonl"), *labels,
                             "--lang", "en", "--lexical-features", "100", "--destdir", str(dest)])
    with caplog.at_level("INFO"):  # the same training texts: the same dictionary, so the validation split stays
        preprocess_command.main(["--train", str(raw / "train.jsonl"), *labels, "--destdir", str(dest)])
    assert {"valid.input.bin", "valid.labels", "labels.tsv"} <= {p.name for p in dest.iterdir()}
    assert not (dest / "language.txt").exists() and not (dest / "lexical.json").exists()
    assert sorted(r.getMessage() for r in caplog.records if r.getMessage().startswith("removed ")) == [
        f"removed {dest / name}: an earlier run's, which this run's files do not go with"
        for name in ("language.txt", "lexical.json")]
    before = (dest / "dict.txt").read_text()
    (raw / "few.jsonl").write_text("".join((raw / "train.jsonl").read_text().splitlines(keepends=True)[:20]))
    for argv, said in (([*labels], f"--destdir {dest} holds the valid split of an earlier run, binarized with another "
                                   f"dictionary than this run's: give --valid again, remove it ({dest}/valid.*), or give "
                                   "another --destdir"),
                       (["--valid", str(raw / "few.jsonl")], f"--destdir {dest} holds labels.tsv of an earlier run: "
                                                                f"give --labels {dest}/labels.tsv to use it again, or "
                                                                "remove it")):
        with pytest.raises(CommandError, match=f"^{re.escape(said)}$"):
            preprocess_command.main(["--train", str(raw / "few.jsonl"), *argv, "--destdir", str(dest)])
    assert (dest / "dict.txt").read_text() == before  # nothing written


def test_zero_shot_ranks_unseen_label_first(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    texts = write_zero_shot_data(raw)
    preprocess("--train", raw / "train.tsv", "--valid", raw / "valid.tsv", "--labels", raw / "labels.tsv",
               "--destdir", tmp_path / "bin")
    assert "L12" not in (tmp_path / "bin" / "labels.train.txt").read_text().split()
    # texts and descriptions tokenized by two processes: the same files
    out = preprocess("--train", raw / "train.tsv", "--valid", raw / "valid.tsv", "--labels", raw / "labels.tsv",
                     "--destdir", tmp_path / "bin2", "--workers", "2")
    assert "in 2 processes" in out.stderr
    files = sorted(p.name for p in (tmp_path / "bin").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "bin2").iterdir()) and "dict.txt" in files
    assert all((tmp_path / "bin" / f).read_bytes() == (tmp_path / "bin2" / f).read_bytes() for f in files)
    cli("fairseq-train", tmp_path / "bin", "--user-dir", "fairseq_joint", "--task", "gile_classification",
        "--arch", "gile_classifier", "--head", "bil_n16", "--embed-dim", "8", "--encoder-dim", "8", "--attention-dim", "8",
        "--criterion", "multilabel_classification", "--optimizer", "adam", "--lr", "1e-2", "--batch-size", "16",
        "--max-epoch", "10", "--seed", "1", "--num-workers", "0", "--no-progress-bar", "--disable-validation",
        "--save-dir", tmp_path / "ckpt", "--no-epoch-checkpoints")
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    out = cli("fairseq-joint-predict-labels", "--checkpoint", tmp_path / "ckpt" / "checkpoint_last.pt",
              "--labels", raw / "labels.tsv", "--input", tmp_path / "texts.txt", "--topk", "3", "--json")
    ranked = [json.loads(line)["labels"] for line in out.stdout.splitlines()]
    assert len(ranked) == len(texts)
    first = [r[0][0] for r in ranked]
    assert first.count("L12") >= 0.8 * len(texts), first
    # TSV output: a tab inside a text is no column (one text, then --topk labels); an input of no text is refused
    (tmp_path / "tabs.txt").write_text(texts[0].replace(" ", "\t", 1) + "\n")
    out = cli("fairseq-joint-predict-labels", "--checkpoint", tmp_path / "ckpt" / "checkpoint_last.pt",
              "--labels", raw / "labels.tsv", "--input", tmp_path / "tabs.txt", "--topk", "3")
    assert [len(line.split("\t")) for line in out.stdout.splitlines()] == [4], out.stdout
    (tmp_path / "blank.txt").write_text("\n \n")
    out = cli("fairseq-joint-predict-labels", "--checkpoint", tmp_path / "ckpt" / "checkpoint_last.pt",
              "--labels", raw / "labels.tsv", "--input", tmp_path / "blank.txt", check=False)
    assert out.returncode == 2 and out.stderr == f"error: --input {tmp_path / 'blank.txt'} holds no text: give one " \
                                                 "text a line\n", out.stderr


def write_two_label_data(raw, seed=0, words_per_label=4):
    """Training texts carry A, B or both (texts drawn from their description words); C, D, E are never seen."""
    rng = random.Random(seed)
    names = ["A", "B", "C", "D", "E"]
    labels = {k: " ".join(f"{k.lower()}{i}" for i in range(words_per_label)) for k in names}
    (raw / "labels.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in labels.items()))
    (raw / "seen.tsv").write_text("".join(f"{k}\t{labels[k]}\n" for k in "AB"))
    (raw / "unseen.tsv").write_text("".join(f"{k}\t{labels[k]}\n" for k in "CDE"))

    def text(keys):
        return " ".join(rng.choice(labels[rng.choice(keys)].split()) for _ in range(rng.randint(3, 6)))

    with open(raw / "train.tsv", "w") as f:
        for i in range(240):
            keys = [["A"], ["B"], ["A", "B"]][i % 3]
            f.write(text(keys) + "\t" + " ".join(keys) + "\n")
    return {k: [text([k]) for _ in range(20)] for k in names}


def predict_first(tmp_path, checkpoint, label_file, texts):
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    out = cli("fairseq-joint-predict-labels", "--checkpoint", checkpoint, "--labels", label_file,
              "--input", tmp_path / "texts.txt", "--topk", "5", "--json")
    ranked = [json.loads(line)["labels"] for line in out.stdout.splitlines()]
    assert len(ranked) == len(texts)
    for r in ranked:  # real rankings, not ties resolved by label order
        assert r[0][1] > r[1][1], r
    return [r[0][0] for r in ranked]


def test_a_long_tokenization_shows_progress(monkeypatch, caplog):
    monkeypatch.setattr(preprocess_command, "PROGRESS_SECONDS", 0)  # a progress line after every text
    texts = ["An apple.", "Two  trucks, three cars!", "x"]
    with caplog.at_level("INFO", logger="preprocess_gile"):
        words = preprocess_command.tokenize_all(texts, 1)
    assert words == [["an", "apple", "."], ["two", "trucks", ",", "three", "cars", "!"], ["x"]]
    assert [r.getMessage() for r in caplog.records][1:] == [
        f"tokenized {i} of 3 texts and label descriptions" for i in (1, 2, 3)]


def test_zero_shot_after_training_on_two_labels(tmp_path):
    """Trained on {A, B} only, gile with --similarity-init (and a frozen E) ranks each unseen label first among
    the unseen labels for texts made of its description words (GILE Table 2's unseen protocol), and still
    separates A from B."""
    raw = tmp_path / "raw"
    raw.mkdir()
    texts = write_two_label_data(raw)
    preprocess("--train", raw / "train.tsv", "--labels", raw / "labels.tsv", "--destdir", tmp_path / "bin")
    assert (tmp_path / "bin" / "labels.train.txt").read_text().split() == ["A", "B"]
    cli("fairseq-train", tmp_path / "bin", "--user-dir", "fairseq_joint", "--task", "gile_classification",
        "--arch", "gile_classifier", "--head", "gile", "--joint-dim", "32", "--similarity-init", "--freeze-embed",
        "--encoder-activation", "tanh", "--joint-activation", "tanh", "--embed-dim", "32", "--encoder-dim", "32",
        "--attention-dim", "32", "--criterion", "multilabel_classification", "--optimizer", "adam", "--lr", "1e-3",
        "--batch-size", "16", "--max-epoch", "3", "--seed", "1", "--num-workers", "0", "--no-progress-bar",
        "--disable-validation", "--save-dir", tmp_path / "ckpt", "--no-epoch-checkpoints")
    checkpoint = tmp_path / "ckpt" / "checkpoint_last.pt"
    for label in "AB":
        first = predict_first(tmp_path, checkpoint, raw / "seen.tsv", texts[label])
        assert first.count(label) >= 0.9 * len(first), (label, first)
    for label in "CDE":
        first = predict_first(tmp_path, checkpoint, raw / "unseen.tsv", texts[label])
        assert first.count(label) >= 0.9 * len(first), (label, first)


def test_word_vectors_embed_path_and_checkpoint_without_the_file(gile_bin, tmp_path):
    vectors = tmp_path / "vectors.txt"
    for out in (vectors, tmp_path / "again.txt"):
        cli("fairseq-joint-word-vectors", "--data", SAMPLE / "train.jsonl", "--labels", SAMPLE / "labels.tsv",
            "--dim", "16", "--epochs", "1", "--output", out)
    lines = vectors.read_text(encoding="utf-8").splitlines()
    count, dim = map(int, lines[0].split())
    assert dim == 16 and count == len(lines) - 1 > 1000
    assert vectors.read_bytes() == (tmp_path / "again.txt").read_bytes()  # seeded, one worker: reproducible
    words = {line.split(" ", 1)[0] for line in lines[1:]}
    assert {"package", "library", "input"} <= words  # text words and label-description words (lowercased)
    save = tmp_path / "ckpt"
    train = cli("fairseq-train", gile_bin, "--user-dir", "fairseq_joint", "--task", "gile_classification",
                "--arch", "gile_classifier", "--head", "gile", "--joint-dim", "8", "--criterion", "multilabel_classification",
                "--max-epoch", "1", "--save-dir", save, "--embed-path", vectors, "--similarity-init", *FAST)
    log = train.stdout + train.stderr
    assert re.search(r"--embed-path .*vectors.txt: \d+ of \d+ dictionary words have a pre-trained vector", log), log[-2000:]
    stats = valid_line(log)
    vectors.rename(tmp_path / "moved.txt")  # the checkpoint holds E: evaluating it does not need the file
    val = cli("fairseq-validate", gile_bin, "--user-dir", "fairseq_joint", "--task", "gile_classification",
              "--path", save / "checkpoint_last.pt", "--batch-size", "32", "--num-workers", "0")
    assert valid_line(val.stdout + val.stderr)["seen_avgpr"] == pytest.approx(stats["seen_avgpr"], abs=0.011)
    bad = cli("fairseq-train", gile_bin, "--user-dir", "fairseq_joint", "--task", "gile_classification",
              "--arch", "gile_classifier", "--head", "gile", "--criterion", "multilabel_classification", "--max-epoch", "1",
              "--save-dir", tmp_path / "ck2", "--embed-path", tmp_path / "moved.txt", *FAST[:-6], "--embed-dim", "32",
              check=False)
    assert bad.returncode != 0 and "the vectors have 16 dimensions but --embed-dim is 32; set --embed-dim 16" in bad.stderr


def test_eval_label_file_adds_unseen_labels_without_changing_the_seen_figures(tmp_path):
    """--eval-label-file: validating a checkpoint with the training labels only scores no unseen label; with the
    full label file the unseen label is scored (unseen_* figures) and the seen_* figures stay the same."""
    raw = tmp_path / "raw"
    raw.mkdir()
    write_zero_shot_data(raw, num_seen=6)  # L0..L5 in training, L6 never seen
    full = raw / "labels.tsv"
    (raw / "seen.tsv").write_text("".join(line + "\n" for line in full.read_text().splitlines()[:6]))
    seen_docs = (raw / "train.tsv").read_text().splitlines()[:30]
    (raw / "seen_docs.tsv").write_text("\n".join(seen_docs) + "\n")
    (raw / "mixed.tsv").write_text("\n".join(seen_docs) + "\n" + (raw / "valid.tsv").read_text())
    preprocess("--train", raw / "train.tsv", "--valid", raw / "seen_docs.tsv", "--test", raw / "mixed.tsv",
               "--labels", full, "--destdir", tmp_path / "bin")
    cli("fairseq-train", tmp_path / "bin", "--user-dir", "fairseq_joint", "--task", "gile_classification",
        "--arch", "gile_classifier", "--head", "gile", "--joint-dim", "8", "--criterion", "multilabel_classification",
        "--max-epoch", "2", "--disable-validation", "--save-dir", tmp_path / "ckpt", *FAST)
    validate = ["fairseq-validate", tmp_path / "bin", "--user-dir", "fairseq_joint", "--task", "gile_classification",
                "--path", tmp_path / "ckpt" / "checkpoint_last.pt", "--batch-size", "8", "--num-workers", "0"]
    only_seen = cli(*validate, "--eval-label-file", raw / "seen.tsv", "--valid-subset", "valid")
    log = only_seen.stdout + only_seen.stderr
    assert "valid: 30 texts, 6 labels (6 seen, 0 unseen)" in log
    seen = valid_line(log)
    assert seen["docs"] == 30 and "seen_avgpr" in seen and not any(k.startswith("unseen_") for k in seen)
    with_unseen = cli(*validate, "--eval-label-file", full, "--valid-subset", "valid,test")
    log = with_unseen.stdout + with_unseen.stderr
    assert "valid: 30 texts, 7 labels (6 seen, 1 unseen)" in log and "test: 50 texts, 7 labels (6 seen, 1 unseen)" in log
    again = valid_line(log)
    # scoring one more label changes no seen figure (and no document holds it); ranked among all labels (GZSL) the
    # seen ones now compete with the unseen one too
    assert {k: v for k, v in again.items() if not k.startswith("gzsl_")} == seen
    assert "gzsl_seen_avgpr" in again and "gzsl_unseen_avgpr" not in again
    test = valid_line(log, "test")
    # one unseen label: it is the whole unseen ranking of its 20 documents (AvgPr 100, nothing to misorder: RL 0)
    assert test["docs"] == 50 and test["unseen_avgpr"] == 100.0 and test["unseen_rl"] == 0.0
    for key in ("seen_rl", "seen_avgpr", "seen_oneerr", "seen_r5", "seen_fullacc"):
        assert test[key] == seen[key], key  # the same 30 documents hold seen labels, ranked the same
    refused = cli(*validate, "--eval-label-file", raw / "seen.tsv", "--valid-subset", "test", check=False)
    assert refused.returncode != 0 and "label 'L6' is not in" in refused.stderr and "seen.tsv" in refused.stderr


def test_multiclass_linear_and_copy_loss(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    write_zero_shot_data(raw, num_seen=4)
    preprocess("--train", raw / "train.tsv", "--valid", raw / "train.tsv", "--labels", raw / "labels.tsv",
               "--destdir", tmp_path / "bin")
    common = ["--user-dir", "fairseq_joint", "--task", "gile_classification", "--arch", "gile_classifier",
              "--criterion", "multilabel_classification", "--max-epoch", "1", *FAST]
    out = cli("fairseq-train", tmp_path / "bin", "--head", "linear", "--classification-mode", "multiclass",
              "--save-dir", tmp_path / "ck1", *common, "--max-epoch", "2")
    chance = seen_chance(tmp_path / "bin")["avgpr"]  # 4 labels, one relevant: (1 + 1/2 + 1/3 + 1/4) / 4 = 52
    assert chance == pytest.approx(100 * 25 / 48, abs=3)
    linear = valid_line(out.stdout + out.stderr)["seen_avgpr"]
    assert linear > chance + 20, (linear, chance)  # texts of their label's description words: easy, once learned
    out = cli("fairseq-train", tmp_path / "bin", "--head", "gile", "--multilabel-loss", "copy_nll",
              "--save-dir", tmp_path / "ck2", *common, "--max-epoch", "4")
    copy = valid_line(out.stdout + out.stderr)["seen_avgpr"]
    assert copy > chance + 20, (copy, chance)


def test_bad_input_errors(tmp_path, capsys):
    labels, data = tmp_path / "labels.tsv", tmp_path / "train.jsonl"
    good_labels, good_data = "A\tapples and pears\nB\tcars and trucks\n", '{"text": "an apple", "labels": ["A"]}\n'
    cases = [
        (good_labels, good_data + '{"text": "a truck", "labels": ["C"]}\n', r"train.jsonl:2: label 'C' is missing from .*labels.tsv"),
        (good_labels, good_data + '{"text": "a truck"\n', r"train.jsonl:2: not valid JSON"),
        (good_labels, good_data + '{"text": "\\u0000", "labels": ["A"]}\n',
         r"train.jsonl:2: the text has no tokens"),  # Moses drops control characters
        ("A\tapples\nA\tpears\n", good_data, r"labels.tsv:2: duplicate label 'A'"),
        ("A\tapples\nB\t\n", good_data, r"labels.tsv:2: label 'B' has an empty description"),
    ]
    for label_text, data_text, message in cases:
        labels.write_text(label_text)
        data.write_text(data_text)
        status = run(preprocess_command.main, ["--train", str(data), "--labels", str(labels), "--destdir", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert status == 2 and re.search(message, err), err
    # the label file given as --destdir too: the refusal names --destdir (it named --labels, the first option of that
    # value), and the label file is left as it was
    labels.write_text(good_labels)
    status = run(preprocess_command.main, ["--train", str(data), "--labels", str(labels), "--destdir", str(labels)])
    assert status == 2 and capsys.readouterr().err == (f"error: --destdir {labels} is a file, not a directory: give a "
                                                       "directory to write to\n")
    assert labels.read_text() == good_labels
    # a joint head without any label descriptions
    tsv = tmp_path / "train.tsv"
    tsv.write_text("an apple\tA\na truck\tB\n")
    preprocess_command.main(["--train", str(tsv), "--valid", str(tsv), "--destdir", str(tmp_path / "nolabels")])
    out = cli("fairseq-train", tmp_path / "nolabels", "--user-dir", "fairseq_joint", "--task", "gile_classification",
              "--arch", "gile_classifier", "--head", "gile", "--criterion", "multilabel_classification",
              "--max-epoch", "1", "--save-dir", tmp_path / "ck", *FAST, check=False)
    assert out.returncode != 0 and "--head gile scores label descriptions but none were given" in out.stderr


def test_gile_study_table_plot_and_reuse(tmp_path):
    data = sample_corpus(tmp_path / "data")
    small = "+embed-dim=16+encoder-dim=16+attention-dim=16"
    args = ["--data", data, "--workdir", tmp_path / "work", "--max-epoch", "1", "--batch-size", "32",
            "--heads", f"linear{small},gile{small}+similarity-init+joint-dim=8"]
    first = python_script("examples/gile/gile_study.py", *args)
    table = (tmp_path / "work" / "results.md").read_text()
    assert "| WAN + linear + --embed-dim 16" in table and "+ --similarity-init + --joint-dim 8 |" in table
    assert "| random scores (chance) |" in table and (tmp_path / "work" / "results.png").stat().st_size > 0
    result = json.loads((tmp_path / "work" / "results.json").read_text())
    gile = result["heads"][f"gile{small}+similarity-init+joint-dim=8"]
    assert "unseen_avgpr" in gile and "unseen_avgpr" not in result["heads"][f"linear{small}"]
    # GZSL of the saved checkpoint: H at γ = 0 and with γ calibrated on the other half of the documents
    assert {"gzsl_h", "cal_gzsl_h", "cal_gzsl_seen_avgpr", "cal_gzsl_unseen_avgpr", "gamma"} <= set(gile)
    assert "gzsl_h" not in result["heads"][f"linear{small}"] and "γ-cal. gzsl H" in table
    again = python_script("examples/gile/gile_study.py", *args)  # finished runs of the same command are reused
    assert (again.stdout + again.stderr).count("reusing the finished run") == 2
    reused = json.loads((tmp_path / "work" / "results.json").read_text())["heads"]
    for system, stats in result["heads"].items():
        assert stats["docs"] == 30  # every validation document (no partial batch dropped, fairseq #5036)
        assert {k: v for k, v in reused[system].items() if k != "train_minutes"} == \
            {k: v for k, v in stats.items() if k != "train_minutes"}
    assert "reusing" not in first.stdout + first.stderr
    # several seeds: mean ± std and per-seed runs; the seed-1 run is not confused with the one above
    seeds = ["--data", data, "--workdir", tmp_path / "work", "--max-epoch", "1", "--batch-size", "32",
             "--heads", f"linear{small}", "--seeds", "1,2", "--select", "best"]
    python_script("examples/gile/gile_study.py", *seeds)
    linear = json.loads((tmp_path / "work" / "results.json").read_text())["heads"][f"linear{small}"]
    assert [r["seed"] for r in linear["runs"]] == [1, 2] and linear["seen_avgpr_std"] >= 0
    assert linear["seen_avgpr"] == pytest.approx(sum(r["seen_avgpr"] for r in linear["runs"]) / 2)
    assert " ± " in (tmp_path / "work" / "results.md").read_text()
    other = tmp_path / "named.tsv"
    cli("fairseq-joint-label-text", "--labels", data / "labels.tsv", "--output", other)
    mismatch = python_script("examples/gile/gile_study.py", *args, "--labels", other, check=False)
    assert mismatch.returncode != 0 and "preprocessed with other label texts" in mismatch.stderr
    missing = python_script("examples/gile/gile_study.py", *args, "--labels", tmp_path / "none.tsv", check=False)
    assert missing.returncode != 0 and "none.tsv does not exist" in missing.stderr


def test_gile_study_baselines_and_a_pretrained_encoder(tmp_path, sentence_encoder):
    data = sample_corpus(tmp_path / "data")
    enc = f"+encoder=pretrained+pretrained-encoder={sentence_encoder}"
    python_script("examples/gile/gile_study.py", "--data", data, "--workdir", tmp_path / "work", "--max-epoch", "1",
                  "--batch-size", "32", "--heads", f"gile{enc}+similarity-init", "--baselines", "tfidf_lr,cosine",
                  "--pretrained-encoder", sentence_encoder)
    results = json.loads((tmp_path / "work" / "results.json").read_text())
    result, chance = results["heads"], results["chance"]["seen"]["avgpr"]
    assert "unseen_avgpr" not in result["tfidf_lr"] and chance + 10 < result["tfidf_lr"]["seen_avgpr"] <= 100
    assert {"seen_avgpr", "unseen_avgpr", "gzsl_h", "cal_gzsl_h", "gamma"} <= set(result["cosine"])
    assert "gzsl_h" in result[f"gile{enc}+similarity-init"]
    table = (tmp_path / "work" / "results.md").read_text()
    assert "| TF-IDF + logistic regression (baseline) |" in table and "| st + gile + --similarity-init |" in table
    # the same checkpoint scored with --cosine-prior λ (cosine_prior.py): λ 0 is the study's row; the prior moves only
    # the unseen labels' scores; each checkpoint's figures are kept beside it and reused
    python_script("examples/gile/cosine_prior.py", "--workdir", tmp_path / "work", "--lambdas", "0,5")
    rows = json.loads((tmp_path / "work" / "cosine_prior.json").read_text())
    assert len(rows) == 2  # the one GILE run at two λ (its folder's name: the system, paths made file names)
    off, on = (next(row["1"] for name, row in rows.items() if name.endswith(f"+similarity-init + --cosine-prior {lam}"))
               for lam in (0, 5))
    study = result[f"gile{enc}+similarity-init"]
    assert off["seen_avgpr"] == pytest.approx(study["seen_avgpr"], abs=0.006)  # the study's table: 2 decimals
    assert off["unseen_avgpr"] == pytest.approx(study["unseen_avgpr"], abs=0.006)
    assert on["seen_avgpr"] == off["seen_avgpr"] and on["unseen_avgpr"] != off["unseen_avgpr"]
    cache = next((tmp_path / "work").glob("ckpt_*/cosine_prior_0_5.json"))
    stamp = cache.stat().st_mtime_ns
    python_script("examples/gile/cosine_prior.py", "--workdir", tmp_path / "work", "--lambdas", "0,5")
    assert cache.stat().st_mtime_ns == stamp and json.loads((tmp_path / "work" / "cosine_prior.json").read_text()) \
        == rows
    bad = python_script("examples/gile/gile_study.py", "--data", data, "--workdir", tmp_path / "work",
                        "--baselines", "cosine", "--heads", "", check=False)
    assert bad.returncode == 2 and "--baselines cosine needs --pretrained-encoder" in bad.stderr


def test_paths_are_relative_to_the_users_directory(tmp_path):
    """Run from another directory with relative paths, the commands read and write there, and so do the study's
    children (preprocessing, fairseq-train): --labels labels.tsv, --data data, +embed-path=vectors.txt."""
    user = tmp_path / "user"
    (user / "data").mkdir(parents=True)
    for name, n in (("train.jsonl", 80), ("valid.jsonl", 20)):
        lines = (SAMPLE / name).read_text(encoding="utf-8").splitlines()[:n]
        (user / "data" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (user / "labels.tsv").write_text((SAMPLE / "labels.tsv").read_text(encoding="utf-8"), encoding="utf-8")
    cli("fairseq-joint-label-text", "--labels", "labels.tsv", "--output", "named.tsv", cwd=user)
    preprocess("--train", "data/train.jsonl", "--valid", "data/valid.jsonl", "--labels", "named.tsv",
               "--destdir", "bin", cwd=user)
    assert (user / "bin" / "labels.tsv").read_text(encoding="utf-8") == (user / "named.tsv").read_text(encoding="utf-8")
    cli("fairseq-joint-word-vectors", "--data", "data/train.jsonl", "--labels", "named.tsv", "--dim", "16",
        "--epochs", "1", "--output", "vectors.txt", cwd=user)
    assert (user / "vectors.txt").stat().st_size > 0
    system = "gile+embed-dim=16+encoder-dim=16+attention-dim=16+joint-dim=8+embed-path=vectors.txt"
    python_script("examples/gile/gile_study.py", "--data", "data", "--labels", "labels.tsv", "--workdir", "work",
                  "--max-epoch", "1", "--batch-size", "32", "--heads", system, cwd=user)
    result = json.loads((user / "work" / "results.json").read_text())
    assert result["heads"][system]["docs"] == 20 and "unseen_avgpr" in result["heads"][system]
    assert (user / "work" / "bin" / "labels.tsv").read_text(encoding="utf-8") == (user / "labels.tsv").read_text(encoding="utf-8")
    log = (user / "work" / f"train_{system}.log").read_text()
    assert re.search(r"--embed-path vectors.txt: \d+ of \d+ dictionary words have a pre-trained vector", log), log[-2000:]


def test_gile_study_select_best_epoch(tmp_path):
    """--select best reports the epoch with the best validation seen AvgPr, --select last the last one."""
    import gile_study as study  # examples/gile (pytest.ini's pythonpath)
    log = tmp_path / "train.log"
    line = "2026-11-23 | INFO | valid | epoch {:03d} | valid on 'valid' subset | loss 0.04 | seen_avgpr {} | unseen_avgpr {}\n"
    log.write_text("# command: x\n" + line.format(1, 60.5, 20.0) + "train stuff | loss 0.03\n"
                   + line.format(2, 63.25, 18.0) + line.format(3, 61.0, 25.0))
    best = study.valid_stats(log, "best")
    assert (best["epoch"], best["seen_avgpr"], best["unseen_avgpr"]) == (2, 63.25, 18.0)
    last = study.valid_stats(log, "last")
    assert (last["epoch"], last["seen_avgpr"]) == (3, 61.0)
    (tmp_path / "empty.log").write_text("# command: x\n")
    with pytest.raises(CommandError, match="no validation line in .*empty.log"):
        study.valid_stats(tmp_path / "empty.log")


def test_label_text_prefixes_name_words(tmp_path):
    """fairseq-joint-label-text: name words + description, every label text distinct, usable by preprocessing."""
    out = tmp_path / "labels.named.tsv"
    done = cli("fairseq-joint-label-text", "--labels", SAMPLE / "labels.tsv", "--output", out)
    assert "21 before, 0 after" in done.stdout  # 21 descriptions shared by two labels in debtags
    texts = dict(line.split("\t") for line in out.read_text(encoding="utf-8").splitlines())
    assert texts["implemented-in::python"] == "implemented in python Python"
    assert texts["devel::lang:python"] == "devel lang python Python Development"
    assert texts["culture::thai"] != texts["iso15924::thai"]
    assert len(texts) == len(set(texts.values())) == 469
    preprocess("--train", SAMPLE / "train.jsonl", "--labels", out, "--destdir", tmp_path / "bin")
    assert (tmp_path / "bin" / "labels.tsv").read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
    # run again on the label file the first run copied into --destdir: it is read, not copied onto itself
    preprocess("--train", SAMPLE / "train.jsonl", "--labels", tmp_path / "bin" / "labels.tsv", "--destdir", tmp_path / "bin")
    assert (tmp_path / "bin" / "labels.tsv").read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
    bad = tmp_path / "bad.tsv"
    bad.write_text("a::b\tfine\nc::d\t \n")
    fail = cli("fairseq-joint-label-text", "--labels", bad, "--output", tmp_path / "x.tsv", check=False)
    assert fail.returncode != 0 and f"{bad}:2: label 'c::d' has an empty description" in fail.stderr
    (tmp_path / "link.tsv").symlink_to(out)  # the input under another name: rewriting it would destroy it
    same = cli("fairseq-joint-label-text", "--labels", tmp_path / "link.tsv", "--output", out, check=False)
    assert same.returncode == 2 and same.stderr == (f"error: --output {out} is --labels {tmp_path / 'link.tsv'}, which "
                                                    "writing it would destroy: give a new file\n"), same.stderr


def seen_label_scores_by_hand(checkpoint, data):
    """(scores, targets, seen label names) of every valid document (in id order, one batch) on the seen labels,
    from the checkpoint loaded here with fairseq."""
    import torch
    from fairseq import checkpoint_utils

    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], arg_overrides={"data": str(data)})
    model = models[0].eval()
    task.load_dataset("valid")
    ds = task.dataset("valid")
    batch = ds.collater([ds[i] for i in range(len(ds))])
    seen = batch["label_train_index"] >= 0
    with torch.no_grad():
        scores = model.label_scores(model(**batch["net_input"]), batch["label_tokens"][seen],
                                    batch["label_train_index"][seen])
    order = batch["id"].argsort()
    label_set = task.label_set("valid")
    names = [n for n, i in zip(label_set.names, label_set.train_index.tolist()) if i >= 0]
    return scores[order].float().tolist(), (batch["target"][:, seen][order] > 0).tolist(), names


def ranking_by_hand(scores, relevant):
    """(AvgPr, RL) of one document's label ranking: the mean over its relevant labels of the share of relevant ones
    among the labels scored at least as high, and the share of (relevant, irrelevant) pairs ranked the wrong way."""
    pairs = [(s, r) for s, r in zip(scores, relevant)]
    precisions = [sum(q for t, q in pairs if t >= s) / sum(1 for t, _ in pairs if t >= s) for s, r in pairs if r]
    wrong = sum(1 for s, r in pairs if r for t, q in pairs if not q and t >= s)
    good, bad = sum(relevant), len(relevant) - sum(relevant)
    return sum(precisions) / len(precisions), wrong / (good * bad) if good * bad else 0.0


def average_precision_by_hand(scores, positive):
    """The mean over the positive documents of the precision among the documents scored at least as high."""
    precisions = []
    for s, p in zip(scores, positive):
        if p:
            above = [q for t, q in zip(scores, positive) if t >= s]
            precisions.append(sum(above) / len(above))
    return sum(precisions) / len(precisions)


def test_label_frequency_bins_compares_checkpoints(gile_bin, tmp_path):
    """Per-label AP by training frequency: bins hold the right labels, the macro figures are those of an
    independent computation (each checkpoint scored here, AP by hand), errors are clear."""
    from collections import Counter

    ckpts = {}
    for head in ("linear", "gile"):
        cli("fairseq-train", gile_bin, "--user-dir", "fairseq_joint", "--task", "gile_classification",
            "--arch", "gile_classifier", "--head", head, *joint_dim(head), "--criterion", "multilabel_classification",
            "--max-epoch", "1", "--save-dir", tmp_path / head, *FAST)
        ckpts[head] = tmp_path / head / "checkpoint_last.pt"
    out = python_script("examples/gile/label_frequency_bins.py", "--data", gile_bin, "--bins", "2,10",
                        "--checkpoint", f"linear={ckpts['linear']}", "--checkpoint", f"gile={ckpts['gile']}",
                        "--json", tmp_path / "bins.json", "--plot", tmp_path / "bins.png")
    table = json.loads((tmp_path / "bins.json").read_text())
    assert table["bins"] == ["1-2", "3-10", ">10"] and "1-2" in out.stdout and "linear" in out.stdout
    freq = Counter(n for line in (gile_bin / "train.labels").read_text().splitlines() for n in line.split())
    valid = {n for line in (gile_bin / "valid.labels").read_text().splitlines() for n in line.split() if n in freq}
    bounds = ((1, 2), (3, 10), (11, 10 ** 9))
    expected = [sum(1 for n in valid if lo <= freq[n] <= hi) for lo, hi in bounds]
    assert table["labels"] == expected and sum(expected) == len(valid) > 0
    assert (tmp_path / "bins.png").stat().st_size > 0
    # the figures, computed independently: every checkpoint scored here, every label's AP by hand, macro per bin
    for name, checkpoint in ckpts.items():
        scores, targets, names = seen_label_scores_by_hand(checkpoint, gile_bin)
        assert len(targets) == 45 and set(names) == set(freq)
        ap = {}
        for j, label in enumerate(names):
            positive = [row[j] for row in targets]
            if any(positive):
                ap[label] = average_precision_by_hand([row[j] for row in scores], positive)
        assert set(ap) == valid
        for b, (lo, hi) in enumerate(bounds):
            members = [ap[n] for n in ap if lo <= freq[n] <= hi]
            got = table["models"][name]["macro_ap"][b]
            if not members:
                assert got is None
            else:
                assert got == pytest.approx(100.0 * sum(members) / len(members), abs=1e-6), (name, b)
        assert table["models"][name]["all"] == pytest.approx(100.0 * sum(ap.values()) / len(ap), abs=1e-6)
    for bad, message in ((["--bins", "10,5"], "must be increasing"),
                         (["--checkpoint", tmp_path / "none.pt"], "none.pt: no such file")):
        args = ["--data", gile_bin, "--checkpoint", ckpts["gile"], *bad]
        fail = python_script("examples/gile/label_frequency_bins.py", *args, check=False)
        assert fail.returncode != 0 and message in fail.stderr


def test_polynomial_decay_over_the_epochs_of_the_run_without_total_num_update(gile_bin, tmp_path):
    """--lr-scheduler polynomial_decay --max-epoch 2 without --total-num-update (fairseq failed in a hydra traceback):
    the rate decays to 0 over the 2 epochs' updates, 5 an epoch (150 documents, batches of 32); --max-update, the
    option's documented default, where it is given."""
    out = cli("fairseq-train", gile_bin, *GILE_TRAIN, "--criterion", "multilabel_classification", "--lr-scheduler",
              "polynomial_decay", "--max-epoch", "2", "--save-dir", tmp_path / "epochs", *GILE_FAST).stdout
    assert "--total-num-update 10: the updates of --max-epoch 2 (5 an epoch)" in out
    rates = [float(r) for r in re.findall(r"num_updates=\d+, lr=([\d.e-]+)", out)]
    assert len(rates) == 10 and rates[-1] == 0 and rates[4] == pytest.approx(1e-3)  # 2e-3 · (1 - 5/10)
    out = cli("fairseq-train", gile_bin, *GILE_TRAIN, "--criterion", "multilabel_classification", "--lr-scheduler",
              "polynomial_decay", "--max-update", "4", "--save-dir", tmp_path / "updates", *GILE_FAST).stdout
    rates = [float(r) for r in re.findall(r"num_updates=\d+, lr=([\d.e-]+)", out)]
    assert len(rates) == 4 and rates[-1] == 0
