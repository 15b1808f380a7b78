/* Tensors: dtype + shape + byte strides over memory owned by the tensor or by the tensor it
 * views. */
#include <stdarg.h>
#include <string.h>

#include "core/core.h"

size_t sn_dtype_size(sn_dtype t) {
    switch (t) {
    case SN_F32: return 4;
    case SN_BF16: return 2;
    case SN_I32: return 4;
    case SN_U8: return 1;
    case SN_F64: return 8;
    default: return 0;
    }
}

const char *sn_dtype_name(sn_dtype t) {
    switch (t) {
    case SN_F32: return "float32";
    case SN_BF16: return "bfloat16";
    case SN_I32: return "int32";
    case SN_U8: return "uint8";
    case SN_F64: return "float64";
    default: return "invalid";
    }
}

sn_shape sn_shape_make(int ndim, ...) {
    sn_shape s = {0};
    if (ndim < 0 || ndim > SN_MAX_DIMS) {
        s.ndim = -1; /* rejected by every consumer with a message */
        return s;
    }
    s.ndim = ndim;
    va_list ap;
    va_start(ap, ndim);
    for (int i = 0; i < ndim; i++) s.dim[i] = va_arg(ap, int64_t);
    va_end(ap);
    return s;
}

int64_t sn_shape_numel(const sn_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->dim[i];
    return n;
}

bool sn_shape_equal(const sn_shape *a, const sn_shape *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dim[i] != b->dim[i]) return false;
    return true;
}

char *sn_shape_str(const sn_shape *s, char *buf, size_t cap) {
    size_t n = 0;
    if (cap == 0) return buf;
    buf[0] = 0;
    n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "[");
    for (int i = 0; i < s->ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %lld" : "%lld", (long long)s->dim[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
    return buf;
}

uint16_t sn_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float sn_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static sn_status check_shape(const sn_shape *shape, const char *what) {
    char b[128];
    if (!shape) return sn_errorf(SN_ERR_INVALID, "%s: shape is NULL", what);
    if (shape->ndim < 0 || shape->ndim > SN_MAX_DIMS)
        return sn_errorf(SN_ERR_SHAPE, "%s: rank %d is outside [0, %d]", what, shape->ndim,
                         SN_MAX_DIMS);
    for (int i = 0; i < shape->ndim; i++)
        if (shape->dim[i] < 0)
            return sn_errorf(SN_ERR_SHAPE, "%s: shape %s has a negative dimension %d", what,
                             sn_shape_str(shape, b, sizeof b), i);
    return SN_OK;
}

static void contiguous_strides(sn_tensor *t) {
    int64_t s = (int64_t)sn_dtype_size(t->dtype);
    for (int i = t->shape.ndim - 1; i >= 0; i--) {
        t->strides[i] = s;
        s *= t->shape.dim[i];
    }
}

sn_status sn_tensor_new(sn_tensor **out, sn_dtype dtype, const sn_shape *shape) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "sn_tensor_new: out is NULL");
    *out = NULL;
    if ((unsigned)dtype >= SN_DTYPE_COUNT)
        return sn_errorf(SN_ERR_INVALID, "sn_tensor_new: dtype %d is not a sinter dtype",
                         (int)dtype);
    SN_TRY(check_shape(shape, "sn_tensor_new"));
    sn_tensor *t = sn_calloc(1, sizeof *t);
    if (!t) return SN_ERR_NOMEM;
    t->dtype = dtype;
    t->shape = *shape;
    size_t bytes = (size_t)sn_shape_numel(shape) * sn_dtype_size(dtype);
    t->data = sn_malloc_aligned(bytes);
    if (!t->data) {
        free(t);
        return SN_ERR_NOMEM;
    }
    memset(t->data, 0, bytes);
    t->owns = 1;
    contiguous_strides(t);
    *out = t;
    return SN_OK;
}

sn_status sn_tensor_from_data(sn_tensor **out, sn_dtype dtype, const sn_shape *shape,
                              const void *data) {
    SN_TRY(sn_tensor_new(out, dtype, shape));
    if (!data) {
        sn_tensor_free(*out);
        *out = NULL;
        return sn_errorf(SN_ERR_INVALID, "sn_tensor_from_data: data is NULL");
    }
    memcpy((*out)->data, data, (size_t)sn_shape_numel(shape) * sn_dtype_size(dtype));
    return SN_OK;
}

