"""Every change fairseq-joint makes to fairseq's behaviour, in one place; ``FAIRSEQ_JOINT_PATCHES=0`` turns all off,
``FAIRSEQ_JOINT_PATCHES=name,name`` keeps only those.

Importing the plugin (``--user-dir``, ``import fairseq_joint``) registers its models, criteria and tasks and allowlists
the classes fairseq checkpoints pickle (``checkpoint_allowlist``: without it torch >= 2.6 loads no fairseq checkpoint);
both are additions, not changes. What changes how fairseq's own code behaves is listed here, and nowhere else does the
plugin replace a function of fairseq's or of Python's. Each change is scoped to where it is needed; the logic of each
lives in the module named in the table, this module only installs it (:func:`apply`, one :func:`wrap` per function).

=================  ============================================  =====================================================
name               fairseq (or Python) target                    what it changes, and where
=================  ============================================  =====================================================
safe_checkpoints   ``torch.serialization`` safe globals          the classes fairseq checkpoints pickle are allowlisted
                                                                 for torch's ``weights_only`` loading, so every route
                                                                 loads them with the safety check on
                                                                 (``checkpoint_allowlist``)
one_line_errors    ``sys.excepthook``                            under ``fairseq-*`` programs only: a ``Refusal`` (or
                                                                 an error of fairseq's or torch's that means one:
                                                                 ``errors.translate``) is one ``error:`` line, an
                                                                 interrupted training run ends with the resume note
                                                                 (``errors.uncaught``)
one_line_usage     ``argparse:ArgumentParser.error``             under ``fairseq-*`` programs only: an argument
                                                                 fairseq's parsers refuse (unknown, misspelled, an
                                                                 invalid choice, a missing DATA) is one ``error:``
                                                                 line with the fix, not the usage block
                                                                 (``errors.argparse_error``)
quiet_notices      ``warnings`` filters                          under ``fairseq-*`` programs only: hydra's and torch's
                                                                 deprecation notices of fairseq 0.12 are not printed
                                                                 (``fairseq_logs.quiet_notices``)
fairseq_logging    the root logger                               under ``fairseq-*`` programs only, when an import of
                                                                 fairseq set a DEBUG root handler on stderr
                                                                 (fairseq-generate): fairseq's INFO logging on stdout
                                                                 (``fairseq_logs.fairseq_logging``)
quiet_import       the root logger while fairseq is imported     when the plugin imports fairseq first (our commands,
                                                                 ``import fairseq_joint``): no DEBUG root handler and no
                                                                 tensorboardX INFO line (``fairseq_logs.quiet_import``)
option_numbers     ``options.parse_args_and_arch``               every fairseq command parsing its arguments: a
                                                                 non-finite number, or one of fairseq's options out of
                                                                 range (``--dropout 1.5``, ``--update-freq 0``,
                                                                 ``--beam 0``), is refused in one line
                                                                 (``checks.check_fairseq_options``); so are
                                                                 --nbest above --beam and a missing --restore-file
full_help          ``options.parse_args_and_arch``               ``-h``/``--help`` of fairseq's commands: fairseq's
                                                                 first, partial parse ignores it, so that the help
                                                                 fairseq prints lists the options of the --task,
                                                                 --arch and --criterion given (the plugin's too)
                                                                 (``command_line.full_help``)
whole_splits       ``options.parse_args_and_arch``               under fairseq-generate and -validate only: without
                                                                 ``--required-batch-size-multiple``, batches of any
                                                                 size, so the last partial batch of a split is
                                                                 translated or scored, not dropped
                                                                 (``command_line.whole_splits``)
checks             ``distributed.utils.call_main``               fairseq-train/-validate/-interactive: the plugin's
                                                                 option checks before any data is loaded
                                                                 (``checks.before_main``); SIGTERM stops fairseq-train
                                                                 as Ctrl-C does; without it, the plugin's options are
                                                                 taken as given
bf16_on_cuda       ``distributed.utils.call_main``               fairseq-train ``--bf16`` on a CUDA GPU with bf16 and
                                                                 without torch_xla: the ``--tpu`` (XLA) that
                                                                 fairseq's --bf16 implies is dropped, so it trains in
                                                                 bf16 on the GPU (``precision.bf16_on_cuda``)
decay_updates      ``options.parse_args_and_arch``               fairseq-train ``--lr-scheduler polynomial_decay``
                                                                 without ``--total-num-update``: its documented
                                                                 default, ``--max-update``, or for ``--task
                                                                 gile_classification --max-epoch E`` the updates of E
                                                                 epochs (``command_line.decay_updates``; fairseq
                                                                 failed in a hydra traceback)
parallel_text      ``fairseq_cli.preprocess:main``               fairseq-preprocess (also ``python -m``, whose ``main`` is
                                                                 ``__main__``'s): a text file of --trainpref,
                                                                 --validpref or --testpref that is missing or empty,
                                                                 or two sides of other line counts, is refused in one
                                                                 line before anything is binarized
                                                                 (``checks.check_parallel_text``)
whole_binaries     ``data.indexed_dataset.MMapIndexedDataset``   a binarized corpus whose ``.bin`` file is shorter or
                   ``._do_init``                                 longer than its ``.idx`` file indexes is refused in one
                                                                 line naming both, when it is opened
                                                                 (``data.binarized.checked_init``)
atomic_copy        ``file_io.PathManager.copy``                  local files only: copied through ``<name>.tmp`` and a
                                                                 rename (``checkpoints.copy``)
checksums          ``checkpoint_utils.torch_persistent_save``    checkpoint dicts only: a CRC-32 of every tensor and
                                                                 value a resume reads (``checkpoints.save``)
verified_load      ``checkpoint_utils.load_checkpoint_to_cpu``   checksummed checkpoints are verified; a file torch
                                                                 cannot read is refused in one line naming the newest
                                                                 intact one beside it (``checkpoints.load``), a file
                                                                 torch refuses to unpickle (``weights_only``) in one
                                                                 line naming it (``errors.unsafe_checkpoint``), and
                                                                 under fairseq-train one of the other kind
                                                                 (``checks.check_checkpoint_kind``)
checkpoint_kind    ``checkpoint_utils.load_model_ensemble_and``  a ``--path`` that does not exist, a checkpoint of the
                   ``_task``                                     other kind (``gile_classifier`` / translation), for
                                                                 the plugin's checkpoints an override that is no
                                                                 option of fairseq's (``--model-overrides``,
                                                                 ``from_pretrained``'s keywords) and a non-finite or
                                                                 out-of-range number in its options are refused in
                                                                 one line before any model is built
                                                                 (``checks.check_checkpoint_exists``,
                                                                 ``check_checkpoint_kind``, ``check_overrides``,
                                                                 ``validate``)
trained_criterion  ``checkpoint_utils.load_model_ensemble_and``  a checkpoint of the label-embedding criteria: the
                   ``_task``                                     configuration fairseq-validate builds the criterion
                                                                 from points at the checkpoint's criterion state, so
                                                                 o2 and the label embedding are the trained ones, not
                                                                 drawn at random (``criterions.label_embedding_cross_
                                                                 entropy.trained_criterion``)
hub_options        ``hub_utils.GeneratorHubInterface.generate``  ``translate``/``sample``/``generate`` of fairseq's hub
                                                                 interface: a keyword that is no generation option,
                                                                 a number out of range (``beam=0``), ``nbest`` above
                                                                 ``beam``, and for a translation model ``score()``,
                                                                 ``constraints`` and a sentence above its positions,
                                                                 are refused in one line; ``nbest=k`` returns k
                                                                 hypotheses (``checks.hub_generate``)
readable_subwords  ``data.encoders.build_bpe``                   a subword file (``--bpe-codes``,
                                                                 ``--sentencepiece-model``, ...) its library cannot
                                                                 read is refused in one line naming it, by
                                                                 fairseq-interactive, -generate and the hub interface
                                                                 alike (``checks.build_bpe``)
utf8_input         ``fairseq_cli.interactive:buffered_read``     fairseq-interactive's ``--input`` and stdin: read by
                                                                 the plugin's reader of texts (``text_files``), so a
                                                                 line that is not UTF-8 is refused in one line naming
                                                                 it (stdin's bytes were unknown words without a word
                                                                 under a C.UTF-8 locale) and a byte order mark dropped
                                                                 (``text_files.buffered_read``)
exact_scores       ``sequence_scorer.SequenceScorer.generate``   ``fairseq-generate --score-reference`` of the plugin's
                                                                 models: each target's log-probability from the
                                                                 exact softmax in chunks, without the B x T x |V|
                                                                 logits (``criterions.sampled_cross_entropy``)
resume             ``tasks.FairseqTask.get_batch_iterator``      reusable iterators created after epoch 1 (a resume)
                                                                 only: epoch 1's batches, so a resumed run ends where
                                                                 the uninterrupted one does (``resume``)
resume_changes     ``trainer.Trainer.load_checkpoint``           fairseq-train resuming a checkpoint: one log line with
                                                                 the options that differ from the checkpoint's; a run
                                                                 already at --max-update is refused, not trained on;
                                                                 a criterion of buffers only, and a model's state
                                                                 beside its weights, get what the checkpoint saved
                                                                 (``resume.load_checkpoint``)
frozen_criterion   ``trainer.Trainer.state_dict``                a criterion that holds buffers and no parameters
                                                                 (``--label-embedding-from``'s frozen embedding, Eq. 17)
                                                                 is saved in the checkpoint as one with parameters is;
                                                                 so is what a model holds beside its weights (GILE's
                                                                 ``--finetune-label-refresh`` label vectors)
                                                                 (``resume.trainer_state``)
=================  ============================================  =====================================================

"Under ``fairseq-*`` programs" means every route into fairseq's commands: their console scripts, ``python -m
fairseq_cli.*`` and ``torchrun --no-python fairseq-*`` (:func:`fairseq_joint.errors.program`). :data:`PATCHES` is this
table's names, targets and the logic :func:`apply` installs on each; why each change is made, and the upstream issue it
works around, is docs/fairseq-patches.md.
"""

