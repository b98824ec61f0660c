"""Checkpoints that cannot load wrong and runs that lose nothing (fairseq_joint/checkpoints.py, errors.py): a truncated
checkpoint_last.pt and a checkpoint with flipped bytes are refused in one line that says what to do; a dictionary of
the same size and other entries is refused; a run stopped by SIGINT or SIGTERM ends with the resume note, and resuming
it with the same command ends bit for bit where the uninterrupted run does."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from conftest import REPO, USER_DIR, assert_same_tensors, binarize, cli, state

from fairseq_joint.errors import CheckpointError

TRAIN = ["--user-dir", USER_DIR, "--arch", "joint_lstm_tiny", "--criterion", "sampled_cross_entropy", "--sample-rate",
         "0.25", "--save-interval-updates", "5", "--max-update", "40", "--seed", "7", "--max-tokens", "300",
         "--optimizer", "adam", "--lr", "1e-3", "--num-workers", "0", "--disable-validation", "--no-progress-bar",
         "--log-format", "simple", "--log-interval", "1"]


def one_line_error(proc) -> str:
    """The refusal: stderr's only line, starting with 'error: '."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    return lines[0]


@pytest.fixture(scope="module")
def trained(tiny_bin, tmp_path_factory):
    save = tmp_path_factory.mktemp("trained")
    cli("fairseq-train", tiny_bin, *TRAIN, "--max-update", "12", "--save-dir", save)
    return save


