/* Keras model files (.keras archives, model JSON): round trips through sinter's writer and
 * reader, and malformed or unsupported files, each of which must be a clear error naming the
 * thing (never a crash, never a silent approximation).
 *
 * With SN_KERAS_MODELS_DIR set (tests/test_keras_interop.sh does), it instead serves the
 * interop check: for every NAME.keras / NAME.json listed in DIR/models.txt (one "FILE N" per
 * line, N the rows of DIR/NAME.in.f32), it loads the model, predicts the rows and writes
 * DIR/NAME.<kind>.sinter.f32, and saves the model as DIR/NAME.<kind>.sinter.keras; for every
 * Functional model listed in DIR/functional.txt it predicts each output, saves the model and
 * takes one SGD step (interop_functional below). */
#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>
#include <zip.h>

#include "io/keras_file.h"
#include "nn/keras/model_config.h"
#include "sinter/data.h"
#include "sinter/io.h"
#include "sinter/nn.h"
#include "sn_test.h"

static char dir[256];

static const char *path_in(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void write_text(const char *name, const char *text) {
    FILE *f = fopen(path_in(name), "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* A model with every layer class the reader supports (image part) and a regularizer. */
static sn_model *image_model(void) {
    sn_model *m = sn_sequential_new("every_layer");
    sn_conv2d_layer_opts c = sn_conv2d_layer_defaults(4, 3, 3);
    c.padding = SN_PAD_SAME;
    c.activation = SN_ACT_RELU;
    c.kernel_regularizer.l2 = 1e-4;
    c.kernel_initializer = sn_initializer_defaults(SN_INIT_HE_NORMAL);
    c.kernel_initializer.has_seed = true;
    c.kernel_initializer.seed = 7;
    sn_model_add(m, sn_layer_conv2d_ex(&c));
    sn_model_add(m, sn_layer_batch_norm());
    sn_model_add(m, sn_layer_max_pool2d(2, 2));
    sn_pool2d_opts p = {.pool_h = 2, .pool_w = 2, .stride_h = 1, .stride_w = 1};
    sn_model_add(m, sn_layer_avg_pool2d_ex(&p));
    sn_model_add(m, sn_layer_dropout(0.25));
    sn_model_add(m, sn_layer_activation(SN_ACT_GELU));
    sn_model_add(m, sn_layer_global_avg_pool2d());
    sn_model_add(m, sn_layer_reshape(&(sn_shape){.ndim = 2, .dim = {2, 2}}));
    sn_model_add(m, sn_layer_flatten());
    sn_dense_layer_opts d = sn_dense_layer_defaults(3);
    d.activation = SN_ACT_SOFTMAX;
    d.kernel_regularizer = (sn_regularizer){.l1 = 1e-5, .l2 = 2e-5};
    d.bias_regularizer.l1 = 1e-3;
    sn_model_add(m, sn_layer_dense_ex(&d));
    if (sn_model_build(m, &(sn_shape){.ndim = 3, .dim = {6, 6, 2}}, 3) != SN_OK) {
        fprintf(stderr, "image_model: %s\n", sn_last_error());
        sn_model_free(m);
        return NULL;
    }
    /* Moving statistics away from 0/1, so a lost variable shows in the predictions. */
    sn_node vars[4];
    sn_graph *g = sn_model_graph(m);
    int nv = sn_model_layer_variables(m, 1, vars, 4);
    for (int j = 0; j < nv; j++) {
        float *v = sn_variable_data(g, vars[j]);
        for (int i = 0; i < 4; i++) v[i] = 0.5f + 0.1f * (float)(i + j);
    }
    return m;
}

static sn_tensor *input_for(const sn_shape *in, int64_t batch) {
    sn_shape s = {.ndim = in->ndim + 1, .dim = {batch}};
    for (int i = 0; i < in->ndim; i++) s.dim[i + 1] = in->dim[i];
    sn_tensor *x = NULL;
    if (sn_tensor_new(&x, SN_F32, &s) != SN_OK) return NULL;
    float *p = sn_tensor_data(x);
    for (int64_t i = 0; i < sn_tensor_numel(x); i++) p[i] = (float)((i * 37 % 101) / 101.0);
    return x;
}

static double max_diff(const sn_tensor *a, const sn_tensor *b) {
    if (sn_tensor_numel(a) != sn_tensor_numel(b)) return INFINITY;
    double d = 0;
    for (int64_t i = 0; i < sn_tensor_numel(a); i++)
        d = fmax(d, fabs(sn_tensor_get(a, i) - sn_tensor_get(b, i)));
    return d;
}

static char *config_of(sn_model *m) {
    char *s = NULL;
    CHECK_OK(sn_model_to_json(m, &s));
    return s;
}

static void test_round_trip(void) {
    sn_model *m = image_model();
    CHECK(m != NULL, "model");
    if (!m) return;
    sn_compile_opts co = sn_compile_defaults();
    co.optimizer = sn_optimizer_defaults(SN_SGD);
    co.optimizer.learning_rate = 0.05;
    co.optimizer.momentum = 0.9;
    co.optimizer.nesterov = true;
    co.from_logits = false;
    co.metrics[0] = SN_METRIC_ACCURACY;
    co.steps_per_execution = 5;
    CHECK_OK(sn_model_compile(m, &co));
    sn_tensor *x = input_for(&(sn_shape){.ndim = 3, .dim = {6, 6, 2}}, 4), *y0 = NULL, *y1 = NULL;
    CHECK_OK(sn_model_predict(m, x, &y0));

    /* .keras: the architecture, compile settings and weights come back exactly. */
    const char *kp = path_in("m.keras");
    CHECK_OK(sn_model_save(m, kp));
    CHECK_OK(sn_model_save(m, kp)); /* over an existing file */
    sn_model *r = NULL;
    sn_model_file_info info;
    CHECK_OK(sn_model_load(kp, 99, &r, &info));
    if (r) {
        CHECK(info.has_compile && info.has_weights, "compile %d weights %d", info.has_compile,
              info.has_weights);
        CHECK(!strcmp(info.keras_version, "3.15.1"), "keras_version '%s'", info.keras_version);
        CHECK(info.compile.optimizer.type == SN_SGD && info.compile.optimizer.learning_rate == 0.05 &&
                  info.compile.optimizer.momentum == 0.9 && info.compile.optimizer.nesterov,
              "optimizer came back different");
        CHECK(!info.compile.from_logits && info.compile.n_metrics == 1 &&
                  info.compile.metrics[0] == SN_METRIC_ACCURACY &&
                  info.compile.steps_per_execution == 5,
              "loss/metrics came back different");
        CHECK(info.input_shape.ndim == 3 && info.input_shape.dim[2] == 2, "input shape");
        CHECK_OK(sn_model_compile(r, &info.compile));
        char *a = config_of(m), *b = config_of(r);
        CHECK(a && b && !strcmp(a, b), "configs differ:\n%s\n%s", a, b);
        free(a);
        free(b);
        CHECK_OK(sn_model_predict(r, x, &y1));
        CHECK(y1 && max_diff(y0, y1) == 0, "predictions differ by %g", y1 ? max_diff(y0, y1) : -1);
        CHECK(sn_model_param_count(r, false) == sn_model_param_count(m, false), "params");
    }
    sn_tensor_free(y1);
    sn_model_free(r);
    r = NULL;
    /* No temporary file is left beside the target. */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", kp, (long)getpid());
    CHECK(access(tmp, F_OK) != 0, "temporary %s left behind", tmp);

    /* .json: the architecture and compile settings (as model.to_json() also writes them), no
     * weights; a fresh seed, the same structure. */
    const char *jp = path_in("m.json");
    CHECK_OK(sn_model_save(m, jp));
    CHECK_OK(sn_model_load(jp, 5, &r, &info));
    if (r) {
        CHECK(info.has_compile && !info.has_weights, "JSON: compile %d weights %d",
              info.has_compile, info.has_weights);
        sn_model *m2 = NULL;
        CHECK_OK(sn_model_load(kp, 0, &m2, NULL)); /* uncompiled twin of m for the config */
        char *a = config_of(m2), *b = config_of(r);
        CHECK(a && b && !strcmp(a, b), "JSON config differs:\n%s\n%s", a, b);
        free(a);
        free(b);
        sn_model_free(m2);
    }
    sn_model_free(r);
    CHECK_ERR(sn_model_save(m, path_in("m.h5")), SN_ERR_INVALID, ".keras");
    sn_tensor_free(x);
    sn_tensor_free(y0);
    sn_model_free(m);
}

/* Text models: Embedding -> LSTM or GRU (-> Dense on every step). The .keras round trip gives
 * the same config and bit-identical predictions; every option sinter stores is written. */
static sn_model *text_model_ex(bool gru, bool reset_after) {
    sn_model *m = sn_sequential_new(gru ? (reset_after ? "text_gru" : "text_gru_rb") : "text_lstm");
    sn_embedding_layer_opts e = sn_embedding_layer_defaults(12, 5);
    e.embeddings_regularizer.l2 = 1e-4;
    e.embeddings_initializer = sn_initializer_defaults(SN_INIT_RANDOM_NORMAL);
    e.embeddings_initializer.stddev = 0.3;
    sn_model_add(m, sn_layer_embedding_ex(&e));
    sn_rnn_layer_opts r = gru ? sn_gru_layer_defaults(6) : sn_lstm_layer_defaults(6);
    r.return_sequences = !gru;
    r.reset_after = reset_after;
    r.kernel_regularizer.l1 = 1e-5;
    r.recurrent_regularizer.l2 = 2e-5;
    r.bias_initializer = sn_initializer_defaults(SN_INIT_RANDOM_UNIFORM);
    r.bias_initializer.minval = -0.5;
    r.bias_initializer.maxval = 0.5;
    r.recurrent_initializer = sn_initializer_defaults(SN_INIT_ORTHOGONAL);
    r.recurrent_initializer.has_seed = true;
    r.recurrent_initializer.seed = 11;
    sn_model_add(m, gru ? sn_layer_gru_ex(&r) : sn_layer_lstm_ex(&r));
    sn_model_add(m, sn_layer_dense(12, SN_ACT_SOFTMAX));
    if (sn_model_build(m, &(sn_shape){.ndim = 1, .dim = {7}}, 3) != SN_OK) {
        fprintf(stderr, "text_model: %s\n", sn_last_error());
        sn_model_free(m);
        return NULL;
    }
    return m;
}

static sn_model *text_model(bool gru) { return text_model_ex(gru, true); }

/* reset_after matters to a GRU only: false gives a [3U] bias instead of [2, 3U]. */
static void test_text_round_trip(bool gru, bool reset_after) {
    sn_model *m = text_model_ex(gru, reset_after);
    CHECK(m != NULL, "text model");
    if (!m) return;
    sn_tensor *x = NULL, *y0 = NULL, *y1 = NULL;
    CHECK_OK(sn_tensor_new(&x, SN_F32, &(sn_shape){.ndim = 2, .dim = {3, 7}}));
    float *ids = sn_tensor_data(x);
    for (int i = 0; i < 21; i++) ids[i] = (float)(i * 5 % 12);
    CHECK_OK(sn_model_predict(m, x, &y0));
    const char *kp = path_in(gru ? (reset_after ? "gru.keras" : "gru_rb.keras") : "lstm.keras");
    CHECK_OK(sn_model_save(m, kp));
    sn_model *r = NULL;
    sn_model_file_info info;
    CHECK_OK(sn_model_load(kp, 42, &r, &info));
    if (r) {
        char *a = config_of(m), *b = config_of(r);
        CHECK(a && b && !strcmp(a, b), "%s configs differ:\n%s\n%s", kp, a, b);
        CHECK(a && strstr(a, "\"dtype\": \"int32\"") &&
                  strstr(a, !gru ? "\"unit_forget_bias\": true"
                            : reset_after ? "\"reset_after\": true" : "\"reset_after\": false"),
              "%s: config lacks the int32 input or the cell's option:\n%s", kp, a);
        free(a);
        free(b);
        CHECK_OK(sn_model_predict(r, x, &y1));
        CHECK(y1 && max_diff(y0, y1) == 0, "%s: predictions differ by %g", kp,
              y1 ? max_diff(y0, y1) : -1);
        CHECK(sn_model_param_count(r, false) == sn_model_param_count(m, false), "params");
        /* Embedding 12 x 5, GRU(6) 3 * 6 * (5 + 6) + bias, Dense 6 -> 12 */
        int64_t want = 60 + 198 + (reset_after ? 36 : 18) + 84;
        CHECK(!gru || sn_model_param_count(r, false) == want, "%s: %lld parameters, expected %lld",
              kp, (long long)sn_model_param_count(r, false), (long long)want);
    }
    sn_tensor_free(x);
    sn_tensor_free(y0);
    sn_tensor_free(y1);
    sn_model_free(r);
    sn_model_free(m);
}

/* ---- malformed and unsupported files ------------------------------------------------------ */

/* The config of a small valid model (Dense 4 -> 3), as sinter writes it. */
static json_t *base_config(void) {
    sn_model *m = sn_sequential_new("base");
    sn_model_add(m, sn_layer_dense(3, SN_ACT_RELU));
    sn_model_add(m, sn_layer_dense(2, SN_ACT_NONE));
    json_t *j = NULL;
    if (sn_model_build(m, &(sn_shape){.ndim = 1, .dim = {4}}, 1) == SN_OK) j = sn_model_to_config(m);
    sn_model_free(m);
    return j;
}

static json_t *layer_cfg(json_t *root, int i) {
    return json_object_get(json_array_get(json_object_get(json_object_get(root, "config"), "layers"),
                                          (size_t)i), "config");
}

/* Loads `root` as a JSON file and expects `code` with `needle` in the message. */
static void expect_json(json_t *root, const char *file, sn_status code, const char *needle) {
    json_dump_file(root, path_in(file), 0);
    json_decref(root);
    sn_model *m = NULL;
    sn_status s = sn_model_load(path_in(file), 0, &m, NULL);
    CHECK(s == code && strstr(sn_last_error(), needle) && !m,
          "%s -> %s (wanted %s): '%s' should contain '%s'", file, sn_status_name(s),
          sn_status_name(code), sn_last_error(), needle);
    if (s == code) printf("  %-26s %s\n", file, sn_last_error());
    sn_model_free(m);
}

static void expect_file(const char *file, sn_status code, const char *needle) {
    sn_model *m = NULL;
    sn_status s = sn_model_load(path_in(file), 0, &m, NULL);
    CHECK(s == code && strstr(sn_last_error(), needle) && !m,
          "%s -> %s (wanted %s): '%s' should contain '%s'", file, sn_status_name(s),
          sn_status_name(code), sn_last_error(), needle);
    if (s == code) printf("  %-26s %s\n", file, sn_last_error());
    sn_model_free(m);
}

static void write_archive(const char *file, const char *config, const char *meta,
                          const void *w, size_t wn) {
    sn_keras_archive a = {.config = (char *)config, .config_len = config ? strlen(config) : 0,
                          .metadata = (char *)meta, .metadata_len = meta ? strlen(meta) : 0,
                          .weights = (void *)w, .weights_len = wn};
    CHECK_OK(sn_keras_archive_write(path_in(file), &a));
}

static void test_malformed(void) {
    json_t *j;
    /* 1. not a zip although it starts like one */
    write_text("bad_zip.keras", "PK\x03\x04 this is not really a zip archive at all......");
    expect_file("bad_zip.keras", SN_ERR_FORMAT, "not a valid .keras archive");
    /* 2. a zip without config.json */
    {
        int err = 0;
        zip_t *z = zip_open(path_in("no_config.keras"), ZIP_CREATE | ZIP_TRUNCATE, &err);
        zip_source_t *src = z ? zip_source_buffer(z, "{}", 2, 0) : NULL;
        if (src) zip_file_add(z, "metadata.json", src, ZIP_FL_OVERWRITE);
        if (z) zip_close(z);
        expect_file("no_config.keras", SN_ERR_FORMAT, "no config.json");
    }
    /* 3. unknown layer class */
    j = base_config();
    json_object_set_new(json_array_get(json_object_get(json_object_get(j, "config"), "layers"), 1),
                        "class_name", json_string("Conv3D"));
    expect_json(j, "unknown_class.json", SN_ERR_UNSUPPORTED, "layer class 'Conv3D' is not supported");
    /* 4. wrong JSON type */
    j = base_config();
    json_object_set_new(layer_cfg(j, 1), "units", json_string("three"));
    expect_json(j, "wrong_type.json", SN_ERR_FORMAT, "field 'units' is \"three\" (a string)");
    /* 5. truncated JSON */
    {
        json_t *b = base_config();
        char *s = json_dumps(b, 0);
        json_decref(b);
        s[strlen(s) / 2] = 0;
        write_text("truncated.json", s);
        free(s);
        expect_file("truncated.json", SN_ERR_FORMAT, "not valid JSON");
    }
    /* 6. a newer format version (metadata.json of an archive) */
    {
        json_t *b = base_config();
        char *s = json_dumps(b, 0);
        json_decref(b);
        write_archive("newer.keras", s, "{\"keras_version\": \"4.0.0\", \"date_saved\": \"x\"}",
                      NULL, 0);
        expect_file("newer.keras", SN_ERR_UNSUPPORTED, "keras_version is \"4.0.0\"");
        /* 7. and Keras 2's JSON */
        json_t *k2 = json_loads(s, 0, NULL);
        json_object_set_new(k2, "keras_version", json_string("2.15.0"));
        expect_json(k2, "keras2.json", SN_ERR_UNSUPPORTED, "re-save the model with Keras 3");
        free(s);
    }
    /* 8. a custom object */
    j = base_config();
    json_object_set_new(json_array_get(json_object_get(json_object_get(j, "config"), "layers"), 1),
                        "module", json_string("my_package.layers"));
    expect_json(j, "custom.json", SN_ERR_UNSUPPORTED, "custom object (module 'my_package.layers'");
    j = base_config();
    json_object_set_new(json_array_get(json_object_get(json_object_get(j, "config"), "layers"), 1),
                        "registered_name", json_string("MyDense"));
    expect_json(j, "registered.json", SN_ERR_UNSUPPORTED, "registered_name 'MyDense'");
    /* 9. padding causal, dilation, groups: values sinter does not implement */
    {
        sn_model *m = sn_sequential_new("c");
        sn_model_add(m, sn_layer_conv2d(2, 3, 3, SN_ACT_NONE));
        sn_model_add(m, sn_layer_flatten());
        sn_model_build(m, &(sn_shape){.ndim = 3, .dim = {5, 5, 1}}, 0);
        json_t *c = sn_model_to_config(m);
        sn_model_free(m);
        j = json_deep_copy(c);
        json_object_set_new(layer_cfg(j, 1), "padding", json_string("causal"));
        expect_json(j, "causal.json", SN_ERR_UNSUPPORTED, "field 'padding' is \"causal\"");
        j = json_deep_copy(c);
        json_object_set_new(layer_cfg(j, 1), "dilation_rate", json_pack("[i,i]", 2, 2));
        expect_json(j, "dilation.json", SN_ERR_UNSUPPORTED, "field 'dilation_rate' is [2, 2]");
        j = json_deep_copy(c);
        json_object_set_new(layer_cfg(j, 1), "groups", json_integer(2));
        expect_json(j, "groups.json", SN_ERR_UNSUPPORTED, "field 'groups' is 2");
        j = json_deep_copy(c);
        json_object_set_new(layer_cfg(j, 1), "data_format", json_string("channels_first"));
        expect_json(j, "channels_first.json", SN_ERR_UNSUPPORTED, "channels_first");
        json_decref(c);
    }
    /* 10. weights whose shapes do not match the config */
    {
        sn_model *m = sn_sequential_new("base");
        sn_model_add(m, sn_layer_dense(3, SN_ACT_RELU));
        sn_model_add(m, sn_layer_dense(2, SN_ACT_NONE));
        sn_model_build(m, &(sn_shape){.ndim = 1, .dim = {4}}, 1);
        void *w = NULL;
        size_t wn = 0;
        CHECK_OK(sn_model_save_weights_image(m, &w, &wn));
        sn_model_free(m);
        json_t *b = base_config();
        json_object_set_new(layer_cfg(b, 1), "units", json_integer(5));
        char *s = json_dumps(b, 0);
        json_decref(b);
        write_archive("shape_mismatch.keras", s, NULL, w, wn);
        expect_file("shape_mismatch.keras", SN_ERR_SHAPE, "dense");
        /* and an archive without weights */
        write_archive("no_weights.keras", s, NULL, NULL, 0);
        expect_file("no_weights.keras", SN_ERR_FORMAT, "no model.weights.h5");
        /* and weights that are not HDF5 */
        write_archive("bad_weights.keras", s, NULL, "not hdf5 at all", 15);
        expect_file("bad_weights.keras", SN_ERR_FORMAT, "not an HDF5 file");
        free(s);
        free(w);
    }
    /* 11. a Functional graph with a call that leads to no output (Keras drops such layers) */
    write_text("branch.json",
        "{\"module\": \"keras.src.models.functional\", \"class_name\": \"Functional\", \"config\": "
        "{\"name\": \"f\", \"trainable\": true, \"layers\": ["
        "{\"module\": \"keras.layers\", \"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 4], \"dtype\": \"float32\", \"name\": \"in\"}, \"name\": \"in\", \"inbound_nodes\": []},"
        "{\"module\": \"keras.layers\", \"class_name\": \"Dense\", \"config\": {\"name\": \"a\", \"units\": 3}, \"name\": \"a\", \"inbound_nodes\": [{\"args\": [{\"class_name\": \"__keras_tensor__\", \"config\": {\"shape\": [null, 4], \"dtype\": \"float32\", \"keras_history\": [\"in\", 0, 0]}}], \"kwargs\": {}}]},"
        "{\"module\": \"keras.layers\", \"class_name\": \"Dense\", \"config\": {\"name\": \"b\", \"units\": 3}, \"name\": \"b\", \"inbound_nodes\": [{\"args\": [{\"class_name\": \"__keras_tensor__\", \"config\": {\"shape\": [null, 4], \"dtype\": \"float32\", \"keras_history\": [\"in\", 0, 0]}}], \"kwargs\": {}}]}"
        "], \"input_layers\": [\"in\", 0, 0], \"output_layers\": [\"b\", 0, 0]}}");
    expect_file("branch.json", SN_ERR_INVALID, "layer 'a' (Dense) (call 0) leads to none of");
    /* 12. deep nesting: jansson's depth limit, not a stack overflow */
    {
        size_t depth = 100000;
        char *s = malloc(2 * depth + 1);
        memset(s, '[', depth);
        memset(s + depth, ']', depth);
        s[2 * depth] = 0;
        write_text("deep.json", s);
        free(s);
        expect_file("deep.json", SN_ERR_FORMAT, "maximum parsing depth");
    }
    /* 13. more: trainable not a boolean (false freezes the layer: test_nested.c), mixed
     * policies, schedules, duplicate keys, empty file */
    j = base_config();
    json_object_set_new(layer_cfg(j, 2), "trainable", json_string("no"));
    expect_json(j, "frozen.json", SN_ERR_FORMAT, "field 'trainable' is \"no\" (a string)");
    j = base_config();
    json_object_set_new(layer_cfg(j, 2), "dtype", json_string("mixed_float16"));
    expect_json(j, "float16.json", SN_ERR_UNSUPPORTED, "policy \"mixed_float16\"");
    j = base_config();
    json_object_set_new(layer_cfg(j, 1), "activation",
                        json_pack("{s:s, s:s}", "module", "mine", "class_name", "function"));
    expect_json(j, "custom_activation.json", SN_ERR_UNSUPPORTED, "custom activation");
    j = base_config();
    json_object_set_new(layer_cfg(j, 1), "activation", json_string("hard_sigmoid"));
    expect_json(j, "unknown_activation.json", SN_ERR_UNSUPPORTED, "hard_sigmoid");
    j = base_config();
    json_object_set_new(layer_cfg(j, 1), "kernel_constraint",
                        json_pack("{s:s, s:s, s:{}}", "module", "keras.constraints", "class_name",
                                  "MaxNorm", "config"));
    expect_json(j, "constraint.json", SN_ERR_UNSUPPORTED, "kernel_constraint");
    j = base_config();
    json_object_set_new(layer_cfg(j, 1), "future_option", json_true());
    expect_json(j, "unknown_field.json", SN_ERR_UNSUPPORTED, "field 'future_option'");
    j = base_config();
    json_object_set_new(j, "compile_config",
                        json_pack("{s:{s:s, s:s, s:{s:{s:s, s:s}}}}", "optimizer", "module",
                                  "keras.optimizers", "class_name", "Adam", "config",
                                  "learning_rate", "module", "keras.optimizers.schedules",
                                  "class_name", "CosineDecay"));
    expect_json(j, "schedule.json", SN_ERR_UNSUPPORTED, "schedule (CosineDecay)");
    j = base_config();
    json_object_set_new(j, "compile_config", json_pack("{s:s}", "loss", "kl_divergence"));
    expect_json(j, "kl_divergence.json", SN_ERR_UNSUPPORTED, "loss 'kl_divergence'");
    write_text("duplicate.json", "{\"class_name\": \"Sequential\", \"class_name\": \"Functional\"}");
    expect_file("duplicate.json", SN_ERR_FORMAT, "duplicate");
    write_text("empty.json", "");
    expect_file("empty.json", SN_ERR_FORMAT, "not valid JSON");
    write_text("array.json", "[1, 2]");
    expect_file("array.json", SN_ERR_FORMAT, "expected a model config object");
    expect_file("absent.keras", SN_ERR_IO, "cannot open");
    j = base_config();
    json_object_set_new(json_object_get(j, "config"), "layers", json_integer(3));
    expect_json(j, "layers_int.json", SN_ERR_FORMAT, "field 'layers' is an integer");
    j = base_config();
    json_object_set_new(json_object_get(layer_cfg(j, 0), "batch_shape") ? layer_cfg(j, 0) : j,
                        "batch_shape", json_pack("[n, n]"));
    expect_json(j, "dynamic_shape.json", SN_ERR_UNSUPPORTED, "static shapes");
}

/* Text-model configs with values sinter's sequence layers do not implement. Layer 0 of the
 * config is the InputLayer, 1 the Embedding, 2 the LSTM/GRU. */
static json_t *text_config(bool gru) {
    sn_model *m = text_model(gru);
    json_t *j = m ? sn_model_to_config(m) : NULL;
    sn_model_free(m);
    return j;
}

/* Embedding(mask_zero) -> Bidirectional(LSTM) -> Dense, as sinter writes it. */
static json_t *bidir_config(void) {
    sn_model *m = sn_sequential_new("bidir");
    sn_embedding_layer_opts eo = sn_embedding_layer_defaults(20, 8);
    eo.mask_zero = true;
    sn_model_add(m, sn_layer_embedding_ex(&eo));
    sn_model_add(m, sn_layer_bidirectional(sn_layer_lstm(6, false), SN_BIDIR_CONCAT));
    sn_model_add(m, sn_layer_dense(3, SN_ACT_NONE));
    sn_shape in = {.ndim = 1, .dim = {10}};
    json_t *j = sn_model_build(m, &in, 1) == SN_OK ? sn_model_to_config(m) : NULL;
    sn_model_free(m);
    return j;
}

/* sinter's Bidirectional config read back: the same config, the same predictions. */
static void test_bidir_round_trip(void) {
    json_t *j = bidir_config();
    char *a = j ? json_dumps(j, JSON_SORT_KEYS) : NULL;
    sn_model *m = NULL;
    CHECK_OK(j ? sn_model_from_config(j, 1, false, &m, NULL) : SN_ERR_INVALID);
    json_t *k = m ? sn_model_to_config(m) : NULL;
    char *b = k ? json_dumps(k, JSON_SORT_KEYS) : NULL;
    CHECK(a && b && !strcmp(a, b), "Bidirectional config changed on a round trip:\n%s\n%s",
          a ? a : "(none)", b ? b : "(none)");
    CHECK(m && m->layers[1]->n_vars == 6 && !strcmp(m->layers[1]->inner[1]->name, "backward_lstm") &&
          m->layers[1]->inner[1]->rnn.go_backwards && m->layers[0]->embedding.mask_zero,
          "Bidirectional read back: halves or mask_zero lost");
    free(a);
    free(b);
    json_decref(j);
    json_decref(k);
    sn_model_free(m);
}

static void test_malformed_text(void) {
    json_t *j = text_config(false);
    /* a mask (mask_zero) into a layer that takes none: the Dense after an LSTM returning one
     * vector takes none, so the mask goes to a Flatten in place of the LSTM */
    json_object_set_new(layer_cfg(j, 1), "mask_zero", json_true());
    json_t *layers = json_object_get(json_object_get(j, "config"), "layers");
    json_array_set_new(layers, 2, json_pack("{s:s, s:s, s:{s:s, s:b, s:s}}", "module",
                       "keras.layers", "class_name", "Flatten", "config", "name", "flatten",
                       "trainable", 1, "data_format", "channels_last"));
    sn_model *m = NULL; /* read (layers are read one by one); its forward pass fails */
    CHECK_OK(sn_model_from_config(j, 1, false, &m, NULL));
    sn_node x = m ? sn_input(m->g, "x", SN_F32, &(sn_shape){.ndim = 2, .dim = {2, 7}}) : SN_NONE, y;
    sn_status st = m ? sn_model_forward(m, x, false, NULL, &y) : SN_ERR_INVALID;
    CHECK(st == SN_ERR_UNSUPPORTED && strstr(sn_last_error(), "layer 'flatten' (Flatten) receives a mask"),
          "a mask into Flatten: status %d, '%s'", st, sn_last_error());
    sn_model_free(m);
    json_decref(j);
    j = bidir_config();
    json_object_set_new(layer_cfg(j, 2), "merge_mode", json_null());
    expect_json(j, "bidir_merge_null.json", SN_ERR_UNSUPPORTED, "field 'merge_mode' is null");
    j = bidir_config();
    json_object_set_new(layer_cfg(j, 2), "merge_mode", json_string("max"));
    expect_json(j, "bidir_merge_max.json", SN_ERR_UNSUPPORTED, "field 'merge_mode' is \"max\"");
    j = bidir_config(); /* both halves forwards */
    json_object_set_new(json_object_get(json_object_get(layer_cfg(j, 2), "backward_layer"),
                                         "config"), "go_backwards", json_false());
    expect_json(j, "bidir_same_direction.json", SN_ERR_INVALID, "differ in go_backwards");
    j = text_config(false);
    json_object_set_new(layer_cfg(j, 2), "recurrent_dropout", json_real(0.2));
    expect_json(j, "lstm_dropout.json", SN_ERR_UNSUPPORTED, "field 'recurrent_dropout' is 0.2");
    j = text_config(false); /* stateful with the InputLayer's batch null */
    json_object_set_new(layer_cfg(j, 2), "stateful", json_true());
    expect_json(j, "lstm_stateful_no_batch.json", SN_ERR_INVALID,
                "stateful=True needs a fixed batch size, got batch_size 0");
    j = text_config(true);
    json_object_set_new(layer_cfg(j, 2), "unit_forget_bias", json_true()); /* an LSTM field */
    expect_json(j, "gru_lstm_field.json", SN_ERR_UNSUPPORTED, "unit_forget_bias");
    j = text_config(false);
    json_object_set_new(layer_cfg(j, 2), "activation", json_string("relu"));
    expect_json(j, "lstm_relu.json", SN_ERR_INVALID, "activation 'relu'");
}

/* A Functional chain listed out of order is read in the order of its calls; without compile
 * settings a softmax output is not taken for logits. */
static void test_functional_chain(void) {
    static const char json[] =
        "{\"module\": \"keras.src.models.functional\", \"class_name\": \"Functional\", \"config\": "
        "{\"name\": \"f\", \"trainable\": true, \"layers\": ["
        "{\"module\": \"keras.layers\", \"class_name\": \"Dense\", \"config\": {\"name\": \"b\", \"units\": 2, \"activation\": \"softmax\"}, \"name\": \"b\", \"inbound_nodes\": [{\"args\": [{\"class_name\": \"__keras_tensor__\", \"config\": {\"shape\": [null, 3], \"dtype\": \"float32\", \"keras_history\": [\"a\", 0, 0]}}], \"kwargs\": {}}]},"
        "{\"module\": \"keras.layers\", \"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 4], \"dtype\": \"float32\", \"name\": \"in\"}, \"name\": \"in\", \"inbound_nodes\": []},"
        "{\"module\": \"keras.layers\", \"class_name\": \"Dense\", \"config\": {\"name\": \"a\", \"units\": 3}, \"name\": \"a\", \"inbound_nodes\": [{\"args\": [{\"class_name\": \"__keras_tensor__\", \"config\": {\"shape\": [null, 4], \"dtype\": \"float32\", \"keras_history\": [\"in\", 0, 0]}}], \"kwargs\": {\"training\": false}}]}"
        "], \"input_layers\": [[\"in\", 0, 0]], \"output_layers\": [[\"b\", 0, 0]]}}";
    sn_model *m = NULL;
    sn_model_file_info info;
    CHECK_OK(sn_model_from_json(json, sizeof json - 1, 0, &m, &info));
    if (!m) return;
    CHECK(sn_model_layer_count(m) == 2 && !strcmp(sn_model_layer_name(m, 0), "a") &&
              !strcmp(sn_model_layer_name(m, 1), "b"),
          "chain order: %s, %s", sn_model_layer_name(m, 0), sn_model_layer_name(m, 1));
    CHECK(sn_model_param_count(m, false) == 4 * 3 + 3 + 3 * 2 + 2, "params %lld",
          (long long)sn_model_param_count(m, false));
    CHECK(!info.has_compile && !info.compile.from_logits, "softmax output taken for logits");
    sn_model_free(m);
}

/* ---- interop mode ------------------------------------------------------------------------ */


/* ---- Functional models in the interop check --------------------------------------------- */
/* Reads n floats of DIR/file into a new f32 tensor of shape [rows] + shape. */
static sn_tensor *read_f32(const char *d, const char *file, int64_t rows, const sn_shape *shape,
                           sn_dtype dt) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", d, file);
    sn_shape s = {.ndim = shape->ndim + 1, .dim = {rows}};
    for (int i = 0; i < shape->ndim; i++) s.dim[i + 1] = shape->dim[i];
    sn_tensor *t = NULL;
    if (sn_tensor_new(&t, dt, &s) != SN_OK) return NULL;
    FILE *f = fopen(p, "rb");
    size_t n = (size_t)sn_tensor_numel(t);
    if (!f || fread(sn_tensor_data(t), 4, n, f) != n) {
        fprintf(stderr, "FAIL reading %s (%zu values)\n", p, n);
        sn_tensor_free(t);
        t = NULL;
    }
    if (f) fclose(f);
    return t;
}

static void write_f32(const char *d, const char *file, const void *data, size_t n) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", d, file);
    FILE *f = fopen(p, "wb");
    if (f) {
        fwrite(data, 4, n, f);
        fclose(f);
    }
}

/* Inference of a model of any number of inputs and outputs on one batch: the path
 * sn_model_predict (one input, one output) does not take. Outputs go to DIR/NAME.out<j>.f32. */
static int predict_n(sn_model *m, const char *d, const char *name, int64_t rows) {
    sn_graph *g = sn_model_graph(m);
    int ni = sn_model_input_count(m), no = sn_model_output_count(m);
    sn_node xs[8], ys[8];
    sn_tensor *xt[8] = {0};
    int rc = 0;
    for (int k = 0; k < ni; k++) {
        sn_shape is = m->fn ? m->fn->nodes[m->fn->inputs[k]].shape : m->input_shape; /* Sequential */
        sn_shape bs = {.ndim = is.ndim + 1, .dim = {rows}};
        for (int i = 0; i < is.ndim; i++) bs.dim[i + 1] = is.dim[i];
        xs[k] = sn_input(g, "x", SN_F32, &bs);
        char f[300];
        snprintf(f, sizeof f, "%s.in%d.f32", name, k);
        if (!(xt[k] = read_f32(d, f, rows, &is, SN_F32))) rc = 1;
    }
    sn_plan *p = NULL;
    if (!rc && (sn_model_forward_n(m, xs, false, NULL, ys) != SN_OK ||
                sn_plan_new(&p, g, no, ys, NULL) != SN_OK)) {
        fprintf(stderr, "FAIL forward %s: %s\n", name, sn_last_error());
        rc = 1;
    }
    for (int k = 0; !rc && k < ni; k++)
        rc = sn_plan_set_input(p, xs[k], sn_tensor_data(xt[k]),
                               4 * (size_t)sn_tensor_numel(xt[k])) != SN_OK;
    if (!rc && sn_plan_run(p, 1, NULL, NULL) != SN_OK) rc = 1;
    for (int j = 0; !rc && j < no; j++) {
        sn_shape os = sn_node_shape(g, ys[j]);
        char f[300];
        snprintf(f, sizeof f, "%s.out%d.f32", name, j);
        write_f32(d, f, sn_plan_buffer(p, ys[j]), (size_t)sn_shape_numel(&os));
    }
    if (rc) fprintf(stderr, "FAIL predict %s: %s\n", name, sn_last_error());
    sn_plan_free(p);
    for (int k = 0; k < ni; k++) sn_tensor_free(xt[k]);
    return rc;
}

/* One SGD step (learning rate lr, no momentum) on one batch of `rows`, weights then saved to
 * DIR/NAME.step.weights.h5. A model of one input and one output trains through fit (sparse
 * categorical cross-entropy from logits, labels NAME.y0.i32), BatchNormalization's moving
 * statistics included; others by the graph's gradients of the sum of each output's mean
 * squared error (targets NAME.y<j>.f32), as Keras sums a multi-output model's losses. */
static int sgd_step(const char *d, const char *name, int64_t rows, double lr, bool logits) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s.keras", d, name);
    sn_model *m = NULL;
    if (sn_model_load(p, 0, &m, NULL) != SN_OK) {
        fprintf(stderr, "FAIL loading %s: %s\n", p, sn_last_error());
        return 1;
    }
    int ni = sn_model_input_count(m), no = sn_model_output_count(m), rc = 0;
    sn_compile_opts co = sn_compile_defaults();
    co.optimizer = sn_optimizer_defaults(SN_SGD);
    co.optimizer.learning_rate = lr;
    co.from_logits = logits;
    if (ni == 1 && no == 1) {
        /* sparse labels: one per example, or one per pixel of a [B, H, W, C] output (the
         * U-Net's segmentation masks [B, H, W]) */
        sn_shape ls = {.ndim = 0};
        if (m->fn) {
            sn_shape os = m->fn->nodes[m->fn->outputs[0]].shape;
            ls.ndim = os.ndim - 1;
            for (int i = 0; i + 1 < os.ndim; i++) ls.dim[i] = os.dim[i];
        }
        char f[300];
        snprintf(f, sizeof f, "%s.in0.f32", name);
        sn_tensor *xy[2] = {read_f32(d, f, rows, &m->input_shape, SN_F32), NULL};
        /* float labels NAME.y0.f32: binary cross-entropy from logits (the text classifier) */
        snprintf(f, sizeof f, "%s/%s.y0.f32", d, name);
        bool binary = access(f, R_OK) == 0;
        if (binary) {
            co.loss = SN_LOSS_BINARY_CROSSENTROPY;
            co.n_metrics = 0;
        }
        snprintf(f, sizeof f, binary ? "%s.y0.f32" : "%s.y0.i32", name);
        if (binary) ls.ndim = 0;
        xy[1] = read_f32(d, f, rows, &ls, binary ? SN_F32 : SN_I32);
        sn_dataset *ds = NULL;
        sn_fit_opts fo = sn_fit_defaults();
        rc = !xy[0] || !xy[1] || sn_model_compile(m, &co) != SN_OK ||
             sn_dataset_from_tensors(&ds, 2, xy) != SN_OK ||
             sn_dataset_batch(&ds, rows, false) != SN_OK || sn_model_fit(m, ds, &fo, NULL) != SN_OK;
        sn_dataset_free(ds);
        sn_tensor_free(xy[0]);
        sn_tensor_free(xy[1]);
    } else {
        sn_graph *g = sn_model_graph(m);
        sn_node xs[8], ys[8], loss = SN_NONE, wrt[256], grads[256];
        sn_tensor *t[16] = {0};
        int nt = 0, nw = 0;
        for (int k = 0; k < ni && !rc; k++) {
            sn_shape is = m->fn->nodes[m->fn->inputs[k]].shape, bs = {.ndim = is.ndim + 1, .dim = {rows}};
            for (int i = 0; i < is.ndim; i++) bs.dim[i + 1] = is.dim[i];
            xs[k] = sn_input(g, "x", SN_F32, &bs);
            char f[300];
            snprintf(f, sizeof f, "%s.in%d.f32", name, k);
            rc = !(t[nt++] = read_f32(d, f, rows, &is, SN_F32));
        }
        rc = rc || sn_model_forward_n(m, xs, true, NULL, ys) != SN_OK;
        sn_node yt[8];
        for (int j = 0; j < no && !rc; j++) {
            sn_shape os = sn_node_shape(g, ys[j]), o1 = {.ndim = os.ndim - 1};
            for (int i = 1; i < os.ndim; i++) o1.dim[i - 1] = os.dim[i];
            yt[j] = sn_input(g, "y", SN_F32, &os);
            char f[300];
            snprintf(f, sizeof f, "%s.y%d.f32", name, j);
            rc = !(t[nt++] = read_f32(d, f, rows, &o1, SN_F32));
            sn_node e = sn_sub(g, ys[j], yt[j]);
            sn_node l = sn_reduce_mean(g, sn_mul(g, e, e), 0, NULL, false);
            loss = loss == SN_NONE ? l : sn_add(g, loss, l);
        }
        for (int i = 0; !rc && i < m->n_layers; i++)
            for (int j = 0; j < m->layers[i]->n_vars; j++)
                if (sn_node_at(g, m->layers[i]->vars[j])->flags & SN_NODE_TRAINABLE) {
                    if (nw == 256) { /* a variable left out would not move: say so */
                        fprintf(stderr, "FAIL %s: over 256 trainable variables\n", name);
                        rc = 1;
                        break;
                    }
                    wrt[nw++] = m->layers[i]->vars[j];
                }
        sn_plan *pl = NULL;
        rc = rc || sn_gradients(g, loss, nw, wrt, grads) != SN_OK ||
             sn_plan_new(&pl, g, nw, grads, NULL) != SN_OK;
        for (int k = 0; !rc && k < ni; k++)
            rc = sn_plan_set_input(pl, xs[k], sn_tensor_data(t[k]), 4 * (size_t)sn_tensor_numel(t[k])) != SN_OK;
        for (int j = 0; !rc && j < no; j++)
            rc = sn_plan_set_input(pl, yt[j], sn_tensor_data(t[ni + j]),
                                   4 * (size_t)sn_tensor_numel(t[ni + j])) != SN_OK;
        rc = rc || sn_plan_run(pl, 1, NULL, NULL) != SN_OK;
        for (int k = 0; !rc && k < nw; k++) { /* w -= lr * g, as Keras's SGD in float32 */
            sn_shape ws = sn_node_shape(g, wrt[k]);
            float *w = sn_variable_data(g, wrt[k]);
            const float *gr = sn_plan_buffer(pl, grads[k]);
            for (int64_t i = 0; i < sn_shape_numel(&ws); i++) w[i] -= (float)lr * gr[i];
        }
        sn_plan_free(pl);
        for (int k = 0; k < nt; k++) sn_tensor_free(t[k]);
    }
    snprintf(p, sizeof p, "%s/%s.step.weights.h5", d, name);
    if (rc || sn_model_save_weights(m, p) != SN_OK) {
        fprintf(stderr, "FAIL one SGD step of %s: %s\n", name, sn_last_error());
        rc = 1;
    } else {
        printf("sinter: %s -> one SGD step (lr %g, %s)\n", name, lr,
               ni == 1 && no == 1 ? "fit" : "graph gradients");
    }
    sn_model_free(m);
    return rc;
}

