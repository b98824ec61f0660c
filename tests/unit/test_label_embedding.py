"""The Label Embedding Network loss (Sun et al. 2017) in process: each term of Eq. 14 by hand, the gradient
isolation of o2, the correct-prediction mask, the identity initialisation, the warm-up, V' = V, option errors
(tests/cli trains with it: full, compressed, sampled, resumed, pre-trained Eq. 17, export)."""

import math

import pytest
import torch
from conftest import training_args, valid_batch

from fairseq_joint.criterions.label_embedding_cross_entropy import LabelEmbeddingCrossEntropyCriterion
from fairseq_joint.errors import InputError, Refusal
from fairseq_joint.modules.label_embedding import LabelEmbedding, label_embedding_terms, soft_target_cross_entropy
from fairseq_joint.modules.sampling import Candidates


def softmax(row, t=1.0):
    m = max(row)
    ex = [math.exp((v - m) / t) for v in row]
    s = sum(ex)
    return [v / s for v in ex]


def by_hand(z1, z2, e, y, tau, alpha, p=1, two_sided=False):
    """Eq. 14 term by term with Python floats: lists of rows."""
    out = dict(hard1=0.0, soft1=0.0, hard2=0.0, hinge=0.0, emb=0.0, correct=0)
    for r in range(len(y)):
        p1, p2, pe, p2t = softmax(z1[r]), softmax(z2[r]), softmax(e[r]), softmax(z2[r], tau)
        out["hard1"] += -math.log(p1[y[r]])
        out["soft1"] += -sum(pe[j] * math.log(p1[j]) for j in range(len(p1)))
        out["hard2"] += -math.log(p2[y[r]])
        gap = abs(p2[y[r]] - alpha) if two_sided else max(0.0, p2[y[r]] - alpha)
        out["hinge"] += gap ** p
        if max(range(len(z2[r])), key=lambda j: z2[r][j]) == y[r]:
            out["correct"] += 1
            out["emb"] += -sum(p2t[j] * math.log(pe[j]) for j in range(len(pe)))
    return out


def compressed_by_hand(A, B, label):
    return [max(0.0, sum(A[label][k] * B[k][j] for k in range(len(B)))) for j in range(len(B[0]))]


@pytest.mark.parametrize("dim", [None, 3])
@pytest.mark.parametrize("p, two_sided", [(1, False), (2, False), (1, True)])
def test_each_term_of_eq14_equals_a_hand_computation(dim, p, two_sided):
    torch.manual_seed(0)
    m, y = 5, torch.tensor([0, 3, 3, 1])
    emb = LabelEmbedding(m, dim)
    with torch.no_grad():
        for param in emb.parameters():
            param.copy_(torch.randn_like(param))
    z1 = torch.randn(4, m, dtype=torch.float64)
    z2 = torch.randn(4, m, dtype=torch.float64) * 3
    z2[0, 0] = z2[1, 3] = 10.0  # rows 0 and 1: o2 right and confident (the hinge is active); row 3 wrong
    z2[3, 2] = 10.0
    e = emb(y)
    if dim is None:
        e_hand = [emb.weight[label].tolist() for label in y.tolist()]
    else:
        e_hand = [compressed_by_hand(emb.A.tolist(), emb.B.tolist(), label) for label in y.tolist()]
    torch.testing.assert_close(e.double(), torch.tensor(e_hand, dtype=torch.float64))
    tau, alpha = 2.0, 0.4
    got = label_embedding_terms(z1, z2, e, y, tau=tau, alpha=alpha, p=p, two_sided_hinge=two_sided)
    want = by_hand(z1.tolist(), z2.tolist(), e_hand, y.tolist(), tau, alpha, p, two_sided)
    assert want["hinge"] > 0 and 0 < want["correct"] < 4
    for key, value in want.items():
        assert got[key].item() == pytest.approx(value, rel=1e-5, abs=1e-6), key
    assert got["o1"].item() == pytest.approx(want["hard1"] + want["soft1"], rel=1e-6)
    assert got["o2"].item() == pytest.approx(want["hard2"] + want["hinge"] + want["emb"], rel=1e-5)
    weighted = label_embedding_terms(z1, None, e, y, hard_weight=0.25, soft_weight=0.75)
    assert weighted["o1"].item() == pytest.approx(0.25 * want["hard1"] + 0.75 * want["soft1"], rel=1e-6)


