/* One float32 kernel call built by hand for kernel-vs-reference tests: random inputs, then
 * run_kernel prepares and runs a kernel twice (the same prepared state) into a NaN-filled
 * output with NaN-patterned scratch, so a kernel that skips elements or reads uninitialised
 * scratch is caught; matmul_case sets up a matmul call's attributes and shapes. Used by
 * test_cpu_kernels_blas.c, test_bf16.c and test_thread_count.c. */
#ifndef SN_F32_CASE_UTIL_H
#define SN_F32_CASE_UTIL_H

#include <math.h>
#include <string.h>

#include "backend/kernel.h"

typedef struct tcase {
    sn_attrs attr; /* call.attr points here */
    sn_kcall call;
    float *in[2];
} tcase;

/* ties: input 0 drawn from {0, 1, 2}, so most pooling windows hold repeated maxima. */
static void init_case(tcase *t, sn_rng *rng, sn_op op, const sn_attrs *attr, int n_in,
                      const sn_shape *in, const sn_shape *out, bool ties) {
    memset(t, 0, sizeof *t);
    t->call.op = op;
    t->call.y.dtype = SN_F32;
    t->call.y.shape = *out;
    t->attr = *attr;
    t->call.attr = &t->attr;
    t->call.n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        t->call.x[i].dtype = SN_F32;
        t->call.x[i].shape = in[i];
        int64_t n = sn_shape_numel(&in[i]);
        t->in[i] = sn_malloc_aligned((size_t)(n > 0 ? n : 1) * sizeof(float));
        SN_ASSERT(t->in[i]);
        for (int64_t k = 0; k < n; k++)
            t->in[i][k] = ties && i == 0 ? (float)sn_rng_below(rng, 3) : (float)sn_rng_normal(rng);
        t->call.in[i] = t->in[i];
    }
}

static void free_case(tcase *t) {
    for (int i = 0; i < 2; i++) sn_free_aligned(t->in[i]);
}

/* A matmul of a and b (transposed as ta, tb): its attributes, the output shape (the batch
 * dims of whichever side has more, then M, N) and the input shapes. */
static inline void matmul_case(sn_shape a, sn_shape b, bool ta, bool tb, sn_attrs *attr,
                               sn_shape *out, sn_shape in[2]) {
    memset(attr, 0, sizeof *attr);
    attr->matmul.ta = ta, attr->matmul.tb = tb;
    *out = a.ndim >= b.ndim ? a : b;
    out->dim[out->ndim - 2] = ta ? a.dim[a.ndim - 1] : a.dim[a.ndim - 2];
    out->dim[out->ndim - 1] = tb ? b.dim[b.ndim - 2] : b.dim[b.ndim - 1];
    in[0] = a, in[1] = b;
}

/* Runs kernel k on t into a fresh output the caller frees (sn_free_aligned). */
static sn_status run_kernel(const tcase *t, const sn_kernel *k, bool bf16, float **out) {
    int64_t n = sn_shape_numel(&t->call.y.shape);
    *out = sn_malloc_aligned((size_t)(n > 0 ? n : 1) * sizeof(float));
    SN_ASSERT(*out);
    for (int64_t i = 0; i < n; i++) (*out)[i] = NAN; /* a kernel must write every element */
    sn_kcall c = t->call;
    c.out = *out;
    c.bf16 = bf16;
    size_t scratch = 0;
    if (k->prepare) SN_TRY(k->prepare(&c, &scratch));
    c.scratch = scratch ? sn_malloc_aligned(scratch) : NULL;
    c.scratch_bytes = scratch;
    if (scratch) memset(c.scratch, 0xff, scratch); /* NaN patterns: scratch is not zeroed */
    sn_status st = k->run(&c);
    if (st == SN_OK) st = k->run(&c); /* a second run of the same prepared state */
    if (k->release) k->release(&c);
    sn_free_aligned(c.scratch);
    return st;
}

#endif
