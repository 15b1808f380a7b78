/* Internal to the fused CPU kernels (cpu_conv_fused.c, cpu_pool_fused.c): the first-layer
 * convolution of one image, shared so that the backward pattern that recomputes the relu
 * output gets the forward's values bit for bit (the same function, the same ISA variant). */
#ifndef SN_BACKEND_CPU_FUSED_H
#define SN_BACKEND_CPU_FUSED_H

#include "backend/cpu/cpu_blas.h"

/* One image: y[pixel][f] = relu(sum_k tap_k * w[k][f] + b[f]); x [H, W, 1], w [KH, KW, 1, F],
 * b [F], y [OH, OW, F]; g->c == 1 and g->f a multiple of 16, at most 32. */
typedef void (*sn_conv1_image_fn)(const sn_conv_geom *g, const float *x, const float *w,
                                  const float *b, float *y);
/* The variant this CPU runs (SN_CPU_ISA may narrow it; read at every call). */
sn_conv1_image_fn sn_cpu_conv1_image(void);

/* Pool window o along one axis (size k, stride s, leading pad p) clipped to an axis of n cells:
 * the cells [*lo, *hi); empty (*hi <= *lo) for a window wholly in the padding. The one
 * clipping rule of every max-pool here (cpu_conv_fused.c's pools, cpu_pool_fused.c), so that
 * they all pick their maxima from the same cells as cpu_pool.c. */
static inline void sn_pool_span(int64_t o, int64_t s, int64_t p, int64_t k, int64_t n,
                                int64_t *lo, int64_t *hi) {
    const int64_t i = o * s - p;
    *lo = i < 0 ? 0 : i;
    *hi = i + k < n ? i + k : n;
}

#endif
