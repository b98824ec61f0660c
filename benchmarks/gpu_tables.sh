#!/usr/bin/env bash
# The GPU tables of docs/gpu.md and docs/large-vocabularies.md, measured in one go on one GPU machine (estimated, not
# measured: about 8-10 minutes on one H100/H200 at the defaults, the install included; bench_gpu.py's timed rounds and
# bench_gpu_training.py's cases are bounded by BUDGET_S and TRAINING_BUDGET_S):
#
#   bash benchmarks/gpu_tables.sh wheels        # on a machine with the package index: fairseq-fixed and the two
#                                               # anchors (Cut Cross-Entropy, Liger) as wheels into .whl/ (~23 MB)
#   bash benchmarks/gpu_tables.sh run [OUT] [PART]   # on the GPU machine (its CUDA torch, Triton, sentencepiece,
#                                               # sacrebleu, scikit-learn already there): installs .whl/ into /tmp/site if
#                                               # it is there, then writes OUT/ (default gpu-results/); PART: all (the
#                                               # default), tests, gpu or training, one device call each if need be
#
# OUT/fused-tests.log: the fused exact softmax's tests, compiled on this GPU (bf16 included);
# OUT/gpu-tables.md, gpu.json, gpu.png: benchmarks/bench_gpu.py (each output layer's training step; the paper's Table
# 4; the exact softmax of every layer against the plain path, Cut Cross-Entropy and Liger);
# OUT/training.md, training.json, training.png: benchmarks/bench_gpu_training.py (whole-model fairseq-train tokens/s,
# MFU and where the time goes). BUDGET_S bounds bench_gpu.py's timed rounds (default 150 s), TRAINING_BUDGET_S
# the time after which bench_gpu_training.py starts no case (default 300 s; the cases left are listed as not measured).
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=${WHEELS:-.whl}

case "${1:-}" in
wheels)
    # CPython 3.12 on x86-64 Linux: what the lent GPU machines run (fairseq-fixed has a prebuilt wheel for it)
    mkdir -p "$WHEELS"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$WHEELS" \
        fairseq-fixed==0.12.3.1 hydra-core==1.3.2 omegaconf==2.3.0 bitarray sacremoses tensorboardX subword-nmt cffi \
        pycparser liger-kernel==0.8.5 cut-cross-entropy==25.1.1
    python3 -m pip wheel -q --no-deps -w "$WHEELS" antlr4-python3-runtime==4.9.3  # an sdist only
    ls "$WHEELS"
    ;;
run)
    # run OUT [PART]: PART = all (default), tests, gpu (bench_gpu.py) or training (bench_gpu_training.py), so that a
    # device call too short for all of them runs them one call each
    OUT=${2:-gpu-results}
    PART=${3:-all}
    case "$PART" in all|tests|gpu|training) ;; *) echo "error: PART $PART: all, tests, gpu or training" >&2; exit 2 ;; esac
    mkdir -p "$OUT"
    start=$SECONDS
    if [ -d "$WHEELS" ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHEELS"/*.whl
        export PYTHONPATH=/tmp/site:$PWD:$PWD/studies${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
    fi
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
    echo "installed in $((SECONDS - start)) s"
    status=0
    if [[ "$PART" == all || "$PART" == tests ]]; then
        # the fused kernels compiled for this GPU, against the plain path, before anything is timed; a failure is
        # reported (the timings of the fused rows are then not to be trusted) and the other tables still run
        python3 -m pytest -q -p no:cacheprovider tests/unit/test_fused_cross_entropy.py > "$OUT/fused-tests.log" 2>&1 \
            || { status=1; echo "FUSED-PATH TESTS FAILED: see $OUT/fused-tests.log" | tee "$OUT/FUSED-TESTS-FAILED"; }
        tail -3 "$OUT/fused-tests.log"
        echo "fused-path tests done at $((SECONDS - start)) s"
    fi
    if [[ "$PART" == all || "$PART" == gpu ]]; then
        python3 benchmarks/bench_gpu.py --time-budget-s "${BUDGET_S:-150}" --json "$OUT/gpu.json" \
            --markdown "$OUT/gpu-tables.md" --plot "$OUT/gpu.png" > "$OUT/gpu.log" 2>&1 || status=1
        tail -40 "$OUT/gpu.log"
        echo "bench_gpu.py done at $((SECONDS - start)) s"
    fi
    if [[ "$PART" == all || "$PART" == training ]]; then
        python3 benchmarks/bench_gpu_training.py --time-budget-s "${TRAINING_BUDGET_S:-300}" --json "$OUT/training.json" \
            --markdown "$OUT/training.md" --plot "$OUT/training.png" > "$OUT/training.log" 2>&1 || status=1
        tail -60 "$OUT/training.log"
    fi
    echo "done in $((SECONDS - start)) s (status $status)"
    exit $status
    ;;
*)
    echo "usage: bash benchmarks/gpu_tables.sh wheels | run [OUT] [all|tests|gpu|training]" >&2
    exit 2
    ;;
esac
