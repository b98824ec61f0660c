"""Every change the plugin makes to fairseq's behaviour is in fairseq_joint/fairseq_patches.py, and nothing else:
importing the plugin under fairseq-train changes exactly the functions its table lists (and, with
FAIRSEQ_JOINT_PATCHES=0, none), fairseq-train and fairseq-generate work with the changes off, and the exception hook
prints a Refusal as one line while a bug's ValueError raised inside the package keeps its traceback."""

import json
import re
import sys
from pathlib import Path

import pytest
from conftest import REPO, SMALL_TRANSFORMER, TRAIN_FAST, USER_DIR, binarize, cli, state, valid_line, write_slice

OFF = {"FAIRSEQ_JOINT_PATCHES": "0"}
#: every change off but the allowlist of fairseq's checkpoint classes (torch's weights_only check stays on)
ALLOWLIST_ONLY = {"FAIRSEQ_JOINT_PATCHES": "safe_checkpoints"}

#: run in a child process as ``fairseq-train`` would import the plugin: fairseq's modules first, then fairseq_joint;
#: prints which (owner, attribute) pairs the import rebound, and what fairseq_patches says it wrapped
CHANGES = r"""
import argparse, importlib, inspect, json, logging, sys, warnings
sys.argv = ["fairseq-train"]
import fairseq, fairseq.options, fairseq.checkpoint_utils, fairseq.distributed.utils, fairseq.file_io, fairseq.tasks, fairseq.trainer
import fairseq.sequence_scorer, fairseq.hub_utils, fairseq.data.encoders
import fairseq_cli.train, fairseq_cli.preprocess, fairseq_cli.interactive

def snapshot():
    out = {}
    for module in set(sys.modules.values()):  # each once: fairseq aliases some (fairseq.distributed_utils)
        name = getattr(module, "__name__", "")
        if not name.startswith(("fairseq.", "fairseq_cli")):
            continue
        for attr, value in list(vars(module).items()):
            out[(name, attr)] = value
            if inspect.isclass(value) and value.__module__ == name:
                for key, member in list(vars(value).items()):
                    out[(name, attr + "." + key)] = member
    out[("sys", "excepthook")] = sys.excepthook
    out[("argparse", "ArgumentParser.error")] = argparse.ArgumentParser.__dict__["error"]
    return out

before = snapshot()
filters, handlers = list(warnings.filters), list(logging.getLogger().handlers)
import fairseq_joint
from fairseq_joint import fairseq_patches
after = snapshot()
changed = sorted(f"{m}:{a}" for (m, a), v in before.items() if after.get((m, a)) is not v)
wrapped = fairseq_patches.wrapped()
for name in reversed(wrapped):  # the last wrapped first: two wrap one function
    fairseq_patches.undo(name)
restored = snapshot()
print(json.dumps({"changed": changed, "wrapped": wrapped,
                  "undone": sorted(f"{m}:{a}" for (m, a), v in before.items() if restored.get((m, a)) is not v),
                  "filters_added": len(warnings.filters) - len(filters),
                  "handlers_changed": list(logging.getLogger().handlers) != handlers}))
"""

#: where each wrap target lives (a class's methods under the module that defines the class)
WRAPPED_AT = {
    "checks": "fairseq.distributed.utils:call_main",
    "bf16_on_cuda": "fairseq.distributed.utils:call_main",
    "atomic_copy": "fairseq.file_io:PathManager.copy",
    "whole_binaries": "fairseq.data.indexed_dataset:MMapIndexedDataset._do_init",
    "checksums": "fairseq.checkpoint_utils:torch_persistent_save",
    "verified_load": "fairseq.checkpoint_utils:load_checkpoint_to_cpu",
    "checkpoint_kind": "fairseq.checkpoint_utils:load_model_ensemble_and_task",
    "trained_criterion": "fairseq.checkpoint_utils:load_model_ensemble_and_task",
    "resume": "fairseq.tasks.fairseq_task:FairseqTask.get_batch_iterator",
    "hub_options": "fairseq.hub_utils:GeneratorHubInterface.generate",
    "readable_subwords": "fairseq.data.encoders:build_bpe",
    "exact_scores": "fairseq.sequence_scorer:SequenceScorer.generate",
    "resume_changes": "fairseq.trainer:Trainer.load_checkpoint",
    "frozen_criterion": "fairseq.trainer:Trainer.state_dict",
    "one_line_errors": "sys:excepthook",
    "one_line_usage": "argparse:ArgumentParser.error",
    "option_numbers": "fairseq.options:parse_args_and_arch",
    "full_help": "fairseq.options:parse_args_and_arch",
    "decay_updates": "fairseq.options:parse_args_and_arch",
    "whole_splits": "fairseq.options:parse_args_and_arch",
    "parallel_text": "fairseq_cli.preprocess:main",
    "utf8_input": "fairseq_cli.interactive:buffered_read",
}


def import_changes(env=None) -> dict:
    return json.loads(cli(sys.executable, "-c", CHANGES, env=env).stdout.splitlines()[-1])


