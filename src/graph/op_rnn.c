/* Recurrent ops: LSTM and GRU over a whole sequence, and their gradients (op_rnn.h says what
 * the workspaces hold). The recurrence is the only part that cannot be one big GEMM, so the
 * ops cover exactly that: the input projection x @ W (+ b) before them and the weight
 * gradients W^T dgates, h_prev^T dgates after them are ordinary matmul nodes built here and by
 * the layers, which the planner runs as single large GEMMs over all B * T rows.
 *
 *   lstm:      (xw [B,T,4U], r [U,4U], h0 [B,U], c0 [B,U]) -> ws [B,T,6U]
 *   lstm_grad: (r, c0, ws, dws [B,T,6U]) -> dxw [B,T,4U] (pre-activation gate gradients)
 *   gru:       (xw [B,T,3U], r [U,3U], rb [3U], h0 [B,U]) -> ws [B,T,5U]
 *   gru_grad:  (r, h0, ws, dws [B,T,5U]) -> [B,T,6U]: dxw (3U) | drec (3U), the gradients of
 *              x @ W + b_in and of h_prev @ r + rb (they differ in the h part: r * ...)
 *   gru_reset_before:      (xw [B,T,3U], r [U,3U], h0 [B,U]) -> ws [B,T,5U]
 *   gru_reset_before_grad: (r, h0, ws, dws [B,T,5U]) -> dxw [B,T,3U]; the recurrent products
 *              take the same pre-activation gradients, so d r is h_prev^T dxw for z and r and
 *              (r * h_prev)^T dxw for h (the rh slot), two GEMMs over all B * T rows */
#include "graph/op_rnn.h"

#define IN(g, node, i) (&(g)->nodes[(node)->in[i]])

static bool same_float(const sn_node_t *a, const sn_node_t *b) {
    return a->dtype == b->dtype && sn_dtype_is_float(a->dtype);
}

/* Checks xw [B, T, G*U], r [U, G*U], h0 (and c0) [B, U]; sets *B, *T, *U. */
static sn_status check_rnn_inputs(const char *op, int gates, const sn_node_t *xw,
                                  const sn_node_t *r, const sn_node_t *h0, const sn_node_t *c0,
                                  int64_t *B, int64_t *T, int64_t *U) {
    char s1[128], s2[128], s3[128];
    if (!same_float(xw, r) || !same_float(xw, h0) || (c0 && !same_float(xw, c0)))
        return sn_errorf(SN_ERR_SHAPE, "%s: inputs must be floats of one dtype, got %s, %s, %s",
                         op, sn_dtype_name(xw->dtype), sn_dtype_name(r->dtype),
                         sn_dtype_name(h0->dtype));
    if (r->shape.ndim != 2 || r->shape.dim[1] != gates * r->shape.dim[0] || r->shape.dim[0] < 1)
        return sn_errorf(SN_ERR_SHAPE, "%s: recurrent kernel must be [U, %d*U], got %s", op,
                         gates, sn_shape_str(&r->shape, s1, sizeof s1));
    *U = r->shape.dim[0];
    if (xw->shape.ndim != 3 || xw->shape.dim[2] != gates * *U)
        return sn_errorf(SN_ERR_SHAPE, "%s: input projection must be [B, T, %lld], got %s", op,
                         (long long)(gates * *U), sn_shape_str(&xw->shape, s1, sizeof s1));
    *B = xw->shape.dim[0];
    *T = xw->shape.dim[1];
    sn_shape hs = {.ndim = 2, .dim = {*B, *U}};
    if (!sn_shape_equal(&h0->shape, &hs) || (c0 && !sn_shape_equal(&c0->shape, &hs)))
        return sn_errorf(SN_ERR_SHAPE, "%s: initial state must be %s, got %s%s%s", op,
                         sn_shape_str(&hs, s1, sizeof s1), sn_shape_str(&h0->shape, s2, sizeof s2),
                         c0 ? " and " : "", c0 ? sn_shape_str(&c0->shape, s3, sizeof s3) : "");
    return SN_OK;
}

static sn_status infer_lstm(const sn_graph *g, sn_node_t *node) {
    int64_t B = 0, T = 0, U = 0;
    SN_TRY(check_rnn_inputs("lstm", 4, IN(g, node, 0), IN(g, node, 1), IN(g, node, 2),
                            IN(g, node, 3), &B, &T, &U));
    node->shape = (sn_shape){.ndim = 3, .dim = {B, T, SN_LSTM_WS * U}};
    node->dtype = IN(g, node, 0)->dtype;
    return SN_OK;
}

