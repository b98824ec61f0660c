#!/usr/bin/env bash
# WMT17 English-German as in Pappas et al. (2018), Sec. 4.1: the WMT17 training corpora (Europarl v7,
# Common Crawl, News Commentary v12, Rapid 2016; 5.8M pairs), dev newstest2014, test newstest2015.
#   prepare-wmt17-en-de.sh --raw DIR [--src en --tgt de] [--bpe-ops 32000|64000|128000] [options]
# Archives looked for in --raw DIR (downloaded there when missing, unless --offline): see ARCHIVES.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
usage() { echo "usage: $0 --raw DIR [--src en --tgt de] [options]" >&2; }
SRC=en TGT=de
parse_common_args "$@"
WMT17=http://data.statmt.org/wmt17/translation-task
ARCHIVES=(
    training-parallel-europarl-v7.tgz=http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz
    training-parallel-commoncrawl.tgz=http://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz
    training-parallel-nc-v12.tgz=$WMT17/training-parallel-nc-v12.tgz
    rapid2016.tgz=$WMT17/rapid2016.tgz
    dev.tgz=$WMT17/dev.tgz
)
CORPORA=(training/europarl-v7.de-en commoncrawl.de-en training/news-commentary-v12.de-en rapid2016.de-en)
prepare_wmt17 de 2014 2015
