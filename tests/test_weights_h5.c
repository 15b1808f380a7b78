/* Keras-compatible weight files: round trips in both layouts, the file structure Keras
 * expects (read back with the raw HDF5 API), a Keras 2 file written here by hand in Keras's
 * exact layout, and the error messages for the mistakes users make. */
/* Tests get no HDF5 include directory from CMake (only the library uses HDF5); Debian keeps
 * the serial headers in hdf5/serial/. */
#if __has_include(<hdf5.h>)
#include <hdf5.h>
#else
#include <hdf5/serial/hdf5.h>
#endif
#include <stdlib.h>
#include <unistd.h>

#include "sinter/io.h"
#include "sinter/tensor.h"
#include "sn_test.h"

static char dir[64];

static const char *tmp_path(const char *name) {
    static char buf[8][256];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

/* ---- a small Sequential CNN: Conv2D, BN, MaxPool, Flatten, Dense, Dropout, Dense -------- */

typedef struct model {
    sn_tensor *t[16];
    int nt;
    sn_weight_var vars[16];
    sn_weight_layer layers[8];
    int nl;
} model;

static sn_tensor *mk(model *m, const char *name, int seed, int ndim, int64_t d0, int64_t d1,
                     int64_t d2, int64_t d3) {
    sn_shape s = {.ndim = ndim, .dim = {d0, d1, d2, d3}};
    sn_tensor *t = NULL;
    CHECK_OK(sn_tensor_new(&t, SN_F32, &s));
    if (!t) exit(1);
    float *p = sn_tensor_data(t);
    int64_t n = sn_shape_numel(&s);
    /* Values that a lossy path would change: signed zero, a subnormal, large and tiny. */
    for (int64_t i = 0; i < n; i++) p[i] = (float)(seed * 1000 + i) * 0.37f - 11.0f;
    if (seed && n > 3) {
        p[0] = -0.0f;
        p[1] = 1e-41f;
        p[2] = 3.4e38f;
    }
    m->t[m->nt] = t;
    m->vars[m->nt] = (sn_weight_var){name, t};
    m->nt++;
    return t;
}

static void add_layer(model *m, const char *cls, const char *name, int first_var, int n_vars) {
    m->layers[m->nl++] = (sn_weight_layer){cls, name, n_vars, n_vars ? &m->vars[first_var] : NULL};
}

/* seed 0 gives zero-ish values that differ from any seed > 0. bias_out changes the last
 * Dense's bias (for the shape-mismatch test); extra appends another Dense. */
static void build_cnn(model *m, int seed, int64_t bias_out, int extra) {
    memset(m, 0, sizeof *m);
    int v = m->nt;
    mk(m, "kernel", seed * 1, 4, 3, 3, 1, 8);
    mk(m, "bias", seed * 2, 1, 8, 0, 0, 0);
    add_layer(m, "Conv2D", "conv2d", v, 2);
    v = m->nt;
    mk(m, "gamma", seed * 3, 1, 8, 0, 0, 0);
    mk(m, "beta", seed * 4, 1, 8, 0, 0, 0);
    mk(m, "moving_mean", seed * 5, 1, 8, 0, 0, 0);
    mk(m, "moving_variance", seed * 6, 1, 8, 0, 0, 0);
    add_layer(m, "BatchNormalization", "batch_normalization", v, 4);
    add_layer(m, "MaxPooling2D", "max_pooling2d", 0, 0);
    add_layer(m, "Flatten", "flatten", 0, 0);
    v = m->nt;
    mk(m, "kernel", seed * 7, 2, 72, 16, 0, 0);
    mk(m, "bias", seed * 8, 1, 16, 0, 0, 0);
    add_layer(m, "Dense", "dense", v, 2);
    add_layer(m, "Dropout", "dropout", 0, 0);
    v = m->nt;
    mk(m, "kernel", seed * 9, 2, 16, 10, 0, 0);
    mk(m, "bias", seed * 10, 1, bias_out, 0, 0, 0);
    add_layer(m, "Dense", "dense_1", v, 2);
    if (extra) {
        v = m->nt;
        mk(m, "kernel", seed * 11, 2, 10, 4, 0, 0);
        mk(m, "bias", seed * 12, 1, 4, 0, 0, 0);
        add_layer(m, "Dense", "dense_2", v, 2);
    }
}

static void free_model(model *m) {
    for (int i = 0; i < m->nt; i++) sn_tensor_free(m->t[i]);
}

static int same_bits(const model *a, const model *b) {
    if (a->nt != b->nt) return 0;
    for (int i = 0; i < a->nt; i++) {
        int64_t n = sn_tensor_numel(a->t[i]);
        if (n != sn_tensor_numel(b->t[i])) return 0;
        if (memcmp(sn_tensor_cdata(a->t[i]), sn_tensor_cdata(b->t[i]), (size_t)n * 4)) return 0;
    }
    return 1;
}

/* ---- raw HDF5 readers for structure checks ---------------------------------------------- */

static int h5_exists(hid_t f, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || !*p) {
            char c = *p;
            *p = 0;
            if (H5Lexists(f, buf, H5P_DEFAULT) <= 0) return 0;
            *p = c;
            if (!c) return 1;
        }
    }
}

