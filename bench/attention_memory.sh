#!/usr/bin/env bash
# Attention's memory against the context (issue 26): causal self-attention forward + backward
# at T = 256, 1024, 4096 (B 1, char_transformer_small's 4 heads of 32), fused (the attention
# op) and unfused (scores materialised), one process per point; prints bench_attention's
# key=value lines. The fused plan arena should grow as T, the unfused one as T^2. Run on a
# quiet machine (it also times the steps).
#
#     bash bench/attention_memory.sh <build dir> [B H D]
set -eu
BUILD=$(cd "${1:?usage: bash bench/attention_memory.sh <build dir> [B H D]}" && pwd)
B=${2:-1} H=${3:-4} D=${4:-32}
for impl in fused unfused; do
    for T in 256 1024 4096; do
        "$BUILD/bench/bench_attention" "$impl" "$T" "$B" "$H" "$D" 3
    done
done
