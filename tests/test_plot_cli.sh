#!/usr/bin/env bash
# The pictures from the command line, checked by the numbers printed beside them: a short
# training run with --csv and --save, `sinter plot` on its log (PNG of the size it says),
# `sinter evaluate --misclassified --confusion`: the wrong count equals the test split times
# (1 - the accuracy evaluate prints), the printed confusion matrix sums to the split and its
# off-diagonal to the wrong count, and both PNGs exist with their sizes. Flag errors exit 2.
#
#     bash tests/test_plot_cli.sh <build dir>
#
# Exit 77 (SKIPPED) without Fashion-MNIST.
set -u
BUILD=${1:?usage: bash tests/test_plot_cli.sh <build dir>}
BUILD=$(cd "$BUILD" && pwd)
SINTER="$BUILD/sinter"
DATA=/usr/share/datasets/fashion-mnist
export SN_NUM_THREADS=${SN_NUM_THREADS:-2} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
. "$(dirname "$0")/sh_test_util.sh"
[ -e "$DATA/t10k-images-idx3-ubyte.gz" ] || sn_skip "no Fashion-MNIST in $DATA"

sn_tmpdir test_plot
# png_size FILE: "WIDTHxHEIGHT" from the IHDR chunk (bytes 16..23, big-endian)
png_size() {
    local w h
    w=$(od -An -tu1 -j16 -N4 "$1" | awk '{print $1*16777216+$2*65536+$3*256+$4}')
    h=$(od -An -tu1 -j20 -N4 "$1" | awk '{print $1*16777216+$2*65536+$3*256+$4}')
    echo "${w}x${h}"
}

if "$SINTER" train --model mlp --epochs 3 --steps-per-epoch 25 --validation-steps 5 --quiet \
        --csv "$TMP/h.csv" --save "$TMP/m.weights.h5" >"$TMP/train.out" 2>&1; then
    ok "train --csv --save"
else
    bad "train --csv --save" "$TMP/train.out"; exit 1
fi

"$SINTER" plot "$TMP/h.csv" -o "$TMP/curves.png" >"$TMP/plot.out" 2>&1
if [ $? -eq 0 ] && grep -q "Wrote $TMP/curves.png (1000x420): loss and sparse_categorical_accuracy over 3 epochs" "$TMP/plot.out" &&
   [ "$(png_size "$TMP/curves.png")" = 1000x420 ]; then
    ok "plot: curves.png 1000x420, 3 epochs"
else
    bad "plot" "$TMP/plot.out"
fi

"$SINTER" evaluate --model mlp --weights "$TMP/m.weights.h5" --misclassified "$TMP/grid.png" \
    --max-images 12 --confusion "$TMP/cm.png" >"$TMP/eval.out" 2>&1
rc=$?
acc=$(sed -n 's/^Test accuracy: //p' "$TMP/eval.out")
wrong=$(sed -n 's|^Misclassified: \([0-9]*\)/\([0-9]*\)$|\1|p' "$TMP/eval.out")
total=$(sed -n 's|^Misclassified: \([0-9]*\)/\([0-9]*\)$|\2|p' "$TMP/eval.out")
want=$(awk -v a="$acc" -v n="$total" 'BEGIN { printf "%d", n * (1 - a) + 0.5 }')
if [ $rc -eq 0 ] && [ -n "$wrong" ] && [ "$total" = 10000 ] && [ "$wrong" = "$want" ]; then
    ok "evaluate: Misclassified $wrong/$total = 10000 * (1 - $acc)"
else
    bad "evaluate: misclassified $wrong/$total, want $want from accuracy $acc" "$TMP/eval.out"
fi
# the printed matrix: 10 rows of 10 counts after the class name
read -r sum off rows <<<"$(awk '/^Confusion matrix/ {on = 1; next}
    on && NF >= 11 { r++; for (i = NF - 9; i <= NF; i++) { s += $i; if (i - (NF - 9) != r - 1) o += $i } }
    END { print s + 0, o + 0, r + 0 }' "$TMP/eval.out")"
if [ "$rows" = 10 ] && [ "$sum" = 10000 ] && [ "$off" = "$wrong" ] &&
   grep -q "^ *T-shirt/top " "$TMP/eval.out" && grep -q "^ *Ankle boot " "$TMP/eval.out"; then
    ok "confusion matrix: 10 rows, sums to 10000, off-diagonal $off = misclassified"
else
    bad "confusion matrix: rows $rows sum $sum off-diagonal $off (misclassified $wrong)" "$TMP/eval.out"
fi
# 12 images: a grid of 4 columns x 3 rows of 180x122 cells (84-pixel images, captions) under a
# 40-pixel title
if [ "$(png_size "$TMP/grid.png")" = 720x406 ] && [ "$(png_size "$TMP/cm.png")" = 700x695 ]; then
    ok "grid.png 720x406, cm.png 700x695"
else
    bad "PNG sizes: grid $(png_size "$TMP/grid.png") cm $(png_size "$TMP/cm.png")" "$TMP/eval.out"
fi

"$SINTER" plot >"$TMP/e1.out" 2>&1; r1=$?
"$SINTER" plot "$TMP/missing.csv" -o "$TMP/x.png" >"$TMP/e2.out" 2>&1; r2=$?
"$SINTER" evaluate --model mlp --weights "$TMP/m.weights.h5" --max-images 0 >"$TMP/e3.out" 2>&1; r3=$?
if [ $r1 = 2 ] && grep -q "missing the CSV log" "$TMP/e1.out" && [ $r2 = 1 ] &&
   grep -q "missing.csv" "$TMP/e2.out" && [ $r3 = 2 ] && grep -q -- "--max-images" "$TMP/e3.out"; then
    ok "errors: no CSV (2), missing CSV (1, named), --max-images 0 (2)"
else
    bad "errors: rc $r1 $r2 $r3" "$TMP/e1.out" "$TMP/e2.out" "$TMP/e3.out"
fi
sn_finish
