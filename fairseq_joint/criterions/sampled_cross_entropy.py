"""``sampled_cross_entropy``: sampled softmax for every output layer, and the exact softmax in chunks.

Training scores only the candidate set V' of the update (every target id of the batch plus sampled
negatives, Pappas et al. 2018 Sec. 3.2): the decoder returns its features h and the output layer projects
and scores just the V' rows, so only they get gradients. Label smoothing is over V'. Validation always
uses the exact full softmax, so validation loss/perplexity are comparable across runs; with
``--vocab-chunk-size N`` the full softmax (training with ``--sample-rate 1`` and validation) is computed in
vocabulary chunks without the T x |V| logits (:mod:`fairseq_joint.modules.chunked_softmax`), and without it so is
validation where |V| is above :data:`VALIDATION_CHUNK` (the same loss, in the memory of N · 8192 logits).

The criterion has fairseq's structure (``label_smoothed_cross_entropy``): ``forward`` runs the model and calls
``compute_loss(model, net_output, sample, reduce)``, which returns the summed loss or, with ``reduce=False``, the
loss of every target position (B·T x 1, zero at padding, as fairseq's ``label_smoothed_nll_loss``) on every path:
the full softmax, V', and the exact softmax in chunks (per position: the full softmax in blocks of tokens whose
logits are recomputed in backward, so that memory stays at N · chunk logits).
"""

import logging
from dataclasses import dataclass, field
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq import metrics
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
    label_smoothed_nll_loss,
)
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from fairseq_joint.criterions.decoder_features import (
    DecoderFeaturesCriterion,
    check_translation_model,
    features_and_target,
    output_layer_of,
)
from fairseq_joint.errors import InputError, OptionError
from fairseq_joint.modules.chunked_softmax import chunked_cross_entropy, exact_target_log_probs, token_chunk_size
from fairseq_joint.modules.output_layers import OutputLayer
from fairseq_joint.modules.sampling import (
    IGNORED,
    SAMPLER_CHOICES,
    Candidates,
    CandidateSampler,
    candidate_logits,
    sampling_requested,
)
from fairseq_joint.options import FRACTION, NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE_INT

logger = logging.getLogger(__name__)

#: the vocabulary rows of a chunk of the exact softmax at validation without --vocab-chunk-size, where |V| is larger
VALIDATION_CHUNK = 8192


@dataclass
class CandidateSamplingConfig(FairseqDataclass):
    """The options of the candidate set V' (the sampled softmax), shared by the criteria that sample it."""

    sampler: ChoiceEnum(SAMPLER_CHOICES) = field(
        default="uniform",
        metadata={"help": "negative sampler: uniform (the paper's), unigram (dictionary counts^alpha), "
                          "log_uniform (Zipfian over frequency-sorted ids)"},
    )
    sample_rate: Optional[float] = field(
        default=None,
        metadata={"help": "|V'| as a fraction of |V| in (0, 1] (the paper: 0.5/0.25/0.05); 1 = exact full softmax",
                  "range": FRACTION},
    )
    num_samples: Optional[int] = field(
        default=None, metadata={"help": "or a fixed number of sampled negatives per update", "range": NON_NEGATIVE_INT}
    )
    unigram_alpha: float = field(default=0.75, metadata={"help": "exponent of the unigram sampler's counts",
                                                         "range": NON_NEGATIVE})

    @staticmethod
    def validate(cfg) -> None:
        c, unset = cfg.criterion, CandidateSamplingConfig()
        if c.sample_rate is not None and c.num_samples is not None:
            raise OptionError("--sample-rate and --num-samples: give either --sample-rate or --num-samples, not both")
        # how negatives are drawn, given where none are (ignored without a word before)
        drawn = [option for option, given in (("--sampler", str(c.sampler) != unset.sampler),
                                              ("--unigram-alpha", c.unigram_alpha != unset.unigram_alpha)) if given]
        if drawn and not sampling_requested(c.sample_rate, c.num_samples):
            raise OptionError(f"{' and '.join(drawn)} choose how negatives are drawn, and none are: add --sample-rate "
                              f"< 1 or --num-samples, or drop {' and '.join(drawn)}")
        if c.unigram_alpha != unset.unigram_alpha and str(c.sampler) != "unigram":
            raise OptionError(f"--unigram-alpha {c.unigram_alpha} is the exponent of --sampler unigram's counts, not "
                              f"--sampler {c.sampler}'s: add --sampler unigram, or drop --unigram-alpha")


