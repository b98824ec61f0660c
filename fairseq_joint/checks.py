"""The plugin's checks of a whole fairseq configuration, run before fairseq starts any work, by every route into
fairseq (its console scripts, ``python -m fairseq_cli.*``, ``torchrun --no-python``, fairseq's hub and the plugin's
loaders), through the changes of ``fairseq_joint.fairseq_patches``:

* fairseq's commands parse their arguments (importing the plugin through ``--user-dir``): fairseq's own numbers are
  checked there (:func:`check_fairseq_options`, the ``option_numbers`` patch);
* fairseq-train, -validate and -interactive hand the configuration to ``fairseq.distributed.utils.call_main``:
  :func:`before_main` runs first (the ``checks`` patch), so a refusal comes before any data is loaded or model built;
  :func:`validate` checks the plugin's options there, each section as the dataclasses fairseq's registries hold for
  what it names declare them (their :class:`~fairseq_joint.options.Range` and ``validate()``;
  :mod:`fairseq_joint.options`);
* a checkpoint's configuration, ``--model-overrides`` applied, is checked when fairseq (fairseq-generate too) or the
  plugin loads it (:func:`checkpoint_checks`, the ``checkpoint_kind`` patch);
* fairseq-preprocess's text is checked before anything is binarized (:func:`check_parallel_text`).
"""

import argparse
import codecs
import contextlib
import copy
import dataclasses
import functools
import importlib.util
import inspect
import io
import numbers
import os
import sys
from typing import Callable, Dict, FrozenSet, Iterable, Iterator, Optional, Sequence, Tuple

from fairseq_joint import checkpoints, errors
from fairseq_joint.data.gile_files import parse_languages
from fairseq_joint.models.gile_classifier import SENTENCE_ENCODERS, GileClassifier
from fairseq_joint.options import (
    ANY,
    DROPOUT,
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    SECTIONS,
    Configured,
    Range,
    arch,
    check,
    check_choice,
    check_number,
    declared,
    flag,
    keyword,
    number_problem,
    ranges,
    registered,
)
from fairseq_joint.precision import check_precision
from fairseq_joint.tasks.gile_classification import GileClassificationTask
from fairseq_joint.text_files import check_exists, content_lines, text_lines


def plugin_configs() -> Tuple[type, ...]:
    """The dataclasses of the plugin's options that fairseq's registries hold: its tasks', criteria's and models'
    (a legacy model's :attr:`~fairseq_joint.options.Configured.configs`)."""
    from fairseq.criterions import CRITERION_DATACLASS_REGISTRY
    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_DATACLASS_REGISTRY
    from fairseq.tasks import TASK_DATACLASS_REGISTRY

    found = [*TASK_DATACLASS_REGISTRY.values(), *CRITERION_DATACLASS_REGISTRY.values(),
             *MODEL_DATACLASS_REGISTRY.values()]
    found += [c for model in ARCH_MODEL_REGISTRY.values() if issubclass(model, Configured) for c in model.configs]
    return tuple(sorted({c for c in found if c.__module__.startswith("fairseq_joint.")},
                        key=lambda c: (c.__module__, c.__qualname__)))


def validate(cfg, training: bool = True, rules: Sequence[str] = ()) -> None:
    """The plugin's options in ``cfg`` (a whole fairseq configuration: the command's, or a checkpoint's), each section
    as the dataclasses fairseq's registries hold for what it names declare them (:func:`fairseq_joint.options.check`):
    their numbers always, their cross-field rules (``validate(cfg)``) for a training run, whose task, model and
    criterion come from one command line, and those of the sections ``rules`` (a checkpoint's whose options are
    overridden: the rules a checkpoint was trained under may be older than today's, its overrides are today's)."""
    for section in SECTIONS:
        for config in declared(cfg, section):
            check(config, getattr(cfg, section), cfg, rules=training or section in rules)


#: fairseq's own numeric options the plugin checks the range of (every other float fairseq parses: finite), by
#: argument name; the plugin's own options are checked with their declared ranges (:func:`validate`; one named as one
#: of these, ``dropout``, declares the same range)
FAIRSEQ_RANGES: Dict[str, Range] = {
    **{name: POSITIVE for name in ("lr", "adam_eps")},
    **{name: NON_NEGATIVE for name in ("clip_norm", "weight_decay", "stop_time_hours", "max_len_a")},
    **{name: DROPOUT for name in ("dropout", "attention_dropout", "activation_dropout", "relu_dropout",
                                  "encoder_dropout_in", "encoder_dropout_out", "decoder_dropout_in",
                                  "decoder_dropout_out", "label_smoothing", "encoder_layerdrop", "decoder_layerdrop")},
    **{name: POSITIVE_INT for name in ("update_freq", "beam", "nbest", "max_tokens", "batch_size", "max_tokens_valid",
                                       "batch_size_valid", "required_batch_size_multiple", "log_interval",
                                       # the sizes of fairseq's Transformer and LSTM (0 failed in a traceback)
                                       "encoder_embed_dim", "decoder_embed_dim", "encoder_ffn_embed_dim",
                                       "decoder_ffn_embed_dim", "encoder_attention_heads", "decoder_attention_heads",
                                       "encoder_hidden_size", "decoder_hidden_size", "decoder_out_embed_dim")},
    # (a Transformer of 0 encoder or decoder layers is an ablation fairseq builds)
    **{name: NON_NEGATIVE_INT for name in ("encoder_layers", "decoder_layers", "max_update", "max_epoch",
                                           "warmup_updates", "save_interval_updates",
                                           "validate_interval_updates", "num_workers", "max_len_b",
                                           "min_len", "no_repeat_ngram_size")},
    #: fairseq seeds numpy with seed + epoch at each epoch (np.random.seed takes below 2^32: a seed near 2^32 - 1
    #: failed in a ValueError when an epoch began): room for 2^31 epochs
    "seed": Range(0, 2 ** 31 - 1, integer=True),
    "temperature": POSITIVE,  # fairseq's sampling divides by it (an assertion refused 0)
}
#: fairseq's options whose value is a Python literal of numbers (fairseq evaluates it), with their range
FAIRSEQ_LITERALS: Dict[str, Range] = {"adam_betas": Range(0, 1, high_open=True)}


