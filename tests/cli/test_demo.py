"""``make demo``'s script (scripts/demo.sh) end to end on a slice of the bundled corpus: BPE, binarizing, a fixed,
seeded number of updates, the test set translated and scored; a second run reuses every finished step."""

import os
import re
import shutil

import torch
from conftest import BIN, REPO, cli

import fairseq_joint  # noqa: F401  (allowlists what fairseq pickles in a checkpoint for weights_only loading)

UPDATES = 3


def test_demo_trains_a_fixed_number_of_updates_translates_and_scores(tmp_path):
    # a copy of what the script reads (its corpus, the recipes' checks, the plugin), the corpus cut to a slice
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "demo.sh", root / "scripts")
    (root / "examples" / "wmt17").mkdir(parents=True)
    shutil.copy2(REPO / "examples" / "wmt17" / "lib.sh", root / "examples" / "wmt17")
    (root / "fairseq_joint").symlink_to(REPO / "fairseq_joint")
    data = root / "data" / "demo-en-de"
    data.mkdir(parents=True)
    for split, n in (("train", 1500), ("valid", 40), ("test", 12)):
        for lang in ("en", "de"):
            lines = (REPO / "data" / "demo-en-de" / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
            (data / f"{split}.{lang}").write_text("\n".join(lines[:n]) + "\n", encoding="utf-8")
    env = {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "DEMO_MAX_UPDATE": str(UPDATES),
           "DEMO_DIR": str(tmp_path / "work")}
    out = cli("bash", root / "scripts" / "demo.sh", env=env, timeout=900)
    work = tmp_path / "work"
    state = torch.load(work / "checkpoints-joint" / "checkpoint_last.pt", map_location="cpu")
    assert state["optimizer_history"][-1]["num_updates"] == UPDATES  # a number of updates, not a time budget
    assert state["cfg"]["model"].output_layer == "joint" and state["cfg"]["common"]["seed"] == 1
    hyps = (work / "test.hyp.de").read_text(encoding="utf-8").splitlines()
    assert len(hyps) == 12  # every test sentence, in order
    assert re.search(r"^\s*BLEU\|.* = \d+\.\d\d ", out.stdout, re.M) and re.search(r"^chrF2\|", out.stdout, re.M)
    assert "training joint_transformer --output-layer joint --joint-dim 256 for 3 updates (seed 1)" in out.stdout
    # a second run reuses the BPE model, the binaries and the finished training, and scores the same
    again = cli("bash", root / "scripts" / "demo.sh", env=env, timeout=900)
    for step in ("learning a 4000-piece", "applying BPE", "fairseq-preprocess", "training joint_transformer"):
        assert step in out.stdout and step not in again.stdout, step
    assert (work / "test.hyp.de").read_text(encoding="utf-8").splitlines() == hyps
