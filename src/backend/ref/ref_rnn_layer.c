/* Reference kernels of the whole-layer recurrent ops (graph/op_rnn.h, lstm_layer and
 * gru_layer): plain loops in double over any float dtype, one batch row at a time, written to
 * be read next to Keras's cells. LSTMCell: gates = x_t W + h_{t-1} R + b, i f g o = sigmoid,
 * sigmoid, tanh, sigmoid, c_t = f c_{t-1} + i g, h_t = o tanh(c_t). GRUCell (reset_after=True,
 * the bias in oneDNN's four parts, op_rnn.h): z, r = sigmoid(x W_zr + h R_zr + b_zr),
 * hh = tanh(x W_h + b_h + r (h R_h + b_h')), h_t = z h_{t-1} + (1 - z) hh. The gradients
 * recompute the row's forward (a reference keeps no state between calls) and run
 * backpropagation through time. The fast kernels (backend/cpu/cpu_rnn_layer.c, oneDNN) are
 * tested against these. */
#include <stdlib.h>

#include "backend/ref/ref_common.h"

static double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }

typedef struct layer_dims {
    int64_t B, T, D, U, G, TY; /* TY: rows of the output per batch row (T, or T + 1: keep_c) */
} layer_dims;

static layer_dims dims_of(const sn_kcall *c) {
    const sn_shape *x = &c->x[0].shape, *r = &c->x[2].shape;
    return (layer_dims){x->dim[0], x->dim[1], x->dim[2], r->dim[0], r->dim[1],
                        x->dim[1] + (c->attr->lstm.keep_c ? 1 : 0)};
}

static double in_at(const sn_kcall *c, int i, int64_t k) {
    return sn_load(c->x[i].dtype, c->in[i], k);
}

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

/* ---- GRU (reset_after=True) ---------------------------------------------------------------- */
/* x_t W + b (the input's parts of the gates: b_z, b_r, b_h) into gx [3U]; h_prev R + [0, 0, b_h']
 * into gh [3U]. */
static void gru_products(const sn_kcall *c, layer_dims d, int64_t b, int64_t t, const double *hp,
                         double *gx, double *gh) {
    for (int64_t k = 0; k < d.G; k++) {
        double sx = in_at(c, 3, k), sh = k >= 2 * d.U ? in_at(c, 3, d.U + k) : 0;
        for (int64_t m = 0; m < d.D; m++)
            sx += in_at(c, 0, (b * d.T + t) * d.D + m) * in_at(c, 1, m * d.G + k);
        for (int64_t m = 0; m < d.U; m++) sh += hp[m] * in_at(c, 2, m * d.G + k);
        gx[k] = sx, gh[k] = sh;
    }
}

/* Row b's forward: act [T, 3U] (z, r, hh), ghh [T, U] (h_prev R_h + b_h'), hs [T, U]. */
static void gru_row_forward(const sn_kcall *c, layer_dims d, int64_t b, double *act, double *ghh,
                            double *hs, double *tmp) {
    double *gx = tmp, *gh = tmp + d.G, *h0 = gh + d.G;
    for (int64_t j = 0; j < d.U; j++) h0[j] = in_at(c, 4, b * d.U + j);
    for (int64_t t = 0; t < d.T; t++) {
        const double *hp = t ? hs + (t - 1) * d.U : h0;
        gru_products(c, d, b, t, hp, gx, gh);
        double *a = act + t * d.G;
        for (int64_t j = 0; j < d.U; j++) {
            double z = sigm(gx[j] + gh[j]), r = sigm(gx[d.U + j] + gh[d.U + j]);
            double hh = tanh(gx[2 * d.U + j] + r * gh[2 * d.U + j]);
            a[j] = z, a[d.U + j] = r, a[2 * d.U + j] = hh;
            ghh[t * d.U + j] = gh[2 * d.U + j];
            hs[t * d.U + j] = z * hp[j] + (1 - z) * hh;
        }
    }
}

/* (x, w, r, b, h0) -> y [B, T, U] */
static sn_status gru_layer_run(sn_kcall *c) {
    layer_dims d = dims_of(c);
    double *buf = sn_malloc(sizeof *buf * (size_t)(d.T * (d.G + 2 * d.U) + 2 * d.G + d.U));
    if (!buf) return SN_ERR_NOMEM;
    double *act = buf, *ghh = act + d.T * d.G, *hs = ghh + d.T * d.U, *tmp = hs + d.T * d.U;
    for (int64_t b = 0; b < d.B; b++) {
        gru_row_forward(c, d, b, act, ghh, hs, tmp);
        for (int64_t k = 0; k < d.T * d.U; k++)
            sn_store(c->y.dtype, c->out, b * d.T * d.U + k, hs[k]);
    }
    free(buf);
    return SN_OK;
}

