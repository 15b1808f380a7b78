// sinter's own CUDA kernels: elementwise, activations and their gradients, casts, dropout,
// reductions, softmax family and sparse cross-entropy, fused optimizer updates. The C
// launchers are declared in cuda_kernels.h (which says what each computes); this file holds
// the device code. f32 in registers; transcendental functions are CUDA's accurate ones (no
// --use_fast_math), so results stay within a few ulp of the double-precision reference.
//
// Grid-stride loops everywhere: one launch shape serves every size, 64-bit indices.
// None of this has run on a GPU yet (docs/cuda.md).
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#include "backend/cuda/cuda_kernels.h"
#include "core/philox.h"

extern "C" sn_status sn_cuda_fail(const char *lib, const char *call, const char *msg, int code,
                                  const char *file, int line);

namespace {

constexpr int kThreads = 256;

// Blocks for n elements: enough to fill an H200 (132 SMs x 16 blocks of 256) and no more; the
// grid-stride loop covers the rest.
inline unsigned blocks_for(int64_t n) {
    int64_t b = (n + kThreads - 1) / kThreads;
    if (b < 1) b = 1;
    if (b > 132 * 16) b = 132 * 16;
    return (unsigned)b;
}

inline sn_status launched(const char *what, int line) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return SN_OK;
    return sn_cuda_fail("CUDA", what, cudaGetErrorString(e), (int)e, __FILE__, line);
}
#define LAUNCHED(what) launched(what, __LINE__)

#define GRID_STRIDE(i, n)                                                                      \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                  \
         i += (int64_t)gridDim.x * blockDim.x)

__device__ inline float sigmoidf_(float x) {
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}
__device__ inline float ncdf(float x) { return 0.5f * erfcf(-x * 0.70710678118654752440f); }

// ---- binary ------------------------------------------------------------------------------

__device__ inline float bin(sn_cuda_binary op, float a, float b) {
    switch (op) {
    case SN_CU_ADD: return a + b;
    case SN_CU_SUB: return a - b;
    case SN_CU_MUL: return a * b;
    case SN_CU_DIV: return a / b;
    }
    return 0;
}

__global__ void k_binary(sn_cuda_binary op, int64_t n, const float *a, const float *b, float *o) {
    GRID_STRIDE(i, n) o[i] = bin(op, a[i], b[i]);
}

// out index i -> offsets into a and b through their broadcast strides
__global__ void k_binary_bcast(sn_cuda_binary op, sn_cuda_bcast bc, int64_t n, const float *a,
                               const float *b, float *o) {
    GRID_STRIDE(i, n) {
        int64_t r = i, oa = 0, ob = 0;
        for (int d = bc.ndim - 1; d >= 0; d--) {
            int64_t k = r % bc.dim[d];
            r /= bc.dim[d];
            oa += k * bc.sa[d];
            ob += k * bc.sb[d];
        }
        o[i] = bin(op, a[oa], b[ob]);
    }
}

__global__ void k_assign(sn_cuda_bcast bc, int64_t n, const float *v, bool add, float *var) {
    GRID_STRIDE(i, n) {
        int64_t r = i, ov = 0;
        for (int d = bc.ndim - 1; d >= 0; d--) {
            int64_t k = r % bc.dim[d];
            r /= bc.dim[d];
            ov += k * bc.sb[d];
        }
        var[i] = add ? var[i] + v[ov] : v[ov];
    }
}

__global__ void k_assign_i32(sn_cuda_bcast bc, int64_t n, const int32_t *v, bool add,
                             int32_t *var) {
    GRID_STRIDE(i, n) {
        int64_t r = i, ov = 0;
        for (int d = bc.ndim - 1; d >= 0; d--) {
            int64_t k = r % bc.dim[d];
            r /= bc.dim[d];
            ov += k * bc.sb[d];
        }
        var[i] = add ? var[i] + v[ov] : v[ov];
    }
}

__global__ void k_i32_to_f32(int64_t n, const int32_t *x, float *o) {
    GRID_STRIDE(i, n) o[i] = (float)x[i];
}

__global__ void k_f32_to_i32(int64_t n, const float *x, int32_t *o) {
    GRID_STRIDE(i, n) o[i] = (int32_t)x[i];
}

