/* What every layer shares (layers_impl.h): allocation, argument checks, variables created and
 * initialised in one step, and the regularizers a layer registers at build. */
#include <math.h>
#include <string.h>

#include "nn/layers/initializers.h"
#include "nn/layers/layers_impl.h"

const char *sn_layer_kshape(const sn_shape *s, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "(None");
    for (int i = 0; i < s->ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, ", %lld", (long long)s->dim[i]);
    if (n < cap) snprintf(buf + n, cap - n, ")");
    return buf;
}

sn_status sn_layer_shape_error(const sn_layer *l, const sn_shape *in, const char *expected) {
    char b[160];
    return sn_errorf(SN_ERR_SHAPE, "layer '%s' (%s): got input of shape %s, expected %s",
                     l->name ? l->name : "?", l->vt->class_name,
                     sn_layer_kshape(in, b, sizeof b), expected);
}

sn_layer *sn_layer_alloc(const sn_layer_vtable *vt) {
    sn_layer *l = sn_calloc(1, sizeof *l);
    if (!l) return NULL;
    l->vt = vt;
    l->dtype = SN_F32;
    return l;
}

sn_layer *sn_layer_bad_arg(const char *fmt, const char *what, double v) {
    sn_errorf(SN_ERR_INVALID, fmt, what, v);
    return NULL;
}

sn_status sn_check_initializer(const char *cls, const char *field, const sn_initializer *in) {
    if (!sn_initializer_type_name(in->type))
        return sn_errorf(SN_ERR_INVALID, "%s: %s type %d is not an sn_initializer_type", cls,
                         field, (int)in->type);
    switch (in->type) {
    case SN_INIT_CONSTANT:
        if (!isfinite(in->value))
            return sn_errorf(SN_ERR_INVALID, "%s: %s constant value %g is not finite", cls, field,
                             in->value);
        break;
    case SN_INIT_RANDOM_UNIFORM:
        if (!(isfinite(in->minval) && isfinite(in->maxval) && in->minval <= in->maxval))
            return sn_errorf(SN_ERR_INVALID, "%s: %s random_uniform minval %g, maxval %g, "
                             "expected finite minval <= maxval", cls, field, in->minval,
                             in->maxval);
        break;
    case SN_INIT_RANDOM_NORMAL:
    case SN_INIT_TRUNCATED_NORMAL:
        if (!(isfinite(in->mean) && isfinite(in->stddev) && in->stddev >= 0))
            return sn_errorf(SN_ERR_INVALID, "%s: %s %s mean %g, stddev %g, expected finite "
                             "values and stddev >= 0", cls, field,
                             sn_initializer_type_name(in->type), in->mean, in->stddev);
        break;
    case SN_INIT_ORTHOGONAL:
        if (!isfinite(in->gain))
            return sn_errorf(SN_ERR_INVALID, "%s: %s orthogonal gain %g is not finite", cls,
                             field, in->gain);
        break;
    default: break;
    }
    return SN_OK;
}

sn_status sn_check_regularizer(const char *cls, const char *field, const sn_regularizer *r) {
    if (!(isfinite(r->l1) && r->l1 >= 0 && isfinite(r->l2) && r->l2 >= 0))
        return sn_errorf(SN_ERR_INVALID, "%s: %s l1 %g, l2 %g, expected finite factors >= 0",
                         cls, field, r->l1, r->l2);
    return SN_OK;
}

sn_status sn_layer_add_var(sn_layer *l, sn_graph *g, const char *var, const sn_shape *shape,
                           bool trainable, const sn_initializer *init,
                           sn_initializer_type default_type, sn_rng *rng, sn_node *out) {
    if (l->n_vars >= SN_LAYER_MAX_VARS)
        return sn_errorf(SN_ERR_STATE, "layer '%s' (%s): more than %d variables", l->name,
                         l->vt->class_name, SN_LAYER_MAX_VARS);
    char name[256];
    snprintf(name, sizeof name, "%s/%s", l->name, var);
    sn_node v = sn_variable(g, name, l->dtype, shape, trainable);
    if (v == SN_NONE)
        return sn_error_context(sn_graph_status(g), "layer '%s' (%s): creating '%s'", l->name,
                                l->vt->class_name, name);
    char what[300];
    snprintf(what, sizeof what, "layer '%s' (%s) %s", l->name, l->vt->class_name, var);
    /* rng NULL: the model is built for loading (sn_model_build_for_loading), every variable
     * is overwritten next; it stays zero (sn_variable zeroes it). */
    if (rng)
        SN_TRY(sn_init_fill(init, default_type, sn_variable_data(g, v), l->dtype, shape, 0, 0,
                            rng, what));
    l->vars[l->n_vars] = v;
    l->var_names[l->n_vars] = var;
    l->n_vars++;
    if (out) *out = v;
    return SN_OK;
}

