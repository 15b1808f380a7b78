/* The layer vocabulary beyond the first presets: activations by Keras name, every initializer
 * (statistics against Keras's formulas, seeds, orthogonality), Dense with options and on
 * [B, T, D], BatchNormalization without center/scale, Reshape, GlobalAveragePooling2D,
 * regularizers; shapes, errors that name the layer, and gradients through each (in f64, as
 * test_layers.c). */
#include "layer_test_util.h"
#include "nn/layers/initializers.h"

/* ---- activations by name ------------------------------------------------------------------- */
static void test_activation_names(void) {
    static const char *names[] = {"linear", "relu", "sigmoid", "tanh", "softmax", "gelu", "silu",
                                  "elu", "leaky_relu", "relu6"};
    for (int i = 0; i < 10; i++) {
        sn_activation a = (sn_activation)-1;
        CHECK_OK(sn_activation_from_name(names[i], &a));
        CHECK(a == (sn_activation)i, "%s -> %d", names[i], (int)a);
        CHECK(sn_activation_name((sn_activation)i) && strcmp(sn_activation_name((sn_activation)i), names[i]) == 0,
              "name of %d: %s", i, sn_activation_name((sn_activation)i));
    }
    sn_activation a;
    CHECK_OK(sn_activation_from_name("swish", &a));
    CHECK(a == SN_ACT_SILU, "swish -> %d", (int)a);
    CHECK_ERR(sn_activation_from_name("mish", &a), SN_ERR_NOT_FOUND, "'mish'");
    CHECK(strstr(sn_last_error(), "'relu6'") != NULL, "error lists the accepted names: %s", sn_last_error());
    CHECK(sn_activation_name((sn_activation)99) == NULL, "name of 99");
}

/* ---- initializers ---------------------------------------------------------------------------- */
typedef struct stats { double mean, var, min, max; } stats;

static stats stats_of(const double *v, int64_t n) {
    stats s = {0, 0, INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i++) {
        s.mean += v[i];
        s.min = fmin(s.min, v[i]);
        s.max = fmax(s.max, v[i]);
    }
    s.mean /= (double)n;
    for (int64_t i = 0; i < n; i++) s.var += (v[i] - s.mean) * (v[i] - s.mean);
    s.var /= (double)n;
    return s;
}

/* Fills shape (fans from the shape) and checks mean, variance (within 3%) and bounds. */
static void init_case(const char *what, sn_initializer in, sn_shape shape, double mean, double var,
                      double lo, double hi) {
    int64_t n = sn_shape_numel(&shape);
    double *v = malloc(sizeof *v * (size_t)n);
    sn_rng r;
    sn_rng_init(&r, 5, 0);
    CHECK_OK(sn_init_fill(&in, SN_INIT_ZEROS, v, SN_F64, &shape, 0, 0, &r, what));
    stats s = stats_of(v, n);
    double sd = sqrt(var);
    CHECK(fabs(s.mean - mean) < 4 * sd / sqrt((double)n) + 1e-12, "%s: mean %g, expected %g", what, s.mean, mean);
    CHECK(var == 0 ? s.var == 0 : fabs(s.var / var - 1) < 0.03, "%s: variance %g, expected %g", what, s.var, var);
    CHECK(s.min >= lo && s.max <= hi, "%s: range [%g, %g], expected within [%g, %g]", what, s.min, s.max, lo, hi);
    free(v);
}

