"""Classes fairseq pickles into checkpoints, allowlisted for ``torch.load(weights_only=True)`` (torch >= 2.6).

fairseq imports a ``--user-dir`` before it loads any checkpoint, so allowlisting when the plugin is imported (the
``safe_checkpoints`` change of ``fairseq_joint.fairseq_patches``) makes fairseq-generate, fairseq-interactive, resume
and ``load_model_ensemble_and_task`` work without switching the safety check off. A resumed run of several processes
needs one class of fairseq's own: rank 0 reads the checkpoint and sends it to the others through
``fairseq.distributed.utils.broadcast_object``, which pickles its tensors as ``_TensorPlaceholder``s (the other ranks'
``torch.load`` refused it, and the run ended in gloo's "Connection closed by peer").
"""

import argparse
import collections
import typing

import numpy as np
import torch
from fairseq.distributed import utils as distributed_utils
from omegaconf import DictConfig, ListConfig
from omegaconf.base import ContainerMetadata, Metadata
from omegaconf.nodes import AnyNode

try:  # numpy >= 2
    from numpy._core.multiarray import _reconstruct, scalar
except ImportError:  # numpy 1.x
    from numpy.core.multiarray import _reconstruct, scalar


def allowlist_fairseq_checkpoint_classes() -> bool:
    """The patch ``safe_checkpoints`` of ``fairseq_joint.fairseq_patches``: Python's, omegaconf's and numpy's classes
    in fairseq's checkpoints (omegaconf and numpy are fairseq's dependencies); True if torch checks (torch >= 2.4)."""
    if not hasattr(torch.serialization, "add_safe_globals"):  # torch < 2.4 does not check
        return False
    torch.serialization.add_safe_globals(
        [argparse.Namespace, typing.Any, collections.defaultdict, dict, list, int, float, str, DictConfig, ListConfig,
         ContainerMetadata, Metadata, AnyNode, np.dtype, np.ndarray, _reconstruct, scalar,
         *(type(np.dtype(t)) for t in ("float16", "float32", "float64", "int32", "int64", "bool")),
         distributed_utils._TensorPlaceholder])
    return True
