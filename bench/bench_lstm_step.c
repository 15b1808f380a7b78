/* Where the time of a batch-1 bf16 LSTM step goes (backend/cpu/cpu_lstm_step.c), against
 * the ceilings of this machine, each measured over the same number of steps:
 *   step      sn_lstm_step_run: the recurrent GEMV in bf16, the cell, the f32 logits;
 *   stream    the same bytes read by the same threads (AVX-512 loads summed), one team
 *             call per step: the bandwidth this access pattern can get;
 *   fork      an empty team call per step: the fork/join cost alone.
 * Prints bytes per step, microseconds per step and GB/s, for 1 and 2 threads (or as given).
 *
 *     build/bench/bench_lstm_step [units=1024] [vocab=65] [steps=3000] */
#include <stdio.h>
#include <stdlib.h>

#include "backend/cpu/cpu_lstm_step.h"
#include "backend/cpu/cpu_vec.h"

typedef struct stream_ctx {
    const float *buf;
    int64_t n; /* floats */
    float sink[64][16];
} stream_ctx;

#ifdef SN_CPU_X86
TGT_AVX512 static void stream_task(void *ctx, int ith, int nth) {
    stream_ctx *x = ctx;
    int64_t lo, hi;
    sn_split_range(x->n / 64, ith, nth, &lo, &hi);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = lo * 64; i < hi * 64; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(x->buf + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(x->buf + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(x->buf + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(x->buf + i + 48));
    }
    _mm512_storeu_ps(x->sink[ith & 63], _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}
#endif

static void empty_task(void *ctx, int ith, int nth) {
    (void)ctx, (void)ith, (void)nth;
}

int main(int argc, char **argv) {
    int64_t U = argc > 1 ? atoll(argv[1]) : 1024, V = argc > 2 ? atoll(argv[2]) : 65,
            N = argc > 3 ? atoll(argv[3]) : 3000;
    if (U < 1 || V < 1 || N < 1) return 2;
    if (!sn_lstm_step_bf16_supported()) {
        printf("no AVX512-BF16 here: nothing to measure\n");
        return 77;
    }
    sn_rng rng;
    sn_rng_init(&rng, 1, 0);
    float *R = malloc(sizeof(float) * (size_t)(U * 4 * U)), *Wd = malloc(sizeof(float) * (size_t)(U * V));
    float *xw = calloc((size_t)(4 * U), sizeof(float)), *h = calloc((size_t)U, sizeof(float)),
          *c = calloc((size_t)U, sizeof(float)), *lg = calloc((size_t)V, sizeof(float));
    if (!R || !Wd || !xw || !h || !c || !lg) return 1;
    for (int64_t i = 0; i < U * 4 * U; i++) R[i] = (float)(sn_rng_uniform(&rng) - 0.5) * 0.05f;
    for (int64_t i = 0; i < U * V; i++) Wd[i] = (float)(sn_rng_uniform(&rng) - 0.5) * 0.05f;
    sn_lstm_step *s = NULL;
    if (sn_lstm_step_new(R, U, Wd, NULL, V, &s) != SN_OK) {
        fprintf(stderr, "%s\n", sn_last_error());
        return 1;
    }
    int64_t pairs = (U + 1) / 2, blocks = (U + 15) / 16, vblocks = (V + 15) / 16;
    double bytes = (double)(blocks * pairs * 4 * 64) + (double)(vblocks * U * 64);
    stream_ctx sc = {.n = ((int64_t)bytes / 4 + 63) / 64 * 64};
    float *buf = sn_malloc_aligned(sizeof(float) * (size_t)sc.n);
    if (!buf) return 1;
    for (int64_t i = 0; i < sc.n; i++) buf[i] = 1.0f;
    sc.buf = buf;
    int most = sn_num_threads();
    for (int nth = 1; nth <= most; nth++) {
        sn_set_num_threads(nth);
        for (int round = 0; round < 2; round++) {
            for (int64_t i = 0; i < 50; i++) sn_lstm_step_run(s, xw, h, c, lg); /* warm */
            double t0 = sn_now();
            for (int64_t i = 0; i < N; i++) sn_lstm_step_run(s, xw, h, c, lg);
            double t1 = sn_now();
#ifdef SN_CPU_X86
            for (int64_t i = 0; i < N; i++) sn_parallel(stream_task, &sc, nth);
#endif
            double t2 = sn_now();
            for (int64_t i = 0; i < N; i++) sn_parallel(empty_task, NULL, nth);
            double t3 = sn_now();
            double us_step = 1e6 * (t1 - t0) / (double)N, us_stream = 1e6 * (t2 - t1) / (double)N;
            printf("threads=%d round=%d units=%lld bytes_per_step=%.0f step_us=%.1f "
                   "step_GBps=%.1f chars_per_s_ceiling=%.0f stream_us=%.1f stream_GBps=%.1f "
                   "fork_us=%.2f\n", nth, round, (long long)U, bytes, us_step,
                   bytes / us_step * 1e-3, 1e6 / us_step, us_stream, bytes / us_stream * 1e-3,
                   1e6 * (t3 - t2) / (double)N);
        }
    }
    sn_lstm_step_free(s);
    sn_free_aligned(buf);
    free(R);
    free(Wd);
    free(xw);
    free(h);
    free(c);
    free(lg);
    return 0;
}
