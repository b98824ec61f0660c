"""Exact resume, asserted once per task type: a run resumed from any of its checkpoints (inside epoch 1, at an epoch
boundary, in epoch 2, in a later epoch) ends with the parameters of the run that was never stopped, bit for bit, and
logs the same validations after the resume (fairseq_joint/resume.py); so does a finished run continued to a larger
``--max-update`` (what nmt_study.py does). Translation: NMT-joint Transformer, nmt_study.py's schedule (inverse_sqrt
warm-up, dropout), the label-embedding loss with sampling (the criterion's own parameters, o2, A and B, and the sampler's
draws resume too). GILE: label sampling."""

import re
import shutil

import pytest
from conftest import GILE_FAST, GILE_TRAIN, USER_DIR, assert_same_tensors, cli, log_records, state

from fairseq_joint_studies import fairseq_log

TRANSLATION = ["--user-dir", USER_DIR, "--arch", "joint_transformer_tiny", "--output-layer", "joint", "--joint-dim",
               "12", "--criterion", "label_embedding_cross_entropy", "--label-embedding-dim", "8", "--sample-rate",
               "0.25", "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "1e-3", "--lr-scheduler",
               "inverse_sqrt", "--warmup-updates", "6", "--warmup-init-lr", "1e-07", "--dropout", "0.2", "--seed", "7",
               "--max-tokens", "500", "--max-epoch", "0", "--validate-interval-updates", "3", "--save-interval-updates",
               "3", "--log-interval", "1", "--num-workers", "0", "--no-progress-bar"]
GILE = [*GILE_TRAIN, "--head", "gile", "--joint-dim", "8", "--criterion", "multilabel_classification",
        "--label-sample-rate", "0.5", "--save-interval-updates", "4", "--validate-interval-updates", "4", "--seed", "7",
        *[x for x in GILE_FAST if x not in ("--no-epoch-checkpoints",)], "--batch-size", "16"]
BUDGET = {"translation": 30, "gile": 26}


def resume_points(save_dir):
    """One checkpoint of each kind: inside epoch 1, the end of epoch 1, inside epoch 2, inside a later epoch."""
    interval = {(int(e), int(u)): p for p in save_dir.glob("checkpoint_*_*.pt")
                for e, u in [re.fullmatch(r"checkpoint_(\d+)_(\d+)\.pt", p.name).groups()]}
    points = {"epoch 1": min(k for k in interval if k[0] == 1), "epoch 2": min(k for k in interval if k[0] == 2),
              "later epoch": min(k for k in interval if k[0] >= 3)}
    out = {name: interval[key] for name, key in points.items()}
    out["end of epoch 1"] = save_dir / "checkpoint1.pt"
    return out


def valid_losses(run):
    return [(int(v["num_updates"]), v["loss"]) for v in log_records(run.stdout + run.stderr, "valid")]


def assert_same_run(full, save_dir, what):
    """The final model and criterion parameters of ``save_dir`` are those of the run never stopped, bit for bit."""
    final, resumed = state(full / "checkpoint_last.pt"), state(save_dir / "checkpoint_last.pt")
    for part in ("model", "criterion"):  # (a criterion without parameters saves none)
        assert (final.get(part) is None) == (resumed.get(part) is None), (what, part)
        assert_same_tensors(final.get(part) or {}, resumed.get(part) or {}, f"{what}: {part}")


@pytest.mark.parametrize("task", ["translation", "gile"])
def test_resume_from_any_checkpoint_or_to_a_larger_budget_is_bit_for_bit(tiny_bin, gile_bin, tmp_path, task):
    data, flags = (tiny_bin, TRANSLATION) if task == "translation" else (gile_bin, GILE)
    budget = ["--max-update", BUDGET[task]]
    full = cli("fairseq-train", data, *flags, *budget, "--save-dir", tmp_path / "full")
    curve = valid_losses(full)
    assert curve[-1][0] == BUDGET[task] and len(curve) >= BUDGET[task] // 4, curve
    if task == "translation":  # the label embedding is the criterion's, and saved with it
        assert {"o2.weight", "label_embedding.A", "label_embedding.B"} <= set(state(tmp_path / "full" /
                                                                                 "checkpoint_last.pt")["criterion"])
    points = resume_points(tmp_path / "full")
    assert len(points) == 4
    for name, checkpoint in points.items():
        run = tmp_path / name.replace(" ", "_")
        run.mkdir()
        shutil.copyfile(checkpoint, run / "checkpoint_last.pt")
        out = cli("fairseq-train", data, *flags, *budget, "--save-dir", run)
        ((_, _, at),) = fairseq_log.checkpoints(out.stdout + out.stderr, "Loaded")
        assert valid_losses(out) == [(u, loss) for u, loss in curve if u > at], name
        assert_same_run(tmp_path / "full", run, f"resumed from {name}")

    # stopped by --max-update inside epoch 2 (as nmt_study.py's runs stop between budgets), then the larger budget
    epoch_ends = [int(r["num_updates"]) for r in log_records(full.stdout + full.stderr, "train")]
    stop = epoch_ends[0] + 4
    assert stop < epoch_ends[1] < BUDGET[task], epoch_ends
    cli("fairseq-train", data, *flags, "--max-update", stop, "--save-dir", tmp_path / "stopped")
    more = cli("fairseq-train", data, *flags, *budget, "--save-dir", tmp_path / "stopped")
    assert [u for _, _, u in fairseq_log.checkpoints(more.stdout + more.stderr, "Loaded")] == [stop]
    continued = valid_losses(more)
    assert continued and continued == [(u, loss) for u, loss in curve if u > stop]
    assert_same_run(tmp_path / "full", tmp_path / "stopped", "continued to a larger budget")
