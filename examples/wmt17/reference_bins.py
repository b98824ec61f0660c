#!/usr/bin/env python
"""How much probability each model gives the reference words of high-, medium- and low-frequency bins (teacher
forcing; the model side of Pappas et al. 2018, Fig. 3).

``frequency_bins.py`` scores what beam search produced; this scores what the model believes. Every reference
translation of ``--subset`` is forced through each checkpoint, and each target word's negative log-likelihood is the
sum over its BPE pieces (``visit@@ ed`` -> ``visited``) of -log p(piece | source, previous pieces). The words are
binned as in ``frequency_bins.py`` (the tokenized training target side's word types ranked by count and cut into
thirds, plus ``unseen``), and each bin reports its mean NLL per word (nats) and the perplexity per word, exp(mean
NLL). The last row is the per-token perplexity of the whole subset (BPE pieces and ``</s>``), which equals
``fairseq-validate``'s on the same subset. Two models with the same perplexity can differ in where their
probability goes: a lower low-bin NLL means the model ranks rare reference words higher, whatever the beam does.
Every checkpoint after the first is compared with the first word by word (mean NLL difference, the share of words
it gives more probability, and the Wilcoxon signed-rank p-value of the paired differences).

    python examples/wmt17/reference_bins.py --data-bin DATA_BIN --checkpoint tied=RUN1/checkpoint_u4000.pt \\
        --checkpoint joint=RUN2/checkpoint_u4000.pt [--subset test] [--json ref_bins.json] [--markdown ref_bins.md]

``--train-tgt`` defaults to the recipe's tokenized training target (``RECIPE_TRAIN_TGT_TOK`` in
``DATA_BIN/recipe.env``). No sentence is skipped: one longer than a model accepts is an error. A reference piece
the dictionary does not have is ``<unk>`` without its ``@@``, which would split its word: when there are any, pass the
BPE text that was binarized as ``--ref-bpe`` (the recipe's ``WORK/bpe<OPS>/test.<tgt>``; checked against the binarized
pieces), and the words are read from it.
"""

import math
import os
import sys
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from frequency_bins import BINS, frequency_bins  # the recipe's binning (this script's folder is on sys.path)

from fairseq_joint.checks import check_checkpoint_exists
from fairseq_joint.cli.common import fail, parser, positive_int, run
from fairseq_joint.options import named_values
from fairseq_joint.text_files import check_exists, read_text
from fairseq_joint_studies.study_reports import write_report

ROWS = BINS + ("unseen",)


def words_of(pieces: Sequence[str], nll: Sequence[float]) -> List[Tuple[str, float]]:
    """Subword-nmt pieces and their NLLs -> (word, summed NLL): a piece ending in ``@@`` continues into the next;
    a trailing ``@@`` piece (not made by subword-nmt) still closes a word, so no piece is dropped."""
    if len(pieces) != len(nll):
        raise ValueError(f"{len(pieces)} pieces but {len(nll)} scores")
    out, word, total = [], "", 0.0
    for piece, score in zip(pieces, nll):
        word, total = word + (piece[:-2] if piece.endswith("@@") else piece), total + score
        if not piece.endswith("@@"):
            out.append((word, total))
            word, total = "", 0.0
    if word or total:
        out.append((word, total))
    return out


def bin_nll(word_bin: Dict[str, str], scored: Sequence[Tuple[str, float]]) -> Dict[str, Dict[str, float]]:
    """Per bin: reference words, their summed and mean NLL (nats) and the perplexity per word."""
    n, total = defaultdict(int), defaultdict(float)
    for word, nll in scored:
        b = word_bin.get(word, "unseen")
        n[b] += 1
        total[b] += nll
    out = {}
    for b in ROWS:
        mean = total[b] / n[b] if n[b] else float("nan")
        out[b] = {"words": n[b], "nll": total[b], "nll_per_word": mean,
                  "ppl_per_word": math.exp(mean) if n[b] else float("nan")}
    return out


