/* sn_data_check_numerics (sinter/data.h): the first NaN or Inf in a data set's examples,
 * named by example and feature, before training reads them (sinter train --check-numerics).
 *
 * Why here and not in the step: a NaN in the inputs reaches the loss (the kernels let NaN
 * through, as TensorFlow's do), and TerminateOnNaN then stops the run at the batch whose loss
 * it spoiled; but which example and which feature held it, the loss cannot say. One pass over
 * the examples (contiguous f32 or f64: a vectorised test of the exponent bits, about the
 * speed of reading them) can. Integer dtypes hold no
 * NaN or Inf: nothing to scan. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "data/data_impl.h"

/* The first index i < n with a NaN or Inf, or n: blocks of 64 are tested on their exponent
 * bits (all ones for NaN and Inf) with an OR that vectorises without -ffast-math; the block
 * holding one is then walked. */
static int64_t first_bad_f32(const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        uint32_t any = 0;
        for (int j = 0; j < 64; j++) {
            uint32_t u;
            memcpy(&u, x + i + j, 4);
            any |= (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
        }
        if (any) break;
    }
    for (; i < n; i++)
        if (!isfinite(x[i])) return i;
    return n;
}

static int64_t first_bad_f64(const double *x, int64_t n) {
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        uint64_t any = 0;
        for (int j = 0; j < 64; j++) {
            uint64_t u;
            memcpy(&u, x + i + j, 8);
            any |= (uint64_t)((u & 0x7ff0000000000000ull) == 0x7ff0000000000000ull);
        }
        if (any) break;
    }
    for (; i < n; i++)
        if (!isfinite(x[i])) return i;
    return n;
}

/* "(row 2, col 0, channel 0)" for image-like examples ([rows, cols] or [rows, cols, ch]),
 * "(index 1, 4, 0, 2)" for other ranks above 1, "" for flat ones. */
static void coords(const sn_shape *s, int64_t f, char *buf, size_t cap) {
    int rank = s->ndim - 1;
    int64_t idx[SN_MAX_DIMS];
    for (int d = s->ndim - 1; d >= 1; d--) {
        idx[d - 1] = f % s->dim[d];
        f /= s->dim[d];
    }
    buf[0] = 0;
    if (rank == 2)
        snprintf(buf, cap, " (row %lld, col %lld)", (long long)idx[0], (long long)idx[1]);
    else if (rank == 3)
        snprintf(buf, cap, " (row %lld, col %lld, channel %lld)", (long long)idx[0],
                 (long long)idx[1], (long long)idx[2]);
    else if (rank > 3) {
        size_t at = (size_t)snprintf(buf, cap, " (index");
        for (int d = 0; d < rank && at < cap; d++)
            at += (size_t)snprintf(buf + at, cap - at, "%s %lld", d ? "," : "", (long long)idx[d]);
        if (at < cap) snprintf(buf + at, cap - at, ")");
    }
}

sn_status sn_data_check_numerics(const sn_tensor *x, const char *what) {
    if (!x) return sn_errorf(SN_ERR_INVALID, "sn_data_check_numerics: tensor is NULL");
    if (!what) what = "data";
    const sn_shape *s = sn_tensor_shape(x);
    sn_dtype dt = sn_tensor_dtype(x);
    if (dt != SN_F32 && dt != SN_F64 && dt != SN_BF16) return SN_OK;
    int64_t n = sn_tensor_numel(x), bad = n;
    double v = 0;
    if (sn_tensor_is_contiguous(x) && dt == SN_F32) {
        bad = first_bad_f32(sn_tensor_cdata(x), n);
    } else if (sn_tensor_is_contiguous(x) && dt == SN_F64) {
        bad = first_bad_f64(sn_tensor_cdata(x), n);
    } else {
        for (int64_t i = 0; i < n && bad == n; i++)
            if (!isfinite(sn_tensor_get(x, i))) bad = i;
    }
    if (bad == n) return SN_OK;
    v = sn_tensor_get(x, bad);
    const char *kind = isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf";
    if (s->ndim < 2)
        return sn_errorf(SN_ERR_NUMERIC, "%s: example %lld is %s (expected finite numbers)",
                         what, (long long)bad, kind);
    int64_t per = n / s->dim[0];
    char where[160];
    coords(s, bad % per, where, sizeof where);
    return sn_errorf(SN_ERR_NUMERIC, "%s: example %lld, feature %lld%s is %s (expected finite "
                     "numbers)", what, (long long)(bad / per), (long long)(bad % per), where,
                     kind);
}
