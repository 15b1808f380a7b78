/* The PNG pictures of src/plot, checked by their pixels: sizes, the white background, the
 * colour at a known data point of each curve, the image grid's pixels equal to the images,
 * darker confusion cells for bigger counts, atomic writes (no temporary file left, a missing
 * folder is an error naming the path), and the CSV reader's errors. */
#include <cairo.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "plot/plot.h"
#include "sn_test.h"

static char tmpdir[] = "/tmp/sn_plot_XXXXXX";

static const char *path_in(const char *name) {
    static char buf[4][256];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", tmpdir, name);
    return buf[i];
}

/* RGB at (x, y) of a loaded PNG. */
static void pixel(cairo_surface_t *s, int x, int y, int rgb[3]) {
    const unsigned char *d = cairo_image_surface_get_data(s);
    uint32_t v = *(const uint32_t *)(d + (size_t)y * cairo_image_surface_get_stride(s) + 4 * (size_t)x);
    rgb[0] = (v >> 16) & 0xff;
    rgb[1] = (v >> 8) & 0xff;
    rgb[2] = v & 0xff;
}

static cairo_surface_t *load(const char *path, int w, int h) {
    cairo_surface_t *s = cairo_image_surface_create_from_png(path);
    CHECK(cairo_surface_status(s) == CAIRO_STATUS_SUCCESS, "load %s: %s", path,
          cairo_status_to_string(cairo_surface_status(s)));
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(s);
        return NULL;
    }
    CHECK(cairo_image_surface_get_width(s) == w && cairo_image_surface_get_height(s) == h,
          "%s is %dx%d, want %dx%d", path, cairo_image_surface_get_width(s),
          cairo_image_surface_get_height(s), w, h);
    return s;
}

static bool near_rgb(const int got[3], const uint8_t want[3], int tol) {
    for (int c = 0; c < 3; c++)
        if (abs(got[c] - want[c]) > tol) return false;
    return true;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "create %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void check_point(cairo_surface_t *s, const sn_plot_axes *a, double x, double y,
                        const uint8_t rgb[3], const char *what) {
    double px = a->px0 + (x - a->x0) / (a->x1 - a->x0) * (a->px1 - a->px0);
    double py = a->py0 + (y - a->y0) / (a->y1 - a->y0) * (a->py1 - a->py0);
    int got[3];
    pixel(s, (int)floor(px), (int)floor(py), got);
    CHECK(near_rgb(got, rgb, 2), "%s at (%.1f, %.1f): rgb %d,%d,%d, want %d,%d,%d", what, px, py,
          got[0], got[1], got[2], rgb[0], rgb[1], rgb[2]);
}

