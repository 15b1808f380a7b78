/* Fast f32 side-effect kernels: assign, assign_add and the fused optimizer update (SGD with
 * momentum/Nesterov, Adam, AdamW, RMSprop incl. centered), Keras 3 semantics exactly as the
 * reference (backend/ref/ref_state.c) spells them. They write into the variable, in[0]; when
 * an eager caller passes a separate out it receives a copy of the new value.
 *
 * The optimizer update is one pass over var, grad and the slots: it touches tens of millions
 * of parameters per step in a CNN, so it is memory-bandwidth bound and split over threads
 * above GRAIN elements. Within a thread it works in chunks of CHUNK elements that stay in L1:
 * the slot updates, then one vector square root over the chunk, then the variable update.
 * sqrtf itself does not vectorise without -fno-math-errno (which the build does not set), so
 * the square root of a chunk is an explicit instruction loop per ISA (AVX-512, AVX2) with a
 * scalar fallback, chosen once via sn_cpu() (SN_CPU_ISA overrides). The update runs with
 * subnormals flushed to zero (as TensorFlow runs every kernel), which the reference spells
 * out too. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_vec.h"
#include "backend/kernel.h"

enum { GRAIN = 32768, CHUNK = 256 };

static void *var_storage(const sn_kcall *c) { return (void *)(uintptr_t)c->in[0]; }

static void copy_to_out(const sn_kcall *c) {
    if (c->out == NULL || c->out == c->in[0]) return;
    memcpy(c->out, c->in[0],
           (size_t)sn_shape_numel(&c->x[0].shape) * sn_dtype_size(c->x[0].dtype));
}

/* ---- assign, assign_add ----------------------------------------------------------------- */

/* Same dtype for var, value and out; value the var's size or one element; f32 for add
 * (i32 too when both are one element: the optimizer's iteration counter). */
static bool assign_supports_common(const sn_kcall *c, bool add) {
    if (c->n_in != 2) return false;
    sn_dtype tv = c->x[0].dtype;
    if (c->x[1].dtype != tv || c->y.dtype != tv) return false;
    int64_t n = sn_shape_numel(&c->x[0].shape);
    int64_t m = sn_shape_numel(&c->x[1].shape);
    if (m != n && m != 1) return false;
    if (!add) return tv == SN_F32 || m == n;
    return tv == SN_F32 || (tv == SN_I32 && n == 1);
}
static bool assign_supports(const sn_kcall *c) { return assign_supports_common(c, false); }
static bool assign_add_supports(const sn_kcall *c) { return assign_supports_common(c, true); }

typedef struct asg_ctx {
    float *var;
    const float *val;
    int64_t n;
    bool scalar, add;
} asg_ctx;

static void assign_task(void *vctx, int ith, int nth) {
    const asg_ctx *x = vctx;
    int64_t lo, hi;
    sn_split_range(x->n, ith, nth, &lo, &hi);
    /* No restrict: assign_add(v, v) is legal and reads and writes the same index. */
    float *v = x->var;
    const float *s = x->val;
    if (x->scalar) {
        const float k = s[0];
        if (x->add)
            for (int64_t i = lo; i < hi; i++) v[i] += k;
        else
            for (int64_t i = lo; i < hi; i++) v[i] = k;
    } else {
        if (x->add)
            for (int64_t i = lo; i < hi; i++) v[i] += s[i];
        else
            memmove(v + lo, s + lo, (size_t)(hi - lo) * sizeof(float));
    }
}

/* var [any], value [var shape or one element] -> var updated */
static sn_status assign_common(sn_kcall *c, bool add) {
    sn_dtype tv = c->x[0].dtype;
    int64_t n = sn_shape_numel(&c->x[0].shape);
    bool scalar = sn_shape_numel(&c->x[1].shape) == 1 && n != 1;
    void *var = var_storage(c);
    if (tv == SN_I32) { /* one counter, or a same-size copy */
        if (add)
            ((int32_t *)var)[0] += ((const int32_t *)c->in[1])[0];
        else
            memmove(var, c->in[1], (size_t)n * sizeof(int32_t));
    } else if (tv != SN_F32) { /* assign of equal sizes, any dtype */
        memmove(var, c->in[1], (size_t)n * sn_dtype_size(tv));
    } else {
        asg_ctx x = {var, c->in[1], n, scalar, add};
        run_tasks(assign_task, &x, n, GRAIN, n);
    }
    copy_to_out(c);
    return SN_OK;
}
static sn_status assign_run(sn_kcall *c) { return assign_common(c, false); }
static sn_status assign_add_run(sn_kcall *c) { return assign_common(c, true); }