import contextlib
import functools
import importlib
import inspect
import operator
import os
import sys
from typing import Callable, Dict, FrozenSet, List, NamedTuple, Optional, Tuple

from fairseq_joint import errors, fairseq_logs

#: set to 0 to leave fairseq's behaviour as it is (the plugin still registers and trains), or to the names of the
#: changes to keep, e.g. ``safe_checkpoints`` alone: fairseq as it is, its checkpoints loaded with torch's
#: ``weights_only`` check on (with 0, torch >= 2.6 loads no fairseq checkpoint, as without the plugin)
ENV = "FAIRSEQ_JOINT_PATCHES"


class Patch(NamedTuple):
    name: str
    target: str  # what it changes, as ``module:attribute`` (fairseq's unless it says otherwise)
    #: the plugin's function (``module.function`` of fairseq_joint) that makes the change: put in front of ``target``
    #: by :func:`wrap` (``wraps``), called with the original first; else called once, True when it made the change
    #: (None: a change made elsewhere, :func:`quiet_import`)
    logic: Optional[str] = None
    wraps: bool = True
    #: only under ``fairseq-*`` programs (:func:`fairseq_joint.errors.program`)
    programs_only: bool = False


#: the table above (what each change does, and why, with the upstream issue it works around: docs/fairseq-patches.md)
PATCHES: Tuple[Patch, ...] = (
    Patch("safe_checkpoints", "torch.serialization:add_safe_globals",
          "checkpoint_allowlist.allowlist_fairseq_checkpoint_classes", wraps=False),
    Patch("one_line_errors", "sys:excepthook", "errors.uncaught", programs_only=True),
    Patch("one_line_usage", "argparse:ArgumentParser.error", "errors.argparse_error", programs_only=True),
    Patch("quiet_notices", "warnings:filters", "fairseq_logs.quiet_notices", wraps=False, programs_only=True),
    Patch("fairseq_logging", "logging:root", "fairseq_logs.fairseq_logging", wraps=False, programs_only=True),
    Patch("quiet_import", "logging:root"),
    Patch("option_numbers", "fairseq.options:parse_args_and_arch", "checks.parse_args_and_arch"),
    Patch("full_help", "fairseq.options:parse_args_and_arch", "command_line.full_help"),
    Patch("decay_updates", "fairseq.options:parse_args_and_arch", "command_line.decay_updates"),
    Patch("whole_splits", "fairseq.options:parse_args_and_arch", "command_line.whole_splits", programs_only=True),
    Patch("checks", "fairseq.distributed.utils:call_main", "checks.call_main"),
    Patch("bf16_on_cuda", "fairseq.distributed.utils:call_main", "precision.bf16_call_main"),
    Patch("parallel_text", "fairseq_cli.preprocess:main", "checks.preprocess"),
    Patch("whole_binaries", "fairseq.data.indexed_dataset:MMapIndexedDataset._do_init", "data.binarized.checked_init"),
    Patch("atomic_copy", "fairseq.file_io:PathManager.copy", "checkpoints.copy"),
    Patch("checksums", "fairseq.checkpoint_utils:torch_persistent_save", "checkpoints.save"),
    Patch("verified_load", "fairseq.checkpoint_utils:load_checkpoint_to_cpu", "checks.load_checkpoint_to_cpu"),
    Patch("checkpoint_kind", "fairseq.checkpoint_utils:load_model_ensemble_and_task",
          "checks.load_model_ensemble_and_task"),
    Patch("trained_criterion", "fairseq.checkpoint_utils:load_model_ensemble_and_task",
          "criterions.label_embedding_cross_entropy.trained_criterion"),
    Patch("hub_options", "fairseq.hub_utils:GeneratorHubInterface.generate", "checks.hub_generate"),
    Patch("readable_subwords", "fairseq.data.encoders:build_bpe", "checks.build_bpe"),
    Patch("utf8_input", "fairseq_cli.interactive:buffered_read", "text_files.buffered_read"),
    Patch("exact_scores", "fairseq.sequence_scorer:SequenceScorer.generate",
          "criterions.sampled_cross_entropy.exact_scores"),
    Patch("resume", "fairseq.tasks:FairseqTask.get_batch_iterator", "resume.get_batch_iterator"),
    Patch("resume_changes", "fairseq.trainer:Trainer.load_checkpoint", "resume.load_checkpoint"),
    Patch("frozen_criterion", "fairseq.trainer:Trainer.state_dict", "resume.trainer_state"),
)

