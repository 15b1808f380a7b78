/* The LSTM layer's training step (forward + backward) two ways, in alternating rounds:
 *   ours:   the graph sinter trains with (graph/op_rnn.h): x @ W + b as one matmul, the lstm op
 *           (per-step sgemm + fused gates), lstm_grad, and the weight gradients as matmuls;
 *   onednn: oneDNN's RNN primitives (dnnl_lstm_forward training + dnnl_lstm_backward) through
 *           backend/cpu/cpu_rnn_dnnl.c, with what sinter would have to add around them: the
 *           weights reordered every step from Keras's layout (= oneDNN's ldigo) into the
 *           layouts each primitive picks, the weight gradients zeroed (oneDNN accumulates into
 *           them) and reordered back, x, y, dy, dx transposed between our [B, T, C] and
 *           oneDNN's [T, B, C] (tnc; with ntc its 2.6 release takes its reference kernel), and
 *           in bf16 the conversions. Both start from zero states.
 * Rounds alternate which of the two runs first; the best of each is reported per order.
 *
 *   build/bench/bench_rnn [B T D U [ROUNDS [f32|bf16]]]
 *       (default: char_lstm_small's 64 100 64 256, 6 rounds, f32; bf16 is oneDNN's precision,
 *       ours is always f32)
 *
 * Exits 77 in builds without oneDNN. docs/kernels.md records the figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "graph/op_rnn.h"
#include "backend/cpu/cpu_rnn_dnnl.h"
#include "sinter/graph.h"

static float *randn(int64_t n, double scale, uint64_t seed) {
    float *v = malloc(sizeof *v * (size_t)n);
    sn_rng r;
    sn_rng_init(&r, seed, 0);
    for (int64_t i = 0; v && i < n; i++) v[i] = (float)(scale * sn_rng_normal(&r));
    return v;
}

typedef struct problem {
    int64_t B, T, D, U;
    bool gru; /* Keras's GRU (reset_after=True) = oneDNN's LBR-GRU instead of the LSTM */
    /* x [B,T,D], w [D,GU], r [U,GU], b [4U], dy [B,T,U]; G = 4 (LSTM) or 3 (GRU, whose b is
     * oneDNN's [b_u, b_r, b_o, b_u'] with b_u' = 0: Keras's input bias and a zero recurrent one) */
    float *x, *w, *r, *b, *dy;
} problem;

/* ---- ours --------------------------------------------------------------------------------- */
typedef struct ours {
    sn_graph *g;
    sn_plan *p;
    sn_node dx, dw, dr; /* gradients of x, w and r */
} ours;

