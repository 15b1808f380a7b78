/* NumPy arrays: .npy files written byte by byte here (every dtype, both byte orders, versions
 * 1-3, header spellings numpy and Python 2 write) and hostile ones (bad magic, versions,
 * header lengths, keys, dtypes, fortran order, shapes that overflow, data too short or too
 * long, values that do not fit int32), each an error naming the file and the field; .npz
 * archives built with libzip (stored and deflated members, missing arrays, corruption); and
 * TFRecord Examples with float-list images. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <zip.h>

#include "core/core.h"
#include "sinter/data.h"
#include "sn_test.h"
#include "tmp_test_util.h"

/* An .npy image: magic, version major.0, the header text as given (padded with spaces and a
 * newline to a multiple of 64 as numpy does, unless raw), then data. Returns its length. */
static size_t make_npy(unsigned char *buf, int major, const char *header, bool raw,
                       const void *data, size_t ndata) {
    size_t pre = major == 1 ? 10 : 12, hl = strlen(header);
    size_t total_h = raw ? hl : ((pre + hl + 1 + 63) / 64) * 64 - pre;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (unsigned char)(total_h >> (8 * i));
    memcpy(buf + pre, header, hl);
    if (!raw) {
        memset(buf + pre + hl, ' ', total_h - hl);
        buf[pre + total_h - 1] = '\n';
    }
    if (ndata) memcpy(buf + pre + total_h, data, ndata);
    return pre + total_h + ndata;
}

static unsigned char buf[1 << 16];

/* Loads an .npy image from memory and from a file; both must agree. */
static sn_tensor *load_both(const unsigned char *b, size_t n, const char *name) {
    sn_tensor *t = NULL, *u = NULL;
    sn_status s = sn_npy_load_memory(b, n, name, &t);
    CHECK(s == SN_OK, "%s from memory: %s", name, sn_last_error());
    const char *p = test_tmp(name);
    test_write_file(p, b, n);
    s = sn_npy_load(p, &u);
    CHECK(s == SN_OK, "%s from a file: %s", name, sn_last_error());
    if (t && u)
        CHECK(sn_tensor_dtype(t) == sn_tensor_dtype(u) &&
                  sn_shape_equal(sn_tensor_shape(t), sn_tensor_shape(u)) &&
                  memcmp(sn_tensor_data(t), sn_tensor_data(u),
                         (size_t)sn_tensor_numel(t) * sn_dtype_size(sn_tensor_dtype(t))) == 0,
              "%s: file and memory differ", name);
    sn_tensor_free(u);
    /* Every proper prefix of a valid file is an error, never a crash or a read past the end
     * (under ASan this is the check that matters). */
    int accepted = 0;
    for (size_t k = 0; k < n; k++) {
        u = NULL;
        accepted += sn_npy_load_memory(b, k, name, &u) == SN_OK;
        sn_tensor_free(u);
    }
    CHECK(accepted == 0, "%s: %d proper prefixes accepted", name, accepted);
    return t;
}

