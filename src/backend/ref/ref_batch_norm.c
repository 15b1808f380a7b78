/* Reference kernels of the fused BatchNormalization training ops (graph/op_batch_norm.c): any
 * float dtype, computed in double, the textbook formulas the CPU kernels are checked against.
 * x is [M, C] viewed from [..., C]; stats [2, C] is mean | biased variance. */
#include <stdlib.h>

#include "backend/ref/ref_common.h"

static void dims(const sn_kcall *c, int64_t *M, int64_t *C) {
    const sn_shape *xs = &c->x[0].shape;
    *C = xs->dim[xs->ndim - 1];
    *M = *C ? sn_shape_numel(xs) / *C : 0;
}

/* (x) -> [2, C] */
static sn_status stats_run(sn_kcall *c) {
    int64_t M, C;
    dims(c, &M, &C);
    sn_dtype t = c->x[0].dtype;
    for (int64_t j = 0; j < C; j++) {
        double m = 0, v = 0;
        for (int64_t r = 0; r < M; r++) m += sn_load(t, c->in[0], r * C + j);
        m = M ? m / (double)M : 0;
        for (int64_t r = 0; r < M; r++) {
            double d = sn_load(t, c->in[0], r * C + j) - m;
            v += d * d;
        }
        sn_store(c->y.dtype, c->out, j, m);
        sn_store(c->y.dtype, c->out, C + j, M ? v / (double)M : 0);
    }
    return SN_OK;
}

static double rstd(const sn_kcall *c, int64_t C, int64_t j) {
    return 1.0 / sqrt(sn_load(c->x[1].dtype, c->in[1], C + j) + c->attr->norm.epsilon);
}

/* (x, stats, gamma, beta) -> y */
static sn_status train_run(sn_kcall *c) {
    int64_t M, C;
    dims(c, &M, &C);
    sn_dtype t = c->x[0].dtype;
    for (int64_t j = 0; j < C; j++) {
        double m = sn_load(t, c->in[1], j), s = rstd(c, C, j);
        double ga = sn_load(t, c->in[2], j), be = sn_load(t, c->in[3], j);
        for (int64_t r = 0; r < M; r++)
            sn_store(c->y.dtype, c->out, r * C + j,
                     (sn_load(t, c->in[0], r * C + j) - m) * s * ga + be);
    }
    return SN_OK;
}

/* (x, stats, dy) -> dgamma | dbeta */
static sn_status grad_params_run(sn_kcall *c) {
    int64_t M, C;
    dims(c, &M, &C);
    sn_dtype t = c->x[0].dtype;
    for (int64_t j = 0; j < C; j++) {
        double m = sn_load(t, c->in[1], j), s = rstd(c, C, j), dg = 0, db = 0;
        for (int64_t r = 0; r < M; r++) {
            double dy = sn_load(t, c->in[2], r * C + j);
            dg += dy * (sn_load(t, c->in[0], r * C + j) - m) * s;
            db += dy;
        }
        sn_store(c->y.dtype, c->out, j, dg);
        sn_store(c->y.dtype, c->out, C + j, db);
    }
    return SN_OK;
}

/* (x, stats, gamma, dy, dparams) -> dx = gamma rstd (dy - (dbeta + xh dgamma) / M) */
static sn_status grad_x_run(sn_kcall *c) {
    int64_t M, C;
    dims(c, &M, &C);
    sn_dtype t = c->x[0].dtype;
    for (int64_t j = 0; j < C; j++) {
        double m = sn_load(t, c->in[1], j), s = rstd(c, C, j), ga = sn_load(t, c->in[2], j);
        double dg = sn_load(t, c->in[4], j), db = sn_load(t, c->in[4], C + j);
        for (int64_t r = 0; r < M; r++) {
            double xh = (sn_load(t, c->in[0], r * C + j) - m) * s;
            double dy = sn_load(t, c->in[3], r * C + j);
            sn_store(c->y.dtype, c->out, r * C + j,
                     ga * s * (dy - (db + xh * dg) / (double)M));
        }
    }
    return SN_OK;
}

static const sn_kernel k_stats = REF_KERNEL(stats_run), k_train = REF_KERNEL(train_run),
                       k_gp = REF_KERNEL(grad_params_run), k_gx = REF_KERNEL(grad_x_run);

void sn_ref_register_batch_norm(sn_kernel_table *t) {
    t->k[SN_OP_BN_STATS] = &k_stats;
    t->k[SN_OP_BN_TRAIN] = &k_train;
    t->k[SN_OP_BN_GRAD_PARAMS] = &k_gp;
    t->k[SN_OP_BN_GRAD_X] = &k_gx;
}
