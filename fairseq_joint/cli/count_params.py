"""|Θ| of a fairseq-joint model, in total and for its output layer (Pappas et al. 2018, Table 2).

From a checkpoint::

    fairseq-joint-count-params checkpoints/checkpoint_best.pt [--json]

or from a configuration, without data (dictionaries of the given sizes)::

    fairseq-joint-count-params --arch joint_lstm_wmt17 --src-vocab 32000 --tgt-vocab 32000 \\
        --output-layer joint --joint-dim 512 [any other fairseq model flag]

The output-layer figure counts the parameters the output layer owns (E belongs to the decoder input
and is counted once, in the total); it is compared with the capacity formulas of the paper:
Eq. 8 (softmax), Eq. 9 (tied: only b), Eq. 10 (bilinear), the Eq. 7 forms (d·dh + |V|), and Eq. 16
(joint: d·dj + dj·dh + |V|, to which the two joint-space biases b_u, b_v add 2·dj).
"""

import contextlib
import json
import sys
from typing import Dict, List, Optional, Sequence

import torch

from fairseq_joint.cli.common import console_script, fail, number, parser
from fairseq_joint.loaders import load_translation_model, model_from_flags
from fairseq_joint.options import Range

PROG = "fairseq-joint-count-params"
#: a dictionary size of the configuration mode: fairseq's 4 special symbols and at least one word; at most 10 million
#: types (the dictionary is built entry by entry: about a second per million; vocabularies in use hold up to ~1M)
VOCAB = Range(5, 10 ** 7, integer=True, name="a dictionary size")
#: the dictionary sizes of a configuration counted without --src-vocab / --tgt-vocab (the WMT17 recipes' BPE)
DEFAULT_VOCAB = 32000


def output_layer_formula(layer) -> Dict[str, object]:
    """The paper's capacity of ``layer`` (an OutputLayer) from its dimensions, and the equation it is."""
    v, d, dh, k = layer.num_classes, layer.class_dim, layer.input_dim, layer.joint_dim
    bias = {"per_class": v, "shared": 1, "none": 0}[layer.bias_mode]
    kind = layer.output_layer
    if kind == "softmax":
        eq, value = "Eq. 8: |V|·dh + |V|", v * dh + bias
    elif kind == "tied":
        eq, value = "Eq. 9: |V| (W = Eᵀ is the input embedding)", bias
    elif kind == "bilinear":
        eq, value = "Eq. 10: d·dh + |V|", d * dh + bias
    elif kind in ("label", "context"):
        eq, value = "Eq. 7: d·dh + |V|", d * dh + bias
    else:
        eq, value = "Eq. 16: d·dj + dj·dh + |V|", d * k + k * dh + bias
    extra = layer.num_output_parameters() - value
    return {"equation": eq, "formula": value, "projection_biases": extra}


def count_model(model) -> Dict[str, object]:
    total = sum(p.numel() for p in model.parameters())
    layer = model.decoder.output_projection
    out = {
        "total": total,
        "output_layer": layer.num_output_parameters(),
        "output_layer_kind": layer.output_layer,
        "vocab": layer.num_classes,
        "d": layer.class_dim,
        "dh": layer.input_dim,
        "joint_dim": layer.joint_dim if layer.output_layer == "joint" else None,
    }
    out.update(output_layer_formula(layer))
    return out


def count_parameters(path: Optional[str] = None, config: Optional[List[str]] = None, src_vocab: int = DEFAULT_VOCAB,
                     tgt_vocab: int = DEFAULT_VOCAB) -> Dict[str, object]:
    """|Θ| of a checkpoint (``path``) or of a model configuration (fairseq flags, ``config``)."""
    if path is not None:
        model = load_translation_model(path)
    else:
        model = model_from_flags(config or [], src_vocab, tgt_vocab)
    return count_model(model)


def human(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e5 else str(n)


def parse_args(argv: Optional[Sequence[str]] = None):
    """The command line: ``args.checkpoint`` (or None) and ``args.model_flags`` (the configuration's flags)."""
    p = parser(
        __doc__.split("\n\n")[0], prog=PROG,
        usage="%(prog)s [CHECKPOINT | --arch ARCH [model flags]] [--json]",
        epilog="CHECKPOINT: a fairseq checkpoint (.pt), given first. Any other flag (--output-layer, "
               "--joint-dim, ...) configures the model.")
    p.add_argument("--src-vocab", type=number(VOCAB),
                   help=f"source dictionary size (configuration mode; default {DEFAULT_VOCAB})")
    p.add_argument("--tgt-vocab", type=number(VOCAB),
                   help=f"target dictionary size (configuration mode; default {DEFAULT_VOCAB})")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--arch", help="model architecture to count (configuration mode), e.g. joint_lstm_wmt17")
    argv = list(sys.argv[1:] if argv is None else argv)
    # only a first, non-flag argument is a checkpoint: the values of model flags are not
    checkpoint = argv.pop(0) if argv and not argv[0].startswith("-") else None
    args, rest = p.parse_known_args(argv)
    if args.arch:
        rest = ["--arch", args.arch, *rest]
    given = [f"--{n}-vocab" for n in ("src", "tgt") if getattr(args, f"{n}_vocab") is not None]
    if checkpoint and (rest or given):
        raise fail(f"unexpected model flags with a checkpoint: {' '.join(rest + given)}; drop them (it fixes the model)")
    if not checkpoint and not args.arch:
        p.error("give a checkpoint, or a configuration with --arch (e.g. --arch joint_lstm_wmt17)")
    args.checkpoint, args.model_flags = checkpoint, rest
    return args


def _count(args) -> Dict[str, object]:
    # a configuration is built on the meta device: counting needs the shapes only
    with torch.device("meta") if not args.checkpoint else contextlib.nullcontext():
        return count_parameters(args.checkpoint, args.model_flags, args.src_vocab or DEFAULT_VOCAB,
                                args.tgt_vocab or DEFAULT_VOCAB)


def counts(argv: Optional[Sequence[str]] = None) -> Dict[str, object]:
    """The figures of a command line (``CHECKPOINT`` or ``--arch ARCH [model flags]``), as ``--json`` prints them."""
    return _count(parse_args(argv))


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    result = _count(args)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"|Θ| total:          {result['total']:>12,d}  ({human(result['total'])})")
    print(f"output layer ({result['output_layer_kind']}): {result['output_layer']:>12,d}  "
          f"= {result['equation']} = {result['formula']:,d}"
          + (f" + {result['projection_biases']:,d} (b_u, b_v)" if result["projection_biases"] else ""))
    print(f"dims: |V|={result['vocab']:,d} d={result['d']} dh={result['dh']}"
          + (f" dj={result['joint_dim']}" if result["joint_dim"] else ""))
    return 0


command = console_script(main, PROG)


if __name__ == "__main__":
    sys.exit(command())
