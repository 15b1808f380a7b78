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

#endif /* SN_HAVE_DNNL */
#endif
