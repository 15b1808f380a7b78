/* sinter train: the guide's Keras workflow from the command line. Loads the data set, builds a
 * preset model, compiles it with steps_per_execution, fits with the test split as validation
 * data (as the guide does), prints Keras's log and the final test accuracy, and optionally
 * saves the weights (.weights.h5) and a CSV log. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "cli/train_callbacks.h"
#include "sinter/dist.h"

static const char *const optimizers[] = {"sgd", "adam", "adamw", "rmsprop", NULL};
static const char *const strategies[] = {"none", "one_device", "mirrored", "multi_worker", NULL};
static const char *const precisions[] = {"fp32", "bf16", "fp32-strict", NULL};

/* The strategy of --strategy (NULL for "none"), after --cpu-devices split the CPU. Prints the
 * error and returns 1 (2 for a bad combination of flags); 0 on success. */
static int make_strategy(const char *prog, const char *kind, int64_t cpu_devices,
                         sn_strategy **out) {
    *out = NULL;
    if (cpu_devices > 0 && sn_device_configure_cpu((int)cpu_devices) != SN_OK) return sn_cli_fail(prog);
    sn_status st = SN_OK;
    if (!strcmp(kind, "one_device")) st = sn_strategy_one_device(NULL, out);
    else if (!strcmp(kind, "mirrored")) st = sn_strategy_mirrored(0, NULL, out);
    else if (!strcmp(kind, "multi_worker")) st = sn_strategy_multi_worker(cpu_devices > 0 ? (int)cpu_devices : 1, out);
    return st == SN_OK ? 0 : sn_cli_fail(prog);
}

/* --report: the training seconds of each epoch, up to its last batch (no validation). */
#define SN_REPORT_EPOCHS 1000
typedef struct epoch_timer {
    int n;
    int64_t steps;
    double seconds[SN_REPORT_EPOCHS];
} epoch_timer;

static sn_status timer_begin(void *user, int epoch, int epochs) {
    epoch_timer *t = user;
    if (t->n < SN_REPORT_EPOCHS) t->seconds[t->n++] = 0;
    return SN_OK;
}

static sn_status timer_batch(void *user, const sn_logs *logs, bool *stop) {
    epoch_timer *t = user;
    if (t->n > 0) t->seconds[t->n - 1] = logs->seconds;
    t->steps = logs->step;
    return SN_OK;
}