static int ours_init(ours *o, const problem *pb) {
    int64_t B = pb->B, T = pb->T, D = pb->D, U = pb->U, G = (pb->gru ? 3 : 4) * U;
    sn_graph *g = o->g = sn_graph_new();
    sn_node x = sn_const(g, SN_F32, &(sn_shape){.ndim = 3, .dim = {B, T, D}}, pb->x);
    sn_node w = sn_const(g, SN_F32, &(sn_shape){.ndim = 2, .dim = {D, G}}, pb->w);
    sn_node r = sn_const(g, SN_F32, &(sn_shape){.ndim = 2, .dim = {U, G}}, pb->r);
    sn_node b = sn_const(g, SN_F32, &(sn_shape){.ndim = 1, .dim = {G}}, pb->b); /* its first G */
    sn_node dy = sn_const(g, SN_F32, &(sn_shape){.ndim = 3, .dim = {B, T, U}}, pb->dy);
    sn_node zero = sn_broadcast_to(g, sn_reshape(g, sn_scalar(g, SN_F32, 0.0), &(sn_shape){0}),
                                   &(sn_shape){.ndim = 2, .dim = {B, U}});
    sn_node xw = sn_bias_add(g, sn_matmul(g, sn_reshape(g, x, &(sn_shape){.ndim = 2, .dim = {B * T, D}}),
                                          w, false, false), b);
    xw = sn_reshape(g, xw, &(sn_shape){.ndim = 3, .dim = {B, T, G}});
    sn_node rb = sn_broadcast_to(g, sn_reshape(g, sn_scalar(g, SN_F32, 0.0), &(sn_shape){0}),
                                 &(sn_shape){.ndim = 1, .dim = {G}});
    sn_node ws = pb->gru ? sn_gru_seq(g, xw, r, rb, zero) : sn_lstm_seq(g, xw, r, zero, zero);
    sn_node h = sn_rnn_slot_seq(g, ws, U, pb->gru ? SN_GRU_H : SN_LSTM_H);
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

/* ---- oneDNN (backend/cpu/cpu_rnn_dnnl.c, tested in tests/test_rnn_dnnl.c) ------------------ */
typedef struct onednn {
    sn_dnnl_rnn *l;
    sn_dnnl_rnn_fwd f;
    sn_dnnl_rnn_bwd g;
    float *buf;
} onednn;

static int onednn_init(onednn *o, const problem *pb, bool bf16) {
    int64_t B = pb->B, T = pb->T, D = pb->D, U = pb->U, G = (pb->gru ? 3 : 4) * U;
    if (sn_dnnl_rnn_new(&o->l, pb->gru ? SN_DNNL_GRU_LBR : SN_DNNL_LSTM, B, T, D, U, bf16, T * U,
                        U) != SN_OK)
        return 1;
    o->buf = malloc(sizeof(float) * (size_t)(B * T * U + B * T * D + D * G + U * G + 4 * U));
    if (!o->buf) return 1;
    float *y = o->buf, *dx = y + B * T * U, *dw = dx + B * T * D, *dr = dw + D * G,
          *db = dr + U * G; /* [4U]: a GRU has 4 biases */
    o->f = (sn_dnnl_rnn_fwd){.x = pb->x, .w = pb->w, .r = pb->r, .b = pb->b, .y = y};
    o->g = (sn_dnnl_rnn_bwd){.dy = pb->dy, .dx = dx, .dw = dw, .dr = dr, .db = db};
    printf("oneDNN %s %s (forward / backward): %s\n", bf16 ? "bf16" : "f32",
           pb->gru ? "lbr_gru" : "lstm", sn_dnnl_rnn_impl(o->l));
    return 0;
}

static int onednn_step(onednn *o) {
    return sn_dnnl_rnn_forward(o->l, &o->f) != SN_OK ||
           sn_dnnl_rnn_backward(o->l, &o->f, &o->g) != SN_OK;
}

static void onednn_free(onednn *o) {
    sn_dnnl_rnn_free(o->l);
    free(o->buf);
}

static double timed(int (*step)(void *), void *arg, int reps) {
    double t0 = sn_now();
    for (int k = 0; k < reps; k++)
        if (step(arg)) return NAN;
    return (sn_now() - t0) / reps;
}
static int ours_step_v(void *o) { return ours_step(o); }
static int onednn_step_v(void *o) { return onednn_step(o); }

/* max |a - b| over n, and max |b| */
static double maxdiff(const float *a, const float *b, int64_t n, double *mb) {
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        *mb = fmax(*mb, fabs((double)b[i]));
    }
    return e;
}

