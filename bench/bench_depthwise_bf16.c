/* MobileNetV2's 3x3 depthwise convolutions at batch 32 (96x96 input: 48x48x96 stride 2 after
 * correct_pad, 24x24x144, 12x12x384, 6x6x960 stride 1 "same" as valid on the padded size),
 * forward, backward-data and backward-weights, in alternating rounds two ways under mixed
 * bf16 (cpu_depthwise.c):
 *   f32:  the kernel table's, which keeps f32 compute under mixed bf16;
 *   bf16: "dnnl_bf16", oneDNN's bf16 depthwise (x, w, dy converted from our f32 buffers by
 *         oneDNN's reorders, f32 accumulation and output).
 * Every time includes the per-run reorders.
 *
 *   build/bench/bench_depthwise_bf16 [ROUNDS]   (default 5)
 *
 * Prints the best wall ms of each op and way, and bf16/f32. Needs oneDNN and AVX512-BF16.
 * Not a timed test: run it quiet. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/kernel.h"
#include "../tests/conv_case_util.h"
#include "sinter/graph.h"
#include "sinter/status.h"

#ifdef SN_HAVE_DNNL
static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static float *randf(int64_t n, uint32_t seed) {
    float *p = sn_malloc_aligned((size_t)n * sizeof *p);
    for (int64_t i = 0; p && i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / 8388608.0f - 1.0f;
    }
    return p;
}
#endif

int main(int argc, char **argv) {
#ifndef SN_HAVE_DNNL
    (void)argc, (void)argv;
    fprintf(stderr, "bench_depthwise_bf16: this build has no oneDNN\n");
    return 77;
#else
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (rounds < 1) rounds = 5;
    if (!sn_cpu()->avx512_bf16) {
        fprintf(stderr, "bench_depthwise_bf16: this CPU lacks AVX512-BF16\n");
        return 77;
    }
    const sn_kernel *ks[2] = {sn_cpu_depthwise_impl("dnnl"), sn_cpu_depthwise_impl("dnnl_bf16")};
    static const struct { int64_t h, c; int s; } layers[] = {
        {49, 96, 2}, {26, 144, 1}, {14, 384, 1}, {8, 960, 1}};
    const int64_t n = 32;
    double tot[2] = {0, 0};
    printf("%-26s %-10s %9s %9s %9s\n", "layer (x)", "op", "f32 ms", "bf16 ms", "bf16/f32");
    for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++) {
        const int64_t h = layers[l].h, c = layers[l].c;
        conv_case cc = conv_case_make(true, n, layers[l].h, layers[l].h, layers[l].c, 3, 3, 1,
                                      layers[l].s, layers[l].s, false);
        const sn_attrs attr = cc.attr;
        const conv_op *ops = cc.ops;
        for (int o = 0; o < 3; o++) {
            sn_kcall cs[2];
            float *in[2] = {randf(sn_shape_numel(&ops[o].in[0]), 1),
                            randf(sn_shape_numel(&ops[o].in[1]), 2)};
            double best[2] = {1e30, 1e30};
            for (int v = 0; v < 2; v++) {
                memset(&cs[v], 0, sizeof cs[v]);
                sn_kcall *k = &cs[v];
                k->op = ops[o].op, k->attr = &attr, k->n_in = 2, k->bf16 = true;
                k->y.dtype = SN_F32, k->y.shape = ops[o].out;
                for (int i = 0; i < 2; i++)
                    k->x[i].dtype = SN_F32, k->x[i].shape = ops[o].in[i], k->in[i] = in[i];
                k->out = randf(sn_shape_numel(&ops[o].out), 3);
                size_t sb = 0;
                sn_status st = ks[v]->prepare(k, &sb);
                if (st != SN_OK) {
                    fprintf(stderr, "bench_depthwise_bf16: %s\n", sn_last_error());
                    return 1;
                }
                k->scratch = sb ? sn_malloc_aligned(sb) : NULL, k->scratch_bytes = sb;
                ks[v]->run(k); /* warm-up: first-touch, oneDNN's JIT */
            }
            for (int r = 0; r < rounds; r++)
                for (int v = 0; v < 2; v++) {
                    double t0 = now_ms();
                    ks[v]->run(&cs[v]);
                    double t = now_ms() - t0;
                    if (t < best[v]) best[v] = t;
                }
            char name[48];
            snprintf(name, sizeof name, "%lldx%lldx%lld s%d", (long long)h, (long long)h,
                     (long long)c, layers[l].s);
            printf("%-26s %-10s %9.3f %9.3f %9.2f\n", name, ops[o].what, best[0], best[1],
                   best[1] / best[0]);
            tot[0] += best[0], tot[1] += best[1];
            for (int v = 0; v < 2; v++) {
                ks[v]->release(&cs[v]);
                sn_free_aligned(cs[v].scratch);
                sn_free_aligned(cs[v].out);
            }
            sn_free_aligned(in[0]);
            sn_free_aligned(in[1]);
        }
    }
    printf("%-26s %-10s %9.3f %9.3f %9.2f\n", "all", "", tot[0], tot[1], tot[1] / tot[0]);
    return 0;
#endif
}
