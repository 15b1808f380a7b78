#!/usr/bin/env bash
# `--device NAME` on train, evaluate, predict, bench, generate and serve: listed in --help;
# an unknown device name and (on a machine without one) a GPU fail before any data or model
# is read, with one line that says why ("no GPU: ..."), exit 1; a bad value is a usage error;
# the CPU under each accepted form of its name runs (a one-step bench, synthetic data).
#
#     bash tests/test_device_cli.sh <build dir>
set -u
BUILD=${1:?usage: bash tests/test_device_cli.sh <build dir>}
SINTER="$(cd "$BUILD" && pwd)/sinter"
export SN_NUM_THREADS=${SN_NUM_THREADS:-2} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
. "$(dirname "$0")/sh_test_util.sh"
sn_tmpdir device_cli

# run NAME WANT_RC CMD...: output in $TMP/NAME.{out,err}
run() {
    local name=$1 want=$2
    shift 2
    "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    local rc=$?
    if [ "$rc" -eq "$want" ]; then return 0; fi
    bad "$name: exit $rc, want $want" "$TMP/$name.err" "$TMP/$name.out"
    return 1
}
# has NAME FILE TEXT: FILE contains TEXT
has() {
    if grep -qF -- "$3" "$2"; then ok "$1"; else bad "$1: '$3' not in $(basename "$2")" "$2"; fi
}

gpu=no
"$SINTER" devices 2>&1 | grep -q 'device:GPU:0' && gpu=yes
W="$TMP/none.weights.h5" # never read: the device is checked first
for cmd in train evaluate predict bench generate serve; do
    run "$cmd-help" 0 "$SINTER" "$cmd" --help && has "$cmd --help lists --device" "$TMP/$cmd-help.out" "--device NAME"
    case $cmd in
    evaluate | predict) extra=(--weights "$W") ;;
    generate) extra=(--weights "$W") ;;
    serve) extra=(--model small_cnn) ;;
    *) extra=() ;;
    esac
    if run "$cmd-tpu" 1 "$SINTER" "$cmd" "${extra[@]}" --device tpu:0; then
        has "$cmd: unknown device named" "$TMP/$cmd-tpu.err" "sinter $cmd: unknown device 'tpu:0'"
        [ "$(wc -l <"$TMP/$cmd-tpu.err")" -eq 1 ] && ok "$cmd: one line" || bad "$cmd: not one line" "$TMP/$cmd-tpu.err"
    fi
    if [ $gpu = no ] && run "$cmd-gpu" 1 "$SINTER" "$cmd" "${extra[@]}" --device /job:localhost/replica:0/task:0/device:GPU:0; then
        has "$cmd: no GPU, and why" "$TMP/$cmd-gpu.err" "sinter $cmd: no GPU: device '/job:localhost/replica:0/task:0/device:GPU:0' does not exist"
    fi
    run "$cmd-empty" 2 "$SINTER" "$cmd" "${extra[@]}" --device= && has "$cmd: empty --device is a usage error" "$TMP/$cmd-empty.err" "--device: the value is empty"
done
i=0
for d in cpu:0 /device:CPU:0 /job:localhost/replica:0/task:0/device:CPU:0; do
    i=$((i + 1))
    if run "bench-cpu$i" 0 "$SINTER" bench --model mlp --batch-size 8 --steps 1 --warmup 0 --device "$d"; then
        has "bench runs on $d" "$TMP/bench-cpu$i.out" "framework=sinter"
    fi
done
run "bench-strict" 0 "$SINTER" bench --model mlp --batch-size 8 --steps 1 --warmup 0 --precision fp32-strict \
    && has "bench takes --precision fp32-strict" "$TMP/bench-strict.out" "precision=fp32-strict"
if [ $gpu = no ]; then
    run "train-gpu-strict" 1 "$SINTER" train --device gpu:0 --precision fp32-strict \
        && has "train --device gpu:0: no GPU" "$TMP/train-gpu-strict.err" "no GPU: "
fi
sn_finish