/* ---- optimizer update ------------------------------------------------------------------- */

typedef struct opt_ctx {
    sn_optimizer_kind kind;
    int64_t n;
    float *var;
    const float *grad;
    float *slot[3];
    float lr, b1c, b2c, alpha, eps, mom, rho, rho1, wdlr; /* b1c = 1 - beta1, rho1 = 1 - rho */
    bool nesterov, centered, decay;
} opt_ctx;

/* Elements [lo, hi) in chunks; vsqrt(o, x, n) takes the square root of a chunk (in place). */
INL void opt_range_body(const opt_ctx *c, int64_t lo, int64_t hi,
                        void (*vsqrt)(float *, const float *, int64_t)) {
    float t[CHUNK];
    for (int64_t base = lo; base < hi; base += CHUNK) {
        const int64_t n = hi - base < CHUNK ? hi - base : CHUNK;
        float *restrict w = c->var + base;
        const float *restrict g = c->grad + base;
        /* Decoupled weight decay first, for any optimizer that sets it (Keras 3). */
        if (c->decay)
            for (int64_t i = 0; i < n; i++) w[i] -= w[i] * c->wdlr;
        switch (c->kind) {
        case SN_OPTIM_SGD:
            if (c->mom == 0) {
                for (int64_t i = 0; i < n; i++) w[i] -= c->lr * g[i];
            } else {
                float *restrict m = c->slot[0] + base;
                if (c->nesterov)
                    for (int64_t i = 0; i < n; i++) {
                        float mm = c->mom * m[i] - c->lr * g[i];
                        m[i] = mm;
                        w[i] += c->mom * mm - c->lr * g[i];
                    }
                else
                    for (int64_t i = 0; i < n; i++) {
                        float mm = c->mom * m[i] - c->lr * g[i];
                        m[i] = mm;
                        w[i] += mm;
                    }
            }
            break;
        case SN_OPTIM_ADAM:
        case SN_OPTIM_ADAMW: {
            float *restrict m = c->slot[0] + base, *restrict v = c->slot[1] + base;
            for (int64_t i = 0; i < n; i++) {
                float gi = g[i];
                m[i] += (gi - m[i]) * c->b1c;
                v[i] += (gi * gi - v[i]) * c->b2c;
                t[i] = v[i];
            }
            vsqrt(t, t, n);
            for (int64_t i = 0; i < n; i++) w[i] -= c->alpha * m[i] / (t[i] + c->eps);
            break;
        }
        case SN_OPTIM_RMSPROP: {
            float *restrict v = c->slot[0] + base;
            if (c->centered) {
                float *restrict avg = c->slot[c->mom > 0 ? 2 : 1] + base;
                for (int64_t i = 0; i < n; i++) {
                    float gi = g[i];
                    float vv = c->rho * v[i] + c->rho1 * gi * gi;
                    float aa = c->rho * avg[i] + c->rho1 * gi;
                    v[i] = vv;
                    avg[i] = aa;
                    t[i] = vv - aa * aa + c->eps;
                }
            } else {
                for (int64_t i = 0; i < n; i++) {
                    float gi = g[i];
                    float vv = c->rho * v[i] + c->rho1 * gi * gi;
                    v[i] = vv;
                    t[i] = vv + c->eps;
                }
            }
            vsqrt(t, t, n);
            if (c->mom > 0) {
                float *restrict mm = c->slot[1] + base;
                for (int64_t i = 0; i < n; i++) {
                    float inc = c->lr * g[i] / t[i];
                    mm[i] = c->mom * mm[i] + inc;
                    w[i] -= mm[i];
                }
            } else {
                for (int64_t i = 0; i < n; i++) w[i] -= c->lr * g[i] / t[i];
            }
            break;
        }
        }
    }
}

static void sqrt_generic(float *o, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) o[i] = sqrtf(x[i]);
}
static void opt_generic(const opt_ctx *c, int64_t lo, int64_t hi) {
    opt_range_body(c, lo, hi, sqrt_generic);
}

typedef struct st_isa {
    const char *name;
    void (*opt)(const opt_ctx *c, int64_t lo, int64_t hi);
} st_isa;
static const st_isa isa_generic = {"cpu", opt_generic};

#ifdef SN_CPU_X86
TGT_AVX512 static void opt_avx512(const opt_ctx *c, int64_t lo, int64_t hi) {
    opt_range_body(c, lo, hi, vsqrt_avx512);
}
TGT_AVX2 static void opt_avx2(const opt_ctx *c, int64_t lo, int64_t hi) {
    opt_range_body(c, lo, hi, vsqrt_avx2);
}
static const st_isa isa_avx512 = {"avx512", opt_avx512}, isa_avx2 = {"avx2", opt_avx2};
#endif

