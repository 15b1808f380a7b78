#!/usr/bin/env bash
# Issue 27's check of the GPU path, in one call on a GPU machine, sized for under 9 minutes on
# one H200 (docs/cuda.md, "Checking it on a GPU machine"):
#
#   1. binaries: built there when the machine has sinter's build dependencies, else the bundle
#      of scripts/gpu_bundle.sh carried in .gpu/ (with Fashion-MNIST in .gpu/fashion-mnist);
#   2. `sinter devices`, nvidia-smi;
#   3. the CUDA tests: test_cuda_kernels (every launcher against the reference kernels, a
#      training run, graph capture), and the ones that also run without a GPU
#      (test_cuda_table, test_cuda_coverage, test_backend, test_device_placement);
#   4. small_cnn (batch 128) and the guide's CNN (tpu_guide_cnn, batch 200) for one
#      Fashion-MNIST epoch with --device gpu:0, steps_per_execution 1 and 50 (TF32, the
#      default): epoch seconds, ms/step, peak GPU memory (nvidia-smi sampled every 100 ms),
#      test accuracy;
#   5. the first 200 losses (TensorBoard batch_loss, every step) of --device gpu:0
#      --precision fp32-strict against --device cpu:0 --precision fp32-strict: the check is
#      |gpu - cpu| <= 1e-3 |cpu| at every step; the TF32 run's largest deviation is reported;
#   6. compute-sanitizer (memcheck) on a 3-step run of small_cnn.
#
# Results: $OUT/gpu_check/ when OUT is set (the device tool), else ./gpu-results-<UTC time>/;
# at most 8 files: summary.txt, results.tsv, losses.tsv, tests.txt, runs.txt, sanitizer.txt.
# Exit 0 when every check passed, 1 when one failed, 77 when there is no GPU (nothing run on
# one: the binaries, the devices and the GPU-free tests are still reported).
#
# Usage, from the repository root, on the GPU machine:
#   scripts/gpu_bundle.sh                  # on the development machine first (CUDA build)
#   scripts/gpu_check.sh                   # the device tool: carry [".gpu"], timeout_s 560
# SN_GPU_CHECK_NO_BUILD=1 skips the build attempt and uses the bundle at once. A dry run of the
# script's own plumbing without a GPU (nothing measured): SN_GPU_CHECK_DEVICE=cpu:0
# SN_GPU_CHECK_MODELS="small_cnn 128" SN_GPU_CHECK_STEPS=20 (steps per epoch of the step-4 runs).
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
if [ -n "${OUT:-}" ]; then RES="$OUT/gpu_check"; else RES="gpu-results-$(date -u +%Y%m%dT%H%M%SZ)"; fi
mkdir -p "$RES"
SUM="$RES/summary.txt"
: >"$SUM"
fails=0
log() { echo "== $*" | tee -a "$SUM"; }
fail() { fails=$((fails + 1)); log "FAIL: $*"; }
elapsed() { echo $(($(date +%s) - T0)); }
log "gpu_check $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || cat .gpu/commit 2>/dev/null); results in $RES"
{ nvidia-smi 2>&1 | head -20; } >>"$SUM" || log "nvidia-smi failed"

# The machine's CUDA libraries (cuBLASLt, cuDNN, NCCL) on the library path, where the backend
# opens them by soname on first use (src/backend/cuda/cuda_libs.h); cudart is static.
libdirs=$(find /usr/local/cuda*/lib* /usr/local/lib /usr/lib/x86_64-linux-gnu /opt /usr/local/lib/python3* \
            -maxdepth 7 \( -name 'libcublasLt.so.13*' -o -name 'libcudnn.so.9*' -o -name 'libnccl.so.2*' \) \
            2>/dev/null | xargs -r -n1 dirname | sort -u | paste -sd:)
