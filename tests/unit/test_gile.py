"""Unit tests of the GILE math: heads (Eqs. 3, 5, 6a/6b, 14, 18, 19), label vectors, losses (Eqs. 15, 17,
Kurata's), label sampling, metrics against scikit-learn and hand computations, Kurata's init."""

import unicodedata
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fairseq.data import Dictionary
from sklearn.metrics import f1_score, label_ranking_average_precision_score, label_ranking_loss

from fairseq_joint import metrics
from fairseq_joint.criterions.multilabel_classification import (
    MultilabelClassificationCriterion,
    classification_loss,
    sample_label_candidates,
)
from fairseq_joint.data.gile_files import read_label_file
from fairseq_joint.errors import InputError, MissingFileError
from fairseq_joint.metrics import micro_f1, ranking_metric_sums, summarize
from fairseq_joint.models.gile_classifier import (
    GileClassifier,
    GileClassifierConfig,
    GileModelInputs,
    equal_capacity_joint_dim,
    pretrained_sentence_encoder,
)
from fairseq_joint.modules.cooccurrence_init import cooccurrence_init_, label_patterns, normalized_init_bound
from fairseq_joint.modules.text_encoders import HierarchicalAttentionEncoder, WordAttentionEncoder
from fairseq_joint_studies.study_metrics import chance_level, split_scores

PAD = 1


def head(name, num_labels=7, d=5, dh=6, joint_dim="4", activation="relu"):
    cfg = GileClassifierConfig(head=name, embed_dim=d, encoder_dim=dh, joint_dim=joint_dim, joint_activation=activation)
    torch.manual_seed(0)
    layer = GileClassifier.build_head(cfg, num_labels)
    with torch.no_grad():  # non-zero biases so the formulas are tested with them
        for n, p in layer.named_parameters():
            if n.endswith("bias") or n == "context_scale":
                p.normal_()
    return layer


def test_heads_equal_their_formulas():
    torch.manual_seed(1)
    X, h = torch.randn(7, 5), torch.randn(3, 6)
    relu = torch.relu
    g = head("gile")
    expected = (relu(h @ g.context_weight.T + g.context_bias) * g.context_scale) @ relu(X @ g.class_weight.T + g.class_bias).T + g.bias
    assert torch.allclose(g(h, class_inputs=X), expected, atol=1e-5)  # Eq. 14, one shared b
    assert g.bias.numel() == 1
    b = head("bil_n16")
    assert torch.allclose(b(h, class_inputs=X), (h @ b.context_weight.T) @ X.T, atol=1e-5)  # Eq. 5: E W h
    y = head("bil_yh15")
    assert torch.allclose(y(h, class_inputs=X), (h @ y.context_weight.T) @ relu(X @ y.class_weight.T).T, atol=1e-5)
    lo = head("gile_label_only")
    assert torch.allclose(lo(h, class_inputs=X), h @ relu(X @ lo.class_weight.T).T, atol=1e-5)  # Eq. 6a
    io = head("gile_input_only")
    assert torch.allclose(io(h, class_inputs=X), relu(h @ io.context_weight.T) @ X.T, atol=1e-5)  # Eq. 6b
    lin = head("linear")
    ids = torch.tensor([3, 0])
    assert torch.allclose(lin(h, ids=ids), (h @ lin.weight.T + lin.bias)[:, ids], atol=1e-5)  # Eq. 3


def test_gile_degenerate_form_is_bilinear_eq18():
    """identity σ, g_out = I (U = I), zero biases, w = 1: σ(EU + b_u)(σ(Vh + b_v) ⊙ w) + b = E V h."""
    g = head("gile", d=5, dh=6, joint_dim="5", activation="identity")
    with torch.no_grad():
        g.class_weight.copy_(torch.eye(5))
        g.class_bias.zero_(), g.context_bias.zero_(), g.bias.zero_(), g.context_scale.fill_(1.0)
    X, h = torch.randn(7, 5), torch.randn(3, 6)
    assert torch.allclose(g(h, class_inputs=X), (X @ g.context_weight @ h.T).T, atol=1e-5)  # (E V h)ᵀ


def test_parameter_count_independent_of_label_count_and_eq19():
    def count(layer):
        return sum(p.numel() for p in layer.parameters())

    assert count(head("gile", num_labels=10)) == count(head("gile", num_labels=10000))
    assert count(head("linear", num_labels=10)) != count(head("linear", num_labels=10000))
    # Eq. 19: d_j = dh |Y| / (dh + d) gives the linear head's capacity
    assert equal_capacity_joint_dim(100, 100, 423) == 212  # 100·423 / 200 = 211.5, the study's d_j
    lin = count(head("linear", num_labels=423, d=100, dh=100))
    gile = count(head("gile", num_labels=423, d=100, dh=100, joint_dim="auto"))
    assert head("gile", num_labels=423, d=100, dh=100, joint_dim="auto").joint_dim == 212
    assert abs(gile - lin) / lin < 0.03


def test_label_vectors_are_masked_means_of_shared_embeddings():
    cfg = GileClassifierConfig(head="gile", embed_dim=4, encoder_dim=4, attention_dim=4, joint_dim="3")
    embed = torch.nn.Embedding(10, 4, padding_idx=PAD)
    model = GileClassifier(cfg, embed, WordAttentionEncoder(4, 4, 4), GileClassifier.build_head(cfg, 3))
    tokens = torch.tensor([[4, 5, PAD], [7, PAD, PAD]])
    expected = torch.stack([(embed.weight[4] + embed.weight[5]) / 2, embed.weight[7]])
    assert torch.allclose(model.label_vectors(tokens), expected)


def test_linear_head_refuses_unseen_labels():
    cfg = GileClassifierConfig(head="linear", embed_dim=4, encoder_dim=4, attention_dim=4)
    model = GileClassifier(cfg, torch.nn.Embedding(10, 4, padding_idx=PAD), WordAttentionEncoder(4, 4, 4),
                           GileClassifier.build_head(cfg, 3))
    with pytest.raises(InputError, match="cannot score .* never saw in training .*'new'.*--head gile"):
        model.label_scores(torch.randn(2, 4), None, torch.tensor([0, -1]), ["old", "new"])


def test_a_head_of_label_descriptions_needs_descriptions():
    """A refusal of the data (its options' are tests/unit/test_option_checks.py's)."""
    from fairseq_joint.errors import InputError

    with pytest.raises(InputError, match="--head gile scores label descriptions but none were given"):
        GileClassifier.build(GileClassifierConfig(head="gile"), stub_inputs(described=False))


