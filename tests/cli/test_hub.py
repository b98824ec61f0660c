"""The Python API (fairseq_joint.hub) against the commands: GILE predictions from Python equal
fairseq-joint-predict-labels' (a WAN model, a frozen pretrained-encoder model, a multilingual model), unseen labels
included, with the criterion's probabilities and the checkpoint's γ (calibrated on validation, or given to training);
a label set is encoded once and reused; the refusals are the commands' (same type of error, same message);
translations from Python equal fairseq-interactive's for a joint_transformer with sentencepiece and a joint_lstm with
Moses + subword-nmt."""

import argparse
import json
import math
import shutil

import pytest
import torch
from conftest import (
    GILE_FAST,
    GILE_SENTENCE_FAST,
    GILE_TRAIN,
    REPO,
    SAMPLE,
    cli,
    preprocess_gile,
    train_joint,
    valid_line,
    write_zero_shot_data,
)

from fairseq_joint import errors
from fairseq_joint.cli import predict_labels
from fairseq_joint.cli.common import run
from fairseq_joint.hub import LabelPredictor, LabelScore, load_translator
from fairseq_joint.tasks.gile_classification import CALIBRATED_OFFSET, CALIBRATED_THRESHOLD, LAST_VALIDATION

ML_SAMPLE = REPO / "data" / "debtags-multilingual-sample"
TEXTS = ["a text editor for programmers", "network audio streaming server", "python library for images",
         "a game of strategy"]


def train_gile(data, save, *extra, fast=GILE_FAST):
    """checkpoint_last.pt of one epoch of fairseq-train (its log in ``save``/train.log; ``fast``: GILE_SENTENCE_FAST
    over a sentence encoder)."""
    save.mkdir(parents=True, exist_ok=True)
    cli("fairseq-train", data, *GILE_TRAIN, "--criterion", "multilabel_classification",
        "--max-epoch", "1", "--save-dir", save, "--log-file", save / "train.log", *fast, *extra)
    return save / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def wan_checkpoint(gile_bin, tmp_path_factory):
    """A gile head over a WAN encoder, one epoch on 150 documents (469 labels in the label file, most unseen)."""
    return train_gile(gile_bin, tmp_path_factory.mktemp("hub_wan"), "--head", "gile", "--joint-dim", "8",
                      "--seen-score-offset", "0.25")


def predict_command(checkpoint, tmp_path, texts, *args, check=True):
    (tmp_path / "texts.txt").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    return cli("fairseq-joint-predict-labels", "--checkpoint", checkpoint, "--input", tmp_path / "texts.txt", "--json",
               *args, check=check)


def assert_same_rankings(rows, out):
    """Python's records equal the command's JSON lines: the same texts, labels in the same order, the scores that
    the command rounds to 4 digits."""
    printed = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(printed) == len(rows)
    for record, ranked in zip(printed, rows):
        assert record["labels"] == [[r.label, round(r.score, 4)] for r in ranked]


def test_wan_predictions_equal_the_command_with_unseen_labels_and_probabilities(wan_checkpoint, gile_bin, tmp_path):
    predictor = LabelPredictor.from_checkpoint(wan_checkpoint)
    assert predictor.probability_kind == "bce" and predictor.gamma() == (0.25, "the --seen-score-offset of training")
    # γ given to training is kept: no γ calibrated, logged or saved besides the option (the threshold is calibrated)
    logged = valid_line((wan_checkpoint.parent / "train.log").read_text())
    assert "gamma" not in logged and 0 < logged["threshold"] < 1
    saved = torch.load(wan_checkpoint, weights_only=True)["task_state"]
    assert sorted(saved) == sorted([CALIBRATED_THRESHOLD, LAST_VALIDATION])  # and the validation's figures, as logged
    figures = saved[LAST_VALIDATION]
    assert all(figures[k] == logged[k] for k in ("loss", "docs", "seen_avgpr", "unseen_avgpr", "gzsl_h", "seen_f1"))
    assert not {"threshold", "gamma", "wps"} & figures.keys() and figures["num_updates"] == logged["num_updates"]
    seen = set((gile_bin / "labels.train.txt").read_text().split())
    rows = predictor.predict(TEXTS, labels=SAMPLE / "labels.tsv", topk=None)
    assert_same_rankings(rows, predict_command(wan_checkpoint, tmp_path, TEXTS, "--labels", SAMPLE / "labels.tsv",
                                               "--topk", "469"))
    for ranked in rows:
        assert len(ranked) == 469 and all(isinstance(r, LabelScore) for r in ranked)
        assert {r.label for r in ranked if not r.seen} == {r.label for r in ranked} - seen  # unseen labels scored
        assert len(seen) < 469
        for r in ranked:  # σ of the logit (Eq. 13); the score is the logit minus γ for a seen label
            assert r.probability == pytest.approx(1 / (1 + math.exp(-(r.score + 0.25 * r.seen))), abs=1e-5)
    # another γ and k, a label dict instead of the file: the command's rankings with --seen-score-offset and --topk
    labels = dict(line.split("\t", 1) for line in (SAMPLE / "labels.tsv").read_text(encoding="utf-8").splitlines())
    rows = predictor.predict(TEXTS, labels=labels, topk=7, seen_score_offset=3.0)
    assert all(len(r) == 7 for r in rows)
    assert_same_rankings(rows, predict_command(wan_checkpoint, tmp_path, TEXTS, "--labels", SAMPLE / "labels.tsv",
                                               "--topk", "7", "--seen-score-offset", "3"))


