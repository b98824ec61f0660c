"""fairseq-joint-count-params from a checkpoint (the configuration counts: tests/unit/test_parameter_counts.py)."""

import json

import pytest
from conftest import cli

from fairseq_joint.cli import count_params


def count(*flags):
    return count_params.counts([str(f) for f in flags] + ["--json"])


def test_checkpoint_count_equals_the_trained_model(tiny_bin, joint_checkpoint):
    out = cli("fairseq-joint-count-params", joint_checkpoint, "--json")  # the real CLI
    r = json.loads(out.stdout.strip().splitlines()[-1])
    cfg = count("--arch", "joint_transformer_tiny", "--joint-dim", 24, "--src-vocab",
                _dict_size(tiny_bin, "en"), "--tgt-vocab", _dict_size(tiny_bin, "de"))
    assert r["total"] == cfg["total"] and r["output_layer"] == cfg["output_layer"]
    assert (r["output_layer_kind"], r["joint_dim"]) == ("joint", 24)


def _dict_size(data, lang):
    return 4 + len((data / f"dict.{lang}.txt").read_text().splitlines())  # + bos, pad, eos, unk


def test_bad_invocations_say_what_to_do(tmp_path):
    r = cli("fairseq-joint-count-params", tmp_path / "missing.pt", check=False)
    assert r.returncode != 0 and f"checkpoint {tmp_path / 'missing.pt'}: no such file" in r.stderr
    r = cli("fairseq-joint-count-params", check=False)
    assert r.returncode != 0 and "--arch" in r.stderr


def test_a_configuration_is_checked_as_fairseq_train_checks_it(joint_checkpoint, capsys):
    """The configuration mode builds no model fairseq-train would refuse (it counted --joint-dim 0 and failed on -3
    in a RuntimeError), and a checkpoint's dictionaries are not sized again (--src-vocab was ignored)."""
    from fairseq_joint.errors import OptionError, Refusal

    for flags, said in ((["--joint-dim", "0"], "^--joint-dim must be positive"),
                        (["--encoder-embed-dim", "0"], "^--encoder-embed-dim must be positive"),
                        (["--decoder-embed-dim", "64", "--share-decoder-input-output-embed"],
                         "^--share-decoder-input-output-embed conflicts with --output-layer joint")):
        with pytest.raises(OptionError, match=said):
            count("--arch", "joint_transformer_tiny", "--output-layer", "joint", *flags)
    with pytest.raises(OptionError, match="^--arch transformer is no fairseq-joint translation model"):
        count("--arch", "transformer")
    with pytest.raises(Refusal, match="^unexpected model flags with a checkpoint: --src-vocab; drop them"):
        count(joint_checkpoint, "--src-vocab", 100)
