"""fairseq's precision flags checked against the hardware before any work.

* ``--fp16`` and ``--amp`` need CUDA: on the CPU fairseq crashes inside the trainer (``--fp16``) or silently trains in
  fp32 (``--amp``).
* ``--bf16`` in fairseq 0.12 implies ``--tpu`` (XLA): without torch_xla it crashes inside the trainer. On a CUDA GPU
  with bf16 support the plugin trains in bf16 on the GPU instead (``--tpu`` dropped, logged).
* Mixed precision on the CPU is ``torch.autocast("cpu", torch.bfloat16)`` in Python, which every fairseq-joint layer
  and loss supports (tests/unit/test_mixed_precision.py).
"""

import importlib.util
import logging

import torch

from fairseq_joint.errors import OptionError

logger = logging.getLogger(__name__)

FLAGS = ("fp16", "memory_efficient_fp16", "bf16", "memory_efficient_bf16", "amp")


def requested(cfg) -> list:
    """The precision flags set in ``cfg`` (fairseq's ``common`` group or a legacy argparse namespace)."""
    return [f for f in FLAGS if getattr(cfg, f, False)]


def check_precision(cfg) -> None:
    """A one-line refusal when a precision flag asks for hardware this machine lacks (``cfg``: fairseq's ``common``
    group or a legacy namespace); ``--bf16`` on CUDA without torch_xla runs on the GPU (``cfg.tpu`` is cleared)."""
    flags = requested(cfg)
    if not flags:
        return
    names = " ".join("--" + f.replace("_", "-") for f in flags)
    bf16 = any("bf16" in f for f in flags)
    has_xla = importlib.util.find_spec("torch_xla") is not None
    if bf16 and has_xla:
        return  # fairseq's own TPU path
    if getattr(cfg, "cpu", False) or not torch.cuda.is_available():
        need = "a CUDA GPU with bf16 (or a TPU with torch_xla)" if bf16 else "a CUDA GPU"
        raise OptionError(f"{names} needs {need} and this run has none"
                          f"{' (--cpu)' if getattr(cfg, 'cpu', False) else ''}: drop {names} to train in fp32 on the CPU")
    if bf16:
        if not torch.cuda.is_bf16_supported():
            raise OptionError(f"{names}: this GPU ({torch.cuda.get_device_name()}) has no bf16 support: "
                              "use --fp16 (or --amp) instead")
        if getattr(cfg, "tpu", False):
            logger.info(f"{names}: fairseq's --bf16 implies --tpu, and torch_xla is not installed: training in bf16 "
                        "on the CUDA GPU instead")
            cfg.tpu = False
