/* Hostile input: files whose headers declare more than they hold, dims whose product
 * overflows, lengths past the end, and the fuzzers' crashing inputs, each crafted here byte by
 * byte. Every reader must refuse them with a message naming the file, the declared size and
 * what the file can hold — before allocating what the header claims — and never crash.
 * Files that go through libzip, jansson and HDF5 (.keras archives, model JSON, vocabularies,
 * :predict bodies) must fail with one line a user can read: no line break, no "0x..." text
 * (HDF5 records pointers, jansson writes byte values so), the file named.
 * (docs/reliability.md lists what each case shows.) */
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "io/keras_file.h"
#include "serve/serve_impl.h"
#include "sinter/data.h"
#include "sinter/nn.h"
#include "sn_test.h"
#include "tmp_test_util.h"

static void write_file(const char *path, const void *p, size_t n, bool gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb6");
        CHECK(f && gzwrite(f, p, (unsigned)n) == (int)n && gzclose(f) == Z_OK, "gz write %s", path);
    } else {
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(p, 1, n, f) == n && fclose(f) == 0, "write %s", path);
    }
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Bytes the allocator holds now (heap + mmapped blocks). Under ASan mallinfo2 does not see
 * ASan's allocator and reads 0: the checks below then hold trivially; the plain build is the
 * one that tells. */
