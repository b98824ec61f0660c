"""Average the parameters of the last checkpoints of a run (fairseq's ``scripts/average_checkpoints.py``, which the
fairseq-fixed package does not ship and which cannot average the plugin's checkpoints).

    fairseq-joint-average-checkpoints --inputs ckpt --num-epoch-checkpoints 5 --output ckpt/averaged.pt
    fairseq-joint-average-checkpoints --inputs ckpt --num-update-checkpoints 5 --output ckpt/averaged.pt
    fairseq-joint-average-checkpoints --inputs ckpt/checkpoint9.pt ckpt/checkpoint10.pt --output ckpt/averaged.pt

Every floating-point tensor of the model, and of the criterion (the label-embedding loss's o2 and embedding), is the
mean of the inputs' (summed in float64, saved in the last input's dtype). Everything else is kept, and must be the same
in every input: the output layer's recorded settings, the fingerprints of the data's dictionaries, integer buffers.
fairseq's script failed on the first (not a tensor) and summed the second, which then named other data. The inputs
must be checkpoints of one model (its options and the criterion's the same: refused naming the option that differs).
The output is the last input with the averaged parameters (the last input's configuration, task state and optimizer
state; fairseq's script keeps the first's), saved as fairseq-train saves a checkpoint, with the checksums of the
averaged parameters: fairseq-generate, fairseq-interactive, fairseq-validate and the plugin's commands load it as any
other.
"""

import os
import re
from typing import Dict, List, Optional, Sequence

import torch

from fairseq_joint.cli.common import console_script, fail, parser, positive_int
from fairseq_joint.resume import MODEL_RESUME_STATE
from fairseq_joint.text_files import check_exists, check_new_output

PROG = "fairseq-joint-average-checkpoints"
#: the parts of a checkpoint dict whose floating-point tensors are averaged
AVERAGED = ("model", "criterion")
#: fairseq's names of the checkpoints saved at the end of epoch N and at update N (``--save-interval-updates``)
EPOCH_FILE, UPDATE_FILE = r"checkpoint(\d+)\.pt", r"checkpoint_\d+_(\d+)\.pt"


def last_checkpoints(directory: str, count: int, update_based: bool, upper_bound: Optional[int] = None) -> List[str]:
    """The ``count`` checkpoints of ``directory`` saved last, by epoch (``checkpointN.pt``) or by update
    (``checkpoint_E_N.pt``), none after ``upper_bound``; oldest first. Fewer than ``count`` is refused."""
    pattern = re.compile(UPDATE_FILE if update_based else EPOCH_FILE)
    found = sorted((int(m.group(1)), name) for name in os.listdir(directory) for m in [pattern.fullmatch(name)]
                   if m and (upper_bound is None or int(m.group(1)) <= upper_bound))
    if len(found) < count:
        which = "--num-update-checkpoints" if update_based else "--num-epoch-checkpoints"
        kind = "checkpoint_E_N.pt (--save-interval-updates)" if update_based else "checkpointN.pt"
        bound = f" up to {upper_bound}" if upper_bound is not None else ""
        fix = f"give {which} {len(found)} or fewer" if found else "give the checkpoints as --inputs"
        raise fail(f"{which} {count}: {directory} holds {len(found)} {kind} file(s){bound}: {fix}")
    return [os.path.join(directory, name) for _, name in found[-count:]]


def _averaged(value) -> bool:
    return torch.is_tensor(value) and value.is_floating_point()