def test_truncated_checkpoint_last_names_the_intact_one(tiny_bin, trained, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    older, newer = sorted((p.name for p in trained.glob("checkpoint_*_*.pt")),
                          key=lambda n: int(n.split("_")[2].split(".")[0]))[:2]  # by update
    for name in (older, newer):
        (run / name).write_bytes((trained / name).read_bytes())
    data = (trained / "checkpoint_last.pt").read_bytes()
    (run / "checkpoint_last.pt").write_bytes(data[: len(data) // 3])  # a copy interrupted a third of the way
    os.utime(run / older, (1, 1))
    line = one_line_error(cli("fairseq-train", tiny_bin, *TRAIN, "--save-dir", run, check=False))
    assert f"{run}/checkpoint_last.pt is truncated" in line
    assert f"cp {run}/{newer} {run}/checkpoint_last.pt" in line


def test_flipped_bytes_inside_a_tensor_are_detected(tiny_bin, trained, tmp_path):
    path = tmp_path / "flipped.pt"
    raw = bytearray((trained / "checkpoint_last.pt").read_bytes())
    with zipfile.ZipFile(trained / "checkpoint_last.pt") as z:
        record = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    start = record.header_offset + 30 + len(record.filename) + len(record.extra)  # the tensor's bytes
    raw[start + record.file_size // 2] ^= 0x40
    path.write_bytes(raw)
    line = one_line_error(cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", path, "--beam", 2,
                              check=False))
    assert re.search(r"flipped.pt: the model tensor \S+ is damaged .*use another checkpoint", line), line
    # the intact file still translates
    cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", trained / "checkpoint_last.pt", "--beam", 2,
        "--max-len-b", 5)


def adam_state_bytes(checkpoint: Path):
    """(the bytes of the first parameter's Adam exp_avg as the file stores them, its path in the checkpoint dict)."""
    optimizer = state(checkpoint)["last_optimizer_state"]["state"]
    first = min(optimizer)
    return optimizer[first]["exp_avg"].numpy().tobytes(), f"state.{first}.exp_avg"


def iterator_position(raw: bytes) -> int:
    """The offset of the value of train_iterator's iterations_in_epoch in a checkpoint's pickle (a BININT1 byte)."""
    key = raw.index(b"iterations_in_epoch") + len(b"iterations_in_epoch")
    return raw.index(b"K", key) + 1


@pytest.mark.parametrize("where", ["adam", "iterator"])
def test_a_flipped_byte_in_the_optimizer_or_iterator_state_refuses_the_resume(tiny_bin, trained, tmp_path, where):
    """The checksums cover what a resume reads besides the model: one flipped bit in Adam's exp_avg (it moved every
    parameter after 3 updates) or in the data iterator's position is refused in one line naming the entry and the
    newest intact checkpoint beside it; checkpoint_last.pt is left as it was."""
    run = tmp_path / "run"
    shutil.copytree(trained, run)  # with the files' times: the newest intact one is trained's newest but last
    raw = bytearray((run / "checkpoint_last.pt").read_bytes())
    if where == "adam":
        tensor, name = adam_state_bytes(run / "checkpoint_last.pt")
        at, entry = raw.index(tensor) + len(tensor) // 2, f"the last_optimizer_state tensor {name} is damaged"
    else:
        at, entry = iterator_position(raw), "the extra_state value train_iterator.iterations_in_epoch is damaged"
    raw[at] ^= 0x04
    (run / "checkpoint_last.pt").write_bytes(raw)
    newest = max((p for p in run.glob("checkpoint*.pt") if p.name != "checkpoint_last.pt"), key=os.path.getmtime)
    line = one_line_error(cli("fairseq-train", tiny_bin, *TRAIN, "--save-dir", run, check=False))
    assert f"{run}/checkpoint_last.pt: {entry}" in line, line
    assert f"the newest intact checkpoint beside it is {newest}: cp {newest} {run}/checkpoint_last.pt" in line, line
    assert (run / "checkpoint_last.pt").read_bytes() == raw


def test_checkpoints_of_earlier_versions_load_and_their_checksums_still_verify(trained, tmp_path):
    """A checkpoint without checksums loads; one whose checksums cover the model's and the criterion's tensors only
    (the earlier format) is verified on those; every part a resume reads is covered in the current format."""
    import torch
    from fairseq import checkpoint_utils

    from fairseq_joint import checkpoints

    current = state(trained / "checkpoint_last.pt")
    assert {"model", "last_optimizer_state", "extra_state", "optimizer_history"} <= set(current[checkpoints.CHECKSUMS])
    assert "state.0.exp_avg" in current[checkpoints.CHECKSUMS]["last_optimizer_state"]
    earlier = {part: {name: checkpoints.checksum(t) for name, t in current[part].items() if torch.is_tensor(t)}
               for part in ("model",)}
    for name, sums in (("none.pt", None), ("earlier.pt", earlier)):
        old = dict(current)
        del old[checkpoints.CHECKSUMS]
        if sums is not None:
            old[checkpoints.CHECKSUMS] = sums
        torch.save(old, tmp_path / name)  # torch's own save: no checksums added
        loaded = checkpoint_utils.load_checkpoint_to_cpu(str(tmp_path / name))
        assert torch.equal(loaded["model"][next(iter(earlier["model"]))], current["model"][next(iter(earlier["model"]))])
    damaged = dict(old)
    damaged["model"] = {k: v.clone() if torch.is_tensor(v) else v for k, v in old["model"].items()}
    first = next(iter(earlier["model"]))
    damaged["model"][first].view(-1)[0] += 1
    torch.save(damaged, tmp_path / "earlier-damaged.pt")
    with pytest.raises(CheckpointError, match=rf"earlier-damaged.pt: the model tensor {re.escape(first)} is damaged"):
        checkpoint_utils.load_checkpoint_to_cpu(str(tmp_path / "earlier-damaged.pt"))


def test_an_entry_no_checksum_covers_is_refused(tmp_path):
    """In process: an entry added to a checksummed part after the save (a damaged key, an edited task state or
    extra_state) is named; the entries the save wrote still verify."""
    import torch

    from fairseq_joint import checkpoints

    saved = {}
    state_dict = {"model": {"w": torch.ones(2)}, "task_state": {}, "extra_state": {"train_iterator": {"epoch": 1}},
                  "cfg": {"task": {}}}
    checkpoints.save(lambda obj, filename: saved.update(obj), state_dict, "x.pt")
    assert checkpoints.damage(saved) is None
    saved["task_state"] = {"seen_score_offset": 3.0}
    assert checkpoints.damage(saved) == ("the task_state entry seen_score_offset is not one the checkpoint was saved "
                                         "with (no checksum covers it)")
    saved["task_state"] = {}
    saved["extra_state"]["train_iterator"]["iterations_in_epoch"] = 9
    with pytest.raises(CheckpointError, match=r"^x.pt: the extra_state entry train_iterator.iterations_in_epoch is not "
                                              "one the checkpoint was saved with"):
        checkpoints.verify(saved, "x.pt")
    saved["cfg"]["task"]["data"] = "elsewhere"  # the configuration is not checksummed: fairseq rewrites it
    del saved["extra_state"]["train_iterator"]["iterations_in_epoch"]
    assert checkpoints.damage(saved) is None
    # saved without a train_iterator (Trainer.save_checkpoint(path, {})): the one fairseq's loader adds is not damage
    bare = {}
    checkpoints.save(lambda obj, filename: bare.update(obj), {"model": {"w": torch.ones(2)}, "extra_state": {}}, "y.pt")
    bare["extra_state"]["train_iterator"] = {"epoch": 0, "iterations_in_epoch": 0}  # _upgrade_state_dict's
    assert checkpoints.damage(bare) is None
    bare["extra_state"]["best"] = 1.0
    assert checkpoints.damage(bare) == "the extra_state entry best is not one the checkpoint was saved with (no " \
        "checksum covers it)"


def test_copies_to_a_checkpoint_name_are_atomic(tmp_path, monkeypatch):
    import shutil

    from fairseq.file_io import PathManager

    import fairseq_joint  # noqa: F401  (installs the atomic copy)

    src, dst = tmp_path / "new.pt", tmp_path / "checkpoint_last.pt"
    src.write_bytes(b"new" * 1000)
    dst.write_bytes(b"old")

    def interrupted(a, b):
        with open(b, "wb") as f:
            f.write(b"ne")  # a part of the new file, then the copy dies
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "copyfile", interrupted)
    with pytest.raises(KeyboardInterrupt):
        PathManager.copy(str(src), str(dst), overwrite=True)
    assert dst.read_bytes() == b"old"  # the old checkpoint, whole
    monkeypatch.undo()
    assert PathManager.copy(str(src), str(dst), overwrite=True) and dst.read_bytes() == src.read_bytes()


def test_a_dictionary_of_the_same_size_and_other_entries_is_refused(tiny_bin, tiny_text, trained, tmp_path):
    other = tmp_path / "dicts"
    other.mkdir()
    for lang in ("en", "de"):
        lines = (tiny_bin / f"dict.{lang}.txt").read_text(encoding="utf-8").splitlines()
        if lang == "de":
            lines[10], lines[11] = lines[11], lines[10]  # same size, two words exchanged
        (other / f"dict.{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rebinarized = binarize(tiny_text, tmp_path / "bin", "--srcdict", other / "dict.en.txt", "--tgtdict",
                           other / "dict.de.txt")
    line = one_line_error(cli("fairseq-generate", rebinarized, "--user-dir", USER_DIR, "--path",
                              trained / "checkpoint_last.pt", "--beam", 2, check=False))
    assert "the checkpoint's target dictionary has other entries than the data's" in line and "--tgtdict" in line


def terminal_like():
    """In the child: SIGINT as in a terminal (a test suite started in the background, e.g. ``make test &``, inherits
    it ignored, and Python then installs no Ctrl-C handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_until(cmd, log, pattern, signum):
    """Start ``cmd``, send ``signum`` once its stdout (``log``) matches ``pattern``; the finished process."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True, cwd=str(REPO), env=env,
                                preexec_fn=terminal_like)
        try:
            deadline = time.time() + 300
            while not re.search(pattern, log.read_text()):
                assert proc.poll() is None and time.time() < deadline, log.read_text()[-2000:]
                time.sleep(0.05)
            proc.send_signal(signum)
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:  # a failed test leaves no run behind
                proc.kill()
                proc.wait()
    return proc.returncode, err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_run_says_how_to_resume_and_resumes_exactly(tiny_bin, tmp_path, signum):
    cli("fairseq-train", tiny_bin, *TRAIN, "--save-dir", tmp_path / "full")
    args = [str(tiny_bin), *TRAIN, "--save-dir", str(tmp_path / "stopped")]
    # stopped in epoch 2 (an epoch holds about 10 updates), two updates after its checkpoint at update 15: the run
    # waits there for the signal (paused_train.py), so that it cannot finish first on a busy machine
    code, err = run_until([sys.executable, str(Path(__file__).with_name("paused_train.py")), "17", *args],
                          tmp_path / "stopped.log", r"paused after update 17", signum)
    lines = [line for line in err.splitlines() if line.strip()]
    name = "SIGTERM" if signum == signal.SIGTERM else "SIGINT"
    assert code == 128 + signum and "Traceback" not in err, err[-3000:]
    assert "checkpoint_2_15.pt" in (tmp_path / "stopped.log").read_text()
    assert lines[-1] == (f"error: fairseq-train stopped by {name}: run the same command to resume from "
                         f"{tmp_path / 'stopped' / 'checkpoint_last.pt'} (exactly as if it had not stopped)")
    cli("fairseq-train", *args)  # the same command again
    assert_same_tensors(state(tmp_path / "full" / "checkpoint_last.pt")["model"],
                        state(tmp_path / "stopped" / "checkpoint_last.pt")["model"])


