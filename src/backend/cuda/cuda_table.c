/* The CUDA backend's kernel table: one row per op it runs, each a thin adapter from a kernel
 * call (sn_kcall, whose buffers are device pointers) to the launchers of cuda_kernels.h and the
 * prepared cuBLASLt/cuDNN calls of cuda_ctx.h. Rows run on the calling thread's current context
 * (sn_cuda_make_current), as CUDA's own current device: a plan on GPU:k makes k's context
 * current before it runs.
 *
 * Unlike the CPU table there is no fallback: a host kernel cannot read device memory, so
 * sn_cuda_kernel_select returns NULL for a call no row supports and the planner must refuse
 * the plan with the op's name. f32 only (bf16 casts aside). Never run on a GPU (docs/cuda.md). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "backend/cuda/cuda_ctx.h"
#include "backend/cuda/cuda_table.h"
#include "backend/cuda/cuda_util.h"

static _Thread_local sn_cuda_ctx *g_current;

void sn_cuda_make_current(sn_cuda_ctx *c) { g_current = c; }
sn_cuda_ctx *sn_cuda_current(void) { return g_current; }

static sn_status need_ctx(const sn_kcall *c, sn_cuda_ctx **out) {
    *out = g_current;
    if (!*out)
        return sn_errorf(SN_ERR_STATE, "CUDA kernel for node %d: no CUDA context is current on "
                         "this thread (sn_cuda_make_current)", (int)c->id);
    return SN_OK;
}
#define CTX(c)                                                                                 \
    sn_cuda_ctx *ctx;                                                                          \
    SN_TRY(need_ctx(c, &ctx));                                                                 \
    sn_cuda_stream s = sn_cuda_ctx_stream(ctx)

static int64_t numel(const sn_tdesc *t) { return sn_shape_numel(&t->shape); }
static const float *fin(const sn_kcall *c, int i) { return (const float *)c->in[i]; }
static float *fout(const sn_kcall *c) { return (float *)c->out; }

static bool all_f32(const sn_kcall *c) {
    if (c->y.dtype != SN_F32) return false;
    for (int i = 0; i < c->n_in; i++)
        if (c->x[i].dtype != SN_F32) return false;
    return true;
}

/* ---- elementwise ---------------------------------------------------------------------------- */

/* Strides of `in` read through a NumPy broadcast to `out` (0 on broadcast dimensions). */
static void bcast_strides(const sn_shape *in, const sn_shape *out, int64_t *st) {
    int64_t ist[SN_MAX_DIMS], acc = 1;
    for (int d = in->ndim - 1; d >= 0; d--) {
        ist[d] = acc;
        acc *= in->dim[d];
    }
    int shift = out->ndim - in->ndim;
    for (int d = 0; d < out->ndim; d++) {
        int k = d - shift;
        st[d] = (k < 0 || in->dim[k] == 1) ? 0 : ist[k];
    }
}

static bool binary_supports(const sn_kcall *c) {
    return all_f32(c) && c->y.shape.ndim <= SN_CUDA_MAX_DIMS;
}

static sn_cuda_binary bin_of(sn_op op) {
    switch (op) {
    case SN_OP_SUB: return SN_CU_SUB;
    case SN_OP_MUL: return SN_CU_MUL;
    case SN_OP_DIV: return SN_CU_DIV;
    default: return SN_CU_ADD;
    }
}

/* a, b broadcasting to y -> y */
static sn_status binary_run(sn_kcall *c) {
    CTX(c);
    const sn_shape *ys = &c->y.shape;
    if (sn_shape_equal(&c->x[0].shape, ys) && sn_shape_equal(&c->x[1].shape, ys))
        return sn_cuda_binary_f32(s, bin_of(c->op), numel(&c->y), fin(c, 0), fin(c, 1), fout(c));
    sn_cuda_bcast bc = {.ndim = ys->ndim};
    for (int d = 0; d < ys->ndim; d++) bc.dim[d] = ys->dim[d];
    bcast_strides(&c->x[0].shape, ys, bc.sa);
    bcast_strides(&c->x[1].shape, ys, bc.sb);
    return sn_cuda_binary_bcast_f32(s, bin_of(c->op), &bc, fin(c, 0), fin(c, 1), fout(c));
}

/* x [..., C], b [C] -> y */
static sn_status bias_add_run(sn_kcall *c) {
    CTX(c);
    const sn_shape *xs = &c->x[0].shape;
    int64_t ch = xs->ndim > 0 ? xs->dim[xs->ndim - 1] : 1;
    return sn_cuda_bias_add_f32(s, ch ? numel(&c->x[0]) / ch : 0, ch, fin(c, 0), fin(c, 1), c->relu,
                                fout(c));
}

