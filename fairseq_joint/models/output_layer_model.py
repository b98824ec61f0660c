"""What every fairseq-joint translation model shares: the ``--output-layer`` options, how the output layer is built
from them, and the mixin that adds those options to a fairseq model and checks a checkpoint before loading it.

The options' defaults live in :class:`OutputLayerConfig` (which takes them from
:mod:`fairseq_joint.modules.output_layers`) and nowhere else: every architecture function calls
:func:`output_layer_defaults`, so the builder reads ``args`` without fallbacks of its own.
"""

import argparse
import contextlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Optional

import torch
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.dataclass.utils import gen_parser_from_dataclass

from fairseq_joint.checkpoints import dictionary_fingerprint
from fairseq_joint.errors import CheckpointError, OptionError
from fairseq_joint.modules.output_layers import (
    ACTIVATION_CHOICES,
    DEFAULT_ACTIVATION,
    DEFAULT_INIT,
    DEFAULT_JOINT_DIM,
    INIT_CHOICES,
    OUTPUT_LAYER_CHOICES,
    PAPER_EQUATION,
    OutputLayer,
    OutputLayerSpec,
)
from fairseq_joint.options import DROPOUT, POSITIVE_INT, SEED, Configured


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
        default=DEFAULT_JOINT_DIM,
        metadata={"help": "dj, the joint space dimension of --output-layer joint (Eq. 16 capacity)",
                  "range": POSITIVE_INT},
    )
    joint_activation: ChoiceEnum(ACTIVATION_CHOICES) = field(
        default=DEFAULT_ACTIVATION,
        metadata={"help": "the non-linearity σ of Eqs. 7, 12-13 (the paper uses tanh)"},
    )
    joint_dropout: float = field(
        default=0.0, metadata={"help": "dropout on the context side g_ctx(h): σ(V h + b_v) of joint, σ(W h) of "
                               "context, W h of bilinear, h itself of softmax, tied and label (kept in generation by "
                               "--retain-dropout)", "range": DROPOUT}
    )
    no_output_bias: bool = field(
        default=False, metadata={"help": "drop the per-word bias b of Eqs. 3-14"}
    )
    output_layer_init: ChoiceEnum(INIT_CHOICES) = field(
        default=DEFAULT_INIT,
        metadata={
            "help": "fairseq: N(0, fan_in^-1/2) weights and zero biases (fairseq's output projection); "
            "uniform: U(-0.1, 0.1) for every output-layer parameter (the original NMT-joint code's start; with the same "
            "--seed, every other parameter starts as in the default run); "
            "identity: the projections U, V, W start as (rectangular) identity matrices and their biases at 0, "
            "so the first logits are sigma(E)·sigma(h) (weight tying for --joint-activation identity)"
        },
    )

    @staticmethod
    def validate(cfg) -> None:
        """Options of fairseq that would replace or duplicate the output layer (``cfg.model``: a legacy model's
        namespace, which also holds them): refused with the fix."""
        from fairseq.criterions.adaptive_loss import AdaptiveLoss

        from fairseq_joint.options import registered

        args = cfg.model  # a training run's (the rules run for fairseq-train): fairseq's LSTM and Transformer declare both
        # (given, also with --share-all-embeddings: fairseq's Transformer turns the flag on itself only as it builds,
        # after this, and joint_transformer turns it off again; it was dropped without a word there)
        if args.share_decoder_input_output_embed and args.output_layer != "tied":
            raise OptionError(f"--share-decoder-input-output-embed conflicts with --output-layer {args.output_layer}: "
                              "use --output-layer tied for weight tying (and drop --share-decoder-input-output-embed)")
        if issubclass(registered(cfg, "criterion"), AdaptiveLoss):
            raise OptionError("--criterion adaptive_loss needs fairseq's adaptive softmax, not a fairseq-joint output "
                              "layer: use --criterion cross_entropy, or sampled_cross_entropy for large vocabularies")
        # options the layer does not read, given (not the architecture's own values): ignored before without a word,
        # and a tied run that recorded a --joint-dim was later refused as "another model" when resumed without it
        unset = architecture_defaults(args, ("joint_dim", "joint_activation", "output_layer_init"))
        spec = output_layer_spec(args)
        if not spec.has_joint_space and args.joint_dim != unset.joint_dim:
            raise OptionError(f"--joint-dim {args.joint_dim} is dj of --output-layer joint; --output-layer "
                              f"{args.output_layer} has no joint space of its own: drop --joint-dim, or use --output-layer "
                              "joint")
        if not spec.reads_activation:  # softmax, tied, bilinear
            if str(args.joint_activation) != str(unset.joint_activation):
                raise OptionError(f"--joint-activation {args.joint_activation} is σ of a projected side (--output-layer "
                                  f"label, context or joint); --output-layer {args.output_layer} has none: drop "
                                  "--joint-activation")
        if not spec.has_parameters and str(args.output_layer_init) != str(unset.output_layer_init):
            raise OptionError(f"--output-layer-init {args.output_layer_init} starts the output layer's own parameters; "
                              f"--output-layer {args.output_layer} --no-output-bias has none (it scores with E alone): "
                              "drop --output-layer-init, or --no-output-bias")


