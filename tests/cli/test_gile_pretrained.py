"""GILE over a pretrained sentence encoder through the real CLIs, with a tiny random sentence-transformers model
built in a temp directory (no download): frozen training with cached embeddings (cached = uncached, a stale or
broken cache rebuilt), checkpoint round trips, predict_labels on labels never seen and calibrated stacking,
fine-tuning on CPU, and the one-line errors for a bad encoder directory or dimension."""

import json
import re
import shutil

import pytest
from conftest import GILE_TRAIN, SAMPLE, assert_same_tensors, build_sentence_encoder, cli, state, valid_line

FAST = ["--optimizer", "adam", "--lr", "2e-3", "--batch-size", "32", "--no-progress-bar", "--log-interval", "1",
        "--seed", "1", "--num-workers", "0", "--no-epoch-checkpoints", "--criterion", "multilabel_classification"]
METRICS = ("loss", "seen_avgpr", "seen_rl", "unseen_avgpr", "gzsl_seen_avgpr", "gzsl_unseen_avgpr", "gzsl_h")


@pytest.fixture()
def data(gile_bin, tmp_path):
    """A private copy of the binarized sample (the tests write embedding caches into it)."""
    dest = tmp_path / "bin"
    shutil.copytree(gile_bin, dest)
    return dest


def train(data, save, encoder, *extra, check=True):
    return cli("fairseq-train", data, *GILE_TRAIN, "--encoder", "pretrained", "--pretrained-encoder", encoder,
               "--max-epoch", "2", "--save-dir", save, *FAST, *extra, check=check)


def validate(data, checkpoint, *extra):
    out = cli("fairseq-validate", data, "--user-dir", GILE_TRAIN[1], "--task", "gile_classification", "--path",
              checkpoint, "--batch-size", "32", "--num-workers", "0", *extra)
    return valid_line(out.stdout + out.stderr)


@pytest.mark.parametrize("head", ["gile", "linear"])  # bil_n16: the cache test below
def test_frozen_encoder_cache_round_trip_and_gzsl(data, tmp_path, sentence_encoder, head):
    extra = ["--head", head] + ([] if head == "linear" else ["--similarity-init"])
    run = train(data, tmp_path / "ck", sentence_encoder, *extra)
    log = run.stdout + run.stderr
    stats = valid_line(log)
    assert stats["docs"] == 45
    assert ("gzsl_h" in stats) == (head != "linear")
    cache = sorted(p.name for p in (data / "embeddings").glob("*.npy"))
    assert {n.split(".")[0] for n in cache} == {"eval-labels", "train", "train-labels", "valid"} and len(cache) == 4
    # the checkpoint holds the head, not the frozen encoder's weights
    import torch

    state = torch.load(tmp_path / "ck" / "checkpoint_last.pt", weights_only=True)["model"]
    assert not any(k.startswith("encoder.") for k in state) and "encoder_signature" in state
    # round trip: fairseq-validate from the cache, then with the cache deleted (embedded again): the same figures
    cached = validate(data, tmp_path / "ck" / "checkpoint_last.pt")
    again = cli("fairseq-validate", data, "--user-dir", GILE_TRAIN[1], "--task", "gile_classification", "--path",
                tmp_path / "ck" / "checkpoint_last.pt", "--batch-size", "32", "--num-workers", "0")
    assert "embeddings of valid (45 texts) from the cache" in again.stdout + again.stderr
    shutil.rmtree(data / "embeddings")
    fresh = validate(data, tmp_path / "ck" / "checkpoint_last.pt")
    for key in METRICS:
        if key in stats:
            assert cached[key] == fresh[key] == pytest.approx(stats[key], abs=0.011), key