static const st_isa *isa = &isa_generic;

static bool optimizer_supports(const sn_kcall *c) {
    int need = sn_optim_slot_count(c->attr);
    if (need < 0 || c->n_in < 3 + need || c->y.dtype != SN_F32) return false;
    int64_t n = sn_shape_numel(&c->x[0].shape);
    if (c->x[0].dtype != SN_F32 || c->x[1].dtype != SN_F32 ||
        sn_shape_numel(&c->x[1].shape) != n)
        return false;
    sn_dtype ti = c->x[2].dtype;
    if ((ti != SN_I32 && ti != SN_F32) || sn_shape_numel(&c->x[2].shape) != 1) return false;
    for (int s = 0; s < need; s++)
        if (c->x[3 + s].dtype != SN_F32 || sn_shape_numel(&c->x[3 + s].shape) != n)
            return false;
    return true;
}

static void opt_task(void *vctx, int ith, int nth) {
    const opt_ctx *c = vctx;
    int64_t lo, hi;
    sn_split_range(c->n, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    /* Subnormals flushed (fp_flush_enter): a slot whose gradient stays zero (a pixel that is
     * blank in the batch, a dead ReLU unit) decays geometrically (m by beta1 = 0.9 a step) and
     * is subnormal after ~700 steps; on the tiny MLP 5-7 % of the first layer's m were, and
     * their assists made Adam's update 10x slower than its arithmetic (docs/benchmarks.md,
     * "tiny MLP through fit"). Flushed, such a value becomes 0, which it is to within 1e-38;
     * the variable's bits do not change (an update of ~1e-37 is far below its ulp). */
    unsigned csr = fp_flush_enter();
    isa->opt(c, lo, hi);
    fp_flush_leave(csr);
}

/* var [any] f32, grad [var shape] f32, iterations [i32 scalar: updates done so far],
 * slots [var shape] f32 (SGD momentum; Adam m, v; RMSprop velocity, momentum, average
 * gradient) -> var and slots updated in place */
static sn_status optimizer_run(sn_kcall *k) {
    const sn_attrs *a = k->attr;
    int need = sn_optim_slot_count(a);
    opt_ctx c = {.kind = a->optim.kind, .n = sn_shape_numel(&k->x[0].shape),
                 .var = var_storage(k), .grad = k->in[1]};
    for (int s = 0; s < need; s++) c.slot[s] = (float *)(uintptr_t)k->in[3 + s];
    double iterations = k->x[2].dtype == SN_I32 ? (double)((const int32_t *)k->in[2])[0]
                                                       : (double)((const float *)k->in[2])[0];
    double lr = a->optim.lr, t = iterations + 1;
    c.lr = (float)lr;
    c.b1c = (float)(1 - a->optim.beta1);
    c.b2c = (float)(1 - a->optim.beta2);
    /* Adam's bias correction folded into the step size, as Keras does. */
    c.alpha = (float)(lr * sqrt(1 - pow(a->optim.beta2, t)) / (1 - pow(a->optim.beta1, t)));
    c.eps = (float)a->optim.epsilon;
    c.mom = (float)a->optim.momentum;
    c.rho = (float)a->optim.rho;
    c.rho1 = (float)(1 - a->optim.rho);
    c.wdlr = (float)(a->optim.weight_decay * lr);
    c.decay = a->optim.weight_decay != 0;
    c.nesterov = a->optim.nesterov;
    c.centered = a->optim.centered;
    run_tasks(opt_task, &c, c.n, GRAIN, c.n);
    copy_to_out(k);
    return SN_OK;
}

static sn_kernel k_assign = {.impl = "cpu", .supports = assign_supports, .run = assign_run},
                 k_assign_add = {.impl = "cpu", .supports = assign_add_supports,
                                 .run = assign_add_run},
                 k_optimizer = {.impl = "cpu", .supports = optimizer_supports,
                                .run = optimizer_run};

void sn_cpu_register_state(sn_kernel_table *t) {
#ifdef SN_CPU_X86
    isa = pick_variant(&isa_generic, &isa_avx2, &isa_avx512);
#endif
    k_optimizer.impl = isa->name;
    t->k[SN_OP_ASSIGN] = &k_assign;
    t->k[SN_OP_ASSIGN_ADD] = &k_assign_add;
    t->k[SN_OP_APPLY_OPTIMIZER] = &k_optimizer;
}
