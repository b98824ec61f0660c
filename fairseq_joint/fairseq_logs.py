"""What fairseq's programs print besides their work: hydra's and torch's notices that nobody can act on hidden,
fairseq-generate's logging as fairseq's other commands set it up, and fairseq imported without configuring the root
logger (the ``quiet_notices``, ``fairseq_logging`` and ``quiet_import`` changes of ``fairseq_joint.fairseq_patches``,
which installs them; docs/fairseq-patches.md says why).
"""

import contextlib
import logging
import os
import sys
import warnings

#: warnings fairseq 0.12 causes on every run with this hydra and torch (regular expressions of their start)
FAIRSEQ_NOTICES = (
    r"\s*The version_base parameter is not specified",
    r"\s*'config' is validated against ConfigStore schema",
    r"\s*The strict flag in the compose API is deprecated",
    r"\s*.*'pin_memory' argument is set as true but no accelerator is found",
    r"\s*`torch.cuda.amp.autocast\(args...\)` is deprecated",
    r"\s*`torch.cuda.amp.GradScaler\(args...\)` is deprecated",
    # torch's, of fairseq's MultiheadAttention (a bool padding mask beside a float attention mask), every Transformer
    r"\s*Support for mismatched key_padding_mask and attn_mask is deprecated",
)


def quiet_notices() -> bool:
    """The ``quiet_notices`` change: ignore hydra's warnings and :data:`FAIRSEQ_NOTICES` (a filter added twice is kept
    once). True: it is made."""
    warnings.filterwarnings("ignore", module=r"hydra(\.|$)")
    for notice in FAIRSEQ_NOTICES:
        warnings.filterwarnings("ignore", message=notice)
    return True


def fairseq_logging() -> bool:
    """The ``fairseq_logging`` change: when an import of fairseq left the root logger at DEBUG with only the default stderr
    handler of ``logging.basicConfig`` (fairseq-generate has not configured logging before that), give it the logging
    fairseq's other commands set up: INFO (or $LOGLEVEL) on stdout in fairseq's format. True if it did."""
    root = logging.getLogger()
    rogue = [h for h in root.handlers if type(h) is logging.StreamHandler and h.stream is sys.stderr
             and h.formatter is not None and h.formatter._fmt == logging.BASIC_FORMAT]
    if root.level != logging.DEBUG or len(rogue) != len(root.handlers) or not rogue:
        return False
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", datefmt="%Y-%m-%d %H:%M:%S",
                        level=os.environ.get("LOGLEVEL", "INFO").upper(), stream=sys.stdout, force=True)
    return True


@contextlib.contextmanager
def quiet_import():
    """The ``quiet_import`` change: importing fairseq calls ``logging.basicConfig`` in some of its modules (a DEBUG root
    handler) and logs an INFO line about tensorboardX on stderr. When fairseq is imported inside this context first
    (our commands, ``import fairseq_joint``), that line is dropped and an unconfigured root logger is left
    unconfigured, so that a command's stderr holds its own messages and its own logging setup applies. Under fairseq's
    CLIs (``--user-dir``) fairseq is already imported and nothing changes here."""
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
