"""The lexical channel of ``--encoder hybrid`` (fairseq_joint.modules.lexical_encoder): the TF-IDF model fitted,
stored and refused when altered; a text's projected features against a hand computation; the JL start preserving the
TF-IDF cosine; the packed batch rows; a checkpoint's lexical model that is not the data's refused in one line."""

import json
import math

import numpy as np
import pytest
import torch

from fairseq_joint.errors import CheckpointError, InputError, MissingFileError, OptionError
from fairseq_joint.modules.lexical_encoder import (
    LexicalModel,
    check_signature,
    init_projection,
    pack,
    project,
    signature,
    unpack,
)

TEXTS = ["the cat sat on the mat", "the dog sat on the log", "a cat and a dog", "cat cat dog", "the mat"]


def test_fit_keeps_terms_of_two_texts_and_transforms_as_sklearn():
    from sklearn.feature_extraction.text import TfidfVectorizer

    model = LexicalModel.fit(TEXTS, max_features=100)
    # word uni- and bigrams seen in >= 2 texts (single-letter 'a' is not a token of sklearn's pattern)
    assert model.terms == ["cat", "dog", "mat", "on", "on the", "sat", "sat on", "the", "the mat"]
    reference = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2).fit(TEXTS)
    assert np.allclose(model.transform(TEXTS).toarray(), reference.transform(TEXTS).toarray(), atol=1e-6)
    assert LexicalModel.fit(TEXTS, max_features=3).terms == ["cat", "dog", "the"]  # the most frequent 3
    with pytest.raises(OptionError, match=r"^--lexical-features must be an integer in \[1, 16777216\], got 0: "):
        LexicalModel.fit(TEXTS, max_features=0)
    with pytest.raises(InputError, match="no TF-IDF vocabulary"):
        LexicalModel.fit(["a", "b"], 10)


def test_the_projected_features_of_a_hand_made_text():
    """'cat cat dog' -> sublinear tf (1 + ln 2, 1) times idf, L2-normalized; Pᵀx is that weighted sum of P's rows."""
    model = LexicalModel.fit(TEXTS, max_features=100)
    x = model.transform(["cat cat dog"])
    col = {t: i for i, t in enumerate(model.terms)}
    idf = {t: math.log((1 + 5) / (1 + df)) + 1 for t, df in (("cat", 3), ("dog", 3))}
    raw = {"cat": (1 + math.log(2)) * idf["cat"], "dog": 1.0 * idf["dog"]}
    norm = math.sqrt(sum(v * v for v in raw.values()))
    assert x.indices.tolist() == sorted([col["cat"], col["dog"]])
    for term, value in raw.items():
        assert x[0, col[term]] == pytest.approx(value / norm, rel=1e-6)
    projection = torch.arange(len(model.terms) * 2, dtype=torch.float32).reshape(-1, 2)
    ids, weights = torch.from_numpy(x.indices.astype(np.int64))[None], torch.from_numpy(x.data)[None]
    expected = sum(x[0, col[t]] * projection[col[t]] for t in ("cat", "dog"))
    assert project(ids, weights, projection)[0].tolist() == pytest.approx(expected.tolist(), rel=1e-6)
    # the dense product it replaces
    dense = torch.from_numpy(x.toarray()).float() @ projection
    assert torch.allclose(project(ids, weights, projection), dense, atol=1e-5)


def test_the_jl_start_preserves_the_tfidf_cosine():
    """P ~ N(0, 1/d_l): (Pᵀx)·(Pᵀy) ≈ x·y, within a few d_l^-1/2 for every pair, unbiased on average."""
    texts = [f"word{i % 7} word{i % 5} word{i % 3} shared term{i}" for i in range(40)]
    model = LexicalModel.fit(texts, 1000)
    x = model.transform(texts)
    cosine = (x @ x.T).toarray()
    d = 256
    projection = init_projection(model.num_features, d, torch.Generator().manual_seed(0))
    rows = [(torch.zeros(1), torch.from_numpy(x[i].indices.astype(np.int64)), torch.from_numpy(x[i].data))
            for i in range(len(texts))]
    _, ids, weights = unpack(pack(rows), 1)
    z = project(ids, weights, projection).double().numpy()
    approx = z @ z.T
    error = approx - cosine
    assert np.abs(error).max() < 4.5 / math.sqrt(d)
    assert abs(error.mean()) < 0.02 and np.corrcoef(approx.ravel(), cosine.ravel())[0, 1] > 0.9


