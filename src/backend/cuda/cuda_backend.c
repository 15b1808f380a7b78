/* Each GPU as an sn_backend (backend/backend_impl.h, issue 13): cudaMalloc'ed zero-filled
 * memory, copies ordered on the context's stream, enter = make the device and its context
 * current on this thread, synchronize = wait for the stream and report a kernel's error flag,
 * and the CUDA kernel table (cuda_table.c; no host fallback). The registry lists these through
 * sn_cuda_device_provider, after the CPU devices.
 *
 * Handles exist for every GPU from the first lookup; a GPU's context (stream, handles,
 * workspace) is made on first use, so listing devices never initialises cuBLASLt or cuDNN.
 *
 * Compiled only once the backend interface exists in the tree (it lands with issue 13): until
 * then this file is empty. Never run on a GPU (docs/cuda.md). */
#if defined(__has_include)
#if __has_include("backend/backend_impl.h")
#define SN_CUDA_BACKEND_IFACE 1
#endif
#endif

#ifdef SN_CUDA_BACKEND_IFACE
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>

#include "backend/backend_impl.h"
#include "backend/cuda/cuda_ctx.h"
#include "backend/cuda/cuda_table.h"
#include "backend/cuda/cuda_util.h"
#include "backend/gpu.h"

enum { MAX_GPUS = 64 };

typedef struct gpu_slot {
    sn_backend b;
    pthread_mutex_t lock;
    sn_cuda_ctx *ctx; /* made on first use, lives for the process */
    long long memory_bytes;
} gpu_slot;

static gpu_slot g_gpus[MAX_GPUS];
static int g_count;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static gpu_slot *slot_of(const sn_backend *b) { return (gpu_slot *)b->ctx; }

/* The GPU's context, made on first use; NULL with the error recorded when that fails. */
static sn_cuda_ctx *ctx_of(sn_backend *b) {
    gpu_slot *s = slot_of(b);
    pthread_mutex_lock(&s->lock);
    if (!s->ctx) {
        sn_cuda_ctx_opts o = sn_cuda_ctx_opts_defaults();
        o.device = b->index;
        if (sn_cuda_ctx_new(&o, &s->ctx) != SN_OK) s->ctx = NULL;
    }
    sn_cuda_ctx *c = s->ctx;
    pthread_mutex_unlock(&s->lock);
    return c;
}

static sn_status need(sn_backend *b, sn_cuda_ctx **c) {
    *c = ctx_of(b);
    return *c ? SN_OK : SN_ERR_BACKEND; /* ctx_of recorded the message */
}

static sn_backend_caps gpu_caps(const sn_backend *b) {
    return (sn_backend_caps){
        .host_visible = false,
        .dtypes = 1u << SN_F32 | 1u << SN_BF16 | 1u << SN_I32,
        .memory_bytes = slot_of(b)->memory_bytes,
        .threads = 0,
    };
}

static void *gpu_alloc(sn_backend *b, size_t bytes) {
    sn_cuda_ctx *c;
    if (need(b, &c) != SN_OK) return NULL;
    void *p = NULL;
    if (sn_cuda_alloc(c, bytes ? bytes : 64, &p) != SN_OK) return NULL;
    /* zero-filled, as backend.h promises; ordered before any later work on the stream */
    if (cudaMemsetAsync(p, 0, bytes ? bytes : 64, (cudaStream_t)sn_cuda_ctx_stream(c)) != cudaSuccess) {
        sn_cuda_free(c, p);
        sn_errorf(SN_ERR_BACKEND, "%s: cudaMemsetAsync of %zu new bytes failed", b->name, bytes);
        return NULL;
    }
    return p;
}

static void gpu_free(sn_backend *b, void *p) {
    sn_cuda_ctx *c = ctx_of(b);
    if (c) sn_cuda_free(c, p);
}

/* The executor's uploads (a step's inputs) go through the pinned double buffer on the copy
 * stream, ordered before the compute stream's next kernels by an event (cuda_ctx.c). Larger
 * copies (the variables, once per run): host memory may be pageable, and cudaMemcpyAsync then
 * returns once the source is staged, so the caller may reuse it at once (the CUDA
 * documentation's "pageable" rule). */
static sn_status gpu_copy_in(sn_backend *b, void *dst, const void *src, size_t bytes) {
    sn_cuda_ctx *c;
    SN_TRY(need(b, &c));
    if (bytes <= sn_cuda_ctx_staging_bytes(c)) return sn_cuda_stage_to_device(c, dst, src, bytes);
    SN_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                            (cudaStream_t)sn_cuda_ctx_stream(c)));
    return SN_OK;
}