static sn_status infer_gru_rb(const sn_graph *g, sn_node_t *node) {
    int64_t B = 0, T = 0, U = 0;
    SN_TRY(check_rnn_inputs("gru_reset_before", 3, IN(g, node, 0), IN(g, node, 1),
                            IN(g, node, 2), NULL, &B, &T, &U));
    node->shape = (sn_shape){.ndim = 3, .dim = {B, T, SN_GRU_WS * U}};
    node->dtype = IN(g, node, 0)->dtype;
    return SN_OK;
}

static sn_status infer_gru(const sn_graph *g, sn_node_t *node) {
    int64_t B = 0, T = 0, U = 0;
    SN_TRY(check_rnn_inputs("gru", 3, IN(g, node, 0), IN(g, node, 1), IN(g, node, 3), NULL,
                            &B, &T, &U));
    const sn_node_t *rb = IN(g, node, 2);
    char s1[128];
    if (!same_float(rb, IN(g, node, 0)) || rb->shape.ndim != 1 || rb->shape.dim[0] != 3 * U)
        return sn_errorf(SN_ERR_SHAPE, "gru: recurrent bias must be [%lld] of the inputs' dtype, "
                         "got %s %s", (long long)(3 * U), sn_dtype_name(rb->dtype),
                         sn_shape_str(&rb->shape, s1, sizeof s1));
    node->shape = (sn_shape){.ndim = 3, .dim = {B, T, SN_GRU_WS * U}};
    node->dtype = IN(g, node, 0)->dtype;
    return SN_OK;
}

/* Gradient ops are built only by the rules below, from shapes already checked. */
static sn_status infer_rnn_grad(const sn_graph *g, sn_node_t *node, int gates_out) {
    const sn_node_t *r = IN(g, node, 0), *ws = IN(g, node, 2);
    node->shape = ws->shape;
    node->shape.dim[2] = gates_out * r->shape.dim[0];
    node->dtype = ws->dtype;
    return SN_OK;
}
static sn_status infer_lstm_grad(const sn_graph *g, sn_node_t *node) {
    return infer_rnn_grad(g, node, 4);
}
static sn_status infer_gru_grad(const sn_graph *g, sn_node_t *node) {
    return infer_rnn_grad(g, node, 6);
}
static sn_status infer_gru_rb_grad(const sn_graph *g, sn_node_t *node) {
    return infer_rnn_grad(g, node, 3);
}

sn_node sn_lstm_seq(sn_graph *g, sn_node xw, sn_node r, sn_node h0, sn_node c0) {
    return sn_graph_add(g, SN_OP_LSTM, 4, (sn_node[]){xw, r, h0, c0}, NULL);
}

sn_node sn_gru_seq(sn_graph *g, sn_node xw, sn_node r, sn_node rb, sn_node h0) {
    return sn_graph_add(g, SN_OP_GRU, 4, (sn_node[]){xw, r, rb, h0}, NULL);
}

sn_node sn_gru_rb_seq(sn_graph *g, sn_node xw, sn_node r, sn_node h0) {
    return sn_graph_add(g, SN_OP_GRU_RB, 3, (sn_node[]){xw, r, h0}, NULL);
}

sn_node sn_rnn_slot_seq(sn_graph *g, sn_node ws, int64_t units, int slot) {
    if (!g || g->status != SN_OK) return SN_NONE;
    sn_shape s = g->nodes[ws].shape;
    int64_t begin[3] = {0, 0, slot * units}, size[3] = {s.dim[0], s.dim[1], units};
    return sn_slice(g, ws, begin, size);
}

sn_node sn_rnn_slot_last(sn_graph *g, sn_node ws, int64_t units, int slot) {
    if (!g || g->status != SN_OK) return SN_NONE;
    sn_shape s = g->nodes[ws].shape;
    int64_t begin[3] = {0, s.dim[1] - 1, slot * units}, size[3] = {s.dim[0], 1, units};
    sn_node y = sn_slice(g, ws, begin, size);
    return sn_reshape(g, y, &(sn_shape){.ndim = 2, .dim = {s.dim[0], units}});
}

