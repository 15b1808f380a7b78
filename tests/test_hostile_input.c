/* Hostile input: files whose headers declare more than they hold, dims whose product
 * overflows, lengths past the end, and the fuzzers' crashing inputs, each crafted here byte by
 * byte. Every reader must refuse them with a message naming the file, the declared size and
 * what the file can hold — before allocating what the header claims — and never crash.
 * (docs/reliability.md lists what each case shows.) */
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "sinter/data.h"
#include "sn_test.h"

static char dir[64];

static const char *tmp_path(const char *name) {
    static char buf[8][256];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

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
        const char *p = tmp_path(gz ? "claims_4g.idx.gz" : "claims_4g.idx");
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
    const char *p = tmp_path("short_by_one.idx");
    write_file(p, s, sizeof s, false);
    sn_tensor *t = NULL;
    CHECK_ERR(sn_idx_load(p, &t), SN_ERR_FORMAT, "need 12 bytes of data");
    /* ... and exactly enough loads. */
    uint8_t ok[4 + 8 + 12] = {0, 0, 0x08, 0x02};
    put_be32(ok + 4, 3);
    put_be32(ok + 8, 4);
    p = tmp_path("exact.idx");
    write_file(p, ok, sizeof ok, false);
    CHECK_OK(sn_idx_load(p, &t));
    sn_tensor_free(t);
    t = NULL;

    /* Dims whose product overflows int64 (the fuzzer's first finding: UBSan, signed
     * overflow): four dims of 2^32 - 1, i32 elements. */
    uint8_t o[4 + 16] = {0, 0, 0x0C, 0x04};
    for (int i = 0; i < 4; i++) put_be32(o + 4 + 4 * i, 0xFFFFFFFFu);
    p = tmp_path("overflow.idx");
    write_file(p, o, sizeof o, false);
    CHECK_ERR(sn_idx_load(p, &t), SN_ERR_FORMAT, "multiply past 2^40 elements");
    /* fuzz_idx's input: [2307, 3774340893, ...] u8 */
    static const uint8_t crash[] = {0x0, 0x0, 0x8, 0x3, 0x0, 0x0, 0x0, 0x89, 0xae, 0xd3, 0xf8,
                                    0x1d, 0x42, 0x67, 0x8c, 0xb1, 0xd6, 0xfb, 0x20, 0x31};
    p = tmp_path("fuzz_crash.idx");
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
        const char *p = tmp_path(gz ? "claims_2g.tfrecord.gz" : "claims_2g.tfrecord");
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
    const char *p = tmp_path("claims_1t.tfrecord");
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

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/sn_test_hostile_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_idx_claims();
    test_tfrecord_claims();
    test_example_claims();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return sn_test_finish("test_hostile_input");
}
