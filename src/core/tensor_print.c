/* Tensors printed as TensorFlow prints them (repr of an EagerTensor, NumPy's formatting of
 * the values): "tf.Tensor(\n[[1. 2.]\n [3. 4.]], shape=(2, 2), dtype=float32)". The one
 * printer of the project: strategies print per-replica values with it, the examples their
 * results. */
#include <math.h>
#include <stdio.h>

#include "core/core.h"
#include "sinter/tensor.h"

/* Fraction digits NumPy's "maxprec" mode gives x: the fewest (up to 8) that print it back
 * to within its precision. */
static int frac_digits(double x, bool f32) {
    double tol = fabs(x) * (f32 ? 1e-7 : 1e-15) + 1e-300;
    for (int d = 0; d < 8; d++) {
        double sc = pow(10.0, d);
        if (fabs(round(x * sc) / sc - x) <= tol) return d;
    }
    return 8;
}

typedef struct fmt {
    bool is_float, f32;
    int fd;    /* fraction digits (floats) */
    int width; /* of the widest element */
} fmt;

static int fmt_elem(const fmt *f, double x, char *buf, size_t cap) {
    if (!f->is_float) return snprintf(buf, cap, "%lld", (long long)x);
    if (isnan(x)) return snprintf(buf, cap, "nan");
    if (isinf(x)) return snprintf(buf, cap, x > 0 ? "inf" : "-inf");
    int own = frac_digits(x, f->f32);
    int n = own == 0 ? snprintf(buf, cap, "%.0f.", x) : snprintf(buf, cap, "%.*f", own, x);
    /* NumPy pads the fraction with spaces to the common number of digits. */
    for (int i = own; i < f->fd && (size_t)n + 1 < cap; i++) buf[n++] = ' ';
    buf[n] = 0;
    return n;
}

static void print_rec(FILE *o, const sn_tensor *t, const fmt *f, int k, int64_t *idx) {
    const sn_shape *s = sn_tensor_shape(t);
    fputc('[', o);
    for (int64_t i = 0; i < s->dim[k]; i++) {
        if (k == s->ndim - 1) {
            char b[64];
            fmt_elem(f, sn_tensor_get(t, (*idx)++), b, sizeof b);
            fprintf(o, "%s%*s", i ? " " : "", f->width, b);
        } else {
            if (i) {
                fputc('\n', o);
                for (int e = 0; e < s->ndim - k - 2; e++) fputc('\n', o);
                for (int e = 0; e <= k; e++) fputc(' ', o);
            }
            print_rec(o, t, f, k + 1, idx);
        }
    }
    fputc(']', o);
}

sn_status sn_tensor_print_tf(const sn_tensor *t, FILE *o) {
    if (!t || !o) return sn_errorf(SN_ERR_INVALID, "tensor_print_tf: NULL %s", t ? "file" : "tensor");
    const sn_shape *s = sn_tensor_shape(t);
    sn_dtype dt = sn_tensor_dtype(t);
    fmt f = {.is_float = dt == SN_F32 || dt == SN_BF16 || dt == SN_F64, .f32 = dt != SN_F64};
    int64_t n = sn_tensor_numel(t);
    for (int64_t i = 0; i < n && f.is_float; i++) {
        double x = sn_tensor_get(t, i);
        if (isfinite(x)) {
            int d = frac_digits(x, f.f32);
            if (d > f.fd) f.fd = d;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        char b[64];
        int w = fmt_elem(&f, sn_tensor_get(t, i), b, sizeof b);
        if (w > f.width) f.width = w;
    }
    bool multiline = false;
    for (int i = 0; i + 1 < s->ndim; i++)
        if (s->dim[i] > 1) multiline = true;
    fprintf(o, "tf.Tensor(%s", multiline ? "\n" : "");
    if (s->ndim == 0) {
        char b[64];
        fmt_elem(&f, sn_tensor_get(t, 0), b, sizeof b);
        fputs(b, o);
    } else if (n == 0) {
        fputs("[]", o);
    } else {
        int64_t idx = 0;
        print_rec(o, t, &f, 0, &idx);
    }
    fputs(", shape=(", o);
    for (int i = 0; i < s->ndim; i++)
        fprintf(o, "%s%lld", i ? ", " : "", (long long)s->dim[i]);
    fprintf(o, "%s), dtype=%s)", s->ndim == 1 ? "," : "", sn_dtype_name(dt));
    return SN_OK;
}