static sn_status gpu_copy_out(sn_backend *b, void *dst, const void *src, size_t bytes) {
    sn_cuda_ctx *c;
    SN_TRY(need(b, &c));
    cudaStream_t s = (cudaStream_t)sn_cuda_ctx_stream(c);
    SN_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    SN_CUDA(cudaStreamSynchronize(s));
    return SN_OK;
}

/* Into this GPU from: itself or another GPU (peer copy), or a host-visible device. */
static sn_status gpu_copy(sn_backend *to, void *dst, sn_backend *from, const void *src,
                          size_t bytes) {
    sn_cuda_ctx *c;
    SN_TRY(need(to, &c));
    cudaStream_t s = (cudaStream_t)sn_cuda_ctx_stream(c);
    if (from->iface == to->iface) {
        if (from == to) SN_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
        else {
            SN_TRY(sn_backend_synchronize(from)); /* src complete on its own stream */
            SN_CUDA(cudaMemcpyPeerAsync(dst, to->index, src, from->index, bytes, s));
        }
        return SN_OK;
    }
    if (from->iface->caps(from).host_visible) return gpu_copy_in(to, dst, src, bytes);
    return sn_errorf(SN_ERR_UNSUPPORTED, "copy into %s from %s: no direct path", to->name,
                     from->name);
}

/* The token is unused: leaving clears the thread's current context. */
static int gpu_enter(sn_backend *b) {
    sn_cuda_ctx *c = ctx_of(b);
    if (c) {
        (void)cudaSetDevice(b->index);
        sn_cuda_make_current(c);
    }
    return 0;
}

static void gpu_leave(sn_backend *b, int token) {
    (void)b, (void)token;
    sn_cuda_make_current(NULL);
}

static void *gpu_stream(sn_backend *b) {
    sn_cuda_ctx *c = ctx_of(b);
    return c ? (void *)sn_cuda_ctx_stream(c) : NULL;
}

static sn_status gpu_synchronize(sn_backend *b) {
    sn_cuda_ctx *c;
    SN_TRY(need(b, &c));
    return sn_cuda_ctx_sync(c);
}

static const sn_kernel_table *gpu_kernels(sn_backend *b) {
    (void)b;
    return sn_cuda_kernels();
}

/* Recorded steps: a CUDA graph of what one step issues on the compute stream (cuda_graph.c).
 * The staged input copies of a step run before its replay, outside the recording. */
static sn_status gpu_capture_begin(sn_backend *b) {
    sn_cuda_ctx *c;
    SN_TRY(need(b, &c));
    return sn_cuda_capture_begin(c);
}

static sn_status gpu_capture_end(sn_backend *b, void **graph) {
    sn_cuda_ctx *c;
    SN_TRY(need(b, &c));
    return sn_cuda_capture_end(c, (sn_cuda_graph **)graph);
}

static sn_status gpu_replay(sn_backend *b, void *graph) {
    (void)b;
    return sn_cuda_graph_launch(graph, 1);
}

static void gpu_graph_free(sn_backend *b, void *graph) {
    (void)b;
    sn_cuda_graph_free(graph);
}

static const sn_backend_iface gpu_iface = {
    .type = "GPU",
    .caps = gpu_caps,
    .alloc = gpu_alloc,
    .free = gpu_free,
    .copy_to_device = gpu_copy_in,
    .copy_to_host = gpu_copy_out,
    .copy = gpu_copy,
    .enter = gpu_enter,
    .leave = gpu_leave,
    .stream = gpu_stream,
    .synchronize = gpu_synchronize,
    .kernels = gpu_kernels,
    .capture_begin = gpu_capture_begin,
    .capture_end = gpu_capture_end,
    .replay = gpu_replay,
    .graph_free = gpu_graph_free,
};

static void gpus_init(void) {
    int n = sn_gpu_count();
    g_count = n < MAX_GPUS ? n : MAX_GPUS;
    for (int i = 0; i < g_count; i++) {
        gpu_slot *s = &g_gpus[i];
        pthread_mutex_init(&s->lock, NULL);
        sn_gpu_info info;
        if (sn_gpu_get(i, &info) == SN_OK) s->memory_bytes = info.memory_bytes;
        sn_backend_init(&s->b, &gpu_iface, SN_DEVICE_GPU, i, s);
    }
}

static int gpu_count(void) {
    pthread_once(&g_once, gpus_init);
    return g_count;
}

static sn_backend *gpu_backend(int i) {
    pthread_once(&g_once, gpus_init);
    return i >= 0 && i < g_count ? &g_gpus[i].b : NULL;
}

const sn_device_provider sn_cuda_device_provider = {
    .kind = SN_DEVICE_GPU,
    .count = gpu_count,
    .backend = gpu_backend,
};

#else
/* ISO C forbids an empty translation unit. */
typedef int sn_cuda_backend_not_yet;
#endif
