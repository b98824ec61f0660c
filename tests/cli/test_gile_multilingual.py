"""Multilingual GILE (GILE-MHAN, Sec. 3.3, Eq. 16) on the bundled English/Polish sample: per-language data with one
label space, paired batches, the weighted joint objective, shared encoder parts and joint space, per-language and
macro-averaged validation, checkpoint round trip, prediction by language, and the bad-input refusals."""

import json
import shutil
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import GILE_FAST, GILE_TRAIN, REPO, cli, preprocess_gile, python_script, valid_line

from fairseq_joint.errors import InputError, MissingFileError, OptionError
from fairseq_joint.models.gile_classifier import GileClassifier, GileClassifierConfig
from fairseq_joint.tasks.gile_classification import GileClassificationConfig, GileClassificationTask

ML_SAMPLE = REPO / "data" / "debtags-multilingual-sample"


@pytest.fixture(scope="module")
def ml_bin(tmp_path_factory):
    """DATA/en and DATA/pl binarized from the sample (240 training, 60 validation documents each)."""
    dest = tmp_path_factory.mktemp("ml_bin")
    for lang in ("en", "pl"):
        preprocess_gile("--train", ML_SAMPLE / lang / "train.jsonl", "--valid", ML_SAMPLE / lang / "valid.jsonl",
                        "--labels", ML_SAMPLE / "labels.tsv", "--lang", lang, "--destdir", dest / lang)
    return dest


def build(data, languages="en,pl", **model_options):
    task = GileClassificationTask.setup_task(GileClassificationConfig(data=str(data), languages=languages))
    cfg = GileClassifierConfig(embed_dim=8, encoder_dim=8, attention_dim=8, joint_dim="12", **model_options)
    return task, GileClassifier.build_model(cfg, task)


