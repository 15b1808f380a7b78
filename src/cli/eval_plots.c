/* sinter evaluate --misclassified / --confusion: one prediction pass over the test split
 * that counts the confusion matrix and collects the first wrong examples, then the pictures
 * (src/plot). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "plot/plot.h"

#define MAX_CLASSES 100

static const char *const fashion_names[] = {"T-shirt/top", "Trouser", "Pullover", "Dress",
                                            "Coat",        "Sandal",  "Shirt",    "Sneaker",
                                            "Bag",         "Ankle boot"};

bool sn_cli_is_fashion_mnist(const sn_cli_data_opts *o) {
    return !o->data_dir && !o->data && !strcmp(o->dataset, "fashion_mnist");
}

static int argmax(const float *p, int k) {
    int best = 0;
    for (int j = 1; j < k; j++)
        if (p[j] > p[best]) best = j;
    return best;
}

/* Example i of x as an 8-bit grayscale image: u8 as it is; other dtypes scaled by 255 when
 * the example lies in [0, 1] (the pipeline's convention), else clamped to 0..255. */
static void to_gray(const sn_tensor *x, int64_t i, int64_t pixels, uint8_t *out) {
    bool u8 = sn_tensor_dtype(x) == SN_U8, unit = true;
    for (int64_t j = 0; j < pixels && !u8; j++) {
        double v = sn_tensor_get(x, i * pixels + j);
        if (v < 0 || v > 1) unit = false;
    }
    for (int64_t j = 0; j < pixels; j++) {
        double v = sn_tensor_get(x, i * pixels + j);
        if (!u8 && unit) v *= 255;
        out[j] = (uint8_t)(isnan(v) ? 0 : v < 0 ? 0 : v > 255 ? 255 : lround(v));
    }
}

int sn_cli_eval_plots(const char *prog, sn_model *m, sn_dataset *test, const sn_tensor *x,
                      const sn_tensor *y, bool fashion, const sn_cli_eval_plot_opts *o) {
    const sn_shape *xs = sn_tensor_shape(x);
    const int64_t n = xs->dim[0];
    /* grayscale images: [n, rows, cols] or [n, rows, cols, 1] */
    bool images = (xs->ndim == 3 || (xs->ndim == 4 && xs->dim[3] == 1)) && xs->dim[1] <= 512 &&
                  xs->dim[2] <= 512;
    const int rows = images ? (int)xs->dim[1] : 0, cols = images ? (int)xs->dim[2] : 0;
    if (o->misclassified && !images) {
        char s[128];
        fprintf(stderr, "%s: --misclassified: the examples have shape %s; a picture needs "
                "grayscale images [rows, cols] or [rows, cols, 1]\n", prog,
                sn_shape_str(xs, s, sizeof s));
        return 2;
    }
    int64_t *counts = NULL, wrong = 0, seen = 0;
    int k = 0, max_img = o->misclassified ? (int)o->max_images : 0, n_img = 0, rc = 1;
    size_t pixels = (size_t)rows * (size_t)cols;
    uint8_t *imgs = calloc((size_t)(max_img ? max_img : 1), pixels > 0 ? pixels : 1);
    char (*caps)[96] = calloc((size_t)(max_img ? max_img : 1), sizeof *caps);
    const char **capp = calloc((size_t)(max_img ? max_img : 1), sizeof *capp);
    char (*num)[8] = calloc(MAX_CLASSES, sizeof *num);
    const char *names[MAX_CLASSES];
    if (!imgs || !caps || !capp || !num) {
        fprintf(stderr, "%s: out of memory for %d images\n", prog, max_img);
        goto done;
    }
    if (sn_dataset_reset(test) != SN_OK) {
        rc = sn_cli_fail(prog);
        goto done;
    }
    for (;;) {
        sn_tensor *b[2];
        bool end = false;
        if (sn_dataset_next(test, b, &end) != SN_OK) {
            rc = sn_cli_fail(prog);
            goto done;
        }
        if (end) break;
        sn_tensor *out = NULL;
        if (sn_model_predict(m, b[0], &out) != SN_OK) {
            rc = sn_cli_fail(prog);
            goto done;
        }
        const sn_shape *os = sn_tensor_shape(out);
        int kk = os->ndim == 2 ? (int)os->dim[1] : -1;
        if (kk < 2 || kk > MAX_CLASSES || (k && kk != k)) {
            fprintf(stderr, "%s: the model predicts %d values per example; the pictures need 2 "
                    "to %d classes\n", prog, kk, MAX_CLASSES);
            sn_tensor_free(out);
            goto done;
        }
        if (!k) {
            k = kk;
            if (!(counts = calloc((size_t)k * k, sizeof *counts))) {
                sn_tensor_free(out);
                goto done;
            }
            for (int c = 0; c < k; c++) {
                snprintf(num[c], sizeof num[c], "%d", c);
                names[c] = fashion && k == 10 ? fashion_names[c] : num[c];
            }
        }
        const float *p = sn_tensor_cdata(out);
        for (int64_t i = 0; i < os->dim[0] && seen < n; i++, seen++) {
            double tv = sn_tensor_get(y, seen);
            int pr = argmax(p + i * k, k);
            if (!(tv >= 0 && tv < k) || tv != floor(tv)) {
                fprintf(stderr, "%s: the label %g of example %lld is not a class 0..%d\n", prog,
                        tv, (long long)seen, k - 1);
                sn_tensor_free(out);
                goto done;
            }
            int t = (int)tv;
            counts[t * k + pr]++;
            if (t == pr) continue;
            wrong++;
            if (n_img < max_img) {
                to_gray(x, seen, (int64_t)rows * cols, imgs + (size_t)n_img * rows * cols);
                snprintf(caps[n_img], sizeof caps[n_img], "%s \u2192 %s", names[t], names[pr]);
                capp[n_img] = caps[n_img];
                n_img++;
            }
        }
        sn_tensor_free(out);
    }
    printf("Misclassified: %lld/%lld\n", (long long)wrong, (long long)seen);
    char title[128];
    if (o->misclassified) {
        if (n_img == 0) {
            printf("No misclassified image: %s not written\n", o->misclassified);
        } else {
            snprintf(title, sizeof title, "Misclassified: %lld of %lld (first %d, true \u2192 "
                     "predicted)", (long long)wrong, (long long)seen, n_img);
            if (sn_plot_image_grid(o->misclassified, imgs, n_img, rows, cols, capp, title, NULL) !=
                SN_OK) {
                rc = sn_cli_fail(prog);
                goto done;
            }
            printf("Wrote %d misclassified images to %s\n", n_img, o->misclassified);
        }
    }
    if (o->confusion && k) {
        printf("Confusion matrix (rows: true class, columns: predicted):\n");
        for (int t = 0; t < k; t++) {
            printf("%12s", names[t]);
            for (int c = 0; c < k; c++) printf(" %5lld", (long long)counts[t * k + c]);
            printf("\n");
        }
        snprintf(title, sizeof title, "Confusion matrix (%lld test examples)", (long long)seen);
        if (sn_plot_confusion(o->confusion, counts, k, names, title, NULL) != SN_OK) {
            rc = sn_cli_fail(prog);
            goto done;
        }
        printf("Wrote the confusion matrix to %s\n", o->confusion);
    }
    rc = 0;
done:
    sn_plot_release_caches();
    free(counts);
    free(imgs);
    free(caps);
    free(capp);
    free(num);
    return rc;
}
