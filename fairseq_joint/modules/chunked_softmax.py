"""Exact cross-entropy over the full vocabulary without the N x |V| logits (``--vocab-chunk-size``).

Loss (fairseq's label-smoothed form, = plain cross-entropy when ε = 0), per non-ignored token with
``lse = log Σ_v exp z_v``, ``nll = lse − z_y``, ``smooth = |V|·lse − Σ_v z_v``, ``ε_i = ε / (|V| − 1)``::

    loss = (1 − ε − ε_i) · nll + ε_i · smooth,      ∂loss/∂z_v = (1 − ε − ε_i)(p_v − [v = y]) + ε_i (|V| p_v − 1)

On a CUDA GPU with Triton the loss runs fused (:mod:`fairseq_joint.modules.fused_cross_entropy`: vocabulary chunks
through the GPU's GEMMs, two fused kernels for the log-sum-exp and the gradient). On the CPU (and on a GPU without the
kernels, after one notice that says why) two exact paths tuned for the CPU's caches, chosen by
:func:`chunked_cross_entropy`:

* **tokens** (every layer whose class side g_out(X) is a plain matrix — ``softmax``, ``tied``, ``bilinear``,
  ``context`` — and ``label``/``joint`` when the projected classes σ(E Uᵀ + b_u) and their gradient fit in the
  memory of a few logit chunks): the class matrix C (|V| x k) is formed once; the tokens are walked in chunks, and
  each chunk's logits, log-sum-exp, loss and gradients (∂L/∂ g_ctx(h), ∂L/∂C, ∂L/∂b) are computed in the forward
  pass, as Liger's fused linear cross-entropy and torch's ``linear_cross_entropy`` do: the same GEMMs as the plain
  path and no recomputation; backward only scales the stored gradients. C's gradient then flows through the class
  projection by autograd (E, U, b_u).
* **vocabulary** (``label``/``joint`` whose |V| x k class side is too large to hold, e.g. dj = 4096 at 128K): the
  vocabulary is walked in chunks of rows; the forward pass keeps per token only an online log-sum-exp, the target
  logit and the sum of logits; the gradient of a chunk's class side needs every token's final log-normalizer, so the
  backward pass recomputes each chunk's σ(E Uᵀ + b_u) and logits (one extra logits GEMM: the price of memory
  O(N · chunk + chunk · k), Cut Cross-Entropy's trade-off).

All three keep the logits of at most ``N · chunk`` numbers at a time, accumulate log-sum-exp, loss and gradients in fp32
(fp16/bf16 features on CUDA multiply in their own dtype; on the CPU everything runs in fp32), and never synchronize
with the host. Without autograd (validation) only the loss is computed.
"""

import logging
from typing import Optional, Tuple

import torch
from torch import Tensor

from fairseq_joint.modules.fused_cross_entropy import (
    ROW_ALIGNMENT,
    fused_chunk_rows,
    fused_cross_entropy,
    fused_log_normalizers,
    fused_path_problem,
)
from fairseq_joint.modules.softmax_terms import chunks, coefficients, token_losses

logger = logging.getLogger(__name__)

#: the token path holds C and ∂L/∂C (2·|V|·k numbers) for a projected class side when that is at most this many
#: logit chunks (N·chunk numbers each)
CLASS_SIDE_CHUNKS = 4


def _dtypes(t: Tensor) -> Tuple[torch.dtype, torch.dtype]:
    """(accumulation dtype, GEMM dtype): fp32 (fp64 stays fp64) for reductions; GEMMs in fp16/bf16 only on CUDA."""
    acc = torch.promote_types(t.dtype, torch.float32)
    gemm = t.dtype if t.is_cuda and t.dtype in (torch.float16, torch.bfloat16) else acc
    return acc, gemm