# ---------------------------------------------------------------------------------------------- losses
def test_bce_is_eq15_and_kurata_losses_by_hand():
    o = torch.tensor([[2.0, -1.0, 0.5], [0.0, 1.0, -2.0]])
    y = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    p = torch.sigmoid(o)
    bce = -(y * p.log() + (1 - y) * (1 - p).log()).sum()
    assert torch.allclose(classification_loss(o, y, "bce"), bce)
    logp = o.log_softmax(-1)
    assert torch.allclose(classification_loss(o, y, "copy_nll"), -(logp[0, 0] + logp[0, 2] + logp[1, 1]))
    assert torch.allclose(classification_loss(o, y, "distribution_ce"),
                          -(0.5 * logp[0, 0] + 0.5 * logp[0, 2] + logp[1, 1]))


class ScoresModel(torch.nn.Module):
    """A stand-in model whose logits are fixed: label_scores returns columns of ``scores``."""

    def __init__(self, scores, unseen_ok=True):
        super().__init__()
        self.scores = torch.nn.Parameter(scores.clone())
        self.scores_unseen_labels = unseen_ok

    def forward(self, src_tokens, src_lengths=None):
        return torch.arange(src_tokens.size(0), dtype=self.scores.dtype)  # bf16 features in a --bf16 run

    def label_scores(self, features, label_tokens, train_index, label_names=None):
        return self.scores[features.long()][:, label_tokens[:, 0]]


def fake_sample(target, train_index):
    n, L = target.shape
    return {"net_input": {"src_tokens": torch.zeros(n, 2, dtype=torch.long)}, "target": target, "nsentences": n,
            "ntokens": 2 * n, "label_tokens": torch.arange(L).unsqueeze(1), "label_train_index": train_index}


def criterion(rate=1.0, loss="bce", mode="multilabel", threshold=0.5):
    task = SimpleNamespace(cfg=SimpleNamespace(classification_mode=mode), validation_seen_score_offset=0.0)
    return MultilabelClassificationCriterion(task, loss, rate, threshold)


def test_label_sampling_keeps_positives_and_rate_one_is_full_bce():
    torch.manual_seed(0)
    n, L = 6, 40
    target = (torch.rand(n, L) < 0.05).float()
    target[0, 3] = 1.0
    for rate in (0.1, 0.25, 0.5):
        for _ in range(5):
            ids = sample_label_candidates(target, rate)
            assert ids.unique().numel() == ids.numel()
            positives = set(target.gt(0).any(0).nonzero().flatten().tolist())
            assert positives <= set(ids.tolist())
            assert ids.numel() == max(round(rate * L), len(positives))
            assert set(ids[: len(positives)].tolist()) == positives  # positives first
    scores = torch.randn(n, L)
    model = ScoresModel(scores).train()
    sample = fake_sample(target, torch.arange(L))
    loss, size, _ = criterion(1.0)(model, sample)
    assert size == n * L  # Z = N k (Eq. 15)
    assert torch.allclose(loss, F.binary_cross_entropy_with_logits(scores, target, reduction="sum"))
    torch.manual_seed(3)
    ids = sample_label_candidates(target, 0.25)
    torch.manual_seed(3)
    loss, size, _ = criterion(0.25)(model, sample)
    assert size == n * L  # Eq. 17 keeps Z = N k
    assert torch.allclose(loss, F.binary_cross_entropy_with_logits(scores[:, ids], target[:, ids], reduction="sum"))
    loss.backward()  # only the candidate labels get gradients
    touched = model.scores.grad.abs().sum(0).gt(0).nonzero().flatten()
    assert set(touched.tolist()) <= set(ids.tolist())


# ---------------------------------------------------------------------------------------------- metrics
def test_metrics_by_hand():
    s = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.3], [0.1, 0.2, 0.3]])
    y = np.array([[0, 1, 1], [0, 1, 0], [0, 0, 0]])  # the last document has no relevant label: not ranked
    out = summarize(ranking_metric_sums(s, y, probs=s, threshold=0.5))
    assert out["docs"] == 2
    assert out["rl"] == pytest.approx(100 * (1.0 + 0.0) / 2)
    assert out["avgpr"] == pytest.approx(100 * ((1 / 2 + 2 / 3) / 2 + 1.0) / 2)
    assert out["oneerr"] == pytest.approx(50.0) and out["1best"] == pytest.approx(50.0)
    assert out["r5"] == pytest.approx(100.0)
    assert out["fullacc"] == pytest.approx(50.0)  # doc 0: top-2 {0, 2} != {1, 2}; doc 1: top-1 {1}
    # micro-F1 over all three documents: predicted {0, 2}, {1} vs gold {1, 2}, {1}: tp 2, fp 1, fn 1
    assert out["f1"] == pytest.approx(100 * 4 / 6)


@pytest.mark.parametrize("ties, chunk", [(False, metrics.CHUNK), (True, metrics.CHUNK), (True, 50)])
def test_metrics_equal_sklearn_on_random_cases(monkeypatch, ties, chunk):
    """RL and AvgPr (computed for many documents at once; 50 scores at once: 4 documents) equal scikit-learn's, ties
    included: scores rounded to a few values, the floor GZSL moves the other group's gold labels to, a document whose
    labels are all relevant."""
    monkeypatch.setattr(metrics, "CHUNK", chunk)
    rng = np.random.default_rng(0)
    for _ in range(5):
        s = rng.normal(size=(30, 12))
        y = rng.random((30, 12)) < 0.2
        y[:, 0] |= ~y.any(1)  # every document has a relevant label
        if ties:
            s = np.round(s)  # about five distinct scores a document
            s[:3, 6:] = s.min() - 1.0  # several labels tied at the bottom
            y[3] = True  # every label relevant: no pair to order wrongly, AvgPr 1
        sums = ranking_metric_sums(s, y, probs=1 / (1 + np.exp(-s)), threshold=0.4)
        assert sums["rl"] / sums["n"] == pytest.approx(label_ranking_loss(y, s), abs=1e-12)
        assert sums["avgpr"] / sums["n"] == pytest.approx(label_ranking_average_precision_score(y, s), abs=1e-12)
        assert micro_f1(sums["tp"], sums["fp"], sums["fn"]) == pytest.approx(
            f1_score(y, 1 / (1 + np.exp(-s)) >= 0.4, average="micro"))
        top = s.argmax(1)  # the first of the tied best scores, as the ranking's stable order
        assert sums["oneerr"] == (~y[np.arange(30), top]).sum()
    one = ranking_metric_sums(np.array([[0.3], [0.1]]), np.array([[1], [0]]))  # a single label: nothing to misorder
    assert (one["n"], one["rl"], one["avgpr"], one["oneerr"]) == (1.0, 0.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="non-finite"):
        ranking_metric_sums(np.array([[np.nan, 0.1]]), np.array([[1, 0]]))