def test_importing_the_plugin_changes_exactly_what_the_table_lists():
    from fairseq_joint import fairseq_patches

    names = [p.name for p in fairseq_patches.PATCHES]
    assert set(WRAPPED_AT) <= set(names) and len(set(names)) == len(names)
    for patch in fairseq_patches.PATCHES:
        attribute = patch.target.split(":")[1]
        if patch.name in WRAPPED_AT:  # the table names the function that is wrapped
            assert WRAPPED_AT[patch.name].endswith(":" + attribute), patch
    out = import_changes()
    assert out["changed"] == sorted(set(WRAPPED_AT.values())), out
    assert sorted(out["wrapped"]) == sorted(WRAPPED_AT), out
    assert out["undone"] == [], out  # undo puts back the very objects fairseq had
    assert out["filters_added"] > 0  # quiet_notices, under fairseq-* programs

    off = import_changes(OFF)
    assert off == {"changed": [], "wrapped": [], "undone": [], "filters_added": 0, "handlers_changed": False}, off


def test_the_table_is_in_the_docstring_and_the_docs():
    from fairseq_joint import fairseq_patches

    page = (REPO / "docs" / "fairseq-patches.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(" `"): line for line in page.splitlines() if line.startswith("| `")}
    assert sorted(rows) == sorted(p.name for p in fairseq_patches.PATCHES)
    for patch in fairseq_patches.PATCHES:
        assert re.search(rf"^{patch.name}\s", fairseq_patches.__doc__, re.M), patch.name
        row = rows[patch.name]
        assert patch.target.split(":")[1].split(".")[-1] in row.split("|")[2], row  # the same target
        assert all(row.split("|")[i].strip() for i in (3, 4, 5)), row  # what it changes, why, the upstream issue
    assert "FAIRSEQ_JOINT_PATCHES=0" in page
    assert "fairseq-patches.md" in (REPO / "docs" / "commands.md").read_text(encoding="utf-8")


def test_with_the_changes_off_fairseq_trains_and_decodes_as_it_does_without_the_plugin(tiny_bin, tmp_path):
    train = [tiny_bin, "--user-dir", USER_DIR, "--arch", "joint_transformer", "--output-layer", "joint",
             "--joint-dim", 12, *SMALL_TRANSFORMER, *TRAIN_FAST, "--max-update", 3, "--save-dir", tmp_path]
    cli("fairseq-train", *train, env=OFF)
    saved = state(tmp_path / "checkpoint_last.pt")
    assert saved["optimizer_history"][-1]["num_updates"] == 3
    assert "fairseq_joint_checksums" not in saved  # fairseq's own torch_persistent_save wrote it
    # torch >= 2.6 refuses fairseq's checkpoints without the plugin's allowlist, as without the plugin; keeping only
    # that change (safe_checkpoints) loads them with the weights_only check on and leaves fairseq as it is
    refused = cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", tmp_path / "checkpoint_last.pt",
                  "--beam", 2, "--max-len-b", 5, "--required-batch-size-multiple", 1, env=OFF, check=False)
    assert refused.returncode != 0 and "weights_only" in refused.stderr
    out = cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", tmp_path / "checkpoint_last.pt",
              "--beam", 2, "--max-len-b", 5, "--required-batch-size-multiple", 1, env=ALLOWLIST_ONLY)
    assert len([line for line in out.stdout.splitlines() if line.startswith("H-")]) == 40
    # --score-reference: fairseq's scores over the full logits, those of the exact softmax in chunks (exact_scores)
    scored = [cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", tmp_path / "checkpoint_last.pt",
                  "--score-reference", "--required-batch-size-multiple", 1, env=env).stdout
              for env in (ALLOWLIST_ONLY, None)]
    theirs, ours = ([line for line in out.splitlines() if line.startswith(("H-", "P-"))] for out in scored)
    assert len(theirs) == 80 and len(ours) == 80
    for a, b in zip(theirs, ours):
        x, y = (re.findall(r"-?\d+\.\d+", line) for line in (a, b))
        assert a.split("\t")[0] == b.split("\t")[0] and len(x) == len(y)
        assert all(abs(float(p) - float(q)) <= 2e-4 for p, q in zip(x, y)), (a, b)
    # the plugin's checks before fairseq starts are off: a refusal comes where fairseq meets it (building the
    # criterion, after the task and model), after fairseq's traceback
    proc = cli("fairseq-train", *train, "--criterion", "sampled_cross_entropy", "--num-samples", 10 ** 5, check=False,
               env=OFF)
    assert proc.returncode == 1 and "Traceback (most recent call last)" in proc.stderr
    assert "fairseq_joint.errors.OptionError: --num-samples 100000 is larger than the" in proc.stderr
    assert "[de] dictionary:" in proc.stdout  # fairseq set the task up first: no check before call_main


