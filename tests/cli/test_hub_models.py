"""The Python API with a trained model, as users of sentence-transformers and Hugging Face's pipelines call it: one
string or a list, labels by name, the score matrix and the vectors the head scores, the threshold calibrated on
validation (and the fallback of a checkpoint saved without one), devices (.to() moves the model, its frozen encoder
and the label sets; fairseq-joint-predict-labels takes a GPU unless --cpu), and the model saved as one checksummed
directory that predicts the same elsewhere once its originals are gone. The model: ``gile_pretrained`` (a frozen tiny
sentence encoder beside TF-IDF features, label biases, the cosine prior) trained two epochs, its label file given from
outside the data directory."""

import contextlib
import io
import json
import logging
import shlex
import shutil

import pytest
import torch
from conftest import GILE_FAST, SAMPLE, USER_DIR, cli, valid_line, valid_lines

from fairseq_joint import checkpoints, errors
from fairseq_joint.bundles import MANIFEST
from fairseq_joint.cli import predict_labels
from fairseq_joint.cli.common import run
from fairseq_joint.hub import LabelPredictor
from fairseq_joint.tasks.gile_classification import CALIBRATED_THRESHOLD

TEXTS = ["a text editor for programmers", "network audio streaming server", "python library for images"]
NAMES = ["devel::editor", "works-with::audio", "devel::lang:python", "game::strategy", "use::gameplaying"]


@pytest.fixture(scope="module")
def trained(gile_bin, sentence_encoder, tmp_path_factory):
    """(checkpoint, its originals: the data directory, the label file's directory, the encoder) of two epochs of
    gile_pretrained, every original a copy of this module's own (the saving test moves them away)."""
    root = tmp_path_factory.mktemp("hub_models")
    shutil.copytree(gile_bin, root / "bin")
    (root / "labels").mkdir()
    shutil.copy(SAMPLE / "labels.tsv", root / "labels" / "all.tsv")
    shutil.copytree(sentence_encoder, root / "encoder")
    (root / "ck").mkdir()
    cli("fairseq-train", root / "bin", "--user-dir", USER_DIR, "--task", "gile_classification", "--arch",
        "gile_pretrained", "--pretrained-encoder", root / "encoder", "--label-file", root / "labels" / "all.tsv",
        "--criterion", "multilabel_classification", "--max-epoch", "2", "--save-dir", root / "ck",
        "--log-file", root / "ck" / "train.log", *GILE_FAST[:GILE_FAST.index("--embed-dim")])  # the encoder's d
    return root / "ck" / "checkpoint_last.pt", [root / "bin", root / "labels", root / "encoder", root / "ck"]


@pytest.fixture(scope="module")
def predictor(trained):
    return LabelPredictor.from_checkpoint(trained[0], device="cpu")


def test_names_one_string_the_score_matrix_and_the_vectors_agree_with_predict(predictor):
    labels = SAMPLE / "labels.tsv"
    descriptions = dict(line.split("\t", 1) for line in labels.read_text(encoding="utf-8").splitlines())
    rows = predictor.predict(TEXTS, labels=NAMES, topk=None)
    assert rows == predictor.predict(TEXTS, labels={n: descriptions[n] for n in NAMES}, topk=None)
    assert predictor.predict(TEXTS[0], labels=NAMES, topk=None) == rows[0]  # one string in, one ranking out
    gamma, _ = predictor.gamma()
    matrix = predictor.scores(TEXTS, labels=NAMES)
    assert matrix.labels == NAMES and matrix.scores.shape == matrix.probabilities.shape == (3, 5)
    for ranked, scores, probs in zip(rows, matrix.scores.tolist(), matrix.probabilities.tolist()):
        assert [r.score for r in ranked] == sorted(scores, reverse=True)
        for r in ranked:
            assert (r.score, r.probability) == (scores[NAMES.index(r.label)], probs[NAMES.index(r.label)])
    # σ of the logit (bce), γ subtracted from the training labels' scores only
    logits = matrix.scores + gamma * matrix.seen.float()
    assert torch.allclose(matrix.probabilities, torch.sigmoid(logits), atol=1e-6)
    assert predictor.scores(TEXTS[1], labels=NAMES).scores.tolist() == pytest.approx(matrix.scores[1].tolist())
    # the vectors are what the head scores: Eq. 14 of the text and label vectors, + the cosine prior of the unseen
    # labels (their first d coordinates: the encoder's) and the label biases (the mean one for an unseen label)
    model, d = predictor.model, predictor.sentence_encoder.dim
    h, e = predictor.embeddings(TEXTS), predictor.embeddings(labels=NAMES)
    assert h.shape == (3, d + 64) and e.shape == (5, d + 64) and predictor.embeddings(TEXTS[2]).shape == (d + 64,)
    seen = matrix.seen
    bias = torch.stack([model.label_bias[i] if i >= 0 else model.label_bias.mean()
                        for i in predictor.label_set(*predictor.read_labels(NAMES)).train_index.tolist()])
    with torch.no_grad():
        expected = (model.head(h, class_inputs=e) + model.cfg.cosine_prior * (h[:, :d] @ e[:, :d].T) * ~seen + bias)
    assert torch.allclose(expected - gamma * seen.float(), matrix.scores, atol=1e-4)
    with pytest.raises(errors.InputError, match=rf"^labels\[0\] 'new::label' is not in {predictor.checkpoint}'s label "
                       r"file \(469 labels\): give one of its labels, or {label: description} for a new one"):
        predictor.predict(TEXTS, labels=["new::label"])
    with pytest.raises(errors.OptionError, match="^lang is the texts' language"):
        predictor.embeddings(labels=NAMES, lang="en")


