"""One error style for every command and tool: a refusal is exactly one line ``error: <what>, <the fix>`` on
stderr naming the bad file or option, exit status 2; argparse mistakes too; a traceback only with
FAIRSEQ_JOINT_DEBUG=1."""

import shutil

import pytest
from conftest import GILE_FAST, GILE_TRAIN, SAMPLE, USER_DIR, cli, python_script

from fairseq_joint.errors import MissingFileError


def bad_inputs(tmp):
    """The files the cases below refer to (``{tmp}`` in their arguments)."""
    (tmp / "bad.jsonl").write_text('{"text": "an apple", "labels": ["A"]\n')
    (tmp / "bad.tsv").write_text("A\tapples\nB has no tab\n")
    (tmp / "hyp.txt").write_text("a b\nc d\n")
    (tmp / "ref.txt").write_text("a b\nc d\ne f\n")


COMMANDS = {
    "fairseq-joint-count-params": (["{tmp}/missing.pt"], "missing.pt"),
    "fairseq-joint-preprocess-gile": (["--train", "{tmp}/bad.jsonl", "--destdir", "{tmp}/out"], "bad.jsonl:1"),
    "fairseq-joint-predict-labels": (["--checkpoint", "{tmp}/missing.pt", "--labels", str(SAMPLE / "labels.tsv"),
                                      "--topk", "0"], "--topk must be positive (an integer >= 1), got 0"),
    "fairseq-joint-export-label-embedding": (["{tmp}/missing.pt"], "missing.pt"),
    "fairseq-joint-score": (["--hyp", "{tmp}/hyp.txt", "--ref", "{tmp}/ref.txt"], "hyp.txt"),
    "fairseq-joint-word-vectors": (["--data", "{tmp}/bad.jsonl", "--output", "{tmp}/v.txt"], "bad.jsonl:1"),
    "fairseq-joint-label-text": (["--labels", "{tmp}/bad.tsv", "--output", "{tmp}/x.tsv"], "bad.tsv:2"),
    "fairseq-joint-average-checkpoints": (["--inputs", "{tmp}/bad.tsv", "--output", "{tmp}/a.pt"],
                                          "bad.tsv is not a checkpoint"),
}

TOOLS = {
    "examples/wmt17/results_table.py": (["--baseline", "{tmp}/no-run", "{tmp}/no-run"], "no-run"),
    "examples/wmt17/plot_bleu_vs_dj.py": (["{tmp}/no-run", "--output", "{tmp}/p.png"], "no-run"),
    "examples/wmt17/frequency_bins.py": (["--train-tgt", "{tmp}/missing.txt", "--ref", "{tmp}/ref.txt", "--hyp",
                                          "{tmp}/hyp.txt"], "missing.txt"),
    "examples/wmt17/nearest_neighbours.py": (["{tmp}/missing.pt", "--dict", "{tmp}/ref.txt"], "missing.pt"),
    "examples/wmt17/reference_bins.py": (["--data-bin", "{tmp}", "--checkpoint", "{tmp}/missing.pt"], "--train-tgt"),
    "examples/gile/gile_study.py": (["--data", "{tmp}", "--workdir", "{tmp}/w", "--labels", "{tmp}/none.tsv"],
                                    "none.tsv"),
    "examples/gile/label_frequency_bins.py": (["--data", "{tmp}", "--checkpoint", "{tmp}/missing.pt", "--bins", "5,2"],
                                              "--bins"),
}


def assert_one_error_line(proc, names):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert names in lines[0]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_command_refuses_bad_input_in_one_line(command, tmp_path):
    bad_inputs(tmp_path)
    args, names = COMMANDS[command]
    assert_one_error_line(cli(command, *[a.format(tmp=tmp_path) for a in args], check=False), names)


@pytest.mark.parametrize("tool", list(TOOLS))
def test_a_recipe_tool_refuses_bad_input_in_one_line(tool, tmp_path):
    bad_inputs(tmp_path)
    args, names = TOOLS[tool]
    assert_one_error_line(python_script(tool, *[a.format(tmp=tmp_path) for a in args], check=False), names)


