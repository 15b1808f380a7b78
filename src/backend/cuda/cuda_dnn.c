/* Convolution (forward, backward-data, backward-filter) and pooling through cuDNN 9's
 * descriptor API, NHWC f32. Keras kernels are HWIO [KH, KW, C, F]; cuDNN's NHWC filter layout
 * is KRSC [F, KH, KW, C], so the filter is transposed into a scratch buffer of the plan (and dw
 * back) by a small kernel: filters are tiny next to activations.
 *
 * Algorithms come from cuDNN's heuristics (the *_v7 queries, no timing runs), taking the first
 * deterministic one that fits the workspace, so a run repeats bit for bit. cuDNN pads both sides
 * alike: an asymmetric "same" padding (even kernels, some strides) is SN_ERR_UNSUPPORTED here.
 *
 * cuDNN 9 keeps these calls (marked deprecated in favour of its graph API, warnings off by
 * default); moving to the graph API is left for when a GPU can check it (docs/cuda.md). */
#include <cudnn.h>
#include <stdlib.h>

#include "backend/cuda/cuda_ctx.h"
#include "backend/cuda/cuda_util.h"

struct sn_cuda_conv {
    sn_cuda_ctx *ctx;
    sn_cuda_conv_desc d;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    float *krsc; /* the filter in cuDNN's layout (device, owned) */
};

void sn_cuda_conv_free(sn_cuda_conv *p) {
    if (!p) return;
    if (p->krsc) sn_cuda_free(p->ctx, p->krsc);
    if (p->conv) sn_cu.cudnnDestroyConvolutionDescriptor(p->conv);
    if (p->w) sn_cu.cudnnDestroyFilterDescriptor(p->w);
    if (p->y) sn_cu.cudnnDestroyTensorDescriptor(p->y);
    if (p->x) sn_cu.cudnnDestroyTensorDescriptor(p->x);
    free(p);
}

static int as_int(int64_t v) { return v > 0x7fffffff ? -1 : (int)v; }

