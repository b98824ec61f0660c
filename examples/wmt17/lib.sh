# Shared bash functions of the examples/wmt17 recipes (sourced, not run).
# Every step skips itself when its output already exists, and writes through OUT.tmp, so re-running a
# prepare script is idempotent and an interrupted run resumes where it stopped.

set -euo pipefail

RECIPE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$RECIPE_DIR/../.." && pwd)"
PYTHON="${PYTHON:-python}"
TEXT="$PYTHON $RECIPE_DIR/prepare_text.py"

log() { echo "$(date -u '+%Y-%m-%d %H:%M:%S') | $(basename "$0") | $*" >&2; }
die() { echo "error: $*" >&2; exit 2; }

# defaults; each prepare script may override them before calling parse_common_args
RAW_DIR="" WORK="" BPE_OPS=32000 BPE_MODE=joint BPE_CODES="" MAX_LEN=50 RATIO=1.5 OFFLINE=0 WORKERS=4
SRC="" TGT="" LOWERCASE=0

common_usage() {
    cat >&2 <<EOF
common options:
  --raw DIR         directory (or mounted mirror) holding the raw archives; looked in first, downloads go there
  --work DIR        working directory (default: $RECIPE_DIR/work/<corpus>)
  --src L --tgt L   translation direction to binarize (run again with the languages swapped for the other one)
  --bpe-ops N       BPE merge operations (paper: 32000, 64000, 128000)
  --bpe MODE        joint (one BPE model for both languages), separate (one per language) or sentencepiece
  --bpe-codes FILE  use these existing BPE codes (joint mode) instead of learning them
  --max-len N       drop training pairs longer than N words (paper: 50)
  --ratio R         drop training pairs whose length ratio exceeds R (0: off)
  --offline         never download: fail naming the missing file and where to get it
  --workers N       fairseq-preprocess workers
EOF
}

parse_common_args() {
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --raw) RAW_DIR="$2"; shift 2 ;;
            --work) WORK="$2"; shift 2 ;;
            --src) SRC="$2"; shift 2 ;;
            --tgt) TGT="$2"; shift 2 ;;
            --bpe-ops) BPE_OPS="$2"; shift 2 ;;
            --bpe) BPE_MODE="$2"; shift 2 ;;
            --bpe-codes) BPE_CODES="$2"; shift 2 ;;
            --max-len) MAX_LEN="$2"; shift 2 ;;
            --ratio) RATIO="$2"; shift 2 ;;
            --offline) OFFLINE=1; shift ;;
            --workers) WORKERS="$2"; shift 2 ;;
            -h|--help) usage; common_usage; exit 0 ;;
            *) usage; common_usage; die "unknown option '$1' (see the options above)" ;;
        esac
    done
    case "$BPE_MODE" in joint|separate|sentencepiece) ;; *) die "--bpe $BPE_MODE: use joint, separate or sentencepiece" ;; esac
    [[ "$BPE_OPS" =~ ^[0-9]+$ ]] || die "--bpe-ops $BPE_OPS: give a number of merge operations, e.g. 32000"
    if [[ -n "$BPE_CODES" ]]; then
        [[ -f "$BPE_CODES" ]] || die "--bpe-codes $BPE_CODES: file not found"
        [[ "$BPE_MODE" == joint ]] || die "--bpe-codes works with --bpe joint only (one codes file for both languages)"
        BPE_CODES="$(cd "$(dirname "$BPE_CODES")" && pwd)/$(basename "$BPE_CODES")"
    fi
}

# fetch NAME URL: the path of raw archive NAME, from $RAW_DIR; downloaded there only when missing and not --offline
fetch() {
    local name="$1" url="$2" path="$RAW_DIR/$1"
    if [[ -s "$path" ]]; then echo "$path"; return; fi
    if [[ "$OFFLINE" == 1 ]]; then
        die "missing raw file $name: looked for $path; download it from $url into $RAW_DIR (or pass --raw DIR holding it)"
    fi
    log "downloading $url -> $path"
    mkdir -p "$RAW_DIR"
    if command -v curl >/dev/null; then curl -fL --retry 3 -o "$path.tmp" "$url" || die "download of $url failed; put $name into $RAW_DIR by hand"
    else wget -q -O "$path.tmp" "$url" || die "download of $url failed; put $name into $RAW_DIR by hand"; fi
    mv "$path.tmp" "$path"
    echo "$path"
}

# unpack ARCHIVE DEST: extract once (a stamp marks completion)
unpack() {
    local archive="$1" dest="$2"
    [[ -f "$dest/.unpacked-$(basename "$archive")" ]] && return
    mkdir -p "$dest"
    log "unpacking $archive"
    tar -xzf "$archive" -C "$dest" || die "$archive: not a readable .tgz archive; download it again"
    touch "$dest/.unpacked-$(basename "$archive")"
}

# need FILE WHAT: fail naming FILE when an archive did not hold it
need() { [[ -f "$1" ]] || die "missing $2: looked for $1 (unpacked from the raw archives in $RAW_DIR); is the archive complete?"; }

