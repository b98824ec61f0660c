"""fairseq's CLIs end to end with every output layer: train, checkpoint, generate, interactive, resume,
load_model_ensemble_and_task, and 2-process (gloo) distributed training."""

import math
import re
import subprocess

import pytest
import torch
from conftest import BIN, REPO, TRAIN_FAST, USER_DIR, assert_same_tensors, cli, free_port, state
from fairseq import checkpoint_utils

import fairseq_joint  # noqa: F401  (registers the models and allowlists checkpoint classes)

LAYERS = ["softmax", "tied", "bilinear", "label", "context", "joint"]
ARCHS = ["joint_lstm_tiny", "joint_transformer_tiny"]


def train(data, save_dir, arch, kind, *extra, updates=3):
    return cli(
        "fairseq-train", data, "--user-dir", USER_DIR, "--arch", arch, "--output-layer", kind,
        "--joint-dim", 24, "--save-dir", save_dir, "--max-update", updates, *TRAIN_FAST, *extra,
    )


def reference_scores(model, task, n=8):
    """Per-token log2-probabilities of the first n test references under ``model`` (as generate prints)."""
    task.load_dataset("test")
    ds = task.dataset("test")
    out = {}
    model.eval()
    with torch.no_grad():
        for i in range(n):
            s = ds.collater([ds[i]])
            logits, _ = model(**s["net_input"])
            lprobs = torch.log_softmax(logits.float(), -1)
            tok = lprobs.gather(-1, s["target"].unsqueeze(-1)).squeeze(-1) / math.log(2)
            out[i] = tok[0].tolist()
    return out


def parse_positional_scores(stdout):
    return {int(m.group(1)): [float(x) for x in m.group(2).split()] for m in re.finditer(r"^P-(\d+)\t(.*)$", stdout, re.M)}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", LAYERS)
def test_train_save_generate_round_trip(tiny_bin, tmp_path, arch, kind):
    train(tiny_bin, tmp_path, arch, kind)
    ckpt = tmp_path / "checkpoint_last.pt"
    # in-process load through fairseq (weights_only=True underneath, with our allowlist)
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(ckpt)])
    model = models[0]
    assert model.decoder.output_projection.output_layer == kind
    # the state survives the round trip bit for bit
    assert_same_tensors(model.state_dict(), state(ckpt)["model"])
    expected = reference_scores(model, task)
    # fairseq-generate loads it again and scores the references with the same logits
    gen = cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", ckpt, "--gen-subset", "test",
              "--score-reference", "--batch-size", 1, "--required-batch-size-multiple", 1)
    scores = parse_positional_scores(gen.stdout)
    for i, ref in expected.items():
        assert scores[i] == pytest.approx(ref, abs=1e-4), i
    # and beam search produces hypotheses and a sacreBLEU score
    gen = cli("fairseq-generate", tiny_bin, "--user-dir", USER_DIR, "--path", ckpt, "--beam", 2,
              "--max-len-b", 8, "--batch-size", 20, "--scoring", "sacrebleu")
    assert gen.stdout.count("\nH-") == 40
    assert "BLEU" in gen.stdout


def test_interactive_and_resume(tiny_bin, tmp_path):
    train(tiny_bin, tmp_path, "joint_transformer_tiny", "joint", updates=2)
    resumed = train(tiny_bin, tmp_path, "joint_transformer_tiny", "joint", updates=4)
    log = resumed.stdout + resumed.stderr
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch \d+ @ 2 updates\)", log)
    assert "num_updates=4" in log or "num_updates 4" in log
    proc = subprocess.run(
        [str(BIN / "fairseq-interactive"), str(tiny_bin), "--user-dir", USER_DIR, "--path",
         str(tmp_path / "checkpoint_last.pt"), "--beam", "2", "--source-lang", "en", "--target-lang", "de"],
        input="Landscape\nEnter the URL here .\n", capture_output=True, text=True, timeout=300, cwd=str(REPO),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("\nH-") + proc.stdout.startswith("H-") >= 2 or len(re.findall(r"^H-\d", proc.stdout, re.M)) == 2


def test_generate_with_a_differently_preprocessed_dictionary_fails_clearly(tiny_bin, tiny_text, tmp_path):
    train(tiny_bin, tmp_path / "ck", "joint_transformer_tiny", "joint", updates=1)
    other = tmp_path / "other"
    cli("fairseq-preprocess", "--source-lang", "en", "--target-lang", "de", "--trainpref", tiny_text / "valid",
        "--testpref", tiny_text / "test", "--destdir", other, "--workers", 1)
    proc = cli("fairseq-generate", other, "--user-dir", USER_DIR, "--path", tmp_path / "ck" / "checkpoint_last.pt",
               "--batch-size", 8, check=False)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"error: the checkpoint's (source|target) dictionary has \d+ entries but the data's has \d+.*"
                        r"--(src|tgt)dict.*", last), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def _epoch_stats(log):
    m = re.findall(r"\| train \| epoch 001 \|.*", log)
    assert m, log[-3000:]
    line = m[-1]
    return int(re.search(r"num_updates (\d+)", line).group(1)), float(re.search(r"bsz ([\d.]+)", line).group(1))


def test_two_process_gloo_training(tiny_bin, tmp_path):
    """Both ranks train: with 2 processes an epoch takes about half the updates of 1 process, and the
    updates together still cover every training sentence (the logged batch size sums both ranks). With
    sampled softmax, the same seed gives the same parameters in a second 2-process run."""
    common = [
        "--user-dir", USER_DIR, "--arch", "joint_lstm_tiny", "--output-layer", "joint", "--joint-dim", 24,
        "--criterion", "sampled_cross_entropy", "--sample-rate", 0.3,
        "--max-epoch", 1, "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", 600, "--no-progress-bar",
        "--seed", 1, "--num-workers", 0, "--disable-validation", "--no-epoch-checkpoints", "--log-format", "simple",
    ]
    single = cli("fairseq-train", tiny_bin, *common, "--no-save")
    n1, bsz1 = _epoch_stats(single.stdout + single.stderr)

    def distributed(save_dir):
        port = free_port()
        dist = ["--distributed-world-size", 2, "--distributed-backend", "gloo", "--distributed-no-spawn",
                "--ddp-backend", "legacy_ddp", "--distributed-init-method", f"tcp://127.0.0.1:{port}",
                "--save-dir", save_dir]
        procs = [
            subprocess.Popen([str(BIN / "fairseq-train"), str(tiny_bin), *map(str, common), *map(str, dist),
                              "--distributed-rank", str(rank)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, cwd=str(REPO), env={"OMP_NUM_THREADS": "1", "PATH": str(BIN)})
            for rank in (0, 1)
        ]
        outs = [p.communicate(timeout=600)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs[0][-2000:] + outs[1][-2000:]
        assert "distributed init (rank 1)" in outs[0] + outs[1]
        return outs[0]

    n2, bsz2 = _epoch_stats(distributed(tmp_path / "a"))
    assert n2 < n1 and n2 >= n1 // 2
    assert n2 * bsz2 == pytest.approx(n1 * bsz1, rel=0.02)  # all 300 sentences, split over the ranks
    distributed(tmp_path / "b")
    a, b = (state(tmp_path / x / "checkpoint_last.pt")["model"] for x in "ab")
    assert_same_tensors(a, b)