def average_checkpoints(paths: Sequence[str]) -> Dict[str, object]:
    """The checkpoint dict of the average of ``paths`` (see the module's docstring), read one at a time."""
    from fairseq_joint.checkpoints import checksum
    from fairseq_joint.checks import checkpoint_cfg
    from fairseq_joint.errors import CheckpointError
    from fairseq_joint.loaders import load_checkpoint
    from fairseq_joint.resume import MODEL_GROUPS, changed_options

    def started(state, part):
        return {k: v.double() if _averaged(v) else v for k, v in (state.get(part) or {}).items()}

    sums: Dict[str, Dict[str, object]] = {}
    counts = dict.fromkeys(AVERAGED, 1)
    holder: Dict[str, Dict[str, object]] = {}  # the last state of each part read (its dtypes are the output's)
    first = first_cfg = last = None
    for path in paths:
        state = load_checkpoint(path)
        cfg = checkpoint_cfg(state)
        if first is None:
            first, first_cfg = path, cfg
            sums = {part: started(state, part) for part in AVERAGED}
            holder = {part: state.get(part) or {} for part in AVERAGED}
            last = state
            continue
        differ = [d.replace("(checkpoint: ", f"({os.path.basename(first)}: ")
                  for d in changed_options(first_cfg, cfg, MODEL_GROUPS)]
        if differ:
            raise CheckpointError(f"{path} is of another model than {first} ({', '.join(differ)}): average the "
                                  "checkpoints of one run")
        for part in AVERAGED:
            held, mine = state.get(part) or {}, sums[part]
            if part == "criterion" and not (held and mine):  # a frozen criterion of a run that spans the change that
                if held:  # saves its state (Eq. 17: the embedding is the same in each): those that hold it
                    sums[part], counts[part], holder[part] = started(state, part), 1, held
                continue
            counts[part], holder[part] = counts[part] + 1, held
            other = sorted(held.keys() ^ mine.keys())
            if other:
                raise CheckpointError(f"{path}'s {part} holds other entries than {first}'s ({other[0]}): average the "
                                      "checkpoints of one run")
            for key, value in held.items():
                if _averaged(mine[key]) and _averaged(value) and value.shape == mine[key].shape:
                    mine[key] += value.double()
                elif _averaged(mine[key]) or _averaged(value) or checksum(value) != checksum(mine[key]):
                    raise CheckpointError(f"{path}'s {part} entry {key} differs from {first}'s (it is not averaged, "
                                          "or its shape differs): average the checkpoints of one run, on one data")
        last = state
    for part in AVERAGED:
        if sums[part]:
            last[part] = {k: v.div_(counts[part]).to(holder[part][k].dtype) if _averaged(v) else v
                          for k, v in sums[part].items()}
    # what the last run held beside its weights for a resume (GILE's --finetune-label-refresh label vectors) is of its
    # own weights, not of the average's
    (last.get("extra_state") or {}).pop(MODEL_RESUME_STATE, None)
    return last


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = parser(__doc__.split("\n\n")[0], prog=PROG)
    p.add_argument("--inputs", nargs="+", required=True, metavar="PATH",
                   help="the checkpoints to average, or one directory with --num-epoch-checkpoints or "
                        "--num-update-checkpoints")
    p.add_argument("--output", required=True, help="the averaged checkpoint to write")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--num-epoch-checkpoints", type=positive_int, metavar="N",
                       help="average the last N checkpointE.pt files of the --inputs directory")
    which.add_argument("--num-update-checkpoints", type=positive_int, metavar="N",
                       help="average the last N checkpoint_E_U.pt files of the --inputs directory "
                            "(fairseq-train --save-interval-updates)")
    p.add_argument("--checkpoint-upper-bound", type=positive_int, metavar="N",
                   help="with --num-*-checkpoints: none after epoch (update) N")
    a = p.parse_args(argv)

    from fairseq import checkpoint_utils
    from omegaconf import OmegaConf

    import fairseq_joint  # noqa: F401  (the plugin's models, its checked loading and saving of checkpoints)
    from fairseq_joint.checkpoints import CHECKSUMS

    count = a.num_epoch_checkpoints or a.num_update_checkpoints
    if count:
        if len(a.inputs) != 1:
            raise fail(f"--num-{'epoch' if a.num_epoch_checkpoints else 'update'}-checkpoints takes one --inputs "
                       f"directory, got {len(a.inputs)} paths: give the directory, or the checkpoints alone")
        check_exists(a.inputs[0], "--inputs", "give the run's --save-dir", directory=True)
        paths = last_checkpoints(a.inputs[0], count, bool(a.num_update_checkpoints), a.checkpoint_upper_bound)
    elif a.checkpoint_upper_bound:
        raise fail("--checkpoint-upper-bound needs --num-epoch-checkpoints or --num-update-checkpoints")
    else:
        directory = next((path for path in a.inputs if os.path.isdir(path)), None)
        if directory:
            raise fail(f"--inputs {directory} is a directory: give --num-epoch-checkpoints N or "
                       "--num-update-checkpoints N with it, or the checkpoints themselves")
        paths = [check_exists(path, "--inputs", "give a checkpoint written by fairseq-train") for path in a.inputs]
    check_new_output(a.output, "--output", [("--inputs", path) for path in paths])
    if os.path.exists(a.output):  # a checkpoint of the run, say: not overwritten
        raise fail(f"--output {a.output} exists: give a new file, or delete it first")
    state = average_checkpoints(paths)
    state.pop(CHECKSUMS, None)  # the last input's: its parameters' (the checksums patch writes the average's)
    if OmegaConf.is_config(state.get("cfg")):  # as fairseq-train writes it (loading made it a DictConfig)
        state["cfg"] = OmegaConf.to_container(state["cfg"], resolve=True, enum_to_str=True)
    if os.path.dirname(a.output):
        os.makedirs(os.path.dirname(a.output), exist_ok=True)
    checkpoint_utils.torch_persistent_save(state, a.output)
    print(f"averaged {len(paths)} checkpoints ({', '.join(paths)}) into {a.output}")
    return 0


command = console_script(main, PROG)

if __name__ == "__main__":
    raise SystemExit(command())