def test_train_validate_round_trip_and_predict_by_language(ml_bin, tmp_path):
    save = tmp_path / "ckpt"
    train = cli("fairseq-train", ml_bin, *GILE_TRAIN, "--languages", "en,pl", "--encoder", "han", "--head", "gile",
                "--joint-dim", "16", "--share-encoder", "--share-attention", "--criterion", "multilabel_classification",
                "--max-epoch", "2", "--save-dir", save, "--best-checkpoint-metric", "pl_seen_avgpr",
                "--maximize-best-checkpoint-metric", *GILE_FAST)
    out = train.stdout + train.stderr
    assert "MHAN-Both" in out
    inner = [line for line in out.splitlines() if "train_inner" in line]
    assert inner and all("en_loss=" in line and "pl_loss=" in line for line in inner)
    stats = valid_line(out)
    assert stats["en_docs"] == 60 and stats["pl_docs"] == 60  # every document of every language, once
    for metric in ("seen_avgpr", "unseen_avgpr", "gzsl_h", "seen_rl"):
        # unprefixed: the macro average over the languages (what --best-checkpoint-metric selects on)
        assert stats[metric] == pytest.approx((stats[f"en_{metric}"] + stats[f"pl_{metric}"]) / 2, abs=0.011), metric
    val = cli("fairseq-validate", ml_bin, "--user-dir", "fairseq_joint", "--task", "gile_classification",
              "--path", save / "checkpoint_last.pt", "--batch-size", "32", "--num-workers", "0")
    again = valid_line(val.stdout + val.stderr)
    for key in ("loss", "en_seen_avgpr", "pl_seen_avgpr", "pl_unseen_avgpr", "seen_avgpr"):
        assert again[key] == pytest.approx(stats[key], abs=0.011), key
    # the languages its weights are of: the same set in another order scores the same; another set, or another
    # language embedding the descriptions (en here), is refused (a traceback; a silent score with pl's embedding)
    validate = ["fairseq-validate", ml_bin, "--user-dir", "fairseq_joint", "--task", "gile_classification", "--path",
                save / "checkpoint_last.pt", "--batch-size", "32", "--num-workers", "0"]
    reordered = valid_line(cli(*validate, "--languages", "pl,en").stdout)
    assert reordered["seen_avgpr"] == again["seen_avgpr"]
    # the training split, scored as a validation: each document once, one language a batch (not in training's pairs);
    # fairseq-train validates no split it trains on in pairs (a KeyError traceback at the first validation)
    both = cli("fairseq-train", ml_bin, *GILE_TRAIN, "--languages", "en,pl", "--encoder", "han", "--criterion",
               "multilabel_classification", "--valid-subset", "valid,train", "--save-dir", tmp_path / "both",
               *GILE_FAST, check=False)
    assert both.returncode == 2 and both.stderr.strip().splitlines()[-1] == (
        "error: --valid-subset valid,train: fairseq-train batches a multilingual model's train split in pairs of "
        "languages to train on, which its validation cannot score: drop train there, and score it with "
        "fairseq-validate --valid-subset train"), both.stderr
    train_split = valid_line(cli(*validate, "--valid-subset", "train").stdout, "train")
    for lang in ("en", "pl"):
        lines = (ML_SAMPLE / lang / "train.jsonl").read_text(encoding="utf-8").splitlines()
        assert train_split[f"{lang}_docs"] == len(lines), (lang, train_split)
    for option, value, said in (
            ("--languages", "pl", f"--languages pl: {save / 'checkpoint_last.pt'} was trained on en,pl: give those, "
                                  "in any order"),
            ("--label-language", "pl", f"--label-language pl: {save / 'checkpoint_last.pt'} embeds the label "
                                       "descriptions as en, the language its head was trained with: drop "
                                       "--label-language")):
        refused = cli(*validate, option, value, check=False)
        assert refused.returncode == 2 and refused.stderr.strip().splitlines()[-1] == f"error: {said}", refused.stderr

    texts = tmp_path / "pl.txt"
    texts.write_text("Biblioteka do obsługi plików graficznych PNG.\nGra strategiczna czasu rzeczywistego.\n")
    ranked = cli("fairseq-joint-predict-labels", "--checkpoint", save / "checkpoint_last.pt", "--labels",
                 ML_SAMPLE / "labels.tsv", "--input", texts, "--lang", "pl", "--topk", "3", "--json")
    assert len(ranked.stdout.splitlines()) == 2
    assert "another language" not in ranked.stderr  # the English descriptions are the model's description language
    # mixed-script and empty texts are handled as in English: ranked / skipped with a note, nothing else dropped
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("Biblioteka PNG 画像 библиотека graphics\n\n   \nGra strategiczna.\n", encoding="utf-8")
    ranked = cli("fairseq-joint-predict-labels", "--checkpoint", save / "checkpoint_last.pt", "--labels",
                 ML_SAMPLE / "labels.tsv", "--input", mixed, "--lang", "pl", "--topk", "3", "--json")
    assert len(ranked.stdout.splitlines()) == 2 and "skipped 2 empty input line(s)" in ranked.stderr
    # descriptions in another language than the model's (en): one warning that says so, the labels still ranked
    names = [line.split("\t")[0] for line in (ML_SAMPLE / "labels.tsv").read_text(encoding="utf-8").splitlines()]
    polish = [json.loads(line)["text"] for line in (ML_SAMPLE / "pl" / "train.jsonl").read_text().splitlines()]
    foreign = tmp_path / "labels.pl.tsv"
    # (each with one English word: a HAN model refuses a description none of whose words it knows)
    foreign.write_text("".join(f"{n}\t{t[:80]} library\n" for n, t in zip(names, polish)), encoding="utf-8")
    ranked = cli("fairseq-joint-predict-labels", "--checkpoint", save / "checkpoint_last.pt", "--labels", foreign,
                 "--input", texts, "--lang", "pl", "--topk", "3", "--json")
    warned = [line for line in ranked.stderr.splitlines() if "another language" in line]
    assert len(warned) == 1 and f"{foreign}: " in warned[0] and "(en)" in warned[0] and "en/dict.txt" in warned[0]
    assert len(ranked.stdout.splitlines()) == 2
    for lang, said in (("de", "trained on en, pl, not 'de'"), (None, "give the texts' language (--lang)")):
        args = ["--lang", lang] if lang else []
        bad = cli("fairseq-joint-predict-labels", "--checkpoint", save / "checkpoint_last.pt", "--labels",
                  ML_SAMPLE / "labels.tsv", "--input", texts, *args, check=False)
        assert bad.returncode != 0 and said in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


@pytest.mark.parametrize("share_encoder,share_attention", [(False, False), (True, False), (False, True), (True, True)])
def test_shared_parts_are_one_module_and_the_classification_unit_is_per_language(ml_bin, share_encoder, share_attention):
    task, model = build(ml_bin, encoder="han", head="gile", share_encoder=share_encoder,
                        share_attention=share_attention)
    en, pl = model.encoder["en"], model.encoder["pl"]
    assert (en.words.word is pl.words.word) == share_encoder and (en.sentence is pl.sentence) == share_encoder
    assert (en.words.attention is pl.words.attention) == share_attention
    assert (en.attention is pl.attention) == share_attention
    # one joint space (U, b_u, V, b_v) for all; w and b are each language's (GILE Sec. 3.3)
    h_en, h_pl = model.head["en"], model.head["pl"]
    for name in ("class_weight", "class_bias", "context_weight", "context_bias"):
        assert getattr(h_en, name) is getattr(h_pl, name), name
    assert h_en.context_scale is not h_pl.context_scale and h_en.bias is not h_pl.bias
    assert model.embed_tokens["en"] is not model.embed_tokens["pl"]
    # a gradient step through pl's batch moves the shared projection and pl's w, not en's w
    x = torch.randint(4, 50, (3, 12))
    labels = task.label_set("train")
    model.label_scores(model(x, lang="pl"), labels.tokens, labels.train_index, lang="pl").sum().backward()
    assert h_en.context_weight.grad is not None and h_pl.context_scale.grad is not None
    assert h_en.context_scale.grad is None
    # distinct parameters: every sharing removes exactly the shared modules' parameters
    word = sum(p.numel() for p in en.words.word.parameters()) + sum(p.numel() for p in en.sentence.parameters())
    att = sum(p.numel() for p in en.words.attention.parameters()) + sum(p.numel() for p in en.attention.parameters())
    _, alone = build(ml_bin, encoder="han", head="gile")
    count = sum(p.numel() for p in model.parameters())
    assert count == sum(p.numel() for p in alone.parameters()) - share_encoder * word - share_attention * att