#: a wrapper's mark: ``fairseq_joint_<patch name>`` = True (read with a default: a function of fairseq's, or Python's,
#: that no patch wrapped has none)
MARK = "fairseq_joint_{}"
#: what :func:`wrap` replaced in this process: ``{patch name: [(owner, attribute, the original as stored)]}``
_wrapped: Dict[str, List[Tuple[object, str, object]]] = {}


def chosen() -> FrozenSet[str]:
    """The patches ``FAIRSEQ_JOINT_PATCHES`` switches on: every one (unset or ``1``), none (``0``), or the ones it
    names (``safe_checkpoints,exact_scores``); a name of no patch is refused."""
    value = os.environ.get(ENV, "1").strip()
    if value in ("", "1", "0"):
        return frozenset(p.name for p in PATCHES if value != "0")
    names = frozenset(n.strip() for n in value.split(",") if n.strip())
    unknown = sorted(names - {p.name for p in PATCHES})
    if unknown:
        raise errors.OptionError(f"{ENV}={value}: {unknown[0]!r} is no change of fairseq_joint's: give 1 (all), 0 "
                                 f"(none) or names of {', '.join(p.name for p in PATCHES)}")
    return names


def enabled(patch: Optional[str] = None) -> bool:
    """Whether ``patch`` is switched on (:func:`chosen`); without a name, whether any is."""
    names = chosen()
    return bool(names) if patch is None else patch in names


