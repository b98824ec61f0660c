"""Nothing silent, nothing half-refused (fairseq_joint/checks.py, errors.py, cli/common.py), in process: every numeric
option of the plugin is checked finite and in its declared range by one function, before any work; fairseq's, torch's
and Python's own errors of a user's mistake become one-line refusals naming the file or option; a checkpoint torch's
weights_only unpickler refuses, or one of the wrong kind, is named as such by the one loader."""

import argparse
import dataclasses
import io
import math
import os
import pickle
import sys
import types
from typing import Optional

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

import fairseq_joint  # noqa: F401  (registers the plugin's dataclasses)
from fairseq_joint import checks, errors, fairseq_patches, loaders, options
from fairseq_joint.cli import common
from fairseq_joint.options import (
    ANY,
    DROPOUT,
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    SEED,
    Range,
    check_number,
    number_problem,
    ranges,
)

NAN, INF = float("nan"), float("inf")


class Evil:
    """What a malicious checkpoint pickles: a call of os.system when it is unpickled."""

    def __reduce__(self):
        return os.system, ("echo unpickled",)


def evil_checkpoint(path):
    torch.save({"model": {}, "cfg": Evil()}, path)
    return path


def fake_checkpoint(path, model: str, task: str, task_cfg=None, model_cfg=None):
    """A checkpoint dict fairseq can load whose configuration names ``model`` (an --arch, with the options
    ``model_cfg``) and ``task`` (with the options ``task_cfg``)."""
    cfg = OmegaConf.create({"model": model_cfg or {"_name": model}, "task": task_cfg or {"_name": task, "data": "x"}})
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
    (np.int64(3), POSITIVE_INT, True), (np.int64(0), POSITIVE_INT, False), (np.float32(0.5), DROPOUT, True),
    (np.float64(NAN), ANY, False), (np.bool_(True), ANY, False), ("3", POSITIVE_INT, False), (None, ANY, False),
])
def test_one_check_of_finite_numbers_in_range(value, allowed, ok):
    assert (number_problem(value, allowed) is None) == ok
    if not ok:
        with pytest.raises(errors.OptionError, match=r"^--x must be .*, got "):
            check_number("--x", value, allowed)


def test_one_check_of_name_value_lists(tmp_path):
    """named_values: the order given, names and values stripped, a bare item (or an existing path with '=' in it)
    named by ``unnamed`` or refused, every name once and one of the known names, no empty name or value."""
    assert options.named_values("--x", [" en = a", "pl=b=c"], "LANG=FILE", ["pl", "en"]) == {"en": "a", "pl": "b=c"}
    assert options.named_values("--x", ["dir/ckpt.pt", "b=c"], unnamed=str) == {"dir/ckpt.pt": "dir/ckpt.pt", "b": "c"}
    (tmp_path / "encoder=hybrid").mkdir()
    path = str(tmp_path / "encoder=hybrid")
    assert options.named_values("--x", [path], unnamed=str) == {path: path}  # an existing path is no NAME=PATH
    assert options.named_values("--x", [path]) == {str(tmp_path / "encoder"): "hybrid"}  # no bare items: '=' splits
    for items, names, unnamed, message in [
            (["a"], None, None, "^--x 'a': give LANG=FILE$"),
            (["=a"], None, str, "^--x '=a': give LANG=FILE$"),
            (["a="], None, None, "^--x 'a=': nothing follows '=': give LANG=FILE$"),
            (["en="], ["en"], None, "^--x 'en=': nothing follows '=': give LANG=FILE$"),
            (["de=a"], ["en", "pl"], None, "^--x 'de=a': give LANG=FILE; LANG one of en, pl$"),
            (["en=a", "en=b"], ["en"], None, "^--x 'en=b': LANG en is given twice: give each LANG once$"),
            (["a/f", "b/f"], None, lambda p: p.split("/")[1], "^--x 'b/f': named f as an earlier one is: give LANG=FILE$")]:
        with pytest.raises(errors.OptionError, match=message):
            options.named_values("--x", items, "LANG=FILE", names, unnamed)


def test_the_seed_range_is_what_torch_accepts():
    for seed in (SEED.low, SEED.high):
        torch.manual_seed(seed)
    for seed in (SEED.low - 1, SEED.high + 1):
        with pytest.raises((RuntimeError, ValueError)):  # above: RuntimeError, below: "Overflow when unpacking"
            torch.manual_seed(seed)


def bad_values(allowed: Range):
    """Values just outside ``allowed``, and the non-finite ones for a real-valued range."""
    out = [] if allowed.integer else [NAN, INF, -INF]

    def beyond(bound, direction):  # the next integer, or the next float64 (0.5 past 3.4e38 is 3.4e38)
        return bound + direction if allowed.integer else math.nextafter(bound, direction * INF)

    if allowed.low is not None:
        out.append(allowed.low if allowed.low_open else beyond(allowed.low, -1))
    if allowed.high is not None:
        out.append(allowed.high if allowed.high_open else beyond(allowed.high, 1))
    return out


def numeric_options():
    """(dataclass, field, range) of every numeric option of the plugin's models, criteria and task."""
    return [pytest.param(cls, name, allowed, id=f"{cls.__name__}.{name}")
            for cls in checks.plugin_configs() for name, allowed in ranges(cls)]


def test_every_numeric_option_of_the_plugin_declares_its_range():
    """Each int or float field of the plugin's dataclasses declares its Range, but those fairseq fills from another
    section's option (an ``II`` interpolation, checked there); those they inherit from fairseq's are fairseq's."""
    assert len(numeric_options()) >= 25
    for cls in checks.plugin_configs():
        for f in dataclasses.fields(cls):
            if f.name in {g.name for base in cls.__mro__[1:] if not base.__module__.startswith("fairseq_joint.")
                          and dataclasses.is_dataclass(base) for g in dataclasses.fields(base)}:
                continue  # fairseq's own (label_smoothing): FAIRSEQ_RANGES
            numeric = f.type in (int, float, Optional[int], Optional[float])
            interpolated = isinstance(f.default, str) and f.default.startswith("${")
            assert (options.RANGE in f.metadata) == (numeric and not interpolated), (cls, f.name)


def defaults(cls):
    """``cls``'s defaults as a configuration section, its interpolations of other sections (``${model.encoder_dim}``)
    unset."""
    data = OmegaConf.to_container(OmegaConf.structured(cls), resolve=False, enum_to_str=True)
    return OmegaConf.create({k: None if isinstance(v, str) and v.startswith("${") else v for k, v in data.items()})


@pytest.mark.parametrize("cls, name, allowed", numeric_options())
def test_a_configuration_with_a_bad_number_is_refused_naming_the_option(cls, name, allowed):
    for bad in bad_values(allowed):
        cfg = defaults(cls)
        cfg[name] = bad
        with pytest.raises(errors.OptionError, match=f"^--{name.replace('_', '-')} must be "):
            options.check(cls, cfg, None, rules=False)
    options.check(cls, defaults(cls), None, rules=False)  # the defaults pass


