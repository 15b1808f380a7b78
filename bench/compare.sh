#!/usr/bin/env bash
# Side-by-side benchmark: sinter against the strongest anchors, run alternately on one machine.
#
#   bench/compare.sh [--quick] [--rounds N] [--only WL,WL...]   the comparison (default 3 rounds)
#   bench/compare.sh --scaling [--rounds N]                      batch 32..512 x threads 1,2 + PNG
#
# Anchors (bench/anchors.sh installs them once, then reuses them):
#   tf         TensorFlow 2.21 from PyPI running the guide's Keras code (../shared/bench/tf_keras.py:
#              compile + fit, the guide's L2 on the guide CNN), steps_per_execution 1
#   tf_spe     the same with steps_per_execution 50 (small_cnn, tiny MLP through fit)
#   t215       PyTorch 2.15 from PyPI (../shared/bench/*.py), CPU; t215s stock, t215 tuned
#   t113       Debian's PyTorch 1.13; t113s stock, t113 tuned
# "tuned" is ../shared/bench/tuned.sh (jemalloc keeping its pages, THP, OMP_WAIT_POLICY=passive).
#
# Workloads (the issue's four, each on the user's path where one exists):
#   guide_cnn       guide CNN fp32, batch 200, Adam: sinter bench steps vs Keras fit steps, torch steps
#   guide_cnn_bf16  the same in mixed bfloat16 (sinter --precision bf16, torch autocast); TF's
#                   tf_keras.py has no mixed-precision mode, so no TF figure
#   small_cnn       one epoch through fit, batch 128: `sinter train` vs Keras fit vs torch loop,
#                   with test accuracy
#   mlp_fit         tiny MLP 784-128-10, batch 32, Adam, 2 epochs through fit: `sinter train` vs
#                   Keras fit, last epoch's ms/step (input pipeline and callbacks included)
#   mlp_step        the same MLP with SGD, bare steps: `sinter bench` vs the torch loops
#   char_lstm       LSTM(256) character model, batch 64 x 100 on tinyshakespeare, Adam, 10 steps
#                   after 2: `sinter bench --model char_lstm_small` (Embedding(65, 64) input)
#                   vs char_lstm.py (one-hot(65) input), tokens/s in the key=value lines
#   char_transformer  issue 26: char_transformer_small (nanoGPT's CPU size: 4 layers, 4 heads, 128
#                   wide, context 64, batch 12) on tinyshakespeare, 20 steps after 3 (--quick 3
#                   after 1): `sinter bench --model char_transformer_small` vs nanoGPT's model code
#                   in PyTorch (bench/char_transformer.py, F.scaled_dot_product_attention, AdamW),
#                   ms/step, tokens/s in the key=value lines
#   char_transformer_bf16  the same in mixed bfloat16 (sinter --precision bf16, torch autocast)
#   mobilenetv2     issue 23: keras.applications.MobileNetV2(weights=None, input_shape=(96,96,3),
#                   classes=10), batch 32, Adam, synthetic data: `sinter train` on the .keras file
#                   Keras saved (bench/keras_nets.py prepare, into $SN_BENCH_OUT/nets; one step an
#                   epoch) vs Keras fit (bench/keras_nets.py fit) vs the same net in plain torch.nn
#                   (bench/torch_nets.py); median ms/step after the warm-up steps, parameter counts
#                   in the lines (sinter's from `sinter summary`)
#   mobilenetv2_bf16  the same in mixed bfloat16 (sinter --precision bf16, Keras mixed_bfloat16,
#                   torch autocast)
#                   (10 timed steps after 2; SN_NET_STEPS / SN_NET_WARMUP change them; --quick 3 after 1)
#   xception, xception_bf16  keras.io's "image classification from scratch" small Xception
#                   (SeparableConv2D, residual 1x1/2 convs and adds) at 96x96 with Dense(10) logits,
#                   the same way
# Each round runs every runner of a workload once, starting at a different runner each round;
# the tables give medians over rounds, the ratio to the best anchor (> 1: sinter is faster) and
# peak RSS (/usr/bin/time). Everything runs with 2 threads. Expected duration on 2 quiet cores:
# ~6.5 min per round, so ~19 min for the default 3 rounds (plus the one-time installs);
# --quick ~4 min; --scaling ~12 min per round. The four issue-23 workloads and issue 26's two
# are not in the default set (--only mobilenetv2,mobilenetv2_bf16,xception,xception_bf16;
# --only char_transformer,char_transformer_bf16); for 3 rounds of those,
# ~10-20 min is estimated from their work (10.6 and 131 GFLOP a training step) and the
# interpreters' start-up, not yet measured on a quiet machine.
# Output: every run's line in $SN_BENCH_OUT/compare.log (default build/bench), then markdown.
set -uo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3 QUICK=0 SCALING=0 ONLY=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=1; ROUNDS=1 ;;
    --rounds) ROUNDS=$2; shift ;;
    --scaling) SCALING=1 ;;
    --only) ONLY=${2//,/ }; shift ;;
    [0-9]*) ROUNDS=$1 ;;  # the old interface: compare.sh ROUNDS [WORKLOAD...]
    -h|--help) awk 'NR > 1 && /^#/ {print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    guide_cnn|guide_cnn_bf16|small_cnn|mlp_fit|mlp_step|char_lstm|mobilenetv2|mobilenetv2_bf16|xception|xception_bf16|char_transformer|char_transformer_bf16)
      ONLY+="$1 " ;;
    *) echo "compare.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
