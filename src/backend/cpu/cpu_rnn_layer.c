/* The CPU kernels of the whole-layer recurrent ops (graph ops lstm_layer, gru_layer and their
 * gradients): oneDNN's LSTM and LBR-GRU primitives through backend/cpu/cpu_rnn_dnnl.c. The
 * forward call keeps the primitive's handle as its state; the handle holds the workspace,
 * activations and states the backward primitive reads, and the gradient's call reads them
 * through the forward call the planner linked to it (sn_kcall.fwd). A gradient call with no
 * such partner (its forward ran on another kernel, or a test calls it alone) makes its own
 * handle and runs the forward again first: correct, only slower.
 *
 * Why these ops exist beside lstm/gru and their gradients (our loop over per-step GEMMs,
 * cpu_rnn.c): on the char_lstm_small layer shape oneDNN's primitives take 0.75-0.91x our
 * loop's time in f32 and 0.58-0.60x in bf16, LSTM and GRU (bench/bench_rnn, docs/kernels.md),
 * so the kernel table takes them where the build has them (kernel_table.c). In bf16 plans
 * (sn_plan_opts.bf16_compute) the primitives compute in bfloat16 where oneDNN has it on this
 * CPU, f32 otherwise.
 *
 * Builds without oneDNN register nothing here: the loop's kernels (cpu_rnn_layer_loop.c) run
 * the same ops. */
#include <stdlib.h>

#include "backend/cpu/cpu_rnn_dnnl.h"
#include "backend/kernel.h"

#ifndef SN_HAVE_DNNL

void sn_cpu_register_rnn_layer(sn_kernel_table *t) { (void)t; }

#else

typedef struct layer_dims {
    int64_t B, T, D, U, TY; /* TY: output rows per batch row, T or T + 1 (keep_c) */
} layer_dims;

static layer_dims dims_of(const sn_kcall *c) {
    const sn_shape *x = &c->x[0].shape;
    return (layer_dims){x->dim[0], x->dim[1], x->dim[2], c->x[2].shape.dim[0],
                        x->dim[1] + (c->attr->lstm.keep_c ? 1 : 0)};
}

static bool is_gru(const sn_kcall *c) {
    return c->op == SN_OP_GRU_LAYER || c->op == SN_OP_GRU_LAYER_GRAD;
}

static bool all_f32(const sn_kcall *c) {
    if (c->y.dtype != SN_F32) return false;
    for (int i = 0; i < c->n_in; i++)
        if (c->x[i].dtype != SN_F32) return false;
    return true;
}

/* A handle for the call's shapes: bf16 where the plan computes in bf16 and oneDNN can. */
static sn_status handle_new(const sn_kcall *c, sn_dnnl_rnn **out) {
    layer_dims d = dims_of(c);
    int64_t y_ld = d.TY * d.U, c_ld = c->attr->lstm.keep_c ? y_ld : d.U;
    sn_dnnl_cell cell = is_gru(c) ? SN_DNNL_GRU_LBR : SN_DNNL_LSTM;
    if (c->bf16 && sn_cpu_bf16_pays() &&
        sn_dnnl_rnn_new(out, cell, d.B, d.T, d.D, d.U, true, y_ld, c_ld) == SN_OK)
        return SN_OK;
    return sn_dnnl_rnn_new(out, cell, d.B, d.T, d.D, d.U, false, y_ld, c_ld);
}

static sn_dnnl_rnn_fwd fwd_args(const sn_kcall *c, float *y) {
    layer_dims d = dims_of(c);
    const float *const *in = (const float *const *)c->in;
    return (sn_dnnl_rnn_fwd){.x = in[0], .w = in[1], .r = in[2], .b = in[3], .h0 = in[4],
                              .c0 = is_gru(c) ? NULL : in[5], .y = y,
                              .cT = y && c->attr->lstm.keep_c ? y + d.T * d.U : NULL};
}

/* ---- forward ------------------------------------------------------------------------------ */
static sn_status layer_prepare(sn_kcall *c, size_t *scratch) {
    (void)scratch;
    sn_dnnl_rnn *l = NULL;
    SN_TRY(handle_new(c, &l));
    c->state = l;
    return SN_OK;
}