def test_label_sets_are_encoded_once_and_reused(wan_checkpoint, tmp_path, monkeypatch):
    predictor = LabelPredictor.from_checkpoint(wan_checkpoint)
    encoded = []
    encode = predictor.task.encode_labels

    def counting(names, descriptions, cache_name):
        encoded.append(list(names))
        return encode(names, descriptions, cache_name)

    monkeypatch.setattr(predictor.task, "encode_labels", counting)
    first = predictor.predict(TEXTS[:2], labels=SAMPLE / "labels.tsv")
    again = predictor.predict(TEXTS[2:], labels=SAMPLE / "labels.tsv", topk=3)
    copy = tmp_path / "copy.tsv"
    shutil.copy(SAMPLE / "labels.tsv", copy)
    predictor.predict(TEXTS[:1], labels=copy)  # the same descriptions in another file: the same label set
    assert len(encoded) == 1 and len(predictor.label_sets) == 1
    assert first == predictor.predict(TEXTS[:2], labels=SAMPLE / "labels.tsv") and len(again) == 2
    small = {"devel::lang:python": "Python", "new::label": "a graphical text editor"}
    predictor.predict(TEXTS, labels=small)
    predictor.predict(TEXTS, labels=dict(small))
    assert len(encoded) == 2 and encoded[1] == list(small) and len(predictor.label_sets) == 2


def test_multiclass_probabilities_are_the_softmax_over_the_labels_given(tmp_path):
    """--classification-mode multiclass: the criterion's softmax over the label set (unseen labels included), from
    the logits without γ."""
    raw = tmp_path / "raw"
    raw.mkdir()
    texts = write_zero_shot_data(raw, num_seen=4)
    preprocess_gile("--train", raw / "train.tsv", "--labels", raw / "labels.tsv", "--destdir", tmp_path / "bin")
    checkpoint = train_gile(tmp_path / "bin", tmp_path / "ck", "--head", "gile", "--joint-dim", "8",
                            "--classification-mode", "multiclass", "--max-update", "3", "--disable-validation")
    predictor = LabelPredictor.from_checkpoint(checkpoint)
    assert predictor.probability_kind == "distribution_ce"
    for ranked in predictor.predict(texts[:3], labels=raw / "labels.tsv", topk=None, seen_score_offset=0.5):
        assert [r.label for r in ranked if not r.seen] == ["L4"] and len(ranked) == 5
        logits = torch.tensor([r.score + 0.5 * r.seen for r in ranked])
        assert [r.probability for r in ranked] == pytest.approx(torch.softmax(logits, 0).tolist(), abs=1e-6)


@pytest.fixture(scope="module")
def translation_checkpoint(tiny_bin, tmp_path_factory):
    save = tmp_path_factory.mktemp("hub_translation")
    train_joint(tiny_bin, save, "joint_transformer_tiny", 2)
    return save / "checkpoint_last.pt"


