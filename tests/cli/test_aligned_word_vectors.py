"""fairseq-joint-word-vectors --aligned: one space for several languages from id-parallel documents
(pseudo-bilingual skip-gram), per-language vector files, the alignment measured on held-out documents; bad input."""

import json
import random

import pytest
from conftest import cli

from fairseq_joint.cli.word_vectors import main
from fairseq_joint.errors import InputError, Refusal


def parallel_corpus(tmp_path, aligned=True, docs=600, seed=0):
    """en and xx documents of the same ids; xx's words are en's with an "x" in front (a one-to-one dictionary).
    With ``aligned=False`` the xx ids are permuted: the same texts, but no document is joined to its translation."""
    rng = random.Random(seed)
    topics = [[f"t{t}w{i}" for i in range(8)] for t in range(20)]
    common = [f"c{i}" for i in range(6)]
    xx_ids = list(range(docs))
    if not aligned:
        rng.shuffle(xx_ids)
    en, xx = [], []
    for k in range(docs):
        topic = topics[rng.randrange(len(topics))]
        words = [rng.choice(topic) for _ in range(10)] + [rng.choice(common) for _ in range(4)]
        rng.shuffle(words)
        en.append({"id": k, "text": " ".join(words), "labels": ["a"], "lang": "en"})
        xx.append({"id": xx_ids[k], "text": " ".join("x" + w for w in words), "labels": ["a"], "lang": "xx"})
    for lang, rows in (("en", en), ("xx", xx)):
        (tmp_path / f"{lang}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "en.jsonl", tmp_path / "xx.jsonl"


def read_vectors(path):
    lines = path.read_text().splitlines()
    n, dim = map(int, lines[0].split())
    words = [line.split(" ", 1)[0] for line in lines[1:]]
    assert len(words) == n and all(len(line.split()) == dim + 1 for line in lines[1:])
    return words


def test_aligned_spaces_retrieve_translations_and_a_misaligned_corpus_does_not(tmp_path):
    results = {}
    for aligned in (True, False):
        d = tmp_path / str(aligned)
        d.mkdir()
        en, xx = parallel_corpus(d, aligned)
        (d / "labels.tsv").write_text("a\tt0w1 t0w2 c1\n")
        cli("fairseq-joint-word-vectors", "--aligned", f"en={en}", f"xx={xx}", "--labels", d / "labels.tsv",
            "--dim", 32, "--heldout-docs", 40, "--output", d / "vectors")
        report = json.loads((d / "vectors" / "alignment.json").read_text())
        assert report["languages"] == ["en", "xx"] and report["heldout_docs"] == 40
        results[aligned] = report["alignment"]["xx"]["precision_at_1"]
        assert report["alignment"]["xx"]["chance"] == pytest.approx(1 / 40)
        en_words, xx_words = read_vectors(d / "vectors" / "vectors.en.txt"), read_vectors(d / "vectors" / "vectors.xx.txt")
        # each file holds its own language's words, untagged; the label words are the first language's
        assert set(en_words) == {f"t{t}w{i}" for t in range(20) for i in range(8)} | {f"c{i}" for i in range(6)}
        assert set(xx_words) == {"x" + w for w in en_words}
    # merged-and-shuffled translations share contexts: 95% of held-out documents find their translation here
    # (chance 2.5%); with the same texts joined to the wrong ids nothing aligns
    assert results[True] >= 0.6 and results[False] <= 0.15, results


def test_a_language_written_without_spaces_gets_character_tokens(tmp_path):
    en, _ = parallel_corpus(tmp_path, docs=40)
    rows = [{"id": k, "text": "これはテスト用のパッケージです python", "labels": ["a"], "lang": "ja"} for k in range(40)]
    (tmp_path / "ja.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    main(["--aligned", f"en={en}", f"ja={tmp_path / 'ja.jsonl'}", "--dim", "8", "--epochs", "1",
          "--heldout-docs", "5", "--output", str(tmp_path / "v")])
    # the tokenizer gives each kana/kanji its own token (a clause is not one 'word'); Latin runs stay words
    assert set(read_vectors(tmp_path / "v" / "vectors.ja.txt")) == set("これはテスト用のパッケージです") | {"python"}


def test_aligned_bad_input_is_refused_in_one_line(tmp_path):
    en, xx = parallel_corpus(tmp_path, docs=40)
    out = ["--output", str(tmp_path / "v")]
    cases = [
        (["--aligned", f"en={en}"], "at least two LANG=FILE"),
        (["--aligned", f"en={en}", str(xx)], "give LANG=FILE (e.g. pl=pl/train.jsonl)$"),
        (["--aligned", f"en={en}", f"xx={xx}", "--data", str(en)], "drop --data/--text"),
        (["--aligned", f"en={en}", f"xx={xx}", "--heldout-docs", "30"], "use at most 20"),
        (["--aligned", f"en={en}", f"pl={xx}"], "xx.jsonl:1: lang 'xx' contradicts --aligned pl:"),
        (["--aligned", f"en={en}", f"en={xx}"], "LANG en is given twice: give each LANG once"),
        (["--aligned", f"en={en}", f"xx={tmp_path / 'none.jsonl'}"], "--aligned .*none.jsonl: no such file"),
        (["--aligned", f"en={en}", f"xx={xx}", "--output", str(en)], "--output .*en.jsonl is a file: give a directory "
                                                                     "(for vectors.LANG.txt) with --aligned"),
    ]
    for argv, message in cases:
        with pytest.raises(Refusal, match=message.replace("(", r"\(").replace(")", r"\)")):
            main([*out, *argv])  # a later --output wins
    (tmp_path / "blank.txt").write_text("\n \n")
    with pytest.raises(Refusal, match="^no text to train on: give --data and/or --text$"):
        main(["--text", str(tmp_path / "blank.txt"), *out])
    (tmp_path / "yy.jsonl").write_text(json.dumps({"id": "other", "text": "a b", "labels": ["a"]}) + "\n")
    with pytest.raises(InputError, match="no document id is in every --aligned file"):
        main(["--aligned", f"en={en}", f"yy={tmp_path / 'yy.jsonl'}", *out])
    (tmp_path / "dup.jsonl").write_text("".join(json.dumps({"id": 1, "text": "a", "labels": ["a"]}) + "\n" for _ in "ab"))
    with pytest.raises(InputError, match="dup.jsonl:2: id 1 is given twice"):
        main(["--aligned", f"en={en}", f"dup={tmp_path / 'dup.jsonl'}", *out])
    (tmp_path / "noid.jsonl").write_text(json.dumps({"text": "a", "labels": ["a"]}) + "\n")
    with pytest.raises(InputError, match="noid.jsonl:1: needs the fields 'id' and 'text'"):
        main(["--aligned", f"en={en}", f"noid={tmp_path / 'noid.jsonl'}", *out])
