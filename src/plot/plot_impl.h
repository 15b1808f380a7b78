/* Internal to src/plot: cairo helpers shared by the pictures (plot_png.c). */
#ifndef SN_PLOT_IMPL_H
#define SN_PLOT_IMPL_H

#include <cairo.h>

#include "plot/plot.h"

#define SN_PLOT_FONT "DejaVu Sans"

/* An RGB24 image surface of w x h filled white, and its context; SN_ERR_NOMEM/BACKEND naming
 * cairo's status on failure (nothing to free then). */
sn_status sn_plot_begin(int w, int h, cairo_surface_t **surf, cairo_t **cr);
/* Writes surf to path atomically (temporary file in the same folder, fsync, rename, fsync
 * of the folder), then destroys cr and surf whatever happens. */
sn_status sn_plot_finish(cairo_surface_t *surf, cairo_t *cr, const char *path);
/* Text with its anchor: ha 0 left, 0.5 centre, 1 right; va 0 top, 0.5 middle, 1 baseline-ish
 * bottom. */
void sn_plot_text(cairo_t *cr, double x, double y, double ha, double va, const char *text);
void sn_plot_font(cairo_t *cr, double size, bool bold);
/* Round tick step for a range of about n ticks: 1, 2 or 5 times a power of ten. */
double sn_plot_tick_step(double lo, double hi, int n);

#endif
