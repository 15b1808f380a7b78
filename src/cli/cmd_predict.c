/* sinter predict: the predicted class and the class probabilities of test images, as CSV
 * (index,label,predicted,p0,...,p<k-1>) on stdout or in a file. Data without labels (x.npy
 * alone, an .npz without y, a TFRecord without the label feature) leaves the label empty:
 * the columns stay where they are for whoever reads the file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"

/* Writes the rows of one batch (labels NULL: the label field empty); returns false when the
 * output failed. */
static bool write_rows(FILE *out, int64_t first, const sn_tensor *labels, const sn_tensor *probs) {
    const sn_shape *ps = sn_tensor_shape(probs);
    int64_t b = ps->dim[0], k = ps->dim[1];
    for (int64_t i = 0; i < b; i++) {
        int64_t best = 0;
        for (int64_t c = 1; c < k; c++)
            if (sn_tensor_get(probs, i * k + c) > sn_tensor_get(probs, i * k + best)) best = c;
        fprintf(out, "%lld,", (long long)(first + i));
        if (labels) fprintf(out, "%lld", (long long)sn_tensor_get(labels, i));
        fprintf(out, ",%lld", (long long)best);
        for (int64_t c = 0; c < k; c++) fprintf(out, ",%.6f", sn_tensor_get(probs, i * k + c));
        fputc('\n', out);
    }
    return !ferror(out);
}

/* Opens --output (NULL: stdout); prints the error and returns NULL when it cannot. */
static FILE *open_output(const char *prog, const char *output) {
    FILE *out = output ? fopen(output, "w") : stdout;
    if (!out)
        fprintf(stderr, "%s: --output: cannot open '%s' for writing: %s\n", prog, output,
                strerror(errno));
    return out;
}

/* Closes --output (or flushes stdout) and says how many rows went to the file; returns the
 * exit code. */
static int close_output(const char *prog, const char *output, FILE *out, int64_t rows) {
    if (out != stdout) {
        if (fclose(out) != 0) {
            fprintf(stderr, "%s: closing %s failed: %s\n", prog, output, strerror(errno));
            return 1;
        }
        fprintf(stderr, "%s: wrote %lld predictions to %s\n", prog, (long long)rows, output);
    } else if (fflush(stdout) != 0) {
        fprintf(stderr, "%s: writing stdout failed: %s\n", prog, strerror(errno));
        return 1;
    }
    return 0;
}

/* A character model over the first `count` characters of a text (a prompt), read as one
 * sequence: a row per character with the next character's id as the label (empty after the
 * text's last character), the most likely next id and the probabilities of every id. */
