/* sinter bench: training-step speed of a preset model on Fashion-MNIST batches (or, for the
 * character models, windows of a text: bench_text.c), printed as one line of key=value pairs
 * like ../shared/bench's PyTorch scripts, so the two compare side by side (bench/compare.sh).
 * The step is the compiled model's training plan driven directly: batches are sliced from the
 * normalised training set (or the encoded text), as the PyTorch scripts do, so neither side
 * times an input pipeline. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli/bench_text.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "nn/train/train_impl.h"

static const char *const precisions[] = {"fp32", "bf16", "fp32-strict", NULL};
static const char *const optimizers[] = {"sgd", "adam", "adamw", "rmsprop", NULL};

typedef struct bench_feed {
    const float *x;   /* [n, 784] in [0, 1] */
    const int32_t *y; /* [n] */
    int64_t n, batch, pixels, next;
    sn_node xin, yin;
} bench_feed;

/* Batch i is the contiguous window starting at (i * B) mod (n - B + 1), as seed_cnn.py. */
static sn_status feed(void *ctx, sn_plan *p, int64_t step) {
    bench_feed *f = ctx;
    int64_t j = (f->next++ * f->batch) % (f->n - f->batch + 1);
    memcpy(sn_plan_buffer(p, f->xin), f->x + j * f->pixels, sizeof(float) * (size_t)(f->batch * f->pixels));
    memcpy(sn_plan_buffer(p, f->yin), f->y + j, sizeof(int32_t) * (size_t)f->batch);
    return SN_OK;
}

/* The machine's practical peak: the best of a few 2048^3 GEMMs through the same kernels, in
 * fp32, or with bf16 compute (mixed_bfloat16's matmul: bf16 operands, f32 accumulation). */
static double measure_peak_gflops(bool bf16) {
    const int64_t n = 2048;
    sn_graph *g = sn_graph_new();
    sn_shape s = {.ndim = 2, .dim = {n, n}};
    sn_node a = sn_input(g, "a", SN_F32, &s), b = sn_input(g, "b", SN_F32, &s);
    sn_node c = sn_matmul(g, a, b, false, false);
    sn_plan *p = NULL;
    double best = 0;
    sn_plan_opts po = sn_plan_opts_defaults();
    po.bf16_compute = bf16;
    if (sn_plan_new(&p, g, 1, &c, &po) == SN_OK) {
        float *pa = sn_plan_buffer(p, a), *pb = sn_plan_buffer(p, b);
        for (int64_t i = 0; i < n * n; i++) pa[i] = pb[i] = (float)((i % 13) - 6) * 0.01f;
        for (int r = 0; r < 4; r++) {
            double t0 = sn_now();
            if (sn_plan_run(p, 1, NULL, NULL) != SN_OK) break;
            double dt = sn_now() - t0;
            if (r > 0 && 2.0 * n * n * n / dt / 1e9 > best) best = 2.0 * n * n * n / dt / 1e9;
        }
    }
    sn_plan_free(p);
    sn_graph_free(g);
    return best;
}

/* Training FLOPs per sample as the PyTorch scripts count them: 3 x forward, forward = 2 x the
 * multiply-adds of Conv2D and Dense layers. */
static double train_flops_per_sample(sn_model *m) {
    double fwd = 0;
    sn_graph *g = sn_model_graph(m);
    for (int i = 0; i < sn_model_layer_count(m); i++) {
        const char *cls = sn_model_layer_class(m, i);
        sn_node v[4];
        if (sn_model_layer_variables(m, i, v, 4) < 1) continue;
        sn_shape k = sn_node_shape(g, v[0]), out = sn_model_layer_output_shape(m, i);
        if (!strcmp(cls, "Conv2D"))
            fwd += 2.0 * (double)sn_shape_numel(&out) * (double)(k.dim[0] * k.dim[1] * k.dim[2]);
        else if (!strcmp(cls, "Dense"))
            fwd += 2.0 * (double)k.dim[0] * (double)k.dim[1];
    }
    return 3.0 * fwd;
}

static int cmp_desc(const void *a, const void *b) {
    double x = ((const double *)a)[0], y = ((const double *)b)[0];
    return (x < y) - (x > y);
}

