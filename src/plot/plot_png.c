/* Shared pieces of the pictures: the white canvas, fonts and text anchoring, tick steps, and
 * the atomic PNG write. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fontconfig/fontconfig.h>

#include "plot/plot_impl.h"

sn_status sn_plot_begin(int w, int h, cairo_surface_t **surf, cairo_t **cr) {
    *surf = NULL;
    *cr = NULL;
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        sn_status st = sn_errorf(SN_ERR_NOMEM, "plot: cannot create a %dx%d image: %s", w, h,
                                 cairo_status_to_string(cairo_surface_status(s)));
        cairo_surface_destroy(s);
        return st;
    }
    cairo_t *c = cairo_create(s);
    if (cairo_status(c) != CAIRO_STATUS_SUCCESS) {
        sn_status st = sn_errorf(SN_ERR_NOMEM, "plot: cannot draw on a %dx%d image: %s", w, h,
                                 cairo_status_to_string(cairo_status(c)));
        cairo_destroy(c);
        cairo_surface_destroy(s);
        return st;
    }
    cairo_set_source_rgb(c, 1, 1, 1);
    cairo_paint(c);
    *surf = s;
    *cr = c;
    return SN_OK;
}

static cairo_status_t write_fd(void *closure, const unsigned char *data, unsigned int len) {
    int fd = *(int *)closure;
    while (len) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return CAIRO_STATUS_WRITE_ERROR;
        data += n;
        len -= (unsigned)n;
    }
    return CAIRO_STATUS_SUCCESS;
}

/* The folder of path, fsync'ed so that the rename survives a crash. */
static sn_status sync_dir(const char *path) {
    char *copy = sn_strdup(path);
    if (!copy) return SN_ERR_NOMEM;
    const char *dir = dirname(copy);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    sn_status s = SN_OK;
    if (fd < 0 || fsync(fd) != 0)
        s = sn_errorf(SN_ERR_IO, "plot: cannot sync the folder '%s': %s", dir, strerror(errno));
    if (fd >= 0) close(fd);
    free(copy);
    return s;
}

sn_status sn_plot_finish(cairo_surface_t *surf, cairo_t *cr, const char *path) {
    sn_status s = SN_OK;
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    if (cs != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(surf);
        return sn_errorf(SN_ERR_BACKEND, "plot: drawing '%s' failed: %s", path,
                         cairo_status_to_string(cs));
    }
    cairo_surface_flush(surf);
    size_t n = strlen(path) + 16;
    char *tmp = sn_malloc(n);
    if (!tmp) {
        cairo_surface_destroy(surf);
        return SN_ERR_NOMEM;
    }
    snprintf(tmp, n, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        s = sn_errorf(SN_ERR_IO, "plot: cannot create '%s': %s", tmp, strerror(errno));
        goto done;
    }
    cs = cairo_surface_write_to_png_stream(surf, write_fd, &fd);
    if (cs != CAIRO_STATUS_SUCCESS) {
        s = sn_errorf(SN_ERR_IO, "plot: writing '%s' failed: %s%s%s", tmp,
                      cairo_status_to_string(cs), errno ? ": " : "", errno ? strerror(errno) : "");
    } else if (fsync(fd) != 0) {
        s = sn_errorf(SN_ERR_IO, "plot: cannot sync '%s': %s", tmp, strerror(errno));
    }
    if (close(fd) != 0 && s == SN_OK)
        s = sn_errorf(SN_ERR_IO, "plot: closing '%s' failed: %s", tmp, strerror(errno));
    /* mkstemp makes 0600 files; a picture is as readable as any other output */
    if (s == SN_OK && chmod(tmp, 0644) != 0)
        s = sn_errorf(SN_ERR_IO, "plot: chmod '%s' failed: %s", tmp, strerror(errno));
    if (s == SN_OK && rename(tmp, path) != 0)
        s = sn_errorf(SN_ERR_IO, "plot: cannot rename '%s' to '%s': %s", tmp, path,
                      strerror(errno));
    if (s != SN_OK) unlink(tmp);
    else s = sync_dir(path);
done:
    free(tmp);
    cairo_surface_destroy(surf);
    return s;
}

void sn_plot_font(cairo_t *cr, double size, bool bold) {
    cairo_select_font_face(cr, SN_PLOT_FONT, CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

void sn_plot_text(cairo_t *cr, double x, double y, double ha, double va, const char *text) {
    cairo_text_extents_t e;
    cairo_font_extents_t f;
    cairo_text_extents(cr, text, &e);
    cairo_font_extents(cr, &f);
    /* vertical anchoring by the font's ascent, so labels of one row line up */
    double h = f.ascent;
    cairo_move_to(cr, x - ha * e.x_advance, y + h - va * h);
    cairo_show_text(cr, text);
}

double sn_plot_tick_step(double lo, double hi, int n) {
    double span = hi - lo;
    if (!(span > 0)) return 1;
    double raw = span / n, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

void sn_plot_release_caches(void) {
    cairo_debug_reset_static_data(); /* drops cairo's references to fontconfig's patterns */
    FcFini();
}
