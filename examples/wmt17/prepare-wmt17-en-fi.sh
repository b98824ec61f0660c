#!/usr/bin/env bash
# WMT17 English-Finnish as in Pappas et al. (2018), Sec. 4.1: Europarl v8 and Rapid 2016 en-fi training data,
# dev newstest2015, test newstest2016 (the paper's 2.5M pairs also count the Wiki Headlines corpus, which
# this recipe does not fetch).
#   prepare-wmt17-en-fi.sh --raw DIR [--src en --tgt fi] [--bpe-ops 32000|64000|128000] [options]
# Archives looked for in --raw DIR (downloaded there when missing, unless --offline):
#   training-parallel-ep-v8.tgz  rapid2016.tgz  dev.tgz
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
usage() { echo "usage: $0 --raw DIR [--src en --tgt fi] [options]" >&2; }
SRC=en TGT=fi
parse_common_args "$@"
[[ -n "$RAW_DIR" ]] || RAW_DIR="$RECIPE_DIR/raw"
[[ "$SRC-$TGT" == en-fi || "$SRC-$TGT" == fi-en ]] || die "--src $SRC --tgt $TGT: this recipe is for en-fi or fi-en"
WORK="${WORK:-$RECIPE_DIR/work/wmt17-$SRC-$TGT}"
ORIG="$WORK/orig"; mkdir -p "$ORIG" "$WORK/raw"

WMT17=http://data.statmt.org/wmt17/translation-task
declare -A URL=(
    [training-parallel-ep-v8.tgz]=$WMT17/training-parallel-ep-v8.tgz
    [rapid2016.tgz]=$WMT17/rapid2016.tgz
    [dev.tgz]=$WMT17/dev.tgz
)
for name in training-parallel-ep-v8.tgz rapid2016.tgz dev.tgz; do
    fetch_unpack "$name" "${URL[$name]}" "$ORIG"
done
CORPORA=(training/europarl-v8.fi-en rapid2016.en-fi)
for l in en fi; do
    files=()
    for c in "${CORPORA[@]}"; do need "$ORIG/$c.$l" "corpus $c.$l"; files+=("$ORIG/$c.$l"); done
    step "$WORK/raw/train.$l" $TEXT concat "$WORK/raw/train.$l" "${files[@]}"
done
newstest_pair 2015 "$ORIG/dev" "$WORK/raw/valid"
newstest_pair 2016 "$ORIG/dev" "$WORK/raw/test"
prepare_text "$SRC" "$TGT"
echo "$DATA_BIN"