def test_fused_soft_target_cross_entropy_and_its_gradient():
    torch.manual_seed(0)
    z = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    q = torch.rand(4, 6, dtype=torch.float64)  # rows need not sum to 1
    loss = soft_target_cross_entropy(z, q)
    reference = -(q * torch.log_softmax(z, -1)).sum()
    torch.testing.assert_close(loss, reference)
    assert torch.autograd.gradcheck(lambda x: soft_target_cross_entropy(x, q), (z,))
    assert torch.autograd.gradcheck(lambda x: soft_target_cross_entropy(x, q, q.sum(-1)) * 3.0, (z,))


def naive_terms(z1, z2, e, y, tau, alpha, p, two_sided, hw=1.0, sw=1.0):
    """Eq. 14 with plain autograd ops (targets detached as in Figure 1b), the reference for the fused ops."""
    logp1, logp2 = torch.log_softmax(z1, -1), torch.log_softmax(z2, -1)
    e_prob, soft2 = torch.softmax(e, -1).detach(), torch.softmax(z2 / tau, -1).detach()
    o1 = hw * -logp1.gather(-1, y[:, None]).sum() + sw * -(e_prob * logp1).sum()
    p_y = logp2.gather(-1, y[:, None]).squeeze(-1).exp()
    gap = (p_y - alpha).abs() if two_sided else torch.relu(p_y - alpha)
    mask = z2.detach().argmax(-1).eq(y).to(e.dtype)
    emb = -(soft2 * torch.log_softmax(e, -1)).sum(-1) * mask
    return o1, -logp2.gather(-1, y[:, None]).sum() + gap.pow(p).sum() + emb.sum()


@pytest.mark.parametrize("p, two_sided, hw, sw", [(1, False, 1.0, 1.0), (2, False, 0.3, 0.7), (1, True, 1.0, 0.0)])
def test_fused_terms_have_the_gradients_of_plain_autograd(p, two_sided, hw, sw):
    torch.manual_seed(1)
    y = torch.tensor([0, 3, 3, 1, 2])
    z1, z2, e = (torch.randn(5, 6, dtype=torch.float64) * 2 for _ in range(3))
    z2[0, 0] = z2[1, 3] = 6.0  # two rows right and confident (hinge active), the rest mostly wrong
    z1, z2, e = (t.requires_grad_() for t in (z1, z2, e))
    got = label_embedding_terms(z1, z2, e, y, tau=2.0, alpha=0.4, p=p, two_sided_hinge=two_sided,
                                hard_weight=hw, soft_weight=sw)
    want = naive_terms(z1, z2, e, y, 2.0, 0.4, p, two_sided, hw, sw)
    for g, w in zip((got["o1"], got["o2"]), want):
        torch.testing.assert_close(g, w)
        grads_got = torch.autograd.grad(g, (z1, z2, e), allow_unused=True)
        grads_want = torch.autograd.grad(w, (z1, z2, e), allow_unused=True)
        for a, b in zip(grads_got, grads_want):
            if b is None or not b.abs().sum():
                assert a is None or not a.abs().sum()
            else:
                torch.testing.assert_close(a, b)


def test_identity_initialisation_and_compressed_size():
    emb = LabelEmbedding(7)
    assert torch.equal(emb.weight, torch.eye(7))
    assert torch.equal(emb(torch.tensor([2, 5])), torch.eye(7)[[2, 5]])
    small = LabelEmbedding(1000, 10)
    assert sum(x.numel() for x in small.parameters()) == 2 * 1000 * 10  # m·2h (Eq. 15) instead of m²
    emb.weight.data.mul_(3)
    emb.reset_parameters()
    assert torch.equal(emb.weight, torch.eye(7))


def test_a_frozen_embedding_has_no_parameters_and_the_same_values():
    for dim in (None, 4):
        emb = LabelEmbedding(9, dim)
        labels = torch.tensor([1, 8, 3])
        before = emb(labels, columns=torch.tensor([0, 2, 8]))
        emb.freeze_()
        assert list(emb.parameters()) == [] and len(list(emb.buffers())) == (1 if dim is None else 2)
        torch.testing.assert_close(emb(labels, columns=torch.tensor([0, 2, 8])), before)


