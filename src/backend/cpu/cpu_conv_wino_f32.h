/* Internal to backend/cpu/: sinter's own f32 Winograd convolution F(2x2, 3x3) on AVX2 + FMA
 * (cpu_conv_wino_f32.c), which cpu_conv.c takes for the wide 3x3 stride-1 layers on CPUs
 * where oneDNN 2.6 has no Winograd (no AVX-512). */
#ifndef SN_BACKEND_CPU_CONV_WINO_F32_H
#define SN_BACKEND_CPU_CONV_WINO_F32_H

#include "backend/kernel.h"

/* True for an f32 NHWC 3x3 stride-1 convolution (any of the three conv ops) with >= 128
 * input and output channels, multiples of 8, on a CPU with AVX2 and FMA but without AVX-512
 * (there oneDNN's Winograd runs, cpu_conv_wino.h). */
bool sn_cpu_conv_wino_f32_applies(const sn_kcall *c);

/* One call's state (owned by the caller: sn_cpu_conv_wino_f32_destroy). */
typedef struct sn_cpu_wino_f32 sn_cpu_wino_f32;

/* Builds *w for c (must satisfy sn_cpu_conv_wino_f32_applies); *scratch_bytes: what a run
 * needs (transformed operands of one batch slice). On failure *w is NULL. */
sn_status sn_cpu_conv_wino_f32_build(sn_cpu_wino_f32 **w, const sn_kcall *c,
                                     size_t *scratch_bytes);
/* One execution: in0, in1 -> out in the kernel table's operand order, with scratch of the
 * size build reported. */
sn_status sn_cpu_conv_wino_f32_run(sn_cpu_wino_f32 *w, const void *in0, const void *in1,
                                   void *out, void *scratch);
/* Safe on NULL. */
void sn_cpu_conv_wino_f32_destroy(sn_cpu_wino_f32 *w);
/* Tests only: the bytes of transformed operands a batch slice may take, for builds after the
 * call (0: the default), so that small cases run in several slices. */
void sn_cpu_conv_wino_f32_set_slice_bytes(size_t bytes);
/* Tests only: let the kernel apply on AVX-512 CPUs as well (they run AVX2), so that its
 * checks run on every CPU the CI meets. The default kernel still takes oneDNN's Winograd
 * there first. */
void sn_cpu_conv_wino_f32_set_on_avx512(bool on);

#endif