BUILD=${SN_BUILD_DIR:-build}
SINTER=$(realpath -m "${SINTER:-$BUILD/sinter}")
REF=${SN_BENCH_REF:-$(cd .. && pwd)/shared/bench}
OUT=${SN_BENCH_OUT:-$BUILD/bench}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
NETS=$OUT/nets   # issue 23's .keras files and synthetic data (bench/keras_nets.py prepare)
SRC=$(pwd)
[ -x "$SINTER" ] || { echo "compare.sh: no $SINTER (scripts/build.sh first)" >&2; exit 1; }
[ -f "$REF/tf_keras.py" ] || { echo "compare.sh: no anchor scripts in $REF (SN_BENCH_REF)" >&2; exit 1; }
eval "$(bench/anchors.sh "$BUILD")"
# The Shakespeare corpus for char_lstm, from the one place that finds it (both sides read it).
CORPUS=$(scripts/shakespeare.sh) || echo "compare.sh: no Shakespeare corpus (scripts/shakespeare.sh): char_lstm cannot run" >&2
TUNED="$REF/tuned.sh"
[ -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || TUNED="env OMP_WAIT_POLICY=passive"
LOG=$OUT/compare.log
[ $SCALING = 1 ] && LOG=$OUT/scaling.log
: >"$LOG"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p" | head -n1; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
last_of() { awk -F, '{print $NF}' <<<"$1"; }
have() { # anchor available?
  case $1 in tf*) [ -n "$TF_PY" ] ;; t215*) [ -n "$TORCH_PY" ] ;; t113*) [ -n "$DEB_PY" ] ;; *) true ;; esac
}

