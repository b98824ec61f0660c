#!/usr/bin/env python
"""The NMT study of Pappas et al. (2018) at a fixed budget: NMT vs NMT-tied vs NMT-joint over seeds and models.

Trains every (model, system, seed) run with ``train.sh`` on a data-bin made by a prepare script, to the same number of
updates, validating every ``--validate-every`` updates (the learning curves), then scores the last checkpoint with
``evaluate.sh`` (beam search on the test set, sacreBLEU, chrF, tokenized BLEU, |Θ|, frequency bins) and writes into
``--workdir``:

* ``study.md`` / ``study.json``: Table 2's layout per model (|Θ|, validation perplexity, BLEU with Δ and paired-
  bootstrap marks vs NMT and vs NMT-tied, chrF, tokenized BLEU; mean ± std over seeds), the updates each system
  needed to reach NMT-tied's final validation perplexity, and Fig. 3's frequency-bin table;
* ``learning_curves.png``: validation perplexity against updates and against training time, one line per run
  ("more sample efficient");
* ``bleu_vs_dj.png``: Fig. 2 (BLEU against dj), when there are NMT-joint runs.

It is resumable: a re-run reuses finished runs and evaluations, continues unfinished runs from their last checkpoint
(``--save-interval-updates`` = ``--validate-every``), and adds runs of other models, systems or seeds to the same
work directory; a larger ``--max-update`` continues finished runs to the new budget (each budget is evaluated
separately, ``eval-u<N>``). ``--jobs N`` trains N runs at once. A study continued on another machine (whose run
directories are not here) reports its earlier runs of ``--model`` from their committed ``study.json`` with
``--add-results``, beside the runs trained here: the same budget, prepared data (BPE codes and test set), model flags
and sacreBLEU only; Δ and the paired bootstrap are those each file recorded. Example (the CPU study of
examples/wmt17/README.md)::

    DATA=$(bash examples/wmt17/prepare-parallel.sh --train $CORPUS/train --valid $CORPUS/valid --test $CORPUS/test \\
           --src de --tgt en --bpe-ops 8000 --work /tmp/study/data | tail -1)
    python examples/wmt17/nmt_study.py --data-bin $DATA --workdir /tmp/study/runs --model lstm256 \\
        --systems nmt,nmt-tied,nmt-joint-512 --seeds 1 --max-update 1500
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Dict, List, Optional

from fairseq_joint.cli.common import fail, parser, run
from fairseq_joint.plots import pyplot
from fairseq_joint.text_files import read_text
from fairseq_joint_studies import fairseq_log
from fairseq_joint_studies.study_runs import run_logged

RECIPE_DIR = os.path.dirname(os.path.abspath(__file__))

#: model presets: fairseq-train flags (after train.sh's defaults: Adam 1e-3, clip-norm 5, 4,000 tokens per batch)
MODELS: Dict[str, List[str]] = {
    # the CPU model: 2+2-layer LSTM with attention, 256-d embeddings and states, dropout 0.2
    "lstm256": ["--arch", "joint_lstm", "--encoder-layers", "2", "--decoder-layers", "2",
                "--encoder-embed-dim", "256", "--decoder-embed-dim", "256", "--encoder-hidden-size", "256",
                "--decoder-hidden-size", "256", "--decoder-out-embed-dim", "256", "--dropout", "0.2"],
    # the paper's model (Sec. 4.2): joint_lstm_wmt17, 2+2 x 512, dropout 0.3
    "lstm512": ["--arch", "joint_lstm_wmt17"],
    # a small Transformer: 2+2 layers, 256-d, 4 heads, FFN 1024, dropout 0.2, inverse-sqrt warm-up
    "transformer256": ["--arch", "joint_transformer", "--encoder-layers", "2", "--decoder-layers", "2",
                       "--encoder-embed-dim", "256", "--decoder-embed-dim", "256", "--encoder-ffn-embed-dim", "1024",
                       "--decoder-ffn-embed-dim", "1024", "--encoder-attention-heads", "4",
                       "--decoder-attention-heads", "4", "--dropout", "0.2", "--adam-betas", "(0.9, 0.98)",
                       "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "400", "--warmup-init-lr", "1e-07"],
}
BASELINES = ("nmt", "nmt-tied")


def parse_args(argv):
    p = parser(__doc__)
    p.add_argument("--data-bin", required=True, help="a data-bin made by examples/wmt17/prepare-*.sh (has recipe.env)")
    p.add_argument("--workdir", required=True, help="where the runs, logs, evaluations, tables and plots go")
    p.add_argument("--model", default="lstm256",
                   help=f"model preset ({', '.join(MODELS)}) or a name for --model-flags")
    p.add_argument("--model-flags", help="fairseq-train model flags for a new --model name (one string)")
    p.add_argument("--systems", default="nmt,nmt-tied,nmt-joint-512",
                   help="comma-separated train.sh systems (nmt, nmt-tied, nmt-joint-DJ, eq6-bilinear, ...)")
    p.add_argument("--seeds", default="1", help="comma-separated seeds")
    p.add_argument("--max-update", type=int, required=True, help="the budget: updates per run, the same for all")
    p.add_argument("--validate-every", type=int, default=100, help="updates between validations (and checkpoints)")
    p.add_argument("--beam", type=int, default=5, help="beam size of the test-set translation")
    p.add_argument("--threads", type=int, default=2, help="torch threads per run (OMP_NUM_THREADS)")
    p.add_argument("--train-flags", default="", help="more fairseq-train flags for every run of this call (one string)")
    p.add_argument("--jobs", type=int, default=1, help="runs trained at the same time (each with --threads threads)")
    p.add_argument("--add-results", action="append", default=[], metavar="STUDY_JSON",
                   help="add the --model runs of a study.json written earlier at the same budget (e.g. results committed "
                   "from another machine, whose run directories are not here) to the tables and plots; its BPE "
                   "codes and test set must be this data-bin's (recipe.env's SHA-256 sums); a run of this work "
                   "directory replaces the same run of the file; repeatable")
    p.add_argument("--no-train", action="store_true", help="only evaluate and report the runs that have finished")
    p.add_argument("--no-eval", action="store_true", help="only train (evaluate later with another call)")
    a = p.parse_args(argv)
    a.systems = list(dict.fromkeys(s for s in a.systems.split(",") if s))  # a run listed twice is trained once
    try:
        a.seeds = list(dict.fromkeys(int(s) for s in a.seeds.split(",") if s))
    except ValueError:
        raise fail(f"--seeds {a.seeds!r}: give comma-separated integers, e.g. 1,2") from None
    if min(a.max_update, a.validate_every, a.threads, a.jobs) <= 0:
        raise fail("--max-update, --validate-every, --threads and --jobs must be positive")
    if not os.path.isfile(os.path.join(a.data_bin, "recipe.env")):
        raise fail(f"--data-bin {a.data_bin}: no recipe.env; give a data-bin made by examples/wmt17/prepare-*.sh")
    a.data_bin = os.path.abspath(a.data_bin)
    a.workdir = os.path.abspath(a.workdir)
    return a


# ---------------------------------------------------------------------------------------------- the study's runs
def model_flags(workdir: str, name: str, flags: Optional[str]) -> List[str]:
    """The flags of model ``name``: a preset, or ``--model-flags`` recorded the first time (later calls must agree)."""
    record = os.path.join(workdir, name, "model.json")
    if flags is not None:
        chosen = flags.split()
    elif name in MODELS:
        chosen = MODELS[name]
    elif os.path.isfile(record):
        with open(record) as f:
            chosen = json.load(f)
    else:
        raise fail(f"--model {name}: not a preset ({', '.join(MODELS)}); give its fairseq-train flags with --model-flags")
    if os.path.isfile(record):
        with open(record) as f:
            before = json.load(f)
        if before != chosen:
            raise fail(f"--model {name} was trained in {workdir} with other flags ({' '.join(before)}); "
                       "use another --model name or --workdir")
    else:
        os.makedirs(os.path.dirname(record), exist_ok=True)
        with open(record, "w") as f:
            json.dump(chosen, f)
    return chosen


def say(line: str) -> None:
    """One line of progress, written at once (runs trained side by side by ``--jobs`` print between each other)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run_dir(workdir: str, model: str, system: str, seed: int) -> str:
    return os.path.join(workdir, model, f"{system}-seed{seed}")


