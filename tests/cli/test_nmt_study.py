"""examples/wmt17/nmt_study.py end to end on the tiny mirror's en-de: one study trained, scored, reused, extended to a
larger budget and continued on "another machine" from its committed study.json (one test: every step reads what
the one before wrote)."""

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import BIN, RECIPE_ENV, REPO, cli, prepare_recipe

STUDY = REPO / "examples" / "wmt17" / "nmt_study.py"
# a PATH without the environment's bin (a user running .venv/bin/python nmt_study.py without activating it)
BARE_ENV = {"PATH": os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                                    if d and Path(d).resolve() != BIN.resolve())}


@pytest.fixture(scope="module")
def en_de(mirror, tmp_path_factory):
    """The data-bin of prepare-wmt17-en-de.sh on the mirror."""
    return prepare_recipe(mirror, tmp_path_factory.mktemp("en_de") / "wmt17-en-de", "prepare-wmt17-en-de.sh")


def rows_of(table: str, prefix: str = "| nmt") -> dict:
    """The first row of each system in a study.md (the Table 2 rows; the bins table follows)."""
    rows = {}
    for line in table.splitlines():
        if line.startswith(prefix):
            rows.setdefault(line.split(" | ")[0].lstrip("| "), line)
    return rows


def test_nmt_study_trains_scores_reuses_extends_and_adds_an_earlier_study(en_de, tmp_path):
    """Table 2 layout with Δ vs NMT and vs NMT-tied, the Fig. 3 bins, learning curves (a point per validation), the
    Fig. 2 plot, two runs trained at once (--jobs 2); run by the environment's python with its bin off PATH (the
    study finds fairseq-train / fairseq-generate next to the interpreter). A re-run reuses every finished run; a
    larger budget continues a run from its last checkpoint; other flags under the same model name are refused.
    --add-results: a study continued elsewhere reports the committed study.json's runs of its --model beside its own
    (seeds column, bins table, curves count both), a run trained here replaces the file's; a file of another budget,
    other prepared data, other model flags, or not a study.json is refused in one line."""
    work = tmp_path / "a"
    common = [STUDY, "--data-bin", en_de, "--model", "tiny", "--model-flags", "--arch joint_lstm_tiny",
              "--validate-every", "2", "--beam", "2", "--threads", "1", "--train-flags", "--max-tokens 2000"]
    systems = ["--systems", "nmt,nmt-tied,nmt-joint-48"]
    first = cli(sys.executable, *common, *systems, "--workdir", work, "--max-update", "4", "--jobs", "2",
                env=BARE_ENV)
    assert first.stdout.count("training from scratch") == 3
    table = (work / "study.md").read_text(encoding="utf-8")
    rows = rows_of(table)
    assert list(rows) == ["nmt", "nmt-tied", "nmt-joint-48"]
    assert "| – | – |" in rows["nmt"]  # NMT has no Δ (neither vs itself nor vs NMT-tied)
    assert re.search(r"\| [+-]\d+\.\d\d[*†‡]? \| [+-]\d+\.\d\d[*†‡]? \|", rows["nmt-joint-48"])  # Δ vs NMT, vs tied
    assert "| high | medium | low | unseen |" in table
    study = json.loads((work / "study.json").read_text())
    assert {r["system"]: [p["updates"] for p in r["curve"]] for r in study["runs"]} == \
        {s: [2, 4] for s in ("nmt", "nmt-tied", "nmt-joint-48")}
    assert all(r["word_f1"] for r in study["runs"])
    assert (work / "learning_curves.png").stat().st_size > 10000 and (work / "bleu_vs_dj.png").is_file()
    earlier = tmp_path / "earlier.json"  # as committed: the run directories stay behind on the first machine
    committed = json.loads((work / "study.json").read_text())
    committed["runs"].append({**committed["runs"][0], "model": "another"})  # another --model's run: not added
    earlier.write_text(json.dumps(committed))

    again = cli(sys.executable, *common, *systems, "--workdir", work, "--max-update", "4", env=RECIPE_ENV)
    assert again.stdout.count("(reused)") == 3 and "training from" not in again.stdout
    longer = cli(sys.executable, *common, "--systems", "nmt-joint-48", "--workdir", work, "--max-update", "6",
                 env=RECIPE_ENV)  # one system is enough to see a run continue
    assert longer.stdout.count("training from update 4 to 6") == 1
    study = json.loads((work / "study.json").read_text())
    assert study["max_update"] == 6 and [[p["updates"] for p in r["curve"]] for r in study["runs"]] == [[2, 4, 6]]
    assert all((work / "tiny" / f"{s}-seed1" / "eval-u4" / "scores.json").is_file() for s in ("nmt", "nmt-tied"))
    clash = cli(sys.executable, *[a if a != "--arch joint_lstm_tiny" else "--arch joint_lstm" for a in common],
                *systems, "--workdir", work, "--max-update", "4", check=False, env=RECIPE_ENV)
    assert clash.returncode == 2 and "--model tiny was trained in" in clash.stderr.strip().splitlines()[-1]

    # continued on another machine: nmt-tied trained here with seeds 1 and 2, the rest added from the file
    shutil.rmtree(work)
    at4 = [*common, "--max-update", "4", "--workdir", tmp_path / "b"]
    second = cli(sys.executable, *at4, "--systems", "nmt-tied", "--seeds", "1,2", "--add-results", earlier,
                 env=RECIPE_ENV)
    assert second.stdout.count("training from scratch") == 2
    assert "tiny/nmt-tied/seed 1: left out of" in second.stdout  # the run trained here replaces the file's
    study = json.loads((tmp_path / "b" / "study.json").read_text())
    assert sorted((r["system"], r["seed"], "added_from" in r) for r in study["runs"]) == \
        [("nmt", 1, True), ("nmt-joint-48", 1, True), ("nmt-tied", 1, False), ("nmt-tied", 2, False)]
    table = (tmp_path / "b" / "study.md").read_text(encoding="utf-8")
    tied = [line for line in table.splitlines() if line.startswith("| nmt-tied |")]
    assert len(tied) == 2 and tied[0].split(" | ")[3] == "1,2" and tied[1].split(" | ")[1] == "1,2"  # Table 2, bins
    added = table.split(f"Added from `{earlier}`")[1].splitlines()[0].split("): ")[1].rstrip(".").split(", ")
    assert sorted(added) == ["tiny/nmt-joint-48/seed 1", "tiny/nmt/seed 1"]  # not nmt-tied/seed 1, not "another"
    assert all(r["word_f1"] and len(r["curve"]) == 2 for r in study["runs"])
    # refusals: another budget, other prepared data, other model flags, not a study.json
    good = json.loads(earlier.read_text())
    for name, change, message in [
        ("budget.json", {"max_update": 6}, "scored at 6 updates, not --max-update 4"),
        ("data.json", {"recipe": {**good["recipe"], "RECIPE_TEST_SHA": "0" * 64}}, "its RECIPE_TEST_SHA is '000"),
        ("flags.json", {"settings": {"tiny": {"model_flags": ["--arch", "joint_lstm"]}}},
         "its tiny runs were made with model_flags ['--arch', 'joint_lstm'], this call's is ['--arch', 'joint_lstm_tiny']"),
    ]:
        (tmp_path / name).write_text(json.dumps({**good, **change}))
        bad = cli(sys.executable, *at4, "--no-train", "--add-results", tmp_path / name, check=False, env=RECIPE_ENV)
        assert bad.returncode == 2 and message in bad.stderr.strip().splitlines()[-1], bad.stderr
    (tmp_path / "table.json").write_text("[1, 2]")
    bad = cli(sys.executable, *at4, "--no-train", "--add-results", tmp_path / "table.json", check=False, env=RECIPE_ENV)
    assert bad.returncode == 2 and "not a study.json written by nmt_study.py" in bad.stderr.strip().splitlines()[-1]