# run WL WHO [BATCH THREADS]: prints the runner's key=value line plus peak_rss_kb=.
run() {
  local wl=$1 who=$2 b=${3:-} th=${4:-2} cmd=() py= pre=() cnn_steps=5 cnn_warm=2 mlp_ep=2
  local net_steps=${SN_NET_STEPS:-10} net_warm=${SN_NET_WARMUP:-2} net= bf=0 prec=fp32 ct_steps=20 ct_warm=3
  [ $QUICK = 1 ] && { cnn_steps=2; cnn_warm=1; net_steps=${SN_NET_STEPS:-3}; net_warm=${SN_NET_WARMUP:-1}; ct_steps=3; ct_warm=1; }
  case $wl in mobilenetv2*|xception*) net=${wl%_bf16}; [ $net = $wl ] || { bf=1; prec=bf16; } ;; esac
  case $wl in *_bf16) prec=bf16 ;; esac
  [ $SCALING = 1 ] && { cnn_steps=3; cnn_warm=1; }
  case $who in
    t215*) py=$TORCH_PY; pre=(env "LD_LIBRARY_PATH=$TORCH_LD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}") ;;
    t113*) py=$DEB_PY ;;
  esac
  case $who in t215|t113) pre+=($TUNED) ;; esac
  case $wl.$who in
    guide_cnn.sinter) cmd=($SINTER bench --model tpu_guide_cnn --batch-size ${b:-200} --steps $cnn_steps \
                          --warmup $cnn_warm --threads $th) ;;
    guide_cnn_bf16.sinter) cmd=($SINTER bench --model tpu_guide_cnn --batch-size ${b:-200} --steps $cnn_steps \
                          --warmup $cnn_warm --threads $th --precision bf16) ;;
    small_cnn.sinter) cmd=($SINTER train --model small_cnn --epochs 1 --batch-size ${b:-128} --threads $th \
                          --report --quiet) ;;
    mlp_fit.sinter) cmd=($SINTER train --model mlp --epochs $mlp_ep --batch-size 32 --threads $th --report --quiet) ;;
    char_lstm.sinter) cmd=($SINTER bench --model char_lstm_small --data "$CORPUS" \
                          --threads $th) ;;
    char_transformer*.sinter) cmd=($SINTER bench --model char_transformer_small --data "$CORPUS" \
                          --steps $ct_steps --warmup $ct_warm --precision $prec --threads $th) ;;
    mlp_step.sinter) cmd=($SINTER bench --model mlp --batch-size 32 --steps 2000 --warmup 200 --optimizer sgd \
                          --learning-rate 0.01 --threads $th) ;;
    guide_cnn.tf) cmd=($TF_PY "$REF/tf_keras.py" seed_cnn --spe 1 --steps $cnn_steps --batch ${b:-200} --threads $th) ;;
    small_cnn.tf|small_cnn.tf_spe)
      cmd=($TF_PY "$REF/tf_keras.py" small_cnn --spe $([ $who = tf ] && echo 1 || echo 50) --epochs 1 \
           --batch ${b:-128} --threads $th) ;;
    mlp_fit.tf|mlp_fit.tf_spe)
      cmd=($TF_PY "$REF/tf_keras.py" mlp --spe $([ $who = tf ] && echo 1 || echo 50) --epochs $mlp_ep \
           --threads $th) ;;
    guide_cnn.t*) cmd=($py seed_cnn.py --threads $th --batch ${b:-200} --steps $cnn_steps --warmup $cnn_warm) ;;
    guide_cnn_bf16.t*) cmd=($py seed_cnn.py --threads $th --batch ${b:-200} --steps $cnn_steps --warmup $cnn_warm --bf16 1) ;;
    small_cnn.t*) cmd=($py small_cnn.py --threads $th --batch ${b:-128} --epochs 1) ;;
    mlp_step.t*) cmd=($py tiny_mlp.py --threads $th) ;;
    char_lstm.t*) cmd=($py char_lstm.py --threads $th --text "$CORPUS") ;;
    char_transformer*.t*) cmd=($py "$SRC/bench/char_transformer.py" --threads $th --text "$CORPUS" \
                          --steps $ct_steps --warmup $ct_warm --precision $prec) ;;
    mobilenetv2*.sinter|xception*.sinter)
      cmd=($SINTER train --model "$NETS/$net.keras" --data "$NETS/x.npy" --labels "$NETS/y.npy" \
           --epochs $((net_warm + net_steps)) --steps-per-epoch 1 --steps-per-execution 1 --batch-size 32 \
           --precision $prec --threads $th --report --quiet) ;;
    mobilenetv2*.tf|xception*.tf)
      cmd=($TF_PY "$SRC/bench/keras_nets.py" fit $net --bf16 $bf --steps $net_steps --warmup $net_warm --threads $th) ;;
    mobilenetv2*.t*|xception*.t*)
      cmd=($py "$SRC/bench/torch_nets.py" $net --bf16 $bf --steps $net_steps --warmup $net_warm --threads $th) ;;
    *) echo "no_runner=1"; return ;;
  esac
  local line
  line=$(cd "$REF" && /usr/bin/time -f '%M' -o "$TMP/rss" "${pre[@]}" "${cmd[@]}" 2>"$TMP/err" | tail -n1)
  if ! grep -q '=' <<<"$line"; then
    echo "failed=1 why=$(tail -n1 "$TMP/err" | tr ' =' '_:' | cut -c1-120)"; return
  fi
  if [ -n "$net" ] && [ $who = sinter ]; then
    # One step per epoch: the median of the epochs after the warm-up ones, as the anchors' median
    # step; and the parameter count sinter's summary gives (the anchors print theirs).
    line+=" median_ms_per_step=$(field "$line" epoch_s | tr , '\n' | tail -n +$((net_warm + 1)) |
      awk '{print 1e3 * $1}' | median) params=${NET_PARAMS[$net]:-unknown}"
  fi
  echo "$line peak_rss_kb=$(tail -n1 "$TMP/rss")"
}

