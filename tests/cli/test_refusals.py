"""One-line refusals (issue #15's cases): under fairseq's commands and ours, bad options and inputs end with exactly one
line on stderr, ``error: <what>, <the fix>``, before any work is done; text files with a byte-order mark are read and
files that are not UTF-8 are refused with the file and the line."""

import pytest
import torch
from conftest import GILE_FAST, GILE_TRAIN, SAMPLE, TRAIN_FAST, USER_DIR, cli

LATIN1 = "Straße café".encode("latin-1")
BOM = b"\xef\xbb\xbf"


def refusal(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize("flags, message", [
    (["--criterion", "sampled_cross_entropy", "--sample-rate", "1.5"], r"--sample-rate must be in (0, 1]"),
    (["--criterion", "sampled_cross_entropy", "--num-samples", "-3"], "--num-samples must be a number of negatives >= 0"),
    (["--criterion", "sampled_cross_entropy", "--vocab-chunk-size", "0"], "--vocab-chunk-size must be a positive"),
    (["--criterion", "label_embedding_cross_entropy", "--label-embedding-hinge-p", "3"], "must be 1 or 2, got 3"),
    (["--criterion", "multilabel_classification", "--threshold", "-1"], "--threshold is a probability"),
    pytest.param(["--fp16"], "--fp16 needs a CUDA GPU", marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CPU")),
    pytest.param(["--amp"], "--amp needs a CUDA GPU", marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CPU")),
])
def test_training_options_are_refused_before_any_work(tmp_path, flags, message):
    """The data directory does not even exist: the refusal comes first."""
    proc = cli("fairseq-train", tmp_path / "no-data", "--user-dir", USER_DIR, "--arch", "joint_lstm_tiny",
               "--save-dir", tmp_path / "ck", *TRAIN_FAST, *flags, check=False)
    assert message in refusal(proc)


def test_resuming_into_another_output_layer_names_the_difference(tiny_bin, tmp_path):
    common = ["--user-dir", USER_DIR, "--arch", "joint_lstm_tiny", "--max-update", 1, "--save-dir", tmp_path, *TRAIN_FAST]
    cli("fairseq-train", tiny_bin, *common, "--joint-dim", 24)
    line = refusal(cli("fairseq-train", tiny_bin, *common, "--joint-dim", 16, check=False))
    assert "the checkpoint's output layer differs from this model's (joint_dim: checkpoint 24 vs model 16)" in line
    assert "--joint-dim" in line


def test_gile_inputs_that_are_not_utf8_or_start_with_a_byte_order_mark(tmp_path):
    labels, data = tmp_path / "labels.tsv", tmp_path / "train.jsonl"
    labels.write_bytes(BOM + b"A\tapples and pears\nB\tcars and trucks\n")
    data.write_bytes(BOM + b'{"text": "an apple", "labels": ["A"]}\n{"text": "a truck", "labels": ["B"]}\n')
    cli("fairseq-joint-preprocess-gile", "--train", data, "--labels", labels, "--destdir", tmp_path / "bin")
    assert (tmp_path / "bin" / "labels.train.txt").read_text().split() == ["A", "B"]  # 'A', not '\ufeffA'
    data.write_bytes(b'{"text": "an apple", "labels": ["A"]}\n{"text": "' + LATIN1 + b'", "labels": ["B"]}\n')
    line = refusal(cli("fairseq-joint-preprocess-gile", "--train", data, "--labels", labels, "--destdir",
                       tmp_path / "bin2", check=False))
    assert f"{data}:2: not UTF-8" in line and "iconv" in line
    labels.write_bytes(b"A\tapples\nB\t" + LATIN1 + b"\n")
    line = refusal(cli("fairseq-joint-label-text", "--labels", labels, "--output", tmp_path / "x.tsv", check=False))
    assert f"{labels}:2: not UTF-8" in line
    texts = tmp_path / "texts.txt"
    texts.write_bytes(b"fine\n" + LATIN1 + b"\n")
    line = refusal(cli("fairseq-joint-word-vectors", "--text", texts, "--output", tmp_path / "v.txt", check=False))
    assert f"{texts}:2: not UTF-8" in line


def test_translation_inputs_that_are_not_utf8(tmp_path):
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_bytes(b"a house by the lake\n" + LATIN1 + b"\n")
    ref.write_bytes(BOM + b"a house by the lake\nthe street is long and wide\n")
    line = refusal(cli("fairseq-joint-score", "--hyp", hyp, "--ref", ref, check=False))
    assert f"hypotheses {hyp}:2: not UTF-8" in line
    hyp.write_bytes(b"a house by the lake\nthe street is long and wide\n")
    out = cli("fairseq-joint-score", "--hyp", hyp, "--ref", ref)
    assert "sacreBLEU 100.00" in out.stdout  # the mark is not part of the first reference


def test_predicting_labels_described_by_unknown_words_only(gile_bin, tmp_path):
    cli("fairseq-train", gile_bin, *GILE_TRAIN, "--head", "gile", "--joint-dim", "8", "--criterion",
        "multilabel_classification", "--max-epoch", "1", "--save-dir", tmp_path, *GILE_FAST)
    labels = tmp_path / "new.tsv"
    labels.write_text("devel::lang:python\tPython\nzz::new\tqwzx vbnmq\n", encoding="utf-8")
    texts = tmp_path / "t.txt"
    texts.write_bytes(BOM + b"a python library\n")
    line = refusal(cli("fairseq-joint-predict-labels", "--checkpoint", tmp_path / "checkpoint_last.pt", "--labels",
                       labels, "--input", texts, check=False))
    assert "label(s) 'zz::new': no word of the description is in the dictionary" in line
    ok = cli("fairseq-joint-predict-labels", "--checkpoint", tmp_path / "checkpoint_last.pt", "--labels",
             SAMPLE / "labels.tsv", "--input", texts, "--topk", "2")
    assert ok.stdout.startswith("a python library\t")  # the byte-order mark is not part of the text
