/* sinter evaluate: loss and accuracy of saved weights on the test split. */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/flags.h"

int sn_cmd_evaluate(int argc, char **argv) {
    const char *prog = "sinter evaluate";
    const char *model_name = "small_cnn";
    sn_cli_data_opts dopt = sn_cli_data_defaults();
    const char *weights = NULL, *misclassified = NULL, *confusion = NULL;
    int64_t batch = 128, threads = 0, max_images = 36;
    sn_flag flags[] = {
        SN_CLI_WEIGHTS_FLAGS(&model_name, &weights, &dopt.dataset, &dopt.data_dir),
        SN_CLI_DATA_FLAGS(&dopt),
        {.name = "batch-size", .kind = SN_FLAG_INT, .value = &batch, .imin = 1, .imax = 65536,
         .help = "images per step"},
        {.name = "threads", .kind = SN_FLAG_INT, .value = &threads, .imin = 0, .imax = 4096,
         .help = "threads, 0 = $SN_NUM_THREADS or all cores"},
        {.name = "misclassified", .kind = SN_FLAG_STRING, .value = &misclassified,
         .metavar = "PNG", .help = "draw the first wrong test images, each labelled \"true \u2192 "
                                   "predicted\", and print how many are wrong"},
        {.name = "max-images", .kind = SN_FLAG_INT, .value = &max_images, .imin = 1, .imax = 1000,
         .help = "images in the --misclassified grid"},
        {.name = "confusion", .kind = SN_FLAG_STRING, .value = &confusion, .metavar = "PNG",
         .help = "draw the confusion matrix (true class by predicted class, with counts)"},
    };
    sn_flag_set fs = {prog, "Prints the loss and accuracy of a model's saved weights on the test split.",
                      (int)(sizeof flags / sizeof flags[0]), flags};
    int rc = sn_flags_parse(&fs, argc, argv);
    if (rc >= 0) return rc;
    if (sn_cli_weights_missing(prog, model_name, weights)) return 2;
    sn_cli_set_threads(threads);

    sn_tensor *x = NULL, *y = NULL;
    sn_dataset *test = NULL;
    sn_model *m = NULL;
    rc = 1;
    if ((rc = sn_cli_load_data(prog, &dopt, "test", true, &x, &y)) != 0) goto done;
    rc = 1;
    const int64_t n = sn_tensor_shape(x)->dim[0];
    if (batch > n) batch = n;
    if (sn_cli_load_model(model_name, x, weights, &m) != SN_OK) {
        rc = sn_cli_fail(prog);
        goto done;
    }
    /* Every image counts here, so the last batch keeps its remainder. */
    if (sn_cli_pipeline(x, y, -1, batch, false, 0, false, &test) != SN_OK) {
        rc = sn_cli_fail(prog);
        goto done;
    }
    double vals[SN_MAX_METRICS + 1];
    int nv = 0;
    if (sn_model_evaluate(m, test, 0, vals, SN_MAX_METRICS + 1, &nv) != SN_OK) {
        rc = sn_cli_fail(prog);
        goto done;
    }
    printf("Evaluated %s (%s) on %lld test images\n", model_name, weights, (long long)n);
    printf("Test loss: %.4f\n", vals[0]);
    if (nv > 1) printf("Test accuracy: %.4f\n", vals[1]);
    if (misclassified || confusion) {
        sn_cli_eval_plot_opts po = {.misclassified = misclassified, .max_images = max_images,
                                    .confusion = confusion};
        rc = sn_cli_eval_plots(prog, m, test, x, y, sn_cli_is_fashion_mnist(&dopt), &po);
        goto done;
    }
    rc = 0;
done:
    sn_model_free(m);
    sn_dataset_free(test);
    sn_tensor_free(x);
    sn_tensor_free(y);
    return rc;
}