// One block per row: mean, then variance, each a fixed-order tree over the block's threads.
__device__ float block_sum(float v, float *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

__global__ void k_layer_norm(int64_t ch, const float *x, const float *g, const float *b,
                             float eps, float *y) {
    __shared__ float sh[256];
    const float *xr = x + blockIdx.x * ch;
    float *yr = y + blockIdx.x * ch;
    float s = 0;
    for (int64_t j = threadIdx.x; j < ch; j += blockDim.x) s += xr[j];
    float mean = block_sum(s, sh) / (float)ch;
    float v = 0;
    for (int64_t j = threadIdx.x; j < ch; j += blockDim.x) v += (xr[j] - mean) * (xr[j] - mean);
    float rstd = rsqrtf(block_sum(v, sh) / (float)ch + eps);
    for (int64_t j = threadIdx.x; j < ch; j += blockDim.x) yr[j] = (xr[j] - mean) * rstd * g[j] + b[j];
}

// dx per row (one block per row); the row's mean and rstd are recomputed as the forward did.
__global__ void k_layer_norm_dx(int64_t ch, const float *x, const float *g, const float *dy,
                                float eps, float *dx, float *stats) {
    __shared__ float sh[256];
    const float *xr = x + blockIdx.x * ch, *dyr = dy + blockIdx.x * ch;
    float *dxr = dx + blockIdx.x * ch;
    float s = 0;
    for (int64_t j = threadIdx.x; j < ch; j += blockDim.x) s += xr[j];
    float mean = block_sum(s, sh) / (float)ch;
    float v = 0;
    for (int64_t j = threadIdx.x; j < ch; j += blockDim.x) v += (xr[j] - mean) * (xr[j] - mean);
    float rstd = rsqrtf(block_sum(v, sh) / (float)ch + eps);
    if (threadIdx.x == 0) {
        stats[2 * blockIdx.x] = mean;
        stats[2 * blockIdx.x + 1] = rstd;
    }
    float a = 0, bb = 0;
    for (int64_t j = threadIdx.x; j < ch; j += blockDim.x) {
        float d = dyr[j] * g[j];
        a += d;
        bb += d * (xr[j] - mean) * rstd;
    }
    a = block_sum(a, sh) / (float)ch;
    bb = block_sum(bb, sh) / (float)ch;
    for (int64_t j = threadIdx.x; j < ch; j += blockDim.x) {
        float xh = (xr[j] - mean) * rstd;
        dxr[j] = rstd * (dyr[j] * g[j] - a - xh * bb);
    }
}

// dgamma, dbeta: one thread per channel over the rows in order, with the row statistics the
// dx kernel left in stats.
__global__ void k_layer_norm_dgb(int64_t rows, int64_t ch, const float *x, const float *dy,
                                 const float *stats, float *dg, float *db) {
    GRID_STRIDE(j, ch) {
        float sg = 0, sb = 0;
        for (int64_t r = 0; r < rows; r++) {
            float d = dy[r * ch + j];
            sg += d * (x[r * ch + j] - stats[2 * r]) * stats[2 * r + 1];
            sb += d;
        }
        dg[j] = sg;
        db[j] = sb;
    }
}

__global__ void k_bias_add(int64_t n, int64_t ch, const float *x, const float *b, bool relu,
                           float *o) {
    GRID_STRIDE(i, n) {
        float v = x[i] + b[i % ch];
        o[i] = relu ? (v < 0 ? 0 : v) : v; // NaN goes through, as the CPU's relu1
    }
}

// ---- unary and pointwise gradients ---------------------------------------------------------

__global__ void k_unary(sn_cuda_unary op, int64_t n, const float *x, float alpha, float *o) {
    GRID_STRIDE(i, n) {
        float v = x[i], y = 0;
        switch (op) {
        case SN_CU_RELU: y = v < 0 ? 0 : v; break; // NaN goes through (TF, PyTorch)
        case SN_CU_SIGMOID: y = sigmoidf_(v); break;
        case SN_CU_TANH: y = tanhf(v); break;
        case SN_CU_EXP: y = expf(v); break;
        case SN_CU_LOG: y = logf(v); break;
        case SN_CU_SQRT: y = sqrtf(v); break;
        case SN_CU_NEG: y = -v; break;
        case SN_CU_GELU: y = v * ncdf(v); break;
        case SN_CU_SILU: y = v * sigmoidf_(v); break;
        case SN_CU_ELU: y = v > 0 ? v : alpha * expm1f(v); break;
        case SN_CU_LEAKY_RELU: y = v > 0 ? v : alpha * v; break;
        case SN_CU_RELU6: y = v < 0 ? 0 : (v > 6 ? 6 : v); break;
        case SN_CU_GELU_TANH:
            y = 0.5f * v * (1.0f + tanhf(0.79788456080286535588f * (v + 0.044715f * v * v * v)));
            break;
        }
        o[i] = y;
    }
}

__global__ void k_grad(sn_cuda_grad op, int64_t n, const float *vv, const float *dyy, float alpha,
                       float *o) {
    GRID_STRIDE(i, n) {
        float v = vv[i], dy = dyy[i], dx = 0;
        switch (op) {
        case SN_CU_RELU_GRAD: dx = dy * (v > 0 ? 1.0f : 0.0f); break; // TF's: NaN dy stays
        case SN_CU_SIGMOID_GRAD: dx = dy * v * (1.0f - v); break;
        case SN_CU_TANH_GRAD: dx = dy * (1.0f - v * v); break;
        case SN_CU_GELU_GRAD: dx = dy * (ncdf(v) + v * expf(-0.5f * v * v) * 0.39894228040143267794f); break;
        case SN_CU_SILU_GRAD: {
            float s = sigmoidf_(v);
            dx = dy * s * (1.0f + v * (1.0f - s));
            break;
        }
        case SN_CU_ELU_GRAD: dx = v < 0 ? dy * alpha * expf(v) : dy; break;
        case SN_CU_LEAKY_RELU_GRAD: dx = v > 0 ? dy : dy * alpha; break;
        case SN_CU_RELU6_GRAD: dx = dy * (v > 0 && v < 6 ? 1.0f : 0.0f); break;
        case SN_CU_GELU_TANH_GRAD: {
            const float c = 0.79788456080286535588f, a = 0.044715f;
            float th = tanhf(c * (v + a * v * v * v));
            dx = dy * (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * c * (1.0f + 3.0f * a * v * v));
            break;
        }
        }
        o[i] = dx;
    }
}

// ---- casts ---------------------------------------------------------------------------------

// The bit manipulation of sn_f32_to_bf16 (core/tensor.c), so both round the same way.
__global__ void k_to_bf16(int64_t n, const float *x, uint16_t *o) {
    GRID_STRIDE(i, n) {
        uint32_t u = __float_as_uint(x[i]);
        if ((u & 0x7fffffffu) > 0x7f800000u) {
            o[i] = (uint16_t)((u >> 16) | 0x40);
        } else {
            u += 0x7fffu + ((u >> 16) & 1u);
            o[i] = (uint16_t)(u >> 16);
        }
    }
}

__global__ void k_from_bf16(int64_t n, const uint16_t *x, float *o) {
    GRID_STRIDE(i, n) o[i] = __uint_as_float((uint32_t)x[i] << 16);
}

// ---- dropout: Philox-4x32-10 exactly as core/rng.c's sn_philox --------------------------------

// Element i's keep decision = sn_dropout_keep (backend/kernel.h): the counter is (mask node,
// step) high and i / 4 low, word i % 4, compared as a 24-bit unit float with (float)rate.
__global__ void k_dropout(int64_t n, const float *x, uint64_t seed, uint64_t hi, float rate,
                          float scale, float *o) {
    GRID_STRIDE(i, n) {
        uint32_t r[4];
        sn_philox4x32_10(seed, hi, (uint64_t)i >> 2, r);
        float u = (float)(r[i & 3] >> 8) * (1.0f / 16777216.0f);
        o[i] = u >= rate ? x[i] * scale : 0.0f;
    }
}

// ---- reductions: one block per output, fixed order (run-to-run identical) -------------------

__global__ void k_reduce(sn_cuda_reduce op, int64_t outer, int64_t len, int64_t inner,
                         const float *x, float *o) {
    __shared__ float part[kThreads];
    for (int64_t out = blockIdx.x; out < outer * inner; out += gridDim.x) {
        int64_t oi = out / inner, ii = out % inner;
        const float *p = x + oi * len * inner + ii;
        float acc = op == SN_CU_MAX ? -INFINITY : 0.0f;
        for (int64_t l = threadIdx.x; l < len; l += blockDim.x) {
            float v = p[l * inner];
            if (op == SN_CU_MAX) acc = (v > acc || isnan(v)) ? v : acc;
            else acc += v;
        }
        part[threadIdx.x] = acc;
        __syncthreads();
        for (int w = blockDim.x / 2; w > 0; w /= 2) {
            if ((int)threadIdx.x < w) {
                float a = part[threadIdx.x], b = part[threadIdx.x + w];
                part[threadIdx.x] = op == SN_CU_MAX ? ((b > a || isnan(b)) ? b : a) : a + b;
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) o[out] = op == SN_CU_MEAN ? part[0] / (float)len : part[0];
        __syncthreads();
    }
}

// ---- softmax family: one block per row ---------------------------------------------------------

// Block-wide max or sum of v (every thread gets the result).
__device__ float block_reduce(float v, bool is_max) {
    __shared__ float part[kThreads];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) {
            float a = part[threadIdx.x], b = part[threadIdx.x + w];
            part[threadIdx.x] = is_max ? ((b > a || isnan(b)) ? b : a) : a + b;
        }
        __syncthreads();
    }
    float r = part[0];
    __syncthreads();
    return r;
}

