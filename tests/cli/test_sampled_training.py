"""sampled_cross_entropy through fairseq-train: sampling, reproducibility across a resume, chunked exact training
equal to plain cross-entropy, then fairseq-generate."""

import re

import torch
from conftest import TRAIN_FAST, USER_DIR, assert_same_tensors, cli, state, valid_lines


def train(data, save_dir, updates, *extra):
    return cli("fairseq-train", data, "--user-dir", USER_DIR, "--arch", "joint_lstm_tiny", "--output-layer", "joint",
               "--joint-dim", 24, "--criterion", "sampled_cross_entropy", "--save-dir", save_dir,
               "--max-update", updates, *TRAIN_FAST, *extra)


def params(path):
    return state(path)["model"]


def test_same_seed_same_run_also_across_a_resume(tiny_bin, tmp_path):
    sampling = ["--sample-rate", "0.25", "--sampler", "unigram", "--logq-correction", "--max-tokens", "400"]
    train(tiny_bin, tmp_path / "a", 6, *sampling)
    train(tiny_bin, tmp_path / "b", 6, *sampling)
    train(tiny_bin, tmp_path / "c", 3, *sampling)
    resumed = train(tiny_bin, tmp_path / "c", 6, *sampling)
    assert re.search(r"Loaded checkpoint .*\(epoch \d+ @ 3 updates\)", resumed.stdout + resumed.stderr)
    a, b, c = (params(tmp_path / x / "checkpoint_last.pt") for x in "abc")
    assert_same_tensors(a, b, "same seed")
    assert_same_tensors(a, c, "resumed")
    train(tiny_bin, tmp_path / "d", 6, *sampling, "--seed", "2")
    d = params(tmp_path / "d" / "checkpoint_last.pt")
    assert not torch.equal(a["decoder.output_projection.class_weight"], d["decoder.output_projection.class_weight"])


def test_sampled_training_then_generate(tiny_bin, tmp_path):
    log = train(tiny_bin, tmp_path, 4, "--sample-rate", "0.25", "--label-smoothing", "0.1")
    out = log.stdout + log.stderr
    assert re.search(r"candidates=\d+", out)
    gen = cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", tmp_path / "checkpoint_last.pt",
              "--beam", 2, "--max-len-b", 8, "--batch-size", 20, "--required-batch-size-multiple", 1,
              "--scoring", "sacrebleu")
    assert len(re.findall(r"^H-\d+", gen.stdout, re.M)) == 40 and "BLEU" in gen.stdout


def test_chunked_exact_training_equals_plain_cross_entropy(tiny_bin, tmp_path):
    common = ["--user-dir", USER_DIR, "--arch", "joint_transformer_tiny", "--joint-dim", 24, "--max-update", 3,
              "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", 1000, "--no-progress-bar", "--seed", 1,
              "--num-workers", 0, "--no-epoch-checkpoints", "--log-format", "simple", "--validate-interval-updates", 3]
    plain = cli("fairseq-train", tiny_bin, *common, "--criterion", "cross_entropy", "--save-dir", tmp_path / "p")
    chunk = cli("fairseq-train", tiny_bin, *common, "--criterion", "sampled_cross_entropy", "--vocab-chunk-size", 100,
                "--save-dir", tmp_path / "c")
    def valid(out):
        return [v["loss"] for v in valid_lines(out.stdout + out.stderr)]
    assert valid(plain) and valid(plain) == valid(chunk)
    p, c = params(tmp_path / "p" / "checkpoint_last.pt"), params(tmp_path / "c" / "checkpoint_last.pt")
    for key, value in p.items():
        if torch.is_tensor(value) and value.is_floating_point():
            torch.testing.assert_close(value, c[key], rtol=1e-4, atol=1e-5)