def test_linear_head_has_a_weight_matrix_per_language(ml_bin):
    _, model = build(ml_bin, encoder="wan", head="linear")
    assert model.head["en"].weight is not model.head["pl"].weight


def test_paired_batches_cycle_the_smaller_language_and_validation_scores_each_document_once(ml_bin, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(ml_bin / "en", data / "en")
    small = tmp_path / "raw-pl"
    small.mkdir()
    lines = (ML_SAMPLE / "pl" / "train.jsonl").read_text(encoding="utf-8").splitlines()[:70]
    (small / "train.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    preprocess_gile("--train", small / "train.jsonl", "--valid", ML_SAMPLE / "pl" / "valid.jsonl", "--labels",
                    ML_SAMPLE / "labels.tsv", "--lang", "pl", "--destdir", data / "pl")
    task, _ = build(data)
    for split in ("train", "valid"):
        task.load_dataset(split, combine=True)  # as fairseq-train loads its training split
    train = task.dataset("train")
    itr = task.get_batch_iterator(train, max_sentences=32, seed=3, epoch=1).next_epoch_itr(shuffle=True)
    seen, updates = {"en": [], "pl": []}, 0
    for sample in itr:
        updates += 1
        assert list(sample["languages"]) == ["en", "pl"]  # one batch of each language per update (Eq. 16)
        for lang, batch in sample["languages"].items():
            assert batch["lang"] == lang and batch["net_input"]["lang"] == lang
            seen[lang] += batch["id"].tolist()
    assert sorted(seen["en"]) == list(range(240))  # an epoch is one pass over the largest language
    pl_ids = np.array(seen["pl"]) - 240
    assert updates == 8 and set(pl_ids.tolist()) == set(range(70))  # the smaller one (3 batches) cycled to 8
    assert np.bincount(pl_ids).min() >= 2
    valid = task.get_batch_iterator(task.dataset("valid"), max_sentences=32).next_epoch_itr(shuffle=False)
    ids = []
    for sample in valid:
        assert sample["lang"] in ("en", "pl") and "languages" not in sample
        ids += sample["id"].tolist()
    assert sorted(ids) == list(range(120))


def test_the_objective_is_the_weighted_sum_of_the_languages_losses(ml_bin):
    """Eq. 16 with --language-weights: L = Σ_l λ_l L_l, gradients of every language's batch accumulated."""
    from fairseq_joint.criterions.multilabel_classification import MultilabelClassificationCriterion

    torch.manual_seed(0)
    cfg = GileClassificationConfig(data=str(ml_bin), languages="en,pl", language_weights="pl=0.25")
    task = GileClassificationTask.setup_task(cfg)
    model = GileClassifier.build_model(GileClassifierConfig(embed_dim=8, encoder_dim=8, attention_dim=8,
                                                            joint_dim="12", encoder="wan"), task)
    criterion = MultilabelClassificationCriterion(task)
    task.load_dataset("train", combine=True)
    sample = next(iter(task.get_batch_iterator(task.dataset("train"), max_sentences=8).next_epoch_itr(shuffle=False)))
    optimizer = SimpleNamespace(backward=lambda loss: loss.backward())
    loss, size, log = task.train_step(sample, model, criterion, optimizer, update_num=0)
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad()
    model.train()
    parts = {lang: criterion(model, batch) for lang, batch in sample["languages"].items()}
    assert float(loss) == pytest.approx(float(parts["en"][0] + 0.25 * parts["pl"][0]), rel=1e-5)
    assert size == parts["en"][1] + parts["pl"][1]
    assert set(log["by_language"]) == {"en", "pl"}
    (parts["en"][0] + 0.25 * parts["pl"][0]).backward()
    again = [p.grad for p in model.parameters() if p.grad is not None]
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads, again))


