"""label_embedding_cross_entropy through fairseq-train/generate: compressed and sampled training, the full embedding
then generate then the pre-trained embedding (Eq. 17) then the export (full and compressed), an embedding of another
vocabulary, GILE multi-class. (Exact resume: tests/cli/test_resume.py; 2-process gloo training:
tests/cli/test_fairseq_clis.py.)"""

import re

import pytest
import torch
from conftest import (
    GILE_FAST,
    TRAIN_FAST,
    USER_DIR,
    binarize,
    cli,
    preprocess_gile,
    state,
    train_joint,
    valid_line,
    write_zero_shot_data,
)


def train(data, save_dir, updates, *extra, arch="joint_lstm_tiny", check=True):
    return train_joint(data, save_dir, arch, updates, "--criterion", "label_embedding_cross_entropy", *extra,
                       check=check)


def checkpoint(path):
    return state(path)


def test_compressed_sampled_training_and_its_export(tiny_bin, tmp_path):
    """The compressed label embedding (Eq. 16) trained with sampling, its terms logged, then exported. (That the run
    resumes exactly, criterion included: tests/cli/test_resume.py.)"""
    opts = ["--sample-rate", "0.25", "--label-embedding-dim", "16", "--max-tokens", "400"]
    log = train(tiny_bin, tmp_path / "a", 6, *opts)
    assert re.search(r"le_soft1=[\d.]+, le_hard2=[\d.]+, le_hinge=[\d.]+, le_emb=[\d.]+, le_o2_acc=", log.stdout)
    a = checkpoint(tmp_path / "a" / "checkpoint_last.pt")
    assert set(a["criterion"]) >= {"o2.weight", "o2.bias", "label_embedding.A", "label_embedding.B"}
    # the compressed export: the factors A, B of e = ReLU(A_y B) (Eq. 16), and the most similar labels of a query
    out = cli("fairseq-joint-export-label-embedding", tmp_path / "a" / "checkpoint_last.pt", "--output",
              tmp_path / "emb.pt", "--query", "die", "--top-k", 2)
    assert "compressed (h=16)" in out.stdout
    saved = torch.load(tmp_path / "emb.pt", weights_only=True)
    m = len((tiny_bin / "dict.de.txt").read_text().splitlines()) + 4
    assert set(saved) == {"labels", "A", "B"} and len(saved["labels"]) == m
    assert torch.equal(saved["A"], a["criterion"]["label_embedding.A"]) and saved["B"].shape == (16, m)
    die = saved["labels"].index("die")
    e = torch.softmax(torch.relu(saved["A"][die] @ saved["B"]), -1)  # e'_die by hand from the exported factors
    e[:4] = -1.0  # fairseq's special symbols and the query itself are left out
    e[die] = -1.0
    top = e.topk(2)
    expected = "die\t" + "  ".join(f"{saved['labels'][j]} ({v:.4f})" for v, j in zip(top.values.tolist(), top.indices.tolist()))
    assert expected in out.stdout