static void test_initializers(void) {
    const sn_shape dense = {.ndim = 2, .dim = {200, 300}}, conv = {.ndim = 4, .dim = {3, 3, 64, 32}};
    /* Keras: glorot n = (fan_in + fan_out) / 2, he/lecun n = fan_in; uniform limit
     * sqrt(3 scale / n); normal: truncated at 2 sd, variance scale / n (the 0.8796 divisor
     * restores it). Conv kernel [3, 3, 64, 32]: fan_in 576, fan_out 288. */
    struct { sn_initializer_type t; double scale; int mode; /* 0 in, 1 avg */ bool uni; } vs[] = {
        {SN_INIT_GLOROT_UNIFORM, 1, 1, true}, {SN_INIT_GLOROT_NORMAL, 1, 1, false},
        {SN_INIT_HE_UNIFORM, 2, 0, true},     {SN_INIT_HE_NORMAL, 2, 0, false},
        {SN_INIT_LECUN_UNIFORM, 1, 0, true},  {SN_INIT_LECUN_NORMAL, 1, 0, false},
    };
    for (int i = 0; i < 6; i++)
        for (int k = 0; k < 2; k++) {
            sn_shape s = k ? conv : dense;
            double fi = k ? 576 : 200, fo = k ? 288 : 300, n = vs[i].mode ? (fi + fo) / 2 : fi;
            double var = vs[i].scale / n, bound = vs[i].uni ? sqrt(3 * var) : 2 * sqrt(var) / 0.87962566103423978;
            char what[64];
            snprintf(what, sizeof what, "%s %s", sn_initializer_type_name(vs[i].t), k ? "conv" : "dense");
            init_case(what, sn_initializer_defaults(vs[i].t), s, 0, var, -bound, bound);
        }
    sn_initializer u = sn_initializer_defaults(SN_INIT_RANDOM_UNIFORM);
    init_case("random_uniform default", u, dense, 0, 0.1 * 0.1 / 12, -0.05, 0.05);
    u.minval = 1, u.maxval = 3;
    init_case("random_uniform(1, 3)", u, dense, 2, 4.0 / 12, 1, 3);
    sn_initializer nrm = sn_initializer_defaults(SN_INIT_RANDOM_NORMAL);
    nrm.mean = -1, nrm.stddev = 0.5;
    init_case("random_normal(-1, 0.5)", nrm, dense, -1, 0.25, -1 - 6 * 0.5, -1 + 6 * 0.5);
    /* plain truncated_normal: resampled beyond 2 sd, so its variance is 0.774 sd^2 */
    sn_initializer tn = sn_initializer_defaults(SN_INIT_TRUNCATED_NORMAL);
    tn.mean = 0.5, tn.stddev = 2;
    init_case("truncated_normal(0.5, 2)", tn, dense, 0.5, 4 * 0.87962566103423978 * 0.87962566103423978,
              0.5 - 4, 0.5 + 4);
    sn_initializer c = sn_initializer_defaults(SN_INIT_CONSTANT);
    c.value = 0.25;
    init_case("constant 0.25", c, dense, 0.25, 0, 0.25, 0.25);
    init_case("ones", sn_initializer_defaults(SN_INIT_ONES), dense, 1, 0, 1, 1);
    init_case("zeros", sn_initializer_defaults(SN_INIT_ZEROS), dense, 0, 0, 0, 0);
    /* SN_INIT_DEFAULT falls back to the layer's default type */
    init_case("default -> zeros", (sn_initializer){0}, dense, 0, 0, 0, 0);

    /* orthogonal: [6, 4] has orthonormal columns, [4, 6] orthonormal rows; gain scales;
     * a [2, 3, 4] tensor is a [6, 4] matrix */
    const sn_shape os[3] = {{.ndim = 2, .dim = {6, 4}}, {.ndim = 2, .dim = {4, 6}}, {.ndim = 3, .dim = {2, 3, 4}}};
    for (int k = 0; k < 3; k++) {
        sn_initializer o = sn_initializer_defaults(SN_INIT_ORTHOGONAL);
        o.gain = 1.5;
        double q[24];
        sn_rng r;
        sn_rng_init(&r, 9, 0);
        CHECK_OK(sn_init_fill(&o, SN_INIT_ZEROS, q, SN_F64, &os[k], 0, 0, &r, "orthogonal"));
        int rows = k == 1 ? 4 : 6, cols = k == 1 ? 6 : 4;
        bool tall = rows >= cols;
        int m = tall ? cols : rows; /* the orthonormal set: columns when tall, rows when wide */
        double worst = 0;
        for (int a = 0; a < m; a++)
            for (int b = 0; b < m; b++) {
                double d = 0;
                for (int i = 0; i < (tall ? rows : cols); i++)
                    d += tall ? q[i * cols + a] * q[i * cols + b] : q[a * cols + i] * q[b * cols + i];
                worst = fmax(worst, fabs(d - (a == b ? 2.25 : 0)));
            }
        CHECK(worst < 1e-12, "orthogonal case %d: |Q^T Q - gain^2 I| = %g", k, worst);
    }
    double q1[3];
    sn_rng r;
    sn_rng_init(&r, 1, 0);
    sn_initializer o = sn_initializer_defaults(SN_INIT_ORTHOGONAL);
    CHECK_ERR(sn_init_fill(&o, SN_INIT_ZEROS, q1, SN_F64, &(sn_shape){.ndim = 1, .dim = {3}}, 0, 0, &r,
                           "layer 'x' bias"),
              SN_ERR_INVALID, "layer 'x' bias: the orthogonal initializer needs a tensor of rank >= 2");

    /* seeds: the same seed gives the same values whatever rng is passed in; different seeds
     * differ; without a seed the passed rng decides */
    double a[50], b[50], d[50];
    sn_rng r1, r2;
    sn_rng_init(&r1, 1, 0);
    sn_rng_init(&r2, 2, 7);
    sn_initializer gs = sn_initializer_defaults(SN_INIT_GLOROT_NORMAL);
    gs.has_seed = true, gs.seed = 1234;
    const sn_shape s50 = {.ndim = 2, .dim = {5, 10}};
    CHECK_OK(sn_init_fill(&gs, SN_INIT_ZEROS, a, SN_F64, &s50, 0, 0, &r1, "a"));
    CHECK_OK(sn_init_fill(&gs, SN_INIT_ZEROS, b, SN_F64, &s50, 0, 0, &r2, "b"));
    gs.seed = 1235;
    CHECK_OK(sn_init_fill(&gs, SN_INIT_ZEROS, d, SN_F64, &s50, 0, 0, &r2, "d"));
    CHECK(memcmp(a, b, sizeof a) == 0, "same seed, different values");
    CHECK(memcmp(a, d, sizeof a) != 0, "different seeds, same values");

    /* names */
    sn_initializer got;
    CHECK_OK(sn_initializer_from_name("HeNormal", &got));
    CHECK(got.type == SN_INIT_HE_NORMAL, "HeNormal -> %d", (int)got.type);
    CHECK_OK(sn_initializer_from_name("random_uniform", &got));
    CHECK(got.type == SN_INIT_RANDOM_UNIFORM && got.minval == -0.05 && got.maxval == 0.05,
          "random_uniform defaults");
    CHECK_ERR(sn_initializer_from_name("variance_scaling", &got), SN_ERR_NOT_FOUND, "'variance_scaling'");
    CHECK(strcmp(sn_initializer_class_name(SN_INIT_TRUNCATED_NORMAL), "TruncatedNormal") == 0, "class name");
}

