#!/usr/bin/env bash
# IWSLT corpora:
#   prepare-iwslt.sh --corpus iwslt14-de-en --raw DIR   fairseq's IWSLT14 German-English recipe: de-en.tgz
#       (train.tags.de-en.*, IWSLT14.TED*.xml), lowercased, pairs up to 175 words, ratio 1.5, joint BPE 10K,
#       valid = every 23rd training pair, test = dev2010 + tst2010-2012 + TEDX.dev2012
#   prepare-iwslt.sh --corpus iwslt15-en-vi --raw DIR   IWSLT15 English-Vietnamese as Sun et al. (2017) use it
#       (Stanford NLP's release: train.{en,vi}, dev tst2012, test tst2013)
# Defaults can be overridden with the common options (--bpe-ops, --max-len, ...).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
usage() { echo "usage: $0 --corpus iwslt14-de-en|iwslt15-en-vi --raw DIR [options]" >&2; }
CORPUS="" ARGS=()
while [[ $# -gt 0 ]]; do
    case "$1" in --corpus) CORPUS="$2"; shift 2 ;; *) ARGS+=("$1"); shift ;; esac
done
case "$CORPUS" in
    iwslt14-de-en) SRC=de TGT=en BPE_OPS=10000 MAX_LEN=175 LOWERCASE=1 ;;
    iwslt15-en-vi) SRC=en TGT=vi BPE_OPS=10000 MAX_LEN=50 ;;
    *) usage; die "--corpus '$CORPUS': use iwslt14-de-en or iwslt15-en-vi" ;;
esac
parse_common_args "${ARGS[@]+"${ARGS[@]}"}"
[[ -n "$RAW_DIR" ]] || RAW_DIR="$RECIPE_DIR/raw"
WORK="${WORK:-$RECIPE_DIR/work/$CORPUS-$SRC-$TGT}"
ORIG="$WORK/orig"; mkdir -p "$ORIG" "$WORK/raw"

if [[ "$CORPUS" == iwslt14-de-en ]]; then
    fetch_unpack de-en.tgz http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz "$ORIG"
    for l in de en; do
        need "$ORIG/de-en/train.tags.de-en.$l" "IWSLT14 training file train.tags.de-en.$l"
        step "$WORK/raw/all-train.$l" $TEXT extract-iwslt-train "$ORIG/de-en/train.tags.de-en.$l" "$WORK/raw/all-train.$l"
        tests=()
        for s in TED.dev2010 TED.tst2010 TED.tst2011 TED.tst2012 TEDX.dev2012; do
            f="$ORIG/de-en/IWSLT14.$s.de-en.$l.xml"; need "$f" "IWSLT14 test file IWSLT14.$s.de-en.$l.xml"
            step "$WORK/raw/$s.$l" $TEXT extract-sgm "$f" "$WORK/raw/$s.$l"; tests+=("$WORK/raw/$s.$l")
        done
        step "$WORK/raw/test.$l" $TEXT concat "$WORK/raw/test.$l" "${tests[@]}"
    done
    step "$WORK/raw/valid.en" $TEXT split-every --every 23 --langs de en \
        "$WORK/raw/all-train.de" "$WORK/raw/all-train.en" "$WORK/raw/train" "$WORK/raw/valid"
else
    BASE=https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi
    for pair in train:train valid:tst2012 test:tst2013; do
        split="${pair%%:*}" name="${pair##*:}"
        for l in en vi; do
            f="$(fetch "$name.$l" "$BASE/$name.$l")" || exit 2
            step "$WORK/raw/$split.$l" cp "$f" "$WORK/raw/$split.$l"
        done
    done
fi
prepare_text "$SRC" "$TGT"
echo "$DATA_BIN"
