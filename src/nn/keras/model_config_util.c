/* Field readers for Keras configs (model_config.h): each checks the JSON type and range and
 * says, on a mismatch, which field had which value and what was expected. */
#include <math.h>
#include <string.h>

#include "nn/keras/model_config.h"

const char *sn_cfg_type(const json_t *v) {
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "?";
}

const char *sn_cfg_show(const json_t *v, char *buf, size_t cap) {
    if (!v) {
        snprintf(buf, cap, "(absent)");
        return buf;
    }
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s) {
        snprintf(buf, cap, "%s", sn_cfg_type(v));
        return buf;
    }
    if (strlen(s) + 1 > cap && cap > 4) snprintf(buf, cap, "%.*s...", (int)(cap - 4), s);
    else snprintf(buf, cap, "%s", s);
    free(s);
    return buf;
}

sn_status sn_cfg_known_keys(const json_t *obj, const char *what, const char *const *known) {
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        bool ok = false;
        for (int i = 0; known[i] && !ok; i++) ok = strcmp(known[i], key) == 0;
        if (!ok) {
            char list[768] = "";
            size_t n = 0;
            for (int i = 0; known[i] && n < sizeof list; i++)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", known[i]);
            char b[96];
            return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' (value %s) is not one sinter knows "
                             "for %s (a newer Keras version, or an option sinter does not "
                             "implement); known fields: %s", key, sn_cfg_show(v, b, sizeof b),
                             what, list);
        }
    }
    return SN_OK;
}

static sn_status missing(const char *key, const char *expected) {
    return sn_errorf(SN_ERR_FORMAT, "field '%s' is missing (expected %s)", key, expected);
}

static sn_status wrong(const char *key, const json_t *v, const char *expected) {
    char b[96];
    return sn_errorf(SN_ERR_FORMAT, "field '%s' is %s (%s), expected %s", key,
                     sn_cfg_show(v, b, sizeof b), sn_cfg_type(v), expected);
}

sn_status sn_cfg_int(const json_t *obj, const char *key, bool required, int64_t min,
                     int64_t max, int64_t *out) {
    const json_t *v = json_object_get(obj, key);
    char e[96];
    snprintf(e, sizeof e, "an integer in [%lld, %lld]", (long long)min, (long long)max);
    if (!v || json_is_null(v)) return required ? missing(key, e) : SN_OK;
    /* Python writes 2.0 for a float-typed size; only integral values are accepted. */
    double d;
    if (json_is_integer(v)) d = (double)json_integer_value(v);
    else if (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v)) d = json_real_value(v);
    else return wrong(key, v, e);
    if (d < (double)min || d > (double)max) {
        char b[64];
        return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is %s, expected %s", key,
                         sn_cfg_show(v, b, sizeof b), e);
    }
    *out = (int64_t)d;
    return SN_OK;
}

sn_status sn_cfg_num(const json_t *obj, const char *key, bool required, double min,
                     double max, double *out) {
    const json_t *v = json_object_get(obj, key);
    char e[96];
    snprintf(e, sizeof e, "a number in [%g, %g]", min, max);
    if (!v || json_is_null(v)) return required ? missing(key, e) : SN_OK;
    if (!json_is_number(v)) return wrong(key, v, e);
    double d = json_number_value(v);
    if (!(d >= min && d <= max)) {
        char b[64];
        return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is %s, expected %s", key,
                         sn_cfg_show(v, b, sizeof b), e);
    }
    *out = d;
    return SN_OK;
}

sn_status sn_cfg_bool(const json_t *obj, const char *key, bool required, bool *out) {
    const json_t *v = json_object_get(obj, key);
    if (!v) return required ? missing(key, "true or false") : SN_OK;
    if (!json_is_boolean(v)) return wrong(key, v, "true or false");
    *out = json_is_true(v);
    return SN_OK;
}

sn_status sn_cfg_str(const json_t *obj, const char *key, bool required, const char **out) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return required ? missing(key, "a string") : SN_OK;
    if (!json_is_string(v)) return wrong(key, v, "a string");
    *out = json_string_value(v);
    return SN_OK;
}