# count_lines FILE: its number of lines (a last line without a newline counts too)
count_lines() { awk 'END { print NR }' "$1"; }

# check_pair SRC_FILE TGT_FILE WHAT [FIX]: refuse, in one line naming WHAT, a side without lines (FIX says what to
# do; default: give sentences) or two sides whose line counts differ (line i of one translates line i of the other)
# before anything is binarized: fairseq-preprocess binarizes either without a word
check_pair() {
    local a="$1" b="$2" what="$3" fix="${4:-give a corpus with sentences in it}" na nb
    na="$(count_lines "$a")"; nb="$(count_lines "$b")"
    [[ "$na" -gt 0 && "$nb" -gt 0 ]] || die "$what is empty ($a has $na lines, $b $nb): $fix"
    [[ "$na" == "$nb" ]] || die "$what is misaligned: $a has $na lines but $b has $nb; give files whose line i translate each other"
}

# step OUT CMD...: run CMD (which writes OUT) unless OUT exists
step() { local out="$1"; shift; if [[ -s "$out" ]]; then log "exists, skipped: $out"; else "$@"; fi; }

# prepare_text: from $WORK/raw/{train,valid,test}.{$L1,$L2} (plain, untokenized text) to the fairseq
# binaries in $DATA_BIN. Sets DATA_BIN.
prepare_text() {
    local l1="$1" l2="$2" tok="$WORK/tok" lc=""
    [[ "$LOWERCASE" == 1 ]] && lc="--lowercase"
    mkdir -p "$tok"
    for split in train valid test; do
        check_pair "$WORK/raw/$split.$l1" "$WORK/raw/$split.$l2" "the $split corpus"
        for l in "$l1" "$l2"; do
            step "$tok/$split.$l" $TEXT tokenize --lang "$l" $lc "$WORK/raw/$split.$l" "$tok/$split.$l"
        done
    done
    # the paper's length <= $MAX_LEN and a ratio filter on train and valid; test is never filtered
    local clean="$WORK/clean-len$MAX_LEN-ratio$RATIO"
    mkdir -p "$clean"
    for split in train valid; do
        step "$clean/$split.$l2" $TEXT clean --max-len "$MAX_LEN" --ratio "$RATIO" \
            "$tok/$split.$l1" "$tok/$split.$l2" "$clean/$split.$l1" "$clean/$split.$l2"
    done
    for split in train valid; do
        check_pair "$clean/$split.$l1" "$clean/$split.$l2" "the $split corpus left by cleaning" \
            "--max-len $MAX_LEN and --ratio $RATIO dropped every pair; raise them"
    done
    # test is never cleaned: linked as it is, relative to $clean (beside $tok under $WORK), so that a relative --work
    # does not leave a link that points nowhere
    for l in "$l1" "$l2"; do [[ -e "$clean/test.$l" ]] || ln -s "../tok/test.$l" "$clean/test.$l"; done

    local seg tag codes_sha
    case "$BPE_MODE" in
        joint)
            tag="bpe$BPE_OPS"; [[ -n "$BPE_CODES" ]] && tag="bpe-given-$(basename "$BPE_CODES")"
            seg="$WORK/$tag"; mkdir -p "$seg"
            local codes="$seg/codes"
            if [[ -n "$BPE_CODES" ]]; then
                if [[ -f "$codes" ]] && ! cmp -s "$codes" "$BPE_CODES"; then
                    die "--bpe-codes $BPE_CODES does not match the BPE data already in $seg (made with other codes); delete $seg or pass the codes it was made with"
                fi
                [[ -f "$codes" ]] || cp "$BPE_CODES" "$codes"
            else
                step "$codes" $TEXT learn-bpe --ops "$BPE_OPS" "$codes" "$clean/train.$l1" "$clean/train.$l2"
            fi
            for split in train valid test; do for l in "$l1" "$l2"; do
                step "$seg/$split.$l" $TEXT apply-bpe "$codes" "$clean/$split.$l" "$seg/$split.$l"
            done; done
            codes_sha="$($TEXT sha256 "$codes")" ;;
        separate)
            tag="bpe$BPE_OPS-separate"; seg="$WORK/$tag"; mkdir -p "$seg"
            codes_sha=""
            for l in "$l1" "$l2"; do
                step "$seg/codes.$l" $TEXT learn-bpe --ops "$BPE_OPS" "$seg/codes.$l" "$clean/train.$l"
                for split in train valid test; do
                    step "$seg/$split.$l" $TEXT apply-bpe "$seg/codes.$l" "$clean/$split.$l" "$seg/$split.$l"
                done
                codes_sha="$codes_sha$($TEXT sha256 "$seg/codes.$l" | cut -c1-16)"
            done ;;
        sentencepiece)
            tag="spm$BPE_OPS"; seg="$WORK/$tag"; mkdir -p "$seg"
            step "$seg/spm.model" $TEXT spm-train --vocab-size "$BPE_OPS" "$seg/spm" "$clean/train.$l1" "$clean/train.$l2"
            for split in train valid test; do for l in "$l1" "$l2"; do
                step "$seg/$split.$l" $TEXT spm-encode "$seg/spm.model" "$clean/$split.$l" "$seg/$split.$l"
            done; done
            codes_sha="$($TEXT sha256 "$seg/spm.model")" ;;
    esac

    DATA_BIN="$WORK/bin-$tag-$SRC-$TGT"
    if [[ -f "$DATA_BIN/recipe.env" ]]; then
        local old; old="$(sed -n 's/^RECIPE_CODES_SHA=//p' "$DATA_BIN/recipe.env")"
        [[ "$old" == "$codes_sha" ]] || die "$DATA_BIN was binarized with another BPE model (codes sha $old, now $codes_sha); delete $DATA_BIN to rebuild it"
        log "exists, skipped: $DATA_BIN"
    else
        rm -rf "$DATA_BIN.tmp"
        fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" \
            --trainpref "$seg/train" --validpref "$seg/valid" --testpref "$seg/test" \
            --destdir "$DATA_BIN.tmp" --workers "$WORKERS" >&2
        # what evaluate.sh needs to score against the untouched references, and to refuse mismatched data
        {
            echo "RECIPE_SRC=$SRC"
            echo "RECIPE_TGT=$TGT"
            echo "RECIPE_BPE=$BPE_MODE"
            echo "RECIPE_BPE_OPS=$BPE_OPS"
            echo "RECIPE_CODES_SHA=$codes_sha"
            echo "RECIPE_LOWERCASE=$LOWERCASE"
            echo "RECIPE_REF_RAW=$WORK/raw/test.$TGT"
            echo "RECIPE_REF_TOK=$tok/test.$TGT"
            echo "RECIPE_TRAIN_TGT_TOK=$clean/train.$TGT"
            echo "RECIPE_TEST_SHA=$($TEXT sha256 "$seg/test.$TGT")"
        } > "$DATA_BIN.tmp/recipe.env"
        mv "$DATA_BIN.tmp" "$DATA_BIN"
    fi
    log "done: $DATA_BIN"
}