@dataclass
class SampledCrossEntropyConfig(LabelSmoothedCrossEntropyCriterionConfig, CandidateSamplingConfig):
    logq_correction: bool = field(
        default=False, metadata={"help": "subtract the log expected count of each candidate in V' (0 for a positive, "
                                 "its probability of being drawn for a negative: sampled softmax proper)"}
    )
    remove_accidental_hits: bool = field(
        default=False,
        metadata={"help": "draw negatives from the whole vocabulary (TensorFlow's setting) and mask those equal "
                          "to a positive (a token's own target, or another's, which V' holds already); default: "
                          "negatives never duplicate positives"},
    )
    vocab_chunk_size: Optional[int] = field(
        default=None,
        metadata={"help": "compute the exact full softmax in chunks of this many vocabulary rows (bounded "
                          "memory); used for validation and for training without sampling; default: training "
                          f"without sampling in one piece, validation in chunks of {VALIDATION_CHUNK} rows where |V| "
                          "is larger (the same loss, without the T x |V| logits)", "range": POSITIVE_INT},
    )

    @staticmethod
    def validate(cfg) -> None:
        check_translation_model(cfg)
        c = cfg.criterion
        if c.report_accuracy:
            raise OptionError("--report-accuracy is not supported by sampled_cross_entropy; drop it")
        if not sampling_requested(c.sample_rate, c.num_samples) and (c.logq_correction or c.remove_accidental_hits):
            option = "--logq-correction" if c.logq_correction else "--remove-accidental-hits"
            raise OptionError(f"{option} needs sampling: add --sample-rate < 1 or --num-samples, or drop {option}")
        if c.remove_accidental_hits and c.label_smoothing > 0:
            raise OptionError("--remove-accidental-hits cannot be combined with --label-smoothing: drop one of them")


def log_candidates(logging_outputs) -> None:
    """The mean |V'| per forward (``candidates``), also when fairseq has summed the workers' outputs."""
    n = sum(log.get("candidates_n", 0) for log in logging_outputs)
    if n:
        metrics.log_scalar("candidates", sum(log.get("candidates", 0) for log in logging_outputs) / n,
                           weight=0, round=0)


def target_dictionary_sampler(task, sampler, sample_rate, num_samples, unigram_alpha,
                              exclude_positives=True) -> CandidateSampler:
    """The candidate sampler over the target dictionary: padding never scored; pad, bos and fairseq's filler
    symbols never drawn; unigram counts from the dictionary, refused when its words have none (the sampler would
    draw only the special symbols, and the loss with --logq-correction be NaN)."""
    d = task.target_dictionary
    if sampler == "unigram" and not any(d.count[d.nspecial:]):
        raise InputError("--sampler unigram draws words by their counts in the target dictionary, where every word's "
                         "count is 0 (fairseq-preprocess --srcdict/--tgtdict of such a file?): binarize with a "
                         "dictionary that counts the training words, or use --sampler uniform or log_uniform")
    filler = [i for i, s in enumerate(d.symbols) if s.startswith("madeupword")]
    return CandidateSampler(
        len(d), sampler, sample_rate=sample_rate, num_samples=num_samples,
        counts=torch.tensor(d.count, dtype=torch.float64), alpha=unigram_alpha, ignore_ids=[d.pad()],
        never_sample=[d.pad(), d.bos()] + filler, exclude_positives=exclude_positives,
    )


