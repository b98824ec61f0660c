"""GILE data that moved or disagrees (fairseq_joint/checkpoints.py ``absolute_paths``, data/gile_files.py
``check_dictionary``): a checkpoint records its data directory, label files and sentence encoder absolute, so a
command run from another directory finds them, and names --data when the data is gone; a language directory whose
dict.txt is not the one its documents were binarized with (another language's) is refused naming the file, instead of
training into an IndexError."""

import shutil

import pytest
from conftest import GILE_FAST, GILE_TRAIN, REPO, cli, preprocess_gile, state

from fairseq_joint import checkpoints
from fairseq_joint.errors import CheckpointError, InputError, MissingFileError

ML_SAMPLE_DIR = REPO / "data" / "debtags-multilingual-sample"


@pytest.fixture(scope="module")
def relative_run(gile_bin, tmp_path_factory):
    """A gile_classifier trained from ``work/`` with DATA and --eval-label-file given relative to it."""
    work = tmp_path_factory.mktemp("relative_run") / "work"
    shutil.copytree(gile_bin, work / "bin")
    shutil.copyfile(gile_bin / "labels.tsv", work / "labels.tsv")
    cli("fairseq-train", "bin", *GILE_TRAIN, "--criterion", "multilabel_classification", "--eval-label-file",
        "labels.tsv", "--max-update", "2", "--save-dir", "ckpt", "--disable-validation", *GILE_FAST, cwd=work)
    return work


def test_the_checkpoint_records_the_data_absolute_and_is_read_from_anywhere(relative_run, tmp_path, monkeypatch):
    from fairseq_joint.loaders import load_gile_model

    cfg = state(relative_run / "ckpt" / "checkpoint_last.pt")["cfg"]
    assert cfg["task"]["data"] == str(relative_run / "bin")
    assert cfg["task"]["eval_label_file"] == str(relative_run / "labels.tsv")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    model, task = load_gile_model(str(relative_run / "ckpt" / "checkpoint_last.pt"))
    assert task.corpus.data == str(relative_run / "bin") and len(task.corpus.train_labels) > 0
    assert model.data_fingerprints is not None  # built for the data it was trained on, and loaded


def test_moved_data_is_refused_naming_data_and_found_with_it(relative_run, tmp_path):
    from fairseq_joint.loaders import load_gile_model

    run = tmp_path / "run"
    shutil.copytree(relative_run / "ckpt", run)
    moved = tmp_path / "moved"
    shutil.copytree(relative_run / "bin", moved)
    (tmp_path / "texts.txt").write_text("a library for reading and writing PNG images\n", encoding="utf-8")
    args = ["--checkpoint", run / "checkpoint_last.pt", "--labels", moved / "labels.tsv", "--input",
            tmp_path / "texts.txt"]
    shutil.move(relative_run / "bin", tmp_path / "gone")  # the data is no longer where training found it
    try:
        proc = cli("fairseq-joint-predict-labels", *args, check=False, cwd=tmp_path)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-3000:]
        assert lines[0].startswith(f"error: {relative_run / 'bin' / 'dict.txt'}: no such file: "), lines[0]
        assert "--data of the fairseq-joint-* commands that read a checkpoint" in lines[0], lines[0]
        _, task = load_gile_model(str(run / "checkpoint_last.pt"), data=str(moved))  # what the refusal says to do
        assert task.corpus.data == str(moved)
    finally:
        shutil.move(tmp_path / "gone", relative_run / "bin")


def test_paths_of_a_checkpoints_configuration_are_saved_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b", "encoder"):
        (tmp_path / name).mkdir()
    (tmp_path / "labels.tsv").write_text("x\tan x\n", encoding="utf-8")
    cfg = {"task": {"data": "a:b:s3://bucket/c", "label_file": "labels.tsv", "eval_label_file": None},
           "model": {"pretrained_encoder": "encoder", "embed_path": "vectors.txt"}, "common": {"user_dir": "u"}}
    saved = {}
    checkpoints.save(lambda obj, filename: saved.update(obj), {"model": {}, "cfg": cfg}, "x.pt")
    assert saved["cfg"]["task"] == {"data": f"{tmp_path}/a:{tmp_path}/b:s3://bucket/c",
                                    "label_file": f"{tmp_path}/labels.tsv", "eval_label_file": None}
    assert saved["cfg"]["model"] == {"pretrained_encoder": f"{tmp_path}/encoder", "embed_path": "vectors.txt"}
    assert saved["cfg"]["common"] == {"user_dir": "u"}