static int predict_text(const char *prog, const char *model_name, const char *weights,
                        const char *vocab_path, const sn_cli_data_opts *dopt, int64_t count,
                        const char *output) {
    if (!sn_cli_data_is_text(dopt)) {
        fprintf(stderr, "%s: %s is a character model: give the text to read with --data TEXT "
                "(a .txt file, or --text)\n", prog, model_name);
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    int32_t *ids = NULL;
    int64_t n = 0;
    float *x = NULL;
    sn_vocab *vocab = NULL;
    sn_model *m = NULL;
    sn_tensor *xt = NULL, *probs = NULL;
    int rc = sn_cli_read_file(prog, "--data", dopt->data, &text, &len);
    if (rc) return rc;
    /* The vocabulary first: the text is read with it, and its length sizes the model. */
    sn_cli_text_model_opts to = {.name = model_name, .weights = weights, .vocab = vocab_path,
                                 .text = dopt->data, .takes_text = true};
    if ((rc = sn_cli_text_vocab(prog, &to, &vocab)) != 0) goto done;
    rc = 1;
    if (sn_vocab_encode(vocab, text, len, &ids, &n) != SN_OK) {
        fprintf(stderr, "%s: --data %s: %s\n", prog, dopt->data, sn_last_error());
        goto done;
    }
    if (n == 0) {
        fprintf(stderr, "%s: --data %s is empty; give at least one character\n", prog, dopt->data);
        goto done;
    }
    const int64_t rows = count < n ? count : n;
    sn_compile_opts co = sn_compile_defaults();
    to.seq_length = rows;
    to.compile = &co;
    if ((rc = sn_cli_open_text_model(prog, &to, vocab, &m)) != 0) goto done;
    rc = 1;
    if (!(x = malloc(sizeof *x * (size_t)rows))) {
        fprintf(stderr, "%s: out of memory for %lld characters\n", prog, (long long)rows);
        goto done;
    }
    for (int64_t i = 0; i < rows; i++) x[i] = (float)ids[i];
    if (sn_tensor_from_data(&xt, SN_F32, &(sn_shape){.ndim = 2, .dim = {1, rows}}, x) != SN_OK ||
        sn_model_predict(m, xt, &probs) != SN_OK) {
        rc = sn_cli_fail(prog);
        goto done;
    }
    FILE *out = open_output(prog, output);
    if (!out) goto done;
    const int64_t k = sn_tensor_shape(probs)->dim[2];
    const float *p = sn_tensor_cdata(probs);
    fprintf(out, "index,label,predicted");
    for (int64_t c = 0; c < k; c++) fprintf(out, ",p%lld", (long long)c);
    fputc('\n', out);
    for (int64_t i = 0; i < rows; i++) {
        const float *pi = p + i * k;
        int64_t best = 0;
        for (int64_t c = 1; c < k; c++)
            if (pi[c] > pi[best]) best = c;
        fprintf(out, "%lld,", (long long)i);
        if (i + 1 < n) fprintf(out, "%d", ids[i + 1]);
        fprintf(out, ",%lld", (long long)best);
        for (int64_t c = 0; c < k; c++) fprintf(out, ",%.6f", pi[c]);
        fputc('\n', out);
    }
    if (ferror(out)) {
        fprintf(stderr, "%s: writing %s failed: %s\n", prog, output ? output : "stdout",
                strerror(errno));
        if (out != stdout) fclose(out);
        goto done;
    }
    rc = close_output(prog, output, out, rows);
done:
    sn_tensor_free(probs);
    sn_tensor_free(xt);
    sn_model_free(m);
    sn_vocab_free(vocab);
    free(x);
    free(ids);
    free(text);
    return rc;
}

int sn_cmd_predict(int argc, char **argv) {
    const char *prog = "sinter predict";
    const char *model_name = "small_cnn";
    sn_cli_data_opts dopt = sn_cli_data_defaults();
    dopt.labels_optional = true;
    const char *weights = NULL, *output = NULL, *vocab_path = NULL;
    int64_t count = 10, batch = 128, threads = 0;
    const char *device = NULL;
    sn_flag flags[] = {
        SN_CLI_WEIGHTS_FLAGS(&model_name, &weights, &dopt.dataset, &dopt.data_dir),
        SN_CLI_DATA_FLAGS(&dopt),
        {.name = "count", .kind = SN_FLAG_INT, .value = &count, .imin = 1, .imax = 1000000000,
         .help = "predict the first N test images (a character model: the first N characters "
                 "of the text, at most all of them)"},
        {.name = "output", .kind = SN_FLAG_STRING, .value = &output, .metavar = "FILE.csv",
         .default_text = "stdout", .help = "write the CSV rows to this file"},
        {.name = "batch-size", .kind = SN_FLAG_INT, .value = &batch, .imin = 1, .imax = 65536,
         .help = "images per step"},
        {.name = "threads", .kind = SN_FLAG_INT, .value = &threads, .imin = 0, .imax = 4096,
         .help = "threads, 0 = $SN_NUM_THREADS or all cores"},
        SN_CLI_DEVICE_FLAG(&device),
        SN_CLI_VOCAB_FLAG(&vocab_path),
    };
    sn_flag_set fs = {prog,
                      "Predicts the first --count test images with saved weights and writes CSV rows\n"
                      "index,label,predicted,p0,...,p9 (class probabilities; the label is empty "
                      "for data\nwithout labels: --data x.npy alone, an .npz without y, a "
                      "TFRecord without the\nlabel feature). A character model reads --data TEXT "
                      "as one sequence: a row per\ncharacter, labelled with the next one's id.",
                      (int)(sizeof flags / sizeof flags[0]), flags};
    int rc = sn_flags_parse(&fs, argc, argv);
    if (rc >= 0) return rc;
    if (sn_cli_weights_missing(prog, model_name, weights)) return 2;
    sn_cli_set_threads(threads);
    if ((rc = sn_cli_set_device(prog, device)) >= 0) return rc;
    if (sn_cli_is_text_model(model_name))
        return predict_text(prog, model_name, weights, vocab_path, &dopt, count, output);

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
    if (!(out = open_output(prog, output))) goto done;
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
        if (!write_rows(out, done_n, y ? b[1] : NULL, probs)) {
            fprintf(stderr, "%s: writing %s failed: %s\n", prog, output ? output : "stdout",
                    strerror(errno));
            goto done;
        }
        done_n += sn_tensor_shape(probs)->dim[0];
        sn_tensor_free(probs);
        probs = NULL;
    }
    FILE *f = out;
    out = NULL;
    rc = close_output(prog, output, f, done_n);
done:
    if (out && out != stdout) fclose(out);
    sn_tensor_free(probs);
    sn_model_free(m);
    sn_dataset_free(ds);
    sn_tensor_free(x);
    sn_tensor_free(y);
    return rc;
}
