"""fairseq-joint: structure-aware output layers for fairseq (``--user-dir`` or ``import fairseq_joint``).

Importing registers every model, criterion and task of the plugin, allowlists the classes that fairseq checkpoints
pickle, so torch's ``weights_only`` loading keeps its safety check on, and installs what the plugin adds to fairseq's
commands: one-line refusals (``fairseq_joint.errors``), configuration checks before any work (``fairseq_joint.checks``),
checkpoints that cannot load wrong (``fairseq_joint.checkpoints``) and exact resume (``fairseq_joint.resume``).
"""

import importlib
import os

from fairseq_joint import checkpoints, checks, errors, resume
from fairseq_joint.checkpoint_allowlist import allowlist_fairseq_checkpoint_classes

__version__ = "0.1.0"

with errors.quiet_fairseq_import():
    allowlist_fairseq_checkpoint_classes()
    errors.install()
    checks.install()
    checkpoints.install()
    resume.install()
    for _package in ("models", "criterions", "tasks"):
        _folder = os.path.join(os.path.dirname(__file__), _package)
        for _file in sorted(os.listdir(_folder)):
            if _file.endswith(".py") and not _file.startswith("_"):
                importlib.import_module(f"fairseq_joint.{_package}.{_file[:-3]}")
