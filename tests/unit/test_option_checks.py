"""Nothing silent, nothing half-refused (fairseq_joint/checks.py, errors.py, cli/common.py), in process: every numeric
option of the plugin is checked finite and in its declared range by one function, before any work; fairseq's, torch's
and Python's own errors of a user's mistake become one-line refusals naming the file or option; a checkpoint torch's
weights_only unpickler refuses, or one of the wrong kind, is named as such by the one loader."""

import argparse
import dataclasses
import math
import os
import pickle
import sys
import types

import pytest
import torch
from omegaconf import OmegaConf

import fairseq_joint  # noqa: F401  (registers the plugin's dataclasses)
from fairseq_joint import checks, errors, fairseq_patches
from fairseq_joint.checks import ANY, DROPOUT, POSITIVE, POSITIVE_INT, SEED, Range, check_number, number_problem
from fairseq_joint.cli import common

NAN, INF = float("nan"), float("inf")


class Evil:
    """What a malicious checkpoint pickles: a call of os.system when it is unpickled."""

    def __reduce__(self):
        return os.system, ("echo unpickled",)


def evil_checkpoint(path):
    torch.save({"model": {}, "cfg": Evil()}, path)
    return path


def fake_checkpoint(path, model: str, task: str, task_cfg=None):
    """A checkpoint dict fairseq can load whose configuration names ``model`` (an --arch) and ``task`` (with the
    options ``task_cfg``)."""
    cfg = OmegaConf.create({"model": {"_name": model}, "task": task_cfg or {"_name": task, "data": "x"}})
    torch.save({"cfg": cfg, "model": {}, "extra_state": {"train_iterator": {"epoch": 1}},
                "optimizer_history": [{"criterion_name": "X", "optimizer_name": "Adam",
                                       "lr_scheduler_state": {"best": 0}, "num_updates": 0}]}, path)
    return path


# ---------------------------------------------------------------------------------------------- numbers
@pytest.mark.parametrize("value, allowed, ok", [
    (0.5, ANY, True), (NAN, ANY, False), (INF, ANY, False), (-INF, ANY, False), (True, ANY, False),
    (0.0, POSITIVE, False), (1e-9, POSITIVE, True), (INF, POSITIVE, False),
    (0.0, DROPOUT, True), (1.0, DROPOUT, False), (0.999, DROPOUT, True), (-0.1, DROPOUT, False),
    (1, POSITIVE_INT, True), (0, POSITIVE_INT, False), (2.5, POSITIVE_INT, False), (3.0, POSITIVE_INT, True),
    (2 ** 64 - 1, SEED, True), (2 ** 64, SEED, False), (-(2 ** 63), SEED, True), (-(2 ** 63) - 1, SEED, False),
])
def test_one_check_of_finite_numbers_in_range(value, allowed, ok):
    assert (number_problem(value, allowed) is None) == ok
    if not ok:
        with pytest.raises(errors.OptionError, match=r"^--x must be .*, got "):
            check_number("--x", value, allowed)


def test_the_seed_range_is_what_torch_accepts():
    for seed in (SEED.low, SEED.high):
        torch.manual_seed(seed)
    for seed in (SEED.low - 1, SEED.high + 1):
        with pytest.raises((RuntimeError, ValueError)):  # above: RuntimeError, below: "Overflow when unpacking"
            torch.manual_seed(seed)


def test_ranges_say_what_they_allow():
    assert str(Range(0, 1, high_open=True)) == "a finite number in [0, 1)"
    assert str(POSITIVE_INT) == "positive (an integer >= 1)"
    assert str(Range(high=5, high_open=True)) == "a finite number < 5"


def bad_values(allowed: Range):
    """Values just outside ``allowed``, and the non-finite ones for a real-valued range."""
    out = [] if allowed.integer else [NAN, INF, -INF]
    step = 1 if allowed.integer else 0.5
    if allowed.low is not None:
        out.append(allowed.low if allowed.low_open else allowed.low - step)
    if allowed.high is not None:
        out.append(allowed.high if allowed.high_open else allowed.high + step)
    return out