# nets_prepare: issue 23's models saved by Keras as .keras files, the synthetic data, and the
# parameter counts Keras and sinter's summary give (printed; a difference is a warning).
declare -A NET_PARAMS
nets_prepare() {
  [ -n "$TF_PY" ] || { echo "compare.sh: no TensorFlow venv: the .keras files for mobilenetv2/xception cannot be made" >&2; return 1; }
  local out m k s
  out=$("$TF_PY" bench/keras_nets.py prepare --out "$NETS" 2>"$TMP/prep.err") ||
    { echo "compare.sh: bench/keras_nets.py prepare failed: $(tail -n1 "$TMP/prep.err")" >&2; return 1; }
  for m in mobilenetv2 xception; do
    k=$(grep "workload=$m " <<<"$out" | tr ' ' '\n' | sed -n 's/^params=//p')
    s=$("$SINTER" summary --model "$NETS/$m.keras" 2>&1 | sed -n 's/^ *Total params: \([0-9,]*\).*/\1/p' | tr -d ,)
    NET_PARAMS[$m]=${s:-refused}
    echo "params: $m keras=$k sinter=${s:-refused}$([ "$k" = "$s" ] || echo ' (DIFFER)')"
    [ -n "$s" ] || "$SINTER" summary --model "$NETS/$m.keras" 2>&1 | tail -n2 >&2
  done
}

# metric WL LINE: the figure compared, in the workload's unit (lower is better).
metric() {
  local wl=$1 l=$2 v
  [ -n "$(field "$l" failed)" ] && { echo nan; return; }
  case $wl in
    small_cnn)
      v=$(field "$l" epoch_s); [ -z "$v" ] && v=$(field "$l" first_epoch_s); last_of "$v" ;;
    mlp_fit)
      v=$(field "$l" epoch_s)
      if [ -n "$v" ]; then awk -v s="$(last_of "$v")" -v n="$(field "$l" steps_per_epoch)" 'BEGIN{printf "%.4f", 1e3*s/n}'
      else field "$l" ms_per_step; fi ;;
    mobilenetv2*|xception*)
      v=$(field "$l" median_ms_per_step); [ -n "$v" ] && echo "$v" || field "$l" ms_per_step ;;
    *) field "$l" ms_per_step ;;
  esac
}
unit() { case $1 in small_cnn) echo "s/epoch" ;; *) echo "ms/step" ;; esac; }
name() {
  case $1 in
    sinter) echo "sinter" ;; tf) echo "TF 2.21 fit" ;; tf_spe) echo "TF 2.21 fit spe 50" ;;
    t215) echo "PyTorch 2.15 tuned" ;; t215s) echo "PyTorch 2.15 stock" ;;
    t113) echo "PyTorch 1.13 tuned" ;; t113s) echo "PyTorch 1.13 stock" ;;
  esac
}

machine() {
  local flags
  flags=$(grep -o -w -E 'avx512f|avx512_bf16|amx_bf16|amx_tile|avx512_fp16' /proc/cpuinfo | sort -u | tr '\n' ' ')
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') (vendor $(grep -m1 vendor_id /proc/cpuinfo | cut -d: -f2- | tr -d ' '), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model\s*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), $(nproc) cpus; $flags); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "sinter: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+dirty'); TF: ${TF_PY:-none}; PyTorch 2.15: ${TORCH_PY:-none}; PyTorch 1.13: ${DEB_PY:-none}"
}

