# The shell tests' helpers, sourced by tests/test_*.sh (one copy, not one per test):
#   sn_tmpdir NAME    makes $TMP (removed on exit)
#   ok MSG            a passed check
#   bad MSG [FILE...] a failed check, with the tail of each FILE (a log) shown
#   sn_skip MSG       exit 77: CTest's SKIPPED (no data, no such tool), never Passed
#   sn_keras_python BUILD WHAT  sets PY to the reference venv's python (scripts/pyenv.sh);
#                     SKIPPED naming WHAT when the venv cannot be made, FAIL on another error
#   sn_finish         the closing "N passed, M failed" line; exit 1 on any failure
#   run NAME RC CMD...      runs CMD with stdout/stderr in $TMP/NAME.{out,err}; a failed check
#                           (with both shown) unless it exits RC; returns 1 then
#   expect NAME STREAM PAT  the output (out or err) of run NAME matches grep -E PAT
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
    for f in "$@"; do [ -s "$f" ] && sed 's/^/     | /' "$f" | tail -20; done
    return 0
}
sn_skip() { echo "SKIPPED: $*"; exit 77; }
sn_keras_python() {
    PY=$("$(dirname "${BASH_SOURCE[0]}")/../scripts/pyenv.sh" "$1")
    local rc=$?
    [ $rc -eq 77 ] && sn_skip "$2"
    [ $rc -eq 0 ] || { echo "FAIL: scripts/pyenv.sh exited $rc"; exit 1; }
}
sn_finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
run() {
    local name=$1 want=$2
    shift 2
    "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    local rc=$?
    if [ "$rc" -ne "$want" ]; then
        bad "$name: exit code $rc, expected $want ($*)" "$TMP/$name.out" "$TMP/$name.err"
        return 1
    fi
    return 0
}
expect() {
    local name=$1 stream=$2 pattern=$3
    if grep -Eq -- "$pattern" "$TMP/$name.$stream"; then
        ok "$name: $stream has '$pattern'"
    else
        bad "$name: $stream lacks '$pattern'" "$TMP/$name.out" "$TMP/$name.err"
    fi
}
