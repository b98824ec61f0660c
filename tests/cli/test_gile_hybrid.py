"""``--encoder hybrid`` through the real CLIs on tiny data: fairseq-joint-preprocess-gile --lexical-features fits the
TF-IDF model on the training texts, fairseq-train trains GILE over the frozen tiny sentence encoder + the projected
TF-IDF features and scores the unseen labels, fairseq-joint-predict-labels ranks labels never seen in training from
their descriptions (words included); a checkpoint with data of another lexical model, or of none, is refused in one
line."""

import json

import torch
from conftest import GILE_TRAIN, cli, preprocess_gile, sample_corpus, valid_line

FAST = ["--optimizer", "adam", "--lr", "2e-3", "--batch-size", "32", "--no-progress-bar", "--log-interval", "1",
        "--seed", "1", "--num-workers", "0", "--no-epoch-checkpoints", "--criterion", "multilabel_classification"]


def test_hybrid_encoder_trains_scores_unseen_labels_and_refuses_other_lexical_data(tmp_path, sentence_encoder):
    raw = sample_corpus(tmp_path / "raw")
    data = tmp_path / "bin"
    preprocess_gile("--train", raw / "train.jsonl", "--valid", raw / "valid.jsonl", "--labels", raw / "labels.tsv",
                    "--destdir", data, "--lexical-features", 3000)
    lexical = json.loads((data / "lexical.json").read_text(encoding="utf-8"))
    assert lexical["documents"] == 120 and 100 < len(lexical["terms"]) <= 3000 and "python" in lexical["terms"]
    run = cli("fairseq-train", data, *GILE_TRAIN, "--encoder", "hybrid", "--pretrained-encoder", sentence_encoder,
              "--head", "gile", "--similarity-init", "--seen-label-bias", "--lexical-dim", 16, "--max-epoch", 1,
              "--save-dir", tmp_path / "ck", *FAST)
    log = run.stdout + run.stderr
    assert f"TF-IDF features of {data / 'lexical.json'} projected to 16 dimensions (d = 32)" in log
    stats = valid_line(log)
    assert stats["docs"] == 30 and {"unseen_avgpr", "gzsl_h"} <= set(stats)  # how well: the ranking below
    checkpoint = tmp_path / "ck" / "checkpoint_last.pt"
    state = torch.load(checkpoint, weights_only=True)["model"]
    assert state["encoder.projection"].shape == (len(lexical["terms"]), 16)
    assert not any(k.startswith("encoder.model.") for k in state)  # the sentence encoder stays frozen, not saved
    # labels never seen in training, scored from their descriptions: the one whose words the text has ranks first
    labels = tmp_path / "new.tsv"
    labels.write_text("new::interpreter\tpython interpreter scripting language\n"
                      "new::arcade\tarcade games for children\n", encoding="utf-8")
    texts = tmp_path / "texts.txt"
    texts.write_text("A python interpreter for scripting\n", encoding="utf-8")
    out = cli("fairseq-joint-predict-labels", "--checkpoint", checkpoint, "--labels", labels, "--input", texts,
              "--json", "--topk", 2)
    ranked = json.loads(out.stdout.splitlines()[-1])["labels"]
    assert [name for name, _ in ranked] == ["new::interpreter", "new::arcade"]
    # data whose lexical model was fitted otherwise (here: another cap) are refused, naming the file and the fix
    other = tmp_path / "other"
    preprocess_gile("--train", raw / "train.jsonl", "--valid", raw / "valid.jsonl", "--labels", raw / "labels.tsv",
                    "--destdir", other, "--lexical-features", 50)
    bad = cli("fairseq-joint-predict-labels", "--checkpoint", checkpoint, "--labels", labels, "--input", texts,
              "--data", other, check=False)
    assert bad.returncode != 0 and bad.stderr.strip().splitlines() == [
        f"error: {other / 'lexical.json'} is not the lexical model the checkpoint was trained with "
        f"({len(lexical['terms'])} features then, 50 here): give the data directory it was trained on (--data), or "
        "train a model on this one"]
    # data without a lexical model: --encoder hybrid says how to make one
    (other / "lexical.json").unlink()
    missing = cli("fairseq-joint-predict-labels", "--checkpoint", checkpoint, "--labels", labels, "--input", texts,
                  "--data", other, check=False)
    assert missing.returncode != 0 and missing.stderr.strip().splitlines() == [
        f"error: --encoder hybrid: {other / 'lexical.json'}: no such file: re-run fairseq-joint-preprocess-gile with "
        "--lexical-features (e.g. 32768)"]
