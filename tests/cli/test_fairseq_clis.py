"""fairseq with every output layer: each layer of each model family is trained one update by fairseq's Trainer,
saved and loaded back through fairseq's checkpoint code, and decoded by fairseq's beam search (in process); then each
model family end to end through the commands a user runs: fairseq-train, fairseq-generate (reference scores and beam
search), fairseq-interactive, a checkpoint given data of another dictionary, and 2-process (gloo) training.

Each layer's math (Eqs. 3-16) is asserted in tests/unit/test_output_layers.py; what this file adds is that fairseq's
programs run it: one command-line run per model family, not one per layer."""

import math
import re
import subprocess

import pytest
import torch
from conftest import (
    BIN,
    REPO,
    TRAIN_FAST,
    USER_DIR,
    assert_same_tensors,
    binarize,
    cli,
    free_port,
    log_records,
    state,
    train_joint,
    training_args,
    write_slice,
)
from fairseq import checkpoint_utils

import fairseq_joint  # noqa: F401  (registers the models and allowlists checkpoint classes)

LAYERS = ["softmax", "tied", "bilinear", "label", "context", "joint"]
ARCHS = ["joint_lstm_tiny", "joint_transformer_tiny"]


def teacher_forced(model, src_tokens, src_lengths, target):
    """Per-token log-probabilities (nats) of ``target`` (each row ending with eos) under ``model``."""
    eos = model.decoder.dictionary.eos()
    prev = torch.cat([torch.full_like(target[:, :1], eos), target[:, :-1]], dim=1)
    model.eval()
    with torch.no_grad():
        out = model(src_tokens, src_lengths, prev)
        lprobs = model.get_normalized_probs(out, log_probs=True).float()
    return lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)


def first_pairs(task, split, n):
    """The first ``n`` pairs of ``split`` as one batch."""
    task.load_dataset(split)
    ds = task.dataset(split)
    return ds.collater([ds[i] for i in range(n)])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", LAYERS)
def test_every_layer_trains_saves_loads_and_decodes_in_fairseq(tiny_bin, tmp_path, arch, kind):
    """One update by fairseq's Trainer, its checkpoint written by the Trainer and read by
    load_model_ensemble_and_task (weights_only=True with the plugin's allowlist; fairseq's state-dict upgrade hooks
    run): every tensor comes back bit for bit, and the beam search's per-token scores (incremental decoding, the
    output layer's eval cache) are the model's teacher-forced scores of the same hypotheses."""
    from fairseq import tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    cfg = convert_namespace_to_omegaconf(training_args(tiny_bin, arch, "--output-layer", kind, "--joint-dim", 24,
                                                       *TRAIN_FAST, "--save-dir", tmp_path))
    task = tasks.setup_task(cfg.task)
    trainer = Trainer(cfg, task, task.build_model(cfg.model), task.build_criterion(cfg.criterion))
    before = trainer.model.decoder.embed_tokens.weight.detach().clone()
    trainer.train_step([first_pairs(task, "train", 16)])
    assert trainer.get_num_updates() == 1
    trained = trainer.model.state_dict()
    assert not torch.equal(before, trained["decoder.embed_tokens.weight"])
    trainer.consolidate_optimizer()
    ckpt = tmp_path / "checkpoint_last.pt"
    trainer.save_checkpoint(str(ckpt), {})

    models, loaded_cfg, loaded_task = checkpoint_utils.load_model_ensemble_and_task([str(ckpt)])
    model = models[0]
    assert model.decoder.output_projection.output_layer == kind
    assert set(model.state_dict()) == set(trained)  # nothing injected (e.g. decoder.output_projection.weight)
    assert_same_tensors(trained, model.state_dict(), "trained vs loaded")
    assert_same_tensors(model.state_dict(), state(ckpt)["model"], "loaded vs file")

    loaded_cfg.generation.beam, loaded_cfg.generation.max_len_b = 2, 8
    generator = loaded_task.build_generator(models, loaded_cfg.generation)
    sample = first_pairs(loaded_task, "test", 6)
    hypos = loaded_task.inference_step(generator, models, sample)
    for i, beams in enumerate(hypos):
        best = beams[0]
        src = sample["net_input"]["src_tokens"][i : i + 1]
        src = src[:, src.ne(loaded_task.src_dict.pad()).squeeze(0)]  # fairseq left-pads the source
        forced = teacher_forced(model, src, torch.tensor([src.size(1)]), best["tokens"].unsqueeze(0))[0]
        torch.testing.assert_close(best["positional_scores"], forced, atol=1e-4, rtol=1e-4)