def test_a_multilingual_checkpoint_records_its_label_language(tmp_path):
    """--label-language defaults to the first of --languages: recorded explicit, the same languages in another order
    (fairseq-validate --model-overrides "{'languages': 'pl,en'}") no longer embed the descriptions as pl; a resume
    does not report it as changed."""
    from fairseq_joint.resume import changed_options, current_configuration

    saved = {}
    cfg = {"task": {"_name": "gile_classification", "languages": "en,pl", "label_language": ""}, "model": {}}
    checkpoints.save(lambda obj, filename: saved.update(obj), {"model": {}, "cfg": cfg}, "x.pt")
    assert saved["cfg"]["task"]["label_language"] == "en"
    again = {"task": {"_name": "gile_classification", "languages": "en,pl", "label_language": ""}, "model": {}}
    assert changed_options(saved["cfg"], current_configuration(again)) == []
    chosen = {"task": {"languages": "en,pl", "label_language": "pl"}, "model": {}}
    checkpoints.save(lambda obj, filename: saved.update(obj), {"model": {}, "cfg": chosen}, "x.pt")
    assert saved["cfg"]["task"]["label_language"] == "pl"  # one given stays


def binarize_language(tmp_path, dest, lang, first=0, count=40):
    """Documents first..first+count of the multilingual sample's ``lang`` binarized into ``dest``."""
    lines = (ML_SAMPLE_DIR / lang / "train.jsonl").read_text(encoding="utf-8").splitlines()[first:first + count]
    (tmp_path / f"{lang}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    preprocess_gile("--train", tmp_path / f"{lang}.jsonl", "--labels", ML_SAMPLE_DIR / "labels.tsv", "--lang", lang,
                    "--destdir", dest)


def test_a_language_directory_with_another_languages_dictionary_is_refused(tmp_path):
    from fairseq_joint.models.gile_classifier import GileClassifier, GileClassifierConfig
    from fairseq_joint.tasks.gile_classification import GileClassificationConfig, GileClassificationTask

    data = tmp_path / "data"
    for lang in ("en", "pl"):
        binarize_language(tmp_path, data / lang, lang)
    setup = GileClassificationTask.setup_task
    # against the checkpoint: a model trained on en + pl, loaded with pl binarized from other documents
    model_cfg = GileClassifierConfig(embed_dim=8, encoder_dim=8, attention_dim=8, joint_dim="12")
    trained = GileClassifier.build_model(model_cfg, setup(GileClassificationConfig(data=str(data), languages="en,pl")))
    other = tmp_path / "other"
    shutil.copytree(data / "en", other / "en")
    binarize_language(tmp_path, other / "pl", "pl", first=40)
    rebuilt = GileClassifier.build_model(model_cfg, setup(GileClassificationConfig(data=str(other), languages="en,pl")))
    with pytest.raises(CheckpointError, match=r"the checkpoint's dictionary has other entries than the data's: .*"
                       r"with --languages every DATA/LANG/dict.txt\), --data of the fairseq-joint-\* commands"):
        rebuilt.load_state_dict(trained.state_dict())
    # against its siblings
    assert setup(GileClassificationConfig(data=str(data), languages="en,pl")).languages == ["en", "pl"]
    shutil.copyfile(data / "en" / "dict.txt", data / "pl" / "dict.txt")  # pl's dict.txt is en's
    with pytest.raises(InputError, match=rf"^{data}/pl/dict.txt is not the dictionary {data}/pl's documents were "
                       r"binarized with: put back the dict.txt fairseq-joint-preprocess-gile --lang pl wrote there"):
        setup(GileClassificationConfig(data=str(data), languages="en,pl"))
    with pytest.raises(InputError, match=rf"^{data}/pl/dict.txt is not the dictionary"):
        setup(GileClassificationConfig(data=str(data / "pl")))  # one directory: the same check
    shutil.rmtree(data / "pl")
    with pytest.raises(MissingFileError, match=r"pl/dict.txt: no such file: .*--data of the fairseq-joint-\* commands"):
        setup(GileClassificationConfig(data=str(data), languages="en,pl"))
