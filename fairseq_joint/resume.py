"""Exact resume: a run resumed from any checkpoint ends with the same parameters as the run that was never stopped.

fairseq (0.12.3) builds an epoch iterator's batches with ``numpy_seed(seed + epoch)`` of the epoch in which the
iterator is *created*. An uninterrupted run creates it in epoch 1 and reuses it for every later epoch (its datasets
allow it), only shuffling the batches per epoch; a run resumed in epoch 2 or later creates it there, with another
seed: other batches, other updates from the first step after the resume (every tensor differed, up to 1e-2, after
15 updates of a tiny model). :func:`get_batch_iterator` (``fairseq_joint.fairseq_patches`` puts it in front of
``FairseqTask.get_batch_iterator``) makes fairseq build a reusable iterator's batches as in epoch 1, whatever
epoch it is created in, so both runs see the same batches. Everything else a resume needs is already exact in fairseq:
the iterator's position, the optimizer, and torch's RNG (seeded per update, which the sampled softmax and label
sampling draw from).

A resume also keeps what the command line changes: fairseq takes the options of the command that resumes (another
``--lr``, ``--seed`` or ``--max-update`` continues the run with them), without a word. :func:`load_checkpoint`
(in front of fairseq's ``Trainer.load_checkpoint``) says in one log line which options differ from the checkpoint's,
and refuses to train on from a checkpoint already at or past ``--max-update``: fairseq would train one update more and
overwrite the finished run's ``checkpoint_last.pt``/``checkpoint_best.pt``. It also restores the task's state
(``task_state``: GILE's γ calibrated on validation), which fairseq restores with a model but not on a resume.
"""

import argparse
import contextlib
import inspect
import logging
from typing import Dict, Optional, Sequence

import torch
from fairseq import utils

from fairseq_joint import errors
from fairseq_joint.errors import CheckpointError, OptionError
from fairseq_joint.models.output_layer_model import ResumeStateMixin

logger = logging.getLogger(__name__)