class _TokenChunkedCrossEntropy(torch.autograd.Function):
    """The loss of ``context @ classesᵀ + bias`` walked over chunks of tokens, gradients computed in forward."""

    @staticmethod
    def forward(ctx, context, classes, bias, targets, token_chunk, epsilon, grad):
        acc, gemm = _dtypes(context)
        num_classes = classes.size(0)
        a_coef, eps_i = coefficients(epsilon, num_classes)
        need = [context.requires_grad, classes.requires_grad, bias is not None and bias.requires_grad]
        grad = grad and any(need)
        valid = targets >= 0
        safe = targets.clamp(min=0)
        c_mat = classes.detach().to(gemm)
        b_vec = bias.detach().to(acc) if bias is not None else None
        loss = torch.zeros((), dtype=acc, device=context.device)
        nll = torch.zeros((), dtype=acc, device=context.device)
        grad_context = torch.empty(context.shape, dtype=acc, device=context.device) if grad and need[0] else None
        grad_classes = torch.zeros(classes.shape, dtype=acc, device=context.device) if grad and need[1] else None
        grad_bias = torch.zeros(num_classes, dtype=acc, device=context.device) if grad and need[2] else None
        with torch.autocast(context.device.type, enabled=False):
            for start, end in chunks(context.size(0), token_chunk):
                x = context[start:end].detach().to(gemm)
                z = x @ c_mat.t() if b_vec is None else torch.addmm(b_vec.to(gemm), x, c_mat.t())
                z = z.to(acc)
                scored = valid[start:end]
                ok = scored.to(acc)
                t = safe[start:end].unsqueeze(-1)
                z_y = z.gather(-1, t).squeeze(-1)
                z_sum = z.sum(-1) if eps_i else None
                # one pass for exp: z <- exp(z - max), then lse = max + log Σ, and softmax = z / Σ
                top = z.amax(-1, keepdim=True)
                z.sub_(top).exp_()
                total = z.sum(-1)
                lse = top.squeeze(-1) + total.log()
                token_loss, token_nll = token_losses(lse, z_y, scored, (a_coef, eps_i), num_classes, z_sum)
                nll += token_nll.sum()
                loss += token_loss.sum()
                if not grad:
                    continue
                # z becomes ∂loss/∂z in place: a (p − onehot) + b (|V| p − 1), zero on ignored tokens
                z.mul_((ok * (a_coef + eps_i * num_classes) / total).unsqueeze(-1))
                if eps_i:
                    z.sub_((ok * eps_i).unsqueeze(-1))
                z.scatter_add_(-1, t, (-a_coef * ok).unsqueeze(-1))
                z.masked_fill_(~scored.unsqueeze(-1), 0.0)
                g = z.to(gemm)
                if grad_context is not None:
                    torch.mm(g, c_mat, out=grad_context[start:end]) if gemm == acc else \
                        grad_context[start:end].copy_(g @ c_mat)
                if grad_classes is not None:
                    if gemm == acc:
                        grad_classes.addmm_(g.t(), x)
                    else:
                        grad_classes += (g.t() @ x).to(acc)
                if grad_bias is not None:
                    grad_bias += z.sum(0)
        ctx.grads = (grad_context, grad_classes, grad_bias)
        ctx.dtypes = (context.dtype, classes.dtype, bias.dtype if bias is not None else None)
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss, _grad_nll):
        if ctx.grads is None:
            raise RuntimeError("the chunked cross-entropy's gradients were used already: call backward once per "
                               "forward")
        out = []
        for g, dtype in zip(ctx.grads, ctx.dtypes):  # scaled in place (fp16 loss scaling, a weighted loss)
            out.append(None if g is None else g.mul_(grad_loss.to(g.dtype)).to(dtype))
        ctx.grads = None
        return out[0], out[1], out[2], None, None, None, None


def vocabulary_log_normalizers(layer, context: Tensor, targets: Tensor, chunk_size: int,
                               smooth: bool) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """``(lse, target logit, sum of logits or None)`` of every token (fp32; a target < 0: its logit 0), the vocabulary
    walked in chunks of ``chunk_size`` rows on the CPU (each chunk's class side computed, its logits reduced, dropped):
    the vocabulary path's forward and the per-token scores of :func:`exact_target_log_probs`."""
    n_tok = context.size(0)
    acc, gemm = _dtypes(context)
    safe = targets.clamp(min=0)
    x = context.detach().to(gemm)
    lse = torch.full((n_tok,), float("-inf"), device=context.device, dtype=acc)
    target_logit = torch.zeros(n_tok, device=context.device, dtype=acc)
    logit_sum = torch.zeros(n_tok, device=context.device, dtype=acc) if smooth else None
    with torch.no_grad(), torch.autocast(context.device.type, enabled=False):
        for start, end in chunks(layer.num_classes, chunk_size):
            classes, bias_c = layer.class_side(span=(start, end))
            z = (x @ classes.to(gemm).t()).to(acc)
            if bias_c is not None:
                z += bias_c.to(acc)
            chunk_lse = torch.logsumexp(z, dim=-1)
            # a +inf logit makes log_softmax NaN (inf - inf); torch's logsumexp gives +inf: NaN, as log_softmax
            lse = torch.logaddexp(lse, torch.where(chunk_lse == float("inf"), float("nan"), chunk_lse))
            if smooth:
                logit_sum += z.sum(-1)
            inside = (safe >= start) & (safe < end)
            local = (safe - start).clamp(0, end - start - 1).unsqueeze(-1)
            target_logit += torch.where(inside, z.gather(-1, local).squeeze(-1), 0.0)
    return lse, target_logit, logit_sum


