#!/usr/bin/env bash
# Scores one trained system the way Pappas et al. (2018, Sec. 4) report it:
#
#   evaluate.sh DATA_BIN SAVE_DIR [--beam 5] [--baseline BASELINE_SAVE_DIR] [--query WORD ...]
#               [--checkpoint NAME] [--eval-dir NAME] [-- extra fairseq-generate flags]
#
# Writes SAVE_DIR/eval/ (--eval-dir: another name, e.g. one per checkpoint; a --baseline's is the same name): gen.out (fairseq-generate), hyp.tok (BPE removed), hyp.detok (detokenized),
# scores.json/scores.txt (sacreBLEU + signature, chrF, tokenized BLEU, paired bootstrap vs --baseline),
# params.json (|Θ|, fairseq-joint-count-params), freq_bins.md/json (high/medium/low-frequency target words,
# Fig. 3, vs the baseline too; frequency_bins.py), nn.md (Table 1 neighbours in E and in the output layer;
# nearest_neighbours.py). The fairseq-joint-* commands are found on PATH, as fairseq-generate is.
set -euo pipefail
RECIPE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$RECIPE_DIR/../.." && pwd)"
PYTHON="${PYTHON:-python}"
TEXT="$PYTHON $RECIPE_DIR/prepare_text.py"
die() { echo "error: $*" >&2; exit 2; }
log() { echo "$(date -u '+%F %T') | evaluate.sh | $*" >&2; }
[[ $# -ge 2 ]] || die "usage: $0 DATA_BIN SAVE_DIR [--beam N] [--baseline DIR] [--query WORD ...] [--checkpoint NAME] [--eval-dir NAME] [-- generate flags]"
DATA_BIN="$1" SAVE_DIR="$2"; shift 2
BEAM=5 BASELINE="" QUERIES=() CKPT_NAME=checkpoint_best.pt EVAL_DIR=eval GEN_EXTRA=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --beam) BEAM="$2"; shift 2 ;;
        --baseline) BASELINE="$2"; shift 2 ;;
        --query) QUERIES+=(--query "$2"); shift 2 ;;
        --checkpoint) CKPT_NAME="$2"; shift 2 ;;
        --eval-dir) EVAL_DIR="$2"; shift 2 ;;
        --) shift; GEN_EXTRA=("$@"); break ;;
        *) die "unknown option '$1' (use --beam, --baseline, --query, --checkpoint, --eval-dir, or -- before fairseq-generate flags)" ;;
    esac
done
CKPT="$SAVE_DIR/$CKPT_NAME"
[[ -f "$DATA_BIN/recipe.env" ]] || die "$DATA_BIN/recipe.env not found: DATA_BIN must be a directory made by a prepare-*.sh script"
[[ -f "$CKPT" ]] || die "checkpoint $CKPT not found: train it with train.sh first (or pass --checkpoint NAME)"
[[ -f "$SAVE_DIR/train-data.env" ]] || die "$SAVE_DIR/train-data.env not found: train the system with examples/wmt17/train.sh"
source "$DATA_BIN/recipe.env"
# the test set must be preprocessed exactly as the training data was (same BPE model, same dictionaries)
TRAINED_CODES="$(sed -n 's/^RECIPE_CODES_SHA=//p' "$SAVE_DIR/train-data.env")"
TRAINED_DICT="$(sed -n 's/^TRAIN_DICT_SHA=//p' "$SAVE_DIR/train-data.env")"
TRAINED_ON="$(sed -n 's/^TRAIN_DATA_BIN=//p' "$SAVE_DIR/train-data.env")"
TRAINED_PAIR="$(sed -n 's/^RECIPE_SRC=//p' "$SAVE_DIR/train-data.env")-$(sed -n 's/^RECIPE_TGT=//p' "$SAVE_DIR/train-data.env")"
[[ "$TRAINED_PAIR" == "$RECIPE_SRC-$RECIPE_TGT" ]] || die "$CKPT translates $TRAINED_PAIR but $DATA_BIN is $RECIPE_SRC-$RECIPE_TGT; evaluate on data of the trained direction"
[[ "$TRAINED_CODES" == "$RECIPE_CODES_SHA" ]] || die "$DATA_BIN was preprocessed with another BPE model than $CKPT was trained on ($TRAINED_ON); evaluate on that data-bin or re-run the prepare script with --bpe-codes of the trained model"
NOW_DICT="$(cat "$DATA_BIN/dict.$RECIPE_SRC.txt" "$DATA_BIN/dict.$RECIPE_TGT.txt" | sha256sum | cut -c1-64)"
[[ "$TRAINED_DICT" == "$NOW_DICT" ]] || die "$DATA_BIN has other dictionaries than $CKPT was trained with ($TRAINED_ON); evaluate on that data-bin"
for f in "$RECIPE_REF_RAW" "$RECIPE_REF_TOK" "$RECIPE_TRAIN_TGT_TOK"; do
    [[ -f "$f" ]] || die "missing $f (recorded in $DATA_BIN/recipe.env): re-run the prepare script that made $DATA_BIN"
