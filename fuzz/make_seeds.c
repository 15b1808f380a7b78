/* Writes the seed corpora of the fuzz targets with sinter's own writers (small files, a few
 * hundred bytes to a few KB each):  make_seeds OUT_DIR  ->  OUT_DIR/<target>/<seed>.
 * The seeds are committed under fuzz/seeds/; scripts/fuzz.sh seeds regenerates them. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"
#include "io/checkpoint_io.h"
#include "io/keras_file.h"
#include "sinter/data.h"
#include "sinter/io.h"
#include <zip.h>

static char out_dir[512];

static void die(const char *what) {
    fprintf(stderr, "make_seeds: %s: %s\n", what, sn_last_error());
    exit(1);
}

static const char *path_of(const char *target, const char *name) {
    static char p[1024];
    snprintf(p, sizeof p, "%s/%s", out_dir, target);
    if (mkdir(p, 0755) != 0 && errno != EEXIST) die(p);
    snprintf(p, sizeof p, "%s/%s/%s", out_dir, target, name);
    return p;
}

static void write_bytes(const char *path, const void *d, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(d, 1, n, f) != n || fclose(f) != 0) die(path);
}

static uint8_t *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) die(path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    uint8_t *b = malloc((size_t)len + 1);
    if (!b || fread(b, 1, (size_t)len, f) != (size_t)len) die(path);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static sn_tensor *tensor(sn_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2) {
    sn_shape s = {.ndim = ndim, .dim = {d0, d1, d2}};
    sn_tensor *t = NULL;
    if (sn_tensor_new(&t, dt, &s) != SN_OK) die("tensor");
    uint8_t *p = sn_tensor_data(t);
    size_t nb = (size_t)sn_tensor_numel(t) * sn_dtype_size(dt);
    for (size_t i = 0; i < nb; i++) p[i] = (uint8_t)(i * 37 + 11);
    return t;
}

static void idx_seeds(void) {
    struct { const char *name; sn_dtype dt; int nd; int64_t d0, d1, d2; } c[] = {
        {"images_u8_3d", SN_U8, 3, 4, 5, 6}, {"labels_u8_1d", SN_U8, 1, 10, 0, 0},
        {"i32_2d", SN_I32, 2, 3, 4, 0},       {"f32_2d", SN_F32, 2, 2, 3, 0},
        {"f64_1d", SN_F64, 1, 5, 0, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        sn_tensor *t = tensor(c[i].dt, c[i].nd, c[i].d0, c[i].d1, c[i].d2);
        char name[64];
        /* fuzz_idx: plain and gzip files as they are; fuzz_idx_gz: the plain bytes (it
         * compresses them itself). */
        if (sn_idx_save(path_of("fuzz_idx", c[i].name), t) != SN_OK) die("idx");
        size_t n;
        uint8_t *b = read_bytes(path_of("fuzz_idx", c[i].name), &n);
        write_bytes(path_of("fuzz_idx_gz", c[i].name), b, n);
        free(b);
        snprintf(name, sizeof name, "%s.gz", c[i].name);
        if (sn_idx_save(path_of("fuzz_idx", name), t) != SN_OK) die("idx gz");
        sn_tensor_free(t);
    }
}

/* One Example: image (bytes, 4 pixels), label (int64), and a float list. */
static uint8_t *example(int label, size_t *n) {
    uint8_t px[4] = {(uint8_t)label, 1, 2, 255};
    const uint8_t *bytes[1] = {px};
    size_t blen[1] = {4};
    int64_t lab[1] = {label};
    float fl[3] = {0.5f, -1.0f, 1e30f};
    sn_feature f[3] = {
        {.name = "image", .kind = SN_FEATURE_BYTES, .count = 1, .bytes = bytes, .bytes_len = blen},
        {.name = "label", .kind = SN_FEATURE_INT64, .count = 1, .int64s = lab},
        {.name = "weights", .kind = SN_FEATURE_FLOAT, .count = 3, .floats = fl},
    };
    uint8_t *out = NULL;
    if (sn_example_encode(f, 3, &out, n) != SN_OK) die("example");
    return out;
}

static void tfrecord_seeds(void) {
    for (int gz = 0; gz < 2; gz++) {
        const char *tmp = path_of("fuzz_tfrecord", "tmp.tfrecord");
        sn_tfrecord_writer *w = NULL;
        /* The target gzips the body itself when the flag byte says so: write plain bytes. */
        if (sn_tfrecord_writer_open(&w, tmp, false) != SN_OK) die("tfrecord");
        for (int k = 0; k < 3; k++) {
            size_t n;
            uint8_t *e = example(k, &n);
            if (sn_tfrecord_write(w, e, n) != SN_OK) die("tfrecord write");
            free(e);
        }
        if (sn_tfrecord_write(w, "", 0) != SN_OK) die("tfrecord write");
        if (sn_tfrecord_writer_close(w) != SN_OK) die("tfrecord close");
        size_t n;
        uint8_t *b = read_bytes(tmp, &n);
        remove(tmp);
        uint8_t *s = malloc(n + 1);
        s[0] = (uint8_t)gz;
        memcpy(s + 1, b, n);
        write_bytes(path_of("fuzz_tfrecord", gz ? "three_examples_gz" : "three_examples"), s,
                    n + 1);
        free(s);
        free(b);
    }
    size_t n;
    uint8_t *e = example(7, &n);
    write_bytes(path_of("fuzz_example", "image_label_floats"), e, n);
    free(e);
    write_bytes(path_of("fuzz_example", "empty"), "", 0);
}

