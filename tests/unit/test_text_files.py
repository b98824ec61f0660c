"""The one text reader (fairseq_joint/text_files.py) and the package's readers built on it: a UTF-8 byte-order mark is
not part of the first line; bytes that are not UTF-8 are refused with the file, the line and the fix."""

import re
import sys

import pytest
import torch

from fairseq_joint.data.gile_files import read_label_file, read_label_lines
from fairseq_joint.errors import InputError, MissingFileError, OptionError
from fairseq_joint.modules.pretrained_embedding import load_word_vectors_
from fairseq_joint.text_files import read_text, text_lines

BOM = b"\xef\xbb\xbf"
LATIN1 = "Straße café".encode("latin-1")  # 0xdf is not UTF-8 here


def test_byte_order_mark_and_line_ends(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(BOM + b"first\r\nsecond\n\nfourth")
    assert list(text_lines(str(path))) == [(1, "first"), (2, "second"), (3, ""), (4, "fourth")]
    path.write_bytes(b"a\n" + BOM + b"b\n")  # only a leading mark is one
    assert read_text(str(path)) == ["a", "\ufeffb"]


def test_non_utf8_is_refused_with_file_line_and_fix(tmp_path):
    path = tmp_path / "latin.txt"
    path.write_bytes(b"fine\n" + LATIN1 + b"\n")
    with pytest.raises(InputError, match=rf"--text {path}:2: not UTF-8 \(byte 0xdf at column 5\): save the file as "
                                         r"UTF-8 \(e\.g\. iconv -f LATIN1 -t UTF-8\)"):
        read_text(str(path), "--text")


def test_label_files_with_a_byte_order_mark_and_latin1(tmp_path):
    labels = tmp_path / "labels.tsv"
    labels.write_bytes(BOM + b"A\tapples\nB\tpears\n")
    assert list(read_label_file(str(labels))) == ["A", "B"]  # "A", not "\ufeffA": the label is found
    labels.write_bytes(b"A\tapples\nB\t" + LATIN1 + b"\n")
    with pytest.raises(InputError, match=r"labels.tsv:2: not UTF-8"):
        read_label_file(str(labels))
    rows = tmp_path / "train.labels"
    rows.write_bytes(BOM + b"A B\nB\n")
    assert read_label_lines(str(rows)) == [["A", "B"], ["B"]]


def test_word_vectors_with_a_byte_order_mark_and_latin1(tmp_path, caplog):
    from fairseq.data import Dictionary

    d = Dictionary()
    d.add_symbol("apple")
    emb = torch.nn.Embedding(len(d), 2)
    path = tmp_path / "v.txt"
    path.write_bytes(BOM + b"1 2\napple 1 2\n")
    assert load_word_vectors_(emb, d, str(path)) == (1, 1)
    assert emb.weight[d.index("apple")].tolist() == [1, 2]
    path.write_bytes(b"1 2\n" + LATIN1[:6] + b" 1 2\n")
    with pytest.raises(InputError, match=r"--embed-path .*v.txt:2: not UTF-8"):
        load_word_vectors_(emb, d, str(path))
    with pytest.raises(MissingFileError, match=r"--embed-path .*none.txt: no such file"):
        load_word_vectors_(emb, d, str(tmp_path / "none.txt"))
    # the header is the first line with content, as the multilingual --embed-path reads it too
    path.write_bytes(b"\n1 2\n\napple 3 4\n")
    assert load_word_vectors_(emb, d, str(path)) == (1, 1) and emb.weight[d.index("apple")].tolist() == [3, 4]
    path.write_bytes(b"\n1 3\napple 3 4 5\n")
    with pytest.raises(InputError, match=rf"^--embed-path {path}: the vectors have 3 dimensions but --embed-dim is 2"):
        load_word_vectors_(emb, d, str(path))
    path.write_bytes(b"\n\n")
    with pytest.raises(InputError, match=rf"^--embed-path {path} holds no vectors: give a word2vec text file$"):
        load_word_vectors_(emb, d, str(path))
    # a value that is no finite float32 number (NaN gradients in training), a word twice (one vector kept without a
    # word before), a header whose count is not the file's (a copy cut short)
    for value in (b"nan", b"inf", b"1e39"):
        path.write_bytes(b"1 2\napple 3 " + value + b"\n")
        with pytest.raises(InputError, match=rf"^{path}:2: the vector of 'apple' holds a value that is not a finite "
                                             r"float32 number: fix the line, or leave the word out"):
            load_word_vectors_(emb, d, str(path))
    path.write_bytes(b"apple 3 4\npear 1 1\napple 5 6\n")  # as gensim reads it: the first kept, and said
    with caplog.at_level("WARNING"):
        assert load_word_vectors_(emb, d, str(path)) == (1, 3) and emb.weight[d.index("apple")].tolist() == [3, 4]
    assert f"--embed-path {path}: 1 word(s) given twice, the first vector of each kept: 'apple' (lines 1 and 3)" \
        in caplog.text
    path.write_bytes(b"3 2\napple 3 4\npear 1 1\n")
    with pytest.raises(InputError, match=rf"^--embed-path {path}: its header says 3 vectors but it holds 2: give the "
                                         r"whole file \(a copy cut short\?\), or correct the header's count$"):
        load_word_vectors_(emb, d, str(path))
    path.write_bytes(b"2 2\napple 3 4\npear 1 1\n")
    assert load_word_vectors_(emb, d, str(path)) == (1, 2)


def test_a_label_line_with_a_second_tab_is_refused(tmp_path):
    """label<TAB>description: a third field (another format's column) was read into the description without a word."""
    labels = tmp_path / "labels.tsv"
    labels.write_text("A\tapples\nB\tcars\t0.5\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{labels}:2: expected 'label<TAB>description', found 3 tab-separated "
                                         r"field\(s\): put one tab between the label and its description"):
        read_label_file(str(labels))


def test_a_missing_directory_or_empty_file_is_refused_by_the_one_reader(tmp_path):
    """text_lines owns the check that a file is there (opened at the call, before any line is read), content_lines the
    check that it holds something: the readers built on them (label files, examples, aligned documents) rely on both."""
    from fairseq_joint.data.inputs import read_examples, read_parallel_documents

    for path in (tmp_path / "none.tsv", tmp_path):
        with pytest.raises(MissingFileError, match=rf"^label file {path}: no such file: give a label<TAB>description file"):
            read_label_file(str(path))
        with pytest.raises(MissingFileError, match=rf"^{path}: no such file"):
            read_examples(str(path), "tsv")
    with pytest.raises(MissingFileError, match=r"^--aligned pl: .*none.jsonl: no such file: give a JSONL file of "
                                               "documents"):
        read_parallel_documents("pl", str(tmp_path / "none.jsonl"))
    blank = tmp_path / "blank.tsv"
    blank.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"^label file {blank} holds no labels: give a label<TAB>description file$"):
        read_label_file(str(blank))
    with pytest.raises(InputError, match=rf"^{blank} holds no examples: give a JSONL or TSV file of \(text, labels\)$"):
        read_examples(str(blank))
    with pytest.raises(InputError, match=rf"^--aligned pl: {blank} holds no documents: give a JSONL file of documents$"):
        read_parallel_documents("pl", str(blank))


