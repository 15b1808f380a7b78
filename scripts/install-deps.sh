#!/usr/bin/env bash
# Installs the Debian packages sinter builds and runs with, when any is missing.
# Called by the README's two commands (scripts/main.sh, scripts/test.sh) and by .ci/run.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libdnnl-dev                # oneDNN: convolutions (docs/dependencies.md)
  libopenblas-openmp-dev     # OpenBLAS on OpenMP: GEMM, sharing oneDNN's thread team
  libhdf5-dev                # Keras-compatible weight files
  zlib1g-dev                 # .gz IDX files
  libopenmpi-dev openmpi-bin # multi-worker strategy
  libjansson-dev             # JSON: Keras model configs, HTTP request bodies
  libzip-dev                 # .keras archives (zip)
  libmicrohttpd-dev          # sinter serve (HTTP)
  libcairo2-dev libfontconfig-dev fonts-dejavu-core # PNG plots with text
  libprotobuf-c-dev protobuf-c-compiler # TensorBoard event files
  hdf5-tools                 # h5diff in the resume tests
  clang libclang-rt-14-dev libomp-dev # libFuzzer targets (scripts/fuzz.sh)
  python3-venv               # the interop tests' Keras/TensorBoard venv (scripts/pyenv.sh)
  dataset-fashion-mnist      # the default data set
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo
  else
    echo "sinter: missing Debian packages: ${missing[*]}" >&2
    echo "sinter: run as root (or install them with: apt-get install ${missing[*]})" >&2
    exit 1
  fi
else SUDO=
fi
echo "sinter: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
