"""One-line refusals (issue #15's cases): under fairseq's commands and ours, bad options and inputs end with exactly one
line on stderr, ``error: <what>, <the fix>``, before any work is done; text files with a byte-order mark are read and
files that are not UTF-8 are refused with the file and the line. One end-to-end case per class of refusal (numbers out
of range, an unsafe checkpoint, a checkpoint of the other kind, fairseq's own errors of a user's mistake); the classes
themselves are tested in process in tests/unit/test_option_checks.py."""

import importlib.util
import os
import sys

import pytest
import torch
from conftest import GILE_FAST, GILE_TRAIN, SAMPLE, TRAIN_FAST, USER_DIR, binarize, cli, train_joint, write_slice
from omegaconf import OmegaConf

from fairseq_joint import errors
from fairseq_joint.cli import common, word_vectors

LATIN1 = "Straße café".encode("latin-1")
BOM = b"\xef\xbb\xbf"


def refusal(proc) -> str:
    """The one line of a refused command, whose exit status is the one of every refusal."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == errors.REFUSED and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize("flags, message", [
    (["--criterion", "sampled_cross_entropy", "--sample-rate", "1.5"], r"--sample-rate must be a finite number in (0, 1]"),
    (["--criterion", "sampled_cross_entropy", "--num-samples", "-3"], "--num-samples must be an integer >= 0, got -3"),
    (["--criterion", "sampled_cross_entropy", "--vocab-chunk-size", "0"], "--vocab-chunk-size must be positive"),
    (["--criterion", "label_embedding_cross_entropy", "--label-embedding-hinge-p", "3"], "must be 1 or 2 (an integer "
                                                                                          "in [1, 2]), got 3"),
    (["--criterion", "multilabel_classification", "--task", "gile_classification", "--arch", "gile_classifier",
      "--threshold", "-1"], "--threshold must be a finite number in [0, 1], got -1.0"),
    (["--init-seed", str(2 ** 70)], "--init-seed must be an integer in [-9223372036854775808, 18446744073709551615], "
                                    f"got {2 ** 70}"),
    (["--dropout", "nan"], "--dropout must be a finite number in [0, 1), got nan"),  # fairseq's own options too
    (["--criterion", "multilabel_classification"], "--criterion multilabel_classification scores labels of --task "
                                                   "gile_classification, not --task translation"),
    (["--lable-smoothing", "0.1"], "unrecognized arguments: --lable-smoothing 0.1 (see fairseq-train --help"),
    (["--lr-scheduler", "polynomial_decay"], "--lr-scheduler polynomial_decay needs --total-num-update: give it or "
                                             "--max-update"),  # a hydra traceback
    # several processes without a GPU: fairseq spawned none and exited 0 having trained nothing (an init method without
    # --distributed-no-spawn), or failed in a traceback (an AssertionError without an init method)
    (["--cpu", "--distributed-world-size", "2", "--distributed-init-method", "tcp://127.0.0.1:1"],
     "--distributed-world-size 2 on the CPU: give --distributed-world-size 1 for one process (fairseq's default is the "
     "number of GPUs); for 2, fairseq starts one process per GPU: start one per rank yourself, each with "
     "--distributed-rank R --distributed-no-spawn --distributed-init-method tcp://HOST:PORT --distributed-backend gloo "
     "--ddp-backend legacy_ddp (missing: --distributed-no-spawn, --distributed-backend gloo, --ddp-backend legacy_ddp; "
     "docs/gpu.md)"),
    pytest.param(["--distributed-world-size", "2", "--distributed-backend", "gloo", "--ddp-backend", "no_c10d"],
                 "(missing: --distributed-no-spawn, --distributed-init-method tcp://HOST:PORT; docs/gpu.md)",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CPU")),
    # fairseq trained from scratch without a word: the file it reads names the suffix; --continue-once's too
    (["--restore-file", "no/checkpoint_last.pt", "--checkpoint-suffix", "_s"], "error: --restore-file "
     "no/checkpoint_last.pt with --checkpoint-suffix _s: no/checkpoint_last_s.pt: no such file: give an existing"),
    (["--continue-once", "no/checkpoint3.pt"], "error: --continue-once no/checkpoint3.pt: no such file"),
    pytest.param(["--write-checkpoints-asynchronously"],
                 "error: --write-checkpoints-asynchronously needs iopath, which is not installed", marks=pytest.mark.skipif(importlib.util.find_spec("iopath") is not None,
                                                              reason="iopath installed")),
    pytest.param(["--fp16"], "--fp16 needs a CUDA GPU", marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CPU")),
    pytest.param(["--amp"], "--amp needs a CUDA GPU", marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CPU")),
])
def test_training_options_are_refused_before_any_work(tmp_path, flags, message):
    """The data directory does not even exist: the refusal comes first."""
    proc = cli("fairseq-train", tmp_path / "no-data", "--user-dir", USER_DIR, "--arch", "joint_lstm_tiny",
               "--save-dir", tmp_path / "ck", *TRAIN_FAST, *flags, check=False)
    assert message in refusal(proc)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's refusal of --bf16")
def test_every_route_into_fairseqs_commands_runs_the_same_checks(tmp_path):
    """``python -m fairseq_cli.*`` (whose main is ``__main__``'s) refuses as the console scripts do: in one line, exit
    status 2, before any work: fairseq-train's precision flags (before, --bf16 died in fairseq's XLA traceback),
    fairseq-preprocess's misaligned text, fairseq-generate's data that holds no translation corpus."""
    line = refusal(cli(sys.executable, "-m", "fairseq_cli.train", tmp_path / "no-data", "--user-dir", USER_DIR, "--arch",
                       "joint_lstm_tiny", "--save-dir", tmp_path / "ck", *TRAIN_FAST, "--bf16", check=False))
    assert line == ("error: --bf16 needs a CUDA GPU with bf16 (or a TPU with torch_xla) and this run has none: drop "
                    "--bf16 to train in fp32 on the CPU")
    (tmp_path / "train.en").write_text("a b\nc d\n")
    (tmp_path / "train.de").write_text("a b\n")
    line = refusal(cli(sys.executable, "-m", "fairseq_cli.preprocess", "--user-dir", USER_DIR, "--source-lang", "en",
                       "--target-lang", "de", "--trainpref", tmp_path / "train", "--destdir", tmp_path / "bin",
                       check=False))
    assert line.startswith(f"error: --trainpref {tmp_path}/train is misaligned") and not (tmp_path / "bin").exists()
    line = refusal(cli(sys.executable, "-m", "fairseq_cli.generate", tmp_path, "--user-dir", USER_DIR, "--path",
                       tmp_path / "none.pt", check=False))  # the exception hook: fairseq's own error, named
    assert line.startswith(f"error: {tmp_path} holds no binarized translation corpus whose languages fairseq can read")


def test_training_data_fairseq_would_misread_is_refused_before_any_work(tiny_text, tiny_bin, tmp_path):
    """fairseq-train's DATA: a shard binarized with other dictionaries (fairseq read its word ids through the first's
    without a word), a missing or empty shard (a traceback after an epoch), a corpus written --dataset-impl lazy or raw
    read without it (a KeyError traceback; "no binarized split"), --load-alignments without alignments (ignored)."""
    smaller = binarize(write_slice(tmp_path / "smaller", 60, 5), tmp_path / "other-dict")
    same = binarize(tiny_text, tmp_path / "same-dict", "--srcdict", tiny_bin / "dict.en.txt", "--tgtdict",
                    tiny_bin / "dict.de.txt")
    (tmp_path / "empty").mkdir()
    cases = {
        f"{tiny_bin}:{smaller}": f"{smaller}/dict.de.txt is not the first directory's dict.de.txt, with whose word ids "
                                 f"fairseq reads every directory: binarize each with fairseq-preprocess --srcdict/"
                                 f"--tgtdict {tiny_bin}/dict.LANG.txt",
        f"{tiny_bin}:{tmp_path}/none": f"{tmp_path}/none: no such directory",
        f"{tiny_bin}:{tmp_path}/empty": f"{tmp_path}/empty holds no 'train' split",
        binarize(tiny_text, tmp_path / "lazy", "--dataset-impl", "lazy"): "--dataset-impl lazy (or cached), which "
        "fairseq-train reads only when told (it infers cached, which fails in training): add --dataset-impl lazy",
        binarize(tiny_text, tmp_path / "raw", "--dataset-impl", "raw"): "holds the 'train' split as text (train.en-de."
        "de: fairseq-preprocess --dataset-impl raw), which fairseq reads only when told: add --dataset-impl raw",
    }
    for data, message in cases.items():
        line = refusal(train_joint(data, tmp_path / "ck", "joint_transformer_tiny", 1, check=False))
        assert message in line and not list(tmp_path.glob("ck/*.pt")), line
    line = refusal(train_joint(tiny_bin, tmp_path / "ck", "joint_transformer_tiny", 1, "--load-alignments",
                               check=False))
    assert line.endswith("binarize them with fairseq-preprocess --align-suffix, or drop --load-alignments"), line
    train_joint(f"{tiny_bin}:{same}", tmp_path / "ck", "joint_transformer_tiny", 1)  # shards of one dictionary train


def test_resuming_into_another_output_layer_names_the_difference(tiny_bin, tmp_path):
    common = ["--user-dir", USER_DIR, "--arch", "joint_lstm_tiny", "--max-update", 1, "--save-dir", tmp_path, *TRAIN_FAST]
    cli("fairseq-train", tiny_bin, *common, "--joint-dim", 24)
    line = refusal(cli("fairseq-train", tiny_bin, *common, "--joint-dim", 16, check=False))
    # the option the user changed, as every resume into another model names it (not the output layer's own fields)
    assert f"{tmp_path}/checkpoint_last.pt holds another model than this run builds (--joint-dim 16 (checkpoint: 24))" \
        in line, line
    # another criterion (fairseq's AssertionError "Criterion does not match"), or a label embedding loaded and frozen
    # where the checkpoint trained one (torch's refusal of the optimizer state of other parameters): the options, and
    # --reset-optimizer, which continues from the weights
    le = ["--criterion", "label_embedding_cross_entropy", "--label-embedding-dim", 8]
    cli("fairseq-train", tiny_bin, *common, "--joint-dim", 24, "--save-dir", tmp_path / "le", *le)
    again = [*common, "--joint-dim", 24, "--save-dir", tmp_path / "le", "--max-update", 2]
    fix = "resume it with the checkpoint's options, or continue from its weights with a new optimizer state " \
          "(--reset-optimizer)"
    for extra, changed in (([], "--criterion cross_entropy (checkpoint: label_embedding_cross_entropy)"),
                           ([*le[:2], "--label-embedding-from", tmp_path / "le" / "checkpoint_last.pt"],
                            f"--label-embedding-dim 100 (checkpoint: 8), --label-embedding-from {tmp_path}/le/"
                            "checkpoint_last.pt (checkpoint: None)")):
        line = refusal(cli("fairseq-train", tiny_bin, *again, *extra, check=False))
        assert line == (f"error: {tmp_path}/le/checkpoint_last.pt holds an optimizer state of other parameters, "
                        f"criterion or optimizer than this run's ({changed}): {fix}"), line
    cli("fairseq-train", tiny_bin, *again, "--reset-optimizer")


def test_gile_inputs_that_are_not_utf8_or_start_with_a_byte_order_mark(tmp_path):
    labels, data = tmp_path / "labels.tsv", tmp_path / "train.jsonl"
    labels.write_bytes(BOM + b"A\tapples and pears\nB\tcars and trucks\n")
    data.write_bytes(BOM + b'{"text": "an apple", "labels": ["A"]}\n{"text": "a truck", "labels": ["B"]}\n')
    cli("fairseq-joint-preprocess-gile", "--train", data, "--labels", labels, "--destdir", tmp_path / "bin")
    assert (tmp_path / "bin" / "labels.train.txt").read_text().split() == ["A", "B"]  # 'A', not '\ufeffA'
    data.write_bytes(b'{"text": "an apple", "labels": ["A"]}\n{"text": "' + LATIN1 + b'", "labels": ["B"]}\n')
    line = refusal(cli("fairseq-joint-preprocess-gile", "--train", data, "--labels", labels, "--destdir",
                       tmp_path / "bin2", check=False))
    assert f"{data}:2: not UTF-8" in line and "iconv" in line
    labels.write_bytes(b"A\tapples\nB\t" + LATIN1 + b"\n")
    line = refusal(cli("fairseq-joint-label-text", "--labels", labels, "--output", tmp_path / "x.tsv", check=False))
    assert f"{labels}:2: not UTF-8" in line
    texts = tmp_path / "texts.txt"
    texts.write_bytes(b"fine\n" + LATIN1 + b"\n")
    line = refusal(cli("fairseq-joint-word-vectors", "--text", texts, "--output", tmp_path / "v.txt", check=False))
    assert f"{texts}:2: not UTF-8" in line


def test_translation_inputs_that_are_not_utf8(tmp_path, tiny_bin, joint_checkpoint):
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"a house by the lake\n" + LATIN1 + b"\n")  # fairseq-interactive: a UnicodeDecodeError traceback
    interactive = ["fairseq-interactive", tiny_bin, "--user-dir", USER_DIR, "--path", joint_checkpoint, "--beam", 1]
    line = refusal(cli(*interactive, "--input", latin, check=False))
    assert line == f"error: --input {latin}:2: not UTF-8 (byte 0xdf at column 5): save the file as UTF-8 (e.g. iconv " \
                   "-f LATIN1 -t UTF-8)", line  # ß
    # stdin too: Python reads it with surrogate escapes under a C or C.UTF-8 locale, and fairseq translated the bytes
    # as unknown words without a word
    for locale in ("C.UTF-8", "C"):
        line = refusal(cli(*interactive, stdin=latin, env={"LC_ALL": locale}, check=False))
        assert line == "error: stdin:2: not UTF-8 (byte 0xdf at column 5): save the file as UTF-8 (e.g. iconv -f " \
                       "LATIN1 -t UTF-8)", (locale, line)
    # a byte order mark is not part of the first word: the same translation as without it
    plain, marked = tmp_path / "plain.txt", tmp_path / "marked.txt"
    plain.write_bytes(b"a house by the lake\n")
    marked.write_bytes(BOM + plain.read_bytes())
    said = [[x for x in cli(*interactive, stdin=path).stdout.splitlines() if x.startswith(("S-", "H-"))]
            for path in (plain, marked)]
    assert said[0] == said[1] != [], said
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_bytes(b"a house by the lake\n" + LATIN1 + b"\n")
    ref.write_bytes(BOM + b"a house by the lake\nthe street is long and wide\n")
    line = refusal(cli("fairseq-joint-score", "--hyp", hyp, "--ref", ref, check=False))
    assert f"hypotheses {hyp}:2: not UTF-8" in line
    hyp.write_bytes(b"a house by the lake\nthe street is long and wide\n")
    out = cli("fairseq-joint-score", "--hyp", hyp, "--ref", ref)
    assert "sacreBLEU 100.00" in out.stdout  # the mark is not part of the first reference


def test_fairseq_preprocess_names_a_line_that_is_not_utf8_and_a_dictionary_it_would_overwrite(tmp_path):
    """With the plugin: fairseq failed on the Latin-1 line in a traceback ("negative seek position -1"), and on the
    dictionary of an earlier run in --destdir in a FileExistsError one."""
    (tmp_path / "train.en").write_text("a house by the lake\nthe street\n")
    (tmp_path / "train.de").write_bytes(b"ein Haus am See\n" + LATIN1 + b"\n")
    preprocess = ["fairseq-preprocess", "--user-dir", USER_DIR, "--source-lang", "en", "--target-lang", "de",
                  "--trainpref", tmp_path / "train", "--workers", "1", "--destdir"]
    line = refusal(cli(*preprocess, tmp_path / "bin", check=False))
    assert line == (f"error: --trainpref {tmp_path}/train: {tmp_path}/train.de:2: not UTF-8 (byte 0xdf at column 5): "
                    "save the file as UTF-8 (e.g. iconv -f LATIN1 -t UTF-8)")
    (tmp_path / "train.de").write_text("ein Haus am See\ndie Straße\n")
    cli(*preprocess, tmp_path / "bin")
    line = refusal(cli(*preprocess, tmp_path / "bin", check=False))
    assert line == (f"error: --destdir {tmp_path}/bin already holds {tmp_path}/bin/dict.en.txt: give a new --destdir, "
                    f"or binarize with that dictionary: --srcdict {tmp_path}/bin/dict.en.txt")
    line = refusal(cli(*preprocess, tmp_path / "bin", "--srcdict", tmp_path / "bin" / "dict.en.txt", check=False))
    assert line.endswith(f"--tgtdict {tmp_path}/bin/dict.de.txt")
    # a byte order mark (binarized as part of the first word: a dictionary entry '\ufeffein'), a --srcdict that holds
    # no word (every word binarized as <unk>) or is not WORD COUNT lines, or gives a word twice (fairseq's tracebacks)
    (tmp_path / "train.de").write_bytes(BOM + "ein Haus am See\ndie Straße\n".encode())
    line = refusal(cli(*preprocess, tmp_path / "bom", check=False))
    assert line == (f"error: --trainpref {tmp_path}/train: {tmp_path}/train.de starts with a byte order mark, which "
                    "fairseq-preprocess binarizes as part of the first word: remove it (sed -i '1s/^\\xEF\\xBB\\xBF//' "
                    f"{tmp_path}/train.de)") and not (tmp_path / "bom").exists()
    (tmp_path / "train.de").write_text("ein Haus am See\ndie Straße\n")
    fix = "give a dictionary fairseq-preprocess wrote (dict.LANG.txt: one 'WORD COUNT' a line, each word once)"
    for text, said in (("\n", "--srcdict {} holds no words: give the dict.LANG.txt fairseq-preprocess wrote"),
                       ("a 1\nthe house\n", "{}: line 2 ('the house') is not 'WORD COUNT': " + fix),
                       ("a 1\na 2\n", "{}: it gives the word 'a' twice: " + fix)):
        (tmp_path / "dict.txt").write_text(text)
        line = refusal(cli(*preprocess, tmp_path / "new", "--srcdict", tmp_path / "dict.txt", check=False))
        assert line == "error: " + said.format(tmp_path / "dict.txt"), line


@pytest.fixture(scope="module")
def gile_checkpoint(gile_bin, tmp_path_factory):
    save_dir = tmp_path_factory.mktemp("gile_checkpoint")
    cli("fairseq-train", gile_bin, *GILE_TRAIN, "--head", "gile", "--joint-dim", "8", "--criterion",
        "multilabel_classification", "--max-epoch", "1", "--save-dir", save_dir, *GILE_FAST)
    return save_dir / "checkpoint_last.pt"


def test_predicting_labels_described_by_unknown_words_only(gile_checkpoint, tmp_path):
    labels = tmp_path / "new.tsv"
    labels.write_text("devel::lang:python\tPython\nzz::new\tqwzx vbnmq\n", encoding="utf-8")
    texts = tmp_path / "t.txt"
    texts.write_bytes(BOM + b"a python library\n")
    line = refusal(cli("fairseq-joint-predict-labels", "--checkpoint", gile_checkpoint, "--labels",
                       labels, "--input", texts, check=False))
    assert "label(s) 'zz::new': no word of the description is in the dictionary" in line
    ok = cli("fairseq-joint-predict-labels", "--checkpoint", gile_checkpoint, "--labels",
             SAMPLE / "labels.tsv", "--input", texts, "--topk", "2")
    assert ok.stdout.startswith("a python library\t")  # the byte-order mark is not part of the text


@pytest.mark.parametrize("command", ["fairseq-interactive", "fairseq-generate"])
def test_a_gile_checkpoint_is_sent_from_fairseqs_decoders_to_predict_labels(gile_bin, gile_checkpoint, tmp_path,
                                                                            command):
    """fairseq-interactive died in a NotImplementedError traceback, fairseq-generate in an AttributeError one."""
    texts = tmp_path / "t.txt"
    texts.write_text("a python library\n")
    given = ["--input", texts] if command == "fairseq-interactive" else ["--gen-subset", "valid"]
    line = refusal(cli(command, gile_bin, "--user-dir", USER_DIR, "--task", "gile_classification", "--path",
                       gile_checkpoint, *given, check=False))
    assert line == (f"error: {command} generates text and a gile_classifier ranks labels: rank them with "
                    "fairseq-joint-predict-labels --checkpoint CHECKPOINT --labels LABEL_FILE (or "
                    "fairseq_joint.hub.LabelPredictor in Python); fairseq-validate --task gile_classification scores "
                    "a split")


class Evil:
    """What a malicious checkpoint pickles: a call of os.system when it is unpickled."""

    def __reduce__(self):
        return os.system, ("echo unpickled",)


def test_an_unsafe_checkpoint_is_named_by_fairseq_and_by_our_commands(tiny_bin, tmp_path):
    evil = tmp_path / "evil.pt"
    torch.save({"model": {}, "cfg": Evil()}, evil)
    said = f"{evil} is not a checkpoint torch can load safely (weights_only: it pickles posix.system)"
    proc = cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", evil, check=False)
    assert said in refusal(proc) and "unpickled" not in proc.stdout
    proc = cli("fairseq-joint-export-label-embedding", evil, check=False)
    assert said in refusal(proc)


def test_a_gile_checkpoint_given_to_a_translation_command_is_named(tiny_bin, tmp_path):
    """Refused before any model is built: the checkpoint need hold nothing but its configuration."""
    gile = tmp_path / "gile.pt"
    torch.save({"cfg": OmegaConf.create({"model": {"_name": "gile_classifier"},
                                         "task": {"_name": "gile_classification", "data": str(tmp_path)}}),
                "model": {}, "extra_state": {"train_iterator": {"epoch": 1}},
                "optimizer_history": [{"criterion_name": "X", "optimizer_name": "Adam",
                                       "lr_scheduler_state": {"best": 0}, "num_updates": 0}]}, gile)
    line = refusal(cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", gile, check=False))
    assert line == (f"error: {gile} is a gile_classifier checkpoint; fairseq-generate needs a translation model "
                    "(fairseq-joint-predict-labels scores labels with this one)")
    # with the GILE data too (what a user has beside a GILE checkpoint): fairseq's translation task fails first
    proc = cli("fairseq-generate", tmp_path, "--user-dir", USER_DIR, "--path", gile, check=False)
    assert refusal(proc) == (f"error: {tmp_path} holds no binarized translation corpus whose languages fairseq can "
                             "read from its file names (train.SRC-TGT.SRC.idx): give the directory fairseq-preprocess "
                             "wrote, or --source-lang and --target-lang (a gile_classifier checkpoint is scored with "
                             "fairseq-joint-predict-labels, or fairseq-validate --task gile_classification)")


def test_a_misspelled_model_override_is_named(tiny_bin, joint_checkpoint):
    """fairseq set an override of any name on a legacy model's options: a misspelled one was ignored without a word."""
    line = refusal(cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", joint_checkpoint,
                       "--model-overrides", "{'beem': 3}", check=False))
    assert line == "error: 'beem' is no option of fairseq's (an override of the checkpoint's): did you mean 'beam'?"


