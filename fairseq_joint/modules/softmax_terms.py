"""The terms of the exact cross-entropy every path of the chunked softmax shares (fairseq's label-smoothed form, plain
cross-entropy when ε = 0), per token with ``lse = log Σ_v exp z_v`` over the whole vocabulary::

    nll = lse − z_y,    smooth = |V|·lse − Σ_v z_v,    ε_i = ε / (|V| − 1)
    loss = (1 − ε − ε_i) · nll + ε_i · smooth,    ∂loss/∂z_v = (1 − ε − ε_i)(p_v − [v = y]) + ε_i (|V| p_v − 1)

The paths (:mod:`fairseq_joint.modules.chunked_softmax` on the CPU, :mod:`fairseq_joint.modules.fused_cross_entropy`
on a GPU) differ in how they walk the logits to get lse, z_y and Σ_v z_v; the loss is made of them here, once.
"""

from typing import Iterator, Optional, Tuple

import torch
from torch import Tensor


def chunks(n: int, size: int) -> Iterator[Tuple[int, int]]:
    """``[start, end)`` of consecutive chunks of ``size`` of ``range(n)`` (the last one shorter)."""
    for start in range(0, n, size):
        yield start, min(start + size, n)


def coefficients(epsilon: float, num_classes: int) -> Tuple[float, float]:
    """``(a, b)`` of the loss and of ∂loss/∂z = a (p − onehot) + b (|V| p − 1): a = 1 − ε − ε_i, b = ε_i."""
    eps_i = epsilon / (num_classes - 1) if epsilon > 0 and num_classes > 1 else 0.0
    return 1.0 - epsilon - eps_i, eps_i


def token_losses(lse: Tensor, target_logit: Tensor, scored: Tensor, coefficients: Tuple[float, float],
                 num_classes: int, logit_sum: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """``(loss, nll)`` of every token from its ``lse``, its ``target_logit`` and (with label smoothing) its
    ``logit_sum``; 0 for a token that is not ``scored`` whatever its logits (padding, as fairseq's loss ignores it: a
    product with 0 would keep a NaN). A smoothing term whose weight ε_i is 0 is left out, not multiplied by 0: with a
    -inf logit it is infinite (log_softmax's own loss is then exact, where fairseq's ``label_smoothed_nll_loss`` gives
    0·inf = NaN)."""
    a_coef, eps_i = coefficients
    zero = torch.zeros((), dtype=lse.dtype, device=lse.device)
    nll = torch.where(scored, lse - target_logit, zero)
    loss = a_coef * nll
    if eps_i:
        loss = loss + eps_i * torch.where(scored, num_classes * lse - logit_sum, zero)
    return loss, nll
