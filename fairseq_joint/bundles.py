"""One self-contained directory per label predictor: what ``LabelPredictor.save`` writes and
``LabelPredictor.from_pretrained`` reads (docs/python.md).

A bundle holds copies of every file the predictor reads (the checkpoint, the data directory's dictionaries, label
lists, label file and lexical features, the sentence encoder's directory, or a pinned reference to it), a model card
(``README.md``: the model, the options it was trained with as a ``fairseq-train`` command, its last validation's
figures) and :data:`MANIFEST`, which lists every file with its SHA-256, as a checkpoint holds the checksums of its
tensors (:mod:`fairseq_joint.checkpoints`). :func:`read_bundle` checks them all before anything is loaded: a missing
or altered file is refused in one line that names it.

* :func:`write_bundle` copies the parts into a new directory through a temporary one beside it (a directory under the
  bundle's name is whole or absent);
* :func:`training_command` writes a checkpoint's configuration as the ``fairseq-train`` command line that gives it.
"""

import ast
import dataclasses
import hashlib
import json
import os
import shlex
import shutil
from typing import Dict, Optional

from fairseq_joint.errors import CheckpointError, MissingFileError, OptionError
from fairseq_joint.options import arch, declared, flag
from fairseq_joint.text_files import check_exists

#: the manifest of a bundle: its kind, its parts and every file's SHA-256
MANIFEST = "fairseq-joint-model.json"
FORMAT = "fairseq-joint label predictor 1"
#: the model card
CARD = "README.md"
#: what to say to fix a bundle that fails its checks
RECOPY = "copy the directory again from where LabelPredictor.save wrote it (or save it again)"


def file_sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def check_new_directory(directory: str, option: str) -> str:
    """``directory`` (given by ``option``) if it is new or an empty directory, where a model directory is written, and
    not under a file."""
    above = os.path.dirname(os.path.abspath(directory))
    while not os.path.lexists(above):
        above = os.path.dirname(above)
    if not directory or not os.path.isdir(above):
        raise OptionError(f"{option} {directory!r} names no directory one can make: give a new directory's path")
    if os.path.lexists(directory) and not (os.path.isdir(directory) and not os.listdir(directory)):
        raise OptionError(f"{option} {directory} exists and is not an empty directory: give a new directory")
    return directory


def write_bundle(directory: str, files: Dict[str, str], trees: Dict[str, str], manifest: dict, card: str) -> str:
    """Write the bundle ``directory`` (new, or an empty directory): each of ``files`` (bundle-relative name -> the file
    to copy) and ``trees`` (bundle-relative name -> a directory whose files are copied as
    :func:`~fairseq_joint.modules.sentence_encoder.encoder_fingerprint` reads them, so that the copy has the same
    fingerprint), the model card ``card`` and the manifest (``manifest`` with the format and every file's SHA-256
    added). Returns the directory's path."""
    if not isinstance(directory, (str, os.PathLike)):
        raise OptionError(f"save: directory is {directory!r}, not a path: give the path of a new directory")
    directory = check_new_directory(os.fspath(directory), "save:")
    tmp = f"{directory.rstrip(os.sep)}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    copies = dict(files)
    for name, source in trees.items():
        for root, _, names in os.walk(source):
            for file in names:
                copies[os.path.join(name, os.path.relpath(os.path.join(root, file), source))] = os.path.join(root, file)
    try:
        os.makedirs(tmp)
        for name, source in copies.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, name)), exist_ok=True)
            shutil.copyfile(source, os.path.join(tmp, name))
        with open(os.path.join(tmp, CARD), "w", encoding="utf-8") as f:
            f.write(card)
        checksums = {}
        for root, dirs, names in os.walk(tmp):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(root, name)
                checksums[os.path.relpath(path, tmp).replace(os.sep, "/")] = file_sha256(path)
        with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as f:
            json.dump({"format": FORMAT, **manifest, "files": checksums}, f, indent=1)
        if os.path.isdir(directory):
            os.rmdir(directory)  # empty (checked above)
        os.replace(tmp, directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


#: the parts of a bundle of each kind (``encoder``: or an ``encoder_reference`` to one outside it)
PARTS = {"encoder": ("encoder",), "gile_classifier": ("checkpoint", "data")}


def read_bundle(directory: str) -> dict:
    """The manifest of the bundle ``directory`` once every file it lists is there with its SHA-256; else a one-line
    refusal naming the file: ``MissingFileError`` for a missing one, ``CheckpointError`` for an altered one."""
    directory = os.fspath(directory)
    path = os.path.join(directory, MANIFEST)
    fix = "give a directory LabelPredictor.save wrote"
    if os.path.isfile(directory):  # a checkpoint's?
        raise CheckpointError(f"{directory} is a file: {fix} (a checkpoint file loads with "
                              "LabelPredictor.from_checkpoint)")
    if not os.path.isfile(path):  # nothing, or a directory LabelPredictor.save did not write
        what = f"a directory without {MANIFEST}" if os.path.isdir(directory) else "missing"
        raise MissingFileError(f"{directory} is {what}: {fix}, or {RECOPY}")
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path} is unreadable ({type(e).__name__}): {RECOPY}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(manifest.get("files"), dict):
        raise CheckpointError(f"{path} is not a manifest of {FORMAT!r}: {RECOPY}")
    # the parts each kind is loaded from (a manifest edited by hand failed in a TypeError or KeyError, or loaded the
    # checkpoint's own data directory from outside the bundle)
    kind, reference = manifest.get("kind"), manifest.get("encoder_reference")
    if kind not in PARTS:
        raise CheckpointError(f"{path}: unknown kind {kind!r}: {RECOPY}")
    if reference is not None and not (isinstance(reference, dict) and all(isinstance(reference.get(key), str)
                                                                           for key in ("path", "fingerprint"))):
        raise CheckpointError(f"{path}: encoder_reference {reference!r} is no path and fingerprint: {RECOPY}")
    missing = [key for key in PARTS[kind] if manifest.get(key) is None and not (key == "encoder" and reference)]
    if missing:
        raise CheckpointError(f"{path} names no {missing[0]}, which a {kind!r} bundle loads from: {RECOPY}")
    for name, checksum in manifest["files"].items():
        part = os.path.join(directory, *name.split("/"))
        check_exists(part, "", f"the saved predictor {directory} lacks it: {RECOPY}")
        if file_sha256(part) != checksum:
            raise CheckpointError(f"{part} is altered (its SHA-256 differs from the one {MANIFEST} holds): {RECOPY}")
    return manifest