/* One SGD step of a one-input, one-output NAME.keras in float64 on the reference kernels
 * (the deep stock models, where float32 itself is 1-5% from the exact step, on Keras as on
 * sinter): the model rebuilt with f64 variables holding the file's weights, the training
 * forward (BatchNormalization's moving statistics updated), sparse categorical cross-entropy
 * (from the output's log for probabilities, as sinter's fit), w -= lr * g in double; the
 * weights rounded to float32 into NAME.step64.weights.h5. */
static int sgd_step_f64(const char *d, const char *name, int64_t rows, double lr, bool logits) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s.keras", d, name);
    sn_model *m = NULL, *m32 = NULL;
    if (sn_model_load(p, 0, &m, NULL) != SN_OK || sn_model_load(p, 0, &m32, NULL) != SN_OK ||
        !m->fn || sn_model_input_count(m) != 1 || sn_model_output_count(m) != 1) {
        fprintf(stderr, "FAIL loading %s for the float64 step: %s\n", p, sn_last_error());
        sn_model_free(m);
        sn_model_free(m32);
        return 1;
    }
    /* rebuild with f64 variables, then the file's weights into them */
    sn_graph_free(m->g);
    m->g = NULL;
    m->built = false;
    m->dtype = SN_F64;
    int rc = sn_model_build(m, NULL, 0) != SN_OK;
    sn_graph *g = m->g, *g32 = m32->g;
    for (int i = 0; !rc && i < m->n_layers; i++)
        for (int k = 0; k < m->layers[i]->n_vars; k++) {
            sn_shape s = sn_node_shape(g, m->layers[i]->vars[k]);
            const float *src = sn_variable_data(g32, m32->layers[i]->vars[k]);
            double *dst = sn_variable_data(g, m->layers[i]->vars[k]);
            for (int64_t j = 0; j < sn_shape_numel(&s); j++) dst[j] = src[j];
        }
    sn_shape is = m->fn->nodes[m->fn->inputs[0]].shape, bs = {.ndim = is.ndim + 1, .dim = {rows}};
    for (int i = 0; i < is.ndim; i++) bs.dim[i + 1] = is.dim[i];
    /* sparse labels per example, or per pixel of a [B, H, W, C] output (as sgd_step) */
    sn_shape os = m->fn->nodes[m->fn->outputs[0]].shape, ls = {.ndim = os.ndim, .dim = {rows}};
    sn_shape none = {.ndim = os.ndim - 1};
    for (int i = 0; i + 1 < os.ndim; i++) ls.dim[i + 1] = none.dim[i] = os.dim[i];
    char f[300];
    snprintf(f, sizeof f, "%s.in0.f32", name);
    sn_tensor *xt = rc ? NULL : read_f32(d, f, rows, &is, SN_F32);
    snprintf(f, sizeof f, "%s.y0.i32", name);
    sn_tensor *yt = rc ? NULL : read_f32(d, f, rows, &none, SN_I32);
    rc = rc || !xt || !yt;
    sn_node x = SN_NONE, y = SN_NONE, out = SN_NONE, wrt[512], grads[512], targets[1024];
    sn_updates upd = {0};
    int nw = 0, nt = 0;
    if (!rc) {
        x = sn_input(g, "x", SN_F64, &bs);
        y = sn_input(g, "y", SN_I32, &ls);
        rc = sn_model_forward_n(m, &x, true, &upd, &out) != SN_OK;
    }
    sn_plan *pl = NULL;
    if (!rc) {
        sn_node z = logits ? out : sn_log(g, out);
        /* Keras's sparse cross-entropy over extra dims: the mean over every pixel */
        sn_shape zs = sn_node_shape(g, z);
        int64_t c = zs.dim[zs.ndim - 1], np = sn_shape_numel(&zs) / c;
        sn_node yl = y;
        if (zs.ndim > 2) {
            z = sn_reshape(g, z, &(sn_shape){.ndim = 2, .dim = {np, c}});
            yl = sn_reshape(g, y, &(sn_shape){.ndim = 1, .dim = {np}});
        }
        sn_node loss = sn_reduce_mean(g, sn_sparse_softmax_xent(g, z, yl), 0, NULL, false);
        for (int i = 0; i < m->n_layers; i++)
            for (int j = 0; j < m->layers[i]->n_vars && nw < 512; j++)
                if (sn_node_at(g, m->layers[i]->vars[j])->flags & SN_NODE_TRAINABLE)
                    wrt[nw++] = m->layers[i]->vars[j];
        rc = sn_gradients(g, loss, nw, wrt, grads) != SN_OK;
        for (int k = 0; k < nw; k++) targets[nt++] = grads[k];
        for (int k = 0; k < upd.n && nt < 1024; k++) targets[nt++] = upd.nodes[k];
        rc = rc || sn_plan_new(&pl, g, nt, targets, NULL) != SN_OK;
    }
    if (!rc) {
        double *xb = sn_plan_buffer(pl, x);
        const float *xs = sn_tensor_cdata(xt);
        for (int64_t j = 0; j < sn_tensor_numel(xt); j++) xb[j] = xs[j];
        rc = sn_plan_set_input(pl, y, sn_tensor_cdata(yt), 4 * (size_t)sn_tensor_numel(yt)) != SN_OK ||
             sn_plan_run(pl, 1, NULL, NULL) != SN_OK;
    }
    for (int k = 0; !rc && k < nw; k++) { /* w -= lr * g, in double */
        sn_shape ws = sn_node_shape(g, wrt[k]);
        double *w = sn_variable_data(g, wrt[k]);
        const double *gr = sn_plan_buffer(pl, grads[k]);
        for (int64_t i = 0; i < sn_shape_numel(&ws); i++) w[i] -= lr * gr[i];
    }
    for (int i = 0; !rc && i < m->n_layers; i++) /* every variable (moving statistics too) */
        for (int k = 0; k < m->layers[i]->n_vars; k++) {
            sn_shape s = sn_node_shape(g, m->layers[i]->vars[k]);
            const double *src = sn_variable_data(g, m->layers[i]->vars[k]);
            float *dst = sn_variable_data(g32, m32->layers[i]->vars[k]);
            for (int64_t j = 0; j < sn_shape_numel(&s); j++) dst[j] = (float)src[j];
        }
    snprintf(p, sizeof p, "%s/%s.step64.weights.h5", d, name);
    if (rc || sn_model_save_weights(m32, p) != SN_OK) {
        fprintf(stderr, "FAIL the float64 SGD step of %s: %s\n", name, sn_last_error());
        rc = 1;
    } else {
        printf("sinter: %s -> one SGD step in float64 (lr %g, reference kernels)\n", name, lr);
    }
    sn_plan_free(pl);
    sn_updates_free(&upd);
    sn_tensor_free(xt);
    sn_tensor_free(yt);
    sn_model_free(m);
    sn_model_free(m32);
    return rc;
}

