"""The label embedding of the Label Embedding Network (Sun et al. 2017) and the terms of its loss.

The embedding gives every label y a vector e_y ∈ R^m over the m labels (the i-th value: how similar y is to
label i, Sec. 2.1):

* ``full`` (Eq. 5): a free matrix E ∈ R^{m x m}, ``e = E_y``, initialised to the identity (Sec. 2.3);
* ``compressed`` (Eqs. 15-16): ``e = ReLU(A_y B)`` with A ∈ R^{m x h}, B ∈ R^{h x m} — m·2h numbers
  instead of m², the only practical choice for NMT vocabularies (32K labels: 4 GB full, 26 MB at h = 100).

Both score all m columns or only the columns of a candidate set V' (sampled softmax): the compressed form
then multiplies by the V' columns of B only.

:func:`label_embedding_terms` computes the five terms of the loss (Eq. 14) from the logits of the two output
layers o1 (the model's, for prediction) and o2 (fed detached features, Eq. 8) and the embedding logits e::

    H(y, z1') + H(e', z1') + H(y, z2') + ||max(0, (z2')_y - α)||_p + H(z2''(τ), e')

with x' = softmax(x) and z2'' = softmax(z2 / τ) (Eq. 10). As in the paper's Figure 1b, a distribution that
serves as a target is a constant: e' in H(e', z1') (Eq. 13; o1 learns from the embedding, not the reverse)
and z2'' in H(z2'', e') (Eq. 11; the embedding learns from o2). The embedding term counts only the tokens
o2 predicts correctly (Sec. 2.3). The cross-entropies against soft targets are one fused op
(:func:`soft_target_cross_entropy`): log softmax is never stored, the gradient is ``s·softmax(z) - q``.
"""

import math
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fairseq_joint.errors import InputError

LABEL_EMBEDDING_TERMS = ("hard1", "soft1", "hard2", "hinge", "emb")


class LabelEmbedding(nn.Module):
    """e_y for labels y: ``full`` (Eq. 5, identity init) when ``dim`` is None, else ``compressed`` (Eq. 16).

    Args:
        num_labels: m.
        dim: h of the compressed form (A ∈ R^{m x h}, B ∈ R^{h x m}); None or 0 = the full m x m matrix.
    """

    def __init__(self, num_labels: int, dim: Optional[int] = None):
        super().__init__()
        if num_labels <= 0:
            raise InputError(f"the label embedding needs at least one label, got {num_labels}")
        self.num_labels = num_labels
        self.dim = dim = dim or None
        if dim is None:
            self.weight = nn.Parameter(torch.eye(num_labels))  # Sec. 2.3: the identity as prior
        else:
            self.A = nn.Parameter(torch.empty(num_labels, dim))
            self.B = nn.Parameter(torch.empty(dim, num_labels))
        self.reset_parameters()

    @property
    def compressed(self) -> bool:
        return self.dim is not None

    def reset_parameters(self) -> None:
        if not self.compressed:
            with torch.no_grad():
                self.weight.copy_(torch.eye(self.num_labels))
            return
        # N(0, h^-1/2) for both factors: (A_y B)_i has variance 1/h, so e' starts close to uniform, like the
        # softmax of an identity row over a large m (the full form's start).
        nn.init.normal_(self.A, std=self.dim ** -0.5)
        nn.init.normal_(self.B, std=self.dim ** -0.5)

    def freeze_(self) -> "LabelEmbedding":
        """Make the embedding a constant (Appendix B): its tensors become buffers, so neither optimizers nor
        fairseq's distributed wrapper see parameters (checkpoints keep them: the ``frozen_criterion`` patch)."""
        for name, param in list(self.named_parameters(recurse=False)):
            delattr(self, name)
            self.register_buffer(name, param.detach().clone())
        return self

    def extra_repr(self) -> str:
        return f"labels={self.num_labels}, " + (f"compressed h={self.dim}" if self.compressed else "full")

    def forward(self, labels: Tensor, columns: Optional[Tensor] = None) -> Tensor:
        """e for each label in ``labels`` (any shape), over all m labels or the ``columns`` only: (..., m | C)."""
        flat = labels.reshape(-1)
        if self.compressed:
            b = self.B if columns is None else self.B.index_select(1, columns)
            out = F.relu(self.A.index_select(0, flat) @ b)  # Eq. 16
        else:
            out = self.weight.index_select(0, flat)  # Eq. 5: e = E_y
            if columns is not None:
                out = out.index_select(1, columns)
        return out.view(*labels.shape, out.size(-1))

    def matrix(self, rows: Optional[Tensor] = None, chunk: int = 4096) -> Tensor:
        """The embedding rows ``rows`` (all by default) as an (r x m) matrix, computed in chunks of rows."""
        if rows is None:
            rows = torch.arange(self.num_labels, device=self.B.device if self.compressed else self.weight.device)
        with torch.no_grad():
            return torch.cat([self(rows[i:i + chunk]) for i in range(0, rows.numel(), chunk)], 0)


