#!/usr/bin/env bash
# The sinter command and the TPU-guide example, end to end: help texts, flag errors (exit 2
# with a message naming the flag), model summaries, a tiny training run that saves weights,
# evaluate and predict on those weights, and examples/tpu_guide with its quick defaults.
#
#     bash tests/test_cli.sh <build dir>
#
# Needs Fashion-MNIST (apt-get install dataset-fashion-mnist) for the training parts; they are
# skipped, and said so, when it is missing, and the test then exits 77 (CTest: SKIPPED).
set -u
BUILD=${1:?usage: bash tests/test_cli.sh <build dir>}
BUILD=$(cd "$BUILD" && pwd)
SINTER="$BUILD/sinter"
GUIDE="$BUILD/examples/tpu_guide"
DATA=/usr/share/datasets/fashion-mnist
export SN_NUM_THREADS=${SN_NUM_THREADS:-2}
# On cores shared with other jobs, libgomp's spinning at barriers made small steps up to 70x
# slower (measured: 6.3 s against 0.09 s for 10 steps of the guide's loop); sleeping waiters
# keep this test at seconds. libgomp reads the variable when it loads, hence here.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

. "$(dirname "$0")/sh_test_util.sh"
sn_tmpdir test_cli

if [ ! -x "$SINTER" ]; then
    echo "FAIL $SINTER is not built"
    echo "0 passed, 1 failed"
    exit 1
fi

# ---- help and usage errors ---------------------------------------------------------------
run help 0 "$SINTER" --help && expect help out '^  train +'
for cmd in train evaluate predict summary; do
    run "help_$cmd" 0 "$SINTER" "$cmd" --help && expect "help_$cmd" out "^usage: sinter $cmd"
done
run help_train_flags 0 "$SINTER" train --help &&
    expect help_train_flags out '--batch-size N +.*default: 128' &&
    expect help_train_flags out '--optimizer NAME.*sgd, adam, adamw or rmsprop'
run bad_int 2 "$SINTER" train --batch-size abc &&
    expect bad_int err "^sinter train: --batch-size: 'abc' is not an integer \(expected 1 to 65536\)"
run bad_range 2 "$SINTER" train --epochs=0 && expect bad_range err '^sinter train: --epochs: 0 is out of range'
run bad_enum 2 "$SINTER" train --optimizer sgdd &&
    expect bad_enum err "^sinter train: --optimizer: 'sgdd' is not accepted \(expected sgd, adam, adamw or rmsprop\)"
run bad_float 2 "$SINTER" train --learning-rate=fast && expect bad_float err "--learning-rate: 'fast' is not a finite number"
run unknown_flag 2 "$SINTER" train --bogus 1 && expect unknown_flag err "unknown flag '--bogus'"
run missing_value 2 "$SINTER" predict --count && expect missing_value err '--count needs a value'
run missing_weights 2 "$SINTER" evaluate && expect missing_weights err '--weights PATH is required'
run bad_model 1 "$SINTER" summary --model resnet && expect bad_model err "unknown model preset 'resnet'; accepted: 'tpu_guide_cnn', 'small_cnn', 'mlp'"
run unknown_cmd 2 "$SINTER" trian && expect unknown_cmd err "unknown command 'trian'"

# ---- summaries ---------------------------------------------------------------------------
run summary_guide 0 "$SINTER" summary --model tpu_guide_cnn &&
    expect summary_guide out 'Total params: 38,375,818'
run summary_small 0 "$SINTER" summary --model small_cnn && expect summary_small out 'Total params: 225,034'
run summary_mlp 0 "$SINTER" summary --model mlp && expect summary_mlp out 'Total params: 101,770'

# ---- data errors -------------------------------------------------------------------------
run no_data 1 "$SINTER" train --data-dir "$TMP/nowhere" --epochs 1 &&
    expect no_data err "^sinter train: .*$TMP/nowhere"

# ---- train, evaluate, predict ------------------------------------------------------------
# small_idx SRC DST N ITEM_BYTES HEADER_BYTES: the first N items of an IDX file (plain or
# gzip), with the count in its header rewritten, so that training tests read a small split.
small_idx() {
    local src=$1 dst=$2 n=$3 item=$4 hdr=$5
    {
        zcat -f "$src" | head -c 4
        printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((n >> 24 & 255)) $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255)))"
        zcat -f "$src" | head -c "$hdr" | tail -c +9
        zcat -f "$src" | tail -c +$((hdr + 1)) | head -c $((n * item))
    } >"$dst" 2>/dev/null
}
idx_file() { [ -e "$DATA/$1.gz" ] && echo "$DATA/$1.gz" || echo "$DATA/$1"; }

