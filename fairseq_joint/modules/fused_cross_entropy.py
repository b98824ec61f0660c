"""The exact cross-entropy of :mod:`fairseq_joint.modules.chunked_softmax` on a CUDA GPU (``--vocab-chunk-size``).

Same loss and gradients (fairseq's label-smoothed form, with ``lse = log Σ_v exp z_v`` over the whole vocabulary)::

    loss = (1 − ε − ε_i) · (lse − z_y) + ε_i · (|V|·lse − Σ_v z_v),      ε_i = ε / (|V| − 1)
    ∂loss/∂z_v = (1 − ε − ε_i)(p_v − [v = y]) + ε_i (|V| p_v − 1)

for every output layer, ``z = g_ctx(h) · g_out(X)ᵀ + b`` (NMT Eqs. 3-15, GILE Eq. 14), the per-class or shared bias
included. The vocabulary is walked in chunks of C rows, in the order Cut Cross-Entropy walks it:

* **forward**: per chunk, the class side g_out(X_c) (σ(E_c Uᵀ + b_u) for ``label``/``joint``, the rows of E or W
  otherwise), the logits ``Z_c = g_ctx(h) g_out(X_c)ᵀ + b_c`` in one GEMM of the device's library (cuBLAS, in the
  autocast or parameter dtype, as the plain path's logits), and one fused kernel that reads Z_c once and updates each
  token's online log-sum-exp (running maximum and sum), its target logit and, with label smoothing, its sum of logits.
  Nothing of size N x |V| is kept: the backward pass needs only the N log-normalizers.
* **backward**: per chunk, Z_c again (the one recomputed GEMM, and σ(E_c Uᵀ + b_u) for a projected class side), one
  fused kernel that turns Z_c into ∂loss/∂Z_c in place (one read, one write), then ∂L/∂g_ctx(h) += G_c g_out(X_c)
  and ∂L/∂g_out(X_c) = G_cᵀ g_ctx(h) (two GEMMs accumulating in fp32), ∂L/∂b_c = Σ_tokens G_c; the class side's
  gradient flows into E, U and b_u chunk by chunk through autograd. Every row of ∂L/∂X is written once: no atomics,
  and the result does not depend on the order of the GPU's threads (seeded runs repeat exactly).

So a step costs the plain path's three logit-sized GEMMs plus one recomputed, and reads and writes each logit about
three times in 16-bit (the plain path: about ten times, partly in fp32); it holds N·C logits at a time. The kernels
are written in Triton; their correctness is tested on the CPU under ``TRITON_INTERPRET=1`` (tests/unit); their speed
is measured on a GPU by benchmarks/bench_gpu.py. Non-finite logits give what the plain path gives: NaN where
``log_softmax`` gives NaN (a +inf or NaN logit, a row of -inf), +inf for a target at -inf; tokens that are not
scored (padding) are ignored whatever their logits, as fairseq's ``label_smoothed_nll_loss`` ignores them.
"""

import functools
import logging
import os
from typing import Optional, Tuple

import torch
from torch import Tensor

from fairseq_joint.modules.softmax_terms import chunks, token_losses

logger = logging.getLogger(__name__)

#: the fused path walks the vocabulary in multiples of this many rows (aligned GEMM leading dimensions)
ROW_ALIGNMENT = 128
#: the oldest GPU generation the kernels are compiled for (Volta, compute capability 7.0)
MIN_CAPABILITY = (7, 0)
#: logits one program of the two kernels holds at a time
BLOCK = 1024


