#!/usr/bin/env bash
# The small-scale replication of Table 2 reported in studies/nmt-joint.md: a local de->en corpus, joint BPE 8K,
# a 1+1-layer 256-d LSTM, the same seed and the same budget of updates for NMT, NMT-tied and NMT-joint
# at two dj, then evaluate.sh (vs NMT), the Table-2 layout and the BLEU-vs-dj plot.
#
#   study-small.sh CORPUS_PREFIX_DIR WORK_DIR [UPDATES]
#
# CORPUS_PREFIX_DIR holds {train,valid,test}.{de,en} (plain text). CPU only; OMP_NUM_THREADS=1 is set
# because two threads per process are slower than one on a shared 2-core machine.
set -euo pipefail
RECIPE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python}"
[[ $# -ge 2 ]] || { echo "usage: $0 CORPUS_DIR WORK_DIR [UPDATES]" >&2; exit 2; }
CORPUS="$1" WORK="$2" UPDATES="${3:-200}"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
SYSTEMS=(nmt nmt-tied nmt-joint-256 nmt-joint-512)
SMALL=(--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 256 --decoder-embed-dim 256
       --encoder-hidden-size 256 --decoder-hidden-size 256 --decoder-out-embed-dim 256
       --max-tokens 4000 --max-update "$UPDATES" --num-workers 0 --log-interval 20)
DATA_BIN="$(bash "$RECIPE_DIR/prepare-parallel.sh" --train "$CORPUS/train" --valid "$CORPUS/valid" --test "$CORPUS/test" \
    --src de --tgt en --bpe-ops 8000 --work "$WORK/data" --workers 2 | tail -1)"
for s in "${SYSTEMS[@]}"; do
    if [[ -f "$WORK/$s/checkpoint_best.pt" ]]; then echo "exists, skipped: $WORK/$s" >&2; continue; fi
    start=$(date +%s)
    bash "$RECIPE_DIR/train.sh" "$DATA_BIN" "$s" "$WORK/$s" "${SMALL[@]}" > "$WORK/$s.train.log" 2>&1
    echo "$(date -u '+%F %T') | study | trained $s in $(( $(date +%s) - start )) s" >&2
done
for s in "${SYSTEMS[@]}"; do
    base=(); [[ "$s" != nmt ]] && base=(--baseline "$WORK/nmt")
    start=$(date +%s)
    bash "$RECIPE_DIR/evaluate.sh" "$DATA_BIN" "$WORK/$s" --beam 5 "${base[@]+"${base[@]}"}" > "$WORK/$s.eval.log" 2>&1
    echo "$(date -u '+%F %T') | study | evaluated $s in $(( $(date +%s) - start )) s" >&2
done
$PYTHON "$RECIPE_DIR/results_table.py" --baseline "$WORK/nmt" "${SYSTEMS[@]/#/$WORK/}" --markdown "$WORK/table2.md"
$PYTHON "$RECIPE_DIR/plot_bleu_vs_dj.py" "${SYSTEMS[@]/#/$WORK/}" --output "$WORK/bleu_vs_dj.png"