def test_criterion_reports_seen_and_unseen_separately():
    rng = np.random.default_rng(1)
    scores = torch.tensor(rng.normal(size=(8, 6)), dtype=torch.float32)
    target = torch.zeros(8, 6)
    target[:, 0] = 1
    target[::2, 4] = 1  # unseen label 4 on even documents
    target[1, 5] = 1
    train_index = torch.tensor([0, 1, 2, 3, -1, -1])
    model = ScoresModel(scores).eval()
    with torch.no_grad():
        _, _, log = criterion(threshold=0.5)(model, fake_sample(target, train_index))
    seen = ranking_metric_sums(scores[:, :4].numpy(), target[:, :4].numpy(), probs=torch.sigmoid(scores[:, :4]).numpy(), threshold=0.5)
    unseen = ranking_metric_sums(scores[:, 4:].numpy(), target[:, 4:].numpy())
    assert {k: log[f"seen_{k}"] for k in seen} == pytest.approx(seen)
    assert {k: log[f"unseen_{k}"] for k in unseen} == pytest.approx(unseen)
    assert log["unseen_n"] == 5  # only documents with an unseen label are ranked on unseen labels
    assert log["loss"] == pytest.approx(float(F.binary_cross_entropy_with_logits(scores[:, :4], target[:, :4], reduction="sum")))
    _, _, log = criterion()(ScoresModel(scores, unseen_ok=False).eval(), fake_sample(target, train_index))
    assert "unseen_n" not in log and log["seen_n"] == 8


def test_criterion_metrics_under_bf16():
    """fairseq's --bf16 casts the whole sample, the 0/1 target included, to bf16 (which numpy cannot hold): the
    ranking metrics equal those of the same (bf16-rounded) scores in fp32."""
    rng = np.random.default_rng(2)
    scores = torch.tensor(rng.normal(size=(8, 6)), dtype=torch.float32).bfloat16()
    target = torch.zeros(8, 6)
    target[:, 1] = 1
    target[1::2, 5] = 1
    train_index = torch.tensor([0, 1, 2, 3, -1, -1])
    with torch.no_grad():
        _, _, low = criterion()(ScoresModel(scores).eval(), fake_sample(target.bfloat16(), train_index))
        _, _, full = criterion()(ScoresModel(scores.float()).eval(), fake_sample(target, train_index))
    keys = [k for k in full if k.startswith(("seen_", "unseen_", "gzsl_"))]
    assert keys and {k: low[k] for k in keys} == pytest.approx({k: full[k] for k in keys})


def test_chance_level_is_near_theory():
    y = np.zeros((400, 50), dtype=bool)
    y[:, 0] = True
    c = chance_level(y, repeats=3)
    assert c["rl"] == pytest.approx(50, abs=4)
    assert c["oneerr"] == pytest.approx(98, abs=2)


# ---------------------------------------------------------------------------------------------- Kurata init
def test_kurata_dedicated_units_hold_c_on_exactly_their_pattern():
    rows = [[0, 3]] * 3 + [[1, 3, 4]] * 2 + [[2]] * 9 + [[0, 3]] + [[5, 1]] + [[]] * 5 + [[2, 5]]
    patterns = label_patterns(rows)
    # sets of two labels or more only (Sec. 4.1): the frequent single label and the empty set hold no co-occurrence
    assert patterns == [((0, 3), 4), ((1, 3, 4), 2), ((1, 5), 1), ((2, 5), 1)]
    L, H = 6, 5
    ub = normalized_init_bound(H, L)
    assert ub == pytest.approx(0.738549, abs=1e-6)  # sqrt(6) / sqrt(5 + 6) = 2.449490 / 3.316625
    for mode, c0 in (("ub", ub), ("f_ub", 4 * ub), ("sqrt_f_ub", 2 * ub)):
        torch.manual_seed(0)
        w = torch.randn(L, H)
        before = w.clone()
        assert cooccurrence_init_(w, patterns[:3], mode) == 3
        expected0 = torch.zeros(L)
        expected0[[0, 3]] = c0
        assert torch.allclose(w[:, 0], expected0)
        assert set(w[:, 1].nonzero().flatten().tolist()) == {1, 3, 4}
        assert set(w[:, 2].nonzero().flatten().tolist()) == {1, 5}
        assert torch.equal(w[:, 3:], before[:, 3:])  # units without a pattern stay random
    w = torch.randn(L, 2)  # more patterns (4) than hidden units (2): the 2 most frequent get one
    assert cooccurrence_init_(w, patterns, "ub") == 2
    assert set(w[:, 0].nonzero().flatten().tolist()) == {0, 3} and set(w[:, 1].nonzero().flatten().tolist()) == {1, 3, 4}


def test_kurata_init_of_a_linear_head_dedicates_units_to_the_label_sets_of_its_training_texts():
    """The model's W (|Y| x dh) gets a unit per set of two or more labels of its training rows, most frequent
    first; the rest of W stays as the linear head starts it."""
    dictionary = Dictionary()
    for word in ("a", "b", "c"):
        dictionary.add_symbol(word)
    rows = [[0], [0], [0], [1, 2], [0, 2], [1, 2], [2], []]
    weights = {}
    for init in ("ub", "none"):
        cfg = GileClassifierConfig(encoder="wan", head="linear", embed_dim=4, encoder_dim=6, cooccurrence_init=init)
        torch.manual_seed(0)
        weights[init] = GileClassifier.build(cfg, GileModelInputs(dictionary, ("x", "y", "z"), rows, False)).head.weight
    ub = normalized_init_bound(6, 3)
    torch.testing.assert_close(weights["ub"][:, 0], torch.tensor([0.0, ub, ub]))
    torch.testing.assert_close(weights["ub"][:, 1], torch.tensor([ub, 0.0, ub]))
    assert torch.equal(weights["ub"][:, 2:], weights["none"][:, 2:])


