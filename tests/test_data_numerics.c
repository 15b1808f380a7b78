/* sn_data_check_numerics (data/numerics.c): the first NaN or Inf of a data set's examples,
 * named by example and feature, for every dtype and rank it reads: f32 (positions in the
 * vectorised 64-block and in the tail), f64, bf16, a strided view, examples of rank 0 to 4;
 * integer dtypes and finite data pass. */
#include <stdlib.h>

#include "sinter/data.h"
#include "sn_test.h"

static sn_tensor *make(sn_dtype dt, sn_shape s) {
    sn_tensor *t = NULL;
    CHECK_OK(sn_tensor_new(&t, dt, &s));
    return t;
}

static void set(sn_tensor *t, int64_t i, double v) {
    switch (sn_tensor_dtype(t)) {
    case SN_F32: ((float *)sn_tensor_data(t))[i] = (float)v; break;
    case SN_F64: ((double *)sn_tensor_data(t))[i] = v; break;
    case SN_BF16: ((uint16_t *)sn_tensor_data(t))[i] = sn_f32_to_bf16((float)v); break;
    default: break;
    }
}

/* x [n, ...] of dtype dt with value v at flat index at: the message must contain want. */
static void expect(sn_dtype dt, sn_shape s, int64_t at, double v, const char *want) {
    sn_tensor *t = make(dt, s);
    if (!t) return;
    for (int64_t i = 0; i < sn_tensor_numel(t); i++) set(t, i, 0.25 * (double)(i % 7));
    CHECK_OK(sn_data_check_numerics(t, "finite"));
    set(t, at, v);
    CHECK_ERR(sn_data_check_numerics(t, "x.npy"), SN_ERR_NUMERIC, want);
    /* a second one later: the first is named */
    set(t, sn_tensor_numel(t) - 1, NAN);
    if (at < sn_tensor_numel(t) - 1) CHECK_ERR(sn_data_check_numerics(t, "x.npy"), SN_ERR_NUMERIC, want);
    sn_tensor_free(t);
}

int main(void) {
    /* f32 [n, 28, 28]: in the first 64-block, in a later one, in the tail */
    expect(SN_F32, sn_shape_make(3, (int64_t)10, (int64_t)28, (int64_t)28), 3,
           NAN, "x.npy: example 0, feature 3 (row 0, col 3) is NaN");
    expect(SN_F32, sn_shape_make(3, (int64_t)10, (int64_t)28, (int64_t)28), 5 * 784 + 401,
           INFINITY, "example 5, feature 401 (row 14, col 9) is +Inf");
    expect(SN_F32, sn_shape_make(3, (int64_t)10, (int64_t)28, (int64_t)28), 10 * 784 - 2,
           -INFINITY, "example 9, feature 782 (row 27, col 26) is -Inf");
    /* NHWC images, flat features, one value per example, rank 4 */
    expect(SN_F32, sn_shape_make(4, (int64_t)3, (int64_t)4, (int64_t)5, (int64_t)3),
           2 * 60 + 2 * 15 + 3 * 3 + 1, NAN, "example 2, feature 40 (row 2, col 3, channel 1)");
    expect(SN_F32, sn_shape_make(2, (int64_t)100, (int64_t)7), 7 * 50 + 6, NAN,
           "example 50, feature 6 is NaN");
    expect(SN_F32, sn_shape_make(1, (int64_t)100), 99, NAN, "example 99 is NaN");
    expect(SN_F32, sn_shape_make(5, (int64_t)2, (int64_t)2, (int64_t)3, (int64_t)2, (int64_t)2),
           24 + 12 + 4 + 2 + 1, NAN, "example 1, feature 19 (index 1, 1, 1, 1)");
    /* other float dtypes */
    expect(SN_F64, sn_shape_make(2, (int64_t)40, (int64_t)33), 33 * 39 + 1, NAN,
           "example 39, feature 1 is NaN");
    expect(SN_BF16, sn_shape_make(2, (int64_t)4, (int64_t)3), 7, INFINITY,
           "example 2, feature 1 is +Inf");
    /* a strided view: every other example of a [8, 5] tensor */
    sn_tensor *base = make(SN_F32, sn_shape_make(2, (int64_t)8, (int64_t)5)), *v = NULL;
    if (base) {
        set(base, 5 * 5 + 2, NAN); /* example 5: not in the view */
        set(base, 6 * 5 + 4, NAN); /* view example 3 */
        int64_t st[2] = {2 * 5 * 4, 4};
        CHECK_OK(sn_tensor_view(&v, base, &(sn_shape){.ndim = 2, .dim = {4, 5}}, st, 0));
        if (v) CHECK_ERR(sn_data_check_numerics(v, "view"), SN_ERR_NUMERIC,
                         "view: example 3, feature 4 is NaN");
        sn_tensor_free(v);
        sn_tensor_free(base);
    }
    /* integers hold no NaN; NULL is an error */
    sn_tensor *u = make(SN_U8, sn_shape_make(2, (int64_t)3, (int64_t)3));
    if (u) CHECK_OK(sn_data_check_numerics(u, "u8"));
    sn_tensor_free(u);
    CHECK_ERR(sn_data_check_numerics(NULL, "x"), SN_ERR_INVALID, "NULL");
    return sn_test_finish("test_data_numerics");
}