def test_a_record_of_another_language_is_refused_by_the_one_record_reader(tmp_path):
    """json_record owns the check of a JSONL record's ``lang`` field: examples read for one ``--lang`` and the aligned
    documents of ``--aligned LANG=FILE`` rely on it."""
    from fairseq_joint.data.inputs import read_examples, read_parallel_documents

    path = tmp_path / "train.jsonl"
    path.write_text('{"id": 1, "text": "a", "labels": ["x"], "lang": null}\n'
                    '{"id": 2, "text": "b", "labels": ["x"], "lang": "pl"}\n', encoding="utf-8")
    assert len(read_examples(str(path))) == len(read_examples(str(path), lang="pl")) == 2  # null names no language
    with pytest.raises(InputError, match=rf"^{path}:2: lang 'pl' contradicts --lang uk: give each language its own"):
        read_examples(str(path), lang="uk")
    with pytest.raises(InputError, match=rf"^{path}:2: lang 'pl' contradicts --aligned uk: give each language its"):
        read_parallel_documents("uk", str(path))


def test_an_example_label_is_a_string_or_an_integer_id(tmp_path):
    """A JSONL example's labels are strings or integer ids (3 is the label '3'); JSON's null, true and 1.5 are no
    label, and are refused rather than read as 'None', 'True', '1.5'."""
    from fairseq_joint.data.inputs import read_examples

    path = tmp_path / "train.jsonl"
    path.write_text('{"text": "a", "labels": [3, " b "]}\n{"text": "c", "labels": "d e"}\n', encoding="utf-8")
    assert [labels for _, _, labels in read_examples(str(path))] == [["3", "b"], ["d", "e"]]
    for labels in ("[null]", "[true]", "[1.5]", '["a b"]', "[]", '[""]'):
        path.write_text(f'{{"text": "a", "labels": ["x"]}}\n{{"text": "a", "labels": {labels}}}\n', encoding="utf-8")
        with pytest.raises(InputError, match=rf"^{path}:2: needs at least one label, each a string \(or an integer id\) "
                                             "without whitespace, got "):
            read_examples(str(path))