def fairseq_option_problems(args: argparse.Namespace) -> Iterator[Tuple[str, object, Range]]:
    """``(option, value, range)`` of every numeric value fairseq parsed into ``args`` (each of a list: ``--lr``,
    ``--update-freq``) that :func:`number_problem` refuses: not finite, or outside :data:`FAIRSEQ_RANGES`. The
    plugin's own options are left to :func:`validate`, which knows their ranges."""
    plugin = {name for config in plugin_configs() for name, _ in ranges(config)}
    for name, value in sorted(vars(args).items()):
        rule = FAIRSEQ_LITERALS.get(name) or FAIRSEQ_RANGES.get(name, ANY)  # ANY: finite; an integer within 64 bits
        literal = name in FAIRSEQ_LITERALS and isinstance(value, str)
        if literal:
            try:  # as fairseq reads it (its optimizer evaluates the text), without builtins but float
                value = eval(value, {"__builtins__": {}}, {"float": float})  # noqa: S307
            except Exception:  # noqa: BLE001  (not numbers: fairseq's own error says so)
                continue
        elif name in plugin and name not in FAIRSEQ_RANGES:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            # every item of a literal must be a number (True, None, 'x' too are refused); elsewhere only numbers count
            number = isinstance(item, (int, float)) and not isinstance(item, bool)
            if (number or literal) and number_problem(item, rule) is not None:
                yield name, item, rule


def check_fairseq_options(args: argparse.Namespace, given: Sequence[str] = (), keywords: bool = False) -> None:
    """Refuse the first of :func:`fairseq_option_problems` (fairseq's commands, as they parse their arguments; with
    ``keywords``, named as the Python keywords they were given as, :func:`~fairseq_joint.options.keyword`): one
    of the command line ``given`` first (an architecture copies ``--dropout`` into ``--decoder-dropout-in``); then
    options that contradict each other silently: ``--nbest`` above ``--beam`` (a beam search keeps ``--beam``
    hypotheses, fairseq printed fewer than asked), options fairseq-generate fails on in a traceback
    (``--diverse-beam-groups``, ``--constraints``), a ``--restore-file`` (with ``--checkpoint-suffix`` in its name, as
    fairseq reads it) or ``--continue-once`` that does not exist (fairseq-train trained from scratch without a word),
    ``--write-checkpoints-asynchronously`` without iopath (fairseq-train exited 0 having trained nothing),
    one of ``--source-lang``/``--target-lang`` without the other (the translation task infers both from DATA then, the
    one given ignored) and an option of the plugin's models or criteria given to fairseq-generate, which builds the
    checkpoint's model (``--output-layer tied`` was ignored)."""
    typed = {arg.split("=", 1)[0] for arg in given}
    for name, value, allowed in sorted(fairseq_option_problems(args), key=lambda p: flag(p[0]) not in typed):
        check_number(keyword(name, getattr(args, name)) if keywords else flag(name), value, allowed)  # as given
    check_nbest(getattr(args, "nbest", None), getattr(args, "beam", None), getattr(args, "sampling", False), keywords)
    groups, generate = getattr(args, "diverse_beam_groups", None), errors.program() == "fairseq-generate"
    if generate:  # a split of binarized data: batches
        check_diverse_beam_groups(groups, f"--diverse-beam-groups {groups}",
                                  "drop it (--diversity-rate R diversifies the beam instead)")
    if generate and getattr(args, "constraints", None):
        raise errors.OptionError("--constraints: fairseq-generate's binarized data carries no constraints (fairseq "
                                 "failed in a TypeError): give them to fairseq-interactive, each after its sentence "
                                 "on the line, separated by tabs")
    langs = {flag(name): getattr(args, name, None) for name in ("source_lang", "target_lang")}
    if getattr(args, "task", None) == "translation" and sum(v is not None for v in langs.values()) == 1:
        given, other = sorted(langs, key=lambda name: langs[name] is None)
        raise errors.OptionError(f"{given} {langs[given]} without {other}: fairseq's translation task infers both from "
                                 f"DATA's file names and ignores {given} then: give {other} too")
    unused = next((arg.split("=", 1)[0] for arg in given if arg.split("=", 1)[0] in training_flags()), None) \
        if errors.program() == "fairseq-generate" else None  # its parser takes any --arch's and --criterion's options
    if unused:
        raise errors.OptionError(f"{unused} is a training option (of a model or a criterion), which fairseq-generate "
                                 "does not read: the checkpoint's model translates as it was trained: drop it")
    restore, suffix = getattr(args, "restore_file", None), getattr(args, "checkpoint_suffix", None)
    if restore and restore != "checkpoint_last.pt" and "://" not in restore:
        read = restore.replace(".pt", suffix + ".pt") if suffix else restore  # as fairseq names it
        check_exists(read, "--restore-file" + (f" {restore} with --checkpoint-suffix {suffix}:" if suffix else ""),
                     "give an existing checkpoint, or drop --restore-file to resume from --save-dir's "
                     "checkpoint_last.pt")
    once = getattr(args, "continue_once", None)
    if once and "://" not in once:  # read when --save-dir holds no checkpoint_last.pt yet
        check_exists(once, "--continue-once", "give an existing checkpoint, or drop --continue-once")
    if getattr(args, "write_checkpoints_asynchronously", False) and importlib.util.find_spec("iopath") is None:
        raise errors.OptionError("--write-checkpoints-asynchronously needs iopath, which is not installed "
                                 "(fairseq-train logged it and exited 0 having trained nothing): pip install iopath, "
                                 "or drop the option")