/* A layer's initializer options reach its variables (Dense and Conv2D kernels and biases). */
static void test_layer_initializers(void) {
    sn_dense_layer_opts o = sn_dense_layer_defaults(4);
    o.kernel_initializer = sn_initializer_defaults(SN_INIT_CONSTANT);
    o.kernel_initializer.value = 0.5;
    o.bias_initializer = sn_initializer_defaults(SN_INIT_ONES);
    fixture f;
    if (fx_build(&f, sn_layer_dense_ex(&o), (sn_shape)S1(3), 1, SN_F32)) {
        const float *k = sn_variable_data(f.m->g, f.l->vars[0]), *b = sn_variable_data(f.m->g, f.l->vars[1]);
        CHECK(k[0] == 0.5f && k[11] == 0.5f && b[0] == 1 && b[3] == 1, "dense initializers: %g %g", k[0], b[0]);
        CHECK(f.l->dense.kernel_initializer.type == SN_INIT_CONSTANT, "options kept in the layer");
    }
    fx_free(&f);
    /* a seeded conv kernel is the same in two models built from different model seeds */
    sn_conv2d_layer_opts co = sn_conv2d_layer_defaults(2, 3, 3);
    co.kernel_initializer = sn_initializer_defaults(SN_INIT_HE_UNIFORM);
    co.kernel_initializer.has_seed = true;
    co.kernel_initializer.seed = 77;
    co.use_bias = false;
    fixture g;
    if (fx_build(&f, sn_layer_conv2d_ex(&co), (sn_shape)S3(4, 4, 2), 1, SN_F32) &&
        fx_build(&g, sn_layer_conv2d_ex(&co), (sn_shape)S3(4, 4, 2), 2, SN_F32)) {
        CHECK(f.l->n_vars == 1, "use_bias false: %d variables", f.l->n_vars);
        const float *k1 = sn_variable_data(f.m->g, f.l->vars[0]), *k2 = sn_variable_data(g.m->g, g.l->vars[0]);
        CHECK(memcmp(k1, k2, sizeof(float) * 36) == 0, "seeded kernel differs between model seeds");
        double mx = 0, lim = sqrt(6.0 / 18); /* he_uniform, fan_in 3*3*2 */
        for (int i = 0; i < 36; i++) mx = fmax(mx, fabs(k1[i]));
        CHECK(mx <= lim && mx > 0.5 * lim, "conv he_uniform max %g, limit %g", mx, lim);
        fx_free(&g);
    }
    fx_free(&f);
    o = sn_dense_layer_defaults(4);
    o.kernel_initializer = sn_initializer_defaults(SN_INIT_RANDOM_NORMAL);
    o.kernel_initializer.stddev = -1;
    CHECK(sn_layer_dense_ex(&o) == NULL && strstr(sn_last_error(), "Dense: kernel_initializer random_normal"),
          "bad stddev: '%s'", sn_last_error());
    o = sn_dense_layer_defaults(4);
    o.bias_initializer.type = (sn_initializer_type)99;
    CHECK(sn_layer_dense_ex(&o) == NULL && strstr(sn_last_error(), "bias_initializer type 99"),
          "bad type: '%s'", sn_last_error());
    o = sn_dense_layer_defaults(4);
    o.kernel_regularizer.l2 = -1;
    CHECK(sn_layer_dense_ex(&o) == NULL && strstr(sn_last_error(), "kernel_regularizer l1 0, l2 -1"),
          "bad regularizer: '%s'", sn_last_error());
}

