"""fairseq-joint: structure-aware output layers for fairseq (``--user-dir`` or ``import fairseq_joint``).

Importing registers every model, criterion and task of the plugin, and allowlists the classes that
fairseq checkpoints pickle, so torch's ``weights_only`` loading keeps its safety check on.
"""

import contextlib
import importlib
import logging
import os
import sys

__version__ = "0.1.0"


@contextlib.contextmanager
def _fairseq_import_without_logging_setup():
    """Importing fairseq calls ``logging.basicConfig`` in some of its modules (a DEBUG root handler) and logs an
    INFO line about tensorboardX on stderr. When fairseq is imported here first (our commands, ``import
    fairseq_joint``), that line is dropped and an unconfigured root logger is left unconfigured, so that a
    command's stderr holds its own messages and its own logging setup applies. Under fairseq's CLIs (``--user-dir``)
    fairseq is already imported and nothing changes."""
    if "fairseq" in sys.modules:
        yield
        return
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    logging.disable(logging.INFO)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)
        if not handlers:
            for handler in [h for h in root.handlers if h not in handlers]:
                root.removeHandler(handler)
            root.setLevel(level)


with _fairseq_import_without_logging_setup():
    from fairseq_joint.checkpoint_allowlist import allowlist_fairseq_checkpoint_classes

    allowlist_fairseq_checkpoint_classes()

    for _package in ("models", "criterions", "tasks"):
        _folder = os.path.join(os.path.dirname(__file__), _package)
        for _file in sorted(os.listdir(_folder)):
            if _file.endswith(".py") and not _file.startswith("_"):
                importlib.import_module(f"fairseq_joint.{_package}.{_file[:-3]}")
