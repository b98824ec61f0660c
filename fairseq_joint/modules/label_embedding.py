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

LABEL_EMBEDDING_TERMS = ("hard1", "soft1", "hard2", "hinge", "emb")


class LabelEmbedding(nn.Module):
    """e_y for labels y: ``full`` (Eq. 5, identity init) when ``dim`` is None, else ``compressed`` (Eq. 16).

    Args:
        num_labels: m.
        dim: h of the compressed form (A ∈ R^{m x h}, B ∈ R^{h x m}); None = the full m x m matrix.
    """

    def __init__(self, num_labels: int, dim: Optional[int] = None):
        super().__init__()
        if num_labels <= 0:
            raise ValueError(f"the label embedding needs at least one label, got {num_labels}")
        if dim is not None and dim <= 0:
            raise ValueError(f"--label-embedding-dim must be positive (or 0 for the full m x m embedding), got {dim}")
        self.num_labels = num_labels
        self.dim = dim
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
    """``Σ_r -Σ_j q_rj log softmax(z_r)_j`` for a constant target q (rows may sum to any s_r), and the row
    log-sum-exps. Fused: log softmax(z) is never stored; the gradient is ``s_r softmax(z_r) - q_r``."""

    @staticmethod
    def forward(ctx, z, q):
        lse = torch.logsumexp(z, dim=-1)
        s = q.sum(-1)
        loss = (s * lse).sum() - torch.dot(q.reshape(-1), z.reshape(-1))
        ctx.save_for_backward(z, q, lse, s)
        ctx.mark_non_differentiable(lse)
        return loss, lse

    @staticmethod
    def backward(ctx, grad_loss, _grad_lse):
        z, q, lse, s = ctx.saved_tensors
        grad = torch.sub(z, lse.unsqueeze(-1)).exp_().mul_(s.unsqueeze(-1)).sub_(q)
        return grad.mul_(grad_loss), None


def soft_target_cross_entropy(z: Tensor, q: Tensor):
    """(loss, lse): ``H(q, softmax(z))`` summed over rows, q a constant (detached) target; see above."""
    dtype = torch.promote_types(z.dtype, torch.float32)
    return _SoftTargetCrossEntropy.apply(z.to(dtype).contiguous(), q.detach().to(dtype).contiguous())


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
    if p not in (1, 2):
        raise ValueError(f"--label-embedding-hinge-p must be 1 or 2, got {p}")
    terms: Dict[str, Tensor] = {}
    y = target.unsqueeze(-1)
    if z1 is not None:
        with torch.no_grad():
            dtype = torch.promote_types(z1.dtype, torch.float32)
            e_target = F.softmax(e.to(dtype), dim=-1)  # e' as o1's target: a constant (Eq. 13)
            q1 = (e_target * soft_weight).scatter_add_(-1, y, torch.full(y.shape, hard_weight, dtype=dtype, device=y.device))
        terms["o1"], lse1 = soft_target_cross_entropy(z1, q1)
        with torch.no_grad():
            z1f = z1.to(dtype)
            terms["hard1"] = (lse1 - z1f.gather(-1, y).squeeze(-1)).sum()
            terms["soft1"] = lse1.sum() - torch.dot(e_target.reshape(-1), z1f.reshape(-1))
    if z2 is not None:
        z2f = z2.to(torch.promote_types(z2.dtype, torch.float32))
        lse2 = torch.logsumexp(z2f, dim=-1)
        z2_y = z2f.gather(-1, y).squeeze(-1)
        hard2 = (lse2 - z2_y).sum()
        p_y = torch.exp(z2_y - lse2)
        gap = (p_y - alpha).abs() if two_sided_hinge else F.relu(p_y - alpha)
        hinge = gap.sum() if p == 1 else gap.pow(2).sum()
        with torch.no_grad():
            correct = z2f.argmax(-1).eq(target)
            soft2 = F.softmax(z2f / tau, dim=-1)  # z2'' as the embedding's target: a constant (Eq. 11)
            if mask_incorrect:
                soft2.mul_(correct.unsqueeze(-1).to(soft2.dtype))
        emb, _ = soft_target_cross_entropy(e, soft2)
        terms["o2"] = hard2 + hinge + emb
        terms.update(hard2=hard2.detach(), hinge=hinge.detach(), emb=emb.detach(), correct=correct.sum())
    return terms


def full_embedding_bytes(num_labels: int) -> str:
    """m² fp32 numbers, human-readable (for the log line of the full form)."""
    size = 4.0 * num_labels * num_labels
    unit = int(min(4, max(0, math.log(max(size, 1), 1024))))
    return f"{size / 1024 ** unit:.1f} {['B', 'KiB', 'MiB', 'GiB', 'TiB'][unit]}"