log "CUDA library folders: ${libdirs:-none found}"
export LD_LIBRARY_PATH=${libdirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMP_WAIT_POLICY=passive

# ---- 1. binaries ---------------------------------------------------------------------------
TESTS="test_cuda_libs test_cuda_kernels test_cuda_table test_cuda_coverage test_backend test_device_placement"
BIN=""
if [ "${SN_GPU_CHECK_NO_BUILD:-0}" = 1 ]; then
  log "SN_GPU_CHECK_NO_BUILD=1: not building here"
elif cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DSN_WITH_CUDA=ON -DSN_WITH_MPI=OFF \
     >"$RES/runs.txt" 2>&1; then
  # shellcheck disable=SC2086
  if timeout 240 cmake --build build-gpu -j"$(nproc)" --target sinter_cli $TESTS >>"$RES/runs.txt" 2>&1; then
    BIN=build-gpu
    log "built here (build-gpu) in $(elapsed) s"
  else
    log "build here failed (tail of runs.txt):"; tail -20 "$RES/runs.txt" | tee -a "$SUM"
  fi
else
  log "configure here failed (no build dependencies?); using the carried bundle"
fi
if [ -z "$BIN" ]; then
  if [ -f .gpu/bundle.tar.xz ]; then
    rm -rf /tmp/sn-gpu && mkdir -p /tmp/sn-gpu/tests && tar xJf .gpu/bundle.tar.xz -C /tmp/sn-gpu
    export LD_LIBRARY_PATH=/tmp/sn-gpu/lib:$LD_LIBRARY_PATH
    for t in $TESTS; do [ -x "/tmp/sn-gpu/bin/$t" ] && ln -sf "/tmp/sn-gpu/bin/$t" /tmp/sn-gpu/tests/; done
    ln -sf /tmp/sn-gpu/bin/sinter /tmp/sn-gpu/sinter
    BIN=/tmp/sn-gpu
    log "using the carried bundle (.gpu/bundle.tar.xz, commit $(cat .gpu/commit 2>/dev/null))"
  else
    log "no binaries: no build here and no .gpu/bundle.tar.xz (run scripts/gpu_bundle.sh first)"
    exit 1
  fi
fi
BIN=$(cd "$BIN" && pwd)
SINTER="$BIN/sinter"
DATA=()
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  if [ -d .gpu/fashion-mnist ]; then DATA=(--data-dir .gpu/fashion-mnist)
  else log "no Fashion-MNIST (neither /usr/share/datasets/fashion-mnist nor .gpu/fashion-mnist)"; fi
fi

# ---- 2. devices ----------------------------------------------------------------------------
timeout 60 "$SINTER" devices >>"$SUM" 2>&1
gpu=no
"$SINTER" devices 2>/dev/null | grep -q 'device:GPU:0' && gpu=yes
DEV=${SN_GPU_CHECK_DEVICE:-gpu:0}
[ "$DEV" != gpu:0 ] && { log "dry run on $DEV (SN_GPU_CHECK_DEVICE): plumbing only"; gpu=yes; }
MODELS=${SN_GPU_CHECK_MODELS:-"small_cnn 128;tpu_guide_cnn 200"}
EPOCH=()
[ -n "${SN_GPU_CHECK_STEPS:-}" ] && EPOCH=(--steps-per-epoch "$SN_GPU_CHECK_STEPS")
log "GPU seen by sinter: $gpu"

# ---- 3. tests --------------------------------------------------------------------------------
: >"$RES/tests.txt"
for t in $TESTS; do
  [ -x "$BIN/tests/$t" ] || { log "$t: not in these binaries"; continue; }
  echo "---- $t" >>"$RES/tests.txt"
  timeout 180 "$BIN/tests/$t" >>"$RES/tests.txt" 2>&1
  rc=$?
  case $rc in
    0) log "$t: passed" ;;
    77) log "$t: SKIPPED" ;;
    *) fail "$t: exit $rc (tests.txt)" ;;
  esac
