#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh needs into .gpu/ (ignored by git, named in the device tool's
# `carry`), for a GPU machine whose image lacks sinter's build dependencies: the CUDA build's
# sinter and test_cuda_kernels, and every shared library they load except glibc's, the NVIDIA
# driver's and the CUDA libraries (cuBLASLt, cuDNN, NCCL: gpu_check.sh finds the GPU machine's
# own), and the tests gpu_check.sh runs; beside it, Fashion-MNIST's four IDX files in
# .gpu/fashion-mnist (the GPU image has no dataset package). Usage: scripts/gpu_bundle.sh
# [BUILD_DIR] (default build/, which must be a -DSN_WITH_CUDA=ON build).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
grep -q '^SN_WITH_CUDA:BOOL=ON' "$build/CMakeCache.txt" ||
  { echo "gpu_bundle: $build is not a -DSN_WITH_CUDA=ON build" >&2; exit 1; }
bins=("$build/sinter")
for t in test_cuda_libs test_cuda_kernels test_cuda_table test_cuda_coverage test_backend test_device_placement; do
  bins+=("$build/tests/$t")
done
for b in "${bins[@]}"; do [ -x "$b" ] || { echo "gpu_bundle: $b is missing (build it first)" >&2; exit 1; }; done
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>"$(git rev-parse --git-path info/exclude)"
rm -rf .gpu && mkdir -p .gpu/stage/bin .gpu/stage/lib
cp "${bins[@]}" .gpu/stage/bin/
ldd "${bins[@]}" | awk '/=> \//{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv)\.so|ld-linux|libcuda\.so|libnvidia|libcublas|libcudnn|libnccl|libcudart' |
  xargs -r cp -L -t .gpu/stage/lib/
tar cJf .gpu/bundle.tar.xz -C .gpu/stage bin lib
rm -rf .gpu/stage
git rev-parse HEAD >.gpu/commit
if [ -d /usr/share/datasets/fashion-mnist ]; then
  mkdir -p .gpu/fashion-mnist && cp /usr/share/datasets/fashion-mnist/*-ubyte.gz .gpu/fashion-mnist/
fi
echo "gpu_bundle: .gpu/bundle.tar.xz ($(du -h .gpu/bundle.tar.xz | cut -f1)) from $(cat .gpu/commit); .gpu in all: $(du -sh .gpu | cut -f1) (the device tool carries 64 MiB with the tree)"
