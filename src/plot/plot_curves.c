/* sinter plot: loss and accuracy per epoch, training and validation, in two panels. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plot/plot_impl.h"

const uint8_t sn_plot_train_rgb[3] = {0x1f, 0x77, 0xb4};
const uint8_t sn_plot_val_rgb[3] = {0xff, 0x7f, 0x0e};

enum { W = 1000, H = 420, PANEL_W = W / 2, ML = 72, MR = 18, MT = 58, MB = 52 };

typedef struct series {
    int col; /* -1: absent */
    const uint8_t *rgb;
    const char *label;
} series;

static void rgb(cairo_t *cr, const uint8_t c[3]) {
    cairo_set_source_rgb(cr, c[0] / 255.0, c[1] / 255.0, c[2] / 255.0);
}

static double map(double v, double a0, double a1, double p0, double p1) {
    return p0 + (v - a0) / (a1 - a0) * (p1 - p0);
}

/* The data range of the finite values of the series (y) and of the epochs (x). */
static void ranges(const sn_plot_table *t, int epoch_col, const series *s, int ns,
                   sn_plot_axes *a) {
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < ns; k++) {
        if (s[k].col < 0) continue;
        for (int r = 0; r < t->n_rows; r++) {
            double v = t->v[(size_t)r * t->n_cols + s[k].col];
            if (isfinite(v)) {
                lo = fmin(lo, v);
                hi = fmax(hi, v);
            }
        }
    }
    if (!isfinite(lo)) lo = 0, hi = 1;
    if (hi - lo < 1e-12) {
        double pad = fabs(lo) > 1e-12 ? fabs(lo) * 0.1 : 0.5;
        lo -= pad;
        hi += pad;
    } else {
        double pad = (hi - lo) * 0.08;
        lo -= pad;
        hi += pad;
    }
    a->y0 = lo;
    a->y1 = hi;
    double e0 = INFINITY, e1 = -INFINITY;
    for (int r = 0; r < t->n_rows; r++) {
        double e = epoch_col >= 0 ? t->v[(size_t)r * t->n_cols + epoch_col] + 1 : r + 1;
        e0 = fmin(e0, e);
        e1 = fmax(e1, e);
    }
    if (!isfinite(e0)) e0 = e1 = 1;
    double pad = e1 > e0 ? (e1 - e0) * 0.04 : 0.5;
    a->x0 = e0 - pad;
    a->x1 = e1 + pad;
}