done
if [ $gpu = no ]; then
  log "no GPU: the training, loss and sanitizer checks need one; SKIPPED ($(elapsed) s)"
  exit 77
fi

# ---- 4. one epoch per model and steps_per_execution (TF32) -----------------------------------
# peak MiB of GPU memory while "$@" runs (nvidia-smi every 100 ms)
with_peak() {
  local f="$RES/.smi"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$f" 2>/dev/null &
  local smi=$!
  "$@"
  local rc=$?
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
  PEAK=$(sort -n "$f" | tail -1)
  rm -f "$f"
  return $rc
}
printf 'model\tbatch\tsteps_per_execution\tprecision\tepoch_s\tms_per_step\tpeak_gpu_mib\ttest_acc\n' >"$RES/results.tsv"
: >>"$RES/runs.txt"
IFS=';' read -ra MB <<<"$MODELS"
for mb in "${MB[@]}"; do
  set -- $mb
  for spe in 1 50; do
    echo "---- train $1 batch $2 spe $spe $DEV" >>"$RES/runs.txt"
    with_peak timeout 120 "$SINTER" train --device "$DEV" --model "$1" --batch-size "$2" --epochs 1 \
      --steps-per-execution "$spe" --seed 1 --quiet --report "${EPOCH[@]}" "${DATA[@]}" >>"$RES/runs.txt" 2>&1
    rc=$?
    line=$(grep '^framework=sinter' "$RES/runs.txt" | tail -1)
    get() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1; }
    if [ $rc -ne 0 ]; then
      fail "train $1 spe $spe on $DEV: exit $rc (runs.txt)"
      printf '%s\t%s\t%s\tfp32(tf32)\tfailed\t\t%s\t\n' "$1" "$2" "$spe" "${PEAK:-}" >>"$RES/results.tsv"
    else
      printf '%s\t%s\t%s\tfp32(tf32)\t%s\t%s\t%s\t%s\n' "$1" "$2" "$spe" "$(get epoch_s)" \
        "$(get ms_per_step)" "${PEAK:-}" "$(get test_acc)" >>"$RES/results.tsv"
      log "train $1 batch $2 spe $spe: epoch_s=$(get epoch_s) ms_per_step=$(get ms_per_step) peak=${PEAK:-?} MiB test_acc=$(get test_acc)"
    fi
  done
done

# ---- 5. the first 200 losses: GPU fp32-strict (and TF32) against the CPU fp32-strict ---------
losses_of() { # DIR -> "step loss" lines of batch_loss from DIR/train's event files
  # TFRecord framing (u64 length, u32 crc, data, u32 crc) around Event protos: step = field 2
  # (varint), summary = field 5 { value = field 1 { tag = 1, simple_value = 2 (float) } }.
  # A few lines of protobuf reading instead of the tensorboard package.
  python3 - "$1" <<'PY'
import glob, struct, sys
def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0: v, i = varint(b, i)
        elif w == 1: v, i = b[i:i + 8], i + 8
        elif w == 5: v, i = b[i:i + 4], i + 4
        elif w == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else: raise ValueError("wire type %d" % w)
        yield f, v
def varint(b, i):
    r = s = 0
    while True:
        c = b[i]; i += 1
        r |= (c & 0x7f) << s; s += 7
        if c < 0x80: return r, i
out = {}
for path in sorted(glob.glob(sys.argv[1] + "/train/events.out.tfevents.*")):
    data = open(path, "rb").read()
    i = 0
    while i + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, i)
        rec = data[i + 12:i + 12 + n]
        i += 12 + n + 4
        step, vals = 0, []
        for f, v in fields(rec):
            if f == 2: step = v
            elif f == 5:
                for g, val in fields(v):
                    if g != 1: continue
                    tag, x = None, None
                    for h, u in fields(val):
                        if h == 1: tag = u.decode()
                        elif h == 2: (x,) = struct.unpack("<f", u)
                    if tag == "batch_loss" and x is not None: vals.append(x)
        for x in vals: out[step] = x
