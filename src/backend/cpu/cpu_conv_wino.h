/* Internal to backend/cpu/: the Winograd convolution (cpu_conv_wino.c), which cpu_conv.c's
 * oneDNN convolution kernel takes where it applies and is enabled. */
#ifndef SN_BACKEND_CPU_CONV_WINO_H
#define SN_BACKEND_CPU_CONV_WINO_H

#include "backend/kernel.h"

/* True for an f32 NHWC 3x3 stride-1 convolution (any of the three conv ops) with at least 32
 * input and output channels, multiples of 16, on a CPU with AVX-512: where oneDNN's Winograd
 * runs (the "dnnl_wino" kernel takes any of them). */
bool sn_cpu_conv_wino_applies(const sn_kcall *c);
/* Whether the default convolution kernel takes it (cpu_conv.c): where it applies, except
 * the data gradient of a narrow layer (fewer than 128 input channels), where Winograd was
 * measured slower than direct. */
bool sn_cpu_conv_wino_pays(const sn_kcall *c);
/* Whether a layer that applies is also one of the wide ones (>= 128 channels each way), the
 * only ones mixed bf16 runs as a Winograd. */
bool sn_cpu_conv_wino_wide(const sn_kcall *c);

/* False when the environment says SN_CONV_ALGO=direct (for A/B runs); true otherwise. */
bool sn_cpu_conv_wino_enabled(void);

/* Under mixed bf16: whether f32 Winograd is taken over a bf16 direct convolution. True on
 * CPUs without AMX: there oneDNN 2.6's bf16 convolution ran at ~0.6x its f32 direct one
 * (docs/kernels.md, Intel without AMX), so f32 Winograd is ~3x faster and more exact. With
 * AMX, bf16 direct stays. Not measured on AMD Zen 4 (bf16 at twice f32's rate, which would
 * make the two about even). */
bool sn_cpu_conv_wino_over_bf16(void);

#ifdef SN_HAVE_DNNL
#include "backend/cpu/dnnl_util.h"
/* A Winograd convolution for one call, run over slices of the batch (owned by the caller:
 * sn_cpu_conv_wino_destroy). */
typedef struct sn_cpu_wino sn_cpu_wino;

/* Builds *w as a Winograd convolution for c (which must satisfy sn_cpu_conv_wino_applies),
 * with our NHWC/HWIO buffers reordered to and from the blocked layouts at each run.
 * SN_ERR_UNSUPPORTED when this oneDNN has no Winograd kernel for it on this CPU (*w is then
 * NULL and the caller builds a direct one); *scratch_bytes: what a run needs. */
sn_status sn_cpu_conv_wino_build(sn_cpu_wino **w, const sn_kcall *c, size_t *scratch_bytes);
/* One execution: in0, in1 -> out as sn_dnnl_op_run, with scratch of the size build reported. */
sn_status sn_cpu_conv_wino_run(sn_cpu_wino *w, const void *in0, const void *in1, void *out,
                               void *scratch);
/* Safe on NULL. */
void sn_cpu_conv_wino_destroy(sn_cpu_wino *w);
#endif

#endif
