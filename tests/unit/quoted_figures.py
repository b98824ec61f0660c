"""Where each figure of the user pages (README.md, docs/*.md, studies/README.md) comes from.

``FIGURES[page]`` lists the page's quotes, each tied to the result file or study page it comes from;
``tests/unit/test_quoted_figures.py`` checks every row against both files and fails on a figure of a page that no row
covers. The row types (see that test's docstring):

* ``Q(quote, source, *excerpts)``: every number of the quote is a number of the excerpts of ``source``, rounded;
  ``{...}`` in a quote marks context whose numbers are not checked;
* ``R(quote, source, *excerpts)``: the quote's range a-b spans the excerpts' numbers, smallest to largest;
* ``C(quote, source, excerpts, formula)``: the quote's numbers are ``formula`` over the excerpts' numbers ``n``;
* ``N(quote, why)``: not from a result file, and why.

When a result changes, change the page and the row's excerpt together; when a page quotes a new figure, add a row.
"""

class Q:
    def __init__(self, quote: str, source: str, *excerpts: str):
        self.quote, self.source, self.excerpts = quote, source, excerpts

    def __repr__(self):
        return f"{type(self).__name__}({self.quote!r}, {self.source!r}, ...)"


class R(Q):
    """A range: its ends are the smallest and largest number of the excerpts."""


class C(Q):
    def __init__(self, quote: str, source: str, excerpts: list, formula: str):
        super().__init__(quote, source, *excerpts)
        self.formula = formula


class N:
    def __init__(self, quote: str, why: str):
        self.quote, self.why = quote, why

    def __repr__(self):
        return f"N({self.quote!r}, {self.why!r})"


# sources used by many rows
NMT = "studies/nmt-joint.md"
NMT_1500 = "examples/wmt17/results/nmt-study.md"
GILE = "studies/gile.md"
TWO_TOOLS = "examples/gile/results/gile_two_tools.md"
BENCH = "studies/benchmarks.md"
MULTI = "studies/gile-multilingual.md"
W = "examples/wmt17/results/"

GPU3 = "examples/wmt17/results/nmt-study-gpu-three-seeds.json"  # translated: s1 tied, s1 uniform, s2 tied, s2 default,
#                                                             s2 uniform, s3 tied, s3 default, s3 uniform
GPU3_BLEU = ["json:translated/0/scores/bleu", "json:translated/2/scores/bleu", "json:translated/5/scores/bleu",  # tied
             "json:translated/3/scores/bleu", "json:translated/6/scores/bleu",  # default joint, seeds 2, 3
             "json:translated/1/scores/bleu", "json:translated/4/scores/bleu", "json:translated/7/scores/bleu"]  # uniform
GPU3_MEANS = "mean(n[0:3]), std(n[0:3]), mean(n[3:5]), std(n[3:5]), mean(n[5:8]), std(n[5:8])"