def bundle_part(directory: str, manifest: dict, key: str) -> Optional[str]:
    """The path of the part ``key`` of a bundle's manifest (a file or directory inside the bundle), or None."""
    name = manifest.get(key)
    if name is None:
        return None
    if not isinstance(name, str) or name.startswith("/") or ".." in name.split("/"):
        raise CheckpointError(f"{os.path.join(directory, MANIFEST)}: {key} {name!r} is outside the bundle: {RECOPY}")
    return os.path.join(directory, *name.split("/"))


def check_encoder_reference(path: str, fingerprint: str, saved: str, directory: str) -> None:
    """The encoder a bundle saved as a reference (not copied) is the one it was saved with: ``saved``, the SHA-256 of
    its files (:func:`~fairseq_joint.modules.sentence_encoder.encoder_fingerprint`), against ``fingerprint``, that of
    the directory ``path`` loaded now."""
    if fingerprint != saved:
        raise CheckpointError(f"sentence encoder {path}: not the one {directory} was saved with (its files differ from "
                              f"the fingerprint in {MANIFEST}): give that encoder's directory (pretrained_encoder=)")


# ---------------------------------------------------------------------------------------------- the model card
def _default(field: dataclasses.Field):
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def _plain(value):
    """A configuration value as plain Python (OmegaConf's lists and dicts as lists and dicts)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def _same(value, default) -> bool:
    if isinstance(default, str) and isinstance(value, (list, tuple)):  # e.g. --adam-betas "(0.9, 0.999)"
        try:
            default = ast.literal_eval(default)
        except (ValueError, SyntaxError):
            return False
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return list(value) == list(default)
    return value == default


def _argument(value) -> str:
    if isinstance(value, (list, tuple)):
        return shlex.quote(",".join(str(v) for v in value))
    return shlex.quote(str(value))


def training_command(cfg) -> str:
    """The ``fairseq-train`` command line of a checkpoint's configuration ``cfg``: its data directory, its task,
    architecture, criterion, optimizer and learning-rate scheduler, and every option of those and of fairseq's common,
    dataset, optimization and checkpoint groups whose value is not its default (the device and distributed options
    left out: they are the machine's). Paths are those of the machine it was trained on."""
    from fairseq.dataclass.configs import CheckpointConfig, CommonConfig, DatasetConfig, OptimizationConfig
    from fairseq.optim import OPTIMIZER_DATACLASS_REGISTRY
    from fairseq.optim.lr_scheduler import LR_SCHEDULER_DATACLASS_REGISTRY

    choices = {"task": cfg.task._name, "arch": arch(cfg.model), "criterion": cfg.criterion._name,
               "optimizer": cfg.optimizer._name if cfg.optimizer is not None else None,
               "lr_scheduler": cfg.lr_scheduler._name if cfg.lr_scheduler is not None else None}
    words = ["fairseq-train", shlex.quote(str(cfg.task.data))]
    for name, value in choices.items():
        if value is not None:
            words += [flag(name), shlex.quote(str(value))]
    groups = [(cfg.common, (CommonConfig,)), (cfg.task, declared(cfg, "task")), (cfg.model, declared(cfg, "model")),
              (cfg.criterion, declared(cfg, "criterion")), (cfg.dataset, (DatasetConfig,)),
              (cfg.optimization, (OptimizationConfig,))]
    if choices["optimizer"] in OPTIMIZER_DATACLASS_REGISTRY:
        groups.append((cfg.optimizer, (OPTIMIZER_DATACLASS_REGISTRY[choices["optimizer"]],)))
    if choices["lr_scheduler"] in LR_SCHEDULER_DATACLASS_REGISTRY:
        groups.append((cfg.lr_scheduler, (LR_SCHEDULER_DATACLASS_REGISTRY[choices["lr_scheduler"]],)))
    groups.append((cfg.checkpoint, (CheckpointConfig,)))
    given = {flag(name) for name in choices} | {"--data"}
    for section, configs in groups:
        for config in configs:
            for field in dataclasses.fields(config):
                option = flag(field.name)
                if field.name.startswith("_") or option in given or field.name not in section:
                    continue
                default = _default(field)
                if isinstance(default, str) and "${" in default:
                    continue  # another option's value (fairseq's interpolation)
                value = _plain(section[field.name])
                if value is None or _same(value, default):
                    continue
                given.add(option)
                words += [option] if isinstance(value, bool) else [option, _argument(value)]
    return " ".join(words)
