#!/usr/bin/env bash
# Interrupted training resumes bit-identically: `sinter train --checkpoint-dir` is killed with
# SIGKILL at 20 moments and rerun with the same command; every resumed run must end with
# weights identical to the uninterrupted run's (h5diff, no tolerance).
#
# The 20 moments, all deterministic (no assertion depends on timing):
#   - 12 at seeded pseudo-random delays after training started, while every checkpoint write
#     sleeps 20 ms between its fsync and its rename (tests/sinter_hooked --delay-us), so that many of
#     them land inside a write; some runs are killed twice before the final rerun;
#   - 8 inside a checkpoint write for certain (sinter_hooked --kill N:PHASE makes the process
#     SIGKILL itself): half-way through the items, after the header is written (before the
#     fsync), after the fsync before the rename, and after the rename before the folder's
#     fsync, in various writes.
# Then: a truncated newest checkpoint and a corrupted one are skipped with a warning, the
# previous one is used, and the weights are still identical. And --resume PATH / --no-resume,
# and a kill inside a write under --strategy mirrored and under mpirun -np 2 multi_worker.
# Small and fast: the MLP, 2,000 training images, 3 epochs of 24 steps, one thread.
# Usage: tests/test_resume_kill.sh BUILD_DIR. Exit 77 (skipped) without Fashion-MNIST or
# h5diff (Debian hdf5-tools).
set -u
B=$(cd "${1:-build}" && pwd)
S=$B/sinter
H=$B/tests/sinter_hooked # the same commands with the checkpoint seam set (test-only)
FM=/usr/share/datasets/fashion-mnist
. "$(dirname "$0")/sh_test_util.sh"
[ -r $FM/train-images-idx3-ubyte.gz ] || sn_skip "test_resume_kill: Fashion-MNIST is not installed"
command -v h5diff >/dev/null 2>&1 ||
    sn_skip "test_resume_kill: h5diff not found (apt-get install hdf5-tools)"
sn_tmpdir resume_kill
W=$TMP

# A small MNIST-layout folder: the first 2,000 training and 500 test images (IDX headers
# rewritten with the new counts, big-endian).
mkdir -p "$W/data"
idx() { # idx SRC DST MAGIC COUNT BYTES_PER_ITEM
    local hdr=$(( $3 == 3 ? 16 : 8 ))
    { printf "\x00\x00\x08\x0$3"
      printf "\\x$(printf %02x $(( $4 >> 24 & 255 )))\\x$(printf %02x $(( $4 >> 16 & 255 )))"
      printf "\\x$(printf %02x $(( $4 >> 8 & 255 )))\\x$(printf %02x $(( $4 & 255 )))"
      [ "$3" = 3 ] && printf '\x00\x00\x00\x1c\x00\x00\x00\x1c'
      zcat "$1" | tail -c +$(( hdr + 1 )) | head -c $(( $4 * $5 ))
    } > "$2"
}
idx $FM/train-images-idx3-ubyte.gz "$W/data/train-images-idx3-ubyte" 3 2000 784
idx $FM/train-labels-idx1-ubyte.gz "$W/data/train-labels-idx1-ubyte" 1 2000 1
idx $FM/t10k-images-idx3-ubyte.gz "$W/data/t10k-images-idx3-ubyte" 3 500 784
idx $FM/t10k-labels-idx1-ubyte.gz "$W/data/t10k-labels-idx1-ubyte" 1 500 1

ARGS=(train --data-dir "$W/data" --model mlp --epochs 3 --steps-per-epoch 24 --batch-size 32
      --validation-steps 2 --steps-per-execution 2 --threads 1 --seed 3)
CK=(--checkpoint-every 3 --keep-checkpoints 2)

# The uninterrupted runs: without checkpoints, and with them (which must change nothing).
SN_NUM_THREADS=1 timeout 120 "$S" "${ARGS[@]}" --quiet --save "$W/plain.h5" >"$W/plain.log" 2>&1 ||
    { bad "the uninterrupted run failed"; cat "$W/plain.log"; exit 1; }
SN_NUM_THREADS=1 timeout 120 "$S" "${ARGS[@]}" "${CK[@]}" --checkpoint-dir "$W/ref" --quiet \
    --save "$W/ref.h5" >"$W/ref.log" 2>&1 || { bad "the checkpointing run failed"; cat "$W/ref.log"; exit 1; }
if h5diff "$W/plain.h5" "$W/ref.h5" >/dev/null; then
    ok "writing checkpoints changes no weight"
else
    bad "the run with checkpoints ends with other weights than the run without"
fi

