"""Checkpoints that cannot load wrong.

fairseq (0.12.3) writes the first file of a save through a temporary file and a rename, but copies it to the other
names (``checkpoint_last.pt`` among them) with a plain copy: a SIGTERM during the copy left a truncated
``checkpoint_last.pt``, and the resume died in a zip-reader traceback. Nothing checks the tensors' bytes: a checkpoint
with flipped bytes loaded and translated garbage. ``fairseq_joint.fairseq_patches`` puts :func:`copy`,
:func:`save` and :func:`load` in front of fairseq's ``PathManager.copy``, ``checkpoint_utils.torch_persistent_save``
and ``checkpoint_utils.load_checkpoint_to_cpu``, which adds, for every checkpoint fairseq writes or reads while the
plugin is loaded:

* **atomic copies**: fairseq's ``PathManager.copy`` of local files copies to ``<name>.tmp`` and renames, so a file
  under a checkpoint's name is always whole;
* **checksums**: every tensor of the model and the criterion gets a CRC-32 of its bytes, saved in the checkpoint
  (``fairseq_joint_checksums``) and verified when it is loaded: a damaged tensor is named in a one-line error;
* **damaged files**: a checkpoint torch cannot read (truncated, not a zip archive) is refused with a one-line error that
  names the newest intact checkpoint beside it and the command that restores it.

Checkpoints written before (without checksums) load as before.

Dictionaries are compared by content, not by size: :func:`dictionary_fingerprint` is what fairseq-joint models keep
of the dictionaries they were built with (see ``OutputLayerModelMixin``).
"""

import glob
import hashlib
import logging
import os
import shutil
import zipfile
import zlib
from typing import Dict, Iterable, Optional

import torch

from fairseq_joint.errors import CheckpointError

logger = logging.getLogger(__name__)

CHECKSUMS = "fairseq_joint_checksums"
#: the parts of a fairseq checkpoint whose tensors are checksummed
PARTS = ("model", "criterion")


def tensor_checksum(t: torch.Tensor) -> int:
    """CRC-32 of a tensor's bytes (its dtype's representation, row-major)."""
    data = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
    return zlib.crc32(data)


def checksums(state: Dict[str, object]) -> Dict[str, Dict[str, int]]:
    """``{part: {tensor name: CRC-32}}`` of the model's and the criterion's tensors in a checkpoint dict."""
    out = {}
    for part in PARTS:
        tensors = state.get(part)
        if isinstance(tensors, dict):
            out[part] = {k: tensor_checksum(v) for k, v in tensors.items() if torch.is_tensor(v)}
    return out


def verify(state: Dict[str, object], path: str) -> None:
    """Refuse a checkpoint dict whose tensors differ from the checksums saved with them."""
    saved = state.get(CHECKSUMS)
    if not isinstance(saved, dict):
        return
    for part, sums in saved.items():
        tensors = state.get(part) or {}
        for name, crc in sums.items():
            if name not in tensors:
                raise CheckpointError(f"{path}: the {part} tensor {name} is missing from the file: the checkpoint is "
                                      "damaged; use another checkpoint of the run")
            if tensor_checksum(tensors[name]) != crc:
                raise CheckpointError(f"{path}: the {part} tensor {name} is damaged (its bytes differ from the checksum "
                                      "saved with it): use another checkpoint of the run")


def intact_checkpoints(path: str) -> Iterable[str]:
    """The other checkpoints of ``path``'s directory whose zip directory can be read, newest first."""
    others = [p for p in glob.glob(os.path.join(os.path.dirname(os.path.abspath(path)), "checkpoint*.pt"))
              if os.path.abspath(p) != os.path.abspath(path)]
    for p in sorted(others, key=os.path.getmtime, reverse=True):
        try:
            with zipfile.ZipFile(p):
                yield p
        except (zipfile.BadZipFile, OSError):
            continue


def damaged(path: str, err: BaseException) -> CheckpointError:
    """The one-line refusal of a checkpoint file torch cannot read, naming what to resume from instead."""
    what = "truncated or not a checkpoint (torch cannot read its zip archive; an interrupted save?)"
    intact = next(iter(intact_checkpoints(path)), None)
    if intact is None:
        return CheckpointError(f"{path} is {what} and no intact checkpoint lies beside it: train again without it "
                               f"(delete {path})")
    return CheckpointError(f"{path} is {what}; the newest intact checkpoint beside it is {intact}: "
                           f"cp {intact} {path} and run the same command again")


def _readable(path: str) -> Optional[BaseException]:
    try:
        with zipfile.ZipFile(path):
            return None
    except (zipfile.BadZipFile, OSError) as err:
        return err


def atomic_copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
    """Copy through ``<dst>.tmp`` and a rename: ``dst_path`` is the old file or the whole new one, never a part."""
    if os.path.exists(dst_path) and not overwrite:
        return False
    tmp = dst_path + ".tmp"
    shutil.copyfile(src_path, tmp)
    os.replace(tmp, dst_path)
    return True


def dictionary_fingerprint(symbols: Iterable[str]) -> int:
    """A 63-bit fingerprint of a dictionary's entries in order (sha256): equal sizes, other words, another one."""
    digest = hashlib.sha256("\n".join(symbols).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") & (2 ** 63 - 1)


def copy(original, src_path: str, dst_path: str, overwrite: bool = False) -> bool:
    """fairseq's ``PathManager.copy`` (``original``), through :func:`atomic_copy` when both files are local."""
    if "://" in src_path or "://" in dst_path:
        return original(src_path, dst_path, overwrite=overwrite)
    return atomic_copy(src_path, dst_path, overwrite=overwrite)


def save(original, obj, filename, *args, **kwargs):
    """fairseq's ``torch_persistent_save`` (``original``) of a checkpoint dict with its :func:`checksums` added."""
    if isinstance(obj, dict) and any(isinstance(obj.get(p), dict) for p in PARTS):
        obj[CHECKSUMS] = checksums(obj)
    return original(obj, filename, *args, **kwargs)


def load(original, path, *args, **kwargs):
    """fairseq's ``load_checkpoint_to_cpu`` (``original``), :func:`verify`-ed; a file torch cannot read is refused
    as :func:`damaged`."""
    from fairseq.file_io import PathManager

    try:
        state = original(path, *args, **kwargs)
    except Exception as err:
        local = PathManager.get_local_path(path)
        if os.path.isfile(local) and _readable(local) is not None:
            raise damaged(path, err) from err
        raise
    verify(state, path)
    return state