def get_batch_iterator(original, task, dataset, *args, **kwargs):
    """``original`` (fairseq's ``FairseqTask.get_batch_iterator``) with the batches of epoch 1 for a reusable iterator
    created in a later epoch; any other iterator (not reusable, or already cached, or epoch 1) as fairseq builds it."""
    bound = inspect.signature(original).bind(task, dataset, *args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    epoch = max(int(a["epoch"] or 1), 1)
    # a task whose configuration asks for new batches every epoch (``rebuild_batches``, which only some of fairseq's
    # own tasks declare), read as fairseq's get_batch_iterator reads it
    reusable = (not a["disable_iterator_cache"] and not a["update_epoch_batch_itr"]
                and task.can_reuse_epoch_itr(dataset) and not getattr(task.cfg, "rebuild_batches", False))
    if epoch == 1 or not reusable or dataset in task.dataset_to_epoch_iter:
        return original(*bound.args, **bound.kwargs)
    a["epoch"] = 1  # the batches the iterator of an uninterrupted run holds
    iterator = original(*bound.args, **bound.kwargs)
    iterator.epoch = epoch  # resuming: the checkpoint's iterator state sets it again (load_state_dict)
    dataset.set_epoch(epoch)
    return iterator


def load_checkpoint(original, trainer, filename, *args, **kwargs):
    """``original`` (fairseq's ``Trainer.load_checkpoint``), then, when it resumed a checkpoint: the task's state
    restored in the process that saves the checkpoints (so one saved before the next validation keeps it; not for a
    start from the weights only, ``--finetune-from-model`` or every ``--reset-*``: GILE's γ and last validation were
    the other run's), one log line with the options that differ from the checkpoint's (:func:`changed_options`), and
    a refusal, by every process, of what the resume cannot continue (:func:`world_size_problem`,
    :func:`optimizer_state_problem`) and of a run already at or past ``--max-update`` (before any update, so that no
    checkpoint of it is overwritten); a criterion of buffers only gets the state the checkpoint saved
    (:func:`restore_frozen_criterion`). fairseq's failures to take the checkpoint's model or optimizer state are
    refused naming the options that differ (:func:`model_mismatch`, :func:`optimizer_mismatch`)."""
    finetuning = filename == trainer.cfg.checkpoint.finetune_from_model  # other options are its point
    try:
        with new_criterion_state(trainer, filename) if finetuning else contextlib.nullcontext():
            extra_state = original(trainer, filename, *args, **kwargs)
    except Exception as err:  # noqa: BLE001  (fairseq's own, or what it wraps: only its mismatches are translated)
        if str(err).startswith("Cannot load model parameters"):
            mismatch = model_mismatch(filename, trainer.cfg, err, finetuning)
        elif str(err).startswith(OPTIMIZER_MISMATCHES) or OPTIMIZER_GROUP_MISMATCH in str(err):
            mismatch = optimizer_mismatch(filename, trainer.cfg, err)
        else:
            mismatch = None
        if mismatch is None or finetuning and errors.refusal(err) is not None:
            raise
        raise mismatch from err
    if extra_state is None:  # no checkpoint there: a new run
        return extra_state
    updates, budget = trainer.get_num_updates(), trainer.cfg.optimization.max_update
    problem, frozen = None, None
    criterion = trainer.get_criterion()
    resets = [getattr(trainer.cfg.checkpoint, f"reset_{part}") for part in RESETS]
    resuming = not finetuning and not all(resets)  # else a start from the weights only: the task starts as new
    if trainer.is_data_parallel_master:
        state = saved_checkpoint(filename) or {}
        if resuming:
            trainer.task.load_state_dict(state.get("task_state") or {})
        saved = state.get("cfg")
        # a frozen criterion (buffers only, which fairseq does not load) goes on with the tensors it was trained with
        frozen = state.get("criterion") if resuming and not utils.has_parameters(criterion) \
            and criterion.state_dict() else None
        changed = changed_options(saved, current_configuration(trainer.cfg)) if saved is not None else [
            "(not compared: the checkpoint records no configuration torch can read again)"]
        logger.info(f"resuming {filename} at update {updates}; options that differ from the checkpoint's: "
                    + (", ".join(changed) if changed else "none"))
        problem = None if finetuning else (world_size_problem(filename, saved, trainer.cfg, extra_state)
                                           or optimizer_state_problem(filename, state, trainer.cfg))
    if trainer.data_parallel_world_size > 1:  # the first process read the configuration: every process refuses
        from fairseq.distributed import utils as distributed_utils

        problem, frozen = distributed_utils.broadcast_object((problem, frozen), src_rank=0,
                                                             group=trainer.data_parallel_process_group)
    if problem is not None:
        raise OptionError(problem)
    if frozen is not None:
        restore_frozen_criterion(criterion, frozen, filename)
    model = trainer.get_model()
    if isinstance(model, ResumeStateMixin):  # what else the run held (every process reads the checkpoint's)
        held = extra_state.get(MODEL_RESUME_STATE) if resuming else None
        model.load_resume_state(held)
        if held and trainer.data_parallel_world_size > 1 and trainer.is_data_parallel_master:
            logger.warning(f"{filename} holds what the first process's model held beside its weights (GILE's "
                           "--finetune-label-refresh label vectors since the last refresh, which each process encodes "
                           f"for its own batches): all {trainer.data_parallel_world_size} processes resume with it, "
                           "so the run ends near the one never stopped, not bit for bit")
    if budget and updates >= budget:
        raise OptionError(
            f"--save-dir {trainer.cfg.checkpoint.save_dir} holds a run already at update {updates} ({filename}) and "
            f"--max-update is {budget}: training on would overwrite its checkpoints; train into another --save-dir, "
            f"continue it with a --max-update above {updates}, or start over from its weights with --reset-optimizer "
            "--reset-lr-scheduler --reset-meters --reset-dataloader")
    return extra_state


#: the key of the checkpoint's ``extra_state`` that holds a model's :meth:`~fairseq_joint.models.output_layer_model.
#: ResumeStateMixin.resume_state`
MODEL_RESUME_STATE = "fairseq_joint_model_state"


def trainer_state(original, trainer):
    """fairseq's ``Trainer.state_dict`` (the ``frozen_criterion`` patch), with the state of a criterion that holds
    buffers and no parameters (``--label-embedding-from``'s frozen embedding, Eq. 17), which fairseq saves only for a
    criterion with parameters: such a run's resume and fairseq-validate read the embedding again from its source,
    whatever that file held by then; and what a model holds for a resume besides its weights
    (:class:`~fairseq_joint.models.output_layer_model.ResumeStateMixin`: GILE's ``--finetune-label-refresh`` label
    vectors, which a resume encoded again with the encoder of its update)."""
    state = original(trainer)
    criterion = trainer.get_criterion()
    if state["criterion"] is None and not utils.has_parameters(criterion):
        state["criterion"] = criterion.state_dict() or None
    model = trainer.get_model()
    if isinstance(model, ResumeStateMixin):
        state["extra_state"][MODEL_RESUME_STATE] = model.resume_state()
    return state


def restore_frozen_criterion(criterion, frozen: dict, filename: str) -> None:
    """A resume of a criterion of buffers only (which fairseq does not load): the tensors ``frozen`` that checkpoint
    ``filename`` saved of it (:func:`trainer_state`), the ones the run was trained with, said when they differ from
    those its source gives now (``--label-embedding-from``: another file, or the file changed since). A state of other
    tensors (another criterion's, after --reset-optimizer; an embedding of another form) is not this criterion's: it
    keeps what it was built with, said."""
    own = criterion.state_dict()
    if frozen.keys() != own.keys() or any(frozen[k].shape != own[k].shape for k in own):
        logger.warning(f"{filename} holds a criterion state of other tensors ({', '.join(sorted(frozen))}) than this "
                       "run's frozen criterion: it keeps the tensors it was built with")
    elif any(not torch.equal(frozen[k].to(own[k]), own[k]) for k in own):
        logger.warning(f"{filename} holds the frozen tensors the run was trained with ({', '.join(sorted(own))}), "
                       "not those its source gives now (--label-embedding-from: another file, or the file changed "
                       "since): the run goes on with the checkpoint's (start from its weights only, "
                       "--finetune-from-model, to train with the other)")
        criterion.load_state_dict(frozen)


#: fairseq's --reset-* options, all of which (or --finetune-from-model) make a start from a checkpoint's weights only
RESETS = ("optimizer", "lr_scheduler", "meters", "dataloader")


def world_size_problem(filename: str, saved, cfg, extra_state: dict) -> Optional[str]:
    """Why ``filename`` (configuration ``saved``) cannot be resumed, in the middle of an epoch, with another
    ``--distributed-world-size``, or None: the checkpoint records how many batches each process had taken, which fairseq
    reads as a position in the new split of the epoch's batches: from 2 processes to 1 it trained again on batches the
    run had trained on (without a word), from 1 to 2 it failed in a traceback ("dataloader mismatch"). (Not asked of
    ``--finetune-from-model``, whose position fairseq does not read.)"""
    if saved is None or cfg.checkpoint.reset_dataloader:
        return None
    before = options(saved, ("distributed_training",)).get("distributed_world_size")
    now = cfg.distributed_training.distributed_world_size
    position = (extra_state.get("train_iterator") or {}).get("iterations_in_epoch") or 0
    if not position or before is None or before == now:
        return None
    return (f"{filename} was saved {position} batches into an epoch of a run of --distributed-world-size {before}, "
            f"which --distributed-world-size {now} cannot go on with (the epoch's batches are split over the "
            f"processes): resume with --distributed-world-size {before}, or resume from a checkpoint saved at the end "
            "of an epoch (checkpointN.pt)")


def optimizer_state_problem(filename: str, state: dict, cfg) -> Optional[str]:
    """Why ``filename`` (checkpoint dict ``state``) cannot be resumed, or None: it holds no optimizer state (saved with
    ``--no-save-optimizer-state``), without which fairseq resumes at update 0, without a word: the learning-rate
    schedule and ``--max-update``'s count start over (a finished run trained ``--max-update`` updates more, its
    checkpoints overwritten). ``--reset-optimizer`` asks for exactly that."""
    history = state.get("optimizer_history") or [{}]
    updates = history[-1].get("num_updates") or 0
    if cfg.checkpoint.reset_optimizer or "last_optimizer_state" in state or not updates:
        return None
    return (f"{filename} holds no optimizer state (saved with --no-save-optimizer-state), without which fairseq "
            f"resumes at update 0, not {updates}: its learning-rate schedule and --max-update's count would start "
            "over; go on from its weights with --reset-optimizer (a new optimizer, updates counted from 0), or resume "
            "from a checkpoint saved with its optimizer state")


@contextlib.contextmanager
def new_criterion_state(trainer, filename: str):
    """While fairseq loads ``--finetune-from-model filename``: a criterion with parameters (the label-embedding loss's
    o2 and embedding) keeps those it starts with when the checkpoint holds no state of them (one trained with a
    criterion without parameters, which fairseq failed on: ``load_state_dict(None)``; or with a frozen criterion,
    Eq. 17's embedding without o2, which it refused as another model); a state of the same tensors is loaded as
    fairseq loads it."""
    criterion = trainer.get_criterion()
    load = criterion.load_state_dict

    def load_or_keep(state, *args, **kwargs):
        if state is not None and state.keys() == criterion.state_dict().keys():
            return load(state, *args, **kwargs)
        logger.info(f"{filename} holds no state of the criterion's parameters (trained with a criterion without "
                    "them, or a frozen one: --label-embedding-from): the criterion's parameters start as in a new run")
        return None

    criterion.load_state_dict = load_or_keep
    try:
        yield
    finally:
        del criterion.load_state_dict


#: the configuration groups that decide a model's parameters (what a resume must not change)
MODEL_GROUPS = ("model", "criterion")


def model_mismatch(filename: str, cfg, err: BaseException, finetuning: bool = False) -> Optional[CheckpointError]:
    """The refusal of a resume whose model cannot take the checkpoint's parameters (fairseq's "Cannot load model
    parameters ... please ensure that the architectures match", ``err``): the model and criterion options that differ
    from the checkpoint's (the options the user changed, before the refusal of a part of the model, which names its
    own fields: an output layer's ``joint_dim``, ``class_projection``), or else what torch said, and the fix; None
    when no option differs and the model's refusal (``err``'s cause: other data, say) says what is wrong itself;
    ``finetuning``: of ``--finetune-from-model``, whose fix is another model, not another resume."""
    state = saved_checkpoint(filename) or {}
    saved = state.get("cfg")
    changed = changed_options(saved, current_configuration(cfg), MODEL_GROUPS) if saved is not None else []
    if not changed and errors.refusal(err) is not None:
        return None
    cause = err.__cause__ or err.__context__
    what = ", ".join(changed) if changed else " ".join(str(cause or err).split())[:300]
    fix = ("--finetune-from-model starts from the weights of a model of the same parameters: build this one as the "
           "checkpoint's (its --arch, --output-layer and sizes), or train it from scratch" if finetuning else
           "resume it with the checkpoint's options, or train this one into another --save-dir (or start from its "
           "weights only where they fit: --finetune-from-model)")
    return CheckpointError(f"{filename} holds another model than this run builds ({what}): {fix}")


#: how fairseq's ``Trainer.load_checkpoint`` refuses the optimizer state of another criterion or optimizer
OPTIMIZER_MISMATCHES = ("Criterion does not match", "Optimizer does not match")
#: how torch's ``Optimizer.load_state_dict`` refuses a state of other parameters (a criterion whose label embedding
#: is now loaded and frozen: ``--label-embedding-from``)
OPTIMIZER_GROUP_MISMATCH = "doesn't match the size of optimizer's group"
#: the configuration groups that decide the optimizer's state: its parameters (the model's, frozen or not, and the
#: criterion's), the criterion, the optimizer
OPTIMIZER_GROUPS = ("model", "criterion", "optimizer")


def optimizer_mismatch(filename: str, cfg, err: BaseException) -> CheckpointError:
    """The refusal of a resume whose optimizer cannot take the checkpoint's state (fairseq's "Criterion does not
    match; please reset the optimizer", torch's refusal of a state of other parameters: ``err``): the model, criterion
    and optimizer options that differ from the checkpoint's (``--freeze-embed`` changes the parameters trained too),
    or else what fairseq said, and the two fixes."""
    state = saved_checkpoint(filename) or {}
    saved = state.get("cfg")
    changed = changed_options(saved, current_configuration(cfg), OPTIMIZER_GROUPS) if saved is not None else []
    what = ", ".join(changed) if changed else " ".join(str(err).split())[:300]
    return CheckpointError(f"{filename} holds an optimizer state of other parameters, criterion or optimizer than "
                           f"this run's ({what}): resume it with the checkpoint's options, or continue from its weights "
                           "with a new optimizer state (--reset-optimizer)")


def saved_checkpoint(filename: str):
    """The checkpoint dict (its configuration, its task's state), or None: read again after fairseq loaded it, its
    tensors' storage mapped rather than read where torch can (torch >= 2.1, zip files), else read in full."""
    from fairseq.file_io import PathManager

    local = PathManager.get_local_path(filename)
    for mapped in ({"mmap": True}, {}):
        try:
            state = torch.load(local, map_location="cpu", **mapped)
        except Exception:  # noqa: BLE001  (mmap unsupported by this torch or file format: read it in full instead)
            continue
        return state if isinstance(state, dict) else None
    return None


def current_configuration(cfg) -> Dict[str, object]:
    """This run's configuration as a checkpoint of it records it (``checkpoints.as_recorded``): paths absolute, so
    that a relative ``DATA`` is not reported as changed from the absolute one saved; the label language explicit."""
    from omegaconf import OmegaConf

    from fairseq_joint.checkpoints import as_recorded

    container = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True) if OmegaConf.is_config(cfg) else cfg
    if isinstance(container, dict):
        as_recorded(container)
    return container