def test_training_options_given_to_fairseq_generate_are_refused(tiny_bin, joint_checkpoint):
    """fairseq-generate's parser takes the options of any --arch and --criterion given, and translated with the
    checkpoint's model as trained: --output-layer tied changed nothing, without a word."""
    for extra, option in ((["--arch", "joint_transformer", "--output-layer", "tied"], "--output-layer"),
                          (["--criterion", "sampled_cross_entropy", "--sample-rate=0.5"], "--sample-rate")):
        line = refusal(cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", joint_checkpoint, *extra,
                           check=False))
        assert line == f"error: {option} is a training option (of a model or a criterion), which fairseq-generate " \
                       "does not read: the checkpoint's model translates as it was trained: drop it", line


def test_a_subword_file_its_library_cannot_read_is_named(tiny_bin, joint_checkpoint, tmp_path):
    """subword-nmt printed two lines of its own and ended the process (sys.exit(1)) on a malformed codes file."""
    codes = tmp_path / "bad.codes"
    codes.write_text("#version: 0.2\na b\nc d e\n", encoding="utf-8")
    (tmp_path / "in.txt").write_text("a sentence\n", encoding="utf-8")
    line = refusal(cli("fairseq-interactive", tiny_bin, "--user-dir", USER_DIR, "--path", joint_checkpoint, "--bpe",
                       "subword_nmt", "--bpe-codes", codes, "--input", tmp_path / "in.txt", check=False))
    assert line == (f"error: --bpe-codes {codes}: subword_nmt cannot read it (Error: invalid line 3 in BPE codes file: "
                    "c d e The line should exist of exactly two subword units, separated by whitespace): give the file "
                    "the model was trained with")


