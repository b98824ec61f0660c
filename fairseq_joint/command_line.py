"""fairseq's command lines as the plugin reads them: ``--help`` lists the options of the ``--task``, ``--arch`` and
``--criterion`` given, ``--lr-scheduler polynomial_decay`` gets its documented default, and fairseq-generate and
-validate batch every sentence of a split (the ``full_help``, ``decay_updates`` and ``whole_splits`` changes of
``fairseq_joint.fairseq_patches``, which installs them; docs/fairseq-patches.md says why).
"""

import logging
import sys

from fairseq_joint import errors


def decay_updates(original, parser, input_args=None, parse_known=False, *args, **kwargs):
    """The ``decay_updates`` change: fairseq's ``parse_args_and_arch`` (``original``), then for ``--lr-scheduler
    polynomial_decay`` without ``--total-num-update`` (the updates over which the rate decays; fairseq's command line
    leaves it unset and fails in a hydra traceback) its documented default, ``--max-update``, or without one, for a run
    of ``--max-epoch`` epochs of the GILE task, the updates of those epochs (said in one log line)."""
    from fairseq.tasks import TASK_REGISTRY

    from fairseq_joint.tasks.gile_classification import GileClassificationTask

    parsed = original(parser, input_args, parse_known, *args, **kwargs)
    a = parsed[0] if parse_known else parsed
    # the patch wraps every command's parse; only fairseq-train's parser declares --lr-scheduler
    if "lr_scheduler" not in a or a.lr_scheduler != "polynomial_decay" or a.total_num_update is not None:
        return parsed
    a.total_num_update = a.max_update
    if not a.max_update and a.max_epoch and issubclass(TASK_REGISTRY.get(a.task, object), GileClassificationTask):
        per_epoch = GileClassificationTask.updates_per_epoch(a.data, a.languages, a.train_subset, a.batch_size,
                                                             a.distributed_world_size, a.update_freq[0])
        a.total_num_update = a.max_epoch * (per_epoch or 0)
        logging.getLogger(__name__).info(f"--total-num-update {a.total_num_update}: the updates of --max-epoch "
                                         f"{a.max_epoch} ({per_epoch} an epoch)")
    if not a.total_num_update:
        raise errors.OptionError("--lr-scheduler polynomial_decay needs --total-num-update: give it or --max-update")
    return parsed


#: fairseq's programs that translate or score a whole split, whose batches are any size (``whole_splits``)
WHOLE_SPLITS = ("fairseq-generate", "fairseq-validate")
#: what a batch's size is a multiple of, fairseq's option (default 8)
MULTIPLE = "--required-batch-size-multiple"


def whole_splits(original, parser, input_args=None, parse_known=False, *args, **kwargs):
    """The ``whole_splits`` change: fairseq's ``parse_args_and_arch`` (``original``), then for fairseq-generate and
    fairseq-validate without ``--required-batch-size-multiple`` that option at 1: fairseq's default, 8, drops the last
    batch of a split when it is smaller (fairseq issue #5036): fairseq-generate translated 496 of the bundled 501 test
    sentences, exit 0. fairseq-train keeps fairseq's batches (the runs the studies measured)."""
    parsed = original(parser, input_args, parse_known, *args, **kwargs)
    a = parsed[0] if parse_known else parsed
    given = sys.argv[1:] if input_args is None else [str(arg) for arg in input_args]
    if errors.program() in WHOLE_SPLITS and "required_batch_size_multiple" in a \
            and not any(arg.split("=", 1)[0] == MULTIPLE for arg in given):
        a.required_batch_size_multiple = 1
    return parsed


#: the options that ask argparse for the help
HELP = ("-h", "--help")


def full_help(original, parser, input_args=None, *args, **kwargs):
    """The ``full_help`` change: fairseq's ``parse_args_and_arch`` (``original``) parses the command line twice, first
    in part to find the ``--arch``, ``--task`` and ``--criterion`` whose options it then adds; argparse's help action
    answered that first parse, before any of them was added. With ``-h``/``--help`` given, that first parse runs
    without it, and the second, complete one prints the help."""
    given = sys.argv[1:] if input_args is None else list(input_args)
    if not any(arg in HELP for arg in given) or "parse_known_args" in vars(parser):
        return original(parser, input_args, *args, **kwargs)

    def first_parse(_args=None, namespace=None):
        del parser.parse_known_args  # the later parses are argparse's own
        parsed = parser.parse_known_args([arg for arg in given if arg not in HELP], namespace)
        # an option whose choice's options fairseq adds, declared by this command's parser (fairseq-generate's declares
        # no --arch) and not given: nothing to add the options of, the help as it was
        if any(option in parsed[0] and getattr(parsed[0], option) is None for option in ("task", "arch")):
            parser.parse_known_args(given, namespace)
        return parsed

    parser.parse_known_args = first_parse
    try:
        return original(parser, given, *args, **kwargs)
    finally:
        vars(parser).pop("parse_known_args", None)