def test_a_legacy_model_namespace_is_checked_through_fairseqs_registries():
    args = argparse.Namespace(**{f.name: f.default for f in dataclasses.fields(fairseq_joint.models.output_layer_model
                                                                                 .OutputLayerConfig)},
                              arch="joint_lstm_tiny", init_seed=2 ** 70)
    with pytest.raises(errors.OptionError, match=r"^--init-seed must be an integer in \[-9223372036854775808, "):
        checks.validate(types.SimpleNamespace(model=args), training=False)
    args.init_seed = None  # unset: not checked
    checks.validate(types.SimpleNamespace(model=args), training=False)


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
        loaders.load_translation_model(path)
    with pytest.raises(errors.CheckpointError, match=said):
        loaders.load_gile_model(path)
    # the plugin's loader refuses it with fairseq's own loader too (FAIRSEQ_JOINT_PATCHES=0)
    monkeypatch.setattr(checkpoint_utils, "load_checkpoint_to_cpu", fairseq_patches.original("verified_load"))
    with pytest.raises(errors.CheckpointError, match=said):
        loaders.load_checkpoint(path)
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
    with pytest.raises(errors.CheckpointError, match=f"^{translation} is a joint_transformer checkpoint; "
                       "load_gile_model needs a gile_classifier model \\(fairseq-generate"):  # the API names itself
        loaders.load_gile_model(translation)
    monkeypatch.setattr(sys, "argv", ["fairseq-joint-count-params"])
    with pytest.raises(errors.CheckpointError, match=f"^{gile} is a gile_classifier checkpoint; "
                       "fairseq-joint-count-params needs a translation model \\(fairseq-joint-predict-labels"):
        loaders.load_translation_model(gile)
    fairseq = str(fake_checkpoint(tmp_path / "fairseq.pt", "transformer", "translation"))  # no output layer to count
    with pytest.raises(errors.CheckpointError, match=f"^{fairseq} \\(a transformer checkpoint\\) is no fairseq-joint "
                       "translation model: give one of --arch joint_transformer or joint_lstm"):
        loaders.load_translation_model(fairseq)
    with pytest.raises(errors.CheckpointError, match=f"^{translation} holds no encoder.embed_tokens.weight \\(its "
                       "model's weights are incomplete\\): give a checkpoint written by fairseq-train$"):
        loaders.load_translation_model(translation)  # a joint_transformer checkpoint without weights
    # fairseq's loader, given the command's task (fairseq-generate, -interactive) or --task (fairseq-validate)
    monkeypatch.setattr(sys, "argv", ["fairseq-generate"])
    task = TranslationTask(TranslationConfig(), loaders._dictionary(8), loaders._dictionary(8))
    with pytest.raises(errors.CheckpointError, match=f"^{gile} is a gile_classifier checkpoint; fairseq-generate "
                       "needs a translation model"):
        checkpoint_utils.load_model_ensemble([gile], task=task)
    monkeypatch.setattr(sys, "argv", ["fairseq-validate"])
    with pytest.raises(errors.CheckpointError, match=f"^{translation} is a joint_transformer checkpoint"):
        checkpoint_utils.load_model_ensemble_and_task([translation], arg_overrides={"task": "gile_classification"})
    with pytest.raises(errors.MissingFileError, match=f"^checkpoint {tmp_path}/none.pt: no such file"):
        checkpoint_utils.load_model_ensemble_and_task([str(tmp_path / "none.pt")])


def test_a_checkpoint_number_overridden_out_of_range_is_refused(tmp_path):
    from fairseq import checkpoint_utils

    from fairseq_joint.tasks.gile_classification import GileClassificationConfig

    task = OmegaConf.to_container(OmegaConf.structured(GileClassificationConfig(  # as saved: resolved
        data="x", encoder="wan", pretrained_encoder="", finetune_encoder=False, lexical_dim=64)), enum_to_str=True)
    task["_name"] = "gile_classification"
    path = str(fake_checkpoint(tmp_path / "gile.pt", "gile_classifier", "gile_classification", task))
    checks.checkpoint_checks(path, checkpoint_utils.load_checkpoint_to_cpu(path), None, None, "fairseq-validate")
    # as fairseq-validate --model-overrides "{'seen_score_offset': float('nan')}" sets it
    state = checkpoint_utils.load_checkpoint_to_cpu(path, {"seen_score_offset": NAN})
    with pytest.raises(errors.OptionError, match="^--seen-score-offset must be a float32 number .* got nan: give a value in that range$"):
        checks.checkpoint_checks(path, state, None, None, "fairseq-validate")


def test_an_override_out_of_range_names_the_keyword_it_was_given_as():
    """load_translator(..., lenpen=nan) (a key of --model-overrides too) said "--lenpen", which the caller never wrote:
    the override is named as given, as translate(lenpen=nan) names it; a group's options given as a dict are checked
    too (generation={'lenpen': nan} passed)."""
    cfg = OmegaConf.create({"model": {"_name": "joint_transformer_tiny"},
                            "task": {"_name": "translation", "data": "x"}})
    for overrides, said in (({"lenpen": NAN}, "^lenpen=nan: must be a finite number, got nan: give a value in that "
                                              "range$"),
                            ({"max_len_b": -1}, "^max_len_b=-1: must be an integer >= 0, got -1"),
                            ({"generation": {"lenpen": INF}}, "^lenpen=inf: must be a finite number, got inf"),
                            # an item of a list or a literal: the value as given, then the item
                            ({"update_freq": [0]}, r"^update_freq=\[0\]: must be positive .* got 0"),
                            ({"adam_betas": "(0.9, 1.5)"}, r"^adam_betas='\(0.9, 1.5\)': must be a finite number in "
                                                           r"\[0, 1\), got 1.5")):
        with pytest.raises(errors.OptionError, match=said):
            checks.check_overrides(cfg, overrides)
    checks.check_overrides(cfg, {"lenpen": 1.5, "generation": {"max_len_b": 4}})
    with pytest.raises(errors.OptionError, match="^--lenpen must be a finite number, got nan"):  # the command line's
        checks.check_fairseq_options(argparse.Namespace(lenpen=NAN))


def test_model_overrides_of_a_checkpoint_follow_the_models_rules(tmp_path):
    """--model-overrides "{'cosine_prior': 5.0}" of a WAN model ended at the first batch in an AttributeError
    traceback (it has no sentence encoder): the overrides of a checkpoint's model options meet the model's rules,
    which fairseq-train checks. A checkpoint is not held to rules newer than it: only what the overrides break is
    refused (a --pretrained-encoder that a WAN model recorded before such a one was refused stays)."""
    from fairseq import checkpoint_utils

    from fairseq_joint.models.gile_classifier import GileClassifierConfig
    from fairseq_joint.tasks.gile_classification import GileClassificationConfig

    task = OmegaConf.to_container(OmegaConf.structured(GileClassificationConfig(data="x")), enum_to_str=True)
    model = OmegaConf.to_container(OmegaConf.structured(GileClassifierConfig(pretrained_encoder="gone")), enum_to_str=True)
    path = str(fake_checkpoint(tmp_path / "gile.pt", "gile_classifier", "gile_classification",
                               {**task, "_name": "gile_classification"}, {**model, "_name": "gile_classifier"}))
    saved = checks.checkpoint_cfg(checkpoint_utils.load_checkpoint_to_cpu(path))

    def load(overrides):
        state = checkpoint_utils.load_checkpoint_to_cpu(path)
        checks.apply_overrides(state, overrides or {})
        checks.checkpoint_checks(path, state, None, overrides, "fairseq-validate", saved=saved)

    for overrides in (None, {"seen_score_offset": 0.5}, {"joint_dim": "8"}):  # as saved; the task's; the model's, valid
        load(overrides)
    with pytest.raises(errors.OptionError, match="^--cosine-prior 5.0 adds a frozen sentence encoder's cosine"):
        load({"cosine_prior": 5.0})
    assert checks.model_rule_problem(saved).startswith("--pretrained-encoder gone is the sentence encoder of")


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
    monkeypatch.setattr(sys, "argv", ["fairseq-generate", "data", "--results-path", f"{existing}/out"])
    found = errors.refusal(raised(os.makedirs, f"{existing}/out"))  # a path under a file: the file is named
    assert str(found) == f"--results-path {existing}/out: {existing} is a file, not a directory: give a path under a directory"
    # a file the command line does not name: a bug's, not the user's
    assert errors.refusal(raised(open, str(tmp_path / "other.txt"))) is None

    empty = tmp_path / "train.en-de.en"
    for suffix in (".bin", ".idx"):
        (tmp_path / f"train.en-de.en{suffix}").write_bytes(b"")
    (tmp_path / "train.en-de.en.idx").write_bytes(b"MMIDIDX\x00\x00" + (1).to_bytes(8, "little") + bytes([1])
                                                   + (0).to_bytes(8, "little") + (0).to_bytes(8, "little"))
    found = errors.refusal(raised(indexed_dataset.MMapIndexedDataset, str(empty)))
    assert isinstance(found, errors.InputError) and str(found).startswith(f"{empty}.bin is empty")

    # a split DATA does not hold (fairseq's "Dataset not found"): the option that names it, or the default's
    from fairseq.tasks.translation import TranslationConfig, TranslationTask

    from fairseq_joint.loaders import _dictionary

    task = TranslationTask(TranslationConfig(data=str(tmp_path), source_lang="en", target_lang="de"), _dictionary(9),
                           _dictionary(9))
    monkeypatch.setattr(sys, "argv", ["fairseq-generate", str(tmp_path), "--gen-subset", "nosuch"])
    found = errors.refusal(raised(task.load_dataset, "nosuch"))
    assert isinstance(found, errors.MissingFileError) and str(found).startswith(
        f"--gen-subset nosuch: {tmp_path} holds no binarized 'nosuch' split of this language pair: give a split it "
        "holds"), found
    monkeypatch.setattr(sys, "argv", ["fairseq-train", str(tmp_path)])
    assert str(errors.refusal(raised(task.load_dataset, "valid"))).startswith("--valid-subset valid (the default): ")

    parser = options.get_validation_parser()
    err = raised(options.parse_args_and_arch, parser, ["data", "--path", "x.pt"], None, True)  # suppress_defaults
    assert isinstance(err, KeyError) and isinstance(errors.refusal(err), errors.OptionError)
    assert "add --task" in str(errors.refusal(err))
    # fairseq's assertions of sides of other lengths (binarized without the plugin) and of no batch size
    def load_langpair_dataset(prefix, src, tgt):  # the frame of fairseq's function of that name
        raise AssertionError("Source and target must contain the same number of examples")

    found = errors.refusal(raised(load_langpair_dataset, f"{tmp_path}/train.en-de.", "en", "de"))
    assert str(found).startswith(f"{tmp_path}/train.en-de.en and {tmp_path}/train.en-de.de hold different numbers of "
                                 "sentences"), found
    found = errors.refusal(raised(exec, "raise AssertionError('Must specify batch size either with --max-tokens or "
                                        "--batch-size')"))
    assert str(found) == "no batch size was given: add --max-tokens or --batch-size"
    # anything else keeps its traceback
    assert errors.refusal(raised(lambda: {}[None])) is None
    assert errors.refusal(raised(lambda: math.sqrt(-1))) is None