sn_status sn_tensor_view(sn_tensor **out, sn_tensor *src, const sn_shape *shape,
                         const int64_t *byte_strides, size_t byte_offset) {
    char b1[128], b2[128];
    if (!out || !src) return sn_errorf(SN_ERR_INVALID, "sn_tensor_view: NULL %s",
                                       out ? "source tensor" : "out");
    *out = NULL;
    SN_TRY(check_shape(shape, "sn_tensor_view"));
    sn_tensor *t = sn_calloc(1, sizeof *t);
    if (!t) return SN_ERR_NOMEM;
    t->dtype = src->dtype;
    t->shape = *shape;
    if (byte_strides) memcpy(t->strides, byte_strides, sizeof(int64_t) * (size_t)shape->ndim);
    else contiguous_strides(t);
    /* The view's extent (lowest and highest byte it touches) must fit inside src's extent. */
    int64_t lo = (int64_t)byte_offset, hi = (int64_t)byte_offset;
    bool empty = sn_shape_numel(shape) == 0;
    for (int i = 0; i < shape->ndim && !empty; i++) {
        int64_t span = (shape->dim[i] - 1) * t->strides[i];
        if (span < 0) lo += span;
        else hi += span;
    }
    int64_t src_hi = 0;
    for (int i = 0; i < src->shape.ndim; i++)
        src_hi += (src->shape.dim[i] - 1) * (src->strides[i] > 0 ? src->strides[i] : 0);
    if (!empty && (lo < 0 || hi + (int64_t)sn_dtype_size(t->dtype) >
                                 src_hi + (int64_t)sn_dtype_size(src->dtype))) {
        free(t);
        return sn_errorf(SN_ERR_SHAPE,
                         "sn_tensor_view: a view of shape %s at byte offset %zu reaches outside "
                         "its source of shape %s",
                         sn_shape_str(shape, b1, sizeof b1), byte_offset,
                         sn_shape_str(&src->shape, b2, sizeof b2));
    }
    t->data = (unsigned char *)src->data + byte_offset;
    t->base = src->base ? src->base : src;
    t->owns = 0;
    *out = t;
    return SN_OK;
}

void sn_tensor_free(sn_tensor *t) {
    if (!t) return;
    if (t->owns) sn_free_aligned(t->data);
    free(t);
}

sn_dtype sn_tensor_dtype(const sn_tensor *t) { return t->dtype; }
const sn_shape *sn_tensor_shape(const sn_tensor *t) { return &t->shape; }
const int64_t *sn_tensor_strides(const sn_tensor *t) { return t->strides; }
int64_t sn_tensor_numel(const sn_tensor *t) { return sn_shape_numel(&t->shape); }
void *sn_tensor_data(sn_tensor *t) { return t->data; }
const void *sn_tensor_cdata(const sn_tensor *t) { return t->data; }
sn_tensor *sn_tensor_base(const sn_tensor *t) { return t->base; }

bool sn_tensor_is_contiguous(const sn_tensor *t) {
    int64_t s = (int64_t)sn_dtype_size(t->dtype);
    for (int i = t->shape.ndim - 1; i >= 0; i--) {
        if (t->shape.dim[i] != 1 && t->strides[i] != s) return false;
        s *= t->shape.dim[i];
    }
    return true;
}

double sn_tensor_get(const sn_tensor *t, int64_t i) {
    int64_t off = 0;
    for (int d = t->shape.ndim - 1; d >= 0; d--) {
        int64_t n = t->shape.dim[d];
        off += (i % n) * t->strides[d];
        i /= n;
    }
    const unsigned char *p = (const unsigned char *)t->data + off;
    switch (t->dtype) {
    case SN_F32: { float v; memcpy(&v, p, 4); return v; }
    case SN_F64: { double v; memcpy(&v, p, 8); return v; }
    case SN_BF16: { uint16_t v; memcpy(&v, p, 2); return sn_bf16_to_f32(v); }
    case SN_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case SN_U8: return *p;
    default: return 0;
    }
}
