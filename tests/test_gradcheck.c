/* Finite-difference gradient checks in double precision, one or more per op, plus a
 * whole-model directional check. Every graph here is float64: the fast float32 kernels do not
 * claim f64, so these run on the reference kernels, whose gradients the fast kernels are
 * compared against in test_cpu_kernels_*.
 *
 * Check: |analytic - numeric| <= tol * max(1, |analytic|, |numeric|), central differences with
 * eps = 1e-6: truncation O(eps^2) ~ 1e-12, rounding ~ 1e-16 |L| / eps. Ops whose loss sums many
 * products (matmul, conv, div by small values) have |L| ~ 100 and so ~1e-6 relative noise
 * in the numeric estimate: their tolerance is 1e-5; the rest use 1e-7. Kinks (relu at 0, max ties, the
 * rounding steps of a cast) make the derivative undefined there: inputs are kept away from
 * them, as noted per op. */
#include <stdlib.h>

#include "graph/graph_impl.h" /* sn_broadcast_to, an internal builder */
#include "fd_test_util.h"
#include "sn_test.h"

enum { RANDN = 0, POSITIVE, AWAY_FROM_ZERO, LABELS, INDICES };

typedef sn_node (*build_fn)(sn_graph *g, const sn_node *in);

typedef struct op_case {
    const char *name;
    int n_in;
    sn_shape shape[4];
    int kind[4];
    int64_t range; /* LABELS / INDICES: values in [0, range) */
    build_fn build;
    double tol;
} op_case;

static sn_rng rng;

/* Ops whose gradient rule a case here has checked: the ops of each case's forward graph. */
static bool checked[SN_OP_COUNT];

static void fill(double *x, int64_t n, int kind, int64_t range, int32_t *ix) {
    for (int64_t i = 0; i < n; i++) {
        double v = sn_rng_normal(&rng);
        if (kind == POSITIVE) v = 0.5 + fabs(v);
        if (kind == AWAY_FROM_ZERO) v = (v < 0 ? -0.2 : 0.2) + v; /* relu kink at 0 */
        if (kind == LABELS || kind == INDICES) ix[i] = (int32_t)sn_rng_below(&rng, (uint64_t)range);
        else x[i] = v;
    }
}