// max and log(sum(exp(x - max))) of one row; a non-finite max is not subtracted (ref_softmax.c)
__device__ void row_stats(const float *p, int64_t len, float *mx, float *lse) {
    float m = -INFINITY;
    for (int64_t l = threadIdx.x; l < len; l += blockDim.x) {
        float v = p[l];
        if (v > m || isnan(v)) m = v;
    }
    m = block_reduce(m, true);
    float mm = isfinite(m) ? m : 0.0f;
    float s = 0;
    for (int64_t l = threadIdx.x; l < len; l += blockDim.x) s += expf(p[l] - mm);
    s = block_reduce(s, false);
    *mx = mm;
    *lse = logf(s);
}

__global__ void k_softmax(int64_t rows, int64_t len, const float *x, bool log_out, float *o) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *p = x + r * len;
        float m, lse;
        row_stats(p, len, &m, &lse);
        for (int64_t l = threadIdx.x; l < len; l += blockDim.x) {
            float z = p[l] - m - lse;
            o[r * len + l] = log_out ? z : expf(z);
        }
    }
}

__global__ void k_softmax_grad(int64_t rows, int64_t len, const float *y, const float *dy,
                               bool log_in, float *o) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *py = y + r * len, *pd = dy + r * len;
        float s = 0;
        for (int64_t l = threadIdx.x; l < len; l += blockDim.x) s += log_in ? pd[l] : pd[l] * py[l];
        s = block_reduce(s, false);
        for (int64_t l = threadIdx.x; l < len; l += blockDim.x)
            o[r * len + l] = log_in ? pd[l] - expf(py[l]) * s : py[l] * (pd[l] - s);
    }
}

