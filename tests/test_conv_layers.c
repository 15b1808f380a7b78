/* The convolution family of issue 23 (graph/op_depthwise.c, backend ref_depthwise.c and
 * cpu_depthwise.c, nn/layers/layers_conv.c, nn/keras/model_config_conv.c):
 *  1. depthwise_conv2d and conv2d_transpose, forward and both gradients, in float32 on the
 *     CPU table (oneDNN) against float64 on the reference kernels, over strides, paddings,
 *     depth multipliers and shapes whose windows overhang the input; and which kernel ran;
 *  2. the layers' output shapes (Keras's sizes, Conv2DTranspose's deconv_output_length) and
 *     parameter counts, and the shape errors naming the layer;
 *  3. the Keras config reader: what sinter does not implement is refused naming the field
 *     (dilation_rate, output_padding, interpolation, data_format, constraints), and a model
 *     of every class survives sn_model_to_json -> sn_model_from_json with equal predictions.
 *  4. a VALID convolution of a zero padding built as the SAME convolution it equals, and only
 *     then (the builders' fold, op_conv.c).
 * (Gradient checks by finite differences: test_gradcheck.c; against real Keras:
 * tests/keras_models_interop.py.) */
#include <math.h>
#include <stdlib.h>

#include "backend/kernel.h"
#include "graph/graph_impl.h"
#include "nn/nn_impl.h"
#include "nn/train/train_impl.h"
#include "sn_test.h"

#define S4(a, b, c, d) {.ndim = 4, .dim = {a, b, c, d}}

typedef struct geo {
    const char *name;
    bool transpose;
    sn_shape x, w;
    int sh, sw;
    sn_padding pad;
} geo;

/* Fills the plan's buffers of ins[0..3) with normal values from seed (f64 runs get the f32
 * values, so that both dtypes compute on the same numbers). */
static void fill_ins(sn_plan *p, sn_graph *g, const sn_node ins[3], sn_dtype dt, uint64_t seed) {
    sn_rng rng;
    sn_rng_init(&rng, seed, 0);
    for (int k = 0; k < 3; k++) {
        sn_shape sk = sn_node_shape(g, ins[k]);
        void *b = sn_plan_buffer(p, ins[k]);
        for (int64_t i = 0; i < sn_shape_numel(&sk); i++) {
            double v = sn_rng_normal(&rng);
            if (dt == SN_F32) ((float *)b)[i] = (float)v;
            else ((double *)b)[i] = (double)(float)v;
        }
    }
}

/* Copies the plan's values of t[0..3) out as doubles (out[k] malloc'd, n[k] elements). */
static void read_outs(sn_plan *p, sn_graph *g, const sn_node t[3], sn_dtype dt, double *out[3],
                      int64_t n[3]) {
    for (int k = 0; k < 3; k++) {
        sn_shape sk = sn_node_shape(g, t[k]);
        n[k] = sn_shape_numel(&sk);
        out[k] = malloc(sizeof(double) * (size_t)n[k]);
        const void *b = sn_plan_buffer(p, t[k]);
        for (int64_t i = 0; i < n[k]; i++)
            out[k][i] = dt == SN_F32 ? ((const float *)b)[i] : ((const double *)b)[i];
    }
}

/* y = op(x, w) and the gradients of sum(y * r) for x and w, in dtype dt; values from seed. */
static bool run_op(const geo *c, sn_dtype dt, double *out[3], int64_t n[3], const char **impl) {
    sn_graph *g = sn_graph_new();
    sn_node x = sn_input(g, "x", dt, &c->x), w = sn_input(g, "w", dt, &c->w);
    sn_conv2d_opts o = {.stride_h = c->sh, .stride_w = c->sw, .padding = c->pad};
    sn_node y = c->transpose ? sn_conv2d_transpose(g, x, w, &o) : sn_depthwise_conv2d(g, x, w, &o);
    sn_shape ys = sn_node_shape(g, y);
    sn_node r = sn_input(g, "r", dt, &ys);
    sn_node loss = sn_reduce_sum(g, sn_mul(g, y, r), 0, NULL, false);
    sn_node wrt[2] = {x, w}, gr[2];
    sn_plan *p = NULL;
    sn_status s = sn_graph_status(g);
    if (s == SN_OK) s = sn_gradients(g, loss, 2, wrt, gr);
    sn_node t[3] = {y, gr[0], gr[1]};
    if (s == SN_OK) s = sn_plan_new(&p, g, 3, t, NULL);
    CHECK(s == SN_OK, "%s (%s): %s", c->name, sn_dtype_name(dt), sn_last_error());
    if (s != SN_OK) {
        sn_graph_free(g);
        return false;
    }
    fill_ins(p, g, (sn_node[]){x, w, r}, dt, 77);
    CHECK_OK(sn_plan_profile(p, true));
    CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
    read_outs(p, g, t, dt, out, n);
    *impl = "?";
    sn_node nd;
    const char *im;
    double sec;
    for (int call = 0; sn_plan_profile_entry(p, call, &nd, &im, &sec); call++)
        if (nd == y) *impl = im;
    sn_plan_free(p);
    sn_graph_free(g);
    return true;
}