static void check_case(const op_case *c) {
    sn_graph *g = sn_graph_new();
    sn_node in[4], wrt[4], grads[4];
    int nw = 0, wi[4];
    for (int i = 0; i < c->n_in; i++) {
        bool integer = c->kind[i] == LABELS || c->kind[i] == INDICES;
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        in[i] = sn_input(g, name, integer ? SN_I32 : SN_F64, &c->shape[i]);
        if (!integer) {
            wi[nw] = i;
            wrt[nw++] = in[i];
        }
    }
    sn_node y = c->build(g, in);
    if (sn_graph_status(g) != SN_OK) {
        CHECK(0, "%s: building failed: %s", c->name, sn_last_error());
        sn_graph_free(g);
        return;
    }
    for (int i = 0; i < g->n_nodes; i++) checked[g->nodes[i].op] = true;
    /* loss = sum(y * r): a random projection exercises every output element's gradient. */
    sn_shape ys = sn_node_shape(g, y);
    int64_t ny = sn_shape_numel(&ys);
    double *r = malloc(sizeof *r * (size_t)ny);
    fill(r, ny, RANDN, 0, NULL);
    sn_node loss = sn_reduce_sum(g, sn_mul(g, y, sn_const(g, SN_F64, &ys, r)), 0, NULL, false);
    free(r);
    sn_status s = sn_gradients(g, loss, nw, wrt, grads);
    CHECK(s == SN_OK, "%s: gradients: %s", c->name, sn_last_error());
    sn_node targets[5] = {loss};
    for (int i = 0; i < nw; i++) targets[1 + i] = grads[i];
    sn_plan *p = NULL;
    s = s == SN_OK ? sn_plan_new(&p, g, 1 + nw, targets, NULL) : s;
    CHECK(s == SN_OK, "%s: plan: %s", c->name, sn_last_error());
    if (!p) {
        sn_graph_free(g);
        return;
    }
    for (int i = 0; i < c->n_in; i++) {
        int64_t n = sn_shape_numel(&c->shape[i]);
        void *buf = sn_plan_buffer(p, in[i]);
        fill(buf, n, c->kind[i], c->range, buf);
    }
    fd_loss(p, loss);
    /* Every analytic gradient is copied now, from the unperturbed run: the finite differences
     * below rerun the plan, which overwrites the gradient buffers. */
    double *ga_all[4] = {0};
    for (int k = 0; k < nw; k++) {
        int64_t n = sn_shape_numel(&c->shape[wi[k]]);
        ga_all[k] = malloc(sizeof *ga_all[k] * (size_t)n);
        memcpy(ga_all[k], sn_plan_buffer(p, grads[k]), sizeof *ga_all[k] * (size_t)n);
    }
    int bad = 0;
    double worst = 0;
    for (int k = 0; k < nw; k++) {
        int64_t n = sn_shape_numel(&c->shape[wi[k]]);
        double *x = sn_plan_buffer(p, in[wi[k]]);
        double *ga = ga_all[k];
        char what[96];
        snprintf(what, sizeof what, "%s: d/d input %d", c->name, wi[k]);
        bad += fd_check(p, loss, x, ga, n, c->tol, what, &worst);
        free(ga);
    }
    CHECK(bad == 0, "%s: %d gradient entries off by more than %g (worst %.3g)", c->name, bad,
          c->tol, worst);
    if (bad == 0) printf("ok  %-28s worst relative error %.2e\n", c->name, worst);
    sn_plan_free(p);
    sn_graph_free(g);
}

#define S1(a) {.ndim = 1, .dim = {a}}
#define S2(a, b) {.ndim = 2, .dim = {a, b}}
#define S3(a, b, c) {.ndim = 3, .dim = {a, b, c}}
#define S4(a, b, c, d) {.ndim = 4, .dim = {a, b, c, d}}

