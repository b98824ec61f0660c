"""The Python API's calls without a trained model (fairseq_joint.hub): devices (device=, .to(), refusals), texts and
labels as the ecosystem passes them, and LabelPredictor.from_encoder, the zero-shot start (the encoder's cosine),
with the same calls as a trained model, saved and loaded as one checksummed directory."""

import json
import shutil

import numpy as np
import pytest
import torch
from conftest import SAMPLE

from fairseq_joint import errors
from fairseq_joint.bundles import MANIFEST
from fairseq_joint.data.gile_files import read_label_file
from fairseq_joint.hub import OPTIONS, LabelPredictor, as_texts, check_device

LABELS = SAMPLE / "labels.tsv"
TEXTS = ["a text editor for programmers", "network audio streaming server", "a game of strategy"]
NAMES = ["devel::editor", "works-with::audio", "game::strategy", "use::gameplaying"]


def by_label(ranked):
    """{label: score} of a ranking (a text scored alone or in a padded batch differs in the last digits, and a tiny
    random encoder gives labels equal scores, whose order is then either)."""
    return pytest.approx({r.label: r.score for r in ranked}, abs=1e-5)


@pytest.fixture(scope="module")
def zero_shot(sentence_encoder):
    return LabelPredictor.from_encoder(sentence_encoder, label_file=LABELS, device="cpu")


def test_devices_are_read_as_torch_reads_them_and_one_that_is_not_there_is_refused(fake_cuda):
    assert check_device("cpu") == check_device(torch.device("cpu")) == torch.device("cpu")
    assert check_device(None) == check_device("cuda") == check_device(0) == torch.device("cuda", 0)  # one (fake) GPU
    with pytest.raises(errors.OptionError, match=r"^device='cuda:1': this machine has 1 CUDA GPU\(s\), cuda:0 to "):
        check_device("cuda:1")


@pytest.mark.skipif(torch.cuda.is_available(), reason="refusals of a machine without CUDA")
@pytest.mark.parametrize("device, message", [
    ("cuda", "device='cuda': no CUDA GPU is visible: use device='cpu'"),
    ("cuda:0", "device='cuda:0': no CUDA GPU is visible"),
    ("gpu", "device='gpu': unknown device; give 'cpu', 'cuda' or 'cuda:N'"),
    (-1, "device=-1: unknown device"),
    ("meta", "device='meta': unknown device; give 'cpu', 'cuda' or 'cuda:N'"),
    (2.5, "device=2.5: unknown device; give 'cpu', 'cuda' or 'cuda:N'"),
    (True, "device=True: unknown device; give 'cpu', 'cuda' or 'cuda:N'"),
])
def test_a_device_that_is_not_there_or_not_known_is_refused_in_one_line(device, message, sentence_encoder):
    assert check_device(None) == torch.device("cpu")
    with pytest.raises(errors.OptionError, match=f"^{message}") as raised:
        LabelPredictor.from_encoder(sentence_encoder, device=device)
    assert not isinstance(raised.value, ValueError) and "\n" not in errors.one_line(raised.value)


def test_texts_are_one_string_or_a_list_of_strings():
    assert as_texts("one text") == (["one text"], True) and as_texts(("a", "b")) == (["a", "b"], False)
    for texts, message in ((b"bytes", "texts is bytes"), (None, "texts is None"), ([], "texts holds no text"),
                           (["a", 3], r"texts\[1\] is a int"), ("  ", "texts is empty"), (5, "^texts is a int")):
        with pytest.raises(errors.InputError, match=message):
            as_texts(texts)