def read_log(log_path: str) -> str:
    """A run's training log ('' when there is none)."""
    if not os.path.isfile(log_path):
        return ""
    with open(log_path, encoding="utf-8", errors="replace") as f:
        return f.read()


def trained_updates(log_path: str) -> int:
    """The last update number a run's training log reached (0 when there is none)."""
    text = read_log(log_path)
    figures = [r for kind in ("train_inner", "train", "valid") for r in fairseq_log.records(text, kind)]
    return max((int(r["num_updates"]) for r in figures if "num_updates" in r), default=0)


def saved_updates(log_path: str) -> int:
    """The update of the last checkpoint a run's training log saved: where a re-run continues (0 when none)."""
    saved = fairseq_log.checkpoints(read_log(log_path))
    return saved[-1][2] if saved else 0


def train(a, model: str, flags: List[str], system: str, seed: int) -> None:
    """Train one run to ``--max-update`` updates with train.sh, continuing from its last checkpoint if any."""
    out = run_dir(a.workdir, model, system, seed)
    budget_ckpt = os.path.join(out, f"checkpoint_u{a.max_update}.pt")
    if os.path.isfile(budget_ckpt):
        say(f"  {model}/{system}/seed {seed}: trained to {a.max_update} updates (reused)")
        return
    os.makedirs(out, exist_ok=True)
    log = os.path.join(out, "train.log")
    cmd = ["bash", os.path.join(RECIPE_DIR, "train.sh"), a.data_bin, system, out, *flags,
           "--seed", str(seed), "--max-update", str(a.max_update), "--max-epoch", "0",
           "--validate-interval-updates", str(a.validate_every), "--save-interval-updates", str(a.validate_every),
           "--keep-interval-updates", "1", "--log-interval", str(max(1, a.validate_every // 2)),
           "--num-workers", "0", *a.train_flags.split()]
    done = saved_updates(log)  # (not the last update logged: a run stopped between checkpoints redoes those)
    say(f"  {model}/{system}/seed {seed}: training {'from update %d' % done if done else 'from scratch'} "
        f"to {a.max_update} ({a.threads} threads); log {log}")
    env = dict(run_env(a), MKL_NUM_THREADS=str(a.threads))
    start = time.time()
    run_logged(cmd, log, env, append=True, failure=lambda status: f"training {out} failed (exit {status}); see {log}, "
               "fix it and run the study again (it continues from the last checkpoint)")
    if trained_updates(log) < a.max_update:
        raise fail(f"{out} stopped at update {trained_updates(log)} of {a.max_update} (see {log}); run the study again")
    shutil.copyfile(os.path.join(out, "checkpoint_last.pt"), budget_ckpt)
    with open(os.path.join(out, "segments.tsv"), "a") as f:
        f.write(f"{done}\t{a.max_update}\t{time.time() - start:.1f}\n")


def run_env(a) -> dict:
    """The recipes' environment: ``a.threads`` threads, and this interpreter's fairseq-train / fairseq-generate
    first on PATH (a study run as ``.venv/bin/python nmt_study.py`` needs no activated virtualenv)."""
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    return dict(os.environ, PATH=path, OMP_NUM_THREADS=str(a.threads), PYTHON=sys.executable)


def evaluate(a, model: str, system: str, seed: int) -> Optional[str]:
    """evaluate.sh on the budget's checkpoint into ``eval-u<N>/`` (reused when there); None if not trained yet."""
    out = run_dir(a.workdir, model, system, seed)
    ckpt = f"checkpoint_u{a.max_update}.pt"
    if not os.path.isfile(os.path.join(out, ckpt)):
        return None
    dest = os.path.join(out, f"eval-u{a.max_update}")
    if os.path.isfile(os.path.join(dest, "scores.json")):
        return dest
    say(f"  {model}/{system}/seed {seed}: translating the test set (beam {a.beam})")
    log = os.path.join(out, f"eval-u{a.max_update}.log")
    run_logged(["bash", os.path.join(RECIPE_DIR, "evaluate.sh"), a.data_bin, out, "--beam", str(a.beam), "--checkpoint",
                ckpt, "--eval-dir", os.path.basename(dest)], log, run_env(a),
               failure=lambda status: f"evaluating {out} failed (exit {status}); see {log}")
    return dest


# ---------------------------------------------------------------------------------------------- what the runs show
def learning_curve(out: str) -> List[Dict[str, float]]:
    """[{updates, ppl, train_minutes}] of a run's validations; train_minutes sums fairseq's ``train_wall`` of the
    training steps up to that update (validation and checkpointing not counted)."""
    text = read_log(os.path.join(out, "train.log"))
    wall = {int(r["num_updates"]): r["train_wall"] for r in fairseq_log.records(text, "train_inner")
            if "num_updates" in r and "train_wall" in r}
    points = {int(r["num_updates"]): r["ppl"] for r in fairseq_log.records(text, "valid")
              if "num_updates" in r and "ppl" in r}
    curve, total, seen = [], 0.0, sorted(wall)
    for u in sorted(points):
        total = sum(wall[k] for k in seen if k <= u)
        curve.append({"updates": u, "ppl": points[u], "train_minutes": total / 60})
    return curve


def updates_to_reach(curve: List[Dict[str, float]], ppl: float) -> Optional[int]:
    return next((p["updates"] for p in curve if p["ppl"] <= ppl), None)


def bootstrap(a, hyp: str, base_hyp: str, ref: str, names) -> Dict[str, object]:
    """Paired bootstrap of sacreBLEU (fairseq-joint-score) between two systems' detokenized test translations."""
    from fairseq_joint.cli.score import paired_bootstrap

    refs = read_text(ref, "reference")
    return paired_bootstrap(read_text(base_hyp, "hypotheses"), read_text(hyp, "hypotheses"), refs,
                            lowercase=False, names=names)


def mean_std(values: List[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def collect(a) -> Dict[str, object]:
    """Every finished run of the work directory at this budget, with its scores, learning curve and frequency-bin
    word F1, then the runs of ``--add-results`` that the work directory does not have."""
    from frequency_bins import bin_scores, frequency_bins

    recipe = dict(line.rstrip("\n").split("=", 1) for line in open(os.path.join(a.data_bin, "recipe.env")) if "=" in line)
    word_bin = frequency_bins(read_text(recipe["RECIPE_TRAIN_TGT_TOK"], "training target"))
    refs = read_text(recipe["RECIPE_REF_TOK"], "tokenized reference")
    runs = []
    for model in sorted(os.listdir(a.workdir)):
        if not os.path.isdir(os.path.join(a.workdir, model)):
            continue
        for name in sorted(os.listdir(os.path.join(a.workdir, model))):
            m = re.fullmatch(r"(.+)-seed(\d+)", name)
            if not m:
                continue
            out = os.path.join(a.workdir, model, name)
            ev = os.path.join(out, f"eval-u{a.max_update}")
            if not os.path.isfile(os.path.join(ev, "scores.json")):
                continue
            with open(os.path.join(ev, "scores.json")) as f:
                scores = json.load(f)
            with open(os.path.join(ev, "params.json")) as f:
                params = json.load(f)
            curve = [p for p in learning_curve(out) if p["updates"] <= a.max_update]
            word_f1 = {b: s["f1"] for b, s in bin_scores(word_bin, read_text(os.path.join(ev, "hyp.tok"), "hypotheses"),
                                                         refs).items()}
            runs.append({"model": model, "system": m.group(1), "seed": int(m.group(2)), "dir": out, "eval": ev,
                         "scores": scores, "params": params, "curve": curve,
                         "valid_ppl": curve[-1]["ppl"] if curve else None, "word_f1": word_f1})
    # paired bootstrap against each baseline of the same model and seed
    for r in runs:
        r["vs"] = {}
        for base in BASELINES:
            if _order(base) >= _order(r["system"]):
                continue  # NMT has no Δ, NMT-tied one against NMT (Table 2)
            b = next((x for x in runs if (x["model"], x["system"], x["seed"]) == (r["model"], base, r["seed"])), None)
            if b is None:
                continue
            cache = os.path.join(r["eval"], f"bootstrap-vs-{base}.json")
            if not os.path.isfile(cache):
                sig = bootstrap(a, os.path.join(r["eval"], "hyp.detok"), os.path.join(b["eval"], "hyp.detok"),
                                recipe["RECIPE_REF_RAW"], (base, r["system"]))
                with open(cache, "w") as f:
                    json.dump(sig, f, indent=1)
            with open(cache) as f:
                r["vs"][base] = json.load(f)
    for path in a.add_results:
        runs += added_runs(a, path, recipe, runs)
    return {"recipe": recipe, "runs": runs}


def settings(a) -> Dict[str, object]:
    """What makes two runs of --model comparable besides the data, recorded in study.json and checked by
    --add-results: the model's flags (fixed per work directory by model.json; --train-flags and --beam belong to the
    call that trained or translated, which need not be the call that writes the report, so they are not recorded)."""
    return {"model_flags": a.flags}


def added_runs(a, path: str, recipe: Dict[str, str], runs: List[dict]) -> List[dict]:
    """The ``--model`` runs of an earlier study.json (``--add-results``) that ``runs`` does not have, marked
    ``added_from``; refused when it is of another budget, corpus, BPE or test set, model flags (where the file records
    them) or sacreBLEU signature, or when a run of the same model and system here has another size."""
    try:
        with open(path, encoding="utf-8") as f:
            earlier = json.load(f)
        theirs, their_runs = earlier["recipe"], earlier["runs"]
        if not isinstance(theirs, dict) or not isinstance(their_runs, list):
            raise TypeError("no recipe and runs")
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise fail(f"--add-results {path}: not a study.json written by nmt_study.py ({err})") from None
    if earlier.get("max_update") != a.max_update:
        raise fail(f"--add-results {path}: its runs were scored at {earlier.get('max_update')} updates, not "
                   f"--max-update {a.max_update}; add the study.json of the same budget")
    for key in ("RECIPE_SRC", "RECIPE_TGT", "RECIPE_BPE", "RECIPE_BPE_OPS", "RECIPE_CODES_SHA", "RECIPE_TEST_SHA"):
        if theirs.get(key) != recipe.get(key):
            raise fail(f"--add-results {path}: its {key} is {theirs.get(key)!r}, this --data-bin's is "
                       f"{recipe.get(key)!r}; add results of the same prepared data only")
    recorded = earlier.get("settings", {}).get(a.model, {})  # since --add-results exists; older files: taken as given
    for key, value in settings(a).items():
        if key in recorded and recorded[key] != value:
            raise fail(f"--add-results {path}: its {a.model} runs were made with {key} {recorded[key]!r}, this call's "
                       f"is {value!r}; add results made the same way only")
    out = []
    signatures = {x["scores"]["bleu_signature"] for x in runs}
    for r in their_runs:
        if r["model"] != a.model:
            continue
        if signatures and r["scores"]["bleu_signature"] not in signatures:
            raise fail(f"--add-results {path}: its BLEU signature {r['scores']['bleu_signature']} is not this study's "
                       f"({', '.join(sorted(signatures))}); score both with the same sacreBLEU")
        key = (r["model"], r["system"], r["seed"])
        here = next((x for x in runs if (x["model"], x["system"], x["seed"]) == key), None)
        same = next((x for x in runs if (x["model"], x["system"]) == key[:2]), None)
        if same is not None and same["params"]["total"] != r["params"]["total"]:
            raise fail(f"--add-results {path}: {key[0]}/{key[1]} has {r['params']['total']} parameters there and "
                       f"{same['params']['total']} here (other model flags); give this --model another name")
        if here is not None:
            say(f"  {key[0]}/{key[1]}/seed {key[2]}: left out of {path} (this work directory or an earlier "
                "--add-results has it)")
            continue
        out.append({**r, "added_from": path})
    # a Δ is kept only where the file's baseline run is the one the table shows
    for r in out:
        for base in list(r.get("vs", {})):
            if not any((x["model"], x["system"], x["seed"]) == (r["model"], base, r["seed"]) for x in out):
                del r["vs"][base]
    for r in runs:  # a run here cannot be bootstrapped against a baseline whose translations stayed elsewhere
        for x in out:
            if (x["model"], x["seed"]) == (r["model"], r["seed"]) and x["system"] in BASELINES and \
                    _order(x["system"]) < _order(r["system"]) and x["system"] not in r["vs"]:
                say(f"  {r['model']}/{r['system']}/seed {r['seed']}: no Δ vs {x['system']}, whose seed-{r['seed']} run "
                    f"is only in {path} (train it here for the paired bootstrap)")
    return out


def report(a, study) -> str:
    from results_table import human

    runs, recipe = study["runs"], study["recipe"]
    lines = [f"# NMT study: {recipe['RECIPE_SRC']}→{recipe['RECIPE_TGT']}, {recipe['RECIPE_BPE']} BPE "
             f"{recipe['RECIPE_BPE_OPS']}, {a.max_update} updates per run", ""]
    for model in sorted({r["model"] for r in runs}):
        group = [r for r in runs if r["model"] == model]
        systems = list(dict.fromkeys(r["system"] for r in sorted(group, key=lambda r: _order(r["system"]))))
        tied_by_seed = {r["seed"]: r["valid_ppl"] for r in group if r["system"] == "nmt-tied" and r["valid_ppl"]}
        tied_final = list(tied_by_seed.values())
        lines += [f"## {model}", "",
                  "| system | \\|Θ\\| | output layer | seeds | valid ppl | sacreBLEU | Δ vs NMT | Δ vs NMT-tied | chrF | "
                  "tok. BLEU | updates to NMT-tied's final ppl (same seed) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for system in systems:
            rs = sorted((r for r in group if r["system"] == system), key=lambda r: r["seed"])
            cells = [system, human(rs[0]["params"]["total"]), human(rs[0]["params"]["output_layer"]),
                     ",".join(str(r["seed"]) for r in rs), mean_std([r["valid_ppl"] for r in rs]),
                     mean_std([r["scores"]["bleu"] for r in rs])]
            for base in BASELINES:
                deltas = [r["vs"][base] for r in rs if base in r["vs"]]
                cells.append(" / ".join(f"{d['delta']:+.2f}{d['mark']}" for d in deltas) if deltas else "–")
            cells += [mean_std([r["scores"]["chrf"] for r in rs]), mean_std([r["scores"]["tok_bleu"] for r in rs])]
            if tied_final:  # each seed against NMT-tied of the same seed (their mean when that seed has none)
                reach = [updates_to_reach(r["curve"], tied_by_seed.get(r["seed"], statistics.mean(tied_final)))
                         for r in rs]
                cells.append(" / ".join("not reached" if u is None else str(u) for u in reach))
            else:
                cells.append("–")
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", "Δ: per seed, sacreBLEU difference with the paired bootstrap (1,000 resamples) against the "
                  "baseline of the same seed; * p < .05, † p < .01, ‡ p < .001. Mean ± std over seeds.", ""]
        bins = frequency_table(group)
        if bins:
            lines += ["Word F1 (%) by the training frequency of the reference words (Fig. 3; high / medium / low "
                      "thirds of the training vocabulary), seed-averaged:", "", bins, ""]
    sig = next((r["scores"]["bleu_signature"] for r in runs), "")
    lines += [f"sacreBLEU signature: `{sig}`.", ""]
    added = sorted({r["added_from"] for r in runs if "added_from" in r})
    for path in added:
        names = ", ".join(f"{r['model']}/{r['system']}/seed {r['seed']}" for r in runs if r.get("added_from") == path)
        lines += [f"Added from `{path}` (trained and scored earlier, same BPE codes and test set): {names}.", ""]
    return "\n".join(lines)


def _order(system: str):
    order = {"nmt": 0, "nmt-tied": 1}
    m = re.search(r"(\d+)$", system)
    return (order.get(system, 2), int(m.group(1)) if m else 0, system)


def frequency_table(group) -> str:
    """Fig. 3's word F1 per frequency bin, seed-averaged over the runs that have it (an added study.json older than
    the ``word_f1`` field does not)."""
    rows = ["| system | seeds | high | medium | low | unseen |", "|---|---|---|---|---|---|"]
    for system in dict.fromkeys(r["system"] for r in sorted(group, key=lambda r: _order(r["system"]))):
        rs = sorted((r for r in group if r["system"] == system and r.get("word_f1")), key=lambda r: r["seed"])
        if rs:
            rows.append(f"| {system} | {','.join(str(r['seed']) for r in rs)} | " + " | ".join(
                mean_std([r["word_f1"][b] for r in rs]) for b in ("high", "medium", "low", "unseen")) + " |")
    return "\n".join(rows) if len(rows) > 2 else ""


def plot_learning_curves(a, runs, path: str) -> None:
    plt = pyplot()
    models = sorted({r["model"] for r in runs})
    fig, axes = plt.subplots(len(models), 2, figsize=(11, 4 * len(models)), squeeze=False)
    # one colour per system in every panel and every study: nmt C0, nmt-tied C1, the others from C2 on (a model or a
    # study without nmt must not shift tied's colour onto joint)
    systems = [*BASELINES, *sorted({r["system"] for r in runs} - set(BASELINES), key=_order)]
    colors = {s: f"C{i}" for i, s in enumerate(systems)}
    for row, model in enumerate(models):
        group = sorted((r for r in runs if r["model"] == model), key=lambda r: (_order(r["system"]), r["seed"]))
        for col, x in enumerate(("updates", "train_minutes")):
            ax = axes[row][col]
            seeds = sorted({r["seed"] for r in group})
            for r in group:  # one line style per seed: solid, dashed, dotted, dash-dot
                curve = r["curve"]
                ax.plot([p[x] for p in curve], [p["ppl"] for p in curve], color=colors[r["system"]],
                        ls=("-", "--", ":", "-.")[seeds.index(r["seed"]) % 4],
                        label=f"{r['system']} (seed {r['seed']}{', added' if 'added_from' in r else ''})")
            ax.set_yscale("log")
            ax.set_xlabel("updates" if x == "updates" else "training minutes (fairseq's train_wall)")
            ax.set_ylabel("validation perplexity")
            ax.set_title(f"{model}: validation perplexity vs {'updates' if x == 'updates' else 'training time'}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    a = parse_args(argv)
    os.makedirs(a.workdir, exist_ok=True)
    flags = a.flags = model_flags(a.workdir, a.model, a.model_flags)
    if not a.no_train:
        print(f"training {len(a.systems) * len(a.seeds)} run(s) of {a.model} to {a.max_update} updates", flush=True)
        pool = ThreadPoolExecutor(max_workers=a.jobs)
        futures = [pool.submit(train, a, a.model, flags, s, seed) for seed in a.seeds for s in a.systems]
        wait(futures, return_when=FIRST_EXCEPTION)
        pool.shutdown(cancel_futures=True)  # after a failed run no other starts (those running finish first)
        for f in futures:
            if not f.cancelled():
                f.result()  # a failed run's refusal
    if a.no_eval:
        return 0
    for model in sorted(os.listdir(a.workdir)):
        for name in sorted(os.listdir(os.path.join(a.workdir, model))) if os.path.isdir(os.path.join(a.workdir, model)) else []:
            m = re.fullmatch(r"(.+)-seed(\d+)", name)
            if m:
                evaluate(a, model, m.group(1), int(m.group(2)))
    study = collect(a)
    if not study["runs"]:
        raise fail(f"no run of {a.workdir} has been trained to {a.max_update} updates yet")
    md = report(a, study)
    with open(os.path.join(a.workdir, "study.md"), "w", encoding="utf-8") as f:
        f.write(md)
    with open(os.path.join(a.workdir, "study.json"), "w", encoding="utf-8") as f:
        json.dump({"max_update": a.max_update, "settings": {a.model: settings(a)}, **study}, f, indent=1)
    plot_learning_curves(a, study["runs"], os.path.join(a.workdir, "learning_curves.png"))
    here = [r for r in study["runs"] if "added_from" not in r]  # Fig. 2 reads the runs' evaluation directories
    joint = [r for r in here if r["system"].startswith("nmt-joint-")]
    if joint:
        dirs = [r["dir"] for r in here if r["seed"] == joint[0]["seed"] and r["model"] == joint[0]["model"]]
        subprocess.run([sys.executable, os.path.join(RECIPE_DIR, "plot_bleu_vs_dj.py"), *dirs, "--eval-dir",
                        f"eval-u{a.max_update}", "--output", os.path.join(a.workdir, "bleu_vs_dj.png")], check=False)
    print(md)
    print(f"wrote {a.workdir}/study.md, study.json, learning_curves.png")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