static bool unary_of(sn_op op, sn_cuda_unary *u) {
    switch (op) {
    case SN_OP_RELU: *u = SN_CU_RELU; return true;
    case SN_OP_SIGMOID: *u = SN_CU_SIGMOID; return true;
    case SN_OP_TANH: *u = SN_CU_TANH; return true;
    case SN_OP_EXP: *u = SN_CU_EXP; return true;
    case SN_OP_LOG: *u = SN_CU_LOG; return true;
    case SN_OP_SQRT: *u = SN_CU_SQRT; return true;
    case SN_OP_NEG: *u = SN_CU_NEG; return true;
    case SN_OP_GELU: *u = SN_CU_GELU; return true;
    case SN_OP_SILU: *u = SN_CU_SILU; return true;
    case SN_OP_ELU: *u = SN_CU_ELU; return true;
    case SN_OP_LEAKY_RELU: *u = SN_CU_LEAKY_RELU; return true;
    case SN_OP_RELU6: *u = SN_CU_RELU6; return true;
    case SN_OP_GELU_TANH: *u = SN_CU_GELU_TANH; return true;
    default: return false;
    }
}

static bool grad_of(sn_op op, sn_cuda_grad *g) {
    switch (op) {
    case SN_OP_RELU_GRAD: *g = SN_CU_RELU_GRAD; return true;
    case SN_OP_SIGMOID_GRAD: *g = SN_CU_SIGMOID_GRAD; return true;
    case SN_OP_TANH_GRAD: *g = SN_CU_TANH_GRAD; return true;
    case SN_OP_GELU_GRAD: *g = SN_CU_GELU_GRAD; return true;
    case SN_OP_SILU_GRAD: *g = SN_CU_SILU_GRAD; return true;
    case SN_OP_ELU_GRAD: *g = SN_CU_ELU_GRAD; return true;
    case SN_OP_LEAKY_RELU_GRAD: *g = SN_CU_LEAKY_RELU_GRAD; return true;
    case SN_OP_RELU6_GRAD: *g = SN_CU_RELU6_GRAD; return true;
    case SN_OP_GELU_TANH_GRAD: *g = SN_CU_GELU_TANH_GRAD; return true;
    default: return false;
    }
}

/* x -> y, same shape; (v, dy) -> dx for the gradient ops */
static sn_status pointwise_run(sn_kcall *c) {
    CTX(c);
    sn_cuda_unary u;
    sn_cuda_grad g;
    bool has_alpha = c->op == SN_OP_ELU || c->op == SN_OP_LEAKY_RELU || c->op == SN_OP_ELU_GRAD ||
                     c->op == SN_OP_LEAKY_RELU_GRAD;
    double alpha = c->attr && has_alpha ? c->attr->act.alpha : 0;
    if (unary_of(c->op, &u)) return sn_cuda_unary_f32(s, u, numel(&c->y), fin(c, 0), alpha, fout(c));
    if (grad_of(c->op, &g))
        return sn_cuda_grad_f32(s, g, numel(&c->y), fin(c, 0), fin(c, 1), alpha, fout(c));
    return sn_errorf(SN_ERR_UNSUPPORTED, "CUDA pointwise kernel: op %d", (int)c->op);
}

/* x -> y: f32 <-> bf16, i32 <-> f32 */
static bool cast_supports(const sn_kcall *c) {
    return (c->x[0].dtype == SN_F32 && c->y.dtype == SN_BF16) ||
           (c->x[0].dtype == SN_I32 && c->y.dtype == SN_F32) ||
           (c->x[0].dtype == SN_F32 && c->y.dtype == SN_I32) ||
           (c->x[0].dtype == SN_BF16 && c->y.dtype == SN_F32) ||
           (c->x[0].dtype == SN_F32 && c->y.dtype == SN_F32);
}

static sn_status cast_run(sn_kcall *c) {
    CTX(c);
    int64_t n = numel(&c->y);
    if (c->x[0].dtype == SN_F32 && c->y.dtype == SN_BF16)
        return sn_cuda_f32_to_bf16(s, n, fin(c, 0), (uint16_t *)c->out);
    if (c->x[0].dtype == SN_BF16 && c->y.dtype == SN_F32)
        return sn_cuda_bf16_to_f32(s, n, (const uint16_t *)c->in[0], fout(c));
    if (c->x[0].dtype == SN_I32 && c->y.dtype == SN_F32)
        return sn_cuda_i32_to_f32(s, n, (const int32_t *)c->in[0], fout(c));
    if (c->x[0].dtype == SN_F32 && c->y.dtype == SN_I32)
        return sn_cuda_f32_to_i32(s, n, fin(c, 0), (int32_t *)c->out);
    if (c->out != c->in[0])
        SN_CUDA(cudaMemcpyAsync(c->out, c->in[0], (size_t)n * 4, cudaMemcpyDeviceToDevice,
                                (cudaStream_t)s));
    return SN_OK;
}

