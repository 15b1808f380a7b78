# The shell tests' helpers, sourced by tests/test_*.sh (one copy, not one per test):
#   sn_tmpdir NAME    makes $TMP (removed on exit)
#   ok MSG            a passed check
#   bad MSG [FILE...] a failed check, with the tail of each FILE (a log) shown
#   sn_skip MSG       exit 77: CTest's SKIPPED (no data, no such tool), never Passed
#   sn_finish         the closing "N passed, M failed" line; exit 1 on any failure
passed=0
failed=0
sn_tmpdir() {
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/sinter_$1.XXXXXX")
    trap 'rm -rf "$TMP"' EXIT
}
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() {
    failed=$((failed + 1))
    echo "FAIL $1"
    shift
    local f
    for f in "$@"; do [ -s "$f" ] && sed 's/^/     | /' "$f" | tail -15; done
    return 0
}
sn_skip() { echo "SKIPPED: $*"; exit 77; }
sn_finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