static sn_node b_matmul(sn_graph *g, const sn_node *x) { return sn_matmul(g, x[0], x[1], false, false); }
static sn_node b_matmul_ta(sn_graph *g, const sn_node *x) { return sn_matmul(g, x[0], x[1], true, false); }
static sn_node b_matmul_tb(sn_graph *g, const sn_node *x) { return sn_matmul(g, x[0], x[1], false, true); }
static sn_node b_matmul_tt(sn_graph *g, const sn_node *x) { return sn_matmul(g, x[0], x[1], true, true); }
static sn_node b_add(sn_graph *g, const sn_node *x) { return sn_add(g, x[0], x[1]); }
static sn_node b_sub(sn_graph *g, const sn_node *x) { return sn_sub(g, x[0], x[1]); }
static sn_node b_mul(sn_graph *g, const sn_node *x) { return sn_mul(g, x[0], x[1]); }
static sn_node b_div(sn_graph *g, const sn_node *x) { return sn_div(g, x[0], x[1]); }
static sn_node b_bias_add(sn_graph *g, const sn_node *x) { return sn_bias_add(g, x[0], x[1]); }
static sn_node b_relu(sn_graph *g, const sn_node *x) { return sn_relu(g, x[0]); }
static sn_node b_sigmoid(sn_graph *g, const sn_node *x) { return sn_sigmoid(g, x[0]); }
static sn_node b_tanh(sn_graph *g, const sn_node *x) { return sn_tanh(g, x[0]); }
static sn_node b_exp(sn_graph *g, const sn_node *x) { return sn_exp(g, x[0]); }
static sn_node b_log(sn_graph *g, const sn_node *x) { return sn_log(g, x[0]); }
static sn_node b_sqrt(sn_graph *g, const sn_node *x) { return sn_sqrt(g, x[0]); }
static sn_node b_neg(sn_graph *g, const sn_node *x) { return sn_neg(g, x[0]); }
static sn_node b_softmax(sn_graph *g, const sn_node *x) { return sn_softmax(g, x[0], -1); }
static sn_node b_softmax0(sn_graph *g, const sn_node *x) { return sn_softmax(g, x[0], 0); }
static sn_node b_log_softmax(sn_graph *g, const sn_node *x) { return sn_log_softmax(g, x[0], 1); }
static sn_node b_xent(sn_graph *g, const sn_node *x) { return sn_sparse_softmax_xent(g, x[0], x[1]); }
static sn_node b_sum(sn_graph *g, const sn_node *x) { return sn_reduce_sum(g, x[0], 1, (int[]){1}, false); }
static sn_node b_sum_all(sn_graph *g, const sn_node *x) { return sn_reduce_sum(g, x[0], 0, NULL, false); }
static sn_node b_mean(sn_graph *g, const sn_node *x) { return sn_reduce_mean(g, x[0], 2, (int[]){0, 2}, true); }
static sn_node b_max(sn_graph *g, const sn_node *x) { return sn_reduce_max(g, x[0], 1, (int[]){-1}, false); }
static sn_node b_reshape(sn_graph *g, const sn_node *x) {
    sn_shape s = S2(3, -1);
    return sn_mul(g, sn_reshape(g, x[0], &s), sn_reshape(g, x[0], &s)); /* nonlinear: tests the view */
}
static sn_node b_flatten(sn_graph *g, const sn_node *x) { return sn_tanh(g, sn_flatten(g, x[0])); }
static sn_node b_transpose(sn_graph *g, const sn_node *x) { return sn_transpose(g, x[0], (int[]){2, 0, 1}); }
static sn_node b_conv_valid(sn_graph *g, const sn_node *x) { return sn_conv2d(g, x[0], x[1], NULL); }
static sn_node b_conv_same_s2(sn_graph *g, const sn_node *x) {
    sn_conv2d_opts o = {.stride_h = 2, .stride_w = 2, .padding = SN_PAD_SAME};
    return sn_conv2d(g, x[0], x[1], &o);
}
static sn_node b_dw_valid(sn_graph *g, const sn_node *x) { return sn_depthwise_conv2d(g, x[0], x[1], NULL); }
static sn_node b_dw_same_s2(sn_graph *g, const sn_node *x) {
    sn_conv2d_opts o = {.stride_h = 2, .stride_w = 1, .padding = SN_PAD_SAME};
    return sn_depthwise_conv2d(g, x[0], x[1], &o);
}
static sn_node b_convt_same_s2(sn_graph *g, const sn_node *x) {
    sn_conv2d_opts o = {.stride_h = 2, .stride_w = 2, .padding = SN_PAD_SAME};
    return sn_conv2d_transpose(g, x[0], x[1], &o);
}
static sn_node b_convt_valid(sn_graph *g, const sn_node *x) {
    sn_conv2d_opts o = {.stride_h = 2, .stride_w = 1, .padding = SN_PAD_VALID};
    return sn_conv2d_transpose(g, x[0], x[1], &o);
}
static sn_node b_maxpool(sn_graph *g, const sn_node *x) { return sn_max_pool2d(g, x[0], NULL); }
static sn_node b_maxpool_same(sn_graph *g, const sn_node *x) {
    sn_pool2d_opts o = {.pool_h = 3, .pool_w = 3, .stride_h = 2, .stride_w = 2, .padding = SN_PAD_SAME};
    return sn_max_pool2d(g, x[0], &o);
}
static sn_node b_avgpool(sn_graph *g, const sn_node *x) { return sn_avg_pool2d(g, x[0], NULL); }
static sn_node b_avgpool_same(sn_graph *g, const sn_node *x) {
    sn_pool2d_opts o = {.pool_h = 3, .pool_w = 2, .stride_h = 2, .stride_w = 1, .padding = SN_PAD_SAME};
    return sn_avg_pool2d(g, x[0], &o);
}
static sn_node b_dropout(sn_graph *g, const sn_node *x) { return sn_dropout(g, x[0], 0.4, 7); }
static sn_node b_slice(sn_graph *g, const sn_node *x) {
    return sn_slice(g, x[0], (int64_t[]){1, 0, 2}, (int64_t[]){2, -1, 2});
}
/* zero padding is a slice_grad node: this checks that op's own gradient rule */
static sn_node b_zero_pad(sn_graph *g, const sn_node *x) {
    return sn_zero_pad(g, x[0], (int64_t[]){0, 1, 0, 2}, (int64_t[]){1, 2, 3, 0});
}
static sn_node b_concat(sn_graph *g, const sn_node *x) { return sn_concat(g, 3, x, 1); }
static sn_node b_gather(sn_graph *g, const sn_node *x) { return sn_gather(g, x[0], x[1]); }
static sn_node b_cast(sn_graph *g, const sn_node *x) {
    /* f64 -> f32 -> f64: the derivative is 1 between f32 rounding steps; with eps = 1e-6 the
     * rounding (~6e-8 relative) makes the numeric estimate noisy: see the tolerance. */
    return sn_cast(g, sn_cast(g, x[0], SN_F32), SN_F64);
}
static sn_node b_broadcast(sn_graph *g, const sn_node *x) {
    sn_shape s = S3(2, 3, 4);
    return sn_broadcast_to(g, x[0], &s);
}