__device__ inline bool label_ok(const int32_t *labels, int64_t r, int64_t classes, int *bad) {
    int32_t lab = labels[r];
    if (lab >= 0 && lab < classes) return true;
    if (threadIdx.x == 0) atomicCAS(bad, 0, (int)(r + 1 < 0x7fffffff ? r + 1 : 0x7fffffff));
    return false;
}

__global__ void k_xent(int64_t rows, int64_t classes, const float *logits, const int32_t *labels,
                       float *loss, int *bad) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *p = logits + r * classes;
        float m, lse;
        row_stats(p, classes, &m, &lse);
        if (!label_ok(labels, r, classes, bad)) {
            if (threadIdx.x == 0) loss[r] = NAN;
            continue;
        }
        if (threadIdx.x == 0) loss[r] = m + lse - p[labels[r]];
    }
}

__global__ void k_xent_grad(int64_t rows, int64_t classes, const float *logits,
                            const int32_t *labels, const float *dloss, float *o, int *bad) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *p = logits + r * classes;
        float m, lse;
        row_stats(p, classes, &m, &lse);
        bool ok = label_ok(labels, r, classes, bad);
        int64_t lab = ok ? labels[r] : -1;
        float d = dloss[r];
        for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
            float pr = expf(p[j] - m - lse);
            o[r * classes + j] = ok ? (pr - (j == lab ? 1.0f : 0.0f)) * d : NAN;
        }
    }
}

