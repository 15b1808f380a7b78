/* Optimizers: Keras's defaults, option checks, slot variables and the update nodes.
 *
 * The arithmetic lives in one fused kernel per variable (SN_OP_APPLY_OPTIMIZER, reference in
 * backend/ref/ref_state.c, fast one in backend/cpu/cpu_state.c) following
 * keras/src/optimizers/{sgd,adam,adamw,rmsprop}.py. Here we only decide which slots each
 * optimizer needs and wire the nodes: slots are ordinary non-trainable variables, so they live
 * in the graph's one variable buffer beside the parameters (one pointer for a checkpoint). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "nn/train/train_impl.h"

sn_optimizer_opts sn_optimizer_defaults(sn_optimizer_type type) {
    sn_optimizer_opts o = {.type = type, .learning_rate = 1e-3, .beta_1 = 0.9, .beta_2 = 0.999,
                           .epsilon = 1e-7, .weight_decay = 0, .momentum = 0, .rho = 0.9,
                           .nesterov = false};
    switch (type) {
    case SN_SGD: o.learning_rate = 0.01; break;
    case SN_ADAMW: o.weight_decay = 0.004; break;
    case SN_ADAM:
    case SN_RMSPROP: break;
    }
    return o;
}

static const struct { const char *name; sn_optimizer_type type; } opt_names[] = {
    {"sgd", SN_SGD}, {"adam", SN_ADAM}, {"adamw", SN_ADAMW}, {"rmsprop", SN_RMSPROP}};

const char *sn_optimizer_name(sn_optimizer_type t) {
    for (size_t i = 0; i < sizeof opt_names / sizeof opt_names[0]; i++)
        if (opt_names[i].type == t) return opt_names[i].name;
    return "?";
}

sn_status sn_optimizer_from_name(const char *name, sn_optimizer_opts *out) {
    if (!name || !out)
        return sn_errorf(SN_ERR_INVALID, "optimizer_from_name: NULL %s", name ? "out" : "name");
    for (size_t i = 0; i < sizeof opt_names / sizeof opt_names[0]; i++) {
        if (strcasecmp(name, opt_names[i].name) == 0) {
            *out = sn_optimizer_defaults(opt_names[i].type);
            return SN_OK;
        }
    }
    return sn_errorf(SN_ERR_INVALID,
                     "unknown optimizer '%s' (expected one of: sgd, adam, adamw, rmsprop)", name);
}

static bool in_unit(double x) { return x >= 0 && x < 1; } /* false for NaN too */

sn_status sn_optimizer_validate(const sn_optimizer_opts *o) {
    if (!o) return sn_errorf(SN_ERR_INVALID, "optimizer: options are NULL");
    const char *n = sn_optimizer_name(o->type);
    if (o->type != SN_SGD && o->type != SN_ADAM && o->type != SN_ADAMW && o->type != SN_RMSPROP)
        return sn_errorf(SN_ERR_INVALID, "optimizer: unknown type %d (expected SN_SGD, SN_ADAM, "
                         "SN_ADAMW or SN_RMSPROP)", (int)o->type);
    if (!(o->learning_rate > 0) || !isfinite(o->learning_rate))
        return sn_errorf(SN_ERR_INVALID, "optimizer %s: learning_rate %g must be a finite number "
                         "> 0", n, o->learning_rate);
    if (!(o->weight_decay >= 0) || !isfinite(o->weight_decay))
        return sn_errorf(SN_ERR_INVALID, "optimizer %s: weight_decay %g must be >= 0", n,
                         o->weight_decay);
    switch (o->type) {
    case SN_SGD:
        if (!(o->momentum >= 0 && o->momentum <= 1))
            return sn_errorf(SN_ERR_INVALID, "optimizer sgd: momentum %g must be in [0, 1]",
                             o->momentum);
        break;
    case SN_ADAM:
    case SN_ADAMW:
        if (!in_unit(o->beta_1) || !in_unit(o->beta_2))
            return sn_errorf(SN_ERR_INVALID, "optimizer %s: beta_1 %g and beta_2 %g must be in "
                             "[0, 1)", n, o->beta_1, o->beta_2);
        if (!(o->epsilon >= 0) || !isfinite(o->epsilon))
            return sn_errorf(SN_ERR_INVALID, "optimizer %s: epsilon %g must be >= 0", n,
                             o->epsilon);
        break;
    case SN_RMSPROP:
        if (!in_unit(o->rho))
            return sn_errorf(SN_ERR_INVALID, "optimizer rmsprop: rho %g must be in [0, 1)", o->rho);
        if (!(o->momentum >= 0 && o->momentum <= 1))
            return sn_errorf(SN_ERR_INVALID, "optimizer rmsprop: momentum %g must be in [0, 1]",
                             o->momentum);
        /* epsilon 0 would divide by zero on the first step where a gradient is 0. */
        if (!(o->epsilon > 0) || !isfinite(o->epsilon))
            return sn_errorf(SN_ERR_INVALID, "optimizer rmsprop: epsilon %g must be > 0",
                             o->epsilon);
        break;
    }
    return SN_OK;
}

static sn_attrs optim_attrs(const sn_optimizer_opts *o);

int sn_optimizer_slot_count(const sn_optimizer_opts *o) {
    sn_attrs a = optim_attrs(o);
    int n = sn_optim_slot_count(&a);
    return n < 0 ? 0 : n;
}

