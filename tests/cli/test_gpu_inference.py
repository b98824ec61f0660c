"""Inference on a CUDA GPU (``pytest -m gpu``; skipped without one): LabelPredictor on the GPU (the model, its frozen
sentence encoder and the label sets there, the CPU's predictions), fairseq-joint-predict-labels on the GPU by default
and on the CPU with --cpu, fairseq-interactive with an NMT-joint model on the GPU as on the CPU (fairseq moves the
model; the output layer's eval cache is made again there). The same device handling checked on the CPU:
tests/unit/test_devices.py, tests/unit/test_hub_api.py, tests/cli/test_hub_models.py."""

import json
import re
import shutil

import pytest
import torch
from conftest import GILE_FAST, SAMPLE, USER_DIR, cli

from fairseq_joint.hub import LabelPredictor

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
TEXTS = ["a text editor for programmers", "network audio streaming server", "python library for images"]


@pytest.fixture(scope="module")
def checkpoint(gile_bin, sentence_encoder, tmp_path_factory):
    """gile_pretrained (frozen tiny encoder beside TF-IDF features) trained one epoch."""
    root = tmp_path_factory.mktemp("gpu_inference")
    shutil.copytree(gile_bin, root / "bin")
    cli("fairseq-train", root / "bin", "--user-dir", USER_DIR, "--task", "gile_classification", "--arch",
        "gile_pretrained", "--pretrained-encoder", sentence_encoder, "--criterion", "multilabel_classification",
        "--max-epoch", "1", "--save-dir", root / "ck", *GILE_FAST[:GILE_FAST.index("--embed-dim")])
    return root / "ck" / "checkpoint_last.pt"


def by_label(rows):
    return [{r.label: r.score for r in ranked} for ranked in rows]


def test_a_label_predictor_on_the_gpu_holds_everything_there_and_predicts_as_on_the_cpu(checkpoint, sentence_encoder):
    cpu = LabelPredictor.from_checkpoint(checkpoint, device="cpu")
    gpu = LabelPredictor.from_checkpoint(checkpoint)  # a GPU when there is one
    assert gpu.device == torch.device("cuda", torch.cuda.current_device())
    expected = by_label(cpu.predict(TEXTS, labels=SAMPLE / "labels.tsv", topk=None))
    found = by_label(gpu.predict(TEXTS, labels=SAMPLE / "labels.tsv", topk=None))
    for want, got in zip(expected, found):
        assert got == pytest.approx(want, abs=1e-3)
    label_set = next(iter(gpu.label_sets.values()))
    held = [*gpu.model.parameters(), *gpu.model.buffers(), *gpu.sentence_encoder.st.parameters(), label_set.tokens,
            label_set.train_index]
    assert all(t.is_cuda for t in held)
    gpu.to("cpu")
    assert not any(t.is_cuda for t in [*gpu.model.parameters(), *gpu.sentence_encoder.st.parameters()])
    assert not any(t.is_cuda for ls in gpu.label_sets.values() for t in (ls.tokens, ls.train_index))
    zero_shot = [LabelPredictor.from_encoder(sentence_encoder, device=d) for d in ("cpu", "cuda")]
    rows = [by_label(p.predict(TEXTS, labels=SAMPLE / "labels.tsv", topk=None)) for p in zero_shot]
    for want, got in zip(*rows):
        assert got == pytest.approx(want, abs=1e-4)


def test_predict_labels_runs_on_the_gpu_unless_cpu_is_given(checkpoint, tmp_path):
    (tmp_path / "texts.txt").write_text("".join(t + "\n" for t in TEXTS), encoding="utf-8")
    args = ["--checkpoint", checkpoint, "--labels", SAMPLE / "labels.tsv", "--input", tmp_path / "texts.txt", "--json",
            "--topk", "469"]
    gpu, cpu = cli("fairseq-joint-predict-labels", *args), cli("fairseq-joint-predict-labels", *args, "--cpu")
    assert "note: predicting on cuda:" in gpu.stderr and "predicting on" not in cpu.stderr
    for a, b in zip(gpu.stdout.splitlines(), cpu.stdout.splitlines()):
        assert dict(json.loads(a)["labels"]) == pytest.approx(dict(json.loads(b)["labels"]), abs=1e-3)


def test_fairseq_interactive_translates_with_an_nmt_joint_model_on_the_gpu_as_on_the_cpu(joint_checkpoint, tiny_bin,
                                                                                         tiny_text, tmp_path):
    sources = tmp_path / "sources.txt"
    sources.write_text("".join(line + "\n" for line in (tiny_text / "valid.en").read_text().splitlines()[:5]))
    command = ["fairseq-interactive", tiny_bin, "--user-dir", USER_DIR, "--path", joint_checkpoint, "--source-lang",
               "en", "--target-lang", "de", "--beam", "1", "--max-len-b", "10", "--input", sources]

    def hypotheses(out):
        return [(m.group(1), float(m.group(2)), m.group(3)) for m in re.finditer(r"^H-(\d+)\t(\S+)\t(.*)$", out, re.M)]

    gpu, cpu = hypotheses(cli(*command).stdout), hypotheses(cli(*command, "--cpu").stdout)
    assert len(gpu) == 5 and [(i, h) for i, _, h in gpu] == [(i, h) for i, _, h in cpu]
    assert [s for _, s, _ in gpu] == pytest.approx([s for _, s, _ in cpu], abs=1e-3)