static void weights_seeds(void) {
    /* The model of fuzz_weights_h5.c, in both layouts. */
    sn_tensor *t[9] = {
        tensor(SN_F32, 2, 3, 2, 0), tensor(SN_F32, 1, 2, 0, 0), tensor(SN_F32, 1, 2, 0, 0),
        tensor(SN_F32, 1, 2, 0, 0), tensor(SN_F32, 1, 2, 0, 0), tensor(SN_F32, 1, 2, 0, 0),
        tensor(SN_F32, 2, 2, 8, 0), tensor(SN_F32, 2, 2, 8, 0), tensor(SN_F32, 1, 8, 0, 0),
    };
    const char *names[9] = {"kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance",
                            "kernel", "recurrent_kernel", "bias"};
    sn_weight_var v[9];
    for (int i = 0; i < 9; i++) v[i] = (sn_weight_var){names[i], t[i]};
    sn_weight_layer L[4] = {
        {"Dense", "dense", 2, &v[0]},
        {"BatchNormalization", "batch_normalization", 4, &v[2]},
        {"Dropout", "dropout", 0, NULL},
        {"LSTM", "lstm", 3, &v[6]},
    };
    sn_weights_h5_options o = sn_weights_h5_defaults();
    o.layout = SN_WEIGHTS_KERAS3;
    if (sn_weights_save_h5(path_of("fuzz_weights_h5", "keras3_layout.h5"), 4, L, &o) != SN_OK)
        die("keras3");
    o.layout = SN_WEIGHTS_KERAS2;
    if (sn_weights_save_h5(path_of("fuzz_weights_h5", "keras2_layout.h5"), 4, L, &o) != SN_OK)
        die("keras2");
    for (int i = 0; i < 9; i++) sn_tensor_free(t[i]);
}

/* .keras archives for fuzz_keras_archive: config, metadata and the Keras 3 weights of
 * fuzz_weights_h5's model (weights_seeds runs first); and one without weights. */
static void keras_archive_seeds(void) {
    static const char config[] =
        "{\"module\": \"keras\", \"class_name\": \"Sequential\", \"config\": {\"name\": "
        "\"sequential\", \"layers\": [{\"module\": \"keras.layers\", \"class_name\": "
        "\"InputLayer\", \"config\": {\"batch_shape\": [null, 3]}}, {\"module\": "
        "\"keras.layers\", \"class_name\": \"Dense\", \"config\": {\"name\": \"dense\", "
        "\"units\": 2, \"activation\": \"relu\"}}]}, \"compile_config\": {}}";
    static const char meta[] = "{\"keras_version\": \"3.15.1\", \"date_saved\": \"x\"}";
    size_t n = 0;
    uint8_t *w = read_bytes(path_of("fuzz_weights_h5", "keras3_layout.h5"), &n);
    sn_keras_archive a = {.config = (char *)config, .config_len = sizeof config - 1,
                          .metadata = (char *)meta, .metadata_len = sizeof meta - 1,
                          .weights = w, .weights_len = n};
    if (sn_keras_archive_write(path_of("fuzz_keras_archive", "model.keras"), &a) != SN_OK)
        die("model.keras");
    a.weights = NULL;
    a.weights_len = 0;
    if (sn_keras_archive_write(path_of("fuzz_keras_archive", "no_weights.keras"), &a) != SN_OK)
        die("no_weights.keras");
    free(w);
}

/* An .npy image by hand (sinter writes no .npy): numpy's header layout, padded to 64. */
static size_t npy_bytes(uint8_t *buf, int major, const char *descr, const char *shape,
                        const void *data, size_t n) {
    char h[256];
    int hl = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                      descr, shape);
    size_t pre = major == 1 ? 10 : 12, total = ((pre + (size_t)hl + 1 + 63) / 64) * 64 - pre;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (uint8_t)(total >> (8 * i));
    memcpy(buf + pre, h, (size_t)hl);
    memset(buf + pre + hl, ' ', total - (size_t)hl);
    buf[pre + total - 1] = '\n';
    memcpy(buf + pre + total, data, n);
    return pre + total + n;
}

