#!/usr/bin/env python
"""Table 1 of Pappas et al. (2018): top-k cosine neighbours of query words in the input embedding E and in
the output layer's class space g_out(E) (σ(E U + b_u) for NMT-joint, Eq. 13; E itself for NMT-tied; the
rows of W for NMT, Eq. 3).

    python examples/wmt17/nearest_neighbours.py CHECKPOINT --dict DATA_BIN/dict.en.txt --query visited --query ...
        [--top-k 5] [--markdown nn.md] [--json nn.json]

Without ``--query`` the most frequent whole words of the dictionary that are not punctuation are used.
Queries must be single dictionary entries (BPE pieces are shown as they are stored, e.g. ``vis@@``); an
unknown query is an error naming it, not skipped.
"""

import sys
from typing import Dict, List, Optional, Sequence

import torch

from fairseq_joint.checks import check_checkpoint_exists
from fairseq_joint.cli.common import fail, parser, positive_int, run
from fairseq_joint.loaders import load_translation_model
from fairseq_joint.text_files import check_exists
from fairseq_joint_studies.study_reports import write_report


def neighbours(matrix: torch.Tensor, words: List[str], queries: List[int], k: int, nspecial: int = 0) -> Dict[str, List[str]]:
    """k nearest rows of ``matrix`` by cosine similarity for each query row (the query itself and the first
    ``nspecial`` rows, fairseq's <s>, <pad>, </s>, <unk>, excluded)."""
    unit = torch.nn.functional.normalize(matrix.float(), dim=-1)
    sims = unit[queries] @ unit.t()
    sims[:, :nspecial] = -float("inf")
    sims[torch.arange(len(queries)), torch.tensor(queries)] = -float("inf")
    top = sims.topk(k, dim=-1).indices
    return {words[q]: [words[j] for j in row.tolist()] for q, row in zip(queries, top)}


def default_queries(dictionary, n: int) -> List[int]:
    out = []
    for i in range(dictionary.nspecial, len(dictionary)):
        w = dictionary[i]
        if w.isalpha() and len(w) > 3 and not w.endswith("@@"):
            out.append(i)
        if len(out) == n:
            break
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="a fairseq-joint translation checkpoint")
    p.add_argument("--dict", required=True, help="the target dictionary the model was trained with (dict.TGT.txt)")
    p.add_argument("--query", action="append", default=[], help="query word (repeatable)")
    p.add_argument("--num-queries", type=positive_int, default=5, help="frequent words to use when no --query is given")
    p.add_argument("--top-k", type=positive_int, default=5, help="neighbours per query (Table 1: 5)")
    p.add_argument("--markdown", help="write the table to this Markdown file")
    p.add_argument("--json", help="write the neighbours to this JSON file")
    a = p.parse_args(argv)
    from fairseq.data import Dictionary

    check_checkpoint_exists(a.checkpoint)
    check_exists(a.dict, "--dict", "give the dict.TGT.txt of the data the model was trained on")
    dictionary = Dictionary.load(a.dict)
    model = load_translation_model(a.checkpoint).eval()
    layer = model.decoder.output_projection
    if layer.num_classes != len(dictionary):
        raise fail(
            f"{a.dict} has {len(dictionary):,d} entries but the checkpoint's output layer has "
            f"{layer.num_classes:,d} classes; pass the dict.TGT.txt of the data the model was trained on"
        )
    words = [dictionary[i] for i in range(len(dictionary))]
    if a.query:
        unknown = [q for q in a.query if dictionary.index(q) == dictionary.unk()]
        if unknown:
            raise fail(f"query word(s) {', '.join(unknown)} not in {a.dict}; query dictionary entries")
        queries = [dictionary.index(q) for q in a.query]
    else:
        queries = default_queries(dictionary, a.num_queries)
    k = min(a.top_k, len(dictionary) - 1 - dictionary.nspecial)
    with torch.no_grad():
        spaces = {"input E": model.decoder.embed_tokens.weight, f"output g_out ({layer.output_layer})": layer.class_side()[0]}
        table = {name: neighbours(m, words, queries, k, dictionary.nspecial) for name, m in spaces.items()}
    rows = ["| query | " + " | ".join(table) + " |", "|---|" + "---|" * len(table)]
    for q in queries:
        rows.append(f"| {words[q]} | " + " | ".join(", ".join(table[s][words[q]]) for s in table) + " |")
    write_report("\n".join(rows), a.markdown, a.json, table, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