static void test_curves(void) {
    const char *csv = path_in("h.csv");
    write_file(csv, "epoch,loss,sparse_categorical_accuracy,val_loss,val_sparse_categorical_accuracy\n"
                    "0,1.2,0.55,0.9,0.70\n1,0.8,0.72,0.7,0.75\n2,0.6,0.80,NA,0.78\n"
                    "3,0.5,0.83,0.62,0.80\n");
    sn_plot_table t;
    CHECK_OK(sn_plot_table_read_csv(csv, &t));
    CHECK(t.n_cols == 5 && t.n_rows == 4 && isnan(t.v[2 * 5 + 3]) && t.v[5 + 1] == 0.8,
          "table %dx%d", t.n_rows, t.n_cols);
    sn_plot_curves_layout lay;
    const char *png = path_in("curves.png");
    CHECK_OK(sn_plot_curves(&t, png, &lay));
    CHECK(!strcmp(lay.acc_name, "sparse_categorical_accuracy"), "acc column '%s'", lay.acc_name);
    cairo_surface_t *s = load(png, lay.width, lay.height);
    if (s) {
        int c[3];
        pixel(s, 2, 2, c);
        CHECK(c[0] == 255 && c[1] == 255 && c[2] == 255, "background %d,%d,%d", c[0], c[1], c[2]);
        /* x is epoch + 1 */
        check_point(s, &lay.loss, 1, 1.2, sn_plot_train_rgb, "training loss of epoch 1");
        check_point(s, &lay.loss, 4, 0.5, sn_plot_train_rgb, "training loss of epoch 4");
        check_point(s, &lay.loss, 2, 0.7, sn_plot_val_rgb, "validation loss of epoch 2");
        check_point(s, &lay.acc, 1, 0.55, sn_plot_train_rgb, "training accuracy of epoch 1");
        check_point(s, &lay.acc, 4, 0.80, sn_plot_val_rgb, "validation accuracy of epoch 4");
        /* the NA epoch draws nothing there: white (the nearest line is far away) */
        double px = lay.loss.px0 + (3 - lay.loss.x0) / (lay.loss.x1 - lay.loss.x0) *
                                       (lay.loss.px1 - lay.loss.px0);
        double py = lay.loss.py0 + (0.95 - lay.loss.y0) / (lay.loss.y1 - lay.loss.y0) *
                                       (lay.loss.py1 - lay.loss.py0);
        pixel(s, (int)px, (int)py, c);
        CHECK(c[0] > 200 && c[1] > 200 && c[2] > 200, "empty plot area %d,%d,%d", c[0], c[1], c[2]);
        cairo_surface_destroy(s);
    }
    sn_plot_table_free(&t);

    /* No temporary file left beside the picture. */
    DIR *d = opendir(tmpdir);
    int tmps = 0;
    for (struct dirent *e; d && (e = readdir(d));) tmps += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    CHECK(tmps == 0, "%d temporary files left", tmps);

    /* A log without accuracy: one panel of loss, and the other says so. */
    write_file(csv, "epoch,loss\n0,2\n1,1\n");
    CHECK_OK(sn_plot_table_read_csv(csv, &t));
    CHECK_OK(sn_plot_curves(&t, png, &lay));
    CHECK(lay.acc_name[0] == '\0', "acc '%s'", lay.acc_name);
    CHECK_ERR(sn_plot_curves(&t, "/nonexistent-dir/x.png", NULL), SN_ERR_IO, "/nonexistent-dir/x.png");
    sn_plot_table_free(&t);
}

static void test_csv_errors(void) {
    sn_plot_table t;
    const char *csv = path_in("bad.csv");
    write_file(csv, "epoch,loss\n0,abc\n");
    CHECK_ERR(sn_plot_table_read_csv(csv, &t), SN_ERR_INVALID, "line 2, column 'loss': 'abc'");
    sn_plot_table_free(&t);
    write_file(csv, "epoch,loss\n0,1,2\n");
    CHECK_ERR(sn_plot_table_read_csv(csv, &t), SN_ERR_INVALID, "line 2 has more than");
    sn_plot_table_free(&t);
    write_file(csv, "");
    CHECK_ERR(sn_plot_table_read_csv(csv, &t), SN_ERR_INVALID, "is empty");
    sn_plot_table_free(&t);
    CHECK_ERR(sn_plot_table_read_csv(path_in("missing.csv"), &t), SN_ERR_IO, "missing.csv");
    sn_plot_table_free(&t);
    write_file(csv, "epoch,accuracy\n0,0.5\n");
    CHECK_OK(sn_plot_table_read_csv(csv, &t));
    CHECK_ERR(sn_plot_curves(&t, path_in("x.png"), NULL), SN_ERR_INVALID, "no 'loss'");
    sn_plot_table_free(&t);
}