static sn_attrs optim_attrs(const sn_optimizer_opts *o) {
    sn_attrs a;
    memset(&a, 0, sizeof a);
    switch (o->type) {
    case SN_SGD: a.optim.kind = SN_OPTIM_SGD; break;
    case SN_ADAM: a.optim.kind = SN_OPTIM_ADAM; break;
    case SN_ADAMW: a.optim.kind = SN_OPTIM_ADAMW; break;
    case SN_RMSPROP: a.optim.kind = SN_OPTIM_RMSPROP; break;
    }
    a.optim.lr = o->learning_rate;
    a.optim.beta1 = o->beta_1;
    a.optim.beta2 = o->beta_2;
    a.optim.epsilon = o->epsilon;
    a.optim.momentum = o->momentum;
    a.optim.rho = o->rho;
    a.optim.weight_decay = o->weight_decay;
    a.optim.nesterov = o->nesterov;
    a.optim.centered = false;
    return a;
}

/* Keras's slot names, in the order the apply_optimizer kernels read the slots. */
const char *sn_optimizer_slot_name(const sn_optimizer_opts *o, int slot) {
    static const char *slot_names[4][SN_OPTIM_MAX_SLOTS] = {
        [SN_SGD] = {"momentum", NULL},
        [SN_ADAM] = {"momentum", "velocity"},
        [SN_ADAMW] = {"momentum", "velocity"},
        [SN_RMSPROP] = {"velocity", "momentum"}};
    if (!o || (unsigned)o->type > SN_RMSPROP || slot < 0 || slot >= sn_optimizer_slot_count(o))
        return NULL;
    return slot_names[o->type][slot];
}

/* The update kernels of n variables, without the step count: fit counts once per step in
 * sn_optimizer_apply, and sn_optimizer_update's caller counts for itself. */
static sn_status optimizer_update_vars(sn_graph *g, const sn_optimizer_opts *o, int n,
                                       const sn_node *vars, const sn_node *grads,
                                       const sn_node *slots, sn_node iterations,
                                       sn_node *updates) {
    sn_attrs a = optim_attrs(o);
    int ns = sn_optimizer_slot_count(o);
    for (int i = 0; i < n; i++) {
        sn_node in[3 + SN_OPTIM_MAX_SLOTS] = {vars[i], grads[i], iterations};
        for (int s = 0; s < ns; s++) in[3 + s] = slots[i * SN_OPTIM_MAX_SLOTS + s];
        updates[i] = sn_apply_optimizer(g, 3 + ns, in, &a);
        if (updates[i] == SN_NONE)
            return sn_error_context(sn_graph_status(g), "adding the %s update of '%s'",
                                    sn_optimizer_name(o->type), sn_node_name(g, vars[i]));
    }
    return SN_OK;
}

sn_status sn_optimizer_update(sn_graph *g, const sn_optimizer_opts *o, sn_node var, sn_node grad,
                              sn_node iterations, const sn_node *slots, sn_node *out) {
    if (!g || !out)
        return sn_errorf(SN_ERR_INVALID, "optimizer_update: %s is NULL", g ? "out" : "graph");
    SN_TRY(sn_optimizer_validate(o));
    int ns = sn_optimizer_slot_count(o);
    if (ns > 0 && !slots)
        return sn_errorf(SN_ERR_INVALID, "optimizer_update: %s needs %d slot variables; slots is "
                         "NULL", sn_optimizer_name(o->type), ns);
    sn_node sl[SN_OPTIM_MAX_SLOTS] = {SN_NONE, SN_NONE};
    for (int s = 0; s < ns; s++) sl[s] = slots[s];
    return optimizer_update_vars(g, o, 1, &var, &grad, sl, iterations, out);
}

sn_status sn_optimizer_create_slots(sn_graph *g, const sn_optimizer_opts *o, int n,
                                    const sn_node *vars, sn_node *slots) {
    /* Keras's slot names: "<optimizer>/<variable path>_momentum" etc. */
    SN_TRY(sn_optimizer_validate(o));
    int ns = sn_optimizer_slot_count(o);
    for (int i = 0; i < n; i++) {
        for (int s = 0; s < SN_OPTIM_MAX_SLOTS; s++) slots[i * SN_OPTIM_MAX_SLOTS + s] = SN_NONE;
        sn_shape shape = sn_node_shape(g, vars[i]);
        sn_dtype dt = sn_node_dtype(g, vars[i]);
        const char *vn = sn_node_name(g, vars[i]);
        for (int s = 0; s < ns; s++) {
            char name[256];
            snprintf(name, sizeof name, "%s/%s_%s", sn_optimizer_name(o->type), vn ? vn : "var",
                     sn_optimizer_slot_name(o, s));
            sn_node v = sn_variable(g, name, dt, &shape, false);
            if (v == SN_NONE)
                return sn_error_context(sn_graph_status(g), "creating optimizer slot '%s'", name);
            slots[i * SN_OPTIM_MAX_SLOTS + s] = v;
        }
    }
    return SN_OK;
}

sn_status sn_optimizer_apply(sn_graph *g, const sn_optimizer_opts *o, int n, const sn_node *vars,
                             const sn_node *grads, const sn_node *slots, sn_node iterations,
                             sn_node *updates) {
    SN_TRY(sn_optimizer_validate(o));
    SN_TRY(optimizer_update_vars(g, o, n, vars, grads, slots, iterations, updates));
    updates[n] = sn_assign_add(g, iterations, sn_scalar(g, SN_I32, 1));
    if (updates[n] == SN_NONE)
        return sn_error_context(sn_graph_status(g), "adding the iteration counter update");
    return SN_OK;
}
