"""What a resume reports as changed: the options that differ from the checkpoint's, paths compared as saved."""

import re
import types

import pytest
import torch
from omegaconf import OmegaConf

from fairseq_joint.checkpoints import absolute_paths
from fairseq_joint.errors import CheckpointError, OptionError, refusal
from fairseq_joint.resume import (
    RESETS,
    changed_options,
    current_configuration,
    load_checkpoint,
    model_mismatch,
    world_size_problem,
)


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


def test_a_resume_into_another_head_names_the_option_not_the_layers_fields(tmp_path):
    """The output layer refuses the checkpoint's parameters naming its own fields (class_projection, joint_dim); fairseq
    wraps that in "Cannot load model parameters": the resume names the option the user changed (--head)."""
    saved = {"model": {"_name": "gile_classifier", "head": "gile"}, "criterion": {"_name": "multilabel_classification"}}
    torch.save({"cfg": saved, "model": {}}, tmp_path / "checkpoint_last.pt")
    layer = CheckpointError("the checkpoint's output layer differs from this model's (class_projection: ...)")
    try:
        try:
            raise layer
        except CheckpointError:
            raise Exception("Cannot load model parameters from checkpoint x; please ensure that the architectures match")  # noqa: B904  (as fairseq raises it)
    except Exception as wrapped:  # noqa: BLE001
        err = wrapped
    cfg = OmegaConf.create({"model": {"_name": "gile_classifier", "head": "bil_n16"},
                            "criterion": {"_name": "multilabel_classification"}})
    path = str(tmp_path / "checkpoint_last.pt")
    found = model_mismatch(path, cfg, err)
    assert "holds another model than this run builds (--head bil_n16 (checkpoint: gile))" in str(found), found
    assert str(model_mismatch(path, cfg, err, finetuning=True)).endswith(  # not "resume it ... --finetune-from-model"
        "(--head bil_n16 (checkpoint: gile)): --finetune-from-model starts from the weights of a model of the same "
        "parameters: build this one as the checkpoint's (its --arch, --output-layer and sizes), or train it from "
        "scratch")
    cfg.model.head = "gile"  # nothing the user changed: the layer's own refusal says what is wrong (other data, ...)
    assert model_mismatch(str(tmp_path / "checkpoint_last.pt"), cfg, err) is None
    # through fairseq's Trainer.load_checkpoint: a resume names the option; --finetune-from-model, whose point is
    # other options, keeps the layer's refusal
    cfg.model.head = "bil_n16"

    def fails(trainer, filename):
        raise err

    for finetune, said in ((None, "holds another model than this run builds (--head"), (path, "output layer differs")):
        trainer = types.SimpleNamespace(cfg=OmegaConf.merge(cfg, {"checkpoint": {"finetune_from_model": finetune}}),
                                        get_criterion=torch.nn.Module, get_model=torch.nn.Module)
        with pytest.raises(Exception) as raised:  # noqa: PT011  (fairseq's own Exception, the refusal in its chain)
            load_checkpoint(fails, trainer, path)
        assert said in str(refusal(raised.value))


def test_a_resume_in_the_middle_of_an_epoch_keeps_the_number_of_processes():
    """The checkpoint's position counts the batches each process took: with another --distributed-world-size fairseq
    read it in another split of the epoch (2 processes -> 1 trained again on batches the run had trained on)."""
    def cfg(world_size, reset=False):
        return OmegaConf.create({"distributed_training": {"distributed_world_size": world_size},
                                 "checkpoint": {"reset_dataloader": reset}})

    saved = OmegaConf.to_container(cfg(2))
    middle, end = {"train_iterator": {"epoch": 1, "iterations_in_epoch": 20}}, {"train_iterator": {"epoch": 2}}
    assert re.fullmatch(r"ck\.pt was saved 20 batches into an epoch of a run of --distributed-world-size 2, which "
                        r"--distributed-world-size 1 cannot go on with .*: resume with --distributed-world-size 2, or "
                        r"resume from a checkpoint saved at the end of an epoch \(checkpointN\.pt\)",
                        world_size_problem("ck.pt", saved, cfg(1), middle))
    assert world_size_problem("ck.pt", saved, cfg(2), middle) is None  # the same processes
    assert world_size_problem("ck.pt", saved, cfg(1), end) is None  # a new epoch is split anew
    assert world_size_problem("ck.pt", saved, cfg(1, reset=True), middle) is None  # --reset-dataloader: not read
    assert world_size_problem("ck.pt", None, cfg(1), middle) is None  # no configuration recorded: nothing to compare


def test_where_a_process_runs_is_not_reported_as_changed():
    saved = {"distributed_training": {"distributed_init_method": "tcp://127.0.0.1:1", "distributed_rank": 0,
                                      "distributed_world_size": 2}}
    now = {"distributed_training": {"distributed_init_method": "tcp://127.0.0.1:2", "distributed_rank": 1,
                                    "distributed_world_size": 4}}
    assert changed_options(saved, now) == ["--distributed-world-size 4 (checkpoint: 2)"]


