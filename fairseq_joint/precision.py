"""fairseq's precision flags checked against the hardware before any work.

* ``--fp16`` and ``--amp`` need CUDA: on the CPU fairseq crashes inside the trainer (``--fp16``) or silently trains in
  fp32 (``--amp``).
* ``--bf16`` in fairseq 0.12 implies ``--tpu`` (XLA): without torch_xla it crashes inside the trainer. On a CUDA GPU
  with bf16 support the plugin trains in bf16 on the GPU instead (``--tpu`` dropped, logged: :func:`bf16_on_cuda`, the
  ``bf16_on_cuda`` change of ``fairseq_joint.fairseq_patches``, off with the others).
* Mixed precision on the CPU is ``torch.autocast("cpu", torch.bfloat16)`` in Python, which every fairseq-joint layer
  and loss supports (tests/unit/test_mixed_precision.py).
"""

import importlib.util
import logging
from typing import Optional

import torch

from fairseq_joint import errors
from fairseq_joint.errors import OptionError

logger = logging.getLogger(__name__)

FLAGS = ("fp16", "memory_efficient_fp16", "bf16", "memory_efficient_bf16", "amp")


def requested(cfg) -> list:
    """The precision flags set in ``cfg`` (fairseq's ``common`` group, which declares each of :data:`FLAGS`)."""
    return [f for f in FLAGS if getattr(cfg, f)]


def names(flags) -> str:
    """The command-line options of precision ``flags`` (``--bf16 --amp``)."""
    return " ".join("--" + f.replace("_", "-") for f in flags)


def asks_bf16(flags) -> bool:
    """Whether precision ``flags`` ask for bf16 (which fairseq runs through XLA)."""
    return any("bf16" in f for f in flags)


def xla_installed() -> bool:
    """Whether torch_xla, fairseq's TPU path, is installed."""
    return importlib.util.find_spec("torch_xla") is not None


def hardware_problem(cfg) -> Optional[str]:
    """Why this machine cannot run the precision flags set in ``cfg`` (fairseq's ``common`` group), as a refusal's
    line, or None."""
    flags = requested(cfg)
    if not flags:
        return None
    given, bf16 = names(flags), asks_bf16(flags)
    if bf16 and xla_installed():
        return None  # fairseq's own TPU path
    if cfg.cpu or not torch.cuda.is_available():
        need = "a CUDA GPU with bf16 (or a TPU with torch_xla)" if bf16 else "a CUDA GPU"
        return (f"{given} needs {need} and this run has none{' (--cpu)' if cfg.cpu else ''}: "
                f"drop {given} to train in fp32 on the CPU")
    if bf16 and not torch.cuda.is_bf16_supported():
        return f"{given}: this GPU ({torch.cuda.get_device_name()}) has no bf16 support: use --fp16 (or --amp) instead"
    return None


def check_precision(cfg) -> None:
    """A one-line refusal when a precision flag asks for hardware this machine lacks (``cfg``: fairseq's ``common``
    group; :func:`hardware_problem`)."""
    problem = hardware_problem(cfg)
    if problem is not None:
        raise OptionError(problem)


def bf16_on_cuda(cfg) -> bool:
    """Change ``bf16_on_cuda``: fairseq's ``--bf16`` (``--memory-efficient-bf16``) sets ``--tpu``, whose XLA path
    crashes without torch_xla; on a CUDA GPU with bf16 (:func:`hardware_problem` finds none) ``cfg.tpu`` is cleared,
    so that fairseq trains in bf16 on that GPU (``cfg``: fairseq's ``common`` group). True if it did."""
    flags = requested(cfg)
    if not (cfg.tpu and asks_bf16(flags)) or xla_installed() or hardware_problem(cfg) is not None:
        return False
    logger.info(f"{names(flags)}: fairseq's --bf16 implies --tpu, and torch_xla is not installed: training in bf16 on "
                "the CUDA GPU instead")
    cfg.tpu = False
    return True


def bf16_call_main(original, cfg, main, **kwargs):
    """fairseq's ``call_main``, for fairseq-train after :func:`bf16_on_cuda` (the ``bf16_on_cuda`` change of
    ``fairseq_joint.fairseq_patches``: fairseq's --bf16 on a CUDA GPU without torch_xla drops the --tpu it implies)."""
    if errors.fairseq_program(main) == "fairseq_cli.train":
        bf16_on_cuda(cfg.common)
    return original(cfg, main, **kwargs)
