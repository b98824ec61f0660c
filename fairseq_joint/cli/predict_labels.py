"""Zero-shot label prediction with a trained ``gile_classifier``: texts in, ranked labels out.

Scores every label of ``--labels`` (any ``label<TAB>description`` file, including labels the model never
saw in training: their vectors are the mean word vectors of their descriptions, GILE Sec. 2.2) for each
input text (one per line, ``--input`` or stdin) and prints, per text, the ``--topk`` best labels with
their scores (the head's logit, minus γ for the training labels), tab-separated, or JSON lines with ``--json``. The
``linear`` head can only score its training labels and says so. With a pretrained sentence encoder (``--encoder
pretrained``) the texts and descriptions are embedded by it (the descriptions' embeddings cached beside the data).
γ (calibrated stacking: it lowers the training labels' scores so that new labels can compete) is the checkpoint's
unless ``--seen-score-offset`` gives one: the ``--seen-score-offset`` of training, else the γ calibrated on the
validation documents in training, else 0; one line on stderr says which. A multilingual model
(``--languages``) takes the texts' language, ``--lang``: one it was trained on; over a sentence encoder (every
language's) it reads texts of an unknown language too, scored without ``--lang`` with the mean of its languages'
classification units, while over per-language word encoders (WAN/HAN) ``--lang`` is required. It runs on a GPU when there is one (the
model, its sentence encoder and the label set), ``--cpu`` keeps it on the CPU. The same from Python, with the model
loaded once: :class:`fairseq_joint.hub.LabelPredictor` (docs/python.md), whose ranking this command prints.

Example::

    fairseq-joint-predict-labels --checkpoint ckpt/checkpoint_best.pt --labels labels.tsv \\
        --topk 5 < texts.txt
"""

import json
import sys
from typing import Optional, Sequence

from fairseq_joint.cli.common import console_script, fail, parser
from fairseq_joint.data.gile_files import read_label_file
from fairseq_joint.hub import OPTIONS, LabelPredictor
from fairseq_joint.text_files import read_stdin, read_text

PROG = "fairseq-joint-predict-labels"


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = parser(__doc__, prog=PROG)
    p.add_argument("--checkpoint", required=True, help="a gile_classifier checkpoint")
    p.add_argument("--labels", required=True, help="label<TAB>description file to rank (may hold unseen labels)")
    p.add_argument("--data", help="the preprocessed data directory (dict.txt, labels.train.txt); "
                   "default: the one recorded in the checkpoint")
    p.add_argument("--input", help="texts, one per line (default: stdin)")
    p.add_argument("--topk", type=int, default=5, help="labels printed per text")
    p.add_argument("--batch-size", type=int, default=64, help="texts scored at once")
    p.add_argument("--json", action="store_true", help="print JSON lines {text, labels: [[label, score], ...]} (the "
                   "text as given; the default TSV lines show a tab in it as a space)")
    p.add_argument("--seen-score-offset", type=float, default=None,
                   help="γ subtracted from the scores of the labels seen in training (calibrated stacking); "
                   "default: the checkpoint's (its training's --seen-score-offset, else the γ calibrated on "
                   "validation in training, else 0)")
    p.add_argument("--lang", help="the texts' language, for a multilingual model (one of its --languages; a model "
                   "over a sentence encoder without it scores with the mean of its languages' classification units)")
    p.add_argument("--pretrained-encoder", help="the sentence-transformers directory of a model trained with "
                   "--encoder pretrained, when it is no longer where training found it")
    p.add_argument("--label-file", help="where the --label-file training was given is now, if it moved")
    p.add_argument("--eval-label-file", help="where the --eval-label-file training was given is now, if it moved")
    p.add_argument("--cpu", action="store_true", help="predict on the CPU (default: the first CUDA GPU when there is "
                   "one, as fairseq's commands)")
    args = p.parse_args(argv)
    OPTIONS.check(topk=args.topk, batch_size=args.batch_size)  # LabelPredictor.predict's check, naming the options
    descriptions = read_label_file(args.labels)
    lines = read_text(args.input, "--input") if args.input else read_stdin()
    predictor = LabelPredictor.from_checkpoint(args.checkpoint, args.data, args.pretrained_encoder, command=PROG,
                                               label_file=args.label_file, eval_label_file=args.eval_label_file,
                                               device="cpu" if args.cpu else None)
    if predictor.device.type != "cpu":
        print(f"note: predicting on {predictor.device} (--cpu to stay on the CPU)", file=sys.stderr)
    lang = predictor.check_language(args.lang)
    if predictor.languages and lang is None:
        print(f"note: no --lang: each text is scored with the mean of the classification units of "
              f"{', '.join(predictor.languages)} (--lang L scores with L's own)", file=sys.stderr)
    label_set = predictor.label_set(descriptions, args.labels)
    texts = [t for t in lines if t.strip()]
    if not texts:  # nothing would be printed, without a word (refused after the checkpoint's own problems)
        raise fail(f"{'--input ' + args.input if args.input else 'stdin'} holds no text: give one text a line")
    if len(texts) != len(lines):
        print(f"note: skipped {len(lines) - len(texts)} empty input line(s)", file=sys.stderr)
    encoder = predictor.sentence_encoder
    cut = encoder.cut(texts) if encoder is not None else 0
    if cut:
        print(f"note: {encoder.cut_note(cut, len(texts))}", file=sys.stderr)
    gamma, origin = predictor.gamma(args.seen_score_offset, OPTIONS)
    print(f"note: γ = {gamma:g} is subtracted from the scores of the labels seen in training ({origin})",
          file=sys.stderr)
    for text, ranked in predictor.rank(texts, label_set, args.topk, lang, gamma, args.batch_size):
        pairs = [[r.label, round(r.score, 4)] for r in ranked]
        if args.json:
            print(json.dumps({"text": text, "labels": pairs}))
        else:
            # a tab inside the text would read as a column: a space here (--json keeps the text as it is)
            print(text.replace("\t", " ") + "\t" + "\t".join(f"{n} ({v:.3f})" for n, v in pairs))
    return 0


command = console_script(main, PROG)


if __name__ == "__main__":
    sys.exit(command())