def test_an_example_file_is_refused_by_line(tmp_path):
    """An example file's format follows its extension (else --format is asked for); a JSONL text that is no string, a
    TSV line of another number of fields than two and an empty text are refused with the file and the line."""
    from fairseq_joint.data.inputs import read_examples

    path = tmp_path / "train.txt"
    path.write_text("a\tb\n", encoding="utf-8")
    with pytest.raises(OptionError, match=rf"^{path}: cannot tell the format from the extension; pass --format "
                                          "jsonl\\|tsv$"):
        read_examples(str(path))
    assert read_examples(str(path), fmt="tsv") == [(1, "a", ["b"])]
    for name, content, said in (
            ("train.jsonl", '{"text": 3, "labels": ["x"]}', "'text' must be a string and 'labels' a list"),
            ("train.jsonl", '{"text": "a", "labels": {"x": 1}}', "'text' must be a string and 'labels' a list"),
            ("train.tsv", "a\tb\tc", "expected 'text<TAB>labels', found 3 fields"),
            ("train.tsv", " \tb", "empty text")):
        path = tmp_path / name
        path.write_text('{"text": "a", "labels": ["x"]}\n' if name.endswith(".jsonl") else "a\tx\n", encoding="utf-8")
        with open(path, "a", encoding="utf-8") as f:
            f.write(content + "\n")
        with pytest.raises(InputError, match=rf"^{path}:2: {re.escape(said)}$"):
            read_examples(str(path))


