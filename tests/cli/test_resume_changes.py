"""A resume says what changed and does not overwrite a finished run (fairseq_joint/resume.py, ``load_checkpoint``):
fairseq-train in a save dir whose checkpoint is already at --max-update is refused in one line and leaves every file
as it was; a run resumed with another --lr and a larger --max-update logs one line with the options that differ."""

import re
import shutil

import pytest
from conftest import USER_DIR, cli, state

TRAIN = ["--user-dir", USER_DIR, "--arch", "joint_lstm_tiny", "--max-tokens", "300", "--seed", "7", "--optimizer",
         "adam", "--num-workers", "0", "--disable-validation", "--no-progress-bar", "--log-format", "simple",
         "--log-interval", "1", "--no-epoch-checkpoints"]


@pytest.fixture(scope="module")
def finished(tiny_bin, tmp_path_factory):
    """A run trained to its --max-update of 4 with --lr 1e-3."""
    save = tmp_path_factory.mktemp("finished")
    cli("fairseq-train", tiny_bin, *TRAIN, "--lr", "1e-3", "--max-update", "4", "--save-dir", save)
    return save


def files(save_dir):
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(save_dir.iterdir())}


def test_a_finished_run_is_not_trained_on_with_other_options(tiny_bin, finished):
    before = files(finished)
    proc = cli("fairseq-train", tiny_bin, *TRAIN, "--lr", "2e-3", "--seed", "8", "--max-update", "4", "--save-dir",
               finished, check=False)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith(f"error: --save-dir {finished} holds a run already at update 4 "), lines[0]
    assert "--max-update is 4: training on would overwrite its checkpoints; train into another --save-dir, " \
           "continue it with a --max-update above 4" in lines[0], lines[0]
    assert files(finished) == before  # not one byte or time changed
    # and it said what the second command changed before refusing
    assert re.search(r"options that differ from the checkpoint's: --seed 8 \(checkpoint: 7\), "
                     r"--lr 0\.002 \(checkpoint: 0\.001\)$", proc.stdout, re.M), proc.stdout[-3000:]


def test_a_resume_with_another_lr_logs_what_differs(tiny_bin, finished, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    proc = cli("fairseq-train", tiny_bin, *TRAIN, "--lr", "2e-3", "--max-update", "6", "--save-dir", run)
    said = [line for line in proc.stdout.splitlines() if "options that differ from the checkpoint's" in line]
    assert len(said) == 1, proc.stdout[-3000:]
    assert said[0].endswith(f"resuming {run}/checkpoint_last.pt at update 4; options that differ from the "
                            "checkpoint's: --max-update 6 (checkpoint: 4), --lr 0.002 (checkpoint: 0.001), "
                            f"--save-dir {run} (checkpoint: {finished})"), said[0]  # a copy of the run: moved
    saved = state(run / "checkpoint_last.pt")
    assert saved["optimizer_history"][-1]["num_updates"] == 6 and saved["cfg"]["optimization"]["lr"] == [0.002]