static void npy_seeds(void) {
    static uint8_t buf[4096], d[512];
    for (int i = 0; i < 512; i++) d[i] = (uint8_t)(i * 37 + 11);
    struct { const char *name, *descr, *shape; int major; size_t n; } c[] = {
        {"u1_3d", "|u1", "(2, 4, 4)", 1, 32},   {"f4_2d", "<f4", "(3, 4)", 1, 48},
        {"f8_be", ">f8", "(2,)", 2, 16},        {"i8_1d", "<i8", "(4,)", 3, 32},
        {"f2_1d", "<f2", "(3,)", 1, 6},         {"b1_1d", "|b1", "(5,)", 1, 5},
        {"u2_scalar", "<u2", "()", 1, 2},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        write_bytes(path_of("fuzz_npy", c[i].name), buf,
                    npy_bytes(buf, c[i].major, c[i].descr, c[i].shape, d, c[i].n));
    /* An .npz of x (deflated) and y (stored), as np.savez / savez_compressed write them. */
    const char *p = path_of("fuzz_npz", "x_y");
    int err = 0;
    zip_t *z = zip_open(p, ZIP_CREATE | ZIP_TRUNCATE, &err);
    if (!z) die("zip_open");
    const char *members[2][3] = {{"x.npy", "|u1", "(4, 3, 3)"}, {"y.npy", "<i8", "(4,)"}};
    for (int m = 0; m < 2; m++) {
        size_t n = npy_bytes(buf, 1, members[m][1], members[m][2], d, m ? 32 : 36);
        void *copy = malloc(n);
        if (!copy) die("malloc");
        memcpy(copy, buf, n);
        zip_source_t *src = zip_source_buffer(z, copy, n, 1);
        zip_int64_t i = src ? zip_file_add(z, members[m][0], src, 0) : -1;
        if (i < 0 || zip_set_file_compression(z, (zip_uint64_t)i, m ? ZIP_CM_STORE : ZIP_CM_DEFLATE, 0))
            die("zip_file_add");
    }
    if (zip_close(z) != 0) die("zip_close");
}

static void text_seeds(void) {
    /* Byte 0 is the target's control byte (sequence length, bytes mode, batch, split). */
    const char *t1 = "\x21" "First Citizen:\nBefore we proceed any further, hear me speak.\n";
    write_bytes(path_of("fuzz_text", "ascii"), t1, strlen(t1));
    const char *t2 = "\x18" "na\xc3\xafve caf\xc3\xa9" " \xe2\x82\xac \xf0\x9f\x98\x80 fa\xc3\xa7" "ade";
    write_bytes(path_of("fuzz_text", "utf8"), t2, strlen(t2));
    const char t3[] = "\x11" "\xff\xfe\x00\x80 bytes \xc3";
    write_bytes(path_of("fuzz_text", "bytes_mode"), t3, sizeof t3 - 1);
    /* A vocabulary file as sn_vocab_save writes it, behind a control byte. */
    sn_vocab *v = NULL;
    if (sn_vocab_build(&v, t2 + 1, strlen(t2) - 1, false) != SN_OK) die("vocab");
    char vp[1024];
    snprintf(vp, sizeof vp, "%s", path_of("fuzz_text", "vocab_tmp.json"));
    if (sn_vocab_save(v, vp) != SN_OK) die("vocab save");
    sn_vocab_free(v);
    size_t n = 0;
    uint8_t *j = read_bytes(vp, &n);
    uint8_t *s = malloc(n + 1);
    if (!s) die("malloc");
    s[0] = 0x20;
    memcpy(s + 1, j, n);
    write_bytes(path_of("fuzz_text", "vocab_json"), s, n + 1);
    remove(vp);
    free(j);
    free(s);
}

/* Checkpoints for fuzz_checkpoint: every item type, a scalar, a 2-D array, strings, nested
 * group names, as src/nn/train/checkpoint.c writes them. */
static void checkpoint_seeds(void) {
    float w[6] = {1, 2, 3, 4, 5, 6};
    double lr = 1e-3;
    int32_t i32[2] = {7, -7};
    int64_t step = 120;
    uint8_t u8[3] = {1, 2, 3};
    char *names[2] = {"loss", "val_loss"};
    sn_ckpt_item items[] = {
        {.name = "variables/dense/kernel", .type = SN_CKPT_F32, .shape = {2, {2, 3}}, .data = w},
        {.name = "fit/learning_rate", .type = SN_CKPT_F64, .shape = {0, {0}}, .data = &lr},
        {.name = "fit/counters", .type = SN_CKPT_I32, .shape = {1, {2}}, .data = i32},
        {.name = "fit/global_step", .type = SN_CKPT_I64, .shape = {0, {0}}, .data = &step},
        {.name = "data/state", .type = SN_CKPT_U8, .shape = {1, {3}}, .data = u8},
        {.name = "history/names", .type = SN_CKPT_STR, .shape = {1, {2}}, .data = names},
    };
    if (sn_ckpt_write(path_of("fuzz_checkpoint", "ckpt-000120.h5"), "sinter-checkpoint", 1,
                      (int)(sizeof items / sizeof items[0]), items) != SN_OK)
        die("checkpoint");
    if (sn_ckpt_write(path_of("fuzz_checkpoint", "empty.h5"), "sinter-checkpoint", 1, 0, NULL) !=
        SN_OK)
        die("empty checkpoint");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds OUT_DIR\n");
        return 2;
    }
    snprintf(out_dir, sizeof out_dir, "%s", argv[1]);
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST) die(out_dir);
    idx_seeds();
    tfrecord_seeds();
    weights_seeds();
    keras_archive_seeds();
    npy_seeds();
    text_seeds();
    checkpoint_seeds();
    return 0;
}
