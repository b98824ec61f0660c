"""fairseq-joint-count-params in process, from configurations (no checkpoint): |Θ| of the output layer against
the paper's capacity formulas (Eqs. 7-10, 16), worked out by hand from the dimensions."""

import pytest

from fairseq_joint.cli import count_params

V = 5000


def count(*flags):
    return count_params.counts([str(f) for f in flags] + ["--json"])


# d = dh = 64 (embedding and decoder output), dj = 96, |V| = 5000, one bias per class
@pytest.mark.parametrize(
    "kind, expected, formula, biases",
    [
        ("softmax", V * 64 + V, V * 64 + V, 0),  # Eq. 8: |V|·dh + |V|
        ("tied", V, V, 0),  # Eq. 9: |V| (W = Eᵀ)
        ("bilinear", 64 * 64 + V, 64 * 64 + V, 0),  # Eq. 10: d·dh + |V|
        ("label", 64 * 64 + V, 64 * 64 + V, 0),  # Eq. 7a: d·dh + |V|
        ("context", 64 * 64 + V, 64 * 64 + V, 0),  # Eq. 7b: d·dh + |V|
        ("joint", 64 * 96 + 96 * 64 + V + 2 * 96, 64 * 96 + 96 * 64 + V, 2 * 96),  # Eq. 16 + b_u, b_v (2·dj)
    ],
)
def test_configuration_counts_follow_the_equations(kind, expected, formula, biases):
    r = count("--arch", "joint_lstm", "--encoder-embed-dim", 64, "--decoder-embed-dim", 64,
              "--decoder-out-embed-dim", 64, "--encoder-hidden-size", 64, "--decoder-hidden-size", 64,
              "--output-layer", kind, "--joint-dim", 96, "--src-vocab", V, "--tgt-vocab", V)
    assert r["output_layer"] == expected
    assert r["formula"] == formula
    assert r["projection_biases"] == biases
    assert r["vocab"] == V


def test_tied_total_is_softmax_total_minus_the_output_matrix():
    base = ["--arch", "joint_lstm_tiny", "--src-vocab", V, "--tgt-vocab", V]
    softmax, tied = count(*base, "--output-layer", "softmax"), count(*base, "--output-layer", "tied")
    assert softmax["total"] - tied["total"] == V * 32