/* (x, w, r, b, h0, y, dy) -> dx [B*T*D] | dw [D*3U] | dr [U*3U] | db [4U] */
static sn_status gru_layer_grad_run(sn_kcall *c) {
    layer_dims d = dims_of(c);
    int64_t U = d.U, G = d.G, nrow = d.T * (G + 2 * U), nw = (d.D + U) * G + 4 * U;
    double *buf = sn_calloc((size_t)(nrow + 2 * G + U + nw + 2 * G + 2 * U), sizeof *buf);
    if (!buf) return SN_ERR_NOMEM;
    double *act = buf, *ghh = act + d.T * G, *hs = ghh + d.T * U, *tmp = hs + d.T * U;
    double *dw = tmp + 2 * G + U, *dr = dw + d.D * G, *db = dr + U * G; /* sums over rows */
    double *dgx = db + 4 * U, *dgh = dgx + G, *dh = dgh + G, *h0 = dh + U;
    sn_dtype ty = c->x[6].dtype, to = c->y.dtype;
    for (int64_t b = 0; b < d.B; b++) {
        gru_row_forward(c, d, b, act, ghh, hs, tmp);
        for (int64_t j = 0; j < U; j++) dh[j] = 0, h0[j] = in_at(c, 4, b * U + j);
        for (int64_t t = d.T - 1; t >= 0; t--) {
            const double *a = act + t * G, *hp = t ? hs + (t - 1) * U : h0;
            for (int64_t j = 0; j < U; j++) {
                double z = a[j], r = a[U + j], hh = a[2 * U + j];
                double h = sn_load(ty, c->in[6], (b * d.T + t) * U + j) + dh[j];
                double dz = h * (hp[j] - hh) * z * (1 - z);
                double dah = h * (1 - z) * (1 - hh * hh); /* hh's pre-activation */
                double dr_ = dah * ghh[t * U + j] * r * (1 - r);
                dgx[j] = dz, dgx[U + j] = dr_, dgx[2 * U + j] = dah;
                dgh[j] = dz, dgh[U + j] = dr_, dgh[2 * U + j] = dah * r;
                dh[j] = h * z; /* the direct path; the recurrent products are added below */
            }
            for (int64_t m = 0; m < d.D; m++) {
                double xv = in_at(c, 0, (b * d.T + t) * d.D + m), s = 0;
                for (int64_t k = 0; k < G; k++) {
                    s += dgx[k] * in_at(c, 1, m * G + k);
                    dw[m * G + k] += xv * dgx[k];
                }
                sn_store(to, c->out, (b * d.T + t) * d.D + m, s);
            }
            for (int64_t m = 0; m < U; m++) {
                double s = 0;
                for (int64_t k = 0; k < G; k++) {
                    s += dgh[k] * in_at(c, 2, m * G + k);
                    dr[m * G + k] += hp[m] * dgh[k];
                }
                dh[m] += s;
            }
            for (int64_t k = 0; k < G; k++) db[k] += dgx[k];
            for (int64_t j = 0; j < U; j++) db[3 * U + j] += dgh[2 * U + j];
        }
    }
    int64_t off = d.B * d.T * d.D;
    for (int64_t k = 0; k < nw; k++) sn_store(to, c->out, off + k, dw[k]);
    free(buf);
    return SN_OK;
}

static const sn_kernel k_layer = REF_KERNEL(lstm_layer_run),
                       k_layer_grad = REF_KERNEL(lstm_layer_grad_run),
                       k_gru_layer = REF_KERNEL(gru_layer_run),
                       k_gru_layer_grad = REF_KERNEL(gru_layer_grad_run);

void sn_ref_register_rnn_layer(sn_kernel_table *t) {
    t->k[SN_OP_LSTM_LAYER] = &k_layer;
    t->k[SN_OP_LSTM_LAYER_GRAD] = &k_layer_grad;
    t->k[SN_OP_GRU_LAYER] = &k_gru_layer;
    t->k[SN_OP_GRU_LAYER_GRAD] = &k_gru_layer_grad;
}