def architecture_defaults(args, names):
    """The options ``names`` as ``args``' architecture (``--arch``) sets them where the command line does not give
    them: its function applied to ``args`` without them (a legacy model's options; fairseq removes those not given)."""
    from fairseq.models import ARCH_CONFIG_REGISTRY

    unset = argparse.Namespace(**{k: v for k, v in vars(args).items() if k not in names})
    ARCH_CONFIG_REGISTRY[args.arch](unset)
    return unset


@dataclass
class InitSeedConfig(FairseqDataclass):
    init_seed: Optional[int] = field(
        default=None,
        metadata={
            "help": "draw the model's initial parameters from this seed instead of --seed; the batches' order and "
            "the dropout masks still follow --seed. Two runs with one --seed and two --init-seed values differ in "
            "the model's random start only (how much a start alone moves a result); --init-seed equal to --seed "
            "starts the model as the default run. A criterion's own parameters (label_embedding_cross_entropy's o2 "
            "and embedding) are drawn after the model from --seed's stream, the same for every --init-seed",
            "range": SEED,
        },
    )


@contextmanager
def initial_parameters_seed(args):
    """Build the model's parameters inside this block: with ``--init-seed S`` they are drawn from seed S and the
    random stream is left as it was before the block, so whatever fairseq draws next (it reseeds with --seed before
    every update anyway) is the same for every S. Without ``--init-seed`` the block changes nothing."""
    seed = getattr(args, "init_seed", None)
    if seed is None:
        yield
        return
    # the CPU stream and this process's GPU's (torch.manual_seed reseeds the GPUs too); naming the device keeps
    # fork_rng quiet on multi-GPU machines, where each process uses one
    cuda = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        yield


_DEFAULTS = OutputLayerConfig()


def output_layer_defaults(args, input_dim: int) -> None:
    """Fill the output-layer options an architecture leaves unset (for ``register_model_architecture``), and record
    dh = ``input_dim``, the size of the features h the output layer reads, as the default of
    ``--label-embedding-input-dim``: a criterion with a second output layer over h (``label_embedding_cross_entropy``)
    reads it from its own configuration, built from the same arguments. (The architecture is where it can be recorded:
    fairseq-train builds the criterion's configuration from the parsed arguments before it builds the model, and an
    interpolation such as ``${model.decoder_output_dim}`` cannot reach a legacy model's configuration, which fairseq
    keeps as an ``argparse.Namespace``.)"""
    for name in _DEFAULTS.__dataclass_fields__:
        if not name.startswith("_") and not hasattr(args, name):
            setattr(args, name, getattr(_DEFAULTS, name))
    if getattr(args, "label_embedding_input_dim", None) is None:
        args.label_embedding_input_dim = int(input_dim)


def output_layer_spec(args) -> OutputLayerSpec:
    """The :class:`OutputLayerSpec` of the ``--output-layer`` options in ``args``."""
    return OutputLayerSpec(
        kind=str(args.output_layer),
        joint_dim=args.joint_dim,
        activation=str(args.joint_activation),
        bias="none" if args.no_output_bias else "per_class",
        dropout=args.joint_dropout,
        init=str(args.output_layer_init),
    )


