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
* **checksums**: every tensor and every other value a resume reads (the model, the criterion, the optimizer's state
  such as Adam's ``exp_avg`` and ``step``, the lr scheduler's state, ``extra_state``'s data-iterator position and
  meters, the task's state) gets a CRC-32 under its path in the checkpoint dict (``last_optimizer_state`` /
  ``state.3.exp_avg``), saved in the checkpoint (``fairseq_joint_checksums``) and verified when it is loaded: what is
  damaged is named in a one-line error with the newest intact checkpoint beside it. Only the configuration
  (``cfg``, ``args``) is left out: fairseq rewrites it while loading (``--model-overrides``), and a resume takes the
  command line's options anyway;
* **absolute paths**: the data directory, label files and sentence encoder a checkpoint's configuration names
  (:data:`PATH_OPTIONS`) are saved absolute, so a command run from another directory finds them; a multilingual
  model's label language is saved explicit (its default, the first of ``--languages``, follows their order);
* **damaged files**: a checkpoint torch cannot read (a truncated zip archive) is refused with a one-line error that
  names the newest intact checkpoint beside it and the command that restores it; a file that is no checkpoint at all
  (a dictionary given to ``--path``) is refused as such.

Checkpoints written before (without checksums) load as before; those whose checksums cover the model and the
criterion only are verified on those.

Dictionaries are compared by content, not by size: :func:`dictionary_fingerprint` is what fairseq-joint models keep
of the dictionaries they were built with (see ``OutputLayerModelMixin``).
"""

import contextlib
import errno
import glob
import hashlib
import logging
import os
import pickle
import shutil
import zipfile
import zlib
from typing import Dict, Iterable, Iterator, Optional, Tuple

import numpy as np
import torch

from fairseq_joint.errors import CheckpointError, unsafe_checkpoint, weights_only_refusal

logger = logging.getLogger(__name__)

CHECKSUMS = "fairseq_joint_checksums"
#: how the zip archive torch saves starts (a truncated one too)
ZIP_MAGIC = b"PK\x03\x04"
#: what marks a checkpoint dict of fairseq's (the entries of its model and its criterion)
PARTS = ("model", "criterion")
#: the entries of a checkpoint dict that are not checksummed: its configuration, which fairseq's loader rewrites
#: (``--model-overrides``, upgrades of old options), and the checksums themselves
UNCHECKED = ("args", "cfg", CHECKSUMS)
#: entries fairseq's loader (``checkpoint_utils._upgrade_state_dict``) adds to a checkpoint saved without them, after
#: reading the file and before :func:`verify` sees it: a ``train_iterator`` for ``extra_state`` (e.g. a
#: ``Trainer.save_checkpoint(path, {})`` of one's own)
UPGRADE_ADDED = {"extra_state": ("train_iterator.epoch", "train_iterator.iterations_in_epoch")}
#: the options whose paths a checkpoint records absolute, as ``(group, option)`` of fairseq's configuration: fairseq
#: records them as typed, and a command run from another directory than training (fairseq-joint-predict-labels,
#: fairseq-validate) looked for the data relative to where it runs
PATH_OPTIONS = (("task", "data"), ("task", "label_file"), ("task", "eval_label_file"), ("model", "pretrained_encoder"))


def checksum(value: object) -> int:
    """CRC-32 of a tensor's bytes (its dtype's representation, row-major), or of another value in a canonical
    serialization: its type and ``repr`` for Python's and numpy's scalars (a float's ``repr`` is exact), dtype, shape
    and bytes for a numpy array, its members' sorted ``repr`` for a set, the pickle otherwise."""
    if torch.is_tensor(value):
        return zlib.crc32(value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    kind = f"{type(value).__module__}.{type(value).__qualname__}:".encode("utf-8")
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, np.generic)):
        data = repr(value).encode("utf-8")
    elif isinstance(value, np.ndarray):
        data = f"{value.dtype.str}{value.shape}".encode("utf-8") + np.ascontiguousarray(value).tobytes()
    elif isinstance(value, (set, frozenset)):  # its order (and pickle) depends on the process's string hashing
        data = repr(sorted(repr(v) for v in value)).encode("utf-8")
    else:
        data = pickle.dumps(value, protocol=4)
    return zlib.crc32(kind + data)


