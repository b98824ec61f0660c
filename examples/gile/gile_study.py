#!/usr/bin/env python
"""Seen / unseen label study on a debtags-style corpus (GILE Table 2 pattern): WAN encoder with the
``linear``, ``bil_n16`` and ``gile`` heads (or any system: a head with model flags, e.g. over a pretrained sentence
encoder), trained by fairseq-train, scored on the validation split; with ``--baselines``, TF-IDF + logistic
regression, the sentence encoder's plain cosine and the two stacked (``two_tools``: LR's probability for the seen
labels, the cosine for the unseen ones; ``two_tools_mean``: the seen ones by their mean) on the same documents and
labels.

Besides the seen-only and unseen-only rankings, every system that scores unseen labels is evaluated in the
generalized zero-shot setting (GZSL: all labels ranked together; the seen and unseen AvgPr and their harmonic mean
H), at γ = 0 and with calibrated stacking, γ chosen on one half of the validation documents and applied to the
other (two folds, pooled: γ is never picked on the documents it is scored on).

Preprocesses ``--data`` (a folder with train.jsonl, valid.jsonl, labels.tsv) with
``fairseq-joint-preprocess-gile``, trains one model per head for ``--max-epoch`` epochs (same seed, same
settings), and reports the last epoch's validation metrics (``--select best``: the epoch with the best
validation seen AvgPr) with the
chance level of random scores on the same documents and labels. Writes ``results.json``,
``results.md`` (a markdown table) and ``results.png`` into ``--workdir``. Relative paths (``--data``,
``--workdir``, ``--labels``, file flags of ``--heads``) are relative to the directory it is run from.

Example (about 15 min on 2 CPU threads)::

    python examples/gile/gile_study.py --data /path/to/debtags --workdir /tmp/gile_study
"""

import json
import logging
import os
import re
import sys
import time
from typing import Optional, Sequence

import numpy as np

from fairseq_joint.cli.common import fail, parser, run, setup_logging
from fairseq_joint.data.gile_files import read_label_file, read_label_lines
from fairseq_joint.loaders import load_gile_model
from fairseq_joint.metrics import gzsl_summary, ranking_metric_sums, summarize
from fairseq_joint.modules.lexical_encoder import tokens_with_word_characters
from fairseq_joint.plots import figure
from fairseq_joint_studies import fairseq_log
from fairseq_joint_studies.study_metrics import chance_level, cross_calibrated_gzsl, split_scores
from fairseq_joint_studies.study_reports import aggregate, cell
from fairseq_joint_studies.study_runs import USER_DIR, cached_evaluation, finished_log, run_logged

logger = logging.getLogger("gile_study")
BIN = os.path.dirname(sys.executable)
COLUMNS = [("seen", "rl"), ("seen", "avgpr"), ("seen", "oneerr"), ("seen", "f1"), ("unseen", "rl"),
           ("unseen", "avgpr"), ("unseen", "oneerr"), ("gzsl", "h"), ("cal_gzsl", "seen_avgpr"),
           ("cal_gzsl", "unseen_avgpr"), ("cal_gzsl", "h")]


def gzsl_figures(scores, targets, seen):
    """GZSL H at γ = 0 and the cross-calibrated figures (``cal_gzsl_*``, ``gamma``) of a score matrix."""
    out = {"gzsl_h": gzsl_summary(scores, targets, seen)["gzsl_h"]}
    out.update({("cal_" + k if k != "gamma" else k): v for k, v in cross_calibrated_gzsl(scores, targets, seen).items()})
    return out


def matrix_stats(scores, targets, seen, zero_shot=True):
    """Seen / unseen ranking metrics (and GZSL) of a score matrix over all labels, in %."""
    out = {}
    for side, cols in (("seen", seen), ("unseen", ~seen)):
        if side == "unseen" and not zero_shot:
            continue
        for k, v in summarize(ranking_metric_sums(scores[:, cols], targets[:, cols])).items():
            out[f"{side}_{k}"] = v
    if zero_shot:
        out.update(gzsl_figures(scores, targets, seen))
    return out


def valid_matrix(bin_dir):
    """Targets (documents x labels of labels.tsv), the seen mask and the label names."""
    names = list(read_label_file(os.path.join(bin_dir, "labels.tsv")))
    with open(os.path.join(bin_dir, "labels.train.txt")) as f:
        train = {x.strip() for x in f if x.strip()}
    pos = {n: i for i, n in enumerate(names)}
    rows = read_label_lines(os.path.join(bin_dir, "valid.labels"))
    y = np.zeros((len(rows), len(names)), dtype=bool)
    for i, r in enumerate(rows):
        y[i, [pos[n] for n in r]] = True
    return y, np.array([n in train for n in names]), names