def numeric_options():
    """(dataclass, field, range) of every numeric option of the plugin's models, criteria and task."""
    out = []
    for cls in checks.plugin_dataclasses():
        section = OmegaConf.structured(cls)
        for name, (allowed, _) in checks.numeric_fields(section).items():
            out.append(pytest.param(cls, name, allowed, id=f"{cls.__name__}.{name}"))
    return out


def test_every_real_valued_option_of_the_plugin_is_checked():
    """Each float field the plugin's dataclasses declare is a numeric option (its own range, or any finite number);
    those they inherit from fairseq's are fairseq's."""
    checked = {(p.values[0], p.values[1]) for p in numeric_options()}
    assert len(checked) >= 15
    for cls in checks.plugin_dataclasses():
        for f in checks.own_fields(cls):
            if f.type in (float, "float") or str(f.type) == "typing.Optional[float]" or checks.RANGE in f.metadata:
                assert (cls, f.name) in checked, (cls, f.name)


def defaults(cls):
    """``cls``'s defaults as a configuration section, its interpolations of other sections (``${model.encoder_dim}``)
    unset."""
    data = OmegaConf.to_container(OmegaConf.structured(cls), resolve=False, enum_to_str=True)
    return OmegaConf.create({k: None if isinstance(v, str) and v.startswith("${") else v for k, v in data.items()})


@pytest.mark.parametrize("cls, name, allowed", numeric_options())
def test_a_configuration_with_a_bad_number_is_refused_naming_the_option(cls, name, allowed):
    for section in ("model", "criterion", "task"):
        for bad in bad_values(allowed):
            cfg = defaults(cls)
            cfg[name] = bad
            with pytest.raises(errors.OptionError, match=f"^--{name.replace('_', '-')} must be "):
                checks.check_configuration(types.SimpleNamespace(**{section: cfg}), training=False)
    checks.check_numbers(types.SimpleNamespace(model=defaults(cls), criterion=None, task=None))  # the defaults pass


def test_a_legacy_model_namespace_is_checked_too():
    args = argparse.Namespace(**{f.name: f.default for f in dataclasses.fields(fairseq_joint.models.output_layer_model
                                                                                 .OutputLayerConfig)},
                              init_seed=2 ** 70)
    with pytest.raises(errors.OptionError, match=r"^--init-seed must be an integer in \[-9223372036854775808, "):
        checks.check_numbers(types.SimpleNamespace(model=args))


def test_a_command_number_is_refused_by_argparse_in_one_line(capsys):
    p = common.parser("test", prog="fairseq-joint-test")
    p.add_argument("--offset", type=common.finite_float, default=0.0)
    p.add_argument("--top-k", type=common.positive_int, default=5)
    assert p.parse_args(["--offset", "-2.5", "--top-k", "3"]) == argparse.Namespace(offset=-2.5, top_k=3)
    for argv, said in ((["--offset", "nan"], "argument --offset: must be a finite number, got nan"),
                       (["--offset", "inf"], "argument --offset: must be a finite number, got inf"),
                       (["--top-k", "0"], "argument --top-k: must be positive (an integer >= 1), got 0"),
                       (["--top-k", "two"], "argument --top-k: must be positive (an integer >= 1), got 'two'")):
        with pytest.raises(SystemExit) as exit_:
            p.parse_args(argv)
        assert exit_.value.code == 2
        assert capsys.readouterr().err == f"error: {said} (see fairseq-joint-test --help)\n"


# ---------------------------------------------------------------------------------------------- checkpoints
def test_a_checkpoint_torch_refuses_to_unpickle_is_named_by_every_loader(tmp_path, monkeypatch):
    from fairseq import checkpoint_utils

    path = str(evil_checkpoint(tmp_path / "evil.pt"))
    said = f"^{path} is not a checkpoint torch can load safely \\(weights_only: it pickles posix.system\\)"
    with pytest.raises(errors.CheckpointError, match=said):
        checkpoint_utils.load_checkpoint_to_cpu(path)  # fairseq's loader, as the plugin changes it
    with pytest.raises(errors.CheckpointError, match=said):
        checkpoint_utils.load_model_ensemble_and_task([path])
    with pytest.raises(errors.CheckpointError, match=said):
        common.load_translation_model(path)
    with pytest.raises(errors.CheckpointError, match=said):
        common.load_gile_model(path)
    # the plugin's loader refuses it with fairseq's own loader too (FAIRSEQ_JOINT_PATCHES=0)
    monkeypatch.setattr(checkpoint_utils, "load_checkpoint_to_cpu", fairseq_patches._wrapped["verified_load"][2])
    with pytest.raises(errors.CheckpointError, match=said):
        common.load_checkpoint(path)
    # and any torch.load elsewhere: the exception hook's translation names the file
    try:
        torch.load(path)
    except pickle.UnpicklingError as err:
        assert str(errors.refusal(err)).startswith(f"{path} is not a checkpoint torch can load safely")
    else:
        raise AssertionError("torch loaded a malicious file")