class _SoftTargetCrossEntropy(torch.autograd.Function):
    """``Σ_r -Σ_j q_rj log softmax(z_r)_j`` for a constant target q whose rows sum to s_r. Fused: one
    log-softmax pass (or a given one), a dot product; the gradient ``s_r softmax(z_r) - q_r`` in one pass."""

    @staticmethod
    def forward(ctx, z, q, row_sums, log_probs):
        if log_probs is None:
            log_probs = torch.log_softmax(z, dim=-1)
        if row_sums is None:
            row_sums = q.sum(-1)
        loss = -torch.dot(q.reshape(-1), log_probs.reshape(-1))
        ctx.save_for_backward(log_probs, q, row_sums)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        log_probs, q, row_sums = ctx.saved_tensors
        grad = torch.exp(log_probs).mul_((row_sums * grad_loss).unsqueeze(-1))
        return grad.sub_(q if _is_one(grad_loss) else q * grad_loss), None, None, None


class _CrossEntropyWithHinge(torch.autograd.Function):
    """H(y, z') and the hinge on z'_y of Eq. 12, summed over rows. Both gradients are multiples of
    ``softmax(z) - onehot(y)``, so forward is one log-softmax pass and backward one pass over z."""

    @staticmethod
    def forward(ctx, z, y, alpha, p, two_sided):
        log_probs = torch.log_softmax(z, dim=-1)
        logp_y = log_probs.gather(-1, y.unsqueeze(-1)).squeeze(-1)
        p_y = logp_y.exp()
        diff = p_y - alpha
        gap = diff.abs() if two_sided else diff.clamp(min=0)
        slope = torch.sign(diff) if two_sided else (diff > 0).to(z.dtype)  # d gap / d p_y
        if p == 2:
            hinge, slope = gap.pow(2).sum(), 2 * gap * slope
        else:
            hinge = gap.sum()
        ctx.save_for_backward(log_probs, y, slope * p_y)
        ctx.mark_non_differentiable(log_probs)
        return -logp_y.sum(), hinge, log_probs

    @staticmethod
    def backward(ctx, grad_hard, grad_hinge, _grad_log_probs):
        log_probs, y, slope_p = ctx.saved_tensors
        k = grad_hard - grad_hinge * slope_p  # per row: d loss / d z = k (softmax(z) - onehot(y))
        grad = torch.exp(log_probs).mul_(k.unsqueeze(-1))
        grad.scatter_add_(-1, y.unsqueeze(-1), -k.unsqueeze(-1))
        return grad, None, None, None, None


def _is_one(t: Tensor) -> bool:
    return t.numel() == 1 and t.device.type == "cpu" and float(t) == 1.0


def _compute_dtype(t: Tensor) -> torch.dtype:
    return torch.promote_types(t.dtype, torch.float32)


def soft_target_cross_entropy(z: Tensor, q: Tensor, row_sums: Optional[Tensor] = None,
                              log_probs: Optional[Tensor] = None) -> Tensor:
    """``H(q, softmax(z))`` summed over rows, q a constant (detached) target; ``row_sums`` (the rows' sums of
    q) and ``log_probs`` (log softmax(z), no gradient) may be given when known; see above."""
    dtype = _compute_dtype(z)
    return _SoftTargetCrossEntropy.apply(z.to(dtype).contiguous(), q.detach().to(dtype).contiguous(), row_sums, log_probs)


