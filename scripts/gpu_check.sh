#!/usr/bin/env bash
# The CUDA backend's checks on a GPU machine, in one call (docs/cuda.md), sized for ~8 minutes.
# Results go to $OUT (default /tmp/sn-gpu-out): nvidia-smi, `sinter devices`, test_cuda_kernels'
# output, and a `sinter bench --device gpu:0` line per model when that flag exists.
#
# Binaries: a build made here when the machine has sinter's build dependencies (cmake finds
# them), else the bundle of scripts/gpu_bundle.sh carried in .gpu/ (built on the development
# machine). CUDA libraries (cuBLASLt, cuDNN): the machine's own, found under /usr/local/cuda*
# or a Python environment's nvidia-* packages. Usage, from the repository root:
#   scripts/gpu_check.sh            # the device tool: run with carry [".gpu"] and timeout_s 560
# SN_GPU_CHECK_NO_BUILD=1 skips the build attempt and uses the bundle.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/sn-gpu-out}
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
: >"$OUT/summary.txt"
log "gpu_check $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || cat .gpu/commit 2>/dev/null)"
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || log "nvidia-smi failed (see nvidia-smi.txt)"

# The machine's CUDA libraries on the library path (cudart is linked statically).
libdirs=$(find /usr/local/cuda*/lib* /usr/local/lib /usr/lib/x86_64-linux-gnu /opt /usr/local/lib/python3* \
            -maxdepth 7 \( -name 'libcublasLt.so.13*' -o -name 'libcudnn.so.9*' -o -name 'libnccl.so.2*' \) \
            2>/dev/null | xargs -r -n1 dirname | sort -u | paste -sd:)
log "CUDA library folders: ${libdirs:-none found}"
export LD_LIBRARY_PATH=${libdirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# 1. binaries: build here if possible (3-4 minutes on 16 cores), else the carried bundle.
BIN=""
if [ "${SN_GPU_CHECK_NO_BUILD:-0}" = 1 ]; then
  log "SN_GPU_CHECK_NO_BUILD=1: not building here"
elif cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DSN_WITH_CUDA=ON -DSN_WITH_MPI=OFF \
     >"$OUT/configure.txt" 2>&1; then
  if timeout 240 cmake --build build-gpu -j"$(nproc)" --target sinter_cli test_cuda_kernels \
       >"$OUT/build.txt" 2>&1; then
    BIN=build-gpu
    log "built here (build-gpu)"
  else
    log "build here failed (tail of build.txt):"; tail -20 "$OUT/build.txt" | tee -a "$OUT/summary.txt"
  fi
else
  log "configure here failed (missing build dependencies?); using the carried bundle"
fi
if [ -z "$BIN" ]; then
  if [ -f .gpu/bundle.tar.xz ]; then
    rm -rf /tmp/sn-gpu && mkdir -p /tmp/sn-gpu && tar xJf .gpu/bundle.tar.xz -C /tmp/sn-gpu
    export LD_LIBRARY_PATH=/tmp/sn-gpu/lib:$LD_LIBRARY_PATH
    mkdir -p /tmp/sn-gpu/tests && ln -sf /tmp/sn-gpu/bin/test_cuda_kernels /tmp/sn-gpu/tests/
    ln -sf /tmp/sn-gpu/bin/sinter /tmp/sn-gpu/sinter
    BIN=/tmp/sn-gpu
    log "using the carried bundle (.gpu/bundle.tar.xz, commit $(cat .gpu/commit 2>/dev/null))"
  else
    log "no binaries: no build here and no .gpu/bundle.tar.xz (run scripts/gpu_bundle.sh first)"
    exit 1
  fi
fi

# 2. devices
timeout 60 "$BIN/sinter" devices >"$OUT/devices.txt" 2>&1
log "sinter devices: exit $?"; cat "$OUT/devices.txt" | tee -a "$OUT/summary.txt"

# 3. the CUDA kernel tests (exit 77 = no GPU seen)
timeout 120 "$BIN/tests/test_cuda_kernels" >"$OUT/test_cuda_kernels.txt" 2>&1
rc=$?
log "test_cuda_kernels: exit $rc"; tail -15 "$OUT/test_cuda_kernels.txt" | tee -a "$OUT/summary.txt"

# 4. bench on the GPU, when this sinter has --device (docs/cuda.md says whether it does yet)
if "$BIN/sinter" bench --help 2>&1 | grep -q -- '--device'; then
  data=()
  if [ ! -d /usr/share/datasets/fashion-mnist ] && [ -d .gpu/fashion-mnist ]; then
    data=(--data-dir .gpu/fashion-mnist)
  fi
  for m in "tpu_guide_cnn 200" "small_cnn 128"; do
    set -- $m
    timeout 90 "$BIN/sinter" bench --device gpu:0 --model "$1" --batch-size "$2" --steps 50 \
      --warmup 5 "${data[@]}" >>"$OUT/bench.txt" 2>&1
    log "bench $1 batch $2: exit $?"
  done
  cat "$OUT/bench.txt" >>"$OUT/summary.txt"
else
  log "sinter bench has no --device flag in this build: GPU bench not run"
fi
log "done $(date -u +%FT%TZ)"
exit "$rc"
