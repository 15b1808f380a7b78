/* The LSTM layer's training step (forward + backward) two ways, in alternating rounds:
 *   ours:   the graph sinter trains with (graph/op_rnn.h): x @ W + b as one matmul, the lstm op
 *           (per-step sgemm + fused gates), lstm_grad, and the weight gradients as matmuls;
 *   onednn: oneDNN's RNN primitives (dnnl_lstm_forward training + dnnl_lstm_backward), with
 *           what sinter would have to add around them: weights reordered from Keras's layout
 *           (= oneDNN's ldigo) into the layouts each primitive picks, the weight gradients
 *           reordered back and zeroed first (oneDNN accumulates into them).
 * Both read x and dy and write y and dx as [B, T, C], as the layers hold them; oneDNN runs
 * on [T, B, C] (tnc: with ntc its 2.6 release takes its reference kernel), so the four
 * transposes are timed with it. Both start from zero states.
 *
 *   build/bench/bench_rnn [B T D U ROUNDS]      (default: char_lstm_small's 64 100 64 256 5)
 *
 * Prints ms per training step of each, per round, then the best of each. docs/kernels.md
 * records the figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "graph/op_rnn.h"
#include "sinter/graph.h"
#ifdef SN_HAVE_DNNL
#include <dnnl.h>
#endif

static float *randn(int64_t n, double scale, uint64_t seed) {
    float *v = malloc(sizeof *v * (size_t)n);
    sn_rng r;
    sn_rng_init(&r, seed, 0);
    for (int64_t i = 0; v && i < n; i++) v[i] = (float)(scale * sn_rng_normal(&r));
    return v;
}

typedef struct problem {
    int64_t B, T, D, U;
    float *x, *w, *r, *b, *dy; /* x [B,T,D], w [D,4U], r [U,4U], b [4U], dy [B,T,U] */
} problem;

/* ---- ours --------------------------------------------------------------------------------- */
typedef struct ours {
    sn_graph *g;
    sn_plan *p;
    sn_node dx, dw, dr; /* gradients of x, w and r */
} ours;

static int ours_init(ours *o, const problem *pb) {
    int64_t B = pb->B, T = pb->T, D = pb->D, U = pb->U, G = 4 * U;
    sn_graph *g = o->g = sn_graph_new();
    sn_node x = sn_const(g, SN_F32, &(sn_shape){.ndim = 3, .dim = {B, T, D}}, pb->x);
    sn_node w = sn_const(g, SN_F32, &(sn_shape){.ndim = 2, .dim = {D, G}}, pb->w);
    sn_node r = sn_const(g, SN_F32, &(sn_shape){.ndim = 2, .dim = {U, G}}, pb->r);
    sn_node b = sn_const(g, SN_F32, &(sn_shape){.ndim = 1, .dim = {G}}, pb->b);
    sn_node dy = sn_const(g, SN_F32, &(sn_shape){.ndim = 3, .dim = {B, T, U}}, pb->dy);
    sn_node zero = sn_broadcast_to(g, sn_reshape(g, sn_scalar(g, SN_F32, 0.0), &(sn_shape){0}),
                                   &(sn_shape){.ndim = 2, .dim = {B, U}});
    sn_node xw = sn_bias_add(g, sn_matmul(g, sn_reshape(g, x, &(sn_shape){.ndim = 2, .dim = {B * T, D}}),
                                          w, false, false), b);
    xw = sn_reshape(g, xw, &(sn_shape){.ndim = 3, .dim = {B, T, G}});
    sn_node ws = sn_lstm_seq(g, xw, r, zero, zero);
    sn_node h = sn_rnn_slot_seq(g, ws, U, SN_LSTM_H);
    /* sum(h * dy): its gradient w.r.t. h is dy, the gradient the layer receives */
    sn_node loss = sn_reduce_sum(g, sn_mul(g, h, dy), 0, NULL, false);
    sn_node wrt[4] = {x, w, r, b}, grads[4];
    if (sn_gradients(g, loss, 4, wrt, grads) != SN_OK) return 1;
    sn_node targets[5] = {h, grads[0], grads[1], grads[2], grads[3]};
    o->dx = grads[0];
    o->dw = grads[1];
    o->dr = grads[2];
    return sn_plan_new(&o->p, g, 5, targets, NULL) != SN_OK;
}