/* x -> y (also dy -> dx: the gradient carries the forward node's attributes) */
static sn_status dropout_run(sn_kcall *c) {
    CTX(c);
    return sn_cuda_dropout_f32(s, numel(&c->y), fin(c, 0), c->attr->dropout.seed,
                               c->attr->dropout.mask_node, c->step, c->attr->dropout.rate, fout(c));
}

/* A reshape is a copy here (plans make it a view). */
static sn_status copy_run(sn_kcall *c) {
    CTX(c);
    if (c->out != c->in[0])
        SN_CUDA(cudaMemcpyAsync(c->out, c->in[0], (size_t)numel(&c->y) * sn_dtype_size(c->y.dtype),
                                cudaMemcpyDeviceToDevice, (cudaStream_t)s));
    return SN_OK;
}

/* ---- reductions and the softmax family ----------------------------------------------------- */

/* The masked axes as one [outer, len, inner] split; false when they are not contiguous. */
static bool reduce_split(const sn_kcall *c, int64_t *outer, int64_t *len, int64_t *inner) {
    const sn_shape *xs = &c->x[0].shape;
    uint32_t m = c->attr->reduce.mask & ((xs->ndim >= 32) ? ~0u : ((1u << xs->ndim) - 1));
    int first = -1, last = -1;
    for (int d = 0; d < xs->ndim; d++)
        if (m & (1u << d)) {
            if (first < 0) first = d;
            else if (last != d - 1) return false;
            last = d;
        }
    *outer = 1, *len = 1, *inner = 1;
    if (first < 0) { /* nothing reduced: a copy, as [n, 1, 1] */
        *outer = sn_shape_numel(xs);
        return true;
    }
    for (int d = 0; d < xs->ndim; d++) {
        if (d < first) *outer *= xs->dim[d];
        else if (d > last) *inner *= xs->dim[d];
        else *len *= xs->dim[d];
    }
    return true;
}

static bool reduce_supports(const sn_kcall *c) {
    int64_t o, l, i;
    return all_f32(c) && reduce_split(c, &o, &l, &i);
}

static sn_status reduce_run(sn_kcall *c) {
    CTX(c);
    int64_t outer, len, inner;
    reduce_split(c, &outer, &len, &inner);
    sn_cuda_reduce op = c->op == SN_OP_REDUCE_SUM ? SN_CU_SUM
                        : c->op == SN_OP_REDUCE_MEAN ? SN_CU_MEAN : SN_CU_MAX;
    return sn_cuda_reduce_f32(s, op, outer, len, inner, fin(c, 0), fout(c));
}

/* softmax family: the last axis only */
static bool softmax_supports(const sn_kcall *c) {
    int nd = c->y.shape.ndim;
    int ax = c->attr->axis.axis < 0 ? c->attr->axis.axis + nd : c->attr->axis.axis;
    return all_f32(c) && nd >= 1 && ax == nd - 1;
}

static sn_status softmax_run(sn_kcall *c) {
    CTX(c);
    int64_t len = c->y.shape.dim[c->y.shape.ndim - 1], rows = len ? numel(&c->y) / len : 0;
    switch (c->op) {
    case SN_OP_SOFTMAX: return sn_cuda_softmax_f32(s, rows, len, fin(c, 0), false, fout(c));
    case SN_OP_LOG_SOFTMAX: return sn_cuda_softmax_f32(s, rows, len, fin(c, 0), true, fout(c));
    case SN_OP_SOFTMAX_GRAD:
        return sn_cuda_softmax_grad_f32(s, rows, len, fin(c, 0), fin(c, 1), false, fout(c));
    default: return sn_cuda_softmax_grad_f32(s, rows, len, fin(c, 0), fin(c, 1), true, fout(c));
    }
}

/* logits f32 [N, C], labels i32 [N] (, dloss f32 [N]) */
static bool xent_supports(const sn_kcall *c) {
    if (c->x[0].dtype != SN_F32 || c->x[1].dtype != SN_I32 || c->y.dtype != SN_F32) return false;
    return c->n_in < 3 || c->x[2].dtype == SN_F32;
}

static sn_status xent_run(sn_kcall *c) {
    CTX(c);
    const sn_shape *ls = &c->x[0].shape;
    int64_t classes = ls->dim[ls->ndim - 1], rows = classes ? sn_shape_numel(ls) / classes : 0;
    const int32_t *lab = (const int32_t *)c->in[1];
    int *flag = sn_cuda_ctx_error_flag(ctx);
    switch (c->op) {
    case SN_OP_SPARSE_XENT:
        return sn_cuda_sparse_xent_f32(s, rows, classes, fin(c, 0), lab, fout(c), flag);
    case SN_OP_SPARSE_XENT_GRAD:
        return sn_cuda_sparse_xent_grad_f32(s, rows, classes, fin(c, 0), lab, fin(c, 2), fout(c), flag);
    default:
        return sn_cuda_sparse_accuracy_f32(s, rows, classes, fin(c, 0), lab, fout(c), flag);
    }
}

