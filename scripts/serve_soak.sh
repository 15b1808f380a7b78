#!/usr/bin/env bash
# The long version of test_serve.sh's load test (issue 11, item 4): 60 s at 64 connections of
# valid, malformed, oversize and slow (piecewise) requests against 127.0.0.1, checking that no
# valid request fails, every bad one gets its 4xx, RSS stays flat, the server answers
# afterwards and SIGTERM drains and exits 0. Not in CTest (a minute); CTest runs 4 s at 16.
#
#     scripts/serve_soak.sh [BUILD_DIR] [SECONDS] [CONNECTIONS]     (build, 60, 64)
set -euo pipefail
cd "$(dirname "$0")/.."
SN_SERVE_LOAD_SECONDS=${2:-60} SN_SERVE_LOAD_CONNS=${3:-64} exec bash tests/test_serve.sh "${1:-build}"