def test_from_encoder_scores_every_label_by_the_encoders_cosine(zero_shot, sentence_encoder):
    """The score of a label is the cosine of the text's and the description's embeddings, as sentence-transformers
    computes them itself; predict ranks by it, best first; the embeddings are those vectors."""
    from sentence_transformers import SentenceTransformer

    descriptions = read_label_file(str(LABELS))
    st = SentenceTransformer(str(sentence_encoder), device="cpu", local_files_only=True)
    expected = st.encode(TEXTS, normalize_embeddings=True) @ st.encode([descriptions[n] for n in NAMES],
                                                                        normalize_embeddings=True).T
    matrix = zero_shot.scores(TEXTS, labels=NAMES)
    assert matrix.labels == NAMES and matrix.probabilities is None and not matrix.seen.any()
    assert matrix.scores.numpy() == pytest.approx(expected, abs=1e-5)
    assert torch.allclose(zero_shot.embeddings(TEXTS) @ zero_shot.embeddings(labels=NAMES).T, matrix.scores, atol=1e-6)
    assert zero_shot.embeddings(TEXTS[0]).shape == (16,) and zero_shot.embeddings(TEXTS[0]).norm() == pytest.approx(1)
    rows = zero_shot.predict(TEXTS, labels=NAMES, topk=3)
    for ranked, row in zip(rows, expected):  # the 3 best cosines, best first (each with its own label's)
        assert [r.score for r in ranked] == pytest.approx(sorted(row, reverse=True)[:3], abs=1e-5)
        assert [r.score for r in ranked] == pytest.approx([row[NAMES.index(r.label)] for r in ranked], abs=1e-5)
        assert all(r.probability is None and not r.seen for r in ranked)
    # one string in, one ranking out; names, a dict and the file's lines give the same label set
    every = zero_shot.predict(TEXTS, labels=NAMES, topk=None)
    assert {r.label: r.score for r in zero_shot.predict(TEXTS[1], labels=NAMES, topk=None)} == by_label(every[1])
    assert zero_shot.predict(TEXTS, labels={n: descriptions[n] for n in NAMES}, topk=None) == every
    assert zero_shot.scores(TEXTS[2], labels=NAMES).scores.shape == (4,)
    assert zero_shot.gamma() == (0.0, "no label was seen in training (a sentence encoder alone)")


def test_a_threshold_keeps_the_labels_at_or_above_it_and_one_outside_the_cosines_range_is_refused(zero_shot):
    scores = zero_shot.scores(TEXTS, labels=NAMES).scores
    t = float(scores.median())
    rows = zero_shot.predict(TEXTS, labels=NAMES, topk=None, threshold=t)
    assert [{r.label for r in ranked} for ranked in rows] == [{n for n, s in zip(NAMES, row) if s >= t}
                                                             for row in scores.tolist()]
    assert 0 < sum(map(len, rows)) < len(TEXTS) * len(NAMES)
    assert zero_shot.threshold(t) == (t, "given")
    # a 0-d tensor or array is the number it holds (torch.tensor(0.05) was refused as "got tensor(0.0500)")
    assert zero_shot.threshold(torch.tensor(0.25)) == zero_shot.threshold(np.array(0.25)) == (0.25, "given")
    assert zero_shot.predict(TEXTS, labels=NAMES, topk=None, threshold=torch.tensor(t, dtype=torch.float64)) == rows
    for threshold, shape in ((torch.tensor([0.25]), r"Tensor of shape \(1,\)"),
                             (np.zeros(2), r"ndarray of shape \(2,\)")):
        with pytest.raises(errors.OptionError, match=rf"^threshold is a {shape}: give one number \(a float, or a 0-d "
                                                     r"tensor\)$"):
            zero_shot.predict(TEXTS, labels=NAMES, threshold=threshold)
    for threshold, kind, message in (
            (1.5, errors.OptionError, r"^threshold \(on the score\) must be a finite number in \[-1, 1\], got 1.5"),
            (float("nan"), errors.OptionError, r"^threshold \(on the score\) must be a finite number"),
            ("calibrated", errors.OptionError, r"^threshold='calibrated': a sentence encoder has no calibrated "
                                               "threshold: give a cosine"),
            # a word other than "calibrated" (it was refused as a number out of range)
            ("calib", errors.OptionError, r"^threshold='calib': give 'calibrated' or a finite number in "
                                          r"\[-1, 1\]$")):
        with pytest.raises(kind, match=message):
            zero_shot.predict(TEXTS, labels=NAMES, threshold=threshold)