def test_fairseq_s_own_error_of_an_empty_corpus_is_one_line(tmp_path, monkeypatch):
    from fairseq_cli import preprocess

    from fairseq_joint import fairseq_patches
    from fairseq_joint.errors import InputError

    text = tmp_path / "text"
    text.mkdir()
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            (text / f"{split}.{lang}").write_text("")
    with pytest.raises(InputError, match=f"^--trainpref {text}/train: {text}/train.en is empty"):
        binarize(text, tmp_path / "bin")  # fairseq-preprocess with the plugin refuses it (parallel_text)
    # fairseq-preprocess without the plugin binarizes it; then fairseq-train with the plugin names the empty .bin
    monkeypatch.setattr(preprocess, "main", fairseq_patches.original("parallel_text"))
    data = binarize(text, tmp_path / "bin")
    line = refusal(cli("fairseq-train", data, "--user-dir", USER_DIR, "--arch", "joint_lstm_tiny", "--save-dir",
                       tmp_path / "ck", *TRAIN_FAST, check=False))
    assert line.startswith(f"error: {data}/train.en-de.en.bin is empty (no sentence was binarized)")


def test_a_binarized_corpus_whose_bin_is_not_what_its_idx_indexes(tiny_bin, joint_checkpoint, tmp_path):
    """fairseq read sentence i where the .idx said, without comparing the files: a .bin cut short failed at the first
    batch reaching past its end (a numpy ValueError naming no file), a longer one was read as other sentences."""
    import shutil

    from fairseq.data.indexed_dataset import MMapIndexedDataset

    from fairseq_joint.data.binarized import indexed_bytes

    whole = tiny_bin / "test.en-de.de"
    assert indexed_bytes(MMapIndexedDataset(str(whole))._index) == os.path.getsize(f"{whole}.bin") > 0
    for name, change, said in (("short", lambda f: f.truncate(100), "a copy cut short"),
                               ("long", lambda f: f.write(b"\0" * 8), "the two files are of two binarizations")):
        data = shutil.copytree(tiny_bin, tmp_path / name)
        with open(data / "test.en-de.de.bin", "r+b" if name == "short" else "ab") as f:
            change(f)
        size = os.path.getsize(data / "test.en-de.de.bin")
        line = refusal(cli("fairseq-generate", data, "--user-dir", USER_DIR, "--path", joint_checkpoint, "--beam", 1,
                           check=False))
        assert line == (f"error: {data}/test.en-de.de.bin holds {size} bytes but {data}/test.en-de.de.idx indexes "
                        f"{os.path.getsize(f'{whole}.bin')}: {said}: copy both again, or run "
                        "fairseq-preprocess again"), line


