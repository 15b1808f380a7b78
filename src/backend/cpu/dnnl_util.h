/* oneDNN glue for the CPU kernels: a check macro for every oneDNN call, and the one CPU engine
 * and stream that every primitive runs on.
 *
 * oneDNN (Debian's build) runs on OpenMP, so its primitives use the same libgomp team as our
 * own loops and OpenBLAS; the stream is in-order and executes synchronously on the calling
 * thread's team. Only files under backend/cpu/ include this. */
#ifndef SN_BACKEND_CPU_DNNL_UTIL_H
#define SN_BACKEND_CPU_DNNL_UTIL_H

#ifdef SN_HAVE_DNNL

#include <dnnl.h>

#include "backend/op_desc.h"
#include "core/core.h"

/* Turns a failing oneDNN status into SN_ERR_BACKEND (or SN_ERR_NOMEM / SN_ERR_UNSUPPORTED)
 * with the call's text, file and line, and returns it from the enclosing function. */
#define SN_DNNL_CHECK(expr)                                                                    \
    do {                                                                                       \
        dnnl_status_t sn_dnnl_s_ = (expr);                                                     \
        if (sn_dnnl_s_ != dnnl_success)                                                        \
            return sn_dnnl_error(sn_dnnl_s_, #expr, __FILE__, __LINE__);                       \
    } while (0)

/* Records the message for a failed oneDNN call and returns the matching status. */
sn_status sn_dnnl_error(dnnl_status_t s, const char *call, const char *file, int line);

/* The process-wide CPU engine and stream, created on first use (thread-safe). On failure the
 * status says why and *out is NULL. Never destroyed: they live as long as the process. */
sn_status sn_dnnl_engine(dnnl_engine_t *out);
sn_status sn_dnnl_stream(dnnl_stream_t *out);

/* A primitive attribute with the scratchpad mode set to user, so that every primitive takes
 * its scratch memory from the plan's arena rather than allocating during a run. The caller
 * destroys it with dnnl_primitive_attr_destroy. */
sn_status sn_dnnl_attr_user_scratchpad(dnnl_primitive_attr_t *out);

/* The name of the implementation oneDNN chose for a primitive descriptor ("brg:avx512_core",
 * "gemm:jit", ...), for profiles and docs; "?" when unknown. */
const char *sn_dnnl_impl_name(const_dnnl_primitive_desc_t pd);

/* One oneDNN primitive with two inputs and one output on our plain f32 buffers. Where the
 * primitive wants another layout or data type for an operand (blocked weights, bfloat16
 * operands under mixed precision), a reorder converts it inside the plan's scratch memory at
 * run time: the inputs before the primitive, the output after it. Built once at plan time; a
 * run only sets data handles and executes, so nothing is allocated on the step path.
 *
 * Scratch layout: [0, pad) is shared by the primitive's scratchpad and the reorders' (they
 * run one after another), the converted operands follow it, each 64-byte aligned. */
typedef struct sn_dnnl_op {
    dnnl_primitive_t prim;
    int arg[3];                      /* DNNL_ARG_* of input 0, input 1 and the output */
    dnnl_memory_t user[3];           /* our buffers; data handles set per run */
    dnnl_memory_t inner[3];          /* the operand as the primitive takes it; NULL = user */
    dnnl_primitive_t reorder[3];     /* user -> inner (inputs), inner -> user (output) */
    dnnl_memory_t reorder_scratch[3];
    dnnl_memory_t scratch;           /* the primitive's scratchpad; NULL when none */
    size_t inner_off[3];             /* byte offset of inner[j] in the scratch memory */
    dnnl_memory_t bias;              /* a convolution's f32 bias [F] (sn_dnnl_op_add_bias) */
} sn_dnnl_op;

/* Builds op from pd (which the caller still owns and destroys) for our operands described by
 * user[0..2] (input 0, input 1, output), bound to the primitive's arguments arg[0..2]; pd must
 * have been created with sn_dnnl_attr_user_scratchpad. *scratch_bytes: what a run needs. On
 * failure everything built is destroyed and op is zeroed. */
sn_status sn_dnnl_op_init(sn_dnnl_op *op, const_dnnl_primitive_desc_t pd, const int arg[3],
                          const dnnl_memory_desc_t *const user[3], size_t *scratch_bytes);
/* sn_dnnl_op_init for a convolution primitive of op, with the operands in the order the
 * kernel table gives them: conv2d (x, w) -> y; conv2d_bwd_data (dy, w) -> dx;
 * conv2d_bwd_filter (x, dy) -> dw. xu, wu, yu describe our buffers of x, w and y (or dy, dx,
 * dw). Shared by the direct and the Winograd convolution builds. */
sn_status sn_dnnl_conv_op_init(sn_dnnl_op *op, const_dnnl_primitive_desc_t pd, sn_op kind,
                               const dnnl_memory_desc_t *xu, const dnnl_memory_desc_t *wu,
                               const dnnl_memory_desc_t *yu, size_t *scratch_bytes);
/* One execution: in0, in1 -> out, with scratch of the size init reported. */
sn_status sn_dnnl_op_run(sn_dnnl_op *op, const void *in0, const void *in1, void *out,
                         void *scratch);
/* Gives a built convolution forward op its bias operand: f32 [f], plain, as the primitive
 * descriptor was made with (DNNL_ARG_BIAS). */
sn_status sn_dnnl_op_add_bias(sn_dnnl_op *op, int64_t f);
/* sn_dnnl_op_run with the bias of sn_dnnl_op_add_bias. */
sn_status sn_dnnl_op_run_bias(sn_dnnl_op *op, const void *in0, const void *in1, const void *bias,
                              void *out, void *scratch);
/* Destroys what init built (safe on a zeroed op) and zeroes it. */
void sn_dnnl_op_destroy(sn_dnnl_op *op);

#endif /* SN_HAVE_DNNL */
#endif
