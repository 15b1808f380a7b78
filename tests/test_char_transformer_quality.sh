#!/usr/bin/env bash
# The character Transformer learns: char_transformer_small (nanoGPT's CPU size: 4 layers,
# 4 heads, 128 wide, context 64) trained for 300 steps (batch 16 x 64 characters, Adam 1e-3,
# nanoGPT's rate for it) on the first 300,000 characters of the corpus (scripts/shakespeare.sh)
# must reach a validation loss (on the held-out last 10 % of that slice) well below the
# uniform guess ln(62) = 4.13 and the characters' unigram entropy (3.31 nats): under 2.5.
# Measured: 2.28 (lr 3e-3 without warm-up is unstable: 2.60). No timing is asserted.
# Then `sinter generate` on the saved weights (the stepper's cache of keys and values) must
# print the start text and 300 more characters, past the 64-character context (so the cache
# restarts from its newest half several times). Skipped (77) when the corpus is not there.
#
#     bash tests/test_char_transformer_quality.sh <build dir>
set -u
. "$(dirname "$0")/sh_test_util.sh"
BUILD=$(cd "${1:?usage: bash tests/test_char_transformer_quality.sh <build dir>}" && pwd)
SINTER="$BUILD/sinter"
export SN_NUM_THREADS=${SN_NUM_THREADS:-2} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
CORPUS=$("$(dirname "$0")/../scripts/shakespeare.sh" --no-fetch)
case $? in
    0) ;;
    77) sn_skip "no Shakespeare corpus (scripts/shakespeare.sh fetches it)" ;;
    *) echo "FAIL: scripts/shakespeare.sh --no-fetch failed"; exit 1 ;;
esac
sn_tmpdir test_char_transformer
head -c 300000 "$CORPUS" >"$TMP/slice.txt"
if "$SINTER" train --data "$TMP/slice.txt" --model char_transformer_small --batch-size 16 \
    --epochs 1 --steps-per-epoch 300 --learning-rate 0.001 --seed 0 \
    --save "$TMP/w.weights.h5" >"$TMP/out" 2>&1; then
    loss=$(sed -n 's/^Validation loss: //p' "$TMP/out")
    if [ -n "$loss" ] && awk -v l="$loss" 'BEGIN { exit !(l < 2.5) }'; then
        ok "validation loss $loss after 300 steps (ln 62 = 4.13, bound 2.5)"
    else
        bad "validation loss '$loss' after 300 steps, expected < 2.5" "$TMP/out"
    fi
else
    bad "sinter train exited with an error" "$TMP/out"
fi
if "$SINTER" generate --model char_transformer_small --weights "$TMP/w.weights.h5" \
    --start "ROMEO:" --length 300 --seed 1 >"$TMP/gen" 2>&1; then
    chars=$(head -c 100000 "$TMP/gen" | wc -m)
    if [ "$(head -c 6 "$TMP/gen")" = "ROMEO:" ] && [ "$chars" -ge 306 ]; then
        ok "generate printed $chars characters: $(head -c 60 "$TMP/gen" | tr '\n' ' ')..."
    else
        bad "generate printed $chars characters" "$TMP/gen"
    fi
else
    bad "sinter generate exited with an error" "$TMP/gen"
fi
sn_finish