/* [B, T, U]: the state each step started from, h0 then h_1 .. h_{T-1}. */
static sn_node prev_h(sn_graph *g, sn_node ws, sn_node h0, int64_t U) {
    sn_shape s = g->nodes[ws].shape;
    int64_t B = s.dim[0], T = s.dim[1];
    sn_node first = sn_reshape(g, h0, &(sn_shape){.ndim = 3, .dim = {B, 1, U}});
    if (T == 1) return first;
    int64_t begin[3] = {0, 0, 0}, size[3] = {B, T - 1, U};
    return sn_concat(g, 2, (sn_node[]){first, sn_slice(g, ws, begin, size)}, 1);
}

/* d r = sum over (b, t) of h_prev^T d(h_prev @ r): one GEMM over all B * T rows. */
static sn_node recurrent_kernel_grad(sn_graph *g, sn_node ws, sn_node h0, sn_node drec,
                                     int64_t U) {
    sn_shape s = g->nodes[drec].shape;
    int64_t rows = s.dim[0] * s.dim[1];
    sn_node hp = sn_reshape(g, prev_h(g, ws, h0, U), &(sn_shape){.ndim = 2, .dim = {rows, U}});
    sn_node d = sn_reshape(g, drec, &(sn_shape){.ndim = 2, .dim = {rows, s.dim[2]}});
    return sn_matmul(g, hp, d, true, false);
}

static void grad_lstm(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_node r = node.in[1], h0 = node.in[2], c0 = node.in[3];
    int64_t U = g->nodes[r].shape.dim[0];
    sn_node dg = sn_graph_add(g, SN_OP_LSTM_GRAD, 4, (sn_node[]){r, c0, n, dy}, NULL);
    dx[0] = dg;
    dx[1] = recurrent_kernel_grad(g, n, h0, dg, U);
}

static void grad_gru(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_node r = node.in[1], h0 = node.in[3];
    int64_t U = g->nodes[r].shape.dim[0];
    sn_node gg = sn_graph_add(g, SN_OP_GRU_GRAD, 4, (sn_node[]){r, h0, n, dy}, NULL);
    if (gg == SN_NONE) return;
    sn_shape s = g->nodes[gg].shape;
    int64_t b0[3] = {0, 0, 0}, b1[3] = {0, 0, 3 * U}, size[3] = {s.dim[0], s.dim[1], 3 * U};
    sn_node drec = sn_slice(g, gg, b1, size);
    dx[0] = sn_slice(g, gg, b0, size);
    dx[1] = recurrent_kernel_grad(g, n, h0, drec, U);
    dx[2] = sn_reduce_sum(g, drec, 2, (int[]){0, 1}, false);
}

/* d r = [h_prev^T dxw[z, r] | (r * h_prev)^T dxw[h]]. */
static void grad_gru_rb(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_node r = node.in[1], h0 = node.in[2];
    int64_t U = g->nodes[r].shape.dim[0];
    sn_node dg = sn_graph_add(g, SN_OP_GRU_RB_GRAD, 4, (sn_node[]){r, h0, n, dy}, NULL);
    if (dg == SN_NONE) return;
    sn_shape s = g->nodes[dg].shape;
    int64_t B = s.dim[0], T = s.dim[1];
    sn_node dzr = sn_slice(g, dg, (int64_t[]){0, 0, 0}, (int64_t[]){B, T, 2 * U});
    sn_node dh = sn_reshape(g, sn_slice(g, dg, (int64_t[]){0, 0, 2 * U}, (int64_t[]){B, T, U}),
                            &(sn_shape){.ndim = 2, .dim = {B * T, U}});
    sn_node rh = sn_reshape(g, sn_rnn_slot_seq(g, n, U, SN_GRU_RH),
                            &(sn_shape){.ndim = 2, .dim = {B * T, U}});
    dx[0] = dg;
    dx[1] = sn_concat(g, 2, (sn_node[]){recurrent_kernel_grad(g, n, h0, dzr, U),
                                        sn_matmul(g, rh, dh, true, false)}, 1);
}

const sn_op_def sn_def_lstm = {.name = "lstm", .n_in = 4, .infer = infer_lstm, .grad = grad_lstm};
const sn_op_def sn_def_lstm_grad = {.name = "lstm_grad", .n_in = 4, .infer = infer_lstm_grad};
const sn_op_def sn_def_gru = {.name = "gru", .n_in = 4, .infer = infer_gru, .grad = grad_gru};
const sn_op_def sn_def_gru_grad = {.name = "gru_grad", .n_in = 4, .infer = infer_gru_grad};
const sn_op_def sn_def_gru_rb = {.name = "gru_reset_before", .n_in = 3, .infer = infer_gru_rb,
                                  .grad = grad_gru_rb};