def baseline_scores(name, data, bin_dir, encoder_path, tokenizer: str = "words"):
    """The (documents x labels of ``bin_dir``) score matrix of a single-tool baseline: TF-IDF (1-2 grams; words split
    by ``tokenizer``, as the lexical channel's: ``words`` scikit-learn's, ``gile`` GILE's) + one-vs-rest logistic
    regression's probability (seen labels only; 0 elsewhere) or the sentence encoder's cosine of text and description
    (every label, no training)."""
    y, seen, names = valid_matrix(bin_dir)
    if name == "cosine":
        from fairseq_joint.data.gile_files import read_raw_texts
        from fairseq_joint.modules.sentence_encoder import EmbeddingCache, PretrainedSentenceEncoder

        encoder = PretrainedSentenceEncoder(encoder_path)
        cache = EmbeddingCache(bin_dir)
        texts = cache.get(encoder, "valid", read_raw_texts(bin_dir, "valid", len(y)))
        descriptions = read_label_file(os.path.join(bin_dir, "labels.tsv"))
        labels = cache.get(encoder, "eval-labels", [descriptions[n] for n in names])
        return (texts @ labels.T).double().numpy()
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    valid = [json.loads(line)["text"] for line in open(os.path.join(data, "valid.jsonl"), encoding="utf-8")]
    train_rows = [json.loads(line) for line in open(os.path.join(data, "train.jsonl"), encoding="utf-8")]
    pos = {n: i for i, n in enumerate(names)}
    ytrain = np.zeros((len(train_rows), len(names)), dtype=bool)
    for i, r in enumerate(train_rows):
        ytrain[i, [pos[n] for n in r["labels"] if n in pos]] = True
    cols = [c for c in np.flatnonzero(seen) if ytrain[:, c].any()]
    words = {} if tokenizer == "words" else dict(tokenizer=tokens_with_word_characters, token_pattern=None,
                                                 lowercase=False)
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, **words)
    x = vectorizer.fit_transform(r["text"] for r in train_rows)
    clf = OneVsRestClassifier(LogisticRegression(C=10.0, solver="liblinear"), n_jobs=1).fit(x, ytrain[:, cols])
    scores = np.zeros(y.shape)
    scores[:, cols] = clf.predict_proba(vectorizer.transform(valid))  # σ of the decision function: ranks alike
    return scores


def two_tools(lr_probabilities, cosine, seen, mean: bool = False):
    """The two tools a practitioner stacks, as one score matrix: ``s_ij = p_LR(j | x_i)`` for a label j seen in
    training (``mean``: ``(p_LR(j | x_i) + cos(x_i, d_j)) / 2``) and ``cos(x_i, d_j)`` for an unseen one; the one γ
    between the two groups is calibrated on these scores as for every system (:func:`gzsl_figures`)."""
    lr, cosine = np.asarray(lr_probabilities, dtype=np.float64), np.asarray(cosine, dtype=np.float64)
    seen = np.asarray(seen, dtype=bool)
    if lr.shape != cosine.shape or lr.shape[1:] != seen.shape:
        raise ValueError(f"the two tools' matrices {lr.shape}, {cosine.shape} and the seen mask {seen.shape} disagree")
    scores = cosine.copy()
    scores[:, seen] = (lr[:, seen] + cosine[:, seen]) / 2 if mean else lr[:, seen]
    return scores


#: each baseline -> the single tools' score matrices it is made of (each tool runs once, whichever baselines use it)
BASELINE_PARTS = {"tfidf_lr": ("tfidf_lr",), "cosine": ("cosine",), "two_tools": ("tfidf_lr", "cosine"),
                  "two_tools_mean": ("tfidf_lr", "cosine")}
BASELINES = tuple(BASELINE_PARTS)


def baseline_stats(name, matrices, targets, seen):
    """The figures of baseline ``name`` from the single tools' score matrices ``matrices`` (each computed once)."""
    if name == "tfidf_lr":
        return matrix_stats(matrices["tfidf_lr"], targets, seen, zero_shot=False)
    if name == "cosine":
        return matrix_stats(matrices["cosine"], targets, seen)
    return matrix_stats(two_tools(matrices["tfidf_lr"], matrices["cosine"], seen, mean=name == "two_tools_mean"),
                        targets, seen)