/* DIR/functional.txt: "NAME ROWS LR" per line: predictions of every output of NAME.keras,
 * and one SGD step. */
static int interop_functional(const char *d) {
    char lst[600];
    snprintf(lst, sizeof lst, "%s/functional.txt", d);
    FILE *f = fopen(lst, "r");
    if (!f) return 0;
    char name[256], line[512], kind[16], prec[16];
    long rows;
    double lr;
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        /* an optional fourth word "probs": the output is probabilities (a softmax), the
         * cross-entropy takes them as Keras's from_logits=False */
        int nf = sscanf(line, "%255s %ld %lf %15s %15s", name, &rows, &lr, kind, prec);
        if (nf < 3) continue;
        bool logits = !(nf >= 4 && !strcmp(kind, "probs"));
        /* a fifth word "f64": also one step in float64 (sgd_step_f64) */
        bool f64 = nf == 5 && !strcmp(prec, "f64");
        char p[600];
        snprintf(p, sizeof p, "%s/%s.keras", d, name);
        sn_model *m = NULL;
        if (sn_model_load(p, 0, &m, NULL) != SN_OK) {
            fprintf(stderr, "FAIL loading %s: %s\n", p, sn_last_error());
            rc = 1;
            continue;
        }
        rc |= predict_n(m, d, name, rows);
        snprintf(p, sizeof p, "%s/%s.sinter.keras", d, name);
        if (sn_model_save(m, p) != SN_OK) {
            fprintf(stderr, "FAIL save %s: %s\n", p, sn_last_error());
            rc = 1;
        }
        sn_model_free(m);
        rc |= sgd_step(d, name, rows, lr, logits);
        if (f64) rc |= sgd_step_f64(d, name, rows, lr, logits);
    }
    fclose(f);
    return rc;
}

