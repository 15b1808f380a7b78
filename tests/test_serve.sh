#!/usr/bin/env bash
# sinter serve end to end, on 127.0.0.1 with ports the kernel picks (--port 0):
#   - flag errors (exit 2) and a model that cannot load (exit 1);
#   - every endpoint and error code, hostile bodies, slow and stalled clients, and a client
#     written for TF Serving's REST API (tests/serve_client.py api);
#   - concurrent requests batched together answer bit for bit what each gets alone (batch);
#   - a short load test: valid, malformed, oversize and slow requests, RSS flat (load);
#   - SIGTERM with requests in flight: all answered, exit 0 (drain).
# scripts/serve_soak.sh runs the load test for 60 s at 64 connections.
#
#     bash tests/test_serve.sh <build dir>
set -u
BUILD=${1:?usage: bash tests/test_serve.sh <build dir>}
BUILD=$(cd "$BUILD" && pwd)
SINTER="$BUILD/sinter"
HERE=$(cd "$(dirname "$0")" && pwd)
CLIENT="$HERE/serve_client.py"
export SN_NUM_THREADS=${SN_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# Under AddressSanitizer freed memory waits in a quarantine (256 MB by default) before reuse,
# which the RSS check of the load test would read as growth; a small one keeps the check
# meaningful there too (the variable is ignored by builds without ASan).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
LOAD_SECONDS=${SN_SERVE_LOAD_SECONDS:-4}
LOAD_CONNS=${SN_SERVE_LOAD_CONNS:-16}

command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 77; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/sinter_test_serve.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() {
    failed=$((failed + 1))
    echo "FAIL $1"
    shift
    for f in "$@"; do [ -s "$f" ] && sed 's/^/     | /' "$f" | tail -30; done
}

# start NAME ARGS...: starts sinter serve in the background; sets PID and PORT once it prints
# where it listens (bounded wait), or fails the test.
start() {
    local name=$1
    shift
    "$SINTER" serve --port 0 "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
    PID=$!
    PIDS+=("$PID")
    PORT=
    for _ in $(seq 1 1200); do
        PORT=$(sed -n 's|^Serving .* at http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$TMP/$name.out" | head -1)
        [ -n "$PORT" ] && return 0
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    bad "$name: the server did not start" "$TMP/$name.out" "$TMP/$name.err"
    return 1
}

# stop NAME: SIGTERM, then the exit status must be 0 (bounded wait).
stop() {
    local name=$1
    kill -TERM "$PID" 2>/dev/null
    for _ in $(seq 1 600); do
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$PID" 2>/dev/null; then
        bad "$name: still running 60 s after SIGTERM" "$TMP/$name.err"
        kill -KILL "$PID"
        return
    fi
    wait "$PID"
    local rc=$?
    if [ "$rc" -eq 0 ] && grep -q "SIGTERM: draining" "$TMP/$name.err"; then
        ok "$name: SIGTERM -> drained, exit 0"
    else
        bad "$name: SIGTERM -> exit $rc (wanted 0)" "$TMP/$name.err"
    fi
}

# expect_rc NAME RC PATTERN CMD...: CMD exits RC and its stderr matches PATTERN.
expect_rc() {
    local name=$1 want=$2 pat=$3
    shift 3
    "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    local rc=$?
    if [ "$rc" -eq "$want" ] && grep -q -- "$pat" "$TMP/$name.err"; then ok "$name"
    else bad "$name: exit $rc (wanted $want, stderr matching '$pat')" "$TMP/$name.err"; fi
}

# ---- flags -------------------------------------------------------------------------------------
expect_rc no-model 2 "--model NAME_OR_PATH is required" "$SINTER" serve
expect_rc name-first 2 "comes before any --model" "$SINTER" serve --name x --model small_cnn
expect_rc bad-port 2 "port" "$SINTER" serve --model small_cnn --port 70000
expect_rc bad-batch 2 "max-batch" "$SINTER" serve --model small_cnn --max-batch 0
expect_rc bad-model 1 "small_cnn" "$SINTER" serve --model nope
expect_rc bad-weights 1 "/nonexistent.weights.h5" "$SINTER" serve --model small_cnn --weights /nonexistent.weights.h5
expect_rc dup-name 1 "two models are named 'small_cnn'" "$SINTER" serve --model small_cnn --model small_cnn
expect_rc bad-host 1 "--host 'no.such.host.invalid'" "$SINTER" serve --model small_cnn --host no.such.host.invalid
if "$SINTER" serve --help >"$TMP/help.out" 2>&1 && grep -q -- "--max-batch" "$TMP/help.out" &&
    grep -q -- "--batch-timeout-us" "$TMP/help.out"; then ok "serve --help"
else bad "serve --help" "$TMP/help.out"; fi

# ---- the API, two models on one server ---------------------------------------------------------
if start api --model small_cnn --model mlp --name second --max-batch 16 --max-instances 64 \
    --max-body-bytes 2097152; then
    if grep -q "^Serving small_cnn at http://127.0.0.1:$PORT/v1/models/small_cnn" "$TMP/api.out" &&
        grep -q "^Serving second at " "$TMP/api.out"; then ok "says where it listens"
    else bad "says where it listens" "$TMP/api.out"; fi
    REFPORT=$PORT
    REFPID=$PID
    if python3 "$CLIENT" api "$PORT" >"$TMP/client_api.out" 2>&1; then ok "api: endpoints, errors, hostile bodies, slow clients"
    else bad "api" "$TMP/client_api.out" "$TMP/api.err"; fi

    # ---- batching: a second server that waits up to 10 s to fill batches of 8 ---------------
    API_PID=$PID
    if start batch --model small_cnn --max-batch 8 --batch-timeout-us 10000000; then
        BATCH_PID=$PID
        if python3 "$CLIENT" batch "$PORT" "$REFPORT" >"$TMP/client_batch.out" 2>&1; then
            ok "batch: concurrent requests batched == alone, bit for bit"
        else bad "batch" "$TMP/client_batch.out" "$TMP/batch.err"; fi
        # ---- drain: requests held in that batcher, then SIGTERM -------------------------------
        if python3 "$CLIENT" drain "$PORT" "$PID" >"$TMP/client_drain.out" 2>&1; then
            ok "drain: requests in flight at SIGTERM answered"
        else bad "drain" "$TMP/client_drain.out" "$TMP/batch.err"; fi
        PID=$BATCH_PID
        stop batch
    fi

    # ---- a stalled client, on a server with a 1 s idle timeout -------------------------------
    if start stall --model small_cnn --timeout-s 1; then
        if python3 "$CLIENT" stall "$PORT" >"$TMP/client_stall.out" 2>&1; then
            ok "stall: $(grep '^stalled' "$TMP/client_stall.out")"
        else bad "stall" "$TMP/client_stall.out" "$TMP/stall.err"; fi
        stop stall
    fi

    # ---- short load test on the first server ------------------------------------------------
    PID=$API_PID
    PORT=$REFPORT
    if python3 "$CLIENT" load "$PORT" "$PID" "$LOAD_SECONDS" "$LOAD_CONNS" >"$TMP/client_load.out" 2>&1; then
        ok "load: $(grep '^load:' "$TMP/client_load.out")"
    else bad "load" "$TMP/client_load.out" "$TMP/api.err"; fi
    if kill -0 "$PID" 2>/dev/null; then ok "the server survived"; else bad "the server died" "$TMP/api.err"; fi
    stop api
fi

# ---- trained weights: served == sinter predict (needs Fashion-MNIST) ---------------------------
DATA=/usr/share/datasets/fashion-mnist
if [ -e "$DATA/t10k-images-idx3-ubyte.gz" ]; then
    W="$TMP/small_cnn.weights.h5"
    if "$SINTER" train --model small_cnn --epochs 1 --steps-per-epoch 10 --validation-steps 1 \
        --quiet --save "$W" >"$TMP/train.out" 2>&1 &&
        "$SINTER" predict --model small_cnn --weights "$W" --count 4 --output "$TMP/pred.csv" \
            >"$TMP/pred.out" 2>&1; then
        if start weights --model small_cnn --weights "$W"; then
            if python3 "$CLIENT" weights "$PORT" "$TMP/pred.csv" "$DATA/t10k-images-idx3-ubyte.gz" \
                >"$TMP/client_weights.out" 2>&1; then ok "trained weights: served == sinter predict"
            else bad "trained weights" "$TMP/client_weights.out" "$TMP/weights.err"; fi
            stop weights
        fi
    else
        bad "training weights for the serve test" "$TMP/train.out" "$TMP/pred.out"
    fi
else
    echo "skip trained weights: Fashion-MNIST is not installed"
fi

echo "serve: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