def build_output_layer(args, dictionary, embed_tokens, input_dim: int) -> OutputLayer:
    """The decoder's output layer from ``args``; E (``embed_tokens``) is shared, never copied."""
    spec = output_layer_spec(args)
    embedding = None if spec.kind == "softmax" else embed_tokens
    return OutputLayer(spec, num_classes=len(dictionary), input_dim=input_dim, embedding=embedding)


def decoding_step(decoder, incremental_state):
    """The context in which ``decoder`` runs its output layer for one step of fairseq's incremental decoding
    (``incremental_state``: a fresh dictionary for every decoding, e.g. every beam search of SequenceGenerator). The
    first step checks the layer's eval cache against the weights; the later ones serve it without that check, since
    no weight changes between the steps of one decoding (``OutputLayer.weights_unchanged``: the check costs a pass over
    E per step). Without ``incremental_state`` (training, scoring whole sequences) every call checks."""
    if incremental_state is None:
        return contextlib.nullcontext()
    if decoder.get_incremental_state(incremental_state, "output_layer_decoding") is None:
        decoder.set_incremental_state(incremental_state, "output_layer_decoding", {})  # this decoding has started
        return contextlib.nullcontext()
    return decoder.output_projection.weights_unchanged()


def decoder_output(decoder, x, incremental_state, features_only: bool):
    """What a joint decoder's ``forward`` returns for its features h (``x``): h itself with ``features_only`` (a
    criterion then scores the vocabulary, or a subset of it, through ``decoder.output_projection``), else the output
    layer's scores, run in :func:`decoding_step`."""
    if features_only:
        return x
    with decoding_step(decoder, incremental_state):
        return decoder.output_layer(x)


class UpdateCountMixin:
    """Keeps fairseq's update number on the model (``num_updates``), for criteria with a warm-up
    (``label_embedding_cross_entropy --label-embedding-warmup-updates``)."""

    num_updates = 0

    def set_num_updates(self, num_updates):
        super().set_num_updates(num_updates)
        self.num_updates = num_updates


class ResumeStateMixin:
    """A model that holds, besides its parameters and buffers, what a resume needs to go on as the run that never
    stopped (GILE's ``--finetune-label-refresh`` label vectors): saved in the checkpoint's ``extra_state`` and given
    back on a resume by ``fairseq_joint.resume``."""

    def resume_state(self) -> Optional[dict]:
        """The tensors a resume needs (on the CPU), None when there are none now."""
        raise NotImplementedError

    def load_resume_state(self, state: Optional[dict]) -> None:
        """Take back what :meth:`resume_state` gave when the checkpoint was saved (None: nothing)."""
        raise NotImplementedError


#: what a translation model's fingerprint of its --source-lang and --target-lang is named
LANGUAGE_PAIR = "language pair (--source-lang, --target-lang)"


class DataFingerprintMixin:
    """The model keeps a fingerprint of the data it was built for (dictionaries, label lists: their entries in order),
    saved with its weights (the buffer ``data_fingerprints``) and compared when a checkpoint is loaded into a model
    built for other data: same sizes but other entries are refused, not loaded into garbage. A checkpoint saved before
    the fingerprints existed loads as before."""

    #: (what, the fix) of each fingerprinted list, in order
    data_names = ()

    def record_data(self, *entries) -> None:
        """Fingerprint each list of entries (e.g. ``dictionary.symbols``), in the order of :attr:`data_names`."""
        values = [dictionary_fingerprint(e) for e in entries]
        self.register_buffer("data_fingerprints", torch.tensor(values, dtype=torch.long), persistent=True)

    def check_data(self, state_dict, names=None):
        """``state_dict`` with the data fingerprints checked (``names``: those of these :attr:`data_names` only), or,
        from an older checkpoint, filled in: those it saved are compared, those it did not save yet are this
        model's."""
        own = getattr(self, "data_fingerprints", None)
        if own is None:
            return state_dict
        saved = state_dict.get("data_fingerprints")
        if saved is None:
            return {**state_dict, "data_fingerprints": own}
        for (what, fix), a, b in zip(self.data_names, saved.tolist(), own.tolist()):
            if a != b and (names is None or what in names):
                raise CheckpointError(f"the checkpoint's {what} has other entries than the data's: {fix}")
        if len(saved) < len(own):
            return {**state_dict, "data_fingerprints": torch.cat([saved, own[len(saved):]])}
        return state_dict


