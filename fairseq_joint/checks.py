"""The plugin's checks of a whole fairseq configuration, run before fairseq starts any work.

fairseq-train, fairseq-validate and fairseq-interactive parse their arguments (importing the plugin through
``--user-dir``), then hand the configuration to ``fairseq.distributed.utils.call_main``.
``fairseq_joint.fairseq_patches`` wraps that function so that :func:`before_main` runs first: a refusal comes before any data is loaded or model built.
(fairseq-generate calls its main directly: its checkpoint's options, ``--model-overrides`` applied, are
checked by :func:`checkpoint_checks` when fairseq loads it, the ``checkpoint_kind`` patch of ``fairseq_patches``.)

Numbers: every numeric option of the plugin (its commands' arguments, and the fields of its models', criteria's and
task's configurations) is checked by one function, :func:`number_problem`: finite, and inside the :class:`Range`
declared next to the option (a dataclass field's ``metadata={"range": Range(...)}``, a command's
``fairseq_joint.cli.common.number(...)`` argument type).
"""

import argparse
import dataclasses
import os
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from fairseq_joint import errors
from fairseq_joint.options import (
    ANY,
    DROPOUT,
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    RANGE,
    Range,
    check_number,
    number_problem,
)
from fairseq_joint.precision import check_precision


def plugin_dataclasses() -> List[type]:
    """Every fairseq configuration dataclass the plugin defines (its models', criteria's and tasks')."""
    from fairseq.dataclass import FairseqDataclass

    found, todo = [], list(FairseqDataclass.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.startswith("fairseq_joint.") and cls not in found:
            found.append(cls)
    return sorted(found, key=lambda c: (c.__module__, c.__qualname__))


def own_fields(cls) -> Iterator[dataclasses.Field]:
    """The fields ``cls`` declares itself (not those it inherits)."""
    own = cls.__dict__.get("__annotations__", {})
    return (f for f in dataclasses.fields(cls) if f.name in own)


def numeric_fields(section) -> Dict[str, Tuple[Range, str]]:
    """``{field: (range, declaring dataclass)}`` of the plugin's numeric options in one section of a configuration
    (``cfg.model``, ``cfg.criterion``, ``cfg.task``: a DictConfig or, for a legacy model, a Namespace): the fields
    of every plugin dataclass whose fields the section all holds, with the range declared next to the field (a
    float without one: any finite number)."""
    names = set(vars(section) if isinstance(section, argparse.Namespace) else section.keys())
    out = {}
    for cls in plugin_dataclasses():
        fields = [f for f in dataclasses.fields(cls) if f.name != "_name"]
        if not fields or any(f.name not in names for f in fields):
            continue
        for f in own_fields(cls):
            allowed = f.metadata.get(RANGE)
            if allowed is None and f.type in (float, Optional[float]):
                allowed = ANY
            if allowed is not None:
                out.setdefault(f.name, (allowed, cls.__qualname__))
    return out


def check_numbers(cfg) -> None:
    """:func:`check_number` on every numeric option of the plugin in ``cfg``'s model, criterion and task
    (:func:`numeric_fields`; an unset optional one, None, is not checked)."""
    for part in ("model", "criterion", "task"):
        section = getattr(cfg, part, None)
        if section is None:
            continue
        for name, (allowed, _) in numeric_fields(section).items():
            value = getattr(section, name)
            if value is not None:
                check_number("--" + name.replace("_", "-"), value, allowed)


#: fairseq's own numeric options the plugin checks the range of (every other float fairseq parses: finite), by
#: argument name; the plugin's own options are checked with their declared ranges (:func:`numeric_fields`; one
#: named as one of these, ``dropout``, declares the same range)
FAIRSEQ_RANGES: Dict[str, Range] = {
    **{name: POSITIVE for name in ("lr", "adam_eps")},
    **{name: NON_NEGATIVE for name in ("clip_norm", "weight_decay", "stop_time_hours", "max_len_a")},
    **{name: DROPOUT for name in ("dropout", "attention_dropout", "activation_dropout", "relu_dropout",
                                  "encoder_dropout_in", "encoder_dropout_out", "decoder_dropout_in",
                                  "decoder_dropout_out", "label_smoothing", "encoder_layerdrop", "decoder_layerdrop")},
    **{name: POSITIVE_INT for name in ("update_freq", "beam", "nbest", "max_tokens", "batch_size", "max_tokens_valid",
                                       "batch_size_valid", "required_batch_size_multiple", "log_interval")},
    **{name: NON_NEGATIVE_INT for name in ("max_update", "max_epoch", "warmup_updates", "save_interval_updates",
                                           "validate_interval_updates", "num_workers", "max_len_b",
                                           "min_len", "no_repeat_ngram_size")},
    #: what fairseq's numpy seeding accepts (np.random.seed)
    "seed": Range(0, 2 ** 32 - 1, integer=True),
}
#: fairseq's options whose value is a Python literal of numbers (fairseq evaluates it), with their range
FAIRSEQ_LITERALS: Dict[str, Range] = {"adam_betas": Range(0, 1, high_open=True)}


def fairseq_option_problems(args: argparse.Namespace) -> Iterator[Tuple[str, object, Range]]:
    """``(--option, value, range)`` of every numeric value fairseq parsed into ``args`` (each of a list: ``--lr``,
    ``--update-freq``) that :func:`number_problem` refuses: not finite, or outside :data:`FAIRSEQ_RANGES`. The
    plugin's own options are left to :func:`check_numbers`, which knows their ranges."""
    plugin = {f.name for cls in plugin_dataclasses() for f in own_fields(cls)}
    for name, value in sorted(vars(args).items()):
        if name in FAIRSEQ_LITERALS and isinstance(value, str):
            try:  # as fairseq reads it (its optimizer evaluates the text), without builtins but float
                value = eval(value, {"__builtins__": {}}, {"float": float})  # noqa: S307
            except Exception:  # noqa: BLE001  (not numbers: fairseq's own error says so)
                continue
            if isinstance(value, (int, float)):
                value = [value]
            for item in value if isinstance(value, (list, tuple)) else []:
                if number_problem(item, FAIRSEQ_LITERALS[name]) is not None:
                    yield "--" + name.replace("_", "-"), item, FAIRSEQ_LITERALS[name]
            continue
        allowed = FAIRSEQ_RANGES.get(name)
        if name in plugin and allowed is None:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, bool) or not isinstance(item, (int, float)):
                continue
            rule = allowed or ANY  # finite; an integer one within 64 bits
            if number_problem(item, rule) is not None:
                yield "--" + name.replace("_", "-"), item, rule