def test_a_checkpoint_of_the_other_kind_is_named(tmp_path, monkeypatch):
    from fairseq import checkpoint_utils
    from fairseq.tasks.translation import TranslationConfig, TranslationTask

    gile = str(fake_checkpoint(tmp_path / "gile.pt", "gile_pretrained", "gile_classification"))
    translation = str(fake_checkpoint(tmp_path / "nmt.pt", "joint_transformer_tiny", "translation"))
    monkeypatch.setattr(sys, "argv", ["fairseq-joint-predict-labels"])
    with pytest.raises(errors.CheckpointError, match=f"^{translation} is a joint_transformer checkpoint \\(task "
                       "translation\\); fairseq-joint-predict-labels needs a gile_classifier model"):
        common.load_gile_model(translation)
    monkeypatch.setattr(sys, "argv", ["fairseq-joint-count-params"])
    with pytest.raises(errors.CheckpointError, match=f"^{gile} is a gile_classifier checkpoint; "
                       "fairseq-joint-count-params needs a translation model \\(fairseq-joint-predict-labels"):
        common.load_translation_model(gile)
    # fairseq's loader, given the command's task (fairseq-generate, -interactive) or --task (fairseq-validate)
    monkeypatch.setattr(sys, "argv", ["fairseq-generate"])
    task = TranslationTask(TranslationConfig(), common._dictionary(8), common._dictionary(8))
    with pytest.raises(errors.CheckpointError, match=f"^{gile} is a gile_classifier checkpoint; fairseq-generate "
                       "needs a translation model"):
        checkpoint_utils.load_model_ensemble([gile], task=task)
    monkeypatch.setattr(sys, "argv", ["fairseq-validate"])
    with pytest.raises(errors.CheckpointError, match=f"^{translation} is a joint_transformer checkpoint"):
        checkpoint_utils.load_model_ensemble_and_task([translation], arg_overrides={"task": "gile_classification"})
    with pytest.raises(errors.MissingFileError, match=f"^checkpoint {tmp_path}/none.pt: file not found"):
        checkpoint_utils.load_model_ensemble_and_task([str(tmp_path / "none.pt")])


def test_a_checkpoint_number_overridden_out_of_range_is_refused(tmp_path):
    from fairseq import checkpoint_utils

    from fairseq_joint.tasks.gile_classification import GileClassificationConfig

    task = OmegaConf.to_container(OmegaConf.structured(GileClassificationConfig(data="x")), enum_to_str=True)
    path = str(fake_checkpoint(tmp_path / "gile.pt", "gile_classifier", "gile_classification", task))
    checks.checkpoint_checks(path, checkpoint_utils.load_checkpoint_to_cpu(path), None, None, "fairseq-validate")
    # as fairseq-validate --model-overrides "{'seen_score_offset': float('nan')}" sets it
    state = checkpoint_utils.load_checkpoint_to_cpu(path, {"seen_score_offset": NAN})
    with pytest.raises(errors.OptionError, match="^--seen-score-offset must be a finite number, got nan"):
        checks.checkpoint_checks(path, state, None, None, "fairseq-validate")


# ---------------------------------------------------------------------------------------------- fairseq's own errors
def raised(function, *args):
    try:
        function(*args)
    except BaseException as err:  # noqa: BLE001 - what the exception hook would be handed
        return err
    raise AssertionError(f"{function} raised nothing")