static size_t heap_bytes(void) {
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

/* ---- IDX --------------------------------------------------------------------------------- */

static void test_idx_claims(void) {
    /* 20 bytes claiming 4 GiB: u8 images [65536, 256, 256] and 4 bytes of data. */
    uint8_t b[20] = {0, 0, 0x08, 0x03};
    put_be32(b + 4, 65536);
    put_be32(b + 8, 256);
    put_be32(b + 12, 256);
    memcpy(b + 16, "data", 4);
    for (int gz = 0; gz < 2; gz++) {
        const char *p = test_tmp(gz ? "claims_4g.idx.gz" : "claims_4g.idx");
        write_file(p, b, sizeof b, gz);
        sn_tensor *t = (sn_tensor *)&t; /* must come back NULL */
        CHECK_ERR(sn_idx_load(p, &t), SN_ERR_FORMAT, "need 4294967296 bytes of data");
        CHECK(strstr(sn_last_error(), p) &&
                  strstr(sn_last_error(), gz ? "more than the gzip file of"
                                             : "found 4 (the plain file has 20 bytes)"),
              "message names the file and its size: %s", sn_last_error());
        CHECK(t == NULL, "failed load leaves the output NULL");
    }
    /* Just one byte short of what the dims need (plain): the exact check, not a loose bound. */
    uint8_t s[4 + 8 + 11] = {0, 0, 0x08, 0x02};
    put_be32(s + 4, 3);
    put_be32(s + 8, 4);
    const char *p = test_tmp("short_by_one.idx");
    write_file(p, s, sizeof s, false);
    sn_tensor *t = NULL;
    CHECK_ERR(sn_idx_load(p, &t), SN_ERR_FORMAT, "need 12 bytes of data");
    /* ... and exactly enough loads. */
    uint8_t ok[4 + 8 + 12] = {0, 0, 0x08, 0x02};
    put_be32(ok + 4, 3);
    put_be32(ok + 8, 4);
    p = test_tmp("exact.idx");
    write_file(p, ok, sizeof ok, false);
    CHECK_OK(sn_idx_load(p, &t));
    sn_tensor_free(t);
    t = NULL;

    /* Dims whose product overflows int64 (the fuzzer's first finding: UBSan, signed
     * overflow): four dims of 2^32 - 1, i32 elements. */
    uint8_t o[4 + 16] = {0, 0, 0x0C, 0x04};
    for (int i = 0; i < 4; i++) put_be32(o + 4 + 4 * i, 0xFFFFFFFFu);
    p = test_tmp("overflow.idx");
    write_file(p, o, sizeof o, false);
    CHECK_ERR(sn_idx_load(p, &t), SN_ERR_FORMAT, "multiply past 2^40 elements");
    /* fuzz_idx's input: [2307, 3774340893, ...] u8 */
    static const uint8_t crash[] = {0x0, 0x0, 0x8, 0x3, 0x0, 0x0, 0x0, 0x89, 0xae, 0xd3, 0xf8,
                                    0x1d, 0x42, 0x67, 0x8c, 0xb1, 0xd6, 0xfb, 0x20, 0x31};
    p = test_tmp("fuzz_crash.idx");
    write_file(p, crash, sizeof crash, false);
    CHECK(sn_idx_load(p, &t) == SN_ERR_FORMAT && t == NULL, "fuzz_idx input: %s",
          sn_last_error());
}

/* ---- TFRecord ---------------------------------------------------------------------------- */

static void put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void test_tfrecord_claims(void) {
    /* A record header with a valid CRC claiming 2 GiB, then 4 bytes: truncated, and read
     * without allocating the 2 GiB (the buffer grows with the bytes that arrive). */
    uint8_t b[16];
    put_le64(b, (uint64_t)1 << 31);
    put_le32(b + 8, sn_crc32c_masked(b, 8));
    memcpy(b + 12, "abcd", 4);
    for (int gz = 0; gz < 2; gz++) {
        const char *p = test_tmp(gz ? "claims_2g.tfrecord.gz" : "claims_2g.tfrecord");
        write_file(p, b, sizeof b, gz);
        sn_tfrecord_reader *r = NULL;
        CHECK_OK(sn_tfrecord_open(&r, p));
        if (!r) continue;
        const uint8_t *d;
        size_t len;
        bool end;
        size_t before = heap_bytes();
        CHECK_ERR(sn_tfrecord_read(r, &d, &len, &end), SN_ERR_FORMAT,
                  "record 0 is truncated: expected 2147483648 bytes of data and 4 of CRC, found 4");
        size_t grew = heap_bytes() - before; /* the reader keeps its buffer until closed */
        CHECK(heap_bytes() < before || grew < ((size_t)1 << 20),
              "%s: reading a 16-byte file that claims 2 GiB allocated %zu bytes",
              gz ? "gzip" : "plain", grew);
        sn_tfrecord_close(r);
    }
    /* Past the 2 GiB limit: refused from the header alone. */
    put_le64(b, (uint64_t)1 << 40);
    put_le32(b + 8, sn_crc32c_masked(b, 8));
    const char *p = test_tmp("claims_1t.tfrecord");
    write_file(p, b, sizeof b, false);
    sn_tfrecord_reader *r = NULL;
    CHECK_OK(sn_tfrecord_open(&r, p));
    if (r) {
        const uint8_t *d;
        size_t len;
        bool end;
        CHECK_ERR(sn_tfrecord_read(r, &d, &len, &end), SN_ERR_FORMAT,
                  "length 1099511627776 is too large");
        sn_tfrecord_close(r);
    }
}

/* ---- tf.train.Example -------------------------------------------------------------------- */

static void test_example_claims(void) {
    sn_example *ex = NULL;
    CHECK_OK(sn_example_new(&ex));
    if (!ex) return;
    /* Example.features claiming 2^62 bytes in 11 bytes. */
    uint8_t big[] = {0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 0x01};
    CHECK_ERR(sn_example_parse(ex, big, sizeof big), SN_ERR_FORMAT, "cut-short Features");
    /* A varint of 11 bytes (more than 64 bits). */
    uint8_t vi[12];
    memset(vi, 0x80, sizeof vi);
    CHECK_ERR(sn_example_parse(ex, vi, sizeof vi), SN_ERR_FORMAT, "bad tag in Example");
    /* A packed float list whose length is not a multiple of 4. */
    uint8_t fl[] = {0x0a, 0x0e, 0x0a, 0x0c, 0x0a, 0x01, 'x', 0x12, 0x07,
                    0x12, 0x05, 0x0a, 0x03, 1, 2, 3};
    CHECK_ERR(sn_example_parse(ex, fl, sizeof fl), SN_ERR_FORMAT, "bad packed floats");
    /* An empty packed int64 list is valid protobuf (an empty repeated field): zero values. */
    uint8_t e64[] = {0x0a, 0x0b, 0x0a, 0x09, 0x0a, 0x01, 'n', 0x12, 0x04, 0x1a, 0x02, 0x0a, 0x00};
    CHECK_OK(sn_example_parse(ex, e64, sizeof e64));
    const sn_feature *f = sn_example_find(ex, "n");
    CHECK(f && f->kind == SN_FEATURE_INT64 && f->count == 0, "empty packed int64 list");
    /* Empty float, int64 and bytes lists before any value was parsed (the pools are still
     * unallocated): fuzz_example's UBSan finding, NULL + 0. Zero values, NULL pointers. */
    uint8_t fixed[] = {0x0a, 0x1b, /* Example.features, 27 bytes: three entries */
                       0x0a, 0x07, 0x0a, 0x01, 'f', 0x12, 0x02, 0x12, 0x00,  /* f: float_list {} */
                       0x0a, 0x07, 0x0a, 0x01, 'i', 0x12, 0x02, 0x1a, 0x00,  /* i: int64_list {} */
                       0x0a, 0x07, 0x0a, 0x01, 'b', 0x12, 0x02, 0x0a, 0x00}; /* b: bytes_list {} */
    CHECK_OK(sn_example_parse(ex, fixed, sizeof fixed));
    const char *names[3] = {"f", "i", "b"};
    sn_feature_kind kinds[3] = {SN_FEATURE_FLOAT, SN_FEATURE_INT64, SN_FEATURE_BYTES};
    for (int i = 0; i < 3; i++) {
        f = sn_example_find(ex, names[i]);
        CHECK(f && f->kind == kinds[i] && f->count == 0 && !f->floats && !f->int64s && !f->bytes,
              "empty list '%s'", names[i]);
    }
    sn_example_free(ex);
}

/* ---- libzip, jansson, HDF5: one-line messages ------------------------------------------- */

/* The message of a failed call: one line, no 0x text, mentioning `needle`. */
static void check_line(const char *what, const char *msg, const char *needle) {
    CHECK(msg && *msg, "%s: empty message", what);
    if (!msg) return;
    CHECK(!strpbrk(msg, "\n\r"), "%s: the message has a line break: '%s'", what, msg);
    CHECK(!test_has_0x(msg), "%s: the message has 0x text: '%s'", what, msg);
    bool ctl = false;
    for (const char *p = msg; *p; p++) ctl |= (unsigned char)*p < 0x20 || *p == 0x7f;
    CHECK(!ctl, "%s: the message has a control byte: '%s'", what, msg);
    CHECK(!needle || strstr(msg, needle), "%s: '%s' does not mention '%s'", what, msg, needle);
}

/* A .keras archive with these members, written by sinter's own writer. */
static const char *archive(const char *name, const char *config, const void *w, size_t wn) {
    const char *p = test_tmp(name);
    sn_keras_archive a = {.config = (char *)config, .config_len = strlen(config),
                          .weights = (void *)w, .weights_len = wn};
    CHECK_OK(sn_keras_archive_write(p, &a));
    return p;
}

static void expect_load_fails(const char *what, const char *path, const char *needle) {
    sn_model *m = NULL;
    sn_status s = sn_model_load(path, 1, &m, NULL);
    CHECK(s != SN_OK && !m, "%s: loaded (%s)", what, sn_status_name(s));
    if (s != SN_OK) check_line(what, sn_last_error(), needle);
    sn_model_free(m);
}

static void test_foreign_messages(void) {
    /* libzip: bytes that are not a zip, a zip cut in half, an empty file. */
    const char *junk = test_tmp("junk.keras");
    write_file(junk, "PK\x03\x04\xff\x00\n\x01not a zip at all", 22, false);
    expect_load_fails("junk .keras", junk, "junk.keras");
    const char *good = archive("good.keras", "{\"class_name\": \"Sequential\"}", NULL, 0);
    FILE *f = fopen(good, "rb");
    char buf[4096];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    const char *cut = test_tmp("cut.keras");
    write_file(cut, buf, n / 2, false);
    expect_load_fails("truncated .keras", cut, "cut.keras");
    const char *empty = test_tmp("empty.keras");
    write_file(empty, "", 0, false);
    expect_load_fails("empty .keras", empty, "empty.keras");
    CHECK(sn_keras_archive_read(test_tmp("absent.keras"), &(sn_keras_archive){0}) == SN_ERR_IO,
          "a missing archive is not SN_ERR_IO");
    check_line("missing .keras", sn_last_error(), "No such file or directory");

    /* jansson on config.json: a raw control byte and a line break inside a string (jansson
     * quotes the token, and writes the byte as 0x..), invalid UTF-8, duplicate keys, deep
     * nesting, and a valid document whose values hold line breaks (sinter's own messages
     * quote them). */
    static const struct {
        const char *name, *config, *needle;
    } js[] = {
        {"ctl.keras", "{\"class_name\": \"Seq\x01\nuential\"}", "control character"},
        {"utf8.keras", "{\"class_name\": \"\xff\xfe\"}", "unable to decode byte"},
        {"dup.keras", "{\"a\": 1, \"a\": 2}", "duplicate object key"},
        {"nul.keras", "{\"class_name\": \"a\\u0000b\"}", NULL},
        {"deep.keras", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
         NULL},
        {"newline_value.keras", "{\"class_name\": \"Seq\\nuential\\r\\u0007\"}", NULL},
        {"newline_layer.keras", "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"m\", "
                                "\"layers\": [{\"class_name\": \"Den\\nse\\u001b[31m\", \"config\": {}}]}}",
         NULL},
    };
    for (size_t i = 0; i < sizeof js / sizeof js[0]; i++) {
        const char *p = archive(js[i].name, js[i].config, NULL, 0);
        expect_load_fails(js[i].name, p, js[i].needle);
        sn_model *m = NULL;
        if (sn_model_from_json(js[i].config, strlen(js[i].config), 1, &m, NULL) == SN_OK) {
            CHECK(0, "%s: the JSON loaded as a model", js[i].name);
            sn_model_free(m);
        } else {
            check_line(js[i].name, sn_last_error(), js[i].needle);
        }
    }

    /* HDF5 behind libzip: a weights member that is not HDF5, and one that is cut short (a
     * real Keras 3 weights image, half of it). */
    const char *cfg = "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"m\", \"layers\": ["
                      "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 3]}},"
                      "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2}}]}}";
    sn_model *m = NULL;
    sn_status s = sn_model_from_json(cfg, strlen(cfg), 1, &m, NULL);
    CHECK(s == SN_OK, "the small model's JSON: %s", sn_last_error());
    if (s == SN_OK) {
        const char *wpath = test_tmp("d.weights.h5");
        CHECK_OK(sn_model_save_weights(m, wpath));
        FILE *wf = fopen(wpath, "rb");
        static char img[1 << 16];
        size_t wn = wf ? fread(img, 1, sizeof img, wf) : 0;
        if (wf) fclose(wf);
        CHECK(wn > 1000 && wn < sizeof img, "weights file of %zu bytes", wn);
        expect_load_fails("weights not HDF5", archive("w_junk.keras", cfg, "junk", 4), "HDF5");
        expect_load_fails("weights cut", archive("w_cut.keras", cfg, img, wn / 2), NULL);
        /* HDF5's own error stack for a torn file: one line, no record. */
        const char *torn = test_tmp("torn.weights.h5");
        write_file(torn, img, wn / 2, false);
        CHECK(sn_model_load_weights(m, torn) != SN_OK, "a torn weights file loaded");
        check_line("torn weights file", sn_last_error(), "torn.weights.h5");
        sn_model_free(m);
    }

    /* jansson on a vocabulary file and on :predict bodies. */
    const char *voc = test_tmp("bad.vocab.json");
    write_file(voc, "{\"format\": \"\x02\xc3\"}", 15, false);
    sn_vocab *v = NULL;
    CHECK(sn_vocab_load(&v, voc) != SN_OK, "a hostile vocabulary loaded");
    check_line("hostile vocabulary", sn_last_error(), "bad.vocab.json");
    sn_serve_model sm = {.name = "m", .in = {.ndim = 1, .dim = {3}},
                         .out = {.ndim = 1, .dim = {2}}, .in_numel = 3, .out_numel = 2};
    sn_serve_limits lim = {.max_depth = 8, .max_instances = 4};
    static const char *bodies[] = {"{\"instances\": [\"\x01\n\"]}", "{\"instances\": \xff}",
                                   "{\"instances\": [[1, 2, 3]], \"instances\": 1}",
                                   "{\"inst\x7f\": [[1,2,3]]}"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        float *x = NULL;
        int64_t rows = 0;
        sn_serve_format fmt;
        char err[512] = "";
        bool ok = sn_serve_parse_predict(bodies[i], strlen(bodies[i]), &sm, &lim, &x, &rows,
                                         &fmt, err, sizeof err);
        CHECK(!ok, "body %zu parsed", i);
        free(x);
        check_line("a :predict body", err, NULL);
    }
}

int main(void) {
    if (!test_tmpdir_make("sn_test_hostile")) return 1;
    test_idx_claims();
    test_tfrecord_claims();
    test_example_claims();
    test_foreign_messages();
    test_tmpdir_remove();
    return sn_test_finish("test_hostile_input");
}