def test_word_vectors_refuse_what_gensim_would_fail_on(tmp_path, capsys):
    texts = tmp_path / "t.txt"
    texts.write_text("a python library\na rust library\n")
    code = common.run(word_vectors.main, ["--text", str(texts), "--output", str(tmp_path / "v.txt"), "--min-count", "3"])
    assert code == 2 and capsys.readouterr().err == (
        "error: --min-count 3 is above every word's count in the texts: give at most 2\n")
    code = common.run(word_vectors.main, ["--text", str(texts), "--output", str(tmp_path)])
    assert code == 2 and f"--output {tmp_path} is a directory" in capsys.readouterr().err
    from fairseq_joint.cli import preprocess_gile

    data, labels = tmp_path / "train.tsv", tmp_path / "labels.tsv"
    data.write_text("a python library\tA\n")
    labels.write_text("A\ta library\n")
    code = common.run(preprocess_gile.main, ["--train", str(data), "--labels", str(labels), "--destdir",
                                             str(tmp_path / "bin"), "--min-count", "3"])
    assert code == 2 and capsys.readouterr().err == (  # every word <unk>, without a word
        "error: --min-count 3 is above every word's count in the training texts and label descriptions: give at "
        "most 2\n")
    assert not (tmp_path / "bin").exists()
