"""``joint_lstm``: fairseq's LSTM encoder-decoder with attention and a structure-aware output layer.

``joint_lstm_wmt17`` is the paper's configuration (Pappas et al. 2018, Sec. 4.2): 2+2 LSTM layers,
512-d embeddings and states, dropout 0.3 after each layer.
"""

from dataclasses import dataclass
from types import SimpleNamespace

from fairseq import utils
from fairseq.models import register_model, register_model_architecture
from fairseq.models.lstm import (
    DEFAULT_MAX_SOURCE_POSITIONS,
    DEFAULT_MAX_TARGET_POSITIONS,
    Embedding,
    LSTMDecoder,
    LSTMEncoder,
    LSTMModel,
    base_architecture,
)

from fairseq_joint.errors import InputError, OptionError
from fairseq_joint.models.output_layer_model import (
    InitSeedConfig,
    OutputLayerConfig,
    OutputLayerModelMixin,
    build_output_layer,
    decoder_output,
    output_layer_defaults,
)


class JointLSTMDecoder(LSTMDecoder):
    """fairseq's LSTM decoder whose output layer is an :class:`OutputLayer` over the shared ``embed_tokens``.

    The features h handed to the output layer are the decoder's ``out_embed_dim`` outputs (dh).
    """

    def __init__(self, args, dictionary, embed_tokens, encoder_output_units, **kwargs):
        # share_input_output_embed=True only stops fairseq from building its own fc_out
        super().__init__(
            dictionary=dictionary,
            embed_dim=args.decoder_embed_dim,
            hidden_size=args.decoder_hidden_size,
            out_embed_dim=args.decoder_out_embed_dim,
            num_layers=args.decoder_layers,
            dropout_in=args.decoder_dropout_in,
            dropout_out=args.decoder_dropout_out,
            attention=utils.eval_bool(args.decoder_attention),
            encoder_output_units=encoder_output_units,
            pretrained_embed=embed_tokens,
            share_input_output_embed=True,
            adaptive_softmax_cutoff=None,
            **kwargs,
        )
        self.share_input_output_embed = False
        self.output_projection = build_output_layer(
            args, dictionary, self.embed_tokens, input_dim=args.decoder_out_embed_dim
        )

    def forward(self, prev_output_tokens, encoder_out=None, incremental_state=None, src_lengths=None,
                features_only: bool = False, **unused):
        x, attn_scores = self.extract_features(prev_output_tokens, encoder_out, incremental_state)
        return decoder_output(self, x, incremental_state, features_only), attn_scores

    def output_layer(self, x):
        return self.output_projection(x)


@dataclass
class LSTMOutputLayerConfig(OutputLayerConfig):
    """:class:`OutputLayerConfig` of fairseq's LSTM, with the rules of fairseq's ``LSTMModel.build_model`` on the LSTM's
    own options, which ``joint_lstm`` builds its modules without."""

    @staticmethod
    def validate(cfg) -> None:
        args = cfg.model
        if args.encoder_layers != args.decoder_layers:
            raise OptionError("--encoder-layers must match --decoder-layers: give both the same number")
        for flag in ("encoder_embed_path", "decoder_embed_path"):
            if getattr(args, flag):
                raise OptionError(f"--{flag.replace('_', '-')} is not supported by joint_lstm yet; drop it")
        if args.share_all_embeddings and args.encoder_embed_dim != args.decoder_embed_dim:
            raise OptionError("--share-all-embeddings requires --encoder-embed-dim to match --decoder-embed-dim")