def reference_scores(model, task, n=8):
    """Per-token log2-probabilities of the first n test references under ``model`` (as generate prints them)."""
    task.load_dataset("test")
    ds = task.dataset("test")
    out = {}
    for i in range(n):
        s = ds.collater([ds[i]])
        tok = teacher_forced(model, s["net_input"]["src_tokens"], s["net_input"]["src_lengths"], s["target"])
        out[i] = (tok[0] / math.log(2)).tolist()
    return out


def printed(stdout, kind):
    """``{id: text}`` of fairseq-generate's ``H``/``P`` lines (hypothesis text without its score, or scores)."""
    if kind == "P":
        return {int(m.group(1)): [float(x) for x in m.group(2).split()]
                for m in re.finditer(r"^P-(\d+)\t(.*)$", stdout, re.M)}
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^H-(\d+)\t\S+\t(.*)$", stdout, re.M)}


@pytest.mark.parametrize("arch", ARCHS)
def test_each_model_family_through_fairseq_train_and_generate(tiny_bin, tmp_path, arch, joint_checkpoint):
    """fairseq-train writes the checkpoint; fairseq-generate scores the references with the logits the model computes
    in process, and its beam search prints the hypotheses of fairseq's beam search in process, with sacreBLEU."""
    if arch == "joint_transformer_tiny":
        ckpt = joint_checkpoint  # the session's NMT-joint Transformer (also read by other tests)
    else:
        train_joint(tiny_bin, tmp_path, arch, 3)
        ckpt = tmp_path / "checkpoint_last.pt"
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(ckpt)])
    model = models[0]
    assert model.decoder.output_projection.output_layer == "joint"
    expected = reference_scores(model, task)
    gen = cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", ckpt, "--gen-subset", "test",
              "--score-reference", "--batch-size", 1, "--required-batch-size-multiple", 1)
    scores = printed(gen.stdout, "P")
    for i, ref in expected.items():
        assert scores[i] == pytest.approx(ref, abs=1e-4), i

    gen = cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", ckpt, "--beam", 2, "--max-len-b", 8,
              "--batch-size", 20, "--required-batch-size-multiple", 1, "--scoring", "sacrebleu")
    hyps = printed(gen.stdout, "H")
    assert sorted(hyps) == list(range(40))
    assert re.search(r"Generate test with beam=2: BLEU = [\d.]+ ", gen.stdout)
    cfg.generation.beam, cfg.generation.max_len_b = 2, 8
    generator = task.build_generator(models, cfg.generation)
    sample = first_pairs(task, "test", 40)
    for i, beams in zip(sample["id"].tolist(), task.inference_step(generator, models, sample)):
        assert hyps[i] == task.tgt_dict.string(beams[0]["tokens"]), i


def test_a_multilingual_task_of_fairseqs_trains_and_translates(joined_bin, tmp_path):
    """fairseq's translation_multi_simple_epoch (a task that keeps its options as a Namespace) with NMT-joint: its
    checkpoint is read back by fairseq-generate (the plugin's checkpoint checks failed on the Namespace)."""
    multilingual = ["--task", "translation_multi_simple_epoch", "--lang-pairs", "en-de,de-en", "--langs", "en,de",
                    "--encoder-langtok", "src", "--decoder-langtok", "--source-lang", "en", "--target-lang", "de"]
    trained = train_joint(joined_bin, tmp_path, "joint_transformer_tiny", 2, "--share-all-embeddings", *multilingual)
    assert "Warning" not in trained.stderr, trained.stderr  # torch's notice of every Transformer run is quiet too
    gen = cli("fairseq-generate", joined_bin, "--user-dir", USER_DIR, "--path", tmp_path / "checkpoint_last.pt",
              *multilingual, "--gen-subset", "test", "--beam", 2, "--max-len-b", 4, "--batch-size", 40)
    assert sorted(printed(gen.stdout, "H")) == list(range(40))


