"""Structure-aware output layers (Pappas, Miculicich & Henderson 2018; Pappas & Henderson 2019).

Every output layer of the papers is one bilinear score between a *class side* and a *context side*::

    logits = g_ctx(h) · g_out(X)ᵀ + b

where X holds the raw class vectors (the rows of the shared target embedding E for NMT, the mean word
vectors of label descriptions for GILE, or free weights for the plain softmax) and g_out / g_ctx are
either the identity, a linear map, or an activated affine map. The named presets below are just
configurations of that one formula:

=========  ===============================  ===============  ==========================================
name       logits                           paper            class side g_out / context side g_ctx
=========  ===============================  ===============  ==========================================
softmax    Wᵀh + b                          NMT Eq. 3        free rows W / identity
tied       E h + b                          NMT Eq. 4        E / identity            (needs d = dh)
bilinear   E W h + b                        NMT Eq. 6        E / W h
label      σ(E W) h + b                     NMT Eq. 7a       σ(E W) / identity
context    E σ(W h) + b                     NMT Eq. 7b       E / σ(W h)
joint      σ(E Uᵀ + b_u) σ(V h + b_v) + b   NMT Eqs. 12-15   σ(E Uᵀ + b_u) / σ(V h + b_v)
=========  ===============================  ===============  ==========================================

GILE (2019, Eq. 14) is ``joint`` with a joint-space scale vector w (``context_scale``) and one scalar bias
shared by all labels (``bias="shared"``); its degenerate form (identity σ, one projection the identity,
zero biases) is the bilinear ``E V h`` of GILE Eq. 18, and NMT-joint's is weight tying (NMT Eq. 18).

The layer scores either the whole vocabulary or a subset of candidate ids; only the class rows that are
scored are projected (and so only they receive gradients). In eval mode without autograd the projected
full class matrix g_out(X) is cached and refreshed whenever a parameter it depends on changes (optimizer
step, ``load_state_dict``, ``.half()``/``.to()``), so beam search does not recompute it per step.

This module knows nothing of fairseq's registries.
"""

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.modules.fairseq_dropout import FairseqDropout
from torch import Tensor

from fairseq_joint.errors import CheckpointError, InputError, OptionError
from fairseq_joint.options import check_choice

OUTPUT_LAYER_CHOICES = ("softmax", "tied", "bilinear", "label", "context", "joint")
ACTIVATION_CHOICES = ("tanh", "relu", "sigmoid", "identity")
INIT_CHOICES = ("fairseq", "uniform", "identity")
BIAS_CHOICES = ("per_class", "shared", "none")
#: the defaults of the ``--output-layer`` options (fairseq_joint.models.output_layer_model takes them from here)
DEFAULT_JOINT_DIM = 512
DEFAULT_ACTIVATION = "tanh"
DEFAULT_INIT = "fairseq"

#: projection kinds for either side: no projection, a linear map, or an activated affine map
_NONE, _LINEAR, _NONLINEAR = "none", "linear", "nonlinear"

#: preset name -> (class-side projection, context-side projection, projections carry a bias)
PRESETS: Dict[str, Tuple[str, str, bool]] = {
    "softmax": (_NONE, _NONE, False),
    "tied": (_NONE, _NONE, False),
    "bilinear": (_NONE, _LINEAR, False),
    "label": (_NONLINEAR, _NONE, False),
    "context": (_NONE, _NONLINEAR, False),
    "joint": (_NONLINEAR, _NONLINEAR, True),
}

PAPER_EQUATION = {
    "softmax": "Eq. 3",
    "tied": "Eq. 4",
    "bilinear": "Eq. 6",
    "label": "Eq. 7a",
    "context": "Eq. 7b",
    "joint": "Eqs. 14-15",
}


#: std of the rows beyond the identity block, relative to fairseq's in^-1/2 (see :func:`identity_init_`)
IDENTITY_EXTRA_ROW_SCALE = 0.001


