/* sinter predict: the predicted class and the class probabilities of test images, as CSV
 * (index,label,predicted,p0,...,p<k-1>) on stdout or in a file. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"

/* Writes the rows of one batch; returns false when the output failed. */
static bool write_rows(FILE *out, int64_t first, const sn_tensor *labels, const sn_tensor *probs) {
    const sn_shape *ps = sn_tensor_shape(probs);
    int64_t b = ps->dim[0], k = ps->dim[1];
    for (int64_t i = 0; i < b; i++) {
        int64_t best = 0;
        for (int64_t c = 1; c < k; c++)
            if (sn_tensor_get(probs, i * k + c) > sn_tensor_get(probs, i * k + best)) best = c;
        fprintf(out, "%lld,%lld,%lld", (long long)(first + i), (long long)sn_tensor_get(labels, i),
                (long long)best);
        for (int64_t c = 0; c < k; c++) fprintf(out, ",%.6f", sn_tensor_get(probs, i * k + c));
        fputc('\n', out);
    }
    return !ferror(out);
}

int sn_cmd_predict(int argc, char **argv) {
    const char *prog = "sinter predict";
    const char *model_name = "small_cnn";
    sn_cli_data_opts dopt = sn_cli_data_defaults();
    const char *weights = NULL, *output = NULL;
    int64_t count = 10, batch = 128, threads = 0;
    sn_flag flags[] = {
        SN_CLI_WEIGHTS_FLAGS(&model_name, &weights, &dopt.dataset, &dopt.data_dir),
        SN_CLI_DATA_FLAGS(&dopt),
        {.name = "count", .kind = SN_FLAG_INT, .value = &count, .imin = 1, .imax = 1000000000,
         .help = "predict the first N test images"},
        {.name = "output", .kind = SN_FLAG_STRING, .value = &output, .metavar = "FILE.csv",
         .default_text = "stdout", .help = "write the CSV rows to this file"},
        {.name = "batch-size", .kind = SN_FLAG_INT, .value = &batch, .imin = 1, .imax = 65536,
         .help = "images per step"},
        {.name = "threads", .kind = SN_FLAG_INT, .value = &threads, .imin = 0, .imax = 4096,
         .help = "threads, 0 = $SN_NUM_THREADS or all cores"},
    };
    sn_flag_set fs = {prog,
                      "Predicts the first --count test images with saved weights and writes CSV rows\n"
                      "index,label,predicted,p0,...,p9 (class probabilities).",
                      (int)(sizeof flags / sizeof flags[0]), flags};
    int rc = sn_flags_parse(&fs, argc, argv);
    if (rc >= 0) return rc;
    if (sn_cli_weights_missing(prog, model_name, weights)) return 2;
    sn_cli_set_threads(threads);

    sn_tensor *x = NULL, *y = NULL, *probs = NULL;
    sn_dataset *ds = NULL;
    sn_model *m = NULL;
    FILE *out = NULL;
    rc = 1;
    if ((rc = sn_cli_load_data(prog, &dopt, "test", true, &x, &y)) != 0) goto done;
    rc = 1;
    const int64_t n = sn_tensor_shape(x)->dim[0];
    if (count > n) {
        fprintf(stderr, "%s: --count: %lld is more than the %lld test images (expected 1 to %lld)\n",
                prog, (long long)count, (long long)n, (long long)n);
        rc = 2;
        goto done;
    }
    if (batch > count) batch = count;
    if (sn_cli_load_model(model_name, x, weights, &m) != SN_OK ||
        sn_cli_pipeline(x, y, count, batch, false, 0, false, &ds) != SN_OK) {
        rc = sn_cli_fail(prog);
        goto done;
    }
    out = stdout;
    if (output && !(out = fopen(output, "w"))) {
        fprintf(stderr, "%s: --output: cannot open '%s' for writing: %s\n", prog, output,
                strerror(errno));
        goto done;
    }
    fprintf(out, "index,label,predicted");
    int64_t done_n = 0;
    for (;;) {
        sn_tensor *b[2];
        bool end = false;
        if (sn_dataset_next(ds, b, &end) != SN_OK) {
            rc = sn_cli_fail(prog);
            goto done;
        }
        if (end) break;
        if (sn_model_predict(m, b[0], &probs) != SN_OK) {
            rc = sn_cli_fail(prog);
            goto done;
        }
        if (done_n == 0) {
            for (int64_t c = 0; c < sn_tensor_shape(probs)->dim[1]; c++)
                fprintf(out, ",p%lld", (long long)c);
            fputc('\n', out);
        }
        if (!write_rows(out, done_n, b[1], probs)) {
            fprintf(stderr, "%s: writing %s failed: %s\n", prog, output ? output : "stdout",
                    strerror(errno));
            goto done;
        }
        done_n += sn_tensor_shape(probs)->dim[0];
        sn_tensor_free(probs);
        probs = NULL;
    }
    if (out != stdout) {
        FILE *f = out;
        out = NULL;
        if (fclose(f) != 0) {
            fprintf(stderr, "%s: closing %s failed: %s\n", prog, output, strerror(errno));
            goto done;
        }
        fprintf(stderr, "%s: wrote %lld predictions to %s\n", prog, (long long)done_n, output);
    } else if (fflush(stdout) != 0) {
        fprintf(stderr, "%s: writing stdout failed: %s\n", prog, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    if (out && out != stdout) fclose(out);
    sn_tensor_free(probs);
    sn_model_free(m);
    sn_dataset_free(ds);
    sn_tensor_free(x);
    sn_tensor_free(y);
    return rc;
}