# newstest_pair YEAR DEV_DIR OUT_PREFIX: the newstestYEAR SGM files of the $SRC-$TGT pair (either direction
# code, src- or ref- side), extracted to OUT_PREFIX.{$SRC,$TGT}
newstest_pair() {
    local year="$1" dir="$2" out="$3" code l f found
    for code in "$SRC$TGT" "$TGT$SRC"; do
        found=1
        for l in "$SRC" "$TGT"; do
            f="$dir/newstest$year-$code-src.$l.sgm"; [[ -f "$f" ]] || f="$dir/newstest$year-$code-ref.$l.sgm"
            [[ -f "$f" ]] || { found=0; break; }
        done
        if [[ "$found" == 1 ]]; then
            for l in "$SRC" "$TGT"; do
                f="$dir/newstest$year-$code-src.$l.sgm"; [[ -f "$f" ]] || f="$dir/newstest$year-$code-ref.$l.sgm"
                step "$out.$l" $TEXT extract-sgm "$f" "$out.$l"
            done
            return
        fi
    done
    die "missing newstest$year $SRC-$TGT: looked for $dir/newstest$year-{$SRC$TGT,$TGT$SRC}-{src,ref}.{$SRC,$TGT}.sgm; they come with the WMT17 dev.tgz (http://data.statmt.org/wmt17/translation-task/dev.tgz)"
}

# fetch_unpack NAME URL DEST: fetch (see fetch) and unpack a raw archive; stops the script when it is missing
fetch_unpack() {
    local path
    path="$(fetch "$1" "$2")" || exit 2
    unpack "$path" "$3"
}

# prepare_wmt17 OTHER VALID_YEAR TEST_YEAR: the WMT17 en-OTHER pipeline of prepare-wmt17-en-*.sh.
# Reads the arrays ARCHIVES (name=url) and CORPORA (paths inside the archives, without the .L suffix).
prepare_wmt17() {
    local other="$1" valid_year="$2" test_year="$3" item name l c files
    [[ -n "$RAW_DIR" ]] || RAW_DIR="$RECIPE_DIR/raw"
    [[ "$SRC-$TGT" == "en-$other" || "$SRC-$TGT" == "$other-en" ]] || die "--src $SRC --tgt $TGT: this recipe is for en-$other or $other-en"
    WORK="${WORK:-$RECIPE_DIR/work/wmt17-$SRC-$TGT}"
    local orig="$WORK/orig"; mkdir -p "$orig" "$WORK/raw"
    for item in "${ARCHIVES[@]}"; do
        name="${item%%=*}"; fetch_unpack "$name" "${item#*=}" "$orig"
    done
    for l in en "$other"; do
        files=()
        for c in "${CORPORA[@]}"; do need "$orig/$c.$l" "corpus $c.$l"; files+=("$orig/$c.$l"); done
        step "$WORK/raw/train.$l" $TEXT concat "$WORK/raw/train.$l" "${files[@]}"
    done
    newstest_pair "$valid_year" "$orig/dev" "$WORK/raw/valid"
    newstest_pair "$test_year" "$orig/dev" "$WORK/raw/test"
    prepare_text "$SRC" "$TGT"
    echo "$DATA_BIN"
}