# the destructor of fairseq's half-built dataset complains when collected: the exception hook exits before that
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_fairseq_and_python_errors_of_a_users_mistake_become_refusals(tmp_path, monkeypatch):
    from fairseq import options
    from fairseq.data import indexed_dataset

    missing = str(tmp_path / "in.txt")
    monkeypatch.setattr(sys, "argv", ["fairseq-interactive", "data", "--input", missing])
    found = errors.refusal(raised(open, missing))
    assert isinstance(found, errors.MissingFileError)
    assert str(found).startswith(f"--input {missing}: no such file or directory (give an existing path")
    existing = tmp_path / "out"
    existing.write_text("")
    monkeypatch.setattr(sys, "argv", ["fairseq-joint-x", f"--output={existing}"])
    found = errors.refusal(raised(os.mkdir, existing))
    assert isinstance(found, errors.InputError) and str(found).startswith(f"--output {existing} exists")
    # a file the command line does not name: a bug's, not the user's
    assert errors.refusal(raised(open, str(tmp_path / "other.txt"))) is None

    empty = tmp_path / "train.en-de.en"
    for suffix in (".bin", ".idx"):
        (tmp_path / f"train.en-de.en{suffix}").write_bytes(b"")
    (tmp_path / "train.en-de.en.idx").write_bytes(b"MMIDIDX\x00\x00" + (1).to_bytes(8, "little") + bytes([1])
                                                   + (0).to_bytes(8, "little") + (0).to_bytes(8, "little"))
    found = errors.refusal(raised(indexed_dataset.MMapIndexedDataset, str(empty)))
    assert isinstance(found, errors.InputError) and str(found).startswith(f"{empty}.bin is empty")

    parser = options.get_validation_parser()
    err = raised(options.parse_args_and_arch, parser, ["data", "--path", "x.pt"], None, True)  # suppress_defaults
    assert isinstance(err, KeyError) and isinstance(errors.refusal(err), errors.OptionError)
    assert "add --task" in str(errors.refusal(err))
    # anything else keeps its traceback
    assert errors.refusal(raised(lambda: {}[None])) is None
    assert errors.refusal(raised(lambda: math.sqrt(-1))) is None


def test_the_exception_hook_prints_one_line_and_exits(monkeypatch, capsys, tmp_path):
    exits = []
    monkeypatch.setattr(os, "_exit", exits.append)
    path = str(evil_checkpoint(tmp_path / "evil.pt"))
    err = raised(torch.load, path)
    errors.uncaught(lambda *a: pytest.fail("the traceback was printed"), type(err), err, err.__traceback__)
    assert capsys.readouterr().err == f"error: {errors.refusal(err)}\n" and exits == [1]
    shown = []
    monkeypatch.setenv(errors.DEBUG_ENV, "1")
    errors.uncaught(lambda *a: shown.append(a), type(err), err, err.__traceback__)
    assert shown and exits == [1]


def test_fairseq_train_refuses_a_checkpoint_of_the_other_kind(tmp_path, monkeypatch):
    """--finetune-from-model / --restore-file: refused when fairseq reads the file, before any weight is loaded."""
    from fairseq import checkpoint_utils

    gile = str(fake_checkpoint(tmp_path / "gile.pt", "gile_classifier", "gile_classification"))
    translation = str(fake_checkpoint(tmp_path / "nmt.pt", "joint_lstm_tiny", "translation"))
    checkpoint_utils.load_checkpoint_to_cpu(gile)  # outside fairseq-train: any kind
    monkeypatch.setitem(checks._training_kind, "labels", False)  # as before_main records a translation run
    checkpoint_utils.load_checkpoint_to_cpu(translation)
    with pytest.raises(errors.CheckpointError, match=f"^{gile} is a gile_classifier checkpoint; fairseq-train needs "
                       "a translation model"):
        checkpoint_utils.load_checkpoint_to_cpu(gile)
    monkeypatch.setitem(checks._training_kind, "labels", True)
    with pytest.raises(errors.CheckpointError, match=f"^{translation} is a joint_lstm checkpoint \\(task translation\\); "
                       "fairseq-train needs a gile_classifier model"):
        checkpoint_utils.load_checkpoint_to_cpu(translation)
