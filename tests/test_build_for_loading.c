/* sn_model_build_for_loading and the .keras archive load skip the initialisers (the weights
 * overwrite every variable): a model built for loading starts all zeros, and after loading
 * holds exactly the saved weights; sn_model_build is unchanged (the same seed gives the same
 * weights, another seed other weights); a weights file that lacks a variable still fails. */
#include <stdlib.h>
#include <unistd.h>

#include "sinter/nn.h"
#include "sn_test.h"

static sn_model *char_model(void) {
    sn_model *m = NULL;
    CHECK_OK(sn_model_preset_text("char_lstm_small", 20, &m));
    return m;
}

/* Compares every variable of a and b: 0 equal bits, 1 differ. *zeros: whether a is all zero,
 * but for the LSTM's bias (layer 1, variable 2), whose forget-gate ones (unit_forget_bias) the
 * layer writes itself, cheaply, whether or not initialisers run. */
static int compare(sn_model *a, sn_model *b, bool *a_zeros) {
    int differ = 0;
    *a_zeros = true;
    for (int i = 0; i < sn_model_layer_count(a); i++) {
        sn_node va[4], vb[4];
        int n = sn_model_layer_variables(a, i, va, 4);
        if (sn_model_layer_variables(b, i, vb, 4) != n) return 1;
        for (int j = 0; j < n; j++) {
            sn_shape s = sn_node_shape(sn_model_graph(a), va[j]);
            const float *x = sn_variable_data(sn_model_graph(a), va[j]),
                        *y = sn_variable_data(sn_model_graph(b), vb[j]);
            size_t bytes = sizeof(float) * (size_t)sn_shape_numel(&s);
            if (memcmp(x, y, bytes) != 0) differ = 1;
            for (int64_t k = 0; !(i == 1 && j == 2) && k < sn_shape_numel(&s); k++)
                if (x[k] != 0.0f) *a_zeros = false;
        }
    }
    return differ;
}

int main(void) {
    char dir[] = "/tmp/sinter_test_bfl.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char w[256], k[256], w2[256];
    snprintf(w, sizeof w, "%s/m.weights.h5", dir);
    snprintf(k, sizeof k, "%s/m.keras", dir);
    snprintf(w2, sizeof w2, "%s/small.weights.h5", dir);
    sn_shape in = {.ndim = 1, .dim = {10}};
    sn_model *src = char_model(), *same = char_model(), *other = char_model(),
             *dst = char_model(), *arch = NULL, *bad = char_model();
    bool zeros = false;
    if (!src || !same || !other || !dst || !bad) goto done;
    CHECK_OK(sn_model_build(src, &in, 3));
    CHECK_OK(sn_model_build(same, &in, 3));
    CHECK_OK(sn_model_build(other, &in, 4));
    CHECK(compare(src, same, &zeros) == 0 && !zeros, "sn_model_build: seed 3 twice differs");
    CHECK(compare(src, other, &zeros) == 1, "sn_model_build: seeds 3 and 4 give the same weights");
    CHECK_OK(sn_model_save_weights(src, w));
    CHECK_OK(sn_model_save(src, k));

    CHECK_OK(sn_model_build_for_loading(dst, &in));
    compare(dst, src, &zeros);
    CHECK(zeros, "built for loading, yet a variable is not zero: an initialiser ran");
    CHECK_OK(sn_model_load_weights(dst, w));
    CHECK(compare(dst, src, &zeros) == 0, "built for loading + loaded differs from the saved model");

    CHECK_OK(sn_model_load(k, 0, &arch, NULL));
    if (arch) CHECK(compare(arch, src, &zeros) == 0, ".keras archive loaded differs from the saved model");

    /* A file without the Dense layer's variables: loading fails, naming what is missing. */
    sn_model *small = sn_sequential_new("char_lstm_small");
    sn_model_add(small, sn_layer_embedding(20, 64));
    sn_model_add(small, sn_layer_lstm(256, true));
    CHECK_OK(sn_model_build(small, &in, 1));
    CHECK_OK(sn_model_save_weights(small, w2));
    sn_model_free(small);
    CHECK_OK(sn_model_build_for_loading(bad, &in));
    CHECK(sn_model_load_weights(bad, w2) != SN_OK, "a file lacking the Dense variables loaded");
done:
    sn_model_free(src);
    sn_model_free(same);
    sn_model_free(other);
    sn_model_free(dst);
    sn_model_free(arch);
    sn_model_free(bad);
    unlink(w);
    unlink(k);
    unlink(w2);
    rmdir(dir);
    return sn_test_finish("test_build_for_loading");
}