sn_status sn_cfg_must(const json_t *obj, const char *key, const json_t *allowed,
                      const char *supported) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v) || (allowed && json_equal((json_t *)v, (json_t *)allowed)))
        return SN_OK;
    char b[96];
    return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is %s; sinter supports %s", key,
                     sn_cfg_show(v, b, sizeof b), supported);
}

sn_status sn_cfg_axis_is_last(const json_t *obj, const char *supported) {
    const json_t *ax = json_object_get(obj, "axis");
    bool last = !ax || (json_is_integer(ax) && json_integer_value(ax) == -1) ||
                (json_is_array(ax) && json_array_size(ax) == 1 &&
                 json_is_integer(json_array_get(ax, 0)) &&
                 json_integer_value(json_array_get(ax, 0)) == -1);
    if (last) return SN_OK;
    char b[64];
    return sn_errorf(SN_ERR_UNSUPPORTED, "field 'axis' is %s; sinter normalises over the last "
                     "axis only (%s)", sn_cfg_show(ax, b, sizeof b), supported);
}

sn_status sn_cfg_ints(const json_t *obj, const char *key, bool required, int n, int64_t min,
                      int64_t *out) {
    const json_t *v = json_object_get(obj, key);
    char e[128];
    snprintf(e, sizeof e, "an integer >= %lld or a list of %d of them", (long long)min, n);
    if (!v || json_is_null(v)) return required ? missing(key, e) : SN_OK;
    int64_t tmp[8];
    if (json_is_integer(v)) {
        for (int i = 0; i < n; i++) tmp[i] = json_integer_value(v);
    } else if (json_is_array(v) && (int)json_array_size(v) == n && n <= 8) {
        for (int i = 0; i < n; i++) {
            const json_t *x = json_array_get(v, (size_t)i);
            if (!json_is_integer(x)) return wrong(key, v, e);
            tmp[i] = json_integer_value(x);
        }
    } else {
        return wrong(key, v, e);
    }
    for (int i = 0; i < n; i++) {
        if (tmp[i] < min || tmp[i] > INT32_MAX) {
            char b[64];
            return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is %s, expected %s", key,
                             sn_cfg_show(v, b, sizeof b), e);
        }
        out[i] = tmp[i];
    }
    return SN_OK;
}

sn_status sn_cfg_sides_2d(const json_t *obj, const char *key, int64_t out[4]) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return SN_OK;
    int64_t p[4] = {0, 0, 0, 0};
    bool ok = true;
    if (json_is_integer(v)) {
        p[0] = p[1] = p[2] = p[3] = json_integer_value(v);
    } else if (json_is_array(v) && json_array_size(v) == 2) {
        for (int a = 0; a < 2 && ok; a++) {
            const json_t *e = json_array_get(v, (size_t)a);
            if (json_is_integer(e)) {
                p[2 * a] = p[2 * a + 1] = json_integer_value(e);
            } else if (json_is_array(e) && json_array_size(e) == 2 &&
                       json_is_integer(json_array_get(e, 0)) &&
                       json_is_integer(json_array_get(e, 1))) {
                p[2 * a] = json_integer_value(json_array_get(e, 0));
                p[2 * a + 1] = json_integer_value(json_array_get(e, 1));
            } else {
                ok = false;
            }
        }
    } else {
        ok = false;
    }
    for (int k = 0; k < 4 && ok; k++) ok = p[k] >= 0 && p[k] <= INT32_MAX;
    if (!ok) {
        char b[96];
        return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is %s, expected an int, a pair or "
                         "[[top, bottom], [left, right]] of ints >= 0", key,
                         sn_cfg_show(v, b, sizeof b));
    }
    for (int k = 0; k < 4; k++) out[k] = p[k];
    return SN_OK;
}