def test_the_exception_hook_prints_one_line_and_exits(monkeypatch, tmp_path):
    """The line goes to the process's stderr: torch's hook of a process group (several processes) wraps this one and
    hands it a buffer as sys.stderr, which it writes out only after the hook returns (it does not: it exits)."""
    exits, stderr, buffer = [], io.StringIO(), io.StringIO()
    monkeypatch.setattr(os, "_exit", exits.append)
    monkeypatch.setattr(sys, "__stderr__", stderr)
    monkeypatch.setattr(sys, "stderr", buffer)
    path = str(evil_checkpoint(tmp_path / "evil.pt"))
    err = raised(torch.load, path)
    errors.uncaught(lambda *a: pytest.fail("the traceback was printed"), type(err), err, err.__traceback__)
    assert stderr.getvalue() == f"error: {errors.refusal(err)}\n" and exits == [errors.REFUSED] == [2]
    monkeypatch.setenv(errors.DEBUG_ENV, "1")  # the traceback, then the line
    errors.uncaught(lambda *a: pytest.fail("not the refusal's hook"), type(err), err, err.__traceback__)
    shown = stderr.getvalue().split("\n", 1)[1]
    assert shown.startswith("Traceback (most recent call last)") and shown.endswith(f"error: {errors.refusal(err)}\n")
    assert exits == [2, 2] and buffer.getvalue() == ""
    bug = raised(lambda: math.sqrt(-1))  # anything else: the hook it wraps, the traceback
    errors.uncaught(lambda *a: exits.append("traceback"), type(bug), bug, bug.__traceback__)
    assert exits[-1] == "traceback"


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
    with pytest.raises(errors.CheckpointError, match=f"^{translation} is a joint_lstm checkpoint; fairseq-train "
                       "needs a gile_classifier model"):
        checkpoint_utils.load_checkpoint_to_cpu(translation)


# ---------------------------------------------------------------------------------------------- argparse, in one line
def test_an_argparse_error_is_one_line_with_the_fix(capsys):
    choices = [f"arch_{i}" for i in range(40)] + ["joint_transformer_tiny"]
    p = argparse.ArgumentParser(prog="fairseq-train")
    p.add_argument("--label-file")
    p.add_argument("--arch", choices=choices)
    fix = "(see fairseq-train --help; given --arch it lists their options too)"
    assert errors.usage_problem(p, "unrecognized arguments: --lable-file x") == (
        f"unrecognized arguments: --lable-file x; --lable-file: did you mean --label-file? {fix}")
    assert errors.usage_problem(p, "unrecognized arguments: --foo") == f"unrecognized arguments: --foo {fix}"
    # a long list of choices: only the close ones (a prefix first), not all 41
    said = errors.usage_problem(p, f"argument --arch: invalid choice: 'joint_transformer_tin' (choose from "
                                   f"{', '.join(map(repr, choices))})")
    assert said == f"argument --arch: invalid choice: 'joint_transformer_tin' (did you mean 'joint_transformer_tiny'?) {fix}"
    assert "(one of 41 choices)" in errors.usage_problem(p, "argument --arch: invalid choice: 'zzz' (choose from "
                                                            f"{', '.join(map(repr, choices))})")
    assert errors.usage_problem(p, "argument --lr: invalid <lambda> value: 'x'").startswith(
        "argument --lr: invalid value: 'x' (see fairseq-train --help")  # fairseq's types are lambdas
    # the patch: argparse's error under fairseq-* programs, exit status 2, no usage block
    with pytest.raises(SystemExit) as exit_:
        errors.argparse_error(lambda *a: pytest.fail("argparse's usage"), p, "the following arguments are required: data")
    assert exit_.value.code == 2
    assert capsys.readouterr().err == f"error: the following arguments are required: data {fix}\n"


# ---------------------------------------------------------------------------------------------- fairseq's own numbers
def parsed(*flags):
    from fairseq import options

    return options.parse_args_and_arch(options.get_training_parser(), ["data", "--arch", "joint_transformer_tiny",
                                                                       "--user-dir", os.path.dirname(checks.__file__),
                                                                       *flags])


