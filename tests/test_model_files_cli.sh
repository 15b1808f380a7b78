#!/usr/bin/env bash
# The sinter command with Keras model files: --model PATH (.keras, .json) for summary, train,
# evaluate and predict; train --save PATH.keras / PATH.json / PATH.weights.h5; export; and the
# errors for a bad --model. No Python needed (tests/test_keras_interop.sh checks the files
# against real Keras).
#
#     bash tests/test_model_files_cli.sh <build dir>
#
# The training parts need Fashion-MNIST (apt-get install dataset-fashion-mnist); without it
# they are skipped, said so, and the test exits 77 (CTest: SKIPPED).
set -u
BUILD=${1:?usage: bash tests/test_model_files_cli.sh <build dir>}
BUILD=$(cd "$BUILD" && pwd)
SINTER="$BUILD/sinter"
DATA=/usr/share/datasets/fashion-mnist
export SN_NUM_THREADS=${SN_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
. "$(dirname "$0")/sh_test_util.sh"
sn_tmpdir model_files_cli
skipped=0

# export a preset; summary of the file equals the preset's (same layers, shapes, counts)
run export_keras 0 "$SINTER" export --model small_cnn --to "$TMP/s.keras" && expect export_keras out "Exported small_cnn to"
run export_json 0 "$SINTER" export --model small_cnn --to "$TMP/s.json" && ok "export_json"
run sum_preset 0 "$SINTER" summary --model small_cnn
for f in s.keras s.json; do
    if run "sum_$f" 0 "$SINTER" summary --model "$TMP/$f"; then
        if cmp -s "$TMP/sum_preset.out" "$TMP/sum_$f.out"; then ok "summary --model $f equals the preset's"
        else bad "summary --model $f differs from the preset's" "$TMP/sum_$f.out"; fi
    fi
done
run export_bad_suffix 1 "$SINTER" export --model small_cnn --to "$TMP/s.h5" && expect export_bad_suffix err "expected a path ending in .keras"
run model_missing 1 "$SINTER" summary --model "$TMP/nothere.keras" && expect model_missing err "cannot open .*nothere.keras"
printf '{"class_name": "Sequential", "config": {"layers": [' > "$TMP/trunc.json"
run model_trunc 1 "$SINTER" summary --model "$TMP/trunc.json" && expect model_trunc err "is not valid JSON: .* line 1, column"
run eval_json_noweights 2 "$SINTER" evaluate --model "$TMP/s.json" && expect eval_json_noweights err "--weights PATH is required"

if [ ! -r "$DATA/train-images-idx3-ubyte.gz" ]; then
    echo "SKIPPED: the training parts (no Fashion-MNIST in $DATA)"
    skipped=1
else
    # train from a .json (fresh weights), save .keras; evaluate/predict take the weights from it
    if run train_json 0 "$SINTER" train --model "$TMP/s.json" --epochs 1 --steps-per-epoch 3 \
        --validation-steps 1 --batch-size 32 --save "$TMP/t.keras"; then
        expect train_json out "Saved the model to"
        run eval_keras 0 "$SINTER" evaluate --model "$TMP/t.keras" && expect eval_keras out "Evaluated"
        run predict_keras 0 "$SINTER" predict --model "$TMP/t.keras" --count 3 &&
            expect predict_keras out "^2,[0-9]+,[0-9]+,"
        # a re-export of the trained file predicts the same
        run predict_keras2 0 "$SINTER" predict --model "$TMP/t.keras" --count 3 --output "$TMP/p1.csv"
        run export_again 0 "$SINTER" export --model "$TMP/t.keras" --to "$TMP/t3.keras"
        run predict_keras3 0 "$SINTER" predict --model "$TMP/t3.keras" --count 3 --output "$TMP/p3.csv"
        if cmp -s "$TMP/p1.csv" "$TMP/p3.csv"; then ok "a re-exported .keras predicts the same"
        else bad "a re-exported .keras predicts differently" "$TMP/p1.csv" "$TMP/p3.csv"; fi
    fi
    # a file model continues training; --save .weights.h5 still writes weights only
    if run train_keras 0 "$SINTER" train --model "$TMP/t.keras" --epochs 1 --steps-per-epoch 2 \
        --validation-steps 1 --batch-size 32 --save "$TMP/w.weights.h5"; then
        expect train_keras out "Saved weights to"
        run eval_weights 0 "$SINTER" evaluate --model "$TMP/s.json" --weights "$TMP/w.weights.h5" &&
            expect eval_weights out "Evaluated"
    fi
    # a model whose input does not fit the images
    run export_mlp 0 "$SINTER" export --model mlp --rows 8 --cols 8 --to "$TMP/m8.keras"
    run train_wrong_input 1 "$SINTER" train --model "$TMP/m8.keras" --epochs 1 --steps-per-epoch 1 &&
        expect train_wrong_input err "takes inputs of shape \[8, 8, 1\], but the data.s examples have shape \[28, 28, 1\]"
fi
sn_finish || exit 1
[ "$skipped" -eq 0 ] || exit 77
exit 0