def display(system):
    """'gile+embed-path=/x/vectors.txt+similarity-init' -> 'WAN + gile + --embed-path vectors.txt + --similarity-init';
    'gile+encoder=pretrained+pretrained-encoder=/x/model' -> 'pretrained model + gile'."""
    if system in BASELINES:
        return {"tfidf_lr": "TF-IDF + logistic regression (baseline)",
                "cosine": "sentence encoder cosine, no training (baseline)",
                "two_tools": "two tools: LR probability for seen labels, cosine for unseen (baseline)",
                "two_tools_mean": "two tools: (LR + cosine) / 2 for seen labels, cosine for unseen (baseline)"}[system]
    head, *flags = system.split("+")
    shown, encoder, model = [head], "WAN", ""
    for flag in flags:
        name, _, value = flag.partition("=")
        if name == "encoder":
            encoder = value.upper() if value not in ("pretrained", "hybrid") else value
        elif name == "pretrained-encoder":
            model = os.path.basename(os.path.normpath(value))
        else:
            shown.append(f"--{name}" + (f" {os.path.basename(value)}" if value else ""))
    if model:
        encoder = f"{model} + TF-IDF (hybrid)" if encoder == "hybrid" else model
    return " + ".join([encoder] + shown)


def zero_shot_stats(save_dir, bin_dir, select, targets, seen):
    """GZSL figures of the selected checkpoint (best or last) on the validation documents, from its score matrix."""
    path = os.path.join(save_dir, "checkpoint_best.pt" if select == "best" else "checkpoint_last.pt")

    def evaluate():
        model, task = load_gile_model(path, bin_dir)
        if not model.scores_unseen_labels:
            return {}
        scores, gold, label_set = split_scores(model, task, "valid")
        if gold.shape != targets.shape or not np.array_equal(gold, targets):
            raise fail(f"{path}: its validation label set differs from {bin_dir}/labels.tsv; use another --workdir")
        return gzsl_figures(scores, gold, seen)

    return cached_evaluation(path, os.path.join(save_dir, "zero_shot_stats.json"), evaluate)


def valid_stats(log_path, select="last"):
    """The validation metrics of the last epoch, or (``select="best"``) of the epoch with the best seen AvgPr."""
    with open(log_path) as f:
        epochs = fairseq_log.records(f.read(), "valid")
    if not epochs:
        raise fail(f"no validation line in {log_path}: the training run logged no validation; see its end")
    if select == "best":
        return max(epochs, key=lambda s: s.get("seen_avgpr", float("-inf")))
    return epochs[-1]


def chance(bin_dir):
    y, seen, _ = valid_matrix(bin_dir)
    return {"seen": chance_level(y[:, seen]), "unseen": chance_level(y[:, ~seen]),
            "num_seen": int(seen.sum()), "num_unseen": int((~seen).sum())}