def check_fairseq_options(args: argparse.Namespace, given: Sequence[str] = ()) -> None:
    """Refuse the first of :func:`fairseq_option_problems` (fairseq's commands, as they parse their arguments): one
    of the command line ``given`` first (an architecture copies ``--dropout`` into ``--decoder-dropout-in``); then
    options that contradict each other silently: ``--nbest`` above ``--beam`` (a beam search keeps ``--beam``
    hypotheses, fairseq printed fewer than asked) and a ``--restore-file`` that does not exist (fairseq-train
    trained from scratch without a word)."""
    typed = {arg.split("=", 1)[0] for arg in given}
    for option, value, allowed in sorted(fairseq_option_problems(args), key=lambda p: p[0] not in typed):
        check_number(option, value, allowed)
    beam, nbest = getattr(args, "beam", None), getattr(args, "nbest", None)
    if isinstance(beam, int) and isinstance(nbest, int) and nbest > beam and not getattr(args, "sampling", False):
        raise errors.OptionError(f"--nbest {nbest} is above --beam {beam}: a beam search keeps --beam hypotheses; "
                                 f"give --beam {nbest} or more, or a smaller --nbest")
    restore = getattr(args, "restore_file", None)
    if restore and restore != "checkpoint_last.pt" and "://" not in restore and not os.path.isfile(restore):
        raise errors.MissingFileError(f"--restore-file {restore}: no such checkpoint (fairseq-train would start from "
                                      "scratch without a word): give an existing checkpoint, or drop --restore-file "
                                      "to resume from --save-dir's checkpoint_last.pt")


def check_configuration(cfg, training: bool = True) -> None:
    """Everything the plugin can check from fairseq's configuration alone; ``training``: for fairseq-train (whose
    trainer needs the hardware of a precision flag; validate/interactive/generate run a half model on the CPU)."""
    check_numbers(cfg)
    common = getattr(cfg, "common", None)
    if common is not None and training:
        check_precision(common)
    criterion = getattr(cfg, "criterion", None)
    if criterion is not None and training:
        check_criterion_options(criterion)
    if training and getattr(cfg, "task", None) is not None and getattr(cfg, "model", None) is not None:
        check_task_model_criterion(cfg)
    if getattr(getattr(cfg, "task", None), "language_weights", None):
        check_language_weights(cfg.task)


