"""examples/wmt17: every prepare script on a tiny local mirror of the real archives, train.sh for a few updates,
evaluate.sh, the results table and the plot; the bad-input errors; the scoring helpers' math. (nmt_study.py:
test_nmt_study.py.)"""

import json
import math
import re
import sys
from pathlib import Path

import pytest
from conftest import RECIPE, RECIPE_ENV, TINY_BPE, cli, prepare_recipe, recipe, write_slice

from fairseq_joint.cli import score as score_translations


@pytest.fixture(scope="module")
def prepared(mirror, tmp_path_factory):
    """Data-bin of every prepare script run on the mirror (en-de, fi-en, iwslt14 de-en, iwslt15 en-vi)."""
    work = tmp_path_factory.mktemp("work")
    runs = {
        "wmt17-en-de": ("prepare-wmt17-en-de.sh",),
        "wmt17-fi-en": ("prepare-wmt17-en-fi.sh", "--src", "fi", "--tgt", "en"),
        "iwslt14": ("prepare-iwslt.sh", "--corpus", "iwslt14-de-en"),
        "iwslt15": ("prepare-iwslt.sh", "--corpus", "iwslt15-en-vi"),
    }
    return work, {name: prepare_recipe(mirror, work / name, *run) for name, run in runs.items()}


def lines(path):
    return Path(path).read_text(encoding="utf-8").splitlines()


def test_prepare_scripts_write_bpe_text_and_binaries(prepared):
    work, bins = prepared
    for name, data_bin in bins.items():
        env = dict(line.split("=", 1) for line in lines(data_bin / "recipe.env"))
        src, tgt = env["RECIPE_SRC"], env["RECIPE_TGT"]
        for f in (f"dict.{src}.txt", f"dict.{tgt}.txt", f"train.{src}-{tgt}.{src}.bin", f"test.{src}-{tgt}.{tgt}.idx"):
            assert (data_bin / f).is_file(), f"{name}: {f} missing"
        bpe = work / name / "bpe200"
        assert any("@@ " in line for line in lines(bpe / f"train.{tgt}")), f"{name}: BPE not applied"
        # test set never filtered: as many BPE test lines as raw test lines
        assert len(lines(bpe / f"test.{tgt}")) == len(lines(work / name / "raw" / f"test.{tgt}"))
    # the paper's cleaning: <= 50 words on both sides of the training data (IWSLT14: fairseq's 175)
    clean = work / "wmt17-en-de" / "clean-len50-ratio1.5"
    assert max(len(s.split()) for s in lines(clean / "train.de") + lines(clean / "train.en")) <= 50
    assert len(lines(work / "wmt17-en-de" / "raw" / "train.en")) == 4 * 150  # europarl + cc + nc + rapid
    assert len(lines(work / "wmt17-en-de" / "raw" / "test.de")) == 40  # newstest2015 segments
    # IWSLT14 as fairseq prepares it: tags dropped, title/description kept, lowercased, every 23rd pair held out
    iw = work / "iwslt14"
    raw_train = lines(iw / "raw" / "all-train.en")
    assert len(raw_train) == 300 and not any(s.startswith("<") for s in raw_train)
    assert lines(iw / "raw" / "valid.en") == raw_train[22::23]
    assert all(s == s.lower() for s in lines(iw / "tok" / "train.de"))
    assert len(lines(iw / "raw" / "test.de")) == 5 * 10  # dev2010 + tst2010-2012 + TEDX.dev2012


def test_prepare_is_idempotent(prepared, mirror):
    work, bins = prepared
    d = work / "wmt17-en-de"
    before = {p: p.stat().st_mtime_ns for p in d.rglob("*") if p.is_file()}
    proc = recipe("prepare-wmt17-en-de.sh", "--raw", mirror, "--work", d, *TINY_BPE)
    after = {p: p.stat().st_mtime_ns for p in d.rglob("*") if p.is_file()}
    assert before == after
    assert "exists, skipped" in proc.stderr and proc.stdout.strip().endswith(str(bins["wmt17-en-de"]))


