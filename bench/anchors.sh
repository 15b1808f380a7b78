#!/usr/bin/env bash
# Installs (once) the anchors bench/compare.sh measures sinter against, and prints one
# NAME=VALUE line per anchor for compare.sh to read:
#   TF_PY     TensorFlow 2.21 from PyPI (the guide's framework, running the guide's Keras code):
#             the venv of scripts/pyenv.sh (tests/requirements.txt pins tensorflow-cpu 2.21)
#   TORCH_PY  PyTorch 2.15 from PyPI in BUILD_DIR/bench-torch. The PyPI wheel is the CUDA build:
#             it imports only with its nvidia-* library wheels installed, even for CPU use, so
#             TORCH_LD lists their lib folders for LD_LIBRARY_PATH.
#   DEB_PY    Debian's python3-torch 1.13 (/usr/bin/python3), with libjemalloc2 for tuned.sh.
# An anchor that cannot be installed (no network, no root) is printed empty and left out of the
# comparison with a note on stderr. Usage: bench/anchors.sh [BUILD_DIR]  (default build)
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" 2>/dev/null && pwd || echo "${1:-$src/build}")
mkdir -p "$build"
exec 9>"$build/bench-anchors.lock"
flock 9

# TensorFlow 2.21 (Keras 3) in the interop tests' venv.
tf_py=$("$src/scripts/pyenv.sh" "$build" 2>/dev/null) || { echo "anchors: TensorFlow venv not made (scripts/pyenv.sh)" >&2; tf_py=; }

# PyTorch 2.15 from PyPI.
venv="$build/bench-torch"
torch_py=
want=${SN_TORCH_VERSION:-2.15.0}
if [ -x "$venv/bin/python" ] && [ -f "$venv/.ok-$want" ]; then torch_py="$venv/bin/python"
else
  rm -rf "$venv"
  if python3 -m venv "$venv" >"$build/bench-torch.log" 2>&1 &&
     "$venv/bin/pip" install -q --disable-pip-version-check "torch==$want" numpy >>"$build/bench-torch.log" 2>&1; then
    touch "$venv/.ok-$want"; torch_py="$venv/bin/python"
  else
    echo "anchors: pip install torch==$want failed (PyPI unreachable?); see $build/bench-torch.log" >&2
    rm -rf "$venv"
  fi
fi
torch_ld=
if [ -n "$torch_py" ]; then
  torch_ld=$(ls -d "$venv"/lib/python3*/site-packages/nvidia/*/lib 2>/dev/null | paste -sd: -)
fi

# Debian's PyTorch 1.13 and jemalloc (for ../shared/bench/tuned.sh), and matplotlib for
# compare.sh --scaling's plot (bench/scaling_plot.py runs under Debian's python3).
deb_py=
need=()
/usr/bin/python3 -c 'import torch' 2>/dev/null || need+=(python3-torch)
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || need+=(python3-matplotlib)
[ -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || need+=(libjemalloc2)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" \
      >"$build/bench-apt.log" 2>&1 || echo "anchors: apt-get install ${need[*]} failed; see $build/bench-apt.log" >&2
  else
    echo "anchors: missing Debian packages ${need[*]} (apt-get install them as root)" >&2
  fi
fi
/usr/bin/python3 -c 'import torch' 2>/dev/null && deb_py=/usr/bin/python3

echo "TF_PY=$tf_py"
echo "TORCH_PY=$torch_py"
echo "TORCH_LD=$torch_ld"
echo "DEB_PY=$deb_py"