if [ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ]; then
    # 2,048 training and 500 test images keep the runs to seconds; the tpu_guide example below
    # reads the installed data set itself.
    SMALL="$TMP/small"
    mkdir -p "$SMALL"
    small_idx "$(idx_file train-images-idx3-ubyte)" "$SMALL/train-images-idx3-ubyte" 2048 784 16
    small_idx "$(idx_file train-labels-idx1-ubyte)" "$SMALL/train-labels-idx1-ubyte" 2048 1 8
    small_idx "$(idx_file t10k-images-idx3-ubyte)" "$SMALL/t10k-images-idx3-ubyte" 500 784 16
    small_idx "$(idx_file t10k-labels-idx1-ubyte)" "$SMALL/t10k-labels-idx1-ubyte" 500 1 8
    W="$TMP/small.weights.h5"
    if run train 0 "$SINTER" train --data-dir "$SMALL" --model small_cnn --epochs 2 --steps-per-epoch 10 \
        --validation-steps 0 --steps-per-execution 5 --batch-size 64 --save "$W" --csv "$TMP/log.csv"; then
        expect train out 'val_sparse_categorical_accuracy'
        expect train out '^Test accuracy: 0\.[0-9]{4}$'
        [ -s "$W" ] && ok "train: wrote $W" || bad "train: no weights file $W"
        expect train out 'Saved weights to'
        if head -1 "$TMP/log.csv" | grep -q '^epoch,.*loss' && [ "$(wc -l <"$TMP/log.csv")" -eq 3 ]; then
            ok "train: CSV log has a header and two rows"
        else
            bad "train: CSV log is not a header and two rows" "$TMP/log.csv"
        fi
        train_acc=$(sed -n 's/^Test accuracy: //p' "$TMP/train.out")
        if awk -v a="$train_acc" 'BEGIN { exit !(a > 0.3) }'; then
            ok "train: 20 steps learn something (test accuracy $train_acc > 0.3)"
        else
            bad "train: test accuracy $train_acc after 20 steps is not above 0.3" "$TMP/train.out"
        fi

        if run evaluate 0 "$SINTER" evaluate --data-dir "$SMALL" --model small_cnn --weights "$W" --batch-size 100; then
            expect evaluate out '^Test loss: [0-9.]+$'
            expect evaluate out '^Test accuracy: 0\.[0-9]{4}$'
            eval_acc=$(sed -n 's/^Test accuracy: //p' "$TMP/evaluate.out")
            # Both see all 500 test images (in batches of 64 and 100): the same accuracy.
            if [ "$eval_acc" = "$train_acc" ]; then
                ok "evaluate: accuracy $eval_acc equals train's"
            else
                bad "evaluate: accuracy $eval_acc differs from train's $train_acc" "$TMP/evaluate.out"
            fi
        fi
        run wrong_model 1 "$SINTER" evaluate --data-dir "$SMALL" --model mlp --weights "$W" &&
            expect wrong_model err '^sinter evaluate: '

        if run predict 0 "$SINTER" predict --data-dir "$SMALL" --model small_cnn --weights "$W" --count 5; then
            expect predict out '^index,label,predicted,p0,p1,p2,p3,p4,p5,p6,p7,p8,p9$'
            rows=$(grep -Ec '^[0-9]+,[0-9],[0-9](,[0-9.]+){10}$' "$TMP/predict.out")
            [ "$rows" -eq 5 ] && ok "predict: 5 rows of 13 fields" || bad "predict: $rows good rows, expected 5" "$TMP/predict.out"
            # Fashion-MNIST's first test image is an ankle boot (class 9).
            expect predict out '^0,9,'
            if awk -F, 'NR > 1 { s = 0; for (i = 4; i <= 13; i++) s += $i; if (s < 0.999 || s > 1.001) bad = 1 } END { exit bad }' "$TMP/predict.out"; then
                ok "predict: probabilities sum to 1"
            else
                bad "predict: probabilities do not sum to 1" "$TMP/predict.out"
            fi
        fi
        if run predict_file 0 "$SINTER" predict --data-dir "$SMALL" --weights "$W" --count 300 --batch-size 128 --output "$TMP/p.csv"; then
            n=$(wc -l <"$TMP/p.csv")
            [ "$n" -eq 301 ] && ok "predict --output: header and 300 rows (batches of 128, 128, 44)" ||
                bad "predict --output: $n lines, expected 301" "$TMP/p.csv"
        fi
        run predict_count 2 "$SINTER" predict --data-dir "$SMALL" --weights "$W" --count 501 &&
            expect predict_count err '--count: 501 is more than the 500 test images'
    fi

    # ---- the guide, step by step -------------------------------------------------------------
    if [ -x "$GUIDE" ]; then
        if run guide 0 "$GUIDE"; then
            expect guide out "LogicalDevice\(name='/job:localhost/replica:0/task:0/device:CPU:0', device_type='CPU'\)"
            expect guide out '^c device: +/job:localhost/replica:0/task:0/device:CPU:0'
            expect guide out '^\[\[22\. 28\.\]$'
            expect guide out '^ \[49\. 64\.\]\], shape=\(2, 2\), dtype=float32\)$'
            expect guide out 'steps_per_execution=2'
            expect guide out 'val_sparse_categorical_accuracy'
            expect guide out '^Current step: 10, training loss: [0-9.]+, accuracy: [0-9.]+%$'
            expect guide out '^Current step: 20, training loss: [0-9.]+, accuracy: [0-9.]+%$'
        fi
        run guide_bad_flag 2 "$GUIDE" --steps zero && expect guide_bad_flag err "--steps: 'zero'"
    else
        bad "examples/tpu_guide is not built ($GUIDE)"
    fi
else
    echo "SKIPPED train/evaluate/predict/tpu_guide: Fashion-MNIST is not installed in $DATA"
    skipped=1
fi

sn_finish || exit 1
[ "${skipped:-0}" -eq 0 ] || exit 77
