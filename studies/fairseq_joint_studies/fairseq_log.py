"""The one reader of fairseq's log lines, for the studies' drivers (examples/) and the tests
(``from fairseq_joint_studies import fairseq_log``).

fairseq-train and fairseq-validate log their figures in two forms (``--log-format simple``, what they use without a
terminal)::

    ... | train_inner | epoch 001:      2 / 9 loss=10.1, ppl=1100.5, ..., num_updates=2, train_wall=0, wall=1
    ... | train | epoch 001 | loss 10.058 | ppl 1065.78 | ... | num_updates 3 | train_wall 0 | wall 2
    ... | valid | epoch 001 | valid on 'valid' subset | loss 9.9 | ppl 955.1 | ... | num_updates 3

and the checkpoints they save, load and the end of training as sentences: :func:`records` reads the first kind,
:func:`checkpoints` and :func:`training_seconds` the others.
"""

import re
from typing import Dict, List, Optional, Tuple

_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|-?inf|nan"
_FIGURE = re.compile(rf"(?:^|[|,\s])(\w+)[ =]({_NUMBER})(?=\s*(?:[|,]|$))")
_EPOCH = re.compile(r"\| epoch (\d+)")


def records(text: str, kind: str, subset: str = "valid") -> List[Dict[str, float]]:
    """The figures of every log line of one ``kind``, in order: ``train_inner`` (every ``--log-interval`` updates),
    ``train`` (the end of an epoch) or ``valid`` (a validation on ``subset``, from fairseq-train or
    fairseq-validate). Each is ``{name: value}`` with the ``epoch`` it was logged in (fairseq-validate's lines have
    none)."""
    if kind == "valid":
        marker = f"valid on '{subset}' subset"
    elif kind in ("train", "train_inner"):
        marker = f"| {kind} | epoch"
    else:
        raise ValueError(f"unknown kind of fairseq log line {kind!r}: train_inner, train or valid")
    out = []
    for line in text.splitlines():
        if marker not in line:
            continue
        figures = {name: float(value) for name, value in _FIGURE.findall(line.split(marker, 1)[1])}
        epoch = _EPOCH.search(line)
        if epoch:
            figures["epoch"] = float(epoch.group(1))
        out.append(figures)
    return out


def checkpoints(text: str, action: str = "Saved") -> List[Tuple[str, int, int]]:
    """``(path, epoch, updates)`` of every checkpoint the log says it ``Saved`` (or ``Loaded``), in order."""
    return [(path, int(epoch), int(updates)) for path, epoch, updates in
            re.findall(rf"{action} checkpoint (\S+) \(epoch (\d+) @ (\d+) updates", text)]


def training_seconds(text: str) -> Optional[float]:
    """The seconds of ``done training in N seconds`` (the run ended by itself), else None."""
    done = re.search(r"done training in ([\d.]+) seconds", text)
    return float(done.group(1)) if done else None
