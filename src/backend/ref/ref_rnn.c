/* Reference kernels of the recurrent ops (graph/op_rnn.h): plain loops in double over any
 * float dtype, one (batch row, step) at a time, written to be read next to the equations in
 * Keras's LSTMCell / GRUCell (reset_after=True and False). The fast f32 kernels
 * (backend/cpu/cpu_rnn.c, cpu_gru_rb.c) are tested against these. */
#include <stdlib.h>

#include "backend/ref/ref_common.h"

static double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }

typedef struct rnn_dims {
    int64_t B, T, U;
} rnn_dims;

/* From xw/ws [B, T, *] (input 0 or 2) and r [U, *]. */
static rnn_dims dims_of(const sn_kcall *c, int seq_input, int r_input) {
    const sn_shape *s = &c->x[seq_input].shape;
    return (rnn_dims){s->dim[0], s->dim[1], c->x[r_input].shape.dim[0]};
}

/* y[k] += sum_m h[m] * r[m, k0 + k] for k < n (r is [U, ld]): a column block of r. */
static void add_hr_cols(const sn_kcall *c, int r_in, const double *h, int64_t U, int64_t ld,
                        int64_t k0, int64_t n, double *y) {
    sn_dtype tr = c->x[r_in].dtype;
    for (int64_t m = 0; m < U; m++)
        for (int64_t k = 0; k < n; k++) y[k] += h[m] * sn_load(tr, c->in[r_in], m * ld + k0 + k);
}

/* y[m] += sum_k d[k] * r[m, k0 + k] for m < U, k < n: the gradient through a column block. */
static void add_dr_cols(const sn_kcall *c, int r_in, const double *d, int64_t U, int64_t ld,
                        int64_t k0, int64_t n, double *y) {
    sn_dtype tr = c->x[r_in].dtype;
    for (int64_t m = 0; m < U; m++) {
        double s = 0;
        for (int64_t k = 0; k < n; k++) s += d[k] * sn_load(tr, c->in[r_in], m * ld + k0 + k);
        y[m] += s;
    }
}

/* The state h (slot 0 of the workspace) that step t of row b started from. */
static void load_prev_h(const sn_kcall *c, const void *ws, int64_t width, int h0_in,
                        rnn_dims d, int64_t b, int64_t t, double *h) {
    sn_dtype tw = c->y.dtype;
    for (int64_t j = 0; j < d.U; j++)
        h[j] = t == 0 ? sn_load(c->x[h0_in].dtype, c->in[h0_in], b * d.U + j)
                      : sn_load(tw, ws, ((b * d.T) + t - 1) * width + j);
}

/* xw [B,T,4U], r [U,4U], h0 [B,U], c0 [B,U] -> ws [B,T,6U] = h | c | i | f | g | o */
static sn_status lstm_run(sn_kcall *c) {
    rnn_dims d = dims_of(c, 0, 1);
    int64_t U = d.U, G = 4 * U, W = SN_LSTM_WS * U;
    sn_dtype tx = c->x[0].dtype, to = c->y.dtype;
    double *pre = sn_malloc(sizeof *pre * (size_t)(G + U));
    if (!pre) return SN_ERR_NOMEM;
    double *hp = pre + G;
    for (int64_t b = 0; b < d.B; b++) {
        for (int64_t t = 0; t < d.T; t++) {
            load_prev_h(c, c->out, W, 2, d, b, t, hp);
            for (int64_t k = 0; k < G; k++) pre[k] = sn_load(tx, c->in[0], (b * d.T + t) * G + k);
            add_hr_cols(c, 1, hp, U, G, 0, G, pre);
            int64_t row = (b * d.T + t) * W;
            for (int64_t j = 0; j < U; j++) {
                double cp = t == 0 ? sn_load(c->x[3].dtype, c->in[3], b * U + j)
                                   : sn_load(to, c->out, row - W + U + j);
                double i = sigm(pre[j]), f = sigm(pre[U + j]), g = tanh(pre[2 * U + j]),
                       o = sigm(pre[3 * U + j]);
                double cn = f * cp + i * g;
                sn_store(to, c->out, row + j, o * tanh(cn));
                sn_store(to, c->out, row + U + j, cn);
                sn_store(to, c->out, row + 2 * U + j, i);
                sn_store(to, c->out, row + 3 * U + j, f);
                sn_store(to, c->out, row + 4 * U + j, g);
                sn_store(to, c->out, row + 5 * U + j, o);
            }
        }
    }
    free(pre);
    return SN_OK;
}

