#!/usr/bin/env bash
# One command per row of Tables 2 and 3 of Pappas et al. (2018):
#
#   train.sh DATA_BIN SYSTEM SAVE_DIR [any fairseq-train flag ...]
#
# SYSTEM (Table 2):  nmt (W^T h_t, Eq. 8)   nmt-tied (E h_t, Eq. 9)   nmt-joint-DJ (Eq. 15/16, e.g. nmt-joint-512)
#        (Table 3):  eq6-bilinear (E W h_t)  eq7a-label (sigma(E W) h_t)  eq7b-context (E sigma(W h_t))
#                    eq15-DJ (= nmt-joint-DJ)
# The paper's configuration (Sec. 4.2): 2+2 LSTM layers, 512-d embeddings and states, dropout 0.3 after each
# layer, Adam with lr 0.001, pairs of at most 50 words (the prepare scripts filter them). 25% sampling of the
# output vocabulary (Sec. 4.2) is used for target vocabularies over 100K (the 128K rows) and for joint
# models with dj >= 2048; SAMPLING=on|off overrides that rule, SAMPLE_RATE=0.25 its rate.
# Flags after SAVE_DIR go to fairseq-train last, so they override these defaults (GPUs, --fp16,
# --distributed-world-size, --max-update, --arch ...). ARCH=... changes the architecture.
# The joint systems (nmt-joint-DJ, eq15-DJ) train joint_lstm_wmt17_uniform_init: the paper's LSTM with the output layer
# started at U(-0.1, 0.1) (--output-layer-init uniform), which gave it the lowest validation perplexity in every GPU
# seed of the study (studies/nmt-joint.md); the other systems train joint_lstm_wmt17 (fairseq's start). ARCH=joint_lstm_wmt17
# or --output-layer-init fairseq gives a joint system fairseq's start.
set -euo pipefail
RECIPE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$RECIPE_DIR/../.." && pwd)"
die() { echo "error: $*" >&2; exit 2; }
[[ $# -ge 3 ]] || die "usage: $0 DATA_BIN SYSTEM SAVE_DIR [fairseq-train flags]; SYSTEM: nmt, nmt-tied, nmt-joint-DJ, eq6-bilinear, eq7a-label, eq7b-context, eq15-DJ"
DATA_BIN="$1" SYSTEM="$2" SAVE_DIR="$3"; shift 3
[[ -f "$DATA_BIN/recipe.env" ]] || die "$DATA_BIN/recipe.env not found: DATA_BIN must be a directory made by a prepare-*.sh script of examples/wmt17"
source "$DATA_BIN/recipe.env"
[[ -f "$DATA_BIN/dict.$RECIPE_TGT.txt" ]] || die "$DATA_BIN/dict.$RECIPE_TGT.txt not found: re-run the prepare script"

DJ="" DEFAULT_ARCH=joint_lstm_wmt17
case "$SYSTEM" in
    nmt) LAYER=(--output-layer softmax) ;;
    nmt-tied) LAYER=(--output-layer tied) ;;
    nmt-joint-*|eq15-*) DJ="${SYSTEM##*-}"; [[ "$DJ" =~ ^[0-9]+$ ]] || die "SYSTEM $SYSTEM: give the joint dimension, e.g. nmt-joint-512"
        LAYER=(--output-layer joint --joint-dim "$DJ") DEFAULT_ARCH=joint_lstm_wmt17_uniform_init ;;
    eq6-bilinear) LAYER=(--output-layer bilinear) ;;
    eq7a-label) LAYER=(--output-layer label) ;;
    eq7b-context) LAYER=(--output-layer context) ;;
    *) die "unknown SYSTEM '$SYSTEM': use nmt, nmt-tied, nmt-joint-DJ (e.g. nmt-joint-512), eq6-bilinear, eq7a-label, eq7b-context or eq15-DJ" ;;
esac

VOCAB=$(( $(wc -l < "$DATA_BIN/dict.$RECIPE_TGT.txt") + 4 ))
SAMPLING="${SAMPLING:-auto}" SAMPLE_RATE="${SAMPLE_RATE:-0.25}"
if [[ "$SAMPLING" == auto ]]; then
    SAMPLING=off
    (( VOCAB > 100000 )) && SAMPLING=on
    [[ -n "$DJ" ]] && (( DJ >= 2048 )) && SAMPLING=on
fi
case "$SAMPLING" in
    on) CRITERION=(--criterion sampled_cross_entropy --sample-rate "$SAMPLE_RATE" --sampler uniform) ;;
    off) CRITERION=(--criterion cross_entropy) ;;
    *) die "SAMPLING=$SAMPLING: use auto, on or off" ;;
esac

mkdir -p "$SAVE_DIR"
# what evaluate.sh checks the test data against
{ cat "$DATA_BIN/recipe.env"
  echo "TRAIN_DATA_BIN=$(cd "$DATA_BIN" && pwd)"
  echo "TRAIN_DICT_SHA=$(cat "$DATA_BIN/dict.$RECIPE_SRC.txt" "$DATA_BIN/dict.$RECIPE_TGT.txt" | sha256sum | cut -c1-64)"
  echo "TRAIN_SYSTEM=$SYSTEM"
  echo "TRAIN_JOINT_DIM=$DJ"
  echo "TRAIN_SAMPLING=$SAMPLING"
} > "$SAVE_DIR/train-data.env"

echo "$(date -u '+%F %T') | train.sh | $SYSTEM on $DATA_BIN (|V_tgt|=$VOCAB, sampling $SAMPLING) -> $SAVE_DIR" >&2
exec fairseq-train "$DATA_BIN" --user-dir "$REPO_ROOT/fairseq_joint" --task translation \
    --source-lang "$RECIPE_SRC" --target-lang "$RECIPE_TGT" \
    --arch "${ARCH:-$DEFAULT_ARCH}" "${LAYER[@]}" "${CRITERION[@]}" \
    --optimizer adam --lr 0.001 --clip-norm 5.0 --max-tokens 4000 --max-epoch 13 \
    --skip-invalid-size-inputs-valid-test --seed 1 \
    --save-dir "$SAVE_DIR" --no-epoch-checkpoints --log-format simple --log-interval 100 \
    "$@"
