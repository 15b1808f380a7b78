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

#endif