/* Shape of a dataset as "[a, b]", and whether it is little-endian f32. */
static void ds_info(hid_t f, const char *path, char *shape, size_t cap, int *is_f32le) {
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    hid_t s = H5Dget_space(d), t = H5Dget_type(d);
    hsize_t dims[8];
    int nd = H5Sget_simple_extent_dims(s, dims, NULL);
    int64_t di[8];
    for (int i = 0; i < nd; i++) di[i] = (int64_t)dims[i];
    sn_shape sh = {.ndim = nd};
    for (int i = 0; i < nd; i++) sh.dim[i] = di[i];
    sn_shape_str(&sh, shape, cap);
    *is_f32le = H5Tequal(t, H5T_IEEE_F32LE) > 0;
    H5Tclose(t);
    H5Sclose(s);
    H5Dclose(d);
}

static int n_links(hid_t f, const char *path) {
    H5G_info_t info;
    hid_t g = H5Gopen2(f, path, H5P_DEFAULT);
    if (g < 0) return -1;
    H5Gget_info(g, &info);
    H5Gclose(g);
    return (int)info.nlinks;
}

/* A scalar string attribute (vlen or fixed) as a C string into buf. */
static int str_attr(hid_t obj, const char *name, char *buf, size_t cap, int *is_vlen) {
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t t = H5Aget_type(a);
    *is_vlen = H5Tis_variable_str(t) > 0;
    int ok = 1;
    if (*is_vlen) {
        char *s = NULL;
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5Tget_cset(t));
        ok = H5Aread(a, mt, &s) >= 0;
        snprintf(buf, cap, "%s", s ? s : "");
        free(s);
        H5Tclose(mt);
    } else {
        size_t n = H5Tget_size(t);
        char *tmp = calloc(1, n + 1);
        ok = H5Aread(a, t, tmp) >= 0;
        snprintf(buf, cap, "%s", tmp);
        free(tmp);
    }
    H5Tclose(t);
    H5Aclose(a);
    return ok;
}

/* ---- a Keras 2 file written by hand, exactly as tf.keras's save_weights writes it --------- */

static void fixed_strs(hid_t obj, const char *name, unsigned n, const char **v, int scalar) {
    size_t len = 1;
    for (unsigned i = 0; i < n; i++)
        if (strlen(v[i]) > len) len = strlen(v[i]);
    char *buf = calloc(n, len);
    for (unsigned i = 0; i < n; i++) memcpy(buf + (size_t)i * len, v[i], strlen(v[i]));
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, len);
    H5Tset_strpad(t, H5T_STR_NULLPAD);
    hsize_t dim = (hsize_t)n;
    hid_t s = scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &dim, NULL);
    hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(a >= 0 && H5Awrite(a, t, buf) >= 0, "writing attribute %s", name);
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
    free(buf);
}

/* Variable-length strings, as h5py writes a list of Python str: loaders must take both. */
static void vlen_strs(hid_t obj, const char *name, int n, const char **v) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hsize_t dim = (hsize_t)n;
    hid_t s = H5Screate_simple(1, &dim, NULL);
    hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(a >= 0 && H5Awrite(a, t, v) >= 0, "writing attribute %s", name);
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
}