const sn_op_def sn_def_gru_rb_grad = {.name = "gru_reset_before_grad", .n_in = 4,
                                       .infer = infer_gru_rb_grad};

/* ---- one LSTM step and a Dense (op_rnn.h) ------------------------------------------------ */
static sn_status infer_lstm_dense_step(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *xw = IN(g, node, 0), *r = IN(g, node, 1), *h = IN(g, node, 2),
                    *c = IN(g, node, 3), *wd = IN(g, node, 4), *bd = IN(g, node, 5);
    char s1[128], s2[128], s3[128];
    for (int i = 1; i < 6; i++)
        if (!same_float(xw, IN(g, node, i)))
            return sn_errorf(SN_ERR_SHAPE, "lstm_dense_step: inputs must be floats of one "
                             "dtype, got %s and %s (input %d)", sn_dtype_name(xw->dtype),
                             sn_dtype_name(IN(g, node, i)->dtype), i);
    if (r->shape.ndim != 2 || r->shape.dim[0] < 1 || r->shape.dim[1] != 4 * r->shape.dim[0])
        return sn_errorf(SN_ERR_SHAPE, "lstm_dense_step: recurrent kernel must be [U, 4*U], got %s",
                         sn_shape_str(&r->shape, s1, sizeof s1));
    int64_t U = r->shape.dim[0];
    if (xw->shape.ndim != 2 || xw->shape.dim[1] != 4 * U)
        return sn_errorf(SN_ERR_SHAPE, "lstm_dense_step: input projection must be [B, %lld], got %s",
                         (long long)(4 * U), sn_shape_str(&xw->shape, s1, sizeof s1));
    int64_t B = xw->shape.dim[0];
    sn_shape hs = {.ndim = 2, .dim = {B, U}};
    if (!sn_shape_equal(&h->shape, &hs) || !sn_shape_equal(&c->shape, &hs))
        return sn_errorf(SN_ERR_SHAPE, "lstm_dense_step: states must be %s, got %s and %s",
                         sn_shape_str(&hs, s1, sizeof s1), sn_shape_str(&h->shape, s2, sizeof s2),
                         sn_shape_str(&c->shape, s3, sizeof s3));
    if (wd->shape.ndim != 2 || wd->shape.dim[0] != U || wd->shape.dim[1] < 1 ||
        bd->shape.ndim != 1 || bd->shape.dim[0] != wd->shape.dim[1])
        return sn_errorf(SN_ERR_SHAPE, "lstm_dense_step: Dense kernel [%lld, V] and bias [V] "
                         "expected, got %s and %s", (long long)U,
                         sn_shape_str(&wd->shape, s1, sizeof s1),
                         sn_shape_str(&bd->shape, s2, sizeof s2));
    node->dtype = xw->dtype;
    node->shape = (sn_shape){.ndim = 2, .dim = {B, 2 * U + wd->shape.dim[1]}};
    return SN_OK;
}

sn_node sn_lstm_dense_step(sn_graph *g, sn_node xw, sn_node r, sn_node h, sn_node c, sn_node wd,
                           sn_node bd) {
    return sn_graph_add(g, SN_OP_LSTM_DENSE_STEP, 6, (sn_node[]){xw, r, h, c, wd, bd}, NULL);
}

const sn_op_def sn_def_lstm_dense_step = {.name = "lstm_dense_step", .n_in = 6,
                                          .infer = infer_lstm_dense_step};

/* ---- the whole LSTM layer (op_rnn.h) ------------------------------------------------------ */
/* Checks a whole-layer op's x [B, T, D], w [D, G*U], r [U, G*U], b [4U] and states; sets the
 * output [B, T (+1 with keep_c), U]. */
