#!/usr/bin/env bash
# The TPU guide's own program on sinter (issue 25): tests/python/test_tpu_guide.py through
# test_python.sh's venv, with the guide's step counts shrunk (2 steps, 1 epoch, batch 16).
# Exit 77 (SKIPPED) when the test skipped (no guide, no data, no venv).
# Usage: tests/test_tpu_guide.sh BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: test_tpu_guide.sh BUILD_DIR}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
SINTER_GUIDE_TEST=1 "$here/test_python.sh" "$build" -k test_tpu_guide 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
[ "$rc" -ne 0 ] && exit "$rc"
if grep -q "1 passed" "$log"; then exit 0; fi
echo "test_tpu_guide: SKIPPED (see the reason above)" >&2
exit 77