def test_pack_and_unpack_keep_embeddings_ids_and_weights():
    rows = [(torch.tensor([0.6, 0.8]), torch.tensor([3, 70000]), torch.tensor([0.25, 0.5])),
            (torch.tensor([1.0, 0.0]), torch.tensor([], dtype=torch.long), torch.tensor([]))]
    packed = pack(rows)
    assert packed.dtype == torch.float64 and packed.shape == (2, 2 + 2 * 2)
    e, ids, w = unpack(packed, 2)
    assert e.tolist() == [[0.6000000238418579, 0.800000011920929], [1.0, 0.0]]
    assert ids.tolist() == [[3, 70000], [0, 0]] and w.tolist() == [[0.25, 0.5], [0.0, 0.0]]
    assert packed[[1]].shape == (1, 6)  # a label set's rows index as any tensor's
    projection = torch.ones(70001, 3)
    assert project(ids, w, projection).tolist() == [[0.75] * 3, [0.0] * 3]  # padding adds nothing
    with pytest.raises(ValueError, match="width 3"):
        unpack(packed, 3)


def test_stored_model_round_trip_and_refusals(tmp_path):
    model = LexicalModel.fit(TEXTS, 100)
    path = tmp_path / "lexical.json"
    model.save(str(path))
    again = LexicalModel.load(str(path))
    assert again.terms == model.terms and again.fingerprint == model.fingerprint
    assert (again.transform(TEXTS) != model.transform(TEXTS)).nnz == 0
    content = json.loads(path.read_text())
    content["idf"][0] += 0.5
    path.write_text(json.dumps(content))
    with pytest.raises(InputError, match="was changed after it was written"):
        LexicalModel.load(str(path))
    for other in ({**content, "format": "other"}, {**content, "idf": content["idf"][1:]}, [content]):
        path.write_text(json.dumps(other))
        with pytest.raises(InputError, match=r"not a lexical feature file \(format .*, one idf weight a term\): "):
            LexicalModel.load(str(path))
    path.write_text("{not json")
    with pytest.raises(InputError, match="not a lexical feature file.*--lexical-features"):
        LexicalModel.load(str(path))
    with pytest.raises(MissingFileError, match=r"^\S+none.json: no such file: re-run fairseq-joint-preprocess-gile with "):
        LexicalModel.load(str(tmp_path / "none.json"))


def test_a_checkpoint_of_another_lexical_model_is_refused():
    model = LexicalModel.fit(TEXTS, 100)
    check_signature(signature(model, 8), signature(LexicalModel.fit(list(TEXTS), 100), 8), "DATA/lexical.json")
    other = LexicalModel.fit(TEXTS[:4], 100)  # other training texts: other idf
    with pytest.raises(CheckpointError, match=r"^DATA/lexical.json is not the lexical model the checkpoint was "
                       r"trained with .*give the data directory it was trained on \(--data\)"):
        check_signature(signature(model, 8), signature(other, 8), "DATA/lexical.json")
    with pytest.raises(CheckpointError, match="has 8 dimensions, not --lexical-dim 16"):
        check_signature(signature(model, 8), signature(model, 16), "DATA/lexical.json")


def test_hybrid_encoder_refusals_before_any_model_is_loaded(tmp_path):
    from fairseq_joint.models.gile_classifier import GileClassifierConfig, pretrained_sentence_encoder

    cfg = GileClassifierConfig(encoder="hybrid", pretrained_encoder=str(tmp_path / "none"))
    with pytest.raises(MissingFileError, match=rf"^--encoder hybrid: {tmp_path}/lexical.json: no such file: re-run "
                       "fairseq-joint-preprocess-gile with --lexical-features"):
        pretrained_sentence_encoder(cfg, str(tmp_path))