def test_similarity_init_starts_at_the_encoders_cosine(data, tmp_path, sentence_encoder):
    """Before any update the gile head scores the encoder's cosine up to a constant (the study's cosine baseline), so
    it ranks as the cosine does, up to float32 noise between near-tied labels."""
    import numpy as np

    from fairseq_joint.metrics import gzsl_summary
    from fairseq_joint_studies.study_metrics import split_scores

    train(data, tmp_path / "ck", sentence_encoder, "--head", "gile", "--similarity-init", "--max-update", "1",
          "--lr", "1e-12")
    from fairseq_joint.loaders import load_gile_model
    from fairseq_joint.modules.sentence_encoder import EmbeddingCache

    model, task = load_gile_model(str(tmp_path / "ck" / "checkpoint_last.pt"))
    scores, gold, label_set = split_scores(model, task, "valid")
    texts = EmbeddingCache(str(data)).get(model.sentence_encoder, "valid", [
        json.loads(line) for line in (data / "valid.text").read_text(encoding="utf-8").splitlines()])
    cosine = (texts @ label_set.tokens.T).numpy()
    assert np.allclose(scores - scores.mean(), cosine - cosine.mean(), atol=1e-4)
    seen = label_set.train_index.numpy() >= 0
    # two float32 computations of one cosine (within 1e-4 above): labels tied closer than that may swap ranks, which
    # moves the tiny random encoder's AvgPr in the fourth digit (seen with transformers 5.24 / sentence-transformers
    # 6.2), so the metrics agree to 5e-3, not to the last bit
    assert gzsl_summary(scores, gold, seen) == pytest.approx(gzsl_summary(cosine, gold, seen), abs=5e-3)


def test_predict_unseen_labels_seen_score_offset_and_encoder_errors(data, tmp_path, sentence_encoder):
    run = train(data, tmp_path / "ck", sentence_encoder, "--head", "gile", "--similarity-init", "--max-epoch", "1")
    # counted and logged (sentence-transformers cuts them without a word)
    assert re.search(r"\| train: \d+ of 150 texts are longer than the encoder's max_seq_length 64 word pieces: it "
                     r"reads their first 64", run.stdout + run.stderr)
    ckpt = tmp_path / "ck" / "checkpoint_last.pt"
    texts = tmp_path / "texts.txt"
    texts.write_text("a text editor for programmers\nnetwork audio streaming server\n" + "audio " * 80 + "\n")
    seen = set((data / "labels.train.txt").read_text().split())
    out = cli("fairseq-joint-predict-labels", "--checkpoint", ckpt, "--labels", SAMPLE / "labels.tsv",
              "--input", texts, "--topk", "469", "--json")
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(rows) == 3 and all(len(r["labels"]) == 469 for r in rows)
    assert "note: 1 of 3 texts are longer than the encoder's max_seq_length 64 word pieces" in out.stderr
    unseen_scored = {n for r in rows for n, _ in r["labels"] if n not in seen}
    assert len(unseen_scored) == 469 - len(seen)  # labels never seen in training are scored from their descriptions
    # calibrated stacking: a large γ puts every unseen label above every seen one
    out = cli("fairseq-joint-predict-labels", "--checkpoint", ckpt, "--labels", SAMPLE / "labels.tsv",
              "--input", texts, "--topk", "5", "--json", "--seen-score-offset", "1000")
    for line in out.stdout.splitlines():
        assert all(n not in seen for n, _ in json.loads(line)["labels"])
    # another encoder: other dimension, or other weights of the same dimension -> one-line errors naming the fix
    other_dim = build_sentence_encoder(tmp_path / "enc8", dim=8)
    other_weights = build_sentence_encoder(tmp_path / "enc16b", dim=16, seed=5)
    for encoder, message in ((other_dim, "trained with a 16-d sentence encoder, but --pretrained-encoder"),
                             (other_weights, "holds other weights than the frozen encoder")):
        out = cli("fairseq-joint-predict-labels", "--checkpoint", ckpt, "--labels", SAMPLE / "labels.tsv",
                  "--input", texts, "--pretrained-encoder", encoder, check=False)
        assert out.returncode == 2 and message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_stale_and_broken_caches_are_rebuilt(data, tmp_path, sentence_encoder):
    train(data, tmp_path / "a", sentence_encoder, "--head", "bil_n16", "--max-epoch", "1")
    before = {p.name for p in (data / "embeddings").glob("valid.*.npy")}
    other = build_sentence_encoder(tmp_path / "other", dim=16, seed=3)
    run = train(data, tmp_path / "b", other, "--head", "bil_n16", "--max-epoch", "1")
    after = {p.name for p in (data / "embeddings").glob("valid.*.npy")}
    assert len(after) == 1 and after != before  # another model: another key; the stale file is gone
    assert "made from other data or another model: replaced" in run.stdout + run.stderr
    (data / "embeddings" / after.pop()).write_bytes(b"not an array")
    run = train(data, tmp_path / "c", other, "--head", "bil_n16", "--max-epoch", "1")
    assert "is unreadable" in run.stdout + run.stderr and "embedded valid" in run.stdout + run.stderr