static void panel(cairo_t *cr, const sn_plot_table *t, int epoch_col, int ox, const char *title,
                  const char *ylabel, const series *s, int ns, sn_plot_axes *a) {
    ranges(t, epoch_col, s, ns, a);
    a->px0 = ox + ML;
    a->px1 = ox + PANEL_W - MR;
    a->py0 = H - MB;
    a->py1 = MT;
    char buf[64];
    /* grid and ticks */
    cairo_set_line_width(cr, 1);
    sn_plot_font(cr, 12, false);
    double ys = sn_plot_tick_step(a->y0, a->y1, 6);
    for (double y = ceil(a->y0 / ys) * ys; y <= a->y1 + 1e-12; y += ys) {
        double py = round(map(y, a->y0, a->y1, a->py0, a->py1)) + 0.5;
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_move_to(cr, a->px0, py);
        cairo_line_to(cr, a->px1, py);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, a->px0 - 5, py);
        cairo_line_to(cr, a->px0, py);
        cairo_stroke(cr);
        snprintf(buf, sizeof buf, "%.*f", ys < 0.01 ? 3 : ys < 0.1 ? 2 : ys < 1 ? 1 : 0,
                 fabs(y) < ys * 1e-6 ? 0.0 : y);
        sn_plot_text(cr, a->px0 - 8, py, 1, 0.5, buf);
    }
    double xs = fmax(1, sn_plot_tick_step(a->x0, a->x1, 8));
    for (double x = ceil(a->x0 / xs) * xs; x <= a->x1 + 1e-12; x += xs) {
        if (x < 1) continue;
        double px = round(map(x, a->x0, a->x1, a->px0, a->px1)) + 0.5;
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, px, a->py0);
        cairo_line_to(cr, px, a->py0 + 5);
        cairo_stroke(cr);
        snprintf(buf, sizeof buf, "%.0f", x);
        sn_plot_text(cr, px, a->py0 + 8, 0.5, 0, buf);
    }
    /* frame */
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_rectangle(cr, a->px0 + 0.5, a->py1 + 0.5, a->px1 - a->px0, a->py0 - a->py1);
    cairo_stroke(cr);
    /* labels, title, legend (above the plot, so it never hides a point) */
    sn_plot_font(cr, 13, false);
    sn_plot_text(cr, (a->px0 + a->px1) / 2, H - 22, 0.5, 0, "Epoch");
    cairo_save(cr);
    cairo_translate(cr, ox + 16, (a->py0 + a->py1) / 2);
    cairo_rotate(cr, -M_PI / 2);
    sn_plot_text(cr, 0, 0, 0.5, 0.5, ylabel);
    cairo_restore(cr);
    sn_plot_font(cr, 15, true);
    sn_plot_text(cr, a->px0, 10, 0, 0, title);
    sn_plot_font(cr, 12, false);
    double lx = a->px1;
    for (int k = ns - 1; k >= 0; k--) {
        if (s[k].col < 0) continue;
        cairo_text_extents_t e;
        cairo_text_extents(cr, s[k].label, &e);
        lx -= e.x_advance;
        cairo_set_source_rgb(cr, 0, 0, 0);
        sn_plot_text(cr, lx, MT - 22, 0, 0.5, s[k].label);
        rgb(cr, s[k].rgb);
        cairo_set_line_width(cr, 2.5);
        cairo_move_to(cr, lx - 30, MT - 22 + 0.5);
        cairo_line_to(cr, lx - 6, MT - 22 + 0.5);
        cairo_stroke(cr);
        cairo_arc(cr, lx - 18, MT - 22 + 0.5, 3.5, 0, 2 * M_PI);
        cairo_fill(cr);
        lx -= 48;
    }
    /* curves, clipped to the plot area; lines first, then the points on top */
    cairo_save(cr);
    cairo_rectangle(cr, a->px0 + 1, a->py1 + 1, a->px1 - a->px0 - 1, a->py0 - a->py1 - 1);
    cairo_clip(cr);
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < ns; k++) {
            if (s[k].col < 0) continue;
            rgb(cr, s[k].rgb);
            cairo_set_line_width(cr, 2);
            bool pen = false;
            for (int r = 0; r < t->n_rows; r++) {
                double v = t->v[(size_t)r * t->n_cols + s[k].col];
                double e = epoch_col >= 0 ? t->v[(size_t)r * t->n_cols + epoch_col] + 1 : r + 1;
                if (!isfinite(v)) {
                    pen = false;
                    continue;
                }
                double px = map(e, a->x0, a->x1, a->px0, a->px1);
                double py = map(v, a->y0, a->y1, a->py0, a->py1);
                if (pass == 0) {
                    if (pen) cairo_line_to(cr, px, py);
                    else cairo_move_to(cr, px, py);
                    pen = true;
                } else {
                    cairo_new_sub_path(cr);
                    cairo_arc(cr, px, py, 4, 0, 2 * M_PI);
                    cairo_fill(cr);
                }
            }
            if (pass == 0) cairo_stroke(cr);
        }
    cairo_restore(cr);
}

sn_status sn_plot_curves(const sn_plot_table *t, const char *png_path,
                         sn_plot_curves_layout *layout) {
    int loss = sn_plot_table_col(t, "loss"), vloss = sn_plot_table_col(t, "val_loss");
    int epoch = sn_plot_table_col(t, "epoch");
    if (loss < 0 && vloss < 0)
        return sn_errorf(SN_ERR_INVALID, "plot: the log has no 'loss' or 'val_loss' column "
                         "(columns: %d); expected a CSV log of sinter train --csv", t->n_cols);
    if (t->n_rows == 0)
        return sn_errorf(SN_ERR_INVALID, "plot: the log has no epochs (only a header)");
    int acc = -1;
    for (int i = 0; i < t->n_cols && acc < 0; i++)
        if (strncmp(t->names[i], "val_", 4) && strstr(t->names[i], "acc")) acc = i;
    int vacc = -1;
    char vname[80] = "";
    if (acc >= 0) {
        snprintf(vname, sizeof vname, "val_%s", t->names[acc]);
        vacc = sn_plot_table_col(t, vname);
    }
    cairo_surface_t *surf;
    cairo_t *cr;
    SN_TRY(sn_plot_begin(W, H, &surf, &cr));
    sn_plot_curves_layout lay = {.width = W, .height = H};
    series ls[2] = {{loss, sn_plot_train_rgb, "Training"}, {vloss, sn_plot_val_rgb, "Validation"}};
    panel(cr, t, epoch, 0, "Loss", "loss", ls, 2, &lay.loss);
    if (acc >= 0) {
        series as[2] = {{acc, sn_plot_train_rgb, "Training"}, {vacc, sn_plot_val_rgb, "Validation"}};
        char title[96];
        snprintf(title, sizeof title, "Accuracy");
        panel(cr, t, epoch, PANEL_W, title, t->names[acc], as, 2, &lay.acc);
        snprintf(lay.acc_name, sizeof lay.acc_name, "%s", t->names[acc]);
    } else {
        sn_plot_font(cr, 14, false);
        cairo_set_source_rgb(cr, 0.4, 0.4, 0.4);
        sn_plot_text(cr, PANEL_W * 1.5, H / 2.0, 0.5, 0.5, "(no accuracy in the log)");
    }
    if (layout) *layout = lay;
    return sn_plot_finish(surf, cr, png_path);
}