/* The Transformer ops (graph/op_attention.c) */
static sn_node b_batch_norm(sn_graph *g, const sn_node *x) {
    return sn_batch_norm_train(g, x[0], x[1], x[2], 1e-3, NULL);
}
static sn_node b_layer_norm(sn_graph *g, const sn_node *x) {
    return sn_layer_norm(g, x[0], x[1], x[2], 1e-3);
}
static sn_node b_gelu_tanh(sn_graph *g, const sn_node *x) { return sn_gelu_tanh(g, x[0]); }
static sn_node b_attention(sn_graph *g, const sn_node *x) {
    return sn_attention(g, x[0], x[1], x[2], 0.6, false, 0);
}
static sn_node b_attention_causal(sn_graph *g, const sn_node *x) {
    return sn_attention(g, x[0], x[1], x[2], 0.6, true, 0);
}
static sn_node b_attention_offset(sn_graph *g, const sn_node *x) {
    return sn_attention(g, x[0], x[1], x[2], 0.6, true, 2);
}
/* mask [2, 3, 5] with holes, and query 2 of row 1 masked from every key (Keras: the mean of
 * the values, no gradient to q or k) */
static sn_node attention_mask_const(sn_graph *g) {
    double m[2 * 3 * 5];
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++)
                m[(b * 3 + i) * 5 + j] = (b + i + j) % 3 != 0 && !(b == 1 && i == 2);
    return sn_const(g, SN_F64, &(sn_shape){.ndim = 3, .dim = {2, 3, 5}}, m);
}
static sn_node b_attention_masked(sn_graph *g, const sn_node *x) {
    return sn_attention_masked(g, x[0], x[1], x[2], attention_mask_const(g), 0.6, false);
}
static sn_node b_attention_masked_causal(sn_graph *g, const sn_node *x) {
    return sn_attention_masked(g, x[0], x[1], x[2], attention_mask_const(g), 0.6, true);
}
/* dropout 0.4 on the probabilities: fd_loss runs every evaluation at step 0, so one mask */
static sn_node b_attention_dropout(sn_graph *g, const sn_node *x) {
    return sn_attention_dropout(g, x[0], x[1], x[2], SN_NONE, 0.6, false, 0.4, 7);
}
static sn_node b_attention_dropout_masked_causal(sn_graph *g, const sn_node *x) {
    return sn_attention_dropout(g, x[0], x[1], x[2], attention_mask_const(g), 0.6, true, 0.4,
                                8);
}

