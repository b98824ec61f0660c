"""Zero-shot label prediction with a trained ``gile_classifier``: texts in, ranked labels out.

Scores every label of ``--labels`` (any ``label<TAB>description`` file, including labels the model never
saw in training: their vectors are the mean word vectors of their descriptions, GILE Sec. 2.2) for each
input text (one per line, ``--input`` or stdin) and prints, per text, the ``--topk`` best labels with
their scores (the head's logit), tab-separated, or JSON lines with ``--json``. The ``linear`` head can only
score its training labels and says so. With a pretrained sentence encoder (``--encoder pretrained``) the texts and
descriptions are embedded by it (the descriptions' embeddings cached beside the data); ``--seen-score-offset``
(default: the model's) lowers the training labels' scores (calibrated stacking). A multilingual model
(``--languages``) needs the texts' language, ``--lang``: one it was trained on.

Example::

    fairseq-joint-predict-labels --checkpoint ckpt/checkpoint_best.pt --labels labels.tsv \\
        --topk 5 < texts.txt
"""

import json
import sys
from typing import Optional, Sequence

import torch

from fairseq_joint.cli.common import fail, load_gile_model, parser, read_lines, run
from fairseq_joint.data.gile_files import read_label_file
from fairseq_joint.data.gile_text import tokenize

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
    p.add_argument("--json", action="store_true", help="print JSON lines {text, labels: [[label, score], ...]}")
    p.add_argument("--seen-score-offset", type=float, default=None,
                   help="γ subtracted from the scores of the labels seen in training (calibrated stacking); "
                   "default: the checkpoint's --seen-score-offset")
    p.add_argument("--lang", help="the texts' language, for a multilingual model (one of its --languages)")
    p.add_argument("--pretrained-encoder", help="the sentence-transformers directory of a model trained with "
                   "--encoder pretrained, when it is no longer where training found it")
    args = p.parse_args(argv)
    if args.topk < 1:
        raise fail(f"--topk must be >= 1, got {args.topk}")
    descriptions = read_label_file(args.labels)
    lines = read_lines(args.input, "--input") if args.input else sys.stdin.read().splitlines()
    model, task = load_gile_model(args.checkpoint, args.data, args.pretrained_encoder)
    if model.languages:
        try:
            model.check_language(args.lang)
        except ValueError as e:
            raise fail(f"--lang: {e}") from None
    elif args.lang is not None:
        raise fail(f"--lang {args.lang}: {args.checkpoint} is a monolingual model (no --languages): drop --lang")
    names = list(descriptions)
    label_set = task.encode_labels(names, descriptions, "predict-labels")
    gamma = task.seen_score_offset if args.seen_score_offset is None else args.seen_score_offset
    offset = (label_set.train_index >= 0).float() * float(gamma)
    if not model.scores_unseen_labels:
        unseen = [n for n, i in zip(names, label_set.train_index.tolist()) if i < 0]
        if unseen:
            raise fail(f"--head linear cannot score the {len(unseen)} label(s) of {args.labels} it never "
                       f"saw in training (e.g. {unseen[0]!r}): train a joint head (--head gile) for unseen labels")

    texts = [t for t in lines if t.strip()]
    if len(texts) != len(lines):
        print(f"note: skipped {len(lines) - len(texts)} empty input line(s)", file=sys.stderr)
    k = min(args.topk, len(names))
    d = task.corpus.dictionary_of(args.lang if model.languages else "")
    with torch.no_grad():
        for start in range(0, len(texts), args.batch_size):
            batch = texts[start:start + args.batch_size]
            scores = model.label_scores(text_vectors(model, batch, d, args.lang), label_set.tokens,
                                        label_set.train_index, names, lang=args.lang)
            scores = scores.float() - offset
            top = scores.topk(k, dim=-1)
            for text, vals, idx in zip(batch, top.values.tolist(), top.indices.tolist()):
                ranked = [[names[i], round(v, 4)] for v, i in zip(vals, idx)]
                if args.json:
                    print(json.dumps({"text": text, "labels": ranked}))
                else:
                    print(text + "\t" + "\t".join(f"{n} ({v:.3f})" for n, v in ranked))
    return 0


def text_vectors(model, texts, dictionary, lang=None):
    """h of raw texts: the pretrained encoder's embeddings, or the WAN/HAN encoder (``lang``'s) over the dictionary's
    ids."""
    from fairseq.data import data_utils

    encoder = model.sentence_encoder
    if encoder is not None:
        if not encoder.finetune:
            return model.embed_texts(texts)
        rows = [torch.LongTensor(ids) for ids in encoder.tokenize(texts)]
        return model(data_utils.collate_tokens(rows, encoder.pad_id, left_pad=False), lang=lang)
    rows = [torch.LongTensor([dictionary.index(w) for w in tokenize(t)] or [dictionary.unk()]) for t in texts]
    return model(data_utils.collate_tokens(rows, dictionary.pad(), left_pad=False), lang=lang)


def command() -> int:
    """The ``fairseq-joint-predict-labels`` console script."""
    return run(main)


if __name__ == "__main__":
    sys.exit(command())
