/* Internal to backend/cpu/: one oneDNN convolution call run over slices of its batch
 * (cpu_conv_slices.c). Images are independent in the forward and the data gradient; the
 * filter gradient adds the slices' gradients in slice order, so results stay deterministic.
 * A slice's primitive sees only its images, so its scratch (oneDNN's, and the blocked or
 * bf16 copies of the activations that sn_dnnl_op makes) shrinks with it. */
#ifndef SN_BACKEND_CPU_CONV_SLICES_H
#define SN_BACKEND_CPU_CONV_SLICES_H

#ifdef SN_HAVE_DNNL
#include "backend/cpu/dnnl_util.h"
#include "backend/kernel.h"

/* Builds the primitive of call c as if its batch held n images. */
typedef sn_status (*sn_conv_slice_build_fn)(sn_dnnl_op *op, const sn_kcall *c, int64_t n,
                                             size_t *scratch_bytes);

typedef struct sn_conv_slices {
    sn_dnnl_op op[2]; /* op[0]: `slice` images; op[1]: the last, shorter slice (or unused) */
    sn_op kind;
    int64_t n, slice;
    size_t step[3];   /* bytes per image of input 0, input 1, output; 0: not per image */
    size_t acc_off;   /* filter gradient: offset in scratch of a slice's partial dw */
    int64_t dw_numel;
} sn_conv_slices;

/* Builds s for c (a CONV2D, CONV2D_BWD_DATA or CONV2D_BWD_FILTER with a valid geometry) in
 * even slices of at most max_images images each; *scratch_bytes: what a run needs. On
 * failure s holds nothing. */
sn_status sn_conv_slices_build(sn_conv_slices *s, const sn_kcall *c, int64_t max_images,
                               sn_conv_slice_build_fn build, size_t *scratch_bytes);
/* One execution: in0, in1 -> out as sn_dnnl_op_run, with scratch of the size build reported. */
sn_status sn_conv_slices_run(sn_conv_slices *s, const void *in0, const void *in1, void *out,
                             void *scratch);
/* Destroys the primitives (not s itself); safe on a zeroed s. */
void sn_conv_slices_destroy(sn_conv_slices *s);

/* c with its batch set to n images: the activation operands' (and output's) first dimension. */
sn_kcall sn_conv_call_with_batch(const sn_kcall *c, int64_t n);
#endif

#endif