static int ours_step(ours *o) { return sn_plan_run(o->p, 1, NULL, NULL) != SN_OK; }

static void ours_free(ours *o) {
    sn_plan_free(o->p);
    sn_graph_free(o->g);
}

/* ---- oneDNN ------------------------------------------------------------------------------- */
#ifdef SN_HAVE_DNNL
#define DN(call)                                                                                \
    do {                                                                                        \
        dnnl_status_t st_ = (call);                                                             \
        if (st_ != dnnl_success) {                                                              \
            fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #call, (int)st_);    \
            return 1;                                                                           \
        }                                                                                       \
    } while (0)

typedef struct onednn {
    dnnl_engine_t eng;
    dnnl_stream_t st;
    dnnl_primitive_t fwd, bwd;
    /* user memories (our buffers) and the primitives' own layouts */
    dnnl_memory_t x, w, r, b, y, dy, dx, dw, dr, db, ws;
    dnnl_memory_t fw, fr, bw, br, bdw, bdr; /* fwd / bwd weights, bwd weight gradients */
    dnnl_primitive_t rfw, rfr, rbw, rbr, rdw, rdr; /* reorders between them */
    /* oneDNN 2.6 has optimised RNN kernels only for tnc activations ([T, B, C]; with ntc it
     * falls back to its reference kernel, 10x slower): x, y, dy, dx in tnc, reordered */
    dnnl_memory_t px, py, pdy, pdx;
    dnnl_primitive_t rx, ry, rdy, rdx;
    float *ybuf, *dxbuf, *dwbuf, *drbuf, *dbbuf;
} onednn;

static int mem(dnnl_memory_t *m, const dnnl_memory_desc_t *md, dnnl_engine_t e, void *handle) {
    DN(dnnl_memory_create(m, md, e, handle ? handle : DNNL_MEMORY_ALLOCATE));
    return 0;
}

static int reorder(dnnl_primitive_t *p, dnnl_memory_t from, dnnl_memory_t to, dnnl_engine_t e) {
    const dnnl_memory_desc_t *a, *b;
    DN(dnnl_memory_get_memory_desc(from, &a));
    DN(dnnl_memory_get_memory_desc(to, &b));
    dnnl_primitive_desc_t pd;
    DN(dnnl_reorder_primitive_desc_create(&pd, a, e, b, e, NULL));
    DN(dnnl_primitive_create(p, pd));
    DN(dnnl_primitive_desc_destroy(pd));
    return 0;
}

static int run_reorder(onednn *o, dnnl_primitive_t p, dnnl_memory_t from, dnnl_memory_t to) {
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    DN(dnnl_primitive_execute(p, o->st, 2, a));
    return 0;
}