def check_diverse_beam_groups(groups, option: str, fix: str, batches: Optional[Callable[[], int]] = None) -> None:
    """``groups`` of diverse beam search refused above 1 (named ``option``, ending in ``fix``) for a translation of
    more than one batch: fairseq-generate's split, or where ``batches()`` counts more than one (the hub interface's
    sentences; counted only for groups above 1). fairseq 0.12's diverse beam search indexes its state of a batch by
    the sentences' ids: an IndexError at the second batch."""
    if isinstance(groups, int) and groups > 1 and (batches is None or batches() > 1):
        raise errors.OptionError(f"{option}: fairseq 0.12's diverse beam search fails on more than one batch (it "
                                 f"indexes a batch's state by sentence id, an IndexError): {fix}")


def check_nbest(nbest, beam, sampling, keywords: bool = False) -> None:
    """``nbest`` hypotheses at most ``beam``, unless ``sampling``: a beam search keeps ``beam`` (fairseq printed fewer
    than asked); named as command-line options, or with ``keywords`` as the hub interface's (``nbest=7``)."""
    if isinstance(beam, int) and isinstance(nbest, int) and nbest > beam and not sampling:
        n, b = ("nbest", "beam") if keywords else ("--nbest", "--beam")
        sep = "=" if keywords else " "
        raise errors.OptionError(f"{n}{sep}{nbest} is above {b}{sep}{beam}: raise {b} to {nbest} or lower {n}")


@functools.lru_cache(maxsize=1)
def training_flags() -> FrozenSet[str]:
    """The flags of the options of the plugin's models and criteria (what its tasks declare excluded)."""
    from fairseq.tasks import TASK_DATACLASS_REGISTRY

    tasks = set(TASK_DATACLASS_REGISTRY.values())
    return frozenset(flag(f.name) for c in plugin_configs() if c not in tasks for f in dataclasses.fields(c)
                     if not f.name.startswith("_"))


# ---------------------------------------------------------------------------------------------- the patches' logic
def parse_args_and_arch(original, parser, input_args=None, parse_known=False, *args, **kwargs):
    """fairseq's ``parse_args_and_arch``, its numbers checked (:func:`check_fairseq_options`; the ``option_numbers``
    patch of ``fairseq_joint.fairseq_patches``)."""
    parsed = original(parser, input_args, parse_known, *args, **kwargs)
    check_fairseq_options(parsed[0] if parse_known else parsed, sys.argv[1:] if input_args is None else input_args)
    return parsed


def preprocess(original, args):
    """fairseq-preprocess's ``main`` after :func:`check_parallel_text` (the ``parallel_text`` patch); its refusal to
    overwrite a dictionary of ``--destdir`` (a ``FileExistsError`` traceback) in one line."""
    check_parallel_text(args)
    try:
        return original(args)
    except FileExistsError as err:
        if err.filename is not None:  # fairseq's refusal is FileExistsError(path), not the OS's
            raise
        option = "--srcdict" if os.path.basename(str(err)) == f"dict.{args.source_lang}.txt" else "--tgtdict"
        raise errors.InputError(f"--destdir {args.destdir} already holds {err}: give a new --destdir, or binarize with "
                                f"that dictionary: {option} {err}") from err


def call_main(original, cfg, main, **kwargs):
    """fairseq's ``call_main`` after :func:`before_main` (the ``checks`` patch)."""
    before_main(cfg, main)
    try:
        return original(cfg, main, **kwargs)
    finally:
        _training_kind.clear()  # later loads in this process (the Python API, another command) are not the run's


def load_checkpoint_to_cpu(original, path, *args, **kwargs):
    """fairseq's ``load_checkpoint_to_cpu`` through :func:`fairseq_joint.checkpoints.load` (which names a file torch's
    ``weights_only`` unpickler refuses: :func:`fairseq_joint.errors.unsafe_checkpoint`); under fairseq-train a
    checkpoint of the other kind than the run trains is refused (:func:`check_checkpoint_kind`; the ``verified_load``
    patch)."""
    state = checkpoints.load(original, path, *args, **kwargs)
    if "labels" in _training_kind:  # under fairseq-train (--finetune-from-model, --restore-file)
        check_checkpoint_kind(path, checkpoint_cfg(state), _training_kind["labels"], "fairseq-train")
    return state


def load_model_ensemble_and_task(original, filenames, arg_overrides=None, task=None, strict=True, suffix="",
                                 num_shards=1, state=None):
    """fairseq's ``load_model_ensemble_and_task`` after :func:`checkpoint_checks` of each file (a missing one refused
    first: :func:`check_checkpoint_exists`; the ``checkpoint_kind`` patch); each checkpoint is read once (its state is
    handed on), an ensemble's one by one, so that a refusal of one of them (other dictionaries than the data's) names
    it."""
    from fairseq import checkpoint_utils

    states = []
    for filename in filenames:
        first = checkpoint_utils.get_maybe_sharded_checkpoint_filename(filename, suffix, 0, num_shards)
        check_checkpoint_exists(first)
        if state is not None:
            loaded, saved = state, None  # the caller's, its overrides applied as it chose
        else:
            loaded = checkpoint_utils.load_checkpoint_to_cpu(first)
            saved = copy.deepcopy(checkpoint_cfg(loaded))  # what the model was trained with, before the overrides
            apply_overrides(loaded, arg_overrides or {})
        checkpoint_checks(first, loaded, task, arg_overrides, errors.program(), saved=saved)
        states.append(loaded)
    if num_shards != 1 or state is not None:
        return original(filenames, arg_overrides, task, strict, suffix, num_shards, state)
    ensemble, cfg = [], None
    for filename, loaded in zip(filenames, states):  # as fairseq's loop: the task of the first, the cfg of the last
        try:
            models, cfg, task = original([filename], arg_overrides, task, strict, suffix, num_shards, loaded)
        except errors.CheckpointError as err:
            if len(filenames) == 1:
                raise
            raise errors.CheckpointError(f"{filename}: {err}") from err
        ensemble += models
    return ensemble, cfg, task