def check_language_weights(task) -> None:
    """The λ of ``--language-weights`` (as ``data.gile_files.parse_language_weights`` reads them, which refuses an
    unknown language or a negative weight) finite: ``pl=nan`` trained into NaN gradients."""
    from fairseq_joint.data.gile_files import parse_language_weights, parse_languages

    for lang, weight in parse_language_weights(task.language_weights, parse_languages(task.languages)).items():
        if number_problem(weight, NON_NEGATIVE) is not None:
            raise errors.OptionError(f"--language-weights {lang}={weight}: the weight must be {NON_NEGATIVE}: give "
                                     "LANG=W with a finite W")


#: the criteria that train a gile_classifier (on the gile_classification task), and only one
GILE_CRITERIA = ("multilabel_classification", "gile_label_embedding_cross_entropy")
#: a translation criterion's GILE counterpart (the same loss for labels)
GILE_COUNTERPARTS = {"label_embedding_cross_entropy": "gile_label_embedding_cross_entropy"}


def check_task_model_criterion(cfg) -> None:
    """fairseq-train's ``--task``, ``--arch`` and ``--criterion`` belong together: the ``gile_classification`` task
    trains a ``gile_classifier`` model (any of its presets) with one of :data:`GILE_CRITERIA`, and these train nothing
    else (fairseq otherwise fails mid-run: a shape error of cross_entropy, a translation model's missing
    ``prev_output_tokens``, a configuration key the task lacks)."""
    task, criterion = cfg.task._name, getattr(cfg.criterion, "_name", None)
    model = checkpoint_model(cfg)
    arch = cfg.model.arch if isinstance(cfg.model, argparse.Namespace) else cfg.model._name
    if task == GILE_TASK and model != GILE_MODEL:
        raise errors.OptionError(f"--task {GILE_TASK} trains a {GILE_MODEL} model, not --arch {arch} ({model}): use "
                                 f"--arch {GILE_MODEL} (or one of its presets, e.g. gile_pretrained)")
    if task != GILE_TASK and model == GILE_MODEL:
        raise errors.OptionError(f"--arch {arch} is a {GILE_MODEL}, which only --task {GILE_TASK} trains (not --task "
                                 f"{task}): add --task {GILE_TASK}")
    if task == GILE_TASK and criterion not in GILE_CRITERIA:
        default = " (fairseq's default)" if criterion == "cross_entropy" else ""
        fix = GILE_COUNTERPARTS.get(criterion, GILE_CRITERIA[0])
        raise errors.OptionError(f"--task {GILE_TASK} trains with --criterion {' or '.join(GILE_CRITERIA)}, not "
                                 f"{criterion}{default}: use --criterion {fix}")
    if task != GILE_TASK and criterion in GILE_CRITERIA:
        raise errors.OptionError(f"--criterion {criterion} trains a {GILE_MODEL} on --task {GILE_TASK}, not --task "
                                 f"{task}: use another criterion (cross_entropy, label_smoothed_cross_entropy, "
                                 "sampled_cross_entropy, label_embedding_cross_entropy) or --task " + GILE_TASK)


def check_criterion_options(c) -> None:
    """The options of fairseq-joint's criteria, with the checks the criteria run themselves (fairseq builds a
    criterion only after loading the validation data and building the model)."""
    from fairseq_joint.modules.chunked_softmax import check_chunk_size
    from fairseq_joint.modules.label_embedding import check_label_embedding_options
    from fairseq_joint.modules.sampling import sampling_requested

    name = getattr(c, "_name", None)
    if name in ("sampled_cross_entropy", "label_embedding_cross_entropy", "gile_label_embedding_cross_entropy"):
        sampling_requested(c.sample_rate, c.num_samples)
        if name == "sampled_cross_entropy" and c.vocab_chunk_size is not None:  # the only one with chunks
            check_chunk_size(c.vocab_chunk_size)
    if name in ("label_embedding_cross_entropy", "gile_label_embedding_cross_entropy"):
        check_label_embedding_options(tau=c.label_embedding_tau, p=c.label_embedding_hinge_p,
                                      beta=c.label_embedding_beta, warmup_updates=c.label_embedding_warmup_updates,
                                      dim=c.label_embedding_dim)
    if name == "multilabel_classification":
        from fairseq_joint.criterions.multilabel_classification import check_classification_options

        check_classification_options(c.label_sample_rate, c.threshold)


