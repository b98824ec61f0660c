#!/usr/bin/env python
"""Training throughput of multilingual GILE (GILE-MHAN, Eq. 16) against the monolingual models it replaces (issue #14's
target: an update of the en + L model within 1.2x the time of an update of the English model plus one of the L
model, i.e. training both languages jointly costs no more than 20% over training them apart).

A step is one update as ``fairseq-train`` makes it (``GileClassificationTask.train_step``: the criterion's forward +
backward per language batch, then an Adam step): "en alone" and "L alone" on one batch of their language, "en + L"
(MHAN-Both + GILE head) on one batch of each. Batches are the real binarized data of ``--data`` (``DATA/en``,
``DATA/L`` from ``fairseq-joint-preprocess-gile --lang``; default: the bundled English/Polish sample, binarized into
a temporary directory), taken in the training order and cycled. The harness runs one step of every case per round in
rotating order and reports the median step with its spread and the ratio.

    python benchmarks/bench_gile_multilingual.py [--data BIN --lang pl] [--json results.json] [--plot results.png]
    python benchmarks/bench_gile_multilingual.py --quick
"""

import os
import tempfile
from typing import Dict

import torch
from bench_harness import Timing, add_rounds, parse_args, parser, round_robin, rounds_note, spread_chart, target
from bench_harness import main as run_benchmark

from fairseq_joint.criterions.multilabel_classification import MultilabelClassificationCriterion
from fairseq_joint.models.gile_classifier import GileClassifier, GileClassifierConfig
from fairseq_joint.tasks.gile_classification import GileClassificationConfig, GileClassificationTask

TARGET_RATIO = 1.2
SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "debtags-multilingual-sample")


class Adam:
    """The optimizer side of fairseq's train_step: ``backward`` per language batch, one ``step`` per update."""

    def __init__(self, params, lr=2e-3):
        self.opt = torch.optim.Adam(params, lr=lr)

    def backward(self, loss):
        loss.backward()


def binarize_sample(dest: str, lang: str) -> None:
    from fairseq_joint.cli import preprocess_gile

    for language in ("en", lang):
        preprocess_gile.main(["--train", os.path.join(SAMPLE, language, "train.jsonl"), "--labels",
                              os.path.join(SAMPLE, "labels.tsv"), "--lang", language,
                              "--destdir", os.path.join(dest, language)])


def step_fn(languages: str, args):
    torch.manual_seed(args.seed)
    task = GileClassificationTask.setup_task(GileClassificationConfig(data=args.data, languages=languages,
                                                                      label_language="en"))
    cfg = GileClassifierConfig(encoder="han", head="gile", embed_dim=args.dim, encoder_dim=args.dim,
                               attention_dim=args.dim, joint_dim=str(args.joint_dim), share_encoder=True,
                               share_attention=True)
    model = GileClassifier.build_model(cfg, task)
    criterion = MultilabelClassificationCriterion(task)
    task.load_dataset("train", combine=True)  # as fairseq-train loads its training split: in pairs of languages
    batches = list(task.get_batch_iterator(task.dataset("train"), max_sentences=args.batch,
                                           seed=args.seed).next_epoch_itr(shuffle=False))[: args.batches]
    if "," in languages and not all("languages" in b for b in batches):  # else it times one language an update
        raise RuntimeError(f"--languages {languages}: the training batches are not one of every language (Eq. 16)")
    optimizer = Adam([p for p in model.parameters() if p.requires_grad])
    state = {"i": 0}

    def step() -> None:
        optimizer.opt.zero_grad(set_to_none=True)
        task.train_step(batches[state["i"] % len(batches)], model, criterion, optimizer, update_num=state["i"])
        optimizer.opt.step()
        state["i"] += 1

    return step


def run(args) -> Dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        if not args.data:
            args.data = tmp
            binarize_sample(tmp, args.lang)
        cases = {"en alone": step_fn("en", args), f"{args.lang} alone": step_fn(args.lang, args),
                 f"en + {args.lang}": step_fn(f"en,{args.lang}", args)}
        times = round_robin(cases, args.repeats, args.warmup, "GILE-MHAN update")
    rows = [{"case": case, **t.fields(), "step_ms": 1000 * t.median} for case, t in times.items()]
    mono = rows[0]["step_ms"] + rows[1]["step_ms"]
    ratio = rows[2]["step_ms"] / mono
    targets = [target(f"en + {args.lang} update / (en update + {args.lang} update)", ratio, TARGET_RATIO,
                      higher_is_better=False)]
    return {"results": rows, "ratio": ratio, "targets": targets}


def report(result: Dict[str, object]) -> None:
    cfg = result["config"]
    print(f"\nGILE-MHAN update (HAN d={cfg['dim']}, GILE d_j={cfg['joint_dim']}, batch {cfg['batch']} per language, "
          f"{cfg['threads']} threads, {rounds_note(cfg)})")
    for r in result["results"]:
        print(f"{r['case']:<14} step {Timing.of(r).show(1000, '.2f'):>26} ms")
    print(f"ratio en + L / (en + L apart): {result['ratio']:.3f}")


def plot(result: Dict[str, object], path: str) -> None:
    rows = result["results"]
    spread_chart(path, [r["case"] for r in rows], [Timing.of(r) for r in rows], lambda s: 1000 * s,
                 f"ms per update (median, min-max); multilingual / sum of monolingual = {result['ratio']:.2f}",
                 "GILE-MHAN: one update of en + L vs an update of each alone", figsize=(7, 2.8), title_size=10)


QUICK = dict(dim=16, joint_dim=32, batches=4, warmup=1, repeats=3)


def parse(argv=None):
    p = parser(__doc__)
    p.add_argument("--data", default="", help="DIR with DIR/en and DIR/LANG binarized by fairseq-joint-preprocess-gile "
                   "--lang (default: the bundled sample, binarized into a temporary directory)")
    p.add_argument("--lang", default="pl", help="the second language L")
    p.add_argument("--dim", type=int, default=100, help="d = dh = attention size (the study's)")
    p.add_argument("--joint-dim", type=int, default=200, help="d_j of the GILE head (the study's)")
    p.add_argument("--batch", type=int, default=32, help="documents per language batch (the study's)")
    p.add_argument("--batches", type=int, default=20, help="distinct batches cycled through")
    add_rounds(p, repeats=30, warmup=3)
    p.add_argument("--seed", type=int, default=1, help="random seed of the weights and the batch order")
    return parse_args(p, argv, QUICK, positive=("dim", "joint_dim", "batch", "batches", "repeats"))


if __name__ == "__main__":
    run_benchmark(parse(), run, report, plot)