sn_status sn_cfg_object(const json_t *obj, const char *what, const char *expected_module,
                        const char **cls, const json_t **cfg) {
    char b[96];
    if (!json_is_object(obj))
        return sn_errorf(SN_ERR_FORMAT, "%s is %s (%s), expected a serialised Keras object "
                         "{\"module\", \"class_name\", \"config\"}", what,
                         sn_cfg_show(obj, b, sizeof b), sn_cfg_type(obj));
    const char *c = NULL, *mod = NULL, *reg = NULL;
    if (sn_cfg_str(obj, "class_name", true, &c) != SN_OK)
        return sn_error_context(SN_ERR_FORMAT, "%s", what);
    if (sn_cfg_str(obj, "module", false, &mod) != SN_OK ||
        sn_cfg_str(obj, "registered_name", false, &reg) != SN_OK)
        return sn_error_context(SN_ERR_FORMAT, "%s '%s'", what, c);
    /* Keras's own objects have module "keras" or "keras.<package>" and no registered name
     * (or their own class name); anything else is user code sinter cannot run. */
    bool keras_module = !mod || strcmp(mod, "keras") == 0 || strncmp(mod, "keras.", 6) == 0;
    if (!keras_module || (reg && strcmp(reg, c) != 0))
        return sn_errorf(SN_ERR_UNSUPPORTED, "%s '%s' is a custom object (module '%s', "
                         "registered_name '%s'); sinter reads only Keras's built-in classes "
                         "(module keras.%s)", what, c, mod ? mod : "", reg ? reg : "null",
                         expected_module);
    const json_t *k = json_object_get(obj, "config");
    if (k && !json_is_object(k) && !json_is_null(k))
        return sn_errorf(SN_ERR_FORMAT, "%s '%s': config is %s, expected an object", what, c,
                         sn_cfg_type(k));
    *cls = c;
    *cfg = k && json_is_object(k) ? k : NULL;
    return SN_OK;
}

sn_status sn_cfg_activation(const json_t *obj, const char *key, sn_activation *out) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return SN_OK; /* Keras's default: linear (or the layer's) */
    if (!json_is_string(v)) {
        char b[96];
        return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is %s (%s): a custom activation; "
                         "sinter supports Keras's activations by name", key,
                         sn_cfg_show(v, b, sizeof b), sn_cfg_type(v));
    }
    sn_status st = sn_activation_from_name(json_string_value(v), out);
    return st == SN_OK ? SN_OK : sn_error_context(SN_ERR_UNSUPPORTED, "field '%s'", key);
}

/* Keras's initializer classes and the config fields each one has. */
sn_status sn_cfg_initializer(const json_t *obj, const char *key, sn_initializer *out) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = sn_initializer_defaults(SN_INIT_DEFAULT);
        return SN_OK;
    }
    if (json_is_string(v)) { /* an initializer by name, as Keras also accepts */
        sn_status st = sn_initializer_from_name(json_string_value(v), out);
        return st == SN_OK ? SN_OK : sn_error_context(SN_ERR_UNSUPPORTED, "field '%s'", key);
    }
    char what[96];
    snprintf(what, sizeof what, "field '%s'", key);
    const char *cls;
    const json_t *cfg;
    SN_TRY(sn_cfg_object(v, what, "initializers", &cls, &cfg));
    sn_initializer in;
    if (sn_initializer_from_name(cls, &in) != SN_OK || in.type == SN_INIT_DEFAULT)
        return sn_error_context(SN_ERR_UNSUPPORTED, "%s", what);
    static const char *const seeded[] = {"seed", NULL};
    static const char *const scaling[] = {"seed", "input_axes", "output_axes", NULL};
    static const char *const uniform[] = {"seed", "minval", "maxval", NULL};
    static const char *const normal[] = {"seed", "mean", "stddev", NULL};
    static const char *const orth[] = {"seed", "gain", NULL};
    static const char *const constant[] = {"value", NULL};
    static const char *const none[] = {NULL};
    const char *const *known = none;
    switch (in.type) {
    case SN_INIT_GLOROT_UNIFORM: case SN_INIT_GLOROT_NORMAL: case SN_INIT_HE_UNIFORM:
    case SN_INIT_HE_NORMAL: case SN_INIT_LECUN_UNIFORM: case SN_INIT_LECUN_NORMAL:
        known = scaling; break;
    case SN_INIT_RANDOM_UNIFORM: known = uniform; break;
    case SN_INIT_RANDOM_NORMAL: case SN_INIT_TRUNCATED_NORMAL: known = normal; break;
    case SN_INIT_ORTHOGONAL: known = orth; break;
    case SN_INIT_CONSTANT: known = constant; break;
    default: known = in.type == SN_INIT_ZEROS || in.type == SN_INIT_ONES ? none : seeded; break;
    }
    sn_status st = SN_OK;
    if (cfg) {
        char cw[128];
        snprintf(cw, sizeof cw, "initializer %s", cls);
        st = sn_cfg_known_keys(cfg, cw, known);
        /* input_axes/output_axes are for EinsumDense's kernels; sinter's are plain. */
        if (st == SN_OK) st = sn_cfg_must(cfg, "input_axes", NULL, "null");
        if (st == SN_OK) st = sn_cfg_must(cfg, "output_axes", NULL, "null");
        int64_t seed = -1;
        if (st == SN_OK) st = sn_cfg_int(cfg, "seed", false, 0, INT64_MAX, &seed);
        if (st == SN_OK && seed >= 0) {
            in.has_seed = true;
            in.seed = (uint64_t)seed;
        }
        if (st == SN_OK) st = sn_cfg_num(cfg, "minval", false, -HUGE_VAL, HUGE_VAL, &in.minval);
        if (st == SN_OK) st = sn_cfg_num(cfg, "maxval", false, -HUGE_VAL, HUGE_VAL, &in.maxval);
        if (st == SN_OK) st = sn_cfg_num(cfg, "mean", false, -HUGE_VAL, HUGE_VAL, &in.mean);
        if (st == SN_OK) st = sn_cfg_num(cfg, "stddev", false, 0, HUGE_VAL, &in.stddev);
        if (st == SN_OK) st = sn_cfg_num(cfg, "gain", false, -HUGE_VAL, HUGE_VAL, &in.gain);
        if (st == SN_OK) st = sn_cfg_num(cfg, "value", false, -HUGE_VAL, HUGE_VAL, &in.value);
    }
    if (st != SN_OK) return sn_error_context(st, "%s (%s)", what, cls);
    *out = in;
    return SN_OK;
}

