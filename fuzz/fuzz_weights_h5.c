/* The HDF5 weight loader: the fuzzer's bytes as a weights file (seeds: real files in both
 * layouts, written by sn_weights_save_h5), loaded into a small model's description (Dense,
 * BatchNormalization, LSTM: the three ways Keras files hold variables). This runs HDF5's own
 * parser (not instrumented: only sinter's walk of groups, attributes, shapes and dtypes
 * counts as coverage) and sinter's checks behind it. A load either fails, leaving the tensors
 * untouched, or fills them. */
#include <stdio.h>
#include <string.h>

#include "fuzz_util.h"
#include "sinter/io.h"

#define NT 9
static sn_tensor *t[NT];
static sn_weight_var vars[NT];
static sn_weight_layer layers[4];

static void setup(void) {
    static const int64_t shapes[NT][3] = {
        {2, 3, 2}, {1, 3}, /* dense: kernel [3, 2], bias [2] */
        {1, 2}, {1, 2}, {1, 2}, {1, 2}, /* batch_normalization: gamma, beta, mean, variance */
        {2, 2, 8}, {2, 2, 8}, {1, 8}, /* lstm (cell): kernel [2, 8], recurrent [2, 8], bias */
    };
    static const char *names[NT] = {"kernel", "bias", "gamma", "beta", "moving_mean",
                                    "moving_variance", "kernel", "recurrent_kernel", "bias"};
    for (int i = 0; i < NT; i++) {
        sn_shape s = {.ndim = (int)shapes[i][0], .dim = {shapes[i][1], shapes[i][2]}};
        if (s.ndim == 1) s.dim[0] = shapes[i][1];
        if (sn_tensor_new(&t[i], SN_F32, &s) != SN_OK) abort();
        vars[i] = (sn_weight_var){names[i], t[i]};
    }
    layers[0] = (sn_weight_layer){"Dense", "dense", 2, &vars[0]};
    layers[1] = (sn_weight_layer){"BatchNormalization", "batch_normalization", 4, &vars[2]};
    layers[2] = (sn_weight_layer){"Dropout", "dropout", 0, NULL};
    layers[3] = (sn_weight_layer){"LSTM", "lstm", 3, &vars[6]};
}

/* The harness itself must work: a file saved from the model loads back. (A first version
 * handed HDF5 a path it could not open, and every input failed before the loader ran.) */
static void self_check(void) {
    const char *path = fuzz_file(NULL, 0);
    if (sn_weights_save_h5(path, 4, layers, NULL) != SN_OK ||
        sn_weights_load_h5(path, 4, layers, NULL) != SN_OK) {
        fprintf(stderr, "fuzz_weights_h5: harness broken: %s\n", sn_last_error());
        abort();
    }
}

/* Before the first input: coverage reached here is not credited to an input, so the real
 * seeds stay in the corpus (run from the first input, the self-check's coverage made every
 * seed look redundant and libFuzzer kept only 2-byte inputs). */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    setup();
    self_check();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    sn_weights_layout lay;
    (void)sn_weights_h5_layout(path, &lay);
    for (int i = 0; i < NT; i++) memset(sn_tensor_data(t[i]), 0x7f, 4 * (size_t)sn_tensor_numel(t[i]));
    sn_status s = sn_weights_load_h5(path, 4, layers, NULL);
    if (getenv("SN_FUZZ_DEBUG")) /* what happened to each input, when replaying a corpus */
        fprintf(stderr, "load: %s %s\n", sn_status_name(s), s != SN_OK ? sn_last_error() : "");
    if (s != SN_OK) /* nothing written on failure */
        for (int i = 0; i < NT; i++) {
            const uint8_t *p = sn_tensor_cdata(t[i]);
            for (int64_t k = 0; k < 4 * sn_tensor_numel(t[i]); k++)
                if (p[k] != 0x7f) abort();
        }
    return 0;
}