def test_finetune_encoder_trains_and_saves_it(data, tmp_path, sentence_encoder):
    import torch

    run = train(data, tmp_path / "ck", sentence_encoder, "--head", "gile", "--similarity-init", "--finetune-encoder",
                "--max-epoch", "1")
    stats = valid_line(run.stdout + run.stderr)
    state = torch.load(tmp_path / "ck" / "checkpoint_last.pt", weights_only=True)["model"]
    key = next(k for k in state if k.startswith("encoder.model.") and k.endswith("word_embeddings.weight"))
    from safetensors.torch import load_file

    initial = load_file(str(sentence_encoder / "model.safetensors"))
    start = next(v for k, v in initial.items() if k.endswith("word_embeddings.weight"))
    assert not torch.equal(state[key], start)  # the encoder was trained
    again = validate(data, tmp_path / "ck" / "checkpoint_last.pt")
    for key in METRICS:
        assert again[key] == pytest.approx(stats[key], abs=0.011), key
    assert not (data / "embeddings").exists()  # fine-tuning reads token ids, not cached vectors
    # another encoder directory (here: the same model with other files) would read the fine-tuned weights with its own
    # tokenizer and architecture: refused in one line
    other = tmp_path / "other_encoder"
    shutil.copytree(sentence_encoder, other)
    (other / "README.md").write_text("another model\n")
    texts = tmp_path / "texts.txt"
    texts.write_text("a text editor\n")
    out = cli("fairseq-joint-predict-labels", "--checkpoint", tmp_path / "ck" / "checkpoint_last.pt", "--labels",
              data / "labels.tsv", "--input", texts, "--pretrained-encoder", other, check=False)
    assert out.returncode != 0 and out.stderr.strip().splitlines() == [
        f"error: --pretrained-encoder {other} is not the encoder directory the checkpoint was fine-tuned from (its "
        "files differ): give that encoder's directory"]


def test_a_resume_with_finetune_label_refresh_ends_as_the_run_never_stopped(data, tmp_path, sentence_encoder):
    """--finetune-label-refresh N keeps the label vectors encoded since the last refresh: a resume between two
    refreshes encoded them again with the encoder of its update (a run of other parameters); the checkpoint holds
    them, so the resumed run ends bit for bit as the one never stopped."""
    flags = ["--head", "gile", "--joint-dim", "8", "--finetune-encoder", "--finetune-label-refresh", "4",
             "--label-sample-rate", "0.5", "--max-update", "6", "--save-interval-updates", "3",
             "--disable-validation"]
    train(data, tmp_path / "full", sentence_encoder, *flags)
    (tmp_path / "resumed").mkdir()
    shutil.copyfile(tmp_path / "full" / "checkpoint_1_3.pt", tmp_path / "resumed" / "checkpoint_last.pt")
    train(data, tmp_path / "resumed", sentence_encoder, *flags)
    final, resumed = (state(tmp_path / run / "checkpoint_last.pt") for run in ("full", "resumed"))
    assert final["optimizer_history"][-1]["num_updates"] == resumed["optimizer_history"][-1]["num_updates"] == 6
    assert_same_tensors(final["model"], resumed["model"], "resumed between two refreshes")


