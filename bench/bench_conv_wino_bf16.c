/* The guide CNN's second convolution (3x3, 256 -> 256, valid; x [N, 26, 26, 256] ->
 * y [N, 24, 24, 256]) forward, backward-data and backward-weights through sinter's kernel
 * table, in alternating rounds, three ways under mixed bf16 (issue 28):
 *   wino_bf16:  sinter's bf16 Winograd F(2x2, 3x3) (cpu_conv_wino_bf16.c);
 *   wino_f32:   oneDNN's f32 Winograd (what bf16 ran before it);
 *   bf16_direct: oneDNN's bf16 direct convolution (NHWC activations, blocked weights).
 * Every time includes what the kernel does per run (transforms, reorders, bf16 copies).
 *
 *   build/bench/bench_conv_wino_bf16 [N ROUNDS [SLICE_MB]]   (default: 200 3, slices of 48 MB)
 *
 * SLICE_MB: the bytes of transformed operands one batch slice of the bf16 Winograd may take
 * (WBF_SLICE_BYTES), to tune it: smaller keeps V and M in cache, larger gives longer GEMMs.
 *
 * Prints ms of each op per round, the best of each and each kernel's scratch. Needs oneDNN
 * and AVX512-BF16. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/cpu_conv_wino_bf16.h"
#include "backend/kernel.h"
#include "sinter/graph.h"
#include "sinter/status.h"

#ifdef SN_HAVE_DNNL
static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static float *filled(int64_t n, unsigned seed) {
    float *p = sn_malloc_aligned((size_t)n * sizeof(float));
    if (!p) return NULL;
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    return p;
}
#endif

int main(int argc, char **argv) {
#ifndef SN_HAVE_DNNL
    (void)argc, (void)argv;
    fprintf(stderr, "bench_conv_wino_bf16: built without oneDNN\n");
    return 77;
#else
    int64_t n = argc > 1 ? atoll(argv[1]) : 200;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    double slice_mb = argc > 3 ? atof(argv[3]) : 0;
    if (n < 1 || rounds < 1 || slice_mb < 0) {
        fprintf(stderr, "usage: bench_conv_wino_bf16 [N >= 1 ROUNDS >= 1 [SLICE_MB > 0]]\n");
        return 2;
    }
    sn_cpu_conv_wino_bf16_set_slice_bytes((size_t)(slice_mb * 1048576));
    if (!sn_cpu()->avx512_bf16) {
        fprintf(stderr, "bench_conv_wino_bf16: no AVX512-BF16 on this CPU\n");
        return 77;
    }
    sn_attrs attr;
    memset(&attr, 0, sizeof attr);
    sn_shape xs = sn_shape_make(4, n, 26, 26, 256), ws = sn_shape_make(4, 3, 3, 256, 256),
             ys = sn_shape_make(4, n, 24, 24, 256);
    attr.conv.stride_h = attr.conv.stride_w = 1;
    attr.conv.padding = SN_PAD_VALID;
    attr.conv.x_shape = xs, attr.conv.w_shape = ws;
    float *x = filled(sn_shape_numel(&xs), 1), *w = filled(sn_shape_numel(&ws), 2),
          *dy = filled(sn_shape_numel(&ys), 3), *y = filled(sn_shape_numel(&ys), 4),
          *dx = filled(sn_shape_numel(&xs), 5), *dw = filled(sn_shape_numel(&ws), 6);
    if (!x || !w || !dy || !y || !dx || !dw) return 1;
    static const sn_op ops[3] = {SN_OP_CONV2D, SN_OP_CONV2D_BWD_DATA, SN_OP_CONV2D_BWD_FILTER};
    static const char *opn[3] = {"fwd", "bwd_data", "bwd_weights"};
    static const char *way[3] = {"wino_bf16", "wino_f32", "bf16_direct"};
    static const char *impl[3] = {"wino_bf16", "dnnl_wino", "dnnl_blocked"};
    sn_kcall call[3][3];
    void *scratch[3][3];
    for (int o = 0; o < 3; o++)
        for (int v = 0; v < 3; v++) {
            sn_kcall *c = &call[o][v];
            memset(c, 0, sizeof *c);
            c->op = ops[o];
            c->attr = &attr;
            c->n_in = 2;
            c->bf16 = true;
            c->y.dtype = c->x[0].dtype = c->x[1].dtype = SN_F32;
            c->x[0].shape = o == 1 ? ys : xs;
            c->x[1].shape = o == 2 ? ys : ws;
            c->y.shape = o == 0 ? ys : o == 1 ? xs : ws;
            c->in[0] = o == 1 ? dy : x;
            c->in[1] = o == 2 ? dy : w;
            c->out = o == 0 ? y : o == 1 ? dx : dw;
            const sn_kernel *k = sn_cpu_conv_impl(ops[o], impl[v]);
            size_t bytes = 0;
            sn_status st = k ? k->prepare(c, &bytes) : SN_ERR_UNSUPPORTED;
            if (st != SN_OK) {
                fprintf(stderr, "%s %s: %s\n", way[v], opn[o], sn_last_error());
                return 1;
            }
            scratch[o][v] = c->scratch = bytes ? sn_malloc_aligned(bytes) : NULL;
            c->scratch_bytes = bytes;
            printf("%-12s %-12s scratch %.1f MB\n", way[v], opn[o], bytes / 1048576.0);
        }
    double best[3][3];
    for (int o = 0; o < 3; o++)
        for (int v = 0; v < 3; v++) best[o][v] = 1e30;
    for (int r = 0; r <= rounds; r++) /* round 0: warm-up */
        for (int o = 0; o < 3; o++)
            for (int vi = 0; vi < 3; vi++) {
                int v = (vi + r) % 3; /* rotate the order between rounds */
                const sn_kernel *k = sn_cpu_conv_impl(ops[o], impl[v]);
                double t0 = now_ms();
                if (k->run(&call[o][v]) != SN_OK) {
                    fprintf(stderr, "%s %s: %s\n", way[v], opn[o], sn_last_error());
                    return 1;
                }
                double t = now_ms() - t0;
                if (r > 0) {
                    printf("round %d %-12s %-12s %8.1f ms\n", r, way[v], opn[o], t);
                    if (t < best[o][v]) best[o][v] = t;
                }
            }
    printf("best of %d (N = %lld):\n", rounds, (long long)n);
    for (int v = 0; v < 3; v++) {
        double sum = 0;
        for (int o = 0; o < 3; o++) sum += best[o][v];
        printf("%-12s fwd %8.1f  bwd_data %8.1f  bwd_weights %8.1f  total %8.1f ms\n", way[v],
               best[0][v], best[1][v], best[2][v], sum);
    }
    for (int o = 0; o < 3; o++)
        for (int v = 0; v < 3; v++) {
            const sn_kernel *k = sn_cpu_conv_impl(ops[o], impl[v]);
            if (k->release) k->release(&call[o][v]);
            sn_free_aligned(scratch[o][v]);
        }
    sn_free_aligned(x), sn_free_aligned(w), sn_free_aligned(dy);
    sn_free_aligned(y), sn_free_aligned(dx), sn_free_aligned(dw);
    return 0;
#endif
}
