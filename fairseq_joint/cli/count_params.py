#!/usr/bin/env python
"""|Θ| of a fairseq-joint model, in total and for its output layer (Pappas et al. 2018, Table 2).

From a checkpoint::

    python scripts/count_params.py checkpoints/checkpoint_best.pt [--json]

or from a configuration, without data (dictionaries of the given sizes)::

    python scripts/count_params.py --arch joint_lstm_wmt17 --src-vocab 32000 --tgt-vocab 32000 \\
        --output-layer joint --joint-dim 512 [any other fairseq model flag]

The output-layer figure counts the parameters the output layer owns (E belongs to the decoder input
and is counted once, in the total); it is compared with the capacity formulas of the paper:
Eq. 8 (softmax), Eq. 9 (tied: only b), Eq. 10 (bilinear), the Eq. 7 forms (d·dh + |V|), and Eq. 16
(joint: d·dj + dj·dh + |V|, to which the two joint-space biases b_u, b_v add 2·dj).
"""

import argparse
import contextlib
import json
import os
import sys
from typing import Dict, List, Optional

import torch


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


def load_checkpoint_model(path: str):
    from fairseq import checkpoint_utils

    import fairseq_joint  # noqa: F401  (registers the models, allowlists checkpoint classes)

    state = checkpoint_utils.load_checkpoint_to_cpu(path)
    cfg = state["cfg"]
    # build with dictionaries of the checkpoint's sizes: the data directory is not needed to count
    src_n = state["model"]["encoder.embed_tokens.weight"].shape[0]
    tgt_n = state["model"]["decoder.embed_tokens.weight"].shape[0]
    task = _task_with_vocab(cfg.model, src_n, tgt_n)
    model = task.build_model(cfg.model)
    model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
    return model


def _dictionary(n: int):
    from fairseq.data import Dictionary

    d = Dictionary()
    for i in range(n - len(d)):
        d.add_symbol(f"w{i}")
    return d


def _task_with_vocab(model_args, src_n: int, tgt_n: int):
    from fairseq.tasks.translation import TranslationConfig, TranslationTask

    return TranslationTask(TranslationConfig(), _dictionary(src_n), _dictionary(tgt_n))


def model_from_config(argv: List[str], src_n: int, tgt_n: int):
    from fairseq import options

    import fairseq_joint  # noqa: F401

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["/nonexistent-data-dir", *argv])
    task = _task_with_vocab(args, src_n, tgt_n)
    return task.build_model(args)


def count_parameters(path: Optional[str] = None, config: Optional[List[str]] = None, src_vocab: int = 32000,
                     tgt_vocab: int = 32000) -> Dict[str, object]:
    """|Θ| of a checkpoint (``path``) or of a model configuration (fairseq flags, ``config``)."""
    if path is not None:
        model = load_checkpoint_model(path)
    else:
        model = model_from_config(config or [], src_vocab, tgt_vocab)
    return count_model(model)


def human(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e5 else str(n)


def main(argv=None):
    p = argparse.ArgumentParser(
        usage="%(prog)s [CHECKPOINT | --arch ARCH [model flags]] [--json]",
        description=__doc__.split("\n\n")[0],
        epilog="CHECKPOINT: a fairseq checkpoint (.pt), given first. Any other flag (--output-layer, "
               "--joint-dim, ...) configures the model.")
    p.add_argument("--src-vocab", type=int, default=32000, help="source dictionary size (configuration mode)")
    p.add_argument("--tgt-vocab", type=int, default=32000, help="target dictionary size (configuration mode)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--arch", help="model architecture to count (configuration mode), e.g. joint_lstm_wmt17")
    argv = list(sys.argv[1:] if argv is None else argv)
    # only a first, non-flag argument is a checkpoint: the values of model flags are not
    checkpoint = argv.pop(0) if argv and not argv[0].startswith("-") else None
    args, rest = p.parse_known_args(argv)
    args.checkpoint = checkpoint
    if checkpoint and not os.path.isfile(checkpoint):
        p.error(f"checkpoint not found: {checkpoint}")
    if args.arch:
        rest = ["--arch", args.arch, *rest]
    if args.checkpoint and rest:
        p.error(f"unexpected model flags with a checkpoint: {' '.join(rest)} (the checkpoint fixes the model)")
    if not args.checkpoint and not args.arch:
        p.error("give a checkpoint, or a configuration with --arch (e.g. --arch joint_lstm_wmt17)")
    with torch.device("meta") if not args.checkpoint else contextlib.nullcontext():
        result = count_parameters(args.checkpoint, rest, args.src_vocab, args.tgt_vocab)
    if args.json:
        print(json.dumps(result))
        return result
    print(f"|Θ| total:          {result['total']:>12,d}  ({human(result['total'])})")
    print(f"output layer ({result['output_layer_kind']}): {result['output_layer']:>12,d}  "
          f"= {result['equation']} = {result['formula']:,d}"
          + (f" + {result['projection_biases']:,d} (b_u, b_v)" if result["projection_biases"] else ""))
    print(f"dims: |V|={result['vocab']:,d} d={result['d']} dh={result['dh']}"
          + (f" dj={result['joint_dim']}" if result["joint_dim"] else ""))
    return result


if __name__ == "__main__":
    sys.exit(0 if main() is not None else 1)
