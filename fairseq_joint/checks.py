"""The plugin's checks of a whole fairseq configuration, run before fairseq starts any work.

fairseq-train, fairseq-validate and fairseq-interactive parse their arguments (importing the plugin through
``--user-dir``), then hand the configuration to ``fairseq.distributed.utils.call_main``. :func:`install` wraps that
function so that :func:`check_configuration` runs first: a refusal comes before any data is loaded or model built.
(fairseq-generate calls its main directly; the models' own checks cover it.)
"""

import functools

from fairseq_joint import errors
from fairseq_joint.precision import check_precision


def check_configuration(cfg, training: bool = True) -> None:
    """Everything the plugin can check from fairseq's configuration alone; ``training``: for fairseq-train (whose
    trainer needs the hardware of a precision flag; validate/interactive/generate run a half model on the CPU)."""
    common = getattr(cfg, "common", None)
    if common is not None and training:
        check_precision(common)


def install() -> None:
    """Run :func:`check_configuration` before fairseq's ``call_main`` (once, however often the plugin is imported)."""
    from fairseq.distributed import utils as distributed_utils

    original = distributed_utils.call_main
    if getattr(original, "fairseq_joint_checks", False):
        return

    @functools.wraps(original)
    def call_main(cfg, main, **kwargs):
        training = getattr(main, "__module__", "") == "fairseq_cli.train"
        check_configuration(cfg, training=training)
        if training:
            checkpoint = getattr(cfg, "checkpoint", None)
            errors.training_started(None if checkpoint is None or checkpoint.no_save else checkpoint.save_dir)
        return original(cfg, main, **kwargs)

    call_main.fairseq_joint_checks = True
    distributed_utils.call_main = call_main
