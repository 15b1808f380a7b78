/* Causal self-attention's training step (forward + backward of q, k, v [B, T, H, D]) two ways:
 *   fused:   the attention op (backend/cpu/cpu_attention.c: blocked, the T x T scores never
 *            stored, the log-sum-exp per row kept between the passes);
 *   unfused: what a graph without it builds (Keras's einsums): transposes to [B, H, T, D],
 *            q k^T as a batched matmul, a mask, softmax, p v, transpose back; its backward
 *            holds [B, H, T, T] scores and probabilities.
 * One context per process, so that peak RSS is this context's:
 *
 *   build/bench/bench_attention [fused|fused-bf16|unfused|fused-drop|unfused-drop
 *                                [T [B H D [STEPS]]]]
 *       (default: fused 256, char_transformer_small's heads: 12 4 32, 10 steps)
 * -drop: attention dropout 0.1 on the probabilities (training): the fused kernel redrawing
 * its masks in the blocked loops (sn_attention_dropout), or sn_dropout on the unfused
 * graph's [B, H, T, T] probabilities.
 * fused-bf16: the fused op under mixed precision (the plan's bf16_compute, as --precision
 * bf16 sets it): bf16 products on CPUs with AVX512-BF16 and D a multiple of 16, else f32.
 *
 * Prints one key=value line: ms_per_step, tokens_per_s, gflops (4 T^2 D B H / 2 forward,
 * 2.5x that backward), plan_arena_mb (every value of the step, planned) and peak_rss_mb.
 * For the memory claim, run T = 256, 1024, 4096 (bench/attention_memory.sh does): the fused
 * arena grows linearly in T, the unfused one quadratically. Timing is for a quiet machine. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/core.h"
#include "sinter/graph.h"

static sn_node unfused(sn_graph *g, sn_node q, sn_node k, sn_node v, int64_t T, int64_t D,
                       double rate) {
    int perm[4] = {0, 2, 1, 3};
    sn_node qt = sn_transpose(g, q, perm), kt = sn_transpose(g, k, perm),
            vt = sn_transpose(g, v, perm);
    sn_node s = sn_matmul(g, qt, kt, false, true); /* [B, H, T, T] */
    float *mask = malloc(sizeof *mask * (size_t)(T * T));
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < T; j++) mask[i * T + j] = j <= i ? 0.0f : -1e9f;
    sn_shape ms = {.ndim = 2, .dim = {T, T}};
    sn_node scale = sn_const(g, SN_F32, &(sn_shape){.ndim = 0}, &(float){1.0f / sqrtf((float)D)});
    s = sn_add(g, sn_mul(g, s, scale), sn_const(g, SN_F32, &ms, mask));
    free(mask);
    sn_node o = sn_matmul(g, sn_dropout(g, sn_softmax(g, s, -1), rate, 1), vt, false, false);
    return sn_transpose(g, o, perm);
}

int main(int argc, char **argv) {
    const char *mode = argc >= 2 ? argv[1] : "fused";
    bool fused = strncmp(mode, "unfused", 7) != 0, bf16 = strcmp(mode, "fused-bf16") == 0;
    double rate = strstr(mode, "-drop") ? 0.1 : 0.0;
    if (strcmp(mode, "fused") && strcmp(mode, "fused-bf16") && strcmp(mode, "unfused") &&
        strcmp(mode, "fused-drop") && strcmp(mode, "unfused-drop")) {
        fprintf(stderr, "bench_attention: unknown mode %s\n", mode);
        return 2;
    }
    int64_t T = argc > 2 ? atoll(argv[2]) : 256, B = argc > 3 ? atoll(argv[3]) : 12,
            H = argc > 4 ? atoll(argv[4]) : 4, D = argc > 5 ? atoll(argv[5]) : 32,
            steps = argc > 6 ? atoll(argv[6]) : 10;
    if (T < 1 || B < 1 || H < 1 || D < 1 || steps < 1) {
        fprintf(stderr, "usage: bench_attention [fused|fused-bf16|unfused|fused-drop|unfused-drop "
                        "[T [B H D [STEPS]]]]\n");
        return 2;
    }
    sn_graph *g = sn_graph_new();
    sn_shape s = {.ndim = 4, .dim = {B, T, H, D}};
    sn_node q = sn_input(g, "q", SN_F32, &s), k = sn_input(g, "k", SN_F32, &s),
            v = sn_input(g, "v", SN_F32, &s), r = sn_input(g, "r", SN_F32, &s);
    sn_node o = fused ? sn_attention_dropout(g, q, k, v, SN_NONE, 1.0 / sqrt((double)D), true,
                                             rate, 1)
                      : unfused(g, q, k, v, T, D, rate);
    sn_node loss = sn_reduce_sum(g, sn_mul(g, o, r), 0, NULL, false);
    sn_node wrt[3] = {q, k, v}, grads[3];
    sn_plan *p = NULL;
    sn_plan_opts po = sn_plan_opts_defaults();
    po.bf16_compute = bf16;
    if (sn_gradients(g, loss, 3, wrt, grads) != SN_OK ||
        sn_plan_new(&p, g, 4, (sn_node[]){loss, grads[0], grads[1], grads[2]},
                    &po) != SN_OK) {
        fprintf(stderr, "bench_attention: %s\n", sn_last_error());
        return 1;
    }
    sn_rng rng;
    sn_rng_init(&rng, 1, 0);
    int64_t n = sn_shape_numel(&s);
    for (int i = 0; i < 4; i++) {
        float *x = sn_plan_buffer(p, (sn_node[]){q, k, v, r}[i]);
        for (int64_t j = 0; j < n; j++) x[j] = (float)sn_rng_normal(&rng);
    }
    if (sn_plan_run(p, 1, NULL, NULL) != SN_OK) { /* warm-up */
        fprintf(stderr, "bench_attention: %s\n", sn_last_error());
        return 1;
    }
    double t0 = sn_now();
    sn_status st = sn_plan_run(p, steps, NULL, NULL);
    double dt = (sn_now() - t0) / (double)steps;
    if (st != SN_OK) {
        fprintf(stderr, "bench_attention: %s\n", sn_last_error());
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double flops = 3.5 * 4.0 * (double)(T * T) * (double)(D * B * H) / 2.0;
    printf("impl=%s T=%lld B=%lld H=%lld D=%lld threads=%d ms_per_step=%.3f tokens_per_s=%.0f "
           "gflops=%.2f plan_arena_mb=%.2f peak_rss_mb=%.1f\n",
           mode,
           (long long)T, (long long)B, (long long)H, (long long)D, sn_num_threads(), dt * 1e3,
           (double)(B * T) / dt, flops / dt * 1e-9, (double)sn_plan_peak_bytes(p) / 1048576.0,
           (double)ru.ru_maxrss / 1024.0);
    sn_plan_free(p);
    sn_graph_free(g);
    return 0;
}
