#!/usr/bin/env bash
# WMT17 English-German as in Pappas et al. (2018), Sec. 4.1: the WMT17 training corpora (Europarl v7,
# Common Crawl, News Commentary v12, Rapid 2016; 5.8M pairs), dev newstest2014, test newstest2015.
#   prepare-wmt17-en-de.sh --raw DIR [--src en --tgt de] [--bpe-ops 32000|64000|128000] [options]
# Archives looked for in --raw DIR (downloaded there when missing, unless --offline):
#   training-parallel-europarl-v7.tgz  training-parallel-commoncrawl.tgz  training-parallel-nc-v12.tgz
#   rapid2016.tgz  dev.tgz
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
usage() { echo "usage: $0 --raw DIR [--src en --tgt de] [options]" >&2; }
SRC=en TGT=de
parse_common_args "$@"
[[ -n "$RAW_DIR" ]] || RAW_DIR="$RECIPE_DIR/raw"
[[ "$SRC-$TGT" == en-de || "$SRC-$TGT" == de-en ]] || die "--src $SRC --tgt $TGT: this recipe is for en-de or de-en"
WORK="${WORK:-$RECIPE_DIR/work/wmt17-$SRC-$TGT}"
ORIG="$WORK/orig"; mkdir -p "$ORIG" "$WORK/raw"

WMT17=http://data.statmt.org/wmt17/translation-task
declare -A URL=(
    [training-parallel-europarl-v7.tgz]=http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz
    [training-parallel-commoncrawl.tgz]=http://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz
    [training-parallel-nc-v12.tgz]=$WMT17/training-parallel-nc-v12.tgz
    [rapid2016.tgz]=$WMT17/rapid2016.tgz
    [dev.tgz]=$WMT17/dev.tgz
)
for name in training-parallel-europarl-v7.tgz training-parallel-commoncrawl.tgz training-parallel-nc-v12.tgz rapid2016.tgz dev.tgz; do
    fetch_unpack "$name" "${URL[$name]}" "$ORIG"
done
CORPORA=(training/europarl-v7.de-en commoncrawl.de-en training/news-commentary-v12.de-en rapid2016.de-en)
for l in en de; do
    files=()
    for c in "${CORPORA[@]}"; do need "$ORIG/$c.$l" "corpus $c.$l"; files+=("$ORIG/$c.$l"); done
    step "$WORK/raw/train.$l" $TEXT concat "$WORK/raw/train.$l" "${files[@]}"
done
newstest_pair 2014 "$ORIG/dev" "$WORK/raw/valid"
newstest_pair 2015 "$ORIG/dev" "$WORK/raw/test"
prepare_text "$SRC" "$TGT"
echo "$DATA_BIN"