int main(int argc, char **argv) {
    problem pb = {.B = 64, .T = 100, .D = 64, .U = 256};
    int rounds = 6;
    const char *prec = "f32";
    if (argc >= 5) {
        pb.B = atoll(argv[1]);
        pb.T = atoll(argv[2]);
        pb.D = atoll(argv[3]);
        pb.U = atoll(argv[4]);
    }
    if (argc >= 6) rounds = atoi(argv[5]);
    if (argc >= 7) prec = argv[6];
    const char *cell = argc >= 8 ? argv[7] : "lstm";
    bool bf16 = strcmp(prec, "bf16") == 0;
    pb.gru = strcmp(cell, "gru") == 0;
    if (pb.B < 1 || pb.T < 1 || pb.D < 1 || pb.U < 1 || rounds < 1 || rounds > 100 ||
        (!bf16 && strcmp(prec, "f32") != 0) || (!pb.gru && strcmp(cell, "lstm") != 0)) {
        fprintf(stderr, "usage: bench_rnn [B T D U [ROUNDS [f32|bf16 [lstm|gru]]]]\n");
        return 2;
    }
    int64_t B = pb.B, T = pb.T, D = pb.D, U = pb.U, NG = pb.gru ? 3 : 4;
    pb.x = randn(B * T * D, 1.0, 1);
    pb.w = randn(D * NG * U, 1.0 / sqrt((double)D), 2);
    pb.r = randn(U * NG * U, 1.0 / sqrt((double)U), 3);
    pb.b = randn(4 * U, 0.1, 4);
    if (pb.b && pb.gru) memset(pb.b + 3 * U, 0, sizeof(float) * (size_t)U); /* b_u' */
    pb.dy = randn(B * T * U, 1.0, 5);
    if (!pb.x || !pb.w || !pb.r || !pb.b || !pb.dy) return 1;
    /* 3 x forward multiply-adds x2, as char_lstm.py counts: x @ W and h @ R */
    double flops = 3.0 * 2.0 * (double)(B * T) * (double)(NG * U) * (double)(D + U);
    printf("%s layer training step: B=%lld T=%lld D=%lld U=%lld threads=%d, %.3f GFLOP; "
           "ours f32, oneDNN %s\n", pb.gru ? "GRU" : "LSTM", (long long)B, (long long)T, (long long)D, (long long)U,
           sn_num_threads(), flops / 1e9, prec);
    ours o = {0};
    if (ours_init(&o, &pb)) {
        fprintf(stderr, "ours: %s\n", sn_last_error());
        return 1;
    }
    onednn d = {0};
    if (onednn_init(&d, &pb, bf16)) {
        fprintf(stderr, "oneDNN: %s\n", sn_last_error());
        ours_free(&o);
        return sn_last_error()[0] && strstr(sn_last_error(), "no oneDNN") ? 77 : 1;
    }
    const int reps = 3;
    /* best time of each, separately for the rounds where ours ran first and second, so that a
     * neighbour's load that comes and goes favours neither order */
    double best[2][2] = {{INFINITY, INFINITY}, {INFINITY, INFINITY}}; /* [order][ours, onednn] */
    /* one untimed step each first (JIT, first touch) */
    if (ours_step(&o) || onednn_step(&d)) {
        fprintf(stderr, "step failed: %s\n", sn_last_error());
        return 1;
    }
    for (int r = 0; r < rounds; r++) {
        int first = r % 2; /* 0: ours first */
        double t[2];
        for (int k = 0; k < 2; k++) {
            int which = k ^ first;
            t[which] = which ? timed(onednn_step_v, &d, reps) : timed(ours_step_v, &o, reps);
        }
        if (isnan(t[0]) || isnan(t[1])) {
            fprintf(stderr, "step failed: %s\n", sn_last_error());
            return 1;
        }
        printf("round %d (%s first): ours %.2f ms, onednn %.2f ms\n", r + 1,
               first ? "onednn" : "ours", 1e3 * t[0], 1e3 * t[1]);
        for (int k = 0; k < 2; k++) best[first][k] = fmin(best[first][k], t[k]);
    }
    double bo = fmin(best[0][0], best[1][0]), bd = fmin(best[0][1], best[1][1]);
    printf("best: ours %.2f ms (%.1f GFLOP/s), onednn %s %.2f ms (%.1f GFLOP/s)\n", 1e3 * bo,
           flops / bo / 1e9, prec, 1e3 * bd, flops / bd / 1e9);
    printf("onednn time / ours: %.2f (ours first), %.2f (onednn first)\n",
           best[0][1] / best[0][0], rounds > 1 ? best[1][1] / best[1][0] : NAN);
    /* the two compute the same thing from zero states: compare the gradients */
    const float *gr = sn_plan_buffer(o.p, o.dr), *gw = sn_plan_buffer(o.p, o.dw),
                *gx = sn_plan_buffer(o.p, o.dx);
    if (gr && gw && gx) {
        double mr = 0, mw = 0, mx = 0;
        double er = maxdiff(d.g.dr, gr, U * NG * U, &mr), ew = maxdiff(d.g.dw, gw, D * NG * U, &mw),
               ex = maxdiff(d.g.dx, gx, B * T * D, &mx);
        printf("max |onednn - ours| (max |ours|): dR %.3g (%.3g), dW %.3g (%.3g), dx %.3g (%.3g)\n",
               er, mr, ew, mw, ex, mx);
    }
    onednn_free(&d);
    ours_free(&o);
    return 0;
}