static sn_status infer_rnn_layer(const sn_graph *g, sn_node_t *node, const char *op, int gates,
                                 int h0_in, int c0_in) {
    const sn_node_t *x = IN(g, node, 0), *w = IN(g, node, 1), *r = IN(g, node, 2),
                    *b = IN(g, node, 3);
    char s1[128], s2[128];
    if (x->shape.ndim != 3)
        return sn_errorf(SN_ERR_SHAPE, "%s: input must be [B, T, D], got %s", op,
                         sn_shape_str(&x->shape, s1, sizeof s1));
    int64_t G = r->shape.ndim == 2 ? r->shape.dim[1] : 0;
    if (!same_float(w, x) || w->shape.ndim != 2 || w->shape.dim[0] != x->shape.dim[2] ||
        w->shape.dim[1] != G)
        return sn_errorf(SN_ERR_SHAPE, "%s: kernel must be [%lld, %lld] (input %s, recurrent "
                         "kernel's columns) of the input's dtype, got %s %s", op,
                         (long long)x->shape.dim[2], (long long)G,
                         sn_shape_str(&x->shape, s1, sizeof s1), sn_dtype_name(w->dtype),
                         sn_shape_str(&w->shape, s2, sizeof s2));
    /* the recurrence's checks, on what x @ w will be */
    int64_t B = 0, T = 0, U = 0;
    sn_node_t xw = *x;
    xw.shape.dim[2] = G;
    SN_TRY(check_rnn_inputs(op, gates, &xw, r, IN(g, node, h0_in),
                            c0_in >= 0 ? IN(g, node, c0_in) : NULL, &B, &T, &U));
    if (!same_float(b, x) || b->shape.ndim != 1 || b->shape.dim[0] != 4 * U)
        return sn_errorf(SN_ERR_SHAPE, "%s: bias must be [%lld] of the input's dtype, got %s %s",
                         op, (long long)(4 * U), sn_dtype_name(b->dtype),
                         sn_shape_str(&b->shape, s1, sizeof s1));
    node->shape = (sn_shape){.ndim = 3, .dim = {B, T + (node->attr.lstm.keep_c ? 1 : 0), U}};
    node->dtype = x->dtype;
    return SN_OK;
}

static sn_status infer_lstm_layer(const sn_graph *g, sn_node_t *node) {
    return infer_rnn_layer(g, node, "lstm_layer", 4, 4, 5);
}

static sn_status infer_gru_layer(const sn_graph *g, sn_node_t *node) {
    if (node->attr.lstm.keep_c)
        return sn_errorf(SN_ERR_INVALID, "gru_layer: a GRU has no c to keep");
    return infer_rnn_layer(g, node, "gru_layer", 3, 4, -1);
}

/* Built only by the rules below: [B*T*D + D*GU + U*GU + 4U], dx | dw | dr | db. */
static sn_status infer_rnn_layer_grad(const sn_graph *g, sn_node_t *node) {
    const sn_shape *x = &IN(g, node, 0)->shape, *w = &IN(g, node, 1)->shape,
                   *r = &IN(g, node, 2)->shape, *b = &IN(g, node, 3)->shape;
    int64_t n = sn_shape_numel(x) + sn_shape_numel(w) + sn_shape_numel(r) + sn_shape_numel(b);
    node->shape = (sn_shape){.ndim = 1, .dim = {n}};
    node->dtype = IN(g, node, 0)->dtype;
    return SN_OK;
}

sn_node sn_lstm_layer(sn_graph *g, sn_node x, sn_node w, sn_node r, sn_node b, sn_node h0,
                      sn_node c0, bool keep_c) {
    sn_attrs a = {.lstm = {.keep_c = keep_c}};
    return sn_graph_add(g, SN_OP_LSTM_LAYER, 6, (sn_node[]){x, w, r, b, h0, c0}, &a);
}

sn_node sn_gru_layer(sn_graph *g, sn_node x, sn_node w, sn_node r, sn_node b, sn_node h0) {
    return sn_graph_add(g, SN_OP_GRU_LAYER, 5, (sn_node[]){x, w, r, b, h0}, NULL);
}

sn_node sn_gru_layer_bias(sn_graph *g, sn_node b) {
    if (!g || g->status != SN_OK) return SN_NONE;
    sn_shape s = g->nodes[b].shape;
    if (s.ndim != 2 || s.dim[0] != 2 || s.dim[1] % 3 != 0)
        return sn_graph_fail(g, SN_ERR_SHAPE, "gru_layer: Keras's GRU bias must be [2, 3U], got "
                             "rank %d [%lld, ...]", s.ndim, (long long)(s.ndim ? s.dim[0] : 0));
    int64_t U = s.dim[1] / 3;
    sn_node part[4]; /* row 0: z r | h, row 1: z r | h */
    for (int row = 0; row < 2; row++) {
        part[2 * row] = sn_reshape(g, sn_slice(g, b, (int64_t[]){row, 0}, (int64_t[]){1, 2 * U}),
                                   &(sn_shape){.ndim = 1, .dim = {2 * U}});
        part[2 * row + 1] =
            sn_reshape(g, sn_slice(g, b, (int64_t[]){row, 2 * U}, (int64_t[]){1, U}),
                       &(sn_shape){.ndim = 1, .dim = {U}});
    }
    return sn_concat(g, 3, (sn_node[]){sn_add(g, part[0], part[2]), part[1], part[3]}, 0);
}