# ---- scaling -------------------------------------------------------------------------------
if [ $SCALING = 1 ]; then
  ANCHOR=${SN_SCALING_ANCHOR:-tf}   # tf: Keras fit (spe 50 for small_cnn); or t215 (PyTorch 2.15 tuned)
  have "$ANCHOR" || { echo "compare.sh: anchor $ANCHOR not installed" >&2; exit 1; }
  TSV=$OUT/scaling.tsv
  echo -e "model\tthreads\tbatch\twho\tsamples_per_s" >"$TSV"
  machine | tee -a "$LOG"
  for ((r = 1; r <= ROUNDS; r++)); do
    for wl in guide_cnn small_cnn; do
      for th in 1 2; do
        for b in 32 64 128 256 512; do
          a=$ANCHOR; [ "$wl.$ANCHOR" = small_cnn.tf ] && a=tf_spe
          for who in sinter $a; do
            line=$(run $wl $who $b $th)
            echo "round=$r wl=$wl threads=$th batch=$b who=$who $line" | tee -a "$LOG"
            m=$(metric $wl "$line")
            if [ $wl = small_cnn ]; then sps=$(awk -v s="$m" -v b=$b 'BEGIN{if (s+0 > 0) printf "%.1f", int(60000/b)*b/s; else print "nan"}')
            else sps=$(awk -v s="$m" -v b=$b 'BEGIN{if (s+0 > 0) printf "%.1f", 1e3*b/s; else print "nan"}'); fi
            echo -e "$wl\t$th\t$b\t$([ $who = sinter ] && echo sinter || echo "$(name $a)")\t$sps" >>"$TSV"
          done
        done
      done
    done
  done
  echo
  echo "| model | threads | batch | sinter samples/s | $(name $ANCHOR) samples/s | ratio |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: |"
  for wl in guide_cnn small_cnn; do for th in 1 2; do for b in 32 64 128 256 512; do
    s=$(awk -F'\t' -v w=$wl -v t=$th -v b=$b '$1==w&&$2==t&&$3==b&&$4=="sinter"{print $5}' "$TSV" | median)
    a=$(awk -F'\t' -v w=$wl -v t=$th -v b=$b '$1==w&&$2==t&&$3==b&&$4!="sinter"{print $5}' "$TSV" | median)
    printf '| %s | %d | %d | %.1f | %.1f | %.2fx |\n' $wl $th $b "$s" "$a" "$(awk -v s=$s -v a=$a 'BEGIN{print (a>0)?s/a:0}')"
  done; done; done
  if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    /usr/bin/python3 bench/scaling_plot.py "$TSV" "$OUT/scaling.png" && echo "plot: $OUT/scaling.png"
  else echo "(no plot: apt-get install python3-matplotlib)"; fi
  echo "(samples/s, medians of $ROUNDS round(s); guide_cnn: timed steps; small_cnn: one epoch through fit; runs in $LOG, table in $TSV)"
  exit 0
fi

# ---- comparison ----------------------------------------------------------------------------
WORKLOADS=${ONLY:-guide_cnn guide_cnn_bf16 small_cnn mlp_fit mlp_step char_lstm}
runners() {
  case $1 in
    guide_cnn) echo sinter tf t215 t113 ;;
    guide_cnn_bf16) echo sinter t215 t113 ;;
    small_cnn) echo sinter tf tf_spe t215 t113 ;;
    mlp_fit) echo sinter tf tf_spe ;;
    mlp_step) echo sinter t215s t215 t113s t113 ;;
    char_lstm) echo sinter t215 t113s t113 ;;
    char_transformer|char_transformer_bf16) echo sinter t215 ;;
    mobilenetv2|mobilenetv2_bf16|xception|xception_bf16) echo sinter tf t215 t113 ;;
  esac
}
machine | tee -a "$LOG"
if grep -q -w -E 'mobilenetv2|xception' <<<"${WORKLOADS//_bf16/}"; then
  nets_prepare >"$TMP/params"   # not in a pipe: NET_PARAMS must be set in this shell
  tee -a "$LOG" <"$TMP/params"