def test_predict_keeps_the_labels_above_the_threshold_calibrated_on_validation(predictor, trained):
    state = torch.load(trained[0], weights_only=True)
    t = state["task_state"][CALIBRATED_THRESHOLD]
    assert 0 < t < 1 and valid_line((trained[0].parent / "train.log").read_text())["threshold"] == round(t, 4)
    assert predictor.threshold() == (t, "calibrated on the validation documents in training")
    probs = predictor.scores(TEXTS, labels=SAMPLE / "labels.tsv").probabilities
    rows = predictor.predict(TEXTS, labels=SAMPLE / "labels.tsv", topk=None, threshold="calibrated")
    assert [len(r) for r in rows] == (probs >= t).sum(dim=1).tolist() and all(r.probability >= t for r in rows[0])
    assert predictor.predict(TEXTS, labels=SAMPLE / "labels.tsv", topk=2, threshold=0.0) == \
        predictor.predict(TEXTS, labels=SAMPLE / "labels.tsv", topk=2)
    for threshold in (1.5, -0.1, float("inf")):
        with pytest.raises(errors.OptionError, match=r"^threshold \(on the probability\) must be a finite number in "
                           r"\[0, 1\], got "):
            predictor.predict(TEXTS, labels=NAMES, threshold=threshold)


def test_a_checkpoint_saved_without_a_threshold_falls_back_to_its_criterions_and_says_so_once(trained, tmp_path,
                                                                                           caplog):
    state = torch.load(trained[0], weights_only=True)
    del state["task_state"][CALIBRATED_THRESHOLD]
    state[checkpoints.CHECKSUMS] = checkpoints.checksums(state)  # as a checkpoint saved before thresholds were kept
    torch.save(state, tmp_path / "old.pt")
    old = LabelPredictor.from_checkpoint(tmp_path / "old.pt", device="cpu")
    with caplog.at_level(logging.WARNING, logger="fairseq_joint.hub"):
        assert old.threshold()[0] == 0.5 and old.threshold()[0] == 0.5
        old.predict(TEXTS, labels=NAMES, threshold="calibrated")
    said = [r.getMessage() for r in caplog.records if r.name == "fairseq_joint.hub"]
    assert said == [f"threshold: the --threshold 0.5 of training: {tmp_path / 'old.pt'} holds no threshold calibrated "
                    "on validation (saved by an earlier fairseq-joint, or without a validation)"]


def test_to_moves_the_model_its_frozen_encoder_and_the_label_sets(trained, fake_cuda):
    predictor = LabelPredictor.from_checkpoint(trained[0], device="cpu")
    before = predictor.predict(TEXTS, labels=NAMES, topk=None)
    label_set = next(iter(predictor.label_sets.values()))
    model, encoder = predictor.model, predictor.sentence_encoder.st
    held = [*model.parameters(), *model.buffers(), *encoder.parameters(), *encoder.buffers(), label_set.tokens,
            label_set.train_index]
    assert not fake_cuda and predictor.to("cuda").device == torch.device("cuda", 0)
    assert {id(t) for t in held} <= fake_cuda
    sent = len(fake_cuda)
    assert predictor.predict(TEXTS, labels=NAMES, topk=None) == before and len(fake_cuda) > sent  # the texts too


def test_the_command_predicts_on_a_gpu_when_there_is_one_and_cpu_keeps_it_off(trained, tmp_path, capsys, fake_cuda):
    (tmp_path / "texts.txt").write_text("".join(t + "\n" for t in TEXTS), encoding="utf-8")

    def command(*args):
        capsys.readouterr()
        assert run(predict_labels.main, ["--checkpoint", str(trained[0]), "--input", str(tmp_path / "texts.txt"),
                                         "--labels", str(SAMPLE / "labels.tsv"), *args]) == 0
        return capsys.readouterr()

    on_cpu = command("--cpu")
    assert not fake_cuda and "predicting on" not in on_cpu.err
    on_gpu = command()
    assert "note: predicting on cuda:0 (--cpu to stay on the CPU)" in on_gpu.err and on_gpu.out == on_cpu.out
    model_weights = LabelPredictor.from_checkpoint(trained[0], device="cpu").model.state_dict()
    assert len(fake_cuda) > len(model_weights)  # the model's weights and the texts were sent to the GPU