int sn_cmd_train(int argc, char **argv) {
    const char *prog = "sinter train";
    const char *dataset = "fashion_mnist", *data_dir = NULL, *model_name = "small_cnn";
    const char *optimizer = "adam", *save = NULL, *csv = NULL, *logdir = NULL;
    int64_t log_every = 0;
    bool histograms = false;
    /* Defaults are the README's main job: small_cnn, Adam 1e-3, batches of 128. Measured on 2
     * shared cores, test accuracy after epochs 3..8 was 0.8865, 0.8954, 0.8963, 0.9030,
     * 0.9020, 0.9075; 6 epochs clear 0.89 with a margin in about 2 minutes or less. */
    int64_t epochs = 6, batch = 128, steps_per_epoch = 0, validation_steps = 0;
    int64_t steps_per_execution = 50, seed = 1, threads = 0;
    double lr = 1e-3;
    bool quiet = false, report = false;
    const char *strategy_name = "none", *precision = "fp32";
    int64_t cpu_devices = 0;
    /* Checkpoints (BackupAndRestore, docs/checkpoints.md). */
    const char *ckpt_dir = NULL, *ckpt_every = "epoch", *resume_path = NULL;
    int64_t keep_ckpt = 3;
    bool no_resume = false;
    sn_cli_cb_flags cbf = sn_cli_cb_defaults();
    sn_cli_data_opts dopt = sn_cli_data_defaults();
    int64_t seq_length = 100;
    bool text_bytes = false;
    const char *device = NULL;
    sn_flag flags[] = {
        {.name = "dataset", .kind = SN_FLAG_ENUM, .value = &dataset, .choices = sn_cli_datasets,
         .help = "data set installed on this machine"},
        {.name = "data-dir", .kind = SN_FLAG_STRING, .value = &data_dir, .metavar = "DIR",
         .help = "folder with the four MNIST-layout IDX files (overrides --dataset)"},
        SN_CLI_DATA_FLAGS(&dopt),
        {.name = "text", .kind = SN_FLAG_BOOL, .value = &dopt.text,
         .help = "read --data as a text corpus whatever its name (.txt is text already)"},
        {.name = "seq-length", .kind = SN_FLAG_INT, .value = &seq_length, .imin = 1,
         .imax = 1000000, .help = "text: characters per training sequence"},
        {.name = "bytes", .kind = SN_FLAG_BOOL, .value = &text_bytes,
         .help = "text: one id per byte instead of per UTF-8 character (non-UTF-8 files)"},
        {.name = "model", .kind = SN_FLAG_STRING, .value = &model_name, .metavar = "NAME|PATH",
         .default_text = "small_cnn; char_lstm_small for text",
         .help = SN_CLI_MODEL_HELP " (a .keras file brings its weights and compile settings)"},
        {.name = "epochs", .kind = SN_FLAG_INT, .value = &epochs, .imin = 1, .imax = 100000,
         .default_text = "6; 20 for text", .help = "passes over the training data"},
        {.name = "batch-size", .kind = SN_FLAG_INT, .value = &batch, .imin = 1, .imax = 65536,
         .help = "images per step"},
        {.name = "steps-per-epoch", .kind = SN_FLAG_INT, .value = &steps_per_epoch, .imin = 0,
         .imax = 1000000000, .help = "training steps per epoch, 0 = one pass over the data"},
        {.name = "validation-steps", .kind = SN_FLAG_INT, .value = &validation_steps, .imin = 0,
         .imax = 1000000000, .help = "validation batches after each epoch, 0 = the whole test split"},
        {.name = "steps-per-execution", .kind = SN_FLAG_INT, .value = &steps_per_execution,
         .imin = 1, .imax = 1000000, .help = "training steps run per call into the executor"},
        {.name = "optimizer", .kind = SN_FLAG_ENUM, .value = &optimizer, .choices = optimizers,
         .help = "optimizer, with Keras's default settings"},
        {.name = "learning-rate", .kind = SN_FLAG_FLOAT, .value = &lr, .fmin = 0, .fmax = 10,
         .fmin_exclusive = true, .default_text = "the optimizer's Keras default: 0.001, sgd 0.01",
         .help = "learning rate"},
        {.name = "seed", .kind = SN_FLAG_INT, .value = &seed, .imin = 0, .imax = INT64_MAX,
         .help = "seed of the initial weights and the shuffle order"},
        {.name = "threads", .kind = SN_FLAG_INT, .value = &threads, .imin = 0, .imax = 4096,
         .help = "threads, 0 = $SN_NUM_THREADS or all cores"},
        SN_CLI_DEVICE_FLAG(&device),
        {.name = "save", .kind = SN_FLAG_STRING, .value = &save, .metavar = "PATH",
         .help = "write the trained model to PATH: .keras (Keras 3 archive), .json "
                 "(architecture) or else weights only (Keras 3 .weights.h5)"},
        {.name = "csv", .kind = SN_FLAG_STRING, .value = &csv, .metavar = "PATH",
         .help = "write one CSV row of logs per epoch to PATH"},
        {.name = "logdir", .kind = SN_FLAG_STRING, .value = &logdir, .metavar = "DIR",
         .help = "write TensorBoard logs to DIR/train and DIR/validation (tensorboard --logdir DIR)"},
        {.name = "log-every", .kind = SN_FLAG_INT, .value = &log_every, .imin = 0,
         .imax = 1000000000, .help = "with --logdir, also log batch_* scalars every N steps (0 = per "
                                     "epoch only)"},
        {.name = "histograms", .kind = SN_FLAG_BOOL, .value = &histograms,
         .help = "with --logdir, a histogram of every weight after each epoch"},
        {.name = "quiet", .kind = SN_FLAG_BOOL, .value = &quiet,
         .help = "no progress log; only the final test accuracy"},
        {.name = "report", .kind = SN_FLAG_BOOL, .value = &report,
         .help = "end with one key=value line (epoch_s, ms_per_step, test_acc) for bench/compare.sh"},
        {.name = "precision", .kind = SN_FLAG_ENUM, .value = &precision, .choices = precisions,
         .help = "fp32, or bf16: Keras's mixed_bfloat16 (bf16 matmuls and convolutions where the "
                 "CPU has AVX512-BF16 and bf16 is faster there than f32, f32 variables and "
                 "loss); fp32 uses TF32 tensor cores on a "
                 "GPU, as TensorFlow, and fp32-strict does not"},
        {.name = "strategy", .kind = SN_FLAG_ENUM, .value = &strategy_name, .choices = strategies,
         .help = "distribution strategy: mirrored = one replica per logical device, "
                 "multi_worker = one per process under mpirun; --batch-size is then the global "
                 "batch"},
        {.name = "cpu-devices", .kind = SN_FLAG_INT, .value = &cpu_devices, .imin = 0,
         .imax = SN_MAX_LOGICAL_DEVICES,
         .help = "split the CPU into N logical devices (mirrored: N replicas; multi_worker: N "
                 "per worker), 0 = one device"},
        {.name = "checkpoint-dir", .kind = SN_FLAG_STRING, .value = &ckpt_dir, .metavar = "DIR",
         .help = "write checkpoints of the whole training state to DIR; rerunning the same "
                 "command resumes from the newest valid one, bit-identically"},
        {.name = "checkpoint-every", .kind = SN_FLAG_STRING, .value = &ckpt_every,
         .metavar = "N|epoch", .help = "checkpoint after the execution that reaches every "
                 "multiple of N training steps, or at the end of every epoch"},
        {.name = "keep-checkpoints", .kind = SN_FLAG_INT, .value = &keep_ckpt, .imin = 1,
         .imax = 1000000, .help = "newest checkpoints kept in --checkpoint-dir"},
        {.name = "resume", .kind = SN_FLAG_STRING, .value = &resume_path, .metavar = "PATH",
         .help = "resume from this checkpoint file"},
        {.name = "no-resume", .kind = SN_FLAG_BOOL, .value = &no_resume,
         .help = "start over: remove --checkpoint-dir's old checkpoints instead of resuming"},
        SN_CLI_CALLBACK_FLAGS(&cbf),
    };
    sn_flag_set fs = {prog,
                      "Trains a model (preset or Keras file) on Fashion-MNIST (or --data-dir) with the test split "
                      "as validation data,\nthen prints the test loss and accuracy.",
                      (int)(sizeof flags / sizeof flags[0]), flags};
    int rc = sn_flags_parse(&fs, argc, argv);
    if (rc >= 0) return rc;
    if ((log_every > 0 || histograms) && !logdir) {
        fprintf(stderr, "%s: --%s needs --logdir DIR\n", prog,
                log_every > 0 ? "log-every" : "histograms");
        return 2;
    }
    sn_backup_opts backup = sn_backup_defaults();
    if (ckpt_dir || resume_path) {
        backup.dir = ckpt_dir;
        backup.keep = (int)keep_ckpt;
        backup.resume = !no_resume;
        backup.resume_path = resume_path;
        if (strcmp(ckpt_every, "epoch") != 0) {
            char *end = NULL;
            long long n = strtoll(ckpt_every, &end, 10);
            if (!end || *end || n < 1) {
                fprintf(stderr, "%s: --checkpoint-every: '%s' is neither a number of steps >= 1 "
                                "nor 'epoch'\n", prog, ckpt_every);
                return 2;
            }
            backup.every_steps = n;
        }
    }
    if ((sn_flags_find(&fs, "checkpoint-every")->set || sn_flags_find(&fs, "keep-checkpoints")->set ||
         no_resume) && !ckpt_dir) {
        fprintf(stderr, "%s: --checkpoint-every, --keep-checkpoints and --no-resume need "
                        "--checkpoint-dir\n", prog);
        return 2;
    }
    if (no_resume && resume_path) {
        fprintf(stderr, "%s: --resume and --no-resume contradict each other\n", prog);
        return 2;
    }
    sn_cli_set_threads(threads);
    if ((rc = sn_cli_set_device(prog, device)) >= 0) return rc;
    sn_strategy *strategy = NULL;
    rc = make_strategy(prog, strategy_name, cpu_devices, &strategy);
    if (rc != 0) {
        sn_dist_shutdown(false);
        return rc;
    }
    /* Under multi_worker only rank 0 prints progress and writes files; every worker reads
     * the same global batches and trains on its own slice of each. */
    const bool chief = sn_strategy_is_chief(strategy);
    if (!chief) {
        quiet = true;
        csv = save = logdir = NULL;
    }

    sn_tensor *xtr = NULL, *ytr = NULL, *xte = NULL, *yte = NULL;
    sn_dataset *train = NULL, *test = NULL;
    sn_vocab *vocab = NULL;
    sn_model *m = NULL;
    sn_callback *cbs[10] = {NULL};
    epoch_timer timer = {0};
    sn_history *hist = NULL;
    int ncb = 0;
    rc = 1;

    dopt.dataset = dataset;
    dopt.data_dir = data_dir;
    const bool is_text = sn_cli_data_is_text(&dopt);
    /* What a model file held (compile settings); a preset's defaults otherwise. */
    sn_model_file_info finfo = {.compile = sn_compile_defaults()};
    int64_t n_train = 0;
    char what[160] = "";
    if (is_text) {
        /* The text-generation tutorial's pipeline and defaults (batch 64, unless given). */
        if (!sn_flags_find(&fs, "model")->set) model_name = "char_lstm_small";
        if (!sn_flags_find(&fs, "batch-size")->set) batch = 64;
        /* The tutorial's EPOCHS = 20: char_lstm_small then reaches a validation loss of 1.657
         * (6 epochs: 1.968) in about 5 minutes of 2 cores (README, "Character models"). */
        if (!sn_flags_find(&fs, "epochs")->set) epochs = 20;
        /* A Transformer preset reads at most its context (nanoGPT's block_size). */
        if (!sn_flags_find(&fs, "seq-length")->set && sn_model_preset_text_context(model_name))
            seq_length = sn_model_preset_text_context(model_name);
        sn_text_opts to = sn_text_defaults();
        to.seq_length = seq_length;
        to.batch_size = batch;
        to.seed = (uint64_t)seed;
        to.bytes = text_bytes;
        sn_text_info info;
        if (sn_text_dataset(dopt.data, &to, &vocab, &train, &test, &info) != SN_OK) {
            rc = sn_cli_fail(prog);
            goto done;
        }
        n_train = info.n_train;
        snprintf(what, sizeof what, "%lld sequences of %lld %s (vocabulary %d, %lld held out)",
                 (long long)info.n_train, (long long)seq_length, text_bytes ? "bytes" : "characters",
                 sn_vocab_size(vocab), (long long)info.n_validation);
        sn_shape in = {.ndim = 1, .dim = {seq_length}};
        /* Models take f32 inputs; the Embedding casts the ids back (exact below 2^24). */
        sn_status st = sn_dataset_map_cast(&train, 0, SN_F32);
        if (st == SN_OK && test) st = sn_dataset_map_cast(&test, 0, SN_F32);
        if (st == SN_OK && !sn_cli_model_is_preset(model_name)) {
            /* A Keras file (Embedding + LSTM ...): its input must be one sequence. */
            if ((st = sn_cli_open_model(model_name, NULL, (uint64_t)seed, &m, &finfo)) == SN_OK)
                st = sn_cli_check_one_io(model_name, m);
            if (st == SN_OK && !sn_shape_equal(&finfo.input_shape, &in)) {
                char b[96];
                fprintf(stderr, "%s: model '%s' takes inputs of shape %s, but --seq-length "
                        "gives sequences of %lld\n", prog, model_name,
                        sn_shape_str(&finfo.input_shape, b, sizeof b), (long long)seq_length);
                goto done;
            }
        } else if (st == SN_OK) {
            st = sn_model_preset_text(model_name, sn_vocab_size(vocab), &m);
            if (st == SN_OK && (st = sn_model_build(m, &in, (uint64_t)seed)) != SN_OK) {
                sn_model_free(m);
                m = NULL;
            }
        }
        if (st != SN_OK) {
            rc = sn_cli_fail(prog);
            goto done;
        }
    } else {
        if ((rc = sn_cli_load_data(prog, &dopt, "train", true, &xtr, &ytr)) != 0 ||
            (rc = sn_cli_load_data(prog, &dopt, "test", false, &xte, &yte)) != 0)
            goto done;
        rc = 1;
        const sn_shape *trs = sn_tensor_shape(xtr), *tes = xte ? sn_tensor_shape(xte) : NULL;
        char b0[128], b1[128];
        sn_shape tre = *trs, tee = tes ? *tes : *trs;
        tre.dim[0] = tee.dim[0] = 0;
        if (!sn_shape_equal(&tre, &tee)) {
            fprintf(stderr, "%s: training examples are %s but test examples %s (first dim: count)\n",
                    prog, sn_shape_str(trs, b0, sizeof b0), sn_shape_str(tes, b1, sizeof b1));
            goto done;
        }
        n_train = trs->dim[0];
        if (trs->ndim == 3)
            snprintf(what, sizeof what, "%lld images of %lldx%lld", (long long)n_train,
                     (long long)trs->dim[1], (long long)trs->dim[2]);
        else
            snprintf(what, sizeof what, "%lld examples of shape %s", (long long)n_train,
                     sn_shape_str(trs, b0, sizeof b0));
        if (batch > trs->dim[0] || (tes && batch > tes->dim[0])) {
            fprintf(stderr, "%s: --batch-size: %lld is more than the %lld training or %lld test "
                            "examples\n", prog, (long long)batch, (long long)trs->dim[0],
                    (long long)(tes ? tes->dim[0] : trs->dim[0]));
            rc = 2;
            goto done;
        }

        /* Training batches have a fixed size, as in the guide (drop_remainder for TPUs' static
         * shapes): every training step has the same shapes and 60,000 / 128 gives 468 steps.
         * The test split keeps its last partial batch so that every test image counts. */
        if (sn_cli_pipeline(xtr, ytr, -1, batch, true, (uint64_t)seed, true, &train) != SN_OK ||
            (xte && sn_cli_pipeline(xte, yte, -1, batch, false, 0, false, &test) != SN_OK)) {
            rc = sn_cli_fail(prog);
            goto done;
        }
        if (sn_cli_open_model(model_name, xtr, (uint64_t)seed, &m, &finfo) != SN_OK) {
            rc = sn_cli_fail(prog);
            goto done;
        }
        sn_tensor_free(xtr);
        sn_tensor_free(ytr);
        xtr = ytr = NULL;
    }
    /* A model file's compile settings (optimizer, loss, metrics) hold unless a flag says
     * otherwise; without them, --optimizer's defaults as for a preset. */
    sn_compile_opts co = finfo.compile;
    if ((!finfo.has_compile || sn_flags_find(&fs, "optimizer")->set) &&
        sn_optimizer_from_name(optimizer, &co.optimizer) != SN_OK) {
        rc = sn_cli_fail(prog);
        goto done;
    }
    if (sn_flags_find(&fs, "learning-rate")->set) co.optimizer.learning_rate = lr;
    co.steps_per_execution = (int)steps_per_execution;
    co.mixed_bfloat16 = co.mixed_bfloat16 || !strcmp(precision, "bf16");
    co.fp32_strict = !strcmp(precision, "fp32-strict");
    sn_cli_apply_device(&co);
    if (sn_model_compile(m, &co) != SN_OK || sn_model_set_strategy(m, strategy) != SN_OK) {
        rc = sn_cli_fail(prog);
        goto done;
    }

    if (!quiet) {
        cbs[ncb] = sn_callback_progress_bar(stdout, 1);
        if (!cbs[ncb]) {
            rc = sn_cli_fail(prog);
            goto done;
        }
        ncb++;
    }
    if (csv) {
        cbs[ncb] = sn_callback_csv_logger(csv);
        if (!cbs[ncb]) {
            rc = sn_cli_fail(prog);
            goto done;
        }
        ncb++;
    }
    if (logdir) {
        sn_tensorboard_opts to = sn_tensorboard_defaults();
        to.log_dir = logdir;
        to.update_freq = log_every;
        to.histogram_freq = histograms ? 1 : 0;
        if (!(cbs[ncb] = sn_callback_tensorboard(&to))) {
            rc = sn_cli_fail(prog);
            goto done;
        }
        ncb++;
    }
    if (report) {
        static sn_callback timer_cb;
        timer_cb = (sn_callback){.user = &timer, .on_epoch_begin = timer_begin,
                                 .on_batch_end = timer_batch};
        cbs[ncb++] = &timer_cb;
    }
    /* Keras's TerminateOnNaN, always: once the loss is NaN or Inf (a NaN in the data reaches
     * it: the kernels let NaN through) nothing the run does after counts. Last, so that the
     * progress bar and the logs show the step first. */
    if (!(cbs[ncb] = sn_callback_terminate_on_nan())) {
        rc = sn_cli_fail(prog);
        goto done;
    }
    ncb++;
    sn_fit_opts fo = sn_fit_defaults();
    fo.epochs = (int)epochs;
    fo.steps_per_epoch = steps_per_epoch;
    fo.validation = test;
    fo.validation_steps = validation_steps;
    /* On every worker: the rate must change the same way everywhere (ModelCheckpoint
     * writes on the chief only). */
    int crc = sn_cli_make_callbacks(prog, &cbf, co.optimizer.learning_rate, cbs, &ncb,
                                    (int)(sizeof cbs / sizeof cbs[0]));
    if (crc) {
        rc = crc;
        goto done;
    }
    fo.n_callbacks = ncb;
    fo.callbacks = cbs;
    if (ckpt_dir || resume_path) {
        backup.log = chief ? stdout : NULL;
        fo.backup = &backup;
    }
    if (!quiet) {
        printf("Training %s on %s: %s, batch %lld, %s, %lld steps per execution\n", model_name,
               dopt.data ? dopt.data : data_dir ? data_dir : dataset, what, (long long)batch,
               optimizer, (long long)steps_per_execution);
        if (strategy)
            printf("Strategy: %s, %d replica(s) in sync over %d worker(s): %s%s\n",
                   sn_strategy_name(strategy), sn_strategy_num_replicas(strategy),
                   sn_strategy_num_workers(strategy), sn_strategy_replica_device(strategy, 0),
                   sn_strategy_local_replicas(strategy) > 1 ? ", ..." : "");
        fflush(stdout);
    }
    sn_status fst = sn_model_fit(m, train, &fo, &hist);
    if (fst == SN_ERR_NUMERIC && !dopt.check_numerics && !is_text) {
        fprintf(stderr, "%s: %s; --check-numerics names the example and feature if the data "
                        "holds a NaN or Inf\n", prog, sn_last_error());
        rc = 1;
        goto done;
    }
    if (fst != SN_OK) {
        rc = sn_cli_fail(prog);
        goto done;
    }
    if (strategy && sn_model_distributed_steps(m) == 0) {
        fprintf(stderr, "%s: --strategy %s: fit trained without the strategy (this build's fit "
                        "does not call the distribution hooks)\n", prog, strategy_name);
        goto done;
    }

    /* After a full validation pass the last epoch's val_* values already are the test
     * results of the final weights; evaluate only when validation saw part of the split. */
    double vals[SN_MAX_METRICS + 1] = {NAN, NAN};
    int nv = 0, last = sn_history_epochs(hist) - 1;
    if (!test) {
        /* A source without a test split (one .npy, .npz or TFRecord split): nothing held out. */
    } else if (validation_steps == 0 && last >= 0 &&
        !isnan(sn_history_get(hist, "val_sparse_categorical_accuracy", last))) {
        vals[0] = sn_history_get(hist, "val_loss", last);
        vals[1] = sn_history_get(hist, "val_sparse_categorical_accuracy", last);
        nv = 2;
    } else if (sn_model_evaluate(m, test, 0, vals, SN_MAX_METRICS + 1, &nv) != SN_OK) {
        rc = sn_cli_fail(prog);
        goto done;
    }
    if (chief && !test && !quiet) printf("No test split in %s: nothing was held out\n", dopt.data);
    if (chief && test) {
        printf("%s loss: %.4f\n", is_text ? "Validation" : "Test", vals[0]);
        if (nv > 1) printf("%s accuracy: %.4f\n", is_text ? "Validation" : "Test", vals[1]);
    }
    if (chief && report) {
        /* Training time per epoch, validation excluded, as ../shared/bench's epoch_s. */
        printf("framework=sinter workload=%s threads=%d batch=%lld epochs=%d steps_per_epoch=%lld "
               "steps_per_execution=%lld epoch_s=", model_name, sn_num_threads(), (long long)batch,
               timer.n, (long long)timer.steps, (long long)steps_per_execution);
        double total = 0;
        for (int e = 0; e < timer.n; e++) {
            printf(e ? ",%.3f" : "%.3f", timer.seconds[e]);
            total += timer.seconds[e];
        }
        double per = timer.n && timer.steps ? total / timer.n / (double)timer.steps : 0;
        printf(" ms_per_step=%.4g samples_per_s=%.5g test_loss=%.4f test_acc=%.4f\n", 1e3 * per,
               per > 0 ? (double)batch / per : 0, vals[0], nv > 1 ? vals[1] : NAN);
    }
    if (save) {
        size_t sl = strlen(save);
        bool whole = (sl > 6 && !strcmp(save + sl - 6, ".keras")) ||
                     (sl > 5 && !strcmp(save + sl - 5, ".json"));
        if ((whole ? sn_model_save(m, save) : sn_model_save_weights(m, save)) != SN_OK) {
            rc = sn_cli_fail(prog);
            goto done;
        }
        if (!quiet) printf("Saved %s to %s\n", whole ? "the model" : "weights", save);
        /* A text model is only usable with the vocabulary its ids came from. */
        char *vpath = vocab ? sn_vocab_path_for(save) : NULL;
        if (vocab && (!vpath || sn_vocab_save(vocab, vpath) != SN_OK)) {
            free(vpath);
            rc = sn_cli_fail(prog);
            goto done;
        }
        if (vpath && !quiet) printf("Saved vocabulary to %s\n", vpath);
        free(vpath);
    }
    if (chief && !quiet && logdir)
        printf("TensorBoard logs in %s (tensorboard --logdir %s)\n", logdir, logdir);
    rc = 0;

done:
    sn_history_free(hist);
    for (int i = 0; i < ncb; i++)
        if (cbs[i]->user != &timer) sn_callback_free(cbs[i]);
    if (m) sn_model_set_strategy(m, NULL);
    sn_model_free(m);
    sn_strategy_free(strategy);
    /* After a failure under multi_worker, end the whole job rather than leave the other
     * workers waiting in a collective. */
    sn_dist_shutdown(rc == 0);
    sn_dataset_free(train);
    sn_dataset_free(test);
    sn_vocab_free(vocab);
    sn_tensor_free(xtr);
    sn_tensor_free(ytr);
    sn_tensor_free(xte);
    sn_tensor_free(yte);
    return rc;
}