def test_the_raw_texts_of_a_split_are_json_strings_one_a_binarized_text(tmp_path):
    """``{split}.text``, which a pretrained encoder reads: a line that is no JSON string, or another number of texts
    than the binarized split holds, is refused with the fix (binarize again)."""
    from fairseq_joint.data.gile_files import read_raw_texts

    path = tmp_path / "valid.text"
    path.write_text('"a b"\n"c"\n', encoding="utf-8")
    assert read_raw_texts(str(tmp_path), "valid", 2) == ["a b", "c"]
    with pytest.raises(InputError, match=rf"^{path} has 2 texts but valid.input.bin 3: .*fairseq-joint-preprocess-gile"):
        read_raw_texts(str(tmp_path), "valid", 3)
    path.write_text('"a b"\n["c"]\n', encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{path}:2: not a JSON string: .*fairseq-joint-preprocess-gile"):
        read_raw_texts(str(tmp_path), "valid", 2)


def test_an_aligned_document_has_an_id_and_a_text(tmp_path):
    """--aligned documents: an id is a string or an integer, a text a string (not the document 'None')."""
    from fairseq_joint.data.inputs import read_parallel_documents

    path = tmp_path / "pl.jsonl"
    path.write_text('{"id": 7, "text": "a"}\n{"id": "x", "text": "b"}\n', encoding="utf-8")
    assert read_parallel_documents("pl", str(path)) == {"7": "a", "x": "b"}
    for record in ('{"id": 1, "text": null}', '{"id": null, "text": "a"}', '{"id": true, "text": "a"}',
                   '{"id": 1.5, "text": "a"}', '{"id": 1, "text": ["a"]}'):
        path.write_text(record + "\n", encoding="utf-8")
        with pytest.raises(InputError, match=rf"^{path}:1: needs an id \(a string or an integer\) and a 'text' string"):
            read_parallel_documents("pl", str(path))


def test_one_check_that_a_named_file_or_directory_is_there(tmp_path):
    from fairseq_joint.text_files import check_exists

    (tmp_path / "f").write_text("")
    assert check_exists(str(tmp_path / "f"), "--x", "fix") == str(tmp_path / "f")
    assert check_exists(str(tmp_path), "--x", "fix", directory=True) == str(tmp_path)
    for path, directory, said in ((tmp_path, False, "file"), (tmp_path / "f", True, "directory"),
                                  (tmp_path / "none", False, "file")):
        with pytest.raises(MissingFileError, match=rf"^--x {path}: no such {said}: give it$"):
            check_exists(str(path), "--x", "give it", directory)
    with pytest.raises(MissingFileError, match=rf"^{tmp_path / 'none'}: no such file: give it$"):  # no role to name
        check_exists(str(tmp_path / "none"), "", "give it")


def test_no_command_writes_over_one_of_its_inputs(tmp_path):
    """check_new_output: an output that is an input (or a link to one) is refused before anything is read or
    written; the commands that write a file check every input they read (score, word-vectors, export)."""
    from fairseq_joint.cli import export_label_embedding, score, word_vectors
    from fairseq_joint.text_files import check_new_output

    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_text("a b\n")
    ref.write_text("a b\n")
    (tmp_path / "link.txt").symlink_to(hyp)
    assert check_new_output(str(tmp_path / "new.txt"), "--json", [("--hyp", str(hyp)), ("--ref", None)])
    with pytest.raises(InputError, match=rf"^--json {tmp_path}/link.txt is --hyp {hyp}, which writing it would "
                                         "destroy: give a new file$"):
        check_new_output(str(tmp_path / "link.txt"), "--json", [("--ref", str(ref)), ("--hyp", str(hyp))])
    for main, argv, said in (
            (score.main, ["--hyp", hyp, "--ref", ref, "--json", ref], "--json .*ref.txt is --ref"),
            (word_vectors.main, ["--text", ref, hyp, "--output", hyp], "--output .*hyp.txt is --text"),
            (export_label_embedding.main, [hyp, "--output", hyp], "--output .*hyp.txt is the checkpoint")):
        with pytest.raises(InputError, match=said):
            main([str(x) for x in argv])
    assert hyp.read_text() == ref.read_text() == "a b\n"


def test_stdin_is_read_as_a_file_is(monkeypatch):
    """predict-labels' texts from stdin: a byte-order mark is not part of the first text, a form feed or U+2028 ends
    no text (one output line per input line), and bytes that are not UTF-8 are refused as in a file."""
    import io

    from fairseq_joint.text_files import read_stdin

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(BOM + "a\x0cb\r\nc\u2028d\n\ne".encode())))
    assert read_stdin() == ["a\x0cb", "c\u2028d", "", "e"]
    assert not sys.stdin.closed  # read, not closed
    monkeypatch.setattr(sys, "stdin", io.StringIO("x\ny\n"))  # a text stream in its place: no buffer
    assert read_stdin() == ["x", "y"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"fine\n" + LATIN1 + b"\n")))
    with pytest.raises(InputError, match=r"^stdin:2: not UTF-8 \(byte 0xdf at column 5\)"):
        read_stdin()