def test_a_language_without_documents_of_unseen_labels_is_said_at_loading(ml_bin, tmp_path, caplog):
    """Its unseen AvgPr and GZSL H are not logged, and the unprefixed ones average the other languages' (what
    --best-checkpoint-metric gzsl_h selects on): said once, when its validation split is loaded."""
    data = tmp_path / "data"
    shutil.copytree(ml_bin, data)
    seen = set((data / "pl" / "labels.train.txt").read_text(encoding="utf-8").split())
    rows = (data / "pl" / "valid.labels").read_text(encoding="utf-8").splitlines()
    kept = [" ".join(n for n in row.split() if n in seen) or sorted(seen)[0] for row in rows]
    (data / "pl" / "valid.labels").write_text("".join(row + "\n" for row in kept), encoding="utf-8")
    task, _ = build(data)
    with caplog.at_level("WARNING", logger="fairseq_joint.data.gile_datasets"):
        task.load_dataset("valid")
    said = [r.getMessage() for r in caplog.records if "unseen in training" in r.getMessage()]
    assert said == ["valid pl: no document carries a label unseen in training, so pl_unseen_avgpr and pl_gzsl_h are "
                    "not logged and the unprefixed unseen_avgpr and gzsl_h average the other languages' "
                    "(--best-checkpoint-metric gzsl_h selects on those)"], said


def test_multilingual_bad_input_is_refused_in_one_line(ml_bin, tmp_path):
    # a language whose label file disagrees with the others'
    data = tmp_path / "data"
    shutil.copytree(ml_bin, data)
    labels = (data / "pl" / "labels.tsv").read_text(encoding="utf-8").splitlines()
    labels[0] = labels[0].split("\t")[0] + "\tsomething else"
    (data / "pl" / "labels.tsv").write_text("\n".join(labels) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"pl/labels.tsv disagrees with .*en/labels.tsv .*same --labels file"):
        build(data)
    # a directory whose documents are of another language than --languages reads it as
    data2 = tmp_path / "data2"
    shutil.copytree(ml_bin / "en", data2 / "en")
    shutil.copytree(ml_bin / "pl", data2 / "de")
    with pytest.raises(InputError, match=r"de/language.txt says its documents are 'pl', but --languages reads"):
        build(data2, languages="en,de")
    # a --label-file without a line for a label the languages' training documents carry
    short = tmp_path / "short.tsv"
    short.write_text("".join(line + "\n" for line in labels[1:]), encoding="utf-8")
    with pytest.raises(InputError, match=r"short.tsv: 1 training label\(s\) have no description .*add a 'label<TAB>"):
        GileClassificationTask.setup_task(GileClassificationConfig(data=str(ml_bin), languages="en,pl",
                                                                   label_file=str(short)))
    with pytest.raises(MissingFileError, match=r"fr/dict.txt: no such file: binarize the data with "
                                               r"fairseq-joint-preprocess-gile --lang fr"):
        build(ml_bin, languages="en,fr")
    with pytest.raises(OptionError, match=r"--languages 'en,en': give distinct language names"):
        build(ml_bin, languages="en,en")
    with pytest.raises(OptionError, match=r"--language-weights 'xx=1': give LANG=W; LANG one of"):
        GileClassificationTask.setup_task(GileClassificationConfig(data=str(ml_bin), languages="en,pl",
                                                                   language_weights="xx=1"))
    assert GileClassificationTask.setup_task(GileClassificationConfig(  # spaces after the commas, as --languages reads
        data=str(ml_bin), languages="en, pl", language_weights="pl=2")).language_weights == {"en": 1.0, "pl": 2.0}
    with pytest.raises(OptionError, match=r"^--language-weights 'pl=2': LANG pl is given twice: give each LANG once$"):
        GileClassificationTask.setup_task(GileClassificationConfig(data=str(ml_bin), languages="en,pl",
                                                                   language_weights="pl=0.5,pl=2"))
    # aligned vectors of different dimensions, and a single file for several languages
    (tmp_path / "v.en.txt").write_text("2 8\nlibrary " + " ".join(["0.1"] * 8) + "\nfile " + " ".join(["0.2"] * 8) + "\n")
    (tmp_path / "v.pl.txt").write_text("1 6\nbiblioteka " + " ".join(["0.1"] * 6) + "\n")
    with pytest.raises(InputError, match=r"v.pl.txt \(pl\) has 6-d vectors but .*v.en.txt \(en\) 8-d"):
        build(ml_bin, embed_path=str(tmp_path / "v.{lang}.txt"))
    with pytest.raises(OptionError, match=r"^--embed-path '.*v.en.txt': give LANG=FILE,LANG=FILE or a path with "
                                          r"\{lang\} \(e.g. vectors.\{lang\}.txt\); LANG one of en, pl$"):
        build(ml_bin, embed_path=str(tmp_path / "v.en.txt"))
    with pytest.raises(OptionError, match=r"^--embed-path 'en=.*v.pl.txt': LANG en is given twice: give each LANG once$"):
        build(ml_bin, embed_path=f"en={tmp_path / 'v.en.txt'},en={tmp_path / 'v.pl.txt'}")
    # a document whose lang field contradicts --lang
    out = preprocess_gile("--train", ML_SAMPLE / "pl" / "train.jsonl", "--lang", "uk", "--destdir", tmp_path / "uk",
                          check=False)
    assert out.returncode != 0 and "train.jsonl:1: lang 'pl' contradicts --lang uk" in out.stderr
    out = preprocess_gile("--train", ML_SAMPLE / "pl" / "train.jsonl", "--lang", "p\\l", "--destdir", tmp_path / "bs",
                          check=False)
    assert out.returncode == 2 and "--lang 'p\\\\l': give a language name without spaces or , = / \\" in out.stderr