def test_generate_and_validate_take_every_sentence_of_a_split(tiny_bin, joint_checkpoint, tmp_path):
    """fairseq's default --required-batch-size-multiple 8 dropped the last partial batch of a split (fairseq #5036):
    of 45 test sentences fairseq-generate translated 40. With the whole_splits change it translates 45, and
    fairseq-validate scores them as with the option at 1; given, the option is fairseq's."""
    text = write_slice(tmp_path / "text", 300, 45)
    data = binarize(text, tmp_path / "bin", "--srcdict", tiny_bin / "dict.en.txt", "--tgtdict", tiny_bin / "dict.de.txt")
    generate = ["fairseq-generate", data, "--user-dir", USER_DIR, "--path", joint_checkpoint, "--beam", 1,
                "--max-len-b", 3, "--batch-size", 16]
    without = {"FAIRSEQ_JOINT_PATCHES": "safe_checkpoints"}  # fairseq as it is, its checkpoints loaded safely
    for extra, env, translated in (([], None, 45), (["--required-batch-size-multiple", 8], None, 40), ([], without, 40)):
        out = cli(*generate, *extra, env=env).stdout
        assert len(re.findall(r"^H-\d+", out, re.M)) == translated, (extra, env)
    validate = ["fairseq-validate", data, "--user-dir", USER_DIR, "--task", "translation", "--path", joint_checkpoint,
                "--batch-size", 16, "--valid-subset", "test"]
    scored = [valid_line(cli(*validate, *extra).stdout, "test") for extra in ([], ["--required-batch-size-multiple", 1],
                                                                           ["--required-batch-size-multiple", 8])]
    assert scored[0] == scored[1] and scored[0]["loss"] != scored[2]["loss"], scored


#: --help of each fairseq command, given a task, model or criterion: (command, choices, the plugin's options it lists,
#: the group fairseq lists the first of them in)
HELP = [
    ("fairseq-train", ["--arch", "joint_transformer", "--criterion", "sampled_cross_entropy"],
     ["--output-layer", "--joint-dim", "--vocab-chunk-size", "--sample-rate"], "Model-specific configuration"),
    ("fairseq-train", ["--task", "gile_classification", "--arch", "gile_classifier", "--criterion",
                       "multilabel_classification"], ["--head", "--seen-score-offset", "--encoder"],
     "Model-specific configuration"),
    ("fairseq-generate", ["--criterion", "sampled_cross_entropy"], ["--vocab-chunk-size"], "options"),
    ("fairseq-interactive", ["--task", "gile_classification"], ["--seen-score-offset", "--eval-label-file"], "options"),
    ("fairseq-validate", ["--task", "gile_classification", "--criterion", "multilabel_classification"],
     ["--seen-score-offset"], "options"),
]


@pytest.mark.parametrize("command,choices,listed,group", HELP, ids=[f"{h[0]}-{h[1][1]}" for h in HELP])
def test_help_lists_the_options_of_the_choices_given(command, choices, listed, group):
    out = cli(command, "--user-dir", USER_DIR, *choices, "--help").stdout
    headings = re.findall(r"^(\S[^\n]*):$", out, re.M)
    options = {m.group(2): heading for heading, m in (
        (h, m) for h, section in zip(headings, re.split(r"^\S[^\n]*:$", out, flags=re.M)[1:])
        for m in re.finditer(r"^  (-\w, )?(--[\w-]+)", section, re.M))}
    assert all(option in options for option in listed), (listed, out[-2000:])
    assert options[listed[0]] == group
    # without the choices, fairseq's own help, as without the change
    assert listed[0] not in cli(command, "--user-dir", USER_DIR, "--help").stdout
    off = cli(command, "--user-dir", USER_DIR, *choices, "--help", env=OFF).stdout
    assert listed[0] not in off and off.startswith(f"usage: {command}")


#: a fairseq-* program whose plugin code raises: a bug's ValueError (the unigram sampler's count check, an internal
#: invariant) or a user's mistake (more negatives than the vocabulary holds)
RAISES = r"""
import sys
sys.argv = ["fairseq-train"]
import fairseq.checkpoint_utils
import fairseq_joint
from fairseq_joint.modules.sampling import CandidateSampler

if "{case}" == "bug":
    CandidateSampler(10, "unigram", sample_rate=0.5, counts=[1.0, 2.0])
try:
    CandidateSampler(10, "uniform", num_samples=500)
except Exception as err:
    raise RuntimeError("fairseq wrapped it") from err  # fairseq chains load errors in its own: still one line
"""


def test_a_bug_keeps_its_traceback_and_a_refusal_is_one_line():
    bug = cli(sys.executable, "-c", RAISES.format(case="bug"), check=False)
    assert bug.returncode == 1 and "Traceback (most recent call last)" in bug.stderr, bug.stderr
    assert bug.stderr.strip().splitlines()[-1] == ("ValueError: the unigram sampler needs one count per vocabulary id "
                                                  "(the dictionary's counts)")
    assert str(Path("fairseq_joint", "modules", "sampling.py")) in bug.stderr  # raised inside the package
    refused = cli(sys.executable, "-c", RAISES.format(case="refusal"), check=False)
    assert refused.returncode == 2 and refused.stderr.splitlines() == [
        "error: --num-samples 500 is larger than the 10 samplable ids of the vocabulary (|V| = 10); use at most 10, or "
        "--sample-rate"], refused.stderr