def before_main(cfg, main) -> None:
    """What runs before fairseq's ``call_main(cfg, main)`` starts ``main`` (fairseq-train, -validate, -interactive, by
    any route): :func:`validate`, several processes without a GPU (:func:`check_processes_without_gpus`), and for
    fairseq-train the precision flags against the hardware, the SIGTERM handler and resume note of
    :func:`fairseq_joint.errors.training_started`, the kind of checkpoint it may load (:func:`load_checkpoint_to_cpu`
    refuses the other) and its DATA (:func:`check_training_data`)."""
    training = errors.fairseq_program(main) == "fairseq_cli.train"
    validate(cfg, training=training)
    if training:
        check_precision(cfg.common)
    check_processes_without_gpus(cfg)
    if training:
        check_training_data(cfg)
        _training_kind["labels"] = issubclass(registered(cfg, "task"), GileClassificationTask)
        errors.training_started(None if cfg.checkpoint.no_save else cfg.checkpoint.save_dir)


def check_training_data(cfg) -> None:
    """fairseq-train's DATA for fairseq's translation task, ``DIR1:DIR2:...`` (fairseq trains on one directory an
    epoch, reading each with the first's dictionaries): every directory there, each of the others holding the
    training split and the first's dictionaries (another's word ids were read through the first's dictionaries
    without a word; a missing or empty directory failed in a traceback after an epoch); a corpus fairseq-preprocess
    wrote ``--dataset-impl lazy`` (or ``cached``) read with ``--dataset-impl`` given (fairseq infers ``cached`` and
    failed in training with a ``KeyError``); ``--load-alignments`` finding alignments (fairseq trained without them,
    the alignment loss 0). (The first directory's missing split is fairseq's own refusal, ``errors.translate``.)"""
    import glob

    from fairseq import utils
    from fairseq.data import Dictionary, indexed_dataset
    from fairseq.tasks.translation import TranslationTask

    if not issubclass(registered(cfg, "task"), TranslationTask) or "://" in str(cfg.task.data):
        return
    task, data = cfg.task, str(cfg.task.data)
    first, *others = shards = utils.split_paths(data)
    for shard in shards:
        check_exists(shard, f"DATA {data}:" if others else "DATA", "give the directories fairseq-preprocess wrote, "
                     "separated by ':'" if others else "give the directory fairseq-preprocess wrote", directory=True)
    langs = [lang for lang in (task.source_lang, task.target_lang) if lang]
    names = [f"dict.{lang}.txt" for lang in langs] if len(langs) == 2 else \
        sorted(n for n in os.listdir(first) if n.startswith("dict.") and n.endswith(".txt"))
    for name in names if others else ():
        words = Dictionary.load(os.path.join(first, name)).symbols if os.path.isfile(os.path.join(first, name)) \
            else None
        for other in (os.path.join(shard, name) for shard in others):
            if words is not None and os.path.isfile(other) and Dictionary.load(other).symbols != words:
                raise errors.InputError(f"DATA {data}: {other} is not the first directory's {name}, with whose word "
                                        f"ids fairseq reads every directory: binarize each with fairseq-preprocess "
                                        f"--srcdict/--tgtdict {first}/dict.LANG.txt")
    for shard in shards:
        split = os.path.join(glob.escape(shard), glob.escape(task.train_subset))
        if shard is not first and not glob.glob(f"{split}.*-*.*"):
            raise errors.MissingFileError(f"DATA {data}: {shard} holds no '{task.train_subset}' split "
                                          "(SPLIT.SRC-TGT.LANG.bin): give directories fairseq-preprocess wrote")
        written = sorted(glob.glob(f"{split}.*-*.*.idx"))
        if task.dataset_impl is None and written and indexed_dataset.infer_dataset_impl(written[0][:-4]) == "cached":
            raise errors.OptionError(f"{written[0]} was written by fairseq-preprocess --dataset-impl lazy (or cached), "
                                     "which fairseq-train reads only when told (it infers cached, which fails in "
                                     "training): add --dataset-impl lazy")
        if task.load_alignments and glob.glob(f"{split}.*-*.*") and not glob.glob(f"{split}.align.*-*.*"):
            raise errors.OptionError(f"--load-alignments: {shard} holds no alignments of its "
                                     f"'{task.train_subset}' split (SPLIT.align.SRC-TGT.bin; fairseq trained without "
                                     "them): binarize them with fairseq-preprocess --align-suffix, or drop "
                                     "--load-alignments")


#: what a run of several processes needs on the CPU, by option: one process per rank started by the user (fairseq
#: starts one per GPU), told where to meet, gloo's collectives, and a DDP wrapper without CUDA devices
CPU_PROCESSES = {"--distributed-no-spawn": lambda d: d.distributed_no_spawn,
                 "--distributed-init-method tcp://HOST:PORT": lambda d: d.distributed_init_method is not None,
                 "--distributed-backend gloo": lambda d: d.distributed_backend == "gloo",
                 "--ddp-backend legacy_ddp": lambda d: d.ddp_backend in ("legacy_ddp", "no_c10d")}
#: the first two, which fairseq sets itself under torchrun (its variables in the environment) where there are GPUs
TORCHRUN_SETS, TORCHRUN_ENV = tuple(CPU_PROCESSES)[:2], ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")


def check_processes_without_gpus(cfg) -> None:
    """A run of several processes (``--distributed-world-size`` above 1) on the CPU (``--cpu``, or no GPU) given the
    options of :data:`CPU_PROCESSES`: without them fairseq spawned no process and exited 0 having trained nothing (an
    init method but no ``--distributed-no-spawn``), or failed in a traceback (an ``AssertionError``, a
    ``ZeroDivisionError`` under torchrun, nccl's or DDP's errors about CUDA devices). With ``--cpu`` on a machine with
    GPUs fairseq's default world size is their number: the fix of one process comes first."""
    import torch

    given, gpus = cfg.distributed_training, torch.cuda.device_count()
    if given.distributed_world_size <= 1 or cfg.common.tpu or (gpus and not cfg.common.cpu):
        return
    torchrun = gpus and all(name in os.environ for name in TORCHRUN_ENV)
    missing = [option for option, holds in CPU_PROCESSES.items()
               if not holds(given) and not (torchrun and option in TORCHRUN_SETS)]
    if missing:
        size = given.distributed_world_size
        raise errors.OptionError(
            f"--distributed-world-size {size} on the CPU: give --distributed-world-size 1 for one process (fairseq's "
            f"default is the number of GPUs); for {size}, fairseq starts one process per GPU: start one per rank "
            f"yourself, each with --distributed-rank R {' '.join(CPU_PROCESSES)} (missing: {', '.join(missing)}; "
            "docs/gpu.md)")