static void test_kernels(void) {
    static const geo cases[] = {
        {"depthwise 3x3 same s1 m1", false, S4(2, 7, 6, 5), S4(3, 3, 5, 1), 1, 1, SN_PAD_SAME},
        {"depthwise 3x3 same s2 m1", false, S4(2, 8, 7, 16), S4(3, 3, 16, 1), 2, 2, SN_PAD_SAME},
        {"depthwise 3x2 valid s2x1 m2", false, S4(3, 7, 6, 3), S4(3, 2, 3, 2), 2, 1, SN_PAD_VALID},
        {"depthwise 5x5 same s1 m3", false, S4(1, 4, 4, 2), S4(5, 5, 2, 3), 1, 1, SN_PAD_SAME},
        {"depthwise 3x3 valid s2 m2 (pb=-1)", false, S4(2, 8, 8, 3), S4(3, 3, 3, 2), 2, 2, SN_PAD_VALID},
        {"transpose 3x3 same s2", true, S4(2, 4, 5, 6), S4(3, 3, 4, 6), 2, 2, SN_PAD_SAME},
        {"transpose 3x3 valid s2", true, S4(2, 3, 3, 2), S4(3, 3, 5, 2), 2, 2, SN_PAD_VALID},
        {"transpose 2x3 valid s1x2", true, S4(1, 4, 3, 3), S4(2, 3, 2, 3), 1, 2, SN_PAD_VALID},
        {"transpose 2x2 valid s3 (k < s)", true, S4(1, 3, 2, 2), S4(2, 2, 3, 2), 3, 3, SN_PAD_VALID},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double *a[3] = {0}, *b[3] = {0};
        int64_t na[3], nb[3];
        const char *ia = "?", *ib = "?";
        if (!run_op(&cases[i], SN_F32, a, na, &ia) || !run_op(&cases[i], SN_F64, b, nb, &ib)) {
            for (int k = 0; k < 3; k++) free(a[k]), free(b[k]);
            continue;
        }
        static const char *what[3] = {"output", "d/dx", "d/dw"};
        double worst = 0;
        for (int k = 0; k < 3; k++) {
            CHECK(na[k] == nb[k], "%s %s: %lld vs %lld elements", cases[i].name, what[k],
                  (long long)na[k], (long long)nb[k]);
            for (int64_t j = 0; j < na[k] && na[k] == nb[k]; j++) {
                double e = fabs(a[k][j] - b[k][j]) / fmax(1.0, fabs(b[k][j]));
                if (e > worst) worst = e;
                if (e > 1e-5) {
                    CHECK(0, "%s %s[%lld]: f32 %s %.8g, f64 reference %.8g", cases[i].name,
                          what[k], (long long)j, ia, a[k][j], b[k][j]);
                    break;
                }
            }
            free(a[k]);
            free(b[k]);
        }
        printf("ok  %-34s f32 (%s) vs f64 (%s): worst relative %.2e\n", cases[i].name, ia, ib,
               worst);
        CHECK(!strcmp(ib, "ref"), "%s: the f64 graph ran on '%s', not the reference", cases[i].name, ib);
    }
}

/* ---- layers ------------------------------------------------------------------------------ */

