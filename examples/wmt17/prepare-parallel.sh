#!/usr/bin/env bash
# Any parallel corpus already split into plain-text files PREFIX.{src,tgt}: the same normalisation,
# tokenization, cleaning, BPE and binarization as the WMT17 / IWSLT recipes (used by the small-scale study
# on a local en-de corpus, see README.md).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
usage() { echo "usage: $0 --train PREFIX --valid PREFIX --test PREFIX --src L --tgt L [options]" >&2; }

TRAIN="" VALID="" TEST="" ARGS=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --train) TRAIN="$2"; shift 2 ;;
        --valid) VALID="$2"; shift 2 ;;
        --test) TEST="$2"; shift 2 ;;
        --lowercase) LOWERCASE=1; shift ;;
        *) ARGS+=("$1"); shift ;;
    esac
done
parse_common_args "${ARGS[@]+"${ARGS[@]}"}"
[[ -n "$TRAIN" && -n "$VALID" && -n "$TEST" ]] || { usage; die "give --train, --valid and --test prefixes"; }
[[ -n "$SRC" && -n "$TGT" ]] || { usage; die "give --src and --tgt languages (the file suffixes)"; }
WORK="${WORK:-$RECIPE_DIR/work/parallel-$SRC-$TGT}"
mkdir -p "$WORK/raw"
for split in train valid test; do
    prefix="$(eval echo "\$${split^^}")"
    for l in "$SRC" "$TGT"; do
        [[ -f "$prefix.$l" ]] || die "missing corpus file: looked for $prefix.$l (--$split $prefix)"
    done
    check_pair "$prefix.$SRC" "$prefix.$TGT" "--$split $prefix"
done
for split in train valid test; do
    prefix="$(eval echo "\$${split^^}")"
    for l in "$SRC" "$TGT"; do step "$WORK/raw/$split.$l" cp "$prefix.$l" "$WORK/raw/$split.$l"; done
done
prepare_text "$SRC" "$TGT"
echo "$DATA_BIN"
