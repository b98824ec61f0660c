#!/usr/bin/env python
"""Multilingual GILE study (GILE Sec. 4.2, Tables 3, 6, 7 pattern) on debtags-multilingual.

For each low-resource language L of ``--languages``: the monolingual models trained on L alone (``han``: HAN with
the linear head, ``gile-han``: HAN with the GILE head) against the multilingual ones trained on en + L with one batch
of each language per update (Eq. 16): ``mhan-{enc,att,both}`` and ``gile-mhan-{enc,att,both}`` (which encoder parts
the languages share). Every model embeds words with the aligned vectors of ``--aligned-dir``/en-L (from
``fairseq-joint-word-vectors --aligned``) and the label descriptions (English) with the English ones; or, with
``--sentence-encoder DIR``, every language's texts and the descriptions with one frozen sentence encoder (e.g. the
multilingual student of ``fairseq-joint-distill-encoder``: the system names keep their heads and their en + L
pairing, ``*-both`` since the encoder is one).

Each run's best checkpoint (the epoch with the best seen AvgPr on L's validation documents) is scored on L's and
on en's validation documents over every label: AvgPr of the labels seen in L's training (``seen``), of the labels
only English training documents carry (``en_only``: what L can learn from English alone), of the labels no
language's training carries (``unseen``: scored from their descriptions), and the calibrated GZSL H (seen + unseen
ranked together, γ cross-calibrated). ``en_*`` columns: the same on English validation documents (for ``en + L ->
en``; ``--en-baseline`` trains the monolingual English models to compare with). Training time per update is read
from the logs (``s_per_update``) for the throughput target. Mean ± std over ``--seeds`` (``--ablations``: more
systems with their own ``--ablation-seeds``; the table's ``seeds`` column counts them). Resumable: a finished run
(same command) is reused. Writes ``results.json``, ``results.md`` and ``results.png`` into ``--workdir``.

Example (data binarized per language with ``fairseq-joint-preprocess-gile --lang``, vectors with
``fairseq-joint-word-vectors --aligned en=... L=... --output ALIGNED/en-L``)::

    python examples/gile/multilingual_study.py --data-bin BIN --aligned-dir ALIGNED --workdir W \\
        --languages pl,uk,pt_BR,ja --systems han,gile-han,mhan-both,gile-mhan-both --seeds 1,2,3
"""

import json
import logging
import os
import shlex
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Optional, Sequence

import numpy as np

from fairseq_joint.cli.common import fail, parser, run, setup_logging
from fairseq_joint.loaders import load_gile_model
from fairseq_joint.metrics import ranking_metric_sums, summarize
from fairseq_joint.plots import figure
from fairseq_joint_studies import fairseq_log
from fairseq_joint_studies.study_metrics import chance_level, cross_calibrated_gzsl, split_scores
from fairseq_joint_studies.study_reports import aggregate, cell
from fairseq_joint_studies.study_runs import USER_DIR, cached_evaluation, finished_log, run_logged

logger = logging.getLogger("multilingual_study")
BIN = os.path.dirname(sys.executable)
SYSTEMS = ("han", "gile-han", "mhan-enc", "mhan-att", "mhan-both", "gile-mhan-enc", "gile-mhan-att", "gile-mhan-both")
GROUPS = ("seen", "en_only", "unseen")


def system_flags(system: str):
    """(head, sharing flags, multilingual) of a system name."""
    head = "gile" if system.startswith("gile-") else "linear"
    sharing = system.rsplit("-", 1)[-1]
    flags = {"enc": ["--share-encoder"], "att": ["--share-attention"],
             "both": ["--share-encoder", "--share-attention"]}.get(sharing, [])
    return head, flags, "mhan" in system