def identity_init_(weight: Tensor, extra_row_scale: float = IDENTITY_EXTRA_ROW_SCALE) -> Tensor:
    """An (out x in) weight as the rectangular identity: row i < min(out, in) is the unit vector e_i.

    Rows beyond ``in`` (a joint space or layer wider than its input) cannot copy an input coordinate. They
    start random with std ``extra_row_scale`` x fairseq's in^-1/2: by default small (0.1%), so they barely
    change the starting scores. Zeros there would be dead for ever (ReLU's gradient at 0 is 0).
    """
    out_dim, in_dim = weight.shape
    with torch.no_grad():
        nn.init.eye_(weight)
        if out_dim > in_dim:
            weight[in_dim:].normal_(0.0, extra_row_scale * in_dim ** -0.5)
    return weight


def _identity(x: Tensor) -> Tensor:
    return x


#: the non-linearities σ of Eqs. 7, 12-13 by name
ACTIVATIONS: Dict[str, Callable[[Tensor], Tensor]] = {"tanh": torch.tanh, "relu": torch.relu, "sigmoid": torch.sigmoid,
                                                      "identity": _identity}


def _probe(t: Tensor) -> Tensor:
    """A fingerprint of ``t``'s values for the eval cache: each row's dot product with a fixed vector r of distinct
    positive weights (a 1-d tensor: itself), so that a change of any entry changes its row's value."""
    if t.dim() < 2:
        return t.detach().clone()
    rows = t.detach().reshape(t.size(0), -1)
    return rows @ torch.linspace(1.0, 2.0, rows.size(1), dtype=rows.dtype, device=rows.device)


@dataclass(frozen=True)
class OutputLayerSpec:
    """What an :class:`OutputLayer` is, apart from its sizes: a preset and its settings, its names checked here (the
    numbers are the options' own, checked with them: ``--joint-dim``, ``--joint-dropout``).

    Args:
        kind: preset name, one of :data:`OUTPUT_LAYER_CHOICES` (the module docstring's table).
        joint_dim: dj >= 1, the joint-space size when both sides project (``joint``; Eq. 16 capacity).
        activation: σ of Eqs. 7 and 12-13 (``tanh`` in the paper).
        bias: ``per_class`` (the b ∈ R^|V| of Eqs. 3-14), ``shared`` (one scalar, GILE Eq. 11) or ``none``.
        context_scale: multiply the context side by a learned w ∈ R^k (GILE Eq. 11/14).
        dropout: dropout in [0, 1) applied to the context side in the joint space during training.
        init: ``fairseq`` (N(0, fan_in^-1/2) weights, zero biases, as fairseq's output projection) or
            ``uniform`` (U(-0.1, 0.1) for every parameter, as the original NMT-joint code) or ``identity``
            (the projections U, V, W start as rectangular identity matrices and their biases at 0, so the
            first scores are ``σ(X)·σ(h)``: the similarity of class and context vectors in their first
            min(d, dh, k) coordinates; with identity σ this is weight tying, GILE Eq. 18's degenerate form;
            joint dimensions beyond d or dh start small and random, see :func:`identity_init_`; a free
            ``softmax`` weight keeps fairseq's init).
        class_projection / context_projection / projection_bias: override the preset's sides
            (``none``, ``linear`` or ``nonlinear``), e.g. GILE's ``bil_yh15`` head σ(E W)(W' h) is
            ``label`` with ``context_projection="linear"``.
    """

    kind: str
    joint_dim: Optional[int] = None
    activation: str = DEFAULT_ACTIVATION
    bias: str = "per_class"
    context_scale: bool = False
    dropout: float = 0.0
    init: str = DEFAULT_INIT
    class_projection: Optional[str] = None
    context_projection: Optional[str] = None
    projection_bias: Optional[bool] = None

    def __post_init__(self):
        check_choice("--output-layer", self.kind, OUTPUT_LAYER_CHOICES)
        check_choice("the output layer's bias", self.bias, BIAS_CHOICES)
        check_choice("--output-layer-init", self.init, INIT_CHOICES)
        check_choice("--joint-activation", self.activation, ACTIVATION_CHOICES)
        for side, value in (("class_projection", self.class_proj), ("context_projection", self.ctx_proj)):
            check_choice(side, value, (_NONE, _LINEAR, _NONLINEAR))

    @property
    def class_proj(self) -> str:
        """The class side's projection g_out: the preset's unless ``class_projection`` overrides it."""
        return self.class_projection or PRESETS[self.kind][0]

    @property
    def ctx_proj(self) -> str:
        """The context side's projection g_ctx: the preset's unless ``context_projection`` overrides it."""
        return self.context_projection or PRESETS[self.kind][1]

    @property
    def reads_activation(self) -> bool:
        """Whether σ (``--joint-activation``) acts: a side is projected non-linearly (label, context, joint; not
        softmax, tied, bilinear)."""
        return _NONLINEAR in (self.class_proj, self.ctx_proj)

    @property
    def has_joint_space(self) -> bool:
        """Whether both sides project, into a joint space of free size dj (``--joint-dim``; Eq. 16)."""
        return self.class_proj != _NONE and self.ctx_proj != _NONE

    @property
    def has_parameters(self) -> bool:
        """Whether the layer has parameters of its own, what ``init`` starts: free rows W (``softmax``), a projection,
        the scale w or a bias (``tied`` without a bias scores with E alone: it has none)."""
        return (self.kind == "softmax" or self.class_proj != _NONE or self.ctx_proj != _NONE or self.context_scale
                or self.bias != "none")

    @property
    def proj_bias(self) -> bool:
        """Whether the non-linear projections carry a bias (b_u, b_v of Eqs. 12-13)."""
        return PRESETS[self.kind][2] if self.projection_bias is None else self.projection_bias