def leaves(value: object, path: str = "") -> Iterator[Tuple[str, object]]:
    """``(path, leaf)`` of every tensor and other value in nested dicts, lists and tuples; a path joins the keys and
    indices with dots (``state.3.exp_avg``)."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        yield path, value
        return
    for key, item in items:
        yield from leaves(item, f"{path}.{key}" if path else str(key))


def checksums(state: Dict[str, object]) -> Dict[str, Dict[str, int]]:
    """``{part: {path: CRC-32}}`` of every tensor and every other value (:func:`checksum`) of each entry ``part`` of a
    checkpoint dict but the :data:`UNCHECKED` ones. A model's tensor is under its name (``model``:
    ``decoder.embed_tokens.weight``), as in the checksums of earlier versions, which held the model's and the
    criterion's tensors only."""
    return {part: {path: checksum(leaf) for path, leaf in leaves(content)}
            for part, content in state.items() if part not in UNCHECKED}


def damage(state: Dict[str, object]) -> Optional[str]:
    """What in a checkpoint dict differs from the checksums saved with it (a tensor or value, one that is missing, or
    one that no checksum covers in a part they cover), or None when all hold or it has none."""
    saved = state.get(CHECKSUMS)
    if not isinstance(saved, dict):
        return None
    current = any(part not in PARTS for part in saved)  # the checksums of every part a resume reads
    for part, sums in saved.items():
        if part not in state:
            return f"its {part} entry is missing from the file"
        found = dict(leaves(state.get(part)))
        for name, crc in sums.items():
            if name not in found:
                return f"the {part} entry {name} is missing from the file (or no longer has the structure saved)"
            if crc != checksum(found[name]):
                kind = "tensor" if torch.is_tensor(found[name]) else "value"
                return (f"the {part} {kind} {name} is damaged (its bytes differ from the checksum saved with it; if "
                        "the file was averaged or edited after saving, average with fairseq-joint-average-checkpoints "
                        "instead)")
        # an entry the save did not write (a damaged key, an edit after the save); the earlier format's checksums
        # (model and criterion only) covered their tensors only
        upgraded = UPGRADE_ADDED.get(part, ()) if not any(n.startswith("train_iterator.") for n in sums) else ()
        added = next((name for name in found if name not in sums and name not in upgraded
                      and (current or torch.is_tensor(found[name]))), None)
        if added is not None:
            return f"the {part} entry {added} is not one the checkpoint was saved with (no checksum covers it)"
    return None


def verify(state: Dict[str, object], path: str) -> None:
    """Refuse a checkpoint dict with :func:`damage`, naming it and the newest intact checkpoint beside ``path``."""
    what = damage(state)
    if what is not None:
        raise CheckpointError(f"{path}: {what}: use another checkpoint of the run; {instead(path)}")


def intact_checkpoints(path: str) -> Iterator[str]:
    """The other checkpoints of ``path``'s directory that torch reads and whose checksums hold, newest first
    (``checkpoint_last.pt`` first of those as new as it: fairseq writes it as a copy of another)."""
    others = [p for p in glob.glob(os.path.join(os.path.dirname(os.path.abspath(path)), "checkpoint*.pt"))
              if os.path.abspath(p) != os.path.abspath(path)]
    for p in sorted(others, key=lambda p: (os.path.getmtime(p), p.endswith("checkpoint_last.pt")), reverse=True):
        if _readable(p) is not None:
            continue
        try:
            state = torch.load(p, map_location="cpu", weights_only=True)  # a file the user never named: unpickled safely
        except Exception:  # noqa: BLE001  (whatever keeps torch from loading it: not intact)
            continue
        if damage(state) is None:
            yield p