def test_translation_keywords_are_fairseqs_options(translation_checkpoint, tiny_bin, tmp_path):
    """fairseq set any keyword of load_translator (on a legacy model's options) and of translate (on a copy of the
    generation options) without a check: a misspelled one was ignored, beam=0 failed in a reshape traceback, a
    malformed BPE codes file ended the process (subword-nmt's sys.exit)."""
    from fairseq.data import encoders

    for overrides in (dict(beem=3), dict(generation={"beem": 3})):  # a group's options as a dict too
        with pytest.raises(errors.OptionError, match=r"^'beem' is no option of fairseq's \(an override of the "
                                                     r"checkpoint's\): did you mean 'beam'\?$"):
            load_translator(translation_checkpoint, tiny_bin, **overrides)
    with pytest.raises(errors.OptionError, match="^bpe: unknown 'nope'; choose one of .*characters"):
        load_translator(translation_checkpoint, tiny_bin, bpe="nope")  # fairseq's KeyError
    with pytest.raises(errors.OptionError, match=r"^lenpen=nan: must be a finite number, got nan"):  # the keyword
        load_translator(translation_checkpoint, tiny_bin, lenpen=float("nan"))
    for overrides in (dict(beam=3), dict(generation={"beam": 3})):  # translate(beam=5) set 5 on every call
        with pytest.raises(errors.OptionError, match=r"^beam=3: a checkpoint's beam is not read: give it where the "
                                                     r"translation is made \(translate\(text, beam=3\), fairseq-generate "
                                                     r"--beam 3\)$"):
            load_translator(translation_checkpoint, tiny_bin, **overrides)
    with pytest.raises(errors.OptionError, match=r"^generation_args: give load_translator the generation options"):
        load_translator(translation_checkpoint, tiny_bin, generation_args={"beam": 2})  # from_pretrained's: ignored
    with pytest.raises(errors.OptionError, match=r"^path='other.pt': load_translator's checkpoint argument gives it: "
                                                 r"drop path=$"):
        load_translator(translation_checkpoint, tiny_bin, path="other.pt")  # ignored before
    codes, model = tmp_path / "bad.codes", tmp_path / "bad.model"
    codes.write_text("#version: 0.2\na b\nc d e\n", encoding="utf-8")
    model.write_bytes(b"not a sentencepiece model")
    codes_error = rf"^--bpe-codes {codes}: subword_nmt cannot read it \(Error: invalid line 3 in BPE codes file: c d e"
    with pytest.raises(errors.InputError, match=codes_error):
        load_translator(translation_checkpoint, tiny_bin, bpe="subword_nmt", bpe_codes=codes)
    with pytest.raises(errors.InputError, match=codes_error):  # every route into fairseq's BPE, a Path too
        encoders.build_bpe(argparse.Namespace(bpe="subword_nmt", bpe_codes=codes, bpe_separator="@@"))
    with pytest.raises(errors.InputError, match=rf"^--sentencepiece-model {model}: sentencepiece cannot read it "):
        load_translator(translation_checkpoint, tiny_bin, bpe="sentencepiece", sentencepiece_model=model)
    # a BPE without its file (omegaconf's MissingMandatoryValue), a language the data has no dictionary of
    with pytest.raises(errors.OptionError, match=r"^bpe_codes is missing: bpe='subword_nmt' needs it: give "
                                                 r"load_translator bpe_codes=$"):
        load_translator(translation_checkpoint, tiny_bin, bpe="subword_nmt")
    with pytest.raises(errors.MissingFileError, match=rf"^{tiny_bin}/dict.fr.txt: no such file: {tiny_bin} holds no "
                                                      r"dictionary of 'fr': give the directory fairseq-preprocess wrote"):
        load_translator(translation_checkpoint, tiny_bin, source_lang="fr", target_lang="de")
    with pytest.raises(errors.CheckpointError, match=r"^the checkpoint's language pair \(--source-lang, --target-lang\) "
                                                     r"has other entries than the data's: translate in the direction"):
        load_translator(translation_checkpoint, tiny_bin, source_lang="de", target_lang="en")  # translated before
    translator = load_translator(translation_checkpoint, tiny_bin, generation={"max_len_b": 4}, bpe="characters")
    for keywords, message in ((dict(beam=0), r"^beam=0: must be positive \(an integer >= 1\), got 0: give a value"),
                              (dict(beem=2), r"^'beem' is no generation option of fairseq's: did you mean 'beam'\?$"),
                              (dict(max_len_b=-1), r"^max_len_b=-1: must be an integer >= 0, got -1"),
                              (dict(temperature=0.0, sampling=True), r"^temperature=0.0: must be positive"),
                              (dict(beam=2.0), r"^beam=2.0 must be an int: give beam=2$"),
                              (dict(beam=None), r"^beam=None: must be positive"),  # a TypeError in torch, both
                              (dict(lenpen=float("inf")), r"^lenpen=inf: must be a finite number"),
                              # as fairseq-generate refuses it (fairseq returned the whole beam)
                              (dict(beam=2, nbest=5), r"^nbest=5 is above beam=2: raise beam to 5 or lower nbest$"),
                              # TypeErrors in fairseq: its hub interface scores language models only, and hands no
                              # constraints to a translation's search
                              (dict(score_reference=True), r"^score\(\)/score_reference=True: fairseq's hub interface "
                                                           "scores the sentences of a language model only"),
                              (dict(constraints="ordered"), r"^constraints='ordered': fairseq's hub interface hands no "
                                                            "constraints")):
        with pytest.raises(errors.OptionError, match=message):
            translator.translate("ein Satz", **keywords)
    with pytest.raises(errors.OptionError, match=r"^score\(\)/score_reference=True"):
        translator.score("ein Satz")
    # a sentence above the model's positions: named (fairseq's Exception named a command-line flag), also where
    # skip_invalid_size_inputs=True would leave it out of the output, which then no longer lined up with the input
    limit = translator.max_positions[0]
    for skip, said in ((False, ""), (True, r" \(skip_invalid_size_inputs=True would leave it out of the output")):
        with pytest.raises(errors.InputError, match=rf"^sentence 1 is {limit + 1} tokens long, above the model's "
                                                    rf"{limit} source positions{said}"):
            translator.generate([translator.encode("a"), torch.ones(limit + 1, dtype=torch.long)],
                                skip_invalid_size_inputs=skip)
    hypotheses = translator.generate([translator.encode("a"), translator.encode("b")], beam=3, nbest=2)
    assert [len(h) for h in hypotheses] == [2, 2]  # nbest of the beam (fairseq returned all 3)
    # the generation options given, and generate's own keywords, still reach fairseq
    assert translator.translate("a sentence", beam=2, verbose=False) == translator.sample("a sentence", 2)
    tokens = translator.encode("a sentence")
    short = translator.generate(tokens, beam=2, max_len_a=0, max_len_b=1)  # one sentence: its n-best list
    assert len(short) == 2 and all(len(hypothesis["tokens"]) <= 2 for hypothesis in short)  # a word and </s>
    assert any(len(h["tokens"]) > 2 for h in translator.generate(tokens, beam=2, max_len_a=0, max_len_b=8))