/* A failure's message names the node (error context on failures only: it rewrites it). */
static sn_status named(sn_status s, const sn_kcall *c, const char *what) {
    return s == SN_OK ? s : sn_error_context(s, "%s (node %d)", what, (int)c->id);
}

static sn_status layer_run(sn_kcall *c) {
    sn_dnnl_rnn_fwd a = fwd_args(c, c->out);
    return named(sn_dnnl_rnn_forward(c->state, &a), c, is_gru(c) ? "gru_layer" : "lstm_layer");
}

static void layer_release(sn_kcall *c) {
    sn_dnnl_rnn_free(c->state);
    c->state = NULL;
}

static const sn_kernel k_layer = {.impl = "dnnl", .supports = all_f32, .prepare = layer_prepare,
                                  .run = layer_run, .release = layer_release};

/* ---- gradient ----------------------------------------------------------------------------- */
/* Without a partner forward call: our own handle and somewhere for its forward's y. */
typedef struct grad_own {
    sn_dnnl_rnn *l;
    float *y;
} grad_own;

static bool has_partner(const sn_kcall *c) {
    return c->fwd && c->fwd_kernel == &k_layer && c->fwd->state;
}

static void grad_release(sn_kcall *c) {
    grad_own *o = c->state;
    if (o) {
        sn_dnnl_rnn_free(o->l);
        free(o->y);
        free(o);
    }
    c->state = NULL;
}

static const char *grad_name(const sn_kcall *c) {
    return is_gru(c) ? "gru_layer_grad" : "lstm_layer_grad";
}

static sn_status grad_prepare(sn_kcall *c, size_t *scratch) {
    (void)scratch;
    if (has_partner(c)) return SN_OK;
    grad_own *o = calloc(1, sizeof *o);
    if (!o) return sn_errorf(SN_ERR_NOMEM, "%s: out of memory", grad_name(c));
    c->state = o;
    sn_status s = handle_new(c, &o->l);
    size_t y_bytes = sizeof(float) * (size_t)sn_shape_numel(&c->x[c->n_in - 2].shape);
    if (s == SN_OK && !(o->y = malloc(y_bytes)))
        s = sn_errorf(SN_ERR_NOMEM, "%s: out of memory", grad_name(c));
    if (s != SN_OK) grad_release(c); /* the planner releases only what prepared */
    return s;
}

static sn_status grad_run(sn_kcall *c) {
    layer_dims d = dims_of(c);
    grad_own *o = c->state;
    sn_dnnl_rnn *l = o ? o->l : c->fwd->state;
    sn_dnnl_rnn_fwd f = fwd_args(c, o ? o->y : NULL);
    const char *what = grad_name(c);
    if (o) SN_TRY(named(sn_dnnl_rnn_forward(l, &f), c, what));
    const float *dy = c->in[c->n_in - 1]; /* after the layer's inputs and its output */
    float *out = c->out;
    int64_t G = c->x[2].shape.dim[1];
    sn_dnnl_rnn_bwd a = {.dy = dy, .dcT = c->attr->lstm.keep_c ? dy + d.T * d.U : NULL,
                          .dx = out, .dw = out + d.B * d.T * d.D};
    a.dr = a.dw + d.D * G;
    a.db = a.dr + d.U * G;
    return named(sn_dnnl_rnn_backward(l, &f, &a), c, what);
}

static const sn_kernel k_layer_grad = {.impl = "dnnl", .supports = all_f32,
                                       .prepare = grad_prepare, .run = grad_run,
                                       .release = grad_release};

void sn_cpu_register_rnn_layer(sn_kernel_table *t) {
    t->k[SN_OP_LSTM_LAYER] = &k_layer;
    t->k[SN_OP_LSTM_LAYER_GRAD] = &k_layer_grad;
    t->k[SN_OP_GRU_LAYER] = &k_layer;
    t->k[SN_OP_GRU_LAYER_GRAD] = &k_layer_grad;
}

#endif /* SN_HAVE_DNNL */
