#!/usr/bin/env bash
# The main job on bundled real data: a small NMT-joint (joint_transformer, --output-layer joint) trained on
# CPU on the LibreOffice en->de corpus in data/demo-en-de, then the test set translated and scored with
# sacreBLEU. Run through `make demo` (which installs everything first). Re-running reuses finished steps.
#
# The budget is a number of updates, not minutes, so that every machine trains the same model: 500 updates
# take about 6 minutes on 2 CPU cores, the whole script 401 s (sacreBLEU 12.75, chrF2 35.24 on the 501 test
# sentences), with two torch threads unless OMP_NUM_THREADS says otherwise (other thread counts may change the last
# digits).
#
# Knobs (environment): DEMO_DIR (work dir, default demo-work), DEMO_MAX_UPDATE (default 500),
# DEMO_OUTPUT_LAYER (default joint), DEMO_JOINT_DIM (256), DEMO_SEED (1).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
DATA="$REPO/data/demo-en-de"
WORK="${DEMO_DIR:-$REPO/demo-work}"
MAX_UPDATE="${DEMO_MAX_UPDATE:-500}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
LAYER="${DEMO_OUTPUT_LAYER:-joint}"
DJ="${DEMO_JOINT_DIM:-256}"
SEED="${DEMO_SEED:-1}"
SRC=en
TGT=de
mkdir -p "$WORK"
log() { echo "[demo $(date +%H:%M:%S)] $*"; }

for f in train valid test; do for l in $SRC $TGT; do
  [ -s "$DATA/$f.$l" ] || { echo "demo: missing $DATA/$f.$l (the bundled corpus); restore it with git checkout data/" >&2; exit 1; }
done; done
# both sides of each split have the same number of lines (line i translates line i), before anything is trained
# (the recipes' check, in a subshell: lib.sh sets the recipes' own variables)
( source "$REPO/examples/wmt17/lib.sh"
  for f in train valid test; do check_pair "$DATA/$f.en" "$DATA/$f.de" "the bundled $f corpus"; done )

# 1. joint BPE (sentencepiece, 4000 pieces) learned on the training data only
if [ ! -s "$WORK/spm.model" ]; then
  log "learning a 4000-piece joint BPE model (sentencepiece) on $(wc -l < "$DATA/train.$SRC") training pairs"
  python - "$DATA" "$WORK" <<'EOF'
import sys, sentencepiece as spm
data, work = sys.argv[1:]
spm.SentencePieceTrainer.train(
    input=[f"{data}/train.en", f"{data}/train.de"], model_prefix=f"{work}/spm", vocab_size=4000,
    model_type="bpe", character_coverage=1.0, input_sentence_size=1000000, shuffle_input_sentence=True,
    seed_sentencepiece_size=1000000, num_threads=2, minloglevel=2)
EOF
fi
if [ ! -s "$WORK/bpe/test.$TGT" ]; then
  log "applying BPE"
  mkdir -p "$WORK/bpe"
  python - "$DATA" "$WORK" <<'EOF'
import sys, sentencepiece as spm
data, work = sys.argv[1:]
sp = spm.SentencePieceProcessor(model_file=f"{work}/spm.model")
for split in ("train", "valid", "test"):
    for lang in ("en", "de"):
        with open(f"{data}/{split}.{lang}", encoding="utf-8") as f, open(f"{work}/bpe/{split}.{lang}", "w", encoding="utf-8") as out:
            for line in f:
                out.write(" ".join(sp.encode(line.rstrip("\n"), out_type=str)) + "\n")
EOF
fi

# 2. binarize
if [ ! -s "$WORK/bin/test.$SRC-$TGT.$TGT.bin" ]; then
  log "fairseq-preprocess (joined dictionary)"
  rm -rf "$WORK/bin"
  fairseq-preprocess --source-lang $SRC --target-lang $TGT --trainpref "$WORK/bpe/train" \
    --validpref "$WORK/bpe/valid" --testpref "$WORK/bpe/test" --destdir "$WORK/bin" \
    --joined-dictionary --workers 2 > "$WORK/preprocess.log"
fi

# 3. train a small NMT-joint (Transformer encoder-decoder, joint output layer sharing E)
CKPT="$WORK/checkpoints-$LAYER"
if [ ! -s "$CKPT/checkpoint_last.pt" ] || [ -z "$(grep -l 'done training' "$CKPT/train.log" 2>/dev/null)" ]; then
  log "training joint_transformer --output-layer $LAYER --joint-dim $DJ for $MAX_UPDATE updates (seed $SEED) on CPU"
  mkdir -p "$CKPT"
  fairseq-train "$WORK/bin" --user-dir "$REPO/fairseq_joint" \
    --arch joint_transformer --output-layer "$LAYER" --joint-dim "$DJ" --share-all-embeddings \
    --encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 192 --decoder-embed-dim 192 \
    --encoder-ffn-embed-dim 384 --decoder-ffn-embed-dim 384 --encoder-attention-heads 4 --decoder-attention-heads 4 \
    --dropout 0.1 --optimizer adam --adam-betas '(0.9, 0.98)' --lr 2e-3 --lr-scheduler inverse_sqrt \
    --warmup-updates 300 --clip-norm 1.0 --criterion label_smoothed_cross_entropy --label-smoothing 0.1 \
    --max-tokens 4096 --required-batch-size-multiple 1 --max-update "$MAX_UPDATE" \
    --save-dir "$CKPT" --no-epoch-checkpoints --save-interval-updates 500 --keep-interval-updates 1 \
    --seed "$SEED" --num-workers 0 --log-format simple --log-interval 100 \
    2>&1 | tee "$CKPT/train.log" | grep --line-buffered -E "train_inner|valid on|done training|Error"
fi

# 4. translate the test set (beam 5), detokenize, score with sacreBLEU
log "translating $(wc -l < "$DATA/test.$SRC") test sentences (beam 5)"
fairseq-generate "$WORK/bin" --user-dir "$REPO/fairseq_joint" --path "$CKPT/checkpoint_last.pt" \
  --gen-subset test --beam 5 --batch-size 64 --required-batch-size-multiple 1 --remove-bpe sentencepiece --scoring sacrebleu \
  > "$WORK/generate-test.txt" 2> "$WORK/generate-test.log"
grep -P '^H-\d+\t' "$WORK/generate-test.txt" | sed 's/^H-//' | sort -n -k1,1 | cut -f3 > "$WORK/test.hyp.$TGT"
[ "$(wc -l < "$WORK/test.hyp.$TGT")" -eq "$(wc -l < "$DATA/test.$TGT")" ] || {
  echo "demo: $(wc -l < "$WORK/test.hyp.$TGT") hypotheses for $(wc -l < "$DATA/test.$TGT") test sentences" >&2; exit 1; }
fairseq-joint-count-params "$CKPT/checkpoint_last.pt" 2>/dev/null | sed -n 1,2p  # sed reads to the end: head could SIGPIPE the command, which pipefail turns into a failure
log "sacreBLEU on detokenized output vs the raw references ($WORK/test.hyp.$TGT):"
sacrebleu "$DATA/test.$TGT" -i "$WORK/test.hyp.$TGT" -m bleu chrf -b -w 2 > "$WORK/score.txt"
sacrebleu "$DATA/test.$TGT" -i "$WORK/test.hyp.$TGT" -m bleu chrf -w 2 --format text | tee -a "$WORK/score.txt"