def test_diverse_beam_search_is_refused_past_one_batch(translation_checkpoint, tiny_bin):
    """fairseq 0.12's diverse beam search failed in an IndexError at a call's second batch (as fairseq-generate's, which
    refuses it): refused then, with the keyword, given to generate or load_translator; sentences of one batch take
    it."""
    said = r"^diverse_beam_groups=2: fairseq 0.12's diverse beam search fails on more than one batch .* give the "
    for keywords, generation in ((dict(diverse_beam_groups=2), {}), ({}, {"diverse_beam_groups": 2})):
        translator = load_translator(translation_checkpoint, tiny_bin, bpe="characters", batch_size=1,
                                     generation={"max_len_b": 2, **generation})
        sentences = [translator.encode("a b"), translator.encode("c")]
        with pytest.raises(errors.OptionError, match=said):
            translator.generate(sentences, beam=2, **keywords)
        assert len(translator.generate(sentences[0], beam=2, **keywords)) == 2  # one sentence: one batch
    one_batch = load_translator(translation_checkpoint, tiny_bin, bpe="characters", generation={"max_len_b": 2})
    assert [len(h) for h in one_batch.generate(sentences, beam=2, diverse_beam_groups=2)] == [2, 2]


def test_translator_refuses_a_language_model(tiny_text, tmp_path):
    """A fairseq language model (a decoder only: fairseq-train --task language_modeling) given to load_translator is
    refused naming what it holds, where fairseq's hub built a translator that failed at the first translate."""
    from conftest import TRAIN_FAST, USER_DIR

    cli("fairseq-preprocess", "--only-source", "--trainpref", tiny_text / "train.en", "--destdir", tmp_path / "lm",
        "--workers", "1")
    cli("fairseq-train", tmp_path / "lm", "--user-dir", USER_DIR, "--task", "language_modeling", "--arch",
        "transformer_lm", "--decoder-layers", "1", "--decoder-embed-dim", "16", "--decoder-ffn-embed-dim", "32",
        "--decoder-attention-heads", "2", "--tokens-per-sample", "32", "--max-update", "1", "--save-dir",
        tmp_path / "save", *TRAIN_FAST)
    checkpoint = tmp_path / "save" / "checkpoint_last.pt"
    with pytest.raises(errors.CheckpointError, match=rf"^{checkpoint} holds a TransformerLanguageModel, not an "
                                                     r"encoder-decoder: give a translation checkpoint$"):
        load_translator(checkpoint, tmp_path / "lm")