def test_fairseq_options_are_checked_finite_and_in_range(monkeypatch):
    from fairseq import options

    args = parsed("--lr", "0.001", "--dropout", "0.3", "--update-freq", "2", "--clip-norm", "0")
    assert list(checks.fairseq_option_problems(args)) == []  # fairseq's defaults and good values pass
    for name, value, allowed in (("dropout", 1.5, DROPOUT), ("dropout", NAN, DROPOUT), ("clip_norm", NAN, NON_NEGATIVE),
                                 ("update_freq", [0], POSITIVE_INT), ("lr", [0.0], POSITIVE), ("beam", 0, POSITIVE_INT),
                                 ("lenpen", NAN, ANY), ("max_update", -1, NON_NEGATIVE_INT)):
        bad = argparse.Namespace(**{**vars(args), name: value})
        problems = list(checks.fairseq_option_problems(bad))
        assert [(p[0], p[2]) for p in problems] == [(name, allowed)], (name, problems)
        with pytest.raises(errors.OptionError, match=f"^--{name.replace('_', '-')} must be "):
            checks.check_fairseq_options(bad)
    # as fairseq's commands parse them (the option_numbers patch)
    with pytest.raises(errors.OptionError, match=r"^--dropout must be a finite number in \[0, 1\), got 1.5"):
        parsed("--dropout", "1.5")
    # one language of a pair: fairseq's translation task infers both from DATA and ignores it
    with pytest.raises(errors.OptionError, match=r"^--source-lang fr without --target-lang: fairseq's translation task "
                                                 r"infers both from DATA's file names and ignores --source-lang then: "
                                                 r"give --target-lang too$"):
        parsed("--task", "translation", "--source-lang", "fr")
    assert parsed("--task", "translation", "--source-lang", "fr", "--target-lang", "de").source_lang == "fr"
    with pytest.raises(errors.OptionError, match=r"^--dropout must be .*, got nan"):  # not the --decoder-dropout-in
        options.parse_args_and_arch(options.get_training_parser(), ["data", "--arch", "joint_lstm_tiny", "--dropout",
                                                                    "nan"])  # the LSTM architecture copies it into
    with pytest.raises(errors.OptionError, match="^--beam must be positive"):
        options.parse_args_and_arch(options.get_generation_parser(), ["data", "--beam", "0"])
    with pytest.raises(errors.OptionError, match=r"^--adam-betas must be a finite number in \[0, 1\), got inf"):
        parsed("--optimizer", "adam", "--adam-betas", "(0.9, 1e999)")  # a text fairseq evaluates
    for item, shown in (("True", "True"), ("'x'", "'x'"), ("None", "None")):  # every item of the literal is a number
        with pytest.raises(errors.OptionError, match=rf"^--adam-betas must be a finite number in \[0, 1\), got {shown}"):
            parsed("--optimizer", "adam", "--adam-betas", f"(0.9, {item})")
    for seed in (2 ** 40, 2 ** 32 - 1):  # numpy's seeding, of seed + epoch at each epoch
        with pytest.raises(errors.OptionError, match="^--seed must be an integer in \\[0, 2147483647\\]"):
            parsed("--seed", str(seed))
    with pytest.raises(errors.OptionError, match="^--nbest 3 is above --beam 2: raise --beam to 3 or lower --nbest$"):
        options.parse_args_and_arch(options.get_generation_parser(), ["data", "--nbest", "3", "--beam", "2"])
    # options fairseq-generate failed on in a traceback (fairseq-interactive with one sentence a batch takes them)
    monkeypatch.setattr(sys, "argv", ["fairseq-generate"])
    for flags, said in ((["--diverse-beam-groups", "2", "--beam", "4"], "^--diverse-beam-groups 2: fairseq 0.12's "
                         "diverse beam search fails on more than one batch"),
                        (["--constraints"], "^--constraints: fairseq-generate's binarized data carries no "
                                            "constraints")):
        with pytest.raises(errors.OptionError, match=said):
            options.parse_args_and_arch(options.get_generation_parser(), ["data", *flags])
    monkeypatch.setattr(sys, "argv", ["fairseq-interactive"])
    options.parse_args_and_arch(options.get_interactive_generation_parser(), ["data", "--diverse-beam-groups", "2"])
    with pytest.raises(errors.MissingFileError, match="^--restore-file none.pt: no such file: give an existing "
                       "checkpoint, or drop --restore-file"):
        parsed("--restore-file", "none.pt")
    # a plugin option named as one of fairseq's declares the same range
    for cls in checks.plugin_configs():
        for name, allowed in ranges(cls):
            if name in checks.FAIRSEQ_RANGES:
                assert allowed == checks.FAIRSEQ_RANGES[name], (cls, name)


GILE = ["--task", "gile_classification", "--arch", "gile_classifier", "--criterion", "multilabel_classification"]
GILE_LE = [*GILE, "--criterion", "gile_label_embedding_cross_entropy", "--classification-mode", "multiclass"]
SAMPLED, LABEL_EMBEDDING = ["--criterion", "sampled_cross_entropy"], ["--criterion", "label_embedding_cross_entropy"]


