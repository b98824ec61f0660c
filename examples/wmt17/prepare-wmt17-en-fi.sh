#!/usr/bin/env bash
# WMT17 English-Finnish as in Pappas et al. (2018), Sec. 4.1: Europarl v8 and Rapid 2016 en-fi training data,
# dev newstest2015, test newstest2016 (the paper's 2.5M pairs also count the Wiki Headlines corpus, which
# this recipe does not fetch).
#   prepare-wmt17-en-fi.sh --raw DIR [--src en --tgt fi] [--bpe-ops 32000|64000|128000] [options]
# Archives looked for in --raw DIR (downloaded there when missing, unless --offline): see ARCHIVES.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
usage() { echo "usage: $0 --raw DIR [--src en --tgt fi] [options]" >&2; }
SRC=en TGT=fi
parse_common_args "$@"
WMT17=http://data.statmt.org/wmt17/translation-task
ARCHIVES=(
    training-parallel-ep-v8.tgz=$WMT17/training-parallel-ep-v8.tgz
    rapid2016.tgz=$WMT17/rapid2016.tgz
    dev.tgz=$WMT17/dev.tgz
)
CORPORA=(training/europarl-v8.fi-en rapid2016.en-fi)
prepare_wmt17 fi 2015 2016