def wrap(owner, attribute: str, make_wrapper: Callable[[Callable], Callable], patch: str) -> bool:
    """Replace ``owner.attribute`` by ``make_wrapper(original)``, marked with ``patch``'s name (see :data:`MARK`);
    nothing when it is marked already (the plugin imported twice). A static method stays one. True if it wrapped."""
    original = getattr(owner, attribute)
    if getattr(original, MARK.format(patch), False):
        return False
    stored = inspect.getattr_static(owner, attribute)
    wrapper = functools.update_wrapper(make_wrapper(original), original)
    setattr(wrapper, MARK.format(patch), True)
    setattr(owner, attribute, staticmethod(wrapper) if isinstance(stored, staticmethod) else wrapper)
    _wrapped.setdefault(patch, []).append((owner, attribute, stored))
    return True


def wrapped() -> List[str]:
    """The patches whose wrappers are in place now, in the order :func:`apply` wrapped them (tests)."""
    return [name for name, places in _wrapped.items()
            if all(getattr(getattr(owner, attribute), MARK.format(name), False) for owner, attribute, _ in places)]


def original(patch: str) -> Callable:
    """What ``patch`` wrapped (its first place), as fairseq has it (tests)."""
    return _wrapped[patch][0][2]


def undo(patch: str) -> None:
    """Put back what :func:`wrap` replaced for ``patch`` (tests)."""
    for owner, attribute, stored in _wrapped.pop(patch):
        setattr(owner, attribute, stored)


