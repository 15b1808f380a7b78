#!/usr/bin/env bash
# A trained character model works with every command, not only generate: char_lstm_small
# trained for a few steps on a small text (sinter train --save writes W and W.vocab.json), then
#   evaluate --data TEXT: the held-out split's loss, equal to the "Validation loss" train
#     printed for the same text, --seq-length and --batch-size; the same without the vocabulary
#     file (the text's characters give it again);
#   predict --data PROMPT: a row per character of the prompt, the next character's id as the
#     label (empty after the last one), probabilities that sum to 1;
#   summary --weights W and export --to m.keras: the model sized by the saved vocabulary;
#   without a vocabulary: an error that says what to give on the command line (and no C
#   function name).
#
#     bash tests/test_char_model_cli.sh <build dir>
set -u
BUILD=${1:?usage: bash tests/test_char_model_cli.sh <build dir>}
SINTER="$(cd "$BUILD" && pwd)/sinter"
export SN_NUM_THREADS=${SN_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
. "$(dirname "$0")/sh_test_util.sh"
sn_tmpdir test_char_model_cli
check() { # check NAME STATUS MESSAGE: ok when STATUS is 0
    if [ "$2" = 0 ]; then ok "$1"; else bad "$1: $3"; fi
}

# 28 distinct characters; 60 lines of 59 are 114 sequences of 30 + 1, 12 of them held out.
for _ in $(seq 60); do printf 'ROMEO: But soft, what light through yonder window breaks?\n'; done >"$TMP/t.txt"
K=28
W=$TMP/m.weights.h5
"$SINTER" train --data "$TMP/t.txt" --model char_lstm_small --seq-length 30 --batch-size 8 \
    --epochs 1 --steps-per-epoch 5 --save "$W" >"$TMP/train.out" 2>&1
check train $? "$(tail -5 "$TMP/train.out")"
train_loss=$(sed -n 's/^Validation loss: //p' "$TMP/train.out")
[ -n "$train_loss" ] && [ -f "$W.vocab.json" ]
check train_saved $? "loss '$train_loss', vocabulary: $(ls "$TMP")"

# evaluate: the held-out split, the number train printed.
"$SINTER" evaluate --model char_lstm_small --weights "$W" --data "$TMP/t.txt" --seq-length 30 \
    --batch-size 8 >"$TMP/ev.out" 2>&1
check evaluate $? "$(cat "$TMP/ev.out")"
ev_loss=$(sed -n 's/^Validation loss: //p' "$TMP/ev.out")
[ -n "$ev_loss" ] && [ "$ev_loss" = "$train_loss" ]
check evaluate_equals_train_validation $? "evaluate $ev_loss, train $train_loss"
grep -q "on 12 held-out sequences of 30 characters" "$TMP/ev.out"
check evaluate_held_out_split $? "$(cat "$TMP/ev.out")"
mv "$W.vocab.json" "$TMP/saved.vocab.json"
"$SINTER" evaluate --model char_lstm_small --weights "$W" --data "$TMP/t.txt" --seq-length 30 \
    --batch-size 8 >"$TMP/ev2.out" 2>&1
check evaluate_vocab_from_text $? "$(cat "$TMP/ev2.out")"
[ "$(sed -n 's/^Validation loss: //p' "$TMP/ev2.out")" = "$train_loss" ]
check evaluate_vocab_from_text_same_loss $? "$(cat "$TMP/ev2.out")"
"$SINTER" evaluate --model char_lstm_small --weights "$W" --vocab "$TMP/saved.vocab.json" \
    --data "$TMP/t.txt" --seq-length 30 --batch-size 8 >"$TMP/ev3.out" 2>&1
[ "$(sed -n 's/^Validation loss: //p' "$TMP/ev3.out")" = "$train_loss" ]
check evaluate_vocab_flag $? "$(cat "$TMP/ev3.out")"
mv "$TMP/saved.vocab.json" "$W.vocab.json"
"$SINTER" evaluate --model char_lstm_small --weights "$W" >"$TMP/e1" 2>&1; rc=$?
[ $rc = 2 ] && grep -q -- "--data TEXT" "$TMP/e1"
check evaluate_needs_text $? "rc $rc: $(cat "$TMP/e1")"

# predict: a prompt of 6 characters gives 6 rows (the default --count, 10, is more).
printf 'ROMEO:' >"$TMP/prompt.txt"
"$SINTER" predict --model char_lstm_small --weights "$W" --data "$TMP/prompt.txt" \
    --output "$TMP/p.csv" >"$TMP/p.out" 2>&1
check predict $? "$(cat "$TMP/p.out")"
awk -F, -v k=$K '
    NR == 1 { if ($1 != "index" || $2 != "label" || $3 != "predicted" || NF != 3 + k) bad = "header " $0; next }
    { rows++; s = 0; for (i = 4; i <= NF; i++) s += $i
      if (NF != 3 + k || $1 != NR - 2 || $3 < 0 || $3 >= k || s < 0.999 || s > 1.001) bad = "row " $0
      label[NR - 2] = $2 }
    END { if (rows != 6) bad = bad " rows " rows
          if (label[5] != "" || label[0] == "") bad = bad " labels " label[0] "/" label[5]
          if (bad) { print bad; exit 1 } }' "$TMP/p.csv" >"$TMP/p.chk"
check predict_rows $? "$(cat "$TMP/p.chk") in $(head -c 600 "$TMP/p.csv")"
# The labels are the next characters of R O M E O :, so rows 0 and 3 (both followed by 'O')
# share a label and row 1 (followed by 'M') has another.
l0=$(sed -n 2p "$TMP/p.csv" | cut -d, -f2); l3=$(sed -n 5p "$TMP/p.csv" | cut -d, -f2)
l1=$(sed -n 3p "$TMP/p.csv" | cut -d, -f2)
[ -n "$l0" ] && [ "$l0" = "$l3" ] && [ "$l0" != "$l1" ]
check predict_labels_are_next_characters $? "labels $l0 $l1 $l3"
"$SINTER" predict --model char_lstm_small --weights "$W" --data "$TMP/prompt.txt" --count 3 \
    >"$TMP/p3.csv" 2>&1
[ "$(wc -l <"$TMP/p3.csv")" = 4 ] && [ "$(sed -n 2,4p "$TMP/p3.csv")" = "$(sed -n 2,4p "$TMP/p.csv")" ]
check predict_count_prefix $? "$(head -c 400 "$TMP/p3.csv")"
printf 'ROMEO: Zounds' >"$TMP/z.txt"
"$SINTER" predict --model char_lstm_small --weights "$W" --data "$TMP/z.txt" >"$TMP/e2" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "'Z'" "$TMP/e2"
check predict_char_outside_vocab $? "rc $rc: $(cat "$TMP/e2")"

# summary and export: sized by the saved vocabulary (Dense(K): 257 * K parameters).
"$SINTER" summary --model char_lstm_small --weights "$W" >"$TMP/s.out" 2>&1
check summary $? "$(cat "$TMP/s.out")"
grep -q "(None, 100, $K)" "$TMP/s.out" && grep -q " 7,196 " "$TMP/s.out" # 257 * 28
check summary_sized_by_vocab $? "$(cat "$TMP/s.out")"
"$SINTER" summary --model char_lstm_small --data "$TMP/t.txt" --seq-length 30 >"$TMP/s2.out" 2>&1
grep -q "(None, 30, $K)" "$TMP/s2.out"
check summary_from_text $? "$(cat "$TMP/s2.out")"
"$SINTER" export --model char_lstm_small --weights "$W" --to "$TMP/m.keras" >"$TMP/x.out" 2>&1
check export $? "$(cat "$TMP/x.out")"
"$SINTER" summary --model "$TMP/m.keras" >"$TMP/s3.out" 2>&1
check export_opens $? "$(cat "$TMP/s3.out")"
grep -q "(None, 100, $K)" "$TMP/s3.out"
check export_sized_by_vocab $? "$(cat "$TMP/s3.out")"

# No vocabulary: say what to give, in command-line terms.
for cmd in summary export evaluate predict; do
    case $cmd in
        summary) args=() ;;
        export) args=(--to "$TMP/n.keras") ;;
        *) args=(--weights "$TMP/none.weights.h5" --data "$TMP/missing.txt") ;;
    esac
    "$SINTER" $cmd --model char_lstm_small "${args[@]}" >"$TMP/e.$cmd" 2>&1; rc=$?
    [ $rc != 0 ] && ! grep -q "sn_model_preset_text" "$TMP/e.$cmd" &&
        grep -Eq -- "--weights W with its W.vocab.json|missing.txt" "$TMP/e.$cmd"
    check ${cmd}_no_vocab_says_what_to_give $? "rc $rc: $(cat "$TMP/e.$cmd")"
done
"$SINTER" train --model char_lstm_small --data-dir "$TMP" --epochs 1 >"$TMP/e.train" 2>&1; rc=$?
[ $rc != 0 ] && ! grep -q "sn_model_preset_text" "$TMP/e.train"
check train_no_c_names $? "rc $rc: $(cat "$TMP/e.train")"

sn_finish
