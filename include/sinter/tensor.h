/* sinter — dtypes, shapes and tensors.
 *
 * A tensor is a typed view on memory: dtype, shape (up to SN_MAX_DIMS dimensions), byte
 * strides, and the tensor it views (or NULL when it owns its storage). Layout is row-major;
 * images are NHWC. Tensors are opaque; read them through the accessors below. */
#ifndef SINTER_TENSOR_H
#define SINTER_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sinter/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SN_MAX_DIMS 6

typedef enum sn_dtype {
    SN_F32 = 0,
    SN_BF16,
    SN_I32,
    SN_U8,
    SN_F64, /* for gradient checks and reference computations */
    SN_DTYPE_COUNT
} sn_dtype;

typedef struct sn_shape {
    int ndim;
    int64_t dim[SN_MAX_DIMS];
} sn_shape;

size_t sn_dtype_size(sn_dtype t);
const char *sn_dtype_name(sn_dtype t);

/* Shape helpers. sn_shape_make(2, 3, 4) is a 3x4 matrix: the first argument is ndim. */
sn_shape sn_shape_make(int ndim, ...);
int64_t sn_shape_numel(const sn_shape *s);
bool sn_shape_equal(const sn_shape *a, const sn_shape *b);
/* Writes "[200, 28, 28, 1]" into buf (always NUL-terminated); returns buf. */
char *sn_shape_str(const sn_shape *s, char *buf, size_t cap);

/* bf16 <-> f32 (round to nearest even; NaN stays NaN). */
uint16_t sn_f32_to_bf16(float f);
float sn_bf16_to_f32(uint16_t h);

typedef struct sn_tensor sn_tensor;

/* New contiguous tensor, zero-filled. The caller frees it with sn_tensor_free. */
sn_status sn_tensor_new(sn_tensor **out, sn_dtype dtype, const sn_shape *shape);
/* New contiguous tensor holding a copy of `data` (numel * dtype size bytes). */
sn_status sn_tensor_from_data(sn_tensor **out, sn_dtype dtype, const sn_shape *shape,
                              const void *data);
/* A view on `src`'s memory: shape, byte strides (NULL = contiguous) and byte offset. The view
 * keeps no reference: `src` must outlive it. Checked against src's extent. */
sn_status sn_tensor_view(sn_tensor **out, sn_tensor *src, const sn_shape *shape,
                         const int64_t *byte_strides, size_t byte_offset);
void sn_tensor_free(sn_tensor *t);

sn_dtype sn_tensor_dtype(const sn_tensor *t);
const sn_shape *sn_tensor_shape(const sn_tensor *t);
const int64_t *sn_tensor_strides(const sn_tensor *t); /* bytes, one per dimension */
int64_t sn_tensor_numel(const sn_tensor *t);
void *sn_tensor_data(sn_tensor *t);
const void *sn_tensor_cdata(const sn_tensor *t);
bool sn_tensor_is_contiguous(const sn_tensor *t);
sn_tensor *sn_tensor_base(const sn_tensor *t); /* the tensor a view looks at, or NULL */
/* Element i (row-major logical index) as a double, whatever the dtype and strides. */
double sn_tensor_get(const sn_tensor *t, int64_t i);
/* The tensor as TensorFlow prints it, without a newline: "tf.Tensor(\n[[1. 2.]\n [3. 4.]],
 * shape=(2, 2), dtype=float32)" (NumPy's formatting of the values). */
sn_status sn_tensor_print_tf(const sn_tensor *t, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