static sn_status conv_init(sn_cuda_conv *p) {
    const sn_cuda_conv_desc *d = &p->d;
    cudnnHandle_t h = (cudnnHandle_t)sn_cuda_ctx_dnn(p->ctx);
    size_t ws = 0;
    (void)sn_cuda_ctx_workspace(p->ctx, &ws);
    SN_CUDNN(sn_cu.cudnnCreateTensorDescriptor(&p->x));
    SN_CUDNN(sn_cu.cudnnCreateTensorDescriptor(&p->y));
    SN_CUDNN(sn_cu.cudnnCreateFilterDescriptor(&p->w));
    SN_CUDNN(sn_cu.cudnnCreateConvolutionDescriptor(&p->conv));
    SN_CUDNN(sn_cu.cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT,
                                              as_int(d->n), as_int(d->c), as_int(d->h),
                                              as_int(d->w)));
    SN_CUDNN(sn_cu.cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT,
                                              as_int(d->n), as_int(d->f), as_int(d->oh),
                                              as_int(d->ow)));
    SN_CUDNN(sn_cu.cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC,
                                              as_int(d->f), as_int(d->c), as_int(d->kh),
                                              as_int(d->kw)));
    SN_CUDNN(sn_cu.cudnnSetConvolution2dDescriptor(p->conv, d->pad_top, d->pad_left, d->stride_h,
                                                   d->stride_w, 1, 1, CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT));
    SN_CUDNN(sn_cu.cudnnSetConvolutionMathType(p->conv, sn_cuda_ctx_tf32(p->ctx) && !d->fp32_strict
                                                            ? CUDNN_TENSOR_OP_MATH
                                                            : CUDNN_FMA_MATH));
    /* cuDNN's own output size must be the graph's: otherwise the padding was not symmetric. */
    int on, oc, oh, ow;
    SN_CUDNN(sn_cu.cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &on, &oc, &oh, &ow));
    if (oh != d->oh || ow != d->ow)
        return sn_errorf(SN_ERR_UNSUPPORTED, "GPU conv2d: output %lldx%lld with padding top=%d "
                         "left=%d is asymmetric; cuDNN pads both sides alike (gives %dx%d)",
                         (long long)d->oh, (long long)d->ow, d->pad_top, d->pad_left, oh, ow);

    enum { MAXA = 16 };
    int got = 0;
    cudnnConvolutionFwdAlgoPerf_t fa[MAXA];
    SN_CUDNN(
        sn_cu.cudnnGetConvolutionForwardAlgorithm_v7(h, p->x, p->w, p->conv, p->y, MAXA, &got, fa));
    int pick = -1;
    for (int i = 0; i < got && pick < 0; i++)
        if (fa[i].status == CUDNN_STATUS_SUCCESS && fa[i].memory <= ws &&
            fa[i].determinism == CUDNN_DETERMINISTIC)
            pick = i;
    if (pick < 0) return sn_errorf(SN_ERR_UNSUPPORTED, "GPU conv2d: cuDNN offers no deterministic "
                                   "forward algorithm within a %zu-byte workspace", ws);
    p->fwd = fa[pick].algo;

    cudnnConvolutionBwdDataAlgoPerf_t da[MAXA];
    SN_CUDNN(sn_cu.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p->w, p->y, p->conv, p->x, MAXA,
                                                               &got, da));
    pick = -1;
    for (int i = 0; i < got && pick < 0; i++)
        if (da[i].status == CUDNN_STATUS_SUCCESS && da[i].memory <= ws &&
            da[i].determinism == CUDNN_DETERMINISTIC)
            pick = i;
    if (pick < 0) return sn_errorf(SN_ERR_UNSUPPORTED, "GPU conv2d: cuDNN offers no deterministic "
                                   "backward-data algorithm within a %zu-byte workspace", ws);
    p->bwd_data = da[pick].algo;

    cudnnConvolutionBwdFilterAlgoPerf_t wa[MAXA];
    SN_CUDNN(sn_cu.cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p->x, p->y, p->conv, p->w, MAXA,
                                                                 &got, wa));
    pick = -1;
    for (int i = 0; i < got && pick < 0; i++)
        if (wa[i].status == CUDNN_STATUS_SUCCESS && wa[i].memory <= ws &&
            wa[i].determinism == CUDNN_DETERMINISTIC)
            pick = i;
    if (pick < 0) return sn_errorf(SN_ERR_UNSUPPORTED, "GPU conv2d: cuDNN offers no deterministic "
                                   "backward-filter algorithm within a %zu-byte workspace", ws);
    p->bwd_filter = wa[pick].algo;

    return sn_cuda_alloc(p->ctx, (size_t)(d->kh * d->kw * d->c * d->f) * sizeof(float),
                         (void **)&p->krsc);
}

sn_status sn_cuda_conv_new(sn_cuda_ctx *c, const sn_cuda_conv_desc *d, sn_cuda_conv **out) {
    *out = NULL;
    if (d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0 || d->kh <= 0 || d->kw <= 0 ||
        d->f <= 0 || d->oh <= 0 || d->ow <= 0 || d->stride_h <= 0 || d->stride_w <= 0)
        return sn_errorf(SN_ERR_SHAPE, "GPU conv2d: x [%lld, %lld, %lld, %lld], w [%lld, %lld, "
                         "%lld, %lld], y [.., %lld, %lld, ..]: every size must be positive",
                         (long long)d->n, (long long)d->h, (long long)d->w, (long long)d->c,
                         (long long)d->kh, (long long)d->kw, (long long)d->c, (long long)d->f,
                         (long long)d->oh, (long long)d->ow);
    sn_cuda_conv *p = calloc(1, sizeof *p);
    if (!p) return sn_errorf(SN_ERR_NOMEM, "sn_cuda_conv_new: out of host memory");
    p->ctx = c;
    p->d = *d;
    sn_status st = conv_init(p);
    if (st != SN_OK) {
        sn_cuda_conv_free(p);
        return st;
    }
    *out = p;
    return SN_OK;
}