/* r [U,4U], c0 [B,U], ws [B,T,6U], dws [B,T,6U] -> dxw [B,T,4U] (pre-activation gates) */
static sn_status lstm_grad_run(sn_kcall *c) {
    rnn_dims d = dims_of(c, 2, 0);
    int64_t U = d.U, G = 4 * U, W = SN_LSTM_WS * U;
    sn_dtype tw = c->x[2].dtype, tdy = c->x[3].dtype, to = c->y.dtype;
    const void *ws = c->in[2], *dws = c->in[3];
    double *buf = sn_malloc(sizeof *buf * (size_t)(G + 2 * U));
    if (!buf) return SN_ERR_NOMEM;
    double *dg = buf, *dh_next = buf + G, *dc_next = dh_next + U;
    for (int64_t b = 0; b < d.B; b++) {
        for (int64_t j = 0; j < 2 * U; j++) dh_next[j] = 0; /* and dc_next */
        for (int64_t t = d.T - 1; t >= 0; t--) {
            int64_t row = (b * d.T + t) * W;
            for (int64_t j = 0; j < U; j++) {
                double cn = sn_load(tw, ws, row + U + j), tc = tanh(cn);
                double i = sn_load(tw, ws, row + 2 * U + j), f = sn_load(tw, ws, row + 3 * U + j),
                       g = sn_load(tw, ws, row + 4 * U + j), o = sn_load(tw, ws, row + 5 * U + j);
                double cp = t == 0 ? sn_load(c->x[1].dtype, c->in[1], b * U + j)
                                   : sn_load(tw, ws, row - W + U + j);
                double dh = sn_load(tdy, dws, row + j) + dh_next[j];
                double dc = sn_load(tdy, dws, row + U + j) + dc_next[j] + dh * o * (1 - tc * tc);
                dg[j] = dc * g * i * (1 - i);
                dg[U + j] = dc * cp * f * (1 - f);
                dg[2 * U + j] = dc * i * (1 - g * g);
                dg[3 * U + j] = dh * tc * o * (1 - o);
                dc_next[j] = dc * f;
                dh_next[j] = 0;
            }
            add_dr_cols(c, 0, dg, U, G, 0, G, dh_next);
            for (int64_t k = 0; k < G; k++) sn_store(to, c->out, (b * d.T + t) * G + k, dg[k]);
        }
    }
    free(buf);
    return SN_OK;
}

/* xw [B,T,3U], r [U,3U], rb [3U], h0 [B,U] -> ws [B,T,5U] = h | z | r | hh | rh */
static sn_status gru_run(sn_kcall *c) {
    rnn_dims d = dims_of(c, 0, 1);
    int64_t U = d.U, G = 3 * U, W = 5 * U;
    sn_dtype tx = c->x[0].dtype, tb = c->x[2].dtype, to = c->y.dtype;
    double *rec = sn_malloc(sizeof *rec * (size_t)(G + U));
    if (!rec) return SN_ERR_NOMEM;
    double *hp = rec + G;
    for (int64_t b = 0; b < d.B; b++) {
        for (int64_t t = 0; t < d.T; t++) {
            load_prev_h(c, c->out, W, 3, d, b, t, hp);
            for (int64_t k = 0; k < G; k++) rec[k] = sn_load(tb, c->in[2], k);
            add_hr_cols(c, 1, hp, U, G, 0, G, rec);
            int64_t x = (b * d.T + t) * G, row = (b * d.T + t) * W;
            for (int64_t j = 0; j < U; j++) {
                double z = sigm(sn_load(tx, c->in[0], x + j) + rec[j]);
                double r = sigm(sn_load(tx, c->in[0], x + U + j) + rec[U + j]);
                double hh = tanh(sn_load(tx, c->in[0], x + 2 * U + j) + r * rec[2 * U + j]);
                sn_store(to, c->out, row + j, z * hp[j] + (1 - z) * hh);
                sn_store(to, c->out, row + U + j, z);
                sn_store(to, c->out, row + 2 * U + j, r);
                sn_store(to, c->out, row + 3 * U + j, hh);
                sn_store(to, c->out, row + 4 * U + j, rec[2 * U + j]);
            }
        }
    }
    free(rec);
    return SN_OK;
}

