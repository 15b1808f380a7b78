/* NaN in the data, end to end through the `sinter` command (docs/reliability.md, "NaN and
 * Inf"): files written here, no data set needed.
 *   - train small_cnn on 64 float images, one of them holding one NaN pixel: the NaN reaches
 *     the loss through conv, relu and max-pool, and TerminateOnNaN (always on in sinter
 *     train) stops the run naming the epoch and the step (the range of steps when one
 *     execution ran several);
 *   - --check-numerics names the example and the feature before training starts (train,
 *     evaluate and predict; +Inf too), and changes nothing on clean data;
 *   - --help lists the flag for the three commands. */
#include <math.h>
#include <stdint.h>

#include "cli_test_util.h"

#define N 64

static float img[N][28][28];
static uint8_t lbl[N];

static void make_files(void) {
    for (int i = 0; i < N; i++) {
        lbl[i] = (uint8_t)(i % 2);
        for (int r = 0; r < 28; r++)
            for (int c = 0; c < 28; c++)
                img[i][r][c] = (float)(((r < 14) == (i % 2) ? 200 : 20) + (r * 7 + c * 3 + i) % 40) / 255.0f;
    }
    cli_write_npy(test_tmp("clean.npy"), "<f4", "(64, 28, 28)", img, sizeof img);
    cli_write_npy(test_tmp("y.npy"), "|u1", "(64,)", lbl, sizeof lbl);
    img[43][14][9] = NAN; /* example 43, feature 14 * 28 + 9 = 401 */
    cli_write_npy(test_tmp("nan.npy"), "<f4", "(64, 28, 28)", img, sizeof img);
    img[43][14][9] = img[43][14][8];
    img[7][0][27] = -INFINITY; /* example 7, feature 27 */
    cli_write_npy(test_tmp("inf.npy"), "<f4", "(64, 28, 28)", img, sizeof img);
}

/* The step TerminateOnNaN named in cli_out ("..., step S (TerminateOnNaN)"), or -1. */
static long named_step(void) {
    const char *p = strstr(cli_out, "loss became NaN at epoch 1, step ");
    return p ? strtol(p + strlen("loss became NaN at epoch 1, step "), NULL, 10) : -1;
}

int main(void) {
    char exe[512], a[4096];
    snprintf(exe, sizeof exe, "%s/sinter", SN_BINARY_DIR);
    if (access(exe, X_OK) != 0) {
        fprintf(stderr, "FAIL: %s is not built\n", exe);
        return 1;
    }
    if (!test_tmpdir_make("sn_test_numerics_cli")) return 1;
    make_files();
    const char *common = "--model small_cnn --epochs 1 --batch-size 8";
    const char *nan = test_tmp("nan.npy"), *y = test_tmp("y.npy"), *w = test_tmp("m.weights.h5");

    /* The NaN reaches the loss: one step named (8 steps an epoch, one per execution) ... */
    snprintf(a, sizeof a, "train --data %s --labels %s %s --steps-per-execution 1", nan, y, common);
    CLI_EXPECT(a, 1, "(TerminateOnNaN)");
    long s = named_step();
    CHECK(s >= 1 && s <= 8, "the step named is %ld, expected one of 1..8:\n%s", s, cli_out);
    CHECK(strstr(cli_out, "--check-numerics names the example") != NULL,
          "the message does not point to --check-numerics:\n%s", cli_out);
    /* ... or the execution's steps (8 steps in one execution of up to 50) */
    snprintf(a, sizeof a, "train --data %s --labels %s %s", nan, y, common);
    CLI_EXPECT(a, 1, "loss became NaN at epoch 1, in steps 1-8 (one execution of 8 steps");

    /* --check-numerics: before training, naming example and feature */
    snprintf(a, sizeof a, "train --data %s --labels %s %s --check-numerics", nan, y, common);
    CLI_EXPECT(a, 1, "example 43, feature 401 (row 14, col 9) is NaN");
    CHECK(strstr(cli_out, "train data (") && !strstr(cli_out, "Epoch 1/"),
          "the check names the split and runs before training:\n%s", cli_out);
    snprintf(a, sizeof a, "train --data %s --labels %s %s --check-numerics", test_tmp("inf.npy"),
             y, common);
    CLI_EXPECT(a, 1, "example 7, feature 27 (row 0, col 27) is -Inf");
    /* clean data: trains as without the flag */
    snprintf(a, sizeof a, "train --data %s --labels %s %s --steps-per-epoch 2 --check-numerics "
             "--save %s", test_tmp("clean.npy"), y, common, w);
    CLI_EXPECT(a, 0, "Saved weights");
    /* evaluate and predict load through the same path */
    snprintf(a, sizeof a, "evaluate --data %s --labels %s --model small_cnn --weights %s "
             "--check-numerics", nan, y, w);
    CLI_EXPECT(a, 1, "test data (");
    CHECK(strstr(cli_out, "example 43, feature 401 (row 14, col 9) is NaN") != NULL,
          "evaluate --check-numerics:\n%s", cli_out);
    snprintf(a, sizeof a, "predict --data %s --labels %s --model small_cnn --weights %s "
             "--check-numerics", nan, y, w);
    CLI_EXPECT(a, 1, "example 43, feature 401 (row 14, col 9) is NaN");

    const char *cmds[] = {"train", "evaluate", "predict"};
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s --help", cmds[i]);
        CLI_EXPECT(a, 0, "--check-numerics");
    }
    if (!getenv("SN_KEEP_TMP")) test_tmpdir_remove();
    return sn_test_finish("test_numerics_cli");
}