static sn_model *one_layer(sn_layer *l, sn_shape in, sn_status *st) {
    sn_model *m = sn_sequential_new("t");
    *st = l ? sn_model_add(m, l) : SN_ERR_INVALID;
    if (*st == SN_OK) *st = sn_model_build(m, &in, 1);
    return m;
}

static void expect_out(sn_layer *l, sn_shape in, sn_shape want, int64_t params) {
    sn_status st;
    const char *cls = l ? l->vt->class_name : "?";
    sn_model *m = one_layer(l, in, &st);
    CHECK(st == SN_OK, "%s: build: %s", cls, sn_last_error());
    if (st == SN_OK) {
        sn_shape got = m->layers[0]->out_shape;
        bool same = got.ndim == want.ndim;
        for (int i = 0; same && i < got.ndim; i++) same = got.dim[i] == want.dim[i];
        CHECK(same, "%s: output (%lld, %lld, %lld), expected (%lld, %lld, %lld)", cls,
              (long long)got.dim[0], (long long)got.dim[1], (long long)got.dim[2],
              (long long)want.dim[0], (long long)want.dim[1], (long long)want.dim[2]);
        int64_t n = 0;
        for (int j = 0; j < m->layers[0]->n_vars; j++) {
            sn_shape vs = sn_node_shape(m->g, m->layers[0]->vars[j]);
            n += sn_shape_numel(&vs);
        }
        CHECK(n == params, "%s: %lld parameters, expected %lld", cls, (long long)n,
              (long long)params);
    }
    sn_model_free(m);
}

#define S3(a, b, c) ((sn_shape){.ndim = 3, .dim = {a, b, c}})

static void test_layer_shapes(void) {
    sn_sepconv2d_layer_opts d = sn_sepconv2d_layer_defaults(0, 3, 3);
    expect_out(sn_layer_depthwise_conv2d_ex(&d), S3(8, 7, 4), S3(6, 5, 4), 3 * 3 * 4 + 4);
    d.stride_h = d.stride_w = 2, d.padding = SN_PAD_SAME, d.depth_multiplier = 2, d.use_bias = false;
    expect_out(sn_layer_depthwise_conv2d_ex(&d), S3(8, 7, 4), S3(4, 4, 8), 3 * 3 * 4 * 2);
    sn_sepconv2d_layer_opts s = sn_sepconv2d_layer_defaults(10, 3, 3);
    s.padding = SN_PAD_SAME;
    expect_out(sn_layer_separable_conv2d_ex(&s), S3(6, 6, 4), S3(6, 6, 10), 36 + 40 + 10);
    sn_conv2d_layer_opts t = sn_conv2d_layer_defaults(6, 3, 3);
    t.stride_h = t.stride_w = 2;
    expect_out(sn_layer_conv2d_transpose_ex(&t), S3(5, 4, 3), S3(11, 9, 6), 3 * 3 * 6 * 3 + 6);
    t.padding = SN_PAD_SAME;
    expect_out(sn_layer_conv2d_transpose_ex(&t), S3(5, 4, 3), S3(10, 8, 6), 3 * 3 * 6 * 3 + 6);
    sn_conv2d_layer_opts t2 = sn_conv2d_layer_defaults(2, 2, 2);
    t2.stride_h = t2.stride_w = 3;
    expect_out(sn_layer_conv2d_transpose_ex(&t2), S3(5, 4, 3), S3(15, 12, 2), 2 * 2 * 2 * 3 + 2);
    expect_out(sn_layer_upsampling2d(2, 3), S3(5, 4, 3), S3(10, 12, 3), 0);
    expect_out(sn_layer_cropping2d(1, 2, 0, 3), S3(5, 4, 3), S3(2, 1, 3), 0);

    sn_status st;
    sn_model *m = one_layer(sn_layer_cropping2d(3, 2, 0, 0), S3(5, 4, 3), &st);
    CHECK(st == SN_ERR_SHAPE && strstr(sn_last_error(), "Cropping2D") &&
          strstr(sn_last_error(), "height > 5"), "over-cropping: %s", sn_last_error());
    sn_model_free(m);
    d = sn_sepconv2d_layer_defaults(0, 5, 5);
    m = one_layer(sn_layer_depthwise_conv2d_ex(&d), S3(4, 8, 2), &st);
    CHECK(st == SN_ERR_SHAPE && strstr(sn_last_error(), "DepthwiseConv2D") &&
          strstr(sn_last_error(), "height >= 5"), "a 5x5 valid window on 4 rows: %s",
          sn_last_error());
    sn_model_free(m);
    d.depth_multiplier = 0;
    CHECK(sn_layer_depthwise_conv2d_ex(&d) == NULL &&
          strstr(sn_last_error(), "depth_multiplier is 0"), "depth_multiplier 0: %s",
          sn_last_error());
    s.filters = 0;
    CHECK(sn_layer_separable_conv2d_ex(&s) == NULL && strstr(sn_last_error(), "filters is 0"),
          "SeparableConv2D filters 0: %s", sn_last_error());
    CHECK(sn_layer_upsampling2d(0, 2) == NULL && strstr(sn_last_error(), "UpSampling2D"),
          "UpSampling2D size 0: %s", sn_last_error());
}