def test_joint_dim_auto_of_a_multilingual_model_is_eq_19s_multilingual_form():
    """d_j = dh·Σ_i |k(i)| / (dh + d) over M languages' classification units (GILE Sec. 4.2.1), not one unit's
    labels; a checkpoint saved under the one-unit form keeps its d_j (its heads built again at the saved size)."""
    dictionary = Dictionary()
    for word in ("a", "b", "c"):
        dictionary.add_symbol(word)
    inputs = GileModelInputs(dictionary, ("x", "y", "z"), [[0], [1], [2]], True, languages=("en", "pl"),
                             label_language="en", dictionaries={"en": dictionary, "pl": dictionary})
    models = {}
    for joint_dim in ("auto", "2"):  # 6·2·3 / (6 + 4) = 3.6; one unit's: 6·3 / 10 = 1.8
        torch.manual_seed(0)
        models[joint_dim] = GileClassifier.build(GileClassifierConfig(encoder="wan", head="gile", embed_dim=4,
                                                                      encoder_dim=6, joint_dim=joint_dim), inputs)
    new, old = models["auto"], models["2"]
    assert new.head["en"].joint_dim == 4 and new.head["en"].class_weight is new.head["pl"].class_weight
    new.load_state_dict(old.state_dict())
    assert new.head["en"].joint_dim == 2 and new.head["en"].class_weight is new.head["pl"].class_weight
    saved = old.state_dict()
    assert all(torch.equal(value, saved[key]) for key, value in new.state_dict().items() if torch.is_tensor(value))


# ---------------------------------------------------------------------------------------------- encoders / files
def test_han_splits_sentences_and_wan_ignores_padding():
    enc = HierarchicalAttentionEncoder(4, 4, 4, sentence_end_ids=[9])
    tokens = torch.tensor([[5, 6, 9, 7, 8, 9, 4], [5, 9, 6, PAD, PAD, PAD, PAD]])
    mask = tokens.ne(PAD)
    sent, pos, num = enc.split_sentences(tokens, mask)
    assert sent[0].tolist() == [0, 0, 0, 1, 1, 1, 2] and pos[0].tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert num.tolist() == [3, 2]
    emb = torch.randn(2, 7, 4)
    h = enc(emb, mask, tokens)
    h_short = enc(emb[1:, :3], mask[1:, :3], tokens[1:, :3])
    assert torch.allclose(h[1], h_short[0], atol=1e-6)  # padding changes nothing
    wan = WordAttentionEncoder(4, 4, 4, layer="bigru")
    assert torch.allclose(wan(emb, mask)[1], wan(emb[1:, :3], mask[1:, :3])[0], atol=1e-5)


def test_label_file_errors(tmp_path):
    bad = {
        "a\tfirst\nb\t  \n": "label 'b' has an empty description",
        "a\tfirst\na\tagain\n": "duplicate label 'a'",
        "a first\n": "found 1 tab-separated field",
    }
    for text, message in bad.items():
        path = tmp_path / "labels.tsv"
        path.write_text(text)
        with pytest.raises(InputError, match=f"{path}:2: .*{message}|{path}:1: .*{message}"):
            read_label_file(str(path))


# ------------------------------------------------------------------------- similarity init, pre-trained E
def stub_inputs(words=("apple", "pear", "car", "truck", "bus"), described=True):
    """What a task describes to the model: a dictionary of ``words``, training labels a and b."""
    from fairseq.data import Dictionary

    dictionary = Dictionary()
    for w in words:
        dictionary.add_symbol(w)
    return GileModelInputs(dictionary, ("a", "b"), [[0], [1], [0, 1]], has_label_descriptions=described)


def test_similarity_init_starts_at_label_text_similarity():
    """--similarity-init: g_w(x) = act(x) and every head projection the identity, so the first gile scores
    are σ(e_y)·(act-pooled h) + b, and bil_n16's are e_y·h (the bilinear form with W = I)."""
    inputs = stub_inputs()
    for name, activation in (("gile", "identity"), ("gile", "tanh"), ("bil_n16", "relu")):
        cfg = GileClassifierConfig(head=name, embed_dim=6, encoder_dim=6, attention_dim=5, joint_dim="6",
                                   joint_activation=activation, encoder_activation="tanh", similarity_init=True)
        model = GileClassifier.build(cfg, inputs)
        assert torch.equal(model.encoder.word.layer.weight, torch.eye(6))
        assert not model.encoder.word.layer.bias.any()
        tokens = torch.tensor([[4, 5, 6], [7, 8, PAD]])
        h = model(tokens)
        # h = attention pooling of tanh(E x): the dense word encoder is the identity before its activation
        assert torch.allclose(h, model.encoder.attention(torch.tanh(model.embed_tokens(tokens)), tokens.ne(PAD)))
        X = torch.randn(4, 6)
        sigma = {"identity": lambda x: x, "tanh": torch.tanh, "relu": torch.relu}[activation]
        bias = model.head.bias if model.head.bias is not None else 0.0
        expected = sigma(h) @ sigma(X).T + bias if name == "gile" else h @ X.T
        assert torch.allclose(model.head(h, class_inputs=X), expected, atol=1e-5), name
    # a text made of a label's description words scores that label above the others at the start
    torch.manual_seed(0)
    cfg = GileClassifierConfig(head="gile", embed_dim=64, encoder_dim=64, attention_dim=8, joint_dim="64",
                               joint_activation="tanh", encoder_activation="tanh", similarity_init=True)
    model = GileClassifier.build(cfg, stub_inputs(tuple(f"w{i}" for i in range(40))))
    descriptions = torch.arange(4, 44).view(10, 4)  # 10 labels, 4 words each
    scores = model.label_scores(model(descriptions[:, [0, 1, 1, 3]]), descriptions)
    assert torch.equal(scores.argmax(1), torch.arange(10))
    # HAN: both dense encoders start as identities; GRU encoders and the linear head have no such form
    han = GileClassifier.build(GileClassifierConfig(head="gile", encoder="han", embed_dim=6, encoder_dim=6,
                                                    joint_dim="6", similarity_init=True, sentence_end_tokens="car"), inputs)
    assert torch.equal(han.encoder.sentence.layer.weight, torch.eye(6))