def test_bad_encoder_input(data, tmp_path, sentence_encoder):
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text("{}")
    no_text = tmp_path / "old"
    shutil.copytree(data, no_text)
    (no_text / "valid.text").unlink()
    cases = [
        ((data, tmp_path / "missing"), [], "no such directory"),
        ((data, bare), [], "not a sentence-transformers model (no modules.json)"),
        ((data, sentence_encoder), ["--encoder-dim", "32"], "--encoder-dim 32 disagrees with --pretrained-encoder"),
        ((no_text, sentence_encoder), [], "valid.text: no such file: a pretrained encoder reads the raw texts"),
        ((data, sentence_encoder), ["--head", "linear", "--similarity-init"], "--head linear has no label vectors"),
    ]
    for (d, encoder), extra, message in cases:
        out = train(d, tmp_path / "ck", encoder, "--max-epoch", "1", *extra, check=False)
        assert out.returncode != 0 and message in out.stderr, (message, out.stderr[-1500:])
    out = cli("fairseq-train", data, *GILE_TRAIN, "--finetune-encoder", "--max-epoch", "1", "--save-dir",
              tmp_path / "ck", *FAST, check=False)
    assert out.returncode != 0 and "--finetune-encoder trains the sentence encoder of --encoder pretrained" in out.stderr


def test_gile_pretrained_architecture_is_gile_with_the_best_measured_flags(data, tmp_path, sentence_encoder):
    """--arch gile_pretrained --pretrained-encoder PATH trains the gile head over the hybrid encoder (the frozen
    sentence encoder beside the data's TF-IDF features) with --similarity-init --seen-label-bias --cosine-prior 20:
    the same model, seed for seed, as gile_classifier given those flags."""
    import torch

    arch = cli("fairseq-train", data, "--user-dir", GILE_TRAIN[1], "--task", "gile_classification", "--arch",
               "gile_pretrained", "--pretrained-encoder", sentence_encoder, "--max-epoch", "2", "--save-dir",
               tmp_path / "arch", *FAST)
    stats = valid_line(arch.stdout + arch.stderr)
    assert stats["docs"] == 45 and "gzsl_h" in stats
    flags = train(data, tmp_path / "flags", sentence_encoder, "--encoder", "hybrid", "--head", "gile",
                  "--similarity-init", "--seen-label-bias", "--cosine-prior", "20")
    same = valid_line(flags.stdout + flags.stderr)
    assert {k: v for k, v in same.items() if k != "wps"} == {k: v for k, v in stats.items() if k != "wps"}
    saved = torch.load(tmp_path / "arch" / "checkpoint_last.pt", weights_only=True)
    cfg = saved["cfg"]["model"]
    assert (cfg["encoder"], cfg["head"], cfg["similarity_init"], cfg["seen_label_bias"], cfg["cosine_prior"],
            cfg["lexical_dim"]) == ("hybrid", "gile", True, True, 20.0, 64)
    assert "label_bias" in saved["model"] and "encoder.projection" in saved["model"]
    assert not any(k.startswith("encoder.model.") for k in saved["model"])  # the sentence encoder stays frozen
    again = validate(data, tmp_path / "arch" / "checkpoint_last.pt")
    for key in METRICS:
        assert again[key] == pytest.approx(stats[key], abs=0.011), key
    wrong = cli("fairseq-train", data, "--user-dir", GILE_TRAIN[1], "--task", "gile_classification", "--arch",
                "gile_pretrained", "--encoder", "wan", "--max-epoch", "1", "--save-dir", tmp_path / "wrong", *FAST,
                check=False)
    assert wrong.returncode != 0 and "use --arch gile_classifier" in wrong.stderr.strip().splitlines()[-1]