/* ---- state ---------------------------------------------------------------------------------- */

static bool state_supports(const sn_kcall *c) {
    if (c->op != SN_OP_APPLY_OPTIMIZER && c->x[0].dtype == SN_I32) /* the iteration counter */
        return c->x[1].dtype == SN_I32 && c->y.dtype == SN_I32 &&
               c->x[0].shape.ndim <= SN_CUDA_MAX_DIMS;
    for (int i = 0; i < c->n_in; i++)
        if (c->x[i].dtype != (c->op == SN_OP_APPLY_OPTIMIZER && i == 2 ? SN_I32 : SN_F32))
            return false;
    return c->y.dtype == SN_F32 && c->x[0].shape.ndim <= SN_CUDA_MAX_DIMS;
}

/* The new value also in c->out when that is not the variable itself (eager callers). */
static sn_status copy_back(sn_kcall *c, sn_cuda_stream s) {
    if (c->out && c->out != c->in[0])
        SN_CUDA(cudaMemcpyAsync(c->out, c->in[0], (size_t)numel(&c->x[0]) * 4,
                                cudaMemcpyDeviceToDevice, (cudaStream_t)s));
    return SN_OK;
}

/* var, value (broadcast to var) -> var */
static sn_status assign_run(sn_kcall *c) {
    CTX(c);
    const sn_shape *vs = &c->x[0].shape;
    sn_cuda_bcast bc = {.ndim = vs->ndim};
    for (int d = 0; d < vs->ndim; d++) bc.dim[d] = vs->dim[d];
    bcast_strides(&c->x[1].shape, vs, bc.sb);
    if (c->x[0].dtype == SN_I32)
        SN_TRY(sn_cuda_assign_i32(s, &bc, (const int32_t *)c->in[1], c->op == SN_OP_ASSIGN_ADD,
                                  (int32_t *)(uintptr_t)c->in[0]));
    else
        SN_TRY(sn_cuda_assign_f32(s, &bc, fin(c, 1), c->op == SN_OP_ASSIGN_ADD,
                                  (float *)(uintptr_t)c->in[0]));
    return copy_back(c, s);
}

/* var, grad, iterations (i32 scalar), slots... -> var and slots updated */
static sn_status optimizer_run(sn_kcall *c) {
    CTX(c);
    const sn_attrs *a = c->attr;
    sn_cuda_optim o = {.kind = (int)a->optim.kind, .lr = a->optim.lr, .beta1 = a->optim.beta1,
                       .beta2 = a->optim.beta2, .epsilon = a->optim.epsilon,
                       .momentum = a->optim.momentum, .rho = a->optim.rho,
                       .weight_decay = a->optim.weight_decay, .nesterov = a->optim.nesterov,
                       .centered = a->optim.centered};
    int need = sn_optim_slot_count(a);
    if (need < 0 || c->n_in < 3 + need)
        return sn_errorf(SN_ERR_INVALID, "apply_optimizer (GPU): %d slot inputs, expected %d",
                         c->n_in - 3, need);
    float *slot[3] = {0};
    for (int k = 0; k < need && k < 3; k++) slot[k] = (float *)(uintptr_t)c->in[3 + k];
    SN_TRY(sn_cuda_apply_optimizer_f32(s, &o, numel(&c->x[0]), (float *)(uintptr_t)c->in[0],
                                       fin(c, 1), (const int32_t *)c->in[2], slot[0], slot[1],
                                       slot[2]));
    return copy_back(c, s);
}

/* ---- matmul, convolution, pooling: prepared once per call ------------------------------------ */

/* The reference kernel's forms (ref_matmul.c): 2-D, or batch dimensions equal on both operands,
 * or one operand 2-D and shared by every batch; a cuBLASLt strided batch. */
static bool matmul_supports(const sn_kcall *c) {
    const sn_shape *a = &c->x[0].shape, *b = &c->x[1].shape, *y = &c->y.shape;
    if (!all_f32(c) || a->ndim < 2 || b->ndim < 2 || y->ndim < 2) return false;
    if (a->ndim > 2 && b->ndim > 2) {
        if (a->ndim != b->ndim) return false;
        for (int d = 0; d < a->ndim - 2; d++)
            if (a->dim[d] != b->dim[d]) return false;
    }
    int64_t mn = y->dim[y->ndim - 2] * y->dim[y->ndim - 1];
    return mn > 0 && sn_shape_numel(y) / mn <= INT32_MAX && sn_shape_numel(y) > 0;
}

