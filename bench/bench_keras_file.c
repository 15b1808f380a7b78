/* Training steps of a Keras-saved .keras file with a per-op profile: what bounds sinter on
 * bench/compare.sh's issue-23 nets (MobileNetV2, the small Xception), which `sinter bench`
 * cannot run (it takes presets on Fashion-MNIST). Uses the file's compile settings (loss,
 * optimizer), synthetic inputs in [-1, 1) and labels i mod classes, and drives the training
 * plan directly, as `sinter bench` does.
 *
 *     build/bench/bench_keras_file FILE.keras [bf16] [BATCH] [STEPS] [WARMUP]
 *
 * Prints one key=value line (median ms/step over the timed steps), then the profile: each
 * executed node's ms per step and share, largest first. Not a timed test: run it quiet. On a
 * busy machine, SN_PROFILE_CLOCK=thread SN_NUM_THREADS=1 gives each op's own CPU time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_impl.h"
#include "nn/train/train_impl.h"
#include "sinter/nn.h"

static int cmp_desc(const void *a, const void *b) {
    double x = ((const double *)a)[0], y = ((const double *)b)[0];
    return (x < y) - (x > y);
}

static int cmp_asc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE.keras [bf16] [BATCH] [STEPS] [WARMUP]\n", argv[0]);
        return 2;
    }
    bool bf16 = argc > 2 && !strcmp(argv[2], "bf16");
    int64_t batch = argc > 3 ? atoll(argv[3]) : 32, steps = argc > 4 ? atoll(argv[4]) : 5;
    int64_t warmup = argc > 5 ? atoll(argv[5]) : 2;
    if (batch < 1 || steps < 1 || steps > 1000 || warmup < 0) {
        fprintf(stderr, "%s: BATCH >= 1, 1 <= STEPS <= 1000, WARMUP >= 0 expected\n", argv[0]);
        return 2;
    }
    sn_model *m = NULL;
    sn_model_file_info info;
    sn_cached_plan *cp = NULL;
    sn_status s = sn_model_load(argv[1], 1, &m, &info);
    sn_compile_opts co = info.compile;
    co.mixed_bfloat16 = bf16;
    co.steps_per_execution = 1;
    if (s == SN_OK) s = sn_model_compile(m, &co);
    sn_shape ys = {.ndim = 1, .dim = {batch}};
    if (s == SN_OK) s = sn_train_plan(m, SN_PLAN_TRAIN, batch, &ys, SN_I32, &cp);
    if (s != SN_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], sn_last_error());
        sn_model_free(m);
        return 1;
    }
    int64_t per = sn_shape_numel(&info.input_shape), classes = sn_model_output_shape(m).dim[0];
    float *x = sn_plan_buffer(cp->plan, cp->x);
    int32_t *y = sn_plan_buffer(cp->plan, cp->y);
    uint32_t r = 1;
    for (int64_t i = 0; i < batch * per; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)(r >> 8) / 8388608.0f - 1.0f;
    }
    for (int64_t i = 0; i < batch; i++) y[i] = (int32_t)(i % (classes > 0 ? classes : 1));
    for (int64_t i = 0; s == SN_OK && i < warmup; i++) s = sn_plan_run(cp->plan, 1, NULL, NULL);
    if (s == SN_OK) s = sn_plan_profile(cp->plan, true);
    double times[1000];
    for (int64_t i = 0; s == SN_OK && i < steps; i++) {
        double t0 = sn_now();
        s = sn_plan_run(cp->plan, 1, NULL, NULL);
        times[i] = sn_now() - t0;
    }
    if (s != SN_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], sn_last_error());
        sn_model_free(m);
        return 1;
    }
    qsort(times, (size_t)steps, sizeof *times, cmp_asc);
    double med = steps % 2 ? times[steps / 2] : (times[steps / 2 - 1] + times[steps / 2]) / 2;
    printf("framework=sinter workload=%s precision=%s threads=%d batch=%lld steps=%lld "
           "ms_per_step=%.4g plan_arena_mb=%.1f\n", argv[1], bf16 ? "bf16" : "fp32",
           sn_num_threads(), (long long)batch, (long long)steps, 1e3 * med,
           (double)sn_plan_peak_bytes(cp->plan) / 1048576.0);
    sn_graph *g = sn_model_graph(m);
    int n = sn_plan_node_count(cp->plan);
    double total = 0, (*rows)[2] = malloc(sizeof *rows * (size_t)(n ? n : 1));
    for (int c = 0; rows && c < n; c++) {
        double sec = 0;
        sn_plan_profile_entry(cp->plan, c, NULL, NULL, &sec);
        rows[c][0] = sec;
        rows[c][1] = c;
        total += sec;
    }
    if (rows) qsort(rows, (size_t)n, sizeof *rows, cmp_desc);
    printf("%-5s %-22s %-12s %-24s %8s %7s\n", "node", "op", "kernel", "shape", "ms/step", "share");
    for (int i = 0; rows && i < n; i++) {
        sn_node id;
        const char *impl;
        double sec;
        sn_plan_profile_entry(cp->plan, (int)rows[i][1], &id, &impl, &sec);
        sn_shape sh = sn_node_shape(g, id);
        char sb[64];
        printf("%-5d %-22s %-12s %-24s %8.3f %6.1f%%\n", (int)id, sn_node_op_name(g, id), impl,
               sn_shape_str(&sh, sb, sizeof sb), 1e3 * sec / (double)steps,
               total > 0 ? 100 * sec / total : 0);
    }
    free(rows);
    sn_model_free(m);
    return 0;
}
