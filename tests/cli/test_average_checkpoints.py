"""fairseq-joint-average-checkpoints: the last checkpoints of a run averaged (model and criterion), what is not a
parameter kept, the result saved as fairseq-train saves (checksums) and translated by fairseq-generate; inputs of
another model, too few checkpoints and an existing output refused."""

import pytest
import torch
from conftest import USER_DIR, cli, state, train_joint


def test_the_last_checkpoints_of_a_label_embedding_run_are_averaged_and_translate(tiny_bin, joint_checkpoint, tmp_path):
    run = tmp_path / "run"
    train_joint(tiny_bin, run, "joint_lstm_tiny", 6, "--criterion", "label_embedding_cross_entropy",
                "--label-embedding-dim", 8, "--save-interval-updates", 2)
    inputs = sorted(run.glob("checkpoint_*_*.pt"), key=lambda p: int(p.stem.split("_")[-1]))  # updates 2, 4, 6
    assert [int(p.stem.split("_")[-1]) for p in inputs] == [2, 4, 6]
    out = cli("fairseq-joint-average-checkpoints", "--inputs", run, "--num-update-checkpoints", 2,
              "--output", tmp_path / "avg.pt")
    assert out.stdout.strip() == f"averaged 2 checkpoints ({inputs[1]}, {inputs[2]}) into {tmp_path / 'avg.pt'}"
    averaged, (a, b) = state(tmp_path / "avg.pt"), [state(p) for p in inputs[1:]]
    for part in ("model", "criterion"):  # the label-embedding loss's o2 and embedding are averaged too
        floats = [k for k, v in b[part].items() if torch.is_tensor(v) and v.is_floating_point()]
        assert floats and (part == "model" or {"o2.weight", "label_embedding.A"} <= set(floats))
        for key in floats:
            assert averaged[part][key].dtype == b[part][key].dtype
            torch.testing.assert_close(averaged[part][key], (a[part][key] + b[part][key]) / 2, rtol=0, atol=1e-6)
    assert not torch.equal(a["model"]["decoder.embed_tokens.weight"], b["model"]["decoder.embed_tokens.weight"])
    # kept, not summed: the data's fingerprints (fairseq's script made them name other data) and the output layer's
    # settings (fairseq's script failed on them: not a tensor)
    assert torch.equal(averaged["model"]["data_fingerprints"], b["model"]["data_fingerprints"])
    assert averaged["model"]["decoder.output_projection._extra_state"] == \
        b["model"]["decoder.output_projection._extra_state"]
    assert averaged["extra_state"]["train_iterator"] == b["extra_state"]["train_iterator"]  # the last input's
    # saved with its own checksums: fairseq loads it (a file changed after saving is refused as damaged)
    gen = cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", tmp_path / "avg.pt", "--beam", 2,
              "--batch-size", 16, "--max-len-b", 10)
    assert "BLEU4" in gen.stdout + gen.stderr
    assert isinstance(averaged["cfg"], dict)  # as fairseq-train writes it
    # with the checksums patch off, none is written: not the last input's, which the average's tensors would fail
    cli("fairseq-joint-average-checkpoints", "--inputs", *inputs[1:], "--output", tmp_path / "plain.pt",
        env={"FAIRSEQ_JOINT_PATCHES": "safe_checkpoints"})
    assert "fairseq_joint_checksums" in b and "fairseq_joint_checksums" not in state(tmp_path / "plain.pt")

    # a run that spans the change saving a frozen criterion's state (Eq. 17): the criterion of those that hold it
    from fairseq_joint.cli.average_checkpoints import average_checkpoints

    older = {k: v for k, v in state(inputs[1]).items() if k != "fairseq_joint_checksums"}
    torch.save({**older, "criterion": None}, tmp_path / "older.pt")
    spanning = average_checkpoints([str(tmp_path / "older.pt"), str(inputs[2])])
    assert spanning["criterion"].keys() == b["criterion"].keys()
    assert all(torch.equal(v, b["criterion"][k]) if torch.is_tensor(v) else v == b["criterion"][k]
               for k, v in spanning["criterion"].items())
    torch.testing.assert_close(spanning["model"]["decoder.embed_tokens.weight"],
                               averaged["model"]["decoder.embed_tokens.weight"], rtol=0, atol=1e-6)

    def refused(*args):
        proc = cli("fairseq-joint-average-checkpoints", *args, check=False)
        assert proc.returncode == 2, proc.stderr[-2000:]
        return proc.stderr.strip().splitlines()[-1]

    line = refused("--inputs", inputs[2], joint_checkpoint, "--output", tmp_path / "x.pt")
    assert line.startswith(
        f"error: {joint_checkpoint} is of another model than {inputs[2]} (--criterion cross_entropy "
        f"({inputs[2].name}: label_embedding_cross_entropy), --arch joint_transformer_tiny ({inputs[2].name}: "
        "joint_lstm_tiny), ") and line.endswith("): average the checkpoints of one run")
    assert refused("--inputs", run, "--num-update-checkpoints", 4, "--output", tmp_path / "x.pt") == (
        f"error: --num-update-checkpoints 4: {run} holds 3 checkpoint_E_N.pt (--save-interval-updates) file(s): give "
        "--num-update-checkpoints 3 or fewer")
    assert refused("--inputs", run, "--num-epoch-checkpoints", 1, "--output", tmp_path / "x.pt").endswith(
        f"{run} holds 0 checkpointN.pt file(s): give the checkpoints as --inputs")
    assert refused("--inputs", *inputs, "--output", run / "checkpoint_last.pt") == (
        f"error: --output {run / 'checkpoint_last.pt'} exists: give a new file, or delete it first")
    assert refused("--inputs", run, "--output", tmp_path / "x.pt") == (
        f"error: --inputs {run} is a directory: give --num-epoch-checkpoints N or --num-update-checkpoints N with it, "
        "or the checkpoints themselves")
    assert not (tmp_path / "x.pt").exists()


@pytest.mark.parametrize("names, count, update_based, bound, expected", [
    (["checkpoint1.pt", "checkpoint10.pt", "checkpoint2.pt", "checkpoint_last.pt"], 2, False, None,
     ["checkpoint2.pt", "checkpoint10.pt"]),  # by number, not by name
    (["checkpoint1.pt", "checkpoint10.pt", "checkpoint2.pt"], 2, False, 9, ["checkpoint1.pt", "checkpoint2.pt"]),
    (["checkpoint_1_100.pt", "checkpoint_2_1000.pt", "checkpoint_1_500.pt", "checkpoint3.pt"], 2, True, None,
     ["checkpoint_1_500.pt", "checkpoint_2_1000.pt"]),
])
def test_the_last_checkpoints_are_chosen_by_their_number(tmp_path, names, count, update_based, bound, expected):
    from fairseq_joint.cli.average_checkpoints import last_checkpoints

    for name in names:
        (tmp_path / name).write_bytes(b"")
    assert last_checkpoints(str(tmp_path), count, update_based, bound) == [str(tmp_path / n) for n in expected]
