"""scripts/count_params.py: |Θ| from a configuration and from a checkpoint, against Eqs. 8-10 and 16."""

import importlib.util
import json

import pytest
from conftest import REPO, TRAIN_FAST, USER_DIR, cli, python_script

V = 5000
_spec = importlib.util.spec_from_file_location("count_params", REPO / "scripts" / "count_params.py")
count_params = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(count_params)


def count(*flags):
    return count_params.main([str(f) for f in flags] + ["--json"])


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("softmax", V * 64 + V),  # Eq. 8
        ("tied", V),  # Eq. 9
        ("bilinear", 64 * 64 + V),  # Eq. 10
        ("label", 64 * 64 + V),  # Eq. 7a
        ("context", 64 * 64 + V),  # Eq. 7b
        ("joint", 64 * 96 + 96 * 64 + V + 2 * 96),  # Eq. 16 + b_u, b_v
    ],
)
def test_configuration_counts_follow_the_equations(kind, expected):
    r = count("--arch", "joint_lstm", "--encoder-embed-dim", 64, "--decoder-embed-dim", 64,
              "--decoder-out-embed-dim", 64, "--encoder-hidden-size", 64, "--decoder-hidden-size", 64,
              "--output-layer", kind, "--joint-dim", 96, "--src-vocab", V, "--tgt-vocab", V)
    assert r["output_layer"] == expected
    assert r["formula"] + r["projection_biases"] == expected
    assert r["vocab"] == V


def test_tied_total_is_softmax_total_minus_the_output_matrix():
    base = ["--arch", "joint_lstm_tiny", "--src-vocab", V, "--tgt-vocab", V]
    softmax, tied = count(*base, "--output-layer", "softmax"), count(*base, "--output-layer", "tied")
    assert softmax["total"] - tied["total"] == V * 32


def test_checkpoint_count_equals_the_trained_model(tiny_bin, tmp_path):
    cli("fairseq-train", tiny_bin, "--user-dir", USER_DIR, "--arch", "joint_transformer_tiny", "--joint-dim", 40,
        "--save-dir", tmp_path, "--max-update", 1, *TRAIN_FAST)
    out = python_script("scripts/count_params.py", tmp_path / "checkpoint_last.pt", "--json")  # the real CLI
    r = json.loads(out.stdout.strip().splitlines()[-1])
    cfg = count("--arch", "joint_transformer_tiny", "--joint-dim", 40, "--src-vocab",
                _dict_size(tiny_bin, "en"), "--tgt-vocab", _dict_size(tiny_bin, "de"))
    assert r["total"] == cfg["total"] and r["output_layer"] == cfg["output_layer"]
    assert (r["output_layer_kind"], r["joint_dim"]) == ("joint", 40)


def _dict_size(data, lang):
    return 4 + len((data / f"dict.{lang}.txt").read_text().splitlines())  # + bos, pad, eos, unk


def test_bad_invocations_say_what_to_do(tmp_path):
    r = python_script("scripts/count_params.py", tmp_path / "missing.pt", check=False)
    assert r.returncode != 0 and "checkpoint not found" in r.stderr
    r = python_script("scripts/count_params.py", check=False)
    assert r.returncode != 0 and "--arch" in r.stderr