def test_the_embedding_learns_only_from_tokens_o2_predicts_correctly():
    e = torch.zeros(3, 4, requires_grad=True)
    z2 = torch.tensor([[5.0, 0, 0, 0], [0, 5.0, 0, 0], [0, 0, 0, 5.0]])  # right, wrong, right
    y = torch.tensor([0, 2, 3])
    terms = label_embedding_terms(None, z2, e, y)
    terms["o2"].backward()
    assert e.grad[0].abs().sum() > 0 and e.grad[2].abs().sum() > 0
    assert torch.equal(e.grad[1], torch.zeros(4))
    assert int(terms["correct"]) == 2
    unmasked = label_embedding_terms(None, z2, e.detach(), y, mask_incorrect=False)
    assert float(unmasked["emb"]) > float(terms["emb"])


@pytest.fixture(scope="module")
def model_and_batch(tiny_bin):
    return valid_batch(tiny_bin)


def criterion(task, **kw):
    """The criterion as fairseq-train builds it for the fixture's model (dh = 16, its architecture's record)."""
    kw.setdefault("label_embedding_input_dim", 16)
    return LabelEmbeddingCrossEntropyCriterion(task, False, **kw)


def terms(crit, model, sample, candidates=None):
    """Eq. 14's terms and |V'| of the batch, the model run once for its decoder features."""
    return crit.compute_terms(model, model(**sample["net_input"], features_only=True), sample, candidates)[:2]


def grads(module):
    return {n: (p.grad.clone() if p.grad is not None else torch.zeros_like(p)) for n, p in module.named_parameters()}


@pytest.mark.parametrize("dim", [0, 8])
def test_o2_terms_never_reach_the_network_and_o1_terms_never_reach_o2(model_and_batch, dim):
    task, model, sample = model_and_batch
    crit = criterion(task, label_embedding_dim=dim)
    model.train()
    model.zero_grad()
    crit.zero_grad()
    terms(crit, model, sample)[0]["o2"].backward()
    assert all(torch.count_nonzero(g) == 0 for g in grads(model).values())
    assert all(torch.count_nonzero(g) > 0 for g in grads(crit.o2).values())
    model.zero_grad()
    crit.zero_grad()
    terms(crit, model, sample)[0]["o1"].backward()
    assert all(torch.count_nonzero(g) == 0 for g in grads(crit).values())  # o2 and the embedding
    assert torch.count_nonzero(model.decoder.output_projection.class_weight.grad) > 0
    assert torch.count_nonzero(model.decoder.embed_tokens.weight.grad) > 0
    model.zero_grad()


def test_warmup_delays_only_the_soft_term(model_and_batch):
    task, model, sample = model_and_batch
    crit = criterion(task, label_embedding_warmup_updates=5)
    model.train()
    model.set_num_updates(4)
    loss, _, log = crit(model, sample)
    assert float(loss) == pytest.approx(float(log["le_hard1"] + log["le_hard2"] + log["le_hinge"] + log["le_emb"]), rel=1e-6)
    model.set_num_updates(5)
    loss, _, log = crit(model, sample)
    total = log["le_hard1"] + log["le_soft1"] + log["le_hard2"] + log["le_hinge"] + log["le_emb"]
    assert float(loss) == pytest.approx(float(total), rel=1e-6)
    beta = criterion(task, label_embedding_beta=0.25)
    loss, _, log = beta(model, sample)
    o2 = log["le_hard2"] + log["le_hinge"] + log["le_emb"]
    assert float(loss) == pytest.approx(float(0.25 * log["le_hard1"] + 0.75 * log["le_soft1"] + o2), rel=1e-5)
    model.set_num_updates(0)


def test_sampled_terms_with_v_prime_equal_to_v_are_the_full_ones(model_and_batch):
    task, model, sample = model_and_batch
    crit = criterion(task, label_embedding_dim=8, sample_rate=0.3)
    model.eval()  # no dropout: both passes see the same features
    with torch.no_grad():
        full, n_full = terms(crit, model, sample)
        assert n_full == len(task.tgt_dict)
        y = sample["target"].reshape(-1)
        y = y[y.ne(task.tgt_dict.pad())]
        ids = torch.randperm(len(task.tgt_dict), generator=torch.Generator().manual_seed(3))
        lookup = torch.empty_like(ids)
        lookup[ids] = torch.arange(ids.numel())
        everything = Candidates(ids=ids, targets=lookup[y], num_positives=ids.numel())
        sampled, n = terms(crit, model, sample, candidates=everything)
    assert n == len(task.tgt_dict)
    for key in full:
        torch.testing.assert_close(sampled[key].double(), full[key].double(), rtol=1e-5, atol=1e-4)