static sn_status matmul_prepare(sn_kcall *c, size_t *scratch) {
    CTX(c);
    (void)s;
    *scratch = 0;
    const sn_shape *as = &c->x[0].shape, *bs = &c->x[1].shape, *ys = &c->y.shape;
    sn_cuda_matmul_desc d = {.ta = c->attr->matmul.ta, .tb = c->attr->matmul.tb,
                             .tf32 = sn_cuda_ctx_tf32(ctx) && !c->fp32_strict};
    d.m = ys->dim[ys->ndim - 2];
    d.n = ys->dim[ys->ndim - 1];
    d.k = d.ta ? as->dim[as->ndim - 2] : as->dim[as->ndim - 1];
    d.batch = sn_shape_numel(ys) / (d.m * d.n);
    d.a_stride = as->ndim > 2 ? d.m * d.k : 0;
    d.b_stride = bs->ndim > 2 ? d.k * d.n : 0;
    if (d.batch > 1 && as->ndim > 2 && bs->ndim == 2 && !d.ta) { /* one [batch * m, k] product */
        d.m *= d.batch;
        d.batch = 1;
        d.a_stride = 0;
    }
    sn_cuda_matmul *p = NULL;
    SN_TRY(sn_cuda_matmul_new_desc(ctx, &d, &p));
    c->state = p;
    return SN_OK;
}
static sn_status matmul_run(sn_kcall *c) {
    return sn_cuda_matmul_run(c->state, fin(c, 0), fin(c, 1), fout(c));
}
static void matmul_release(sn_kcall *c) {
    sn_cuda_matmul_free(c->state);
    c->state = NULL;
}

/* x [N,H,W,C] (or dx), w [KH,KW,C,F] (or dw), y [N,OH,OW,F] (or dy), by op */
static void conv_shapes(const sn_kcall *c, sn_cuda_conv_desc *d) {
    const sn_shape *x, *w, *y;
    switch (c->op) {
    case SN_OP_CONV2D: x = &c->x[0].shape, w = &c->x[1].shape, y = &c->y.shape; break;
    case SN_OP_CONV2D_BWD_DATA: x = &c->y.shape, w = &c->x[1].shape, y = &c->x[0].shape; break;
    default: x = &c->x[0].shape, w = &c->y.shape, y = &c->x[1].shape; break;
    }
    *d = (sn_cuda_conv_desc){.n = x->dim[0], .h = x->dim[1], .w = x->dim[2], .c = x->dim[3],
                             .kh = w->dim[0], .kw = w->dim[1], .f = w->dim[3], .oh = y->dim[1],
                             .ow = y->dim[2], .stride_h = c->attr->conv.stride_h,
                             .stride_w = c->attr->conv.stride_w, .pad_top = c->attr->conv.pad_top,
                             .pad_left = c->attr->conv.pad_left,
                             .fp32_strict = c->fp32_strict};
}

/* cuDNN pads both sides alike: the bottom/right padding an output size implies (after) must
 * equal the top/left one (before), or be a remainder dropped by a "valid" window (before 0). */
static bool same_both_sides(int64_t before, int64_t after) {
    return after == before || (before == 0 && after < 0);
}

static bool conv_supports(const sn_kcall *c) {
    if (!all_f32(c) || c->x[0].shape.ndim != 4 || c->x[1].shape.ndim != 4) return false;
    sn_cuda_conv_desc d;
    conv_shapes(c, &d);
    int64_t pb = (d.oh - 1) * d.stride_h + d.kh - d.h - d.pad_top;
    int64_t pr = (d.ow - 1) * d.stride_w + d.kw - d.w - d.pad_left;
    return same_both_sides(d.pad_top, pb) && same_both_sides(d.pad_left, pr);
}

static sn_status conv_prepare(sn_kcall *c, size_t *scratch) {
    CTX(c);
    (void)s;
    *scratch = 0;
    sn_cuda_conv_desc d;
    conv_shapes(c, &d);
    sn_cuda_conv *p = NULL;
    SN_TRY(sn_cuda_conv_new(ctx, &d, &p));
    c->state = p;
    return SN_OK;
}
static sn_status conv_run(sn_kcall *c) {
    switch (c->op) {
    case SN_OP_CONV2D: return sn_cuda_conv_fwd(c->state, fin(c, 0), fin(c, 1), fout(c));
    case SN_OP_CONV2D_BWD_DATA: return sn_cuda_conv_bwd_data(c->state, fin(c, 0), fin(c, 1), fout(c));
    default: return sn_cuda_conv_bwd_filter(c->state, fin(c, 0), fin(c, 1), fout(c));
    }
}
static void conv_release(sn_kcall *c) {
    sn_cuda_conv_free(c->state);
    c->state = NULL;
}

