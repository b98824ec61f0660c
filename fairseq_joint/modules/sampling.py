"""Candidate sets for sampled softmax (Pappas et al. 2018, Sec. 3.2; Mikolov et al. 2013).

The candidate set V' of an update is every target id of the batch (the positives) plus negatives sampled
from the rest of the vocabulary; only V' is projected and scored. Samplers:

* ``uniform``: every non-special id equally likely (the paper's negative sampling);
* ``unigram``: ``count(v) ** alpha`` from the dictionary's counts (alpha = 0.75 as word2vec, 1 = unigram);
* ``log_uniform``: Zipfian over frequency-sorted ids, ``q(v) ∝ log((r+2)/(r+1))`` with r = v's rank
  (fairseq dictionaries are sorted by frequency after the special symbols), as TensorFlow's
  ``log_uniform_candidate_sampler``.

Negatives are drawn without replacement and, by default, never duplicate a positive. With
``exclude_positives=False`` they are drawn from the full distribution (TensorFlow's
``sampled_softmax_loss`` setting): a negative may then equal a positive, a row's own target (an *accidental hit*)
or another row's, whose class V' already holds as a positive column; :func:`candidate_logits` masks those with
``remove_accidental_hits=True``, so that each class counts once.

The logQ correction (Jean et al. 2015; TensorFlow's ``subtract_log_q``) subtracts from each candidate's logit the
log of its expected count in V' (:meth:`Candidates.log_expected_counts`): 0 for a positive, which V' always holds,
and for a negative its probability of being drawn, π(v) = 1 − (1 − q(v))^t with t the number of draws with
replacement that yield n distinct ids on average (Σ π = n; TensorFlow's estimate for its unique samplers), q being
the distribution the negatives were drawn from (positives excluded by default). Then the sum of exp over V' is an
(approximately: π is estimated) unbiased estimate of the full softmax's normaliser: each negative stands for 1/π(v)
classes. (n·q(v), the count of draws *with* replacement, overstates a frequent id's share: q = 0.29 of 4 draws is
1.15, π = 0.89.) Draws use torch's global RNG unless a generator is given: fairseq seeds it per update
(``seed + num_updates``), so the same ``--seed`` gives the same candidates, across a resume too.
"""

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

import torch
from torch import Tensor

from fairseq_joint.errors import InputError, OptionError
from fairseq_joint.options import check_choice

SAMPLER_CHOICES = ("uniform", "unigram", "log_uniform")
IGNORED = -100
ACCIDENTAL_HIT_LOGIT = -1e9


#: bisection steps of :func:`log_inclusion` over log t in [log n, log n + 64]: t to a relative 64 / 2^32 (t up to
#: n·e^64, what fp32 holds: a q so skewed that n distinct ids need more draws, 1e-30 beside 1, is beyond it)
INCLUSION_STEPS = 32


def log_inclusion(log_q: Tensor, n: Union[int, Tensor]) -> Tensor:
    """log π(v) of every id: the probability that ``n`` ids drawn without replacement in proportion to
    ``exp(log_q)`` (unnormalised; -inf: never drawn) include v, as TensorFlow estimates it for its unique samplers:
    π(v) = 1 − (1 − q(v))^t, t (the draws with replacement that yield n distinct ids on average) solving
    Σ π(v) = n, by a bisection of fixed length (no host synchronisation)."""
    q = torch.softmax(log_q, 0)
    log_miss = torch.log1p(-q)  # log(1 - q(v)), one draw missing v
    # (a count given as an int is filled on the device: a tensor made from it would be a copy from the host)
    count = n.to(q.dtype) if torch.is_tensor(n) else torch.full((), float(n), dtype=q.dtype, device=q.device)
    count = count.clamp(min=1)
    low = count.log()
    high = low + 64.0
    for _ in range(INCLUSION_STEPS):
        mid = (low + high) / 2
        over = -torch.expm1(mid.exp() * log_miss).sum() > count
        low, high = torch.where(over, low, mid), torch.where(over, mid, high)
    return torch.log(-torch.expm1(high.exp() * log_miss))


@dataclass
class Candidates:
    ids: Tensor  # (C,) class ids of V': all positives first, then negatives
    targets: Tensor  # input targets remapped to positions in ids (same shape); ignored positions -> -100
    num_positives: Union[int, Tensor]  # an int, or a 0-d tensor on the device when V' was drawn without a host sync
    #: () -> (|V|,) log q the negatives were drawn from (-inf: never), made only for the logQ correction; None: none
    #: drawn
    drawn_log_q: Optional[Callable[[], Tensor]] = None
    num_negatives: Union[int, Tensor] = 0  # n, as num_positives

    def log_expected_counts(self) -> Tensor:
        """(C,) the log expected count of each candidate in V' (the logQ correction; module docstring): 0 for the
        positives, log π(v) (:func:`log_inclusion`) for the negatives."""
        if self.drawn_log_q is None:
            return torch.zeros(self.ids.shape, device=self.ids.device)
        drawn = log_inclusion(self.drawn_log_q(), self.num_negatives)[self.ids].float()
        positive = torch.arange(self.ids.numel(), device=self.ids.device) < self.num_positives
        return torch.where(positive, torch.zeros_like(drawn), drawn)