/* r [U,3U], h0 [B,U], ws [B,T,5U], dws [B,T,5U] -> [B,T,6U] = dxw (z, r, h) | drec (z, r, h) */
static sn_status gru_grad_run(sn_kcall *c) {
    rnn_dims d = dims_of(c, 2, 0);
    int64_t U = d.U, G = 3 * U, W = 5 * U;
    sn_dtype tw = c->x[2].dtype, tdy = c->x[3].dtype, to = c->y.dtype;
    const void *ws = c->in[2], *dws = c->in[3];
    double *buf = sn_malloc(sizeof *buf * (size_t)(2 * G + 2 * U));
    if (!buf) return SN_ERR_NOMEM;
    double *dx = buf, *drec = buf + G, *dh_next = drec + G, *hp = dh_next + U;
    for (int64_t b = 0; b < d.B; b++) {
        for (int64_t j = 0; j < U; j++) dh_next[j] = 0;
        for (int64_t t = d.T - 1; t >= 0; t--) {
            int64_t row = (b * d.T + t) * W;
            load_prev_h(c, ws, W, 1, d, b, t, hp);
            for (int64_t j = 0; j < U; j++) {
                double z = sn_load(tw, ws, row + U + j), r = sn_load(tw, ws, row + 2 * U + j),
                       hh = sn_load(tw, ws, row + 3 * U + j), rh = sn_load(tw, ws, row + 4 * U + j);
                double dh = sn_load(tdy, dws, row + j) + dh_next[j];
                double dz = dh * (hp[j] - hh) * z * (1 - z);
                double dhh = dh * (1 - z) * (1 - hh * hh);
                double dr = dhh * rh * r * (1 - r);
                dx[j] = drec[j] = dz;
                dx[U + j] = drec[U + j] = dr;
                dx[2 * U + j] = dhh;
                drec[2 * U + j] = dhh * r;
                dh_next[j] = dh * z;
            }
            add_dr_cols(c, 0, drec, U, G, 0, G, dh_next);
            int64_t o = (b * d.T + t) * 2 * G;
            for (int64_t k = 0; k < G; k++) {
                sn_store(to, c->out, o + k, dx[k]);
                sn_store(to, c->out, o + G + k, drec[k]);
            }
        }
    }
    free(buf);
    return SN_OK;
}

/* Keras reset_after=False: xw [B,T,3U] (whole bias in), r [U,3U], h0 [B,U]
 * -> ws [B,T,5U] = h | z | r | hh | rh, rh = r * h_prev; hh = tanh(xw_h + rh @ r_h). */
static sn_status gru_rb_run(sn_kcall *c) {
    rnn_dims d = dims_of(c, 0, 1);
    int64_t U = d.U, G = 3 * U, W = SN_GRU_WS * U;
    sn_dtype tx = c->x[0].dtype, to = c->y.dtype;
    double *buf = sn_malloc(sizeof *buf * (size_t)(5 * U));
    if (!buf) return SN_ERR_NOMEM;
    double *rec = buf, *hp = buf + 2 * U, *rh = hp + U, *rech = rh + U;
    for (int64_t b = 0; b < d.B; b++) {
        for (int64_t t = 0; t < d.T; t++) {
            load_prev_h(c, c->out, W, 2, d, b, t, hp);
            for (int64_t k = 0; k < 2 * U; k++) rec[k] = 0;
            add_hr_cols(c, 1, hp, U, G, 0, 2 * U, rec);
            int64_t x = (b * d.T + t) * G, row = (b * d.T + t) * W;
            for (int64_t j = 0; j < U; j++) {
                double z = sigm(sn_load(tx, c->in[0], x + j) + rec[j]);
                double r = sigm(sn_load(tx, c->in[0], x + U + j) + rec[U + j]);
                rh[j] = r * hp[j];
                rech[j] = 0;
                sn_store(to, c->out, row + U + j, z);
                sn_store(to, c->out, row + 2 * U + j, r);
                sn_store(to, c->out, row + 4 * U + j, rh[j]);
            }
            add_hr_cols(c, 1, rh, U, G, 2 * U, U, rech);
            for (int64_t j = 0; j < U; j++) {
                double z = sn_load(to, c->out, row + U + j);
                double hh = tanh(sn_load(tx, c->in[0], x + 2 * U + j) + rech[j]);
                sn_store(to, c->out, row + j, z * hp[j] + (1 - z) * hh);
                sn_store(to, c->out, row + 3 * U + j, hh);
            }
        }
    }
    free(buf);
    return SN_OK;
}