/* Row t of every batch row: [B, U]. */
static sn_node lstm_layer_row(sn_graph *g, sn_node y, int64_t t) {
    if (!g || g->status != SN_OK) return SN_NONE;
    sn_shape s = g->nodes[y].shape;
    int64_t begin[3] = {0, t, 0}, size[3] = {s.dim[0], 1, s.dim[2]};
    return sn_reshape(g, sn_slice(g, y, begin, size),
                      &(sn_shape){.ndim = 2, .dim = {s.dim[0], s.dim[2]}});
}

static bool keeps_c(const sn_graph *g, sn_node y) { return g->nodes[y].attr.lstm.keep_c; }

sn_node sn_rnn_layer_seq(sn_graph *g, sn_node y) {
    if (!g || g->status != SN_OK) return SN_NONE;
    if (!keeps_c(g, y)) return y;
    sn_shape s = g->nodes[y].shape;
    int64_t begin[3] = {0, 0, 0}, size[3] = {s.dim[0], s.dim[1] - 1, s.dim[2]};
    return sn_slice(g, y, begin, size);
}

sn_node sn_rnn_layer_last_h(sn_graph *g, sn_node y) {
    if (!g || g->status != SN_OK) return SN_NONE;
    return lstm_layer_row(g, y, g->nodes[y].shape.dim[1] - (keeps_c(g, y) ? 2 : 1));
}

sn_node sn_rnn_layer_last_c(sn_graph *g, sn_node y) {
    if (!g || g->status != SN_OK) return SN_NONE;
    if (!keeps_c(g, y))
        return sn_graph_fail(g, SN_ERR_INVALID, "lstm_layer: the final c was not kept (build "
                             "the op with keep_c)");
    return lstm_layer_row(g, y, g->nodes[y].shape.dim[1] - 1);
}

/* The gradient op (the layer's inputs, the output, dy) and its flat result sliced into dx | dw
 * | dr | db, each reshaped to its input. */
static void grad_rnn_layer(sn_graph *g, sn_node n, sn_node dy, sn_node *dx, sn_op op) {
    sn_node_t node = g->nodes[n];
    sn_node in[SN_MAX_INPUTS];
    for (int i = 0; i < node.n_in; i++) in[i] = node.in[i];
    in[node.n_in] = n;
    in[node.n_in + 1] = dy;
    sn_node flat = sn_graph_add(g, op, node.n_in + 2, in, &node.attr);
    if (flat == SN_NONE) return;
    int64_t off = 0;
    for (int i = 0; i < 4; i++) {
        sn_shape s = g->nodes[in[i]].shape;
        int64_t k = sn_shape_numel(&s);
        dx[i] = sn_reshape(g, sn_slice(g, flat, (int64_t[]){off}, (int64_t[]){k}), &s);
        off += k;
    }
}
static void grad_lstm_layer(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    grad_rnn_layer(g, n, dy, dx, SN_OP_LSTM_LAYER_GRAD);
}
static void grad_gru_layer(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    grad_rnn_layer(g, n, dy, dx, SN_OP_GRU_LAYER_GRAD);
}

const sn_op_def sn_def_lstm_layer = {.name = "lstm_layer", .n_in = 6, .infer = infer_lstm_layer,
                                     .grad = grad_lstm_layer};
const sn_op_def sn_def_lstm_layer_grad = {.name = "lstm_layer_grad", .n_in = 8,
                                          .infer = infer_rnn_layer_grad,
                                          .fwd_state_input = 1 + 6};
const sn_op_def sn_def_gru_layer = {.name = "gru_layer", .n_in = 5, .infer = infer_gru_layer,
                                    .grad = grad_gru_layer};
const sn_op_def sn_def_gru_layer_grad = {.name = "gru_layer_grad", .n_in = 7,
                                         .infer = infer_rnn_layer_grad,
                                         .fwd_state_input = 1 + 5};