def test_fairseq_s_load_checkpoint_refuses_another_world_size_but_not_to_fine_tuning(tmp_path):
    """Through fairseq's Trainer.load_checkpoint: a resume inside an epoch with another --distributed-world-size is
    refused; --finetune-from-model of the same checkpoint is not (fairseq does not read its position then)."""
    path = str(tmp_path / "checkpoint_last.pt")
    torch.save({"cfg": {"distributed_training": {"distributed_world_size": 4}}, "model": {}}, path)
    middle = {"train_iterator": {"epoch": 1, "iterations_in_epoch": 7}}
    for finetune in (None, path):
        cfg = OmegaConf.create({"distributed_training": {"distributed_world_size": 1},
                                "optimization": {"max_update": 0},
                                "checkpoint": {**{f"reset_{part}": False for part in RESETS},
                                               "finetune_from_model": finetune}})
        trainer = types.SimpleNamespace(cfg=cfg, get_num_updates=lambda: 7, is_data_parallel_master=True,
                                        data_parallel_world_size=1, get_criterion=torch.nn.Module,
                                        get_model=torch.nn.Module,
                                        task=types.SimpleNamespace(load_state_dict=lambda state: None))
        if finetune:
            assert load_checkpoint(lambda trainer, filename: middle, trainer, path) is middle
        else:
            with pytest.raises(OptionError, match=f"^{re.escape(path)} was saved 7 batches into an epoch of a run of "
                                                  "--distributed-world-size 4, which --distributed-world-size 1"):
                load_checkpoint(lambda trainer, filename: middle, trainer, path)


def test_a_checkpoint_without_optimizer_state_is_not_resumed_at_update_0(tmp_path):
    """--no-save-optimizer-state: fairseq resumed at update 0 (a finished run trained --max-update updates more);
    --reset-optimizer asks for that, and a checkpoint with its optimizer state resumes as before."""
    path = str(tmp_path / "checkpoint_last.pt")
    saved = {"cfg": {}, "model": {}, "optimizer_history": [{"num_updates": 50}]}

    def trainer(reset=False):
        cfg = OmegaConf.create({"distributed_training": {"distributed_world_size": 1},
                                "optimization": {"max_update": 0}, "checkpoint": {**{f"reset_{part}": False for part in RESETS},
                                               "reset_optimizer": reset, "finetune_from_model": None}})
        return types.SimpleNamespace(cfg=cfg, get_num_updates=lambda: 0, is_data_parallel_master=True,
                                     data_parallel_world_size=1, get_criterion=torch.nn.Module,
                                     get_model=torch.nn.Module,
                                     task=types.SimpleNamespace(load_state_dict=lambda state: None))

    extra = {"train_iterator": {"epoch": 3, "iterations_in_epoch": 0}}
    torch.save(saved, path)
    with pytest.raises(OptionError, match=f"^{re.escape(path)} holds no optimizer state \\(saved with "
                                          "--no-save-optimizer-state\\), without which fairseq resumes at update 0, "
                                          "not 50: .* go on from its weights with --reset-optimizer"):
        load_checkpoint(lambda trainer, filename: extra, trainer(), path)
    assert load_checkpoint(lambda trainer, filename: extra, trainer(reset=True), path) is extra
    torch.save({**saved, "last_optimizer_state": {}}, path)
    assert load_checkpoint(lambda trainer, filename: extra, trainer(), path) is extra


@pytest.mark.parametrize("finetune, resets, restored", [(False, (), True), (True, (), False),
                                                        (False, RESETS, False), (False, ("meters",), True)])
def test_the_task_state_is_restored_on_a_resume_only(tmp_path, finetune, resets, restored):
    """GILE's γ and last validation (the task's state) come back with a resume, not with a start from the weights only
    (--finetune-from-model, every --reset-*): the fine-tuned model's card showed the other run's figures."""
    path = str(tmp_path / "checkpoint_last.pt")
    torch.save({"cfg": {}, "model": {}, "task_state": {"gamma": 2.3}, "last_optimizer_state": {}}, path)
    loaded = []
    checkpoint = {"finetune_from_model": path if finetune else None, "reset_dataloader": False,
                  **{f"reset_{part}": part in resets for part in RESETS}}
    cfg = OmegaConf.create({"distributed_training": {"distributed_world_size": 1}, "optimization": {"max_update": 0},
                            "checkpoint": checkpoint})
    trainer = types.SimpleNamespace(cfg=cfg, get_num_updates=lambda: 0, is_data_parallel_master=True,
                                    data_parallel_world_size=1, get_criterion=torch.nn.Module,
                                    get_model=torch.nn.Module,
                                    task=types.SimpleNamespace(load_state_dict=loaded.append))
    load_checkpoint(lambda trainer, filename: {"train_iterator": {"epoch": 2}}, trainer, path)
    assert loaded == ([{"gamma": 2.3}] if restored else [])