static void test_grid(void) {
    enum { N = 5, R = 28, C = 28 };
    static uint8_t img[N * R * C];
    for (int i = 0; i < N * R * C; i++) img[i] = (uint8_t)(i * 7 + i / 13);
    const char *caps[N] = {"T-shirt/top \u2192 Shirt", "a", "b", "c", "Ankle boot \u2192 Sneaker"};
    sn_plot_grid_layout lay;
    const char *png = path_in("grid.png");
    CHECK_OK(sn_plot_image_grid(png, img, N, R, C, caps, "Misclassified: 5/5", &lay));
    CHECK(lay.cols == 3 && lay.height == lay.top + 2 * lay.cell_h, "cols %d height %d", lay.cols,
          lay.height);
    cairo_surface_t *s = load(png, lay.width, lay.height);
    if (!s) return;
    int bad = 0;
    for (int i = 0; i < N; i++)
        for (int y = 0; y < R * lay.scale; y += 5)
            for (int x = 0; x < C * lay.scale; x += 3) {
                int c[3];
                int px = (i % lay.cols) * lay.cell_w + lay.img_x + x;
                int py = lay.top + (i / lay.cols) * lay.cell_h + lay.img_y + y;
                pixel(s, px, py, c);
                int v = img[i * R * C + (y / lay.scale) * C + x / lay.scale];
                bad += c[0] != v || c[1] != v || c[2] != v;
            }
    CHECK(bad == 0, "%d shown pixels differ from the images", bad);
    /* the caption band under the first image holds text (dark pixels) */
    int dark = 0;
    for (int y = lay.img_y + R * lay.scale; y < lay.cell_h; y++)
        for (int x = 0; x < lay.cell_w; x++) {
            int c[3];
            pixel(s, x, lay.top + y, c);
            dark += c[0] < 100;
        }
    CHECK(dark > 20, "caption: %d dark pixels", dark);
    cairo_surface_destroy(s);
    CHECK_ERR(sn_plot_image_grid(png, img, 0, R, C, caps, NULL, NULL), SN_ERR_INVALID, "0 images");
}

static int brightness(cairo_surface_t *s, const sn_plot_confusion_layout *l, int t, int p) {
    int c[3];
    pixel(s, l->x0 + p * l->cell + 3, l->y0 + t * l->cell + 3, c); /* a corner, off the text */
    return c[0] + c[1] + c[2];
}

static void test_confusion(void) {
    enum { K = 10 };
    int64_t counts[K * K] = {0};
    for (int i = 0; i < K; i++) counts[i * K + i] = 900 + i;
    counts[0 * K + 6] = 120; /* T-shirt/top taken for Shirt */
    counts[6 * K + 0] = 30;
    const char *names[K] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                            "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
    sn_plot_confusion_layout lay;
    const char *png = path_in("cm.png");
    CHECK_OK(sn_plot_confusion(png, counts, K, names, "Confusion", &lay));
    cairo_surface_t *s = load(png, lay.width, lay.height);
    if (!s) return;
    int diag = brightness(s, &lay, 9, 9), big = brightness(s, &lay, 0, 6),
        small = brightness(s, &lay, 6, 0), zero = brightness(s, &lay, 0, 1);
    CHECK(diag < big && big < small && small < zero, "brightness diag %d < 120: %d < 30: %d < 0: %d",
          diag, big, small, zero);
    CHECK(zero > 740, "an empty cell is near white: %d", zero);
    /* the count's text is drawn in the middle of a cell: white on the dark diagonal */
    int light = 0;
    for (int dy = -8; dy <= 8; dy++)
        for (int dx = -15; dx <= 15; dx++) {
            int c[3];
            pixel(s, lay.x0 + 9 * lay.cell + lay.cell / 2 + dx, lay.y0 + 9 * lay.cell + lay.cell / 2 + dy, c);
            light += c[0] > 200;
        }
    CHECK(light > 10, "count text on the diagonal: %d light pixels", light);
    cairo_surface_destroy(s);
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_curves();
    test_csv_errors();
    test_grid();
    test_confusion();
    sn_plot_release_caches(); /* LeakSanitizer then sees every font face released */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return sn_test_finish("test_plot");
}