def test_a_resume_into_another_model_names_what_differs(tiny_bin, trained, tmp_path):
    """fairseq's "Cannot load model parameters ... please ensure that the architectures match" traceback: one line
    naming the options of the model that differ from the checkpoint's, and the fix."""
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    flags = [a if a != "joint_lstm_tiny" else "joint_transformer_tiny" for a in TRAIN]
    line = one_line_error(cli("fairseq-train", tiny_bin, *flags, "--save-dir", run, check=False))
    assert line.startswith(f"error: {run}/checkpoint_last.pt holds another model than this run builds (--arch "
                           "joint_transformer_tiny (checkpoint: joint_lstm_tiny)"), line
    assert "--max-update" not in line and "another --save-dir" in line, line  # the model's options only


def test_a_save_that_runs_out_of_disk_space_is_one_line_and_leaves_no_partial_file(tiny_bin, tmp_path):
    """The write itself fails (its temporary file is /dev/full, where every write ends in ENOSPC): fairseq printed
    five tracebacks and left the partial checkpoint_1_10.pt.tmp behind."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint_1_10.pt.tmp").symlink_to("/dev/full")
    line = one_line_error(cli("fairseq-train", tiny_bin, *TRAIN, "--max-update", "12", "--save-dir", run, check=False))
    assert re.fullmatch(
        rf"error: {run}/checkpoint_1_10.pt: no space left on the device to write it \(about \d+\.\d MiB needed, "
        rf"\d+\.\d MiB free\): free space or give a --save-dir with room; the newest intact checkpoint is "
        rf"{run}/checkpoint_last.pt: once there is room, run the same command to resume from it", line), line
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint_1_5.pt", "checkpoint_last.pt"]


def test_a_save_or_copy_larger_than_the_free_space_is_refused_before_it_starts(tmp_path, monkeypatch):
    import torch
    from fairseq import checkpoint_utils
    from fairseq.file_io import PathManager

    import fairseq_joint  # noqa: F401  (installs the checks of saves and copies)

    saved = {"model": {"w": torch.zeros(2 ** 18)}, "cfg": None}  # 1 MiB of tensors
    free = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: free._replace(free=2 ** 19))
    target = tmp_path / "checkpoint_1_2.pt"
    with pytest.raises(CheckpointError, match=rf"^{target}: no space left on the device to write it \(about 1.0 MiB "
                                              r"needed, 0.5 MiB free\): .*no intact checkpoint lies beside it"):
        checkpoint_utils.torch_persistent_save(saved, str(target))
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    checkpoint_utils.torch_persistent_save(saved, str(target))  # with room
    monkeypatch.setattr(shutil, "disk_usage", lambda path: free._replace(free=2 ** 19))
    last = tmp_path / "checkpoint_last.pt"
    with pytest.raises(CheckpointError, match=rf"^{last}: no space .* the newest intact checkpoint is {target}: once "
                                              rf"there is room, run the same command with --restore-file {target}"):
        PathManager.copy(str(target), str(last), overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]