def interpreting() -> bool:
    """Whether Triton runs its kernels in its CPU interpreter (``TRITON_INTERPRET=1``: the tests on a CPU)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@functools.lru_cache(maxsize=None)
def _triton_problem() -> Optional[str]:
    try:
        import triton  # noqa: F401
    except ImportError:
        return "Triton is not installed (pip install triton; CUDA builds of torch ship it)"
    return None


#: set to 0 to keep a GPU on the CPU-tuned paths (the fused kernels off)
SWITCH = "FAIRSEQ_JOINT_FUSED"


def fused_path_problem(device: torch.device) -> Optional[str]:
    """Why the fused path cannot run on ``device`` (None: it can): switched off (:data:`SWITCH` ``=0``), not a CUDA
    device (unless Triton interprets, the tests), no Triton, or a GPU older than :data:`MIN_CAPABILITY`."""
    if os.environ.get(SWITCH, "1").strip() == "0":
        return f"{SWITCH}=0 switches it off"
    if device.type != "cuda" and not interpreting():
        return f"{device.type} is not a CUDA device"
    problem = _triton_problem()
    if problem is not None:
        return problem
    if device.type == "cuda":
        capability = torch.cuda.get_device_capability(device)
        if capability < MIN_CAPABILITY:
            return (f"{torch.cuda.get_device_name(device)} has compute capability {capability[0]}.{capability[1]}; "
                    f"the kernels need {MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]} or newer")
    return None


def fused_chunk_rows(chunk_size: int, num_classes: int) -> int:
    """The vocabulary rows per chunk the fused path walks for ``--vocab-chunk-size chunk_size``: all of them when the
    chunk covers the vocabulary, else the nearest multiple of :data:`ROW_ALIGNMENT` (at least one)."""
    if chunk_size >= num_classes:
        return num_classes
    return min(num_classes, max(ROW_ALIGNMENT, ROW_ALIGNMENT * round(chunk_size / ROW_ALIGNMENT)))


@functools.lru_cache(maxsize=None)
def _kernels():
    """The two Triton kernels, compiled on first use (importing this module does not need Triton)."""
    import triton
    import triton.language as tl

    @triton.jit
    def lse_update(z_ptr, stride_z, n_cols, col_start, max_ptr, sum_ptr, zsum_ptr, target_ptr, target_logit_ptr,
                   SMOOTH: tl.constexpr, BLOCK: tl.constexpr):
        """One token (row) of a chunk's logits: its online log-sum-exp (max, Σ exp(z − max)), its target logit if the
        target is in the chunk and, with label smoothing, its sum of logits, updated from one read of the row."""
        row = tl.program_id(0)
        z_row = z_ptr + row.to(tl.int64) * stride_z
        m = tl.load(max_ptr + row)
        s = tl.load(sum_ptr + row)
        zs = tl.load(zsum_ptr + row)
        for off in range(0, n_cols, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            inside = cols < n_cols
            z = tl.load(z_row + cols, mask=inside, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(z, axis=0))
            # a row that is -inf so far adds nothing (exp(-inf - -inf) would be NaN); NaN and +inf propagate as in
            # log_softmax: exp(NaN) and exp(inf - inf) are NaN
            dead = m_new == float("-inf")
            s = s * tl.where(dead, 1.0, tl.exp(m - m_new)) + tl.sum(tl.where(dead, 0.0, tl.exp(z - m_new)), axis=0)
            m = m_new
            if SMOOTH:
                zs += tl.sum(tl.where(inside, z, 0.0), axis=0)
        tl.store(max_ptr + row, m)
        tl.store(sum_ptr + row, s)
        if SMOOTH:
            tl.store(zsum_ptr + row, zs)
        local = tl.load(target_ptr + row) - col_start
        hit = (local >= 0) & (local < n_cols)
        z_target = tl.load(z_row + local, mask=hit, other=0.0).to(tl.float32)
        tl.store(target_logit_ptr + row, tl.where(hit, z_target, tl.load(target_logit_ptr + row)))

    @triton.jit
    def softmax_grad(z_ptr, stride_z, n_cols, col_start, lse_ptr, a_ptr, b_ptr, target_ptr, num_classes,
                     BLOCK: tl.constexpr):
        """One token (row) of a chunk's logits overwritten by ∂loss/∂z = a (p − onehot) + b (|V| p − 1), p = exp(z −
        lse); zero for a token that is not scored (target < 0)."""
        row = tl.program_id(0)
        z_row = z_ptr + row.to(tl.int64) * stride_z
        lse = tl.load(lse_ptr + row)
        a = tl.load(a_ptr)
        b = tl.load(b_ptr)
        target = tl.load(target_ptr + row)
        scale = a + b * num_classes
        local = target - col_start
        for off in range(0, n_cols, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            inside = cols < n_cols
            z = tl.load(z_row + cols, mask=inside, other=0.0).to(tl.float32)
            g = tl.exp(z - lse) * scale - b - tl.where(cols == local, a, 0.0)
            g = tl.where(target >= 0, g, 0.0)
            tl.store(z_row + cols, g.to(z_ptr.dtype.element_ty), mask=inside)

    return lse_update, softmax_grad


# ---------------------------------------------------------------------------------------------- GEMMs into fp32
@functools.lru_cache(maxsize=None)
def _mm_out_dtype_works(device_type: str) -> bool:
    """Whether ``torch.mm(..., out_dtype=torch.float32)`` multiplies 16-bit matrices into fp32 here (CUDA builds of
    recent torch do: the GEMM accumulates and writes fp32, no conversion pass)."""
    a = torch.zeros(2, 2, dtype=torch.bfloat16, device=device_type)
    try:
        return torch.mm(a, a, out_dtype=torch.float32).dtype == torch.float32
    except (TypeError, RuntimeError, NotImplementedError):
        return False


def _mm_fp32(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` in fp32 (16-bit inputs multiplied in their own dtype, accumulated and returned in fp32)."""
    if a.dtype in (torch.float16, torch.bfloat16) and _mm_out_dtype_works(a.device.type):
        return torch.mm(a, b, out_dtype=torch.float32)
    return torch.mm(a, b).float()


