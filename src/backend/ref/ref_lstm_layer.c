/* Reference kernels of the whole LSTM layer (graph/op_rnn.h, lstm_layer): plain loops in
 * double over any float dtype, one batch row at a time, written to be read next to Keras's
 * LSTMCell: gates = x_t W + h_{t-1} R + b, i f g o = sigmoid, sigmoid, tanh, sigmoid,
 * c_t = f c_{t-1} + i g, h_t = o tanh(c_t). The gradient recomputes the row's forward (a
 * reference keeps no state between calls) and runs backpropagation through time. The fast
 * kernels (backend/cpu/cpu_lstm_layer.c, oneDNN) are tested against these. */
#include <stdlib.h>

#include "backend/ref/ref_common.h"

static double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }

typedef struct layer_dims {
    int64_t B, T, D, U, G, TY; /* TY: rows of the output per batch row (T, or T + 1: keep_c) */
} layer_dims;

static layer_dims dims_of(const sn_kcall *c) {
    const sn_shape *x = &c->x[0].shape;
    int64_t U = c->x[2].shape.dim[0];
    return (layer_dims){x->dim[0], x->dim[1], x->dim[2], U, 4 * U,
                        x->dim[1] + (c->attr->lstm.keep_c ? 1 : 0)};
}

static double in_at(const sn_kcall *c, int i, int64_t k) { return sn_load(c->x[i].dtype, c->in[i], k); }

/* Row b's forward: act [T, G] (activated gates i f g o), cs [T, U], hs [T, U]. */
static void row_forward(const sn_kcall *c, layer_dims d, int64_t b, double *act, double *cs,
                        double *hs) {
    for (int64_t t = 0; t < d.T; t++) {
        double *a = act + t * d.G;
        for (int64_t k = 0; k < d.G; k++) {
            double s = in_at(c, 3, k);
            for (int64_t m = 0; m < d.D; m++)
                s += in_at(c, 0, (b * d.T + t) * d.D + m) * in_at(c, 1, m * d.G + k);
            for (int64_t m = 0; m < d.U; m++) {
                double hp = t ? hs[(t - 1) * d.U + m] : in_at(c, 4, b * d.U + m);
                s += hp * in_at(c, 2, m * d.G + k);
            }
            a[k] = s;
        }
        for (int64_t j = 0; j < d.U; j++) {
            double cp = t ? cs[(t - 1) * d.U + j] : in_at(c, 5, b * d.U + j);
            double i = sigm(a[j]), f = sigm(a[d.U + j]), g = tanh(a[2 * d.U + j]),
                   o = sigm(a[3 * d.U + j]);
            a[j] = i, a[d.U + j] = f, a[2 * d.U + j] = g, a[3 * d.U + j] = o;
            cs[t * d.U + j] = f * cp + i * g;
            hs[t * d.U + j] = o * tanh(cs[t * d.U + j]);
        }
    }
}

/* (x, w, r, b, h0, c0) -> y [B, TY, U] */
static sn_status lstm_layer_run(sn_kcall *c) {
    layer_dims d = dims_of(c);
    double *buf = sn_malloc(sizeof *buf * (size_t)(d.T * (d.G + 2 * d.U)));
    if (!buf) return SN_ERR_NOMEM;
    double *act = buf, *cs = act + d.T * d.G, *hs = cs + d.T * d.U;
    sn_dtype to = c->y.dtype;
    for (int64_t b = 0; b < d.B; b++) {
        row_forward(c, d, b, act, cs, hs);
        for (int64_t t = 0; t < d.T; t++)
            for (int64_t j = 0; j < d.U; j++)
                sn_store(to, c->out, (b * d.TY + t) * d.U + j, hs[t * d.U + j]);
        if (d.TY > d.T)
            for (int64_t j = 0; j < d.U; j++)
                sn_store(to, c->out, (b * d.TY + d.T) * d.U + j, cs[(d.T - 1) * d.U + j]);
    }
    free(buf);
    return SN_OK;
}