# ---------------------------------------------------------------------------------------------- parallel text
#: the fix of a missing text of fairseq-preprocess
PREFIX_FIX = "fairseq-preprocess reads PREFIX.LANG for --source-lang and --target-lang"


def check_parallel_text(args: argparse.Namespace) -> None:
    """fairseq-preprocess's text (``--trainpref``, ``--validpref``, ``--testpref``, each ``PREFIX.LANG``): every file
    there, UTF-8 without a byte order mark, none empty, and with ``--target-lang`` the two sides of a prefix of the
    same number of lines; a ``--srcdict``/``--tgtdict`` that holds words. fairseq binarizes misaligned sides without a
    word (training then fails), an empty side into an empty ``.bin``, a byte order mark as part of the first word and
    every word as ``<unk>`` with an empty dictionary, and fails on a byte that is not UTF-8 in a traceback ("negative
    seek position") that names neither file nor line."""
    for option in ("--srcdict", "--tgtdict"):  # fairseq binarized every word as <unk> with an empty one
        if getattr(args, option[2:]):
            next(content_lines(getattr(args, option[2:]), option, "words",
                               "give the dict.LANG.txt fairseq-preprocess wrote"))
    langs = [lang for lang in (args.source_lang, None if args.only_source else args.target_lang) if lang]
    for option in ("--trainpref", "--validpref", "--testpref"):
        for prefix in filter(None, (getattr(args, option[2:]) or "").split(",")):
            counts = {}
            for lang in langs or [None]:
                path = f"{prefix}.{lang}" if lang else prefix
                counts[path] = sum(1 for _ in text_lines(path, f"{option} {prefix}:", PREFIX_FIX))
                if counts[path] == 0:
                    raise errors.InputError(f"{option} {prefix}: {path} is empty: give a text with one sentence a line")
                with open(path, "rb") as f:  # (read as text above, which drops it: fairseq reads the bytes)
                    if f.read(len(codecs.BOM_UTF8)) == codecs.BOM_UTF8:
                        raise errors.InputError(f"{option} {prefix}: {path} starts with a byte order mark, which "
                                                "fairseq-preprocess binarizes as part of the first word: remove it "
                                                f"(sed -i '1s/^\\xEF\\xBB\\xBF//' {path})")
            if len(set(counts.values())) > 1:
                (a, na), (b, nb) = counts.items()
                raise errors.InputError(f"{option} {prefix} is misaligned: {a} has {na} lines but {b} has {nb}; give "
                                        "files whose line i translate each other")


# ---------------------------------------------------------------------------------------------- checkpoint kinds
def check_checkpoint_exists(path: str) -> None:
    """Refuse a checkpoint ``path`` that is no file (missing, or a directory): the one check of fairseq's
    ``load_model_ensemble_and_task`` (``--path``) and of the plugin's loader, ``fairseq_joint.loaders``."""
    check_exists(path, "checkpoint", "give a checkpoint written by fairseq-train")


def checkpoint_cfg(state: Dict[str, object]):
    """The configuration a fairseq checkpoint dict records (``cfg``, or converted from an old one's ``args``)."""
    if state.get("cfg") is not None:
        return state["cfg"]
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    return convert_namespace_to_omegaconf(state["args"])


def check_checkpoint_kind(path: str, cfg, labels: bool, command: str) -> None:
    """Refuse ``path`` (configuration ``cfg``) unless it is the kind ``command`` needs: a label classifier (the model
    its ``--arch`` belongs to is a :class:`GileClassifier`) when ``labels`` (the command scores labels: ``--task
    gile_classification``, fairseq-joint-predict-labels), a translation model otherwise (fairseq-generate,
    -interactive, -validate of a translation task). The refusal names the checkpoint's model (``joint_transformer``)."""
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY, ARCH_MODEL_REGISTRY

    name = arch(cfg.model)
    if issubclass(ARCH_MODEL_REGISTRY.get(name, object), GileClassifier) == labels:
        return
    model = f"{path} is a {ARCH_MODEL_NAME_REGISTRY.get(name, name)} checkpoint; {command} needs"
    if labels:
        raise errors.CheckpointError(f"{model} a gile_classifier model (fairseq-generate and fairseq-interactive "
                                     "translate with this one)")
    raise errors.CheckpointError(f"{model} a translation model (fairseq-joint-predict-labels scores labels with this one)")


#: the kind of checkpoint this process's fairseq-train run trains (``labels``: a gile_classifier), set by before_main
#: and cleared when it ends; :func:`load_checkpoint_to_cpu` refuses the other kind (--finetune-from-model, --restore-file)
_training_kind: Dict[str, bool] = {}


def apply_overrides(state: Dict[str, object], overrides: dict) -> None:
    """fairseq's ``arg_overrides`` set on a checkpoint dict's configuration, in place, as its ``load_checkpoint_to_cpu``
    sets them (on a legacy ``args`` namespace, and on ``cfg`` by option name)."""
    from fairseq.dataclass.utils import overwrite_args_by_name

    if overrides and state.get("args") is not None:
        for name, value in overrides.items():
            setattr(state["args"], name, value)
    if overrides and state.get("cfg") is not None:
        overwrite_args_by_name(state["cfg"], overrides)


def model_rule_problem(cfg) -> Optional[str]:
    """What the rules of a configuration's model section (and its numbers) refuse in ``cfg``, or None."""
    try:
        validate(cfg, training=False, rules=("model",))
    except errors.OptionError as err:
        return str(err)
    return None