sn_status sn_cfg_regularizer(const json_t *obj, const char *key, sn_regularizer *out) {
    const json_t *v = json_object_get(obj, key);
    *out = (sn_regularizer){0, 0};
    if (!v || json_is_null(v)) return SN_OK;
    char what[96];
    snprintf(what, sizeof what, "field '%s'", key);
    const char *cls = NULL;
    const json_t *cfg = NULL;
    if (json_is_string(v)) {
        cls = json_string_value(v); /* "l1", "l2", "l1_l2": Keras's defaults of 0.01 */
    } else {
        SN_TRY(sn_cfg_object(v, what, "regularizers", &cls, &cfg));
    }
    static const char *const k1[] = {"l1", NULL}, *const k2[] = {"l2", NULL},
                             *const k12[] = {"l1", "l2", NULL};
    const char *const *known;
    if (!strcmp(cls, "L1") || !strcmp(cls, "l1")) {
        known = k1;
        out->l1 = 0.01;
    } else if (!strcmp(cls, "L2") || !strcmp(cls, "l2")) {
        known = k2;
        out->l2 = 0.01;
    } else if (!strcmp(cls, "L1L2") || !strcmp(cls, "l1_l2")) {
        known = k12;
        /* Keras's L1L2() defaults both to 0.0; the function name l1_l2 to 0.01 each. */
        out->l1 = out->l2 = cls[0] == 'l' ? 0.01 : 0.0;
    } else {
        return sn_errorf(SN_ERR_UNSUPPORTED, "%s: regularizer '%s' is not supported (sinter "
                         "supports L1, L2, L1L2 and their names l1, l2, l1_l2)", what, cls);
    }
    sn_status st = SN_OK;
    if (cfg) {
        char cw[96];
        snprintf(cw, sizeof cw, "regularizer %s", cls);
        st = sn_cfg_known_keys(cfg, cw, known);
        if (st == SN_OK) st = sn_cfg_num(cfg, "l1", false, 0, HUGE_VAL, &out->l1);
        if (st == SN_OK) st = sn_cfg_num(cfg, "l2", false, 0, HUGE_VAL, &out->l2);
    }
    return st == SN_OK ? SN_OK : sn_error_context(st, "%s (%s)", what, cls);
}

