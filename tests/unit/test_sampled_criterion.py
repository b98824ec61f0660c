"""The sampled_cross_entropy criterion in process: validation on the exact full softmax, training on V', the
loss's normalizer (sentence_avg), ignore_prefix_size, and the options it refuses (tests/cli trains with it)."""

import pytest
import torch
import torch.nn.functional as F
from conftest import valid_batch

from fairseq_joint.criterions import sampled_cross_entropy
from fairseq_joint.criterions.sampled_cross_entropy import SampledCrossEntropyCriterion
from fairseq_joint.errors import Refusal


@pytest.fixture(scope="module")
def model_and_batch(tiny_bin):
    return valid_batch(tiny_bin)


def full_softmax_loss(model, sample, pad):
    logits, _ = model(**sample["net_input"])
    return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), sample["target"].view(-1), ignore_index=pad,
                           reduction="sum")


def test_validation_is_the_exact_full_softmax_and_training_samples(model_and_batch):
    task, model, sample = model_and_batch
    pad = task.tgt_dict.pad()
    crit = SampledCrossEntropyCriterion(task, False, 0.0, sample_rate=0.3)
    chunked = SampledCrossEntropyCriterion(task, False, 0.0, sample_rate=0.3, vocab_chunk_size=100)
    model.eval()
    with torch.no_grad():
        expected = full_softmax_loss(model, sample, pad)
        loss, _, log = crit(model, sample)
        torch.testing.assert_close(loss, expected)
        assert log["candidates"] == len(task.tgt_dict)
        torch.testing.assert_close(chunked(model, sample)[0], expected, rtol=1e-5, atol=1e-4)
    model.train()
    torch.manual_seed(0)
    loss, _, log = crit(model, sample)
    assert log["candidates"] == round(0.3 * len(task.tgt_dict))
    loss.backward()
    scored_rows = (model.decoder.output_projection.bias.grad != 0).sum().item()
    assert scored_rows == log["candidates"]  # every sampled row gets a gradient, no other row does
    model.zero_grad()


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_validation_of_a_large_vocabulary_is_in_chunks_by_default_and_its_loss_unchanged(model_and_batch, monkeypatch,
                                                                                       eps):
    """Without --vocab-chunk-size, validation of a vocabulary larger than VALIDATION_CHUNK rows (here made small)
    walks it in chunks, without the T x |V| logits of the output layer's forward: the loss and nll_loss of the plain
    path; training without sampling keeps the plain path."""
    task, model, sample = model_and_batch
    layer = model.decoder.output_projection
    crit = SampledCrossEntropyCriterion(task, False, eps, sample_rate=0.3)
    model.eval()
    with torch.no_grad():
        plain, _, plain_log = crit(model, sample)  # |V| below VALIDATION_CHUNK: in one piece
        monkeypatch.setattr(sampled_cross_entropy, "VALIDATION_CHUNK", 37)
        with monkeypatch.context() as no_logits:
            no_logits.setattr(type(layer), "forward", lambda *a, **k: pytest.fail("the T x |V| logits were built"))
            chunked, _, log = crit(model, sample)
    torch.testing.assert_close(chunked, plain, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(log["nll_loss"], plain_log["nll_loss"], rtol=1e-6, atol=1e-5)
    model.train()
    calls, forward = [], type(layer).forward
    with monkeypatch.context() as spy:
        spy.setattr(type(layer), "forward", lambda self, *a, **k: calls.append(1) or forward(self, *a, **k))
        SampledCrossEntropyCriterion(task, False, eps)(model, sample)
    assert len(calls) == 1  # training on the exact softmax: the plain path unless --vocab-chunk-size
    model.eval()


def test_more_negatives_than_the_vocabulary_holds_are_refused(model_and_batch):
    """A refusal of the data (the options' own: tests/unit/test_option_checks.py)."""
    with pytest.raises(Refusal, match=r"--num-samples 1000000 is larger than the \d+ samplable ids"):
        SampledCrossEntropyCriterion(model_and_batch[0], False, 0.0, num_samples=10 ** 6)


def test_sentence_avg_normalizes_by_sentences(model_and_batch):
    task, model, sample = model_and_batch
    model.eval()
    with torch.no_grad():
        loss_tok, size_tok, _ = SampledCrossEntropyCriterion(task, False, 0.0)(model, sample)
        loss_sent, size_sent, log = SampledCrossEntropyCriterion(task, True, 0.0)(model, sample)
    assert size_sent == 8 == log["nsentences"] and size_tok == sample["ntokens"] > 8
    torch.testing.assert_close(loss_sent, loss_tok)  # the summed loss is the same; only its normalizer changes


@pytest.mark.parametrize("chunk", [None, 50])
def test_ignore_prefix_size_drops_the_first_target_positions(model_and_batch, chunk):
    task, model, sample = model_and_batch
    pad = task.tgt_dict.pad()
    model.eval()
    with torch.no_grad():
        logits, _ = model(**sample["net_input"])
        target = sample["target"]
        expected = F.cross_entropy(logits[:, 2:].reshape(-1, logits.size(-1)).float(), target[:, 2:].reshape(-1),
                                   ignore_index=pad, reduction="sum")
        loss, _, _ = SampledCrossEntropyCriterion(task, False, 0.0, ignore_prefix_size=2, vocab_chunk_size=chunk)(
            model, sample)
        full, _, _ = SampledCrossEntropyCriterion(task, False, 0.0, vocab_chunk_size=chunk)(model, sample)
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-4)
    assert loss < full  # the first two tokens of every sentence are not scored