def test_per_language_aligned_vectors_fill_each_languages_embedding(ml_bin, tmp_path):
    en_words = {"library": 0.5, "file": -0.5}
    (tmp_path / "v.en.txt").write_text("".join(f"{w} " + " ".join([str(v)] * 8) + "\n" for w, v in en_words.items()))
    (tmp_path / "v.pl.txt").write_text("\nbiblioteka " + " ".join(["0.25"] * 8) + "\n")  # a blank line is no header
    task, model = build(ml_bin, embed_path=f"en={tmp_path / 'v.en.txt'},pl={tmp_path / 'v.pl.txt'}")
    en, pl = task.corpus.dictionaries["en"], task.corpus.dictionaries["pl"]
    assert torch.allclose(model.embed_tokens["en"].weight[en.index("library")], torch.full((8,), 0.5))
    assert torch.allclose(model.embed_tokens["pl"].weight[pl.index("biblioteka")], torch.full((8,), 0.25))


def test_multilingual_study_table_seeds_ablations_and_reuse(ml_bin, tmp_path):
    """The study driver end to end on the sample: L alone vs en + L, two seeds (mean ± std), a sharing ablation with
    one seed (the seeds column says so), evaluation per label group on L's and en's documents, and reuse."""
    pair = tmp_path / "aligned" / "en-pl"
    pair.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for lang in ("en", "pl"):
        words = [w for w in (ml_bin / lang / "dict.txt").read_text(encoding="utf-8").split("\n")[:50] if w]
        (pair / f"vectors.{lang}.txt").write_text(
            "".join(w.split()[0] + " " + " ".join(f"{v:.3f}" for v in rng.normal(size=100)) + "\n" for w in words),
            encoding="utf-8")
    args = ["--data-bin", ml_bin, "--aligned-dir", tmp_path / "aligned", "--workdir", tmp_path / "w", "--languages",
            "pl", "--systems", "gile-han,gile-mhan-both", "--ablations", "gile-mhan-enc", "--seeds", "1,2",
            "--ablation-seeds", "1", "--mono-epochs", "1", "--multi-epochs", "1", "--joint-dim", "8",
            "--gile-options", "--similarity-init --joint-activation tanh", "--validate-each-pass"]
    first = python_script("examples/gile/multilingual_study.py", *args)
    assert "reusing" not in first.stdout + first.stderr
    runs = [line for line in (first.stdout + first.stderr).splitlines() if "running: " in line]
    assert len(runs) == 5 and all("--similarity-init --joint-activation tanh" in line for line in runs)
    # en + L runs validate after every pass over L (240 documents in batches of 32: 8 updates), L alone per epoch
    assert sum("--validate-interval-updates 8 --save-interval-updates 8" in line for line in runs) == 3
    assert not any("--validate-interval-updates" in line for line in runs if "--languages pl " in line)
    result = json.loads((tmp_path / "w" / "results.json").read_text())["results"]
    mono, multi, enc = (result["pl"][s] for s in ("gile-han", "gile-mhan-both", "gile-mhan-enc"))
    assert [r["seed"] for r in mono["runs"]] == [1, 2] and "runs" not in enc
    assert mono["seen_avgpr"] == pytest.approx(np.mean([r["seen_avgpr"] for r in mono["runs"]]))
    assert mono["seen_avgpr_std"] == pytest.approx(np.std([r["seen_avgpr"] for r in mono["runs"]], ddof=1))
    # the multilingual models are scored on English documents too (en + L -> en); L alone has no English side
    assert "en_seen_avgpr" in multi and "en_seen_avgpr" in enc and "en_seen_avgpr" not in mono
    table = {line.split(" | ")[1]: line.split(" | ")[2:] for line in
             (tmp_path / "w" / "results.md").read_text().splitlines()[2:]}
    assert {name: cells[0] for name, cells in table.items()} == {"chance": "–", "gile-han": "2", "gile-mhan-enc": "1",
                                                                 "gile-mhan-both": "2"}
    chance = float(table["chance"][1])  # the seen labels' AvgPr of random scores
    for name, stats in (("gile-han", mono), ("gile-mhan-both", multi), ("gile-mhan-enc", enc)):
        assert stats["docs"] == 60
        assert table[name][1].startswith(f"{stats['seen_avgpr']:.2f}")  # the table reports the runs' figures
        assert stats["seen_avgpr"] > chance, (name, stats["seen_avgpr"], chance)  # trained labels rank above chance
    assert (tmp_path / "w" / "results.png").stat().st_size > 0
    again = python_script("examples/gile/multilingual_study.py", *args)
    assert (again.stdout + again.stderr).count("reusing the finished run") == 5
    assert json.loads((tmp_path / "w" / "results.json").read_text())["results"] == result
    # --no-train: the tables from what finished; a seed not run is left out and said so, nothing is trained
    partial = python_script("examples/gile/multilingual_study.py", *[a if a != "1,2" else "1,2,3" for a in args],
                            "--no-train")
    assert (partial.stdout + partial.stderr).count("not finished, left out of the tables (--no-train)") == 2
    assert "running: " not in partial.stdout + partial.stderr and not (tmp_path / "w" / "pl" / "gile-han" / "seed3").exists()
    assert json.loads((tmp_path / "w" / "results.json").read_text())["results"] == result
    # nothing to show: a new workdir, no system, nothing trained -> the chance rows only, no plot
    python_script("examples/gile/multilingual_study.py", "--data-bin", ml_bin, "--aligned-dir", tmp_path / "aligned",
                  "--workdir", tmp_path / "empty", "--languages", "pl", "--systems", "", "--no-train")
    assert (tmp_path / "empty" / "results.md").read_text().count("| pl |") == 1
    assert not (tmp_path / "empty" / "results.png").exists()