def test_labels_as_names_need_a_label_file_that_holds_them(zero_shot, sentence_encoder):
    for labels, message in ((["devel::editor", "no::such"], r"^labels\[1\] 'no::such' is not in LabelPredictor"
                                                            r".from_encoder\(.*\)'s label file \(469 labels\)"),
                            (["devel::editor", "devel::editor"], r"labels\[1\] 'devel::editor' is given twice"),
                            ([3], r"labels\[0\] is a int"), ([], "labels holds no labels"),
                            (None, "labels is a NoneType: give a label<TAB>description file's path, a")):
        with pytest.raises(errors.InputError, match=message):
            zero_shot.predict(TEXTS, labels=labels)
    bare = LabelPredictor.from_encoder(sentence_encoder, device="cpu")
    with pytest.raises(errors.InputError, match="labels is a list of names, but LabelPredictor.from_encoder.* has no "
                       "label file"):
        bare.predict(TEXTS, labels=NAMES)
    with pytest.raises(errors.OptionError, match=r"^--lang pl: LabelPredictor.from_encoder\(.*\) is no model trained "
                       "with --languages: drop --lang$"):
        zero_shot.predict(TEXTS, labels=NAMES, lang="pl")
    for call in (lambda: zero_shot.embeddings(), lambda: zero_shot.embeddings(TEXTS, labels=NAMES)):
        with pytest.raises(errors.InputError, match="embeddings: give texts or labels="):
            call()


def test_to_moves_the_encoder_and_every_label_set_encoded(sentence_encoder, fake_cuda):
    """.to('cuda') sends the encoder's weights and the label sets already encoded to the GPU; later texts are scored
    there (their vectors sent too); the results are the CPU's."""
    predictor = LabelPredictor.from_encoder(sentence_encoder, label_file=LABELS, device="cpu")
    before = predictor.predict(TEXTS, labels=NAMES, topk=None)
    label_set = next(iter(predictor.label_sets.values()))
    held = [*predictor.sentence_encoder.st.parameters(), *predictor.sentence_encoder.st.buffers(), label_set.tokens,
            label_set.train_index]
    assert not fake_cuda
    assert predictor.to("cuda") is predictor and predictor.device == torch.device("cuda", 0)
    assert {id(t) for t in held} <= fake_cuda
    sent = len(fake_cuda)
    assert predictor.predict(TEXTS, labels=NAMES, topk=None) == before and len(fake_cuda) > sent
    assert LabelPredictor.from_encoder(sentence_encoder, label_file=LABELS).device == torch.device("cuda", 0)


