"""``joint_transformer``: fairseq's Transformer with a structure-aware output layer (``--output-layer``)."""

from dataclasses import dataclass
from types import SimpleNamespace

from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerDecoder,
    TransformerModel,
    base_architecture,
    transformer_iwslt_de_en,
    transformer_wmt_en_de,
)

from fairseq_joint.errors import OptionError
from fairseq_joint.models.output_layer_model import (
    InitSeedConfig,
    OutputLayerConfig,
    OutputLayerModelMixin,
    build_output_layer,
    decoder_output,
    output_layer_defaults,
)


class JointTransformerDecoder(TransformerDecoder):
    """fairseq's decoder whose ``output_projection`` is an :class:`OutputLayer` sharing ``embed_tokens``.

    ``forward(..., features_only=True)`` returns the features h, so a criterion can score a subset of
    the vocabulary through ``self.output_projection(h, ids)``.
    """

    def __init__(self, args, dictionary, embed_tokens, no_encoder_attn=False):
        output_layer = build_output_layer(args, dictionary, embed_tokens, input_dim=args.decoder_output_dim)
        super().__init__(args, dictionary, embed_tokens, no_encoder_attn, output_projection=output_layer)

    def forward(self, prev_output_tokens, encoder_out=None, incremental_state=None, features_only=False, **kwargs):
        """As fairseq's; the output layer runs in :func:`decoding_step` (its eval cache in incremental decoding)."""
        x, extra = super().forward(prev_output_tokens, encoder_out, incremental_state, features_only=True, **kwargs)
        return decoder_output(self, x, incremental_state, features_only), extra

    def upgrade_state_dict_named(self, state_dict, name):
        # fairseq injects `output_projection.weight` from E for tied models (upstream #2292/#3545);
        # our output layer owns no such weight except for `softmax`, where it is saved anyway.
        key = f"{name}.output_projection.weight"
        present = key in state_dict
        super().upgrade_state_dict_named(state_dict, name)
        if not present and self.output_projection.weight is None:
            state_dict.pop(key, None)
        return state_dict


@dataclass
class TransformerOutputLayerConfig(OutputLayerConfig):
    """:class:`OutputLayerConfig` of fairseq's Transformer, which builds fairseq's adaptive softmax from
    ``--adaptive-softmax-cutoff`` only where it has no output layer of its own: ``joint_transformer`` always has one,
    so the option would be ignored (fairseq's LSTM reads it for ``--criterion adaptive_loss`` only, which
    :meth:`OutputLayerConfig.validate` refuses)."""

    @staticmethod
    def validate(cfg) -> None:
        if cfg.model.adaptive_softmax_cutoff:
            raise OptionError("--adaptive-softmax-cutoff builds fairseq's adaptive softmax, which joint_transformer "
                              "does not (its output layer is --output-layer): drop it, or use --arch transformer")


@register_model("joint_transformer")
class JointTransformerModel(OutputLayerModelMixin, TransformerModel):
    """Transformer encoder-decoder with the output layers of Pappas et al. 2018 (Eqs. 3-15)."""

    configs = (TransformerOutputLayerConfig, InitSeedConfig)

    @classmethod
    def build_model(cls, args, task):
        joint_transformer_base(args)
        # also where the options were not checked before fairseq started (FAIRSEQ_JOINT_PATCHES=0, a model built in
        # Python): the option would be ignored without a word
        TransformerOutputLayerConfig.validate(SimpleNamespace(model=args))
        return cls.build_seeded(args, task, super().build_model)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        if getattr(args, "share_all_embeddings", False):
            # fairseq turns this on with --share-all-embeddings; here the output layer is our choice
            args.share_decoder_input_output_embed = False
        return JointTransformerDecoder(
            args, tgt_dict, embed_tokens, no_encoder_attn=getattr(args, "no_cross_attention", False)
        )


@register_model_architecture("joint_transformer", "joint_transformer")
def joint_transformer_base(args):
    base_architecture(args)
    output_layer_defaults(args, input_dim=args.decoder_output_dim)


@register_model_architecture("joint_transformer", "joint_transformer_iwslt_de_en")
def joint_transformer_iwslt_de_en(args):
    transformer_iwslt_de_en(args)
    joint_transformer_base(args)


@register_model_architecture("joint_transformer", "joint_transformer_wmt_en_de")
def joint_transformer_wmt_en_de(args):
    transformer_wmt_en_de(args)
    joint_transformer_base(args)


@register_model_architecture("joint_transformer", "joint_transformer_tiny")
def joint_transformer_tiny(args):
    """A few thousand parameters: for tests and the CPU demo."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 32)
    args.encoder_ffn_embed_dim = getattr(args, "encoder_ffn_embed_dim", 64)
    args.encoder_layers = getattr(args, "encoder_layers", 1)
    args.encoder_attention_heads = getattr(args, "encoder_attention_heads", 2)
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", 32)
    args.decoder_ffn_embed_dim = getattr(args, "decoder_ffn_embed_dim", 64)
    args.decoder_layers = getattr(args, "decoder_layers", 1)
    args.decoder_attention_heads = getattr(args, "decoder_attention_heads", 2)
    args.joint_dim = getattr(args, "joint_dim", 48)
    joint_transformer_base(args)