class OutputLayer(nn.Module):
    """One structure-aware output layer: ``logits = g_ctx(h) · g_out(X)ᵀ + b`` (see module docstring).

    Args:
        spec: the preset and its settings (:class:`OutputLayerSpec`).
        num_classes: |V| (vocabulary size) or the number of labels.
        input_dim: dh, the size of the decoder features h.
        embedding: the shared embedding E (|V| x d) for every preset but ``softmax``. It is referenced,
            never copied, and not registered as a sub-module (its owner saves it once): see :attr:`embedding`.
        class_dim: d of class vectors given explicitly to ``forward(class_inputs=...)`` when there is no E.
    """

    def __init__(self, spec: OutputLayerSpec, num_classes: int, input_dim: int,
                 embedding: Optional[nn.Embedding] = None, class_dim: Optional[int] = None):
        super().__init__()
        self.spec = spec
        self.num_classes = num_classes
        self.input_dim = input_dim
        self.activation = ACTIVATIONS[spec.activation]  # the spec checked the name
        self.class_proj, self.ctx_proj = spec.class_proj, spec.ctx_proj
        self.class_dim = self._build_class_table(embedding, class_dim)
        self.joint_dim = self._joint_space_dim()
        self._build_class_side()
        self._build_context_side()
        self._build_bias()
        #: the dropout of the context side (a FairseqDropout: fairseq-generate's --retain-dropout keeps it, and
        #: --retain-dropout-modules names it OutputLayer)
        self.context_dropout = FairseqDropout(spec.dropout, module_name="OutputLayer")
        #: serve g_out(X) of all classes from a cache in eval mode without autograd (beam search); benchmarks
        #: switch it off to show what it buys
        self.use_eval_cache = True
        self._cache: Optional[Tensor] = None
        self._cache_source = None  # (what g_out(X) was computed from, probes of the values it was computed from)
        self._weights_unchanged = False  # set by :meth:`weights_unchanged`
        self.reset_parameters()

    # ------------------------------------------------------------------ building
    def _build_class_table(self, embedding: Optional[nn.Embedding], class_dim: Optional[int]) -> int:
        """The raw class vectors X and their size d: free rows W for ``softmax`` (Eq. 3), else the shared E (checked
        against the preset and the classes; held, not registered: see :attr:`embedding`) or, without E, vectors of
        size ``class_dim`` given to every call."""
        kind = self.spec.kind
        self._shared = (embedding,)
        if kind == "softmax":
            if embedding is not None:
                raise OptionError("output layer 'softmax' has its own weights; do not pass an embedding")
            self.weight = nn.Parameter(torch.empty(self.num_classes, self.input_dim))
            return self.input_dim
        # the parameters a layer has not are plain None attributes, not registered Nones: fairseq's Trainer takes all
        # registered Nones for one parameter shared between them ("detected shared parameter: ...weight <- ...")
        self.weight = None
        if embedding is None and class_dim is None:
            raise OptionError(f"output layer {kind!r} needs the shared embedding E")
        if embedding is not None and embedding.num_embeddings != self.num_classes:
            raise InputError(f"the shared embedding has {embedding.num_embeddings} rows but the output layer scores "
                             f"{self.num_classes} classes: give both the same dictionary")
        d = embedding.embedding_dim if embedding is not None else class_dim
        if kind == "tied" and d != self.input_dim:
            raise OptionError(f"--output-layer tied needs the embedding dim d={d} to equal the decoder output dim "
                              f"dh={self.input_dim}: set them equal (e.g. --decoder-embed-dim/--decoder-out-embed-dim) "
                              "or use --output-layer joint")
        return d

    @property
    def embedding(self) -> Optional[nn.Embedding]:
        """The shared E, or None. Held in a tuple, which ``nn.Module`` keeps as a plain attribute: E stays its
        owner's (the decoder's) sub-module, saved under the owner's key only and moved with the owner; this layer's
        state dict holds its own parameters alone. E is referenced at build time rather than passed to every call
        (as sockeye does) because fairseq's decoders call ``output_projection(features)`` with the features alone."""
        return self._shared[0]

    def _joint_space_dim(self) -> int:
        """k, the space both sides meet in."""
        if self.spec.has_joint_space:
            return self.spec.joint_dim  # Eq. 16: a joint space of free size dj
        if self.ctx_proj != _NONE:
            return self.class_dim  # E (W h): W ∈ R^{d x dh} (Eqs. 6, 7b)
        return self.input_dim  # softmax/tied: h itself; label: σ(E W) with W ∈ R^{d x dh} (Eq. 7a)

    def _build_class_side(self) -> None:
        """g_out: σ(E U + b_u) with U stored as an nn.Linear-style (k x d) matrix (Eq. 12; W of Eq. 7a)."""
        if self.class_proj == _NONE:
            self.class_weight = None
            self.class_bias = None
            return
        self.class_weight = nn.Parameter(torch.empty(self.joint_dim, self.class_dim))
        with_bias = self.spec.proj_bias and self.class_proj != _LINEAR
        self.class_bias = nn.Parameter(torch.empty(self.joint_dim)) if with_bias else None

    def _build_context_side(self) -> None:
        """g_ctx: σ(V h + b_v), V (k x dh) (Eq. 13; W of Eqs. 6, 7b), and GILE's scale w (Eq. 11)."""
        if self.ctx_proj == _NONE:
            self.context_weight = None
            self.context_bias = None
        else:
            self.context_weight = nn.Parameter(torch.empty(self.joint_dim, self.input_dim))
            with_bias = self.spec.proj_bias and self.ctx_proj == _NONLINEAR
            self.context_bias = nn.Parameter(torch.empty(self.joint_dim)) if with_bias else None
        self.context_scale = nn.Parameter(torch.empty(self.joint_dim)) if self.spec.context_scale else None

    def _build_bias(self) -> None:
        """b: per class (Eqs. 3-14), one shared scalar (GILE Eq. 14) or none."""
        size = {"per_class": self.num_classes, "shared": 1}.get(self.spec.bias)
        if size is None:
            self.bias = None
        else:
            self.bias = nn.Parameter(torch.empty(size))

    # the spec's settings under the names the rest of the package reads
    @property
    def output_layer(self) -> str:
        return self.spec.kind

    @property
    def activation_name(self) -> str:
        return self.spec.activation

    @property
    def bias_mode(self) -> str:
        return self.spec.bias

    @property
    def dropout(self) -> float:
        return self.spec.dropout

    @property
    def init(self) -> str:
        return self.spec.init

    # ------------------------------------------------------------------ parameters
    def reset_parameters(self) -> None:
        params = [p for _, p in self.named_parameters(recurse=False)]
        uniform = None
        if self.init == "uniform":
            # The original code's start, as one change against the default: its values come from a fork of the
            # random stream, and fairseq's draws below are still made, so with the same --seed every layer built
            # after this one (a Transformer decoder's layers) starts as in the default run, and every later random
            # draw is the default run's. Drawn where fairseq's start would draw: the values earlier versions drew.
            cuda = sorted({p.device.index if p.device.index is not None else torch.cuda.current_device()
                           for p in params if p.is_cuda})
            with torch.random.fork_rng(devices=cuda):
                uniform = [nn.init.uniform_(torch.empty_like(p), -0.1, 0.1) for p in params]
        for name, p in self.named_parameters(recurse=False):
            if self.init == "identity" and name in ("class_weight", "context_weight"):
                # Eq. 14's k-th joint coordinate is σ(u_k·e) σ(v_k·h) w_k: were the extra rows u_k and v_k both
                # small, each one's gradient would be scaled by the other's tiny output (a saddle: a wide joint
                # space would train as if k = min(d, dh)). So only the class side starts small, which keeps
                # the first scores at the similarity; the context side's extra rows get fairseq's full scale.
                both = self.class_proj != _NONE and self.ctx_proj != _NONE
                identity_init_(p, 1.0 if both and name == "context_weight" else IDENTITY_EXTRA_ROW_SCALE)
            elif name == "context_scale":
                nn.init.ones_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
            else:  # (out x in) weight: fairseq's N(0, in^-1/2) for output projections
                nn.init.normal_(p, mean=0.0, std=p.size(1) ** -0.5)
        if uniform is not None:
            with torch.no_grad():
                for p, u in zip(params, uniform):
                    p.copy_(u)
        self._invalidate_cache()

    def cosine_init_(self) -> None:
        """Start GILE's joint head (Eq. 14, relu σ, scale w) exactly at ``x·h``, the similarity of class and context
        vectors (their cosine when both are unit vectors), with the non-linearity kept.

        relu splits a product into its four sign cases: ``x_i h_i = r(x_i)r(h_i) + r(-x_i)r(-h_i) - r(x_i)r(-h_i)
        - r(-x_i)r(h_i)``. So the joint space gets four blocks of d coordinates: U rows ``+e_i, -e_i, +e_i, -e_i``,
        V rows ``+e_i, -e_i, -e_i, +e_i``, w ``+1, +1, -1, -1``, biases b_u = b_v = 0; k > 4d leaves extra
        coordinates whose class side starts small (as :func:`identity_init_`). Needs d = dh and k >= 4d, and is exact
        for relu σ only (``--joint-activation relu``, which ``--similarity-init`` over a sentence encoder requires).
        """
        d = self.class_dim
        if self.class_weight is None or self.context_weight is None or self.context_scale is None:
            raise ValueError("the cosine start needs both projections and the scale w (GILE's joint head, --head gile)")
        if self.input_dim != d or self.joint_dim < 4 * d:
            raise OptionError(f"--similarity-init needs d = dh and --joint-dim >= 4d = {4 * d} for --head gile (got "
                             f"d={d}, dh={self.input_dim}, k={self.joint_dim}): use --joint-dim auto")
        eye = torch.eye(d)
        with torch.no_grad():
            self.reset_parameters()
            self.class_weight[: 4 * d] = torch.cat([eye, -eye, eye, -eye])
            self.context_weight[: 4 * d] = torch.cat([eye, -eye, -eye, eye])
            self.context_scale[2 * d: 4 * d] = -1.0
            for b in (self.class_bias, self.context_bias):
                if b is not None:
                    b.zero_()
        self._invalidate_cache()

    def extra_repr(self) -> str:
        return (
            f"output_layer={self.output_layer}, classes={self.num_classes}, d={self.class_dim}, "
            f"dh={self.input_dim}, k={self.joint_dim}, activation={self.activation_name}, "
            f"bias={self.bias_mode}, dropout={self.dropout}"
        )

    def num_output_parameters(self) -> int:
        """|Θ| dedicated to the output layer (E excluded: it belongs to the decoder input)."""
        return sum(p.numel() for p in self.parameters(recurse=False))

    # ------------------------------------------------------------------ the two sides
    @property
    def projects_classes(self) -> bool:
        """Whether the class side has a projection (U or W of Eqs. 7a, 12), i.e. is more than X itself."""
        return self.class_proj != _NONE

    @property
    def projects_context(self) -> bool:
        """Whether the context side has a projection (V or W of Eqs. 6, 7b, 13), i.e. is more than h itself."""
        return self.ctx_proj != _NONE

    def class_table(self, ids: Optional[Tensor] = None, span: Optional[Tuple[int, int]] = None) -> Tensor:
        """Raw class vectors X: the rows of E (or of W for ``softmax``): all, the rows ``span`` = [start, end),
        or the candidate ``ids``."""
        table = self.weight if self.output_layer == "softmax" else getattr(self.embedding, "weight", None)
        if table is None:
            raise ValueError(f"output layer {self.output_layer!r} has no embedding; pass the class vectors as rows")
        if span is not None:
            return table[span[0]:span[1]]
        return table if ids is None else table.index_select(0, ids)

    def project_classes(self, x: Tensor) -> Tensor:
        """g_out(X): identity, X Uᵀ, or σ(X Uᵀ + b_u) (Eq. 12 / Eq. 7a)."""
        if self.class_proj == _NONE:
            return x
        if self.class_proj == _LINEAR:
            return F.linear(x, self.class_weight)
        return self.activation(F.linear(x, self.class_weight, self.class_bias))

    def class_side(self, ids: Optional[Tensor] = None, span: Optional[Tuple[int, int]] = None,
                   rows: Optional[Tensor] = None) -> Tuple[Tensor, Optional[Tensor]]:
        """The class side of the score: ``(g_out(X), b)``, |C| x k vectors and their |C| biases (None without b).

        C is every class, the rows ``span`` = [start, end) (the chunked softmax), or the candidate ``ids`` (sampled
        softmax, GILE's training labels). ``rows`` gives the raw vectors X of those classes explicitly (GILE's label
        vectors from descriptions, or detached rows for a hand-written backward). All classes in eval mode without
        autograd come from the cache of g_out(X) (see the module docstring).
        """
        if rows is None and ids is None and span is None and self.projects_classes and self._cache_usable():
            if not self._cache_is_current():
                self._cache = self.project_classes(self.class_table())
                self._cache_source = (self._cache_layout(), [_probe(p) for p in self._class_dependencies()])
            vectors = self._cache
        else:
            vectors = self.project_classes(rows if rows is not None else self.class_table(ids, span))
        return vectors, self._bias(ids, span, vectors.size(0))

    def _bias(self, ids: Optional[Tensor], span: Optional[Tuple[int, int]], num: int) -> Optional[Tensor]:
        """b of the classes ``ids`` / ``span`` / all; a shared scalar (GILE Eq. 14) is expanded to ``num``."""
        if self.bias is None:
            return None
        if self.bias_mode == "shared":
            return self.bias.expand(num)
        if span is not None:
            return self.bias[span[0]:span[1]]
        return self.bias if ids is None else self.bias.index_select(0, ids)

    def encode_context(self, features: Tensor) -> Tensor:
        """g_ctx(h): identity, V h, or σ(V h + b_v) (Eq. 13 / Eq. 7b / Eq. 6), times w (GILE Eq. 11)."""
        if self.ctx_proj == _NONE:
            out = features
        elif self.ctx_proj == _LINEAR:
            out = F.linear(features, self.context_weight)
        else:
            out = self.activation(F.linear(features, self.context_weight, self.context_bias))
        if self.context_scale is not None:
            out = out * self.context_scale
        return self.context_dropout(out)

    def forward(
        self,
        features: Tensor,
        ids: Optional[Tensor] = None,
        class_inputs: Optional[Tensor] = None,
    ) -> Tensor:
        """Logits ``(..., |V|)`` or ``(..., |ids|)``; equal to the full logits indexed at ``ids``.

        ``class_inputs``: the raw class vectors X of the scored classes (GILE's label vectors), instead of E.
        """
        classes, bias = self.class_side(ids, rows=class_inputs)
        return F.linear(self.encode_context(features), classes, bias)

    # ------------------------------------------------------------------ eval cache
    def _class_dependencies(self):
        deps = [self.class_table(), self.class_weight, self.class_bias]
        return [p for p in deps if p is not None]

    def _cache_layout(self):
        """Where and how g_out(X) is computed: each tensor it depends on (storage, dtype, device, shape) and the
        autocast state (autocast changes the dtype g_out(X) is computed in: a cache filled under autocast is not the
        fp32 one). ``.half()``/``.to()`` change it."""
        deps = self._class_dependencies()
        device = deps[0].device.type
        amp = (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)) if device in ("cpu", "cuda") else None
        return tuple((p.data_ptr(), p.dtype, p.device, tuple(p.shape)) for p in deps) + (amp,)

    def _cache_is_current(self) -> bool:
        """Whether the cache holds g_out(X) of the weights as they are: the same layout and, unless the caller vouches
        for them (:meth:`weights_unchanged`), the same values, by a probe of each tensor (:func:`_probe`, one
        matrix-vector product: it sees an optimizer step, ``load_state_dict`` and an in-place edit of E by its owner
        that this layer is not told of)."""
        if self._cache is None or self._cache_source[0] != self._cache_layout():
            return False
        if self._weights_unchanged:
            return True
        return all(torch.equal(a, _probe(p)) for a, p in zip(self._cache_source[1], self._class_dependencies()))

    @contextmanager
    def weights_unchanged(self):
        """Calls in this block serve the cache without probing the weights' values (their layout is still checked):
        for the caller that knows no weight changed since the cache was last checked, e.g. the later steps of one
        incremental decoding (fairseq's beam search changes no weight between its steps), where the probe would cost
        a pass over E per step."""
        outer, self._weights_unchanged = self._weights_unchanged, True
        try:
            yield
        finally:
            self._weights_unchanged = outer

    def _cache_usable(self) -> bool:
        return self.use_eval_cache and not self.training and not torch.is_grad_enabled()

    def _invalidate_cache(self) -> None:
        self._cache, self._cache_source = None, None

    def train(self, mode: bool = True):
        self._invalidate_cache()  # the cache only lives through one eval phase
        return super().train(mode)

    # ------------------------------------------------------------------ configuration check on load
    def configuration(self) -> Dict[str, object]:
        """What a checkpoint must agree on to be loaded into this layer (saved in its state dict); σ only where it
        acts (a tied layer's recorded σ, which it never applied, is not held against a model built without it)."""
        return {
            "output_layer": self.output_layer,
            "num_classes": self.num_classes,
            "class_dim": self.class_dim,
            "input_dim": self.input_dim,
            "joint_dim": self.joint_dim,
            **({"activation": self.activation_name} if self.spec.reads_activation else {}),
            "bias": self.bias_mode,
            "class_projection": self.class_proj,
            "context_projection": self.ctx_proj,
            "context_scale": self.context_scale is not None,
        }

    def get_extra_state(self):
        return {"fairseq_joint_output_layer": self.configuration()}

    def set_extra_state(self, state) -> None:
        saved = state.get("fairseq_joint_output_layer") if isinstance(state, dict) else None
        if saved is None:
            return
        ours = self.configuration()
        # keys a checkpoint did not record (saved before they existed) are not held against it
        diff = [f"{k}: checkpoint {saved[k]!r} vs model {v!r}" for k, v in ours.items() if k in saved and saved[k] != v]
        if diff:
            flags = {"output_layer": "--output-layer", "joint_dim": "--joint-dim", "activation": "--joint-activation",
                     "bias": "--no-output-bias", "num_classes": "the target dictionary"}
            fix = ", ".join(flags.get(d.split(":")[0], d.split(":")[0]) for d in diff)
            raise CheckpointError(f"the checkpoint's output layer differs from this model's ({'; '.join(diff)}): build "
                                  f"the model with the checkpoint's settings ({fix}) or train a new one")