def checkpoint_checks(path: str, state: Dict[str, object], task, arg_overrides: Optional[dict], command: str,
                      saved=None) -> None:
    """What fairseq's ``load_model_ensemble_and_task`` is about to build from the checkpoint dict ``state`` of
    ``path``, checked first: the kind of model the command's task needs (``task``, or the ``task`` of
    ``arg_overrides``, fairseq-validate's; neither: the checkpoint's own task is used), the overrides' names
    (:func:`check_overrides`) and the numbers of its options, overrides applied (:func:`validate`); with ``saved``
    (its configuration before the overrides), the languages its weights are of (:func:`check_trained_languages`) and
    the model's rules that overrides of its options break (``--model-overrides "{'cosine_prior': 5.0}"`` of a WAN
    model failed in a traceback at the first batch), not those the checkpoint broke already (it may be older than a
    rule)."""
    from fairseq.tasks import TASK_REGISTRY

    cfg = checkpoint_cfg(state)
    named = (arg_overrides or {}).get("task")  # a task's name, or a dict of its options (fairseq's hydra_validate)
    named = TASK_REGISTRY.get(named if isinstance(named, str) else None) if task is None else type(task)
    if named is not None:
        check_checkpoint_kind(path, cfg, issubclass(named, GileClassificationTask), command)
    check_overrides(cfg, arg_overrides or {})
    if saved is not None:
        check_trained_languages(path, saved, arg_overrides or {})
    if task is None:  # the checkpoint's own task is set up: it reads the files it records
        check_recorded_files(path, cfg, arg_overrides, command)
    validate(cfg, training=False)
    declares = {f.name for config in declared(cfg, "model") for f in dataclasses.fields(config)}
    if saved is not None and declares & set(arg_overrides or {}):
        problem = model_rule_problem(cfg)
        if problem is not None and problem != model_rule_problem(saved):
            raise errors.OptionError(problem)


def check_trained_languages(path: str, cfg, overrides: dict) -> None:
    """The languages of a multilingual gile_classifier checkpoint ``path`` (``cfg``: its configuration before the
    overrides), which its weights are of, not overridden with others (fairseq-validate's task options are
    overrides): ``--languages`` of another set (in any order: the model's units are by name) failed in a state-dict
    traceback, and ``--label-language`` of another language embedded the descriptions with that language's
    embedding, which the head was not trained with, and scored without a word (seen AvgPr 33.5 fell to 10.6)."""
    nested = overrides.get("task") if isinstance(overrides.get("task"), dict) else {}  # {'task': {...}} too
    overrides = {**overrides, **nested}
    # a task of fairseq's argparse kind (translation_multi_simple_epoch) keeps its options as a Namespace
    task = vars(cfg.task) if isinstance(cfg.task, argparse.Namespace) else cfg.task
    languages = task.get("languages")
    trained = parse_languages(languages) if languages else []
    given = overrides.get("languages")
    if given is not None and set(parse_languages(given) if given else []) != set(trained):
        raise errors.OptionError(f"--languages {given}: {path} was trained on "
                                 f"{','.join(trained) or 'one directory (no --languages)'}: give those, in any order")
    label = overrides.get("label_language")
    recorded = task.get("label_language") or (trained[0] if trained else "")
    if label and trained and label != recorded:
        raise errors.OptionError(f"--label-language {label}: {path} embeds the label descriptions as {recorded}, the "
                                 f"language its head was trained with: drop --label-language")
    if given and trained and not label and not task.get("label_language") and parse_languages(given)[0] != recorded:
        # (a checkpoint that records no --label-language: the first of --languages is the one, now another)
        raise errors.OptionError(f"--languages {given}: {path} embeds the label descriptions as {recorded}, the first "
                                 f"of the languages it was trained on: give --label-language {recorded} too")


#: what fairseq's hub hands its loader as overrides besides options: ``from_pretrained(..., generation_args={...})``
HUB_KEYS = ("generation_args",)


@functools.lru_cache(maxsize=1)
def option_names() -> FrozenSet[str]:
    """The names of fairseq's options (the plugin's among them): its configuration groups and their fields, and the
    options of every task, model, criterion, optimizer, tokenizer, BPE, ... its registries hold; ``arch``."""
    from fairseq.dataclass.configs import FairseqConfig
    from fairseq.models import MODEL_REGISTRY
    from fairseq.registry import REGISTRIES
    from fairseq.tasks import TASK_REGISTRY

    parser = argparse.ArgumentParser(add_help=False, conflict_handler="resolve")  # options several of them declare
    for owner in [*TASK_REGISTRY.values(), *MODEL_REGISTRY.values(),
                  *(cls for registry in REGISTRIES.values() for cls in registry["registry"].values())]:
        if hasattr(owner, "add_args"):
            owner.add_args(parser)
    groups = dataclasses.fields(FairseqConfig)  # common, ..., task, model, bpe: a dict of options each
    configs = [g.type for g in groups if dataclasses.is_dataclass(g.type)]
    configs += [c for registry in REGISTRIES.values() for c in registry["dataclass_registry"].values()]  # BPEs'
    return frozenset(["arch", *(g.name for g in groups), *(f.name for c in configs for f in dataclasses.fields(c)),
                      *(a.dest for a in parser._actions)])


