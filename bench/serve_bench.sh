#!/usr/bin/env bash
# Load figures for `sinter serve` (docs/serving.md): wrk against 127.0.0.1, small_cnn,
# {"instances": [...]} bodies of 1 and 32 images, at 1, 16 and 64 connections; side by side
# (alternating, point by point) with the same model under TensorFlow's Keras model.predict
# behind a minimal Python http.server (bench/tf_serve.py, TensorFlow from scripts/pyenv.sh).
#
#     bench/serve_bench.sh [SECONDS_PER_POINT] [ROUNDS]      (defaults 10 and 1)
#
# Needs build/sinter, wrk (Debian) and, for the TensorFlow column, the venv of
# scripts/pyenv.sh (skipped with a note when it cannot be made). Bounded: every wrk run lasts
# SECONDS_PER_POINT; both servers are killed on exit. Prints one line per run, then a table.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10}
ROUNDS=${2:-1}
SINTER=${SINTER:-build/sinter}
THREADS=${SN_BENCH_THREADS:-2}
CONNS=${SN_BENCH_CONNS:-1 16 64}
BATCHES=${SN_BENCH_BATCHES:-1 32}
command -v wrk >/dev/null || { echo "serve_bench: wrk not found (apt-get install wrk)" >&2; exit 1; }
TMP=$(mktemp -d /tmp/sinter-serve-bench.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"' EXIT

# Bodies: the same pseudo-random images for both servers.
for b in $BATCHES; do
  python3 - "$b" >"$TMP/body$b.json" <<'PY'
import json, random, sys
r = random.Random(1)
n = int(sys.argv[1])
print(json.dumps({"instances": [[[[round(r.random(), 4)] for _ in range(28)] for _ in range(28)]
                                for _ in range(n)]}))
PY
done
cat >"$TMP/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open(os.getenv("SN_BODY"), "rb"))
wrk.body = f:read("*a")
f:close()
LUA

"$SINTER" serve --model small_cnn --port 0 --threads "$THREADS" >"$TMP/sinter.out" 2>"$TMP/sinter.err" &
SPID=$!
PIDS+=($SPID)
SPORT=
for _ in $(seq 1 600); do
  SPORT=$(sed -n 's|^Serving .* at http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$TMP/sinter.out")
  [ -n "$SPORT" ] && break
  sleep 0.1
done
[ -n "$SPORT" ] || { cat "$TMP/sinter.err" >&2; exit 1; }
SURL="http://127.0.0.1:$SPORT/v1/models/small_cnn:predict"

TURL=
if PY=$(scripts/pyenv.sh build 2>"$TMP/pyenv.err"); then
  TPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$PY" bench/tf_serve.py "$TPORT" "$THREADS" >"$TMP/tf.out" 2>"$TMP/tf.err" &
  TPID=$!
  PIDS+=($TPID)
  for _ in $(seq 1 1200); do
    grep -q listening "$TMP/tf.out" && break
    sleep 0.1
  done
  if grep -q listening "$TMP/tf.out"; then TURL="http://127.0.0.1:$TPORT/v1/models/small_cnn:predict"
  else echo "serve_bench: the TensorFlow server did not start:" >&2; tail -5 "$TMP/tf.err" >&2; fi
else
  echo "serve_bench: no TensorFlow venv (scripts/pyenv.sh failed); sinter only" >&2
fi

# wait_idle PID: until the server has used < 5% of a core over a second (at most 120 s), so
# that requests a slow server still works through after wrk stops do not load the next run.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
wait_idle() {
  local hz a b
  hz=$(getconf CLK_TCK)
  for _ in $(seq 1 120); do
    a=$(cpu_ticks "$1"); sleep 1; b=$(cpu_ticks "$1")
    [ $(( (b - a) * 100 )) -lt $(( hz * 5 )) ] && return 0
  done
}
# run SERVER URL CONNS BATCH PID: one wrk run; prints "server conns batch req/s p50_ms p99_ms non2xx"
ms() { awk '{v=$1; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; printf "%.2f", v}'; }
run() {
  local name=$1 url=$2 c=$3 b=$4 t
  t=$(( c < 2 ? 1 : 2 ))
  SN_BODY="$TMP/body$b.json" wrk -t"$t" -c"$c" -d"${DUR}s" --timeout 30s --latency \
    -s "$TMP/post.lua" "$url" >"$TMP/wrk.out" 2>&1 || true
  local rps p50 p99 non
  rps=$(sed -n 's/^Requests\/sec: *//p' "$TMP/wrk.out")
  p50=$(awk '$1=="50%"{print $2}' "$TMP/wrk.out" | ms)
  p99=$(awk '$1=="99%"{print $2}' "$TMP/wrk.out" | ms)
  non=$(sed -n 's/.*Non-2xx or 3xx responses: *//p' "$TMP/wrk.out")
  echo "$name $c $b ${rps:-0} ${p50:-nan} ${p99:-nan} ${non:-0}" | tee -a "$TMP/results"
  wait_idle "$5"
}
# Warm both (plans, tracing, caches).
SN_BODY="$TMP/body1.json" wrk -t1 -c1 -d2s -s "$TMP/post.lua" "$SURL" >/dev/null 2>&1 || true
[ -n "$TURL" ] && { SN_BODY="$TMP/body1.json" wrk -t1 -c1 -d2s -s "$TMP/post.lua" "$TURL" >/dev/null 2>&1 || true; }
echo "server conns batch req_per_s p50_ms p99_ms non_2xx"
for r in $(seq 1 "$ROUNDS"); do
  for b in $BATCHES; do
    for c in $CONNS; do
      run sinter "$SURL" "$c" "$b" "$SPID"
      [ -n "$TURL" ] && run tensorflow "$TURL" "$c" "$b" "$TPID"
    done
  done
done
echo
echo "medians over $ROUNDS round(s), ${DUR} s per run, $THREADS compute threads each ($(nproc) cores):"
printf "%-6s %-6s %12s %9s %9s %12s %9s %9s\n" conns batch sinter_rps p50_ms p99_ms tf_rps p50_ms p99_ms
for b in $BATCHES; do
  for c in $CONNS; do
    med() { awk -v s="$1" -v c="$c" -v b="$b" -v f="$2" '$1==s && $2==c && $3==b {print $f}' "$TMP/results" | sort -g |
      awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
    printf "%-6s %-6s %12s %9s %9s %12s %9s %9s\n" "$c" "$b" "$(med sinter 4)" "$(med sinter 5)" \
      "$(med sinter 6)" "$(med tensorflow 4)" "$(med tensorflow 5)" "$(med tensorflow 6)"
  done
done
echo
curl -s "http://127.0.0.1:$SPORT/monitoring/prometheus/metrics" | grep -E '^sinter_serve_batch_size_(sum|count)|^sinter_serve_requests_total\{code="200"\}' || true
