/* Keras's masks for sequences: Embedding(mask_zero=True) marks id 0 as padding, and the
 * LSTM/GRU/Bidirectional after it skip the masked steps as Keras's rnn loop does: a masked
 * step keeps the previous state and output (the initial ones: zeros), so return_sequences=False
 * gives the last unmasked step's output; zero_output_for_mask (set by Bidirectional when it
 * returns sequences) outputs zero at masked steps instead.
 *
 * How, without a new kernel: skipping masked steps is the same as running the unmasked layer
 * over each row's unmasked steps moved to the front, in order (the masked ones, zeros, after
 * them, where their outputs are never read), then reading output t from compacted position
 * count(t) - 1, where count(t) is how many unmasked steps there are up to t (none: zero, the
 * initial output). Both moves are batched matmuls with one-hot [B, T, T] matrices built from
 * the mask by exact float arithmetic (a 0/1 matrix times x is exact), so the recurrence keeps
 * its whole-layer kernels and every gradient is an existing op's. Reading backwards
 * (go_backwards, Bidirectional's backward half) counts from the end instead. The cost is
 * O(B T^2 D) in the moves, small next to the recurrence for the text lengths this serves;
 * a kernel that skips steps would remove it. */
#include <stdlib.h>
#include <string.h>

#include "nn/layers/layers_impl.h"

/* A constant of the layer's dtype from doubles. */
static sn_node dconst(sn_layer *l, sn_graph *g, const sn_shape *s, const double *v) {
    int64_t n = sn_shape_numel(s);
    if (l->dtype == SN_F64) return sn_const(g, SN_F64, s, v);
    float *f = sn_calloc((size_t)(n ? n : 1), sizeof *f);
    if (!f) return sn_graph_fail(g, SN_ERR_NOMEM, "layer '%s': mask constants", l->name);
    for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
    sn_node c = sn_const(g, l->dtype, s, f);
    free(f);
    return c;
}

/* [T, T]: tri[s][t] = 1 where step s counts towards t (s <= t forwards, s >= t backwards), or
 * the reversal J[s][t] = (s + t == T - 1). */
typedef enum { TRI_FWD, TRI_BWD, REVERSAL } square_kind;

static sn_node square(sn_layer *l, sn_graph *g, int64_t T, square_kind k) {
    double *v = sn_calloc((size_t)(T * T), sizeof *v);
    if (!v) return sn_graph_fail(g, SN_ERR_NOMEM, "layer '%s': mask constants", l->name);
    for (int64_t s = 0; s < T; s++)
        for (int64_t t = 0; t < T; t++)
            v[s * T + t] = k == TRI_FWD ? s <= t : k == TRI_BWD ? s >= t : s + t == T - 1;
    sn_node c = dconst(l, g, &(sn_shape){.ndim = 2, .dim = {T, T}}, v);
    free(v);
    return c;
}

/* 1, 2, ..., T in the given shape (numel T). */
static sn_node positions(sn_layer *l, sn_graph *g, sn_shape s) {
    int64_t T = sn_shape_numel(&s);
    double *v = sn_calloc((size_t)T, sizeof *v);
    if (!v) return sn_graph_fail(g, SN_ERR_NOMEM, "layer '%s': mask constants", l->name);
    for (int64_t i = 0; i < T; i++) v[i] = (double)(i + 1);
    sn_node c = dconst(l, g, &s, v);
    free(v);
    return c;
}

/* relu(1 - d^2): 1 where d == 0, else 0, for the integer-valued d here (exact in float). */
static sn_node is_zero(sn_layer *l, sn_graph *g, sn_node d) {
    sn_node one = sn_scalar(g, l->dtype, 1.0);
    return sn_relu(g, sn_sub(g, one, sn_mul(g, d, d)));
}

/* Reverses x [B, T, C] in time (J @ x). */
static sn_node flip_time(sn_layer *l, sn_graph *g, sn_node x) {
    sn_shape s = sn_node_shape(g, x);
    return sn_matmul(g, square(l, g, s.dim[1], REVERSAL), x, false, false);
}