def check_overrides(cfg, overrides: dict) -> None:
    """fairseq's ``arg_overrides`` of a checkpoint of the plugin's models (configuration ``cfg``; ``--model-overrides``,
    the keywords of ``from_pretrained`` and ``load_translator``), a group's given as a dict of its options too: each
    the name of one of fairseq's options (:func:`option_names`; fairseq sets any other on a legacy model's options
    without a word: a misspelled ``beem=3`` was ignored), a registry's choice (``bpe``, ``tokenizer``, ...) one it
    holds (fairseq failed in a ``KeyError``) and not another than the checkpoint's (fairseq kept the checkpoint's
    without a word: fairseq-validate ``--criterion`` scored with the criterion trained with), no ``beam`` (the hub
    interface's ``translate`` sets its own, 5 unless given, on every call: ``load_translator(..., beam=3)`` translated
    with 5), its numbers as fairseq's commands check theirs (a group's given as a dict too), named as the keywords
    they were given as (``lenpen=nan:``, not the ``--lenpen`` the caller never wrote). The overrides of fairseq's own
    models are left to fairseq (BART's hub passes keys of its own)."""
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.registry import REGISTRIES

    if not getattr(ARCH_MODEL_REGISTRY.get(arch(cfg.model)), "__module__", "").startswith("fairseq_joint."):
        return
    given = [*overrides, *(name for value in overrides.values() if isinstance(value, dict) for name in value)]
    check_names(given, option_names() | set(HUB_KEYS), "option of fairseq's (an override of the checkpoint's)",
                "give one fairseq's commands take, as its Python name (max_len_b for --max-len-b)")
    for group in REGISTRIES.keys() & overrides.keys():
        if isinstance(overrides[group], str):
            check_choice(group, overrides[group], list(REGISTRIES[group]["registry"]))
            saved = getattr(cfg.get(group), "_name", None)  # fairseq replaces a group the checkpoint has none of only
            if saved not in (None, overrides[group]):
                raise errors.OptionError(f"{flag(group)} {overrides[group]}: the checkpoint was trained with "
                                         f"{flag(group)} {saved}, which fairseq keeps (a group of a checkpoint's "
                                         f"options is not replaced): drop {flag(group)}")
    beam = overrides.get("beam", (overrides.get("generation") or {}).get("beam"))
    if beam is not None:  # the hub interface's translate() sets its own (default 5) on every call
        raise errors.OptionError(f"beam={beam!r}: a checkpoint's beam is not read: give it where the translation is "
                                 f"made (translate(text, beam={beam!r}), fairseq-generate --beam {beam!r})")
    # a group's options given as a dict (generation={"lenpen": 2.0}) are checked as those given alone
    flat = {name: item for key, value in overrides.items()
            for name, item in (value.items() if isinstance(value, dict) else [(key, value)])}
    check_fairseq_options(argparse.Namespace(**flat), keywords=True)


@functools.lru_cache(maxsize=None)
def generation_names(task: type) -> FrozenSet[str]:
    """The generation options of fairseq's and the options of ``task`` (a task's generator reads options of its own,
    e.g. ``keep_inference_langtok``): what ``GeneratorHubInterface.generate`` takes as keywords."""
    from fairseq.dataclass.configs import GenerationConfig

    parser = argparse.ArgumentParser(add_help=False)
    task.add_args(parser)
    return frozenset([f.name for f in dataclasses.fields(GenerationConfig)] + [a.dest for a in parser._actions])


def hub_generate(original, hub, tokenized_sentences, *args, **kwargs):
    """fairseq's ``GeneratorHubInterface.generate`` (its ``translate`` and ``sample``, of ``load_translator`` and
    ``from_pretrained``) after the generation options given as keywords are checked: each one of fairseq's generation
    options or of its task's (fairseq set any other on a copy of the generation options without a word), each number
    in the range fairseq's commands accept (``beam=0`` failed in a reshape traceback; the ``hub_options`` patch),
    ``nbest`` at most ``beam``, ``diverse_beam_groups`` above 1 only for sentences of one batch
    (:func:`check_diverse_beam_groups`), and for a translation model what its hub interface cannot do
    (:func:`check_hub_translation`); ``nbest=k`` returns k hypotheses a sentence (fairseq returned the whole beam)."""
    bound = inspect.signature(original).bind(hub, tokenized_sentences, *args, **kwargs)
    bound.apply_defaults()
    generation = {"beam": bound.arguments["beam"], **bound.arguments["kwargs"]}
    check_names(generation, generation_names(type(hub.task)), "generation option of fairseq's", "give one "
                "fairseq-generate --help lists under Generation, as its Python name (max_len_b for --max-len-b)")
    for name, value in generation.items():  # as fairseq's parser would have typed them: beam=2.0 failed in torch
        allowed = FAIRSEQ_RANGES.get(name, ANY if isinstance(value, float) else None)  # an unranged float: finite
        if allowed:
            check_number(keyword(name, value), value, allowed)
        if allowed and allowed.integer and not isinstance(value, numbers.Integral):  # 2.0: torch takes an int only
            raise errors.OptionError(f"{name}={value!r} must be an int: give {name}={int(value)}")
    if torch_tensor_1d(tokenized_sentences):  # fairseq calls generate again with the batch of one
        return original(hub, tokenized_sentences, *args, **kwargs)
    nbest = generation.get("nbest")
    check_nbest(nbest, generation["beam"], generation.get("sampling"), keywords=True)
    skip = bound.arguments["skip_invalid_size_inputs"]
    groups = generation.get("diverse_beam_groups", hub.cfg.generation.diverse_beam_groups)
    check_diverse_beam_groups(groups, f"diverse_beam_groups={groups}", "give the sentences in calls of one batch each "
                              "(or load_translator a larger batch_size or max_tokens), or drop diverse_beam_groups "
                              "(diversity_rate=R diversifies the beam instead)",
                              lambda: len(hub._build_batches(tokenized_sentences, skip)))
    if translation_hub(hub):
        check_hub_translation(hub, tokenized_sentences, generation, skip)
    results = original(hub, tokenized_sentences, *args, **kwargs)
    return results if nbest is None else [hypos[:nbest] for hypos in results]  # fairseq returned the whole beam


def torch_tensor_1d(value) -> bool:
    import torch

    return torch.is_tensor(value) and value.dim() == 1


def translation_hub(hub) -> bool:
    """Whether fairseq's hub interface ``hub`` holds encoder-decoder models (a translation's, not a language
    model's)."""
    from fairseq.models import FairseqEncoderDecoderModel

    return all(isinstance(model, FairseqEncoderDecoderModel) for model in hub.models)