static int onednn_init(onednn *o, const problem *pb) {
    int64_t B = pb->B, T = pb->T, D = pb->D, U = pb->U;
    DN(dnnl_engine_create(&o->eng, dnnl_cpu, 0));
    DN(dnnl_stream_create(&o->st, o->eng, dnnl_stream_default_flags));
    dnnl_memory_desc_t x_md, y_md, xu_md, yu_md, wl_user, wi_user, b_md, any_wl, any_wi;
    DN(dnnl_memory_desc_init_by_tag(&x_md, 3, (dnnl_dims_t){T, B, D}, dnnl_f32, dnnl_tnc));
    DN(dnnl_memory_desc_init_by_tag(&y_md, 3, (dnnl_dims_t){T, B, U}, dnnl_f32, dnnl_tnc));
    DN(dnnl_memory_desc_init_by_tag(&xu_md, 3, (dnnl_dims_t){T, B, D}, dnnl_f32, dnnl_ntc));
    DN(dnnl_memory_desc_init_by_tag(&yu_md, 3, (dnnl_dims_t){T, B, U}, dnnl_f32, dnnl_ntc));
    DN(dnnl_memory_desc_init_by_tag(&wl_user, 5, (dnnl_dims_t){1, 1, D, 4, U}, dnnl_f32, dnnl_ldigo));
    DN(dnnl_memory_desc_init_by_tag(&wi_user, 5, (dnnl_dims_t){1, 1, U, 4, U}, dnnl_f32, dnnl_ldigo));
    DN(dnnl_memory_desc_init_by_tag(&b_md, 4, (dnnl_dims_t){1, 1, 4, U}, dnnl_f32, dnnl_ldgo));
    DN(dnnl_memory_desc_init_by_tag(&any_wl, 5, (dnnl_dims_t){1, 1, D, 4, U}, dnnl_f32, dnnl_format_tag_any));
    DN(dnnl_memory_desc_init_by_tag(&any_wi, 5, (dnnl_dims_t){1, 1, U, 4, U}, dnnl_f32, dnnl_format_tag_any));

    dnnl_rnn_desc_t fd, bd;
    DN(dnnl_lstm_forward_desc_init(&fd, dnnl_forward_training, dnnl_unidirectional_left2right,
                                   &x_md, NULL, NULL, &any_wl, &any_wi, &b_md, &y_md, NULL, NULL, 0));
    dnnl_primitive_desc_t fpd, bpd;
    DN(dnnl_primitive_desc_create(&fpd, &fd, NULL, o->eng, NULL));
    DN(dnnl_lstm_backward_desc_init(&bd, dnnl_backward, dnnl_unidirectional_left2right, &x_md,
                                    NULL, NULL, &any_wl, &any_wi, &b_md, &y_md, NULL, NULL, &x_md,
                                    NULL, NULL, &any_wl, &any_wi, &b_md, &y_md, NULL, NULL, 0));
    DN(dnnl_primitive_desc_create(&bpd, &bd, NULL, o->eng, fpd));
    const char *impl = NULL;
    DN(dnnl_primitive_desc_query(fpd, dnnl_query_impl_info_str, 0, &impl));
    printf("oneDNN lstm forward: %s", impl);
    DN(dnnl_primitive_desc_query(bpd, dnnl_query_impl_info_str, 0, &impl));
    printf(", backward: %s\n", impl);

    const dnnl_memory_desc_t *fwl = dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0),
                             *fwi = dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 1),
                             *bwl = dnnl_primitive_desc_query_md(bpd, dnnl_query_weights_md, 0),
                             *bwi = dnnl_primitive_desc_query_md(bpd, dnnl_query_weights_md, 1),
                             *dwl = dnnl_primitive_desc_query_md(bpd, dnnl_query_diff_weights_md, 0),
                             *dwi = dnnl_primitive_desc_query_md(bpd, dnnl_query_diff_weights_md, 1),
                             *wsm = dnnl_primitive_desc_query_md(fpd, dnnl_query_workspace_md, 0);
    o->ybuf = malloc(sizeof(float) * (size_t)(B * T * U));
    o->dxbuf = malloc(sizeof(float) * (size_t)(B * T * D));
    o->dwbuf = malloc(sizeof(float) * (size_t)(D * 4 * U));
    o->drbuf = malloc(sizeof(float) * (size_t)(U * 4 * U));
    o->dbbuf = malloc(sizeof(float) * (size_t)(4 * U));
    if (!o->ybuf || !o->dxbuf || !o->dwbuf || !o->drbuf || !o->dbbuf) return 1;
    if (mem(&o->x, &xu_md, o->eng, pb->x) || mem(&o->w, &wl_user, o->eng, pb->w) ||
        mem(&o->r, &wi_user, o->eng, pb->r) || mem(&o->b, &b_md, o->eng, pb->b) ||
        mem(&o->y, &yu_md, o->eng, o->ybuf) || mem(&o->dy, &yu_md, o->eng, pb->dy) ||
        mem(&o->dx, &xu_md, o->eng, o->dxbuf) || mem(&o->px, &x_md, o->eng, NULL) ||
        mem(&o->py, &y_md, o->eng, NULL) || mem(&o->pdy, &y_md, o->eng, NULL) ||
        mem(&o->pdx, &x_md, o->eng, NULL) || mem(&o->dw, &wl_user, o->eng, o->dwbuf) ||
        mem(&o->dr, &wi_user, o->eng, o->drbuf) || mem(&o->db, &b_md, o->eng, o->dbbuf) ||
        mem(&o->ws, wsm, o->eng, NULL) || mem(&o->fw, fwl, o->eng, NULL) ||
        mem(&o->fr, fwi, o->eng, NULL) || mem(&o->bw, bwl, o->eng, NULL) ||
        mem(&o->br, bwi, o->eng, NULL) || mem(&o->bdw, dwl, o->eng, NULL) ||
        mem(&o->bdr, dwi, o->eng, NULL))
        return 1;
    if (reorder(&o->rfw, o->w, o->fw, o->eng) || reorder(&o->rfr, o->r, o->fr, o->eng) ||
        reorder(&o->rbw, o->w, o->bw, o->eng) || reorder(&o->rbr, o->r, o->br, o->eng) ||
        reorder(&o->rdw, o->bdw, o->dw, o->eng) || reorder(&o->rdr, o->bdr, o->dr, o->eng) ||
        reorder(&o->rx, o->x, o->px, o->eng) || reorder(&o->ry, o->py, o->y, o->eng) ||
        reorder(&o->rdy, o->dy, o->pdy, o->eng) || reorder(&o->rdx, o->pdx, o->dx, o->eng))
        return 1;
    DN(dnnl_primitive_create(&o->fwd, fpd));
    DN(dnnl_primitive_create(&o->bwd, bpd));
    DN(dnnl_primitive_desc_destroy(fpd));
    DN(dnnl_primitive_desc_destroy(bpd));
    return 0;
}

