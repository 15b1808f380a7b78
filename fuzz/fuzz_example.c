/* tf.train.Example parsing. A parse either fails or gives features whose every value is
 * readable; and what parsed re-encodes and parses again to the same features. (A name with
 * an inner NUL byte reads, through the C-string API, as its part before the NUL on both
 * sides, so the comparison holds for those too.) */
#include <string.h>

#include "fuzz_util.h"
#include "sinter/data.h"

static void check_same(const sn_example *a, const sn_example *b) {
    if (sn_example_num_features(a) != sn_example_num_features(b)) abort();
    for (int i = 0; i < sn_example_num_features(a); i++) {
        const sn_feature *x = sn_example_feature(a, i), *y = sn_example_feature(b, i);
        if (strcmp(x->name, y->name) || x->count != y->count) abort();
        /* A feature without values re-encodes without a list: its kind may read as NONE. */
        if (x->count && x->kind != y->kind) abort();
        for (int64_t k = 0; k < x->count; k++) {
            if (x->kind == SN_FEATURE_FLOAT && memcmp(&x->floats[k], &y->floats[k], 4)) abort();
            if (x->kind == SN_FEATURE_INT64 && x->int64s[k] != y->int64s[k]) abort();
            if (x->kind == SN_FEATURE_BYTES &&
                (x->bytes_len[k] != y->bytes_len[k] ||
                 memcmp(x->bytes[k], y->bytes[k], x->bytes_len[k])))
                abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static sn_example *ex, *ex2; /* reused, as a dataset reuses its Example */
    if (!ex && (sn_example_new(&ex) != SN_OK || sn_example_new(&ex2) != SN_OK)) abort();
    if (sn_example_parse(ex, data, size) != SN_OK) return 0;
    int n = sn_example_num_features(ex);
    sn_feature *fs = calloc((size_t)n + 1, sizeof *fs);
    if (!fs) abort();
    for (int i = 0; i < n; i++) {
        fs[i] = *sn_example_feature(ex, i);
        if (sn_example_find(ex, fs[i].name) == NULL) abort();
    }
    uint8_t *enc = NULL;
    size_t enc_n = 0;
    if (sn_example_encode(fs, n, &enc, &enc_n) != SN_OK) abort();
    if (sn_example_parse(ex2, enc, enc_n) != SN_OK) abort();
    check_same(ex, ex2);
    free(enc);
    free(fs);
    return 0;
}