def before_main(cfg, main) -> None:
    """What runs before fairseq's ``call_main(cfg, main)`` starts ``main``: :func:`check_configuration`, and for
    fairseq-train the SIGTERM handler and resume note of :func:`fairseq_joint.errors.training_started` and the kind
    of checkpoint it may load (:func:`check_training_checkpoint`)."""
    training = getattr(main, "__module__", "") == "fairseq_cli.train"
    check_configuration(cfg, training=training)
    if training:
        _training_kind["labels"] = cfg.task._name == GILE_TASK
        checkpoint = getattr(cfg, "checkpoint", None)
        errors.training_started(None if checkpoint is None or checkpoint.no_save else checkpoint.save_dir)


# ---------------------------------------------------------------------------------------------- parallel text
def check_parallel_text(args: argparse.Namespace) -> None:
    """fairseq-preprocess's text (``--trainpref``, ``--validpref``, ``--testpref``, each ``PREFIX.LANG``): every file
    there, none empty, and with ``--target-lang`` the two sides of a prefix of the same number of lines; fairseq
    binarizes misaligned sides without a word (training then fails) and an empty side into an empty ``.bin``."""
    langs = [lang for lang in (args.source_lang, None if args.only_source else args.target_lang) if lang]
    for option in ("trainpref", "validpref", "testpref"):
        for prefix in filter(None, (getattr(args, option, None) or "").split(",")):
            flag = "--" + option
            counts = {}
            for lang in langs or [None]:
                path = f"{prefix}.{lang}" if lang else prefix
                if not os.path.isfile(path):
                    raise errors.MissingFileError(f"{flag} {prefix}: {path} does not exist (fairseq-preprocess reads "
                                                  "PREFIX.LANG for --source-lang and --target-lang)")
                with open(path, "rb") as f:
                    counts[path] = sum(1 for _ in f)
                if counts[path] == 0:
                    raise errors.InputError(f"{flag} {prefix}: {path} is empty: give a text with one sentence a line")
            if len(set(counts.values())) > 1:
                (a, na), (b, nb) = counts.items()
                raise errors.InputError(f"{flag} {prefix} is misaligned: {a} has {na} lines but {b} has {nb}; give "
                                        "files whose line i translate each other")


# ---------------------------------------------------------------------------------------------- checkpoint kinds
#: the model (and task) of the plugin's text classifier: its checkpoints score labels, every other one translates
GILE_MODEL = "gile_classifier"
GILE_TASK = "gile_classification"


def checkpoint_cfg(state: Dict[str, object]):
    """The configuration a fairseq checkpoint dict records (``cfg``, or converted from an old one's ``args``)."""
    if state.get("cfg") is not None:
        return state["cfg"]
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    return convert_namespace_to_omegaconf(state["args"])


def checkpoint_model(cfg) -> str:
    """The registered model name of a checkpoint's configuration (``gile_classifier``, ``joint_transformer``, ...):
    its ``--arch`` mapped to the model it belongs to."""
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY

    arch = cfg.model.arch if isinstance(cfg.model, argparse.Namespace) else cfg.model._name
    return ARCH_MODEL_NAME_REGISTRY.get(arch, str(arch))


def check_checkpoint_kind(path: str, cfg, labels: bool, command: str) -> None:
    """Refuse ``path`` (configuration ``cfg``) unless it is the kind ``command`` needs: a ``gile_classifier`` model
    when ``labels`` (the command scores labels: ``--task gile_classification``, fairseq-joint-predict-labels), a
    translation model otherwise (fairseq-generate, -interactive, -validate of a translation task)."""
    model = checkpoint_model(cfg)
    if (model == GILE_MODEL) == labels:
        return
    if labels:
        raise errors.CheckpointError(
            f"{path} is a {model} checkpoint (task {cfg.task._name}); {command} needs a {GILE_MODEL} model (trained "
            f"by fairseq-train --task {GILE_TASK}; fairseq-generate and fairseq-interactive translate with this one)")
    raise errors.CheckpointError(f"{path} is a {GILE_MODEL} checkpoint; {command} needs a translation model "
                                 "(fairseq-joint-predict-labels scores labels with this one)")


#: the kind of checkpoint this process's fairseq-train run trains (``labels``: a gile_classifier), set by before_main
_training_kind: Dict[str, bool] = {}


