"""Running a study's fairseq commands: each run's output logged beside its checkpoints after the command line that made
it, a finished run found again instead of run twice, and a checkpoint's evaluation cached while the checkpoint is the
same file. Used by the studies' drivers (examples/gile/gile_study.py, multilingual_study.py, cosine_prior.py,
examples/wmt17/nmt_study.py); not part of fairseq_joint.
"""

import json
import logging
import os
import subprocess
from typing import Callable, Dict, Optional

import fairseq_joint
from fairseq_joint.cli.common import fail
from fairseq_joint_studies import fairseq_log

#: fairseq's --user-dir for the runs of a study: the installed package, wherever the study runs from
USER_DIR = os.path.dirname(os.path.abspath(fairseq_joint.__file__))
study_logger = logging.getLogger("study")


def command_line(cmd):
    """The ``# command: ...`` line a run's log starts with (:func:`run_logged`, :func:`finished_log`)."""
    return "# command: " + " ".join(str(c) for c in cmd) + "\n"


def finished_log(cmd, log_path):
    """Minutes of a finished earlier run of exactly ``cmd`` logged at ``log_path``, else None."""
    if not os.path.isfile(log_path):
        return None
    with open(log_path) as f:
        text = f.read()
    seconds = fairseq_log.training_seconds(text)
    if not text.startswith(command_line(cmd)) or seconds is None or not fairseq_log.records(text, "valid"):
        return None
    return seconds / 60


def run_logged(cmd, log_path, env, append: bool = False, failure: Optional[Callable[[int], str]] = None) -> None:
    """Run ``cmd`` in the current directory (the user's: relative paths stay theirs), its output into ``log_path``
    after a ``# command:`` line (added to the end of the log with ``append``: a run continued). A non-zero exit
    status is refused with ``failure(status)`` (default: the program, its status and the log)."""
    study_logger.info("running: " + " ".join(map(str, cmd)))
    with open(log_path, "a" if append else "w", encoding="utf-8") as log:
        log.write(command_line(cmd))
        log.flush()
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        name = cmd[2] if cmd[1] == "-m" else os.path.basename(cmd[0])
        raise fail(failure(proc.returncode) if failure else
                   f"{name} failed with exit status {proc.returncode}; see its output in {log_path}")


def cached_evaluation(checkpoint: str, cache_path: str, evaluate: Callable[[], Dict[str, object]]):
    """``evaluate()``'s figures of ``checkpoint``, kept in ``cache_path`` (JSON) and reused while the checkpoint is
    the same file (name, modification time and size): a reused run is not scored again."""
    stamp = {"checkpoint": os.path.basename(checkpoint), "mtime": os.path.getmtime(checkpoint),
             "size": os.path.getsize(checkpoint)}
    if os.path.isfile(cache_path):
        with open(cache_path) as f:
            saved = json.load(f)
        if saved.get("stamp") == stamp:
            return saved["stats"]
    stats = evaluate()
    with open(cache_path, "w") as f:
        json.dump({"stamp": stamp, "stats": stats}, f)
    return stats