def _gemm_dtype(context: Tensor, autocast: Tuple[str, bool, torch.dtype]) -> torch.dtype:
    """The dtype the logits GEMMs run in: autocast's (``--amp``, as the plain path's ``F.linear``), else the features'
    own when 16-bit (``--fp16``/``--bf16``), else fp32."""
    _, enabled, dtype = autocast
    if enabled:
        return dtype
    return context.dtype if context.dtype in (torch.float16, torch.bfloat16) else torch.float32


def _chunk_logits(layer, x: Tensor, start: int, end: int, gemm: torch.dtype,
                  rows: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """``(Z_c, g_out(X_c), b_c)`` of the vocabulary rows [start, end): Z_c (N x C) in ``gemm``."""
    classes, bias = layer.class_side(span=(start, end), rows=rows)
    weight = classes.detach().to(gemm)
    if bias is None:
        logits = torch.mm(x, weight.t())
    else:
        logits = torch.addmm(bias.detach().to(gemm), x, weight.t())
    return logits, classes, bias


def _autocast_state(device_type: str) -> Tuple[str, bool, torch.dtype]:
    return device_type, torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)


def fused_log_normalizers(layer, context: Tensor, targets: Tensor, chunk_rows: int, smooth: bool,
                          autocast: Optional[Tuple[str, bool, torch.dtype]] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """``(lse, target logit, sum of logits)`` of every token (fp32; a target < 0: its logit 0), the vocabulary walked
    in chunks of ``chunk_rows`` rows: per chunk the GEMM of its logits and one read of them by the fused kernel
    (the forward pass; the per-token scores of ``chunked_softmax.exact_target_log_probs``). ``autocast``: the state
    the GEMMs run under (default: the ambient one)."""
    autocast = autocast or _autocast_state(context.device.type)
    gemm = _gemm_dtype(context, autocast)
    lse_update, _ = _kernels()
    n_tok = context.size(0)
    x = context.detach().to(gemm)
    f32 = dict(dtype=torch.float32, device=context.device)
    running_max = torch.full((n_tok,), float("-inf"), **f32)
    running_sum = torch.zeros(n_tok, **f32)
    logit_sum = torch.zeros(n_tok, **f32)
    target_logit = torch.zeros(n_tok, **f32)
    with torch.no_grad():
        for start, end in chunks(layer.num_classes, chunk_rows):
            z, _, _ = _chunk_logits(layer, x, start, end, gemm)
            lse_update[(n_tok,)](z, z.stride(0), end - start, start, running_max, running_sum, logit_sum, targets,
                                 target_logit, SMOOTH=smooth, BLOCK=BLOCK)
    return running_max + running_sum.log(), target_logit, logit_sum


class _FusedVocabCrossEntropy(torch.autograd.Function):
    """The loss walked over vocabulary chunks with the fused kernels (see the module docstring)."""

    @staticmethod
    def forward(ctx, context, targets, chunk_rows, a_coef, eps_i, layer, table, bias, *proj_params):
        autocast = _autocast_state(context.device.type)
        lse, target_logit, logit_sum = fused_log_normalizers(layer, context, targets, chunk_rows, eps_i > 0, autocast)
        loss, nll = token_losses(lse, target_logit, targets >= 0, (a_coef, eps_i), layer.num_classes, logit_sum)
        ctx.save_for_backward(context, targets, lse, table, bias, *proj_params)
        ctx.layer, ctx.chunk_rows, ctx.coefficients, ctx.autocast = layer, chunk_rows, (a_coef, eps_i), autocast
        total_nll = nll.sum()
        ctx.mark_non_differentiable(total_nll)
        return loss.sum(), total_nll

    @staticmethod
    def backward(ctx, grad_loss, _grad_nll):
        context, targets, lse, table, bias, *proj_params = ctx.saved_tensors
        layer, (a_coef, eps_i) = ctx.layer, ctx.coefficients
        device_type, amp, amp_dtype = ctx.autocast
        gemm = _gemm_dtype(context, ctx.autocast)
        _, softmax_grad = _kernels()
        num_classes = layer.num_classes
        n_tok = context.size(0)
        a = (grad_loss.float() * a_coef).reshape(1)
        b = (grad_loss.float() * eps_i).reshape(1)
        x = context.detach().to(gemm)
        projected = layer.projects_classes
        grad_context = torch.zeros(context.shape, dtype=torch.float32, device=context.device) \
            if context.requires_grad else None
        grad_table = torch.zeros_like(table) if table.requires_grad else None
        grad_bias = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) \
            if bias is not None and bias.requires_grad else None
        live = [p for p in (layer.class_weight, layer.class_bias) if p is not None]  # the graph's leaves
        grad_proj = [torch.zeros_like(p, dtype=torch.float32) if p.requires_grad else None for p in proj_params]
        wants_classes = grad_table is not None or any(g is not None for g in grad_proj)
        # the class side is recomputed as forward computed it: under forward's autocast
        with torch.autocast(device_type, dtype=amp_dtype, enabled=amp):
            for start, end in chunks(num_classes, ctx.chunk_rows):
                rows = None
                if projected:
                    rows = layer.class_table(span=(start, end)).detach().requires_grad_(grad_table is not None)
                with torch.set_grad_enabled(projected and wants_classes):
                    z, classes, _ = _chunk_logits(layer, x, start, end, gemm, rows=rows)
                softmax_grad[(n_tok,)](z, z.stride(0), end - start, start, lse, a, b, targets, float(num_classes),
                                       BLOCK=BLOCK)
                g = z  # ∂loss/∂Z_c, in place
                if grad_context is not None:
                    grad_context += _mm_fp32(g, classes.detach().to(gemm))
                if grad_bias is not None:
                    if layer.bias_mode == "shared":
                        grad_bias += g.sum(dtype=torch.float32)
                    else:
                        grad_bias[start:end] = g.sum(0, dtype=torch.float32)
                if not wants_classes:
                    continue
                grad_classes = _mm_fp32(g.t(), x)
                if not projected:
                    grad_table[start:end] = grad_classes
                    continue
                wants = [t for t in [rows] + live if t.requires_grad]
                grads = iter(torch.autograd.grad(classes, wants, grad_classes.to(classes.dtype), allow_unused=True))
                if rows.requires_grad:
                    grad_table[start:end] = next(grads)
                for i, p in enumerate(live):
                    if p.requires_grad:
                        gp = next(grads)
                        if gp is not None:
                            grad_proj[i] += gp
        out = [None if g is None else g.to(t.dtype) for g, t in zip([grad_table, grad_bias, *grad_proj],
                                                                     [table, bias, *proj_params])]
        grad_context = None if grad_context is None else grad_context.to(context.dtype)
        return (grad_context, None, None, None, None, None, *out)


def fused_cross_entropy(layer, context: Tensor, targets: Tensor, chunk_size: int,
                        coefficients: Tuple[float, float]) -> Tuple[Tensor, Tensor]:
    """``(loss_sum, nll_loss_sum)`` of the context vectors ``context`` = g_ctx(h) (N x k) of ``layer`` (an
    OutputLayer) against ``targets`` (N,; -1: not scored), walking the vocabulary in chunks of
    :func:`fused_chunk_rows` rows; ``coefficients``: (1 − ε − ε_i, ε_i). Called by
    :func:`fairseq_joint.modules.chunked_softmax.chunked_cross_entropy`, which checks the options and picks the path."""
    table = layer.class_table()
    proj = [p for p in (layer.class_weight, layer.class_bias) if p is not None]
    rows = fused_chunk_rows(chunk_size, layer.num_classes)
    loss, nll = _FusedVocabCrossEntropy.apply(context, targets, rows, float(coefficients[0]), float(coefficients[1]),
                                              layer, table, layer.bias, *proj)
    return loss, nll.detach()
