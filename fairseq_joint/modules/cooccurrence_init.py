"""Kurata, Xiang & Zhou (2016): initialize a hidden->output weight with label co-occurrence (Sec. 3).

Each distinct set of two or more labels that training examples carry together is a *co-occurrence pattern* (Sec. 4.1:
the 1,695 queries of more than one label gave 252 patterns; a single label co-occurs with none). Hidden
unit j (a column of the output weight W ∈ R^{|Y| x nh}) becomes the dedicated neuron of the j-th most
frequent pattern: its weights are C on the pattern's labels and 0 on every other label (Sec. 3.1, Fig. 2).
With more patterns than hidden units only the nh most frequent get a unit; units without a pattern keep
their random initialization. C (Sec. 3.2) is the upper bound of the normalized initialization
(Glorot & Bengio 2010) ``UB = sqrt(6) / sqrt(nh + no)``, or ``f·UB`` / ``sqrt(f)·UB`` with f the number
of training examples carrying the pattern.
"""

import math
from collections import Counter
from typing import Iterable, List, Sequence, Tuple

import torch

from fairseq_joint.options import check_choice

COOCCURRENCE_INIT_CHOICES = ("none", "ub", "f_ub", "sqrt_f_ub")


def label_patterns(label_rows: Iterable[Sequence[int]]) -> List[Tuple[Tuple[int, ...], int]]:
    """Distinct label sets of two or more labels with their frequency f, most frequent first (ties: first seen
    first); a row of one label or none holds no co-occurrence."""
    counts = Counter(pattern for pattern in (tuple(sorted(set(row))) for row in label_rows) if len(pattern) > 1)
    order = {p: i for i, p in enumerate(counts)}  # Counter keeps insertion order
    return sorted(counts.items(), key=lambda kv: (-kv[1], order[kv[0]]))


def normalized_init_bound(num_hidden: int, num_outputs: int) -> float:
    """UB = sqrt(6) / sqrt(nh + no) (Kurata et al. Sec. 3.2)."""
    return math.sqrt(6.0) / math.sqrt(num_hidden + num_outputs)


@torch.no_grad()
def cooccurrence_init_(weight: torch.Tensor, patterns, mode: str = "ub") -> int:
    """Give the first hidden units of ``weight`` (|Y| x nh) to the patterns (of label positions below |Y|: the model's
    training label rows; torch refuses an index beyond them); returns how many got one."""
    if check_choice("--cooccurrence-init", mode, COOCCURRENCE_INIT_CHOICES) == "none":
        return 0
    num_labels, num_hidden = weight.shape
    ub = normalized_init_bound(num_hidden, num_labels)
    used = min(num_hidden, len(patterns))
    for unit, (pattern, freq) in enumerate(patterns[:used]):
        c = {"ub": ub, "f_ub": freq * ub, "sqrt_f_ub": math.sqrt(freq) * ub}[mode]
        weight[:, unit] = 0.0
        weight[list(pattern), unit] = c
    return used
