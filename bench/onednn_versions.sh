#!/usr/bin/env bash
# Debian's oneDNN 2.6.3 (what sinter links) against oneDNN 3.2 from PyPI (onednn-cpu-gomp
# 2023.2: GNU OpenMP, the runtime sinter already uses), primitive by primitive on the guide
# CNN's wide convolution (3x3, 256 -> 256, 26x26; bench/bench_conv_algo.c built twice, once
# per API). Issue 28 asks whether a newer oneDNN would make sinter's bf16 step faster.
#
#   bench/onednn_versions.sh [BUILD_DIR [N [RUNS]]]     (default: build 200 3)
#
# Runs the two builds alternately (the first of each pair swaps every run), each run the best
# of 2 rounds inside bench_conv_algo, and prints the median over runs per variant and op with
# the implementation each version chose. Measure on a quiet machine: nothing else running.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
n=${2:-200}
runs=${3:-3}
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

grep -m1 'model name' /proc/cpuinfo
for r in $(seq "$runs"); do
  if [ $((r % 2)) -eq 1 ]; then order="v2 v3"; else order="v3 v2"; fi
  for v in $order; do
    "$dir/bench_$v" "$n" 2 >"$dir/run_${v}_$r.txt"
    echo "run $r $v: $(grep '^round' "$dir/run_${v}_$r.txt" | tail -1)"
  done
done

python3 - "$dir" "$runs" "$n" <<'EOF'
import statistics, sys
d, runs, n = sys.argv[1], int(sys.argv[2]), sys.argv[3]
best, impl = {}, {}
for v in ("v2", "v3"):
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
print(f"{'variant':13} {'op':11} {'2.6.3':>8} {'3.2':>8} {'3.2/2.6.3':>10}")
for var in ("nhwc", "blocked", "wino", "bf16_nhwc", "bf16_blocked"):
    for op in ("fwd", "bwd_data", "bwd_weights", "sum"):
        a = best.get(("v2", var, op))
        b = best.get(("v3", var, op))
        ma = f"{statistics.median(a):8.1f}" if a else f"{'-':>8}"
        mb = f"{statistics.median(b):8.1f}" if b else f"{'-':>8}"
        ratio = f"{statistics.median(b) / statistics.median(a):10.2f}" if a and b else f"{'':10}"
        print(f"{var:13} {op:11} {ma} {mb} {ratio}")
for var in ("nhwc", "blocked", "wino", "bf16_nhwc", "bf16_blocked"):
    for v, name in (("v2", "2.6.3"), ("v3", "3.2")):
        print(f"{name:6} {var:13} {impl.get((v, var), '-')}")
EOF