def test_full_embedding_then_generate_then_pretrained_eq17_then_export(tiny_bin, tmp_path):
    first = tmp_path / "first"
    train(tiny_bin, first, 4, "--label-embedding-dim", "0", arch="joint_transformer_tiny")
    ckpt = first / "checkpoint_last.pt"
    state = checkpoint(ckpt)["criterion"]
    m = len((tiny_bin / "dict.de.txt").read_text().splitlines()) + 4
    assert state["label_embedding.weight"].shape == (m, m)
    assert not torch.equal(state["label_embedding.weight"], torch.eye(m))  # it learned
    gen = cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", ckpt, "--beam", 2, "--max-len-b", 8,
              "--batch-size", 20, "--required-batch-size-multiple", 1, "--scoring", "sacrebleu")
    assert len(re.findall(r"^H-\d+", gen.stdout, re.M)) == 40 and "BLEU" in gen.stdout

    second = tmp_path / "second"
    log = train(tiny_bin, second, 3, "--label-embedding-from", ckpt, "--sample-rate", "0.5",
                arch="joint_transformer_tiny")
    out = log.stdout + log.stderr
    assert "frozen (Eq. 17)" in out and "le_soft1=" in out and "le_hard2" not in out
    frozen = checkpoint(second / "checkpoint_last.pt")["criterion"]  # the embedding it is trained with, saved with it
    assert frozen.keys() == {"label_embedding.weight"} and torch.equal(frozen["label_embedding.weight"],
                                                                        state["label_embedding.weight"])

    def validate():
        return valid_line(cli("fairseq-validate", tiny_bin, "--user-dir", USER_DIR, "--task", "translation", "--path",
                              second / "checkpoint_last.pt", "--max-tokens", 1000).stdout)["le_soft1"]

    before = validate()
    # the source changes (its run trains on, its checkpoint_best.pt is replaced): the run keeps its own embedding
    source = checkpoint(ckpt)
    source["criterion"]["label_embedding.weight"] = source["criterion"]["label_embedding.weight"].roll(1, 0)
    del source["fairseq_joint_checksums"]
    torch.save(source, ckpt)
    assert before > 0 and validate() == before  # it read the source again, and scored another loss, without a word
    resumed = train(tiny_bin, second, 4, "--label-embedding-from", ckpt, arch="joint_transformer_tiny")
    assert "holds the frozen tensors the run was trained with (label_embedding.weight), not those its source gives " \
           "now (--label-embedding-from: another file, or the file changed since)" in resumed.stdout + resumed.stderr
    assert torch.equal(checkpoint(second / "checkpoint_last.pt")["criterion"]["label_embedding.weight"],
                       state["label_embedding.weight"])
    # its weights fine-tune a run of Eq. 14, whose o2 and embedding start as new (the frozen state is none of them)
    tuned = train(tiny_bin, tmp_path / "third", 1, "--finetune-from-model", second / "checkpoint_last.pt",
                  arch="joint_transformer_tiny")
    assert "holds no state of the criterion's parameters" in tuned.stdout + tuned.stderr

    png = tmp_path / "heat.png"
    out = cli("fairseq-joint-export-label-embedding", ckpt, "--output", tmp_path / "emb.pt", "--top-k", 3,
              "--query", "die", "der", "--heatmap", png, "--heatmap-labels", "die", "der", "und", "Sie", "das")
    assert re.search(r"^die\t(\S+ \([-\d.]+\)\s*){3}$", out.stdout, re.M), out.stdout
    assert png.stat().st_size > 1000
    saved = torch.load(tmp_path / "emb.pt", weights_only=True)
    assert saved["embedding"].shape == (m, m) and len(saved["labels"]) == m
    bad = cli("fairseq-joint-export-label-embedding", ckpt, "--query", "nosuchword", check=False)
    assert bad.returncode != 0 and "nosuchword" in bad.stderr.strip().splitlines()[-1]
    bad = cli("fairseq-joint-export-label-embedding", ckpt, "--output", tmp_path, check=False)  # torch's traceback
    assert bad.returncode == 2 and bad.stderr == f"error: --output {tmp_path} is a directory: give a file\n", bad.stderr
    # a --dict of other labels: of another size, or of the same size in another order (no word's row is its own)
    from fairseq_joint.cli.export_label_embedding import main as export
    from fairseq_joint.errors import CheckpointError

    words = (tiny_bin / "dict.de.txt").read_text().splitlines()
    for name, lines in (("fewer", words[:-1]), ("swapped", [words[1], words[0], *words[2:]])):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
        with pytest.raises(CheckpointError, match=rf"^checkpoint {ckpt}: its embedding .*; pass the --dict of the data "
                                                  rf"the checkpoint was trained on \(not {tmp_path / name}\)$"):
            export([str(ckpt), "--dict", str(tmp_path / name)])


def test_pretrained_embedding_of_another_vocabulary_is_refused(tiny_bin, tiny_text, tmp_path):
    other_text = tmp_path / "text"  # a target dictionary of the validation sentences only
    other_text.mkdir()
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            (other_text / f"{split}.{lang}").write_text((tiny_text / f"valid.{lang}").read_text())
    other = binarize(other_text, tmp_path / "other_bin")
    train(other, tmp_path / "small", 1, "--label-embedding-dim", "4", "--max-tokens", "400")
    log = cli(
        "fairseq-train", tiny_bin, "--user-dir", USER_DIR, "--arch", "joint_lstm_tiny", "--criterion",
        "label_embedding_cross_entropy", "--label-embedding-from", tmp_path / "small" / "checkpoint_last.pt",
        "--save-dir", tmp_path / "big", "--max-update", 1, *TRAIN_FAST, check=False)
    assert log.returncode != 0
    assert re.search(r"--label-embedding-from \S+checkpoint_last.pt: its embedding has \d+ labels but the target "
                     r"dictionary has \d+", log.stderr)


