"""The recipes' helpers by hand: frequency bins (Fig. 3), cleaning as clean-corpus-n.perl, hypotheses in order,
SGM/IWSLT extraction, significance marks."""

import frequency_bins
import make_mirror
import prepare_text
import pytest
import reference_bins

from fairseq_joint.cli import score as score_translations


def test_frequency_bins_cut_the_vocabulary_in_thirds_and_clip_matches():
    train = ["a a a a b b b c c d", "e f"]  # counts a4 b3 c2 d1 e1 f1 -> ranked a b c d e f
    word_bin = frequency_bins.frequency_bins(train)
    assert word_bin == {"a": "high", "b": "high", "c": "medium", "d": "medium", "e": "low", "f": "low"}
    s = frequency_bins.bin_scores(word_bin, hyps=["a a a c x"], refs=["a c c e y"])
    # high: hyp a x3, ref a x1 -> 1 match, P 1/3, R 1/1
    assert s["high"]["matches"] == 1 and s["high"]["precision"] == pytest.approx(100 / 3)
    assert s["high"]["recall"] == pytest.approx(100.0) and s["high"]["f1"] == pytest.approx(50.0)
    # medium: hyp c x1, ref c x2 -> 1 match, P 1, R 1/2, F1 2/3
    assert s["medium"]["f1"] == pytest.approx(200 / 3)
    # low: hyp none, ref e -> 0; unseen tokens x (hyp) and y (ref) counted, not dropped
    assert s["low"]["f1"] == 0 and s["low"]["ref_tokens"] == 1
    assert s["unseen"]["hyp_tokens"] == 1 and s["unseen"]["ref_tokens"] == 1 and s["unseen"]["matches"] == 0


def test_reference_bins_sum_each_words_pieces_and_average_per_bin():
    pieces = ["vis@@", "it@@", "ed", "the", "x@@"]
    words = reference_bins.words_of(pieces, [1.0, 2.0, 3.0, 0.5, 4.0])
    # a word's NLL is the sum over its pieces; a trailing "@@" piece still closes a word (nothing dropped)
    assert words == [("visited", 6.0), ("the", 0.5), ("x", 4.0)]
    with pytest.raises(ValueError, match="5 pieces but 4 scores"):
        reference_bins.words_of(pieces, [1.0] * 4)
    word_bin = {"the": "high", "visited": "low"}
    b = reference_bins.bin_nll(word_bin, words + [("the", 1.5)])
    assert b["high"]["words"] == 2 and b["high"]["nll_per_word"] == pytest.approx(1.0)
    assert b["high"]["ppl_per_word"] == pytest.approx(2.718281828)
    assert b["low"]["nll_per_word"] == pytest.approx(6.0)
    assert b["unseen"]["words"] == 1 and b["unseen"]["nll"] == pytest.approx(4.0)  # "x": not in training
    assert b["medium"]["words"] == 0
    # against a baseline, word by word: "the" 0.5 -> 0.25 and 1.5 -> 1.0 (both lower), the low word level
    base = words + [("the", 1.5)]
    vs = reference_bins.paired_vs(word_bin, [("visited", 6.0), ("the", 0.25), ("x", 4.0), ("the", 1.0)], base)
    assert vs["high"]["delta_nll_per_word"] == pytest.approx(-0.375) and vs["high"]["lower_share"] == 1.0
    # two negative differences: of the 4 equally likely sign patterns of ranks {1, 2}, W+ = 0 is one; two-sided 2 * 1/4
    assert vs["high"]["wilcoxon_p"] == pytest.approx(0.5)
    assert vs["low"]["delta_nll_per_word"] == 0 and vs["low"]["wilcoxon_p"] != vs["low"]["wilcoxon_p"]  # nan
    with pytest.raises(ValueError, match="disagree on a reference word"):
        reference_bins.paired_vs(word_bin, [("then", 1.0)], [("the", 1.0)])
    with pytest.raises(ValueError, match="1 and 2 reference words"):
        reference_bins.paired_vs(word_bin, [("the", 1.0)], [("the", 1.0), ("x", 2.0)])


def test_clean_pairs_length_and_ratio_like_clean_corpus_n():
    src = ["a b", "a b c d", "a", " ".join("w" * 1 for _ in range(51)), "x y z"]
    tgt = ["c d e", "a", "b", "w", "x y"]
    ks, kt, dropped = prepare_text.clean_pairs(src, tgt, 1, 50, 1.5)
    assert ks == ["a b", "a", "x y z"] and kt == ["c d e", "b", "x y"]  # 3/2 = 1.5 is kept
    assert dropped == {"length ratio > 1.5": 1, "longer than 50": 1}