def around(logic: Callable) -> Callable[[Callable], Callable]:
    """For :func:`wrap`: a function (a method, on a class) that calls ``logic(original, *args, **kwargs)``."""
    def make_wrapper(original):
        def wrapper(*args, **kwargs):
            return logic(original, *args, **kwargs)
        return wrapper
    return make_wrapper


def running_as_main(module) -> List[object]:
    """``module`` and, when Python runs the same file as ``__main__`` (``python -m fairseq_cli.preprocess``), that
    module too: the places whose function the command calls by its own global name."""
    main = sys.modules["__main__"]
    same = main.__spec__ is not None and main.__spec__.name == module.__name__ and main is not module
    return [module, main] if same else [module]


def apply() -> List[str]:
    """Install every change of :data:`PATCHES` that applies to this process and ``FAIRSEQ_JOINT_PATCHES`` switches on
    (:func:`chosen`); the names of those it installed now."""
    if not enabled():
        return []
    # the modules of the table's logic (the checks of fairseq's configurations import fairseq's registries: here)
    from fairseq_joint import (  # noqa: F401
        checkpoint_allowlist,
        checkpoints,
        checks,
        command_line,
        precision,
        resume,
        text_files,
    )
    from fairseq_joint.criterions import label_embedding_cross_entropy, sampled_cross_entropy  # noqa: F401
    from fairseq_joint.data import binarized  # noqa: F401

    done = []
    on = chosen()
    # one of fairseq's commands (fairseq-train, ..., by any route) or the plugin's (fairseq-joint-*)
    program = errors.program().startswith("fairseq-")
    for patch in PATCHES:
        if patch.logic is None or patch.name not in on or patch.programs_only and not program:
            continue
        logic = operator.attrgetter(patch.logic)(sys.modules["fairseq_joint"])
        if patch.wraps:
            module, attribute = patch.target.split(":")
            owner, _, attribute = attribute.rpartition(".")
            places = [getattr(importlib.import_module(module), owner)] if owner else running_as_main(
                importlib.import_module(module))
            made = [wrap(place, attribute, around(logic), patch.name) for place in places][0]
        else:
            made = logic()
        if made:
            done.append(patch.name)
    return done


def quiet_import():
    """The context the plugin imports fairseq in: :func:`fairseq_joint.fairseq_logs.quiet_import` when the
    ``quiet_import`` change is switched on."""
    return fairseq_logs.quiet_import() if enabled("quiet_import") else contextlib.nullcontext()
