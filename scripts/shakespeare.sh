#!/usr/bin/env bash
# The one place that finds the tiny Shakespeare corpus (1,115,394 bytes, the text of
# TensorFlow's text-generation tutorial) and prints its absolute path on stdout:
#
#   build/sinter train --data "$(scripts/shakespeare.sh)" --model char_lstm_small
#
# Where it looks, in order (each copy must have the corpus's size and SHA-256):
#   1. ../shared/data/tinyshakespeare.txt beside the clone (this project's machines);
#   2. data/tinyshakespeare.txt in the clone (git ignores data/), fetched by an earlier run;
#   3. the tutorial's URL (or $SN_SHAKESPEARE_URL, e.g. a mirror or a file:// URL), fetched
#      with curl, wget or Python, each with a short timeout, into a temporary file that is
#      checked and then renamed to data/tinyshakespeare.txt; a download that does not check
#      out is deleted. --no-fetch skips this step (the tests look, the set-up fetches).
# Exit status: 0 with the path printed; 77 when the corpus cannot be had (why on stderr: the
# tests then report SKIPPED); 2 for a bad argument. scripts/main.sh and scripts/test.sh call it
# once, and go on without the corpus.
set -uo pipefail

NAME=tinyshakespeare.txt
SIZE=1115394
SHA256=86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed
URL=${SN_SHAKESPEARE_URL:-https://storage.googleapis.com/download.tensorflow.org/data/shakespeare.txt}
TIMEOUT=20 # seconds for the whole download; connecting gets 10

fetch=1
for arg in "$@"; do
    case $arg in
        --no-fetch) fetch=0 ;;
        -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
        *) echo "shakespeare.sh: unknown argument '$arg' (--no-fetch, --help)" >&2; exit 2 ;;
    esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "shakespeare.sh: $*" >&2; }

sha256_of() {
    if command -v sha256sum >/dev/null; then sha256sum "$1" | cut -d' ' -f1
    else python3 -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1"
    fi
}

# check FILE: true when FILE is the corpus; else says what differs (when it exists at all).
check() {
    [ -f "$1" ] || return 1
    local size sum
    size=$(wc -c <"$1")
    if [ "$size" -ne $SIZE ]; then
        say "$1 has $size bytes, expected $SIZE: not the corpus"
        return 1
    fi
    sum=$(sha256_of "$1")
    if [ "$sum" != $SHA256 ]; then
        say "$1 has SHA-256 $sum, expected $SHA256: not the corpus"
        return 1
    fi
}

# download URL FILE: the first of curl, wget and Python that is installed.
download() {
    if command -v curl >/dev/null; then
        curl -fsSL --connect-timeout 10 --max-time $TIMEOUT -o "$2" "$1"
    elif command -v wget >/dev/null; then
        wget -q --timeout=10 --tries=1 -O "$2" "$1"
    elif command -v python3 >/dev/null; then
        python3 - "$1" "$2" $TIMEOUT <<'EOF'
import shutil, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[3])) as r, open(sys.argv[2], "wb") as f:
    shutil.copyfileobj(r, f)
EOF
    else
        say "neither curl, wget nor python3 is installed to fetch $1"
        return 1
    fi
}

shared=$(cd "$ROOT/.." && pwd)/shared/data/$NAME
if check "$shared"; then
    echo "$shared"
    exit 0
fi
local_copy=$ROOT/data/$NAME
if check "$local_copy"; then
    echo "$local_copy"
    exit 0
fi
if [ $fetch = 0 ]; then
    say "the corpus is neither at $shared nor at $local_copy (scripts/shakespeare.sh without --no-fetch fetches it)"
    exit 77
fi
mkdir -p "$ROOT/data" || { say "cannot make $ROOT/data"; exit 77; }
tmp=$(mktemp "$ROOT/data/.$NAME.XXXXXX") || { say "cannot write in $ROOT/data"; exit 77; }
trap 'rm -f "$tmp"' EXIT
say "fetching $URL"
if ! download "$URL" "$tmp"; then
    say "could not fetch $URL (no network?); the corpus tests will report SKIPPED"
    exit 77
fi
if ! check "$tmp"; then
    say "refused what $URL gave (deleted)"
    exit 77
fi
chmod 644 "$tmp"
mv -f "$tmp" "$local_copy" || { say "cannot rename $tmp to $local_copy"; exit 77; }
trap - EXIT
say "saved $local_copy"
echo "$local_copy"