def test_generated_hypotheses_in_order_and_missing_ids_are_an_error(tmp_path):
    gen = tmp_path / "gen.out"
    gen.write_text("S-1\tsrc\nH-1\t-0.5\tb c\nH-0\t-0.1\ta\nD-0\t-0.1\ta\nH-2\t-0.3\t\n", encoding="utf-8")
    assert prepare_text.generated_hypotheses(str(gen), 3) == ["a", "b c", ""]
    with pytest.raises(prepare_text.RecipeError, match="no hypothesis for 1 of 4 test sentences"):
        prepare_text.generated_hypotheses(str(gen), 4)


def test_sgm_and_iwslt_extraction(tmp_path):
    sgm = tmp_path / "t.sgm"
    sgm.write_text(make_mirror.sgm("newstest2015", "en", ["A & B <c>", "d"], "srcset"), encoding="utf-8")
    assert prepare_text.extract_segments(str(sgm)) == ["A & B <c>", "d"]
    tags = tmp_path / "train.tags.de-en.en"
    tags.write_text(make_mirror.train_tags(["T1", "D1", "s1", "T2", "D2", "s2"], "en"), encoding="utf-8")
    assert prepare_text.extract_iwslt_train(str(tags)) == [
        "T1", "TED Talk Subtitles and Transcript: D1", "s1", "T2", "TED Talk Subtitles and Transcript: D2", "s2"]


def test_significance_marks_and_identical_systems():
    assert [score_translations.significance_mark(p) for p in (0.0005, 0.005, 0.03, 0.2)] == ["‡", "†", "*", ""]
    refs = ["the cat sat on the mat", "a dog barks loudly today"]
    same = score_translations.paired_bootstrap(refs, refs, refs, False, n_samples=50)
    assert same["delta"] == 0 and same["p_value"] == 1.0 and same["mark"] == ""


def test_score_refuses_what_sacrebleu_would_fail_on_or_drop(tmp_path, monkeypatch, capsys):
    """An empty reference file (sacreBLEU's IndexError), one tokenized side without the other (tokenized BLEU was
    dropped without a word), resamples beyond what sacreBLEU holds in memory, a SACREBLEU_SEED numpy cannot take."""
    from fairseq_joint.errors import OptionError, Refusal

    hyp, empty = tmp_path / "hyp.txt", tmp_path / "empty.txt"
    hyp.write_text("a b\n")
    empty.write_text("")
    run = score_translations.main
    with pytest.raises(Refusal, match=rf"^--ref {empty} holds no line: give the test set's references"):
        run(["--hyp", str(empty), "--ref", str(empty)])
    with pytest.raises(Refusal, match="^tokenized BLEU needs both --hyp-tok and --ref-tok"):
        run(["--hyp", str(hyp), "--ref", str(hyp), "--hyp-tok", str(hyp)])
    with pytest.raises(SystemExit):
        run(["--hyp", str(hyp), "--ref", str(hyp), "--baseline-hyp", str(hyp), "--bootstrap-samples", "100001"])
    assert "argument --bootstrap-samples: must be an integer in [1, 100000], got 100001" in capsys.readouterr().err
    # the paired bootstrap's options without the baseline it compares with (ignored before without a word)
    with pytest.raises(Refusal, match=r"^--baseline-name and --bootstrap-samples set the paired bootstrap against "
                                      r"--baseline-hyp, which is not given: add --baseline-hyp, or drop --baseline-name "
                                      r"and --bootstrap-samples$"):
        run(["--hyp", str(hyp), "--ref", str(hyp), "--baseline-name", "nmt", "--bootstrap-samples", "5"])
    for seed in ("abc", "-1"):
        monkeypatch.setenv("SACREBLEU_SEED", seed)
        with pytest.raises(OptionError, match=rf"^SACREBLEU_SEED must be an integer >= 0, got '?{seed}"):
            run(["--hyp", str(hyp), "--ref", str(hyp), "--baseline-hyp", str(hyp), "--bootstrap-samples", "5"])
        assert run(["--hyp", str(hyp), "--ref", str(hyp)]) == 0  # no bootstrap: sacreBLEU never reads it
    for seed in ("None", str(2 ** 40)):  # sacreBLEU's unseeded bootstrap; any seed default_rng takes
        monkeypatch.setenv("SACREBLEU_SEED", seed)
        assert run(["--hyp", str(hyp), "--ref", str(hyp), "--baseline-hyp", str(hyp), "--bootstrap-samples", "5"]) == 0