def options(cfg, groups: Optional[Sequence[str]] = None) -> Dict[str, object]:
    """fairseq's configuration (a ``DictConfig``, or the dict a checkpoint holds) as ``{option: value}``: each
    group's fields by their command-line names (``lr``), the first group's where several have one (``optimization``'s
    ``lr`` before ``optimizer``'s), a group's ``_name`` as the option that chooses it (``arch``, ``criterion``)."""
    from omegaconf import OmegaConf

    container = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True) if OmegaConf.is_config(cfg) else cfg
    out, others = {}, set()
    for group, fields in (container or {}).items():
        if groups is not None and group not in groups and isinstance(fields, dict):
            others.update(fields)  # a legacy model's Namespace repeats every option: these are not the model's
    for group, fields in (container or {}).items():
        if groups is not None and group not in groups:
            continue
        if isinstance(fields, argparse.Namespace):
            fields = {k: v for k, v in vars(fields).items() if k not in others}
        if not isinstance(fields, dict):
            continue
        for name, value in fields.items():
            out.setdefault(("arch" if group == "model" else group) if name == "_name" else name, value)
    return out


def changed_options(saved, cfg, groups: Optional[Sequence[str]] = None) -> list:
    """``--option value (checkpoint: value)`` for each option whose value in ``cfg`` differs from ``saved`` (the
    checkpoint's configuration); ``groups``: of these configuration groups only (default all)."""
    before, now = options(saved, groups), options(cfg, groups)
    return [f"--{name.replace('_', '-')} {_shown(now[name])} (checkpoint: {_shown(before[name])})"
            for name in now if name in before and now[name] != before[name] and name not in LAUNCH_OPTIONS]


#: the options that say where this process of a run is (another port, rank or device on every launch), not how it
#: trains: not listed as changed
LAUNCH_OPTIONS = ("distributed_init_method", "distributed_port", "distributed_rank", "device_id")


def _shown(value) -> str:
    """An option's value as the command line writes it (a list such as ``--lr``'s comma-separated)."""
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