@pytest.mark.parametrize("tool, args, names", [  # a negative --top-k failed in torch.topk, --num-queries 0 in indexing
    ("examples/wmt17/nearest_neighbours.py", ["{tmp}/missing.pt", "--dict", "{tmp}/ref.txt", "--top-k", "-1"],
     "argument --top-k: must be positive (an integer >= 1), got -1"),
    ("examples/wmt17/nearest_neighbours.py", ["{tmp}/missing.pt", "--dict", "{tmp}/ref.txt", "--num-queries", "0"],
     "argument --num-queries: must be positive"),
    ("examples/wmt17/reference_bins.py", ["--data-bin", "{tmp}", "--checkpoint", "{tmp}/missing.pt", "--max-tokens",
                                          "0"], "argument --max-tokens: must be positive"),
])
def test_a_recipe_tools_numbers_are_checked_as_it_parses_them(tool, args, names, tmp_path):
    bad_inputs(tmp_path)
    assert_one_error_line(python_script(tool, *[a.format(tmp=tmp_path) for a in args], check=False), names)


@pytest.mark.parametrize("command, args, names", [
    ("fairseq-joint-label-text", ["--labels", "x.tsv"], "--output"),  # our parser
    ("fairseq-joint-count-params", ["--arch", "joint_lstm_tiny", "--no-such-flag"], "--no-such-flag"),  # fairseq's
    ("fairseq-joint-word-vectors", ["--text", "x.txt", "--output", "v.txt", "--workers", "99999999999"],
     "argument --workers: must be an integer in [1, 1024]"),  # gensim's threads exhausted the memory
])
def test_command_line_mistakes_are_one_line_too(command, args, names):
    assert_one_error_line(cli(command, *args, check=False), names)


def test_debug_shows_the_traceback(tmp_path):
    proc = cli("fairseq-joint-label-text", "--labels", tmp_path / "none.tsv", "--output", tmp_path / "x.tsv",
               check=False, env={"FAIRSEQ_JOINT_DEBUG": "1"})
    assert proc.returncode == 2 and "Traceback (most recent call last)" in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("error: label file ") and "none.tsv" in proc.stderr.splitlines()[-1]


def test_a_label_file_the_checkpoint_records_that_moved_names_the_option(gile_bin, tmp_path):
    """A checkpoint records its --label-file / --eval-label-file absolute; when one has moved, fairseq-validate's
    refusal names the option that says where it is now, and the plugin's loader takes it as a keyword."""
    from fairseq_joint.loaders import load_gile_model

    labels = tmp_path / "eval_labels.tsv"
    shutil.copyfile(gile_bin / "labels.tsv", labels)
    cli("fairseq-train", gile_bin, *GILE_TRAIN, "--criterion", "multilabel_classification", "--eval-label-file", labels,
        "--max-update", "1", "--save-dir", tmp_path / "ck", "--disable-validation", *GILE_FAST)
    moved = tmp_path / "moved.tsv"
    labels.rename(moved)
    checkpoint = tmp_path / "ck" / "checkpoint_last.pt"
    proc = cli("fairseq-validate", gile_bin, "--user-dir", USER_DIR, "--task", "gile_classification", "--path",
               checkpoint, "--batch-size", "32", check=False)
    line = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(line) == 1, proc.stderr[-3000:]
    assert line[0] == (f"error: --eval-label-file {labels}, which {checkpoint} was trained with, does not exist: give "
                       "fairseq-validate --eval-label-file where it is now")
    with pytest.raises(MissingFileError, match="eval_label_file= of LabelPredictor.from_checkpoint or "
                       "fairseq_joint.loaders.load_gile_model"):
        load_gile_model(str(checkpoint))
    _, task = load_gile_model(str(checkpoint), eval_label_file=str(moved))  # what the refusal says to do
    assert task.cfg.eval_label_file == str(moved)
    # predict-labels: refused naming its own option, which then finds the file
    args = ["--checkpoint", checkpoint, "--labels", moved, "--topk", "1"]
    proc = cli("fairseq-joint-predict-labels", *args, check=False)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].endswith(
        "does not exist: give fairseq-joint-predict-labels --eval-label-file where it is now")
    texts = tmp_path / "texts.txt"
    texts.write_text("a python library for parsing\n", encoding="utf-8")
    ranked = cli("fairseq-joint-predict-labels", *args, "--eval-label-file", moved, "--input", texts)
    assert ranked.stdout.startswith("a python library for parsing\t")
