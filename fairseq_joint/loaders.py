"""The one loader of trained models for the plugin's commands, its Python API (:mod:`fairseq_joint.hub`), the
benchmarks and the studies' tools: a checkpoint's dict, refused in one line when it is missing, damaged, unsafe to
unpickle or of the other kind (a ``gile_classifier`` for a translation command, or the reverse); a translation model
or a ``gile_classifier`` with its task; and a translation model built from fairseq-train's model flags without data
(dictionaries of given sizes), to count its parameters or benchmark it.

Importing it imports the plugin (its models registered, its changes to fairseq's loading applied)."""

import pickle
from typing import Optional, Sequence

import fairseq_joint  # noqa: F401  (registers the models, applies the checkpoint changes of fairseq_patches)
from fairseq_joint import checks, errors
from fairseq_joint.options import arch


def _dictionary(n: int):
    from fairseq.data import Dictionary

    d = Dictionary()
    for i in range(n - len(d)):
        d.add_symbol(f"w{i}")
    return d


def translation_task(src_vocab: int, tgt_vocab: int):
    """A fairseq translation task whose dictionaries have the given sizes (symbols w0, w1, ...): enough to build
    a model without data, e.g. to count its parameters or to benchmark it."""
    from fairseq.tasks.translation import TranslationConfig, TranslationTask

    return TranslationTask(TranslationConfig(), _dictionary(src_vocab), _dictionary(tgt_vocab))


