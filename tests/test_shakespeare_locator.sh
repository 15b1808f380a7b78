#!/usr/bin/env bash
# scripts/shakespeare.sh, the one place that finds the Shakespeare corpus, run from a copy in
# a fake tree (TMP/repo/scripts, TMP/shared/data) so that every case is set up here:
#   absent everywhere -> 77 (with --no-fetch, and with a fetch that fails: no network, an
#   unreachable URL); a data/ copy of the wrong size or SHA-256 -> refused, 77; a download that
#   is not the corpus -> deleted, 77, nothing left in data/; and, with the real corpus at hand:
#   ../shared preferred, data/ used, a file:// fetch saved atomically into data/ and found there
#   next time. A bad argument -> 2.
# The cases that need the real corpus are SKIPPED (exit 77 after the others passed) when the
# corpus cannot be had here.
#
#     bash tests/test_shakespeare_locator.sh <build dir>
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/sh_test_util.sh"
sn_tmpdir test_shakespeare_locator
check() { # check NAME STATUS MESSAGE: ok when STATUS is 0
    if [ "$2" = 0 ]; then ok "$1"; else bad "$1: $3"; fi
}
mkdir -p "$TMP/repo/scripts"
cp "$SRC/scripts/shakespeare.sh" "$TMP/repo/scripts/"
# run ARGS...: the copy, stdout in $TMP/out, stderr in $TMP/err; sets rc.
run() { "$TMP/repo/scripts/shakespeare.sh" "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?; }
# leftovers: what the fetch left in data/ besides the corpus (temporary files).
leftovers() { find "$TMP/repo/data" -name '.tinyshakespeare*' 2>/dev/null | wc -l; }

run --no-fetch
[ $rc = 77 ] && [ ! -s "$TMP/out" ] && grep -q "neither at" "$TMP/err"
check absent_no_fetch_77 $? "rc $rc, out '$(cat "$TMP/out")', err '$(cat "$TMP/err")'"
SN_SHAKESPEARE_URL="file://$TMP/nowhere.txt" run
[ $rc = 77 ] && [ ! -s "$TMP/out" ] && grep -q "could not fetch" "$TMP/err" && [ "$(leftovers)" = 0 ]
check fetch_fails_77 $? "rc $rc, err '$(cat "$TMP/err")', leftovers $(leftovers)"
# The real URL: this machine may have no network; either way it ends quickly and cleanly.
start=$(date +%s)
run; took=$(( $(date +%s) - start ))
{ [ $rc = 77 ] || [ $rc = 0 ]; } && [ $took -le 40 ] && [ "$(leftovers)" = 0 ]
check real_url_ends_cleanly $? "rc $rc after ${took}s, err '$(cat "$TMP/err")'"
rm -rf "$TMP/repo/data"

head -c 1115394 /dev/zero >"$TMP/zeros.txt" # the right size, the wrong bytes
printf 'not shakespeare\n' >"$TMP/short.txt"
SN_SHAKESPEARE_URL="file://$TMP/zeros.txt" run
[ $rc = 77 ] && grep -q "SHA-256" "$TMP/err" && grep -q "refused" "$TMP/err" &&
    [ ! -e "$TMP/repo/data/tinyshakespeare.txt" ] && [ "$(leftovers)" = 0 ]
check bad_download_deleted $? "rc $rc, err '$(cat "$TMP/err")', data: $(ls -A "$TMP/repo/data" 2>&1)"
mkdir -p "$TMP/repo/data"
cp "$TMP/short.txt" "$TMP/repo/data/tinyshakespeare.txt"
run --no-fetch
[ $rc = 77 ] && grep -q "has 16 bytes, expected 1115394" "$TMP/err"
check data_wrong_size_refused $? "rc $rc, out '$(cat "$TMP/out")', err '$(cat "$TMP/err")'"
cp "$TMP/zeros.txt" "$TMP/repo/data/tinyshakespeare.txt"
run --no-fetch
[ $rc = 77 ] && grep -q "SHA-256 .*, expected 86c4e6aa" "$TMP/err"
check data_wrong_sha_refused $? "rc $rc, out '$(cat "$TMP/out")', err '$(cat "$TMP/err")'"
run --bogus
[ $rc = 2 ]; check bad_argument_2 $? "rc $rc, err '$(cat "$TMP/err")'"

# With the real corpus.
if REAL=$("$SRC/scripts/shakespeare.sh" --no-fetch 2>/dev/null); then
    # A wrong SHA-256 of the right size: one byte of the corpus changed.
    { head -c 1000 "$REAL"; printf 'X'; tail -c +1002 "$REAL"; } >"$TMP/repo/data/tinyshakespeare.txt"
    run --no-fetch
    [ $rc = 77 ] && grep -q "SHA-256" "$TMP/err"
    check data_one_byte_changed_refused $? "rc $rc, err '$(cat "$TMP/err")'"
    # The bad copy is replaced by a good download (atomically: no temporary file left).
    SN_SHAKESPEARE_URL="file://$REAL" run
    [ $rc = 0 ] && [ "$(cat "$TMP/out")" = "$TMP/repo/data/tinyshakespeare.txt" ] &&
        cmp -s "$REAL" "$TMP/repo/data/tinyshakespeare.txt" && [ "$(leftovers)" = 0 ]
    check fetch_saves_to_data $? "rc $rc, out '$(cat "$TMP/out")', err '$(cat "$TMP/err")'"
    SN_SHAKESPEARE_URL="file://$TMP/nowhere.txt" run
    [ $rc = 0 ] && [ "$(cat "$TMP/out")" = "$TMP/repo/data/tinyshakespeare.txt" ]
    check data_found_without_fetch $? "rc $rc, out '$(cat "$TMP/out")', err '$(cat "$TMP/err")'"
    mkdir -p "$TMP/shared/data"
    cp "$REAL" "$TMP/shared/data/tinyshakespeare.txt"
    run --no-fetch
    [ $rc = 0 ] && [ "$(cat "$TMP/out")" = "$TMP/shared/data/tinyshakespeare.txt" ]
    check shared_preferred $? "rc $rc, out '$(cat "$TMP/out")', err '$(cat "$TMP/err")'"
    (cd / && "$TMP/repo/scripts/shakespeare.sh" --no-fetch >"$TMP/out" 2>&1)
    [ "$(cat "$TMP/out")" = "$TMP/shared/data/tinyshakespeare.txt" ]
    check any_working_directory $? "from /: '$(cat "$TMP/out")'"
    real_cases=ran
else
    real_cases=skipped
fi

sn_finish || exit 1
[ $real_cases = ran ] ||
    sn_skip "the cases that need the real corpus (scripts/shakespeare.sh finds none here); the others passed"