def sampling_requested(sample_rate: Optional[float], num_samples: Optional[int]) -> bool:
    """Whether ``--sample-rate`` / ``--num-samples`` ask for sampling: a rate below 1 or a number of negatives (a
    rate of 1 is the exact full softmax). Their values are checked with the criteria's options
    (``CandidateSamplingConfig``)."""
    return num_samples is not None or (sample_rate is not None and sample_rate < 1.0)


class CandidateSampler:
    """Draws V' = positives ∪ negatives for one update (see module docstring).

    Args:
        num_classes: |V|.
        sampler: ``uniform`` | ``unigram`` | ``log_uniform``.
        sample_rate: |V'| as a fraction of |V| in (0, 1] (the paper's 50/25/5%): negatives fill V' up to
            ``round(rate · |V|)`` (none when the positives alone reach it).
        num_samples: or (exactly one of the two) a fixed number of negatives per update, at most the samplable ids.
        counts: per-id counts (``unigram``).
        alpha: exponent of the unigram counts.
        ignore_ids: target ids that are not scored (padding): remapped to -100.
        never_sample: ids never drawn as negatives (padding, bos, dictionary filler symbols).
        exclude_positives: negatives never duplicate positives (default); False = TensorFlow's setting.
    """

    def __init__(
        self,
        num_classes: int,
        sampler: str = "uniform",
        sample_rate: Optional[float] = None,
        num_samples: Optional[int] = None,
        counts: Optional[Tensor] = None,
        alpha: float = 1.0,
        ignore_ids: Sequence[int] = (),
        never_sample: Sequence[int] = (),
        exclude_positives: bool = True,
    ):
        check_choice("--sampler", sampler, SAMPLER_CHOICES)
        self.num_classes = num_classes
        self.never_sample = torch.tensor(sorted(set(never_sample)), dtype=torch.long)
        samplable = num_classes - len(self.never_sample)
        if num_samples is not None and num_samples > samplable:
            raise OptionError(f"--num-samples {num_samples} is larger than the {samplable} samplable ids of the "
                              f"vocabulary (|V| = {num_classes}); use at most {samplable}, or --sample-rate")
        self.sampler = sampler
        self.sample_rate = sample_rate
        self.num_samples = num_samples
        self.ignore_ids = torch.tensor(sorted(set(ignore_ids)), dtype=torch.long)
        self.exclude_positives = exclude_positives
        q = self._distribution(sampler, num_classes, counts, alpha)
        q[self.never_sample] = 0.0
        if q.sum() <= 0:
            raise InputError(f"the {sampler} sampler has no id to draw from (all counts are zero)")
        self.q = q / q.sum()  # the sampler's distribution over the vocabulary
        self.log_q_full = self.q.log()
        self._samplable = int((self.q > 0).sum())  # ids the sampler can draw, counted once
        self._on_device = {}  # device -> (ignore_ids, fp32 log q) there, copied once rather than every update

    def _device_tables(self, device: torch.device):
        """``(ignore_ids, log q in fp32)`` on ``device``, copied there on first use: a per-update host-to-device
        copy of |V| values would also be a synchronisation point on CUDA."""
        key = str(device)
        if key not in self._on_device:
            self._on_device[key] = (self.ignore_ids.to(device), self.log_q_full.to(device=device, dtype=torch.float32))
        return self._on_device[key]

    @staticmethod
    def _distribution(sampler: str, n: int, counts: Optional[Tensor], alpha: float) -> Tensor:
        if sampler == "uniform":
            return torch.ones(n, dtype=torch.float64)
        if sampler == "unigram":
            if counts is None or len(counts) != n:
                raise ValueError("the unigram sampler needs one count per vocabulary id (the dictionary's counts)")
            return torch.as_tensor(counts, dtype=torch.float64).clamp(min=0) ** alpha
        ranks = torch.arange(n, dtype=torch.float64)
        return torch.log((ranks + 2) / (ranks + 1)) / math.log(n + 1)

    def num_negatives(self, num_positives: int) -> int:
        if self.num_samples is not None:
            n = self.num_samples
        else:
            n = max(0, round(self.sample_rate * self.num_classes) - num_positives)
        available = self._samplable - (num_positives if self.exclude_positives else 0)
        return max(0, min(n, available))

    def fixed_size(self, num_targets: int) -> Optional[int]:
        """|V'| when it can be fixed in advance: a sample rate, negatives never duplicating positives, and room for
        every target token of the batch (so that no positive can be left out); None otherwise."""
        if self.sample_rate is None or not self.exclude_positives:
            return None
        size = min(round(self.sample_rate * self.num_classes), self._samplable)
        return size if size >= num_targets else None

    def sample(self, targets: Tensor, generator: Optional[torch.Generator] = None) -> Candidates:
        """V' for ``targets`` (any shape), on their device.

        With a sample rate whose |V'| = round(rate·|V|) can hold every target token, V' has that fixed size and is
        drawn without a host synchronisation: each id gets the key log q(v) + Gumbel noise, positives +inf, and the
        top |V'| keys are taken (Gumbel-top-k: sampling without replacement proportional to q, as
        ``torch.multinomial(q, n, replacement=False)``). Otherwise (a count of negatives, accidental hits, or fewer
        rows than target tokens) the positives are found with ``torch.unique`` (one synchronisation) and the
        negatives drawn with ``torch.multinomial``.
        """
        size = self.fixed_size(targets.numel())
        if size is not None:
            return self._sample_fixed(targets, size, generator)
        return self._sample_exact(targets, generator)

    def _sample_fixed(self, targets: Tensor, size: int, generator: Optional[torch.Generator]) -> Candidates:
        device = targets.device
        flat = targets.reshape(-1)
        ignore_ids, log_q = self._device_tables(device)
        valid = ~torch.isin(flat, ignore_ids)
        hits = torch.zeros(self.num_classes, device=device).scatter_add_(0, flat.clamp(min=0), valid.float())
        positive = hits > 0
        uniform = torch.rand(self.num_classes, device=device, generator=generator).clamp_(min=1e-20)
        keys = (log_q - torch.log(-torch.log(uniform))).masked_fill(positive, float("inf"))
        ids = torch.topk(keys, size, sorted=True).indices  # positives (+inf) first
        lookup = torch.full((self.num_classes,), IGNORED, dtype=torch.long, device=device)
        lookup[ids] = torch.arange(size, device=device)
        remapped = torch.where(valid, lookup[flat.clamp(min=0)], torch.full_like(flat, IGNORED)).view_as(targets)
        num_positives = positive.sum()
        return Candidates(ids=ids, targets=remapped, num_positives=num_positives,
                          drawn_log_q=lambda: log_q.masked_fill(positive, -math.inf),
                          num_negatives=size - num_positives)

    def _sample_exact(self, targets: Tensor, generator: Optional[torch.Generator]) -> Candidates:
        device = targets.device
        flat = targets.reshape(-1)
        valid = ~torch.isin(flat, self.ignore_ids.to(device))
        positives = torch.unique(flat[valid])
        weights = self.q.to(device=device, dtype=torch.float64 if device.type == "cpu" else torch.float32).clone()
        if self.exclude_positives:
            weights[positives] = 0.0
        n = self.num_negatives(positives.numel())
        if n > 0:
            negatives = torch.multinomial(weights, n, replacement=False, generator=generator)
        else:
            negatives = positives.new_empty(0)
        ids = torch.cat([positives, negatives])
        lookup = torch.full((self.num_classes,), IGNORED, dtype=torch.long, device=device)
        lookup[positives] = torch.arange(positives.numel(), device=device)
        remapped = torch.where(valid, lookup[flat.clamp(min=0)], torch.full_like(flat, IGNORED)).view_as(targets)
        return Candidates(ids=ids, targets=remapped, num_positives=positives.numel(),
                          drawn_log_q=weights.log if n > 0 else None, num_negatives=n)


def candidate_logits(
    output_layer,
    features: Tensor,
    candidates: Candidates,
    logq_correction: bool = False,
    remove_accidental_hits: bool = False,
) -> Tensor:
    """Logits over V' (``(..., C)``) through ``output_layer(features, ids=candidates.ids)``.

    ``logq_correction`` subtracts :meth:`Candidates.log_expected_counts`; ``remove_accidental_hits`` pushes the
    negatives that equal a positive (only possible with ``exclude_positives=False``: a row's own target, or another
    row's, whose class V' holds already) to ``ACCIDENTAL_HIT_LOGIT`` in every row (in fp32: a finite value, so that
    sums over the row stay finite, whose probability underflows to 0).
    """
    logits = output_layer(features, ids=candidates.ids)
    if logq_correction:
        logits = logits - candidates.log_expected_counts().to(logits.dtype)
    if remove_accidental_hits and candidates.ids.numel() > candidates.num_positives:
        positives = candidates.ids[:candidates.num_positives]
        hits = torch.isin(candidates.ids, positives)
        hits[:candidates.num_positives] = False
        if hits.any():
            logits = logits.float().masked_fill(hits, ACCIDENTAL_HIT_LOGIT)
    return logits