/* ---- Keras configs ----------------------------------------------------------------------- */

#define SEQ(layer) "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"m\", \"layers\": [" \
    "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 8, 8, 4]}}, " layer "]}}"

static void test_config_refusals(void) {
    static const struct { const char *json, *needle; } cases[] = {
        {SEQ("{\"class_name\": \"DepthwiseConv2D\", \"config\": {\"kernel_size\": [3, 3], "
             "\"dilation_rate\": [2, 2]}}"), "field 'dilation_rate' is [2, 2]"},
        {SEQ("{\"class_name\": \"DepthwiseConv2D\", \"config\": {\"kernel_size\": 3, "
             "\"depthwise_constraint\": {\"class_name\": \"NonNeg\", \"config\": {}}}}"),
         "depthwise_constraint"},
        {SEQ("{\"class_name\": \"SeparableConv2D\", \"config\": {\"filters\": 4, "
             "\"kernel_size\": 3, \"data_format\": \"channels_first\"}}"),
         "field 'data_format' is \"channels_first\""},
        {SEQ("{\"class_name\": \"SeparableConv2D\", \"config\": {\"filters\": 4, "
             "\"kernel_size\": 3, \"pointwise_constraint\": {\"class_name\": \"NonNeg\", "
             "\"config\": {}}}}"), "pointwise_constraint"},
        {SEQ("{\"class_name\": \"Conv2DTranspose\", \"config\": {\"filters\": 4, "
             "\"kernel_size\": 3, \"output_padding\": [1, 1]}}"), "output_padding"},
        {SEQ("{\"class_name\": \"Conv2DTranspose\", \"config\": {\"filters\": 4, "
             "\"kernel_size\": 3, \"padding\": \"full\"}}"), "field 'padding' is \"full\""},
        {SEQ("{\"class_name\": \"UpSampling2D\", \"config\": {\"size\": [2, 2], "
             "\"interpolation\": \"bilinear\"}}"), "field 'interpolation' is \"bilinear\""},
        {SEQ("{\"class_name\": \"Cropping2D\", \"config\": {\"cropping\": [[1, 2, 3]]}}"),
         "field 'cropping' is"},
        {SEQ("{\"class_name\": \"Cropping2D\", \"config\": {\"cropping\": [1, -1]}}"),
         "field 'cropping' is [1,-1], expected an int, a pair or [[top, bottom], [left, right]] "
         "of ints >= 0"},
        {SEQ("{\"class_name\": \"ZeroPadding2D\", \"config\": {\"padding\": [[1, 2, 3]]}}"),
         "field 'padding' is [[1,2,3]], expected an int, a pair or [[top, bottom], "
         "[left, right]] of ints >= 0"},
        {SEQ("{\"class_name\": \"ZeroPadding2D\", \"config\": {\"padding\": \"same\"}}"),
         "field 'padding' is \"same\""},
        {SEQ("{\"class_name\": \"DepthwiseConv2D\", \"config\": {\"kernel_size\": 3, "
             "\"groups\": 1}}"), "groups"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sn_model *m = NULL;
        sn_status st = sn_model_from_json(cases[i].json, strlen(cases[i].json), 0, &m, NULL);
        CHECK(st != SN_OK && strstr(sn_last_error(), cases[i].needle),
              "case %zu: %s (wanted a refusal naming '%s')", i, sn_last_error(), cases[i].needle);
        sn_model_free(m);
    }
}

/* ZeroPadding2D's padding and Cropping2D's cropping in each form Keras takes (an int, a pair
 * per axis, [[top, bottom], [left, right]]; null or absent: the default), on an 8x8x4 input. */
static void test_config_sides(void) {
    static const struct { const char *json; int64_t h, w; } cases[] = {
        {SEQ("{\"class_name\": \"ZeroPadding2D\", \"config\": {\"padding\": 2}}"), 12, 12},
        {SEQ("{\"class_name\": \"ZeroPadding2D\", \"config\": {\"padding\": [1, 2]}}"), 10, 12},
        {SEQ("{\"class_name\": \"ZeroPadding2D\", \"config\": {\"padding\": [[1, 0], [2, 3]]}}"),
         9, 13},
        {SEQ("{\"class_name\": \"ZeroPadding2D\", \"config\": {\"padding\": null}}"), 10, 10},
        {SEQ("{\"class_name\": \"ZeroPadding2D\", \"config\": {}}"), 10, 10},
        {SEQ("{\"class_name\": \"Cropping2D\", \"config\": {\"cropping\": 1}}"), 6, 6},
        {SEQ("{\"class_name\": \"Cropping2D\", \"config\": {\"cropping\": [1, 2]}}"), 6, 4},
        {SEQ("{\"class_name\": \"Cropping2D\", \"config\": {\"cropping\": [[1, 0], [2, 3]]}}"),
         7, 3},
        {SEQ("{\"class_name\": \"Cropping2D\", \"config\": {\"cropping\": null}}"), 8, 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sn_model *m = NULL;
        sn_status st = sn_model_from_json(cases[i].json, strlen(cases[i].json), 0, &m, NULL);
        CHECK(st == SN_OK, "case %zu: %s", i, sn_last_error());
        if (st == SN_OK) {
            sn_shape o = sn_model_output_shape(m);
            CHECK(o.ndim == 3 && o.dim[0] == cases[i].h && o.dim[1] == cases[i].w && o.dim[2] == 4,
                  "case %zu: output [%lld, %lld, %lld] (%d dims), expected [%lld, %lld, 4]", i,
                  (long long)o.dim[0], (long long)o.dim[1], (long long)o.dim[2], o.ndim,
                  (long long)cases[i].h, (long long)cases[i].w);
        }
        sn_model_free(m);
    }
}

/* Every class in one Sequential, written by sinter and read back: the same config, the same
 * predictions. */
static void test_config_round_trip(void) {
    static const char json[] = SEQ(
        "{\"class_name\": \"DepthwiseConv2D\", \"config\": {\"name\": \"dw\", \"kernel_size\": 3, "
        "\"strides\": 2, \"padding\": \"same\", \"depth_multiplier\": 2, \"activation\": \"relu6\"}}, "
        "{\"class_name\": \"SeparableConv2D\", \"config\": {\"name\": \"sep\", \"filters\": 6, "
        "\"kernel_size\": [2, 3], \"use_bias\": false, \"depth_multiplier\": 1}}, "
        "{\"class_name\": \"Conv2DTranspose\", \"config\": {\"name\": \"tr\", \"filters\": 3, "
        "\"kernel_size\": 3, \"strides\": [2, 2], \"padding\": \"same\", \"activation\": \"tanh\"}}, "
        "{\"class_name\": \"UpSampling2D\", \"config\": {\"name\": \"up\", \"size\": [1, 2]}}, "
        "{\"class_name\": \"Cropping2D\", \"config\": {\"name\": \"crop\", \"cropping\": [[1, 0], [2, 1]]}}, "
        "{\"class_name\": \"Flatten\", \"config\": {\"name\": \"f\"}}");
    sn_model *a = NULL, *b = NULL;
    CHECK_OK(sn_model_from_json(json, sizeof json - 1, 3, &a, NULL));
    if (!a) return;
    char *j1 = NULL, *j2 = NULL;
    CHECK_OK(sn_model_to_json(a, &j1));
    if (j1) CHECK_OK(sn_model_from_json(j1, strlen(j1), 9, &b, NULL));
    if (b) CHECK_OK(sn_model_to_json(b, &j2));
    CHECK(j1 && j2 && !strcmp(j1, j2), "config changed through write -> read -> write");
    if (j1) {
        static const char *const want[] = {"\"depthwise_initializer\"", "\"pointwise_initializer\"",
                                           "\"output_padding\": null", "\"interpolation\": \"nearest\"",
                                           "\"cropping\": [[1, 0], [2, 1]]", "\"depth_multiplier\": 2"};
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            CHECK(strstr(j1, want[i]) != NULL, "written config lacks %s", want[i]);
    }
    free(j1);
    free(j2);
    if (a && b) {
        /* same weights into b, then the same predictions */
        for (int i = 0; i < a->n_layers; i++)
            for (int k = 0; k < a->layers[i]->n_vars; k++) {
                sn_shape s = sn_node_shape(a->g, a->layers[i]->vars[k]);
                memcpy(sn_variable_data(b->g, b->layers[i]->vars[k]),
                       sn_variable_data(a->g, a->layers[i]->vars[k]),
                       sizeof(float) * (size_t)sn_shape_numel(&s));
            }
        sn_shape xs = {.ndim = 4, .dim = {2, 8, 8, 4}};
        sn_tensor *x = NULL, *ya = NULL, *yb = NULL;
        CHECK_OK(sn_tensor_new(&x, SN_F32, &xs));
        if (!x) return;
        float *xd = sn_tensor_data(x);
        for (int i = 0; i < 2 * 8 * 8 * 4; i++) xd[i] = (float)sin(0.37 * i);
        CHECK_OK(sn_model_predict(a, x, &ya));
        CHECK_OK(sn_model_predict(b, x, &yb));
        if (ya && yb) {
            const float *pa = sn_tensor_cdata(ya), *pb = sn_tensor_cdata(yb);
            int64_t n = sn_tensor_numel(ya);
            /* 8x8x4 -> 4x4x8 -> 3x2x6 -> 6x4x3 -> 6x8x3 -> 5x5x3 */
            CHECK(n == 2 * 5 * 5 * 3 && n == sn_tensor_numel(yb), "prediction of %lld values",
                  (long long)n);
            CHECK(!memcmp(pa, pb, sizeof(float) * (size_t)n), "predictions differ after the round trip");
        }
        sn_tensor_free(x);
        sn_tensor_free(ya);
        sn_tensor_free(yb);
    }
    sn_model_free(a);
    sn_model_free(b);
}

/* Keras's stride-2 depthwise and separable layers on even sizes, trained: every depthwise and
 * convolution node of the training plan (forward, data and filter gradients) runs on a fast
 * kernel, none on the reference. "same" 3x3 stride 2 on an even size implies a bottom/right
 * padding of +1; "valid" 3x3 stride 2 on an even size implies -1 (the last row and column are
 * read by no window), which cpu_depthwise.c and cpu_conv_geom.c take with padding 0. */
static void test_fast_path_in_training(void) {
    if (!strcmp(sn_cpu_kernels()->k[SN_OP_DEPTHWISE_CONV2D]->impl, "ref")) {
        printf("skip fast-path training check: this build has no oneDNN\n");
        return;
    }
    static const char json[] =
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"m\", \"layers\": ["
        "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 32, 32, 8]}}, "
        "{\"class_name\": \"SeparableConv2D\", \"config\": {\"name\": \"sep_same\", \"filters\": 8, "
        "\"kernel_size\": 3, \"strides\": 2, \"padding\": \"same\"}}, "          /* 32 -> 16, pb +1 */
        "{\"class_name\": \"DepthwiseConv2D\", \"config\": {\"name\": \"dw_same\", \"kernel_size\": 3, "
        "\"strides\": 2, \"padding\": \"same\", \"activation\": \"relu6\"}}, "   /* 16 -> 8, pb +1 */
        "{\"class_name\": \"SeparableConv2D\", \"config\": {\"name\": \"sep_valid\", \"filters\": 8, "
        "\"kernel_size\": 3, \"strides\": 2, \"padding\": \"valid\"}}, "         /* 8 -> 3, pb -1 */
        "{\"class_name\": \"ZeroPadding2D\", \"config\": {\"name\": \"zp\", \"padding\": [[2, 3], [2, 3]]}}, "
        "{\"class_name\": \"DepthwiseConv2D\", \"config\": {\"name\": \"dw_valid\", \"kernel_size\": 3, "
        "\"strides\": 2, \"padding\": \"valid\", \"depth_multiplier\": 2}}, "    /* 8 -> 3, pb -1 */
        "{\"class_name\": \"Flatten\", \"config\": {\"name\": \"f\"}}, "
        "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 4}}]}}";
    sn_model *m = NULL;
    sn_status st = sn_model_from_json(json, sizeof json - 1, 5, &m, NULL);
    CHECK(st == SN_OK, "fast-path model: %s", sn_last_error());
    if (st != SN_OK) return;
    sn_compile_opts co = sn_compile_defaults();
    CHECK_OK(sn_model_compile(m, &co));
    const int64_t batch = 4;
    sn_shape ys = {.ndim = 1, .dim = {batch}};
    sn_cached_plan *cp = NULL;
    CHECK_OK(sn_train_plan(m, SN_PLAN_TRAIN, batch, &ys, SN_I32, &cp));
    if (!cp) {
        sn_model_free(m);
        return;
    }
    float *x = sn_plan_buffer(cp->plan, cp->x);
    int32_t *y = sn_plan_buffer(cp->plan, cp->y);
    for (int64_t i = 0; i < batch * 32 * 32 * 8; i++) x[i] = (float)sin(0.37 * (double)i);
    for (int64_t i = 0; i < batch; i++) y[i] = (int32_t)(i % 4);
    CHECK_OK(sn_plan_profile(cp->plan, true));
    CHECK_OK(sn_plan_run(cp->plan, 1, NULL, NULL));
    sn_graph *g = sn_model_graph(m);
    int n_dw = 0, n_conv = 0, n_ref = 0;
    sn_node nd;
    const char *im;
    double sec;
    for (int c = 0; sn_plan_profile_entry(cp->plan, c, &nd, &im, &sec); c++) {
        const char *op = sn_node_op_name(g, nd);
        bool dw = !strncmp(op, "depthwise", 9), conv = !strncmp(op, "conv2d", 6);
        if (!dw && !conv) continue;
        n_dw += dw, n_conv += conv;
        sn_shape sh = sn_node_shape(g, nd);
        char sb[64];
        n_ref += !strcmp(im, "ref");
        CHECK(strcmp(im, "ref") != 0, "training plan: node %d %s %s ran on the reference kernel",
              (int)nd, op, sn_shape_str(&sh, sb, sizeof sb));
    }
    /* forward, filter gradient and (but for the first layer's) data gradient of the four
     * depthwise convolutions; the separables' 1x1 pointwise convolutions likewise */
    CHECK(n_dw == 11 && n_conv == 6, "training plan: %d depthwise and %d conv2d nodes, expected "
          "11 and 6", n_dw, n_conv);
    if (!n_ref && n_dw == 11 && n_conv == 6)
        printf("ok  training plan: %d depthwise and %d conv2d nodes, none on the reference\n",
               n_dw, n_conv);
    sn_model_free(m);
}

/* y = conv(pad(x), w) [pad read through an exact * 1 where block]; fills out[3] with y and the
 * gradients of sum(y * r) for x and w; *folded: the convolution reads x itself. */
static void zp_run(bool dw, sn_shape xs, int64_t kc, const int64_t *before, const int64_t *after,
                   int s, bool block, double *out[3], int64_t n[3], bool *folded) {
    sn_graph *g = sn_graph_new();
    sn_shape ws = S4(3, 3, xs.dim[3], dw ? 1 : kc);
    sn_node x = sn_input(g, "x", SN_F32, &xs), w = sn_input(g, "w", SN_F32, &ws);
    sn_node p = sn_zero_pad(g, x, before, after);
    if (block) {
        const float one = 1.0f;
        p = sn_mul(g, p, sn_const(g, SN_F32, &(sn_shape){.ndim = 1, .dim = {1}}, &one));
    }
    sn_conv2d_opts o = {.stride_h = s, .stride_w = s, .padding = SN_PAD_VALID};
    sn_node y = dw ? sn_depthwise_conv2d(g, p, w, &o) : sn_conv2d(g, p, w, &o);
    sn_shape ys = sn_node_shape(g, y);
    sn_node r = sn_input(g, "r", SN_F32, &ys);
    sn_node loss = sn_reduce_sum(g, sn_mul(g, y, r), 0, NULL, false);
    sn_node wrt[2] = {x, w}, gr[2] = {SN_NONE, SN_NONE};
    CHECK_OK(sn_gradients(g, loss, 2, wrt, gr));
    *folded = y != SN_NONE && g->nodes[y].in[0] == x;
    sn_node t[3] = {y, gr[0], gr[1]};
    sn_plan *pl = NULL;
    CHECK_OK(sn_plan_new(&pl, g, 3, t, NULL));
    for (int k = 0; k < 3; k++) out[k] = NULL, n[k] = 0;
    if (pl) {
        fill_ins(pl, g, (sn_node[]){x, w, r}, SN_F32, 91);
        CHECK_OK(sn_plan_run(pl, 1, NULL, NULL));
        read_outs(pl, g, t, SN_F32, out, n);
        sn_plan_free(pl);
    }
    sn_graph_free(g);
}

/* The builders' fold (op_conv.c, sn_conv_fold_zero_pad): a VALID convolution of a zero padding
 * that is a SAME convolution of the unpadded input is built as that. MobileNetV2's correct_pad
 * at stride 2, (0, 1) on an even size and (1, 1) on an odd one, must fold, for conv2d and
 * depthwise; (1, 1) on an even size (SAME pads (0, 1) there), a padded batch axis and (0, 1) at
 * stride 1 must not. Either way the output and both gradients must be those of the same
 * padding read through an exact * 1, which never folds (1e-5 of the largest magnitude: oneDNN
 * may sum another shape in another order). */
static void test_zero_pad_fold(void) {
    static const struct {
        const char *name;
        int64_t n, hw, before[4], after[4];
        int s;
        bool folds;
    } cs[] = {
        {"even (0, 1) stride 2", 2, 10, {0, 0, 0, 0}, {0, 1, 1, 0}, 2, true},
        {"odd (1, 1) stride 2", 2, 9, {0, 1, 1, 0}, {0, 1, 1, 0}, 2, true},
        {"even (1, 1) stride 2", 2, 10, {0, 1, 1, 0}, {0, 1, 1, 0}, 2, false},
        {"batch padded", 2, 10, {1, 0, 0, 0}, {0, 1, 1, 0}, 2, false},
        {"even (0, 1) stride 1", 2, 10, {0, 0, 0, 0}, {0, 1, 1, 0}, 1, false},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int dw = 0; dw < 2; dw++) {
            sn_shape xs = S4(cs[i].n, cs[i].hw, cs[i].hw, 16);
            double *a[3], *b[3];
            int64_t na[3], nb[3];
            bool fa, fb;
            zp_run(dw, xs, 24, cs[i].before, cs[i].after, cs[i].s, false, a, na, &fa);
            zp_run(dw, xs, 24, cs[i].before, cs[i].after, cs[i].s, true, b, nb, &fb);
            const char *op = dw ? "depthwise" : "conv2d";
            CHECK(fa == cs[i].folds && !fb, "zero pad + %s, %s: folded %d (expected %d), "
                  "through * 1 folded %d", op, cs[i].name, fa, cs[i].folds, fb);
            static const char *what[3] = {"output", "input gradient", "kernel gradient"};
            for (int k = 0; k < 3; k++) {
                if (!a[k] || !b[k] || na[k] != nb[k]) {
                    CHECK(false, "zero pad + %s, %s: no %s", op, cs[i].name, what[k]);
                    continue;
                }
                double big = 0, err = 0;
                for (int64_t j = 0; j < na[k]; j++) {
                    big = fmax(big, fabs(b[k][j]));
                    err = fmax(err, fabs(a[k][j] - b[k][j]));
                }
                CHECK(big > 0 && err <= 1e-5 * big, "zero pad + %s, %s: %s differs by %.3g (largest "
                      "%.3g)", op, cs[i].name, what[k], err, big);
            }
            for (int k = 0; k < 3; k++) free(a[k]), free(b[k]);
        }
}

int main(void) {
    test_kernels();
    test_zero_pad_fold();
    test_layer_shapes();
    test_config_refusals();
    test_config_sides();
    test_config_round_trip();
    test_fast_path_in_training();
    return sn_test_finish("test_conv_layers");
}