/* ---- Dense ------------------------------------------------------------------------------------ */
static void test_dense_more(void) {
    /* [B, T, D] = [2, 2, 3] -> [2, 2, 2] without bias: rows times the kernel */
    const float k[] = {1, 2, 3, 4, 5, 6}, x[] = {1, 0, -1, 2, 1, 0, 0, 0, 1, 1, 1, 1};
    const float want[] = {-4, -4, 5, 8, 5, 6, 9, 12};
    sn_dense_layer_opts o = sn_dense_layer_defaults(2);
    o.use_bias = false;
    fixture f;
    if (fx_build(&f, sn_layer_dense_ex(&o), (sn_shape)S2(2, 3), 1, SN_F32) && fx_plan(&f, 2, false)) {
        CHECK(f.l->n_vars == 1, "use_bias false: %d variables", f.l->n_vars);
        set_var(&f, 0, k);
        expect("dense no bias on [B, T, D]", run(&f, x), want, 8, 1e-6);
        sn_shape ys = sn_node_shape(f.m->g, f.y);
        CHECK(ys.ndim == 3 && ys.dim[0] == 2 && ys.dim[1] == 2 && ys.dim[2] == 2, "out rank %d", ys.ndim);
        CHECK(sn_model_param_count(f.m, false) == 6, "params %lld", (long long)sn_model_param_count(f.m, false));
    }
    fx_free(&f);
    /* rank 4 (images): [B, 2, 2, 3] -> [B, 2, 2, 2] */
    if (fx_build(&f, sn_layer_dense(2, SN_ACT_NONE), (sn_shape)S3(2, 1, 3), 1, SN_F32) && fx_plan(&f, 2, false)) {
        set_var(&f, 0, k);
        set_var(&f, 1, (const float[]){0.5f, -0.5f});
        const float w4[] = {-3.5f, -4.5f, 5.5f, 7.5f, 5.5f, 5.5f, 9.5f, 11.5f};
        expect("dense on [B, H, W, C]", run(&f, x), w4, 8, 1e-6);
    }
    fx_free(&f);
}

/* ---- BatchNormalization center/scale ---------------------------------------------------------- */
static void test_bn_options(void) {
    struct { bool center, scale; int nv; int64_t trainable; const char *first; } c[] = {
        {true, true, 4, 6, "batch_normalization/gamma"},
        {true, false, 3, 3, "batch_normalization/beta"},
        {false, true, 3, 3, "batch_normalization/gamma"},
        {false, false, 2, 0, "batch_normalization/moving_mean"},
    };
    for (int i = 0; i < 4; i++) {
        sn_batch_norm_layer_opts o = sn_batch_norm_layer_defaults();
        o.center = c[i].center;
        o.scale = c[i].scale;
        fixture f;
        if (fx_build(&f, sn_layer_batch_norm_ex(&o), (sn_shape)S1(3), 1, SN_F32) && fx_plan(&f, 2, true)) {
            CHECK(f.l->n_vars == c[i].nv, "bn center %d scale %d: %d variables", c[i].center, c[i].scale, f.l->n_vars);
            CHECK(sn_model_param_count(f.m, true) == c[i].trainable, "bn %d: trainable %lld", i,
                  (long long)sn_model_param_count(f.m, true));
            CHECK(strcmp(sn_node_name(f.m->g, f.l->vars[0]), c[i].first) == 0, "bn %d: first var %s", i,
                  sn_node_name(f.m->g, f.l->vars[0]));
            /* training: per-feature standardised; gamma 1 and beta 0 (or absent) leave it so */
            const float x[] = {1, 2, 3, 3, 6, 9};
            const float *y = run(&f, x);
            double e1 = 1.0 / sqrt(1 + 1e-3), e2 = 2.0 / sqrt(4 + 1e-3), e3 = 3.0 / sqrt(9 + 1e-3);
            const float want[] = {-e1, -e2, -e3, e1, e2, e3};
            expect("bn standardised", y, want, 6, 1e-5);
        }
        fx_free(&f);
    }
    sn_batch_norm_layer_opts o = sn_batch_norm_layer_defaults();
    o.momentum = 1.5;
    CHECK(sn_layer_batch_norm_ex(&o) == NULL && strstr(sn_last_error(), "momentum 1.5"), "momentum: '%s'",
          sn_last_error());
    o = sn_batch_norm_layer_defaults();
    o.epsilon = 0;
    CHECK(sn_layer_batch_norm_ex(&o) == NULL && strstr(sn_last_error(), "epsilon 0"), "epsilon: '%s'",
          sn_last_error());
}

