"""Write a label file whose descriptions start with the words of the label's name.

GILE represents a label by the mean of its description's word vectors (Sec. 2.2). Structured label names
carry words the descriptions lack: in debtags, ``implemented-in::python`` is described as just "Python"
and ``devel::lang:python`` as "Python Development", and 21 descriptions are shared by two labels (e.g.
"Thai" for ``culture::thai`` and another facet's tag), so a joint head cannot tell those labels apart.
Prefixing the name's words ("implemented in python Python") makes every label text distinct.

Name words: the label name split at ``:``, ``-``, ``_``, ``/`` and ``.``; nothing is dropped from the
description. Use the output everywhere a label file goes (``fairseq-joint-preprocess-gile --labels``,
``fairseq-joint-word-vectors --labels``, ``fairseq-joint-predict-labels --labels``), so that training and
zero-shot prediction see the same label texts.

Example::

    fairseq-joint-label-text --labels data/debtags-sample/labels.tsv --output /tmp/labels.named.tsv
"""

import re
import sys
from typing import Optional, Sequence

from fairseq_joint.cli.common import console_script, parser
from fairseq_joint.data.gile_files import read_label_file
from fairseq_joint.text_files import check_new_output

PROG = "fairseq-joint-label-text"

NAME_SEPARATORS = re.compile(r"[:\-_/.]+")


def name_words(label: str) -> str:
    """'works-with-format::xml:rss' -> 'works with format xml rss'."""
    return " ".join(w for w in NAME_SEPARATORS.split(label) if w)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = parser(__doc__, prog=PROG)
    p.add_argument("--labels", required=True, help="label<TAB>description file")
    p.add_argument("--output", required=True, help="where to write the label<TAB>name words + description file")
    args = p.parse_args(argv)
    labels = read_label_file(args.labels)
    check_new_output(args.output, "--output", [("--labels", args.labels)])
    texts = {}
    for label, desc in labels.items():
        words = name_words(label)
        texts[label] = f"{words} {desc}" if words else desc
    with open(args.output, "w", encoding="utf-8") as f:
        f.writelines(f"{label}\t{text}\n" for label, text in texts.items())
    print(f"wrote {len(texts)} labels to {args.output}; descriptions shared by several labels: "
          f"{len(labels) - len(set(labels.values()))} before, {len(texts) - len(set(texts.values()))} after")
    return 0


command = console_script(main, PROG)


if __name__ == "__main__":
    sys.exit(command())