def exact_token_losses(layer: OutputLayer, features: Tensor, target: Tensor, chunk_size: int, epsilon: float,
                       padding_idx: int) -> Tuple[Tensor, Tensor]:
    """fairseq's label-smoothed loss and nll of every position (``features`` N x dh against ``target`` (N,); N x 1,
    zero at ``padding_idx``) over the full softmax, with the memory of ``chunk_size`` vocabulary rows: the class side
    g_out(X) is projected once and the tokens are walked in blocks whose logits (at most N x ``chunk_size`` numbers)
    are recomputed in backward (``torch.utils.checkpoint``)."""
    block = token_chunk_size(target.numel(), layer.num_classes, chunk_size)
    context = layer.encode_context(features)
    classes, bias = layer.class_side()

    def block_losses(context: Tensor, classes: Tensor, bias: Optional[Tensor], target: Tensor):
        lprobs = F.log_softmax(F.linear(context, classes, bias).float(), dim=-1)
        return label_smoothed_nll_loss(lprobs, target, epsilon, ignore_index=padding_idx, reduce=False)

    blocks = [checkpoint(block_losses, context[start:start + block], classes, bias, target[start:start + block],
                         use_reentrant=False) for start in range(0, target.numel(), block)]
    return torch.cat([loss for loss, _ in blocks]), torch.cat([nll for _, nll in blocks])


class ExactTargetScores:
    """A plugin translation model as fairseq's ``SequenceScorer`` (``fairseq-generate --score-reference``) reads one,
    scoring ``sample``'s targets through the forward pass of the exact softmax in chunks of :data:`VALIDATION_CHUNK`
    rows where |V| is larger (``chunked_softmax.exact_target_log_probs``: the fused kernels on a GPU, as validation's
    loss) instead of the B x T x |V| logits: its output is each target's
    log-probability (B x T x 1, beside the decoder's attention), and ``get_normalized_probs`` returns it broadcast
    over the vocabulary (a view of no memory) for the scorer to gather each target's from."""

    def __init__(self, model, sample, padding_idx: int):
        self.model, self.layer = model, model.decoder.output_projection
        self.target, self.padding_idx = sample["target"], padding_idx

    def eval(self):
        self.model.eval()
        return self

    def __call__(self, **net_input):
        features, extra = self.model(**net_input, features_only=True)
        scores = exact_target_log_probs(self.layer, features, self.target, min(VALIDATION_CHUNK, self.layer.num_classes))
        return scores.unsqueeze(-1), extra

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        scores = net_output[0] if log_probs else net_output[0].exp()
        return scores.expand(*scores.shape[:-1], self.layer.num_classes)


def exact_scores(original, scorer, models, sample, **kwargs):
    """The ``exact_scores`` change of ``fairseq_joint.fairseq_patches``: fairseq's ``SequenceScorer.generate``
    (``original``) of the plugin's translation models reads each target's log-probability from the exact softmax in
    chunks (:class:`ExactTargetScores`), as validation scores them, instead of the B x T x |V| logits; other models
    (an ensemble with any) as fairseq scores them."""
    from fairseq_joint.models.output_layer_model import OutputLayerModelMixin

    if not all(isinstance(model, OutputLayerModelMixin) for model in models):
        return original(scorer, models, sample, **kwargs)
    return original(scorer, [ExactTargetScores(model, sample, scorer.pad) for model in models], sample, **kwargs)


def per_position(values: Tensor, scored: Tensor) -> Tensor:
    """Losses of the ``scored`` positions (``values``, one each) as a column over all positions, 0 elsewhere."""
    return values.new_zeros(scored.numel(), 1).masked_scatter(scored.unsqueeze(-1), values.reshape(-1, 1))