def test_gile_multiclass_classification_with_the_label_embedding_loss(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    write_zero_shot_data(raw, num_seen=6)
    seen_texts = (raw / "train.tsv").read_text().splitlines()[:30]
    (raw / "mixed.tsv").write_text("\n".join(seen_texts) + "\n" + (raw / "valid.tsv").read_text())
    preprocess_gile("--train", raw / "train.tsv", "--valid", raw / "mixed.tsv", "--labels", raw / "labels.tsv",
               "--destdir", tmp_path / "bin")
    common = ["--user-dir", "fairseq_joint", "--task", "gile_classification", "--arch", "gile_classifier",
              "--head", "gile", "--joint-dim", "8", "--classification-mode", "multiclass",
              "--criterion", "gile_label_embedding_cross_entropy", "--max-epoch", "2", *GILE_FAST]
    out = cli("fairseq-train", tmp_path / "bin", "--label-embedding-dim", "0", "--num-samples", "2",
              "--save-dir", tmp_path / "ck", *common, "--batch-size", "2")
    log = out.stdout + out.stderr
    assert re.search(r"le_hard1=[\d.]+, le_soft1=[\d.]+, le_hard2=[\d.]+, le_hinge=[\d.]+, le_emb=[\d.]+", log)
    candidates = [float(c) for c in re.findall(r"candidates=([\d.]+)", log)]
    assert candidates and max(candidates) <= 4  # V' = the batch's positives (<= 2) + 2 sampled labels, of 6
    stats = valid_line(log)
    assert "seen_avgpr" in stats and "unseen_avgpr" in stats  # the valid label L6 is unseen: zero-shot metrics
    state = checkpoint(tmp_path / "ck" / "checkpoint_last.pt")["criterion"]
    assert state["label_embedding.weight"].shape == (6, 6) and state["o2.weight"].shape == (6, 16)
    bad = cli("fairseq-train", tmp_path / "bin", *[x for x in common if x != "multiclass" and x != "--classification-mode"],
              "--save-dir", tmp_path / "ck2", check=False)
    assert bad.returncode != 0 and "--classification-mode multiclass" in bad.stderr.strip().splitlines()[-1]
    # the translation criterion's name is refused by the GILE task, naming the GILE one (no silent swap)
    wrong = cli("fairseq-train", tmp_path / "bin", *[x if x != "gile_label_embedding_cross_entropy" else
                                                     "label_embedding_cross_entropy" for x in common],
                "--save-dir", tmp_path / "ck3", check=False)
    assert wrong.returncode != 0
    assert "use --criterion gile_label_embedding_cross_entropy" in wrong.stderr.strip().splitlines()[-1]
    # validation scores the training labels too: an evaluation label file without one is refused before training
    (raw / "eval.tsv").write_text("".join(line + "\n" for line in (raw / "labels.tsv").read_text().splitlines()[1:]))
    first = (raw / "labels.tsv").read_text().split("\t")[0]
    short = cli("fairseq-train", tmp_path / "bin", *common, "--eval-label-file", raw / "eval.tsv", "--save-dir",
                tmp_path / "ck4", check=False)
    assert short.returncode == 2 and short.stderr.strip().splitlines()[-1] == (
        f"error: --eval-label-file {raw / 'eval.tsv'} lacks 1 training label(s) (first: {first!r}), which --criterion "
        "gile_label_embedding_cross_entropy scores at validation too (Eq. 14): add a 'label<TAB>description' line for "
        "each") and not list((tmp_path / "ck4").glob("*.pt"))  # refused before training


def test_fairseq_validate_scores_with_the_trained_o2_and_embedding(tiny_bin, joint_checkpoint, tmp_path):
    """fairseq-validate builds a checkpoint's criterion afresh: before the ``trained_criterion`` patch its loss was that
    of an o2 drawn at random, another on each run. Now it is the loss fairseq-train's own validation printed for the
    same model. A --label-embedding-state-from without o2 and embedding (a cross-entropy run's) is refused."""
    with_validation = [x for x in TRAIN_FAST if x != "--disable-validation"]
    trained = cli("fairseq-train", tiny_bin, "--user-dir", USER_DIR, "--arch", "joint_lstm_tiny", "--output-layer",
                  "joint", "--joint-dim", 24, "--criterion", "label_embedding_cross_entropy", "--label-embedding-dim",
                  8, "--save-dir", tmp_path, "--max-epoch", 1, *with_validation)
    during = valid_line(trained.stdout)
    validate = ["fairseq-validate", tiny_bin, "--user-dir", USER_DIR, "--task", "translation", "--path",
                tmp_path / "checkpoint_last.pt", "--max-tokens", 1000]
    after = [valid_line(cli(*validate).stdout) for _ in range(2)]
    for key in ("loss", "nll_loss", "le_hard2", "le_emb", "le_o2_acc"):
        assert after[0][key] == after[1][key] == during[key], (key, during, after)
    # the criterion fairseq-validate scores with is the checkpoint's: another one given is refused, not ignored
    other = cli(*validate, "--criterion", "cross_entropy", check=False)
    assert other.returncode == 2 and other.stderr.strip().splitlines()[-1] == (
        "error: --criterion cross_entropy: the checkpoint was trained with --criterion label_embedding_cross_entropy, "
        "which fairseq keeps (a group of a checkpoint's options is not replaced): drop --criterion"), other.stderr
    given = cli(*validate, "--criterion", "label_embedding_cross_entropy", "--label-embedding-state-from",
                joint_checkpoint, check=False)  # was replaced by --path without a word
    assert given.returncode == 2 and given.stderr.strip().splitlines()[-1] == (
        "error: --label-embedding-state-from: fairseq-validate scores a checkpoint with the criterion state it saved, "
        "which --path gives: drop --label-embedding-state-from"), given.stderr
    bad = train(tiny_bin, tmp_path / "bad", 1, "--label-embedding-state-from", joint_checkpoint, check=False)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1] == (
        f"error: --label-embedding-state-from {joint_checkpoint}: the checkpoint holds no criterion state; give one of "
        "a run trained with --criterion label_embedding_cross_entropy"), bad.stderr
    # a run started from them starts where the checkpoint's criterion ended (one update at lr 1e-9 moves them by
    # ~1e-9), not at a fresh draw
    saved = checkpoint(tmp_path / "checkpoint_last.pt")["criterion"]
    train(tiny_bin, tmp_path / "from", 1, "--label-embedding-dim", 8, "--lr", "1e-9", "--label-embedding-state-from",
          tmp_path / "checkpoint_last.pt")
    started = checkpoint(tmp_path / "from" / "checkpoint_last.pt")["criterion"]
    assert saved.keys() == started.keys()
    for name, value in saved.items():
        assert (torch.allclose(started[name], value, rtol=0, atol=1e-6) if torch.is_tensor(value)
                else started[name] == value), name
    # o2 and the embedding of other --label-embedding-* options than the run's are refused, naming what differs
    other_dim = train(tiny_bin, tmp_path / "other", 1, "--label-embedding-dim", 4, "--label-embedding-state-from",
                      tmp_path / "checkpoint_last.pt", check=False)
    refusal = other_dim.stderr.strip().splitlines()[-1]
    assert other_dim.returncode == 2 and refusal.startswith(
        f"error: --label-embedding-state-from {tmp_path / 'checkpoint_last.pt'}: its o2 and label embedding are not "
        "of this criterion's options (") and "size mismatch" in refusal and refusal.endswith(
        "give a checkpoint trained with the same --label-embedding-* options and data"), other_dim.stderr
    assert not list((tmp_path / "other").glob("*.pt"))  # refused before training