def instead(path: str) -> str:
    """What to use instead of the checkpoint ``path``: the newest intact checkpoint beside it and the ``cp`` that puts
    it in place, or that there is none."""
    intact = next(intact_checkpoints(path), None)
    if intact is None:
        return f"no intact checkpoint lies beside it: train again without it (delete {path})"
    return f"the newest intact checkpoint beside it is {intact}: cp {intact} {path} and run the same command again"


def _readable(path: str) -> Optional[BaseException]:
    try:
        with zipfile.ZipFile(path):
            return None
    except (zipfile.BadZipFile, OSError) as err:
        return err


@contextlib.contextmanager
def room(path, needed: int):
    """Writing about ``needed`` bytes to the local file ``path`` through ``<path>.tmp`` (fairseq's saves, :func:`copy`):
    refused before it starts when the disk has less room, and when it runs out of room all the same, ``<path>.tmp`` is
    removed and the refusal names the file, the room it needed and the newest intact checkpoint to resume from."""
    local = isinstance(path, str) and "://" not in path  # fairseq hands its own save a file object too
    free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free if local else needed
    try:
        if free < needed:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        yield
    except OSError as err:
        if not local or err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + ".tmp")
        intact = next(intact_checkpoints(path), None)
        resume = (f"the newest intact checkpoint is {intact}: once there is room, run the same command"
                  f"{'' if os.path.basename(intact) == 'checkpoint_last.pt' else f' with --restore-file {intact}'} to "
                  "resume from it" if intact else "no intact checkpoint lies beside it: the run starts over")
        raise CheckpointError(f"{path}: no space left on the device to write it (about {needed / 2 ** 20:.1f} MiB "
                              f"needed, {shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free / 2 ** 20:.1f} "
                              f"MiB free): free space or give a --save-dir with room; {resume}") from err


