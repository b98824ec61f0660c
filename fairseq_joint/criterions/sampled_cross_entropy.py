"""``sampled_cross_entropy``: sampled softmax for every output layer, and the exact softmax in chunks.

Training scores only the candidate set V' of the update (every target id of the batch plus sampled
negatives, Pappas et al. 2018 Sec. 3.2): the decoder returns its features h and the output layer projects
and scores just the V' rows, so only they get gradients. Label smoothing is over V'. Validation always
uses the exact full softmax, so validation loss/perplexity are comparable across runs; with
``--vocab-chunk-size N`` the full softmax (training with ``--sample-rate 1`` and validation) is computed in
vocabulary chunks without the T x |V| logits (:mod:`fairseq_joint.modules.chunked_softmax`).
"""

import logging
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn.functional as F
from fairseq import metrics
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
    label_smoothed_nll_loss,
)
from fairseq.dataclass import ChoiceEnum

from fairseq_joint.criterions.decoder_features import decoder_features
from fairseq_joint.modules.chunked_softmax import check_chunk_size, chunked_cross_entropy
from fairseq_joint.modules.sampling import (
    IGNORED,
    SAMPLER_CHOICES,
    CandidateSampler,
    candidate_logits,
    sampling_requested,
)

logger = logging.getLogger(__name__)


@dataclass
class SampledCrossEntropyConfig(LabelSmoothedCrossEntropyCriterionConfig):
    sampler: ChoiceEnum(SAMPLER_CHOICES) = field(
        default="uniform",
        metadata={"help": "negative sampler: uniform (the paper's), unigram (dictionary counts^alpha), "
                          "log_uniform (Zipfian over frequency-sorted ids)"},
    )
    sample_rate: Optional[float] = field(
        default=None,
        metadata={"help": "|V'| as a fraction of |V| in (0, 1] (the paper: 0.5/0.25/0.05); 1 = exact full softmax"},
    )
    num_samples: Optional[int] = field(
        default=None, metadata={"help": "or a fixed number of sampled negatives per update"}
    )
    unigram_alpha: float = field(default=0.75, metadata={"help": "exponent of the unigram sampler's counts"})
    logq_correction: bool = field(
        default=False, metadata={"help": "subtract the log expected count of each candidate (sampled softmax proper)"}
    )
    remove_accidental_hits: bool = field(
        default=False,
        metadata={"help": "draw negatives from the whole vocabulary (TensorFlow's setting) and mask those equal "
                          "to a token's own target; default: negatives never duplicate positives"},
    )
    vocab_chunk_size: Optional[int] = field(
        default=None,
        metadata={"help": "compute the exact full softmax in chunks of this many vocabulary rows (bounded "
                          "memory); used for validation and for training without sampling"},
    )


def log_candidates(logging_outputs) -> None:
    """The mean |V'| per forward (``candidates``), also when fairseq has summed the workers' outputs."""
    n = sum(log.get("candidates_n", 0) for log in logging_outputs)
    if n:
        metrics.log_scalar("candidates", sum(log.get("candidates", 0) for log in logging_outputs) / n,
                           weight=0, round=0)


@register_criterion("sampled_cross_entropy", dataclass=SampledCrossEntropyConfig)
class SampledCrossEntropyCriterion(LabelSmoothedCrossEntropyCriterion):
    name = "sampled_cross_entropy"

    def __init__(self, task, sentence_avg, label_smoothing, ignore_prefix_size=0, report_accuracy=False,
                 sampler="uniform", sample_rate=None, num_samples=None, unigram_alpha=0.75,
                 logq_correction=False, remove_accidental_hits=False, vocab_chunk_size=None):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        if report_accuracy:
            raise ValueError(f"--report-accuracy is not supported by {self.name}; drop it")
        if vocab_chunk_size is not None:
            check_chunk_size(vocab_chunk_size)
            vocab = len(task.target_dictionary)
            if vocab_chunk_size >= vocab:
                logger.warning("--vocab-chunk-size %d >= |V| = %d: the exact softmax runs in one chunk, with the plain "
                               "path's memory (the loss is the same); use a smaller chunk to save memory",
                               vocab_chunk_size, vocab)
        sampling = sampling_requested(sample_rate, num_samples)
        if not sampling and (logq_correction or remove_accidental_hits):
            flag = "--logq-correction" if logq_correction else "--remove-accidental-hits"
            raise ValueError(f"{flag} needs sampling: add --sample-rate < 1 or --num-samples, or drop {flag}")
        if remove_accidental_hits and label_smoothing > 0:
            raise ValueError("--remove-accidental-hits cannot be combined with --label-smoothing (the masked "
                             "negatives would enter the smoothing term); drop one of them")
        self.vocab_chunk_size = vocab_chunk_size
        self.logq_correction = logq_correction
        self.remove_accidental_hits = remove_accidental_hits
        self.sampler = None
        if sampling:
            self.sampler = self.build_sampler(task, sampler, sample_rate, num_samples, unigram_alpha,
                                              exclude_positives=not remove_accidental_hits)

    @staticmethod
    def build_sampler(task, sampler, sample_rate, num_samples, unigram_alpha, exclude_positives=True):
        """The candidate sampler over the target dictionary: padding never scored; pad, bos and fairseq's filler
        symbols never drawn; unigram counts from the dictionary."""
        d = task.target_dictionary
        filler = [i for i, s in enumerate(d.symbols) if s.startswith("madeupword")]
        return CandidateSampler(
            len(d), sampler, sample_rate=sample_rate, num_samples=num_samples,
            counts=torch.tensor(d.count, dtype=torch.float64), alpha=unigram_alpha, ignore_ids=[d.pad()],
            never_sample=[d.pad(), d.bos()] + filler, exclude_positives=exclude_positives,
        )

    def forward(self, model, sample, reduce=True):
        features, target, layer = decoder_features(model, sample, self.name, self.ignore_prefix_size)
        num_candidates = layer.num_classes
        if model.training and self.sampler is not None:
            cands = self.sampler.sample(target)
            logits = candidate_logits(layer, features, cands, self.logq_correction, self.remove_accidental_hits)
            lprobs = F.log_softmax(logits.float(), dim=-1).view(-1, logits.size(-1))
            remapped = cands.targets.view(-1)
            scored = remapped != IGNORED  # padding is never scored
            loss, nll_loss = label_smoothed_nll_loss(lprobs[scored], remapped[scored], self.eps, reduce=reduce)
            num_candidates = cands.ids.numel()
        elif self.vocab_chunk_size:
            tgt = target.reshape(-1).masked_fill(target.reshape(-1) == self.padding_idx, IGNORED)
            loss, nll_loss = chunked_cross_entropy(layer, features, tgt, self.vocab_chunk_size,
                                                   ignore_index=IGNORED, label_smoothing=self.eps)
        else:
            lprobs = F.log_softmax(layer(features).float(), dim=-1).view(-1, layer.num_classes)
            loss, nll_loss = label_smoothed_nll_loss(lprobs, target.reshape(-1), self.eps,
                                                     ignore_index=self.padding_idx, reduce=reduce)
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        logging_output = {
            "loss": loss.data,
            "nll_loss": nll_loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": sample["target"].size(0),
            "sample_size": sample_size,
            "candidates": num_candidates,
            "candidates_n": 1,  # logging outputs of several workers are summed: |V'| is their sum / this
        }
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        log_candidates(logging_outputs)