def test_fine_tuning_a_cross_entropy_model_with_the_label_embedding_loss(tiny_bin, joint_checkpoint, tmp_path):
    """--finetune-from-model of a checkpoint whose criterion has no parameters: the model starts from its weights, o2
    and the embedding as in a new run (fairseq failed loading the missing criterion state, which the plugin then
    refused recommending --finetune-from-model, the option given)."""
    run = train(tiny_bin, tmp_path, 1, "--label-embedding-dim", 8, "--lr", "1e-9", "--finetune-from-model",
                joint_checkpoint, arch="joint_transformer_tiny")
    assert f"{joint_checkpoint} holds no state of the criterion" in run.stdout + run.stderr
    start, tuned = checkpoint(joint_checkpoint), checkpoint(tmp_path / "checkpoint_last.pt")
    for name, value in start["model"].items():
        if torch.is_tensor(value) and value.is_floating_point():
            assert torch.allclose(tuned["model"][name], value, rtol=0, atol=1e-6), name
    assert {"o2.weight", "label_embedding.A", "label_embedding.B"} <= set(tuned["criterion"])
    # a resume of it (--restore-file, not fine-tuning) into the label-embedding loss still names what differs
    again = train(tiny_bin, tmp_path / "again", 1, "--restore-file", joint_checkpoint, arch="joint_transformer_tiny",
                  check=False)
    assert again.returncode == 2 and "(--criterion label_embedding_cross_entropy (checkpoint: cross_entropy))" in \
        again.stderr.strip().splitlines()[-1], again.stderr[-2000:]