def check_hub_translation(hub, sentences, generation: dict, skip_invalid_size_inputs: bool) -> None:
    """What fairseq's hub interface cannot do with a translation model, refused in one line: scoring references
    (``score()``: fairseq scores a language model's only, a ``TypeError``), ``constraints`` (none reach the search: a
    ``TypeError``), and a sentence longer than the model's source positions (fairseq's ``Exception`` that names a
    command-line flag; ``skip_invalid_size_inputs=True`` left it out of the output, which then no longer lined up
    with the input)."""
    if generation.get("score_reference"):
        raise errors.OptionError("score()/score_reference=True: fairseq's hub interface scores the sentences of a "
                                 "language model only: score translations with fairseq-generate --score-reference")
    if generation.get("constraints"):
        raise errors.OptionError(f"constraints={generation['constraints']!r}: fairseq's hub interface hands no "
                                 "constraints to the search: give them to fairseq-interactive, each after its "
                                 "sentence on the line, separated by tabs")
    limit = hub.max_positions[0] if isinstance(hub.max_positions, tuple) else hub.max_positions
    long = next(((i, len(s)) for i, s in enumerate(sentences) if limit is not None and len(s) > limit), None)
    if long is not None:
        dropped = " (skip_invalid_size_inputs=True would leave it out of the output, which then no longer lines " \
                  "up with the input)" if skip_invalid_size_inputs else ""
        raise errors.InputError(f"sentence {long[0]} is {long[1]} tokens long, above the model's {limit} source "
                                f"positions{dropped}: shorten it")


#: the options of fairseq's subword models that name a file
SUBWORD_FILES = ("bpe_codes", "sentencepiece_model", "bpe_vocab", "bpe_merges")
#: what subword-nmt prints before it ends the process (``sys.exit``) on a malformed codes file
SUBWORD_NMT_EXIT = "in BPE codes file"


def build_bpe(original, cfg, *args, **kwargs):
    """fairseq's ``encoders.build_bpe`` (fairseq-interactive, fairseq-generate ``--bpe``, the hub interface of
    ``load_translator`` and ``from_pretrained``), a subword file its library cannot read refused in one line naming
    it: subword-nmt printed two lines and ended the process (``sys.exit``), sentencepiece raised a ``RuntimeError``
    naming the file (the ``readable_subwords`` patch). What subword-nmt prints about anything else is printed as it
    was."""
    kind = cfg if isinstance(cfg, str) else getattr(cfg, "_name", None) or getattr(cfg, "bpe", None)
    files = {name: os.fspath(getattr(cfg, name)) for name in SUBWORD_FILES if getattr(cfg, name, None)}
    said, echo = io.StringIO(), True
    try:
        with contextlib.redirect_stderr(said) if kind == "subword_nmt" else contextlib.nullcontext():
            return original(cfg, *args, **kwargs)
    except (SystemExit, RuntimeError) as err:
        printed = said.getvalue()
        named = next((name for name, path in files.items() if path in str(err)
                      or isinstance(err, SystemExit) and name == "bpe_codes" and SUBWORD_NMT_EXIT in printed), None)
        if named is None:
            raise
        echo = False  # the refusal says what subword-nmt printed
        raise errors.InputError(f"{flag(named)} {files[named]}: {kind} cannot read it "
                                f"({errors.one_line(printed or err)}): give the file the model was trained with") from None
    finally:
        if echo and said.getvalue() and sys.stderr is not None:
            sys.stderr.write(said.getvalue())


def check_names(given: Iterable[str], known: Iterable[str], what: str, fix: str) -> None:
    """Refuse a name of ``given`` (keywords) that is none of ``known`` (``what``: which names those are), naming the
    closest one (:func:`fairseq_joint.errors.closest`), else ending in ``fix``."""
    known = set(known)
    for name in given:
        if name not in known:
            close = errors.closest(name, known)
            raise errors.OptionError(f"{name!r} is no {what}: " + (f"did you mean {close!r}?" if close else fix))


#: the files a checkpoint's configuration records besides its data directory (whose refusal, naming --data, is the
#: data's own: ``data.gile_files``), as ``(group, option, what to give)``: the label files and the sentence-transformers
#: directory of --encoder pretrained/hybrid (a directory; the loaders' keyword is the option's name)
RECORDED_FILES = (("task", "label_file", "the label<TAB>description file"),
                  ("task", "eval_label_file", "the label<TAB>description file"),
                  ("model", "pretrained_encoder", "a local sentence-transformers model directory"))
#: the plugin's commands that take --label-file / --eval-label-file / --pretrained-encoder for a checkpoint's moved files
FLAG_COMMANDS = ("fairseq-joint-predict-labels",)


def check_recorded_files(path: str, cfg, overrides: Optional[dict], command: str) -> None:
    """The files the configuration ``cfg`` of checkpoint ``path`` records (``--label-file``, ``--eval-label-file``,
    ``--pretrained-encoder``; ``overrides`` applied) exist; else a ``MissingFileError`` naming the option that gives
    where the file is now: the option itself for the plugin's commands that take it (:data:`FLAG_COMMANDS`) and under
    fairseq's commands for a task's file (fairseq-validate reads the task's options from its command line), fairseq's
    ``--model-overrides`` for a model's, the loaders' keyword for the Python API (``command``)."""
    for group, option, what in RECORDED_FILES:
        given = (overrides or {}).get(option)
        value = given or getattr(getattr(cfg, group, None), option, None)
        directory = option == "pretrained_encoder"
        if not isinstance(value, str) or not value or (os.path.isdir(value) if directory else os.path.isfile(value)):
            continue
        if directory and not given and cfg.model.encoder not in SENTENCE_ENCODERS:  # recorded, never read (WAN, HAN)
            continue
        if given:  # it is missing: refused as every file a user names is
            check_exists(value, flag(option), f"give {what}", directory)
        fairseq = command.startswith("fairseq-") and not command.startswith("fairseq-joint-")
        if command in FLAG_COMMANDS or (fairseq and group == "task"):
            fix = f"give {command} {flag(option)} where it is now"
        elif fairseq:
            fix = f"give {command} --model-overrides \"{{'{option}': 'WHERE IT IS NOW'}}\""
        else:
            fix = (f"put it back, or give where it is now ({option}= of LabelPredictor.from_checkpoint or "
                   f"fairseq_joint.loaders.load_gile_model; fairseq-joint-predict-labels {flag(option)})")
        raise errors.MissingFileError(f"{flag(option)} {value}, which {path} was trained with, does not exist: {fix}")