def dictionary_fingerprint(symbols: Iterable[str]) -> int:
    """A 63-bit fingerprint of a dictionary's entries in order (sha256): equal sizes, other words, another one."""
    digest = hashlib.sha256("\n".join(symbols).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") & (2 ** 63 - 1)


def copy(original, src_path: str, dst_path: str, overwrite: bool = False) -> bool:
    """fairseq's ``PathManager.copy`` (``original``), or when both files are local a copy through ``<dst>.tmp`` and a
    rename: ``dst_path`` is the old file or the whole new one, never a part."""
    if "://" in src_path or "://" in dst_path:
        return original(src_path, dst_path, overwrite=overwrite)
    if os.path.exists(dst_path) and not overwrite:
        return False
    with room(dst_path, os.path.getsize(src_path)):
        shutil.copyfile(src_path, dst_path + ".tmp")
    os.replace(dst_path + ".tmp", dst_path)
    return True


def absolute_paths(cfg: Dict[str, object]) -> None:
    """The paths of :data:`PATH_OPTIONS` in a checkpoint's configuration (the dict fairseq saves) made absolute, in
    place; each part of a ``:``-separated DATA too. A value that names no local file or directory stays as it is (a
    URL, one that is already gone)."""
    for group, option in PATH_OPTIONS:
        fields = cfg.get(group)
        if not isinstance(fields, dict) or not isinstance(fields.get(option), str) or not fields[option]:
            continue
        fields[option] = os.pathsep.join(os.path.abspath(part) if os.path.exists(part) else part
                                         for part in fields[option].split(os.pathsep))


def explicit_label_language(cfg: Dict[str, object]) -> None:
    """A multilingual GILE configuration's ``--label-language`` recorded as the one it trained with, in place: its
    default is the first of ``--languages``, so a later ``--model-overrides "{'languages': 'pl,en'}"`` (the same
    languages, another order) embedded the label descriptions with another language's dictionary without a word."""
    from fairseq_joint.data.gile_files import parse_languages

    task = cfg.get("task")
    if isinstance(task, dict) and task.get("languages") and not task.get("label_language"):
        task["label_language"] = parse_languages(task["languages"])[0]


def as_recorded(cfg: Dict[str, object]) -> None:
    """A configuration (the dict fairseq saves) as a checkpoint records it, in place: :func:`absolute_paths` and
    :func:`explicit_label_language` (also what a resume compares its own configuration as)."""
    absolute_paths(cfg)
    explicit_label_language(cfg)


def save(original, obj, filename, *args, **kwargs):
    """fairseq's ``torch_persistent_save`` (``original``) of a checkpoint dict with its configuration
    :func:`as_recorded` and its :func:`checksums` added, in the :func:`room` its tensors need."""
    if isinstance(obj, dict) and any(isinstance(obj.get(p), dict) for p in PARTS):
        if isinstance(obj.get("cfg"), dict):
            as_recorded(obj["cfg"])
        obj[CHECKSUMS] = checksums(obj)
    with room(filename, sum(leaf.nbytes for _, leaf in leaves(obj) if torch.is_tensor(leaf))):
        return original(obj, filename, *args, **kwargs)


def load(original, path, *args, **kwargs):
    """fairseq's ``load_checkpoint_to_cpu`` (``original``), :func:`verify`-ed; a file that fails to load is what
    :func:`_unreadable` says."""
    try:
        state = original(path, *args, **kwargs)
    except Exception as err:
        raise _unreadable(path, err) from err
    verify(state, path)
    return state


def _unreadable(path: str, err: BaseException) -> BaseException:
    """What fairseq's failure ``err`` to load ``path`` means: a truncated zip archive or pickle (or an empty file) is
    refused naming the newest intact checkpoint beside it (:func:`instead`); a file that is neither (a dictionary given
    to ``--path``) as no checkpoint, whose fix is another file, not deleting it; one torch reads that is no fairseq
    checkpoint (a plain ``state_dict``, which fairseq's upgrade of old checkpoints fails on with ``KeyError:
    'best_loss'``) as such; the refusal of torch's ``weights_only`` unpickler of a zip archive or a legacy pickle as
    :func:`~fairseq_joint.errors.unsafe_checkpoint`; else ``err`` itself."""
    from fairseq.file_io import PathManager

    local = PathManager.get_local_path(path)
    if not os.path.isfile(local):
        return err
    unsafe = weights_only_refusal(err)
    if _readable(local) is not None:
        with open(local, "rb") as f:  # a legacy pickle starts with its PROTO opcode, torch's zip archive with PK
            start = f.read(4)
        if unsafe and start[:1] == pickle.PROTO:
            return unsafe_checkpoint(path, err)
        if start and not start.startswith(ZIP_MAGIC) and start[:1] != pickle.PROTO:  # a dictionary, a text
            return CheckpointError(f"{path} is not a checkpoint (neither the zip archive nor the pickle torch saves): "
                                   "give a checkpoint written by fairseq-train (checkpoint_*.pt)")
        return CheckpointError(f"{path} is truncated (torch cannot read its zip archive; an interrupted save?); "
                               f"{instead(path)}")
    if unsafe:
        return unsafe_checkpoint(path, err)
    try:
        state = torch.load(local, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001  (torch cannot read it either: fairseq's error says why)
        return err
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict) or not (
            state.get("cfg") is not None or state.get("args") is not None):
        what = f"a dict with the keys {', '.join(map(repr, list(state)[:4]))}" if isinstance(state, dict) else type(state).__name__
        return CheckpointError(f"{path} is not a fairseq checkpoint (torch reads {what}, without a model's weights and "
                               "configuration): give a checkpoint written by fairseq-train (checkpoint_*.pt)")
    return err
