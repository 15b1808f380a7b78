/* Keras's initializers (keras/src/initializers/{constant,random}_initializers.py): the same
 * formulas and default arguments, drawn from sinter's Philox stream (so the values differ from
 * Keras's own RNG, but their distribution is the same).
 *
 * Variance scaling (glorot/he/lecun): stddev or limit from scale / n, n = fan_in, fan_out or
 * their mean. The "normal" members draw a normal truncated at two standard deviations and
 * divide the stddev by 0.87962566103423978, the stddev of a unit normal truncated to [-2, 2],
 * as Keras does, so that the variance is the one the scale asks for. */
#include <math.h>
#include <string.h>

#include "nn/layers/initializers.h"

static const struct {
    sn_initializer_type type;
    const char *name, *class_name;
} init_names[] = {
    {SN_INIT_ZEROS, "zeros", "Zeros"},
    {SN_INIT_ONES, "ones", "Ones"},
    {SN_INIT_CONSTANT, "constant", "Constant"},
    {SN_INIT_GLOROT_UNIFORM, "glorot_uniform", "GlorotUniform"},
    {SN_INIT_GLOROT_NORMAL, "glorot_normal", "GlorotNormal"},
    {SN_INIT_HE_UNIFORM, "he_uniform", "HeUniform"},
    {SN_INIT_HE_NORMAL, "he_normal", "HeNormal"},
    {SN_INIT_LECUN_UNIFORM, "lecun_uniform", "LecunUniform"},
    {SN_INIT_LECUN_NORMAL, "lecun_normal", "LecunNormal"},
    {SN_INIT_RANDOM_UNIFORM, "random_uniform", "RandomUniform"},
    {SN_INIT_RANDOM_NORMAL, "random_normal", "RandomNormal"},
    {SN_INIT_TRUNCATED_NORMAL, "truncated_normal", "TruncatedNormal"},
    {SN_INIT_ORTHOGONAL, "orthogonal", "Orthogonal"},
};
enum { N_INIT_NAMES = sizeof init_names / sizeof init_names[0] };

sn_initializer sn_initializer_defaults(sn_initializer_type type) {
    /* Keras: RandomUniform(-0.05, 0.05), RandomNormal/TruncatedNormal(0, 0.05),
     * Orthogonal(gain=1), Constant(0). */
    return (sn_initializer){.type = type, .value = 0.0, .minval = -0.05, .maxval = 0.05,
                            .mean = 0.0, .stddev = 0.05, .gain = 1.0};
}

const char *sn_initializer_type_name(sn_initializer_type type) {
    for (int i = 0; i < N_INIT_NAMES; i++)
        if (init_names[i].type == type) return init_names[i].name;
    return type == SN_INIT_DEFAULT ? "default" : NULL;
}

const char *sn_initializer_class_name(sn_initializer_type type) {
    for (int i = 0; i < N_INIT_NAMES; i++)
        if (init_names[i].type == type) return init_names[i].class_name;
    return NULL;
}

sn_status sn_initializer_from_name(const char *name, sn_initializer *out) {
    if (!name || !out)
        return sn_errorf(SN_ERR_INVALID, "sn_initializer_from_name: %s is NULL",
                         !name ? "name" : "out");
    /* keras.initializers.get knows the snake_case names and the class names. */
    for (int i = 0; i < N_INIT_NAMES; i++)
        if (strcmp(name, init_names[i].name) == 0 || strcmp(name, init_names[i].class_name) == 0) {
            *out = sn_initializer_defaults(init_names[i].type);
            return SN_OK;
        }
    char acc[512];
    size_t n = 0;
    for (int i = 0; i < N_INIT_NAMES && n < sizeof acc; i++)
        n += (size_t)snprintf(acc + n, sizeof acc - n, "%s'%s'", i ? ", " : "", init_names[i].name);
    return sn_errorf(SN_ERR_NOT_FOUND, "unknown initializer '%s'; accepted: %s (or their Keras "
                     "class names, e.g. 'GlorotUniform')", name, acc);
}

