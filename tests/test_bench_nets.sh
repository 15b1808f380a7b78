#!/usr/bin/env bash
# bench/compare.sh's issue-23 workloads train the same model on every side: the .keras files
# bench/keras_nets.py saves (MobileNetV2 96x96x3/10 classes, keras.io's small Xception) are
# read by `sinter summary` with Keras's total parameter count, and bench/torch_nets.py's plain
# torch.nn versions have that count too (parameters plus BN moving statistics). Timing is
# bench/compare.sh's job, never this test's.
#
#     bash tests/test_bench_nets.sh <build dir>
#
# SKIPPED (77) without the Keras reference venv (scripts/pyenv.sh), without ../shared/bench, or without a PyTorch (the
# PyTorch 2.15 venv bench/anchors.sh makes, or Debian's python3-torch); it installs neither.
set -u
BUILD=${1:?usage: bash tests/test_bench_nets.sh <build dir>}
BUILD=$(cd "$BUILD" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
SINTER=$BUILD/sinter

PY=$("$SRC/scripts/pyenv.sh" "$BUILD")
rc=$?
if [ $rc -eq 77 ]; then echo "SKIPPED: no Keras reference (scripts/pyenv.sh could not make the venv)"; exit 77; fi
[ $rc -eq 0 ] || { echo "FAIL: scripts/pyenv.sh exited $rc"; exit 1; }
TORCH=() venv=$BUILD/bench-torch
if [ -x "$venv/bin/python" ] && ls "$venv"/.ok-* >/dev/null 2>&1; then
  TORCH=(env "LD_LIBRARY_PATH=$(ls -d "$venv"/lib/python3*/site-packages/nvidia/*/lib 2>/dev/null | paste -sd: -)" "$venv/bin/python")
elif /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  TORCH=(/usr/bin/python3)
else
  echo "SKIPPED: no PyTorch (bench/anchors.sh's venv or python3-torch)"; exit 77
fi

# bench/torch_nets.py takes its thread setup and report from the anchors' ../shared/bench/common.py
[ -f "$SRC/../shared/bench/common.py" ] ||
  { echo "SKIPPED: no $SRC/../shared/bench/common.py (the PyTorch anchors' helpers bench/torch_nets.py imports)"; exit 77; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/sinter_bench_nets.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
out=$("$PY" "$SRC/bench/keras_nets.py" prepare --out "$TMP" 2>"$TMP/err") ||
  { echo "FAIL: bench/keras_nets.py prepare: $(tail -n3 "$TMP/err")"; exit 1; }
fail=0
for m in mobilenetv2 xception; do
  k=$(grep "workload=$m " <<<"$out" | tr ' ' '\n' | sed -n 's/^params=//p')
  s=$("$SINTER" summary --model "$TMP/$m.keras" 2>"$TMP/serr" | sed -n 's/^ *Total params: \([0-9,]*\).*/\1/p' | tr -d ,)
  t=$("${TORCH[@]}" "$SRC/bench/torch_nets.py" $m --steps 0 2>"$TMP/terr" | tr ' ' '\n' | sed -n 's/^params=//p')
  echo "$m: keras $k, sinter ${s:-refused ($(tail -n1 "$TMP/serr"))}, torch ${t:-failed ($(tail -n1 "$TMP/terr"))}"
  if [ -z "$k" ] || [ "$k" != "$s" ] || [ "$k" != "$t" ]; then
    echo "FAIL: $m: the parameter counts differ (or a side failed): keras '$k', sinter '$s', torch '$t'"
    fail=1
  fi
done
[ $fail = 0 ] && echo "PASS: both nets have the same parameter count in Keras, sinter and torch"
exit $fail