def test_one_pretrained_sentence_encoder_serves_every_language(ml_bin, tmp_path, sentence_encoder):
    """--encoder pretrained with --languages: one frozen sentence encoder for every language (each language's
    embeddings cached in its own directory, the descriptions in the label language's), one joint space, a
    classification unit per language; trained, validated per language, reloaded, and used to predict by language."""
    data = tmp_path / "data"
    shutil.copytree(ml_bin, data)
    encoder = dict(encoder="pretrained", pretrained_encoder=str(sentence_encoder))  # the task's are the model's
    task = GileClassificationTask.setup_task(GileClassificationConfig(data=str(data), languages="en,pl",
                                                                      finetune_encoder=False, **encoder))
    model = GileClassifier.build_model(GileClassifierConfig(**encoder, head="gile", joint_dim="24"), task)
    assert model.sentence_encoder is not None and model.embed_tokens is None
    h_en, h_pl = model.head["en"], model.head["pl"]
    for name in ("class_weight", "class_bias", "context_weight", "context_bias"):
        assert getattr(h_en, name) is getattr(h_pl, name), name
    assert h_en.context_scale is not h_pl.context_scale  # w is each language's own

    save = tmp_path / "ckpt"
    train = cli("fairseq-train", data, *GILE_TRAIN, "--languages", "en,pl", "--encoder", "pretrained",
                "--pretrained-encoder", sentence_encoder, "--head", "gile", "--similarity-init",
                "--criterion", "multilabel_classification", "--max-epoch", "2", "--save-dir", save,
                "--optimizer", "adam", "--lr", "2e-3", "--batch-size", "32", "--no-progress-bar", "--log-interval", "1",
                "--seed", "1", "--num-workers", "0", "--no-epoch-checkpoints")
    out = train.stdout + train.stderr
    assert "one encoder for en, pl" in out
    stats = valid_line(out)
    assert stats["en_docs"] == 60 and stats["pl_docs"] == 60
    assert stats["unseen_avgpr"] == pytest.approx((stats["en_unseen_avgpr"] + stats["pl_unseen_avgpr"]) / 2, abs=0.011)
    for lang in ("en", "pl"):  # each language's texts cached beside its own data
        cached = sorted(p.name.split(".")[0] for p in (data / lang / "embeddings").glob("*.npy"))
        assert {"train", "valid"} <= set(cached), (lang, cached)
    assert list((data / "en" / "embeddings").glob("train-labels.*.npy"))  # the descriptions: the label language's
    val = cli("fairseq-validate", data, "--user-dir", "fairseq_joint", "--task", "gile_classification",
              "--path", save / "checkpoint_last.pt", "--batch-size", "32", "--num-workers", "0")
    again = valid_line(val.stdout + val.stderr)
    for key in ("loss", "en_seen_avgpr", "pl_seen_avgpr", "pl_unseen_avgpr"):
        assert again[key] == pytest.approx(stats[key], abs=0.011), key
    texts = tmp_path / "pl.txt"
    texts.write_text("Biblioteka do obsługi plików graficznych PNG.\nGra strategiczna czasu rzeczywistego.\n")
    ranked = {}
    for lang in ("en", "pl"):  # the same text, scored by each language's classification unit
        run = cli("fairseq-joint-predict-labels", "--checkpoint", save / "checkpoint_last.pt", "--labels",
                  ML_SAMPLE / "labels.tsv", "--input", texts, "--lang", lang, "--topk", "5", "--json")
        ranked[lang] = [json.loads(line) for line in run.stdout.splitlines()]
        assert len(ranked[lang]) == 2
    assert ranked["en"] != ranked["pl"]

    # the study driver with the one sentence encoder instead of HAN over aligned vectors
    args = ["--data-bin", data, "--sentence-encoder", sentence_encoder, "--workdir", tmp_path / "w", "--languages",
            "pl", "--systems", "gile-han,gile-mhan-both", "--seeds", "1", "--mono-epochs", "1", "--multi-epochs", "1",
            "--gile-options", "--similarity-init --seen-label-bias"]
    study = python_script("examples/gile/multilingual_study.py", *args)
    runs = [line for line in (study.stdout + study.stderr).splitlines() if "running: " in line]
    assert len(runs) == 2 and all("--encoder pretrained " in line and f"--pretrained-encoder {sentence_encoder} " in line
                                  and "--joint-dim auto" in line and "--embed-path" not in line for line in runs)
    result = json.loads((tmp_path / "w" / "results.json").read_text())["results"]["pl"]
    assert result["gile-mhan-both"]["docs"] == 60 and "en_unseen_avgpr" in result["gile-mhan-both"]
    for extra, said in ((["--systems", "gile-mhan-enc"], "one encoder serves every language"),
                        (["--aligned-dir", tmp_path], "one of the two")):
        bad = python_script("examples/gile/multilingual_study.py", *args, *extra, check=False)
        assert bad.returncode == 2 and said in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_the_multilingual_recipe_makes_a_student_shared_lexical_features_and_one_model(tmp_path, sentence_encoder):
    """examples/gile/multilingual.sh DATA WORKDIR on the bundled en/pl sample (a tiny teacher, 1 epoch): the student,
    every language's binaries with one lexical model (the same file in each directory), and a gile_multilingual model
    that predicts by language from WORKDIR/checkpoint_last.pt; a second run reuses every step."""
    import os

    from fairseq_joint.hub import LabelPredictor

    env = dict(os.environ, PATH=f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}", TEACHER=str(sentence_encoder),
               EPOCHS="1", LEXICAL_FEATURES="2048", HELDOUT_DOCS="40")
    work = tmp_path / "w"
    run = cli("bash", REPO / "examples/gile/multilingual.sh", ML_SAMPLE, work, "--no-progress-bar", env=env)
    assert (work / "student" / "alignment.json").is_file()
    en, pl = ((work / "bin" / lang / "lexical.json").read_text() for lang in ("en", "pl"))
    assert en == pl and '"tokenizer": "gile"' in en  # fitted once, on both languages' texts, and copied
    log = (work / "train.log").read_text()
    assert "gile_multilingual" in log and "one encoder for en, pl" in log
    assert valid_line(log)["pl_docs"] == 60
    predictor = LabelPredictor.from_checkpoint(work / "checkpoint_last.pt")
    ranked = predictor.predict("Biblioteka do obsługi plików graficznych PNG.", labels=str(ML_SAMPLE / "labels.tsv"),
                               lang="pl", topk=3)
    assert len(ranked) == 3
    # over one sentence encoder the model reads a text without its language: the mean of the units' logits
    text, labels = "Biblioteka do obsługi plików graficznych PNG.", str(ML_SAMPLE / "labels.tsv")
    per_lang = [predictor.scores(text, labels, lang=lang).scores for lang in ("en", "pl")]
    assert not torch.allclose(per_lang[0], per_lang[1])  # the classification units differ
    torch.testing.assert_close(predictor.scores(text, labels).scores, (per_lang[0] + per_lang[1]) / 2)
    (tmp_path / "pl.txt").write_text(text + "\n", encoding="utf-8")
    anywhere = cli("fairseq-joint-predict-labels", "--checkpoint", work / "checkpoint_last.pt", "--labels", labels,
                   "--input", tmp_path / "pl.txt", "--topk", "3", "--json")
    assert len(anywhere.stdout.splitlines()) == 1
    assert "no --lang: each text is scored with the mean of the classification units of en, pl" in anywhere.stderr
    bad = cli("fairseq-joint-predict-labels", "--checkpoint", work / "checkpoint_last.pt", "--labels", labels,
              "--input", tmp_path / "pl.txt", "--lang", "xx", check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "trained on en, pl, not 'xx': give one of them" in bad.stderr
    # each language's row against its two tools: the targets' marks follow from the figures beside them, and the
    # model is scored with and without the texts' language
    python_script("examples/gile/multilingual_two_tools.py", "--data", ML_SAMPLE, "--data-bin", work / "bin",
                  "--encoder", work / "student", "--checkpoints", work / "checkpoint_last.pt", "--workdir",
                  tmp_path / "study", "--lambdas", "0,20")
    report = json.loads((tmp_path / "study" / "two_tools.json").read_text())
    assert (tmp_path / "study" / "two_tools.png").is_file()
    table = (tmp_path / "study" / "two_tools.md").read_text(encoding="utf-8")
    for lam in ("0", "20"):
        for lang in ("en", "pl"):
            row, base = report["table"][lam][lang], report["baselines"][lang]
            assert base["docs"] == 60 and base["seen_labels"] > 0 and 0 < base["chance_unseen"] < 100
            marks = ["✓" if ok else "✗" for ok in (row["seen_avgpr"] >= base["tfidf_lr"],
                                                  row["unseen_avgpr"] >= max(base["cosine"], 3 * base["chance_unseen"]),
                                                  row["cal_gzsl_h"] > base["two_tools"])]
            assert f"| {' '.join(marks)} | {row['seen_avgpr_no_lang']:.2f} / " in table
    assert report["table"]["0"]["pl"]["unseen_avgpr"] != report["table"]["20"]["pl"]["unseen_avgpr"]  # λ applied
    again = cli("bash", REPO / "examples/gile/multilingual.sh", ML_SAMPLE, work, "--no-progress-bar", env=env)
    assert "distilling" not in again.stderr and "binarizing" not in again.stderr and "training" not in again.stderr
    assert "not trained again" in again.stderr and "done:" in again.stderr and run.returncode == 0
    # another seed (or other options) is not skipped without a word: refused, with the way to reuse the rest
    other = cli("bash", REPO / "examples/gile/multilingual.sh", ML_SAMPLE, work, env=dict(env, SEED="2"), check=False)
    said = other.stderr.strip().splitlines()
    assert other.returncode == 2 and len(said) == 1 and "is of other settings" in said[0] and "SEED=2" in said[0] \
        and f"ln -s {work}/{{student,bin}} NEW/" in said[0], other.stderr
    # bad input: one line each
    for data, extra, said in ((tmp_path, {}, "labels.tsv is missing"),
                              (ML_SAMPLE, {"LANGS": "pl,en"}, "the pivot language en (the descriptions' language) "
                                                               "comes first"),
                              (ML_SAMPLE, {"LANGS": "en,xx"}, "xx/train.jsonl is missing")):
        bad = cli("bash", REPO / "examples/gile/multilingual.sh", data, tmp_path / "bad", env=dict(env, **extra),
                  check=False)
        assert bad.returncode == 2 and said in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_a_multilingual_hybrid_reads_one_lexical_model(tmp_path, sentence_encoder):
    """Languages preprocessed with their own lexical models are refused by name; the preprocessing options that
    contradict each other too."""
    data = tmp_path / "bin"
    for lang in ("en", "pl"):
        preprocess_gile("--train", ML_SAMPLE / lang / "train.jsonl", "--valid", ML_SAMPLE / lang / "valid.jsonl",
                        "--labels", ML_SAMPLE / "labels.tsv", "--lang", lang, "--destdir", data / lang,
                        "--lexical-features", "512")
    with pytest.raises(InputError, match=rf"^{data}/pl/lexical.json is not the lexical model of "
                                         rf"{data}/en/lexical.json: .* --lexical-model {data}/en/lexical.json$"):
        task = GileClassificationTask.setup_task(GileClassificationConfig(
            data=str(data), languages="en,pl", encoder="hybrid", pretrained_encoder=str(sentence_encoder),
            lexical_dim=8, finetune_encoder=False))
        assert task.sentence_encoder is None  # not reached
    for extra, said in ((["--lexical-model", data / "en" / "lexical.json", "--lexical-features", "64"],
                         "--lexical-model copies a fitted lexical model: drop --lexical-features"),
                        (["--lexical-tokenizer", "gile"], "add --lexical-features"),
                        (["--lexical-features", "64", "--lexical-texts", ML_SAMPLE / "pl" / "train.jsonl",  # counted
                          ML_SAMPLE / "en" / ".." / "pl" / "train.jsonl"],  # twice
                         f"--lexical-texts {ML_SAMPLE}/en/../pl/train.jsonl is given twice: give each file once"),
                        (["--lexical-features", str(2 ** 25)],  # refused before the data is read
                         "argument --lexical-features: must be an integer in [1, 16777216], got 33554432")):
        bad = cli("fairseq-joint-preprocess-gile", "--train", ML_SAMPLE / "pl" / "train.jsonl", "--labels",
                  ML_SAMPLE / "labels.tsv", "--destdir", tmp_path / "x", *extra, check=False)
        assert bad.returncode == 2 and said in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
