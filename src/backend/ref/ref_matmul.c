/* Reference batched matrix product with optional transposes. Any float dtype; every output
 * element is one dot product accumulated in double. Threads split the output rows. */
#include "backend/ref/ref_common.h"

typedef struct mm_ctx {
    const sn_kcall *c;
    int64_t m, n, k;
    int64_t a_batch, b_batch;        /* elements between batches; 0 = broadcast 2-D operand */
    int64_t a_sm, a_sk, b_sk, b_sn;  /* element strides of a(m, k) and b(k, n) */
    int64_t rows;                    /* batch * m */
} mm_ctx;

/* The running sums of one block of an output row stay on the stack, and the k loop outside
 * the column loop reads b's rows contiguously (when b is not transposed). Each output is
 * still one sum over k in increasing order. */
static void mm_rows(void *arg, int ith, int nth) {
    const mm_ctx *x = arg;
    const sn_kcall *c = x->c;
    sn_dtype ta = c->x[0].dtype, tb = c->x[1].dtype, to = c->y.dtype;
    double acc[REF_BLOCK];
    int64_t lo, hi;
    sn_split_range(x->rows, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t bi = r / x->m, mi = r % x->m;
        int64_t a0 = bi * x->a_batch + mi * x->a_sm, b0 = bi * x->b_batch;
        for (int64_t n0 = 0; n0 < x->n; n0 += REF_BLOCK) {
            int64_t nb = x->n - n0 < REF_BLOCK ? x->n - n0 : REF_BLOCK;
            for (int64_t j = 0; j < nb; j++) acc[j] = 0;
            for (int64_t ki = 0; ki < x->k; ki++) {
                double av = sn_load(ta, c->in[0], a0 + ki * x->a_sk);
                int64_t bk = b0 + ki * x->b_sk + n0 * x->b_sn;
                ref_axpy(acc, av, tb, c->in[1], bk, x->b_sn, nb);
            }
            for (int64_t j = 0; j < nb; j++) sn_store(to, c->out, r * x->n + n0 + j, acc[j]);
        }
    }
}

/* a [..., M, K] ([..., K, M] if ta), b [..., K, N] ([..., N, K] if tb) -> [..., M, N];
 * batch dimensions equal, or one operand 2-D and shared by every batch */
static sn_status matmul_run(sn_kcall *c) {
    const sn_shape *as = &c->x[0].shape, *bs = &c->x[1].shape;
    const sn_shape *os = &c->y.shape;
    bool ta = c->attr->matmul.ta, tb = c->attr->matmul.tb;
    mm_ctx x = {.c = c};
    x.m = os->dim[os->ndim - 2];
    x.n = os->dim[os->ndim - 1];
    x.k = ta ? as->dim[as->ndim - 2] : as->dim[as->ndim - 1];
    x.a_batch = as->ndim > 2 ? x.m * x.k : 0;
    x.b_batch = bs->ndim > 2 ? x.k * x.n : 0;
    x.a_sm = ta ? 1 : x.k;
    x.a_sk = ta ? x.m : 1;
    x.b_sk = tb ? 1 : x.n;
    x.b_sn = tb ? x.k : 1;
    int64_t mn = x.m * x.n;
    x.rows = mn ? sn_shape_numel(os) / x.n : 0;
    if (x.rows == 0) return SN_OK;
    if (x.k == 0) { /* an empty sum: zeros */
        for (int64_t i = 0; i < x.rows * x.n; i++) sn_store(c->y.dtype, c->out, i, 0.0);
        return SN_OK;
    }
    int nth = ref_threads(x.rows, x.rows * x.n * x.k);
    if (nth == 1)
        mm_rows(&x, 0, 1);
    else
        sn_parallel(mm_rows, &x, nth);
    return SN_OK;
}

static const sn_kernel k_matmul = REF_KERNEL(matmul_run);

void sn_ref_register_matmul(sn_kernel_table *t) { t->k[SN_OP_MATMUL] = &k_matmul; }