void sn_init_fans(const sn_shape *shape, int64_t *fan_in, int64_t *fan_out) {
    if (shape->ndim < 1) {
        *fan_in = *fan_out = 1;
    } else if (shape->ndim == 1) {
        *fan_in = *fan_out = shape->dim[0];
    } else if (shape->ndim == 2) {
        *fan_in = shape->dim[0];
        *fan_out = shape->dim[1];
    } else {
        int64_t rf = 1;
        for (int i = 0; i < shape->ndim - 2; i++) rf *= shape->dim[i];
        *fan_in = shape->dim[shape->ndim - 2] * rf;
        *fan_out = shape->dim[shape->ndim - 1] * rf;
    }
}

static void put(void *data, sn_dtype dt, int64_t i, double v) {
    if (dt == SN_F64) ((double *)data)[i] = v;
    else ((float *)data)[i] = (float)v;
}

/* A unit normal resampled while outside [-2, 2] (TensorFlow's truncated_normal, which Keras
 * calls for TruncatedNormal and the variance-scaling normals). */
static double truncated_unit(sn_rng *rng) {
    for (;;) {
        double z = sn_rng_normal(rng);
        if (z >= -2.0 && z <= 2.0) return z;
    }
}

/* Orthogonal: Q of the QR decomposition of a [max(r, c), min(r, c)] normal matrix (r = the
 * product of all dims but the last, c = the last), its columns' signs fixed so that R has a
 * positive diagonal (Keras's q *= sign(diag(r))), transposed when r < c, times gain. Modified
 * Gram-Schmidt run twice per column (re-orthogonalisation) gives that Q directly: each
 * R[j][j] it produces is a norm, hence positive. Computed in double. */
static sn_status fill_orthogonal(const sn_initializer *in, void *data, sn_dtype dt,
                                 const sn_shape *shape, sn_rng *rng, const char *what) {
    if (shape->ndim < 2)
        return sn_errorf(SN_ERR_INVALID, "%s: the orthogonal initializer needs a tensor of rank "
                         ">= 2, got rank %d", what, shape->ndim);
    int64_t r = 1, c = shape->dim[shape->ndim - 1];
    for (int i = 0; i < shape->ndim - 1; i++) r *= shape->dim[i];
    int64_t m = r > c ? r : c, k = r > c ? c : r; /* a is [m, k], m >= k */
    /* Stored column by column (column j at a + j * m) so that every dot product and update of
     * the Gram-Schmidt loop runs over contiguous memory: the same arithmetic in the same order
     * as over the row-major [m, k] draw, so the same values, but a 1024-unit LSTM's
     * [1024, 4096] kernel takes seconds instead of minutes. */
    double *a = sn_malloc(sizeof *a * (size_t)(m * k));
    if (!a) return SN_ERR_NOMEM;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < k; j++) a[j * m + i] = sn_rng_normal(rng);
    for (int64_t j = 0; j < k; j++) {
        double *aj = a + j * m;
        for (int pass = 0; pass < 2; pass++)
            for (int64_t p = 0; p < j; p++) {
                const double *ap = a + p * m;
                double d = 0;
                for (int64_t i = 0; i < m; i++) d += ap[i] * aj[i];
                for (int64_t i = 0; i < m; i++) aj[i] -= d * ap[i];
            }
        double nrm = 0;
        for (int64_t i = 0; i < m; i++) nrm += aj[i] * aj[i];
        nrm = sqrt(nrm);
        if (!(nrm > 1e-300)) { /* a dependent column: practically impossible from a normal draw */
            free(a);
            return sn_errorf(SN_ERR_NUMERIC, "%s: orthogonal initializer drew a singular matrix",
                             what);
        }
        for (int64_t i = 0; i < m; i++) aj[i] /= nrm;
    }
    /* q is a [m, k]; the variable, viewed as [r, c], is q (r >= c) or q^T (r < c). */
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++)
            put(data, dt, i * c + j, in->gain * (r >= c ? a[j * m + i] : a[i * m + j]));
    free(a);
    return SN_OK;
}