@register_criterion("sampled_cross_entropy", dataclass=SampledCrossEntropyConfig)
class SampledCrossEntropyCriterion(DecoderFeaturesCriterion, LabelSmoothedCrossEntropyCriterion):
    name = "sampled_cross_entropy"

    def __init__(self, task, sentence_avg, label_smoothing, ignore_prefix_size=0, report_accuracy=False,
                 sampler="uniform", sample_rate=None, num_samples=None, unigram_alpha=0.75,
                 logq_correction=False, remove_accidental_hits=False, vocab_chunk_size=None):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        vocab = len(task.target_dictionary)
        if vocab_chunk_size is not None and vocab_chunk_size >= vocab:
            logger.warning("--vocab-chunk-size %d >= |V| = %d: the exact softmax runs in one chunk, with the plain "
                           "path's memory (the loss is the same); use a smaller chunk to save memory",
                           vocab_chunk_size, vocab)
        self.vocab_chunk_size = vocab_chunk_size
        self.logq_correction = logq_correction
        self.remove_accidental_hits = remove_accidental_hits
        self.sampler = None
        if sampling_requested(sample_rate, num_samples):
            self.sampler = target_dictionary_sampler(task, sampler, sample_rate, num_samples, unigram_alpha,
                                                     exclude_positives=not remove_accidental_hits)

    def compute_loss(self, model, net_output, sample, reduce=True, candidates: Optional[Candidates] = None):
        """``(loss, sample_size, logged)`` of the decoder features ``net_output`` (the model's output with
        ``features_only=True``) against the targets: over the candidate set V' (``candidates``, by default drawn by the
        sampler in training), else the exact softmax over V (in chunks with ``--vocab-chunk-size``). The loss and
        fairseq's ``nll_loss`` (logged) are summed, or per target position with ``reduce=False`` (see the module
        docstring); ``candidates`` logs |V'|."""
        layer = output_layer_of(model)
        features, target = features_and_target(model, net_output, sample, self.ignore_prefix_size)
        if candidates is None and model.training and self.sampler is not None:
            candidates = self.sampler.sample(target)
        if candidates is not None:
            loss, nll_loss = self.sampled_loss(layer, features, candidates, reduce)
        else:
            loss, nll_loss = self.exact_softmax_loss(layer, features.reshape(-1, features.size(-1)),
                                                     target.reshape(-1), reduce)
        logged = {"nll_loss": nll_loss.data, "candidates_n": 1,  # workers' outputs are summed: |V'| = their sum / n
                  "candidates": layer.num_classes if candidates is None else candidates.ids.numel()}
        return loss, self.sample_size(sample), logged

    def exact_softmax_loss(self, layer: OutputLayer, features: Tensor, target: Tensor,
                           reduce: bool) -> Tuple[Tensor, Tensor]:
        """fairseq's label-smoothed loss over the full softmax of ``features`` (N x dh) against ``target`` (N,): in
        chunks of ``--vocab-chunk-size`` vocabulary rows, else at validation (``layer`` in eval mode) in chunks of
        :data:`VALIDATION_CHUNK` rows where |V| is larger, else in one piece."""
        chunk = self.vocab_chunk_size or (VALIDATION_CHUNK if not layer.training and layer.num_classes > VALIDATION_CHUNK
                                          else None)
        if chunk is None:
            return self.exact_loss(layer, features, target, reduce)
        if not reduce:
            return exact_token_losses(layer, features, target, chunk, self.eps, self.padding_idx)
        tgt = target.masked_fill(target == self.padding_idx, IGNORED)
        return chunked_cross_entropy(layer, features, tgt, chunk, ignore_index=IGNORED, label_smoothing=self.eps)

    def sampled_loss(self, layer: OutputLayer, features: Tensor, candidates: Candidates,
                     reduce: bool) -> Tuple[Tensor, Tensor]:
        """fairseq's label-smoothed loss over V' (Sec. 3.2): the scored rows only; padding is never scored."""
        logits = candidate_logits(layer, features, candidates, self.logq_correction, self.remove_accidental_hits)
        lprobs = F.log_softmax(logits.float(), dim=-1).view(-1, logits.size(-1))
        remapped = candidates.targets.view(-1)
        scored = remapped != IGNORED
        loss, nll_loss = label_smoothed_nll_loss(lprobs[scored], remapped[scored], self.eps, reduce=reduce)
        if reduce:
            return loss, nll_loss
        return per_position(loss, scored), per_position(nll_loss, scored)

    def exact_loss(self, layer: OutputLayer, features: Tensor, target: Tensor, reduce: bool) -> Tuple[Tensor, Tensor]:
        """fairseq's label-smoothed loss over the full softmax of ``features`` (N x dh) against ``target`` (N,)."""
        lprobs = F.log_softmax(layer(features).float(), dim=-1).view(-1, layer.num_classes)
        return label_smoothed_nll_loss(lprobs, target, self.eps, ignore_index=self.padding_idx, reduce=reduce)

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        log_candidates(logging_outputs)