def train_command(args, system, lang, seed, save_dir):
    head, share, multi = system_flags(system)
    languages = f"en,{lang}" if multi else lang
    if args.sentence_encoder:  # one sentence encoder for every language: nothing to share or align
        encoder = ["--encoder", "pretrained", "--pretrained-encoder", args.sentence_encoder]
    else:
        pair = os.path.join(args.aligned_dir, f"en-{lang if lang != 'en' else args.en_vectors_pair}")
        encoder = ["--encoder", "han", "--embed-dim", "100", "--encoder-dim", "100", "--attention-dim", "100",
                   "--embed-path", os.path.join(pair, "vectors.{lang}.txt"), *share]
    cmd = [os.path.join(BIN, "fairseq-train"), args.data_bin, "--user-dir", USER_DIR, "--task", "gile_classification",
           "--languages", languages, "--label-language", "en", "--arch", "gile_classifier", encoder[0], encoder[1],
           "--head", head, *encoder[2:],
           "--criterion", "multilabel_classification", "--optimizer", "adam", "--lr", str(args.lr),
           "--batch-size", str(args.batch_size), "--max-epoch", str(args.multi_epochs if multi or lang == "en" else args.mono_epochs),
           "--seed", str(seed), "--num-workers", "0", "--no-progress-bar", "--log-interval", "100",
           "--best-checkpoint-metric", f"{lang}_seen_avgpr", "--maximize-best-checkpoint-metric",
           "--no-epoch-checkpoints", "--no-last-checkpoints", "--save-dir", save_dir]
    if head == "gile":
        cmd += ["--joint-dim", args.joint_dim or ("auto" if args.sentence_encoder else "200"),
                *shlex.split(args.gile_options)]
    if multi and args.validate_each_pass:
        with open(os.path.join(args.data_bin, lang, "train.labels"), encoding="utf-8") as f:
            every = str(-(-sum(1 for _ in f) // args.batch_size))  # updates of one pass over L
        cmd += ["--validate-interval-updates", every, "--save-interval-updates", every, "--keep-interval-updates", "1"]
    return cmd


def label_groups(data_bin, lang, names):
    """Boolean masks over ``names``: seen in L's training, only in English training, in no language's training."""
    def train_labels(language):
        with open(os.path.join(data_bin, language, "labels.train.txt"), encoding="utf-8") as f:
            return {x.strip() for x in f if x.strip()}

    every = set().union(*(train_labels(d) for d in sorted(os.listdir(data_bin))
                          if os.path.isfile(os.path.join(data_bin, d, "labels.train.txt"))))
    own, english = train_labels(lang), train_labels("en")
    return {"seen": np.array([n in own for n in names]), "en_only": np.array([n in english - own for n in names]),
            "unseen": np.array([n not in every for n in names])}


def evaluate(save_dir, data_bin, cache):
    """Per language of the model: AvgPr of each label group and the calibrated GZSL H (seen + unseen)."""
    path = os.path.join(save_dir, "checkpoint_best.pt")
    return cached_evaluation(path, cache, lambda: score_languages(path, data_bin))


def score_languages(path, data_bin):
    """:func:`evaluate`'s figures, computed."""
    model, task = load_gile_model(path, data_bin)
    linear = not model.scores_unseen_labels
    scores, targets, label_set = split_scores(model, task, "valid", seen_only=linear)
    names = [n for n, i in zip(label_set.names, label_set.train_index.tolist()) if i >= 0 or not linear]
    offsets = task.dataset("valid").offsets
    stats = {}
    for pos, lang in enumerate(model.languages):
        rows = slice(int(offsets[pos]), int(offsets[pos + 1]))
        s, y = scores[rows], targets[rows]
        groups = label_groups(data_bin, lang, names)
        out = {"docs": int(y.shape[0])}
        for group, cols in groups.items():
            if cols.any() and y[:, cols].any():
                out[f"{group}_avgpr"] = summarize(ranking_metric_sums(s[:, cols], y[:, cols]))["avgpr"]
        if not linear:
            both = groups["seen"] | groups["unseen"]
            out["gzsl_h"] = cross_calibrated_gzsl(s[:, both], y[:, both], groups["seen"][both])["gzsl_h"]
        stats[lang] = out
    return stats


def chance(data_bin, lang):
    """AvgPr of random scores for each label group on L's validation documents."""
    from fairseq_joint.data.gile_files import read_label_file, read_label_lines

    names = list(read_label_file(os.path.join(data_bin, lang, "labels.tsv")))
    pos = {n: i for i, n in enumerate(names)}
    rows = read_label_lines(os.path.join(data_bin, lang, "valid.labels"))
    y = np.zeros((len(rows), len(names)), dtype=bool)
    for i, r in enumerate(rows):
        y[i, [pos[n] for n in r]] = True
    return {f"{g}_avgpr": chance_level(y[:, cols])["avgpr"] for g, cols in label_groups(data_bin, lang, names).items()
            if cols.any() and y[:, cols].any()}


def train_seconds(log_path):
    """(seconds of training, updates) from the epoch lines of a fairseq-train log."""
    with open(log_path) as f:
        epochs = fairseq_log.records(f.read(), "train")
    return sum(e["train_wall"] for e in epochs), int(epochs[-1]["num_updates"]) if epochs else 0


def one_run(args, system, lang, seed, env):
    name = f"{lang}/{system}/seed{seed}"
    save_dir = os.path.join(args.workdir, lang, system, f"seed{seed}")
    cmd = train_command(args, system, lang, seed, save_dir)
    log_path = os.path.join(save_dir, "train.log")
    if finished_log(cmd, log_path) is None or not os.path.isfile(os.path.join(save_dir, "checkpoint_best.pt")):
        if args.no_train:
            logger.info(f"{name}: not finished, left out of the tables (--no-train)")
            return None
        os.makedirs(save_dir, exist_ok=True)
        run_logged(cmd, log_path, env)
    else:
        logger.info(f"{name}: reusing the finished run")
    stats = evaluate(save_dir, args.data_bin, os.path.join(save_dir, "eval.json"))
    wall, updates = train_seconds(log_path)
    row = {"seed": seed, **stats[lang], "s_per_update": wall / max(updates, 1), "updates": updates}
    if "en" in stats and lang != "en":
        row.update({f"en_{k}": v for k, v in stats["en"].items()})
    logger.info(f"{name}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items() if isinstance(v, float)))
    return row


def plot(results, languages, systems, path, chance_rows, encoder="HAN"):
    """Seen and unseen AvgPr per language and system (mean ± std over seeds), random scores' level dashed."""
    with figure(path, 1, 2, figsize=(12, 4.2)) as (fig, axes):
        width = 0.8 / len(systems)
        for ax, key, title in ((axes[0], "seen_avgpr", "seen labels (L's training)"),
                               (axes[1], "unseen_avgpr", "labels no language saw in training")):
            for i, system in enumerate(systems):
                means = [results[lang].get(system, {}).get(key, np.nan) for lang in languages]
                stds = [results[lang].get(system, {}).get(key + "_std", 0.0) for lang in languages]
                ax.bar(np.arange(len(languages)) + i * width, means, width, yerr=stds, label=system, capsize=2)
            for i, lang in enumerate(languages):
                if key in chance_rows[lang]:
                    ax.hlines(chance_rows[lang][key], i - width / 2, i + width * (len(systems) - 0.5), colors="k",
                              linestyles="dashed", label="chance" if i == 0 else None)
            ax.set_xticks(np.arange(len(languages)) + width * (len(systems) - 1) / 2, languages)
            ax.set_ylabel("AvgPr (%)")
            ax.set_title(title)
        axes[1].legend(fontsize=8)
        fig.suptitle(f"debtags-multilingual valid: monolingual (L) vs multilingual (en + L), encoder: {encoder}")


def write_table(results, languages, systems, path, chance_rows, args):
    cols = [("seen_avgpr", "L seen"), ("en_only_avgpr", "L en-only"), ("unseen_avgpr", "L unseen"),
            ("gzsl_h", "L GZSL H (cal.)"), ("en_seen_avgpr", "en seen"), ("en_unseen_avgpr", "en unseen"),
            ("s_per_update", "s / update")]
    lines = ["| L | system | seeds | " + " | ".join(c for _, c in cols) + " |", "|---" * (len(cols) + 3) + "|"]
    for lang in languages:
        lines.append(f"| {lang} | chance | – | " + " | ".join(cell(chance_rows[lang], k) for k, _ in cols) + " |")
        for system in systems + (["en-" + s for s in args.en_baseline] if lang == languages[0] else []):
            if system in results[lang]:
                stats = results[lang][system]
                lines.append(f"| {lang} | {system} | {len(stats.get('runs', [stats]))} | "
                             + " | ".join(cell(stats, k) for k, _ in cols) + " |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    setup_logging()
    p = parser(__doc__, prog="multilingual_study.py")
    p.add_argument("--data-bin", required=True, help="DIR with one fairseq-joint-preprocess-gile --lang directory per "
                   "language (en and each of --languages)")
    p.add_argument("--aligned-dir", help="DIR/en-L/vectors.{en,L}.txt: aligned vectors per pair (the HAN encoders)")
    p.add_argument("--sentence-encoder", help="encode every language with this sentence-transformers model "
                   "(--encoder pretrained; e.g. made by fairseq-joint-distill-encoder) instead of HAN over "
                   "--aligned-dir's vectors: one encoder for all languages, so of the en + L systems only *-both")
    p.add_argument("--workdir", required=True)
    p.add_argument("--languages", default="pl,uk,pt_BR,ja", help="the low-resource languages L")
    p.add_argument("--systems", default="han,gile-han,mhan-both,gile-mhan-both",
                   help=f"comma-separated, of {', '.join(SYSTEMS)}")
    p.add_argument("--en-baseline", default="", help="monolingual English systems to train too (e.g. han,gile-han), "
                   "with the English vectors of --en-vectors-pair")
    p.add_argument("--en-vectors-pair", default="pl", help="whose en-L English vectors the English baseline uses")
    p.add_argument("--seeds", default="1", help="comma-separated seeds")
    p.add_argument("--ablations", default="", help="more systems (e.g. the sharing ablations gile-mhan-enc,"
                   "gile-mhan-att) trained with --ablation-seeds only; the table's seeds column says how many")
    p.add_argument("--ablation-seeds", default="", help="comma-separated seeds of --ablations (default: --seeds)")
    p.add_argument("--mono-epochs", type=int, default=30, help="epochs over L alone")
    p.add_argument("--multi-epochs", type=int, default=3, help="epochs of en + L (passes over English, L cycled), and "
                   "of the English baseline")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--joint-dim", default="", help="d_j of the GILE head (default 200 with HAN, auto with "
                   "--sentence-encoder)")
    p.add_argument("--gile-options", default="", help="more fairseq-train options for the GILE systems, e.g. "
                   "'--similarity-init --joint-activation tanh' (the zero-shot prior of the English study); give "
                   "them another --workdir, since a run of another command replaces the one there")
    p.add_argument("--validate-each-pass", action="store_true", help="validate the en + L runs (and keep their best "
                   "checkpoint) after every pass over L, as often as the runs on L alone, rather than after every "
                   "pass over English (about ten passes over L): the best epoch is then chosen among as many")
    p.add_argument("--no-train", action="store_true", help="train nothing: the tables from the runs that finished "
                   "(the seeds column counts them); the others are logged as left out")
    p.add_argument("--threads", type=int, default=1, help="OMP threads per run")
    p.add_argument("--jobs", type=int, default=1, help="runs at the same time")
    args = p.parse_args(argv)
    languages = [x for x in args.languages.split(",") if x]
    systems = [x for x in args.systems.split(",") if x]
    args.en_baseline = [x for x in args.en_baseline.split(",") if x]
    seeds = [int(x) for x in args.seeds.split(",")]
    ablations = [x for x in args.ablations.split(",") if x and x not in systems]
    ablation_seeds = [int(x) for x in (args.ablation_seeds or args.seeds).split(",")]
    for s in systems + ablations + args.en_baseline:
        if s not in SYSTEMS:
            raise fail(f"--systems: unknown system {s!r}; choose from {', '.join(SYSTEMS)}")
        if args.sentence_encoder and s.endswith(("-enc", "-att")):
            raise fail(f"--systems {s}: with --sentence-encoder one encoder serves every language (nothing to share "
                       "part of): use the *-both systems")
    if bool(args.sentence_encoder) == bool(args.aligned_dir):
        raise fail("give --aligned-dir (HAN over aligned word vectors) or --sentence-encoder (one sentence encoder), "
                   "one of the two")
    for lang in languages + ["en"]:
        if not os.path.isfile(os.path.join(args.data_bin, lang, "dict.txt")):
            raise fail(f"--data-bin {args.data_bin}: no {lang}/ directory; binarize it with fairseq-joint-preprocess-gile "
                       f"--lang {lang}")
    os.makedirs(args.workdir, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    jobs = [(s, lang, seed) for seed in seeds for lang in languages for s in systems]
    jobs += [("en-" + s, "en", seed) for seed in seeds for s in args.en_baseline]
    jobs += [(s, lang, seed) for seed in ablation_seeds for lang in languages for s in ablations]

    def work(job):
        system, lang, seed = job
        return job, one_run(args, system.replace("en-", "", 1), lang, seed, env)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        done = [(job, row) for job, row in pool.map(work, jobs) if row is not None]
    results = {lang: {} for lang in languages + ["en"]}
    for (system, lang, _), row in done:
        results[lang].setdefault(system, []).append(row)
    results = {lang: {s: aggregate(rows) for s, rows in by.items()} for lang, by in results.items()}
    for s in list(results["en"]):  # the English baseline's figures, in the en_* columns of the table
        results[languages[0]][s] = {f"en_{k}" if not k.startswith(("s_per", "updates", "runs")) else k: v
                                    for k, v in results["en"][s].items()}
    chance_rows = {lang: chance(args.data_bin, lang) for lang in languages}
    shown = [s for s in SYSTEMS if s in systems + ablations]
    table = write_table(results, languages, shown, os.path.join(args.workdir, "results.md"), chance_rows, args)
    if shown:  # (--systems "" with --en-baseline trains the English models only: a table, no plot)
        encoder = os.path.basename(os.path.normpath(args.sentence_encoder)) if args.sentence_encoder else "HAN"
        if "--finetune-encoder" in shlex.split(args.gile_options):
            encoder += " (fine-tuned)"
        plot(results, languages, shown, os.path.join(args.workdir, "results.png"), chance_rows, encoder)
    with open(os.path.join(args.workdir, "results.json"), "w") as f:
        json.dump({"args": {k: v for k, v in vars(args).items()}, "chance": chance_rows, "results": results}, f, indent=1)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