json_t *sn_cfg_keras_object(const char *module, const char *cls, json_t *cfg) {
    json_t *o = json_object();
    if (!o || !cfg) {
        json_decref(o);
        json_decref(cfg);
        sn_errorf(SN_ERR_NOMEM, "building a Keras config: out of memory");
        return NULL;
    }
    json_object_set_new(o, "module", json_string(module));
    json_object_set_new(o, "class_name", json_string(cls));
    json_object_set_new(o, "config", cfg);
    json_object_set_new(o, "registered_name", json_null());
    return o;
}

json_t *sn_cfg_dtype_policy(bool mixed_bfloat16) {
    return sn_cfg_keras_object("keras", "DTypePolicy",
                               json_pack("{s:s}", "name", mixed_bfloat16 ? "mixed_bfloat16"
                                                                         : "float32"));
}

/* ---- writing initializers and regularizers (model_config.h) ------------------------------ */

json_t *sn_cfg_init_json(const sn_initializer *in, sn_initializer_type dflt) {
    sn_initializer v = *in;
    if (v.type == SN_INIT_DEFAULT) v = sn_initializer_defaults(dflt);
    json_t *c = json_object();
    json_t *seed = v.has_seed ? json_integer((json_int_t)v.seed) : json_null();
    switch (v.type) {
    case SN_INIT_ZEROS: case SN_INIT_ONES: json_decref(seed); break;
    case SN_INIT_CONSTANT:
        json_decref(seed);
        json_object_set_new(c, "value", json_real(v.value));
        break;
    case SN_INIT_RANDOM_UNIFORM:
        json_object_set_new(c, "seed", seed);
        json_object_set_new(c, "minval", json_real(v.minval));
        json_object_set_new(c, "maxval", json_real(v.maxval));
        break;
    case SN_INIT_RANDOM_NORMAL: case SN_INIT_TRUNCATED_NORMAL:
        json_object_set_new(c, "seed", seed);
        json_object_set_new(c, "mean", json_real(v.mean));
        json_object_set_new(c, "stddev", json_real(v.stddev));
        break;
    case SN_INIT_ORTHOGONAL:
        json_object_set_new(c, "seed", seed);
        json_object_set_new(c, "gain", json_real(v.gain));
        break;
    default: json_object_set_new(c, "seed", seed); break;
    }
    const char *cls = sn_initializer_class_name(v.type);
    return sn_cfg_keras_object("keras.initializers", cls ? cls : "GlorotUniform", c);
}

json_t *sn_cfg_reg_json(const sn_regularizer *r) {
    if (r->l1 == 0 && r->l2 == 0) return json_null();
    if (r->l2 == 0) return sn_cfg_keras_object("keras.regularizers", "L1",
                                               json_pack("{s:f}", "l1", r->l1));
    if (r->l1 == 0) return sn_cfg_keras_object("keras.regularizers", "L2",
                                               json_pack("{s:f}", "l2", r->l2));
    return sn_cfg_keras_object("keras.regularizers", "L1L2",
                               json_pack("{s:f, s:f}", "l1", r->l1, "l2", r->l2));
}

sn_status sn_cfg_kernel_bias(const json_t *obj, sn_initializer *kernel_init,
                             sn_initializer *bias_init, sn_regularizer *kernel_reg,
                             sn_regularizer *bias_reg) {
    SN_TRY(sn_cfg_initializer(obj, "kernel_initializer", kernel_init));
    SN_TRY(sn_cfg_initializer(obj, "bias_initializer", bias_init));
    SN_TRY(sn_cfg_regularizer(obj, "kernel_regularizer", kernel_reg));
    return sn_cfg_regularizer(obj, "bias_regularizer", bias_reg);
}

void sn_cfg_write_kernel_bias(json_t *obj, const sn_initializer *kernel_init,
                              const sn_initializer *bias_init, const sn_regularizer *kernel_reg,
                              const sn_regularizer *bias_reg) {
    json_object_set_new(obj, "kernel_initializer",
                        sn_cfg_init_json(kernel_init, SN_INIT_GLOROT_UNIFORM));
    json_object_set_new(obj, "bias_initializer", sn_cfg_init_json(bias_init, SN_INIT_ZEROS));
    json_object_set_new(obj, "kernel_regularizer", sn_cfg_reg_json(kernel_reg));
    json_object_set_new(obj, "bias_regularizer", sn_cfg_reg_json(bias_reg));
}

