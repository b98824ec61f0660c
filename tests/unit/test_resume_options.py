"""What a resume reports as changed: the options that differ from the checkpoint's, paths compared as saved."""

from omegaconf import OmegaConf

from fairseq_joint.checkpoints import absolute_paths
from fairseq_joint.resume import changed_options, current_configuration


def test_a_relative_data_path_is_not_reported_as_changed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bin").mkdir()
    cfg = OmegaConf.create({"task": {"_name": "translation", "data": "bin"}, "optimization": {"lr": [0.001]}})
    saved = OmegaConf.to_container(cfg)
    absolute_paths(saved)  # what the checkpoint records
    assert saved["task"]["data"] == str(tmp_path / "bin")
    assert changed_options(saved, current_configuration(cfg)) == []
    cfg.optimization.lr = [0.002]
    assert changed_options(saved, current_configuration(cfg)) == ["--lr 0.002 (checkpoint: 0.001)"]
    cfg.task.data = "elsewhere"  # names nothing here: kept as typed, and reported
    assert changed_options(saved, current_configuration(cfg))[0] == f"--data elsewhere (checkpoint: {tmp_path / 'bin'})"