def test_interactive_translates_what_beam_search_translates(tiny_bin, joint_checkpoint):
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(joint_checkpoint)])
    cfg.generation.beam = 2
    generator = task.build_generator(models, cfg.generation)
    inputs = ["Landscape", "Enter the URL here ."]
    expected = []
    for line in inputs:
        src = task.src_dict.encode_line(line, add_if_not_exist=False).long().unsqueeze(0)
        sample = {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([src.size(1)])}}
        expected.append(task.tgt_dict.string(task.inference_step(generator, models, sample)[0][0]["tokens"]))
    proc = subprocess.run(
        [str(BIN / "fairseq-interactive"), str(tiny_bin), "--user-dir", USER_DIR, "--path", str(joint_checkpoint),
         "--beam", "2", "--source-lang", "en", "--target-lang", "de"],
        input="".join(line + "\n" for line in inputs), capture_output=True, text=True, timeout=300, cwd=str(REPO),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert printed(proc.stdout, "H") == dict(enumerate(expected)), proc.stdout
    # a BPE without its codes (omegaconf's MissingMandatoryValue traceback), a language DATA has no dictionary of
    for extra, said in ((["--bpe", "subword_nmt"], "error: --bpe-codes is missing: --bpe subword_nmt needs it: add "
                                                   "--bpe-codes"),
                        (["--source-lang", "fr", "--target-lang", "de"], f"error: {tiny_bin}/dict.fr.txt: no such file: {tiny_bin} holds no "
                                                  "dictionary of 'fr': give the directory fairseq-preprocess wrote for "
                                                  "these languages, or --source-lang and --target-lang of a pair "
                                                  f"binarized there (ls {tiny_bin}/dict.*.txt)"),
                        # the other direction: over a dictionary both languages share it translated without a word
                        (["--source-lang", "de", "--target-lang", "en"], "error: the checkpoint's language pair "
                                                                         "(--source-lang, --target-lang) has other "
                                                                         "entries than the data's: translate in the "
                                                                         "direction it was trained for, from the language "
                                                                         "of its training source to that of its target")):
        proc = cli("fairseq-interactive", tiny_bin, "--user-dir", USER_DIR, "--path", joint_checkpoint, *extra,
                   check=False)
        assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == said, proc.stderr[-2000:]


def test_generate_with_a_differently_preprocessed_dictionary_fails_clearly(tiny_text, tmp_path, joint_checkpoint):
    other_text = tmp_path / "text"
    other_text.mkdir()
    for lang in ("en", "de"):  # a dictionary built from the validation sentences only
        for split in ("train", "valid"):
            (other_text / f"{split}.{lang}").write_text((tiny_text / f"valid.{lang}").read_text())
        (other_text / f"test.{lang}").write_text((tiny_text / f"test.{lang}").read_text())
    other = binarize(other_text, tmp_path / "other")
    proc = cli("fairseq-generate", other, "--user-dir", USER_DIR, "--path", joint_checkpoint, "--batch-size", 8,
               check=False)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"error: the checkpoint's (source|target) dictionary has \d+ entries but the data's has \d+.*"
                        r"--(src|tgt)dict.*", last), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_two_process_gloo_training(tiny_bin, tmp_path):
    """Both ranks train: with 2 processes an epoch takes about half the updates of 1 process, and the updates
    together still cover every training sentence (the logged batch size sums both ranks). The label-embedding loss
    with sampling: the criterion's parameters (o2, A, B) are trained and saved, each forward scores |V'| = 50% of
    |V| on its own rank (not summed over the ranks), and the same seed gives the same parameters, model and
    criterion, in a second 2-process run."""
    common = [
        "--user-dir", USER_DIR, "--arch", "joint_lstm_tiny", "--output-layer", "joint", "--joint-dim",
        24, "--criterion", "label_embedding_cross_entropy", "--label-embedding-dim", 8, "--sample-rate", 0.5,
        "--max-epoch", 1, "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", 600, "--no-progress-bar",
        "--seed", 1, "--num-workers", 0, "--disable-validation", "--no-epoch-checkpoints", "--log-format", "simple",
        "--log-interval", 1,
    ]
    single = cli("fairseq-train", tiny_bin, *common, "--no-save")
    (epoch1,) = log_records(single.stdout + single.stderr, "train")
    n1, bsz1 = epoch1["num_updates"], epoch1["bsz"]

    def distributed(save_dir, *extra, refused=False):
        port = free_port()
        dist = ["--distributed-world-size", 2, "--distributed-backend", "gloo", "--distributed-no-spawn",
                "--ddp-backend", "legacy_ddp", "--distributed-init-method", f"tcp://127.0.0.1:{port}",
                "--save-dir", save_dir, *extra]
        procs = [
            subprocess.Popen([str(BIN / "fairseq-train"), str(tiny_bin), *map(str, common), *map(str, dist),
                              "--distributed-rank", str(rank)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, cwd=str(REPO), env={"OMP_NUM_THREADS": "1", "PATH": str(BIN)})
            for rank in (0, 1)
        ]
        outs = [p.communicate(timeout=600)[0] for p in procs]
        assert [p.returncode for p in procs] == [2 if refused else 0] * 2, outs[0][-2000:] + outs[1][-2000:]
        assert "distributed init (rank 1)" in outs[0] + outs[1]
        return outs if refused else outs[0]

    log = distributed(tmp_path / "a")
    (epoch2,) = log_records(log, "train")
    n2, bsz2 = epoch2["num_updates"], epoch2["bsz"]
    assert n1 // 2 <= n2 < n1
    assert n2 * bsz2 == pytest.approx(n1 * bsz1, rel=0.02)  # all 300 sentences, split over the ranks
    vocab = len((tiny_bin / "dict.de.txt").read_text().splitlines()) + 4
    assert {r["candidates"] for r in log_records(log, "train_inner")} == {round(0.5 * vocab)}
    distributed(tmp_path / "b")
    a, b = (state(tmp_path / x / "checkpoint_last.pt") for x in "ab")
    assert {"o2.weight", "label_embedding.A", "label_embedding.B"} <= set(a["criterion"])
    for part in ("model", "criterion"):
        assert_same_tensors(a[part], b[part], part)
    # resumed: rank 0 reads the checkpoint and sends it to rank 1, which unpickles fairseq's _TensorPlaceholder
    # (refused by torch's weights_only load without the plugin's allowlist: rank 1 died, rank 0 in gloo's error)
    log = distributed(tmp_path / "a", "--max-epoch", 2, "--max-update", int(n2) + 1)  # one update of epoch 2
    assert "resuming" in log and "options that differ from the checkpoint's: --max-epoch 2 (checkpoint: 1), " \
        f"--max-update {int(n2) + 1} (checkpoint: 0)" in log
    assert [r["num_updates"] for r in log_records(log, "train_inner")] == [n2 + 1]
    # one process's checkpoint inside an epoch, resumed by two: refused by both (fairseq failed in a traceback; the
    # first process reads the configuration and tells the other), each printing the line: a refusal after the process
    # group started was silent (torch's exception hook, wrapped around the plugin's, held its output in a buffer the
    # plugin's exit dropped: both ranks exited 2 without a word)
    assert n1 > 2
    cli("fairseq-train", tiny_bin, *common, "--save-dir", tmp_path / "c", "--max-update", 2)
    for out in distributed(tmp_path / "c", "--max-update", 4, refused=True):
        assert out.strip().splitlines()[-1].startswith(
            f"error: {tmp_path / 'c' / 'checkpoint_last.pt'} was saved 2 batches into an epoch of a run of "
            "--distributed-world-size 1, which --distributed-world-size 2 cannot go on with"), out[-2000:]


def test_an_ensemble_loads_each_checkpoint_and_names_the_one_refused(tiny_bin, joint_checkpoint, tmp_path,
                                                                     monkeypatch):
    """An ensemble's checkpoints are loaded one by one (each file read once: fairseq read each twice): one trained
    with other dictionaries than the data's is refused naming it; fairseq's refusal did not say which of the --path
    files it was."""
    read, load = [], checkpoint_utils.load_checkpoint_to_cpu
    monkeypatch.setattr(checkpoint_utils, "load_checkpoint_to_cpu", lambda path, *a, **k: read.append(path) or load(
        path, *a, **k))
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(joint_checkpoint)] * 2)
    assert len(models) == 2 and read == [str(joint_checkpoint)] * 2
    assert all(len(task.tgt_dict) == len(m.decoder.dictionary) for m in models)
    other = write_slice(tmp_path / "text", 200, 40)
    train_joint(binarize(other, tmp_path / "bin"), tmp_path / "other", "joint_transformer_tiny", 1)
    proc = cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path",
               f"{joint_checkpoint}:{tmp_path / 'other' / 'checkpoint_last.pt'}", "--beam", 1, check=False)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith(
        f"error: {tmp_path / 'other' / 'checkpoint_last.pt'}: the checkpoint's source dictionary has "), proc.stderr
