"""fairseq-joint-count-params in process, from configurations (no checkpoint): |Θ| of the output layer against
the paper's capacity formulas (Eqs. 7-10, 16), worked out by hand from the dimensions."""

import pytest

from fairseq_joint.cli import count_params
from fairseq_joint.loaders import model_from_flags

V = 5000


def count(*flags):
    return count_params.counts([str(f) for f in flags] + ["--json"])


FLAGS = ["--arch", "joint_lstm", "--encoder-embed-dim", 64, "--decoder-embed-dim", 64, "--decoder-out-embed-dim", 64,
         "--encoder-hidden-size", 64, "--decoder-hidden-size", 64]


def layer_flags(kind):
    """``--output-layer kind``, with dj = 96 for the joint layer (the others refuse a --joint-dim they do not read)."""
    return ["--output-layer", kind, *(["--joint-dim", 96] if kind == "joint" else [])]


# d = dh = 64 (embedding and decoder output), dj = 96, |V| = 5000, one bias per class: the paper's capacities
@pytest.mark.parametrize(
    "kind, paper, biases",
    [
        ("softmax", 325_000, 0),  # Eq. 8: |V|·dh + |V| = 5000·64 + 5000
        ("tied", 5_000, 0),  # Eq. 9: |V| (W = Eᵀ)
        ("bilinear", 9_096, 0),  # Eq. 10: d·dh + |V| = 64·64 + 5000
        ("label", 9_096, 0),  # Eq. 7a: d·dh + |V|
        ("context", 9_096, 0),  # Eq. 7b: d·dh + |V|
        ("joint", 17_288, 192),  # Eq. 16: d·dj + dj·dh + |V| = 64·96 + 96·64 + 5000; b_u, b_v: 2·dj
    ],
)
def test_configuration_counts_follow_the_equations(kind, paper, biases):
    r = count(*FLAGS, *layer_flags(kind), "--src-vocab", V, "--tgt-vocab", V)
    assert r["formula"] == paper and r["projection_biases"] == biases and r["vocab"] == V
    # what the built model owns: the output layer's parameters other than the decoder's input embedding E (which
    # tied, label and joint read), and every parameter in the total
    model = model_from_flags([str(f) for f in (*FLAGS, *layer_flags(kind))], V, V)
    embedding = model.decoder.embed_tokens.weight
    owned = sum(p.numel() for p in model.decoder.output_projection.parameters() if p is not embedding)
    assert r["output_layer"] == owned == paper + biases
    assert r["total"] == sum(p.numel() for p in model.parameters())


def test_tied_total_is_softmax_total_minus_the_output_matrix():
    base = ["--arch", "joint_lstm_tiny", "--src-vocab", V, "--tgt-vocab", V]
    softmax, tied = count(*base, "--output-layer", "softmax"), count(*base, "--output-layer", "tied")
    assert softmax["total"] - tied["total"] == V * 32