def test_a_chunk_as_large_as_the_vocabulary_is_said_not_hidden(model_and_batch, caplog):
    """--vocab-chunk-size >= |V| computes the same loss in one chunk (no memory saved): a logged warning says so."""
    task, model, sample = model_and_batch
    vocab = len(task.target_dictionary)
    with caplog.at_level("WARNING"):
        one = SampledCrossEntropyCriterion(task, False, 0.0, vocab_chunk_size=vocab)
    assert f"--vocab-chunk-size {vocab} >= |V| = {vocab}" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        SampledCrossEntropyCriterion(task, False, 0.0, vocab_chunk_size=vocab - 1)
    assert "vocab-chunk-size" not in caplog.text
    model.eval()
    with torch.no_grad():
        loss = one(model, sample)[0]
    assert loss.item() == pytest.approx(full_softmax_loss(model, sample, task.target_dictionary.pad()).item(), rel=1e-5)


PATHS = {  # criterion options and training mode of each path of compute_loss
    "full": (dict(), False),
    "chunked": (dict(vocab_chunk_size=37), False),
    "sampled": (dict(sample_rate=0.3), True),
    "sampled_logq": (dict(num_samples=40, logq_correction=True), True),
}


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("path", list(PATHS))
def test_reduce_false_gives_per_position_losses_that_sum_to_the_reduced_loss(model_and_batch, path, eps):
    """fairseq's compute_loss contract on every path: reduce=False returns one loss per target position (B·T x 1, zero
    at padding), whose sum is the reduced loss, nll_loss likewise; the gradients of the two agree."""
    task, model, sample = model_and_batch
    options, training = PATHS[path]
    crit = SampledCrossEntropyCriterion(task, False, eps, **options)
    model.train(training)
    target = sample["target"].reshape(-1)

    def loss_and_grads(reduce):
        model.zero_grad()
        torch.manual_seed(0)  # the same V' for both
        candidates = None
        net_output = model(**sample["net_input"], features_only=True)
        if training:
            candidates = crit.sampler.sample(sample["target"])
        loss, _, logged = crit.compute_loss(model, net_output, sample, reduce=reduce, candidates=candidates)
        loss.sum().backward()
        return loss, logged["nll_loss"], [p.grad.clone() for p in model.parameters() if p.grad is not None]

    loss, nll, grads = loss_and_grads(True)
    per_loss, per_nll, per_grads = loss_and_grads(False)
    assert loss.dim() == 0 and per_loss.shape == per_nll.shape == (target.numel(), 1)
    pad = target == task.tgt_dict.pad()
    assert pad.any() and per_loss[pad].eq(0).all() and per_nll[pad].eq(0).all()
    assert per_nll[~pad].gt(0).all()
    torch.testing.assert_close(per_loss.sum(), loss, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(per_nll.sum(), nll, rtol=1e-5, atol=1e-4)
    assert len(grads) == len(per_grads) > 0
    for g, h in zip(grads, per_grads):  # fp32 sums in another order: within 0.1% of the largest entry (or 1e-6)
        torch.testing.assert_close(h, g, rtol=1e-4, atol=1e-6 + 1e-3 * g.abs().max().item())
    model.zero_grad()


@pytest.mark.parametrize("reduce", [True, False])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_the_chunked_path_is_the_full_softmax_with_its_gradients(model_and_batch, eps, reduce):
    """Training without sampling: --vocab-chunk-size gives the plain path's loss, nll_loss and gradients (summed or
    per position), in chunks smaller than the vocabulary."""
    task, model, sample = model_and_batch
    from fairseq_joint.modules.chunked_softmax import token_chunk_size

    tokens = sample["target"].numel()
    assert 37 < len(task.tgt_dict) and token_chunk_size(tokens, len(task.tgt_dict), 37) < tokens  # several chunks
    model.train()

    def run(crit):
        model.zero_grad()
        loss, _, logged = crit.compute_loss(model, model(**sample["net_input"], features_only=True), sample,
                                            reduce=reduce)
        loss.sum().backward()
        return loss.detach(), logged["nll_loss"], {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    full = run(SampledCrossEntropyCriterion(task, False, eps))
    chunked = run(SampledCrossEntropyCriterion(task, False, eps, vocab_chunk_size=37))
    torch.testing.assert_close(chunked[0], full[0], rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(chunked[1], full[1], rtol=1e-5, atol=1e-4)
    assert chunked[2].keys() == full[2].keys()
    for name, g in full[2].items():  # fp32 sums in another order: within 0.1% of the largest entry (or 1e-6)
        torch.testing.assert_close(chunked[2][name], g, rtol=1e-4, atol=1e-6 + 1e-3 * g.abs().max().item(), msg=name)
    model.zero_grad()


def test_score_reference_reads_the_exact_chunked_softmax_not_the_logits(model_and_batch, monkeypatch):
    """fairseq-generate --score-reference (fairseq's SequenceScorer) of a plugin model: the same scores as fairseq's
    own over the B x T x |V| logits, without the output layer's forward; an ensemble too (fairseq averages
    probabilities), and --softmax-batch (fairseq's scoring in slices of tokens) changes nothing."""
    from fairseq.sequence_scorer import SequenceScorer

    from fairseq_joint import fairseq_patches

    task, model, sample = model_and_batch
    model.eval()
    layer = model.decoder.output_projection
    assert "exact_scores" in fairseq_patches.wrapped()
    fairseqs = fairseq_patches.original("exact_scores")
    for models, softmax_batch in (([model], None), ([model], 7), ([model, model], None)):
        scorer = SequenceScorer(task.tgt_dict, softmax_batch=softmax_batch)
        expected = fairseqs(scorer, models, dict(sample))
        monkeypatch.setattr(sampled_cross_entropy, "VALIDATION_CHUNK", 37)  # |V| in chunks
        with monkeypatch.context() as no_logits:
            no_logits.setattr(type(layer), "forward", lambda *a, **k: pytest.fail("the B x T x |V| logits were built"))
            scored = scorer.generate(models, dict(sample))
        for mine, theirs in zip(scored, expected):
            assert torch.equal(mine[0]["tokens"], theirs[0]["tokens"])
            torch.testing.assert_close(mine[0]["positional_scores"], theirs[0]["positional_scores"])
            torch.testing.assert_close(mine[0]["score"], theirs[0]["score"])
            torch.testing.assert_close(mine[0]["attention"], theirs[0]["attention"])
