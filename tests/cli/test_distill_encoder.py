"""fairseq-joint-distill-encoder: a word-piece student distilled from a sentence encoder on id-parallel documents
(Reimers & Gurevych 2020, Eq. 1) — it learns to put each version of a document where the teacher puts the pivot
version, its output is a sentence-transformers model GILE reads (one language or several), the alignment report,
seeded reproducibility, and the bad-input refusals."""

import json
import re

import pytest
import torch
from conftest import GILE_SENTENCE_FAST, GILE_TRAIN, REPO, cli, preprocess_gile, valid_line

from fairseq_joint.cli import distill_encoder
from fairseq_joint.cli.common import run
from fairseq_joint.modules.sentence_encoder import PretrainedSentenceEncoder, encoder_fingerprint

ML_SAMPLE = REPO / "data" / "debtags-multilingual-sample"
ALIGNED = [f"en={ML_SAMPLE / 'en' / 'train.jsonl'}", f"pl={ML_SAMPLE / 'pl' / 'train.jsonl'}"]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A tiny teacher whose embedding of a text is the normalized mean of random 16-d word-piece vectors
    (sentence-transformers' StaticEmbedding), over a word-piece vocabulary of the sample's English and Polish texts:
    distinct documents get distinct embeddings, and a Polish text lands far from its English version. The vocabulary
    is built here, not trained: the tokenizers library's WordPiece trainer breaks frequency ties in a per-process
    random order, so a trained vocabulary (and every figure below) changed from one test session to the next."""
    from collections import Counter

    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, StaticEmbedding
    from tokenizers import BertWordPieceTokenizer

    texts = [r["text"] for lang in ("en", "pl") for r in read_jsonl(ML_SAMPLE / lang / "train.jsonl")]
    bert = BertWordPieceTokenizer(lowercase=True)._tokenizer  # BERT's normalizer and pre-tokenizer, no vocabulary yet
    words = Counter(w for t in texts for w, _ in bert.pre_tokenizer.pre_tokenize_str(bert.normalizer.normalize_str(t)))
    chars = sorted({c for w in words for c in w})
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars)]
    frequent = sorted(words, key=lambda w: (-words[w], w))  # ties in alphabetical order
    known = set(pieces)
    pieces += [w for w in frequent if w not in known][: 3000 - len(pieces)]
    tokenizer = BertWordPieceTokenizer({p: i for i, p in enumerate(pieces)}, lowercase=True)._tokenizer
    weights = torch.randn(tokenizer.get_vocab_size(), 16, generator=torch.Generator().manual_seed(0))
    out = tmp_path_factory.mktemp("teacher") / "st"
    SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_weights=weights), Normalize()],
                        device="cpu").save(str(out))
    return out


def distill(teacher, out, *extra, check=True):
    return cli("fairseq-joint-distill-encoder", "--teacher", teacher, "--aligned", *ALIGNED, "--output", out,
               "--heldout-docs", "40", "--epochs", "30", *extra, check=check)


def epoch_losses(output: str):
    return [float(x) for x in re.findall(r"epoch \d+ \| loss ([0-9.]+)", output)]


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_student_learns_the_teachers_space_and_is_reproducible(teacher, tmp_path):
    run = distill(teacher, tmp_path / "a")
    losses = epoch_losses(run.stdout + run.stderr)
    assert len(losses) == 30 and losses[-1] < 0.2 * losses[0], losses
    report = json.loads((tmp_path / "a" / "alignment.json").read_text())
    print(json.dumps(report["alignment"]))
    assert report["languages"] == ["en", "pl"] and report["pivot"] == "en" and report["heldout_docs"] == 40
    # 240 documents per language, all parallel; the 40 held out are trained on in neither language
    assert report["pairs"] == 2 * (240 - 40)
    en = report["alignment"]["en"]
    assert en["chance"] == pytest.approx(1 / 40)
    assert en["teacher_cosine"] == pytest.approx(1.0, abs=1e-5) and en["teacher_precision_at_1"] == 1.0
    # on documents it never saw, the student finds the teacher's embedding of the same English text far above chance
    # (word pieces no training document has stay zero in the student, so not always: precision 0.475, cosine 0.79 here)
    assert en["student_precision_at_1"] >= 10 * en["chance"] and en["student_cosine"] > 0.5, en
    # and puts a Polish text nearer the English version than the teacher reading Polish does (what distillation
    # adds; 0.70 against 0.46 here)
    pl = report["alignment"]["pl"]
    assert pl["student_precision_at_1"] >= 4 * pl["chance"], pl
    assert pl["student_cosine"] > pl["teacher_cosine"] + 0.1, pl

    student = PretrainedSentenceEncoder(str(tmp_path / "a"))
    assert student.dim == 16 and student.max_seq_length == 0 and not student.finetune
    # a training pair: the student's Polish embedding lies where the teacher put the English version
    ids = {r["id"]: r["text"] for r in read_jsonl(ML_SAMPLE / "en" / "train.jsonl")}
    heldout = set(report["heldout_ids"])
    assert len(heldout) == 40
    pl = [r for r in read_jsonl(ML_SAMPLE / "pl" / "train.jsonl") if str(r["id"]) not in heldout][:40]
    mine = student.embed([r["text"] for r in pl])
    target = PretrainedSentenceEncoder(str(teacher)).embed([ids[r["id"]] for r in pl])
    cos = (mine * target).sum(dim=1)
    assert torch.all(torch.isfinite(cos)) and float(cos.median()) > 0.7, cos

    distill(teacher, tmp_path / "b")  # same seed, same data: the same student, byte for byte
    assert encoder_fingerprint(str(tmp_path / "a")) == encoder_fingerprint(str(tmp_path / "b"))
    other = distill(teacher, tmp_path / "c", "--seed", "2")  # another seed: another held-out draw, another student
    other_report = json.loads((tmp_path / "c" / "alignment.json").read_text())
    assert other_report["seed"] == 2 and len(other_report["heldout_ids"]) == 40
    assert set(other_report["heldout_ids"]) != heldout
    other_losses = epoch_losses(other.stdout + other.stderr)
    assert len(other_losses) == 30 and other_losses[-1] < 0.2 * other_losses[0], other_losses
    assert encoder_fingerprint(str(tmp_path / "a")) != encoder_fingerprint(str(tmp_path / "c"))


def test_a_static_student_fine_tunes_inside_gile(teacher, tmp_path):
    """--finetune-encoder over a static student: token ids padded with an id no word piece has give exactly the frozen
    embeddings at the start, gradients reach only the word pieces of the batch, and multilingual GILE trains the
    student with the head (saved in the checkpoint, validated again from it, used by predict-labels)."""
    from fairseq.data import data_utils

    distill(teacher, tmp_path / "s", "--epochs", "5")
    frozen = PretrainedSentenceEncoder(str(tmp_path / "s"))
    tuned = PretrainedSentenceEncoder(str(tmp_path / "s"), finetune=True)
    assert tuned.static and tuned.pad_id == tuned.st[0].embedding.num_embeddings
    # the last text's only word piece is unknown to the tokenizer's training texts: its vector is zero (never learned)
    texts = [r["text"] for r in read_jsonl(ML_SAMPLE / "pl" / "valid.jsonl")[:7]] + ["gra", "a library for png", "☃"]
    ids = tuned.tokenize(texts)
    assert len({len(row) for row in ids}) > 1  # rows of different lengths: the batch is padded
    batch = data_utils.collate_tokens([torch.LongTensor(row) for row in ids], tuned.pad_id, left_pad=False)
    out = tuned(batch)
    assert torch.allclose(out, frozen.embed(texts), atol=1e-6)
    assert not out[-1].any() and out[:-1].norm(dim=1).sub(1).abs().max() < 1e-5
    out[:, 0].sum().backward()
    grad = tuned.st[0].embedding.weight.grad
    touched = set(grad.abs().sum(dim=1).nonzero().flatten().tolist())
    assert touched and touched <= {i for row in ids[:-1] for i in row}
    # the zero text passes no gradient (normalizing a zero vector would pass 1/eps = 1e12), the others a bounded one
    assert not touched & set(ids[-1]) and grad.abs().max() < 100

    data = tmp_path / "bin"
    for lang in ("en", "pl"):
        preprocess_gile("--train", ML_SAMPLE / lang / "train.jsonl", "--valid", ML_SAMPLE / lang / "valid.jsonl",
                        "--labels", ML_SAMPLE / "labels.tsv", "--lang", lang, "--destdir", data / lang)
    save = tmp_path / "ckpt"
    run = cli("fairseq-train", data, *GILE_TRAIN, "--languages", "en,pl", "--encoder", "pretrained",
              "--pretrained-encoder", tmp_path / "s", "--finetune-encoder", "--head", "gile", "--similarity-init",
              "--seen-label-bias", "--criterion", "multilabel_classification", "--max-epoch", "2", "--save-dir", save,
              *GILE_SENTENCE_FAST)
    stats = valid_line(run.stdout + run.stderr)
    assert "fine-tuned, one encoder for en, pl" in run.stdout + run.stderr
    assert stats["en_docs"] == 60 and stats["pl_docs"] == 60
    state = torch.load(save / "checkpoint_last.pt", weights_only=True)["model"]
    start = frozen.st[0].embedding.weight.detach()  # the student as distilled
    trained = state["encoder.model.0.embedding.weight"]
    assert trained.shape == start.shape and not torch.equal(trained, start)  # the student was trained, and saved
    assert not any((data / lang / "embeddings").exists() for lang in ("en", "pl"))  # token ids, not cached vectors
    val = cli("fairseq-validate", data, "--user-dir", GILE_TRAIN[1], "--task", "gile_classification", "--path",
              save / "checkpoint_last.pt", "--batch-size", "32", "--num-workers", "0")
    again = valid_line(val.stdout + val.stderr)
    for key in ("loss", "en_seen_avgpr", "pl_seen_avgpr", "pl_unseen_avgpr"):
        assert again[key] == pytest.approx(stats[key], abs=0.011), key
    texts = tmp_path / "pl.txt"
    texts.write_text("Biblioteka do obsługi plików graficznych PNG.\n")
    ranked = cli("fairseq-joint-predict-labels", "--checkpoint", save / "checkpoint_last.pt", "--labels",
                 ML_SAMPLE / "labels.tsv", "--input", texts, "--lang", "pl", "--topk", "3", "--json")
    assert len(json.loads(ranked.stdout)["labels"]) == 3


def test_bad_input_fails_with_one_line_naming_the_fix(teacher, tmp_path, capsys):
    """The first case through the console script, the others through the same ``run(main)`` in process."""
    wrong_lang = tmp_path / "wrong.jsonl"
    wrong_lang.write_text(json.dumps({"id": 1, "text": "x", "lang": "de"}) + "\n")
    unjoined = tmp_path / "unjoined.jsonl"
    unjoined.write_text(json.dumps({"id": "nowhere", "text": "tekst"}) + "\n")
    first = json.loads((ML_SAMPLE / "en" / "train.jsonl").read_text().splitlines()[0])["id"]
    control = tmp_path / "control.jsonl"  # a text of a control character, which the tokenizer drops
    control.write_text(json.dumps({"id": first, "text": "\u0000"}) + "\n")
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("")
    cases = [
        (["--aligned", ALIGNED[0], f"pl={wrong_lang}"], "contradicts --aligned pl:"),
        (["--aligned", ALIGNED[0], f"pl={unjoined}"], "no document id is in every --aligned file"),
        (["--aligned", ALIGNED[0], f"pl={control}", "--heldout-docs", "0"],
         f"--aligned pl: document {first} has no word piece the teacher's tokenizer knows: remove it"),
        (["--aligned", ALIGNED[0]], "--aligned needs at least two LANG=FILE"),
        (["--aligned", ALIGNED[0], str(ML_SAMPLE / "pl" / "train.jsonl")], "give LANG=FILE"),
        (["--aligned", *ALIGNED, "--heldout-docs", "200"], "use at most 120"),
        (["--aligned", *ALIGNED, "--epochs", "0"], "argument --epochs: must be positive"),
        (["--aligned", *ALIGNED, "--heldout-docs", "-1"], "argument --heldout-docs: must be an integer >= 0"),
        (["--aligned", *ALIGNED, "--output", str(full)], "exists and is not an empty directory: give a new directory"),
        (["--aligned", *ALIGNED, "--output", str(full / "x")], "x exists and is not an empty directory"),  # a file
        (["--aligned", *ALIGNED, "--heldout-docs", "40", "--teacher", str(tmp_path)], f"--teacher {tmp_path}: not a"),
    ]
    for i, (extra, said) in enumerate(cases):
        args = ["--teacher", str(teacher), "--output", str(tmp_path / "out"), *extra]
        if i == 0:
            bad = cli("fairseq-joint-distill-encoder", *args, check=False)
            code, stderr = bad.returncode, bad.stderr
        else:
            try:
                code = run(distill_encoder.main, args)
            except SystemExit as exit_:  # argparse's refusals
                code = exit_.code
            stderr = capsys.readouterr().err
        assert code == 2 and said in stderr, (extra, stderr)
        assert len(stderr.strip().splitlines()) == 1, stderr
    # a learning rate that diverges, in the loss or in the epoch's last step only: refused, not saved as a student
    for extra in (["--epochs", "2", "--lr", "1e30"], ["--epochs", "1", "--batch-size", "100000", "--lr", "1e39"]):
        code = run(distill_encoder.main, ["--teacher", str(teacher), "--output", str(tmp_path / "inf"), "--aligned",
                                          *ALIGNED, "--heldout-docs", "40", *extra])
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert code == 2 and last.startswith("error: training diverged in epoch ") and "give a lower --lr" in last
        assert not (tmp_path / "inf").exists()