def main(argv: Optional[Sequence[str]] = None) -> int:
    setup_logging()
    p = parser(__doc__)
    p.add_argument("--data", required=True, help="folder with train.jsonl, valid.jsonl, labels.tsv")
    p.add_argument("--workdir", required=True, help="where binaries, checkpoints, logs and results go")
    p.add_argument("--heads", default="linear,bil_n16,gile",
                   help="comma-separated systems: a head, optionally with model flags after '+', e.g. "
                   "gile+similarity-init or gile+joint-activation=tanh (= --joint-activation tanh); "
                   "+encoder=hybrid+pretrained-encoder=DIR preprocesses with --lexical-features")
    p.add_argument("--max-epoch", type=int, default=4, help="training epochs per model")
    p.add_argument("--batch-size", type=int, default=16, help="documents per batch (the paper: 16)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    p.add_argument("--threshold", type=float, default=0.2, help="micro-F1 threshold")
    p.add_argument("--threads", type=int, default=1, help="OMP threads per training run")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--seeds", default=None,
                   help="comma-separated seeds (overrides --seed): train every system once per seed and report "
                   "the mean and standard deviation over the seeds")
    p.add_argument("--labels", default=None,
                   help="label<TAB>description file (default: DATA/labels.tsv), e.g. from fairseq-joint-label-text")
    p.add_argument("--select", choices=("last", "best"), default="last",
                   help="report each system's last epoch, or its epoch with the best validation seen AvgPr (the "
                   "paper's model selection; without a separate test split this flatters every system alike)")
    p.add_argument("--baselines", default="",
                   help="comma-separated baselines scored on the same documents and labels: tfidf_lr (TF-IDF 1-2 "
                   "grams + one-vs-rest logistic regression, seen labels), cosine (the cosine of the "
                   "--pretrained-encoder's text and description vectors, no training), two_tools (LR's probability "
                   "for the seen labels, the cosine for the unseen ones, one γ between them) and two_tools_mean "
                   "(the seen labels by (LR + cosine) / 2); each tool is run once for all")
    p.add_argument("--pretrained-encoder", default=None, help="sentence-transformers model directory of the cosine "
                   "baseline")
    p.add_argument("--lexical-features", type=int, default=2 ** 15,
                   help="TF-IDF features fitted on the training texts at preprocessing when a system uses "
                   "encoder=hybrid (fairseq-joint-preprocess-gile --lexical-features)")
    p.add_argument("--rerun", action="store_true",
                   help="train every system again (default: reuse a finished run of the same command in --workdir)")
    args = p.parse_args(argv)
    try:
        seeds = [int(x) for x in (args.seeds or str(args.seed)).split(",")]
    except ValueError:
        raise fail(f"--seeds must be comma-separated integers, got {args.seeds!r}") from None
    baselines = [b for b in args.baselines.split(",") if b]
    for b in baselines:
        if b not in BASELINES:
            raise fail(f"--baselines: unknown baseline {b!r}; choose from {', '.join(BASELINES)}")
    for b in baselines:
        if "cosine" in BASELINE_PARTS[b] and not args.pretrained_encoder:
            raise fail(f"--baselines {b} needs --pretrained-encoder PATH (a sentence-transformers model directory)")
    label_file = args.labels or os.path.join(args.data, "labels.tsv")
    if not os.path.isfile(label_file):
        raise fail(f"label file {label_file} does not exist: give --labels or put labels.tsv in --data")
    os.makedirs(args.workdir, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    bin_dir = os.path.join(args.workdir, "bin")
    if os.path.isfile(os.path.join(bin_dir, "labels.tsv")):
        with open(label_file, encoding="utf-8") as a, open(os.path.join(bin_dir, "labels.tsv"), encoding="utf-8") as b:
            if a.read() != b.read():
                raise fail(f"{bin_dir} was preprocessed with other label texts than {label_file}: "
                                 "use another --workdir")
    hybrid = any("+encoder=hybrid" in system for system in args.heads.split(","))
    if not os.path.isfile(os.path.join(bin_dir, "valid.labels")) or (
            hybrid and not os.path.isfile(os.path.join(bin_dir, "lexical.json"))):  # an earlier study's, without it
        lexical = ["--lexical-features", str(args.lexical_features)] if hybrid else []
        run_logged([sys.executable, "-m", "fairseq_joint.cli.preprocess_gile",
                    "--train", os.path.join(args.data, "train.jsonl"), "--valid", os.path.join(args.data, "valid.jsonl"),
                    "--labels", label_file, "--destdir", bin_dir, *lexical], os.path.join(args.workdir, "preprocess.log"),
                   env)
    results = {"chance": chance(bin_dir), "heads": {}, "settings": vars(args)}
    targets, seen_mask, _ = valid_matrix(bin_dir)
    matrices, tool_minutes = {}, {}
    for name in baselines:
        for tool in BASELINE_PARTS[name]:
            if tool not in matrices:
                t0 = time.time()
                matrices[tool] = baseline_scores(tool, args.data, bin_dir, args.pretrained_encoder)
                tool_minutes[tool] = (time.time() - t0) / 60
        stats = baseline_stats(name, matrices, targets, seen_mask)
        stats["train_minutes"] = sum(tool_minutes[tool] for tool in BASELINE_PARTS[name])
        results["heads"][name] = stats
        logger.info(f"{name}: " + ", ".join(f"{a}_{b} {stats.get(f'{a}_{b}', float('nan')):.2f}" for a, b in COLUMNS))
    for system in [h for h in args.heads.split(",") if h]:
        head, *flags = system.split("+")
        extra = [part for flag in flags for part in ("--" + flag).split("=", 1)]
        runs = []
        for seed in seeds:
            t0 = time.time()
            safe = re.sub(r"[^\w+=.-]", "_", system)  # a file name (flags may hold paths)
            if len(seeds) > 1:
                safe += f"_seed{seed}"
            log = os.path.join(args.workdir, f"train_{safe}.log")
            cmd = [os.path.join(BIN, "fairseq-train"), bin_dir, "--user-dir", USER_DIR, "--task",
                   "gile_classification", "--arch", "gile_classifier", "--encoder", "wan", "--head", head,
                   "--criterion", "multilabel_classification", "--threshold", str(args.threshold), "--optimizer", "adam",
                   "--lr", str(args.lr), "--batch-size", str(args.batch_size), "--max-epoch", str(args.max_epoch),
                   "--seed", str(seed), "--num-workers", "0", "--no-progress-bar", "--log-interval", "200",
                   "--no-epoch-checkpoints", "--best-checkpoint-metric", "seen_avgpr",
                   "--maximize-best-checkpoint-metric", "--save-dir", os.path.join(args.workdir, f"ckpt_{safe}"), *extra]
            minutes = None if args.rerun else finished_log(cmd, log)
            if minutes is None:
                run_logged(cmd, log, env)
                minutes = (time.time() - t0) / 60
            else:
                logger.info(f"{system} (seed {seed}): reusing the finished run in {log} (--rerun trains again)")
            stats = valid_stats(log, args.select)
            stats.update(zero_shot_stats(os.path.join(args.workdir, f"ckpt_{safe}"), bin_dir, args.select, targets,
                                         seen_mask))
            stats["train_minutes"] = minutes
            stats["seed"] = seed
            runs.append(stats)
            logger.info(f"{system} (seed {seed}): "
                        + ", ".join(f"{a}_{b} {stats.get(f'{a}_{b}', float('nan')):.2f}" for a, b in COLUMNS))
        results["heads"][system] = aggregate(runs)
    with open(os.path.join(args.workdir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    c = results["chance"]
    lines = ["| system | " + " | ".join(f"{a} {b}".replace("cal_gzsl", "γ-cal. gzsl").replace("gzsl h", "gzsl H")
                                          for a, b in COLUMNS) + " | γ | epoch | minutes |",
             "|---" * (len(COLUMNS) + 4) + "|"]
    for head, stats in results["heads"].items():
        cells = [cell(stats, f"{a}_{b}") for a, b in COLUMNS]
        epoch = "/".join(str(int(r["epoch"])) for r in stats.get("runs", [stats]) if "epoch" in r) or "–"
        lines.append(f"| {display(head)} | " + " | ".join(cells) + f" | {cell(stats, 'gamma')} | {epoch} | "
                     f"{stats['train_minutes']:.1f} |")
    cells = [f"{c[a][b]:.2f}" if a in c and b in c[a] else "–" for a, b in COLUMNS]
    lines.append("| random scores (chance) | " + " | ".join(cells) + " | | | |")
    table = "\n".join(lines)
    with open(os.path.join(args.workdir, "results.md"), "w") as f:
        f.write(table + "\n")
    print(table)

    names = [display(h) for h in results["heads"]] + ["random scores (chance)"]
    panels = (("seen_avgpr", "seen labels: AvgPr (%)"), ("unseen_avgpr", "unseen labels: AvgPr (%)"),
              ("cal_gzsl_h", "all labels (GZSL, γ calibrated): H (%)"))
    with figure(os.path.join(args.workdir, "results.png"), 1, 3, figsize=(16, 1.2 + 0.45 * len(names)), sharey=True,
                dpi=100) as (fig, axes):
        for ax, (key, title) in zip(axes, panels):
            side, _, metric = key.partition("_")
            chance_value = c[side][metric] if side in c and metric in c[side] else None
            vals = [results["heads"][h].get(key) for h in results["heads"]] + [chance_value]
            y = list(range(len(names)))[::-1]
            errs = [results["heads"][h].get(f"{key}_std", 0.0) for h in results["heads"]] + [0.0]
            ax.barh(y, [v or 0.0 for v in vals], xerr=errs, color=["C0"] * (len(names) - 1) + ["grey"])
            for yi, v, e in zip(y, vals, errs):
                ax.text((v or 0.0) + e, yi, f" {v:.1f}" if v is not None else " n/a", va="center", fontsize=8)
            ax.set_xlim(0, 1.25 * max((v or 0.0) + e for v, e in zip(vals, errs)) + 1e-9)
            ax.set_yticks(y, names, fontsize=8)
            ax.set_title(title, fontsize=9)
        if len(seeds) > 1:
            fig.suptitle(f"mean ± std over seeds {', '.join(map(str, seeds))}", fontsize=9)
    logger.info(f"wrote {args.workdir}/results.json, results.md, results.png")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