sn_status sn_init_fill(const sn_initializer *init, sn_initializer_type default_type,
                       void *data, sn_dtype dt, const sn_shape *shape, int64_t fan_in,
                       int64_t fan_out, sn_rng *rng, const char *what) {
    if (!what) what = "variable";
    if (dt != SN_F32 && dt != SN_F64)
        return sn_errorf(SN_ERR_INVALID, "%s: initializers fill f32 or f64, not %s", what,
                         sn_dtype_name(dt));
    sn_initializer in = init && init->type != SN_INIT_DEFAULT ? *init
                                                               : sn_initializer_defaults(default_type);
    if (init && init->type == SN_INIT_DEFAULT) { /* a seed given with the default type */
        in.has_seed = init->has_seed;
        in.seed = init->seed;
    }
    sn_rng own;
    if (in.has_seed) {
        sn_rng_init(&own, in.seed, 0);
        rng = &own;
    }
    if (fan_in <= 0 || fan_out <= 0) sn_init_fans(shape, &fan_in, &fan_out);
    int64_t n = sn_shape_numel(shape);
    double scale = 1.0, fan = 0.0;
    bool uniform = false;
    switch (in.type) {
    case SN_INIT_DEFAULT:
        return sn_errorf(SN_ERR_INVALID, "%s: no default initializer given", what);
    case SN_INIT_ZEROS:
    case SN_INIT_ONES:
    case SN_INIT_CONSTANT: {
        double v = in.type == SN_INIT_ZEROS ? 0.0 : in.type == SN_INIT_ONES ? 1.0 : in.value;
        if (!isfinite(v))
            return sn_errorf(SN_ERR_INVALID, "%s: constant initializer value %g is not finite",
                             what, v);
        for (int64_t i = 0; i < n; i++) put(data, dt, i, v);
        return SN_OK;
    }
    case SN_INIT_RANDOM_UNIFORM:
        if (!(isfinite(in.minval) && isfinite(in.maxval) && in.minval <= in.maxval))
            return sn_errorf(SN_ERR_INVALID, "%s: random_uniform minval %g, maxval %g, expected "
                             "finite minval <= maxval", what, in.minval, in.maxval);
        for (int64_t i = 0; i < n; i++)
            put(data, dt, i, in.minval + (in.maxval - in.minval) * sn_rng_uniform(rng));
        return SN_OK;
    case SN_INIT_RANDOM_NORMAL:
    case SN_INIT_TRUNCATED_NORMAL:
        if (!(isfinite(in.mean) && isfinite(in.stddev) && in.stddev >= 0))
            return sn_errorf(SN_ERR_INVALID, "%s: %s mean %g, stddev %g, expected finite values "
                             "and stddev >= 0", what, sn_initializer_type_name(in.type), in.mean,
                             in.stddev);
        for (int64_t i = 0; i < n; i++) {
            double z = in.type == SN_INIT_RANDOM_NORMAL ? sn_rng_normal(rng) : truncated_unit(rng);
            put(data, dt, i, in.mean + in.stddev * z);
        }
        return SN_OK;
    case SN_INIT_ORTHOGONAL:
        if (!isfinite(in.gain))
            return sn_errorf(SN_ERR_INVALID, "%s: orthogonal gain %g is not finite", what, in.gain);
        return fill_orthogonal(&in, data, dt, shape, rng, what);
    case SN_INIT_GLOROT_UNIFORM: uniform = true; /* fall through */
    case SN_INIT_GLOROT_NORMAL: fan = 0.5 * (double)(fan_in + fan_out); break;
    case SN_INIT_HE_UNIFORM: uniform = true; /* fall through */
    case SN_INIT_HE_NORMAL: scale = 2.0; fan = (double)fan_in; break;
    case SN_INIT_LECUN_UNIFORM: uniform = true; /* fall through */
    case SN_INIT_LECUN_NORMAL: fan = (double)fan_in; break;
    default:
        return sn_errorf(SN_ERR_INVALID, "%s: initializer type %d is not an sn_initializer_type",
                         what, (int)in.type);
    }
    if (fan < 1.0) fan = 1.0; /* Keras: max(1., n) */
    if (uniform) {
        double lim = sqrt(3.0 * scale / fan);
        for (int64_t i = 0; i < n; i++) put(data, dt, i, lim * (2.0 * sn_rng_uniform(rng) - 1.0));
    } else {
        double sd = sqrt(scale / fan) / 0.87962566103423978;
        for (int64_t i = 0; i < n; i++) put(data, dt, i, sd * truncated_unit(rng));
    }
    return SN_OK;
}