def label_embedding_terms(
    z1: Optional[Tensor],
    z2: Optional[Tensor],
    e: Tensor,
    target: Tensor,
    tau: float = 2.0,
    alpha: float = 0.9,
    p: int = 1,
    two_sided_hinge: bool = False,
    mask_incorrect: bool = True,
    hard_weight: float = 1.0,
    soft_weight: float = 1.0,
) -> Dict[str, Tensor]:
    """The terms of Eq. 14, summed over rows, and the two losses they make.

    Args:
        z1: (N, C) logits of o1 (the model's output layer), or None to skip its terms.
        z2: (N, C) logits of o2 (fed detached features), or None (pre-trained embedding, Eq. 17).
        e: (N, C) label-embedding logits e_y of each row's target (the same C columns).
        target: (N,) column of each row's label in [0, C).
        tau: temperature of z2'' (Eq. 10; the paper: 2).
        alpha: hinge threshold of Eq. 12 (the paper: 0.9).
        p: 1 = the L1 hinge ``max(0, ·)`` (the paper's), 2 = its square.
        two_sided_hinge: penalise |(z2')_y - α| on both sides instead of only above α.
        mask_incorrect: the embedding term counts only rows where argmax z2 = y (Sec. 2.3).
        hard_weight, soft_weight: weights of H(y, z1') and H(e', z1') in ``o1`` (1 and 1 in Eq. 14).

    Returns:
        the values (no gradient) ``hard1`` H(y, z1') (Eq. 7), ``soft1`` H(e', z1') (Eq. 13), ``hard2``
        H(y, z2') (Eq. 8), ``hinge`` (Eq. 12), ``emb`` H(z2'', e') (Eq. 11), ``correct`` (how many rows o2
        predicted correctly, those the embedding learned from); and the differentiable losses ``o1`` =
        hard_weight·hard1 + soft_weight·soft1 (gradients reach z1 only) and ``o2`` = hard2 + hinge + emb
        (gradients reach z2 and e only).
    """
    terms: Dict[str, Tensor] = {}
    y = target.unsqueeze(-1)
    with torch.no_grad():
        log_e = torch.log_softmax(e.detach().to(_compute_dtype(e)), dim=-1)  # log e'
    if z1 is not None:
        dtype = _compute_dtype(z1)
        with torch.no_grad():
            # o1's target w_s·e' + w_h·onehot(y): e' is a constant here (Eq. 13)
            q1 = torch.exp(log_e).to(dtype)
            if soft_weight != 1.0:
                q1.mul_(soft_weight)
            q1.scatter_add_(-1, y, torch.full(y.shape, hard_weight, dtype=dtype, device=y.device))
            sums = torch.full(target.shape, soft_weight + hard_weight, dtype=dtype, device=y.device)
        z1f = z1.to(dtype).contiguous()
        with torch.no_grad():
            log_p1 = torch.log_softmax(z1f, dim=-1)
        terms["o1"] = soft_target_cross_entropy(z1f, q1, sums, log_p1)
        with torch.no_grad():
            hard1 = -log_p1.gather(-1, y).sum()
            if soft_weight > 0:
                soft1 = (terms["o1"].detach() - hard_weight * hard1) / soft_weight
            else:
                soft1 = -torch.dot(torch.exp(log_e).to(dtype).reshape(-1), log_p1.reshape(-1))
            terms.update(hard1=hard1, soft1=soft1)
    if z2 is not None:
        z2f = z2.to(_compute_dtype(z2)).contiguous()
        hard2, hinge, _ = _CrossEntropyWithHinge.apply(z2f, target, alpha, p, two_sided_hinge)
        with torch.no_grad():
            correct = z2f.argmax(-1).eq(target)
            soft2 = torch.softmax(z2f / tau, dim=-1)  # z2'' as the embedding's target: a constant (Eq. 11)
            row_sums = torch.ones(target.shape, dtype=soft2.dtype, device=soft2.device)
            if mask_incorrect:
                row_sums = correct.to(soft2.dtype)
                soft2.mul_(row_sums.unsqueeze(-1))
        emb = soft_target_cross_entropy(e, soft2, row_sums.to(log_e.dtype), log_e)
        terms["o2"] = hard2 + hinge + emb
        terms.update(hard2=hard2.detach(), hinge=hinge.detach(), emb=emb.detach(), correct=correct.sum())
    return terms


def full_embedding_bytes(num_labels: int) -> str:
    """m² fp32 numbers, human-readable (for the log line of the full form)."""
    size = 4.0 * num_labels * num_labels
    unit = int(min(4, max(0, math.log(max(size, 1), 1024))))
    return f"{size / 1024 ** unit:.1f} {['B', 'KiB', 'MiB', 'GiB', 'TiB'][unit]}"