/* ---- inputs ------------------------------------------------------------------------------ */

/* [null, d1, ...] -> (d1, ...) without the batch. */
sn_status sn_cfg_batch_shape(const json_t *v, const char *field, sn_shape *out) {
    char b[128];
    if (!json_is_array(v) || json_array_size(v) < 2 || json_array_size(v) > SN_MAX_DIMS)
        return sn_errorf(SN_ERR_FORMAT, "field '%s' is %s, expected [null, d1, ...] with 1 to %d "
                         "dimensions after the batch", field, sn_cfg_show(v, b, sizeof b),
                         SN_MAX_DIMS - 1);
    sn_shape s = {.ndim = (int)json_array_size(v) - 1};
    for (int i = 0; i < s.ndim; i++) {
        const json_t *d = json_array_get(v, (size_t)i + 1);
        if (!json_is_integer(d) || json_integer_value(d) <= 0)
            return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is %s: dimension %d is %s; sinter "
                             "builds static shapes (every dimension but the batch a positive "
                             "integer)", field, sn_cfg_show(v, b, sizeof b), i + 1,
                             sn_cfg_show(d, b + 64, 64));
        s.dim[i] = json_integer_value(d);
    }
    *out = s;
    return SN_OK;
}

sn_status sn_cfg_read_input(const json_t *c, sn_shape *shape, bool *int_ids, int64_t *batch) {
    static const char *const keys[] = {"batch_shape", "dtype", "sparse", "ragged", "name",
                                       "optional", NULL};
    if (!c) return sn_errorf(SN_ERR_FORMAT, "InputLayer has no config");
    SN_TRY(sn_cfg_known_keys(c, "InputLayer", keys));
    const json_t *bs = json_object_get(c, "batch_shape");
    if (!bs) return sn_errorf(SN_ERR_FORMAT, "field 'batch_shape' is missing");
    SN_TRY(sn_cfg_batch_shape(bs, "batch_shape", shape));
    const json_t *b0 = json_array_get(bs, 0);
    *batch = json_is_integer(b0) && json_integer_value(b0) > 0 ? json_integer_value(b0) : 0;
    const char *dt = "float32";
    SN_TRY(sn_cfg_str(c, "dtype", false, &dt));
    /* Integer inputs feed Embedding; sinter carries them in float32 (exact below 2^24). */
    if (strcmp(dt, "float32") && strcmp(dt, "int32") && strcmp(dt, "int64"))
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'dtype' is \"%s\"; sinter "
                         "supports float32, int32 and int64 inputs", dt);
    *int_ids = strcmp(dt, "float32") != 0;
    bool sparse = false, ragged = false, optional = false;
    SN_TRY(sn_cfg_bool(c, "sparse", false, &sparse));
    SN_TRY(sn_cfg_bool(c, "ragged", false, &ragged));
    SN_TRY(sn_cfg_bool(c, "optional", false, &optional));
    if (sparse || ragged || optional)
        return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is true; sinter supports "
                         "dense inputs only", sparse ? "sparse" : ragged ? "ragged" : "optional");
    return SN_OK;
}

sn_status sn_cfg_nulls(const json_t *obj, const char *const *keys) {
    for (int i = 0; keys[i]; i++)
        SN_TRY(sn_cfg_must(obj, keys[i], NULL, "only null (not implemented in sinter)"));
    return SN_OK;
}

sn_status sn_cfg_channels_last(const json_t *obj) {
    const char *f = "channels_last";
    SN_TRY(sn_cfg_str(obj, "data_format", false, &f));
    if (strcmp(f, "channels_last"))
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'data_format' is \"%s\"; sinter supports "
                         "only \"channels_last\"", f);
    return SN_OK;
}

sn_status sn_cfg_padding(const json_t *obj, sn_padding *out) {
    const char *p = "valid";
    SN_TRY(sn_cfg_str(obj, "padding", false, &p));
    if (!strcmp(p, "valid")) *out = SN_PAD_VALID;
    else if (!strcmp(p, "same")) *out = SN_PAD_SAME;
    else
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'padding' is \"%s\"; sinter supports "
                         "\"valid\" and \"same\"", p);
    return SN_OK;
}