static int interop(const char *d) {
    char lst[600];
    snprintf(lst, sizeof lst, "%s/models.txt", d);
    FILE *f = fopen(lst, "r");
    if (!f) {
        snprintf(lst, sizeof lst, "%s/functional.txt", d);
        if (access(lst, R_OK) == 0) return interop_functional(d);
        fprintf(stderr, "cannot open %s/models.txt\n", d);
        return 1;
    }
    char file[256];
    long rows;
    int rc = 0;
    while (fscanf(f, "%255s %ld", file, &rows) == 2) {
        char p[600], base[256];
        snprintf(p, sizeof p, "%s/%s", d, file);
        snprintf(base, sizeof base, "%s", file);
        char *dot = strrchr(base, '.');
        const char *kind = dot ? dot + 1 : "x";
        if (dot) *dot = 0;
        sn_model *m = NULL;
        sn_model_file_info info;
        if (sn_model_load(p, 0, &m, &info) != SN_OK) {
            fprintf(stderr, "FAIL loading %s: %s\n", p, sn_last_error());
            rc = 1;
            continue;
        }
        if (!info.has_weights) { /* JSON: the weights of the .keras twin */
            char w[600];
            snprintf(w, sizeof w, "%s/%s.weights.h5", d, base);
            if (sn_model_load_weights(m, w) != SN_OK) {
                fprintf(stderr, "FAIL weights %s: %s\n", w, sn_last_error());
                rc = 1;
                sn_model_free(m);
                continue;
            }
        }
        if (info.has_compile) sn_model_compile(m, &info.compile);
        sn_tensor *x = input_for(&info.input_shape, rows), *y = NULL;
        char in[600], out[600];
        snprintf(in, sizeof in, "%s/%s.in.f32", d, base);
        FILE *fi = fopen(in, "rb");
        size_t n = (size_t)sn_tensor_numel(x);
        if (!fi || fread(sn_tensor_data(x), sizeof(float), n, fi) != n) {
            fprintf(stderr, "FAIL reading %s\n", in);
            rc = 1;
        } else if (sn_model_predict(m, x, &y) != SN_OK) {
            fprintf(stderr, "FAIL predict %s: %s\n", p, sn_last_error());
            rc = 1;
        } else {
            snprintf(out, sizeof out, "%s/%s.%s.sinter.f32", d, base, kind);
            FILE *fo = fopen(out, "wb");
            fwrite(sn_tensor_data(y), sizeof(float), (size_t)sn_tensor_numel(y), fo);
            fclose(fo);
            snprintf(out, sizeof out, "%s/%s.%s.sinter.keras", d, base, kind);
            if (sn_model_save(m, out) != SN_OK) {
                fprintf(stderr, "FAIL save %s: %s\n", out, sn_last_error());
                rc = 1;
            }
            printf("sinter: %s -> %lld x %lld predictions\n", file,
                   (long long)sn_tensor_shape(y)->dim[0], (long long)sn_tensor_shape(y)->dim[1]);
        }
        if (fi) fclose(fi);
        sn_tensor_free(x);
        sn_tensor_free(y);
        sn_model_free(m);
    }
    fclose(f);
    return rc | interop_functional(d);
}

int main(void) {
    const char *d = getenv("SN_KERAS_MODELS_DIR");
    if (d && *d) return interop(d);
    snprintf(dir, sizeof dir, "/tmp/sn_model_files_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_text_round_trip(false, true);
    test_text_round_trip(true, true);
    test_text_round_trip(true, false);
    test_functional_chain();
    printf("malformed or unsupported files (each must be a clear error):\n");
    test_malformed();
    test_malformed_text();
    test_bidir_round_trip();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return sn_test_finish("test_model_files");
}
