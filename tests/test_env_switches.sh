#!/usr/bin/env bash
# Environment switches are read in one place and listed in one doc: no getenv in src/ outside
# src/core/env.c (and src/cli/main.c, which reads libgomp's own OMP_WAIT_POLICY and
# GOMP_SPINCOUNT), and docs/environment.md's table names exactly the switches of env.c's table.
# Usage: tests/test_env_switches.sh BUILD_DIR (the build folder is not used).
set -u
. "$(dirname "$0")/sh_test_util.sh"
src=$(cd "$(dirname "$0")/.." && pwd)
readers=$(grep -rln --include='*.c' --include='*.h' '\bgetenv *(' "$src/src" |
          sed "s|$src/||" | grep -v -x -e src/core/env.c -e src/cli/main.c)
if [ -z "$readers" ]; then ok "getenv only in src/core/env.c (and main.c for libgomp's variables)"
else bad "getenv outside src/core/env.c: $(echo $readers)"; fi
if grep -n 'getenv' "$src/src/cli/main.c" | grep -v -e OMP_WAIT_POLICY -e GOMP_SPINCOUNT | grep -q .; then
    bad "src/cli/main.c reads a variable other than libgomp's"
else ok "src/cli/main.c reads only libgomp's OMP_WAIT_POLICY and GOMP_SPINCOUNT"; fi
in_code=$(grep -o '{"SN_[A-Z0-9_]*"' "$src/src/core/env.c" | tr -d '{"' | sort -u)
in_doc=$(grep -o '^| `SN_[A-Z0-9_]*`' "$src/docs/environment.md" | tr -d '|` ' | sort -u)
[ -n "$in_code" ] || bad "no switch found in src/core/env.c's table"
if [ "$in_code" = "$in_doc" ]; then ok "docs/environment.md lists the $(echo $in_code | wc -w) switches of env.c"
else bad "env.c and docs/environment.md differ: $(diff <(echo "$in_code") <(echo "$in_doc") | grep '^[<>]' | tr '\n' ' ')"; fi
sn_finish