static const op_case cases[] = {
    {"matmul", 2, {S2(3, 4), S2(4, 5)}, {RANDN, RANDN}, 0, b_matmul, 1e-5},
    {"matmul a^T", 2, {S2(4, 3), S2(4, 5)}, {RANDN, RANDN}, 0, b_matmul_ta, 1e-5},
    {"matmul b^T", 2, {S2(3, 4), S2(5, 4)}, {RANDN, RANDN}, 0, b_matmul_tb, 1e-5},
    {"matmul a^T b^T", 2, {S2(4, 3), S2(5, 4)}, {RANDN, RANDN}, 0, b_matmul_tt, 1e-5},
    {"matmul batched", 2, {S3(2, 3, 4), S3(2, 4, 2)}, {RANDN, RANDN}, 0, b_matmul, 1e-5},
    {"matmul batched x 2-D", 2, {S3(2, 3, 4), S2(4, 2)}, {RANDN, RANDN}, 0, b_matmul, 1e-5},
    {"add broadcast", 2, {S3(2, 3, 4), S2(1, 4)}, {RANDN, RANDN}, 0, b_add, 1e-7},
    {"sub broadcast", 2, {S2(3, 1), S2(3, 4)}, {RANDN, RANDN}, 0, b_sub, 1e-7},
    {"mul broadcast", 2, {S3(2, 3, 4), S1(4)}, {RANDN, RANDN}, 0, b_mul, 1e-7},
    {"div broadcast", 2, {S2(3, 4), S2(3, 1)}, {RANDN, POSITIVE}, 0, b_div, 1e-5},
    {"bias_add", 2, {S3(2, 3, 5), S1(5)}, {RANDN, RANDN}, 0, b_bias_add, 1e-7},
    /* relu: kink at 0, inputs kept at |x| >= 0.2 */
    {"relu", 1, {S2(4, 5)}, {AWAY_FROM_ZERO}, 0, b_relu, 1e-7},
    {"sigmoid", 1, {S2(4, 5)}, {RANDN}, 0, b_sigmoid, 1e-7},
    {"tanh", 1, {S2(4, 5)}, {RANDN}, 0, b_tanh, 1e-7},
    {"exp", 1, {S2(4, 5)}, {RANDN}, 0, b_exp, 1e-7},
    {"log", 1, {S2(4, 5)}, {POSITIVE}, 0, b_log, 1e-7},
    {"sqrt", 1, {S2(4, 5)}, {POSITIVE}, 0, b_sqrt, 1e-7},
    {"neg", 1, {S2(4, 5)}, {RANDN}, 0, b_neg, 1e-7},
    {"softmax last axis", 1, {S2(3, 5)}, {RANDN}, 0, b_softmax, 1e-7},
    {"softmax axis 0", 1, {S3(3, 2, 2)}, {RANDN}, 0, b_softmax0, 1e-7},
    {"log_softmax", 1, {S2(3, 5)}, {RANDN}, 0, b_log_softmax, 1e-7},
    {"sparse_softmax_xent", 2, {S2(4, 6), S1(4)}, {RANDN, LABELS}, 6, b_xent, 1e-7},
    {"reduce_sum axis", 1, {S3(2, 3, 4)}, {RANDN}, 0, b_sum, 1e-7},
    {"reduce_sum all", 1, {S3(2, 3, 4)}, {RANDN}, 0, b_sum_all, 1e-7},
    {"reduce_mean keepdims", 1, {S3(2, 3, 4)}, {RANDN}, 0, b_mean, 1e-7},
    /* max: undefined at ties; random normal inputs have none (gaps >> eps) */
    {"reduce_max", 1, {S3(2, 3, 4)}, {RANDN}, 0, b_max, 1e-7},
    {"broadcast_to", 1, {S2(3, 1)}, {RANDN}, 0, b_broadcast, 1e-7},
    {"reshape", 1, {S3(2, 3, 2)}, {RANDN}, 0, b_reshape, 1e-7},
    {"flatten", 1, {S4(2, 2, 2, 3)}, {RANDN}, 0, b_flatten, 1e-7},
    {"transpose", 1, {S3(2, 3, 4)}, {RANDN}, 0, b_transpose, 1e-7},
    {"conv2d valid", 2, {S4(2, 5, 5, 3), S4(3, 3, 3, 4)}, {RANDN, RANDN}, 0, b_conv_valid, 1e-5},
    {"conv2d same stride 2", 2, {S4(2, 6, 5, 2), S4(3, 2, 2, 3)}, {RANDN, RANDN}, 0, b_conv_same_s2, 1e-5},
    {"depthwise_conv2d valid m2", 2, {S4(2, 5, 4, 3), S4(3, 2, 3, 2)}, {RANDN, RANDN}, 0, b_dw_valid, 1e-5},
    {"depthwise_conv2d same s2x1", 2, {S4(2, 6, 5, 2), S4(3, 3, 2, 1)}, {RANDN, RANDN}, 0, b_dw_same_s2, 1e-5},
    /* conv2d_transpose is a conv2d_bwd_data node: this checks that op's own gradient rule */
    {"conv2d_transpose same s2", 2, {S4(2, 3, 3, 2), S4(3, 3, 4, 2)}, {RANDN, RANDN}, 0, b_convt_same_s2, 1e-5},
    {"conv2d_transpose valid s2x1", 2, {S4(1, 3, 4, 3), S4(3, 2, 2, 3)}, {RANDN, RANDN}, 0, b_convt_valid, 1e-5},
    /* max pools: kinks at ties, none with random inputs */
    {"max_pool2d 2x2", 1, {S4(2, 4, 6, 3)}, {RANDN}, 0, b_maxpool, 1e-7},
    {"max_pool2d 3x3 same s2", 1, {S4(1, 5, 6, 2)}, {RANDN}, 0, b_maxpool_same, 1e-7},
    {"avg_pool2d 2x2", 1, {S4(2, 4, 6, 3)}, {RANDN}, 0, b_avgpool, 1e-7},
    {"avg_pool2d 3x2 same", 1, {S4(1, 5, 5, 2)}, {RANDN}, 0, b_avgpool_same, 1e-7},
    {"dropout", 1, {S2(6, 7)}, {RANDN}, 0, b_dropout, 1e-7},
    {"slice", 1, {S3(4, 3, 5)}, {RANDN}, 0, b_slice, 1e-7},
    {"zero_pad (slice_grad)", 1, {S4(2, 3, 4, 2)}, {RANDN}, 0, b_zero_pad, 1e-7},
    {"concat", 3, {S2(2, 3), S2(2, 1), S2(2, 2)}, {RANDN, RANDN, RANDN}, 0, b_concat, 1e-7},
    {"gather", 2, {S2(5, 3), S2(2, 4)}, {RANDN, INDICES}, 5, b_gather, 1e-7},
    /* cast through f32: f32 rounding limits the numeric derivative to ~1e-1 relative at
     * eps = 1e-6; the check still catches a wrong rule (0 or 2 instead of 1). */
    {"layer_norm", 3, {S3(2, 3, 5), S1(5), S1(5)}, {RANDN, RANDN, RANDN}, 0, b_layer_norm, 1e-6},
    /* the derivative through the batch statistics is in bn_train's rule (bn_grad_x) */
    {"batch_norm_train", 3, {S4(2, 3, 2, 5), S1(5), S1(5)}, {RANDN, RANDN, RANDN}, 0,
     b_batch_norm, 1e-6},
    {"batch_norm_train 1 channel", 3, {S2(7, 1), S1(1), S1(1)}, {RANDN, RANDN, RANDN}, 0,
     b_batch_norm, 1e-6},
    {"gelu_tanh", 1, {S2(4, 5)}, {RANDN}, 0, b_gelu_tanh, 1e-7},
    {"attention", 3, {S4(2, 3, 2, 4), S4(2, 5, 2, 4), S4(2, 5, 2, 4)}, {RANDN, RANDN, RANDN}, 0,
     b_attention, 1e-6},
    {"attention causal", 3, {S4(2, 4, 2, 3), S4(2, 4, 2, 3), S4(2, 4, 2, 3)},
     {RANDN, RANDN, RANDN}, 0, b_attention_causal, 1e-6},
    /* a query block of 2 after 2 cached positions (generation) */
    {"attention causal offset", 3, {S4(1, 2, 2, 3), S4(1, 4, 2, 3), S4(1, 4, 2, 3)},
     {RANDN, RANDN, RANDN}, 0, b_attention_offset, 1e-6},
    {"attention masked", 3, {S4(2, 3, 2, 4), S4(2, 5, 2, 4), S4(2, 5, 2, 4)},
     {RANDN, RANDN, RANDN}, 0, b_attention_masked, 1e-6},
    {"attention masked causal", 3, {S4(2, 3, 2, 4), S4(2, 5, 2, 4), S4(2, 5, 2, 4)},
     {RANDN, RANDN, RANDN}, 0, b_attention_masked_causal, 1e-6},
    {"attention dropout", 3, {S4(2, 3, 2, 4), S4(2, 5, 2, 4), S4(2, 5, 2, 4)},
     {RANDN, RANDN, RANDN}, 0, b_attention_dropout, 1e-6},
    {"attention dropout masked causal", 3, {S4(2, 3, 2, 4), S4(2, 5, 2, 4), S4(2, 5, 2, 4)},
     {RANDN, RANDN, RANDN}, 0, b_attention_dropout_masked_causal, 1e-6},
    {"cast f64->f32->f64", 1, {S2(3, 4)}, {RANDN}, 0, b_cast, 2e-1},
};