# run DIR [ENV...]: the command, to completion, with its weights saved to DIR.h5.
finish() {
    local d=$1
    SN_NUM_THREADS=1 timeout 120 "$S" "${ARGS[@]}" "${CK[@]}" --checkpoint-dir "$d" \
        --save "$d.h5" >"$d.final.log" 2>&1
}
# killed_run DIR DELAY_S: starts the command, waits until training has begun (its first
# "Epoch" line), sleeps DELAY_S and sends SIGKILL (the run may have ended by then: fine).
killed_run() {
    local d=$1 delay=$2
    SN_NUM_THREADS=1 "$H" --delay-us 20000 "${ARGS[@]}" "${CK[@]}" \
        --checkpoint-dir "$d" --save "$d.h5" >"$d.killed.log" 2>&1 &
    local pid=$! n=0
    while ! grep -q "^Epoch" "$d.killed.log" 2>/dev/null && kill -0 $pid 2>/dev/null &&
          [ $n -lt 3000 ]; do sleep 0.01; n=$((n + 1)); done
    sleep "$delay"
    kill -KILL $pid 2>/dev/null
    wait $pid 2>/dev/null
    # a temporary file left behind: the kill landed inside a checkpoint write
    in_write=$(( in_write + $(ls "$d" 2>/dev/null | grep -c '\.tmp') ))
}
# self_killed DIR N:PHASE [FLAGS...]: the command, SIGKILLed by itself inside write N.
self_killed() {
    local d=$1 k=$2
    shift 2
    # in the background and waited for: bash reports no "Killed" line then
    SN_NUM_THREADS=1 timeout 120 "$H" --kill "$k" "${ARGS[@]}" "${CK[@]}" "$@" \
        --checkpoint-dir "$d" --save "$d.h5" >"$d.killed.log" 2>&1 &
    wait $! 2>/dev/null
}
check() { # check DIR WHAT
    local d=$1
    if ! finish "$d"; then
        bad "$2: the resumed run failed"; cat "$d.final.log"; return
    fi
    local where
    where=$(grep -o "Resuming from [^ ]*: .*" "$d.final.log" | sed "s|$W/||")
    if h5diff "$W/ref.h5" "$d.h5" >/dev/null; then
        ok "$2: ${where:-started over (killed before the first checkpoint)}; weights identical"
    else
        bad "$2: ${where:-no resume}: the weights differ from the uninterrupted run"
        h5diff "$W/ref.h5" "$d.h5" | head -5
    fi
}

in_write=0
RANDOM=20261201 # the kill schedule is seeded
for i in $(seq 1 12); do
    d=$W/t$i
    delay=$(printf '0.%03d' $(( RANDOM % 900 )))
    killed_run "$d" "$delay"
    what="kill $i at +${delay}s"
    if [ $(( i % 4 )) = 0 ]; then # interrupted twice
        delay2=$(printf '0.%03d' $(( RANDOM % 600 )))
        killed_run "$d" "$delay2"
        what="$what and again at +${delay2}s"
    fi
    check "$d" "$what"
done
echo "     ($in_write of the timed kills left a temporary file behind: killed inside a write)"

phases=("2:data" "5:synced" "9:renamed" "1:data" "13:sealed" "20:renamed" "17:data" "24:synced")
for i in $(seq 0 7); do
    d=$W/w$i
    self_killed "$d" "${phases[$i]}"
    rc=$?
    if [ $rc -ne 137 ]; then
        bad "--kill ${phases[$i]}: exit $rc, expected death by SIGKILL (137)"; continue
    fi
    check "$d" "SIGKILL inside write ${phases[$i]}"
done

# Corruption: the newest checkpoint truncated, then (next run) corrupted in its middle.
d=$W/corrupt
self_killed "$d" 12:renamed --keep-checkpoints 3
newest=$(ls "$d"/ckpt-*.h5 | sort | tail -1)
prev=$(ls "$d"/ckpt-*.h5 | sort | tail -2 | head -1)
truncate -s $(( $(stat -c %s "$newest") / 2 )) "$newest"
finish "$d"
if grep -q "Warning: .*$(basename "$newest").* is not readable.*using the previous checkpoint" "$d.final.log" &&
   grep -q "Resuming from $prev" "$d.final.log" && h5diff "$W/ref.h5" "$d.h5" >/dev/null; then
    ok "truncated newest checkpoint: warning, resumed from the previous one, weights identical"
else
    bad "truncated newest checkpoint"; cat "$d.final.log"
fi
d=$W/flip
self_killed "$d" 7:renamed
newest=$(ls "$d"/ckpt-*.h5 | sort | tail -1)
# one byte flipped inside the stored values of the first kernel (HDF5 reads the file fine)
off=$(h5dump -p -H -d /variables/dense/kernel "$newest" | sed -n 's/.*OFFSET \([0-9]*\).*/\1/p')
printf '\xa5' | dd of="$newest" bs=1 seek=$(( ${off:-4096} + 1001 )) conv=notrunc status=none
finish "$d"
if grep -q "Warning: .*checksum mismatch.*using the previous checkpoint" "$d.final.log" &&
   h5diff "$W/ref.h5" "$d.h5" >/dev/null; then
    ok "a flipped byte in the newest checkpoint: checksum mismatch, previous one used, weights identical"
