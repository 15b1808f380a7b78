#!/usr/bin/env bash
# The Shakespeare character model learns: char_lstm_small trained for 300 steps (batch 32 x 50
# characters, Adam 3e-3) on the first 300,000 characters of the Shakespeare corpus
# must reach a validation loss (on the held-out last 10 % of that slice) well below the
# uniform guess ln(65) = 4.17 and below the characters' unigram entropy (3.31 nats on the
# whole text): under 2.5, i.e. it has learnt which characters follow which.
# Measured: 2.29. No timing is asserted. The corpus comes from scripts/shakespeare.sh; skipped
# (77) when it cannot be had.
#
#     bash tests/test_char_quality.sh <build dir>
set -u
BUILD=$(cd "${1:?usage: bash tests/test_char_quality.sh <build dir>}" && pwd)
SINTER="$BUILD/sinter"
export SN_NUM_THREADS=${SN_NUM_THREADS:-2} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
. "$(dirname "$0")/sh_test_util.sh"
CORPUS=$("$(dirname "$0")/../scripts/shakespeare.sh" --no-fetch)
case $? in
    0) ;;
    77) sn_skip "no Shakespeare corpus (scripts/shakespeare.sh fetches it)" ;;
    *) echo "FAIL: scripts/shakespeare.sh --no-fetch failed"; exit 1 ;;
esac
sn_tmpdir test_char_quality
head -c 300000 "$CORPUS" >"$TMP/slice.txt"
if ! "$SINTER" train --data "$TMP/slice.txt" --model char_lstm_small --seq-length 50 \
    --batch-size 32 --epochs 1 --steps-per-epoch 300 --learning-rate 0.003 --seed 0 \
    >"$TMP/out" 2>&1; then
    echo "FAIL: sinter train exited with $?"; tail -5 "$TMP/out"; exit 1
fi
loss=$(sed -n 's/^Validation loss: //p' "$TMP/out")
if [ -z "$loss" ]; then echo "FAIL: no 'Validation loss:' line"; tail -5 "$TMP/out"; exit 1; fi
if awk -v l="$loss" 'BEGIN { exit !(l < 2.5) }'; then
    echo "ok   validation loss $loss after 300 steps (ln 65 = 4.17, bound 2.5)"
else
    echo "FAIL: validation loss $loss after 300 steps, expected < 2.5"; tail -5 "$TMP/out"; exit 1
fi