def test_identity_output_layer_init_is_weight_tying():
    """OutputLayer(init="identity"): joint with identity σ starts as E h (NMT-tied, Eq. 4); joint dimensions
    beyond d start small on the class side and full-scale on the context side, so the first scores are still
    the similarity but the extra dimensions are no saddle: their gradients are of the same order as the
    identity block's (both sides small would scale each one's gradient by the other's tiny output)."""
    from fairseq_joint.modules.output_layers import OutputLayer, OutputLayerSpec

    torch.manual_seed(0)
    embed = torch.nn.Embedding(9, 5)
    h = torch.randn(3, 5)
    layer = OutputLayer(OutputLayerSpec("joint", joint_dim=5, activation="identity", init="identity"), num_classes=9,
                        input_dim=5, embedding=embed)
    assert torch.allclose(layer(h), h @ embed.weight.T, atol=1e-5)
    wide = OutputLayer(OutputLayerSpec("joint", joint_dim=64, activation="relu", init="identity"), num_classes=9,
                       input_dim=5, embedding=embed)
    for w in (wide.class_weight, wide.context_weight):
        assert torch.equal(w[:5], torch.eye(5))
    assert 0 < wide.class_weight[5:].abs().max() < 0.005
    assert 0.2 < wide.context_weight[5:].std() < 0.7  # fairseq's N(0, 5^-1/2) = 0.447
    start = torch.relu(h) @ torch.relu(embed.weight).T
    # the similarity, barely perturbed (59 extra dimensions: ~1% on average)
    assert (wide(h) - start).abs().mean() < 0.05 * start.abs().mean()
    wide(h).sum().backward()
    g = wide.class_weight.grad
    assert g[5:].abs().mean() > 0.05 * g[:5].abs().mean()  # the extra rows learn (1% of it in a saddle)
    assert wide.context_weight.grad[5:].abs().sum() > 0
    # bil_yh15: σ(E W)(W' h), both projected
    bil = OutputLayer(OutputLayerSpec("label", joint_dim=64, activation="relu", init="identity",
                                      context_projection="linear"), num_classes=9, input_dim=5, embedding=embed)
    assert bil.class_weight[5:].abs().max() < 0.005 and bil.context_weight[5:].std() > 0.2


def test_embed_path_loads_word_vectors_and_rejects_bad_files(tmp_path):
    inputs = stub_inputs()
    d = inputs.dictionary
    vectors = tmp_path / "v.txt"
    vectors.write_text("3 4\napple 1 2 3 4\ntruck 0.5 0 0 -1\nunknownword 9 9 9 9\n")
    cfg = GileClassifierConfig(head="gile", embed_dim=4, encoder_dim=4, attention_dim=4, joint_dim="4",
                               embed_path=str(vectors), freeze_embed=True)
    model = GileClassifier.build(cfg, inputs)
    E = model.embed_tokens.weight
    assert E[d.index("apple")].tolist() == [1, 2, 3, 4] and E[d.index("truck")].tolist() == [0.5, 0, 0, -1]
    assert not E[d.pad()].any() and E[d.index("pear")].abs().sum() > 0  # missing words keep a random vector
    assert not E.requires_grad and all(p.requires_grad for n, p in model.named_parameters() if n != "embed_tokens.weight")
    # built by the task for a checkpoint, the model does not need the file (its weights come from the checkpoint)
    from omegaconf import OmegaConf

    from fairseq_joint.data.gile_files import GileCorpus
    from fairseq_joint.tasks.gile_classification import GileClassificationConfig, GileClassificationTask

    (tmp_path / "train.labels").write_text("a\nb\na b\n")  # the task's own build_model, on the stub's data
    corpus = GileCorpus(str(tmp_path), d, ("a", "b"), {"a": "apple", "b": "car"}, None)
    real = GileClassificationTask(GileClassificationConfig(data=str(tmp_path)), corpus)
    gone = OmegaConf.structured(GileClassifierConfig(head="gile", embed_dim=4, encoder_dim=4, joint_dim="4",
                                                     embed_path=str(tmp_path / "gone.txt"), _name="gile_classifier"))
    built = real.build_model(gone, from_checkpoint=True)
    assert isinstance(built, GileClassifier) and gone.embed_path.endswith("gone.txt")  # the caller's config is kept
    with pytest.raises(MissingFileError, match=r"--embed-path .*gone.txt: no such file"):
        real.build_model(gone, from_checkpoint=False)
    cases = [
        ("2 5\napple 1 2 3 4 5\n", r"v.txt: the vectors have 5 dimensions but --embed-dim is 4; set --embed-dim 5"),
        ("apple 1 2 3 4\npear 1 2 3\n", r"v.txt:2: expected a word and 4 numbers \(--embed-dim 4\), got 3"),
        ("apple 1 2 x 4\n", r"v.txt:1: a value of the vector of 'apple' is not a number"),
        ("kiwi 1 2 3 4\n", r"v.txt: none of its 1 words is in the dictionary"),
    ]
    for text, message in cases:
        vectors.write_text(text)
        with pytest.raises(InputError, match=message):
            GileClassifier.build(cfg, inputs)
    with pytest.raises(MissingFileError, match=r"--embed-path .*missing.txt: no such file"):
        GileClassifier.build(GileClassifierConfig(head="gile", embed_dim=4, embed_path=str(tmp_path / "missing.txt")), inputs)


def test_a_label_described_by_unknown_words_only_is_refused(caplog):
    """Every such label would get the unknown word's vector, hence the same score as every other such label; words
    of a description that are not in the dictionary are named in a warning (they are read as <unk>)."""
    from fairseq.data import Dictionary

    from fairseq_joint.data.label_set import encode_label_set

    d = Dictionary()
    for w in ("apple", "pear"):
        d.add_symbol(w)
    descriptions = {"A": "apple pear", "B": "kiwi mango", "C": "pear and plum", "D": "durian"}
    with pytest.raises(InputError, match=r"label\(s\) 'B', 'D': no word of the description is in the dictionary"):
        encode_label_set(list(descriptions), descriptions, d, ["A"])
    with caplog.at_level("WARNING", logger="fairseq_joint.data.label_set"):
        ok = encode_label_set(["A", "C"], descriptions, d, ["A"])  # one known word is enough
    assert ok.tokens.shape[0] == 2 and ok.train_index.tolist() == [0, -1]
    assert ok.tokens[1].tolist() == [d.index("pear"), d.unk(), d.unk()]
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith("1 of 2 label descriptions have words that are not in the dictionary (2 in all, read as "
                              "<unk>), e.g. 'C': 'and', 'plum': ")
    caplog.clear()
    with caplog.at_level("WARNING", logger="fairseq_joint.data.label_set"):
        encode_label_set(["A"], descriptions, d, ["A"])
    assert not caplog.records


def test_descriptions_mostly_unknown_to_the_description_languages_dictionary_are_warned_of(caplog):
    """More than a third of the descriptions' words unknown to the dictionary of the model's description language: one
    warning naming the label source, the count, the dictionary and the language; a third or less: silence (the
    README's English example labels lack 3 of their 11 words in the bundled sample's dictionary)."""
    from fairseq.data import Dictionary

    from fairseq_joint.data.label_set import check_description_language

    d = Dictionary()
    for w in ("image", "library", "game"):
        d.add_symbol(w)
    log = "fairseq_joint.data.label_set"
    with caplog.at_level("WARNING", logger=log):  # 1 of 3 words unknown: a third, not more
        check_description_language({"a": "image library", "b": "biblioteka"}, d, "en", "bin/en/dict.txt", "x.tsv")
    assert not caplog.records
    with caplog.at_level("WARNING", logger=log):  # 3 of 5 unknown
        check_description_language({"a": "biblioteka obrazów", "b": "gra game library"}, d, "en", "bin/en/dict.txt",
                                   "labels.pl.tsv")
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith("labels.pl.tsv: 3 of the descriptions' 5 words (60%) are not in bin/en/dict.txt, the "
                              "dictionary of the model's description language (en): ")
    caplog.clear()
    with caplog.at_level("WARNING", logger=log):  # a monolingual model names no language
        check_description_language({"a": "kiwi"}, d, "", "bin/dict.txt", "the labels given")
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "(the language of its training texts)" in warning


