#!/usr/bin/env bash
# A full disk while sinter writes: the command prints exactly one error line naming the file
# and the OS cause, exits non-zero, leaves the previous checkpoint / weights / .keras file
# byte for byte as it was, and leaves no temporary file.
#
# Each case runs twice where it can:
#   - on a real full disk: a small tmpfs mounted in a private mount namespace (unshare -m as
#     root, unshare -r -m for a user with user namespaces; nothing is mounted outside this
#     test's processes), a filler file taking every free byte: "No space left on device";
#   - under a file size limit (ulimit -f, which needs no privilege): "File too large". sinter
#     ignores SIGXFSZ itself, so the write fails instead of the process being killed.
# Where no tmpfs can be mounted the ulimit run still checks everything. Exit 77 (skipped)
# without Fashion-MNIST.
# Usage: tests/test_disk_full.sh BUILD_DIR
set -u
. "$(dirname "$0")/sh_test_util.sh"
B=$(cd "${1:-build}" && pwd)
S=$B/sinter
FM=/usr/share/datasets/fashion-mnist
if [ "${2:-}" != --inside ] && [ ! -r $FM/train-images-idx3-ubyte.gz ]; then
    sn_skip "test_disk_full: Fashion-MNIST is not installed"
fi
ARGS=(--model mlp --steps-per-epoch 5 --batch-size 32 --validation-steps 1 --threads 1 --quiet)
export SN_NUM_THREADS=1