/* pool: x -> y; max grad: (x, dy) -> dx; avg grad: (dy) -> dx */
static void pool_desc(const sn_kcall *c, sn_cuda_pool_desc *d) {
    const sn_shape *x = c->op == SN_OP_MAX_POOL2D || c->op == SN_OP_AVG_POOL2D ? &c->x[0].shape
                                                                               : &c->y.shape;
    const sn_shape *y = c->op == SN_OP_MAX_POOL2D || c->op == SN_OP_AVG_POOL2D ? &c->y.shape
                        : c->op == SN_OP_MAX_POOL2D_GRAD ? &c->x[1].shape : &c->x[0].shape;
    const sn_attrs *a = c->attr;
    *d = (sn_cuda_pool_desc){.n = x->dim[0], .h = x->dim[1], .w = x->dim[2], .c = x->dim[3],
                             .oh = y->dim[1], .ow = y->dim[2], .pool_h = a->pool.pool_h,
                             .pool_w = a->pool.pool_w, .stride_h = a->pool.stride_h,
                             .stride_w = a->pool.stride_w, .pad_top = a->pool.pad_top,
                             .pad_left = a->pool.pad_left,
                             .max = c->op == SN_OP_MAX_POOL2D || c->op == SN_OP_MAX_POOL2D_GRAD};
}

static bool pool_supports(const sn_kcall *c) {
    if (!all_f32(c) || c->y.shape.ndim != 4) return false;
    sn_cuda_pool_desc d;
    pool_desc(c, &d);
    int64_t pb = (d.oh - 1) * d.stride_h + d.pool_h - d.h - d.pad_top;
    int64_t pr = (d.ow - 1) * d.stride_w + d.pool_w - d.w - d.pad_left;
    return same_both_sides(d.pad_top, pb) && same_both_sides(d.pad_left, pr);
}

static sn_status pool_prepare(sn_kcall *c, size_t *scratch) {
    CTX(c);
    (void)s;
    *scratch = 0;
    sn_cuda_pool_desc d;
    pool_desc(c, &d);
    sn_cuda_pool *p = NULL;
    SN_TRY(sn_cuda_pool_new(ctx, &d, &p));
    c->state = p;
    return SN_OK;
}
static sn_status pool_run(sn_kcall *c) {
    switch (c->op) {
    case SN_OP_MAX_POOL2D:
    case SN_OP_AVG_POOL2D: return sn_cuda_pool_fwd(c->state, fin(c, 0), fout(c));
    case SN_OP_MAX_POOL2D_GRAD: return sn_cuda_pool_bwd(c->state, fin(c, 0), fin(c, 1), fout(c));
    default: /* average: cuDNN reads no x; dy stands in for it */
        return sn_cuda_pool_bwd(c->state, fin(c, 0), fin(c, 0), fout(c));
    }
}
static void pool_release(sn_kcall *c) {
    sn_cuda_pool_free(c->state);
    c->state = NULL;
}

/* ---- broadcast_to, layer_norm ------------------------------------------------------------------ */

static bool bcast_to_supports(const sn_kcall *c) {
    return all_f32(c) && c->y.shape.ndim <= SN_CUDA_MAX_DIMS;
}

/* x broadcast (NumPy rules) to y's shape: an assign through the broadcast strides */
static sn_status bcast_to_run(sn_kcall *c) {
    CTX(c);
    const sn_shape *ys = &c->y.shape;
    sn_cuda_bcast bc = {.ndim = ys->ndim};
    for (int d = 0; d < ys->ndim; d++) bc.dim[d] = ys->dim[d];
    bcast_strides(&c->x[0].shape, ys, bc.sb);
    return sn_cuda_assign_f32(s, &bc, fin(c, 0), false, fout(c));
}

/* slice: y[i] = x[begin + i] through x's strides (the same assign, its source offset by begin) */
static sn_status slice_run(sn_kcall *c) {
    CTX(c);
    const sn_shape *ys = &c->y.shape, *xs = &c->x[0].shape;
    sn_cuda_bcast bc = {.ndim = ys->ndim};
    int64_t st = 1, off = 0;
    for (int d = xs->ndim - 1; d >= 0; d--) {
        bc.dim[d] = ys->dim[d];
        bc.sb[d] = st;
        off += c->attr->slice.begin[d] * st;
        st *= xs->dim[d];
    }
    return sn_cuda_assign_f32(s, &bc, fin(c, 0) + off, false, fout(c));
}

static bool slice_supports(const sn_kcall *c) {
    return bcast_to_supports(c) && c->x[0].shape.ndim == c->y.shape.ndim;
}

static bool ln_supports(const sn_kcall *c) {
    if (!all_f32(c) || c->x[1].shape.ndim != 1 || c->x[0].shape.ndim < 1 ||
        c->x[0].shape.dim[c->x[0].shape.ndim - 1] != c->x[1].shape.dim[0] || c->x[1].shape.dim[0] < 1)
        return false;
    return numel(&c->x[0]) / c->x[1].shape.dim[0] <= INT32_MAX; /* one block per row */
}

static void ln_dims(const sn_kcall *c, int64_t *rows, int64_t *ch) {
    *ch = c->x[1].shape.dim[0];
    *rows = *ch ? numel(&c->x[0]) / *ch : 0;
}