static int zero(dnnl_memory_t m) {
    void *h = NULL;
    const dnnl_memory_desc_t *md;
    DN(dnnl_memory_get_data_handle(m, &h));
    DN(dnnl_memory_get_memory_desc(m, &md));
    memset(h, 0, dnnl_memory_desc_get_size(md));
    return 0;
}

static int onednn_step(onednn *o) {
    /* the weights change every step in training: reorder them every step */
    if (run_reorder(o, o->rfw, o->w, o->fw) || run_reorder(o, o->rfr, o->r, o->fr) ||
        run_reorder(o, o->rx, o->x, o->px))
        return 1;
    dnnl_exec_arg_t fa[] = {{DNNL_ARG_SRC_LAYER, o->px}, {DNNL_ARG_WEIGHTS_LAYER, o->fw},
                            {DNNL_ARG_WEIGHTS_ITER, o->fr}, {DNNL_ARG_BIAS, o->b},
                            {DNNL_ARG_DST_LAYER, o->py}, {DNNL_ARG_WORKSPACE, o->ws}};
    DN(dnnl_primitive_execute(o->fwd, o->st, 6, fa));
    if (run_reorder(o, o->ry, o->py, o->y) || run_reorder(o, o->rdy, o->dy, o->pdy)) return 1;
    if (run_reorder(o, o->rbw, o->w, o->bw) || run_reorder(o, o->rbr, o->r, o->br)) return 1;
    if (zero(o->bdw) || zero(o->bdr) || zero(o->db)) return 1;
    dnnl_exec_arg_t ba[] = {{DNNL_ARG_SRC_LAYER, o->px}, {DNNL_ARG_WEIGHTS_LAYER, o->bw},
                            {DNNL_ARG_WEIGHTS_ITER, o->br}, {DNNL_ARG_BIAS, o->b},
                            {DNNL_ARG_DST_LAYER, o->py}, {DNNL_ARG_WORKSPACE, o->ws},
                            {DNNL_ARG_DIFF_DST_LAYER, o->pdy}, {DNNL_ARG_DIFF_SRC_LAYER, o->pdx},
                            {DNNL_ARG_DIFF_WEIGHTS_LAYER, o->bdw},
                            {DNNL_ARG_DIFF_WEIGHTS_ITER, o->bdr}, {DNNL_ARG_DIFF_BIAS, o->db}};
    DN(dnnl_primitive_execute(o->bwd, o->st, 11, ba));
    if (run_reorder(o, o->rdw, o->bdw, o->dw) || run_reorder(o, o->rdr, o->bdr, o->dr) ||
        run_reorder(o, o->rdx, o->pdx, o->dx))
        return 1;
    DN(dnnl_stream_wait(o->st));
    return 0;
}
#endif

static double best_of(double *v, int n) {
    double b = INFINITY;
    for (int i = 0; i < n; i++) b = fmin(b, v[i]);
    return b;
}

