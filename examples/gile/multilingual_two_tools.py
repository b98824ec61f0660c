#!/usr/bin/env python
"""One multilingual GILE model against each language's two tools, per language, on its validation documents.

For every language L of the checkpoints' ``--languages`` (examples/gile/multilingual.sh makes them), over the labels
seen in L's own training (``seen``) and the labels no language's training carries (``unseen``, scored from their
English descriptions; the labels only other languages' training carries are left out of both groups, since L's own
tools cannot know them):

* **the model**: seen and unseen AvgPr of each checkpoint (its head's logits, with ``--cosine-prior λ`` for each λ of
  ``--lambdas``: the prior is applied at evaluation, the checkpoints are the same), and the GZSL H of the two groups
  ranked together with γ cross-calibrated (``fairseq_joint_studies.study_metrics.cross_calibrated_gzsl``); a model
  over a sentence encoder also scored without the texts' language (the mean of its languages' classification units,
  as ``fairseq-joint-predict-labels`` without ``--lang``);
* **L's TF-IDF + logistic regression**, trained on L's own training documents (word uni- and bigrams split as the
  model's lexical channel splits them, ``--tokenizer``): seen AvgPr;
* **the encoder's cosine** of text and description (the sentence encoder the model uses, ``--encoder``): unseen AvgPr;
* **the two tools stacked**: the LR's probability for the seen labels, the cosine for the unseen ones, one γ
  cross-calibrated: GZSL H;
* chance: the AvgPr of random scores.

Targets per language (at each λ): seen AvgPr ≥ L's LR; unseen AvgPr ≥ the cosine and ≥ 3x chance; GZSL H above the
two tools stacked. Mean ± std (ddof 1) over the checkpoints (seeds). Figures of each checkpoint are cached beside it
and each language's baselines in ``--workdir``; writes ``two_tools.json``, ``two_tools.md`` and ``two_tools.png``
there.

    python examples/gile/multilingual_two_tools.py --data DATA --data-bin W/bin --encoder W/student \\
        --checkpoints W*/checkpoint_last.pt --workdir study --lambdas 0,20
"""

import glob
import json
import os

import numpy as np
from gile_study import baseline_scores, matrix_stats, two_tools
from multilingual_study import chance, label_groups

from fairseq_joint.cli.common import fail, parser, run, setup_logging
from fairseq_joint.loaders import load_gile_model
from fairseq_joint.plots import figure
from fairseq_joint_studies.study_metrics import split_scores
from fairseq_joint_studies.study_reports import aggregate, cell
from fairseq_joint_studies.study_runs import cached_evaluation


def groups_of(data_bin, lang, names):
    """``(columns, seen)``: the label columns scored for ``lang`` (its own seen + no language's) and the seen mask
    over them."""
    groups = label_groups(data_bin, lang, names)
    columns = groups["seen"] | groups["unseen"]
    return columns, groups["seen"][columns]


def figures(scores, targets, seen) -> dict:
    stats = matrix_stats(scores, targets, seen)
    return {k: stats[k] for k in ("seen_avgpr", "unseen_avgpr", "cal_gzsl_h", "gamma")}


def model_figures(checkpoint, data_bin, lambdas):
    """``{λ: {lang: figures}}`` of one checkpoint."""
    model, task = load_gile_model(checkpoint, data_bin)
    offsets = None
    out = {}
    for lam in lambdas:
        model.cfg.cosine_prior = lam
        scores, targets, label_set = split_scores(model, task, "valid")
        anywhere = split_scores(model, task, "valid", any_language=True)[0] if model.reads_any_language else None
        offsets = task.dataset("valid").offsets
        names = list(label_set.names)
        per_lang = {}
        for pos, lang in enumerate(model.languages):
            rows = slice(int(offsets[pos]), int(offsets[pos + 1]))
            columns, seen = groups_of(data_bin, lang, names)
            per_lang[lang] = figures(scores[rows][:, columns], targets[rows][:, columns], seen)
            if anywhere is not None:
                no_lang = figures(anywhere[rows][:, columns], targets[rows][:, columns], seen)
                per_lang[lang].update({f"{k}_no_lang": v for k, v in no_lang.items() if k != "gamma"})
        out[f"{lam:g}"] = per_lang
    return out


def baselines(data, data_bin, lang, encoder, tokenizer):
    """L's LR, the encoder's cosine and the two tools stacked, on L's validation documents."""
    from gile_study import valid_matrix

    targets, _, names = valid_matrix(os.path.join(data_bin, lang))
    columns, seen = groups_of(data_bin, lang, names)
    lr = baseline_scores("tfidf_lr", os.path.join(data, lang), os.path.join(data_bin, lang), None, tokenizer)
    cosine = baseline_scores("cosine", os.path.join(data, lang), os.path.join(data_bin, lang), encoder)
    y = targets[:, columns]
    lr, cosine = lr[:, columns], cosine[:, columns]
    out = {"docs": int(len(y)), "seen_labels": int(seen.sum()), "unseen_labels": int((~seen).sum())}
    out["tfidf_lr"] = matrix_stats(lr, y, seen, zero_shot=False)["seen_avgpr"]
    out["cosine"] = figures(cosine, y, seen)["unseen_avgpr"]
    out["two_tools"] = figures(two_tools(lr, cosine, seen), y, seen)["cal_gzsl_h"]
    out["chance_unseen"] = chance(data_bin, lang)["unseen_avgpr"]
    return out