def test_prepare_parallel_with_a_relative_work_directory(tmp_path):
    """A relative --work (docs/translation.md's corpus guide): the uncleaned test set is linked relative to the
    directory it is linked in, not to the working directory (that link pointed nowhere and binarizing failed)."""
    write_slice(tmp_path / "corpus", n_train=60, n_eval=8)
    proc = cli("bash", RECIPE / "prepare-parallel.sh", "--train", "corpus/train", "--valid", "corpus/valid", "--test",
               "corpus/test", "--src", "en", "--tgt", "de", "--work", "w", *TINY_BPE, env=RECIPE_ENV, cwd=tmp_path)
    data_bin = Path(tmp_path, proc.stdout.strip().splitlines()[-1])
    assert (data_bin / "test.en-de.de.bin").stat().st_size > 0
    link = tmp_path / "w" / "clean-len50-ratio1.5" / "test.en"
    assert link.is_symlink() and lines(link) == lines(tmp_path / "w" / "tok" / "test.en")


def test_missing_raw_file_says_which_where_and_how_to_get_it(tmp_path):
    proc = recipe("prepare-wmt17-en-de.sh", "--raw", tmp_path / "empty", "--work", tmp_path / "w", *TINY_BPE, check=False)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()[-1]
    assert "training-parallel-europarl-v7.tgz" in err and str(tmp_path / "empty") in err
    assert "http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz" in err


def test_bpe_model_that_does_not_match_the_data_is_refused(prepared, mirror, tmp_path):
    work, _ = prepared
    codes = tmp_path / "cyrillic.codes"
    codes.write_text("#version: 0.2\nп р\nпр и</w>\n", encoding="utf-8")
    proc = recipe("prepare-wmt17-en-de.sh", "--raw", mirror, "--work", work / "wmt17-en-de", *TINY_BPE,
                  "--bpe-codes", codes, check=False)
    assert proc.returncode == 2
    assert "does not match" in proc.stderr and "cyrillic.codes" in proc.stderr


@pytest.fixture(scope="module")
def trained(prepared, tmp_path_factory):
    """nmt and nmt-joint-48 (joint_lstm_tiny, 3 updates) on the mirror's en-de, evaluated with beam 2."""
    _, bins = prepared
    data_bin, runs = bins["wmt17-en-de"], tmp_path_factory.mktemp("runs")
    tiny = ["--max-update", "3", "--max-tokens", "2000", "--num-workers", "0", "--log-interval", "1"]
    for system in ("nmt", "nmt-joint-48"):
        cli("bash", RECIPE / "train.sh", data_bin, system, runs / system, *tiny,
            env=dict(RECIPE_ENV, ARCH="joint_lstm_tiny"))
    recipe("evaluate.sh", data_bin, runs / "nmt", "--beam", "2")
    recipe("evaluate.sh", data_bin, runs / "nmt-joint-48", "--beam", "2", "--baseline", runs / "nmt")
    return data_bin, runs


def test_train_and_evaluate_produce_scores_bins_neighbours(trained):
    data_bin, runs = trained
    ev = runs / "nmt-joint-48" / "eval"
    n_test = len(lines(dict(line.split("=", 1) for line in lines(data_bin / "recipe.env"))["RECIPE_REF_RAW"]))
    assert len(lines(ev / "hyp.tok")) == len(lines(ev / "hyp.detok")) == n_test == 40
    assert not any("@@" in h for h in lines(ev / "hyp.tok"))  # BPE removed
    report = (ev / "scores.txt").read_text()
    assert "sacreBLEU" in report and "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in report
    assert "tokenized BLEU" in report and "tok:none" in report and "chrF" in report
    assert "paired bootstrap (1000 samples): nmt-joint-48" in report and "vs nmt" in report
    scores = json.loads((ev / "scores.json").read_text())
    base_scores = json.loads((runs / "nmt" / "eval" / "scores.json").read_text())
    assert scores["sentences"] == 40
    # the bootstrap compares this system's translations with the baseline's, against the raw reference
    sig = scores["significance"]
    assert sig["delta"] == pytest.approx(scores["bleu"] - base_scores["bleu"])
    refs = lines(dict(line.split("=", 1) for line in lines(data_bin / "recipe.env"))["RECIPE_REF_RAW"])
    again = score_translations.paired_bootstrap(lines(runs / "nmt" / "eval" / "hyp.detok"), lines(ev / "hyp.detok"),
                                                refs, False, n_samples=1000)  # sacreBLEU's resampling is seeded
    assert sig["p_value"] == again["p_value"] and sig["mark"] == again["mark"]
    bins = (ev / "freq_bins.md").read_text()
    for b in ("| high (", "| medium (", "| low (", "| unseen ("):
        assert b in bins
    assert "nmt F1" in bins and "nmt-joint-48 F1" in bins
    nn = (ev / "nn.md").read_text()
    assert "input E" in nn and "output g_out (joint)" in nn
    params = json.loads((ev / "params.json").read_text())
    assert params["output_layer_kind"] == "joint" and params["joint_dim"] == 48
    base_params = json.loads((runs / "nmt" / "eval" / "params.json").read_text())
    assert base_params["output_layer_kind"] == "softmax" and "significance" not in json.loads(
        (runs / "nmt" / "eval" / "scores.json").read_text())