# scenario MODE DIR OUT: the cases, on DIR (the tmpfs, or a plain folder), logs to OUT (never
# on the full disk: the test's own files must be writable).
scenario() {
    local mode=$1 d=$2 out=$3 cause limit=()
    if [ "$mode" = tmpfs ]; then cause="No space left on device"; else cause="File too large"; fi
    mkdir -p "$d" "$out/orig"
    timeout 300 "$S" train "${ARGS[@]}" --epochs 1 --checkpoint-dir "$d/ck" \
        --save "$d/w.weights.h5" >"$out/run1.log" 2>&1 || { bad "[$mode] the first run failed" "$out/run1.log"; return 1; }
    timeout 300 "$S" export --model mlp --weights "$d/w.weights.h5" --to "$d/m.keras" \
        >>"$out/run1.log" 2>&1 || { bad "[$mode] the first export failed" "$out/run1.log"; return 1; }
    cp "$d"/ck/*.h5 "$d/w.weights.h5" "$d/m.keras" "$out/orig/"
    local ck
    ck=$(cd "$d/ck" && ls ckpt-*.h5)
    if [ "$mode" = tmpfs ]; then
        dd if=/dev/zero of="$d/filler" bs=4k >/dev/null 2>&1 # until the disk is full
        if dd if=/dev/zero of="$d/probe" bs=4k count=1 >/dev/null 2>&1; then
            bad "[$mode] the tmpfs is not full"; return 1
        fi
    else
        limit=(ulimit -f 64) # 64 KiB: each file is larger
    fi
    # expect NAME WANTED_LINE CMD...: one line on stderr, exactly WANTED_LINE; exit non-zero.
    expect() {
        local name=$1 want=$2
        shift 2
        ( [ ${#limit[@]} -eq 0 ] || "${limit[@]}"; exec timeout 300 "$@" ) \
            >"$out/$name.out" 2>"$out/$name.err"
        local rc=$?
        if [ $rc -ne 0 ] && [ $rc -lt 124 ]; then ok "[$mode] $name: exit status $rc"
        else bad "[$mode] $name: exit status $rc (wanted 1: a failure, not success, a kill or a timeout)"
        fi
        if [ "$(wc -l <"$out/$name.err")" -eq 1 ] && [ "$(cat "$out/$name.err")" = "$want" ]; then
            ok "[$mode] $name: one line: $want"
        else
            echo "     wanted: $want"
            bad "[$mode] $name: stderr was not that one line:" "$out/$name.err"
        fi
    }
    # 1. The next checkpoint of a resumed run cannot be written.
    local next=ckpt-000010.h5
    expect checkpoint "sinter train: cannot write checkpoint '$d/ck/$next': $cause (the previous checkpoint '$d/ck/$ck' is kept)" \
        "$S" train "${ARGS[@]}" --epochs 2 --checkpoint-dir "$d/ck"
    # 2. Weights saved over an existing file.
    expect weights "sinter train: cannot write weights file '$d/w.weights.h5': $cause (the existing file is unchanged)" \
        "$S" train "${ARGS[@]}" --epochs 1 --save "$d/w.weights.h5"
    # 3. A .keras archive exported over an existing one.
    expect keras "sinter export: cannot write .keras archive '$d/m.keras': $cause (the existing file is unchanged)" \
        "$S" export --model mlp --weights "$d/w.weights.h5" --to "$d/m.keras"
    # 4. Logs that grow during training (only on the full disk: under the size limit they
    #    are smaller than a block). Appended as Keras appends them, so not atomic; the error
    #    still names the file and the cause.
    if [ "$mode" = tmpfs ]; then
        expect csv "sinter train: csv_logger: cannot write '$d/log.csv': $cause" \
            "$S" train "${ARGS[@]}" --epochs 1 --csv "$d/log.csv"
        ( exec timeout 300 "$S" train "${ARGS[@]}" --epochs 1 --logdir "$d/tb" ) \
            >"$out/tb.out" 2>"$out/tb.err"
        local rc=$? line
        line=$(cat "$out/tb.err")
        case "$line" in
            "sinter train: "*"cannot write '$d/tb/train/events.out.tfevents."*"': $cause")
                if [ "$(wc -l <"$out/tb.err")" -eq 1 ] && [ $rc -eq 1 ]; then
                    ok "[$mode] tensorboard: one line: $line"
                else bad "[$mode] tensorboard: exit $rc" "$out/tb.err"
                fi ;;
            *) bad "[$mode] tensorboard: exit $rc, stderr was not the one line wanted:" "$out/tb.err" ;;
        esac
        rm -rf "$d/tb" "$d/log.csv"
    fi
    for f in $ck w.weights.h5 m.keras; do
        local p=$d/$f
        [ "$f" = "$ck" ] && p=$d/ck/$f
        if cmp -s "$out/orig/$f" "$p"; then ok "[$mode] $f is byte-equal to before"
        else bad "[$mode] $f changed"
        fi
    done
    if [ "$(cd "$d/ck" && ls)" = "$ck" ]; then ok "[$mode] ck/ holds $ck only"
    else bad "[$mode] ck/ holds: $(cd "$d/ck" && ls | tr '\n' ' ')"
    fi
    local tmps
    tmps=$(find "$d" -name '*.tmp*' | wc -l)
    if [ "$tmps" -eq 0 ]; then ok "[$mode] no temporary file left"
    else bad "[$mode] $tmps temporary files left: $(find "$d" -name '*.tmp*' | tr '\n' ' ')"
    fi
}

# Inside the private mount namespace: mount, run, and the mount ends with the process.
if [ "${2:-}" = --inside ]; then
    W=$3
    mkdir -p "$W/mnt"
    mount -t tmpfs -o size=8m sn_disk_full "$W/mnt" || exit 3
    scenario tmpfs "$W/mnt" "$W/tmpfs.out"
    sn_finish
    exit $?
fi

sn_tmpdir disk_full
W=$TMP
scenario ulimit "$W/plain" "$W/ulimit.out"
ns=()
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then ns=(unshare -m)
elif unshare -r -m true 2>/dev/null; then ns=(unshare -r -m)
fi
if [ ${#ns[@]} -gt 0 ]; then
    "${ns[@]}" bash "$0" "$B" --inside "$W"
    rc=$?
    if [ $rc -eq 3 ]; then
        echo "note: no tmpfs could be mounted in a private namespace here; the ulimit run covers the failure path"
    elif [ $rc -eq 0 ]; then
        ok "the tmpfs run passed"
    else
        bad "the tmpfs run failed (above)"
    fi
else
    echo "note: no private mount namespace here (unshare); the ulimit run covers the failure path"
fi
sn_finish
