/* src/plot: the PNG pictures of `sinter plot` and `sinter evaluate` (training curves, a grid
 * of misclassified images, a confusion matrix), drawn with cairo (lines and text; fonts from
 * fontconfig, DejaVu Sans on Debian).
 *
 * An apps-layer folder: it uses core only (errors, allocation) and cairo; only src/cli calls
 * it, and nothing below apps includes this header. Every PNG is written atomically (a
 * temporary file in the same folder, fsync, rename, fsync of the folder), so a crash leaves
 * either the old picture or the new one.
 *
 * Each drawing function can report where it drew (the *_layout structs), so that tests can
 * look at the pixels of a known data point or cell instead of trusting the picture by eye. */
#ifndef SN_PLOT_H
#define SN_PLOT_H

#include <stdint.h>

#include "core/core.h"

/* Frees cairo's and fontconfig's process-wide caches (the font configuration, cairo's toy
 * font faces). Call once, after the last plot of the process: the CLI does before it returns,
 * and the tests do, so that LeakSanitizer sees no library cache and needs no suppression for
 * them (a font face sinter itself failed to release would then show as a leak). */
void sn_plot_release_caches(void);

/* ---- the CSV logger's file (plot_csv.c) -------------------------------------------------- */
/* A numeric table: names[n_cols] from the header, v[row * n_cols + col]; NaN where a field is
 * "NA", "nan" or empty. */
typedef struct sn_plot_table {
    int n_cols, n_rows;
    char **names;
    double *v;
} sn_plot_table;
/* Reads a CSV file with a header line and numeric fields (sn_callback_csv_logger's format).
 * Errors name the file, line and field. sn_plot_table_free frees *out (also after an error). */
sn_status sn_plot_table_read_csv(const char *path, sn_plot_table *out);
void sn_plot_table_free(sn_plot_table *t);
/* Index of the column called name, -1 when absent. */
int sn_plot_table_col(const sn_plot_table *t, const char *name);

/* ---- training curves (plot_curves.c) ----------------------------------------------------- */
/* Where one panel maps data to pixels: x = px0 + (value - x0) / (x1 - x0) * (px1 - px0), and
 * y likewise (py0 is the bottom: pixel rows grow downwards). */
typedef struct sn_plot_axes {
    double x0, x1, y0, y1;     /* data range shown */
    double px0, px1, py0, py1; /* pixels */
} sn_plot_axes;
typedef struct sn_plot_curves_layout {
    int width, height;
    sn_plot_axes loss, acc; /* acc unused (x0 == x1 == 0) when the log has no accuracy */
    char acc_name[64];      /* the accuracy column plotted, "" when none */
} sn_plot_curves_layout;
/* The series colours (RGB 0..255): training blue, validation orange (matplotlib's first two). */
extern const uint8_t sn_plot_train_rgb[3], sn_plot_val_rgb[3];
/* Two panels from a CSV log: loss and val_loss, then the first accuracy-like metric ("acc" in
 * its name) and its val_ twin, per epoch (x: epoch + 1, as the progress bar counts), with
 * axes, ticks, labels and a legend. layout may be NULL. */
sn_status sn_plot_curves(const sn_plot_table *t, const char *png_path,
                         sn_plot_curves_layout *layout);

/* ---- image grid (plot_grid.c) ------------------------------------------------------------ */
typedef struct sn_plot_grid_layout {
    int width, height;
    int cols, cell_w, cell_h; /* cell i at column i % cols, row i / cols */
    int img_x, img_y, scale;  /* image of cell (c, r): (c * cell_w + img_x, top + r * cell_h + img_y) */
    int top;                  /* height of the title band */
} sn_plot_grid_layout;
/* n grayscale images (u8 [n, rows, cols]) shown as they are (0 black, 255 white), each
 * scaled by an integer factor (nearest neighbour) and captioned below with captions[i];
 * `title` above. layout may be NULL. */
sn_status sn_plot_image_grid(const char *png_path, const uint8_t *images, int n, int rows,
                             int cols, const char *const *captions, const char *title,
                             sn_plot_grid_layout *layout);

/* ---- confusion matrix (plot_confusion.c) ------------------------------------------------- */
typedef struct sn_plot_confusion_layout {
    int width, height;
    int x0, y0, cell; /* cell (true t, predicted p) spans (x0 + p * cell, y0 + t * cell) */
} sn_plot_confusion_layout;
/* k x k counts (row: true class, column: predicted) shaded white to dark blue by count, each
 * cell labelled with its count, rows and columns with names[k]; `title` above. */
sn_status sn_plot_confusion(const char *png_path, const int64_t *counts, int k,
                            const char *const *names, const char *title,
                            sn_plot_confusion_layout *layout);

#endif
