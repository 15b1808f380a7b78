#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, with clang, ASan + UBSan) into build-fuzz/ and runs one
# or all of them:
#
#     scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]   e.g. scripts/fuzz.sh fuzz_idx 600
#     scripts/fuzz.sh all SECONDS                           each target in turn (but SN_FUZZ_SKIP's)
#     scripts/fuzz.sh list                                  the targets
#     scripts/fuzz.sh seeds                                 rewrite the generated seeds (make_seeds)
#
# Corpora: fuzz/seeds/TARGET (committed, read-only here) and build-fuzz/corpus/TARGET (what a
# run finds; kept between runs). Crashing inputs go to build-fuzz/artifacts/TARGET/, the log to
# build-fuzz/logs/TARGET.log; the last "#N DONE cov: ..." line there gives the executions and
# coverage. Exit status: non-zero when a target found a crash, a leak, a timeout or an
# out-of-memory. The machine may be shared: prefix with `nice -n 19`.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${SN_FUZZ_BUILD_DIR:-build-fuzz}

build() {
  if [ ! -f "$B/CMakeCache.txt" ]; then
    cmake -S fuzz -B "$B" -DCMAKE_C_COMPILER=clang >/dev/null
  fi
  cmake --build "$B" -j "$(nproc)" >/dev/null
}

targets() { ls fuzz/fuzz_*.c | sed 's|fuzz/\(.*\)\.c|\1|'; }

run_one() {
  local t=$1 secs=$2
  shift 2
  [ -f "fuzz/$t.c" ] || { echo "fuzz.sh: no target $t (scripts/fuzz.sh list)" >&2; return 2; }
  mkdir -p "$B/corpus/$t" "$B/artifacts/$t" "$B/logs"
  local dict=()
  [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
  echo "== $t: ${secs} s =="
  # Leaks are checked per input; -rss_limit_mb (and the malloc limit that follows it) makes
  # an allocation the input cannot justify a finding. Inputs stay small (seeds are < 32 KB).
  local rc=0
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
    "$B/$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$B/artifacts/$t/" "${dict[@]}" "$@" \
      "$B/corpus/$t" "fuzz/seeds/$t" >"$B/logs/$t.log" 2>&1 || rc=$?
  grep -E "^#[0-9]+[[:space:]]+DONE|^stat::number_of_executed_units|^==.*ERROR|^SUMMARY" "$B/logs/$t.log" || true
  if [ $rc -ne 0 ]; then
    echo "== $t: FAILED (exit $rc); see $B/logs/$t.log and $B/artifacts/$t/" >&2
    tail -40 "$B/logs/$t.log" >&2
  fi
  return $rc
}

case "${1:-}" in
  list) targets ;;
  seeds) build && "$B/make_seeds" fuzz/seeds ;; # overwrites; keeps regress-* inputs
  all)
    secs=${2:?usage: scripts/fuzz.sh all SECONDS}
    build
    fail=0
    for t in $(targets); do
      case " ${SN_FUZZ_SKIP:-} " in *" $t "*) echo "== $t: skipped (SN_FUZZ_SKIP) =="; continue ;; esac
      run_one "$t" "$secs" "${@:3}" || fail=1
    done
    exit $fail ;;
  "" | -h | --help) sed -n '2,16p' "$0"; exit 2 ;;
  *)
    build
    run_one "$1" "${2:?usage: scripts/fuzz.sh TARGET SECONDS}" "${@:3}" ;;
esac
