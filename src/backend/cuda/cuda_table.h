/* The CUDA backend's kernel table (cuda_table.c): rows over kernel calls whose buffers are
 * device pointers, run on the thread's current CUDA context. Never run on a GPU yet. */
#ifndef SN_BACKEND_CUDA_TABLE_H
#define SN_BACKEND_CUDA_TABLE_H

#include "backend/cuda/cuda_ctx.h"
#include "backend/kernel.h"

/* The context the rows of this thread run on (CUDA's own "current device" habit); the
 * backend sets it before a plan runs. Not owned. */
void sn_cuda_make_current(sn_cuda_ctx *c);
sn_cuda_ctx *sn_cuda_current(void);

const sn_kernel_table *sn_cuda_kernels(void);
/* The row for c, or NULL when no CUDA row supports it: there is no host fallback on a GPU. */
const sn_kernel *sn_cuda_kernel_select(const sn_kcall *c);

#endif
