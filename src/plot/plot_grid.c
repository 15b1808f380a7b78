/* A grid of small grayscale images with a caption under each (sinter evaluate
 * --misclassified). Pixels are written straight into the surface (nearest-neighbour scaling)
 * so that each shown pixel is exactly the image's value. */
#include <math.h>
#include <string.h>

#include "plot/plot_impl.h"

enum { TITLE_H = 40, CAPTION_H = 22, PAD = 8 };

sn_status sn_plot_image_grid(const char *png_path, const uint8_t *images, int n, int rows,
                             int cols, const char *const *captions, const char *title,
                             sn_plot_grid_layout *layout) {
    if (n < 1 || rows < 1 || cols < 1 || rows > 512 || cols > 512 || !images)
        return sn_errorf(SN_ERR_INVALID, "plot: image grid of %d images of %dx%d; expected at "
                         "least one image of 1..512 pixels a side", n, rows, cols);
    int scale = rows <= 64 && cols <= 64 ? 3 : 1;
    /* captions such as "T-shirt/top → Ankle boot" need about 170 px at 11 pt */
    int cell_w = cols * scale + 2 * PAD;
    if (cell_w < 180) cell_w = 180;
    int cell_h = rows * scale + CAPTION_H + 2 * PAD;
    int grid_cols = (int)ceil(sqrt((double)n));
    if (grid_cols > 8) grid_cols = 8;
    int grid_rows = (n + grid_cols - 1) / grid_cols;
    sn_plot_grid_layout lay = {.width = grid_cols * cell_w, .height = TITLE_H + grid_rows * cell_h,
                               .cols = grid_cols, .cell_w = cell_w, .cell_h = cell_h,
                               .img_x = (cell_w - cols * scale) / 2, .img_y = PAD,
                               .scale = scale, .top = TITLE_H};
    cairo_surface_t *surf;
    cairo_t *cr;
    SN_TRY(sn_plot_begin(lay.width, lay.height, &surf, &cr));
    sn_plot_font(cr, 15, true);
    cairo_set_source_rgb(cr, 0, 0, 0);
    if (title) sn_plot_text(cr, lay.width / 2.0, 11, 0.5, 0, title);
    sn_plot_font(cr, 11, false);
    for (int i = 0; i < n; i++) {
        int cx = (i % grid_cols) * cell_w, cy = TITLE_H + (i / grid_cols) * cell_h;
        if (captions && captions[i]) {
            cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
            sn_plot_text(cr, cx + cell_w / 2.0, cy + PAD + rows * scale + 5, 0.5, 0, captions[i]);
        }
    }
    /* Text first, then the pixels, written directly: cairo has drawn everything it owes. */
    cairo_surface_flush(surf);
    unsigned char *data = cairo_image_surface_get_data(surf);
    int stride = cairo_image_surface_get_stride(surf);
    for (int i = 0; i < n; i++) {
        int x0 = (i % grid_cols) * cell_w + lay.img_x, y0 = TITLE_H + (i / grid_cols) * cell_h + PAD;
        const uint8_t *img = images + (size_t)i * rows * cols;
        for (int y = 0; y < rows * scale; y++) {
            uint32_t *row = (uint32_t *)(data + (size_t)(y0 + y) * stride) + x0;
            for (int x = 0; x < cols * scale; x++) {
                uint32_t g = img[(y / scale) * cols + x / scale];
                row[x] = 0xff000000u | g << 16 | g << 8 | g; /* RGB24: xRGB in native order */
            }
        }
    }
    cairo_surface_mark_dirty(surf);
    if (layout) *layout = lay;
    return sn_plot_finish(surf, cr, png_path);
}
