#!/usr/bin/env bash
# Smoke test of `sinter bench` (issue: CI runs the bench for a couple of steps and never asserts
# a time): every workload's key=value line has its fields, --profile prints the per-op table,
# bf16 runs, bad flags are refused. Speed itself is measured by bench/compare.sh, not here.
#
#     bash tests/test_bench.sh <build dir>
set -u
BUILD=$(cd "${1:?usage: bash tests/test_bench.sh <build dir>}" && pwd)
SINTER="$BUILD/sinter"
export SN_NUM_THREADS=${SN_NUM_THREADS:-2} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
. "$(dirname "$0")/sh_test_util.sh"
sn_tmpdir test_bench

[ -d /usr/share/datasets/fashion-mnist ] ||
    sn_skip "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"

# bench NAME ARGS...: runs sinter bench, checks exit 0 and the fields of its key=value line.
bench() {
    local name=$1
    shift
    if ! "$SINTER" bench "$@" >"$TMP/$name" 2>&1; then bad "$name: exit code $?" "$TMP/$name"; return 1; fi
    local line
    line=$(grep '^framework=sinter ' "$TMP/$name")
    for key in workload ms_per_step samples_per_s gflops peak_gflops peak_fraction peak_rss_mb loss; do
        if ! grep -Eq "(^| )$key=[0-9a-z_.+e-]+( |$)" <<<"$line"; then
            bad "$name: no $key= in '$line'" "$TMP/$name"
            return 1
        fi
    done
    ok "$name: $line"
}

bench seed_cnn --model tpu_guide_cnn --batch-size 4 --steps 2 --warmup 1
bench mlp_sgd --model mlp --batch-size 32 --steps 20 --warmup 2 --optimizer sgd --learning-rate 0.01 \
    --steps-per-execution 10
# Which kernel runs conv2d: oneDNN's, unless the build has none (-DSN_WITH_DNNL=OFF).
conv_kernel=dnnl
grep -q '^SN_WITH_DNNL:BOOL=OFF' "$BUILD/CMakeCache.txt" 2>/dev/null && conv_kernel='[a-z_0-9]+'
if bench small_cnn_profile --model small_cnn --batch-size 16 --steps 2 --warmup 1 --profile; then
    if grep -Eq "^[0-9]+ +conv2d +$conv_kernel" "$TMP/small_cnn_profile" &&
        grep -q 'GFLOP/s' "$TMP/small_cnn_profile"; then ok "profile table lists conv2d ($conv_kernel)"
    else bad "profile table lacks the conv2d row ($conv_kernel)" "$TMP/small_cnn_profile"; fi
fi
# The character models: windows of a text (here a small one written for the test).
for i in $(seq 60); do printf 'ROMEO: But soft, what light through yonder window breaks?\n'; done >"$TMP/t.txt"
if bench char_lstm_small --model char_lstm_small --data "$TMP/t.txt" --batch-size 4 --seq-length 20 \
    --steps 2 --warmup 1 --profile; then
    if grep -Eq 'tokens_per_s=[0-9]' "$TMP/char_lstm_small" && grep -q 'seq=20 ' "$TMP/char_lstm_small" &&
        grep -Eq '^[0-9]+ +lstm(_layer)? +[a-z_]+ .* [0-9.]+ +[0-9.]+%' "$TMP/char_lstm_small"; then
        ok "char_lstm_small: tokens_per_s, seq and the lstm profile row"
    else bad "char_lstm_small: no tokens_per_s / seq / lstm row" "$TMP/char_lstm_small"; fi
fi
"$SINTER" bench --model char_lstm_small --data "$TMP/none.txt" >"$TMP/bad3" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "none.txt" "$TMP/bad3"; then ok "bench of a missing text names it"
else bad "bench --data none.txt: exit $rc" "$TMP/bad3"; fi
bench bf16 --model mlp --batch-size 16 --steps 2 --warmup 1 --precision bf16 &&
    { grep -q 'precision=bf16' "$TMP/bf16" && ok "bf16 line says precision=bf16" ||
          bad "bf16 line lacks precision=bf16" "$TMP/bf16"; }

"$SINTER" bench --steps 0 >"$TMP/bad" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--steps" "$TMP/bad"; then ok "bench --steps 0 is refused (exit 2)"
else bad "bench --steps 0: exit $rc" "$TMP/bad"; fi
"$SINTER" bench --precision fp16 >"$TMP/bad2" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "fp32, bf16 or fp32-strict" "$TMP/bad2"; then ok "bench --precision fp16 is refused"
else bad "bench --precision fp16: exit $rc" "$TMP/bad2"; fi

sn_finish
