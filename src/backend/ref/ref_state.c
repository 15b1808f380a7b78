/* Reference side-effect kernels: assign, assign_add and the fused optimizer updates (SGD with
 * momentum/Nesterov, Adam, AdamW, RMSprop) with Keras 3 semantics. They write into their first
 * input's storage (the variable): the planner makes c->out alias in[0] for side-effect ops.
 * Eager callers may give a separate out; it then receives a copy of the new value. */
#include <float.h>

#include "backend/ref/ref_common.h"

/* The variable's storage. Inputs are const for ordinary kernels; for side-effect ops in[0] is
 * the variable the op exists to update. */
static void *var_storage(const sn_kcall *c) { return (void *)(uintptr_t)c->in[0]; }

/* Makes c->out hold the variable's new value when it is not the variable itself. */
static void copy_to_out(const sn_kcall *c) {
    if (c->out == NULL || c->out == c->in[0]) return;
    int64_t n = sn_shape_numel(&c->x[0].shape);
    sn_dtype tv = c->x[0].dtype, to = c->y.dtype;
    if (tv == to) {
        memcpy(c->out, c->in[0], (size_t)n * sn_dtype_size(to));
        return;
    }
    for (int64_t i = 0; i < n; i++) sn_store(to, c->out, i, sn_load(tv, c->in[0], i));
}

/* var [any], value [var shape, or broadcastable to it for assign_add] -> var updated */
static sn_status assign_common(sn_kcall *c, bool add) {
    const sn_shape *vs = &c->x[0].shape;
    sn_dtype tv = c->x[0].dtype, tx = c->x[1].dtype;
    void *var = var_storage(c);
    int64_t st[SN_MAX_DIMS];
    ref_bcast_strides(&c->x[1].shape, vs, st);
    ref_iter it;
    ref_iter_init(&it, vs);
    int kx = ref_iter_track(&it, st, 0);
    int64_t n = sn_shape_numel(vs);
    for (int64_t i = 0; i < n; i++, ref_iter_next(&it)) {
        double v = sn_load(tx, c->in[1], it.off[kx]);
        sn_store(tv, var, i, add ? sn_load(tv, var, i) + v : v);
    }
    copy_to_out(c);
    return SN_OK;
}

static sn_status assign_run(sn_kcall *c) { return assign_common(c, false); }
static sn_status assign_add_run(sn_kcall *c) { return assign_common(c, true); }

/* The optimizer update treats subnormals as zero, as the fast kernel (backend/cpu/cpu_state.c,
 * FTZ and DAZ) and TensorFlow's kernels do: subnormal inputs read as zero, and a result that
 * is subnormal in its dtype is stored as a zero of its sign. */
static double tiny_of(sn_dtype dt) { return dt == SN_F64 ? DBL_MIN : FLT_MIN; }
static double load_daz(sn_dtype dt, const void *p, int64_t i) {
    double x = sn_load(dt, p, i);
    return fabs(x) < tiny_of(dt) ? copysign(0.0, x) : x;
}
static void store_ftz(sn_dtype dt, void *p, int64_t i, double x) {
    sn_store(dt, p, i, x);
    double y = sn_load(dt, p, i); /* rounded to the dtype first: the hardware flushes that */
    if (y != 0 && fabs(y) < tiny_of(dt)) sn_store(dt, p, i, copysign(0.0, y));
}

static const char *optim_name(sn_optimizer_kind k) {
    switch (k) {
    case SN_OPTIM_SGD: return "sgd";
    case SN_OPTIM_ADAM: return "adam";
    case SN_OPTIM_ADAMW: return "adamw";
    case SN_OPTIM_RMSPROP: return "rmsprop";
    }
    return "?";
}

/* var [any], grad [var shape], iterations [i32 scalar: updates done so far], slots [var shape]
 * in the order: SGD momentum; Adam/AdamW m, v; RMSprop velocity, then momentum (when
 * momentum > 0), then the average gradient (when centered) -> var and slots updated in place.
 * Follows keras/src/optimizers/{sgd,adam,adamw,rmsprop}.py; the iteration counter itself is
 * advanced by a separate assign_add node. */
