/* A k x k confusion matrix: rows are true classes, columns predicted ones, each cell shaded
 * from white to dark blue by its count (matplotlib's "Blues" ends) and labelled with it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plot/plot_impl.h"

enum { CELL = 52, LEFT = 150, TOP = 60, BOTTOM = 115, RIGHT = 30 };

sn_status sn_plot_confusion(const char *png_path, const int64_t *counts, int k,
                            const char *const *names, const char *title,
                            sn_plot_confusion_layout *layout) {
    if (k < 1 || k > 100 || !counts || !names)
        return sn_errorf(SN_ERR_INVALID, "plot: confusion matrix of %d classes; expected 1 to 100 "
                         "with counts and names", k);
    int64_t max = 0;
    for (int i = 0; i < k * k; i++) max = counts[i] > max ? counts[i] : max;
    sn_plot_confusion_layout lay = {.width = LEFT + k * CELL + RIGHT,
                                    .height = TOP + k * CELL + BOTTOM, .x0 = LEFT, .y0 = TOP,
                                    .cell = CELL};
    cairo_surface_t *surf;
    cairo_t *cr;
    SN_TRY(sn_plot_begin(lay.width, lay.height, &surf, &cr));
    char buf[32];
    for (int t = 0; t < k; t++)
        for (int p = 0; p < k; p++) {
            int64_t c = counts[t * k + p];
            /* sqrt so that the few-count mistakes stay visible beside the big diagonal */
            double f = max > 0 ? sqrt((double)c / (double)max) : 0;
            double r = 0.97 + (0.03 - 0.97) * f, g = 0.98 + (0.19 - 0.98) * f,
                   b = 1.00 + (0.42 - 1.00) * f;
            double x = LEFT + p * CELL, y = TOP + t * CELL;
            cairo_set_source_rgb(cr, r, g, b);
            cairo_rectangle(cr, x, y, CELL, CELL);
            cairo_fill(cr);
            snprintf(buf, sizeof buf, "%lld", (long long)c);
            sn_plot_font(cr, c >= 10000 ? 10 : 12, false);
            if (f > 0.55) cairo_set_source_rgb(cr, 1, 1, 1);
            else cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
            sn_plot_text(cr, x + CELL / 2.0, y + CELL / 2.0, 0.5, 0.5, buf);
        }
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, LEFT + 0.5, TOP + 0.5, k * CELL, k * CELL);
    cairo_stroke(cr);
    sn_plot_font(cr, 12, false);
    for (int i = 0; i < k; i++) {
        sn_plot_text(cr, LEFT - 8, TOP + i * CELL + CELL / 2.0, 1, 0.5, names[i]);
        cairo_save(cr);
        cairo_translate(cr, LEFT + i * CELL + CELL / 2.0, TOP + k * CELL + 8);
        cairo_rotate(cr, -M_PI / 4);
        sn_plot_text(cr, 0, 0, 1, 0.5, names[i]);
        cairo_restore(cr);
    }
    sn_plot_font(cr, 13, true);
    sn_plot_text(cr, LEFT + k * CELL / 2.0, lay.height - 24, 0.5, 0, "Predicted label");
    cairo_save(cr);
    cairo_translate(cr, 16, TOP + k * CELL / 2.0);
    cairo_rotate(cr, -M_PI / 2);
    sn_plot_text(cr, 0, 0, 0.5, 0.5, "True label");
    cairo_restore(cr);
    sn_plot_font(cr, 15, true);
    if (title) sn_plot_text(cr, LEFT + k * CELL / 2.0, 18, 0.5, 0, title);
    if (layout) *layout = lay;
    return sn_plot_finish(surf, cr, png_path);
}