// One thread per row: classes is small (10 for the guide's models).
__global__ void k_accuracy(int64_t rows, int64_t classes, const float *logits,
                           const int32_t *labels, float *o, int *bad) {
    GRID_STRIDE(r, rows) {
        const float *p = logits + r * classes;
        int64_t best = 0;
        float m = -INFINITY;
        for (int64_t j = 0; j < classes; j++)
            if (p[j] > m) {
                m = p[j];
                best = j;
            }
        int32_t lab = labels[r];
        if (lab < 0 || lab >= classes) {
            atomicCAS(bad, 0, (int)(r + 1 < 0x7fffffff ? r + 1 : 0x7fffffff));
            o[r] = NAN;
        } else {
            o[r] = best == lab ? 1.0f : 0.0f;
        }
    }
}

// ---- optimizer updates (ref_state.c's formulas, in f32 with the step size in double) ---------

__global__ void k_optim(sn_cuda_optim a, int64_t n, float *var, const float *grad,
                        const int32_t *iterations, float *s0, float *s1, float *s2) {
    double t = (double)iterations[0] + 1;
    float alpha = (float)(a.lr * sqrt(1 - pow(a.beta2, t)) / (1 - pow(a.beta1, t)));
    float lr = (float)a.lr, eps = (float)a.epsilon, mom = (float)a.momentum;
    float b1 = (float)a.beta1, b2 = (float)a.beta2, rho = (float)a.rho, wd = (float)a.weight_decay;
    GRID_STRIDE(i, n) {
        float w = var[i], g = grad[i];
        if (wd != 0) w -= w * wd * lr;
        switch (a.kind) {
        case 0: // SGD
            if (mom == 0) {
                w -= lr * g;
            } else {
                float m = mom * s0[i] - lr * g;
                s0[i] = m;
                w += a.nesterov ? mom * m - lr * g : m;
            }
            break;
        case 1:
        case 2: { // Adam, AdamW
            float m = s0[i], v = s1[i];
            m += (g - m) * (1 - b1);
            v += (g * g - v) * (1 - b2);
            s0[i] = m;
            s1[i] = v;
            w -= alpha * m / (sqrtf(v) + eps);
            break;
        }
        case 3: { // RMSprop: slots velocity, momentum (when > 0), average gradient (centered)
            float v = rho * s0[i] + (1 - rho) * g * g;
            s0[i] = v;
            float denom = v + eps;
            if (a.centered) {
                float *avgp = mom > 0 ? s2 : s1;
                float avg = rho * avgp[i] + (1 - rho) * g;
                avgp[i] = avg;
                denom = v - avg * avg + eps;
            }
            float inc = lr * g / sqrtf(denom);
            if (mom > 0) {
                float mm = mom * s1[i] + inc;
                s1[i] = mm;
                w -= mm;
            } else {
                w -= inc;
            }
            break;
        }
        }
        var[i] = w;
    }
}

// ---- HWIO <-> KRSC filter layouts (a 4-D transpose; filters are small) ----------------------

// in [kh*kw, c, f] (HWIO) -> out [f, kh*kw, c] (KRSC), or back when to_krsc is false
__global__ void k_filter(int64_t khw, int64_t c, int64_t f, const float *in, bool to_krsc,
                         float *o) {
    int64_t n = khw * c * f;
    GRID_STRIDE(i, n) {
        // i indexes HWIO: (s, ci, fi)
        int64_t fi = i % f, ci = (i / f) % c, sp = i / (f * c);
        int64_t j = (fi * khw + sp) * c + ci; // KRSC index
        if (to_krsc) o[j] = in[i];
        else o[i] = in[j];
    }
}


