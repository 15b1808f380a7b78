#!/usr/bin/env bash
# Checks that sinter's layers only import downward (docs/design.md, "Layers"):
#
#   core < backend < graph < data < io < distribute < nn < apps (cli, serve, plot)
#
# What it reads:
#   - every `#include "..."` line of src/**/*.{c,h}: the included file's layer (a path under
#     src/, or a public header include/sinter/*.h mapped to its layer below);
#   - with BUILD_DIR, the functions each object file of src/ calls (`nm`: its undefined
#     symbols that another object of src/ defines as a function): a call from a file to the
#     file that defines the function.
# What fails (each with the file, the line or function, and the two layers):
#   1. an include or a call from a lower layer to a higher one;
#   2. a cycle between two top folders of src/ (includes and calls together, e.g. src/nn and
#      src/distribute using each other, even where the layer order alone would allow one
#      direction: cli, serve and plot share a rank but must not loop either);
#   3. a loop of calls between files of one top folder (a calls b, b calls a, or longer): the
#      shared piece should have one home. Sub-folders of a layer are one folder here: the
#      kernel table in src/backend registering src/backend/cpu's kernels, which include
#      backend/kernel.h, is one layer's table, not a cycle. A table of rows that a registry
#      file references (data, e.g. ops.c's op rows) is not a call; only functions count.
#   4. a folder of src/ or a public header with no layer below (add it here: the map is the
#      design, so a new folder is a decision to write down).
# Usage: scripts/check_layers.sh [BUILD_DIR]   (without BUILD_DIR only includes are read)
# Exit: 0 clean, 1 violations (listed on stderr), 2 usage or setup error.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-}

# Layer rank of each top folder of src/ and of each public header.
layers='
core 0
backend 1
graph 2
data 3
io 4
distribute 5
nn 6
cli 7
serve 7
plot 7
sinter/status.h 0
sinter/tensor.h 0
sinter/device.h 1
sinter/backend.h 1
sinter/graph.h 2
sinter/data.h 3
sinter/io.h 4
sinter/events.h 4
sinter/dist.h 5
sinter/distribute.h 5
sinter/nn.h 6
'

cd "$root"
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT

# --- include edges: "I <file> <line> <target> <spelled>" -------------------------------------
while IFS=: read -r file line text; do
    inc=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' <<<"$text")
    [ -n "$inc" ] || continue
    file=${file#src/}
    if [[ $inc == sinter/* ]]; then
        target=$inc
    elif [ -f "src/$inc" ]; then
        target=$inc
    elif [ -f "src/$(dirname "$file")/$inc" ]; then
        target=$(dirname "$file")/$inc
    else
        continue # generated in the build folder (protoc-c's event.pb-c.h): the includer's own
    fi
    echo "I $file $line $target $inc" >>"$edges"
done < <(grep -rn --include='*.c' --include='*.h' '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' src)

# --- call edges: "C <file> 0 <defining file> <function>" -------------------------------------
if [ -n "$build" ]; then
    if [ ! -d "$build/CMakeFiles" ]; then
        echo "check_layers: $build is not a CMake build folder (no CMakeFiles/)" >&2
        exit 2
    fi
    if ! command -v nm >/dev/null; then
        echo "check_layers: nm (binutils) not found; it reads the calls of the object files" >&2
        exit 2
    fi
    syms=$(mktemp)
    trap 'rm -f "$edges" "$syms"' EXIT
    n_obj=0
    while IFS= read -r obj; do
        src=${obj#*.dir/src/}
        src=${src%.o}
        case $src in *.c) ;; *) continue ;; esac
        [ -f "src/$src" ] || continue # left behind by a file since moved or deleted
        n_obj=$((n_obj + 1))
        nm -g --defined-only "$obj" | awk -v f="$src" '$2 == "T" { print "D", f, $3 }' >>"$syms"
        nm -u "$obj" | awk -v f="$src" '{ print "U", f, $NF }' >>"$syms"
    done < <(find "$build/CMakeFiles" -path '*.dir/src/*' -name '*.c.o' | sort)
    if [ "$n_obj" -eq 0 ]; then
        echo "check_layers: no object files of src/ under $build/CMakeFiles (build it first)" >&2
        exit 2
    fi
    # The same source may be compiled into several targets (the library and a fuzz build):
    # duplicates collapse in sort -u.
    awk '$1 == "D" { def[$3] = $2; next }
         $1 == "U" && ($3 in def) && def[$3] != $2 { print "C", $2, 0, def[$3], $3 }' \
        <(grep '^D' "$syms") <(grep '^U' "$syms") | sort -u >>"$edges"
fi

# --- the checks ------------------------------------------------------------------------------
awk -v layers="$layers" '
function top(p,   a) { if (p ~ /^sinter\//) return p; split(p, a, "/"); return a[1] }
function folder(p,   a) { if (p ~ /^sinter\//) return "include/sinter"; split(p, a, "/"); return "src/" a[1] }
function rank(p,   t) {
    t = top(p)
    if (!(t in R)) { unknown[t] = p; return -1 }
    return R[t]
}
function lname(p,   t) { t = top(p); return (t ~ /^sinter\//) ? "include/" t : t }
function what(k, f, l, t, s) {
    if (k == "I") return sprintf("src/%s:%s includes \"%s\"", f, l, s)
    return sprintf("src/%s calls %s() of src/%s", f, s, t)
}
# Reachability from every node of graph G (adjacency "a SUBSEP b") by breadth-first search.
function closure(nodes, adj, reach,   n, i, v, q, head, tail, w, k, parts) {
    for (v in nodes) {
        head = 0; tail = 0; q[tail++] = v
        while (head < tail) {
            w = q[head++]
            for (k in adj) {
                split(k, parts, SUBSEP)
                if (parts[1] == w && !((v, parts[2]) in reach)) {
                    reach[v, parts[2]] = 1; q[tail++] = parts[2]
                }
            }
        }
        delete q
    }
}
BEGIN {
    n = split(layers, L, "\n")
    for (i = 1; i <= n; i++) if (split(L[i], kv, " ") == 2) R[kv[1]] = kv[2] + 0
    bad = 0
}
{
    k = $1; f = $2; l = $3; t = $4; s = $5
    rf = rank(f); rt = rank(t)
    if (rf < 0 || rt < 0) next
    if (rf < rt) {
        printf "upward %s: %s (%s may only use layers below it; %s is above)\n",
               (k == "I" ? "include" : "call"), what(k, f, l, t, s), lname(f), lname(t) > "/dev/stderr"
        bad = 1
    }
    # Folder graph (public headers are interfaces: their users are checked by layer above).
    if (t !~ /^sinter\//) {
        a = folder(f); b = folder(t)
        if (a != b) {
            fnodes[a] = 1; fnodes[b] = 1
            if (!((a, b) in fadj)) fadj[a, b] = what(k, f, l, t, s)
        } else if (k == "C" || t ~ /\.h$/) {
            # Loops inside one folder: calls between files, includes between headers.
            if (k == "C" || f ~ /\.h$/) {
                nnodes[f] = 1; nnodes[t] = 1
                if (!((f, t) in nadj)) nadj[f, t] = what(k, f, l, t, s)
            }
        }
    }
}
END {
    for (t in unknown) {
        printf "no layer for %s (first seen in %s): add it to the map in scripts/check_layers.sh\n",
               (t ~ /^sinter\//) ? "include/" t : "src/" t, unknown[t] > "/dev/stderr"
        bad = 1
    }
    closure(fnodes, fadj, freach)
    for (e in fadj) {
        split(e, p, SUBSEP)
        if ((p[2], p[1]) in freach)
            { printf "folder cycle: %s -> %s (%s), and %s reaches %s back\n", p[1], p[2], fadj[e], p[2], p[1] > "/dev/stderr"; bad = 1 }
    }
    closure(nnodes, nadj, nreach)
    for (e in nadj) {
        split(e, p, SUBSEP)
        if ((p[2], p[1]) in nreach)
            { printf "file loop: %s, and src/%s reaches src/%s back: give the shared piece one home\n", nadj[e], p[2], p[1] > "/dev/stderr"; bad = 1 }
    }
    exit bad
}' "$edges" && status=0 || status=$?

n_inc=$(grep -c '^I' "$edges" || true)
n_call=$(grep -c '^C' "$edges" || true)
if [ "$status" -eq 0 ]; then
    echo "check_layers: ok ($n_inc includes, $n_call cross-file calls${build:+ from $build}; layers only import downward, no cycles)"
else
    echo "check_layers: FAILED (see above; $n_inc includes, $n_call cross-file calls read)" >&2
    exit 1
fi