sn_status sn_cuda_conv_fwd(sn_cuda_conv *p, const float *x, const float *w_hwio, float *y) {
    const sn_cuda_conv_desc *d = &p->d;
    SN_TRY(sn_cuda_hwio_to_krsc(sn_cuda_ctx_stream(p->ctx), d->kh, d->kw, d->c, d->f, w_hwio, p->krsc));
    const float one = 1, zero = 0;
    size_t ws = 0;
    void *w = sn_cuda_ctx_workspace(p->ctx, &ws);
    SN_CUDNN(sn_cu.cudnnConvolutionForward((cudnnHandle_t)sn_cuda_ctx_dnn(p->ctx), &one, p->x, x,
                                           p->w, p->krsc, p->conv, p->fwd, w, ws, &zero, p->y, y));
    return SN_OK;
}

sn_status sn_cuda_conv_bwd_data(sn_cuda_conv *p, const float *dy, const float *w_hwio, float *dx) {
    const sn_cuda_conv_desc *d = &p->d;
    SN_TRY(sn_cuda_hwio_to_krsc(sn_cuda_ctx_stream(p->ctx), d->kh, d->kw, d->c, d->f, w_hwio, p->krsc));
    const float one = 1, zero = 0;
    size_t ws = 0;
    void *w = sn_cuda_ctx_workspace(p->ctx, &ws);
    SN_CUDNN(sn_cu.cudnnConvolutionBackwardData((cudnnHandle_t)sn_cuda_ctx_dnn(p->ctx), &one, p->w,
                                                p->krsc, p->y, dy, p->conv, p->bwd_data, w, ws,
                                                &zero, p->x, dx));
    return SN_OK;
}

sn_status sn_cuda_conv_bwd_filter(sn_cuda_conv *p, const float *x, const float *dy,
                                  float *dw_hwio) {
    const sn_cuda_conv_desc *d = &p->d;
    const float one = 1, zero = 0;
    size_t ws = 0;
    void *w = sn_cuda_ctx_workspace(p->ctx, &ws);
    SN_CUDNN(sn_cu.cudnnConvolutionBackwardFilter((cudnnHandle_t)sn_cuda_ctx_dnn(p->ctx), &one,
                                                  p->x, x, p->y, dy, p->conv, p->bwd_filter, w, ws,
                                                  &zero, p->w, p->krsc));
    return sn_cuda_krsc_to_hwio(sn_cuda_ctx_stream(p->ctx), d->kh, d->kw, d->c, d->f, p->krsc,
                                dw_hwio);
}

/* ---- pooling ------------------------------------------------------------------------------ */

struct sn_cuda_pool {
    sn_cuda_ctx *ctx;
    sn_cuda_pool_desc d;
    cudnnTensorDescriptor_t x, y;
    cudnnPoolingDescriptor_t pool;
    float *y_scratch; /* max pooling's recomputed forward output, for the backward pass */
};

void sn_cuda_pool_free(sn_cuda_pool *p) {
    if (!p) return;
    if (p->y_scratch) sn_cuda_free(p->ctx, p->y_scratch);
    if (p->pool) sn_cu.cudnnDestroyPoolingDescriptor(p->pool);
    if (p->y) sn_cu.cudnnDestroyTensorDescriptor(p->y);
    if (p->x) sn_cu.cudnnDestroyTensorDescriptor(p->x);
    free(p);
}

