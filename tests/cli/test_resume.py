"""Exact resume: a run resumed from any of its checkpoints — inside epoch 1, at an epoch boundary, in epoch 2, in a
later epoch — ends with the parameters of the run that was never stopped, bit for bit, for translation with the
sampled softmax and for GILE with label sampling (fairseq_joint/resume.py); and a finished run continued to a larger
``--max-update`` (what nmt_study.py does) is the run trained to that budget in one go."""

import re
import shutil

import pytest
from conftest import GILE_FAST, GILE_TRAIN, USER_DIR, assert_same_tensors, cli, state, valid_lines

TRANSLATION = ["--user-dir", USER_DIR, "--arch", "joint_lstm_tiny", "--criterion", "sampled_cross_entropy",
               "--sample-rate", "0.25", "--save-interval-updates", "5", "--max-update", "30", "--seed", "7",
               "--max-tokens", "500", "--optimizer", "adam", "--lr", "1e-3", "--num-workers", "0",
               "--disable-validation", "--no-progress-bar"]
GILE = [*GILE_TRAIN, "--head", "gile", "--joint-dim", "8", "--criterion", "multilabel_classification",
        "--label-sample-rate", "0.5", "--save-interval-updates", "4", "--max-update", "26", "--seed", "7",
        "--disable-validation", *[x for x in GILE_FAST if x not in ("--no-epoch-checkpoints",)], "--batch-size", "16"]


def resume_points(save_dir):
    """One checkpoint of each kind: inside epoch 1, the end of epoch 1, inside epoch 2, inside a later epoch."""
    interval = {(int(e), int(u)): p for p in save_dir.glob("checkpoint_*_*.pt")
                for e, u in [re.fullmatch(r"checkpoint_(\d+)_(\d+)\.pt", p.name).groups()]}
    points = {"epoch 1": min(k for k in interval if k[0] == 1), "epoch 2": min(k for k in interval if k[0] == 2),
              "later epoch": min(k for k in interval if k[0] >= 3)}
    out = {name: interval[key] for name, key in points.items()}
    out["end of epoch 1"] = save_dir / "checkpoint1.pt"
    return out


@pytest.mark.parametrize("task", ["translation", "gile"])
def test_resume_from_any_checkpoint_is_bit_for_bit(tiny_bin, gile_bin, tmp_path, task):
    data, flags = (tiny_bin, TRANSLATION) if task == "translation" else (gile_bin, GILE)
    cli("fairseq-train", data, *flags, "--save-dir", tmp_path / "full")
    final = state(tmp_path / "full" / "checkpoint_last.pt")
    points = resume_points(tmp_path / "full")
    assert len(points) == 4
    for name, checkpoint in points.items():
        run = tmp_path / name.replace(" ", "_")
        run.mkdir()
        shutil.copyfile(checkpoint, run / "checkpoint_last.pt")
        out = cli("fairseq-train", data, *flags, "--save-dir", run)
        assert "Loaded checkpoint" in out.stdout + out.stderr
        assert_same_tensors(final["model"], state(run / "checkpoint_last.pt")["model"], f"resumed from {name}")


# nmt_study.py's Transformer runs: inverse_sqrt warm-up, validation and an interval checkpoint every few updates
STUDY = ["--user-dir", USER_DIR, "--arch", "joint_transformer_tiny", "--output-layer", "joint", "--joint-dim", "12",
         "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt",
         "--warmup-updates", "6", "--warmup-init-lr", "1e-07", "--dropout", "0.2", "--seed", "2", "--max-tokens",
         "500", "--max-epoch", "0", "--validate-interval-updates", "3", "--save-interval-updates", "3",
         "--keep-interval-updates", "1", "--no-epoch-checkpoints", "--log-interval", "1", "--num-workers", "0",
         "--no-progress-bar"]


def valid_losses(output):
    return [(int(v["num_updates"]), v["loss"]) for v in valid_lines(output)]


def test_a_larger_budget_continues_a_finished_run_exactly(tiny_bin, tmp_path):
    """Stopped by ``--max-update`` inside epoch 2, then re-run with a larger one in the same directory: the same
    validation losses after the stop and the same final parameters as the run never stopped (so a bump in a
    study's learning curve after such a continuation is the training's, not the resume's)."""
    full = cli("fairseq-train", tiny_bin, *STUDY, "--max-update", "30", "--save-dir", tmp_path / "full")
    curve = valid_losses(full.stdout + full.stderr)
    epoch_ends = [int(u) for u in re.findall(r"end of epoch \d+ .*?num_updates (\d+)", full.stdout + full.stderr,
                                              re.S)]
    stop = epoch_ends[0] + 4  # inside epoch 2, as the study's runs stopped 24 updates before its end
    assert stop < epoch_ends[1] < 30, epoch_ends
    cli("fairseq-train", tiny_bin, *STUDY, "--max-update", stop, "--save-dir", tmp_path / "stopped")
    more = cli("fairseq-train", tiny_bin, *STUDY, "--max-update", "30", "--save-dir", tmp_path / "stopped")
    assert "Loaded checkpoint" in more.stdout + more.stderr
    continued = valid_losses(more.stdout + more.stderr)
    assert continued and continued[0][0] > stop
    assert continued == [(u, loss) for u, loss in curve if u > stop]
    assert_same_tensors(state(tmp_path / "full" / "checkpoint_last.pt")["model"],
                        state(tmp_path / "stopped" / "checkpoint_last.pt")["model"], "continued")