class _VocabChunkedCrossEntropy(torch.autograd.Function):
    """The loss walked over chunks of vocabulary rows; backward recomputes each chunk's class side and logits."""

    @staticmethod
    def forward(ctx, context, targets, chunk_size, epsilon, layer, table, bias, *proj_params):
        lse, target_logit, logit_sum = vocabulary_log_normalizers(layer, context, targets, chunk_size, epsilon > 0)
        loss, nll = token_losses(lse, target_logit, targets >= 0, coefficients(epsilon, layer.num_classes),
                                 layer.num_classes, logit_sum)
        ctx.save_for_backward(context, targets, table, bias, lse, *proj_params)
        ctx.layer, ctx.chunk_size, ctx.epsilon = layer, chunk_size, epsilon
        return loss.sum(), nll.sum()

    @staticmethod
    def backward(ctx, grad_loss, grad_nll):
        context, targets, table, bias, lse, *proj_params = ctx.saved_tensors
        layer = ctx.layer
        num_classes = layer.num_classes
        acc, gemm = _dtypes(context)
        a_coef, eps_i = coefficients(ctx.epsilon, num_classes)
        scored = targets >= 0
        valid = scored.to(acc)
        safe = targets.clamp(min=0)
        # ∂L/∂z_v = a·(p_v − 1[v=y]) + b·(|V|·p_v − 1) per token, with a, b from the two outputs
        a = (grad_loss.to(acc) * a_coef + grad_nll.to(acc)) * valid
        b = grad_loss.to(acc) * eps_i * valid
        x = context.detach().to(gemm)
        grad_context = torch.zeros(context.shape, dtype=acc, device=context.device)
        grad_table = torch.zeros_like(table, dtype=acc) if table.requires_grad else None
        grad_bias = torch.zeros(bias.shape, dtype=acc, device=bias.device) \
            if bias is not None and bias.requires_grad else None
        grad_proj = [torch.zeros_like(p, dtype=acc) if p.requires_grad else None for p in proj_params]
        live = [p for p in (layer.class_weight, layer.class_bias) if p is not None]  # the graph's leaves
        with torch.autocast(context.device.type, enabled=False):
            for start, end in chunks(num_classes, ctx.chunk_size):
                rows = layer.class_table(span=(start, end)).detach().requires_grad_(table.requires_grad)
                with torch.enable_grad():
                    classes, bias_c = layer.class_side(span=(start, end), rows=rows)
                c_mat = classes.detach().to(gemm)
                z = (x @ c_mat.t()).to(acc)
                if bias_c is not None:
                    z += bias_c.detach().to(acc)
                g = z.sub_(lse.unsqueeze(-1)).exp_().mul_((a + b * num_classes).unsqueeze(-1)).sub_(b.unsqueeze(-1))
                inside = ((safe >= start) & (safe < end)).to(acc)
                local = (safe - start).clamp(0, end - start - 1).unsqueeze(-1)
                g.scatter_add_(-1, local, (-a * inside).unsqueeze(-1))
                g.masked_fill_(~scored.unsqueeze(-1), 0.0)  # an ignored token: no gradient, whatever its logits
                g_mm = g.to(gemm)
                grad_context += (g_mm @ c_mat).to(acc)
                if grad_bias is not None:
                    if layer.bias_mode == "shared":
                        grad_bias += g.sum()
                    else:
                        grad_bias[start:end] += g.sum(0)
                grad_classes = (g_mm.t() @ x).to(classes.dtype)
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
        cast = [None if g is None else g.to(t.dtype) for g, t in zip([grad_table, grad_bias, *grad_proj],
                                                                      [table, bias, *proj_params])]
        return (grad_context.to(context.dtype), None, None, None, None, *cast)


