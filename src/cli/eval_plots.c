/* sinter evaluate --misclassified / --confusion: one prediction pass over the test split
 * that counts the confusion matrix and collects the first wrong images, then the pictures
 * (src/plot). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "plot/plot.h"

static const char *const fashion_names[] = {"T-shirt/top", "Trouser", "Pullover", "Dress",
                                            "Coat",        "Sandal",  "Shirt",    "Sneaker",
                                            "Bag",         "Ankle boot"};
static const char *const digit_names[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};

const char *const *sn_cli_class_names(const char *dataset, const char *data_dir) {
    /* --data-dir is any MNIST-layout folder: digits are the common case, so their names */
    return !data_dir && !strcmp(dataset, "fashion_mnist") ? fashion_names : digit_names;
}

static int argmax(const float *p, int k) {
    int best = 0;
    for (int j = 1; j < k; j++)
        if (p[j] > p[best]) best = j;
    return best;
}

int sn_cli_eval_plots(const char *prog, sn_model *m, sn_dataset *test, const sn_tensor *x,
                      const sn_tensor *y, const char *const *names,
                      const sn_cli_eval_plot_opts *o) {
    const int k = 10;
    const sn_shape *xs = sn_tensor_shape(x);
    const int64_t n = xs->dim[0];
    const int rows = (int)xs->dim[1], cols = (int)xs->dim[2];
    const uint8_t *xi = sn_tensor_cdata(x), *yl = sn_tensor_cdata(y);
    int64_t counts[10 * 10] = {0}, wrong = 0, seen = 0;
    int max_img = (int)o->max_images;
    uint8_t *imgs = calloc((size_t)max_img, (size_t)rows * cols);
    char (*caps)[96] = calloc((size_t)max_img, sizeof *caps);
    const char **capp = calloc((size_t)max_img, sizeof *capp);
    int n_img = 0, rc = 1;
    if (!imgs || !caps || !capp) {
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
        if (os->ndim != 2 || os->dim[1] != k) {
            fprintf(stderr, "%s: the model predicts %lld values per image; the pictures need %d "
                    "classes\n", prog, os->ndim == 2 ? (long long)os->dim[1] : -1LL, k);
            sn_tensor_free(out);
            goto done;
        }
        const float *p = sn_tensor_cdata(out);
        for (int64_t i = 0; i < os->dim[0] && seen < n; i++, seen++) {
            int t = yl[seen], pr = argmax(p + i * k, k);
            if (t >= k) {
                fprintf(stderr, "%s: test label %d of image %lld is not a class 0..%d\n", prog, t,
                        (long long)seen, k - 1);
                sn_tensor_free(out);
                goto done;
            }
            counts[t * k + pr]++;
            if (t == pr) continue;
            wrong++;
            if (n_img < max_img) {
                memcpy(imgs + (size_t)n_img * rows * cols, xi + (size_t)seen * rows * cols,
                       (size_t)rows * cols);
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
    if (o->confusion) {
        printf("Confusion matrix (rows: true class, columns: predicted):\n");
        for (int t = 0; t < k; t++) {
            printf("%12s", names[t]);
            for (int p = 0; p < k; p++) printf(" %5lld", (long long)counts[t * k + p]);
            printf("\n");
        }
        snprintf(title, sizeof title, "Confusion matrix (%lld test images)", (long long)seen);
        if (sn_plot_confusion(o->confusion, counts, k, names, title, NULL) != SN_OK) {
            rc = sn_cli_fail(prog);
            goto done;
        }
        printf("Wrote the confusion matrix to %s\n", o->confusion);
    }
    rc = 0;
done:
    free(imgs);
    free(caps);
    free(capp);
    return rc;
}