def test_a_sentence_encoder_that_cannot_be_loaded_is_refused_naming_the_option(tmp_path):
    """--encoder pretrained without its directory, and a directory sentence-transformers cannot read (a modules.json
    that is no JSON), are refused in one line naming the option."""
    from fairseq_joint.errors import OptionError
    from fairseq_joint.modules.sentence_encoder import load_sentence_encoder

    with pytest.raises(OptionError, match="^--encoder pretrained needs --pretrained-encoder PATH, a local "):
        load_sentence_encoder("")
    (tmp_path / "modules.json").write_text("[not json")
    with pytest.raises(InputError, match=rf"^--pretrained-encoder {tmp_path}: sentence-transformers cannot load it "
                                         r"\(JSONDecodeError: .*\): give a complete model directory$"):
        load_sentence_encoder(str(tmp_path))


def test_the_options_of_a_multilingual_model_are_refused_without_languages(tmp_path):
    from fairseq_joint.data.gile_files import read_corpus
    from fairseq_joint.errors import OptionError

    for option, given in (("--label-language", {"label_language": "en"}), ("--language-weights", {"language_weights":
                                                                                                 "en=1"})):
        with pytest.raises(OptionError, match=f"^{option} is for a multilingual model: give --languages too, or drop "
                                              "it$"):
            read_corpus(str(tmp_path), None, None, **given)


def test_han_refuses_sentence_end_tokens_the_dictionary_lacks():
    """HAN splits a text into sentences at --sentence-end-tokens: none of them in the data's dictionary would make
    every text one sentence without a word."""
    import types

    from fairseq.data import Dictionary

    from fairseq_joint.errors import OptionError
    from fairseq_joint.models.gile_classifier import GileClassifier

    cfg = types.SimpleNamespace(encoder="han", sentence_end_tokens="。 ？")
    with pytest.raises(OptionError, match="^--sentence-end-tokens '。 ？': none is in the dictionary; give tokens that "
                                          "end sentences in the data$"):
        GileClassifier.build_encoder(cfg, Dictionary())


def test_a_split_is_batched_by_fairseqs_datasets(tmp_path):
    """load_gile_split: texts right-padded, their lengths and token count, the multi-hot target over the label set
    (an unseen label included), the multiclass column and the label set itself; shortest texts first."""
    from fairseq.data import Dictionary
    from fairseq.data.indexed_dataset import make_builder

    from fairseq_joint.data.gile_datasets import load_gile_split
    from fairseq_joint.data.gile_files import GileCorpus
    from fairseq_joint.data.label_set import encode_label_set

    d = Dictionary()
    for w in ("apple", "pear", "car"):
        d.add_symbol(w)
    builder = make_builder(str(tmp_path / "valid.input.bin"), impl="mmap", vocab_size=len(d))
    for ids in ([4, 5, 6], [6], [5, 4]):
        builder.add_item(torch.IntTensor(ids))
    builder.finalize(str(tmp_path / "valid.input.idx"))
    (tmp_path / "valid.labels").write_text("a\nb\nc\n")
    descriptions = {"a": "apple", "b": "car", "c": "pear"}
    corpus = GileCorpus(str(tmp_path), d, ("a", "b"), descriptions, descriptions)
    label_set = encode_label_set(list(descriptions), descriptions, d, corpus.train_labels)
    ds = load_gile_split(corpus, "valid", label_set, multiclass=True, label_source="labels.tsv")
    batch = ds.collater([ds[i] for i in range(3)])
    pad = d.pad()
    assert batch["net_input"]["src_tokens"].tolist() == [[4, 5, 6], [6, pad, pad], [5, 4, pad]]
    assert batch["net_input"]["src_lengths"].tolist() == [3, 1, 2]
    assert (batch["ntokens"], batch["nsentences"], batch["id"].tolist()) == (6, 3, [0, 1, 2])
    assert batch["target"].tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]] and batch["target_class"].tolist() == [0, 1, 2]
    assert batch["label_train_index"].tolist() == [0, 1, -1] and torch.equal(batch["label_tokens"], label_set.tokens)
    assert ds.ordered_indices().tolist() == [1, 2, 0]
    (tmp_path / "valid.labels").write_text("a\nb c\nc\n")
    with pytest.raises(InputError, match=r"valid.labels:2: 2 labels in --classification-mode multiclass"):
        load_gile_split(corpus, "valid", label_set, multiclass=True, label_source="labels.tsv")
    for labels, said in (("a\nb\n", rf"^{tmp_path}/valid.labels has 2 lines but {tmp_path}/valid.input.bin 3 texts: "),
                         ("a\n\nc\n", rf"^{tmp_path}/valid.labels:2: example without labels: every example needs one$")):
        (tmp_path / "valid.labels").write_text(labels)
        with pytest.raises(InputError, match=said):
            load_gile_split(corpus, "valid", label_set, label_source="labels.tsv")
    with pytest.raises(MissingFileError, match=rf"^{tmp_path}/test.input.bin/.idx not found: binarize split 'test' with "
                                               "fairseq-joint-preprocess-gile$"):
        load_gile_split(corpus, "test", label_set, label_source="labels.tsv")


# ---------------------------------------------------------------------------------------------- γ calibrated on validation
GAMMA_LABELS = {"A": "apple fruit", "B": "car engine", "C": "river water", "D": "music song", "E": "bread baker",
                "F": "train rail"}  # E and F never seen in training


def validate_in_process(data, split, *flags):
    """(task, the logging outputs, the stats fairseq-train prints) of one validation of ``split`` by an untrained
    gile model, through the hooks fairseq-train calls: begin_valid_epoch, valid_step per batch, post_validate."""
    from conftest import training_args
    from fairseq import tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    cfg = convert_namespace_to_omegaconf(training_args(
        data, "gile_classifier", "--task", "gile_classification", "--head", "gile", "--joint-dim", 4, "--embed-dim", 8,
        "--encoder-dim", 8, "--attention-dim", 8, "--criterion", "multilabel_classification", *flags))
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(0)
    model, criterion = task.build_model(cfg.model).eval(), task.build_criterion(cfg.criterion)
    task.load_dataset(split)
    task.begin_valid_epoch(1, model)
    with torch.no_grad():
        logs = [task.valid_step(sample, model, criterion)[2] for sample in
                task.get_batch_iterator(task.dataset(split), max_sentences=4).next_epoch_itr(shuffle=False)]
    stats = {}
    task.post_validate(model, stats, None)
    return task, model, logs, stats