def test_results_table_and_plot(trained, tmp_path):
    _, runs = trained
    md, png = tmp_path / "t.md", tmp_path / "fig2.png"
    proc = cli(sys.executable, RECIPE / "results_table.py", "--baseline", runs / "nmt", runs / "nmt",
               runs / "nmt-joint-48", "--markdown", md)
    table = md.read_text()
    assert table == proc.stdout
    rows = [r for r in table.splitlines() if r.startswith("| nmt")]
    assert rows[0].startswith("| nmt | ") and "(–)" in rows[0] and rows[1].startswith("| nmt-joint-48 | ")
    joint = json.loads((runs / "nmt-joint-48" / "eval" / "scores.json").read_text())
    assert f"{joint['bleu']:.2f} ({joint['significance']['delta']:+.2f}" in rows[1]
    cli(sys.executable, RECIPE / "plot_bleu_vs_dj.py", runs / "nmt", runs / "nmt-joint-48", "--output", png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_reference_bins_match_fairseq_validate_and_count_every_test_word(trained, prepared):
    data_bin, runs = trained
    work, _ = prepared
    tgt = dict(line.split("=", 1) for line in lines(data_bin / "recipe.env"))["RECIPE_TGT"]
    js, bpe = runs / "ref_bins.json", work / "wmt17-en-de" / "bpe200" / f"test.{tgt}"
    args = [RECIPE / "reference_bins.py", "--data-bin", data_bin, "--checkpoint",
            f"nmt={runs / 'nmt' / 'checkpoint_last.pt'}", "--checkpoint",
            f"joint={runs / 'nmt-joint-48' / 'checkpoint_last.pt'}", "--json", js]
    # the tiny dictionary lacks some test pieces: their <unk> has lost its @@, so the word boundaries need the text
    refused = cli(sys.executable, *args, check=False)
    assert refused.returncode == 2 and "<unk> pieces" in refused.stderr and "--ref-bpe" in refused.stderr
    wrong = runs / "wrong.bpe"
    wrong.write_text("\n".join(lines(bpe)[1:] + ["x"]) + "\n", encoding="utf-8")
    refused = cli(sys.executable, *args, "--ref-bpe", wrong, check=False)
    assert refused.returncode == 2 and "wrong.bpe:1 is not the binarized reference" in refused.stderr
    cli(sys.executable, *args, "--ref-bpe", bpe)
    out = json.loads(js.read_text())["systems"]
    ref_words = sum(len(s.replace("@@ ", "").split()) for s in lines(bpe))
    for name, run_dir in (("nmt", "nmt"), ("joint", "nmt-joint-48")):
        r = out[name]
        assert r["sentences"] == 40 and sum(b["words"] for b in r["bins"].values()) == ref_words
        val = cli("fairseq-validate", data_bin, "--user-dir", "fairseq_joint", "--task", "translation", "--path",
                  runs / run_dir / "checkpoint_last.pt", "--valid-subset", "test", "--max-tokens", "2000")
        bits = float(re.search(r"valid on 'test' subset \| loss ([0-9.]+)", val.stdout + val.stderr).group(1))
        assert r["nll_per_token"] / math.log(2) == pytest.approx(bits, abs=6e-4)  # fairseq prints 3 decimals
    assert out["nmt"]["tokens"] == out["joint"]["tokens"]
    assert "vs" not in out["nmt"] and set(out["joint"]["vs"]) == {"high", "medium", "low", "unseen"}
    high = out["joint"]["vs"]["high"]
    assert high["delta_nll_per_word"] == pytest.approx(out["joint"]["bins"]["high"]["nll_per_word"]
                                                       - out["nmt"]["bins"]["high"]["nll_per_word"])


def test_evaluate_refuses_a_differently_preprocessed_test_set(trained, prepared, mirror):
    work, _ = prepared
    proc = recipe("prepare-wmt17-en-de.sh", "--raw", mirror, "--work", work / "wmt17-en-de", "--bpe-ops", "150",
                  "--workers", "1", "--offline")
    other_bin = Path(proc.stdout.strip().splitlines()[-1])
    assert other_bin.name == "bin-bpe150-en-de"
    _, runs = trained
    proc = recipe("evaluate.sh", other_bin, runs / "nmt", "--beam", "2", check=False)
    assert proc.returncode == 2
    assert "preprocessed with another BPE model" in proc.stderr and str(other_bin) in proc.stderr


def test_train_sh_rejects_unknown_system_and_uses_sampling_for_large_joint(trained, tmp_path):
    data_bin, _ = trained
    proc = cli("bash", RECIPE / "train.sh", data_bin, "nmt-jiont", tmp_path / "x", check=False, env=RECIPE_ENV)
    assert proc.returncode == 2 and "unknown SYSTEM 'nmt-jiont'" in proc.stderr
    proc = cli("bash", RECIPE / "train.sh", data_bin, "nmt-joint-2048", tmp_path / "s", "--max-update", "1",
               "--max-tokens", "2000", "--num-workers", "0", env=dict(RECIPE_ENV, ARCH="joint_lstm_tiny"))
    # the paper's 25% sampling for dj >= 2048 (Sec. 4.2)
    assert "TRAIN_SAMPLING=on" in (tmp_path / "s" / "train-data.env").read_text()
    assert "criterion: SampledCrossEntropyCriterion" in proc.stdout + proc.stderr
    assert re.search(r"'sample_rate': 0\.25", proc.stdout + proc.stderr)


def test_train_sh_starts_joint_systems_uniform(trained, tmp_path):
    """A joint system trains the paper's LSTM with the output layer started at U(-0.1, 0.1) (the study's
    recommendation), a baseline with fairseq's start; ARCH and a later --output-layer-init give a joint system
    fairseq's start; here at 32-d (flags after SAVE_DIR override the preset's)."""
    data_bin, _ = trained
    small = ["--max-update", "1", "--max-tokens", "2000", "--num-workers", "0", "--no-save"] + [
        flag for dim in ("encoder-embed-dim", "decoder-embed-dim", "encoder-hidden-size", "decoder-hidden-size",
                         "decoder-out-embed-dim") for flag in (f"--{dim}", "32")]
    for i, (system, arch_env, more, arch, init) in enumerate((
            ("nmt-joint-16", "", [], "joint_lstm_wmt17_uniform_init", "uniform"),
            ("nmt-tied", "", [], "joint_lstm_wmt17", "fairseq"),
            ("nmt-joint-16", "joint_lstm_wmt17", [], "joint_lstm_wmt17", "fairseq"),
            ("nmt-joint-16", "", ["--output-layer-init", "fairseq"], "joint_lstm_wmt17_uniform_init", "fairseq"))):
        out = cli("bash", RECIPE / "train.sh", data_bin, system, tmp_path / str(i), *small, *more,
                  env=dict(RECIPE_ENV, ARCH=arch_env))  # ARCH="": unset, whatever the caller exported
        log = out.stdout + out.stderr
        assert f"arch='{arch}'" in log and f"output_layer_init='{init}'" in log, log[-3000:]