def test_fairseq_interactive_reads_its_input_as_fairseq_did_but_refuses_what_is_not_text(monkeypatch, tmp_path):
    """The ``utf8_input`` patch's reader: lines in lists of --buffer-size, stripped, a bare carriage return ending a
    line as in fairseq's universal newlines, a byte-order mark dropped; stdin in the locale's encoding (Latin-1 under
    a Latin-1 locale, as fairseq read it), bytes that are not UTF-8 in a UTF-8 one refused with the line."""
    import io

    from fairseq_joint.text_files import buffered_read

    def stdin(data: bytes, encoding="utf-8"):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding=encoding))
        return list(buffered_read(None, "-", 2))

    assert stdin(BOM + b" a \r\nb\rc\n\nd") == [["a", "b"], ["c", ""], ["d"]]
    assert stdin(LATIN1 + b"\n", "latin-1") == [[LATIN1.decode("latin-1")]]
    with pytest.raises(InputError, match=r"^stdin:2: not UTF-8 \(byte 0xdf at column 5\)"):
        stdin(b"fine\n" + LATIN1 + b"\n")
    path = tmp_path / "in.txt"
    path.write_bytes(b"x\ty\n" + LATIN1 + b"\n")  # a tab inside (fairseq's --constraints) stays
    lines = buffered_read(None, str(path), 1)
    assert next(lines) == ["x\ty"]
    with pytest.raises(InputError, match=rf"^--input {re.escape(str(path))}:2: not UTF-8"):
        next(lines)


@pytest.mark.parametrize("line, said", [
    ('{"text": "a", "labels": ["x"], "text": "b"}', "the key 'text' is given twice"),  # the last would win
    ('{"text": "a", "labels": [' + "1" * 5000 + "]}", r"Exceeds the limit \(4300 digits\)"),
    ("[" * 100000 + "]" * 100000, "nested too deeply"),
    ('{"text": "a \\ud800", "labels": ["x"]}', "a lone surrogate, which is no text"),
    ('{"text": "a"', "Expecting ',' delimiter"),
])
def test_a_jsonl_line_python_cannot_read_as_text_is_refused_by_line(tmp_path, line, said):
    from fairseq_joint.data.inputs import read_examples

    path = tmp_path / "train.jsonl"
    path.write_text('{"text": "fine", "labels": ["x"]}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{path}:2: not valid JSON \({said}.*\): give one JSON object a line$"):
        read_examples(str(path))


def test_a_dictionary_fairseq_cannot_read_is_refused_naming_it(tmp_path):
    from fairseq_joint.data.inputs import load_dictionary

    path = tmp_path / "dict.de.txt"
    for content, said in ((b"der 3\ndie\n", "Incorrect dictionary format"), (b"der 3\nder 3\n", "Duplicate word"),
                          (b"der 3\n" + LATIN1[:6] + b" 2\n", "Incorrect encoding detected")):
        path.write_bytes(content)
        with pytest.raises(InputError, match=rf"^--dict {path} is not a fairseq dictionary \(.*{said}.*\): give the "
                                             "dict file fairseq-preprocess wrote$"):
            load_dictionary(str(path), "--dict")
    path.write_bytes(b"der 3\ndie 2\n")
    assert load_dictionary(str(path), "--dict").index("die") == 5  # after the 4 special symbols


def test_export_refuses_heatmap_options_before_reading_the_checkpoint(tmp_path):
    from fairseq_joint.cli.export_label_embedding import main
    from fairseq_joint.errors import OptionError, Refusal

    for argv, kind, said in (
            (["--heatmap-labels", "a", "b"], Refusal, "^--heatmap-labels are the rows of --heatmap: add --heatmap"),
            (["--heatmap", "h.xyz", "--heatmap-labels", "a", "b"], OptionError,
             r"^--heatmap h.xyz: matplotlib writes no .xyz file: give a name ending in .*\.png"),
            (["--heatmap", "h.png", "--heatmap-labels", "a"], Refusal, "^--heatmap needs at least two --heatmap-labels, "
                                                                       "got 1$")):
        with pytest.raises(kind, match=said):
            main([str(tmp_path / "none.pt"), *argv])
    from fairseq_joint.cli.export_label_embedding import target_dictionary_path

    with pytest.raises(Refusal, match="^ck.pt records no data directory: pass --dict dict.TGT.txt$"):
        target_dictionary_path({"cfg": {"task": {"data": ""}}}, "ck.pt")