/* (x, gamma, beta) -> y */
static sn_status ln_run(sn_kcall *c) {
    CTX(c);
    int64_t rows, ch;
    ln_dims(c, &rows, &ch);
    return sn_cuda_layer_norm_f32(s, rows, ch, fin(c, 0), fin(c, 1), fin(c, 2),
                                  c->attr->norm.epsilon, fout(c));
}

/* the row statistics the dx pass hands to the dgamma/dbeta pass */
static sn_status ln_grad_prepare(sn_kcall *c, size_t *scratch) {
    int64_t rows, ch;
    ln_dims(c, &rows, &ch);
    *scratch = (size_t)(2 * rows) * sizeof(float);
    return SN_OK;
}

/* (x, gamma, dy) -> dx | dgamma | dbeta */
static sn_status ln_grad_run(sn_kcall *c) {
    CTX(c);
    int64_t rows, ch;
    ln_dims(c, &rows, &ch);
    return sn_cuda_layer_norm_grad_f32(s, rows, ch, fin(c, 0), fin(c, 1), fin(c, 2),
                                       c->attr->norm.epsilon, (float *)c->scratch, fout(c));
}

/* ---- BatchNormalization training ops (graph/op_batch_norm.c) -------------------------------- */
static bool bn_supports(const sn_kcall *c) {
    const sn_shape *xs = &c->x[0].shape;
    return all_f32(c) && xs->ndim >= 1 && xs->dim[xs->ndim - 1] <= INT32_MAX;
}

static sn_status bn_run(sn_kcall *c) {
    CTX(c);
    const sn_shape *xs = &c->x[0].shape;
    int64_t ch = xs->dim[xs->ndim - 1], m = ch ? numel(&c->x[0]) / ch : 0;
    int op = (int)(c->op - SN_OP_BN_STATS);
    const float *x = fin(c, 0), *st = op ? fin(c, 1) : NULL;
    const float *g = op == 1 || op == 3 ? fin(c, 2) : NULL, *b = op == 1 ? fin(c, 3) : NULL;
    const float *dy = op == 2 ? fin(c, 2) : op == 3 ? fin(c, 3) : NULL;
    const float *dp = op == 3 ? fin(c, 4) : NULL;
    return sn_cuda_bn_f32(s, op, m, ch, x, st, g, b, dy, dp, c->attr->norm.epsilon, fout(c));
}

/* ---- all_reduce: the collective the node names, on this GPU's stream (NCCL) ---------------- */

static bool all_reduce_supports(const sn_kcall *c) {
    return c->y.dtype == SN_F32 && c->x[0].dtype == SN_F32;
}

static sn_status all_reduce_run(sn_kcall *c) {
    CTX(c);
    (void)ctx;
    const sn_attrs *a = c->attr;
    if (!a->allreduce.comm)
        return sn_errorf(SN_ERR_INVALID, "all_reduce (node %d): no collective attached", (int)c->id);
    return a->allreduce.comm->vt->run(a->allreduce.comm, a->allreduce.replica, a->allreduce.phase,
                                      fin(c, 0), fout(c), (size_t)numel(&c->y), (void *)s);
}

/* ---- the table ------------------------------------------------------------------------------ */

static const sn_kernel k_binary = {.impl = "cuda", .supports = binary_supports, .run = binary_run},
    k_bias = {.impl = "cuda", .supports = all_f32, .run = bias_add_run},
    k_pointwise = {.impl = "cuda", .supports = all_f32, .run = pointwise_run},
    k_cast = {.impl = "cuda", .supports = cast_supports, .run = cast_run},
    k_dropout = {.impl = "cuda", .supports = all_f32, .run = dropout_run},
    k_copy = {.impl = "cuda", .run = copy_run},
    k_reduce = {.impl = "cuda", .supports = reduce_supports, .run = reduce_run},
    k_softmax = {.impl = "cuda", .supports = softmax_supports, .run = softmax_run},
    k_xent = {.impl = "cuda", .supports = xent_supports, .run = xent_run},
    k_assign = {.impl = "cuda", .supports = state_supports, .run = assign_run},
    k_optim = {.impl = "cuda", .supports = state_supports, .run = optimizer_run},
    k_matmul = {.impl = "cublaslt", .supports = matmul_supports, .prepare = matmul_prepare,
                .run = matmul_run, .release = matmul_release},
    k_conv = {.impl = "cudnn", .supports = conv_supports, .prepare = conv_prepare,
              .run = conv_run, .release = conv_release},
    k_pool = {.impl = "cudnn", .supports = pool_supports, .prepare = pool_prepare,
              .run = pool_run, .release = pool_release},
    k_all_reduce = {.impl = "nccl", .supports = all_reduce_supports, .run = all_reduce_run},
    k_bcast_to = {.impl = "cuda", .supports = bcast_to_supports, .run = bcast_to_run},
    k_ln = {.impl = "cuda", .supports = ln_supports, .run = ln_run},
    k_ln_grad = {.impl = "cuda", .supports = ln_supports, .prepare = ln_grad_prepare,
                 .run = ln_grad_run},
    k_bn = {.impl = "cuda", .supports = bn_supports, .run = bn_run},
    k_slice = {.impl = "cuda", .supports = slice_supports, .run = slice_run};