static sn_status apply_optimizer_run(sn_kcall *c) {
    const sn_attrs *a = c->attr;
    int need = sn_optim_slot_count(a);
    if (need < 0)
        return sn_errorf(SN_ERR_INVALID, "apply_optimizer: unknown optimizer kind %d",
                         (int)a->optim.kind);
    if (c->n_in < 3 + need)
        return sn_errorf(SN_ERR_INVALID,
                         "apply_optimizer: %s needs %d slot inputs after (var, grad, iterations), "
                         "got %d",
                         optim_name(a->optim.kind), need, c->n_in - 3);
    void *var = var_storage(c);
    void *slot[SN_MAX_INPUTS] = {0};
    sn_dtype ts[SN_MAX_INPUTS] = {0};
    for (int s = 0; s < need; s++) {
        slot[s] = (void *)(uintptr_t)c->in[3 + s];
        ts[s] = c->x[3 + s].dtype;
    }
    sn_dtype tv = c->x[0].dtype, tg = c->x[1].dtype;
    double iterations = sn_load(c->x[2].dtype, c->in[2], 0);
    double lr = a->optim.lr, eps = a->optim.epsilon, mom = a->optim.momentum;
    double b1 = a->optim.beta1, b2 = a->optim.beta2, rho = a->optim.rho;
    double wd = a->optim.weight_decay;
    /* Adam's bias correction folded into the step size, as Keras does. */
    double t = iterations + 1;
    double alpha = lr * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
    int64_t n = sn_shape_numel(&c->x[0].shape);

    for (int64_t i = 0; i < n; i++) {
        double w = load_daz(tv, var, i), g = load_daz(tg, c->in[1], i);
        /* Decoupled weight decay (Keras 3 applies it before the update, for every optimizer
         * whose weight_decay is set; AdamW is the one that sets it by default). */
        if (wd != 0) w -= w * wd * lr;
        switch (a->optim.kind) {
        case SN_OPTIM_SGD:
            if (mom == 0) {
                w -= lr * g;
            } else {
                double m = mom * load_daz(ts[0], slot[0], i) - lr * g;
                store_ftz(ts[0], slot[0], i, m);
                w += a->optim.nesterov ? mom * m - lr * g : m;
            }
            break;
        case SN_OPTIM_ADAM:
        case SN_OPTIM_ADAMW: {
            double m = load_daz(ts[0], slot[0], i), v = load_daz(ts[1], slot[1], i);
            m += (g - m) * (1 - b1);
            v += (g * g - v) * (1 - b2);
            store_ftz(ts[0], slot[0], i, m);
            store_ftz(ts[1], slot[1], i, v);
            w -= alpha * m / (sqrt(v) + eps);
            break;
        }
        case SN_OPTIM_RMSPROP: {
            double v = rho * load_daz(ts[0], slot[0], i) + (1 - rho) * g * g;
            store_ftz(ts[0], slot[0], i, v);
            double denom = v + eps;
            if (a->optim.centered) {
                int sa = mom > 0 ? 2 : 1;
                double avg = rho * load_daz(ts[sa], slot[sa], i) + (1 - rho) * g;
                store_ftz(ts[sa], slot[sa], i, avg);
                denom = v - avg * avg + eps;
            }
            double inc = lr * g / sqrt(denom);
            if (mom > 0) {
                double mm = mom * load_daz(ts[1], slot[1], i) + inc;
                store_ftz(ts[1], slot[1], i, mm);
                w -= mm;
            } else {
                w -= inc;
            }
            break;
        }
        }
        store_ftz(tv, var, i, w);
    }
    copy_to_out(c);
    return SN_OK;
}

static const sn_kernel k_assign = REF_KERNEL(assign_run), k_assign_add = REF_KERNEL(assign_add_run),
                       k_apply_optimizer = REF_KERNEL(apply_optimizer_run);

/* x [any] f32 -> the replicas' sum [x's shape]: the collective the node's attributes name
 * (op_desc.h) does the work, on host memory; every backend whose memory the host addresses
 * shares this row. A GPU backend gets its own row (NCCL on the call's stream). */
static sn_status all_reduce_run(sn_kcall *c) {
    const sn_attrs *a = c->attr;
    if (!a->allreduce.comm)
        return sn_errorf(SN_ERR_INVALID, "all_reduce (node %d): no collective attached", (int)c->id);
    int phase = a->allreduce.phase | (a->allreduce.to_first ? SN_ALLREDUCE_TO_FIRST : 0);
    return a->allreduce.comm->vt->run(a->allreduce.comm, a->allreduce.replica, phase,
                                      c->in[0], c->out, (size_t)sn_shape_numel(&c->y.shape),
                                      c->stream);
}

static bool all_reduce_supports(const sn_kcall *c) {
    return c->y.dtype == SN_F32 && c->x[0].dtype == SN_F32;
}

static const sn_kernel k_all_reduce = {.impl = "ref", .supports = all_reduce_supports,
                                       .run = all_reduce_run};

void sn_ref_register_state(sn_kernel_table *t) {
    t->k[SN_OP_ALL_REDUCE] = &k_all_reduce;
    t->k[SN_OP_ASSIGN] = &k_assign;
    t->k[SN_OP_ASSIGN_ADD] = &k_assign_add;
    t->k[SN_OP_APPLY_OPTIMIZER] = &k_apply_optimizer;
}