static void print_profile(sn_plan *p, sn_graph *g, double peak, int64_t steps) {
    int n = sn_plan_node_count(p);
    double total = 0, (*rows)[2] = malloc(sizeof *rows * (size_t)(n ? n : 1));
    if (!rows) return;
    for (int c = 0; c < n; c++) {
        double sec = 0;
        sn_plan_profile_entry(p, c, NULL, NULL, &sec);
        rows[c][0] = sec;
        rows[c][1] = c;
        total += sec;
    }
    qsort(rows, (size_t)n, sizeof *rows, cmp_desc);
    printf("%-5s %-20s %-10s %-22s %8s %7s %9s %6s\n", "node", "op", "kernel", "shape", "ms/step",
           "share", "GFLOP/s", "peak");
    for (int r = 0; r < n; r++) {
        sn_node id;
        const char *impl;
        double sec;
        sn_plan_profile_entry(p, (int)rows[r][1], &id, &impl, &sec);
        sn_shape s = sn_node_shape(g, id);
        char sb[64];
        double gf = sec > 0 ? sn_node_flops(g, id) * (double)steps / sec / 1e9 : 0;
        printf("%-5d %-20s %-10s %-22s %8.3f %6.1f%% %9.1f %5.1f%%\n", (int)id,
               sn_node_op_name(g, id), impl, sn_shape_str(&s, sb, sizeof sb),
               1e3 * sec / (double)steps, total > 0 ? 100 * sec / total : 0, gf,
               peak > 0 ? 100 * gf / peak : 0);
    }
    free(rows);
}

/* What fills the arena at its peak: the values live then, the largest first (the rest summed),
 * so a memory figure says what bounds it. */
static void print_peak_memory(sn_plan *p, sn_graph *g) {
    int n = 0;
    while (sn_plan_peak_value(p, n, NULL, NULL)) n++;
    double (*rows)[2] = malloc(sizeof *rows * (size_t)(n ? n : 1));
    if (!rows) return;
    double live = 0;
    for (int i = 0; i < n; i++) {
        size_t b = 0;
        sn_plan_peak_value(p, i, NULL, &b);
        rows[i][0] = (double)b;
        rows[i][1] = i;
        live += (double)b;
    }
    qsort(rows, (size_t)n, sizeof *rows, cmp_desc);
    int c = sn_plan_peak_call(p);
    sn_node at = -1;
    if (c >= 0) sn_plan_profile_entry(p, c, &at, NULL, NULL);
    printf("\narena and scratch %.1f MB; at the arena's peak (call %d, node %d %s) %d values "
           "hold %.1f MB:\n",
           (double)sn_plan_peak_bytes(p) / 1048576.0, c, (int)at,
           at >= 0 ? sn_node_op_name(g, at) : "inputs", n, live / 1048576.0);
    printf("%-5s %-20s %-22s %9s\n", "node", "op", "shape", "MB");
    double rest = 0;
    for (int r = 0; r < n; r++) {
        if (r >= 12) {
            rest += rows[r][0];
            continue;
        }
        sn_node id;
        sn_plan_peak_value(p, (int)rows[r][1], &id, NULL);
        sn_shape sh = sn_node_shape(g, id);
        char sb[64];
        printf("%-5d %-20s %-22s %9.1f\n", (int)id, sn_node_op_name(g, id),
               sn_shape_str(&sh, sb, sizeof sb), rows[r][0] / 1048576.0);
    }
    if (n > 12) printf("(%d smaller values: %.1f MB)\n", n - 12, rest / 1048576.0);
    free(rows);
}