// ---- BatchNormalization training (graph/op_batch_norm.c), x [m, ch] ------------------------
// One block per channel for the sums (strided reads down the channel's column; fixed-order
// trees, run-to-run identical), grid-stride loops for the elementwise passes.
__global__ void k_bn_stats(int64_t m, int64_t ch, const float *x, float *out) {
    __shared__ float sh[256];
    const int64_t j = blockIdx.x;
    float s = 0;
    for (int64_t r = threadIdx.x; r < m; r += blockDim.x) s += x[r * ch + j];
    float mean = block_sum(s, sh) / (float)m;
    float v = 0;
    for (int64_t r = threadIdx.x; r < m; r += blockDim.x) {
        float d = x[r * ch + j] - mean;
        v += d * d;
    }
    v = block_sum(v, sh) / (float)m;
    if (threadIdx.x == 0) {
        out[j] = mean;
        out[ch + j] = v;
    }
}

__global__ void k_bn_grad_params(int64_t m, int64_t ch, const float *x, const float *st,
                                 const float *dy, float eps, float *out) {
    __shared__ float sh[256];
    const int64_t j = blockIdx.x;
    float g = 0, b = 0;
    for (int64_t r = threadIdx.x; r < m; r += blockDim.x) {
        float d = dy[r * ch + j];
        g += d * (x[r * ch + j] - st[j]);
        b += d;
    }
    g = block_sum(g, sh);
    b = block_sum(b, sh);
    if (threadIdx.x == 0) {
        out[j] = g * rsqrtf(st[ch + j] + eps);
        out[ch + j] = b;
    }
}

// train: y = (x - mean) gamma rstd + beta; grad_x (dy, dp given): dx = gamma rstd (dy -
// (dbeta + xh dgamma) / m)
__global__ void k_bn_apply(int64_t m, int64_t ch, const float *x, const float *st,
                           const float *g, const float *b, const float *dy, const float *dp,
                           float eps, float *o) {
    GRID_STRIDE(i, m * ch) {
        int64_t j = i % ch;
        float rs = rsqrtf(st[ch + j] + eps), xh = (x[i] - st[j]) * rs;
        o[i] = dy ? g[j] * rs * (dy[i] - (dp[ch + j] + xh * dp[j]) / (float)m)
                  : xh * g[j] + b[j];
    }
}

} // namespace

// ---- the C launchers -------------------------------------------------------------------------

#define STREAM(s) ((cudaStream_t)(s))

