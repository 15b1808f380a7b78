#!/usr/bin/env bash
# Debian's oneDNN 2.6.3 (what sinter links) against oneDNN 3.2 from PyPI (onednn-cpu-gomp
# 2023.2: GNU OpenMP, the runtime sinter already uses), primitive by primitive on the guide
# CNN's wide convolution (3x3, 256 -> 256, 26x26; bench/bench_conv_algo.c built twice, once
# per API). Issue 28 asks whether a newer oneDNN would make sinter's bf16 step faster.
#
#   bench/onednn_versions.sh [BUILD_DIR [N [RUNS [with-3.13]]]]     (default: build 200 3)
#
# With a fourth argument `with-3.13` it adds PyPI's `onednn` 2026.1 (oneDNN 3.13), installed
# in its own venv under BUILD_DIR (about 2 GB: its CPU runtime is SYCL on Intel's OpenCL CPU
# runtime, TBB and Intel's math libraries, all from PyPI wheels).
#
# Runs the two builds alternately (the first of each pair swaps every run), each run the best
# of 2 rounds inside bench_conv_algo, and prints the median over runs per variant and op with
# the implementation each version chose. Measure on a quiet machine: nothing else running.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
n=${2:-200}
runs=${3:-3}
with313=${4:-}
dir="$build/onednn3"
if [ ! -f "$dir/.unpacked" ]; then
  py=$(scripts/pyenv.sh "$build")
  rm -rf "$dir"
  mkdir -p "$dir"
  "$py" -m pip download --disable-pip-version-check --no-deps -q -d "$dir" \
    onednn-cpu-gomp==2023.2.0 onednn-devel-cpu-gomp==2023.2.0
  for w in "$dir"/*.whl; do python3 -m zipfile -e "$w" "$dir/x"; done
  touch "$dir/.unpacked"
fi
inc=$(echo "$dir"/x/onednn_devel_cpu_gomp-*.data/data/include)
lib=$(echo "$dir"/x/onednn_cpu_gomp-*.data/data/lib)
cc -O2 -DSN_HAVE_DNNL bench/bench_conv_algo.c -o "$dir/bench_v2" -ldnnl
cc -O2 -DSN_HAVE_DNNL -I"$inc" bench/bench_conv_algo.c -o "$dir/bench_v3" \
  -L"$lib" -l:libdnnl.so.3 -Wl,-rpath,"$(cd "$lib" && pwd)"
versions="v2 v3"
if [ "$with313" = with-3.13 ]; then
  env313="$build/onednn313"
  if [ ! -x "$env313/bin/python" ] || [ ! -f "$env313/include/dnnl.h" ]; then
    rm -rf "$env313"
    python3 -m venv "$env313"
    "$env313/bin/pip" install --disable-pip-version-check -q onednn==2026.1.0 onednn-devel==2026.1.0
  fi
  lib313=$(cd "$env313/lib" && pwd)
  cc -O2 -DSN_HAVE_DNNL -I"$env313/include" bench/bench_conv_algo.c -o "$dir/bench_v313" \
    -L"$lib313" -l:libdnnl.so.3 -Wl,-rpath,"$lib313"
  versions="v2 v3 v313"
fi

grep -m1 'model name' /proc/cpuinfo
for r in $(seq "$runs"); do
  # rotate which version goes first, so none always runs on a cooler or warmer machine
  read -ra vs <<<"$versions"
  k=$(((r - 1) % ${#vs[@]}))
  for v in "${vs[@]:k}" "${vs[@]:0:k}"; do
    # 3.13 finds its dependencies (TBB, SYCL, Intel's runtimes) and its OpenCL CPU device
    # (what SYCL runs on) only through these two variables: the wheels set no rpath
    if [ "$v" = v313 ]; then
      LD_LIBRARY_PATH="$lib313" OCL_ICD_FILENAMES="$lib313/libintelocl.so" "$dir/bench_$v" "$n" 2 >"$dir/run_${v}_$r.txt"
    else
      "$dir/bench_$v" "$n" 2 >"$dir/run_${v}_$r.txt"
    fi
    echo "run $r $v: $(grep '^round' "$dir/run_${v}_$r.txt" | tail -1)"
  done
done

python3 - "$dir" "$runs" "$n" $versions <<'EOF'
import statistics, sys
d, runs, n, vs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
names = {"v2": "2.6.3", "v3": "3.2", "v313": "3.13"}
best, impl = {}, {}
for v in vs:
    for r in range(1, runs + 1):
        lines = open(f"{d}/run_{v}_{r}.txt").read().splitlines()
        table = False
        for ln in lines:
            f = ln.split()
            if not f:
                continue
            if " | " in ln and not table:
                impl[(v, f[0])] = ln.split(None, 1)[1]
            if "unimplemented" in ln:
                impl[(v, f[0])] = "unimplemented"
            if ln.startswith("variant"):
                table = True
                continue
            if table and not ln.startswith("reorder") and len(f) == 5:
                for op, x in zip(("fwd", "bwd_data", "bwd_weights", "sum"), f[1:]):
                    best.setdefault((v, f[0], op), []).append(float(x))
print(f"\nmedian of {runs} runs (each the best of 2 rounds), ms, N = {n}")
head = f"{'variant':13} {'op':11}" + "".join(f" {names[v]:>8}" for v in vs)
print(head + "".join(f" {names[v] + '/2.6.3':>11}" for v in vs[1:]))
for var in ("nhwc", "blocked", "wino", "bf16_nhwc", "bf16_blocked"):
    for op in ("fwd", "bwd_data", "bwd_weights", "sum"):
        med = {v: statistics.median(best[(v, var, op)]) for v in vs if (v, var, op) in best}
        row = f"{var:13} {op:11}" + "".join(f" {med[v]:8.1f}" if v in med else f" {'-':>8}" for v in vs)
        row += "".join(f" {med[v] / med['v2']:11.2f}" if v in med and "v2" in med else f" {'':11}"
                       for v in vs[1:])
        print(row)
for var in ("nhwc", "blocked", "wino", "bf16_nhwc", "bf16_blocked"):
    for v in vs:
        print(f"{names[v]:6} {var:13} {impl.get((v, var), '-')}")
EOF