def paired_vs(word_bin: Dict[str, str], scored: Sequence[Tuple[str, float]],
              baseline: Sequence[Tuple[str, float]]) -> Dict[str, Dict[str, float]]:
    """Per bin, against the baseline's NLL of the same reference words: the mean difference (nats per word), the
    share of words this model gives a lower NLL, and the two-sided Wilcoxon signed-rank p-value of the paired
    differences (nan for a bin without words or without a difference)."""
    from scipy.stats import wilcoxon

    if len(scored) != len(baseline):
        raise ValueError(f"the two scorings have {len(scored)} and {len(baseline)} reference words: score the same "
                         "subset of the same data-bin")
    diffs = defaultdict(list)
    for (word, nll), (base_word, base_nll) in zip(scored, baseline):
        if word != base_word:
            raise ValueError(f"the two scorings disagree on a reference word ({word!r} vs {base_word!r})")
        diffs[word_bin.get(word, "unseen")].append(nll - base_nll)
    out = {}
    for b in ROWS:
        d = diffs[b]
        p = float(wilcoxon(d).pvalue) if any(d) else float("nan")
        out[b] = {"delta_nll_per_word": sum(d) / len(d) if d else float("nan"),
                  "lower_share": sum(x < 0 for x in d) / len(d) if d else float("nan"), "wilcoxon_p": p}
    return out


def reference_nll(path: str, data_bin: str, subset: str, max_tokens: int):
    """Teacher-forced NLL (nats) of every target token of ``subset`` under one checkpoint:
    [(sentence id, pieces, per-piece NLL)] with ``</s>`` last, in id order."""
    from fairseq import checkpoint_utils, utils

    import fairseq_joint  # noqa: F401  (registers the models, allowlists checkpoint classes)

    check_checkpoint_exists(path)
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides={"data": data_bin})
    model = models[0].eval()
    task.load_dataset(subset)
    tgt = task.target_dictionary
    itr = task.get_batch_iterator(
        task.dataset(subset), max_tokens=max_tokens,
        max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
        ignore_invalid_inputs=False).next_epoch_itr(shuffle=False)
    out = []
    with torch.no_grad():
        for sample in itr:
            lprobs = model.get_normalized_probs(model(**sample["net_input"]), log_probs=True)
            target = sample["target"]
            nll = -lprobs.float().gather(-1, target.unsqueeze(-1)).squeeze(-1)
            for i, sid in enumerate(sample["id"].tolist()):
                keep = target[i].ne(tgt.pad())
                ids = target[i][keep].tolist()
                out.append((sid, [tgt[t] for t in ids], nll[i][keep].tolist()))
    if len(out) != len(task.dataset(subset)):
        raise fail(f"{path}: scored {len(out)} of {len(task.dataset(subset))} {subset} sentences")
    return sorted(out)


def text_pieces(sentences, ref_bpe: Optional[str]) -> List[List[str]]:
    """The pieces each word is read from (``</s>`` left out): the binarized ones, or with ``ref_bpe`` (the BPE text
    that was binarized) the text's, checked piece by piece against them. An ``<unk>`` piece has lost its ``@@``, so
    without ``ref_bpe`` its word's boundary is unknown: refused rather than guessed."""
    pieces = [p[:-1] for _, p, _ in sentences]
    if ref_bpe is None:
        unk = sum(p.count("<unk>") for p in pieces)
        if unk:
            raise fail(f"the references hold {unk} <unk> pieces, whose word boundaries the dictionary does not keep: "
                       "pass --ref-bpe, the BPE text that was binarized (the recipe's WORK/bpe<OPS>/test.<tgt>)")
        return pieces
    text = [line.split() for line in read_text(ref_bpe, "--ref-bpe")]
    if len(text) != len(pieces):
        raise fail(f"--ref-bpe {ref_bpe} has {len(text):,d} lines but the subset has {len(pieces):,d} sentences")
    for i, (t, b) in enumerate(zip(text, pieces)):
        if len(t) != len(b) or any(x != y and y != "<unk>" for x, y in zip(t, b)):
            raise fail(f"--ref-bpe {ref_bpe}:{i + 1} is not the binarized reference ({' '.join(b)[:80]!r}); pass the "
                       "BPE text fairseq-preprocess read")
    return text