int main(int argc, char **argv) {
    problem pb = {64, 100, 64, 256, NULL, NULL, NULL, NULL, NULL};
    int rounds = 5;
    if (argc >= 5) {
        pb.B = atoll(argv[1]);
        pb.T = atoll(argv[2]);
        pb.D = atoll(argv[3]);
        pb.U = atoll(argv[4]);
    }
    if (argc >= 6) rounds = atoi(argv[5]);
    if (pb.B < 1 || pb.T < 1 || pb.D < 1 || pb.U < 1 || rounds < 1 || rounds > 100) {
        fprintf(stderr, "usage: bench_rnn [B T D U [ROUNDS]]\n");
        return 2;
    }
    int64_t B = pb.B, T = pb.T, D = pb.D, U = pb.U;
    pb.x = randn(B * T * D, 1.0, 1);
    pb.w = randn(D * 4 * U, 1.0 / sqrt((double)D), 2);
    pb.r = randn(U * 4 * U, 1.0 / sqrt((double)U), 3);
    pb.b = randn(4 * U, 0.1, 4);
    pb.dy = randn(B * T * U, 1.0, 5);
    if (!pb.x || !pb.w || !pb.r || !pb.b || !pb.dy) return 1;
    /* 3 x forward multiply-adds x2, as char_lstm.py counts: x @ W and h @ R */
    double flops = 3.0 * 2.0 * (double)(B * T) * (double)(4 * U) * (double)(D + U);
    printf("LSTM layer training step: B=%lld T=%lld D=%lld U=%lld threads=%d, %.3f GFLOP\n",
           (long long)B, (long long)T, (long long)D, (long long)U, sn_num_threads(), flops / 1e9);
    ours o = {0};
    if (ours_init(&o, &pb)) {
        fprintf(stderr, "ours: %s\n", sn_last_error());
        return 1;
    }
#ifdef SN_HAVE_DNNL
    onednn d = {0};
    if (onednn_init(&d, &pb)) return 1;
#endif
    const int reps = 3;
    double t_ours[100];
#ifdef SN_HAVE_DNNL
    double t_dnnl[100];
#endif
    /* one untimed step each first (JIT, first touch) */
    if (ours_step(&o)) return 1;
#ifdef SN_HAVE_DNNL
    if (onednn_step(&d)) return 1;
#endif
    for (int r = 0; r < rounds; r++) {
        double t0 = sn_now();
        for (int k = 0; k < reps; k++)
            if (ours_step(&o)) return 1;
        t_ours[r] = (sn_now() - t0) / reps;
        printf("round %d: ours %.2f ms", r + 1, 1e3 * t_ours[r]);
#ifdef SN_HAVE_DNNL
        t0 = sn_now();
        for (int k = 0; k < reps; k++)
            if (onednn_step(&d)) return 1;
        t_dnnl[r] = (sn_now() - t0) / reps;
        printf(", onednn %.2f ms", 1e3 * t_dnnl[r]);
#endif
        printf("\n");
    }
    double bo = best_of(t_ours, rounds);
    printf("best: ours %.2f ms (%.1f GFLOP/s)", 1e3 * bo, flops / bo / 1e9);
#ifdef SN_HAVE_DNNL
    double bd = best_of(t_dnnl, rounds);
    printf(", onednn %.2f ms (%.1f GFLOP/s); onednn / ours time %.2f", 1e3 * bd, flops / bd / 1e9,
           bd / bo);
    /* the two compute the same thing: compare the gradients of r and x */
    const float *gr = sn_plan_buffer(o.p, o.dr), *gx = sn_plan_buffer(o.p, o.dx);
    double er = 0, ex = 0, mx = 0;
    for (int64_t i = 0; gr && i < U * 4 * U; i++) {
        er = fmax(er, fabs((double)gr[i] - d.drbuf[i]));
        mx = fmax(mx, fabs((double)gr[i]));
    }
    for (int64_t i = 0; gx && i < B * T * D; i++) {
        ex = fmax(ex, fabs((double)gx[i] - d.dxbuf[i]));
        mx = fmax(mx, fabs((double)gx[i]));
    }
    const float *gw = sn_plan_buffer(o.p, o.dw);
    double ew = 0;
    for (int64_t i = 0; gw && i < D * 4 * U; i++) ew = fmax(ew, fabs((double)gw[i] - d.dwbuf[i]));
    double ro = 0, rd = 0;
    for (int64_t i = 0; gr && i < U * 4 * U; i++) {
        ro = fmax(ro, fabs((double)gr[i]));
        rd = fmax(rd, fabs((double)d.drbuf[i]));
    }
    printf("\nmax |dR|: ours %.3g, onednn %.3g", ro, rd);
    printf("\nmax |ours - onednn|: dR %.3g, dW %.3g, dx %.3g (max |value| %.3g)", er, ew, ex, mx);
#endif
    printf("\n");
    ours_free(&o);
    return 0;
}