@register_model("joint_lstm")
class JointLSTMModel(OutputLayerModelMixin, LSTMModel):
    """LSTM encoder-decoder (Luong-style attention) with the output layers of Pappas et al. 2018."""

    configs = (LSTMOutputLayerConfig, InitSeedConfig)

    @classmethod
    def build_model(cls, args, task):
        joint_lstm_base(args)
        # fairseq's LSTMModel.build_model refuses these itself: so does this model where its options were not checked
        # before fairseq started (FAIRSEQ_JOINT_PATCHES=0, or a model built in Python)
        LSTMOutputLayerConfig.validate(SimpleNamespace(model=args))
        return cls.build_seeded(args, task, cls._build_modules)

    @classmethod
    def _build_modules(cls, args, task):
        """The encoder, the decoder and their embeddings, in fairseq's LSTMModel's order of random draws."""
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        encoder_embed = Embedding(len(src_dict), args.encoder_embed_dim, src_dict.pad())
        if args.share_all_embeddings:
            if src_dict != tgt_dict:
                raise InputError("--share-all-embeddings requires a joint dictionary "
                                 "(fairseq-preprocess --joined-dictionary)")
            decoder_embed = encoder_embed
        else:
            decoder_embed = Embedding(len(tgt_dict), args.decoder_embed_dim, tgt_dict.pad())
        if args.encoder_freeze_embed:
            encoder_embed.weight.requires_grad = False
        if args.decoder_freeze_embed:
            decoder_embed.weight.requires_grad = False
        encoder = LSTMEncoder(
            dictionary=src_dict,
            embed_dim=args.encoder_embed_dim,
            hidden_size=args.encoder_hidden_size,
            num_layers=args.encoder_layers,
            dropout_in=args.encoder_dropout_in,
            dropout_out=args.encoder_dropout_out,
            bidirectional=args.encoder_bidirectional,
            pretrained_embed=encoder_embed,
            max_source_positions=getattr(args, "max_source_positions", DEFAULT_MAX_SOURCE_POSITIONS),
        )
        decoder = JointLSTMDecoder(
            args,
            tgt_dict,
            decoder_embed,
            encoder_output_units=encoder.output_units,
            max_target_positions=getattr(args, "max_target_positions", DEFAULT_MAX_TARGET_POSITIONS),
            residuals=False,
        )
        return cls(encoder, decoder)

    def forward(self, src_tokens, src_lengths, prev_output_tokens, incremental_state=None,
                features_only: bool = False, **kwargs):
        """As fairseq's LSTMModel; ``features_only=True`` returns the decoder features h (B x T x dh)."""
        encoder_out = self.encoder(src_tokens, src_lengths=src_lengths)
        return self.decoder(prev_output_tokens, encoder_out=encoder_out, incremental_state=incremental_state,
                            features_only=features_only)


@register_model_architecture("joint_lstm", "joint_lstm")
def joint_lstm_base(args):
    base_architecture(args)
    output_layer_defaults(args, input_dim=args.decoder_out_embed_dim)


@register_model_architecture("joint_lstm", "joint_lstm_wmt17")
def joint_lstm_wmt17(args):
    """Pappas et al. 2018, Sec. 4.2: 2+2 layers, 512-d embeddings and states, dropout 0.3."""
    args.dropout = getattr(args, "dropout", 0.3)
    for side in ("encoder", "decoder"):
        setattr(args, f"{side}_embed_dim", getattr(args, f"{side}_embed_dim", 512))
        setattr(args, f"{side}_hidden_size", getattr(args, f"{side}_hidden_size", 512))
        setattr(args, f"{side}_layers", getattr(args, f"{side}_layers", 2))
        setattr(args, f"{side}_dropout_in", getattr(args, f"{side}_dropout_in", args.dropout))
        setattr(args, f"{side}_dropout_out", getattr(args, f"{side}_dropout_out", args.dropout))
    args.decoder_out_embed_dim = getattr(args, "decoder_out_embed_dim", 512)
    args.encoder_bidirectional = getattr(args, "encoder_bidirectional", False)
    joint_lstm_base(args)


@register_model_architecture("joint_lstm", "joint_lstm_wmt17_uniform_init")
def joint_lstm_wmt17_uniform_init(args):
    """joint_lstm_wmt17 with ``--output-layer-init uniform`` (U(-0.1, 0.1), the original NMT-joint code's start), the
    output-layer start that gave this model the lowest validation perplexity in three GPU seeds."""
    args.output_layer_init = getattr(args, "output_layer_init", "uniform")
    joint_lstm_wmt17(args)


@register_model_architecture("joint_lstm", "joint_lstm_tiny")
def joint_lstm_tiny(args):
    """A tiny 1+1 layer model for tests and the CPU demo."""
    for side in ("encoder", "decoder"):
        setattr(args, f"{side}_embed_dim", getattr(args, f"{side}_embed_dim", 32))
        setattr(args, f"{side}_hidden_size", getattr(args, f"{side}_hidden_size", 32))
        setattr(args, f"{side}_layers", getattr(args, f"{side}_layers", 1))
    args.decoder_out_embed_dim = getattr(args, "decoder_out_embed_dim", 32)
    args.joint_dim = getattr(args, "joint_dim", 48)
    joint_lstm_base(args)