done

[[ "$EVAL_DIR" =~ ^[A-Za-z0-9._-]+$ ]] || die "--eval-dir $EVAL_DIR: give a directory name (letters, digits, . _ -), created in SAVE_DIR"
OUT="$SAVE_DIR/$EVAL_DIR"; mkdir -p "$OUT"
REMOVE_BPE="subword_nmt"; [[ "$RECIPE_BPE" == sentencepiece ]] && REMOVE_BPE="sentencepiece"
LC=(); [[ "$RECIPE_LOWERCASE" == 1 ]] && LC=(--lowercase)
N_TEST=$(wc -l < "$RECIPE_REF_RAW")

log "fairseq-generate $CKPT on $DATA_BIN test ($N_TEST sentences, beam $BEAM)"
# --required-batch-size-multiple 1: with fairseq's default of 8 the last partial batch is dropped (fairseq #5036),
# and a test set whose size is no multiple of 8 loses sentences
fairseq-generate "$DATA_BIN" --user-dir "$REPO_ROOT/fairseq_joint" --task translation \
    --source-lang "$RECIPE_SRC" --target-lang "$RECIPE_TGT" --path "$CKPT" --gen-subset test \
    --beam "$BEAM" --remove-bpe "$REMOVE_BPE" --max-tokens 8000 --required-batch-size-multiple 1 \
    --max-len-a 1.5 --max-len-b 10 \
    --no-progress-bar "${GEN_EXTRA[@]+"${GEN_EXTRA[@]}"}" > "$OUT/gen.out.tmp"
mv "$OUT/gen.out.tmp" "$OUT/gen.out"
$TEXT hypotheses --expect "$N_TEST" "$OUT/gen.out" "$OUT/hyp.tok"
$TEXT detokenize --lang "$RECIPE_TGT" "$OUT/hyp.tok" "$OUT/hyp.detok"

SYSTEM="$(sed -n 's/^TRAIN_SYSTEM=//p' "$SAVE_DIR/train-data.env")"
SCORE_ARGS=(--hyp "$OUT/hyp.detok" --ref "$RECIPE_REF_RAW" --hyp-tok "$OUT/hyp.tok" --ref-tok "$RECIPE_REF_TOK"
            --json "$OUT/scores.json" "${LC[@]+"${LC[@]}"}")
BINS_ARGS=(--hyp "$SYSTEM=$OUT/hyp.tok")
if [[ -n "$BASELINE" ]]; then
    [[ -f "$BASELINE/$EVAL_DIR/hyp.detok" ]] || die "--baseline $BASELINE: $BASELINE/$EVAL_DIR/hyp.detok not found; evaluate the baseline first"
    BASE_NAME="$(sed -n 's/^TRAIN_SYSTEM=//p' "$BASELINE/train-data.env" 2>/dev/null || true)"
    SCORE_ARGS+=(--baseline-hyp "$BASELINE/$EVAL_DIR/hyp.detok" --baseline-name "${BASE_NAME:-baseline}"
                 --system-name "$SYSTEM")
    BINS_ARGS=(--hyp "${BASE_NAME:-baseline}=$BASELINE/$EVAL_DIR/hyp.tok" "${BINS_ARGS[@]}")
fi
fairseq-joint-score "${SCORE_ARGS[@]}" | tee "$OUT/scores.txt"
fairseq-joint-count-params "$CKPT" --json > "$OUT/params.json"
$PYTHON "$RECIPE_DIR/frequency_bins.py" --train-tgt "$RECIPE_TRAIN_TGT_TOK" --ref "$RECIPE_REF_TOK" \
    "${BINS_ARGS[@]}" --markdown "$OUT/freq_bins.md" --json "$OUT/freq_bins.json"
$PYTHON "$RECIPE_DIR/nearest_neighbours.py" "$CKPT" --dict "$DATA_BIN/dict.$RECIPE_TGT.txt" \
    "${QUERIES[@]+"${QUERIES[@]}"}" --markdown "$OUT/nn.md" --json "$OUT/nn.json" > /dev/null
log "done: $OUT (scores.txt, params.json, freq_bins.md, nn.md)"
