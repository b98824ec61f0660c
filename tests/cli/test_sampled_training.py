"""sampled_cross_entropy through fairseq-train: the sampled softmax (|V'| per update, seeded) and the chunked exact
softmax, equal to plain cross-entropy."""

import torch
from conftest import USER_DIR, assert_same_tensors, cli, log_records, state, train_joint, valid_lines


def train(data, save_dir, updates, *extra):
    return train_joint(data, save_dir, "joint_lstm_tiny", updates, "--criterion", "sampled_cross_entropy", *extra)


def params(path):
    return state(path)["model"]


def test_sampled_softmax_scores_a_quarter_of_the_vocabulary_and_the_seed_decides_the_run(tiny_bin, tmp_path):
    """--sample-rate 0.25 with the unigram sampler, logQ correction and label smoothing: every update scores |V'| =
    round(0.25 |V|) classes, not |V|; the same seed gives the same parameters, another seed other ones. (That a
    resumed run is the same run: tests/cli/test_resume.py.)"""
    sampling = ["--sample-rate", "0.25", "--sampler", "unigram", "--logq-correction", "--label-smoothing", "0.1",
                "--max-tokens", "400"]
    log = train(tiny_bin, tmp_path / "a", 6, *sampling)
    vocab = len((tiny_bin / "dict.de.txt").read_text().splitlines()) + 4
    steps = log_records(log.stdout + log.stderr, "train_inner")
    assert [r["num_updates"] for r in steps] == [1, 2, 3, 4, 5, 6]
    assert {r["candidates"] for r in steps} == {round(0.25 * vocab)}
    train(tiny_bin, tmp_path / "b", 6, *sampling)
    a, b = (params(tmp_path / x / "checkpoint_last.pt") for x in "ab")
    assert_same_tensors(a, b, "same seed")
    train(tiny_bin, tmp_path / "d", 6, *sampling, "--seed", "2")
    d = params(tmp_path / "d" / "checkpoint_last.pt")
    assert not torch.equal(a["decoder.output_projection.class_weight"], d["decoder.output_projection.class_weight"])


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