static void test_npy_valid(void) {
    /* <f4 (3, 4), version 1, numpy's spelling. */
    float f[12];
    for (int i = 0; i < 12; i++) f[i] = (float)i * 0.5f - 1;
    size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", false, f, sizeof f);
    sn_tensor *t = load_both(buf, n, "f4.npy");
    if (t) {
        CHECK(sn_tensor_dtype(t) == SN_F32 && sn_tensor_shape(t)->ndim == 2 && sn_tensor_shape(t)->dim[1] == 4 &&
                  memcmp(sn_tensor_data(t), f, sizeof f) == 0, "<f4 (3,4) content");
        sn_tensor_free(t);
    }
    /* |u1 (2, 2, 2), version 2, keys in another order and double quotes. */
    unsigned char u8[8] = {0, 1, 2, 3, 250, 251, 254, 255};
    n = make_npy(buf, 2, "{\"shape\": (2, 2, 2), \"fortran_order\": False, \"descr\": \"|u1\"}", false, u8, 8);
    if ((t = load_both(buf, n, "u1.npy"))) {
        CHECK(sn_tensor_dtype(t) == SN_U8 && sn_tensor_shape(t)->ndim == 3 && memcmp(sn_tensor_data(t), u8, 8) == 0,
              "|u1 content");
        sn_tensor_free(t);
    }
    /* <i8 (4,), version 3, Python 2's long ints: read as i32. */
    int64_t i8[4] = {0, -1, 2147483647, -2147483648LL};
    n = make_npy(buf, 3, "{'descr': '<i8', 'fortran_order': False, 'shape': (4L,), }", false, i8, sizeof i8);
    if ((t = load_both(buf, n, "i8.npy"))) {
        const int32_t *d = sn_tensor_data(t);
        CHECK(sn_tensor_dtype(t) == SN_I32 && d[1] == -1 && d[2] == INT32_MAX && d[3] == INT32_MIN, "<i8 content");
        sn_tensor_free(t);
    }
    /* >i4 big-endian, >f8, <f2, |b1, <u2, |i1, <u4. */
    unsigned char be[8] = {0xFF, 0xFF, 0xFF, 0xFE, 0x00, 0x00, 0x01, 0x00}; /* -2, 256 */
    n = make_npy(buf, 1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", false, be, 8);
    if ((t = load_both(buf, n, "be.npy"))) {
        const int32_t *d = sn_tensor_data(t);
        CHECK(d[0] == -2 && d[1] == 256, ">i4: %d %d", d[0], d[1]);
        sn_tensor_free(t);
    }
    unsigned char bf8[8] = {0x3F, 0xF8, 0, 0, 0, 0, 0, 0}; /* 1.5 */
    n = make_npy(buf, 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (), }", false, bf8, 8);
    if ((t = load_both(buf, n, "f8.npy"))) {
        CHECK(sn_tensor_dtype(t) == SN_F64 && sn_tensor_shape(t)->ndim == 0 && *(double *)sn_tensor_data(t) == 1.5,
              ">f8 scalar");
        sn_tensor_free(t);
    }
    uint16_t h[4] = {0x3C00, 0xC000, 0x3800, 0x0001}; /* 1, -2, 0.5, 2^-24 */
    n = make_npy(buf, 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", false, h, sizeof h);
    if ((t = load_both(buf, n, "f2.npy"))) {
        const float *d = sn_tensor_data(t);
        CHECK(sn_tensor_dtype(t) == SN_F32 && d[0] == 1 && d[1] == -2 && d[2] == 0.5f && d[3] == 1.0f / 16777216,
              "<f2: %g %g %g %g", d[0], d[1], d[2], d[3]);
        sn_tensor_free(t);
    }
    unsigned char bo[3] = {0, 1, 2};
    n = make_npy(buf, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", false, bo, 3);
    if ((t = load_both(buf, n, "b1.npy"))) {
        const uint8_t *d = sn_tensor_data(t);
        CHECK(sn_tensor_dtype(t) == SN_U8 && d[0] == 0 && d[1] == 1 && d[2] == 1, "|b1");
        sn_tensor_free(t);
    }
    uint16_t u2[2] = {65535, 7};
    n = make_npy(buf, 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", false, u2, 4);
    if ((t = load_both(buf, n, "u2.npy"))) {
        CHECK(((int32_t *)sn_tensor_data(t))[0] == 65535, "<u2");
        sn_tensor_free(t);
    }
    int8_t i1[2] = {-128, 127};
    n = make_npy(buf, 1, "{'descr': '|i1', 'fortran_order': False, 'shape': (1, 2), }", false, i1, 2);
    if ((t = load_both(buf, n, "i1.npy"))) {
        CHECK(((int32_t *)sn_tensor_data(t))[0] == -128 && ((int32_t *)sn_tensor_data(t))[1] == 127, "|i1");
        sn_tensor_free(t);
    }
    uint32_t u4[2] = {5, 2147483647u};
    n = make_npy(buf, 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }", false, u4, 8);
    if ((t = load_both(buf, n, "u4.npy"))) {
        CHECK(((int32_t *)sn_tensor_data(t))[1] == INT32_MAX, "<u4");
        sn_tensor_free(t);
    }
    /* An unpadded header (no newline) is still a valid dict. */
    n = make_npy(buf, 1, "{'descr':'<f4','fortran_order':False,'shape':(3,4)}", true, f, sizeof f);
    if ((t = load_both(buf, n, "raw.npy"))) sn_tensor_free(t);
}

static void test_npy_hostile(void) {
    float f[32] = {0}; /* room for the largest ndata below */
    struct {
        const char *header;
        int major;
        size_t ndata;
        sn_status code;
        const char *needle;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }", 1, 48, SN_ERR_UNSUPPORTED, "fortran_order is True"},
        {"{'descr': '<U5', 'fortran_order': False, 'shape': (3,), }", 1, 60, SN_ERR_UNSUPPORTED, "dtype '<U5' is not supported"},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", 1, 24, SN_ERR_UNSUPPORTED, "dtype '|O' is not supported"},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", 1, 24, SN_ERR_UNSUPPORTED, "dtype '<c8'"},
        {"{'descr': '|f4', 'fortran_order': False, 'shape': (3,), }", 1, 12, SN_ERR_UNSUPPORTED, "dtype '|f4'"},
        {"{'descr': '<f16', 'fortran_order': False, 'shape': (3,), }", 1, 48, SN_ERR_UNSUPPORTED, "dtype '<f16'"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", 1, 12, SN_ERR_UNSUPPORTED, "structured arrays"},
        {"{'descr': '<f4', 'fortran_order': False, }", 1, 12, SN_ERR_FORMAT, "key 'shape' is missing"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 1, 12, SN_ERR_FORMAT, "key 'descr' appears twice"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1}", 1, 12, SN_ERR_FORMAT, "unknown key 'extra'"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (3,), }", 1, 12, SN_ERR_FORMAT, "'fortran_order' is not True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }", 1, 12, SN_ERR_FORMAT, "non-negative integers"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [3], }", 1, 12, SN_ERR_FORMAT, "'shape' is not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1), }", 1, 4, SN_ERR_UNSUPPORTED, "more than 6 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", 1, 4, SN_ERR_FORMAT, "multiply past 2^40"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 1, 4, SN_ERR_FORMAT, "overflows"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", 1, 0, SN_ERR_FORMAT, "holds no elements"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 1, 40, SN_ERR_FORMAT, "is truncated: shape [3, 4] of '<f4' needs 48 bytes of data, the file has 40"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 1, 12, SN_ERR_FORMAT, "has extra bytes"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } junk", 1, 12, SN_ERR_FORMAT, "text after the closing '}'"},
        {"{'descr: '<f4', 'fortran_order': False, 'shape': (3,), }", 1, 12, SN_ERR_FORMAT, "bad header"},
        {"['descr', '<f4']", 1, 12, SN_ERR_FORMAT, "does not start with '{'"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (3,), }", 1, 12, SN_ERR_FORMAT, "expected ',' or '}'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 4, 12, SN_ERR_UNSUPPORTED, "format version 4.0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = make_npy(buf, cases[i].major == 4 ? 1 : cases[i].major, cases[i].header, false, f,
                            cases[i].ndata);
        if (cases[i].major == 4) buf[6] = 4;
        char name[32];
        snprintf(name, sizeof name, "hostile%zu.npy", i);
        const char *p = test_tmp(name);
        test_write_file(p, buf, n);
        sn_tensor *t = NULL;
        sn_status s = sn_npy_load(p, &t);
        CHECK(s == cases[i].code && !t && strstr(sn_last_error(), cases[i].needle) && strstr(sn_last_error(), p),
              "case %zu: %s '%s' (wanted %s '%s')", i, sn_status_name(s), sn_last_error(),
              sn_status_name(cases[i].code), cases[i].needle);
        sn_tensor_free(t);
    }
    sn_tensor *t = NULL;
    CHECK_ERR(sn_npy_load_memory("\x93NUMPX\x01\x00\x00\x00", 10, "m.npy", &t), SN_ERR_FORMAT, "no \\x93NUMPY magic");
    CHECK_ERR(sn_npy_load_memory("\x93NUM", 4, "m.npy", &t), SN_ERR_FORMAT, "shorter than the 10-byte preamble");
    unsigned char big[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0, 0, 0x20, 0};
    CHECK_ERR(sn_npy_load_memory(big, 12, "m.npy", &t), SN_ERR_FORMAT, "header length 2097152 is past");
    unsigned char lie[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xFF, 0xFF};
    CHECK_ERR(sn_npy_load_memory(lie, 10, "m.npy", &t), SN_ERR_FORMAT, "is truncated: its header says 65535 bytes");
    /* Values that do not fit int32 name the element. */
    int64_t i8[3] = {1, 2, 3000000000LL};
    size_t n = make_npy(buf, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", false, i8, sizeof i8);
    CHECK_ERR(sn_npy_load_memory(buf, n, "l.npy", &t), SN_ERR_FORMAT, "l.npy: element 2 is 3000000000, which does not fit in int32");
    int64_t neg[1] = {-3000000000LL};
    n = make_npy(buf, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", false, neg, 8);
    CHECK_ERR(sn_npy_load_memory(buf, n, "l.npy", &t), SN_ERR_FORMAT, "element 0 is -3000000000");
    int64_t lowest[1] = {INT64_MIN}; /* fuzz_npy: negating it in int64_t was undefined */
    n = make_npy(buf, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", false, lowest, 8);
    CHECK_ERR(sn_npy_load_memory(buf, n, "l.npy", &t), SN_ERR_FORMAT, "element 0 is -9223372036854775808");
    uint32_t u4 = 2147483648u;
    n = make_npy(buf, 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (1,), }", false, &u4, 4);
    CHECK_ERR(sn_npy_load_memory(buf, n, "u.npy", &t), SN_ERR_FORMAT, "element 0 is 2147483648");
    CHECK_ERR(sn_npy_load(test_tmp("missing.npy"), &t), SN_ERR_IO, "cannot open");
}

/* ---- .npz ------------------------------------------------------------------------------- */

/* Adds an .npy image as member `name`, stored or deflated. */
static void npz_add(zip_t *z, const char *name, const unsigned char *data, size_t n, bool deflate) {
    void *copy = malloc(n);
    memcpy(copy, data, n);
    zip_source_t *src = zip_source_buffer(z, copy, n, 1);
    zip_int64_t i = src ? zip_file_add(z, name, src, ZIP_FL_OVERWRITE) : -1;
    if (i < 0 || zip_set_file_compression(z, (zip_uint64_t)i, deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) != 0)
        fprintf(stderr, "test setup: zip_add %s: %s\n", name, zip_strerror(z));
}

static void test_npz(void) {
    const char *p = test_tmp("d.npz");
    int err = 0;
    zip_t *z = zip_open(p, ZIP_CREATE | ZIP_TRUNCATE, &err);
    CHECK(z != NULL, "zip_open for writing: %d", err);
    if (!z) return;
    static unsigned char img[4000];
    unsigned char x[1000];
    for (int i = 0; i < 1000; i++) x[i] = (unsigned char)(i % 7); /* compressible */
    size_t nx = make_npy(img, 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (10, 10, 10), }", false, x, 1000);
    npz_add(z, "x_train.npy", img, nx, true);
    int64_t y[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    size_t ny = make_npy(buf, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (10,), }", false, y, sizeof y);
    npz_add(z, "y_train.npy", buf, ny, false);
    ny = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", false, x, 4);
    npz_add(z, "bad.npy", buf, ny, true);
    CHECK(zip_close(z) == 0, "zip_close: %s", zip_strerror(z));
    sn_tensor *t = NULL;
    CHECK_OK(sn_npz_load(p, "x_train", &t));
    CHECK(t && sn_tensor_dtype(t) == SN_U8 && sn_tensor_numel(t) == 1000 && memcmp(sn_tensor_data(t), x, 1000) == 0,
          "deflated x_train");
    sn_tensor_free(t);
    t = NULL;
    CHECK_OK(sn_npz_load(p, "y_train", &t));
    CHECK(t && sn_tensor_dtype(t) == SN_I32 && ((int32_t *)sn_tensor_data(t))[9] == 9, "stored y_train");
    sn_tensor_free(t);
    bool has = true;
    CHECK_OK(sn_npz_has(p, "x_test", &has));
    CHECK(!has, "x_test found");
    CHECK_OK(sn_npz_has(p, "y_train", &has));
    CHECK(has, "y_train not found");
    CHECK_ERR(sn_npz_load(p, "x", &t), SN_ERR_NOT_FOUND, "has no array 'x' (no member x.npy); it holds 'x_train', 'y_train', 'bad'");
    CHECK_ERR(sn_npz_load(p, "bad", &t), SN_ERR_FORMAT, "array 'bad' (member bad.npy) is truncated");
    /* Not a zip; a zip cut short; a deflated member with a flipped byte. */
    const char *q = test_tmp("junk.npz");
    test_write_file(q, "this is not a zip archive at all", 32);
    CHECK_ERR(sn_npz_load(q, "x", &t), SN_ERR_FORMAT, "cannot open");
    FILE *f = fopen(p, "rb");
    static unsigned char whole[8192];
    size_t n = f ? fread(whole, 1, sizeof whole, f) : 0;
    if (f) fclose(f);
    test_write_file(q, whole, n / 2);
    CHECK(sn_npz_load(q, "x_train", &t) != SN_OK && !t, "half an npz accepted");
    /* Local header of the first member at 0: its data starts after 30 + name + extra. */
    size_t off = 30 + (size_t)(whole[26] | whole[27] << 8) + (size_t)(whole[28] | whole[29] << 8);
    whole[off + 5] ^= 0x55;
    test_write_file(q, whole, n);
    sn_status s = sn_npz_load(q, "x_train", &t);
    CHECK(s != SN_OK && !t && strstr(sn_last_error(), "x_train"), "corrupt member: %s '%s'", sn_status_name(s),
          sn_last_error());
    sn_tensor_free(t);
}

/* ---- TFRecord Examples with float images ------------------------------------------------- */

static void write_example(sn_tfrecord_writer *w, const float *img, int nimg, const uint8_t *raw, int64_t label) {
    const uint8_t *vals[1] = {raw};
    size_t lens[1] = {(size_t)nimg};
    sn_feature fs[2] = {
        {.name = "pixels", .kind = raw ? SN_FEATURE_BYTES : SN_FEATURE_FLOAT, .count = raw ? 1 : nimg,
         .floats = img, .bytes = vals, .bytes_len = lens},
        {.name = "class", .kind = SN_FEATURE_INT64, .count = 1, .int64s = &label},
    };
    uint8_t *out = NULL;
    size_t len = 0;
    CHECK_OK(sn_example_encode(fs, 2, &out, &len));
    CHECK_OK(sn_tfrecord_write(w, out, len));
    free(out);
}

static void test_tfrecord_floats(void) {
    const char *p = test_tmp("f.tfrecord");
    sn_tfrecord_writer *w = NULL;
    CHECK_OK(sn_tfrecord_writer_open(&w, p, false));
    if (!w) return;
    float a[6] = {0, 0.5f, 1, 1.5f, 2, 2.5f}, b[5] = {0};
    write_example(w, a, 6, NULL, 3);
    write_example(w, a, 6, NULL, 4);
    write_example(w, b, 5, NULL, 5);
    CHECK_OK(sn_tfrecord_writer_close(w));
    sn_tfrecord_image_spec sp = sn_tfrecord_image_spec_defaults();
    sp.image_key = "pixels";
    sp.label_key = "class";
    sp.image_shape = sn_shape_make(3, (int64_t)2, (int64_t)3, (int64_t)1);
    sn_dataset *ds = NULL;
    CHECK_OK(sn_dataset_from_tfrecord_images(&ds, &p, 1, &sp));
    if (!ds) return;
    sn_tensor *c[2];
    bool end = false;
    CHECK_OK(sn_dataset_next(ds, c, &end));
    CHECK(!end && sn_tensor_dtype(c[0]) == SN_F32 && sn_tensor_shape(c[0])->ndim == 3 &&
              ((float *)sn_tensor_data(c[0]))[5] == 2.5f && ((int32_t *)sn_tensor_data(c[1]))[0] == 3,
          "float image record 0");
    CHECK_OK(sn_dataset_next(ds, c, &end));
    CHECK_ERR(sn_dataset_next(ds, c, &end), SN_ERR_FORMAT, "f.tfrecord: record 2: feature \"pixels\" has 5 floats; shape [2, 3, 1] needs 6");
    sn_dataset_free(ds);
    /* A file that mixes bytes and floats. */
    const char *q = test_tmp("mix.tfrecord");
    CHECK_OK(sn_tfrecord_writer_open(&w, q, false));
    uint8_t raw[6] = {1, 2, 3, 4, 5, 6};
    write_example(w, a, 6, NULL, 1);
    write_example(w, NULL, 6, raw, 2);
    CHECK_OK(sn_tfrecord_writer_close(w));
    CHECK_OK(sn_dataset_from_tfrecord_images(&ds, &q, 1, &sp));
    CHECK_OK(sn_dataset_next(ds, c, &end));
    CHECK_ERR(sn_dataset_next(ds, c, &end), SN_ERR_FORMAT, "record 1: feature \"pixels\" is a bytes list but it was a float list in the first record");
    sn_dataset_free(ds);
    sp.image_key = "image";
    CHECK_OK(sn_dataset_from_tfrecord_images(&ds, &q, 1, &sp));
    CHECK_ERR(sn_dataset_next(ds, c, &end), SN_ERR_FORMAT, "record 0: feature \"image\" should be one bytes value");
    sn_dataset_free(ds);
}

int main(void) {
    if (!test_tmpdir_make("sn_test_npy")) return 1;
    test_npy_valid();
    test_npy_hostile();
    test_npz();
    test_tfrecord_floats();
    test_tmpdir_remove();
    return sn_test_finish("test_npy");
}
