/* steps_per_execution on a GPU: the work a step issues on the context's stream is captured
 * once as a CUDA graph and launched N times, so a host call costs one launch per step instead
 * of one per kernel (the TPU trick of the guide). Inputs must already be staged in the device
 * buffers the captured kernels read; a kernel that reads the step counter (dropout) captures
 * its value, so the executor re-captures, or keeps the counter in device memory, for those.
 * Never run on a GPU (docs/cuda.md). */
#include <stdlib.h>

#include "backend/cuda/cuda_ctx.h"
#include "backend/cuda/cuda_util.h"

struct sn_cuda_graph {
    sn_cuda_ctx *ctx;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

sn_status sn_cuda_capture_begin(sn_cuda_ctx *c) {
    SN_CUDA(cudaStreamBeginCapture((cudaStream_t)sn_cuda_ctx_stream(c),
                                   cudaStreamCaptureModeThreadLocal));
    return SN_OK;
}

void sn_cuda_graph_free(sn_cuda_graph *g) {
    if (!g) return;
    if (g->exec) cudaGraphExecDestroy(g->exec);
    if (g->graph) cudaGraphDestroy(g->graph);
    free(g);
}

sn_status sn_cuda_capture_end(sn_cuda_ctx *c, sn_cuda_graph **out) {
    *out = NULL;
    sn_cuda_graph *g = calloc(1, sizeof *g);
    cudaGraph_t graph = NULL;
    /* end the capture even when out of host memory, so the stream is usable again */
    cudaError_t e = cudaStreamEndCapture((cudaStream_t)sn_cuda_ctx_stream(c), &graph);
    if (!g) {
        if (graph) cudaGraphDestroy(graph);
        return sn_errorf(SN_ERR_NOMEM, "sn_cuda_capture_end: out of host memory");
    }
    g->ctx = c;
    g->graph = graph;
    if (e != cudaSuccess) {
        sn_cuda_graph_free(g);
        return sn_cuda_fail("CUDA", "cudaStreamEndCapture", cudaGetErrorString(e), (int)e,
                            __FILE__, __LINE__);
    }
    e = cudaGraphInstantiate(&g->exec, g->graph, 0);
    if (e != cudaSuccess) {
        sn_cuda_graph_free(g);
        return sn_cuda_fail("CUDA", "cudaGraphInstantiate", cudaGetErrorString(e), (int)e,
                            __FILE__, __LINE__);
    }
    *out = g;
    return SN_OK;
}

sn_status sn_cuda_graph_launch(sn_cuda_graph *g, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        SN_CUDA(cudaGraphLaunch(g->exec, (cudaStream_t)sn_cuda_ctx_stream(g->ctx)));
    return SN_OK;
}