int sn_cmd_bench(int argc, char **argv) {
    const char *prog = "sinter bench";
    const char *model_name = "tpu_guide_cnn", *opt_name = "adam", *precision = "fp32";
    const char *dataset = "fashion_mnist", *data_dir = NULL;
    const char *text_path = NULL; /* character models: required (no corpus is built in) */
    int64_t batch = 200, steps = 5, warmup = 2, threads = 0, spe = 1, seed = 0, seq = 100;
    double lr = 1e-3;
    bool profile = false;
    const char *device = NULL;
    sn_flag flags[] = {
        {.name = "model", .kind = SN_FLAG_ENUM, .value = &model_name, .choices = sn_cli_models,
         .help = "the preset to train"},
        {.name = "optimizer", .kind = SN_FLAG_ENUM, .value = &opt_name, .choices = optimizers,
         .help = "optimizer, with Keras's defaults"},
        {.name = "learning-rate", .kind = SN_FLAG_FLOAT, .value = &lr, .fmin = 0, .fmax = 10,
         .fmin_exclusive = true, .help = "learning rate"},
        {.name = "batch-size", .kind = SN_FLAG_INT, .value = &batch, .imin = 1, .imax = 65536,
         .help = "examples per step"},
        {.name = "steps", .kind = SN_FLAG_INT, .value = &steps, .imin = 1, .imax = 1000000,
         .help = "timed training steps"},
        {.name = "warmup", .kind = SN_FLAG_INT, .value = &warmup, .imin = 0, .imax = 1000000,
         .help = "untimed steps first"},
        {.name = "threads", .kind = SN_FLAG_INT, .value = &threads, .imin = 0, .imax = 1024,
         .help = "threads, 0 = $SN_NUM_THREADS or all cores"},
        SN_CLI_DEVICE_FLAG(&device),
        {.name = "precision", .kind = SN_FLAG_ENUM, .value = &precision, .choices = precisions,
         .help = "fp32 (TF32 on a GPU), bf16 (mixed_bfloat16) or fp32-strict (no TF32)"},
        {.name = "steps-per-execution", .kind = SN_FLAG_INT, .value = &spe, .imin = 1,
         .imax = 1000000, .help = "training steps per plan call"},
        {.name = "seed", .kind = SN_FLAG_INT, .value = &seed, .imin = 0, .imax = INT64_MAX,
         .help = "weights seed"},
        {.name = "profile", .kind = SN_FLAG_BOOL, .value = &profile,
         .help = "print a per-op table: time share, GFLOP/s and fraction of peak"},
        {.name = "data-dir", .kind = SN_FLAG_STRING, .value = &data_dir, .metavar = "DIR",
         .help = "a folder with the four IDX files, instead of Fashion-MNIST"},
        {.name = "data", .kind = SN_FLAG_STRING, .value = &text_path, .metavar = "PATH",
         .help = "character models (required): the UTF-8 text whose windows are the batches"},
        {.name = "seq-length", .kind = SN_FLAG_INT, .value = &seq, .imin = 1, .imax = 1000000,
         .help = "character models: characters per sequence"},
    };
    sn_flag_set fs = {prog,
                      "Times training steps of a preset model on Fashion-MNIST batches (character "
                      "models: windows\nof --data, batch 64 x 100, 10 steps, as "
                      "../shared/bench/char_lstm.py) and prints one key=value line\n"
                      "(ms_per_step, samples_per_s, tokens_per_s, gflops, peak_fraction against a "
                      "2048^3 GEMM measured\nin the same process, peak_rss_mb).",
                      (int)(sizeof flags / sizeof flags[0]), flags};
    int rc = sn_flags_parse(&fs, argc, argv);
    if (rc >= 0) return rc;
    const bool bf16 = !strcmp(precision, "bf16");
    sn_cli_set_threads(threads);
    if ((rc = sn_cli_set_device(prog, device)) >= 0) return rc;

    const bool text = sn_cli_is_text_model(model_name);
    if (text && !sn_flags_find(&fs, "batch-size")->set) batch = 64;
    if (text && !sn_flags_find(&fs, "steps")->set) steps = 10;
    if (text && !text_path) {
        fprintf(stderr, "%s: --model %s trains on a text: give it with --data TEXT (the "
                "Shakespeare corpus: --data \"$(scripts/shakespeare.sh)\" in the source tree)\n",
                prog, model_name);
        return 2;
    }
    /* A Transformer reads at most its context: 64 for char_transformer_small (nanoGPT's
     * block_size), with nanoGPT's CPU batch of 12 */
    if (text && sn_model_preset_text_context(model_name)) {
        if (!sn_flags_find(&fs, "seq-length")->set) seq = sn_model_preset_text_context(model_name);
        if (!sn_flags_find(&fs, "batch-size")->set) batch = 12;
    }

    sn_tensor *xu = NULL, *yu = NULL;
    int64_t n = 0, pixels = 0;
    float *x = NULL;
    int32_t *y = NULL;
    sn_bench_text bt = {0};
    sn_model *m = NULL;
    sn_status s = SN_OK;
    if (text) {
        s = sn_bench_text_load(text_path, batch, seq, (uint64_t)seed, &bt);
        if (s == SN_OK) s = sn_model_preset_text(model_name, bt.vocab, &m);
        if (s == SN_OK) s = sn_model_build(m, &(sn_shape){.ndim = 1, .dim = {seq}}, (uint64_t)seed);
    } else {
        if ((rc = sn_cli_load_split(prog, dataset, data_dir, "train", &xu, &yu)) != 0) return rc;
        const sn_shape *xs = sn_tensor_shape(xu);
        n = xs->dim[0];
        pixels = xs->dim[1] * xs->dim[2];
        if (batch > n) {
            fprintf(stderr, "%s: --batch-size %lld is larger than the %lld training images\n", prog,
                    (long long)batch, (long long)n);
            sn_tensor_free(xu);
            sn_tensor_free(yu);
            return 2;
        }
        x = malloc(sizeof *x * (size_t)(n * pixels));
        y = malloc(sizeof *y * (size_t)n);
        const uint8_t *xb = sn_tensor_cdata(xu), *yb = sn_tensor_cdata(yu);
        for (int64_t i = 0; x && i < n * pixels; i++) x[i] = (float)xb[i] / 255.0f;
        for (int64_t i = 0; y && i < n; i++) y[i] = yb[i];
        s = x && y ? SN_OK : sn_errorf(SN_ERR_NOMEM, "out of memory for the data set");
        if (s == SN_OK) s = sn_cli_build_model(model_name, xu, (uint64_t)seed, &m);
    }

    sn_cached_plan *cp = NULL;
    sn_compile_opts co = sn_compile_defaults();
    co.steps_per_execution = (int)spe;
    co.mixed_bfloat16 = bf16;
    co.fp32_strict = !strcmp(precision, "fp32-strict");
    sn_cli_apply_device(&co);
    if (s == SN_OK) s = sn_optimizer_from_name(opt_name, &co.optimizer);
    co.optimizer.learning_rate = lr;
    if (s == SN_OK) s = sn_model_compile(m, &co);
    sn_shape ys = text ? (sn_shape){.ndim = 2, .dim = {batch, seq}}
                       : (sn_shape){.ndim = 1, .dim = {batch}};
    if (s == SN_OK) s = sn_train_plan(m, SN_PLAN_TRAIN, batch, &ys, SN_I32, &cp);
    sn_tensor_free(xu);
    sn_tensor_free(yu);
    if (s != SN_OK) {
        free(x);
        free(y);
        sn_bench_text_free(&bt);
        sn_model_free(m);
        return sn_cli_fail(prog);
    }
    bench_feed f = {x, y, n, batch, pixels, 0, cp->x, cp->y};
    bt.xin = cp->x;
    bt.yin = cp->y;
    sn_status (*feed_fn)(void *, sn_plan *, int64_t) = text ? sn_bench_text_feed : feed;
    void *feed_ctx = text ? (void *)&bt : (void *)&f;
    /* Warm-up, then the timed steps in executions of steps_per_execution. */
    for (int64_t done = 0; s == SN_OK && done < warmup; done += spe)
        s = sn_plan_run(cp->plan, warmup - done < spe ? warmup - done : spe, feed_fn, feed_ctx);
    if (s == SN_OK && profile) s = sn_plan_profile(cp->plan, true);
    double t0 = sn_now();
    for (int64_t done = 0; s == SN_OK && done < steps; done += spe)
        s = sn_plan_run(cp->plan, steps - done < spe ? steps - done : spe, feed_fn, feed_ctx);
    double secs = sn_now() - t0;
    if (s != SN_OK) {
        free(x);
        free(y);
        sn_bench_text_free(&bt);
        sn_model_free(m);
        return sn_cli_fail(prog);
    }
    sn_train_state *ts = m->train;
    const float *acc0 = sn_variable_data(m->g, ts->acc[0][0]);
    const float *cnt = sn_variable_data(m->g, ts->acc[0][co.n_metrics + 1]);
    double loss = *cnt > 0 ? *acc0 / *cnt : NAN;
    double peak = measure_peak_gflops(bf16);
    double flops = text ? sn_bench_text_flops_per_token(m) * (double)(batch * seq * steps)
                        : train_flops_per_sample(m) * (double)batch * (double)steps;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("framework=sinter workload=%s precision=%s threads=%d batch=%lld steps=%lld "
           "steps_per_execution=%lld optimizer=%s ms_per_step=%.4g samples_per_s=%.4g "
           "gflops=%.4g peak_gflops=%.4g peak_fraction=%.3f peak_rss_mb=%.1f "
           "plan_arena_mb=%.1f loss=%.4g",
           model_name, precision, sn_num_threads(), (long long)batch, (long long)steps,
           (long long)spe, opt_name, 1e3 * secs / (double)steps, (double)(batch * steps) / secs,
           flops / secs / 1e9, peak, peak > 0 ? flops / secs / 1e9 / peak : 0,
           (double)ru.ru_maxrss / 1024.0, (double)sn_plan_peak_bytes(cp->plan) / 1048576.0, loss);
    if (text) /* char_lstm.py's fields, on the same line */
        printf(" seq=%lld vocab=%d tokens_per_s=%.4g", (long long)seq, bt.vocab,
               (double)(batch * seq * steps) / secs);
    printf("\n");
    if (profile) {
        print_profile(cp->plan, m->g, peak, steps);
        print_peak_memory(cp->plan, m->g);
    }
    free(x);
    free(y);
    sn_bench_text_free(&bt);
    sn_model_free(m);
    return 0;
}