static void empty_weight_names(hid_t g) {
    hsize_t zero = 0;
    hid_t s = H5Screate_simple(1, &zero, NULL);
    hid_t a = H5Acreate2(g, "weight_names", H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Aclose(a);
    H5Sclose(s);
}

static void raw_dataset(hid_t loc, const char *name, sn_tensor *t, hid_t ftype) {
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    const sn_shape *sh = sn_tensor_shape(t);
    hsize_t dims[8];
    for (int i = 0; i < sh->ndim; i++) dims[i] = (hsize_t)sh->dim[i];
    hid_t s = H5Screate_simple(sh->ndim, dims, NULL);
    hid_t d = H5Dcreate2(loc, name, ftype, s, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                             sn_tensor_cdata(t)) >= 0, "writing dataset %s", name);
    H5Dclose(d);
    H5Sclose(s);
    H5Pclose(lcpl);
}

/* The CNN's weights in Keras 2 layout, under group `root` ("/" for save_weights, or
 * "model_weights" for model.save). The file's layer names differ from the model's
 * (dense_7, ...): Keras 2 matches by order of layers with weights, not by name. */
static void write_keras2_by_hand(const char *path, const model *m, const char *root) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t r = strcmp(root, "/") ? H5Gcreate2(f, root, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                                : H5Gopen2(f, "/", H5P_DEFAULT);
    const char *names[] = {"conv2d_3", "batch_normalization_3", "max_pooling2d_3", "flatten_3",
                           "dense_7", "dropout_3", "dense_8"};
    fixed_strs(r, "layer_names", 7, names, 0);
    const char *be = "tensorflow", *kv = "2.15.0";
    fixed_strs(r, "backend", 1, &be, 1);
    fixed_strs(r, "keras_version", 1, &kv, 1);
    for (int i = 0; i < 7; i++) {
        const sn_weight_layer *L = &m->layers[i];
        hid_t g = H5Gcreate2(r, names[i], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (L->n_vars == 0) {
            empty_weight_names(g);
        } else {
            char wn[4][96];
            const char *wp[4];
            for (int j = 0; j < L->n_vars; j++) {
                snprintf(wn[j], sizeof wn[j], "%s/%s:0", names[i], L->vars[j].name);
                wp[j] = wn[j];
            }
            if (i == 4)
                vlen_strs(g, "weight_names", L->n_vars, wp);
            else
                fixed_strs(g, "weight_names", L->n_vars, wp, 0);
            for (int j = 0; j < L->n_vars; j++)
                raw_dataset(g, wp[j], L->vars[j].value, H5T_IEEE_F32LE);
        }
        H5Gclose(g);
    }
    hid_t g = H5Gcreate2(r, "top_level_model_weights", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    empty_weight_names(g);
    H5Gclose(g);
    H5Gclose(r);
    CHECK(H5Fclose(f) >= 0, "closing %s", path);
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_snake_case(void) {
    const char *cases[][2] = {{"Conv2D", "conv2d"},
                              {"Dense", "dense"},
                              {"BatchNormalization", "batch_normalization"},
                              {"MaxPooling2D", "max_pooling2d"},
                              {"LSTM", "lstm"},
                              {"SimpleRNN", "simple_rnn"},
                              {"Conv2DTranspose", "conv2d_transpose"},
                              {"DepthwiseConv2D", "depthwise_conv2d"},
                              {"LayerNormalization", "layer_normalization"},
                              {"GRU", "gru"},
                              {"Embedding", "embedding"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        const char *r = sn_keras_snake_case(cases[i][0], buf, sizeof buf);
        CHECK(r && !strcmp(r, cases[i][1]), "%s -> '%s', want '%s'", cases[i][0], r ? r : "NULL",
              cases[i][1]);
    }
    char tiny[4];
    CHECK(sn_keras_snake_case("BatchNormalization", tiny, sizeof tiny) == NULL, "cap too small");
}

static void test_keras3_roundtrip_and_layout(void) {
    model a, b;
    build_cnn(&a, 1, 10, 0);
    build_cnn(&b, 0, 10, 0);
    const char *p = tmp_path("cnn.weights.h5");
    CHECK_OK(sn_weights_save_h5(p, a.nl, a.layers, NULL));
    CHECK(access(tmp_path("cnn.weights.h5.tmp"), F_OK) != 0, "temporary file left behind");
    CHECK(!same_bits(&a, &b), "models differ before loading");
    CHECK_OK(sn_weights_load_h5(p, b.nl, b.layers, NULL));
    CHECK(same_bits(&a, &b), "Keras 3 round trip is not bit-identical");
    sn_weights_layout lay = SN_WEIGHTS_AUTO;
    CHECK_OK(sn_weights_h5_layout(p, &lay));
    CHECK(lay == SN_WEIGHTS_KERAS3, "layout %d", (int)lay);

    /* Only weighted layers listed: same paths (numbering is per class). */
    model c;
    build_cnn(&c, 0, 10, 0);
    sn_weight_layer only[4] = {c.layers[0], c.layers[1], c.layers[4], c.layers[6]};
    CHECK_OK(sn_weights_load_h5(p, 4, only, NULL));
    CHECK(same_bits(&a, &c), "loading with only the weighted layers listed");

    /* The structure Keras 3's H5IOStore reads. */
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0, "raw open");
    const char *must[] = {"/vars", "/layers/conv2d/vars/0", "/layers/conv2d/vars/1",
                          "/layers/batch_normalization/vars/3", "/layers/max_pooling2d/vars",
                          "/layers/flatten/vars", "/layers/dense/vars/1", "/layers/dropout/vars",
                          "/layers/dense_1/vars/0", "/layers/dense_1/vars/1"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        CHECK(h5_exists(f, must[i]), "missing %s", must[i]);
    CHECK(n_links(f, "/layers") == 7, "layers has %d children", n_links(f, "/layers"));
    CHECK(n_links(f, "/layers/flatten/vars") == 0, "flatten vars not empty");
    CHECK(n_links(f, "/layers/batch_normalization/vars") == 4, "bn vars");
    CHECK(n_links(f, "/vars") == 0, "root vars not empty");
    char shape[64], s[64];
    int f32, vl;
    ds_info(f, "/layers/conv2d/vars/0", shape, sizeof shape, &f32);
    CHECK(!strcmp(shape, "[3, 3, 1, 8]") && f32, "conv kernel %s f32le %d", shape, f32);
    ds_info(f, "/layers/dense/vars/0", shape, sizeof shape, &f32);
    CHECK(!strcmp(shape, "[72, 16]") && f32, "dense kernel %s", shape);
    ds_info(f, "/layers/dense_1/vars/1", shape, sizeof shape, &f32);
    CHECK(!strcmp(shape, "[10]") && f32, "dense_1 bias %s", shape);
    hid_t g = H5Gopen2(f, "/layers/dense_1/vars", H5P_DEFAULT);
    CHECK(str_attr(g, "name", s, sizeof s, &vl) && !strcmp(s, "dense_1") && vl,
          "dense_1 vars name '%s' vlen %d", s, vl);
    H5Gclose(g);
    g = H5Gopen2(f, "/vars", H5P_DEFAULT);
    CHECK(str_attr(g, "name", s, sizeof s, &vl) && !strcmp(s, "sequential"), "root name '%s'", s);
    H5Gclose(g);
    H5Fclose(f);

    /* Keras 2.13's new-format files named the layers group _layer_checkpoint_dependencies;
     * Keras 3 reads them through a fallback, and so do we. */
    f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(H5Lmove(f, "layers", f, "_layer_checkpoint_dependencies", H5P_DEFAULT, H5P_DEFAULT) >= 0,
          "rename layers group");
    H5Fclose(f);
    free_model(&c);
    build_cnn(&c, 0, 10, 0);
    CHECK_OK(sn_weights_load_h5(p, c.nl, c.layers, NULL));
    CHECK(same_bits(&a, &c), "loading a Keras 2.13 _layer_checkpoint_dependencies file");
    free_model(&a);
    free_model(&b);
    free_model(&c);
}

static void test_recurrent_path(void) {
    model a, b;
    for (int k = 0; k < 2; k++) {
        model *m = k ? &b : &a;
        memset(m, 0, sizeof *m);
        mk(m, "embeddings", 1 - k, 2, 20, 8, 0, 0);
        add_layer(m, "Embedding", "embedding", 0, 1);
        mk(m, "kernel", 2 * (1 - k), 2, 8, 64, 0, 0);
        mk(m, "recurrent_kernel", 3 * (1 - k), 2, 16, 64, 0, 0);
        mk(m, "bias", 4 * (1 - k), 1, 64, 0, 0, 0);
        add_layer(m, "LSTM", "lstm", 1, 3);
    }
    const char *p = tmp_path("lstm.weights.h5");
    CHECK_OK(sn_weights_save_h5(p, a.nl, a.layers, NULL));
    CHECK_OK(sn_weights_load_h5(p, b.nl, b.layers, NULL));
    CHECK(same_bits(&a, &b), "LSTM round trip");
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(h5_exists(f, "/layers/lstm/cell/vars/2"), "LSTM variables belong in lstm/cell/vars");
    CHECK(h5_exists(f, "/layers/embedding/vars/0"), "embedding");
    CHECK(n_links(f, "/layers/lstm/vars") == 0, "lstm's own vars group is empty");
    H5Fclose(f);
    const char *p2 = tmp_path("lstm_legacy.h5");
    sn_weights_h5_options o = sn_weights_h5_defaults();
    o.layout = SN_WEIGHTS_KERAS2;
    CHECK_OK(sn_weights_save_h5(p2, a.nl, a.layers, &o));
    f = H5Fopen(p2, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(h5_exists(f, "/lstm/lstm/lstm_cell/recurrent_kernel:0"), "Keras 2 LSTM weight name");
    H5Fclose(f);
    free_model(&a);
    free_model(&b);
}

/* MultiHeadAttention: its 8 variables (query, key, value, output kernels and biases, flat in
 * sinter) in Keras 3's sublayers, as Keras 3.15 writes them; without biases 4. A file with a
 * sublayer's variable missing names the path. */
static void test_mha_sublayers(void) {
    static const char *const sub[] = {"query_dense", "key_dense", "value_dense", "output_dense"};
    for (int bias = 1; bias >= 0; bias--) {
        model a, b;
        for (int k = 0; k < 2; k++) {
            model *m = k ? &b : &a;
            memset(m, 0, sizeof *m);
            for (int i = 0; i < 4; i++) {
                if (i < 3) mk(m, "kernel", (i + 1) * (1 - k), 3, 6, 2, 3, 0);
                else mk(m, "kernel", 9 * (1 - k), 3, 2, 3, 6, 0);
                if (bias && i < 3) mk(m, "bias", (i + 5) * (1 - k), 2, 2, 3, 0, 0);
                if (bias && i == 3) mk(m, "bias", 11 * (1 - k), 1, 6, 0, 0, 0);
            }
            add_layer(m, "MultiHeadAttention", "mha", 0, bias ? 8 : 4);
        }
        const char *p = tmp_path("mha.weights.h5");
        CHECK_OK(sn_weights_save_h5(p, a.nl, a.layers, NULL));
        CHECK_OK(sn_weights_load_h5(p, b.nl, b.layers, NULL));
        CHECK(same_bits(&a, &b), "MultiHeadAttention round trip (bias %d)", bias);
        hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
        for (int i = 0; i < 4; i++) {
            char q[160];
            snprintf(q, sizeof q, "/layers/multi_head_attention/%s/vars", sub[i]);
            CHECK(n_links(f, q) == 1 + bias, "%s holds %d variables, expected %d", q,
                  n_links(f, q), 1 + bias);
        }
        char shape[64];
        int f32;
        ds_info(f, "/layers/multi_head_attention/output_dense/vars/0", shape, sizeof shape, &f32);
        CHECK(!strcmp(shape, "[2, 3, 6]") && f32, "output kernel %s", shape);
        CHECK(n_links(f, "/layers/multi_head_attention/vars") == 0 &&
              h5_exists(f, "/layers/multi_head_attention/_softmax/vars") &&
              h5_exists(f, "/layers/multi_head_attention/_dropout_layer/vars"),
              "MultiHeadAttention's own, softmax and dropout vars groups, empty");
        H5Fclose(f);
        free_model(&a);
        free_model(&b);
    }
}

static void test_keras2_by_hand(void) {
    model a, b;
    build_cnn(&a, 1, 10, 0);
    for (int w = 0; w < 2; w++) {
        const char *p = tmp_path(w ? "keras2_model.h5" : "keras2_weights.h5");
        write_keras2_by_hand(p, &a, w ? "model_weights" : "/");
        build_cnn(&b, 0, 10, 0);
        CHECK_OK(sn_weights_load_h5(p, b.nl, b.layers, NULL));
        CHECK(same_bits(&a, &b), "Keras 2 file (%s) loads bit-identically", w ? "model" : "weights");
        sn_weights_layout lay = SN_WEIGHTS_AUTO;
        CHECK_OK(sn_weights_h5_layout(p, &lay));
        CHECK(lay == SN_WEIGHTS_KERAS2, "layout %d", (int)lay);
        sn_weights_h5_options o = sn_weights_h5_defaults();
        o.layout = SN_WEIGHTS_KERAS3;
        CHECK_ERR(sn_weights_load_h5(p, b.nl, b.layers, &o), SN_ERR_FORMAT, "has the Keras 2");
        free_model(&b);
    }
    free_model(&a);
}

static void test_keras2_save(void) {
    model a, b;
    build_cnn(&a, 1, 10, 0);
    build_cnn(&b, 0, 10, 0);
    const char *p = tmp_path("legacy.h5");
    sn_weights_h5_options o = sn_weights_h5_defaults();
    o.layout = SN_WEIGHTS_KERAS2;
    CHECK_OK(sn_weights_save_h5(p, a.nl, a.layers, &o));
    CHECK_OK(sn_weights_load_h5(p, b.nl, b.layers, NULL));
    CHECK(same_bits(&a, &b), "Keras 2 round trip");
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
    char s[64], shape[64];
    int vl, f32;
    CHECK(str_attr(f, "backend", s, sizeof s, &vl) && !strcmp(s, "tensorflow") && !vl, "backend '%s'", s);
    CHECK(str_attr(f, "keras_version", s, sizeof s, &vl) && !strcmp(s, "2.15.0"), "version '%s'", s);
    CHECK(H5Aexists(f, "layer_names") > 0, "layer_names");
    CHECK(h5_exists(f, "/dense_1/dense_1/kernel:0"), "dataset at <layer>/<layer>/kernel:0");
    CHECK(h5_exists(f, "/batch_normalization/batch_normalization/moving_variance:0"), "bn");
    CHECK(h5_exists(f, "/flatten") && h5_exists(f, "/top_level_model_weights"), "groups");
    ds_info(f, "/conv2d/conv2d/kernel:0", shape, sizeof shape, &f32);
    CHECK(!strcmp(shape, "[3, 3, 1, 8]") && f32, "conv kernel %s", shape);
    H5Fclose(f);
    free_model(&a);
    free_model(&b);
}

static void test_errors(void) {
    model a, b;
    build_cnn(&a, 1, 128, 0); /* dense_1's bias is [128] in the file */
    build_cnn(&b, 0, 10, 0);
    const char *p = tmp_path("bias128.weights.h5");
    CHECK_OK(sn_weights_save_h5(p, a.nl, a.layers, NULL));
    float before = ((float *)sn_tensor_data(b.t[0]))[5];
    CHECK_ERR(sn_weights_load_h5(p, b.nl, b.layers, NULL), SN_ERR_SHAPE,
              "layer 'dense_1' (Dense) variable 1 'bias': file has shape [128], model expects [10]");
    CHECK(strstr(sn_last_error(), p) != NULL, "message names the file: %s", sn_last_error());
    /* No half-loading: conv2d read fine before dense_1 failed, but was not written. */
    CHECK(((float *)sn_tensor_data(b.t[0]))[5] == before, "model modified by a failed load");

    CHECK_ERR(sn_weights_load_h5("/nonexistent/x.h5", b.nl, b.layers, NULL), SN_ERR_IO,
              "weights file '/nonexistent/x.h5': cannot open: No such file or directory");

    const char *txt = tmp_path("not_hdf5.h5");
    FILE *fp = fopen(txt, "w");
    fputs("this is not an HDF5 file, just some text that is long enough to look at\n", fp);
    fclose(fp);
    CHECK_ERR(sn_weights_load_h5(txt, b.nl, b.layers, NULL), SN_ERR_FORMAT, "not an HDF5 file");
    const char *zip = tmp_path("model.keras");
    fp = fopen(zip, "w");
    fputs("PK\003\004 pretend zip", fp);
    fclose(fp);
    CHECK_ERR(sn_weights_load_h5(zip, b.nl, b.layers, NULL), SN_ERR_FORMAT, ".keras model");

    hid_t f = H5Fcreate(tmp_path("other.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(f);
    CHECK_ERR(sn_weights_load_h5(tmp_path("other.h5"), b.nl, b.layers, NULL), SN_ERR_FORMAT,
              "not Keras weights");

    CHECK_ERR(sn_weights_save_h5("/nonexistent/dir/x.weights.h5", a.nl, a.layers, NULL), SN_ERR_IO,
              "cannot write weights file '/nonexistent/dir/x.weights.h5': No such file or directory");

    /* Layer counts: a file with 4 weighted layers and a model with 5, and the reverse. */
    model big;
    build_cnn(&big, 0, 10, 1);
    const char *ok = tmp_path("cnn4.weights.h5");
    model a10;
    build_cnn(&a10, 1, 10, 0);
    CHECK_OK(sn_weights_save_h5(ok, a10.nl, a10.layers, NULL));
    CHECK_ERR(sn_weights_load_h5(ok, big.nl, big.layers, NULL), SN_ERR_SHAPE,
              "model has 5 layers with weights, file has 4");
    CHECK(strstr(sn_last_error(), "first missing: layer 'dense_2' (Dense)") != NULL, "%s",
          sn_last_error());
    const char *bigp = tmp_path("cnn5.weights.h5");
    CHECK_OK(sn_weights_save_h5(bigp, big.nl, big.layers, NULL));
    CHECK_ERR(sn_weights_load_h5(bigp, b.nl, b.layers, NULL), SN_ERR_SHAPE,
              "model has 4 layers with weights, file has 5");
    /* Same for Keras 2 files. */
    const char *k2 = tmp_path("k2.h5");
    write_keras2_by_hand(k2, &a10, "/");
    CHECK_ERR(sn_weights_load_h5(k2, big.nl, big.layers, NULL), SN_ERR_SHAPE,
              "model has 5 layers with weights, file has 4");
    CHECK(strstr(sn_last_error(), "first missing: layer 'dense_2' (Dense)") != NULL, "%s",
          sn_last_error());
    CHECK_ERR(sn_weights_load_h5(k2, 3, (sn_weight_layer[]){big.layers[0], big.layers[1],
                                                             big.layers[4]}, NULL),
              SN_ERR_SHAPE, "model has 3 layers with weights, file has 4");
    CHECK(strstr(sn_last_error(), "no layer for the file's 'dense_8'") != NULL, "%s",
          sn_last_error());

    /* Wrong dtype and a float64 dataset (converted, as Keras would). */
    f = H5Fopen(ok, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "/layers/dense/vars/1", H5P_DEFAULT);
    hid_t g = H5Gopen2(f, "/layers/dense/vars", H5P_DEFAULT);
    raw_dataset(g, "1", a10.t[7], H5T_STD_I32LE);
    H5Gclose(g);
    H5Ldelete(f, "/layers/conv2d/vars/1", H5P_DEFAULT);
    g = H5Gopen2(f, "/layers/conv2d/vars", H5P_DEFAULT);
    raw_dataset(g, "1", a10.t[1], H5T_IEEE_F64LE);
    H5Gclose(g);
    H5Fclose(f);
    CHECK_ERR(sn_weights_load_h5(ok, b.nl, b.layers, NULL), SN_ERR_SHAPE,
              "layer 'dense' (Dense) variable 1 'bias': file has dtype int32");
    f = H5Fopen(ok, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "/layers/dense/vars/1", H5P_DEFAULT);
    g = H5Gopen2(f, "/layers/dense/vars", H5P_DEFAULT);
    raw_dataset(g, "1", a10.t[7], H5T_IEEE_F32LE);
    H5Gclose(g);
    H5Fclose(f);
    CHECK_OK(sn_weights_load_h5(ok, b.nl, b.layers, NULL));
    CHECK(same_bits(&a10, &b), "float64 dataset converts exactly (values are f32-representable)");

    /* Variable count. */
    model nb;
    build_cnn(&nb, 0, 10, 0);
    nb.layers[6].n_vars = 1; /* dense_1 without bias */
    CHECK_ERR(sn_weights_load_h5(ok, nb.nl, nb.layers, NULL), SN_ERR_SHAPE,
              "layer 'dense_1' (Dense): file has 2 variables");

    /* A model tensor that is not f32. */
    sn_tensor *i32 = NULL;
    sn_shape s10 = sn_shape_make(1, (int64_t)10);
    CHECK_OK(sn_tensor_new(&i32, SN_I32, &s10));
    sn_weight_var iv[2] = {{"kernel", b.t[8]}, {"bias", i32}};
    nb.layers[6] = (sn_weight_layer){"Dense", "dense_1", 2, iv};
    CHECK_ERR(sn_weights_save_h5(tmp_path("bad.weights.h5"), nb.nl, nb.layers, NULL), SN_ERR_SHAPE,
              "variable 1 'bias': tensor dtype");
    sn_tensor_free(i32);

    free_model(&nb);
    free_model(&a);
    free_model(&b);
    free_model(&big);
    free_model(&a10);
}

/* A strided view saves its logical contents and loads back into them. */
static void test_strided_view(void) {
    sn_shape s = sn_shape_make(2, (int64_t)4, (int64_t)3);
    sn_tensor *base = NULL, *view = NULL, *dst = NULL;
    CHECK_OK(sn_tensor_new(&base, SN_F32, &s));
    float *p = sn_tensor_data(base);
    for (int i = 0; i < 12; i++) p[i] = (float)i + 0.5f;
    sn_shape ts = sn_shape_make(2, (int64_t)3, (int64_t)4);
    int64_t strides[2] = {4, 12}; /* the transpose */
    CHECK_OK(sn_tensor_view(&view, base, &ts, strides, 0));
    CHECK_OK(sn_tensor_new(&dst, SN_F32, &ts));
    if (!view || !dst) return;
    sn_weight_var v = {"kernel", view}, d = {"kernel", dst};
    sn_weight_layer L = {"Dense", "dense", 1, &v}, D = {"Dense", "dense", 1, &d};
    const char *path = tmp_path("view.weights.h5");
    CHECK_OK(sn_weights_save_h5(path, 1, &L, NULL));
    CHECK_OK(sn_weights_load_h5(path, 1, &D, NULL));
    int ok = 1;
    for (int i = 0; i < 12; i++) ok &= sn_tensor_get(dst, i) == sn_tensor_get(view, i);
    CHECK(ok, "strided view round trip");
    /* And loading into the view writes through the strides. */
    memset(p, 0, 12 * sizeof(float));
    CHECK_OK(sn_weights_load_h5(path, 1, &L, NULL));
    ok = 1;
    for (int i = 0; i < 12; i++) ok &= sn_tensor_get(dst, i) == sn_tensor_get(view, i);
    CHECK(ok, "load into a strided view");
    sn_tensor_free(view);
    sn_tensor_free(base);
    sn_tensor_free(dst);
}

/* Interop mode, driven by scripts/keras_interop.py (never by CTest): the script has Keras
 * write the same CNN as keras.weights.h5 (Keras 3), keras_legacy.h5 (Keras 2 layout from
 * Keras's legacy writer) and keras_model.h5 (model.save to .h5, weights under
 * /model_weights). Load all three, check they agree, and write sinter.weights.h5 and
 * sinter_legacy.h5 for Keras to load back. */
static int interop(const char *d) {
    const char *in[3] = {"keras.weights.h5", "keras_legacy.h5", "keras_model.h5"};
    model m[3];
    char p[512];
    for (int i = 0; i < 3; i++) {
        build_cnn(&m[i], 0, 10, 0);
        snprintf(p, sizeof p, "%s/%s", d, in[i]);
        CHECK_OK(sn_weights_load_h5(p, m[i].nl, m[i].layers, NULL));
    }
    CHECK(same_bits(&m[0], &m[1]) && same_bits(&m[0], &m[2]), "Keras's three files disagree");
    snprintf(p, sizeof p, "%s/sinter.weights.h5", d);
    CHECK_OK(sn_weights_save_h5(p, m[0].nl, m[0].layers, NULL));
    sn_weights_h5_options o = sn_weights_h5_defaults();
    o.layout = SN_WEIGHTS_KERAS2;
    snprintf(p, sizeof p, "%s/sinter_legacy.h5", d);
    CHECK_OK(sn_weights_save_h5(p, m[0].nl, m[0].layers, &o));
    for (int i = 0; i < 3; i++) free_model(&m[i]);
    return sn_test_finish("test_weights_h5 (Keras interop)");
}

int main(void) {
    const char *interop_dir = getenv("SN_KERAS_INTEROP_DIR");
    if (interop_dir) return interop(interop_dir);
    snprintf(dir, sizeof dir, "/tmp/sn_weights_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_snake_case();
    test_keras3_roundtrip_and_layout();
    test_recurrent_path();
    test_mha_sublayers();
    test_keras2_by_hand();
    test_keras2_save();
    test_errors();
    test_strided_view();
    if (!sn_test_fail) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    return sn_test_finish("test_weights_h5");
}