FIGURES = {
    "README.md": [
        N("Python ≥ 3.11", "a requirement"),
        N("(Python 3.12;", "a requirement"),
        N("BLEU 12.75;", "make demo's own output (scripts/demo.sh prints it), no result file"),
        R("256-d LSTM: 12.11-27.90 at {1,500}", NMT_1500, "{1500 updates per run}", "| 12.31 {± 0.94} |",
          "| 12.11 {± 3.70} |", "| 26.14 {± 1.49} |", "| 27.90 {± 0.89} |"),
        R("34.81-36.44 at {6,000}", "examples/wmt17/results/nmt-study-lstm-u6000.md", "| 35.32 {± 0.11} |",
          "| 34.81 {± 1.10} |", "| 36.44 {± 0.33} |"),
        Q("at 6,000)", "examples/wmt17/results/nmt-study-lstm-u6000.md", "6000 updates per run"),
        N("(1,000 Debian package descriptions", "the bundled sample's size (data/debtags-sample/README.md)"),
        N("(25%, uniform negatives)", "the paper's setting (Sec. 4.2)"),
        Q("| {2+2 × 256 LSTM (CPU; 1, 2)} | 1,500 | 12.31 ± 0.94 | 12.11 ± 3.70 | **26.14 ± 1.49** |", NMT_1500,
          "1500 updates per run", "| 12.31 ± 0.94 |", "| 12.11 ± 3.70 |", "| 26.14 ± 1.49 |"),
        Q("| {2+2 × 256 LSTM (CPU; 1, 2)} | 6,000 | 35.32 ± 0.11 | 34.81 ± 1.10 | **36.44 ± 0.33** |",
          "examples/wmt17/results/nmt-study-lstm-u6000.md", "6000 updates per run", "| 35.32 ± 0.11 |",
          "| 34.81 ± 1.10 |", "| 36.44 ± 0.33 |"),
        Q("(H200, bf16; {1-3}) | 5,000-5,500 |", GPU3, "json:translated/*/updates"),
        C("| – | 38.97 ± 0.20 | 38.62 ± 0.18 (seeds {2, 3}); **39.56 ± 0.56** with", GPU3, GPU3_BLEU, GPU3_MEANS),
        Q("the lead shrinks to the paper's converged +1.6 over tying at 6,000 updates", NMT,
          "where the lead, +1.63 on the mean, is the paper's converged +1.6", "up to 6,000 updates"),
        Q("leads tying by +1.1 at 1,500-2,500 updates, level by 3,000-4,000", NMT,
          "(+1.1 on the mean at 1,500 and 2,500), then level: −0.22 / −0.26 / −0.16 on the mean at 3,000 / 3,500 / 4,000"),
        N("MPL-2.0", "a licence"),
    ],

    "docs/classification.md": [
        Q("(debtags' 423: 8-11 hours an epoch for all-MiniLM-L6-v2 on 2 CPU cores)", BENCH, "423 training labels",
          "a fine-tuned epoch about 8-11 hours", "on 2 CPU cores"),
        Q("the debtags study held out 46 of its 469", GILE, "all 469 labels ranked, 46 of them never seen in training"),
        Q("the README's figure; debtags' 23,598 make 738 × 2 = 1,476", GILE, "23,598 training texts",
          "--total-num-update 1476`, 2 × 738 updates"),
        N("with t = 0.5 and γ = −3.8, a training label needs a score ≥ 3.8 and a new label ≥ 0",
          "an example (γ as calibrated for the README's model)"),
        Q("(23,598 training documents, 469 labels;", GILE, "23,598 training texts", "all 469 labels ranked"),
        Q("seen AvgPr 73.30 ± 0.13, above TF-IDF + logistic regression (71.78); unseen AvgPr 70.98 ± 0.15, above the "
          "frozen encoder's plain cosine (68.32); GZSL H 63.35 ± 0.29", TWO_TOOLS,
          "| 73.30 ± 0.13 | 70.98 ± 0.15 | 63.35 ± 0.25 | 63.69 ± 0.65 | 63.02 ± 0.45 | 63.35 ± 0.29 |",
          "| tfidf_lr | – | 71.78 |", "| cosine | – | 23.70 | 68.32 |"),
        Q("H 57.16; their mean for the seen: 59.37", TWO_TOOLS,
          "| two_tools | – | 71.78 | 68.32 | 57.22 | 58.60 | 55.79 | 57.16 |",
          "| two_tools_mean | – | 67.20 | 68.32 | 59.30 | 60.71 | 58.08 | 59.37 |"),
        Q("random scores: 2.45 seen, 9.77 unseen", "examples/gile/results/gile_pretrained_gzsl.md",
          "| random scores (chance) | 50.15 | 2.45 | 98.90 | – | 50.20 | 9.77 |"),
        Q("({5} epochs at a constant rate, {3} seeds: seen 70.4, unseen 71.4, H 62.0)", TWO_TOOLS,
          "--cosine-prior 20 | 3 | 70.39 ± 0.37 | 71.36 ± 0.23 | 62.00 ± 0.32 | 60.23 ± 0.96 | 63.84 ± 0.91 | 61.98 ± 0.31 |"),
        N("(on the README's quick-start model: H 36.5 at γ = −2, 25.2 at 0, 13.3 at 2, 5.3 at 4; training calibrated "
          "γ = −3.78,\n  H 42.2 there;", "fairseq-validate on the README's quick-start model (the bundled sample): no result file"),
        Q("is about −0.4 (−0.43 ± 0.19 over {3} seeds", TWO_TOOLS, "| 63.35 ± 0.29 | -0.43 ± 0.19 |"),
        Q("need γ ≈ 5.4 (5.36 ± 0.15)", TWO_TOOLS, "| 52.57 ± 0.58 | 5.36 ± 0.15 |"),
        N("(criterion option; default 0.5)", "a default"),
        N("(t = 0.5: −γ and 0)", "an example"),
        N("(default 0.5, the probability threshold", "a default"),
        N("away from 0.5)", "the sigmoid's midpoint"),
        N("= 10,000 for 10/25/50/100 % label sampling", "the benchmark's setting"),
        Q("(GPU not measured): 10 % sampling is 3.47x faster than the full label set at |Y| = 10,000", BENCH,
          "so 10 % sampling is 3.47x faster than the full label set", "at |Y| = 10,000 labels"),
        N("rows start at 0.1% of fairseq's init", "a setting of --similarity-init"),
        Q("fell from the cosine's unseen AvgPr 68.3 to 3.4 (below the 9.8 of random scores)", GILE,
          "started at the cosine (68.3 unseen)", "`gile` at 3.4 after one epoch", "below the 9.8 of random scores"),
        Q("fell only to 52.6-57.2 in the first epoch", GILE, "from the cosine's 68.3 to 52.6-57.2 in the first epoch"),
        Q("ended at 60.25 ± 1.12", GILE, "| 60.25 ± 1.12 |"),
    ],
    "docs/classification-multilingual.md": [
        R("nine languages, 2,265-23,598 training documents each", MULTI,
          "(en, da, de, fr, it, ja, pl, pt_BR, uk; 2,265 to 23,598 training documents each)"),
        Q("at 3.1× (uk) to 5.7× (en) chance", MULTI, "from 31.53 (uk, 3.1× chance;", "to 55.45 (en, 5.7×)"),
        R("and 0.6-2.4 points below it in en, fr, it, ja, pt_BR and uk", MULTI,
          "below it by 1.65 (en), 1.71 (fr), 1.57 (it), 2.44 (ja), 0.97 (pt_BR) and 0.59 (uk)"),
        Q("15.6 of them distilling the student", MULTI, "the distillation 15.6 minutes"),
        Q("seen AvgPr +7.5 to +11.7 over the word-vector route, unseen labels at 2.9-4.2× chance", MULTI,
          "(2.9-4.2× chance)", "+7.5 to +11.7"),
        Q("unseen labels reach ≥ 3× chance in every language", MULTI, "**Unseen labels: ≥ 3× chance in every language — met.**"),
    ],
    "docs/commands.md": [
        N("(configuration mode; 5 to 10,000,000) | | `--tgt-vocab N`", "an option's range"),
        N("(configuration mode; 5 to 10,000,000) | | `--json`", "an option's range"),
        Q("chance 0.5%", MULTI, "chance 0.5%"),
        Q("precision@1 pl → en 71.5%, uk → en 68.5%, pt_BR → en 92.5%, ja → en 82.0%", MULTI,
          "| pl | **97.5%** (cosine to MiniLM's English 0.74) | 88.0% (0.43) | 71.5% |", "| 68.5% |", "| 92.5% |",
          "| 82.0% |"),
        N("77.5% unsegmented", "a run of the word-vector command without character tokens: no result file"),
        N("| 20, 0.01, 32 |", "defaults"),
    ],
    "docs/fairseq-patches.md": [
        N("the exact softmax in chunks of 8,192 vocabulary rows (validation's: the fused kernels on a CUDA GPU, the "
          "vocabulary walk on the CPU; at most T · 8,192 logits at a time)",
          "a setting: VALIDATION_CHUNK of sampled_cross_entropy.py"),
        N("but torch ≥ 2.6 loads no fairseq checkpoint", "a version"),
        N("torch ≥ 2.6 loads with `weights_only=True`", "a version"),
        N("With torch ≥ 2.6 fairseq then loads none", "a version"),
        N("loading at all under torch ≥ 2.6", "a version"),
        N("fairseq 0.12 causes", "a version"),
        N("fairseq 0.12's `--bf16` sets `--tpu`", "a version"),
    ],
    "docs/faq.md": [
        N("Python ≥ 3.11", "a version"),
        N("(Python 3.12 has a prebuilt wheel)", "a version"),
        N("torch ≥ 2.6 loads", "a version"),
        N("suddenly 10-20x slower", "what denormal floats cost in the output-layer benchmark's development, no result file"),
    ],
    "docs/label-embedding-loss.md": [
        N("| `--label-embedding-alpha` | 0.9 |", "a default"),
        N("(the original code: 0.5)", "the original code's setting"),
        Q("takes 1.42x the time of plain cross-entropy at the full softmax and 1.13x with {25%} sampling (output layer + "
          "loss alone: 1.79x / 1.56x)", BENCH, "whole step full label_embedding 3854.4 266 1.42x",
          "whole step 25% label_embedding 1963.3 522 1.13x", "output layer + loss full label_embedding 1808.3 566 1.79x",
          "output layer + loss 25% label_embedding 441.8 2318 1.56x"),
    ],
    "docs/output-layers.md": [
        N("`uniform`: U(-0.1, 0.1)", "the original code's initialisation"),
        Q("Without it, beam search with `joint` runs at 0.25x `tied`; with it at 0.90x", BENCH,
          "joint 1.283 (1.237-1.319) s 12.47 (12.13-12.93) sentences/s 0.90x tied",
          "joint_no_cache 4.653 (4.484-4.713) s 3.44 (3.39-3.57) sentences/s 0.25x tied"),
        N("dropout 0.3 |", "the paper's setting"),
        N("torch ≥ 2.6 (", "a version"),
        N("validates within 2% of fp32", "the GPU tests' tolerance (tests marked gpu), no result file"),
    ],
    "docs/translation.md": [
        C("after {6,000} updates (≈ 8 epochs;", W + "nmt-study-gpu-three-seeds.md", ["(762 updates per epoch)"],
          "6000 / n[0]"),
        N("from 1e-7, β = (0.9, 0.98), gradient clipping at 5,", "the study's settings (examples/wmt17/nmt_study.py's "
          "transformer256, train.sh)"),
        Q("4,000 tokens per batch, dropout 0.2, 2+2 layers of 256 with 4 heads and FFN 1024", NMT,
          "`joint_transformer` 2+2 × 256 (4 heads, FFN 1024, dropout 0.2, inverse-sqrt warm-up 400)",
          "4,000 tokens per batch"),
        Q("warm-up of 400 updates", NMT, "inverse-sqrt warm-up 400"),
        N("(the original code's U(-0.1, 0.1) start", "the original code's initialisation"),
        Q("+0.80 BLEU over the default start at 4,000 updates (33.75 vs 32.95, p = .045), level with tying (33.68)",
          W + "nmt-study-transformer-seed2-single-change.md", "| 4,000 | 6.15 (6.23 / 6.20) | 33.75 | +0.80* (p = 0.045) |",
          "| 4,000 | 6.23 (– / 6.20) | 32.95 (tied 33.68) |"),
        Q("an epoch is 762 updates of 4,000 tokens", W + "nmt-study-gpu-three-seeds.md", "(762 updates per epoch)",
          "4,000 tokens per batch"),
        Q("at 4,000 updates (about {5} epochs) the joint layer and tying were level (33.25 ± 0.42 vs 33.42 ± 0.37 "
          "sacreBLEU, seeds {1 and 2})", W + "nmt-study-transformer-seeds12-u4000.md", "4000 updates per run",
          "| 6.22 ± 0.01 | 33.25 ± 0.42 |", "| 6.31 ± 0.16 | 33.42 ± 0.37 |"),
        Q("after the joint layer led at 1,500-2,500 updates", NMT,
          "ahead in every seed up to 2,500 updates (+1.1 on the mean at 1,500 and 2,500)"),
        Q("a pair of these runs to 4,000 updates took about 3 hours", NMT,
          "from scratch to 4,000 updates takes about 3 hours on 2 cores"),
        N("length ratio ≤ 1.5; the test set", "the recipe's setting"),
        N("(dropout 0.3, Adam 1e-3, 13 epochs); 25% sampled softmax", "the paper's settings"),
        N("started at U(-0.1, 0.1)", "the original code's initialisation"),
        Q("(217,347 pairs; 194,372 after the recipe's cleaning", NMT, "217,347 training pairs",
          "194,372 pairs after cleaning"),
        N("or with a length ratio over 1.5)", "the recipe's setting"),
        R("LSTM is at 34.81-36.44 sacreBLEU after {6,000} updates", "examples/wmt17/results/nmt-study-lstm-u6000.md",
          "| 35.32 {± 0.11} |", "| 34.81 {± 1.10} |", "| 36.44 {± 0.33} |"),
        Q("sacreBLEU after 6,000 updates", "examples/wmt17/results/nmt-study-lstm-u6000.md", "6000 updates per run"),
        R("reached 38.50-41.77 on one GPU", GPU3, "json:translated/*/scores/bleu",  # every GPU run translated
          "@examples/wmt17/results/nmt-study-gpu.json json:runs/*/scores/bleu"),
        R("on one GPU in 5,000-8,000 updates", GPU3, "json:translated/*/updates",
          "@examples/wmt17/results/nmt-study-gpu.json json:max_update"),
        Q("8-12 minutes for four runs side by side on an H200", NMT, "Four runs shared the GPU for 8 minutes",
          "shared it for 12 minutes of training"),
        N("learns a 4,000-piece sentencepiece BPE", "make demo's setting"),
    ],
    "docs/gpu.md": [
        N("torch 2.11.0+cu130 and Python 3.12 (14 s, nothing compiled)", "the install, timed by hand: no result file"),
        N("wheel for CPython 3.12", "a version"),
        N("torch ≥ 2.0 is already there", "a version"),
        N("**Another Python (3.11, 3.13)**", "versions"),
        N("(about 2.5 minutes on the 2-core CPU machine;", "the install, timed by hand: no result file"),
        N("validated within 2% of fp32, the sampled", "the GPU tests' tolerance (tests marked gpu), no result file"),
        N("trained and validated, within 2% of fp32 (GPU tests)", "the GPU tests' tolerance"),
        N("fairseq 0.12's `--bf16`", "a version"),
        N("sacreBLEU 12.75), beam 5", "make demo's own output"),
        N("sacreBLEU 14.97 vs 14.92, chrF 39.43 vs 39.46", "fairseq-generate with and without --fp16 on make demo's "
          "recipe, by hand: no result file"),
        Q("4,000 tokens per batch, `--bf16`, one H200, four runs side by side | 17.6-20.1 updates/s per run ({softmax, "
          "tied, joint dj = 512}); 12.9 for joint dj = {2048 with 25%} sampled softmax; 8,000 updates in 12 minutes",
          "examples/wmt17/results/nmt-study-gpu.md", "4,000 tokens per batch",
          "nmt-joint-2048 was the slowest at 12.9 updates/s, the others 17.6-20.1", "one GPU for 12 minutes",
          "saved, 8,000 updates"),
        Q("| 5,000 updates each in 8 minutes |", "examples/wmt17/results/nmt-study-gpu-three-seeds.md",
          "trained side by side for 8 minutes, which reached 5,000 updates each"),
        Q("(one short run: 1,250 updates in 2.5 minutes, start-up included)", "examples/wmt17/results/nmt-study-gpu-u5500.md",
          "trained for 2.5 minutes alone on the GPU, 1,250 updates"),
        N("joint dj = 512, chunked exact, 25% sampled), `--bf16`, 8K tokens per batch", "the runs' settings"),
        Q("about 3.4 updates/s each (about 27K target tokens/s), 1-2% of the GPU", BENCH,
          "all ran at about 3.4 updates/s (about 27K target tokens/s)", "about\n1-2% of what the GPU does"),
        Q("`joint` dj = {512} 0.90x `tied` at {32K} (full softmax); `joint` dj = {2048} 0.52x, dj = {4096} 0.31x at "
          "{128K}; `tied` at {128K} chunked (the CPU-tuned path) 86.7K target tokens/s, 0.17x its full softmax", BENCH,
          "full softmax, 0.90x", "dj = 2048 0.52x and dj = 4096 0.31x", "chunked, 86.7K target tokens/s", "(0.17x)"),
        N("50/25/5% sampled", "the paper's Table 4 settings"),
        Q("every model 47-53K target tokens/s (0.91-1.05x `tied`)", BENCH,
          "every model at 47-53K target tokens/s (0.91-1.05x `tied`)"),
        Q("plain 7.63 ms / 5,252 MiB; the CPU-tuned chunked path 46.98 ms / 393 MiB; Cut Cross-Entropy (no bias) 7.88 "
          "ms / 134 MiB", BENCH, "{| 4096 x 512 x 128K |} 7.63 ms / 5,252 MiB | 46.98 ms / 393 MiB",
          "{38.87 ms / 393 MiB |} 7.88 ms / 134 MiB"),
        Q("trains 1,200-2,300 target tokens/s on one thread", NMT,
          "the 256-d LSTM trains 1,200-2,300 target tokens/s on one CPU thread"),
        N("four GPUs at 4,000 tokens make one update of 16,000 tokens", "arithmetic of an example"),
    ],
    "docs/large-vocabularies.md": [
        N("1 GiB at |V| = 131,072 and d = 512", "computed: 4 · |V| · d · 4 B"),
        N("| T = 4,096, \\|V\\| = 131,072 |", "the sizes of the computed column (the CPU benchmark's)"),
        Q("{6 GiB} (CPU benchmark, `tied`: 6,144 MiB)", BENCH, "{tied 131072 plain 18.559 (18.195-19.414)} 6144 {1.00x}"),
        N("| 4 GiB at dj = 4096, 0.5 GiB at dj = 512 |", "computed: 2 · |V| · dj · 4 B"),
        N("| 1.5 GiB at r = 0.25 |", "computed: 3 · T · r · |V| · 4 B"),
        N("validation of a vocabulary above 8,192 rows runs in chunks of 8,192", "a setting: VALIDATION_CHUNK of "
          "fairseq_joint/criterions/sampled_cross_entropy.py"),
        N("| – (\\|V\\| above 8,192) | 2 · T · 8,192 · 4 B: a chunk's logits and their exponent (the same loss as in one "
          "piece) | 0.25 GiB |", "computed: VALIDATION_CHUNK's logits, 2 · T · 8192 · 4 B"),
        N("validation runs in chunks of 8,192 rows by default", "a setting: VALIDATION_CHUNK"),
        Q("{0.5 GiB at N = 8192, d = 512} (CPU benchmark, `tied`: 519 MiB)", BENCH,
          "{tied 131072 chunked-8192 12.106 (12.059-13.009)} 519"),
        Q("measured 712 MiB against the plain path's 8,256 MiB for dj = {4096}", BENCH,
          "{joint-4096 131072 plain 111.495 (111.084-111.907)} 8256",
          "{joint-4096 131072 chunked-4096 124.241 (121.873-126.609)} 712"),
        N("(the paper's 0.5 / 0.25 / 0.05)", "the paper's settings"),
        N("default 0.75)", "a default"),
        N("torch 2.13's `linear_cross_entropy`", "a version"),
        N("older than compute capability\n  7.0", "a hardware requirement of the kernels (MIN_CAPABILITY)"),
        Q("took 46.98 ms for `tied` at {4096 x 512 x 128K} under bf16 autocast against the plain path's 7.63 ms, at 393 "
          "against 5,252 MiB; Cut Cross-Entropy without a bias took 7.88 ms at 134 MiB", BENCH,
          "{| 4096 x 512 x 128K |} 7.63 ms / 5,252 MiB | 46.98 ms / 393 MiB", "{38.87 ms / 393 MiB |} 7.88 ms / 134 MiB"),
        Q("(with the bias as an extra column CCE took 38.87 ms)", BENCH, "{57.46 ms / 137 MiB |} 38.87 ms / 393 MiB"),
        R("`softmax` and `tied` at 32K on the CPU at 0.86-0.95x the plain path's time", BENCH,
          "{softmax 32768 chunked-4096 3.479 (3.465-3.918) 199} 0.86x {0.130x -8.8e-08}",
          "{softmax 32768 chunked-1024 3.865 (3.845-4.594) 119} 0.95x {0.078x -8.8e-08}",
          "{tied 32768 chunked-4096 3.567 (3.341-3.657) 199} 0.90x {0.130x -8.8e-08}",
          "{tied 32768 chunked-1024 3.751 (3.686-3.935) 104} 0.95x {0.068x -8.8e-08}"),
        R("time with 0.07-0.13x its memory", BENCH,
          "{softmax 32768 chunked-4096 3.479 (3.465-3.918) 199 0.86x} 0.130x {-8.8e-08}",
          "{softmax 32768 chunked-1024 3.865 (3.845-4.594) 119 0.95x} 0.078x {-8.8e-08}",
          "{tied 32768 chunked-4096 3.567 (3.341-3.657) 199 0.90x} 0.130x {-8.8e-08}",
          "{tied 32768 chunked-1024 3.751 (3.686-3.935) 104 0.95x} 0.068x {-8.8e-08}"),
        R("`tied` at 128K at 0.62-1.31x the time", BENCH,
          "{tied 131072 chunked-4096 17.399 (17.269-19.090) 392} 0.94x {0.064x -2.3e-07}",
          "{tied 131072 chunked-1024 24.390 (24.158-26.624) 296} 1.31x {0.048x 1.6e-07}",
          "{tied 131072 chunked-8192 12.106 (12.059-13.009) 519} 0.65x {0.084x}",
          "{tied 131072 chunked-16384 11.587 (11.513-12.033) 775} 0.62x {0.126x}"),
        R("time with 0.05-0.13x the memory", BENCH,
          "{tied 131072 chunked-4096 17.399 (17.269-19.090) 392 0.94x} 0.064x {-2.3e-07}",
          "{tied 131072 chunked-1024 24.390 (24.158-26.624) 296 1.31x} 0.048x {1.6e-07}",
          "{tied 131072 chunked-8192 12.106 (12.059-13.009) 519 0.65x} 0.084x",
          "{tied 131072 chunked-16384 11.587 (11.513-12.033) 775 0.62x} 0.126x"),
        Q("(0.94x at N = {4096}, 0.65x at N = {8192})", BENCH, "tied 131072 chunked-4096 17.399 (17.269-19.090) 392 0.94x",
          "{tied 131072 chunked-8192 12.106 (12.059-13.009) 519 0.65x"),
        Q("torch's op with its automatic chunking is 1.7-5.0x slower than ours; with `batch_chunk_size={256}` it ties "
          "ours at {32K} (3.72 vs 3.75 s) at 1.4x our memory, and at {128K} it is faster than ours at N = {4096} (14.4 vs "
          "17.4 s) but slower than ours at N = {8192} (12.1 s)", BENCH,
          "is 1.7-5.0x slower than ours", "it ties ours at 32K (3.72 vs 3.75 s, the spreads overlap",
          "at 1.4x our memory",
          "at N = 4096 (14.4 vs 17.4 s, with 1.35x our memory) but slower than ours at N = 8192 (12.1 s, 519 vs 528 MiB)"),
        C("({256}-token chunks) ran 1.4x faster than", BENCH,
          ["tied 131072 chunked-4096 17.399", "tied 131072 chunked-8192 12.106"], "n[1] / n[3]"),
        Q("1.11x the plain time with 0.086x its memory", BENCH,
          "joint-4096 131072 chunked-4096 124.241 (121.873-126.609) 712 1.11x 0.086x"),
        Q("and 1.23x with 0.11x", BENCH, "chunked / plain peak memory: 0.113", "chunked / plain time: 1.227"),
        Q("a second run of it gave 1.08x and 0.116x", BENCH, "chunked/plain time 1.08x, memory 0.116x"),
        N("| model | dj | 50% | 25% | 5% |", "the paper's Table 4"),
        Q("{25%} sampling makes `joint` dj = {2048} 3.6x faster than its own full softmax at {32K} and 4.0x at {128K}",
          BENCH, "joint-2048 32768 25% 585 0.71x 3.59x", "joint-2048 131072 25% 116 0.69x 3.97x"),
        Q("the chunked exact softmax needs 0.11x the plain path's memory", BENCH, "chunked / plain peak memory: 0.113"),
    ],
    "studies/README.md": [
        Q("unseen 3.1-5.7× chance and above the student's cosine", MULTI, "from 31.53 (uk, 3.1× chance;",
          "to 55.45 (en, 5.7×)"),
        R("and 0.6-2.4 below it in the other six", MULTI,
          "below it by 1.65 (en), 1.71 (fr), 1.57 (it), 2.44 (ja), 0.97 (pt_BR) and 0.59 (uk)"),
        C("plain 7.63 ms, the CPU-tuned chunked path 46.98 ms (6.2x), Cut Cross-Entropy 7.88 ms", BENCH,
          ["{| 4096 x 512 x 128K |} 7.63 ms / 5,252 MiB | 46.98 ms / 393 MiB", "{38.87 ms / 393 MiB |} 7.88 ms / 134 MiB"],
          "n[0], n[2], n[2] / n[0], n[4]"),
        # translation
        Q("LSTM, 1,500 updates, seeds {1, 2} | NMT-joint-512 26.14 ± 1.49 sacreBLEU vs NMT 12.31 ± 0.94 and NMT-tied "
          "12.11 ± 3.70 (‡ every seed), NMT-tied's final perplexity in 762 and 900 of 1,500 updates; NMT-joint-2048 "
          "27.90 ± 0.89", NMT_1500, "1500 updates per run", "| 26.14 ± 1.49 |", "| 12.31 ± 0.94 |", "| 12.11 ± 3.70 |",
          "| 762 / 900 |", "| 27.90 ± 0.89 |"),
        Q("The same LSTM continued: 3,000, 4,500 and 6,000 updates", NMT, "*At 3,000 / 4,500 / 6,000 updates*"),
        Q("3,000: NMT-joint-512 31.43 ± 1.05 vs NMT-tied 28.16 ± 1.45 and NMT 28.50 ± 1.04 (+3.55‡ / +2.98‡ over tied, "
          "+2.92‡ / +2.94‡ over NMT; tying vs NMT −0.62 / −0.04, n.s.)", W + "nmt-study-lstm-u3000.md",
          "3000 updates per run", "| 7.95 ± 0.21 | 31.43 ± 1.05 | +2.92‡ / +2.94‡ | +3.55‡ / +2.98‡ |",
          "| 12.57 ± 1.29 | 28.16 ± 1.45 | -0.62 / -0.04 |", "| 11.37 ± 0.62 | 28.50 ± 1.04 |"),
        Q("4,500: 35.12 ± 0.50 vs 33.08 ± 0.66 and 33.37 ± 0.18 (+2.16‡ / +1.92‡ over tied, +1.52† / +1.97‡ over NMT)",
          W + "nmt-study-lstm-u4500.md", "4500 updates per run",
          "| 6.24 ± 0.23 | 35.12 ± 0.50 | +1.52† / +1.97‡ | +2.16‡ / +1.92‡ |", "| 8.21 ± 0.55 | 33.08 ± 0.66 |",
          "| 7.79 ± 0.30 | 33.37 ± 0.18 |"),
        Q("6,000: 36.44 ± 0.33 vs 34.81 ± 1.10 and 35.32 ± 0.11 (+2.18‡ / +1.09* over tied,", W + "nmt-study-lstm-u6000.md",
          "6000 updates per run", "| 5.53 ± 0.11 | 36.44 ± 0.33 | +0.96* / +1.27* | +2.18‡ / +1.09* |",
          "| 6.75 ± 0.28 | 34.81 ± 1.10 |", "| 6.47 ± 0.15 | 35.32 ± 0.11 |"),
        Q("+1.63 on the mean: the paper's converged +1.6;", NMT, "where the lead, +1.63 on the mean, is the paper's converged +1.6"),
        Q("+0.96* / +1.27* over NMT)", W + "nmt-study-lstm-u6000.md", "| 36.44 ± 0.33 | +0.96* / +1.27* |"),
        Q("perplexity ratio tied / joint 1.67x and 1.49x at 3,000, 1.34x and 1.29x at 4,500, 1.24x and 1.20x at 6,000",
          NMT, "(tied / joint at 1,500, 2,000, 2,500, 3,000: seed 1 3.58x, 2.49x, 1.93x, 1.67x; seed 2 2.54x, 1.90x, "
          "1.64x, 1.49x;", "(tied / joint at 3,000, 3,500, 4,000, 4,500: seed 1 1.67x, 1.54x, 1.42x, 1.34x; seed 2 1.49x, "
          "1.41x, 1.34x, 1.29x;", "(tied / joint at 4,500, 5,000, 5,500, 6,000: seed 1 1.34x, 1.31x, 1.25x, 1.24x; seed 2 "
          "1.29x, 1.27x, 1.22x, 1.20x;"),
        Q("gains most against tying at 6,000 in both seeds, not at 3,000 or 4,500", NMT,
          "*At 6,000 updates (seeds 1, 2) the lead over tying",
          "Fig. 3's pattern, which at 3,000 (medium ahead) and 4,500 (no pattern) was not there"),
        Q("`joint_transformer`, 1,500 updates, seeds {1-3} | NMT-joint-512 24.14 ± 0.28 vs NMT-tied 23.04 ± 0.51 sacreBLEU "
          "(+1.70† / +0.41 n.s. / +1.17† per seed), valid ppl 12.74 vs 13.51", W + "nmt-study-transformer-u1500.md",
          "1500 updates per run", "| 12.74 ± 0.23 | 24.14 ± 0.28 | – | +1.70† / +0.41 / +1.17† |",
          "| 13.51 ± 0.53 | 23.04 ± 0.51 |"),
        Q("low-frequency word F1 nearly doubled in every seed (seeds {1, 2}: 16.8 vs 9.2; seed {3}: 19.8 vs 11.4)", NMT,
          "57.7 / 25.4 / 16.8 / 3.9 · 57.9 / 22.1 / 19.8 / 6.0", "56.5 / 21.0 / 9.2 / 3.2 · 57.1 / 21.6 / 11.4 / 4.5"),
        Q("seeds {1-3} continued to 2,000 updates | NMT-joint-512 26.91 ± 0.75 vs NMT-tied 26.47 ± 0.92 sacreBLEU (+0.56, "
          "p = .09 / +0.62, p = .08 / +0.15, p = .30: none significant), valid ppl 9.70 vs 9.99",
          W + "nmt-study-transformer-u2000.md", "2000 updates per run", "| 9.70 ± 0.16 | 26.91 ± 0.75 |",
          "| 9.99 ± 0.32 | 26.47 ± 0.92 |", "@" + NMT + " +0.56 (p = .09) / +0.62 (p = .08) / +0.15 (p = .30)"),
        Q("(lower in every seed; seed {2}'s curves met by 1,700 updates)", NMT, "the curves have met by 1,700 updates"),
        Q("at 2,500 updates, seeds {1-3} | NMT-joint-512 28.75 ± 0.71 vs NMT-tied 27.69 ± 1.02 sacreBLEU (+0.89* / +0.82, "
          "p = .051 / +1.46†;", W + "nmt-study-transformer-u2500.md", "2500 updates per run",
          "| 8.24 ± 0.14 | 28.75 ± 0.71 |", "| 8.44 ± 0.24 | 27.69 ± 1.02 |",
          "@" + NMT + r" **+0.89\*** / +0.82 (p = .051) / **+1.46†**"),
        Q("valid ppl 8.24 vs 8.44", W + "nmt-study-transformer-u2500.md", "| 8.24 ± 0.14 |", "| 8.44 ± 0.24 |"),
        Q("(length ratio 0.86-0.91)", NMT, "(length ratio 0.86-0.91 in seeds 2 and 3"),
        Q("continued to 4,000 updates, seed {2} only", NMT, "from 2,500 to 3,000, 3,500 and 4,000 updates"),
        Q("Δ −0.41 / −0.94* / −0.72* sacreBLEU at 3,000 / 3,500 / 4,000 at level valid ppl (6.20 vs 6.23 at 4,000)",
          W + "nmt-study-transformer-seed2-u4000.md", "4000 updates per run", "| 2 | 6.23 | 32.95 | – | -0.72* |",
          "| 2 | 6.20 | 33.68 |", "@" + W + "nmt-study-transformer-seed2-u3000.md 3000 updates per run",
          "@" + W + "nmt-study-transformer-seed2-u3000.md | 2 | 7.30 | 30.27 | – | -0.41 |",
          "@" + W + "nmt-study-transformer-seed2-u3500.md 3500 updates per run",
          "@" + W + "nmt-study-transformer-seed2-u3500.md | 2 | 6.61 | 31.87 | – | -0.94* |"),
        Q("joint 3-8 F1 behind on medium, low and unseen words", NMT,
          "The loss is on the medium, low and unseen words, 3 to 8 F1 behind at every budget"),
        Q("(+1.39 nats per low-frequency word at 2,500, Wilcoxon p = .002; +0.40, p = .19, at 4,000)",
          W + "nmt-study-transformer-seed2-reference-bins.md", "## 2,500 updates", "+1.388, p = 0.0018",
          "## 4,000 updates", "+0.402, p = 0.19"),
        Q("seed {1} trained again to 4,000 updates | NMT-joint-512 vs NMT-tied +1.29† / −0.02 / +0.42 / +0.40 sacreBLEU "
          "at 2,500 / 3,000 / 3,500 / 4,000 (33.55 vs 33.16 at 4,000)", W + "nmt-study-transformer-seed1-u4000.md",
          "| 2,500 | 8.42 / 8.14 | 28.38 / 29.67 | +1.29† (0.004)", "| 3,000 | 7.73 / 7.51 | 28.47 / 28.45 | -0.02 (0.398)",
          "| 3,500 | 6.81 / 6.59 | 32.65 / 33.07 | +0.42 (0.132)", "| 4,000 | 6.42 / 6.22 | 33.16 / 33.55 | +0.40 (0.149)"),
        Q("valid ppl 0.20-0.28 lower at every budget", NMT, "below tied's at every budget (by 0.20-0.28)"),
        Q("(−0.62 to −0.72 nats), less on unseen ones (+0.67 to +0.99)", W + "nmt-study-transformer-seed1-u4000.md",
          "| -0.62 (0.052) /", "| -0.72* (0.020) / -0.43 (0.321) / +0.67† (0.007)",
          "| -0.71* (0.012) / -0.03 (0.967) / +0.99‡ (0.000)"),
        Q("With seed {2}: mean Δ −0.22 / −0.26 / −0.16 at 3,000-4,000", NMT,
          "−0.22 / −0.26 / −0.16 on the mean at 3,000 / 3,500 / 4,000"),
        Q("(`--init-seed 1002`: same batches and dropout masks) moves BLEU by up to 0.66 (tied 28.45 / 30.02 / 32.57 / 33.06 at 2,500-4,000 vs 27.91 / 30.68 / 32.81 / 33.68; "
          "joint 28.78 / 29.84 / 32.15 / 33.55 vs 28.73 / 30.27 / 31.87 / 32.95)", W + "nmt-study-transformer-seed2-single-change.md",
          "| 2,500 | 8.24 / 8.32 / 8.17 | 27.91 / 28.45 / 28.73 |", "| 3,000 | 7.35 / 7.42 / 7.30 | 30.68 / 30.02 / 30.27 |",
          "| 3,500 | 6.71 / 6.71 / 6.61 | 32.81 / 32.57 / 31.87 |", "| 4,000 | 6.20 / 6.26 / 6.23 | 33.68 / 33.06 / 32.95 |",
          "| 28.73 / 28.78 ·", "| 30.27 / 29.84 ·", "| 31.87 / 32.15 ·", "| 32.95 / 33.55 ·",
          "(seed 2, `--init-seed 1002`)", "@" + NMT + " (`--init-seed`) moves BLEU by up to 0.66"),
        C("mean of the four joint-vs-tied pairs +0.57 / −0.30 / −0.69 / −0.11 (significant in {1 of 4 pairs at 2,500 and "
          "3 of 12 after})", NMT, ["(mean of the four −0.30 at 3,000, −0.69 at 3,500, −0.11 at 4,000;",
                                   r"+0.87\* / +0.33 at 2,500", "@" + W + "nmt-study-transformer-seed2-single-change.md "
                                   "| – | +0.82 (p = 0.051) |", "@" + W + "nmt-study-transformer-seed2-single-change.md "
                                   "| +0.27 (p = 0.202) |"],
          "(n[6] + n[7] + n[9] + n[11]) / 4, n[0], n[2], n[4]"),
        Q("(the second start's is within ±0.36 nats of the second tied start, n.s.)", NMT, "within ±0.36 nats"),
        N("(the original code's U(−0.1, 0.1))", "the original code's initialisation"),
        Q("the output layer alone, to 4,000: level with the default joint to 3,000, then +0.58 (p = .095) and +0.80* at "
          "3,500 and 4,000, level with the first tied start at 4,000 (33.75 vs 33.68), valid ppl 6.15 vs 6.23 / 6.20, "
          "deficit vs tied −0.03 / +0.37 / +0.36 nats (medium / low / unseen; default +0.44 / +0.40 / +0.74)",
          W + "nmt-study-transformer-seed2-single-change.md",
          "| 3,000 | 7.26 (7.30 / 7.35) | 30.00 | -0.27 (p = 0.188) |", "| 3,500 | 6.56 (6.61 / 6.71) | 32.46 | +0.58 (p = 0.095) |",
          "| 4,000 | 6.15 (6.23 / 6.20) | 33.75 | +0.80* (p = 0.045) |", "| 4,000 | 6.23 (– / 6.20) | 32.95 (tied 33.68) |",
          "| -0.03 (0.65) / +0.37 (0.55) / +0.36 (0.1) |", "@" + NMT + " +0.44, +0.40 and +0.74 nats"),
        Q("`--joint-activation relu` to 3,500 (valid ppl 7.24 vs 6.61, BLEU 32.43 vs 31.87, deficit stays); "
          "`--joint-dropout {0.2}` from 2,500 to 4,000 (within 0.34 BLEU of the default, deficit unchanged); `--lr {0.0005}` "
          "to 2,500 (much slower: ppl 13.96 vs 8.17, BLEU 22.23, −6.49‡)", W + "nmt-study-transformer-seed2-single-change.md",
          "| 3,500 | 7.24 (6.61 / 6.71) | 32.43 |", "| 3,500 | 6.61 (– / 6.71) | 31.87 (tied 32.81) |",
          "(from the default run at 2,500) | 4,000 |", "@" + NMT + " BLEU stays within 0.34 of the default joint",
          "| 2,500 | 13.96 (8.17 / 8.24) | 22.23 | -6.49‡ (p = 0.001) |"),
        Q("8,000 updates, bf16, seed {1} | nmt 41.77, nmt-tied 41.60, NMT-joint-512 40.89 (−0.71 vs tied n.s., −0.88* vs "
          "nmt), NMT-joint-2048 39.56; joint lowest perplexity early, curves met by 8,000", W + "nmt-study-gpu.md",
          "the paper's model, de→en, 8,000 updates", "| 4.39 | 41.77 |", "| 4.23 | 41.60 |",
          "| 4.19 | 40.89 | -0.88* | -0.71 |", "| 4.39 | 39.56 |"),
        Q("at 5,500 updates: a second seed and the original code's uniform init", W + "nmt-study-gpu-u5500.md",
          "NMT study on a GPU at 5,500 updates"),
        Q("(tied seed {1}: all 20 validation points of the 8,000-update study); seed {2}: NMT-joint-512 38.50 vs NMT-tied "
          "39.13 (−0.63, n.s.) at level valid ppl (4.68 / 4.67), unseen words 2.24 nats less log-probability (p {< .001}); "
          "`--output-layer-init uniform`, seed {1}: 40.19 vs tied 39.04 (+1.15†), valid ppl 4.54 vs 4.68 default joint / "
          "4.78 tied", W + "nmt-study-gpu-u5500.md", "exactly at all 20 validation points",
          "translations exist only at 8,000 updates", "| 2 | 4.68 (4.43) | 38.50 | -0.63 (p", "| 2 | 4.67 (4.50) | 39.13 |",
          "+2.24 (1.1e-05)", "| 1 | 4.54 (4.38) | 40.19 | +1.15† (p", "| 1 | 4.78 (4.70) | 39.04 |"),
        Q("(below the default at all 19 points), test ppl 4.88 vs 5.13", W + "nmt-study-gpu-u5500.md", "| 4.88 |", "| 5.13 |",
          "@" + NMT + " below the default joint's at all 19 validation points"),
        Q("in three seeds at 5,000 updates: tied, default joint, uniform init (H200, bf16) | valid ppl 4.95 ± 0.02 tied, "
          "4.76 ± 0.05 default joint, 4.63 ± 0.02 uniform init (lowest in every seed); BLEU vs tied: default −0.63 / −0.00 "
          "(seeds {2, 3}; n.s.), uniform +1.15† / +0.02 / +0.59 (p = .086); uniform vs default +0.65 / +0.59 (n.s.)",
          W + "nmt-study-gpu-three-seeds.md", "reached 5,000 updates each", "| 4.95 ± 0.02 |", "| 4.76 ± 0.05 |",
          "| 4.63 ± 0.02 |", "| 38.50 | -0.63 (0.169) |", "| 38.75 | -0.00 (0.411) |", "| 40.19 | +1.15† (0.009) |",
          "| 39.14 | +0.02 (0.398) | +0.65 (0.177) |", "| 39.35 | +0.59 (0.086) | +0.59 (0.104) |"),
        Q("{217K pairs, BPE 8K, 1+1×256} LSTM, 200 updates per system | NMT-joint-256 +0.38 BLEU (‡) and NMT-tied +0.24 (†) "
          "over NMT at BLEU ≈ 1", NMT, "trained for only 200 updates", "| 0.68 (–) |", "| 0.92 (+0.24†) |",
          "| 1.06 (+0.38‡) |"),
        N("217K pairs in 2.5 min, ≈ 5× the raw text on disk", "timed when the recipe prepared the study corpus "
          "(examples/wmt17/README.md): no result file"),
        # speed
        Q("`joint` dj={512} trains at 0.81x `tied` (FLOP limit 0.88x; target 0.85x missed); the layers at 69.6-89% of their "
          "GEMM limits (`bilinear` 69.6%: target 70% missed); beam search with `joint` at 0.90x `tied` with the eval cache, "
          "0.25x without (target 0.95x missed)", BENCH, "`joint` dj=512 step ≥ 0.85x `tied`; every layer ≥ 70% of its "
          "GEMM limit; `joint` decoding ≥ 0.95x `tied`", "joint-512 Eqs. 14-15 470.3 4.154 (3.860-4.616) 0.81x 0.88x",
          "The layers run at 69.6% (`bilinear`) to 89% (`joint` dj = 4096)", "sentences/s 0.90x tied",
          "sentences/s 0.25x tied"),
        Q("{25%} sampling makes `joint` dj={2048} 3.6x faster than its full softmax at {32K}, 4.0x at {128K}; at {5%} `joint` "
          "dj={4096} at {128K} runs 16x faster", BENCH, "joint-2048 32768 25% 585 0.71x 3.59x",
          "joint-2048 131072 25% 116 0.69x 3.97x", "joint-4096 131072 5% 247 1.46x 16.44x"),
        Q("0.086x the plain path's peak memory at 1.11x its time (median after a warm-up step; target ≤ 1.0x time missed), "
          "same loss; one first step in a fresh process: 0.11x at 1.23x", BENCH,
          "joint-4096 131072 chunked-4096 124.241 (121.873-126.609) 712 1.11x 0.086x",
          "FAIL joint-4096 |V|=131072: chunked-4096 / plain time: 1.114 (target <= 1.0)",
          "PASS chunked / plain peak memory: 0.113", "PASS chunked / plain time: 1.227"),
        Q("whole training step 1.42x plain cross-entropy (full softmax), 1.13x with {25%} sampling", BENCH,
          "whole step full label_embedding 3854.4 266 1.42x", "whole step 25% label_embedding 1963.3 522 1.13x"),
        Q("= 10,000 | 10% sampling 3.47x faster than all labels", BENCH, "at |Y| = 10,000 labels",
          "so 10 % sampling is 3.47x faster than the full label set"),
        # classification
        Q("`gile` with σ = tanh 63.13 ± 0.27 seen AvgPr vs `linear` 62.53 ± 0.84, better RL and OneErr, `bil_n16` 59.37",
          GILE, "| **63.13 ± 0.27** |", "| 62.53 ± 0.84 |", "| 59.37 ± 0.52 |"),
        Q("`linear` best (68.00)", GILE, "| WAN + linear + word2vec E | 3.22 ± 0.20 | 68.00 ± 0.04 |"),
        C("`gile` 2x chance AvgPr from a random E (19.9 tanh, chance 9.8); with word2vec E + `--similarity-init` `bil_n16` "
          "31.5 and tanh `gile` 29.0 (≈ 3x chance)", GILE,
          ["scores AvgPr 19.9 with tanh / 16.6 with relu (chance 9.8)", "`bil_n16` reaches AvgPr 31.5 (3.2x chance)",
           "tanh `gile` 29.0 (3.0x)"], "n[0] / n[2], n[0], n[2], n[3], n[5], n[5] / n[2]"),
        Q("seen 70.47 ± 0.40, unseen 60.25 ± 1.12, GZSL H 16.3 → 54.9 with calibrated stacking; baselines TF-IDF + LR seen "
          "71.78, encoder cosine unseen 68.32; targets (unseen ≥ 75 with seen ≥ 73) missed",
          "examples/gile/results/gile_pretrained_gzsl.md", "| 1.92 ± 0.06 | 70.47 ± 0.40 |", "| 60.25 ± 1.12 |",
          "| 16.26 ± 0.86 |", "| 54.89 ± 0.64 |", "| 2.52 | 71.78 |", "| 7.11 | 68.32 |",
          "@" + GILE + " unseen AvgPr ≥ 75 with seen AvgPr ≥ 73"),
        Q("last epoch, {3} seeds: seen 73.30 ± 0.13 (TF-IDF + LR 71.78), unseen 70.98 ± 0.15 (cosine 68.32), calibrated "
          "GZSL H 63.35 ± 0.29 (two tools 57.16, mean-stacked 59.37)", TWO_TOOLS,
          "| 73.30 ± 0.13 | 70.98 ± 0.15 | 63.35 ± 0.25 | 63.69 ± 0.65 | 63.02 ± 0.45 | 63.35 ± 0.29 |",
          "| tfidf_lr | – | 71.78 |", "| cosine | – | 23.70 | 68.32 |", "| 55.79 | 57.16 | -0.00 |", "| 58.08 | 59.37 |"),
        Q("`--cosine-prior 20`; the README's quick start", TWO_TOOLS, "+ --cosine-prior 20 |"),
        Q("raises `bil_n16` unseen AvgPr 25.84 → 33.04", GILE, "unseen 25.84 → 33.04"),
        Q("(macro 10.0 vs `linear` 15.3); tanh `gile` beats `linear` on every bin but the rarest (macro 17.6)", GILE,
          "(macro) | 389 | 15.31 | 10.01 | 17.63 |"),
        Q("seen AvgPr +1.4 to +4.0 (≥ 3 only for uk), English −0.2 to −0.6; unseen 1.3-1.6× chance", MULTI,
          "gain (+1.4 to +4.0)", "≥ 3 points (the target) only for uk", "for the same 2 passes: −0.2 to −0.6",
          "13-16 (1.3-1.6×)"),
        Q("held-out retrieval P@1 91-99.5% (word vectors 68.5-92.5%)", MULTI,
          "| uk | **91.0%** (0.63) | 83.5% (0.33) | 68.5% |", "| pt_BR | **99.5%** (0.79) | 97.0% (0.58) | 92.5% |"),
        Q("GILE on L alone seen 60.5-61.5 (+7.5 to +11.7 over GILE-HAN); en + L: seen +1.6 (pl) and under 0.5 elsewhere, "
          "English −1.1 to −1.8, unseen 2.9-4.2× chance (≥ 3× in pl, pt_BR, ja; uk 2.9×)", MULTI,
          "at 60.5-61.5 against 49.9-53.4 for GILE-HAN over word vectors (and 54.1-57.7 for the linear HAN): +7.5 to +11.7",
          "adds +1.6 (pl, every seed) and under 0.5 elsewhere", "**English loses 1.1-1.8 points**", "(−1.15)", "(−1.82)",
          "29-42 unseen AvgPr (2.9-4.2× chance)", "≥ 3× chance in three of four languages — met for pl, pt_BR, ja; missed for uk (2.9×)"),
        Q("unseen ≥ 3× chance in every language for en + L (3.2× uk to 4.3× pt_BR, every seed); en + L over L alone seen "
          "+1.7 (uk), {about 0} (pl, ja), −0.8 (pt_BR); English alone 62.8 → 68.9 seen, en + L's English 66.5-67.1 (−1.9 to "
          "−2.4 under it)", MULTI, "every seed at or above 3×", "scores 3.2× (uk) to 4.3× (pt_BR) chance",
          "the difference is +1.7 for uk", "about zero for pl and ja, −0.8 for pt_BR", "rises from 62.82 to 68.93",
          "English from 61.0-61.7 to 66.5-67.1", "| 67.06 ± 0.52 (−1.87) |", "| 66.53 ± 0.66 (−2.40) |"),
        Q("ranks each unseen label first among the unseen for ≥ 90% of its texts", GILE,
          "for at least 90% of the texts made of its words"),
        N("7 s: seen AvgPr 43.07, unseen 5.17; word2vec vectors from the 800 documents with `--similarity-init`: seen 46.27, "
          "unseen 3.20", "fairseq-train's validation log of one run, as the row says: no result file"),
        # the result files
        Q("{2+2 × 256} LSTM, seeds {1, 2}, 1,500 updates: nmt", NMT_1500, "1500 updates per run"),
        Q("the same LSTM at 3,000 updates", W + "nmt-study-lstm-u3000.md", "3000 updates per run"),
        Q("the same LSTM at 4,500 updates", W + "nmt-study-lstm-u4500.md", "4500 updates per run"),
        Q("the same LSTM at 6,000 updates", W + "nmt-study-lstm-u6000.md", "6000 updates per run"),
        Q("tied vs joint-512, seeds {1-3}, 1,500 updates", W + "nmt-study-transformer-u1500.md", "1500 updates per run"),
        Q("the same Transformer at 2,000 updates", W + "nmt-study-transformer-u2000.md", "2000 updates per run"),
        Q("the same Transformer at 2,500 updates", W + "nmt-study-transformer-u2500.md", "2500 updates per run"),
        Q("the Transformer, seed {2}, 3,000 updates", W + "nmt-study-transformer-seed2-u3000.md", "3000 updates per run"),
        Q("the Transformer, seed {2}, 3,500 updates", W + "nmt-study-transformer-seed2-u3500.md", "3500 updates per run"),
        Q("the Transformer, seed {2}, 4,000 updates", W + "nmt-study-transformer-seed2-u4000.md", "4000 updates per run"),
        Q("the Transformer, seeds {1 and 2}, 3,000 updates", W + "nmt-study-transformer-seeds12-u3000.md",
          "3000 updates per run"),
        Q("the Transformer, seeds {1 and 2}, 3,500 updates", W + "nmt-study-transformer-seeds12-u3500.md",
          "3500 updates per run"),
        Q("the Transformer, seeds {1 and 2}, 4,000 updates", W + "nmt-study-transformer-seeds12-u4000.md",
          "4000 updates per run"),
        Q("the Transformer, seed {1} trained again to 4,000 updates", W + "nmt-study-transformer-seed1-u4000.md",
          "for joint to 4,000 updates"),
        Q("LSTM on an H200, bf16, 8,000 updates", W + "nmt-study-gpu.md", "the paper's model, de→en, 8,000 updates"),
        Q("the same at 5,500 updates: a second seed", W + "nmt-study-gpu-u5500.md", "NMT study on a GPU at 5,500 updates"),
        Q("the same in three seeds at 5,000 updates", W + "nmt-study-gpu-three-seeds.md", "reached 5,000 updates each"),
    ],
}