/* ---- Reshape, GlobalAveragePooling2D ---------------------------------------------------------- */
static void test_reshape_gap(void) {
    fixture f;
    if (fx_build(&f, sn_layer_reshape(&(sn_shape)S2(-1, 2)), (sn_shape)S3(2, 3, 1), 1, SN_F32) &&
        fx_plan(&f, 2, false)) {
        CHECK(f.l->out_shape.ndim == 2 && f.l->out_shape.dim[0] == 3 && f.l->out_shape.dim[1] == 2,
              "reshape -1 inferred: %lld", (long long)f.l->out_shape.dim[0]);
        CHECK(f.l->reshape_target.dim[0] == -1, "target kept as given");
        const float x[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
        expect("reshape values", run(&f, x), x, 12, 0);
    }
    fx_free(&f);
    /* incompatible: 6 elements into (4, -1) and into (4, 2); errors name the layer and sizes */
    const sn_shape bad[2] = {S2(4, -1), S2(4, 2)};
    for (int i = 0; i < 2; i++) {
        sn_model *m = sn_sequential_new("r");
        CHECK_OK(sn_model_add(m, sn_layer_reshape(&bad[i])));
        sn_status s = sn_model_build(m, &(sn_shape)S2(2, 3), 1);
        CHECK(s == SN_ERR_SHAPE && strstr(sn_last_error(), "layer 'reshape' (Reshape)") &&
                  strstr(sn_last_error(), "(None, 2, 3)") && strstr(sn_last_error(), "6 elements per example"),
              "reshape %d: '%s'", i, sn_last_error());
        sn_model_free(m);
    }
    CHECK(sn_layer_reshape(&(sn_shape)S2(-1, -1)) == NULL && strstr(sn_last_error(), "at most one"),
          "two -1: '%s'", sn_last_error());
    CHECK(sn_layer_reshape(&(sn_shape)S2(0, 3)) == NULL && strstr(sn_last_error(), "dimension 0 = 0"),
          "zero dim: '%s'", sn_last_error());

    /* GAP: [1, 2, 2, 2] -> per-channel means */
    if (fx_build(&f, sn_layer_global_avg_pool2d(), (sn_shape)S3(2, 2, 2), 1, SN_F32) && fx_plan(&f, 1, false)) {
        const float x[8] = {1, 10, 2, 20, 3, 30, 6, 60};
        const float want[2] = {3, 30};
        expect("gap", run(&f, x), want, 2, 1e-6);
        CHECK(f.l->out_shape.ndim == 1 && f.l->out_shape.dim[0] == 2, "gap shape");
    }
    fx_free(&f);
    sn_model *m = sn_sequential_new("g");
    CHECK_OK(sn_model_add(m, sn_layer_global_avg_pool2d()));
    CHECK_ERR(sn_model_build(m, &(sn_shape)S1(5), 1), SN_ERR_SHAPE,
              "layer 'global_average_pooling2d' (GlobalAveragePooling2D): got input of shape (None, 5)");
    sn_model_free(m);
}

/* The summary table names the new classes as Keras 3 does. */
static void test_summary(void) {
    sn_model *m = sn_sequential_new("s");
    CHECK_OK(sn_model_add(m, sn_layer_reshape(&(sn_shape)S3(4, 4, 1))));
    CHECK_OK(sn_model_add(m, sn_layer_conv2d(2, 3, 3, SN_ACT_RELU)));
    CHECK_OK(sn_model_add(m, sn_layer_global_avg_pool2d()));
    CHECK_OK(sn_model_build(m, &(sn_shape)S1(16), 1));
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    CHECK_OK(sn_model_summary(m, out));
    fclose(out);
    CHECK(strstr(buf, "│ reshape (Reshape)               │ (None, 4, 4, 1)        │             0 │"),
          "summary:\n%s", buf);
    CHECK(strstr(buf, "│ global_average_pooling2d        │ (None, 2)              │             0 │\n"
                      "│ (GlobalAveragePooling2D)        │                        │               │"),
          "summary:\n%s", buf);
    free(buf);
    sn_model_free(m);
}

/* ---- gradients through the new layers ---------------------------------------------------------- */
static void test_gradients_more(void) {
    sn_dense_layer_opts o = sn_dense_layer_defaults(3);
    o.use_bias = false;
    o.activation = SN_ACT_TANH;
    grad_case("Dense no bias tanh on [B, T, D]", sn_layer_dense_ex(&o), (sn_shape)S2(4, 5), 2, false, 1e-5);
    grad_case("Dense on [B, H, W, C]", sn_layer_dense(2, SN_ACT_NONE), (sn_shape)S3(2, 3, 4), 2, false, 1e-5);
    sn_batch_norm_layer_opts b = sn_batch_norm_layer_defaults();
    b.scale = false;
    grad_case("BatchNormalization no gamma", sn_layer_batch_norm_ex(&b), (sn_shape)S1(3), 5, true, 1e-5);
    b = sn_batch_norm_layer_defaults();
    b.center = false;
    grad_case("BatchNormalization no beta", sn_layer_batch_norm_ex(&b), (sn_shape)S3(2, 2, 3), 2, true, 1e-5);
    grad_case("Reshape", sn_layer_reshape(&(sn_shape)S2(3, -1)), (sn_shape)S3(2, 3, 2), 2, false, 1e-7);
    grad_case("GlobalAveragePooling2D", sn_layer_global_avg_pool2d(), (sn_shape)S3(3, 2, 4), 2, false, 1e-7);
    /* every activation by name through Dense (kinks of leaky_relu/elu/relu6: the inputs of
     * grad_case are random, a pre-activation within 1e-6 of a kink has probability ~1e-6) */
    static const char *acts[] = {"gelu", "silu", "swish", "elu", "leaky_relu", "relu6"};
    for (int i = 0; i < 6; i++) {
        sn_activation a;
        CHECK_OK(sn_activation_from_name(acts[i], &a));
        char what[64];
        snprintf(what, sizeof what, "Dense %s", acts[i]);
        grad_case(what, sn_layer_dense(3, a), (sn_shape)S1(4), 3, false, 1e-5);
        snprintf(what, sizeof what, "Activation %s", acts[i]);
        grad_case(what, sn_layer_activation(a), (sn_shape)S2(2, 5), 2, false, 1e-7);
    }
}

/* ---- regularizers -------------------------------------------------------------------------- */
/* Conv2D (L2 kernel) -> BN (L1 gamma) -> Flatten -> Dense (L1L2 kernel, L2 bias) -> Dense; reg
 * selects whether the regularizers are set. Same seed: the same initial weights either way. */
static sn_model *reg_model(bool reg) {
    sn_model *m = sn_sequential_new("reg");
    sn_conv2d_layer_opts c = sn_conv2d_layer_defaults(3, 2, 2);
    c.activation = SN_ACT_TANH;
    sn_batch_norm_layer_opts b = sn_batch_norm_layer_defaults();
    sn_dense_layer_opts d = sn_dense_layer_defaults(5), o = sn_dense_layer_defaults(3);
    d.activation = SN_ACT_GELU;
    if (reg) {
        c.kernel_regularizer.l2 = 0.03;
        b.gamma_regularizer.l1 = 0.02;
        d.kernel_regularizer = (sn_regularizer){.l1 = 0.01, .l2 = 0.02};
        d.bias_regularizer.l2 = 0.5;
    }
    CHECK_OK(sn_model_add(m, sn_layer_conv2d_ex(&c)));
    CHECK_OK(sn_model_add(m, sn_layer_batch_norm_ex(&b)));
    CHECK_OK(sn_model_add(m, sn_layer_flatten()));
    CHECK_OK(sn_model_add(m, sn_layer_dense_ex(&d)));
    CHECK_OK(sn_model_add(m, sn_layer_dense_ex(&o)));
    CHECK_OK(sn_model_build(m, &(sn_shape)S3(4, 4, 1), 5));
    /* biases and gamma off their zeros/ones so that every penalty term is non-trivial */
    float *bias = sn_variable_data(m->g, m->layers[3]->vars[1]), *gamma = sn_variable_data(m->g, m->layers[1]->vars[0]);
    for (int i = 0; i < 5; i++) bias[i] = 0.1f * (float)(i - 2);
    for (int i = 0; i < 3; i++) gamma[i] = 1.0f - 0.5f * (float)i;
    sn_compile_opts co = sn_compile_defaults();
    co.optimizer = sn_optimizer_defaults(SN_SGD);
    co.optimizer.learning_rate = 0.1;
    CHECK_OK(sn_model_compile(m, &co));
    return m;
}

static double sum_f(const sn_model *m, int layer, int var, int power) {
    sn_graph *g = m->g;
    sn_node v = m->layers[layer]->vars[var];
    sn_shape s = sn_node_shape(g, v);
    const float *p = sn_variable_data(g, v);
    double acc = 0;
    for (int64_t i = 0; i < sn_shape_numel(&s); i++) acc += power == 1 ? fabs(p[i]) : (double)p[i] * p[i];
    return acc;
}

/* The hand-computed penalty of reg_model's weights. */
static double hand_penalty(const sn_model *m) {
    return 0.03 * sum_f(m, 0, 0, 2) + 0.02 * sum_f(m, 1, 0, 1) + 0.01 * sum_f(m, 3, 0, 1) +
           0.02 * sum_f(m, 3, 0, 2) + 0.5 * sum_f(m, 3, 1, 2);
}

static void test_regularizers(void) {
    enum { N = 8 };
    sn_tensor *x = NULL, *y = NULL;
    CHECK_OK(sn_tensor_new(&x, SN_F32, &(sn_shape){.ndim = 4, .dim = {N, 4, 4, 1}}));
    CHECK_OK(sn_tensor_new(&y, SN_I32, &(sn_shape)S1(N)));
    sn_rng r;
    sn_rng_init(&r, 2, 0);
    for (int i = 0; i < N * 16; i++) ((float *)sn_tensor_data(x))[i] = (float)sn_rng_normal(&r);
    for (int i = 0; i < N; i++) ((int32_t *)sn_tensor_data(y))[i] = i % 3;
    sn_dataset *ds = NULL;
    CHECK_OK(sn_dataset_from_tensors(&ds, 2, (sn_tensor *[]){x, y}));
    CHECK_OK(sn_dataset_batch(&ds, N, false));
    sn_model *plain = reg_model(false), *reg = reg_model(true);
    size_t nb0, nb1;
    const void *v0 = sn_graph_variable_buffer(plain->g, &nb0), *v1 = sn_graph_variable_buffer(reg->g, &nb1);
    CHECK(nb0 == nb1 && memcmp(v0, v1, nb0) == 0, "same seed, same initial weights");
    CHECK(reg->layers[0]->n_regs == 1 && reg->layers[1]->n_regs == 1 && reg->layers[3]->n_regs == 2 &&
              plain->layers[3]->n_regs == 0, "registered regularizers");

    /* evaluate: Keras 3 includes the penalties (compute_loss in test_step) */
    double e0[2], e1[2];
    int nv = 0;
    CHECK_OK(sn_model_evaluate(plain, ds, 0, e0, 2, &nv));
    CHECK_OK(sn_model_evaluate(reg, ds, 0, e1, 2, &nv));
    double pen = hand_penalty(reg);
    CHECK(pen > 0.1, "penalty %g is not trivial", pen);
    CHECK(fabs(e1[0] - (e0[0] + pen)) < 1e-5 * (1 + e1[0]), "evaluate: loss %.7g, expected %.7g + %.7g = %.7g",
          e1[0], e0[0], pen, e0[0] + pen);
    CHECK(e1[1] == e0[1], "accuracy unaffected: %g vs %g", e1[1], e0[1]);

    /* the penalty's gradient: 2 l2 w + l1 sign(w), through sn_model_regularization */
    sn_node p;
    bool none = true;
    CHECK_OK(sn_model_regularization(reg, &p, &none));
    CHECK(!none, "regularized model has a penalty");
    sn_node wrt[3] = {reg->layers[0]->vars[0], reg->layers[3]->vars[0], reg->layers[1]->vars[0]}, gr[3];
    CHECK_OK(sn_gradients(reg->g, p, 3, wrt, gr));
    sn_node tg[4] = {p, gr[0], gr[1], gr[2]};
    sn_plan *pl = NULL;
    CHECK_OK(sn_plan_new(&pl, reg->g, 4, tg, NULL));
    if (pl) {
        CHECK_OK(sn_plan_run(pl, 1, NULL, NULL));
        CHECK(fabs(*(float *)sn_plan_buffer(pl, p) - pen) < 1e-5 * pen, "penalty node %g, by hand %g",
              *(float *)sn_plan_buffer(pl, p), pen);
        const double l1[3] = {0, 0.01, 0.02}, l2[3] = {0.03, 0.02, 0};
        for (int k = 0; k < 3; k++) {
            sn_shape ws = sn_node_shape(reg->g, wrt[k]);
            const float *w = sn_variable_data(reg->g, wrt[k]), *g = sn_plan_buffer(pl, gr[k]);
            int bad = 0;
            for (int64_t i = 0; i < sn_shape_numel(&ws); i++) {
                double want = 2 * l2[k] * w[i] + l1[k] * (w[i] > 0 ? 1 : w[i] < 0 ? -1 : 0);
                if (!(fabs(g[i] - want) <= 1e-6)) bad++;
            }
            CHECK(bad == 0, "penalty gradient of %s: %d entries differ from 2 l2 w + l1 sign(w)",
                  sn_node_name(reg->g, wrt[k]), bad);
        }
    }
    sn_plan_free(pl);

    /* one SGD step: the regularized kernel moves by the extra -lr (2 l2 w + l1 sign w), and
     * fit's loss includes the penalty of the weights it started from */
    sn_node ck0 = plain->layers[3]->vars[0], ck1 = reg->layers[3]->vars[0];
    sn_shape ks = sn_node_shape(reg->g, ck1);
    int64_t nk = sn_shape_numel(&ks);
    float *w_start = malloc(sizeof *w_start * (size_t)nk);
    memcpy(w_start, sn_variable_data(reg->g, ck1), sizeof *w_start * (size_t)nk);
    double pen0 = hand_penalty(reg);
    sn_fit_opts fo = sn_fit_defaults();
    sn_history *h0 = NULL, *h1 = NULL;
    CHECK_OK(sn_model_fit(plain, ds, &fo, &h0));
    CHECK_OK(sn_model_fit(reg, ds, &fo, &h1));
    double lf0 = sn_history_get(h0, "loss", 0), lf1 = sn_history_get(h1, "loss", 0);
    CHECK(fabs(lf1 - (lf0 + pen0)) < 1e-5 * (1 + lf1), "fit loss %.7g, expected %.7g + %.7g", lf1, lf0, pen0);
    /* Both models start from the same weights and see the same batch, so their data gradients
     * are equal and the kernels differ by the penalty's step: -lr (2 l2 w + l1 sign w). */
    const float *a = sn_variable_data(plain->g, ck0), *b = sn_variable_data(reg->g, ck1);
    int bad = 0;
    for (int64_t i = 0; i < nk; i++) {
        double w = w_start[i], want = -0.1 * (2 * 0.02 * w + 0.01 * (w > 0 ? 1 : w < 0 ? -1 : 0));
        if (!(fabs((b[i] - a[i]) - want) <= 1e-6)) bad++;
    }
    CHECK(bad == 0, "one SGD step: %d of %lld kernel entries moved by other than the penalty gradient", bad,
          (long long)nk);
    free(w_start);
    sn_history_free(h0);
    sn_history_free(h1);
    sn_model_free(plain);
    sn_model_free(reg);
    sn_dataset_free(ds);
    sn_tensor_free(x);
    sn_tensor_free(y);

    /* the guide preset carries L2(1e-5) on its five kernels and no bias regularizer */
    sn_model *g = NULL;
    CHECK_OK(sn_model_preset("tpu_guide_cnn", &g));
    int nk5 = 0;
    for (int i = 0; g && i < g->n_layers; i++) {
        const sn_layer *l = g->layers[i];
        const sn_regularizer *kr = strcmp(l->vt->class_name, "Conv2D") == 0 ? &l->conv.kernel_regularizer
                                   : strcmp(l->vt->class_name, "Dense") == 0 ? &l->dense.kernel_regularizer
                                                                              : NULL;
        const sn_regularizer *br = strcmp(l->vt->class_name, "Conv2D") == 0 ? &l->conv.bias_regularizer
                                   : strcmp(l->vt->class_name, "Dense") == 0 ? &l->dense.bias_regularizer
                                                                              : NULL;
        if (kr) nk5 += kr->l2 == 1e-5 && kr->l1 == 0 && br->l1 == 0 && br->l2 == 0;
    }
    CHECK(nk5 == 5, "tpu_guide_cnn: %d of 5 layers with kernel L2(1e-5)", nk5);
    sn_model_free(g);
}

int main(void) {
    test_regularizers();
    test_activation_names();
    test_initializers();
    test_layer_initializers();
    test_dense_more();
    test_bn_options();
    test_reshape_gap();
    test_summary();
    test_gradients_more();
    return sn_test_finish("test_layers_more");
}
