"""Exact cross-entropy over the full vocabulary without the N x |V| logits (``--vocab-chunk-size``).

The forward pass walks the vocabulary in chunks of rows, keeping per token only an online log-sum-exp,
the target logit and (for label smoothing) the sum of logits; the backward pass recomputes each chunk's
class side g_out (e.g. σ(E Uᵀ + b_u) of Eq. 14, the expensive part for ``joint``) and logits, forms
the chunk's gradient ``∂L/∂z`` and pushes it into the context side, the rows of E (or W), the class-side
projection and the bias. Peak memory is O(N · chunk + chunk · k) instead of O(N · |V| + |V| · k): the idea
of Cut Cross-Entropy (Wijmans et al. 2024) and Liger's fused linear cross-entropy, for every output layer.

Loss (fairseq's label-smoothed form, = plain cross-entropy when ε = 0), per non-ignored token with
``lse = log Σ_v exp z_v``, ``nll = lse − z_y``, ``smooth = |V|·lse − Σ_v z_v``, ``ε_i = ε / (|V| − 1)``::

    loss = (1 − ε − ε_i) · nll + ε_i · smooth
"""

from typing import Tuple

import torch
from torch import Tensor


def check_chunk_size(chunk_size) -> None:
    """``--vocab-chunk-size``: a positive number of vocabulary rows."""
    if chunk_size is None or chunk_size <= 0:
        raise ValueError(f"--vocab-chunk-size must be a positive number of vocabulary rows, got {chunk_size}")


def _chunks(n: int, size: int):
    for start in range(0, n, size):
        yield start, min(start + size, n)


class _ChunkedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, context, targets, chunk_size, epsilon, layer, table, bias, *proj_params):
        n_tok, num_classes = context.size(0), layer.num_classes
        valid = targets >= 0
        safe_targets = targets.clamp(min=0)
        acc = torch.promote_types(context.dtype, torch.float32)  # fp16/bf16 features accumulate in fp32
        ctx_f = context.to(acc)
        lse = torch.full((n_tok,), float("-inf"), device=context.device, dtype=acc)
        target_logit = torch.zeros(n_tok, device=context.device, dtype=acc)
        logit_sum = torch.zeros(n_tok, device=context.device, dtype=acc)
        with torch.no_grad():
            for start, end in _chunks(num_classes, chunk_size):
                z = _chunk_logits(layer, ctx_f, start, end)
                lse = torch.logaddexp(lse, torch.logsumexp(z, dim=-1))
                if epsilon > 0:
                    logit_sum += z.sum(-1)
                inside = (safe_targets >= start) & (safe_targets < end)
                if inside.any():
                    rows = inside.nonzero().squeeze(-1)
                    target_logit[rows] = z[rows, safe_targets[rows] - start]
        nll = (lse - target_logit) * valid
        eps_i = epsilon / (num_classes - 1) if epsilon > 0 else 0.0
        smooth = (num_classes * lse - logit_sum) * valid
        loss = (1.0 - epsilon - eps_i) * nll + eps_i * smooth
        ctx.save_for_backward(context, targets, table, bias, lse, *proj_params)
        ctx.layer, ctx.chunk_size, ctx.epsilon, ctx.eps_i = layer, chunk_size, epsilon, eps_i
        return loss.sum(), nll.sum()

    @staticmethod
    def backward(ctx, grad_loss, grad_nll):
        context, targets, table, bias, lse, *proj_params = ctx.saved_tensors
        layer, eps, eps_i = ctx.layer, ctx.epsilon, ctx.eps_i
        num_classes = layer.num_classes
        acc = lse.dtype
        valid = (targets >= 0).to(acc)
        safe_targets = targets.clamp(min=0)
        # dL/dz_v = a·(p_v − 1[v=y]) + b·(|V|·p_v − 1) per token, with a, b from the two outputs
        a = (grad_loss * (1.0 - eps - eps_i) + grad_nll) * valid
        b = grad_loss * eps_i * valid
        ctx_f = context.detach().to(acc)
        grad_context = torch.zeros_like(ctx_f)
        grad_table = torch.zeros_like(table) if table.requires_grad else None
        grad_bias = torch.zeros_like(bias) if bias is not None and bias.requires_grad else None
        grad_proj = [torch.zeros_like(p) if p.requires_grad else None for p in proj_params]
        for start, end in _chunks(num_classes, ctx.chunk_size):
            rows = layer.class_table(span=(start, end)).detach().requires_grad_(table.requires_grad)
            with torch.enable_grad():
                classes, bias_c = layer.class_side(span=(start, end), rows=rows)
            classes_f = classes.detach().to(acc)
            z = ctx_f @ classes_f.t()
            if bias_c is not None:
                z = z + bias_c.detach().to(acc)
            p = torch.exp(z - lse.unsqueeze(-1))
            g = p * (a + b * num_classes).unsqueeze(-1) - b.unsqueeze(-1)
            inside = (safe_targets >= start) & (safe_targets < end)
            if inside.any():
                r = inside.nonzero().squeeze(-1)
                g[r, safe_targets[r] - start] -= a[r]
            grad_context += g @ classes_f
            if grad_bias is not None:
                if layer.bias_mode == "shared":
                    grad_bias += g.sum()
                else:
                    grad_bias[start:end] += g.sum(0).to(grad_bias.dtype)
            grad_classes = (g.t() @ ctx_f).to(classes.dtype)
            live = [p for p in (layer.class_weight, layer.class_bias) if p is not None]  # the graph's leaves
            wants = [t for t in [rows] + live if t.requires_grad]
            if wants and classes.requires_grad:
                grads = torch.autograd.grad(classes, wants, grad_classes, allow_unused=True)
                it = iter(grads)
                if rows.requires_grad:
                    grad_table[start:end] += next(it)
                for i, p in enumerate(live):
                    if p.requires_grad:
                        gp = next(it)
                        if gp is not None:
                            grad_proj[i] += gp
        return (grad_context.to(context.dtype), None, None, None, None, grad_table, grad_bias, *grad_proj)


def _chunk_logits(layer, ctx_f, start, end):
    classes, bias_c = layer.class_side(span=(start, end))
    z = ctx_f @ classes.to(ctx_f.dtype).t()
    return z if bias_c is None else z + bias_c.to(ctx_f.dtype)


def chunked_cross_entropy(output_layer, features: Tensor, targets: Tensor, chunk_size: int,
                          ignore_index: int = -100, label_smoothing: float = 0.0) -> Tuple[Tensor, Tensor]:
    """``(loss_sum, nll_loss_sum)`` of ``features`` (N x dh) against ``targets`` (N,) over the full
    vocabulary of ``output_layer`` (an OutputLayer), without materialising N x |V| logits.

    Targets equal to ``ignore_index`` are not scored. Gradients reach ``features`` (through the context
    side g_ctx, computed once, dropout included), the class table (E or W), the class-side projection and b.
    """
    check_chunk_size(chunk_size)
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"--label-smoothing must be in [0, 1), got {label_smoothing}")
    targets = targets.reshape(-1)
    targets = torch.where(targets == ignore_index, torch.full_like(targets, -1), targets)
    context = output_layer.encode_context(features.reshape(-1, features.size(-1)))
    table = output_layer.class_table()
    proj = [p for p in (output_layer.class_weight, output_layer.class_bias) if p is not None]
    return _ChunkedCrossEntropy.apply(context, targets, int(chunk_size), float(label_smoothing), output_layer,
                                      table, output_layer.bias, *proj)