extern "C" {

sn_status sn_cuda_binary_f32(sn_cuda_stream s, sn_cuda_binary op, int64_t n, const float *a,
                             const float *b, float *out) {
    if (n <= 0) return SN_OK;
    k_binary<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(op, n, a, b, out);
    return LAUNCHED("k_binary");
}

static int64_t bcast_numel(const sn_cuda_bcast *bc) {
    int64_t n = 1;
    for (int d = 0; d < bc->ndim; d++) n *= bc->dim[d];
    return n;
}

sn_status sn_cuda_binary_bcast_f32(sn_cuda_stream s, sn_cuda_binary op, const sn_cuda_bcast *bc,
                                   const float *a, const float *b, float *out) {
    int64_t n = bcast_numel(bc);
    if (n <= 0) return SN_OK;
    k_binary_bcast<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(op, *bc, n, a, b, out);
    return LAUNCHED("k_binary_bcast");
}

sn_status sn_cuda_assign_f32(sn_cuda_stream s, const sn_cuda_bcast *bc, const float *value,
                             bool add, float *var) {
    int64_t n = bcast_numel(bc);
    if (n <= 0) return SN_OK;
    k_assign<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(*bc, n, value, add, var);
    return LAUNCHED("k_assign");
}

sn_status sn_cuda_assign_i32(sn_cuda_stream s, const sn_cuda_bcast *bc, const int32_t *value,
                             bool add, int32_t *var) {
    int64_t n = bcast_numel(bc);
    if (n <= 0) return SN_OK;
    k_assign_i32<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(*bc, n, value, add, var);
    return LAUNCHED("k_assign_i32");
}

sn_status sn_cuda_i32_to_f32(sn_cuda_stream s, int64_t n, const int32_t *x, float *out) {
    if (n <= 0) return SN_OK;
    k_i32_to_f32<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(n, x, out);
    return LAUNCHED("k_i32_to_f32");
}

sn_status sn_cuda_f32_to_i32(sn_cuda_stream s, int64_t n, const float *x, int32_t *out) {
    if (n <= 0) return SN_OK;
    k_f32_to_i32<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(n, x, out);
    return LAUNCHED("k_f32_to_i32");
}

sn_status sn_cuda_layer_norm_f32(sn_cuda_stream s, int64_t rows, int64_t ch, const float *x,
                                 const float *gamma, const float *beta, double eps, float *y) {
    if (rows <= 0 || ch <= 0) return SN_OK;
    k_layer_norm<<<(unsigned)rows, 256, 0, STREAM(s)>>>(ch, x, gamma, beta, (float)eps, y);
    return LAUNCHED("k_layer_norm");
}

sn_status sn_cuda_layer_norm_grad_f32(sn_cuda_stream s, int64_t rows, int64_t ch, const float *x,
                                      const float *gamma, const float *dy, double eps,
                                      float *stats, float *out) {
    if (rows <= 0 || ch <= 0) return SN_OK;
    k_layer_norm_dx<<<(unsigned)rows, 256, 0, STREAM(s)>>>(ch, x, gamma, dy, (float)eps, out,
                                                              stats);
    sn_status st = LAUNCHED("k_layer_norm_dx");
    if (st != SN_OK) return st;
    float *dg = out + rows * ch;
    k_layer_norm_dgb<<<blocks_for(ch), kThreads, 0, STREAM(s)>>>(rows, ch, x, dy, stats, dg,
                                                                   dg + ch);
    return LAUNCHED("k_layer_norm_dgb");
}

sn_status sn_cuda_bias_add_f32(sn_cuda_stream s, int64_t rows, int64_t ch, const float *x,
                               const float *b, bool relu, float *out) {
    int64_t n = rows * ch;
    if (n <= 0) return SN_OK;
    k_bias_add<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(n, ch, x, b, relu, out);
    return LAUNCHED("k_bias_add");
}

sn_status sn_cuda_unary_f32(sn_cuda_stream s, sn_cuda_unary op, int64_t n, const float *x,
                            double alpha, float *out) {
    if (n <= 0) return SN_OK;
    k_unary<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(op, n, x, (float)alpha, out);
    return LAUNCHED("k_unary");
}

sn_status sn_cuda_grad_f32(sn_cuda_stream s, sn_cuda_grad op, int64_t n, const float *v,
                           const float *dy, double alpha, float *dx) {
    if (n <= 0) return SN_OK;
    k_grad<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(op, n, v, dy, (float)alpha, dx);
    return LAUNCHED("k_grad");
}

sn_status sn_cuda_f32_to_bf16(sn_cuda_stream s, int64_t n, const float *x, uint16_t *out) {
    if (n <= 0) return SN_OK;
    k_to_bf16<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(n, x, out);
    return LAUNCHED("k_to_bf16");
}

sn_status sn_cuda_bf16_to_f32(sn_cuda_stream s, int64_t n, const uint16_t *x, float *out) {
    if (n <= 0) return SN_OK;
    k_from_bf16<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(n, x, out);
    return LAUNCHED("k_from_bf16");
}

sn_status sn_cuda_dropout_f32(sn_cuda_stream s, int64_t n, const float *x, uint64_t seed,
                              int32_t mask_node, int64_t step, double rate, float *out) {
    if (n <= 0) return SN_OK;
    uint64_t hi = ((uint64_t)(uint32_t)mask_node << 40) | ((uint64_t)step & ((1ull << 40) - 1));
    float scale = rate < 1.0 ? (float)(1.0 / (1.0 - rate)) : 0.0f;
    k_dropout<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(n, x, seed, hi, (float)rate, scale, out);
    return LAUNCHED("k_dropout");
}

sn_status sn_cuda_reduce_f32(sn_cuda_stream s, sn_cuda_reduce op, int64_t outer, int64_t len,
                             int64_t inner, const float *x, float *out) {
    int64_t n = outer * inner;
    if (n <= 0) return SN_OK;
    k_reduce<<<blocks_for(n * kThreads), kThreads, 0, STREAM(s)>>>(op, outer, len, inner, x, out);
    return LAUNCHED("k_reduce");
}

sn_status sn_cuda_softmax_f32(sn_cuda_stream s, int64_t rows, int64_t len, const float *x,
                              bool log_out, float *out) {
    if (rows <= 0 || len <= 0) return SN_OK;
    k_softmax<<<blocks_for(rows * kThreads), kThreads, 0, STREAM(s)>>>(rows, len, x, log_out, out);
    return LAUNCHED("k_softmax");
}

sn_status sn_cuda_softmax_grad_f32(sn_cuda_stream s, int64_t rows, int64_t len, const float *y,
                                   const float *dy, bool log_in, float *dx) {
    if (rows <= 0 || len <= 0) return SN_OK;
    k_softmax_grad<<<blocks_for(rows * kThreads), kThreads, 0, STREAM(s)>>>(rows, len, y, dy,
                                                                             log_in, dx);
    return LAUNCHED("k_softmax_grad");
}

sn_status sn_cuda_sparse_xent_f32(sn_cuda_stream s, int64_t rows, int64_t classes,
                                  const float *logits, const int32_t *labels, float *loss,
                                  int *bad) {
    if (rows <= 0 || classes <= 0) return SN_OK;
    k_xent<<<blocks_for(rows * kThreads), kThreads, 0, STREAM(s)>>>(rows, classes, logits, labels,
                                                                     loss, bad);
    return LAUNCHED("k_xent");
}

sn_status sn_cuda_sparse_xent_grad_f32(sn_cuda_stream s, int64_t rows, int64_t classes,
                                       const float *logits, const int32_t *labels,
                                       const float *dloss, float *dlogits, int *bad) {
    if (rows <= 0 || classes <= 0) return SN_OK;
    k_xent_grad<<<blocks_for(rows * kThreads), kThreads, 0, STREAM(s)>>>(
        rows, classes, logits, labels, dloss, dlogits, bad);
    return LAUNCHED("k_xent_grad");
}

sn_status sn_cuda_sparse_accuracy_f32(sn_cuda_stream s, int64_t rows, int64_t classes,
                                      const float *logits, const int32_t *labels, float *out,
                                      int *bad) {
    if (rows <= 0 || classes <= 0) return SN_OK;
    k_accuracy<<<blocks_for(rows), kThreads, 0, STREAM(s)>>>(rows, classes, logits, labels, out, bad);
    return LAUNCHED("k_accuracy");
}

sn_status sn_cuda_apply_optimizer_f32(sn_cuda_stream s, const sn_cuda_optim *o, int64_t n,
                                      float *var, const float *grad, const int32_t *iterations,
                                      float *slot0, float *slot1, float *slot2) {
    if (n <= 0) return SN_OK;
    k_optim<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(*o, n, var, grad, iterations, slot0, slot1,
                                                       slot2);
    return LAUNCHED("k_optim");
}

sn_status sn_cuda_hwio_to_krsc(sn_cuda_stream s, int64_t kh, int64_t kw, int64_t c, int64_t f,
                               const float *in, float *out) {
    int64_t n = kh * kw * c * f;
    if (n <= 0) return SN_OK;
    k_filter<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(kh * kw, c, f, in, true, out);
    return LAUNCHED("k_filter");
}

sn_status sn_cuda_krsc_to_hwio(sn_cuda_stream s, int64_t kh, int64_t kw, int64_t c, int64_t f,
                               const float *in, float *out) {
    int64_t n = kh * kw * c * f;
    if (n <= 0) return SN_OK;
    k_filter<<<blocks_for(n), kThreads, 0, STREAM(s)>>>(kh * kw, c, f, in, false, out);
    return LAUNCHED("k_filter");
}

} // extern "C"

sn_status sn_cuda_bn_f32(sn_cuda_stream s, int op, int64_t m, int64_t ch, const float *x,
                         const float *st, const float *g, const float *b, const float *dy,
                         const float *dp, double eps, float *out) {
    if (m <= 0 || ch <= 0) return SN_OK;
    switch (op) {
    case 0:
        k_bn_stats<<<(unsigned)ch, 256, 0, STREAM(s)>>>(m, ch, x, out);
        return LAUNCHED("k_bn_stats");
    case 2:
        k_bn_grad_params<<<(unsigned)ch, 256, 0, STREAM(s)>>>(m, ch, x, st, dy, (float)eps, out);
        return LAUNCHED("k_bn_grad_params");
    default:
        k_bn_apply<<<blocks_for(m * ch), kThreads, 0, STREAM(s)>>>(m, ch, x, st, g, b,
                                                                  op == 3 ? dy : nullptr, dp,
                                                                  (float)eps, out);
        return LAUNCHED("k_bn_apply");
    }
}