def refusal_line(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    return lines[0][len("error: "):]


def test_refusals_are_the_commands(wan_checkpoint, translation_checkpoint, tmp_path):
    """Each refusal of the API has the command's type and message (one line there)."""
    empty = tmp_path / "empty.tsv"
    empty.write_text("devel::lang:python\tPython\nnew::label\t \n", encoding="utf-8")
    labels = ["--labels", SAMPLE / "labels.tsv"]
    cases = [
        (errors.MissingFileError, dict(path=tmp_path / "none.pt"), dict(),
         ["--checkpoint", tmp_path / "none.pt", *labels]),
        (errors.CheckpointError, dict(path=translation_checkpoint), dict(),
         ["--checkpoint", translation_checkpoint, *labels]),
        (errors.OptionError, dict(path=wan_checkpoint), dict(lang="pl"),
         ["--checkpoint", wan_checkpoint, *labels, "--lang", "pl"]),
        (errors.InputError, dict(path=wan_checkpoint), dict(labels=empty),
         ["--checkpoint", wan_checkpoint, "--labels", empty]),
        (errors.OptionError, dict(path=wan_checkpoint), dict(topk=0),
         ["--checkpoint", wan_checkpoint, *labels, "--topk", "0"]),
    ]
    for kind, load, call, argv in cases:
        with pytest.raises(kind) as raised:
            predictor = LabelPredictor.from_checkpoint(**load)
            predictor.predict(TEXTS, **{"labels": SAMPLE / "labels.tsv", **call})
        (tmp_path / "t.txt").write_text("a text\n")
        line = refusal_line(cli("fairseq-joint-predict-labels", *argv, "--input", tmp_path / "t.txt", check=False))
        # the same message, naming the caller (a checkpoint of the other kind)
        said = errors.one_line(raised.value).replace("LabelPredictor.from_checkpoint", "fairseq-joint-predict-labels")
        if "topk" in call:  # the API names its keyword, the command its option
            assert said.startswith("topk must be positive")
            said = "--" + said
        assert said == line, argv
    assert isinstance(raised.value, errors.Refusal)
    # texts: one string or a list of non-empty strings; nothing is dropped or split into characters
    predictor = LabelPredictor.from_checkpoint(wan_checkpoint)
    for texts, message in ((b"one text", "texts is bytes"), (["fine", 3], "texts[1] is a int, not a string"),
                           (["fine", None], "texts[1] is None, not a string"), (["fine", "  "], "texts[1] is empty"),
                           ("  ", "texts is empty")):
        with pytest.raises(errors.InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
            predictor.predict(texts, labels=SAMPLE / "labels.tsv")
    for labels, message in (({"a b": "x"}, "contains whitespace"), ({"x": ""}, "has an empty description"),
                            ({"x": 5}, "^labels: the description of label 'x' is 5, not a string: describe it in "
                                       "words$"), ({}, "holds no labels")):
        with pytest.raises(errors.InputError, match=message):
            predictor.predict(TEXTS, labels=labels)
    for options, message in ((dict(seen_score_offset=float("nan")), "^seen_score_offset must be a float32 number"),
                             (dict(batch_size=0), "^batch_size must be positive"),
                             (dict(topk="3"), r"^topk must be positive \(an integer >= 1\), got '3'"),
                             (dict(topk=2.5), "^topk must be positive .*got 2.5")):
        with pytest.raises(errors.OptionError, match=message):
            predictor.predict(TEXTS, labels=SAMPLE / "labels.tsv", **options)
    import numpy as np  # numpy's integers are integers (e.g. a k picked with numpy)

    assert [len(r) for r in predictor.predict(TEXTS[:2], labels=SAMPLE / "labels.tsv", topk=np.int64(2))] == [2, 2]
    for labels, message in ((None, "labels is a NoneType: give a label<TAB>description file's path, a {label: "
                                   "description} dict or a list of label names"),
                            (("devel::lang:python", "Python"), rf"labels\[1\] 'Python' is not in {wan_checkpoint}'s "
                                                               r"label file \(469 labels\): give one of its labels")):
        with pytest.raises(errors.InputError, match=message):
            predictor.predict(TEXTS, labels=labels)
    with pytest.raises(errors.MissingFileError, match="label file .*: no such file"):
        predictor.predict(TEXTS, labels=tmp_path / "no-labels.tsv")
    with pytest.raises(errors.CheckpointError, match="is a gile_classifier checkpoint; load_translator needs a "
                       "translation model"):
        load_translator(wan_checkpoint, tmp_path)
    with pytest.raises(errors.MissingFileError, match="none.pt: no such file"):
        load_translator(tmp_path / "none.pt", tmp_path)
    with pytest.raises(errors.MissingFileError,
                       match="^data directory .*no-bin: no such directory: give fairseq-preprocess.s --destdir$"):
        load_translator(translation_checkpoint, tmp_path / "no-bin")
    with pytest.raises(errors.OptionError, match=rf"^--pretrained-encoder {tmp_path}: {wan_checkpoint} was trained with "
                                                 "--encoder wan, which reads no sentence encoder: drop it$"):
        LabelPredictor.from_checkpoint(wan_checkpoint, pretrained_encoder=str(tmp_path))  # it was ignored
    (tmp_path / "empty-bin").mkdir()  # a directory of no language pair: fairseq's bare Exception, as a refusal
    with pytest.raises(errors.InputError, match="empty-bin holds no binarized translation corpus whose languages"):
        load_translator(translation_checkpoint, tmp_path / "empty-bin")
    with pytest.raises(errors.CheckpointError, match="joint_transformer checkpoint; LabelPredictor.from_checkpoint "
                       "needs a gile_classifier model"):
        LabelPredictor.from_checkpoint(translation_checkpoint)


def test_pretrained_encoder_predictions_with_the_calibrated_gamma_equal_the_command(gile_bin, tmp_path, capsys,
                                                                                     sentence_encoder):
    """γ calibrated on validation (no --seen-score-offset): logged, saved in the checkpoint (and kept by a resumed run
    that saves before validating again), the default of the command (which says so) and of LabelPredictor."""
    data = tmp_path / "bin"
    shutil.copytree(gile_bin, data)
    flags = ["--encoder", "pretrained", "--pretrained-encoder", sentence_encoder, "--head", "gile", "--similarity-init"]
    checkpoint = train_gile(data, tmp_path / "ck", *flags, fast=GILE_SENTENCE_FAST)
    calibrated = torch.load(checkpoint, weights_only=True)["task_state"]
    gamma = calibrated[CALIBRATED_OFFSET]
    assert gamma != 0 and valid_line((tmp_path / "ck" / "train.log").read_text())["gamma"] == round(gamma, 4)
    predictor = LabelPredictor.from_checkpoint(checkpoint)
    assert predictor.gamma() == (gamma, "calibrated on the validation documents in training")
    labels = ["--labels", SAMPLE / "labels.tsv", "--topk", "20"]
    default = predict_command(checkpoint, tmp_path, TEXTS, *labels)
    assert f"note: γ = {gamma:g} is subtracted" in default.stderr and "(calibrated on the validation" in default.stderr
    assert_same_rankings(predictor.predict(TEXTS, labels=SAMPLE / "labels.tsv", topk=20), default)

    def in_process(*args):  # the command's main, without starting another Python
        capsys.readouterr()
        assert run(predict_labels.main, ["--checkpoint", str(checkpoint), "--input", str(tmp_path / "texts.txt"),
                                         "--json", *map(str, args)]) == 0
        return capsys.readouterr()

    assert in_process(*labels, "--seen-score-offset", repr(gamma)).out == default.stdout
    zero = in_process(*labels, "--seen-score-offset", "0")
    assert zero.out != default.stdout and "(--seen-score-offset)" in zero.err
    rows = predictor.predict(TEXTS, labels=SAMPLE / "labels.tsv", topk=20, seen_score_offset=0.5)
    assert any(not r.seen for ranked in rows for r in ranked)  # lowered by 0.5, unseen labels rank among the best
    # resumed for an epoch saved without a validation (--validate-interval 5): the checkpoint keeps the γ it resumed
    epoch = torch.load(checkpoint, weights_only=True)["extra_state"]["train_iterator"]["epoch"]
    cli("fairseq-train", data, *GILE_TRAIN, "--criterion", "multilabel_classification", "--max-epoch", "2",
        "--validate-interval", "5", "--save-dir", tmp_path / "ck", *GILE_SENTENCE_FAST, *flags)
    resumed = torch.load(checkpoint, weights_only=True)
    assert resumed["extra_state"]["train_iterator"]["epoch"] == epoch + 1
    assert resumed["task_state"] == calibrated  # γ, the threshold and the last validation's figures it resumed


def test_multilingual_predictions_by_language_equal_the_command(tmp_path):
    data = tmp_path / "bin"
    for lang in ("en", "pl"):
        preprocess_gile("--train", ML_SAMPLE / lang / "train.jsonl", "--labels", ML_SAMPLE / "labels.tsv",
                        "--lang", lang, "--destdir", data / lang)
    checkpoint = train_gile(data, tmp_path / "ck", "--languages", "en,pl", "--head", "gile", "--joint-dim", "8",
                            "--max-update", "3",
                            "--disable-validation")
    predictor = LabelPredictor.from_checkpoint(checkpoint)
    assert predictor.languages == ["en", "pl"]
    texts = ["Biblioteka do obsługi plików graficznych PNG.", "Gra strategiczna czasu rzeczywistego."]
    rows = predictor.predict(texts, labels=ML_SAMPLE / "labels.tsv", lang="pl", topk=10)
    assert_same_rankings(rows, predict_command(checkpoint, tmp_path, texts, "--labels", ML_SAMPLE / "labels.tsv",
                                               "--lang", "pl", "--topk", "10"))
    for lang in ("de", None):
        with pytest.raises(errors.OptionError) as raised:
            predictor.predict(texts, labels=ML_SAMPLE / "labels.tsv", lang=lang)
        argv = ["--lang", lang] if lang else []
        line = refusal_line(predict_command(checkpoint, tmp_path, texts, "--labels", ML_SAMPLE / "labels.tsv", *argv,
                                           check=False))
        assert errors.one_line(raised.value) == line
    # saved as one directory: every language's dictionary and label list in it, the data directory moved away
    saved = predictor.save(tmp_path / "saved")
    assert {"data/en/dict.txt", "data/pl/dict.txt", "data/pl/language.txt", "data/pl/train.labels"} <= set(
        json.loads((tmp_path / "saved" / "fairseq-joint-model.json").read_text())["files"])
    data.rename(tmp_path / "bin.away")
    assert LabelPredictor.from_pretrained(saved).predict(texts, labels=ML_SAMPLE / "labels.tsv", lang="pl",
                                                         topk=10) == rows


# ---------------------------------------------------------------------------------------------- translation
SOURCES = ["Save the document as PDF", "Enter the URL here.", "Landscape"]


def interactive(data, checkpoint, *subword_flags):
    """fairseq-interactive's D- lines (detokenized, subwords removed) for SOURCES, beam 3, in input order."""
    sources = checkpoint.parent / "sources.txt"
    sources.write_text("".join(s + "\n" for s in SOURCES), encoding="utf-8")
    out = cli("fairseq-interactive", data, "--user-dir", "fairseq_joint", "--path", checkpoint, "--source-lang", "en",
              "--target-lang", "de", "--beam", "3", "--max-len-b", "12", "--input", sources, *subword_flags)
    lines = [line.split("\t") for line in out.stdout.splitlines() if line.startswith("D-")]
    return [fields[2] if len(fields) > 2 else "" for _, fields in sorted((int(f[0][2:]), f) for f in lines)]


def subword_slice(tiny_text, dest, encode):
    """The tiny slice with ``encode`` applied to every line, binarized (en -> de)."""
    from conftest import binarize

    text = dest / "text"
    text.mkdir(parents=True)
    for path in tiny_text.iterdir():
        lines = path.read_text(encoding="utf-8").splitlines()
        (text / path.name).write_text("".join(encode(line, path.suffix[1:]) + "\n" for line in lines), encoding="utf-8")
    return binarize(text, dest / "bin")


def test_translation_with_sentencepiece_equals_interactive(tiny_text, tmp_path):
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(input=[str(tiny_text / "train.en"), str(tiny_text / "train.de")],
                                   model_prefix=str(tmp_path / "spm"), vocab_size=400, model_type="bpe",
                                   character_coverage=1.0, minloglevel=2, num_threads=1)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "spm.model"))
    data = subword_slice(tiny_text, tmp_path, lambda line, lang: " ".join(sp.encode(line, out_type=str)))
    train_joint(data, tmp_path / "ck", "joint_transformer_tiny", 5)
    checkpoint = tmp_path / "ck" / "checkpoint_last.pt"
    translator = load_translator(checkpoint, data, bpe="sentencepiece", sentencepiece_model=tmp_path / "spm.model")
    assert type(translator.models[0]).__name__ == "JointTransformerModel"
    ours = translator.translate(SOURCES, beam=3, max_len_b=12)
    assert len(ours) == 3 and any(ours)
    assert ours == interactive(data, checkpoint, "--bpe", "sentencepiece", "--sentencepiece-model",
                               tmp_path / "spm.model")
    assert translator.translate(SOURCES[0], beam=3, max_len_b=12) == ours[0]
    # fairseq's own hub interface, as docs/translation.md uses it (fairseq's TransformerModel loads joint_transformer)
    from fairseq.models.transformer import TransformerModel

    hub = TransformerModel.from_pretrained(str(tmp_path / "ck"), checkpoint_file="checkpoint_last.pt",
                                           data_name_or_path=str(data), bpe="sentencepiece",
                                           sentencepiece_model=str(tmp_path / "spm.model"))
    assert type(hub.models[0]).__name__ == "JointTransformerModel"
    assert hub.translate(SOURCES, beam=3, max_len_b=12) == ours