class OutputLayerModelMixin(UpdateCountMixin, DataFingerprintMixin, Configured):
    """Mixed into a fairseq translation model whose decoder has an :class:`OutputLayer` (``decoder.output_projection``):

    * ``add_args``: the model's own options plus :class:`OutputLayerConfig`'s and ``--init-seed``
      (:class:`InitSeedConfig`: the subclasses build their parameters through :meth:`build_seeded`), the
      :attr:`configs` that ``fairseq_joint.checks`` checks before fairseq starts;
    * ``load_state_dict``: a checkpoint trained with other dictionaries than the data's (another size, or the same
      size and other entries: :class:`DataFingerprintMixin`) fails with a one-line fix (the output layer checks its
      own configuration, see ``OutputLayer.set_extra_state``);
    * ``num_updates`` (:class:`UpdateCountMixin`).
    """

    configs = (OutputLayerConfig, InitSeedConfig)

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        gen_parser_from_dataclass(parser, OutputLayerConfig(), delete_default=True)
        gen_parser_from_dataclass(parser, InitSeedConfig())

    data_names = (
        ("source dictionary", "binarize the data with the checkpoint's dictionary (fairseq-preprocess --srcdict "
                              "<checkpoint data dir>/dict.SRC.txt)"),
        ("target dictionary", "binarize the data with the checkpoint's dictionary (fairseq-preprocess --tgtdict "
                              "<checkpoint data dir>/dict.TGT.txt)"),
        # an en-de model given --source-lang de --target-lang en over a dictionary both languages share translated
        # de-en without a word
        (LANGUAGE_PAIR, "translate in the direction it was trained for, from the language of its training source "
                        "to that of its target"),
    )

    @classmethod
    def build_seeded(cls, args, task, build):
        """The model ``build(args, task)`` returns, its parameters drawn inside :func:`initial_parameters_seed`, with
        the task's dictionaries recorded (checked when a checkpoint is loaded)."""
        with initial_parameters_seed(args):
            model = build(args, task)
        model.record_dictionaries(task)
        return model

    def record_dictionaries(self, task) -> None:
        """The task's dictionaries and, of a translation task, its language pair (which fairseq infers from the
        data's file names where the command does not give it: the checkpoint's configuration does not say it)."""
        from fairseq.tasks.translation import TranslationTask

        pair = [task.cfg.source_lang, task.cfg.target_lang] if isinstance(task, TranslationTask) else []
        pair = [pair] if pair and None not in pair else []  # (a stand-in task of the loaders names no languages)
        self.record_data(task.source_dictionary.symbols, task.target_dictionary.symbols, *pair)

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        self.check_data(state_dict, names=(LANGUAGE_PAIR,))  # first: the other direction's dictionaries differ too
        check_dictionaries_match(self, state_dict)
        state_dict = self.check_data(state_dict)
        # a state of fairseq's own transformer (--finetune-from-model) into --output-layer softmax: its projection has
        # the layer's names and no record of a configuration (strict load refused it for the record alone); another
        # layer's state without its record (stripped) is still refused
        record = "decoder.output_projection._extra_state"
        if self.decoder.output_projection.output_layer == "softmax" and record not in state_dict:
            state_dict = {**state_dict, record: self.decoder.output_projection.get_extra_state()}
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)


def check_dictionaries_match(model, state_dict) -> None:
    """Fail with a one-line fix (that of :attr:`OutputLayerModelMixin.data_names`) when a checkpoint was trained with
    dictionaries of other sizes than the data's."""
    for (what, fix), key in zip(model.data_names, ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")):
        saved, own = state_dict.get(key), model.state_dict().get(key)
        if saved is not None and own is not None and own.shape[0] != saved.shape[0]:
            raise CheckpointError(f"the checkpoint's {what} has {saved.shape[0]} entries but the data's has "
                                  f"{own.shape[0]}: {fix}")