def test_sampling_scores_and_updates_only_the_candidate_columns(model_and_batch):
    task, model, sample = model_and_batch
    crit = criterion(task, label_embedding_dim=8, sample_rate=0.2)
    targets = sample["target"][sample["target"].ne(task.tgt_dict.pad())]
    with torch.no_grad():  # o2 predicts the batch's most frequent target: those rows teach the embedding
        crit.o2.bias[targets.mode().values] = 100.0
    model.train()
    crit.zero_grad()
    torch.manual_seed(0)
    loss, _, log = crit(model, sample)
    assert log["candidates"] == round(0.2 * len(task.tgt_dict)) and log["le_correct"] > 0
    loss.backward()
    columns = torch.count_nonzero(crit.label_embedding.B.grad, dim=0).gt(0).sum().item()
    assert 0 < columns <= log["candidates"]
    rows = torch.count_nonzero(crit.o2.weight.grad, dim=1).gt(0).sum().item()
    assert 0 < rows <= log["candidates"]
    model.zero_grad()


def test_a_label_embedding_of_no_labels_is_refused():
    for dim in (None, 4):
        with pytest.raises(InputError, match="^the label embedding needs at least one label, got 0$"):
            LabelEmbedding(0, dim)


def test_a_checkpoint_it_cannot_read_is_refused(model_and_batch):
    """(Its options out of range or together: tests/unit/test_option_checks.py.)"""
    with pytest.raises(Refusal, match="^--label-embedding-from /nonexistent/checkpoint.pt: no such file: give "
                                       "the checkpoint_\\*.pt of a run "):
        criterion(model_and_batch[0], label_embedding_from="/nonexistent/checkpoint.pt")
    from fairseq_joint.criterions.label_embedding_cross_entropy import load_label_embedding
    from fairseq_joint.errors import CheckpointError

    # a checkpoint of another criterion (cross_entropy saves no criterion state)
    with pytest.raises(CheckpointError, match="^--label-embedding-from ck.pt: the checkpoint holds no label embedding "
                                              r"\(no criterion state label_embedding\.\*\); train one with --criterion "
                                              "label_embedding_cross_entropy first$"):
        load_label_embedding("ck.pt", state={"model": {}, "criterion": {}})


def test_it_has_only_the_options_it_serves(tiny_bin, capsys):
    """Label smoothing (H(e', z1') already softens the target, Eq. 13), the chunked softmax, the logq correction,
    accidental-hit removal and accuracy are sampled_cross_entropy's: this criterion has no such options, so
    fairseq-train refuses them as unknown arguments; those it has are sampled_cross_entropy's names."""
    from dataclasses import fields

    from fairseq_joint.criterions.label_embedding_cross_entropy import LabelEmbeddingCrossEntropyConfig
    from fairseq_joint.criterions.sampled_cross_entropy import SampledCrossEntropyConfig

    ours = {f.name for f in fields(LabelEmbeddingCrossEntropyConfig)}
    sampled = {f.name for f in fields(SampledCrossEntropyConfig)}
    assert sampled - ours == {"label_smoothing", "report_accuracy", "logq_correction", "remove_accidental_hits",
                              "vocab_chunk_size"}
    assert {"sampler", "sample_rate", "num_samples", "unigram_alpha", "ignore_prefix_size", "sentence_avg"} <= ours
    base = ["--criterion", "label_embedding_cross_entropy", "--output-layer", "joint"]
    args = training_args(tiny_bin, "joint_transformer_tiny", *base, "--sample-rate", 0.5, "--label-embedding-dim", 8)
    assert (args.sample_rate, args.label_embedding_dim) == (0.5, 8)
    for flag in (["--label-smoothing", "0.1"], ["--vocab-chunk-size", "100"], ["--logq-correction"],
                 ["--remove-accidental-hits"], ["--report-accuracy"]):
        with pytest.raises(SystemExit):
            training_args(tiny_bin, "joint_transformer_tiny", *base, *flag)
        assert f"unrecognized arguments: {' '.join(flag)}" in capsys.readouterr().err


def test_reduce_false_is_not_served_silently(model_and_batch):
    task, model, sample = model_and_batch
    with pytest.raises(NotImplementedError, match="summed over the tokens"):
        criterion(task)(model, sample, reduce=False)


def test_feature_size_mismatch_names_the_flag(model_and_batch):
    task, model, sample = model_and_batch
    crit = criterion(task, label_embedding_input_dim=7)
    with pytest.raises(InputError, match="set --label-embedding-input-dim"):
        crit(model, sample)