else
    bad "corrupted newest checkpoint"; cat "$d.final.log"
fi

# --resume PATH picks a given checkpoint; --no-resume starts over (and clears the folder).
d=$W/paths
self_killed "$d" 10:renamed
first=$(ls "$d"/ckpt-*.h5 | sort | head -1)
SN_NUM_THREADS=1 timeout 120 "$S" "${ARGS[@]}" --resume "$first" --save "$d.r.h5" >"$d.r.log" 2>&1
if grep -q "Resuming from $first" "$d.r.log" && h5diff "$W/ref.h5" "$d.r.h5" >/dev/null; then
    ok "--resume $(basename "$first"): weights identical"
else
    bad "--resume PATH"; cat "$d.r.log"
fi
SN_NUM_THREADS=1 timeout 120 "$S" "${ARGS[@]}" "${CK[@]}" --checkpoint-dir "$d" --no-resume \
    --save "$d.n.h5" >"$d.n.log" 2>&1
if grep -q "Starting over: removed" "$d.n.log" && ! grep -q "Resuming" "$d.n.log" &&
   h5diff "$W/ref.h5" "$d.n.h5" >/dev/null; then
    ok "--no-resume: started over, weights identical"
else
    bad "--no-resume"; cat "$d.n.log"
fi
# A checkpoint of another model is an error naming the variable.
other=$(ls "$W"/ref/ckpt-*.h5 | head -1)
out=$(SN_NUM_THREADS=1 timeout 120 "$S" "${ARGS[@]}" --model small_cnn --resume "$other" 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q "checkpoint .* variable '" <<<"$out"; then
    ok "another model's checkpoint: $(grep -o "variable '[^']*'[^:]*" <<<"$out" | head -1)"
else
    bad "another model's checkpoint: exit $rc: $out"
fi

# Under strategies: two mirrored replicas, and two MPI workers (multi_worker: the chief writes,
# every worker resumes from the same file), each killed inside a write and rerun.
strategy_case() { # strategy_case NAME RUNNER... -- FLAGS...
    local name=$1
    shift
    local runner=()
    while [ "$1" != "--" ]; do runner+=("$1"); shift; done
    shift
    local d=$W/$name
    SN_NUM_THREADS=1 timeout 180 "${runner[@]}" "$S" "${ARGS[@]}" "$@" --quiet --save "$d.ref.h5" \
        >"$d.ref.log" 2>&1 || { bad "$name: the uninterrupted run failed"; cat "$d.ref.log"; return; }
    SN_NUM_THREADS=1 timeout 180 "${runner[@]}" "$H" --kill 11:synced "${ARGS[@]}" "$@" \
        "${CK[@]}" --checkpoint-dir "$d" --save "$d.h5" >"$d.killed.log" 2>&1 &
    wait $! 2>/dev/null
    local rc=$?
    SN_NUM_THREADS=1 timeout 180 "${runner[@]}" "$S" "${ARGS[@]}" "$@" "${CK[@]}" \
        --checkpoint-dir "$d" --save "$d.h5" >"$d.final.log" 2>&1
    local where
    where=$(grep -o "Resuming from [^ ]*: .*" "$d.final.log" | sed "s|$W/||")
    if [ $rc -ne 0 ] && [ -n "$where" ] && h5diff "$d.ref.h5" "$d.h5" >/dev/null; then
        ok "$name: killed in write 11 (exit $rc), $where; weights identical"
    else
        bad "$name: killed run exit $rc, ${where:-no resume}"; cat "$d.final.log"
    fi
}
strategy_case mirrored -- --strategy mirrored --cpu-devices 2
if command -v mpirun >/dev/null 2>&1 && "$S" train --help 2>&1 | grep -q multi_worker; then
    probe=$(timeout 60 mpirun --oversubscribe --allow-run-as-root -np 2 "$B/tests/test_dist" \
        --train multi_worker "$W/probe.bin" 2>&1)
    if grep -q "has no MPI" <<<"$probe"; then
        echo "     (multi_worker case skipped: this build has no MPI)"
    else
        # Open MPI's plugins keep allocations to the end (scripts/test.sh runs test_mpi with
        # leak checks off for the same reason); ASan's other checks stay on.
        ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
            strategy_case multi_worker mpirun --oversubscribe --allow-run-as-root -np 2 -- \
            --strategy multi_worker
    fi
else
    echo "     (multi_worker case skipped: no mpirun)"
fi

sn_finish