def training_finished() -> None:
    """fairseq-train's main returned or raised: later loads in this process (the Python API, a second command run in
    process) are not the training run's, so no kind is enforced on them."""
    _training_kind.clear()


def check_training_checkpoint(path: str, state: Dict[str, object]) -> None:
    """Under fairseq-train, refuse a checkpoint of the other kind than the run trains (``--finetune-from-model``,
    ``--restore-file``) before fairseq loads its weights into the model; elsewhere nothing."""
    if "labels" in _training_kind:
        check_checkpoint_kind(path, checkpoint_cfg(state), _training_kind["labels"], "fairseq-train")


def checkpoint_checks(path: str, state: Dict[str, object], task, arg_overrides: Optional[dict], command: str) -> None:
    """What fairseq's ``load_model_ensemble_and_task`` is about to build from the checkpoint dict ``state`` of
    ``path``, checked first: the kind of model the command's task needs (``task``, or the ``task`` of
    ``arg_overrides``, fairseq-validate's; neither: the checkpoint's own task is used) and the numbers of its
    options, overrides applied (:func:`check_numbers`)."""
    cfg = checkpoint_cfg(state)
    labels = None
    if task is not None:
        from fairseq_joint.tasks.gile_classification import GileClassificationTask

        labels = isinstance(task, GileClassificationTask)
    elif arg_overrides and arg_overrides.get("task"):
        labels = arg_overrides["task"] == GILE_TASK
    if labels is not None:
        check_checkpoint_kind(path, cfg, labels, command)
    if task is None:  # the checkpoint's own task is set up: it reads the files it records
        check_recorded_files(path, cfg, arg_overrides, command)
    check_numbers(cfg)


#: the files a checkpoint's configuration records besides its data directory (whose refusal, naming --data, is the
#: data's own: ``data.gile_files``), as ``(group, option, what the checkpoint records, what to give)``: the label
#: files and the sentence-transformers directory of --encoder pretrained/hybrid (a directory; the loaders' keyword is
#: the option's name)
RECORDED_FILES = (("task", "label_file", "its label files", "the label<TAB>description file"),
                  ("task", "eval_label_file", "its label files", "the label<TAB>description file"),
                  ("model", "pretrained_encoder", "its sentence encoder's directory",
                   "a local sentence-transformers model directory"))
#: the plugin's commands that take --label-file / --eval-label-file / --pretrained-encoder for a checkpoint's moved files
FLAG_COMMANDS = ("fairseq-joint-predict-labels",)


def check_recorded_files(path: str, cfg, overrides: Optional[dict], command: str) -> None:
    """The files the configuration ``cfg`` of checkpoint ``path`` records (``--label-file``, ``--eval-label-file``,
    ``--pretrained-encoder``; ``overrides`` applied) exist; else a ``MissingFileError`` naming the option that gives
    where the file is now: the option itself for the plugin's commands that take it (:data:`FLAG_COMMANDS`) and under
    fairseq's commands for a task's file (fairseq-validate reads the task's options from its command line), fairseq's
    ``--model-overrides`` for a model's, the loaders' keyword for the Python API (``command``)."""
    for group, option, records, what in RECORDED_FILES:
        section = getattr(cfg, group, None)
        given = (overrides or {}).get(option)
        recorded = getattr(section, option, None) if section is not None else None
        value = given if given else recorded
        directory = option == "pretrained_encoder"
        if not isinstance(value, str) or not value or (os.path.isdir(value) if directory else os.path.isfile(value)):
            continue
        flag = "--" + option.replace("_", "-")
        if given:
            raise errors.MissingFileError(f"{flag} {value}: no such {'directory' if directory else 'file'}: give "
                                          f"{what}")
        fairseq = command.startswith("fairseq-") and not command.startswith("fairseq-joint-")
        if command in FLAG_COMMANDS or (fairseq and group == "task"):
            fix = f"give {command} {flag} where it is now"
        elif fairseq:
            fix = f"give {command} --model-overrides \"{{'{option}': 'WHERE IT IS NOW'}}\""
        else:
            fix = (f"put it back, or give where it is now ({option}= of LabelPredictor.from_checkpoint or "
                   f"fairseq_joint.cli.common.load_gile_model; fairseq-joint-predict-labels {flag})")
        raise errors.MissingFileError(f"{flag} {value}, which {path} was trained with (a checkpoint records "
                                      f"{records}), does not exist: {fix}")
