"""fairseq-joint: structure-aware output layers for fairseq (``--user-dir`` or ``import fairseq_joint``).

Importing registers every model, criterion and task of the plugin and applies the plugin's changes to fairseq's
behaviour, every one of them listed in ``fairseq_joint.fairseq_patches`` (the checkpoint classes torch's
``weights_only`` loading may unpickle, one-line refusals, configuration checks before any work, checkpoints that cannot
load wrong, exact resume; ``FAIRSEQ_JOINT_PATCHES=0`` leaves fairseq as it is).
"""

import importlib
import os

from fairseq_joint import fairseq_patches

__version__ = "0.1.0"

with fairseq_patches.quiet_import():
    fairseq_patches.apply()
    for _package in ("models", "criterions", "tasks"):
        _folder = os.path.join(os.path.dirname(__file__), _package)
        for _file in sorted(os.listdir(_folder)):
            if _file.endswith(".py") and not _file.startswith("_"):
                importlib.import_module(f"fairseq_joint.{_package}.{_file[:-3]}")