def test_the_task_calibrates_gamma_and_the_threshold_on_valid_and_keeps_them_in_its_state(tmp_path):
    """Without --seen-score-offset, a validation of ``valid`` sets γ = calibrate_seen_offset over every document's
    scores of every label (computed again here by split_scores), logs it (gamma) and keeps it in the task's state
    (what fairseq saves as a checkpoint's task_state, and a task loading it reads), while the gzsl_* metrics stay at
    γ = 0; the probability threshold likewise (threshold: the best micro-F1 over every label's σ); another split
    calibrates nothing; a given --seen-score-offset is kept, and the metrics use it (the threshold is calibrated)."""
    from fairseq import tasks

    from fairseq_joint.cli import preprocess_gile
    from fairseq_joint.metrics import calibrate_seen_offset, calibrate_threshold, gzsl_metric_sums, threshold_counts
    from fairseq_joint.tasks.gile_classification import CALIBRATED_OFFSET, CALIBRATED_THRESHOLD, LAST_VALIDATION

    rng = np.random.default_rng(0)
    (tmp_path / "labels.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in GAMMA_LABELS.items()))

    def documents(labels, n):
        rows = []
        for _ in range(n):
            names = sorted(set(rng.choice(labels, size=rng.integers(1, 3))))
            words = [w for name in names for w in GAMMA_LABELS[name].split()]
            rows.append(" ".join(rng.choice(words, size=4)) + "\t" + " ".join(names) + "\n")
        return "".join(rows)

    (tmp_path / "train.tsv").write_text(documents(list("ABCD"), 16))
    (tmp_path / "valid.tsv").write_text(documents(list("ABCDEF"), 14))
    data = tmp_path / "bin"
    preprocess_gile.main(["--train", str(tmp_path / "train.tsv"), "--valid", str(tmp_path / "valid.tsv"), "--test",
                          str(tmp_path / "valid.tsv"), "--labels", str(tmp_path / "labels.tsv"), "--destdir", str(data)])

    task, model, logs, stats = validate_in_process(data, "valid")
    scores, targets, label_set = split_scores(model, task, "valid", batch_size=4)
    seen = label_set.train_index.numpy() >= 0
    assert seen.sum() == 4 and targets[:, ~seen].any() and targets[:, seen].any()
    gamma = calibrate_seen_offset(scores, targets, seen)
    assert gamma != 0.0  # a real calibration, not the default
    threshold = calibrate_threshold([threshold_counts(torch.sigmoid(torch.from_numpy(scores)).numpy(), targets)])
    assert 0.0 < threshold < 1.0 and task.calibrated_threshold == threshold
    # (and the validation's figures, as fairseq-train's stats hold them: none in this in-process validation)
    assert task.state_dict() == {CALIBRATED_OFFSET: gamma, CALIBRATED_THRESHOLD: threshold, LAST_VALIDATION: {}}
    assert isinstance(gamma, float) and isinstance(threshold, float)  # floats: weights_only loads them
    assert task.seen_score_offset == gamma and stats == {"gamma": round(gamma, 4), "threshold": round(threshold, 4)}
    assert "calibrated" in task.seen_score_offset_origin
    assert all(isinstance(v, (int, float, torch.Tensor, np.number)) for log in logs for v in log.values())  # numbers
    at_zero = gzsl_metric_sums(scores, targets, seen, 0.0)
    for group in ("seen", "unseen"):
        assert sum(log[f"gzsl_{group}_avgpr"] for log in logs) == pytest.approx(at_zero[group]["avgpr"])
    loaded = tasks.setup_task(task.cfg)  # as load_model_ensemble_and_task restores a checkpoint's task_state
    assert loaded.seen_score_offset == 0.0 and "no γ calibrated" in loaded.seen_score_offset_origin
    assert loaded.calibrated_threshold is None
    loaded.load_state_dict(task.state_dict())
    assert loaded.seen_score_offset == gamma and loaded.calibrated_threshold == threshold

    task, _, _, stats = validate_in_process(data, "test")  # the same documents under another split's name
    assert stats == {} and task.state_dict() == {} and task.seen_score_offset == 0.0

    task, _, logs, stats = validate_in_process(data, "valid", "--seen-score-offset", 1.5)
    assert stats == {"threshold": round(threshold, 4)}
    assert task.state_dict() == {CALIBRATED_THRESHOLD: threshold, LAST_VALIDATION: {}}
    assert task.seen_score_offset == 1.5
    assert "--seen-score-offset of training" in task.seen_score_offset_origin
    at_given = gzsl_metric_sums(scores, targets, seen, 1.5)
    assert sum(log["gzsl_unseen_avgpr"] for log in logs) == pytest.approx(at_given["unseen"]["avgpr"])


def test_cosine_prior_adds_the_frozen_encoders_cosine_to_the_unseen_labels(sentence_encoder):
    """--cosine-prior λ: at evaluation an unseen label's logit is the head's plus λ · cos(text, description) of the
    frozen sentence encoder, a seen label's the head's alone; in training the head's alone for every label (where there
    is no frozen encoder's cosine to add the option is refused: tests/unit/test_option_checks.py)."""
    import dataclasses

    from fairseq_joint.modules.sentence_encoder import PretrainedSentenceEncoder

    encoder = PretrainedSentenceEncoder(str(sentence_encoder))
    inputs = dataclasses.replace(stub_inputs(), sentence_encoder=encoder)
    texts = encoder.embed(["a python library", "a racing game"])
    labels = encoder.embed(["python programming language", "games", "astronomy"])
    train_index = torch.tensor([0, 1, -1])  # the third label was never seen in training
    scores = {}
    for prior in (0.0, 2.5):
        cfg = GileClassifierConfig(head="gile", encoder="pretrained", pretrained_encoder=str(sentence_encoder),
                                   similarity_init=True, seen_label_bias=True, cosine_prior=prior)
        torch.manual_seed(0)
        model = GileClassifier.build(cfg, inputs)
        with torch.no_grad():
            for mode in ("train", "eval"):
                getattr(model, mode)()
                scores[prior, mode] = model.label_scores(model(None, src_embeddings=texts), labels, train_index)
    cosine = texts @ labels.t()
    assert torch.allclose(scores[2.5, "eval"][:, 2] - scores[0.0, "eval"][:, 2], 2.5 * cosine[:, 2], atol=1e-5)
    assert cosine[:, 2].abs().min() > 1e-3  # the unseen label's prior is not zero by chance
    assert torch.equal(scores[2.5, "eval"][:, :2], scores[0.0, "eval"][:, :2])  # seen labels: the head alone
    assert torch.equal(scores[2.5, "train"], scores[0.0, "train"])  # the loss sees the head alone


def test_finetune_label_refresh_encodes_the_descriptions_once_per_period_without_gradient(sentence_encoder):
    """--finetune-label-refresh N: in training the label vectors are the fine-tuned encoder's, computed without
    gradient the first time a label is asked for and reused until the update count reaches a multiple of N; the
    encoder trains through the texts; evaluation encodes a label set once until the model trains again (without
    --finetune-encoder the option is refused: tests/unit/test_option_checks.py)."""
    import dataclasses

    from fairseq_joint.modules.sentence_encoder import PretrainedSentenceEncoder

    encoder = PretrainedSentenceEncoder(str(sentence_encoder), finetune=True)
    inputs = dataclasses.replace(stub_inputs(), sentence_encoder=encoder)
    cfg = GileClassifierConfig(head="gile", encoder="pretrained", pretrained_encoder=str(sentence_encoder),
                               finetune_encoder=True, finetune_label_refresh=2, similarity_init=True)
    torch.manual_seed(0)
    model = GileClassifier.build(cfg, inputs)

    def ids(texts):
        rows = encoder.tokenize(texts)
        width = max(map(len, rows))
        return torch.tensor([row + [encoder.pad_id] * (width - len(row)) for row in rows])

    texts, labels, train_index = ids(["a python library", "a racing game"]), ids(["python language", "games"]), \
        torch.tensor([0, 1])
    encoded = []
    label_vectors = model.label_vectors
    model.label_vectors = lambda tokens: encoded.append(len(tokens)) or label_vectors(tokens)
    model.train()
    model.label_scores(model(texts), labels, train_index).sum().backward()
    assert encoded == [2] and not any(v.requires_grad for v in model.label_vector_cache.values())
    grads = [p.grad for p in model.sentence_encoder.parameters() if p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads)  # the texts' side trains the encoder
    model.label_scores(model(texts), labels[[1]], train_index[[1]])
    model.set_num_updates(1)
    model.label_scores(model(texts), labels, train_index)
    assert encoded == [2]  # reused within the period
    model.set_num_updates(2)
    model.label_scores(model(texts), labels, train_index)
    assert encoded == [2, 2]  # refreshed
    model.eval()
    with torch.no_grad():
        first = model.label_scores(model(texts), labels, train_index)
        again = model.label_scores(model(texts[[1, 0]]), labels, train_index)  # another batch, the same labels
    assert encoded == [2, 2, 2] and len(model.label_vector_cache) == 2  # evaluation: encoded once per label set
    assert torch.equal(again, first[[1, 0]])
    model.train()
    model.eval()  # the weights may have changed in between: encoded again
    with torch.no_grad():
        model.label_scores(model(texts), labels, train_index)
    assert encoded == [2, 2, 2, 2]


def test_updates_per_epoch_count_the_largest_languages_batches_per_worker_and_update(tmp_path):
    from fairseq_joint.tasks.gile_classification import GileClassificationTask

    for lang, documents in (("en", 100), ("pl", 70)):
        (tmp_path / lang).mkdir()
        (tmp_path / lang / "train.labels").write_text("A\n" * documents)
    count = GileClassificationTask.updates_per_epoch
    assert count(str(tmp_path), "en,pl", "train", 32, 1, 1) == 4  # ⌈100 / 32⌉ batches of English, the largest
    assert count(str(tmp_path), "pl", "train", 32, 1, 1) == 3
    assert count(str(tmp_path), "en,pl", "train", 10, 3, 2) == 2  # 10 batches, 4 a worker, 2 an update
    assert count(str(tmp_path), "en, pl", "train", 32, 1, 1) == 4  # --languages read as the model reads them
    assert count(str(tmp_path / "en"), "", "train", 32, 1, 1) == 4
    assert count(str(tmp_path), "en", "valid", 32, 1, 1) is None  # no such split
    assert count(str(tmp_path), "en", "train", None, 1, 1) is None  # --max-tokens batches: not counted


def test_a_checkpoint_of_another_kind_of_encoder_is_refused(sentence_encoder, tmp_path):
    """A checkpoint's sentence encoder and lexical channel are the model's: one trained without either is refused in
    the model built with it, and the reverse, naming the model's --encoder (checkpoints of another encoder of the
    same kind: tests/cli/test_gile_pretrained.py)."""
    import dataclasses

    from fairseq_joint.errors import CheckpointError
    from fairseq_joint.modules.lexical_encoder import LexicalModel

    LexicalModel.fit(["a python library", "a racing game", "a python game"], 100).save(str(tmp_path / "lexical.json"))
    models = {}
    for kind in ("wan", "pretrained", "hybrid"):
        dims = dict(embed_dim=4, encoder_dim=4, attention_dim=4) if kind == "wan" else {}
        cfg = GileClassifierConfig(head="gile", encoder=kind, pretrained_encoder=str(sentence_encoder), joint_dim="4",
                                   **dims)
        encoder = pretrained_sentence_encoder(cfg, str(tmp_path))
        models[kind] = GileClassifier.build(cfg, dataclasses.replace(stub_inputs(), sentence_encoder=encoder))
    for saved, built, said in (("wan", "pretrained", "trained without a pretrained sentence encoder"),
                               ("pretrained", "wan", "trained with a pretrained sentence encoder"),
                               ("hybrid", "pretrained", "trained with the lexical channel of --encoder hybrid"),
                               ("pretrained", "hybrid", "trained without the lexical channel of --encoder hybrid")):
        with pytest.raises(CheckpointError, match=f"^the checkpoint was {said}, but the model is built with --encoder "
                           f"{built}: load it with the configuration it was trained with$"):
            models[built].load_state_dict(models[saved].state_dict())


def test_the_tokenizer_lowercases_composes_and_splits_unspaced_scripts():
    from fairseq_joint.modules.tokenizer import tokenize

    composed = "Café für Ärzte"
    decomposed = unicodedata.normalize("NFD", composed)
    assert decomposed != composed and tokenize(decomposed) == tokenize(composed) == ["café", "für", "ärzte"]
    assert tokenize("A 3D-Spiel, 日本語 text") == ["a", "3d-spiel", ",", "日", "本", "語", "text"]
