#!/usr/bin/env bash
# The layer check (scripts/check_layers.sh, docs/design.md "Layers") on this build's sources
# and objects; then, so that a check that passes everything cannot pass here, on a small tree
# with one upward include, one upward call, one folder cycle and one call loop, each of which
# it must name.
set -u
BUILD=${1:?usage: test_layering.sh BUILD_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }

bash "$ROOT/scripts/check_layers.sh" "$BUILD" || fail "the layer check refused this tree (above)"

command -v cc >/dev/null || { echo "SKIPPED the negative cases: no C compiler"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/scripts" "$tmp/src/core" "$tmp/src/graph" "$tmp/src/nn"
cp "$ROOT/scripts/check_layers.sh" "$tmp/scripts/"
cd "$tmp"
printf '#include "graph/g.h"\nint core_a(void);\nint core_a(void) { return graph_g(); }\n' >src/core/a.c
printf '#include "core/c.h"\nint graph_g(void);\n' >src/graph/g.h
printf 'int core_c(void);\n' >src/core/c.h
printf 'int graph_g(void);\nint graph_g(void) { return 1; }\n' >src/graph/g.c
printf 'int nn_b(void);\nint nn_a(int n);\nint nn_a(int n) { return n ? nn_b() : 0; }\n' >src/nn/a.c
printf 'int nn_a(int n);\nint nn_b(void);\nint nn_b(void) { return nn_a(0); }\n' >src/nn/b.c
obj=build/CMakeFiles/fake.dir/src
mkdir -p "$obj/core" "$obj/graph" "$obj/nn"
for f in core/a.c graph/g.c nn/a.c nn/b.c; do
    cc -c -I src -o "$obj/$f.o" "src/$f" || fail "compiling the fake tree ($f)"
done
out=$(bash scripts/check_layers.sh build 2>&1) && fail "the fake tree passed: $out"
for want in 'upward include: src/core/a.c:1 includes "graph/g.h"' \
            'upward call: src/core/a.c calls graph_g() of src/graph/g.c' \
            'folder cycle: src/core -> src/graph' \
            'file loop: src/nn/a.c calls nn_b() of src/nn/b.c'; do
    grep -qF "$want" <<<"$out" || fail "the check did not say '$want'; it said: $out"
done
echo "ok: this tree passes; the fake tree's four violations are named"