sn_status sn_layer_add_regularizer(sn_layer *l, sn_node var, const sn_regularizer *r,
                                   const char *what) {
    if (!r || (r->l1 == 0.0 && r->l2 == 0.0)) return SN_OK;
    char cls[200];
    snprintf(cls, sizeof cls, "layer '%s' (%s)", l->name, l->vt->class_name);
    SN_TRY(sn_check_regularizer(cls, what ? what : "regularizer", r));
    if (l->n_regs >= SN_LAYER_MAX_VARS)
        return sn_errorf(SN_ERR_STATE, "%s: more than %d regularizers", cls, SN_LAYER_MAX_VARS);
    l->regs[l->n_regs].var = var;
    l->regs[l->n_regs].r = *r;
    l->n_regs++;
    return SN_OK;
}

sn_status sn_check_kernel_bias(const char *cls, const sn_initializer *kernel_init,
                               const sn_initializer *bias_init,
                               const sn_regularizer *kernel_reg,
                               const sn_regularizer *bias_reg) {
    SN_TRY(sn_check_initializer(cls, "kernel_initializer", kernel_init));
    SN_TRY(sn_check_initializer(cls, "bias_initializer", bias_init));
    SN_TRY(sn_check_regularizer(cls, "kernel_regularizer", kernel_reg));
    return sn_check_regularizer(cls, "bias_regularizer", bias_reg);
}

sn_status sn_layer_add_kernel_bias(sn_layer *l, sn_graph *g, const sn_shape *ks, int64_t units,
                                   bool use_bias, const sn_initializer *kernel_init,
                                   const sn_initializer *bias_init,
                                   const sn_regularizer *kernel_reg,
                                   const sn_regularizer *bias_reg, sn_rng *rng) {
    sn_node v;
    SN_TRY(sn_layer_add_var(l, g, "kernel", ks, true, kernel_init, SN_INIT_GLOROT_UNIFORM, rng,
                            &v));
    SN_TRY(sn_layer_add_regularizer(l, v, kernel_reg, "kernel_regularizer"));
    if (!use_bias) return SN_OK;
    sn_shape bs = {.ndim = 1, .dim = {units}};
    SN_TRY(sn_layer_add_var(l, g, "bias", &bs, true, bias_init, SN_INIT_ZEROS, rng, &v));
    return sn_layer_add_regularizer(l, v, bias_reg, "bias_regularizer");
}

sn_status sn_layer_add_scale_center(sn_layer *l, sn_graph *g, int64_t features, bool scale,
                                    bool center, const sn_initializer *gamma_init,
                                    const sn_initializer *beta_init,
                                    const sn_regularizer *gamma_reg,
                                    const sn_regularizer *beta_reg, sn_rng *rng) {
    sn_shape cs = {.ndim = 1, .dim = {features}};
    sn_node v;
    if (scale) {
        SN_TRY(sn_layer_add_var(l, g, "gamma", &cs, true, gamma_init, SN_INIT_ONES, rng, &v));
        SN_TRY(sn_layer_add_regularizer(l, v, gamma_reg, "gamma_regularizer"));
    }
    if (center) {
        SN_TRY(sn_layer_add_var(l, g, "beta", &cs, true, beta_init, SN_INIT_ZEROS, rng, &v));
        SN_TRY(sn_layer_add_regularizer(l, v, beta_reg, "beta_regularizer"));
    }
    return SN_OK;
}