static sn_status pool_init(sn_cuda_pool *p) {
    const sn_cuda_pool_desc *d = &p->d;
    SN_CUDNN(sn_cu.cudnnCreateTensorDescriptor(&p->x));
    SN_CUDNN(sn_cu.cudnnCreateTensorDescriptor(&p->y));
    SN_CUDNN(sn_cu.cudnnCreatePoolingDescriptor(&p->pool));
    SN_CUDNN(sn_cu.cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT,
                                              as_int(d->n), as_int(d->c), as_int(d->h),
                                              as_int(d->w)));
    SN_CUDNN(sn_cu.cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT,
                                              as_int(d->n), as_int(d->c), as_int(d->oh),
                                              as_int(d->ow)));
    /* Keras averages over the valid elements of a padded window. Deterministic max: the
     * gradient goes to one position per window, as on the CPU; a NaN is the maximum, as on
     * the CPU (TensorFlow and PyTorch propagate it). */
    cudnnPoolingMode_t mode = d->max ? CUDNN_POOLING_MAX_DETERMINISTIC
                                     : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    SN_CUDNN(sn_cu.cudnnSetPooling2dDescriptor(p->pool, mode, CUDNN_PROPAGATE_NAN, d->pool_h,
                                               d->pool_w, d->pad_top, d->pad_left, d->stride_h,
                                               d->stride_w));
    int on, oc, oh, ow;
    SN_CUDNN(sn_cu.cudnnGetPooling2dForwardOutputDim(p->pool, p->x, &on, &oc, &oh, &ow));
    if (oh != d->oh || ow != d->ow)
        return sn_errorf(SN_ERR_UNSUPPORTED, "GPU pooling: output %lldx%lld with padding top=%d "
                         "left=%d is asymmetric; cuDNN pads both sides alike (gives %dx%d)",
                         (long long)d->oh, (long long)d->ow, d->pad_top, d->pad_left, oh, ow);
    if (d->max)
        SN_TRY(sn_cuda_alloc(p->ctx, (size_t)(d->n * d->oh * d->ow * d->c) * sizeof(float),
                             (void **)&p->y_scratch));
    return SN_OK;
}

sn_status sn_cuda_pool_new(sn_cuda_ctx *c, const sn_cuda_pool_desc *d, sn_cuda_pool **out) {
    *out = NULL;
    if (d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0 || d->oh <= 0 || d->ow <= 0 ||
        d->pool_h <= 0 || d->pool_w <= 0 || d->stride_h <= 0 || d->stride_w <= 0)
        return sn_errorf(SN_ERR_SHAPE, "GPU pooling: x [%lld, %lld, %lld, %lld], window %dx%d, "
                         "stride %dx%d: every size must be positive", (long long)d->n,
                         (long long)d->h, (long long)d->w, (long long)d->c, d->pool_h, d->pool_w,
                         d->stride_h, d->stride_w);
    sn_cuda_pool *p = calloc(1, sizeof *p);
    if (!p) return sn_errorf(SN_ERR_NOMEM, "sn_cuda_pool_new: out of host memory");
    p->ctx = c;
    p->d = *d;
    sn_status st = pool_init(p);
    if (st != SN_OK) {
        sn_cuda_pool_free(p);
        return st;
    }
    *out = p;
    return SN_OK;
}

sn_status sn_cuda_pool_fwd(sn_cuda_pool *p, const float *x, float *y) {
    const float one = 1, zero = 0;
    SN_CUDNN(sn_cu.cudnnPoolingForward((cudnnHandle_t)sn_cuda_ctx_dnn(p->ctx), p->pool, &one, p->x,
                                       x, &zero, p->y, y));
    return SN_OK;
}

sn_status sn_cuda_pool_bwd(sn_cuda_pool *p, const float *x, const float *dy, float *dx) {
    const float one = 1, zero = 0;
    const float *y = dy; /* read by max pooling only; average pooling ignores it */
    if (p->d.max) {
        SN_TRY(sn_cuda_pool_fwd(p, x, p->y_scratch));
        y = p->y_scratch;
    }
    SN_CUDNN(sn_cu.cudnnPoolingBackward((cudnnHandle_t)sn_cuda_ctx_dnn(p->ctx), p->pool, &one, p->y,
                                        y, p->y, dy, p->x, x, &zero, p->x, dx));
    return SN_OK;
}
