/* Internal to backend/cpu/: sinter's own bf16 Winograd convolution F(2x2, 3x3)
 * (cpu_conv_wino_bf16.c), which cpu_conv.c takes under mixed bf16 where it applies. */
#ifndef SN_BACKEND_CPU_CONV_WINO_BF16_H
#define SN_BACKEND_CPU_CONV_WINO_BF16_H

#include "backend/kernel.h"

/* True where sn_cpu_conv_wino_applies holds (3x3, stride 1, >= 128 channels, multiples of
 * 16, AVX-512) and the CPU also has AVX512-BF16 (the transform-domain GEMMs run in bf16). */
bool sn_cpu_conv_wino_bf16_applies(const sn_kcall *c);

/* False when SN_CONV_ALGO is `direct` (no Winograd at all) or `wino_f32` (oneDNN's f32
 * Winograd under bf16, the path before this kernel, for A/B runs). */
bool sn_cpu_conv_wino_bf16_enabled(void);

#ifdef SN_HAVE_DNNL
/* One call's state (owned by the caller: sn_cpu_conv_wino_bf16_destroy). */
typedef struct sn_cpu_wino_bf16 sn_cpu_wino_bf16;

/* Builds *w for c (any of the three conv ops; must satisfy sn_cpu_conv_wino_bf16_applies);
 * *scratch_bytes: what a run needs (transformed operands of one batch slice and oneDNN's
 * matmul scratchpad). On failure *w is NULL. */
sn_status sn_cpu_conv_wino_bf16_build(sn_cpu_wino_bf16 **w, const sn_kcall *c,
                                      size_t *scratch_bytes);
/* One execution: in0, in1 -> out in the kernel table's operand order, with scratch of the
 * size build reported. */
sn_status sn_cpu_conv_wino_bf16_run(sn_cpu_wino_bf16 *w, const void *in0, const void *in1,
                                    void *out, void *scratch);
/* Safe on NULL. */
void sn_cpu_conv_wino_bf16_destroy(sn_cpu_wino_bf16 *w);
/* Tests only: the bytes of transformed operands a batch slice may take, for builds after
 * the call (0: the default, 48 MB), so that small cases run in several slices. */
void sn_cpu_conv_wino_bf16_set_slice_bytes(size_t bytes);
#endif

#endif