/* Whole model: a small CNN (conv -> relu -> max pool -> flatten -> dense -> xent), checked in a
 * random direction d over all parameters: (L(w + eps d) - L(w - eps d)) / 2 eps == grad . d. */
static void check_model_directional(void) {
    sn_graph *g = sn_graph_new();
    sn_shape xs = S4(3, 6, 6, 2), ls = S1(3), ks = S4(3, 3, 2, 4), bs = S1(4), ws = S2(16, 5),
             b2s = S1(5);
    sn_node x = sn_input(g, "x", SN_F64, &xs), lab = sn_input(g, "y", SN_I32, &ls);
    sn_node k = sn_variable(g, "k", SN_F64, &ks, true), b = sn_variable(g, "b", SN_F64, &bs, true);
    sn_node w = sn_variable(g, "w", SN_F64, &ws, true), b2 = sn_variable(g, "b2", SN_F64, &b2s, true);
    sn_node h = sn_max_pool2d(g, sn_relu(g, sn_bias_add(g, sn_conv2d(g, x, k, NULL), b)), NULL);
    sn_node logits = sn_bias_add(g, sn_matmul(g, sn_flatten(g, h), w, false, false), b2);
    sn_node loss = sn_reduce_mean(g, sn_sparse_softmax_xent(g, logits, lab), 0, NULL, false);
    sn_node vars[4] = {k, b, w, b2}, grads[4];
    CHECK_OK(sn_gradients(g, loss, 4, vars, grads));
    sn_node targets[5] = {loss, grads[0], grads[1], grads[2], grads[3]};
    sn_plan *p = NULL;
    CHECK_OK(sn_plan_new(&p, g, 5, targets, NULL));
    if (!p) {
        sn_graph_free(g);
        return;
    }
    fill(sn_plan_buffer(p, x), sn_shape_numel(&xs), RANDN, 0, NULL);
    fill(NULL, 3, LABELS, 5, sn_plan_buffer(p, lab));
    size_t nbytes;
    double *theta = sn_graph_variable_buffer(g, &nbytes);
    for (int i = 0; i < 4; i++) {
        sn_shape s = sn_node_shape(g, vars[i]);
        fill(sn_variable_data(g, vars[i]), sn_shape_numel(&s), RANDN, 0, NULL);
    }
    fd_loss(p, loss);
    double gd = 0;
    int64_t total = (int64_t)(nbytes / sizeof(double));
    double *d = calloc((size_t)total, sizeof *d), *t0 = malloc(nbytes);
    memcpy(t0, theta, nbytes);
    for (int i = 0; i < 4; i++) {
        sn_shape s = sn_node_shape(g, vars[i]);
        int64_t n = sn_shape_numel(&s);
        double *gv = sn_plan_buffer(p, grads[i]);
        double *dv = d + ((double *)sn_variable_data(g, vars[i]) - theta);
        fill(dv, n, RANDN, 0, NULL);
        for (int64_t j = 0; j < n; j++) gd += gv[j] * dv[j];
    }
    const double eps = 1e-6;
    for (int64_t j = 0; j < total; j++) theta[j] = t0[j] + eps * d[j];
    double lp = fd_loss(p, loss);
    for (int64_t j = 0; j < total; j++) theta[j] = t0[j] - eps * d[j];
    double lm = fd_loss(p, loss);
    double num = (lp - lm) / (2 * eps), err = fabs(num - gd) / fmax(1.0, fabs(gd));
    CHECK(err < 1e-6, "whole-model directional derivative: analytic %.10g numeric %.10g", gd, num);
    printf("ok  %-28s analytic %.8g numeric %.8g\n", "small CNN directional", gd, num);
    free(d);
    free(t0);
    sn_plan_free(p);
    sn_graph_free(g);
}

