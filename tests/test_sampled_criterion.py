"""The sampled_cross_entropy criterion: validation on the full softmax, option errors, and fairseq-train end
to end (sampling, reproducibility across a resume, chunked exact training, then fairseq-generate)."""

import re

import pytest
import torch
import torch.nn.functional as F

from conftest import TRAIN_FAST, USER_DIR, cli
from fairseq_joint.criterions.sampled_cross_entropy import SampledCrossEntropyCriterion
from test_models import SMALL_TRANSFORMER, build


@pytest.fixture(scope="module")
def model_and_batch(tiny_bin):
    task, model = build(tiny_bin, "joint_transformer", "--output-layer", "joint", "--joint-dim", 12, *SMALL_TRANSFORMER)
    task.load_dataset("valid")
    ds = task.dataset("valid")
    return task, model, ds.collater([ds[i] for i in range(8)])


def full_softmax_loss(model, sample, pad):
    logits, _ = model(**sample["net_input"])
    return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), sample["target"].view(-1), ignore_index=pad,
                           reduction="sum")


def test_validation_is_the_exact_full_softmax_and_training_samples(model_and_batch):
    task, model, sample = model_and_batch
    pad = task.tgt_dict.pad()
    crit = SampledCrossEntropyCriterion(task, False, 0.0, sample_rate=0.3)
    chunked = SampledCrossEntropyCriterion(task, False, 0.0, sample_rate=0.3, vocab_chunk_size=100)
    model.eval()
    with torch.no_grad():
        expected = full_softmax_loss(model, sample, pad)
        loss, _, log = crit(model, sample)
        torch.testing.assert_close(loss, expected)
        assert log["candidates"] == len(task.tgt_dict)
        torch.testing.assert_close(chunked(model, sample)[0], expected, rtol=1e-5, atol=1e-4)
    model.train()
    torch.manual_seed(0)
    loss, _, log = crit(model, sample)
    assert log["candidates"] == round(0.3 * len(task.tgt_dict))
    loss.backward()
    scored_rows = (model.decoder.output_projection.bias.grad != 0).sum().item()
    assert 0 < scored_rows <= log["candidates"]
    model.zero_grad()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(sample_rate=1.5), r"--sample-rate must be in \(0, 1\]"),
        (dict(sample_rate=0.0), r"--sample-rate must be in \(0, 1\]"),
        (dict(num_samples=10**6), r"--num-samples 1000000 is larger than the \d+ samplable ids"),
        (dict(vocab_chunk_size=0), "--vocab-chunk-size must be a positive"),
        (dict(logq_correction=True), "--logq-correction needs sampling"),
        (dict(sample_rate=0.5, num_samples=3), "either --sample-rate or --num-samples"),
        (dict(num_samples=5, remove_accidental_hits=True, label_smoothing=0.1), "cannot be combined with --label-smoothing"),
    ],
)
def test_options_it_cannot_serve_are_refused(model_and_batch, kwargs, message):
    task = model_and_batch[0]
    eps = kwargs.pop("label_smoothing", 0.0)
    with pytest.raises(ValueError, match=message):
        SampledCrossEntropyCriterion(task, False, eps, **kwargs)


def train(data, save_dir, updates, *extra):
    return cli("fairseq-train", data, "--user-dir", USER_DIR, "--arch", "joint_lstm_tiny", "--output-layer", "joint",
               "--joint-dim", 24, "--criterion", "sampled_cross_entropy", "--save-dir", save_dir,
               "--max-update", updates, *TRAIN_FAST, *extra)


def params(path):
    return torch.load(path, map_location="cpu", weights_only=True)["model"]


@pytest.mark.slow
def test_same_seed_same_run_also_across_a_resume(tiny_bin, tmp_path):
    sampling = ["--sample-rate", "0.25", "--sampler", "unigram", "--logq-correction", "--max-tokens", "400"]
    train(tiny_bin, tmp_path / "a", 6, *sampling)
    train(tiny_bin, tmp_path / "b", 6, *sampling)
    train(tiny_bin, tmp_path / "c", 3, *sampling)
    resumed = train(tiny_bin, tmp_path / "c", 6, *sampling)
    assert re.search(r"Loaded checkpoint .*\(epoch \d+ @ 3 updates\)", resumed.stdout + resumed.stderr)
    a, b, c = (params(tmp_path / x / "checkpoint_last.pt") for x in "abc")
    for key, value in a.items():
        if torch.is_tensor(value):
            assert torch.equal(value, b[key]), key
            assert torch.equal(value, c[key]), key
    train(tiny_bin, tmp_path / "d", 6, *sampling, "--seed", "2")
    d = params(tmp_path / "d" / "checkpoint_last.pt")
    assert not torch.equal(a["decoder.output_projection.class_weight"], d["decoder.output_projection.class_weight"])


@pytest.mark.slow
def test_sampled_training_then_generate(tiny_bin, tmp_path):
    log = train(tiny_bin, tmp_path, 4, "--sample-rate", "0.25", "--label-smoothing", "0.1")
    out = log.stdout + log.stderr
    assert re.search(r"candidates=\d+", out)
    gen = cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", tmp_path / "checkpoint_last.pt",
              "--beam", 2, "--max-len-b", 8, "--batch-size", 20, "--required-batch-size-multiple", 1,
              "--scoring", "sacrebleu")
    assert len(re.findall(r"^H-\d+", gen.stdout, re.M)) == 40 and "BLEU" in gen.stdout


@pytest.mark.slow
def test_chunked_exact_training_equals_plain_cross_entropy(tiny_bin, tmp_path):
    common = ["--user-dir", USER_DIR, "--arch", "joint_transformer_tiny", "--joint-dim", 24, "--max-update", 3,
              "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", 1000, "--no-progress-bar", "--seed", 1,
              "--num-workers", 0, "--no-epoch-checkpoints", "--log-format", "simple", "--validate-interval-updates", 3]
    plain = cli("fairseq-train", tiny_bin, *common, "--criterion", "cross_entropy", "--save-dir", tmp_path / "p")
    chunk = cli("fairseq-train", tiny_bin, *common, "--criterion", "sampled_cross_entropy", "--vocab-chunk-size", 100,
                "--save-dir", tmp_path / "c")
    valid = lambda out: re.findall(r"valid on 'valid' subset \| loss ([\d.]+)", out.stdout + out.stderr)
    assert valid(plain) and valid(plain) == valid(chunk)
    p, c = params(tmp_path / "p" / "checkpoint_last.pt"), params(tmp_path / "c" / "checkpoint_last.pt")
    for key, value in p.items():
        if torch.is_tensor(value) and value.is_floating_point():
            torch.testing.assert_close(value, c[key], rtol=1e-4, atol=1e-5)