def test_translation_with_moses_and_subword_nmt_equals_interactive(tiny_text, tmp_path):
    from sacremoses import MosesTokenizer
    from subword_nmt.apply_bpe import BPE
    from subword_nmt.learn_bpe import learn_bpe

    tokenizers = {lang: MosesTokenizer(lang=lang) for lang in ("en", "de")}
    tokenized = tmp_path / "train.tok"
    with open(tokenized, "w", encoding="utf-8") as out:
        for lang in ("en", "de"):
            for line in (tiny_text / f"train.{lang}").read_text(encoding="utf-8").splitlines():
                out.write(tokenizers[lang].tokenize(line, return_str=True, escape=False) + "\n")
    with open(tokenized, encoding="utf-8") as f, open(tmp_path / "bpe.codes", "w", encoding="utf-8") as codes:
        learn_bpe(f, codes, 300)
    with open(tmp_path / "bpe.codes", encoding="utf-8") as codes:
        bpe = BPE(codes)
    data = subword_slice(tiny_text, tmp_path, lambda line, lang: bpe.process_line(
        tokenizers[lang].tokenize(line, return_str=True, escape=False)))
    train_joint(data, tmp_path / "ck", "joint_lstm_tiny", 5)
    checkpoint = tmp_path / "ck" / "checkpoint_last.pt"
    flags = dict(tokenizer="moses", moses_no_escape=True, bpe="subword_nmt", bpe_codes=tmp_path / "bpe.codes")
    translator = load_translator(checkpoint, data, **flags)
    assert type(translator.models[0]).__name__ == "JointLSTMModel"
    ours = translator.translate(SOURCES, beam=3, max_len_b=12)
    assert len(ours) == 3 and any(ours)
    assert ours == interactive(data, checkpoint, "--tokenizer", "moses", "--moses-no-escape", "--bpe", "subword_nmt",
                               "--bpe-codes", tmp_path / "bpe.codes")
    with pytest.raises(errors.MissingFileError,
                       match="^load_translator's bpe_codes .*none.codes: no such file: give an existing file"):
        load_translator(checkpoint, data, **{**flags, "bpe_codes": tmp_path / "none.codes"})
    assert torch.is_tensor(translator.encode(SOURCES[0]))
    # fairseq's from_pretrained through the plugin's model class, the data directory relative to the checkpoint's
    from fairseq_joint.models.joint_lstm import JointLSTMModel

    hub = JointLSTMModel.from_pretrained(str(tmp_path / "ck"), checkpoint_file="checkpoint_last.pt",
                                         data_name_or_path="../bin", tokenizer="moses", moses_no_escape=True,
                                         bpe="subword_nmt", bpe_codes=str(tmp_path / "bpe.codes"))
    assert type(hub.models[0]).__name__ == "JointLSTMModel"
    assert hub.translate(SOURCES, beam=3, max_len_b=12) == ours