def main(argv=None) -> int:
    setup_logging()
    p = parser(__doc__)
    p.add_argument("--data", required=True, help="the corpus: one folder per language with train.jsonl, valid.jsonl")
    p.add_argument("--data-bin", required=True, help="the binaries of every language (multilingual.sh's WORK/bin)")
    p.add_argument("--encoder", required=True, help="the sentence encoder the model uses (its cosine is a baseline)")
    p.add_argument("--checkpoints", nargs="+", required=True, help="checkpoints of the system, one per seed (globs)")
    p.add_argument("--workdir", required=True, help="where the baselines' cache and the report go")
    p.add_argument("--lambdas", default="20", help="comma-separated λ of --cosine-prior to evaluate the model with")
    p.add_argument("--tokenizer", choices=("words", "gile"), default="gile", help="the LR baseline's word splitting")
    p.add_argument("--name", default="gile_multilingual", help="the system's name in the report")
    args = p.parse_args(argv)
    checkpoints = sorted({c for pattern in args.checkpoints for c in glob.glob(pattern)})
    if not checkpoints:
        raise fail(f"--checkpoints {' '.join(args.checkpoints)}: no such checkpoint")
    lambdas = [float(x) for x in args.lambdas.split(",")]
    os.makedirs(args.workdir, exist_ok=True)
    runs = [cached_evaluation(c, os.path.join(os.path.dirname(c), f"two_tools_{args.lambdas.replace(',', '_')}.json"),
                              lambda c=c: model_figures(c, args.data_bin, lambdas)) for c in checkpoints]
    languages = list(runs[0][f"{lambdas[0]:g}"])
    base = {}
    for lang in languages:
        cache = os.path.join(args.workdir, f"baselines_{lang}_{args.tokenizer}.json")
        if os.path.isfile(cache):
            with open(cache) as f:
                base[lang] = json.load(f)
            continue
        base[lang] = baselines(args.data, args.data_bin, lang, args.encoder, args.tokenizer)
        with open(cache, "w") as f:
            json.dump(base[lang], f, indent=1)
    table = {f"{lam:g}": {lang: aggregate([r[f"{lam:g}"][lang] for r in runs]) for lang in languages}
             for lam in lambdas}
    lines = report(table, base, languages, args, len(checkpoints))
    with open(os.path.join(args.workdir, "two_tools.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.workdir, "two_tools.json"), "w", encoding="utf-8") as f:
        json.dump({"checkpoints": checkpoints, "baselines": base, "runs": runs, "table": table}, f, indent=1)
    plot(table, base, languages, os.path.join(args.workdir, "two_tools.png"), args.name)
    print("\n".join(lines))
    return 0


def met(stats, base) -> str:
    """The targets a row meets: seen ≥ LR, unseen ≥ cosine and ≥ 3x chance, H > two tools (✓ or ✗ each)."""
    checks = (stats["seen_avgpr"] >= base["tfidf_lr"],
              stats["unseen_avgpr"] >= max(base["cosine"], 3 * base["chance_unseen"]),
              stats["cal_gzsl_h"] > base["two_tools"])
    return " ".join("✓" if c else "✗" for c in checks)


def report(table, base, languages, args, seeds):
    lines = []
    for lam, rows in table.items():
        lines += [f"{args.name}, --cosine-prior {lam}, {seeds} seed(s); valid; seen: L's own training labels, unseen: "
                  "no language's", "",
                  "| L | docs | seen / unseen labels | L's TF-IDF + LR seen | model seen | cosine unseen | 3x chance | "
                  "model unseen | two tools H | model H (γ cal.) | targets (seen, unseen, H) | no lang: seen / unseen / H |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for lang in languages:
            b, s = base[lang], rows[lang]
            no_lang = " / ".join(f"{s[k + '_no_lang']:.2f}" for k in ("seen_avgpr", "unseen_avgpr", "cal_gzsl_h")) \
                if "seen_avgpr_no_lang" in s else "–"
            lines.append(f"| {lang} | {b['docs']} | {b['seen_labels']} / {b['unseen_labels']} | {b['tfidf_lr']:.2f} | "
                         f"{cell(s, 'seen_avgpr')} | {b['cosine']:.2f} | {3 * b['chance_unseen']:.2f} | "
                         f"{cell(s, 'unseen_avgpr')} | {b['two_tools']:.2f} | {cell(s, 'cal_gzsl_h')} | {met(s, b)} | "
                         f"{no_lang} |")
        lines.append("")
    return lines


def plot(table, base, languages, path, name):
    lam = list(table)[-1]
    x = np.arange(len(languages))
    with figure(path, 1, 3, figsize=(15, 4)) as (fig, axes):
        for ax, (key, tool, title) in zip(axes, (("seen_avgpr", "tfidf_lr", "seen AvgPr vs L's TF-IDF + LR"),
                                                 ("unseen_avgpr", "cosine", "unseen AvgPr vs the encoder's cosine"),
                                                 ("cal_gzsl_h", "two_tools", "GZSL H (γ cal.) vs the two tools"))):
            means = [table[lam][lang][key] for lang in languages]
            stds = [table[lam][lang].get(f"{key}_std", 0.0) for lang in languages]
            ax.bar(x - 0.2, [base[lang][tool] for lang in languages], 0.4, label="baseline", color="#bbbbbb")
            ax.bar(x + 0.2, means, 0.4, yerr=stds, label=f"{name} (λ {lam})", color="#3b6ea8")
            if key == "unseen_avgpr":
                ax.scatter(x, [3 * base[lang]["chance_unseen"] for lang in languages], marker="_", s=300, color="k",
                           label="3x chance", zorder=3)
            ax.set_xticks(x, languages)
            ax.set_title(title, fontsize=9)
            if key == "seen_avgpr":  # the two sides are a few points apart: start the axis near them
                low = min(means + [base[lang][tool] for lang in languages])
                ax.set_ylim(max(0.0, 5 * (low // 5) - 5), None)
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3, frameon=False)


if __name__ == "__main__":
    raise SystemExit(run(main))
