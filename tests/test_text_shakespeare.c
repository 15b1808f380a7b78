/* The text pipeline on the Shakespeare corpus with the tutorial's defaults: 65 characters,
 * 11,043 sequences of 100 + 1, the 90/10 split and the batch counts, one full epoch of int32
 * batches whose targets are the inputs shifted by one. The corpus comes from the one place
 * that finds it (scripts/shakespeare.sh, which only looks here); skipped (77) when it cannot
 * be had. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "sinter/data.h"
#include "sn_test.h"

int main(void) {
    char path[4096] = "";
    FILE *p = popen("bash '" SN_SOURCE_DIR "/scripts/shakespeare.sh' --no-fetch", "r");
    if (p && !fgets(path, sizeof path, p)) path[0] = 0;
    int st = p ? pclose(p) : -1;
    path[strcspn(path, "\n")] = 0;
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (rc == 77) {
        printf("test_text_shakespeare: SKIPPED: no Shakespeare corpus (scripts/shakespeare.sh)\n");
        return 77;
    }
    if (rc != 0 || !path[0]) {
        fprintf(stderr, "FAIL: scripts/shakespeare.sh --no-fetch exited with %d, printing '%s'\n",
                rc, path);
        return 1;
    }
    sn_text_opts o = sn_text_defaults();
    o.seed = 42;
    sn_vocab *v = NULL;
    sn_dataset *tr = NULL, *va = NULL;
    sn_text_info info = {0};
    CHECK_OK(sn_text_dataset(path, &o, &v, &tr, &va, &info));
    if (!v || !tr || !va) return sn_test_finish("test_text_shakespeare");
    CHECK(sn_vocab_size(v) == 65, "vocabulary of %d characters, wanted 65", sn_vocab_size(v));
    CHECK(sn_vocab_char(v, 0) == '\n' && sn_vocab_char(v, 1) == ' ' && sn_vocab_char(v, 64) == 'z',
          "ids 0, 1, 64 are U+%04llX U+%04llX U+%04llX", (long long)sn_vocab_char(v, 0),
          (long long)sn_vocab_char(v, 1), (long long)sn_vocab_char(v, 64));
    /* 1,115,394 / 101 = 11,043 sequences; floor(11043 * 0.9) = 9,938 train (155 batches of
     * 64), 1,105 validation (18 batches, the last of 17). */
    CHECK(info.n_units == 1115394 && info.n_sequences == 11043, "%lld chars, %lld sequences",
          (long long)info.n_units, (long long)info.n_sequences);
    CHECK(info.n_train == 9938 && info.n_validation == 1105, "split %lld / %lld",
          (long long)info.n_train, (long long)info.n_validation);
    CHECK(sn_dataset_cardinality(tr) == 155 && sn_dataset_cardinality(va) == 18,
          "batches %lld / %lld", (long long)sn_dataset_cardinality(tr),
          (long long)sn_dataset_cardinality(va));
    int64_t batches = 0, bad_shift = 0;
    for (;;) {
        sn_tensor *b[2];
        bool end = false;
        sn_status s = sn_dataset_next(tr, b, &end);
        CHECK(s == SN_OK, "next: %s", sn_last_error());
        if (s != SN_OK || end) break;
        const sn_shape *xs = sn_tensor_shape(b[0]);
        if (batches == 0)
            CHECK(sn_tensor_dtype(b[0]) == SN_I32 && xs->ndim == 2 && xs->dim[0] == 64 &&
                      xs->dim[1] == 100 && sn_shape_equal(xs, sn_tensor_shape(b[1])),
                  "batch shape / dtype");
        const int32_t *x = sn_tensor_data(b[0]), *y = sn_tensor_data(b[1]);
        for (int64_t r = 0; r < 64; r++)
            for (int64_t t = 0; t + 1 < 100; t++) bad_shift += y[r * 100 + t] != x[r * 100 + t + 1];
        batches++;
    }
    CHECK(batches == 155 && bad_shift == 0, "%lld batches, %lld targets not shifted inputs",
          (long long)batches, (long long)bad_shift);
    sn_dataset_free(tr);
    sn_dataset_free(va);
    sn_vocab_free(v);
    return sn_test_finish("test_text_shakespeare");
}