def test_an_encoder_saved_as_one_directory_loads_elsewhere_and_a_part_altered_is_refused(zero_shot, sentence_encoder,
                                                                                         tmp_path):
    saved = tmp_path / "saved"
    assert zero_shot.save(saved) == str(saved)
    manifest = json.loads((saved / MANIFEST).read_text())
    assert manifest["kind"] == "encoder" and {"README.md", "label_file.tsv", "encoder/modules.json"} <= set(
        manifest["files"])
    moved = tmp_path / "elsewhere" / "zero-shot"
    shutil.copytree(saved, moved)
    shutil.rmtree(saved)
    loaded = LabelPredictor.from_pretrained(moved, device="cpu")
    assert loaded.predict(TEXTS, labels=NAMES) == zero_shot.predict(TEXTS, labels=NAMES)
    assert loaded.sentence_encoder.fingerprint == zero_shot.sentence_encoder.fingerprint
    with pytest.raises(errors.OptionError, match=r"^save: .* exists and is not an empty directory"):
        loaded.save(moved)
    for where in ("", moved / "README.md" / "x"):  # no name; under a file (a FileNotFoundError, a NotADirectoryError)
        with pytest.raises(errors.OptionError, match=r"^save: .* names no directory one can make"):
            loaded.save(where)
    with pytest.raises(errors.OptionError, match=r"^save: directory is None, not a path: give the path of a new "
                                                 r"directory$"):
        loaded.save(None)
    with pytest.raises(errors.OptionError, match="^pretrained_encoder: .* holds its own copy of its sentence encoder"):
        LabelPredictor.from_pretrained(moved, pretrained_encoder=sentence_encoder)

    def damaged(change):
        copy = tmp_path / f"copy{len(list(tmp_path.iterdir()))}"
        shutil.copytree(moved, copy)
        change(copy)
        return copy

    cases = [
        (lambda d: (d / "encoder" / "tokenizer.json").unlink(), errors.MissingFileError,
         r"encoder/tokenizer.json: no such file: the saved predictor .* lacks it: copy the directory again"),
        (lambda d: (d / "label_file.tsv").write_text("a\tb\n"), errors.CheckpointError,
         r"label_file.tsv is altered \(its SHA-256 differs from the one fairseq-joint-model.json holds\)"),
        (lambda d: (d / MANIFEST).unlink(), errors.MissingFileError, "is a directory without fairseq-joint-model.json"),
        (lambda d: (d / MANIFEST).write_text("{"), errors.CheckpointError, "fairseq-joint-model.json is unreadable"),
        (lambda d: (d / MANIFEST).write_text(json.dumps({**manifest, "kind": "other"})), errors.CheckpointError,
         "fairseq-joint-model.json: unknown kind 'other'"),
        (lambda d: (d / MANIFEST).write_text(json.dumps({**manifest, "format": "other"})), errors.CheckpointError,
         "fairseq-joint-model.json is not a manifest of 'fairseq-joint label predictor 1'"),
        (lambda d: (d / MANIFEST).write_text(json.dumps([manifest])), errors.CheckpointError,
         "fairseq-joint-model.json is not a manifest of 'fairseq-joint label predictor 1'"),
        (lambda d: (d / MANIFEST).write_text(json.dumps({**manifest, "encoder": "/etc"})), errors.CheckpointError,
         r"fairseq-joint-model.json: encoder '/etc' is outside the bundle"),
        # edited by hand: a TypeError or KeyError before
        (lambda d: (d / MANIFEST).write_text(json.dumps({**manifest, "encoder": None})), errors.CheckpointError,
         "fairseq-joint-model.json names no encoder, which a 'encoder' bundle loads from"),
        (lambda d: (d / MANIFEST).write_text(json.dumps({**manifest, "encoder_reference": "x"})), errors.CheckpointError,
         "fairseq-joint-model.json: encoder_reference 'x' is no path and fingerprint"),
        (lambda d: (d / MANIFEST).write_text(json.dumps({**manifest, "kind": "gile_classifier"})),
         errors.CheckpointError, "fairseq-joint-model.json names no checkpoint, which a 'gile_classifier' bundle loads"),
    ]
    for change, kind, message in cases:
        with pytest.raises(kind, match=message) as raised:
            LabelPredictor.from_pretrained(damaged(change))
        assert "\n" not in errors.one_line(raised.value)
    checkpoint = tmp_path / "checkpoint_best.pt"
    checkpoint.write_bytes(b"never read")  # a file: from_pretrained sends it to from_checkpoint
    with pytest.raises(errors.CheckpointError, match=f"^{checkpoint} is a file: give a directory LabelPredictor.save "
                       r"wrote \(a checkpoint file loads with LabelPredictor.from_checkpoint\)"):
        LabelPredictor.from_pretrained(checkpoint)
    with pytest.raises(errors.MissingFileError, match=f"^{tmp_path / 'none'} is missing: give a directory "
                       "LabelPredictor.save wrote"):
        LabelPredictor.from_pretrained(tmp_path / "none")


def test_the_api_names_its_keywords_where_the_command_names_its_options(zero_shot):
    """One check of a ranking's numbers (hub.Arguments.check): a Python caller's refusal names the keyword it gave,
    fairseq-joint-predict-labels' the option (tests/cli/test_command_errors.py runs the command)."""
    for call, message in ((dict(topk=0), r"^topk must be positive \(an integer >= 1\), got 0: give a value in that "
                                         "range$"),
                          (dict(batch_size=2.5), "^batch_size must be positive .*got 2.5"),
                          (dict(seen_score_offset=float("nan")), "^seen_score_offset must be a float32 number .* got nan: give a value in that range$"),
                          (dict(seen_score_offset=1e39), "^seen_score_offset must be a float32 number .* got 1e.39: give a value in that range$")):
        with pytest.raises(errors.OptionError, match=message):
            zero_shot.predict(TEXTS, labels=NAMES, **call)
    with pytest.raises(errors.OptionError, match="^batch_size must be positive"):
        zero_shot.scores(TEXTS, labels=NAMES, batch_size=0)
    with pytest.raises(errors.OptionError, match="^batch_size must be positive"):
        zero_shot.embeddings(TEXTS, batch_size=0)
    # a whole float passes the integer check, and is used as the integer it is
    assert zero_shot.predict(TEXTS, labels=NAMES, topk=2.0, batch_size=1.0) == zero_shot.predict(TEXTS, labels=NAMES,
                                                                                                 topk=2, batch_size=1)
    assert torch.equal(zero_shot.embeddings(TEXTS, batch_size=2.0), zero_shot.embeddings(TEXTS, batch_size=2))
    assert zero_shot.gamma(0.5) == (0.5, "seen_score_offset") and zero_shot.gamma(0.5, OPTIONS) == (0.5, "--seen-"
                                                                                                     "score-offset")
    with pytest.raises(errors.OptionError, match="^--seen-score-offset must be a float32 number .* got inf"):
        zero_shot.gamma(float("inf"), OPTIONS)
    with pytest.raises(errors.OptionError, match="^--topk must be positive .*got 0"):
        OPTIONS.check(topk=0, batch_size=64)


