#!/usr/bin/env bash
# Side-by-side benchmark: sinter against the PyTorch reference scripts of ../shared/bench, run
# alternately (sinter, stock PyTorch, tuned PyTorch) for ROUNDS rounds on the same machine, then
# the median of each and the ratios. Usage:
#   bench/compare.sh [ROUNDS] [WORKLOAD...]
#   workloads: seed_cnn small_cnn tiny_mlp (the default set), seed_cnn_bf16 (mixed bfloat16),
#              char_lstm (char_lstm_small against char_lstm.py: LSTM(256), batch 64 x 100)
# Needs build/sinter (scripts/build.sh) and Debian's python3-torch; tuned PyTorch needs
# libjemalloc2. Everything runs with 2 threads. Output: one line per run, then a table.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
shift || true
WORKLOADS=${*:-seed_cnn small_cnn tiny_mlp}
REF=${SN_BENCH_REF:-$(cd .. && pwd)/shared/bench}
SINTER=${SINTER:-build/sinter}
PY=/usr/bin/python3
LOG=${SN_BENCH_LOG:-/tmp/sinter-compare.log}
: >"$LOG"

# key=value field of a line
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p" | head -n1; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

run_sinter() {
  case $1 in
    seed_cnn) $SINTER bench --model tpu_guide_cnn --batch-size 200 --steps 5 --warmup 2 --threads 2 ;;
    seed_cnn_bf16) $SINTER bench --model tpu_guide_cnn --batch-size 200 --steps 5 --warmup 2 --threads 2 \
                     --precision bf16 ;;
    tiny_mlp) $SINTER bench --model mlp --batch-size 32 --steps 2000 --warmup 200 --optimizer sgd \
                --learning-rate 0.01 --threads 2 ;;
    small_cnn) $SINTER train --model small_cnn --epochs 1 --batch-size 128 --threads 2 --report ;;
    # 12 steps with the first (plan building) inside the timing, against 10 after 2 warm-up
    char_lstm) $SINTER train --data "$REF/../data/tinyshakespeare.txt" --model char_lstm_small \
                 --epochs 1 --steps-per-epoch 12 --validation-steps 1 --learning-rate 0.002 \
                 --threads 2 --report ;;
  esac
}
run_torch() { # $1 workload, $2 stock|tuned
  local w=; [ "$2" = tuned ] && w="$REF/tuned.sh"
  case $1 in
    seed_cnn) (cd "$REF" && $w $PY seed_cnn.py --threads 2) ;;
    seed_cnn_bf16) (cd "$REF" && $w $PY seed_cnn.py --threads 2 --bf16 1) ;;
    tiny_mlp) (cd "$REF" && $w $PY tiny_mlp.py --threads 2) ;;
    small_cnn) (cd "$REF" && $w $PY small_cnn.py --threads 2 --epochs 1) ;;
    char_lstm) (cd "$REF" && $w $PY char_lstm.py --threads 2) ;;
  esac
}
# The figure compared: ms per step for seed_cnn and tiny_mlp, seconds per epoch for small_cnn.
metric() {
  case $1 in
    small_cnn) local v; v=$(field "$2" epoch_s); echo "${v%%,*}" ;;
    *) field "$2" ms_per_step ;;
  esac
}

declare -A vals
for ((r = 1; r <= ROUNDS; r++)); do
  for wl in $WORKLOADS; do
    for who in sinter stock tuned; do
      if [ $who = sinter ]; then line=$(run_sinter "$wl" | tail -n1)
      else line=$(run_torch "$wl" $who | tail -n1); fi
      echo "round=$r who=$who $line" | tee -a "$LOG"
      vals[$wl.$who]+="$(metric "$wl" "$line") "
      [ "$wl" = small_cnn ] && vals[$wl.$who.acc]+="$(field "$line" test_acc | awk -F, '{print $NF}') "
    done
  done
done

echo
printf '%-10s %-10s %14s %14s %14s %10s %10s\n' workload unit sinter torch_stock torch_tuned vs_stock vs_tuned
for wl in $WORKLOADS; do
  unit=ms/step; [ "$wl" = small_cnn ] && unit=s/epoch
  s=$(tr ' ' '\n' <<<"${vals[$wl.sinter]}" | grep . | median)
  a=$(tr ' ' '\n' <<<"${vals[$wl.stock]}" | grep . | median)
  t=$(tr ' ' '\n' <<<"${vals[$wl.tuned]}" | grep . | median)
  printf '%-10s %-10s %14.4g %14.4g %14.4g %9.2fx %9.2fx\n' "$wl" "$unit" "$s" "$a" "$t" \
    "$(echo "$a / $s" | bc -l)" "$(echo "$t / $s" | bc -l)"
  if [ "$wl" = small_cnn ]; then
    printf '%-10s %-10s %14s %14s %14s\n' "" test_acc \
      "$(tr ' ' '\n' <<<"${vals[$wl.sinter.acc]}" | grep . | median)" \
      "$(tr ' ' '\n' <<<"${vals[$wl.stock.acc]}" | grep . | median)" \
      "$(tr ' ' '\n' <<<"${vals[$wl.tuned.acc]}" | grep . | median)"
  fi
done
echo "(ratios > 1: sinter is faster; medians of $ROUNDS rounds; runs in $LOG)"
