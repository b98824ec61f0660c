"""A study's tables: several seeds' figures as mean ± std (:func:`aggregate`, :func:`cell`) and a table printed and
written with the figures behind it (:func:`write_report`, the tools' ``--markdown`` / ``--json``). Used by the studies'
drivers and analysis tools in examples/; not part of fairseq_joint.
"""

import json
from typing import Optional


def aggregate(runs):
    """One seed: its stats. Several: the mean of every metric, ``{metric}_std`` and the per-seed ``runs``."""
    import numpy as np

    if len(runs) == 1:
        return runs[0]
    out = {"runs": runs}
    for key in runs[0]:
        if key == "seed":
            continue
        values = [r[key] for r in runs if key in r]
        out[key] = float(np.mean(values))
        out[f"{key}_std"] = float(np.std(values, ddof=1))
    return out


def cell(stats, key):
    """A table cell of ``stats[key]`` (:func:`aggregate`'s): ``12.34``, ``12.34 ± 0.56`` over seeds, ``–`` if absent."""
    if key not in stats:
        return "–"
    return f"{stats[key]:.2f}" + (f" ± {stats[key + '_std']:.2f}" if key + "_std" in stats else "")


def write_report(table: str, markdown: Optional[str] = None, json_path: Optional[str] = None, data=None,
                 ensure_ascii: bool = True) -> None:
    """Print a (Markdown) table; write it to ``markdown`` and the figures behind it (``data``) to ``json_path``
    when those are given (the tools' ``--markdown`` / ``--json``)."""
    print(table)
    if markdown:
        with open(markdown, "w", encoding="utf-8") as f:
            f.write(table + "\n")
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, ensure_ascii=ensure_ascii)