static sn_kernel_table g_table;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void build(void) {
    memset(&g_table, 0, sizeof g_table);
    const sn_op bin[] = {SN_OP_ADD, SN_OP_SUB, SN_OP_MUL, SN_OP_DIV};
    for (size_t i = 0; i < sizeof bin / sizeof bin[0]; i++) g_table.k[bin[i]] = &k_binary;
    const sn_op pw[] = {SN_OP_RELU, SN_OP_SIGMOID, SN_OP_TANH, SN_OP_EXP, SN_OP_LOG, SN_OP_SQRT,
                        SN_OP_NEG, SN_OP_GELU, SN_OP_SILU, SN_OP_ELU, SN_OP_LEAKY_RELU,
                        SN_OP_RELU6, SN_OP_RELU_GRAD, SN_OP_SIGMOID_GRAD, SN_OP_TANH_GRAD,
                        SN_OP_GELU_GRAD, SN_OP_SILU_GRAD, SN_OP_ELU_GRAD, SN_OP_LEAKY_RELU_GRAD,
                        SN_OP_RELU6_GRAD, SN_OP_GELU_TANH, SN_OP_GELU_TANH_GRAD};
    for (size_t i = 0; i < sizeof pw / sizeof pw[0]; i++) g_table.k[pw[i]] = &k_pointwise;
    g_table.k[SN_OP_BIAS_ADD] = &k_bias;
    g_table.k[SN_OP_CAST] = &k_cast;
    g_table.k[SN_OP_DROPOUT] = &k_dropout;
    g_table.k[SN_OP_DROPOUT_GRAD] = &k_dropout;
    g_table.k[SN_OP_RESHAPE] = &k_copy;
    g_table.k[SN_OP_REDUCE_SUM] = &k_reduce;
    g_table.k[SN_OP_REDUCE_MEAN] = &k_reduce;
    g_table.k[SN_OP_REDUCE_MAX] = &k_reduce;
    g_table.k[SN_OP_SOFTMAX] = &k_softmax;
    g_table.k[SN_OP_LOG_SOFTMAX] = &k_softmax;
    g_table.k[SN_OP_SOFTMAX_GRAD] = &k_softmax;
    g_table.k[SN_OP_LOG_SOFTMAX_GRAD] = &k_softmax;
    g_table.k[SN_OP_SPARSE_XENT] = &k_xent;
    g_table.k[SN_OP_SPARSE_XENT_GRAD] = &k_xent;
    g_table.k[SN_OP_SPARSE_ACCURACY] = &k_xent;
    g_table.k[SN_OP_ASSIGN] = &k_assign;
    g_table.k[SN_OP_ASSIGN_ADD] = &k_assign;
    g_table.k[SN_OP_APPLY_OPTIMIZER] = &k_optim;
    g_table.k[SN_OP_MATMUL] = &k_matmul;
    g_table.k[SN_OP_CONV2D] = &k_conv;
    g_table.k[SN_OP_CONV2D_BWD_DATA] = &k_conv;
    g_table.k[SN_OP_CONV2D_BWD_FILTER] = &k_conv;
    g_table.k[SN_OP_MAX_POOL2D] = &k_pool;
    g_table.k[SN_OP_AVG_POOL2D] = &k_pool;
    g_table.k[SN_OP_MAX_POOL2D_GRAD] = &k_pool;
    g_table.k[SN_OP_AVG_POOL2D_GRAD] = &k_pool;
    g_table.k[SN_OP_ALL_REDUCE] = &k_all_reduce;
    g_table.k[SN_OP_BROADCAST_TO] = &k_bcast_to;
    g_table.k[SN_OP_LAYER_NORM] = &k_ln;
    g_table.k[SN_OP_LAYER_NORM_GRAD] = &k_ln_grad;
    g_table.k[SN_OP_SLICE] = &k_slice; /* the BatchNorm statistics' rows, and others */
    g_table.k[SN_OP_BN_STATS] = &k_bn;
    g_table.k[SN_OP_BN_TRAIN] = &k_bn;
    g_table.k[SN_OP_BN_GRAD_PARAMS] = &k_bn;
    g_table.k[SN_OP_BN_GRAD_X] = &k_bn;
}

const sn_kernel_table *sn_cuda_kernels(void) {
    pthread_once(&g_once, build);
    return &g_table;
}

const sn_kernel *sn_cuda_kernel_select(const sn_kcall *c) {
    if ((unsigned)c->op >= SN_OP_COUNT) return NULL;
    const sn_kernel *k = sn_cuda_kernels()->k[c->op];
    if (k && (k->supports == NULL || k->supports(c))) return k;
    return NULL;
}
