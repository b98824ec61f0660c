"""fairseq's mixed-precision training on CUDA (``pytest -m gpu``; skipped without a GPU): every output layer with
``--fp16``, ``--amp`` and ``--bf16`` (the plugin runs fairseq's --bf16, which implies --tpu, on the GPU when torch_xla is
absent), the sampled and chunked softmax, the label-embedding loss, a GILE head; finite losses, validation within a
tolerance of the fp32 run of the same checkpoint; beam search in fp16 against fp32."""

import math
import re

import pytest
import torch
from conftest import GILE_FAST, GILE_TRAIN, TRAIN_FAST, USER_DIR, cli, valid_line

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
PRECISIONS = ["--fp16", "--amp", "--bf16"]
FAST = [x for x in TRAIN_FAST if x != "--disable-validation"]


def losses(output: str):
    return [float(x) for x in re.findall(r"\| loss ([\d.]+|inf|nan)", output)]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("kind", ["softmax", "tied", "bilinear", "label", "context", "joint"])
def test_every_output_layer_trains_and_validates_in_mixed_precision(tiny_bin, tmp_path, kind, precision):
    out = cli("fairseq-train", tiny_bin, "--user-dir", USER_DIR, "--arch", "joint_transformer_tiny", "--output-layer",
              kind, "--joint-dim", 24, "--save-dir", tmp_path, "--max-update", 6, *FAST, precision)
    log = out.stdout + out.stderr
    assert losses(log) and all(math.isfinite(x) for x in losses(log)), log[-2000:]
    validate = ["fairseq-validate", tiny_bin, "--user-dir", USER_DIR, "--task", "translation", "--path",
                tmp_path / "checkpoint_last.pt", "--max-tokens", 1000]
    fp16 = cli(*validate, precision if precision != "--amp" else "--fp16")
    fp32 = cli(*validate)
    low, full = (valid_line(p.stdout + p.stderr)["loss"] for p in (fp16, fp32))
    assert abs(low - full) < 0.02 * full


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("criterion", [["--criterion", "sampled_cross_entropy", "--sample-rate", "0.3"],
                                       ["--criterion", "sampled_cross_entropy", "--vocab-chunk-size", "100"],
                                       ["--criterion", "label_embedding_cross_entropy", "--sample-rate", "0.5"]])
def test_large_vocabulary_losses_in_mixed_precision(tiny_bin, tmp_path, criterion, precision):
    out = cli("fairseq-train", tiny_bin, "--user-dir", USER_DIR, "--arch", "joint_lstm_tiny", "--save-dir", tmp_path,
              "--max-update", 6, *FAST, *criterion, precision)
    log = out.stdout + out.stderr
    assert losses(log) and all(math.isfinite(x) for x in losses(log)), log[-2000:]


@pytest.mark.parametrize("precision", PRECISIONS)
def test_gile_in_mixed_precision(gile_bin, tmp_path, precision):
    out = cli("fairseq-train", gile_bin, *GILE_TRAIN, "--head", "gile", "--joint-dim", "8", "--criterion",
              "multilabel_classification", "--max-epoch", "2", "--save-dir", tmp_path, *GILE_FAST, precision)
    stats = valid_line(out.stdout + out.stderr)  # the last validation, in mixed precision, of checkpoint_last.pt
    fp32 = cli("fairseq-validate", gile_bin, "--user-dir", USER_DIR, "--task", "gile_classification", "--path",
               tmp_path / "checkpoint_last.pt", "--batch-size", 32, "--num-workers", 0)
    fp32 = valid_line(fp32.stdout + fp32.stderr)
    assert math.isfinite(stats["loss"]) and abs(stats["loss"] - fp32["loss"]) < 0.05 * fp32["loss"], (stats, fp32)
    assert abs(stats["seen_avgpr"] - fp32["seen_avgpr"]) < 2.0, (stats, fp32)  # the ranking, not only its range


def test_beam_search_in_fp16_against_fp32(tiny_bin, tmp_path):
    cli("fairseq-train", tiny_bin, "--user-dir", USER_DIR, "--arch", "joint_transformer_tiny", "--save-dir", tmp_path,
        "--max-update", 30, *TRAIN_FAST)
    hyps = {}
    for name, extra in (("fp32", []), ("fp16", ["--fp16"])):
        gen = cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", tmp_path / "checkpoint_last.pt",
                  "--beam", 5, "--batch-size", 20, "--required-batch-size-multiple", 1, *extra)
        hyps[name] = dict(re.findall(r"^H-(\d+)\t\S+\t(.*)$", gen.stdout, re.M))
    assert len(hyps["fp32"]) == len(hyps["fp16"]) == 40
    same = sum(hyps["fp32"][k] == hyps["fp16"][k] for k in hyps["fp32"])
    assert same >= 36, f"{40 - same} of 40 hypotheses differ between fp16 and fp32"