def test_an_encoder_saved_by_reference_is_pinned_by_its_fingerprint(sentence_encoder, tmp_path):
    encoder = tmp_path / "encoder"
    shutil.copytree(sentence_encoder, encoder)
    predictor = LabelPredictor.from_encoder(encoder, device="cpu")
    predictor.save(tmp_path / "saved", copy_encoder=False)
    manifest = json.loads((tmp_path / "saved" / MANIFEST).read_text())
    assert not any(name.startswith("encoder/") for name in manifest["files"])
    assert manifest["encoder_reference"]["path"] == str(encoder)
    labels = {"x": "a text editor", "y": "a strategy game"}
    assert LabelPredictor.from_pretrained(tmp_path / "saved").predict(TEXTS, labels) == predictor.predict(TEXTS, labels)
    shutil.copytree(encoder, tmp_path / "moved")  # the same files elsewhere: given as pretrained_encoder
    (encoder / "README.md").write_text("changed")
    with pytest.raises(errors.CheckpointError, match=f"sentence encoder {encoder}: not the one .* was saved with"):
        LabelPredictor.from_pretrained(tmp_path / "saved")
    loaded = LabelPredictor.from_pretrained(tmp_path / "saved", pretrained_encoder=tmp_path / "moved")
    assert loaded.predict(TEXTS, labels) == predictor.predict(TEXTS, labels)
    shutil.rmtree(encoder)  # gone: the keyword that fixes it is named (it named fairseq's --pretrained-encoder)
    with pytest.raises(errors.MissingFileError, match=rf"^sentence encoder of {tmp_path / 'saved'} \(saved as a "
                       rf"reference\) {encoder}: no such directory: give its directory now as from_pretrained\(\.\.\., "
                       r"pretrained_encoder=PATH\)$"):
        LabelPredictor.from_pretrained(tmp_path / "saved")


def test_a_linear_head_reads_the_label_names_alone(tmp_path, caplog):
    """--head linear scores a training label by its own row, never its description: the descriptions given are not
    encoded or checked (a description of no known word was refused, one of a few unknown words warned about); a
    label unseen in training is still refused. fairseq-joint-predict-labels ranks through the same label_set."""
    from conftest import training_args
    from fairseq import tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    from fairseq_joint.cli import preprocess_gile
    from fairseq_joint.hub import TrainedLabelPredictor

    (tmp_path / "labels.tsv").write_text("A\tapple fruit\nB\tcar engine\nC\triver water\n")
    (tmp_path / "train.tsv").write_text("apple fruit apple\tA\ncar engine car\tB\nfruit car\tA B\n")
    preprocess_gile.main(["--train", str(tmp_path / "train.tsv"), "--labels", str(tmp_path / "labels.tsv"),
                          "--destdir", str(tmp_path / "bin")])
    cfg = convert_namespace_to_omegaconf(training_args(
        tmp_path / "bin", "gile_classifier", "--task", "gile_classification", "--head", "linear", "--embed-dim", 4,
        "--encoder-dim", 4, "--attention-dim", 4, "--criterion", "multilabel_classification"))
    task = tasks.setup_task(cfg.task)
    predictor = TrainedLabelPredictor(task.build_model(cfg.model).eval(), task, "linear.pt", "bce", 0.5,
                                      torch.device("cpu"))
    with caplog.at_level("WARNING"):
        ranked = predictor.predict("apple car", labels={"A": "zzz qqq", "B": "car xxx yyy"}, topk=None)
    assert {r.label for r in ranked} == {"A", "B"} and all(r.seen for r in ranked)
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    scores = predictor.scores("apple car", labels=["A", "B"]).scores  # the same rows, whatever the descriptions
    assert {r.label: r.score for r in ranked} == pytest.approx(dict(zip(["A", "B"], scores.tolist())))
    with pytest.raises(errors.InputError, match="^--head linear cannot score the 1 label.* it never saw in training "
                                                "\\(e.g. 'C'\\)"):
        predictor.predict("apple", labels={"A": "apple", "C": "river water"})