/* (x, w, r, b, h0, c0, y, dy) -> dx [B*T*D] | dw [D*G] | dr [U*G] | db [G] */
static sn_status lstm_layer_grad_run(sn_kcall *c) {
    layer_dims d = dims_of(c);
    int64_t nrow = d.T * (d.G + 2 * d.U), nw = (d.D + d.U + 1) * d.G;
    double *buf = sn_calloc((size_t)(nrow + nw + d.G + 2 * d.U), sizeof *buf);
    if (!buf) return SN_ERR_NOMEM;
    double *act = buf, *cs = act + d.T * d.G, *hs = cs + d.T * d.U;
    double *dw = buf + nrow, *dr = dw + d.D * d.G, *db = dr + d.U * d.G; /* sums over rows */
    double *dg = db + d.G, *dh = dg + d.G, *dc = dh + d.U;
    sn_dtype ty = c->x[7].dtype, to = c->y.dtype;
    for (int64_t b = 0; b < d.B; b++) {
        row_forward(c, d, b, act, cs, hs);
        for (int64_t j = 0; j < d.U; j++) {
            dh[j] = 0;
            dc[j] = d.TY > d.T ? sn_load(ty, c->in[7], (b * d.TY + d.T) * d.U + j) : 0;
        }
        for (int64_t t = d.T - 1; t >= 0; t--) {
            const double *a = act + t * d.G;
            for (int64_t j = 0; j < d.U; j++) {
                double i = a[j], f = a[d.U + j], g = a[2 * d.U + j], o = a[3 * d.U + j];
                double tc = tanh(cs[t * d.U + j]);
                double cp = t ? cs[(t - 1) * d.U + j] : in_at(c, 5, b * d.U + j);
                double h = sn_load(ty, c->in[7], (b * d.TY + t) * d.U + j) + dh[j];
                double cc = dc[j] + h * o * (1 - tc * tc);
                dg[j] = cc * g * i * (1 - i);
                dg[d.U + j] = cc * cp * f * (1 - f);
                dg[2 * d.U + j] = cc * i * (1 - g * g);
                dg[3 * d.U + j] = h * tc * o * (1 - o);
                dc[j] = cc * f;
            }
            /* dx_t = dg W^T, dW += x_t^T dg, dR += h_{t-1}^T dg, db += dg, dh = dg R^T */
            for (int64_t m = 0; m < d.D; m++) {
                double xv = in_at(c, 0, (b * d.T + t) * d.D + m), s = 0;
                for (int64_t k = 0; k < d.G; k++) {
                    s += dg[k] * in_at(c, 1, m * d.G + k);
                    dw[m * d.G + k] += xv * dg[k];
                }
                sn_store(to, c->out, (b * d.T + t) * d.D + m, s);
            }
            for (int64_t m = 0; m < d.U; m++) {
                double hp = t ? hs[(t - 1) * d.U + m] : in_at(c, 4, b * d.U + m), s = 0;
                for (int64_t k = 0; k < d.G; k++) {
                    s += dg[k] * in_at(c, 2, m * d.G + k);
                    dr[m * d.G + k] += hp * dg[k];
                }
                dh[m] = s;
            }
            for (int64_t k = 0; k < d.G; k++) db[k] += dg[k];
        }
    }
    int64_t off = d.B * d.T * d.D;
    for (int64_t k = 0; k < nw; k++) sn_store(to, c->out, off + k, dw[k]);
    free(buf);
    return SN_OK;
}

static const sn_kernel k_layer = REF_KERNEL(lstm_layer_run),
                       k_layer_grad = REF_KERNEL(lstm_layer_grad_run);

void sn_ref_register_lstm_layer(sn_kernel_table *t) {
    t->k[SN_OP_LSTM_LAYER] = &k_layer;
    t->k[SN_OP_LSTM_LAYER_GRAD] = &k_layer_grad;
}