sn_node sn_rnn_forward_masked(sn_layer *l, sn_graph *g, sn_node x, sn_node m, bool reverse,
                              bool keras_order, bool zero_out) {
    sn_shape xs = sn_node_shape(g, x);
    if (sn_graph_status(g) != SN_OK) return SN_NONE;
    int64_t B = xs.dim[0], T = xs.dim[1];
    bool seq = l->rnn.return_sequences;
    sn_node y;
    if (m == SN_NONE) {
        if (!reverse) return sn_rnn_run_zero(l, g, x, seq);
        y = sn_rnn_run_zero(l, g, flip_time(l, g, x), seq); /* Keras's order already */
        if (seq && !keras_order) y = flip_time(l, g, y);
        return y;
    }
    /* cnt[b, t]: unmasked steps up to t in reading order; E[b, p, t] = (cnt[b, t] == p + 1):
     * step t's output is compacted position p's; P = E * m moves unmasked step t to p. */
    sn_node cnt = sn_matmul(g, m, square(l, g, T, reverse ? TRI_BWD : TRI_FWD), false, false);
    sn_node c3 = sn_reshape(g, cnt, &(sn_shape){.ndim = 3, .dim = {B, 1, T}});
    sn_node E = is_zero(l, g, sn_sub(g, c3, positions(l, g, (sn_shape){.ndim = 2, .dim = {T, 1}})));
    sn_node m3 = sn_reshape(g, m, &(sn_shape){.ndim = 3, .dim = {B, 1, T}});
    sn_node P = sn_mul(g, E, m3);
    sn_node hs = sn_rnn_run_zero(l, g, sn_matmul(g, P, x, false, false), true);
    int64_t U = l->rnn.units;
    if (seq) {
        y = sn_matmul(g, zero_out ? P : E, hs, true, false); /* [B, T, U], time order */
        if (reverse && keras_order) y = flip_time(l, g, y);
        return y;
    }
    /* The last output: compacted position n - 1, n the row's unmasked steps (none: zeros). */
    int ax = 1;
    sn_node n = sn_reshape(g, sn_reduce_sum(g, m, 1, &ax, false),
                           &(sn_shape){.ndim = 3, .dim = {B, 1, 1}});
    sn_node sel = is_zero(l, g, sn_sub(g, n, positions(l, g, (sn_shape){.ndim = 2, .dim = {1, T}})));
    y = sn_reshape(g, sn_matmul(g, sel, hs, false, false), &(sn_shape){.ndim = 2, .dim = {B, U}});
    if (zero_out) { /* Keras: the last step's output, zero when that step is masked */
        int64_t t = reverse ? 0 : T - 1;
        y = sn_mul(g, y, sn_slice(g, m, (int64_t[]){0, t}, (int64_t[]){B, 1}));
    }
    return y;
}

/* Layers Keras passes a mask through unchanged (supports_masking, compute_mask the input's). */
static bool passes_mask(const sn_layer *l) {
    const char *c = l->vt->class_name;
    return !strcmp(c, "Dense") || !strcmp(c, "Dropout") || !strcmp(c, "Activation");
}

sn_node sn_layer_call_masked(sn_layer *l, sn_graph *g, sn_node x, sn_node *mask, bool training,
                             sn_updates *updates) {
    if (sn_layer_is_embedding(l) && l->embedding.mask_zero) {
        sn_node y = l->vt->forward(l, g, x, training, updates);
        /* ids are whole numbers >= 0 (gather fails on others): min(id, 1) = 1 - relu(1 - id) */
        sn_dtype dt = l->dtype;
        sn_node ids = sn_node_dtype(g, x) == dt ? x : sn_cast(g, x, dt);
        sn_node one = sn_scalar(g, dt, 1.0);
        *mask = sn_sub(g, one, sn_relu(g, sn_sub(g, one, ids)));
        return y;
    }
    bool rnn = sn_layer_is_rnn(l), bidir = sn_layer_is_bidirectional(l);
    if (rnn || bidir) {
        l->has_mask = *mask != SN_NONE;
        l->mask = *mask;
        sn_node y = l->vt->forward(l, g, x, training, updates);
        l->has_mask = false;
        l->mask = SN_NONE;
        bool seq = rnn ? l->rnn.return_sequences : l->inner[0]->rnn.return_sequences;
        if (!seq) *mask = SN_NONE;
        return y;
    }
    if (*mask != SN_NONE && !passes_mask(l))
        return sn_graph_fail(g, SN_ERR_UNSUPPORTED, "layer '%s' (%s) receives a mask (from an "
                             "Embedding with mask_zero=True); sinter carries masks into LSTM, GRU "
                             "and Bidirectional layers and through Dense, Dropout and Activation "
                             "only", l->name, l->vt->class_name);
    return l->vt->forward(l, g, x, training, updates);
}