def markdown(results: Dict[str, dict], sizes: Dict[str, int]) -> str:
    names = list(results)
    heads = [f"{n} NLL/word (ppl)" + (f"; Δ vs {names[0]}, p" if i else "") for i, n in enumerate(names)]
    rows = ["| bin (train words) | ref words | " + " | ".join(heads) + " |",
            "|" + "---|" * (2 + len(names))]
    for b in ROWS:
        first = results[names[0]]["bins"][b]
        cells = [f"{results[n]['bins'][b]['nll_per_word']:.3f} ({results[n]['bins'][b]['ppl_per_word']:.1f})"
                 + (f"; {results[n]['vs'][b]['delta_nll_per_word']:+.3f}, p = {results[n]['vs'][b]['wilcoxon_p']:.2g}"
                    if "vs" in results[n] else "") for n in names]
        rows.append(f"| {b} ({sizes.get(b, 0):,d}) | {first['words']:,d} | " + " | ".join(cells) + " |")
    cells = [f"{results[n]['nll_per_token']:.3f} ({results[n]['ppl_per_token']:.2f})" for n in names]
    rows.append(f"| all tokens (BPE pieces and </s>) | {results[names[0]]['tokens']:,d} | " + " | ".join(cells) + " |")
    if len(names) > 1:
        rows.append("")
        rows.append(f"Δ: mean NLL difference per word against {names[0]} on the same reference words (negative: more "
                    "probability); p: two-sided Wilcoxon signed-rank test of the paired differences.")
    return "\n".join(rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--data-bin", required=True, help="the data-bin the checkpoints were trained on")
    p.add_argument("--checkpoint", action="append", required=True, help="NAME=CHECKPOINT; repeatable")
    p.add_argument("--subset", default="test", help="the data-bin subset whose references are scored")
    p.add_argument("--train-tgt", help="tokenized training target side (the bins; default: the recipe's, from "
                                       "DATA_BIN/recipe.env)")
    p.add_argument("--ref-bpe", help="the BPE text of the subset's references, as binarized (needed when they hold "
                                     "<unk> pieces: the dictionary does not keep their @@)")
    p.add_argument("--max-tokens", type=positive_int, default=2000, help="tokens per batch")
    p.add_argument("--json", help="write the per-bin figures to this JSON file")
    p.add_argument("--markdown", help="write the table to this Markdown file")
    a = p.parse_args(argv)
    train_tgt = a.train_tgt
    if not train_tgt:
        env_path = os.path.join(a.data_bin, "recipe.env")
        check_exists(env_path, "", "pass --train-tgt (the tokenized training target side)")
        env = dict(line.split("=", 1) for line in read_text(env_path, "recipe.env") if "=" in line)
        if "RECIPE_TRAIN_TGT_TOK" not in env:
            raise fail(f"{env_path} has no RECIPE_TRAIN_TGT_TOK; pass --train-tgt")
        train_tgt = env["RECIPE_TRAIN_TGT_TOK"]
    word_bin = frequency_bins(read_text(train_tgt, "--train-tgt"))
    results, first = {}, None
    for name, path in named_values("--checkpoint", a.checkpoint, "NAME=CHECKPOINT", unnamed=str).items():
        sentences = reference_nll(path, a.data_bin, a.subset, a.max_tokens)
        tokens = sum(len(s[1]) for s in sentences)
        total = sum(sum(s[2]) for s in sentences)
        # </s> closes every sentence and is no word: the bins read the pieces before it
        if any(not pieces or pieces[-1] != "</s>" for _, pieces, _ in sentences):
            raise fail(f"{path}: a {a.subset} reference does not end in </s>; binarize it with fairseq-preprocess")
        scored = [w for (_, _, nll), pieces in zip(sentences, text_pieces(sentences, a.ref_bpe))
                  for w in words_of(pieces, nll[:-1])]
        results[name] = {"checkpoint": path, "sentences": len(sentences), "tokens": tokens,
                         "nll_per_token": total / tokens, "ppl_per_token": math.exp(total / tokens),
                         "bins": bin_nll(word_bin, scored)}
        if first is None:
            first = scored
        else:
            results[name]["vs"] = paired_vs(word_bin, scored, first)
    sizes = {b: sum(1 for v in word_bin.values() if v == b) for b in BINS}
    write_report(markdown(results, sizes), a.markdown, a.json, {"subset": a.subset, "bin_sizes": sizes,
                                                                "systems": results})
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