@pytest.fixture(scope="module")
def saved(predictor, tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "model"
    assert predictor.save(path) == str(path)
    return path


def test_a_saved_model_predicts_the_same_elsewhere_once_its_originals_are_gone(predictor, trained, saved,
                                                                              tmp_path):
    """The saved directory copied elsewhere, and the checkpoint, data directory, label file and encoder it was made
    from moved away: it loads and predicts as the original did, with its γ and threshold; its card gives the training
    command (fairseq's parser reads it back into the checkpoint's configuration) and the last validation's figures."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    files = json.loads((saved / MANIFEST).read_text())
    assert {"checkpoint.pt", "data/dict.txt", "data/labels.train.txt", "data/train.labels", "data/labels.tsv",
            "data/lexical.json", "label_file.tsv", "encoder/modules.json", "README.md"} <= set(files["files"])
    rows = predictor.predict(TEXTS, labels=SAMPLE / "labels.tsv", topk=None)
    elsewhere = tmp_path / "another-machine" / "model"
    shutil.copytree(saved, elsewhere)
    originals = trained[1]
    for path in originals:
        path.rename(path.with_name(path.name + ".away"))
    try:
        loaded = LabelPredictor.from_pretrained(elsewhere, device="cpu")
        assert loaded.predict(TEXTS, labels=SAMPLE / "labels.tsv", topk=None) == rows
        assert loaded.gamma()[0] == predictor.gamma()[0] and loaded.threshold() == predictor.threshold()
    finally:
        for path in originals:
            path.with_name(path.name + ".away").rename(path)
    card = (elsewhere / "README.md").read_text(encoding="utf-8")
    example = card.split("```python\n", 1)[1].split("\n```", 1)[0].replace("THIS_DIRECTORY", str(elsewhere))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(example, {})  # the card's Python runs as written (it named a labels.tsv the directory does not hold)
    assert "LabelScore(" in printed.getvalue()
    command = card.split("```bash\n", 1)[1].split("\n```", 1)[0]
    args = options.parse_args_and_arch(options.get_training_parser(), shlex.split(command)[1:])
    cfg = torch.load(trained[0], weights_only=True)["cfg"]
    again = convert_namespace_to_omegaconf(args)
    for group in ("task", "model", "criterion", "optimizer", "lr_scheduler", "optimization", "dataset"):
        assert OmegaConf.to_container(again[group]) == cfg[group], group
    validations = valid_lines((trained[0].parent / "train.log").read_text())
    table = dict([cell.strip() for cell in line.strip("|").split("|")] for line in card.splitlines()
                 if line.startswith("| ") and not line.startswith("| figure"))
    assert validations[0]["loss"] != validations[-1]["loss"]  # the last validation's figures, not the run's mean
    for name in ("seen_avgpr", "unseen_avgpr", "gzsl_h", "loss", "seen_f1", "docs"):
        assert float(table[name]) == pytest.approx(validations[-1][name]), name
    assert not {"num_updates", "wps", "gamma", "threshold"} & table.keys()
    # when it ran (with --validate-interval maybe before the checkpoint's last update)
    assert f"The last validation before this checkpoint was saved, after update {validations[-1]['num_updates']:.0f}:" \
        in card
    assert not any(k.startswith("best_") for k in table)


@pytest.mark.parametrize("part, change, kind", [
    ("data/dict.txt", "delete", errors.MissingFileError),
    ("checkpoint.pt", "flip", errors.CheckpointError),
    ("encoder/model.safetensors", "flip", errors.CheckpointError),
    ("data/lexical.json", "flip", errors.CheckpointError),
    ("label_file.tsv", "delete", errors.MissingFileError),
    ("README.md", "flip", errors.CheckpointError),
])
def test_a_saved_model_with_a_part_missing_or_altered_is_refused_naming_it(saved, tmp_path, part, change, kind):
    copy = tmp_path / "model"
    shutil.copytree(saved, copy)
    path = copy / part
    if change == "delete":
        path.unlink()
    else:
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    with pytest.raises(kind) as raised:
        LabelPredictor.from_pretrained(copy, device="cpu")
    line = errors.one_line(raised.value)
    assert str(path) in line and "\n" not in line and "copy the directory again" in line