for st in sorted(out): print(st, repr(out[st]))
PY
}
printf 'model\tstep\tcpu_fp32_strict\tgpu_fp32_strict\tgpu_tf32\trel_strict\trel_tf32\n' >"$RES/losses.tsv"
for mb in "${MB[@]}"; do
  set -- $mb
  for run in "cpu:0 fp32-strict cpu" "$DEV fp32-strict gs" "$DEV fp32 gt"; do
    set -- $mb $run
    rm -rf "/tmp/sn-loss-$5"
    echo "---- losses $1 on $3 $4" >>"$RES/runs.txt"
    timeout 240 "$SINTER" train --device "$3" --precision "$4" --model "$1" --batch-size "$2" \
      --epochs 1 --steps-per-epoch 200 --steps-per-execution 1 --seed 1 --quiet \
      --logdir "/tmp/sn-loss-$5" --log-every 1 "${DATA[@]}" >>"$RES/runs.txt" 2>&1 ||
      fail "losses: train $1 on $3 $4 failed (runs.txt)"
    losses_of "/tmp/sn-loss-$5" >"/tmp/sn-loss-$5.txt" 2>>"$RES/runs.txt" ||
      fail "losses: reading the TensorBoard events of $1 on $3 $4 (python3 with tensorboard)"
  done
  set -- $mb
  python3 - "$1" /tmp/sn-loss-cpu.txt /tmp/sn-loss-gs.txt /tmp/sn-loss-gt.txt >>"$RES/losses.tsv" 2>>"$RES/runs.txt" <<'PY'
import sys
name, files = sys.argv[1], sys.argv[2:]
runs = [dict((int(s), float(v)) for s, v in (l.split() for l in open(f) if l.strip())) for f in files]
cpu, gs, gt = runs
bad, worst_s, worst_t = 0, 0.0, 0.0
steps = sorted(cpu)[:200]
for s in steps:
    c = cpu[s]
    rs = abs(gs.get(s, float("nan")) - c) / max(abs(c), 1e-30)
    rt = abs(gt.get(s, float("nan")) - c) / max(abs(c), 1e-30)
    worst_s, worst_t = max(worst_s, rs), max(worst_t, rt)
    bad += not (rs <= 1e-3)
    print(f"{name}\t{s}\t{c!r}\t{gs.get(s)!r}\t{gt.get(s)!r}\t{rs:.3e}\t{rt:.3e}")
sys.stderr.write(f"losses {name}: {len(steps)} steps, worst rel fp32-strict {worst_s:.3e}, tf32 {worst_t:.3e}, {bad} over 1e-3\n")
sys.exit(1 if bad or len(steps) < 200 else 0)
PY
  rc=$?
  msg=$(grep "^losses $1:" "$RES/runs.txt" | tail -1)
  if [ $rc -eq 0 ]; then log "$msg: within 1e-3"; else fail "${msg:-losses $1: no comparison} (losses.tsv)"; fi
done

# ---- 6. compute-sanitizer on a short run -----------------------------------------------------
if command -v compute-sanitizer >/dev/null; then
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 "$SINTER" train --device "$DEV" \
    --model small_cnn --batch-size 32 --epochs 1 --steps-per-epoch 3 --steps-per-execution 3 \
    --quiet "${DATA[@]}" >"$RES/sanitizer.txt" 2>&1
  rc=$?
  tail -5 "$RES/sanitizer.txt" >>"$SUM"
  if [ $rc -eq 0 ]; then log "compute-sanitizer memcheck: clean"; else fail "compute-sanitizer memcheck: exit $rc (sanitizer.txt)"; fi
else
  fail "compute-sanitizer is not on the PATH"
fi

log "done in $(elapsed) s, $fails failure(s)"
[ $fails -eq 0 ]
