"""The ``--output-layer`` options shared by every fairseq-joint model, and the checks done on load."""

from dataclasses import dataclass, field

from fairseq.dataclass import ChoiceEnum, FairseqDataclass

from fairseq_joint.modules.output_layers import (
    ACTIVATION_CHOICES,
    INIT_CHOICES,
    OUTPUT_LAYER_CHOICES,
    PAPER_EQUATION,
    OutputLayer,
)


@dataclass
class OutputLayerConfig(FairseqDataclass):
    output_layer: ChoiceEnum(OUTPUT_LAYER_CHOICES) = field(
        default="joint",
        metadata={
            "help": "decoder output layer: "
            + "; ".join(f"{k} ({v})" for k, v in PAPER_EQUATION.items())
            + " of Pappas et al. 2018"
        },
    )
    joint_dim: int = field(
        default=512,
        metadata={"help": "dj, the joint space dimension of --output-layer joint (Eq. 16 capacity)"},
    )
    joint_activation: ChoiceEnum(ACTIVATION_CHOICES) = field(
        default="tanh",
        metadata={"help": "the non-linearity σ of Eqs. 7, 12-13 (the paper uses tanh)"},
    )
    joint_dropout: float = field(
        default=0.0, metadata={"help": "dropout on the context side σ(V h + b_v) in the joint space"}
    )
    no_output_bias: bool = field(
        default=False, metadata={"help": "drop the per-word bias b of Eqs. 3-14"}
    )
    output_layer_init: ChoiceEnum(INIT_CHOICES) = field(
        default="fairseq",
        metadata={
            "help": "fairseq: N(0, fan_in^-1/2) weights and zero biases (fairseq's output projection); "
            "uniform: U(-0.1, 0.1) for every output-layer parameter (the original NMT-joint code); "
            "identity: the projections U, V, W start as (rectangular) identity matrices and their biases at 0, "
            "so the first logits are sigma(E)·sigma(h) (weight tying for --joint-activation identity)"
        },
    )


class OutputLayerModelMixin:
    """What fairseq-joint criteria read from a model besides its output layer.

    * the update number (``num_updates``, kept from fairseq's ``set_num_updates``), for criteria with a
      warm-up (``label_embedding_cross_entropy --label-embedding-warmup-updates``);
    * :func:`announce_output_layer` tells the task the size of the features the output layer reads, so a
      criterion built after the model (fairseq-train builds the criterion second) can size its own heads.
    """

    num_updates = 0

    def set_num_updates(self, num_updates):
        super().set_num_updates(num_updates)
        self.num_updates = num_updates


def announce_output_layer(task, input_dim: int) -> None:
    """Record dh, the size of the features h the output layer reads, on the task (see the mixin)."""
    task.output_layer_input_dim = int(input_dim)


def output_layer_defaults(args) -> None:
    """Fill the output-layer options an architecture leaves unset (for ``register_model_architecture``)."""
    for name, value in OutputLayerConfig().__dict__.items():
        if not hasattr(args, name):
            setattr(args, name, value)


def build_output_layer(args, dictionary, embed_tokens, input_dim: int) -> OutputLayer:
    """The decoder's output layer from ``args``; E (``embed_tokens``) is shared, never copied."""
    kind = getattr(args, "output_layer", "joint")
    if getattr(args, "share_decoder_input_output_embed", False) and kind != "tied":
        raise ValueError(
            f"--share-decoder-input-output-embed conflicts with --output-layer {kind}: "
            "use --output-layer tied for weight tying (and drop --share-decoder-input-output-embed)"
        )
    if getattr(args, "criterion", None) == "adaptive_loss":
        raise ValueError(
            "--criterion adaptive_loss needs fairseq's adaptive softmax, not a fairseq-joint output layer: "
            "use --criterion cross_entropy, or sampled_cross_entropy for large vocabularies"
        )
    return OutputLayer(
        kind,
        num_classes=len(dictionary),
        input_dim=input_dim,
        embedding=None if kind == "softmax" else embed_tokens,
        joint_dim=getattr(args, "joint_dim", 512),
        activation=getattr(args, "joint_activation", "tanh"),
        bias="none" if getattr(args, "no_output_bias", False) else "per_class",
        dropout=getattr(args, "joint_dropout", 0.0),
        init=getattr(args, "output_layer_init", "fairseq"),
    )


def check_dictionaries_match(model, state_dict) -> None:
    """Fail with a one-line fix when a checkpoint was trained with other dictionaries than the data's."""
    for side, key, flag in (
        ("source", "encoder.embed_tokens.weight", "--srcdict"),
        ("target", "decoder.embed_tokens.weight", "--tgtdict"),
    ):
        if key not in state_dict:
            continue
        own = model.state_dict().get(key)
        if own is not None and own.shape[0] != state_dict[key].shape[0]:
            raise ValueError(
                f"the checkpoint's {side} dictionary has {state_dict[key].shape[0]} entries but the data's "
                f"has {own.shape[0]}: binarize the data with the checkpoint's dictionary "
                f"(fairseq-preprocess {flag} <checkpoint data dir>/dict.*.txt)"
            )