def model_from_flags(flags: Sequence[str], src_vocab: int, tgt_vocab: int):
    """A fairseq-joint translation model built from fairseq-train model flags (``--arch ...``), without data; the
    options checked as fairseq-train checks them (:func:`fairseq_joint.checks.validate`)."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    # a mistake in the model flags: one line in the commands' style, not fairseq's page of usage
    parser.error = lambda message: parser.exit(2, f"error: {message} (model flags are fairseq-train's)\n")
    args = options.parse_args_and_arch(parser, ["/nonexistent-data-dir", *flags])
    check_joint_translation(args.arch, f"--arch {args.arch}")
    checks.validate(convert_namespace_to_omegaconf(args))
    return translation_task(src_vocab, tgt_vocab).build_model(args)


def check_joint_translation(name: str, what: str, refusal=errors.OptionError) -> None:
    """Refuse (a ``refusal``) an ``--arch`` ``name`` (of ``what``: a checkpoint, the flags) that is no fairseq-joint
    translation model (fairseq's own ``transformer`` has no output layer to count)."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    from fairseq_joint.models.output_layer_model import OutputLayerModelMixin

    if not issubclass(ARCH_MODEL_REGISTRY.get(name, object), OutputLayerModelMixin):
        raise refusal(f"{what} is no fairseq-joint translation model: give one of --arch joint_transformer or "
                      "joint_lstm (or a preset of theirs)")


def load_checkpoint(path: str, labels: Optional[bool] = None, overrides: Optional[dict] = None,
                    command: Optional[str] = None) -> dict:
    """The checkpoint dict of ``path`` (``overrides``: fairseq's ``arg_overrides``), the one loader of the plugin's
    commands and tools: a missing file is a ``MissingFileError``; a damaged file, one torch's ``weights_only``
    unpickler refuses (:func:`fairseq_joint.errors.unsafe_checkpoint`, also with ``FAIRSEQ_JOINT_PATCHES=0``) a
    ``CheckpointError``; with ``labels`` True (False) one that is not a ``gile_classifier`` (a translation) checkpoint
    too, naming ``command`` (default: this process's command; :func:`fairseq_joint.checks.check_checkpoint_kind`)."""
    from fairseq import checkpoint_utils

    checks.check_checkpoint_exists(path)
    try:
        state = checkpoint_utils.load_checkpoint_to_cpu(path, overrides)
    except pickle.UnpicklingError as err:  # (FAIRSEQ_JOINT_PATCHES=0; else the verified_load patch names it)
        if not errors.weights_only_refusal(err):
            raise
        raise errors.unsafe_checkpoint(path, err) from err
    if labels is not None:
        checks.check_checkpoint_kind(path, checks.checkpoint_cfg(state), labels, command or errors.program())
    return state


def load_translation_model(path: str):
    """The model of a fairseq-joint translation checkpoint (:func:`load_checkpoint`), built with dictionaries of the
    checkpoint's sizes (the data directory is not needed)."""
    state = load_checkpoint(path, labels=False)
    cfg = checks.checkpoint_cfg(state)
    weights = state["model"]
    check_joint_translation(arch(cfg.model), f"{path} (a {arch(cfg.model)} checkpoint)", errors.CheckpointError)
    missing = [key for key in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight") if key not in weights]
    if missing:
        raise errors.CheckpointError(f"{path} holds no {missing[0]} (its model's weights are incomplete): give a "
                                     "checkpoint written by fairseq-train")
    task = translation_task(weights["encoder.embed_tokens.weight"].shape[0], weights["decoder.embed_tokens.weight"].shape[0])
    model = task.build_model(cfg.model)
    if "data_fingerprints" in weights:  # a model that records its data (DataFingerprintMixin), as the one built here
        # stand-in dictionaries: the checkpoint's fingerprints (as many as it saved) are the model's
        model.register_buffer("data_fingerprints", weights["data_fingerprints"].clone(), persistent=True)
    model.load_state_dict(weights, strict=True, model_cfg=cfg.model)
    return model


def load_gile_model(path: str, data: Optional[str] = None, pretrained_encoder: Optional[str] = None, *,
                    label_file: Optional[str] = None, eval_label_file: Optional[str] = None):
    """``(model, task)`` of a ``gile_classifier`` checkpoint; ``data``: the preprocessed directory (default: the one
    recorded in the checkpoint); ``pretrained_encoder``: where its sentence encoder is now (default: where it was);
    ``label_file``, ``eval_label_file``: where its --label-file / --eval-label-file are now (default: where they
    were)."""
    model, task, _ = load_gile_checkpoint(path, data, pretrained_encoder, "load_gile_model", label_file=label_file,
                                          eval_label_file=eval_label_file)
    return model, task


def load_gile_checkpoint(path: str, data: Optional[str] = None, pretrained_encoder: Optional[str] = None,
                         command: Optional[str] = None, *, label_file: Optional[str] = None,
                         eval_label_file: Optional[str] = None):
    """``(model, task, cfg)`` of a ``gile_classifier`` checkpoint (:func:`load_gile_model` and the checkpoint's
    configuration, whose ``criterion`` says how its logits become probabilities). A missing file is a
    ``MissingFileError`` (a label file the checkpoint records too: :func:`fairseq_joint.checks.check_recorded_files`),
    a checkpoint of another kind a ``CheckpointError`` naming ``command`` (default: this process's program), refused
    before any model is built (:func:`load_checkpoint`: the model its ``--arch`` registers is a ``GileClassifier``)."""
    from fairseq import checkpoint_utils

    from fairseq_joint.models.gile_classifier import SENTENCE_ENCODERS

    given = {"data": data, "pretrained_encoder": pretrained_encoder, "label_file": label_file,
             "eval_label_file": eval_label_file}
    overrides = {key: value for key, value in given.items() if value}
    state = load_checkpoint(path, labels=True, overrides=overrides or None, command=command)
    cfg = checks.checkpoint_cfg(state)
    if pretrained_encoder and cfg.model.encoder not in SENTENCE_ENCODERS:  # it would be ignored
        raise errors.OptionError(f"--pretrained-encoder {pretrained_encoder}: {path} was trained with --encoder "
                                 f"{cfg.model.encoder}, which reads no sentence encoder: drop it")
    checks.check_recorded_files(path, cfg, overrides, command or errors.program())
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides or None,
                                                                      state=state)
    return models[0].eval(), task, cfg