/* Ops whose finite-difference gradient check lives in another test (their builders take
 * more than this file's four inputs, or states), with a word the file must contain. */
static const struct { sn_op op; const char *file, *word; } elsewhere[] = {
    {SN_OP_LSTM, "test_rnn.c", "sn_lstm_seq"},
    {SN_OP_GRU, "test_rnn.c", "sn_gru_seq"},
    {SN_OP_GRU_RB, "test_rnn.c", "sn_gru_rb_seq"},
    {SN_OP_LSTM_LAYER, "test_rnn.c", "sn_lstm_layer"},
    {SN_OP_GRU_LAYER, "test_rnn.c", "sn_gru_layer"},
    /* with the kinks' values as TensorFlow defines them, per op */
    {SN_OP_GELU, "test_activations.c", "sn_gelu("},
    {SN_OP_SILU, "test_activations.c", "sn_silu("},
    {SN_OP_ELU, "test_activations.c", "sn_elu("},
    {SN_OP_LEAKY_RELU, "test_activations.c", "sn_leaky_relu("},
    {SN_OP_RELU6, "test_activations.c", "sn_relu6("},
};

static bool file_has(const char *file, const char *word) {
    char path[512];
    snprintf(path, sizeof path, "%s/tests/%s", SN_SOURCE_DIR, file);
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, word) != NULL;
}

/* Driven by the op registry: every op with a gradient rule has a gradient check, here or in
 * the file the table above names. A new op with a rule and no check fails this test. */
static void check_coverage(void) {
    int n = 0;
    for (int op = 0; op < SN_OP_COUNT; op++) {
        if (!sn_ops[op] || !sn_ops[op]->grad) continue;
        n++;
        if (checked[op]) continue;
        const char *file = NULL, *word = NULL;
        for (size_t k = 0; k < sizeof elsewhere / sizeof elsewhere[0]; k++)
            if ((int)elsewhere[k].op == op) file = elsewhere[k].file, word = elsewhere[k].word;
        CHECK(file && file_has(file, word), "op '%s' has a gradient rule and no gradient check%s%s",
              sn_ops[op]->name, file ? " (expected in tests/" : "", file ? file : "");
    }
    printf("ok  the %d ops with a gradient rule all have a gradient check\n", n);
}

int main(void) {
    sn_rng_init(&rng, 1234, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
    check_model_directional();
    check_coverage();
    return sn_test_finish("test_gradcheck");
}