@pytest.mark.parametrize("flags, said", [
    # each option in its range, refused naming it (a few of them; every range: the test above)
    ([*SAMPLED, "--sample-rate", "1.5"], r"^--sample-rate must be a finite number in \(0, 1\], got 1.5"),
    ([*SAMPLED, "--vocab-chunk-size", "0"], "^--vocab-chunk-size must be positive"),
    # how negatives are drawn, where none are (ignored before without a word)
    ([*SAMPLED, "--sampler", "unigram"], "^--sampler choose how negatives are drawn, and none are: add --sample-rate "
                                         "< 1 or --num-samples, or drop --sampler$"),
    ([*SAMPLED, "--sample-rate", "1", "--sampler", "unigram", "--unigram-alpha", "0.5"],
     "^--sampler and --unigram-alpha choose how negatives are drawn, and none are"),
    # the options of o2, which the frozen embedding of --label-embedding-from (Eq. 17) has not
    ([*LABEL_EMBEDDING, "--label-embedding-from", "ck.pt", "--label-embedding-dim", "50", "--label-embedding-tau", "5"],
     "^--label-embedding-from uses its checkpoint's embedding, frozen, without o2 .Eq. 17.: --label-embedding-dim and "
     "--label-embedding-tau shape o2 and the embedding it learns: drop them$"),
    ([*LABEL_EMBEDDING, "--label-embedding-from", "ck.pt", "--label-embedding-state-from", "ck.pt"],
     "^--label-embedding-state-from starts o2 and the embedding Eq. 14 trains; --label-embedding-from freezes"),
    ([*GILE_LE, "--label-embedding-from", "ck.pt", "--label-embedding-two-sided-hinge"],
     "^--label-embedding-from uses .*: --label-embedding-two-sided-hinge shape o2"),
    ([*LABEL_EMBEDDING, "--num-samples", "8", "--unigram-alpha", "0.5"], r"^--unigram-alpha 0.5 is the exponent of "
     r"--sampler unigram's counts, not --sampler uniform's: add --sampler unigram, or drop --unigram-alpha$"),
    ([*LABEL_EMBEDDING, "--label-embedding-hinge-p", "3"], r"^--label-embedding-hinge-p must be 1 or 2 \(an integer"),
    ([*GILE, "--threshold", "-1"], r"^--threshold must be a finite number in \[0, 1\], got -1"),
    ([*GILE, "--seen-score-offset", "nan"], "^--seen-score-offset must be a float32 number .a finite number in "
                                            ".-3.40282e.38, 3.40282e.38.., got nan"),
    # finite in float64, not in the float32 scores it is subtracted from (every score was -inf)
    ([*GILE, "--seen-score-offset", "1e39"], "^--seen-score-offset must be a float32 number .* got 1e.39: give a value in that range$"),
    ([*GILE, "--encoder", "pretrained", "--cosine-prior", "1e39"], r"^--cosine-prior must be a finite number in \[0, "
                                                                   r"3.40282e\+38\], got 1e\+39: give a value in that range$"),
    (["--joint-dim", "0"], "^--joint-dim must be positive"),
    # the rules of one configuration's options together
    ([*SAMPLED, "--sample-rate", "0.5", "--num-samples", "3"], "either --sample-rate or --num-samples, not both"),
    ([*SAMPLED, "--logq-correction"], "^--logq-correction needs sampling"),
    ([*SAMPLED, "--num-samples", "5", "--remove-accidental-hits", "--label-smoothing", "0.1"],
     "cannot be combined with --label-smoothing"),
    ([*SAMPLED, "--report-accuracy"], "^--report-accuracy is not supported by sampled_cross_entropy"),
    # a criterion that scores a decoder's --output-layer needs a model that has one (refused before a forward pass)
    ([*SAMPLED, "--arch", "transformer"], r"^--criterion sampled_cross_entropy scores the --output-layer of a "
     r"fairseq-joint translation model, not --arch transformer \(TransformerModel\): use --arch joint_transformer or "
     "joint_lstm"),
    ([*LABEL_EMBEDDING, "--arch", "lstm", "--label-embedding-input-dim", "8"],
     r"^--criterion label_embedding_cross_entropy scores the --output-layer .* not --arch lstm \(LSTMModel\)"),
    (["--share-decoder-input-output-embed", "--output-layer", "joint"], "conflicts with --output-layer joint"),
    # also with --share-all-embeddings (fairseq's Transformer turns it on itself only as it builds): it was dropped
    (["--share-decoder-input-output-embed", "--share-all-embeddings", "--output-layer", "softmax"],
     "conflicts with --output-layer softmax"),
    # options the output layer does not read, given (the architecture's own values pass: test below)
    (["--output-layer", "tied", "--joint-dim", "64"], "^--joint-dim 64 is dj of --output-layer joint; --output-layer "
                                                      "tied has no joint space of its own: drop --joint-dim, or use "
                                                      "--output-layer joint$"),
    (["--output-layer", "bilinear", "--joint-activation", "relu"], "^--joint-activation relu is σ of a projected side "
                                                                   r"\(--output-layer label, context or joint\); "
                                                                   "--output-layer bilinear has none: drop"),
    # an init of the output layer's own parameters, and it has none (it was accepted and started nothing)
    (["--output-layer", "tied", "--no-output-bias", "--output-layer-init", "uniform"], "^--output-layer-init uniform "
     r"starts the output layer's own parameters; --output-layer tied --no-output-bias has none \(it scores with E "
     r"alone\): drop --output-layer-init, or --no-output-bias$"),
    (["--share-decoder-input-output-embed", "--arch", "joint_lstm_tiny"], "conflicts with --output-layer joint: use "
                                                                          "--output-layer tied"),
    (["--share-decoder-input-output-embed", "--share-all-embeddings", "--arch", "joint_lstm_tiny"],
     "conflicts with --output-layer joint: use --output-layer tied"),
    (["--criterion", "adaptive_loss"], "^--criterion adaptive_loss needs fairseq's adaptive softmax"),
    # fairseq's LSTMModel.build_model's rules, which joint_lstm builds its modules without
    (["--arch", "joint_lstm_tiny", "--encoder-layers", "2", "--decoder-layers", "1"],
     "^--encoder-layers must match --decoder-layers"),
    (["--arch", "joint_lstm_tiny", "--decoder-embed-path", "v.txt"], "^--decoder-embed-path is not supported by "
                                                                     "joint_lstm"),
    (["--arch", "joint_lstm_tiny", "--encoder-embed-path", "v.txt"], "^--encoder-embed-path is not supported by "
                                                                     "joint_lstm"),
    (["--arch", "joint_lstm_tiny", "--share-all-embeddings", "--decoder-embed-dim", "24"],
     "^--share-all-embeddings requires --encoder-embed-dim to match --decoder-embed-dim"),
    # fairseq's Transformer builds its adaptive softmax in place of any output layer
    (["--adaptive-softmax-cutoff", "8,16"], "^--adaptive-softmax-cutoff builds fairseq's adaptive softmax, which "
                                            "joint_transformer does not"),
    ([*GILE, "--multilabel-loss", "copy_nll", "--label-sample-rate", "0.5"], "samples labels for the bce loss"),
    ([*GILE, "--classification-mode", "multiclass", "--multilabel-loss", "copy_nll"],
     "^--multilabel-loss copy_nll is for --classification-mode multilabel"),
    ([*GILE, "--joint-dim", "abc"], "^--joint-dim must be a positive integer or auto, got 'abc'"),
    ([*GILE, "--joint-dim", "²"], "^--joint-dim must be a positive integer or auto, got '²'"),
    ([*GILE, "--joint-dim", str(2 ** 64)], f"^--joint-dim must be a positive integer or auto, got '{2 ** 64}'"),
    ([*GILE, "--cooccurrence-init", "ub"], "^--cooccurrence-init initializes the linear head's"),
    ([*GILE, "--head", "linear", "--cooccurrence-init", "ub", "--classification-mode", "multiclass"],
     "^--cooccurrence-init dedicates hidden units to sets of two or more labels .* multiclass gives each text one"),
    ([*GILE, "--head", "linear", "--similarity-init"], "--head linear has no label vectors"),
    ([*GILE, "--head", "linear", "--seen-label-bias"], "which --head linear has already"),
    # options the chosen head or encoder does not read (ignored before without a word)
    ([*GILE, "--head", "bil_n16", "--joint-dim", "8"], "^--joint-dim 8 is d_j of --head bil_yh15 or gile; --head "
                                                       "bil_n16 has no joint space of that size: drop --joint-dim$"),
    ([*GILE, "--head", "bil_n16", "--joint-activation", "tanh"], "^--joint-activation tanh is σ of a head's non-linear "
                                                                 "projection; --head bil_n16 has none: drop "
                                                                 "--joint-activation$"),
    ([*GILE, "--head", "linear", "--joint-activation", "tanh"], "^--joint-activation tanh is σ of a head's"),
    ([*GILE, "--pretrained-encoder", "enc"], "^--pretrained-encoder enc is the sentence encoder of --encoder pretrained "
                                             "or hybrid; --encoder wan reads none: drop it, or use --encoder pretrained$"),
    ([*GILE, "--lexical-dim", "8"], "^--lexical-dim 8 sizes the TF-IDF channel of --encoder hybrid; --encoder wan has "
                                    "none: drop it$"),
    ([*GILE, "--encoder", "pretrained", "--dropout", "0.5"], "^--dropout shapes the word encoder of --encoder wan and "
                                                             "han .its embedding E, g_w, the attention.; --encoder "
                                                             "pretrained reads the texts with its sentence encoder: "
                                                             "drop --dropout$"),
    ([*GILE, "--encoder", "hybrid", "--embed-path", "v.txt", "--freeze-embed"], "^--embed-path and --freeze-embed shape "
                                                                               "the word encoder"),
    ([*GILE, "--arch", "gile_pretrained", "--attention-dim", "32"], "^--attention-dim shapes the word encoder"),
    ([*GILE, "--encoder", "pretrained", "--lexical-dim", "32"], "^--lexical-dim 32 sizes the TF-IDF channel of "
                                                                 "--encoder hybrid; --encoder pretrained has none"),
    ([*GILE, "--arch", "gile_multilingual", "--languages", "en,pl", "--encoder", "pretrained", "--lexical-dim", "64"],
     "^--lexical-dim 64 sizes the TF-IDF channel"),  # the preset's 128 is not given: any other value is
    ([*GILE, "--sentence-encoder", "gru"], "^--sentence-encoder and --sentence-end-tokens shape HAN's sentence level; "
                                           "--encoder wan has none: use --encoder han, or drop them$"),
    ([*GILE, "--encoder", "pretrained", "--sentence-end-tokens", "."], "^--sentence-encoder and --sentence-end-tokens "
                                                                       "shape HAN's sentence level; --encoder pretrained "
                                                                       "has none"),
    ([*GILE, "--cosine-prior", "1"], "^--cosine-prior 1.0 adds a frozen sentence encoder's cosine"),
    ([*GILE, "--finetune-label-refresh", "2"], "^--finetune-label-refresh 2 sets how often"),
    ([*GILE, "--finetune-encoder"], "^--finetune-encoder trains the sentence encoder of --encoder pretrained, not "
                                    "--encoder wan "),
    ([*GILE, "--encoder", "hybrid", "--finetune-encoder"], "not --encoder hybrid .han and wan have none, hybrid's "
                                                           "stays frozen.: use --encoder pretrained, or drop"),
    ([*GILE, "--encoder", "pretrained", "--share-encoder"], "--encoder pretrained is one sentence encoder for every"),
    ([*GILE, "--share-attention"], "give --languages \\(e.g. en,pl\\), or drop them$"),
    ([*GILE, "--encoder-dim", "15", "--word-encoder", "bigru"], "^--encoder-dim 15 must be even for bigru"),
    ([*GILE, "--similarity-init", "--word-encoder", "gru"], "has no identity form: use --word-encoder/"),
    ([*GILE, "--encoder", "pretrained", "--similarity-init", "--joint-activation", "tanh"],
     "^--similarity-init starts --head gile at the cosine exactly for --joint-activation relu, not tanh"),
    ([*GILE, "--languages", "en,pl", "--language-weights", "pl=nan"],
     "^--language-weights pl=nan \\(LANG=W\\): W must be a finite number >= 0"),
    ([*GILE, "--languages", "en,pl", "--language-weights", "en=0,pl=0"],
     "^--language-weights en=0,pl=0: every language's weight is 0, so training would change nothing: give one language "
     "a weight above 0$"),
    ([*GILE, "--languages", "en,pl", "--language-weights", "xx=1"],
     "^--language-weights 'xx=1': give LANG=W; LANG one of en, pl$"),
    ([*GILE_LE, "--classification-mode", "multilabel"], "needs one label per text: use --classification-mode multiclass"),
    ([*GILE_LE, "--languages", "en,pl"], "a multilingual model \\(--languages\\) trains with --criterion multilabel"),
    # fairseq minimizes the metric unless told: gzsl_h alone kept the worst validation's checkpoint as the best
    ([*GILE, "--best-checkpoint-metric", "gzsl_h"], "^--best-checkpoint-metric gzsl_h is better higher, and fairseq "
                                                   "minimizes it: add --maximize-best-checkpoint-metric$"),
    ([*GILE, "--best-checkpoint-metric", "pl_seen_rl", "--maximize-best-checkpoint-metric"],
     "^--best-checkpoint-metric pl_seen_rl is better lower, and fairseq maximizes it: drop --maximize-best-checkpoint"),
    ([*GILE, "--best-checkpoint-metric", "loss", "--maximize-best-checkpoint-metric"], "loss is better lower"),
    # the task, the model and the criterion belong together
    ([*GILE, "--arch", "joint_transformer_tiny"],
     "^--task gile_classification trains a gile_classifier model, not --arch joint_transformer_tiny"),
    (["--criterion", "multilabel_classification"],
     "^--criterion multilabel_classification scores labels of --task gile_classification, not --task "
     "translation"),
    ([*GILE, "--criterion", "cross_entropy"], "^--task gile_classification trains with a criterion that scores labels, "
     "not --criterion cross_entropy: use --criterion gile_label_embedding_cross_entropy or multilabel_classification$"),
    ([*GILE, *LABEL_EMBEDDING], "for --task gile_classification use --criterion gile_label_embedding_cross_entropy"),
    (["--arch", "gile_pretrained"], "^--arch gile_pretrained is a gile_classifier, which only --task "
                                    "gile_classification trains \\(not --task translation\\)"),
    (["--criterion", "gile_label_embedding_cross_entropy"], "^--criterion gile_label_embedding_cross_entropy scores "
                                                            "labels of --task gile_classification"),
])
def test_each_rule_is_refused_before_fairseq_starts(flags, said):
    """The configuration of fairseq-train's command line, checked as before its main (the ``checks`` patch): through
    fairseq's registries, each section's ranges and ``validate()``."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    with pytest.raises(errors.OptionError, match=said):
        checks.validate(convert_namespace_to_omegaconf(parsed(*flags)))


@pytest.mark.parametrize("flags", [[], [*SAMPLED, "--sample-rate", "0.25"], [*LABEL_EMBEDDING], GILE, GILE_LE,
                                   [*SAMPLED, "--num-samples", "8", "--sampler", "unigram", "--unigram-alpha", "1"],
                                   [*LABEL_EMBEDDING, "--label-embedding-from", "ck.pt", "--label-embedding-beta", "0.5"],
                                   ["--output-layer", "tied"], ["--arch", "joint_lstm_tiny", "--output-layer", "softmax"],
                                   # a bias to start; the preset's own init, not given
                                   ["--output-layer", "tied", "--output-layer-init", "uniform"],
                                   ["--arch", "joint_lstm_wmt17_uniform_init", "--output-layer", "tied",
                                    "--no-output-bias"],
                                   ["--output-layer", "label", "--joint-activation", "relu"],
                                   [*GILE, "--head", "linear", "--joint-dropout", "0.5"],  # dropout acts on h there
                                   [*GILE, "--best-checkpoint-metric", "seen_avgpr", "--maximize-best-checkpoint-metric"],
                                   [*GILE_LE, "--best-checkpoint-metric", "le_hard2"],  # a criterion's: fairseq's way
                                   [*GILE, "--head", "gile_label_only", "--joint-activation", "tanh"],
                                   [*GILE, "--arch", "gile_pretrained", "--languages", "en,pl", "--encoder", "pretrained"],
                                   [*GILE, "--arch", "gile_multilingual", "--languages", "en,pl", "--encoder",
                                    "pretrained"]])  # the preset's --lexical-dim 128, unread there, was not given
def test_configurations_that_belong_together_pass(flags):
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    checks.validate(convert_namespace_to_omegaconf(parsed(*flags)))


def test_integers_beyond_64_bits_are_refused_where_the_range_sets_no_bound(capsys):
    """fairseq and torch fail on an integer above a C long ("Python int too large to convert to C long", after the
    data is loaded: --max-tokens 10**30), or loop for ever (count-params built a dictionary of --src-vocab entries)."""
    big = 10 ** 30
    assert number_problem(big, POSITIVE_INT) == ("must be positive (an integer >= 1) and at most 9223372036854775807 "
                                                 f"in magnitude (a 64-bit integer), got {big}")
    assert number_problem(options.INT64_MAX, POSITIVE_INT) is None
    assert number_problem(2 ** 64 - 1, SEED) is None  # a range with its own bound keeps it
    assert number_problem(float(big), Range(0, integer=True)) is not None  # 1e30 as an integer option too
    assert number_problem(1e30, ANY) is None  # a finite float is a float
    with pytest.raises(errors.OptionError, match=r"^--max-tokens must be positive .* at most 9223372036854775807"):
        checks.check_fairseq_options(argparse.Namespace(max_tokens=big))
    with pytest.raises(errors.OptionError, match="^--max-source-positions must be a finite number and at most"):
        checks.check_fairseq_options(argparse.Namespace(max_source_positions=big))  # an option without a range
    from fairseq_joint.cli import count_params

    for size in (str(big), "3"):
        with pytest.raises(SystemExit) as exit_:
            count_params.counts(["--arch", "joint_lstm_tiny", "--src-vocab", size])
        assert exit_.value.code == 2
        assert (f"error: argument --src-vocab: must be a dictionary size (an integer in [5, 10000000]), got {size}"
                in capsys.readouterr().err)


# ---------------------------------------------------------------------------------------------- recorded paths
def test_a_recorded_label_file_that_moved_names_the_option_that_fixes_it(tmp_path):
    labels = tmp_path / "labels.tsv"
    labels.write_text("A\tan a\n", encoding="utf-8")
    cfg = OmegaConf.create({"task": {"_name": "gile_classification", "data": "x", "label_file": str(labels),
                                     "eval_label_file": str(tmp_path / "gone.tsv")}})
    with pytest.raises(errors.MissingFileError, match=f"^--eval-label-file {tmp_path}/gone.tsv, which ck.pt was trained "
                       "with, does not exist: give fairseq-validate --eval-label-file where it is now"):
        checks.check_recorded_files("ck.pt", cfg, {}, "fairseq-validate")
    with pytest.raises(errors.MissingFileError, match="does not exist: give fairseq-joint-predict-labels "
                       "--eval-label-file where it is now$"):
        checks.check_recorded_files("ck.pt", cfg, None, "fairseq-joint-predict-labels")
    with pytest.raises(errors.MissingFileError, match="put it back, or give where it is now \\(eval_label_file= of "
                       "LabelPredictor.from_checkpoint or fairseq_joint.loaders.load_gile_model; "
                       "fairseq-joint-predict-labels --eval-label-file\\)$"):
        checks.check_recorded_files("ck.pt", cfg, None, "LabelPredictor.from_checkpoint")
    checks.check_recorded_files("ck.pt", cfg, {"eval_label_file": str(labels)}, "fairseq-validate")  # where it is now
    with pytest.raises(errors.MissingFileError, match=f"^--label-file {tmp_path}/none.tsv: no such file"):
        checks.check_recorded_files("ck.pt", cfg, {"label_file": str(tmp_path / "none.tsv")}, "fairseq-validate")


def test_export_label_embedding_names_dict_when_the_recorded_data_moved(tmp_path):
    """The data directory a translation checkpoint records is gone: --dict, not a 'dict.None.txt' that is not here."""
    from fairseq_joint.cli.export_label_embedding import target_dictionary_path

    with pytest.raises(common.CommandError, match=f"^ck.pt's target dictionary {tmp_path}/gone/dict.TGT.txt is not "
                       "here: pass --dict with where dict.TGT.txt is now$"):
        target_dictionary_path({"cfg": {"task": {"data": str(tmp_path / "gone")}}}, "ck.pt")
    (tmp_path / "dict.de.txt").write_text("Haus 3\n")
    assert target_dictionary_path({"cfg": {"task": {"data": str(tmp_path), "target_lang": "de"}}}, "ck.pt") == str(
        tmp_path / "dict.de.txt")


def test_a_recorded_sentence_encoder_that_moved_names_the_option_of_each_route(tmp_path):
    """--encoder pretrained/hybrid: the checkpoint records the sentence encoder's directory; fairseq-validate has no
    --pretrained-encoder (its model options come from --model-overrides), the Python API takes pretrained_encoder=."""
    gone, there = tmp_path / "enc", tmp_path / "moved"
    there.mkdir()
    cfg = OmegaConf.create({"task": {"_name": "gile_classification", "data": "x"},
                            "model": {"_name": "gile_classifier", "encoder": "pretrained", "pretrained_encoder": str(gone)}})
    with pytest.raises(errors.MissingFileError, match=f"^--pretrained-encoder {gone}, which ck.pt was trained with, "
                       "does not exist: give fairseq-validate --model-overrides "
                       "\"{'pretrained_encoder': 'WHERE IT IS NOW'}\"$"):
        checks.check_recorded_files("ck.pt", cfg, {}, "fairseq-validate")
    with pytest.raises(errors.MissingFileError, match="give fairseq-joint-predict-labels --pretrained-encoder where it "
                       "is now$"):
        checks.check_recorded_files("ck.pt", cfg, None, "fairseq-joint-predict-labels")
    with pytest.raises(errors.MissingFileError, match="\\(pretrained_encoder= of LabelPredictor.from_checkpoint"):
        checks.check_recorded_files("ck.pt", cfg, None, "LabelPredictor.from_checkpoint")
    checks.check_recorded_files("ck.pt", cfg, {"pretrained_encoder": str(there)}, "fairseq-validate")  # where it is now
    with pytest.raises(errors.MissingFileError, match=f"^--pretrained-encoder {gone}: no such directory"):
        checks.check_recorded_files("ck.pt", cfg, {"pretrained_encoder": str(gone)}, "fairseq-validate")
    cfg.model.pretrained_encoder = ""  # --encoder wan records none
    checks.check_recorded_files("ck.pt", cfg, None, "fairseq-validate")
    # a WAN model that recorded one (trained before such a --pretrained-encoder was refused) never reads it: loads
    cfg.model.encoder, cfg.model.pretrained_encoder = "wan", str(gone)
    for command in ("fairseq-validate", "fairseq-joint-predict-labels", "LabelPredictor.from_checkpoint"):
        checks.check_recorded_files("ck.pt", cfg, None, command)


# ---------------------------------------------------------------------------------------------- files that are not checkpoints
def test_a_file_that_is_no_fairseq_checkpoint_is_named_as_such(tmp_path, monkeypatch):
    from fairseq import checkpoint_utils

    plain = str(tmp_path / "plain.pt")
    torch.save({"weight": torch.zeros(2)}, plain)  # a state_dict: fairseq's upgrade failed with KeyError 'best_loss'
    with pytest.raises(errors.CheckpointError, match=f"^{plain} is not a fairseq checkpoint \\(torch reads a dict "
                       "with the keys 'weight'"):
        checkpoint_utils.load_checkpoint_to_cpu(plain)
    legacy = str(tmp_path / "legacy.pt")
    with open(legacy, "wb") as f:  # torch's legacy (non-zip) format: unsafe, not "truncated"
        pickle.dump({"model": Evil()}, f, protocol=2)
    with pytest.raises(errors.CheckpointError, match=f"^{legacy} is not a checkpoint torch can load safely"):
        checkpoint_utils.load_checkpoint_to_cpu(legacy)
    monkeypatch.setattr(sys, "argv", ["fairseq-train", "--save-dir", str(tmp_path / "text.pt")])
    (tmp_path / "text.pt").write_text("")
    found = errors.refusal(raised(os.makedirs, str(tmp_path / "text.pt" / "sub")))
    assert str(found) == f"--save-dir {tmp_path}/text.pt is a file, not a directory: give a directory"
    # fairseq's own assertions and ValueErrors that name an option: refusals of the command
    import fairseq.checkpoint_utils as in_fairseq

    for kind in ("AssertionError", "ValueError"):
        err = raised(exec, compile(f"raise {kind}('--sampling requires --nbest to be equal to --beam')",
                                   in_fairseq.__file__, "exec"))
        assert str(errors.refusal(err)) == ("--sampling requires --nbest to be equal to --beam: change the options "
                                            "(see fairseq-train --help)")
    # a sentence longer than --max-tokens or the model's positions (fairseq's assertion, its Exception); --print-step
    too_long = raised(exec, compile("raise AssertionError('Sentences lengths should not exceed max_tokens=10')",
                                    in_fairseq.__file__, "exec"))
    assert str(errors.refusal(too_long)) == ("--max-tokens 10 (--max-tokens-valid where given) is below the length "
                                             "of a sentence of the data, in subwords with </s>: raise it")
    positions = "Size of sample #3 is invalid (=(2, 6)) since max_positions=(5, 5), skip this example with " \
                "--skip-invalid-size-inputs-valid-test"
    assert str(errors.refusal(raised(exec, compile(f"raise Exception({positions!r})", in_fairseq.__file__, "exec")))) \
        == f"a sentence of the data is longer than the model's positions ({positions}), or give a split of shorter " \
           "sentences"
    multi = raised(exec, compile("raise ValueError('MultilingualTranslationTask requires a FairseqMultiModel "
                                 "architecture')", in_fairseq.__file__, "exec"))
    assert str(errors.refusal(multi)).endswith("for several language pairs use --task translation_multi_simple_epoch")
    import fairseq_cli.generate as in_generate

    namespace, cfg = {}, OmegaConf.create({"generation": {"print_step": True}})
    exec(compile("def _main(cfg):\n    hypo = {}\n    hypo['steps']\n", in_generate.__file__, "exec"), namespace)
    assert str(errors.refusal(raised(namespace["_main"], cfg))).startswith("--print-step prints the steps of an "
                                                                            "iterative refinement model's decoding")
    cfg.generation.print_step = False  # a KeyError('steps') of something else: a bug's, kept
    assert errors.refusal(raised(namespace["_main"], cfg)) is None
    # a --best-checkpoint-metric validation does not log: fairseq's KeyError after the first epoch, named
    from fairseq_cli import train as fairseq_train

    monkeypatch.setattr(in_fairseq.save_checkpoint, "best", 1.0, raising=False)
    cfg = OmegaConf.create({"checkpoint": {"best_checkpoint_metric": "bleu", "maximize_best_checkpoint_metric": True}})
    err = raised(fairseq_train.get_valid_stats, cfg, types.SimpleNamespace(get_num_updates=lambda: 3),
                 {"loss": 2.0, "ppl": 4.0}, True)
    assert str(errors.refusal(err)) == ("--best-checkpoint-metric bleu: validation logs no such figure (it logged "
                                        "loss, ppl; this epoch was not saved): give one of those")
    joined = errors.refusal(raised(exec, compile("raise ValueError('--share-all-embeddings requires a joined "
                                                 "dictionary')", in_fairseq.__file__, "exec")))
    assert str(joined).endswith("joined dictionary: binarize DATA with fairseq-preprocess --joined-dictionary, or drop "
                                "--share-all-embeddings")  # the fix, where fairseq's message names none
    # by type and what it says alone (the plugin refuses with Refusals, never a ValueError): the same anywhere
    assert str(errors.refusal(raised(exec, compile("raise ValueError('--x y')", __file__, "exec")))).startswith("--x y")
    assert errors.refusal(raised(exec, compile("raise ValueError('x --y')", in_fairseq.__file__, "exec"))) is None
    text = tmp_path / "text.pt"
    text.write_text("not 1\n")  # torch's unpickler: "Unsupported operand 110", which is no pickle's (a dictionary)
    with pytest.raises(errors.CheckpointError) as refused:
        checkpoint_utils.load_checkpoint_to_cpu(str(text))
    assert str(refused.value) == (f"{text} is not a checkpoint (neither the zip archive nor the pickle torch saves): "
                                  "give a checkpoint written by fairseq-train (checkpoint_*.pt)")  # not: delete it
    for start in (b"", b"PK\x03\x04\x14\x00", pickle.PROTO + b"\x02}q"):  # an empty file, a zip, a pickle cut short
        text.write_bytes(start)
        with pytest.raises(errors.CheckpointError, match=f"^{text} is truncated \\(torch cannot read its zip archive"):
            checkpoint_utils.load_checkpoint_to_cpu(str(text))
    monkeypatch.setattr(sys, "argv", ["fairseq-generate", "--path", str(tmp_path)])
    found = errors.refusal(raised(open, str(tmp_path)))
    assert isinstance(found, errors.InputError) and str(found) == f"--path {tmp_path} is a directory: give a file"


# ---------------------------------------------------------------------------------------------- resume
def test_a_resume_into_another_model_names_the_options_that_differ():
    from fairseq_joint import resume

    saved = {"optimization": {"lr": [0.1], "max_update": 3}, "criterion": {"_name": "cross_entropy"},
             "model": argparse.Namespace(arch="joint_transformer_tiny", joint_dim=24, lr=[0.1], max_update=3)}
    now = {"optimization": {"lr": [0.2], "max_update": 9}, "criterion": {"_name": "cross_entropy"},
           "model": argparse.Namespace(arch="joint_lstm_tiny", joint_dim=24, lr=[0.2], max_update=9)}
    # the model's options only: a legacy model's Namespace repeats --lr and --max-update, which are not the model's
    assert resume.changed_options(saved, now, resume.MODEL_GROUPS) == [
        "--arch joint_lstm_tiny (checkpoint: joint_transformer_tiny)"]
    assert len(resume.changed_options(saved, now)) == 3


def test_fairseq_preprocess_text_must_pair_up(tmp_path):
    for name, lines in (("train.en", 3), ("train.de", 3), ("valid.en", 2), ("valid.de", 1), ("test.en", 0),
                        ("test.de", 0)):
        (tmp_path / name).write_text("a b\n" * lines, encoding="utf-8")
    args = argparse.Namespace(source_lang="en", target_lang="de", only_source=False, trainpref=str(tmp_path / "train"),
                              validpref=None, testpref=None, srcdict=None, tgtdict=None)
    checks.check_parallel_text(args)
    args.validpref = f"{tmp_path}/train,{tmp_path}/valid"
    with pytest.raises(errors.InputError, match=f"^--validpref {tmp_path}/valid is misaligned: {tmp_path}/valid.en has "
                       f"2 lines but {tmp_path}/valid.de has 1"):
        checks.check_parallel_text(args)
    args.validpref, args.testpref = None, str(tmp_path / "test")
    with pytest.raises(errors.InputError, match=f"^--testpref {tmp_path}/test: {tmp_path}/test.en is empty"):
        checks.check_parallel_text(args)
    args.testpref = str(tmp_path / "none")
    with pytest.raises(errors.MissingFileError, match=f"^--testpref {tmp_path}/none: {tmp_path}/none.en: no such file"):
        checks.check_parallel_text(args)


def test_the_patch_switch_takes_all_none_or_the_names_to_keep(monkeypatch):
    """FAIRSEQ_JOINT_PATCHES: unset or 1 every change, 0 none, names only those; a name of no change is refused."""
    every = {p.name for p in fairseq_patches.PATCHES}
    for value, expected in ((None, every), ("1", every), ("0", set()),
                            (" safe_checkpoints, exact_scores ", {"safe_checkpoints", "exact_scores"})):
        if value is None:
            monkeypatch.delenv(fairseq_patches.ENV, raising=False)
        else:
            monkeypatch.setenv(fairseq_patches.ENV, value)
        assert fairseq_patches.chosen() == expected
        assert fairseq_patches.enabled() == bool(expected)
        assert fairseq_patches.enabled("checks") == ("checks" in expected)
    monkeypatch.setenv(fairseq_patches.ENV, "safe_checkpoints,exact_score")
    with pytest.raises(errors.OptionError, match=r"^FAIRSEQ_JOINT_PATCHES=safe_checkpoints,exact_score: "
                                                 r"'exact_score' is no change of fairseq_joint's: give 1 \(all\), 0 "
                                                 r"\(none\) or names of safe_checkpoints, one_line_errors, "):
        fairseq_patches.chosen()


def test_a_multilingual_checkpoint_is_scored_in_the_languages_it_was_trained_on():
    """check_trained_languages: an override of --languages of another set, or of --label-language (also nested as
    {'task': {...}}), is refused; the same set in another order passes where the checkpoint records its label
    language, and is refused where it does not (an older checkpoint: the first language would become another)."""
    recorded = OmegaConf.create({"task": {"languages": "en,pl", "label_language": "en"}})
    older = OmegaConf.create({"task": {"languages": "en,pl", "label_language": ""}})
    mono = OmegaConf.create({"task": {"data": "bin"}})
    for cfg, overrides in ((recorded, {"languages": "pl,en"}), (recorded, {"label_language": "en"}),
                           (older, {"languages": "pl,en", "label_language": "en"}), (mono, {"beam": 3})):
        checks.check_trained_languages("ck.pt", cfg, overrides)
    for cfg, overrides, said in (
            (recorded, {"languages": "pl"}, "--languages pl: ck.pt was trained on en,pl: give those, in any order"),
            (recorded, {"task": {"languages": "en,de"}}, "--languages en,de: ck.pt was trained on en,pl"),
            (recorded, {"label_language": "pl"}, "--label-language pl: ck.pt embeds the label descriptions as en, the "
                                                 "language its head was trained with: drop --label-language"),
            (older, {"languages": "pl,en"}, "--languages pl,en: ck.pt embeds the label descriptions as en, the first "
                                            "of the languages it was trained on: give --label-language en too"),
            (mono, {"languages": "en,pl"}, "--languages en,pl: ck.pt was trained on one directory (no --languages)")):
        with pytest.raises(errors.OptionError) as refused:
            checks.check_trained_languages("ck.pt", cfg, overrides)
        assert str(refused.value).startswith(said), (overrides, str(refused.value))


def test_several_processes_on_the_cpu_need_one_process_per_rank(monkeypatch):
    """--distributed-world-size above 1 on the CPU without the options of one process per rank is refused; on a
    machine with GPUs only with --cpu (fairseq's default world size is their number there: one process is the first
    fix), and under torchrun fairseq sets the init method and --distributed-no-spawn itself."""
    def cfg(world_size=2, cpu=True, **given):
        dt = {"distributed_world_size": world_size, "distributed_no_spawn": False, "distributed_init_method": None,
              "distributed_backend": "nccl", "ddp_backend": "pytorch_ddp", **given}
        return OmegaConf.create({"common": {"cpu": cpu, "tpu": False}, "distributed_training": dt})

    ready = dict(distributed_no_spawn=True, distributed_init_method="tcp://127.0.0.1:1", distributed_backend="gloo",
                 ddp_backend="legacy_ddp")
    for gpus in (0, 2):
        monkeypatch.setattr(torch.cuda, "device_count", lambda gpus=gpus: gpus)
        with pytest.raises(errors.OptionError, match=r"^--distributed-world-size 2 on the CPU: give "
                                                     r"--distributed-world-size 1 for one process .* \(missing: "
                                                     r"--distributed-no-spawn, --distributed-init-method tcp://HOST:PORT"
                                                     r", --distributed-backend gloo, --ddp-backend legacy_ddp; "):
            checks.check_processes_without_gpus(cfg())
        checks.check_processes_without_gpus(cfg(**ready))
        checks.check_processes_without_gpus(cfg(world_size=1))
    checks.check_processes_without_gpus(cfg(cpu=False))  # GPUs: fairseq's own way
    for name, value in zip(checks.TORCHRUN_ENV, ("127.0.0.1", "1", "2", "0")):
        monkeypatch.setenv(name, value)
    checks.check_processes_without_gpus(cfg(distributed_backend="gloo", ddp_backend="legacy_ddp"))  # torchrun, GPUs
    with pytest.raises(errors.OptionError, match=r"\(missing: --distributed-backend gloo; docs/gpu.md\)$"):
        checks.check_processes_without_gpus(cfg(ddp_backend="no_c10d"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)  # torchrun without GPUs: fairseq divided by 0 GPUs
    with pytest.raises(errors.OptionError, match=r"\(missing: --distributed-no-spawn, --distributed-init-method"):
        checks.check_processes_without_gpus(cfg(distributed_backend="gloo", ddp_backend="legacy_ddp"))
