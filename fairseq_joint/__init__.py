"""fairseq-joint: structure-aware output layers for fairseq (``--user-dir`` or ``import fairseq_joint``).

Importing registers every model, criterion and task of the plugin, allowlists the classes that fairseq checkpoints
pickle, so torch's ``weights_only`` loading keeps its safety check on, and installs the plugin's configuration checks
(``fairseq_joint.checks``), which run before fairseq's commands start any work, and the exact resume of
``fairseq_joint.resume``.
"""

import importlib
import os

from fairseq_joint import checks, resume
from fairseq_joint.checkpoint_allowlist import allowlist_fairseq_checkpoint_classes

__version__ = "0.1.0"

allowlist_fairseq_checkpoint_classes()
checks.install()
resume.install()

for _package in ("models", "criterions", "tasks"):
    _folder = os.path.join(os.path.dirname(__file__), _package)
    for _file in sorted(os.listdir(_folder)):
        if _file.endswith(".py") and not _file.startswith("_"):
            importlib.import_module(f"fairseq_joint.{_package}.{_file[:-3]}")