def token_chunk_size(num_tokens: int, num_classes: int, chunk_size: int) -> int:
    """Tokens per chunk that keep the logits at N · ``chunk_size`` numbers, as ``chunk_size`` vocabulary rows do."""
    return max(1, (num_tokens * chunk_size) // max(1, num_classes))


def uses_token_chunks(layer, num_tokens: int, chunk_size: int) -> bool:
    """The token path for a plain class side, and for a projected one whose C and ∂L/∂C fit in
    :data:`CLASS_SIDE_CHUNKS` logit chunks; the vocabulary path otherwise (see the module docstring)."""
    if not layer.projects_classes:
        return True
    return 2 * layer.num_classes * layer.joint_dim <= CLASS_SIDE_CHUNKS * num_tokens * min(chunk_size, layer.num_classes)


#: the notices :func:`exact_softmax_path` gave in this process (each is said once)
_said = set()


def _notice(message: str) -> None:
    if message not in _said:
        _said.add(message)
        logger.info(message)


def exact_softmax_path(layer, device: torch.device, num_tokens: int, chunk_size: int) -> str:
    """Which exact path runs (:func:`chunked_cross_entropy`): ``fused`` on a CUDA GPU the kernels of
    :mod:`fairseq_joint.modules.fused_cross_entropy` run on, else ``tokens`` or ``vocabulary`` (the CPU paths,
    :func:`uses_token_chunks`); on a GPU a notice says once which path runs and why."""
    if device.type == "cuda":
        problem = fused_path_problem(device)
        if problem is None:
            rows = fused_chunk_rows(chunk_size, layer.num_classes)
            _notice(f"the exact softmax in chunks of {chunk_size} vocabulary rows runs fused on {device}"
                    + ("" if rows in (chunk_size, layer.num_classes) else
                       f", in chunks of {rows} (the nearest multiple of {ROW_ALIGNMENT}: aligned GEMMs)"))
            return "fused"
    path = "tokens" if uses_token_chunks(layer, num_tokens, chunk_size) else "vocabulary"
    if device.type == "cuda":
        _notice(f"the exact softmax in chunks of {chunk_size} vocabulary rows runs the CPU-tuned {path} path on "
                f"{device}, not the fused GPU path: {problem}")
    return path


def exact_target_log_probs(output_layer, features: Tensor, targets: Tensor, chunk_size: int) -> Tensor:
    """log p(y | h) of every token (``features`` (..., dh) against ``targets`` (...); no gradient) over the full
    vocabulary with the memory of ``chunk_size`` vocabulary rows: the forward pass of the path
    :func:`exact_softmax_path` picks (the fused kernels on a GPU, the vocabulary walk on the CPU), without the N x |V|
    logits (fairseq-generate --score-reference, the ``exact_scores`` patch)."""
    shape = targets.shape
    targets = targets.reshape(-1)
    with torch.no_grad():
        context = output_layer.encode_context(features.reshape(-1, features.size(-1)))
        if exact_softmax_path(output_layer, context.device, context.size(0), chunk_size) == "fused":
            rows = fused_chunk_rows(chunk_size, output_layer.num_classes)
            lse, target_logit, _ = fused_log_normalizers(output_layer, context, targets, rows, smooth=False)
        else:
            lse, target_logit, _ = vocabulary_log_normalizers(output_layer, context, targets, chunk_size, smooth=False)
    return (target_logit - lse).view(shape)


def chunked_cross_entropy(output_layer, features: Tensor, targets: Tensor, chunk_size: int,
                          ignore_index: int = -100, label_smoothing: float = 0.0,
                          path: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """``(loss_sum, nll_loss_sum)`` of ``features`` (N x dh) against ``targets`` (N,) over the full
    vocabulary of ``output_layer`` (an OutputLayer), without materialising N x |V| logits: on a CUDA GPU with
    Triton in vocabulary chunks with fused kernels (:mod:`fairseq_joint.modules.fused_cross_entropy`), on the CPU
    by the paths of the module docstring.

    Targets equal to ``ignore_index`` are not scored. Gradients reach ``features`` (through the context
    side g_ctx, computed once, dropout included), the class table (E or W), the class-side projection and b;
    ``nll_loss_sum`` is for logging (no gradient). ``path``: ``"fused"``, ``"tokens"`` or ``"vocabulary"`` to force
    one (tests); by default :func:`exact_softmax_path` decides.
    """
    targets = targets.reshape(-1)
    targets = torch.where(targets == ignore_index, torch.full_like(targets, -1), targets)
    # a target id outside the vocabulary is a bug of the data or the caller: stop, on the device (no host wait)
    torch._assert_async(targets.lt(output_layer.num_classes).all(), "a target id is not in the vocabulary")
    context = output_layer.encode_context(features.reshape(-1, features.size(-1)))
    n_tok = context.size(0)
    if path is None:
        path = exact_softmax_path(output_layer, context.device, n_tok, chunk_size)
    if path == "fused":
        return fused_cross_entropy(output_layer, context, targets, chunk_size,
                                   coefficients(float(label_smoothing), output_layer.num_classes))
    if path == "tokens":
        classes, bias = output_layer.class_side()
        chunk = token_chunk_size(n_tok, output_layer.num_classes, chunk_size)
        return _TokenChunkedCrossEntropy.apply(context, classes, bias, targets, chunk, float(label_smoothing),
                                               torch.is_grad_enabled())
    if path != "vocabulary":
        raise ValueError(f"chunked cross-entropy path must be 'fused', 'tokens' or 'vocabulary', got {path!r}")
    table = output_layer.class_table()
    proj = [p for p in (output_layer.class_weight, output_layer.class_bias) if p is not None]
    loss, nll = _VocabChunkedCrossEntropy.apply(context, targets, int(chunk_size), float(label_smoothing),
                                                output_layer, table, output_layer.bias, *proj)
    return loss, nll.detach()
