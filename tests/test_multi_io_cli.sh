#!/usr/bin/env bash
# The sinter command with a Functional model of two inputs and two outputs: `summary` and
# `export` take it; `train`, `evaluate` and `predict`, which feed one array of examples and
# one of labels, refuse it with a message naming the model and its counts.
#
#     bash tests/test_multi_io_cli.sh <build dir>
#
# The data-feeding parts need Fashion-MNIST (apt-get install dataset-fashion-mnist); without
# it they are skipped, said so, and the test exits 77 (CTest: SKIPPED).
set -u
BUILD=${1:?usage: bash tests/test_multi_io_cli.sh <build dir>}
BUILD=$(cd "$BUILD" && pwd)
SINTER="$BUILD/sinter"
DATA=/usr/share/datasets/fashion-mnist
export SN_NUM_THREADS=${SN_NUM_THREADS:-2}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sinter_multi_io_cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failed=0
passed=0
check() { # NAME EXPECTED_RC PATTERN CMD...
    local name=$1 want=$2 pat=$3
    shift 3
    "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    local rc=$?
    if [ "$rc" -ne "$want" ] || ! grep -q -- "$pat" "$TMP/$name.out" "$TMP/$name.err"; then
        failed=$((failed + 1))
        echo "FAIL $name: exit $rc (expected $want), output without '$pat':"
        sed 's/^/     | /' "$TMP/$name.out" "$TMP/$name.err" | tail -10
    else
        passed=$((passed + 1))
        echo "ok   $name"
    fi
}
M="$TMP/two_two.keras"
if ! SN_SAVE_TWO_TWO="$M" "$BUILD/tests/test_losses_multi" >"$TMP/save.out" 2>&1; then
    cat "$TMP/save.out"
    echo "FAIL could not write the two-output model"
    exit 1
fi
check summary 0 "Connected to" "$SINTER" summary --model "$M"
check export 0 "" "$SINTER" export --model "$M" --to "$TMP/two_two.json"
WANT="model '$M' has 2 inputs and 2 outputs; the command line feeds one array"
if [ -e "$DATA/train-images-idx3-ubyte.gz" ]; then
    check train 1 "$WANT" "$SINTER" train --model "$M" --data-dir "$DATA" --epochs 1
    check evaluate 1 "$WANT" "$SINTER" evaluate --model "$M" --data-dir "$DATA"
    check predict 1 "$WANT" "$SINTER" predict --model "$M" --data-dir "$DATA"
    skipped=0
else
    echo "SKIPPED: train/evaluate/predict refusals (no Fashion-MNIST at $DATA)"
    skipped=1
fi
echo "test_multi_io_cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ] || exit 1
[ "$skipped" -eq 0 ] || exit 77