fi
declare -A vals rss acc
for ((r = 1; r <= ROUNDS; r++)); do
  for wl in $WORKLOADS; do
    read -ra rs <<<"$(runners "$wl")"
    n=${#rs[@]}
    for ((i = 0; i < n; i++)); do
      who=${rs[(i + r - 1) % n]}   # each round starts one runner later
      have "$who" || continue
      line=$(run "$wl" "$who")
      echo "round=$r wl=$wl who=$who $line" | tee -a "$LOG"
      vals[$wl.$who]+="$(metric "$wl" "$line") "
      rss[$wl.$who]+="$(field "$line" peak_rss_kb) "
      t=$(field "$line" test_acc); [ -n "$t" ] && [ "$t" != nan ] && acc[$wl.$who]+="$(last_of "$t") "
    done
  done
done

med() { tr ' ' '\n' <<<"${1:-}" | grep -v -e '^$' -e nan | median; }
echo
echo "### Ratios to the best anchor (medians of $ROUNDS round(s); > 1: sinter is faster)"
echo
echo "| workload | unit | sinter | best anchor | its figure | ratio | sinter peak RSS MB | smallest anchor RSS MB |"
echo "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: |"
for wl in $WORKLOADS; do
  s=$(med "${vals[$wl.sinter]:-}")
  best= bv= minrss=
  for who in $(runners "$wl"); do
    [ $who = sinter ] && continue
    v=$(med "${vals[$wl.$who]:-}"); [ "$v" = nan ] && continue
    if [ -z "$bv" ] || awk -v a="$v" -v b="$bv" 'BEGIN{exit !(a < b)}'; then best=$who; bv=$v; fi
    m=$(med "${rss[$wl.$who]:-}")
    if [ "$m" != nan ] && { [ -z "$minrss" ] || awk -v a="$m" -v b="$minrss" 'BEGIN{exit !(a < b)}'; }; then minrss=$m; fi
  done
  printf '| %s | %s | %.4g | %s | %.4g | %s | %.0f | %s |\n' "$wl" "$(unit $wl)" "$s" "$(name "$best")" "${bv:-nan}" \
    "$(awk -v s="$s" -v b="${bv:-0}" 'BEGIN{if (s > 0 && b > 0) printf "**%.2fx**", b/s; else print "-"}')" \
    "$(awk -v k="$(med "${rss[$wl.sinter]:-}")" 'BEGIN{print k/1024}')" \
    "$([ -n "$minrss" ] && awk -v k="$minrss" 'BEGIN{printf "%.0f", k/1024}' || echo -)"
done
echo
echo "### Every runner (median [min-max]; peak RSS; test accuracy where the run evaluates)"
echo
echo "| workload | runner | unit | median | min-max | peak RSS MB | test acc |"
echo "| --- | --- | --- | ---: | --- | ---: | ---: |"
for wl in $WORKLOADS; do
  for who in $(runners "$wl"); do
    [ -n "${vals[$wl.$who]:-}" ] || continue
    lo=$(tr ' ' '\n' <<<"${vals[$wl.$who]}" | grep -v -e '^$' -e nan | sort -g | head -n1)
    hi=$(tr ' ' '\n' <<<"${vals[$wl.$who]}" | grep -v -e '^$' -e nan | sort -g | tail -n1)
    printf '| %s | %s | %s | %.4g | %s-%s | %.0f | %s |\n' "$wl" "$(name $who)" "$(unit $wl)" \
      "$(med "${vals[$wl.$who]}")" "${lo:-nan}" "${hi:-nan}" \
      "$(awk -v k="$(med "${rss[$wl.$who]:-}")" 'BEGIN{print k/1024}')" \
      "$([ -n "${acc[$wl.$who]:-}" ] && med "${acc[$wl.$who]}" || echo)"
  done
done
echo
echo "(runs in $LOG; missing anchors: $(for a in tf t215 t113; do have $a || printf '%s ' "$(name $a)"; done))"