/* r [U,3U], h0 [B,U], ws [B,T,5U], dws [B,T,5U] -> dxw [B,T,3U] (pre-activation z, r, h) */
static sn_status gru_rb_grad_run(sn_kcall *c) {
    rnn_dims d = dims_of(c, 2, 0);
    int64_t U = d.U, G = 3 * U, W = SN_GRU_WS * U;
    sn_dtype tw = c->x[2].dtype, tdy = c->x[3].dtype, to = c->y.dtype;
    const void *ws = c->in[2], *dws = c->in[3];
    double *buf = sn_malloc(sizeof *buf * (size_t)(G + 3 * U));
    if (!buf) return SN_ERR_NOMEM;
    double *dg = buf, *dh_next = buf + G, *hp = dh_next + U, *a = hp + U;
    for (int64_t b = 0; b < d.B; b++) {
        for (int64_t j = 0; j < U; j++) dh_next[j] = 0;
        for (int64_t t = d.T - 1; t >= 0; t--) {
            int64_t row = (b * d.T + t) * W;
            load_prev_h(c, ws, W, 1, d, b, t, hp);
            for (int64_t j = 0; j < U; j++) {
                double z = sn_load(tw, ws, row + U + j), hh = sn_load(tw, ws, row + 3 * U + j);
                double dh = sn_load(tdy, dws, row + j) + dh_next[j];
                dg[j] = dh * (hp[j] - hh) * z * (1 - z);
                dg[2 * U + j] = dh * (1 - z) * (1 - hh * hh);
                dh_next[j] = dh * z;
                a[j] = 0;
            }
            /* a = dhh @ r_h^T: the gradient reaching r * h_prev */
            add_dr_cols(c, 0, dg + 2 * U, U, G, 2 * U, U, a);
            for (int64_t j = 0; j < U; j++) {
                double r = sn_load(tw, ws, row + 2 * U + j);
                dg[U + j] = a[j] * hp[j] * r * (1 - r);
                dh_next[j] += a[j] * r;
            }
            add_dr_cols(c, 0, dg, U, G, 0, 2 * U, dh_next);
            for (int64_t k = 0; k < G; k++) sn_store(to, c->out, (b * d.T + t) * G + k, dg[k]);
        }
    }
    free(buf);
    return SN_OK;
}

/* lstm_dense_step: (xw [B, 4U], r [U, 4U], h, c [B, U], wd [U, V], bd [V]) -> [B, 2U + V],
 * per row h' | c' | h' @ wd + bd. */
static sn_status lstm_dense_step_run(sn_kcall *c) {
    int64_t B = c->x[0].shape.dim[0], U = c->x[1].shape.dim[0], V = c->x[4].shape.dim[1];
    double *z = malloc(sizeof(double) * (size_t)(5 * U));
    if (!z) return SN_ERR_NOMEM;
    double *h = z + 4 * U;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t u = 0; u < U; u++) h[u] = sn_load(c->x[2].dtype, c->in[2], b * U + u);
        for (int64_t k = 0; k < 4 * U; k++) z[k] = sn_load(c->x[0].dtype, c->in[0], b * 4 * U + k);
        add_hr_cols(c, 1, h, U, 4 * U, 0, 4 * U, z);
        int64_t row = b * (2 * U + V);
        for (int64_t u = 0; u < U; u++) {
            double i = sigm(z[u]), f = sigm(z[U + u]), g = tanh(z[2 * U + u]),
                   o = sigm(z[3 * U + u]);
            double cn = f * sn_load(c->x[3].dtype, c->in[3], b * U + u) + i * g;
            sn_store(c->y.dtype, c->out, row + U + u, cn);
            h[u] = o * tanh(cn);
            sn_store(c->y.dtype, c->out, row + u, h[u]);
        }
        for (int64_t v = 0; v < V; v++) {
            double y = sn_load(c->x[5].dtype, c->in[5], v);
            for (int64_t u = 0; u < U; u++) y += h[u] * sn_load(c->x[4].dtype, c->in[4], u * V + v);
            sn_store(c->y.dtype, c->out, row + 2 * U + v, y);
        }
    }
    free(z);
    return SN_OK;
}

static const sn_kernel k_lstm = REF_KERNEL(lstm_run), k_lstm_grad = REF_KERNEL(lstm_grad_run),
                       k_gru = REF_KERNEL(gru_run), k_gru_grad = REF_KERNEL(gru_grad_run),
                       k_gru_rb = REF_KERNEL(gru_rb_run),
                       k_gru_rb_grad = REF_KERNEL(gru_rb_grad_run),
                       k_lstm_dense_step = REF_KERNEL(lstm_dense_step_run);

void sn_ref_register_rnn(sn_kernel_table *t) {
    t->k[SN_OP_LSTM] = &k_lstm;
    t->k[SN_OP_LSTM_GRAD] = &k_lstm_grad;
    t->k[SN_OP_GRU] = &k_gru;
    t->k[SN_OP_GRU_GRAD] = &k_gru_grad;
    t->k[SN_OP_GRU_RB] = &k_gru_rb;
    t->k[SN_OP_GRU_RB_GRAD] = &k_gru_rb_grad;
    t->k[SN_OP_LSTM_DENSE_STEP] = &k_lstm_dense_step;
}
