/* TFRecord files: record framing and its CRC-32C (reader and writer). The Example protobuf
 * is tf_example.c, the dataset of (image, label) Examples tfrecord_dataset.c.
 *
 * A record is: uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes, the
 * data, uint32 masked CRC-32C of the data. Files go through zlib's gzFile so that
 * GZIP-compressed TFRecords (compression_type="GZIP") read with the same code. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <zlib.h>

#include "data/data_impl.h"

/* ---- CRC-32C --------------------------------------------------------------------------- */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1; /* reflected */
        crc_table[0][i] = c;
    }
    /* Slicing-by-8 tables: 8 bytes per step instead of 1. */
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

uint32_t sn_crc32c(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = data;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
            crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return ~c;
}

uint32_t sn_crc32c_masked(const void *data, size_t n) {
    uint32_t c = sn_crc32c(0, data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static void put_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* ---- reader ---------------------------------------------------------------------------- */

#define TFRECORD_MAX_LEN ((uint64_t)1 << 31) /* a record past 2 GiB means a corrupt length */

struct sn_tfrecord_reader {
    gzFile f;
    char *path;
    int64_t record; /* index of the next record */
    uint8_t *buf;
    size_t cap;
};

sn_status sn_tfrecord_open(sn_tfrecord_reader **out, const char *path) {
    if (!out || !path) return sn_errorf(SN_ERR_INVALID, "sn_tfrecord_open: NULL argument");
    *out = NULL;
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return sn_errorf(SN_ERR_IO, "tfrecord: cannot open %s: %s", path,
                         errno ? strerror(errno) : "zlib could not allocate its state");
    sn_tfrecord_reader *r = sn_calloc(1, sizeof *r);
    if (r) r->path = sn_strdup(path);
    if (!r || !r->path) {
        gzclose(f);
        free(r);
        return sn_errorf(SN_ERR_NOMEM, "tfrecord: out of memory opening %s", path);
    }
    r->f = f;
    *out = r;
    return SN_OK;
}

/* Reads exactly n bytes; returns the count read (less at end of file), -1 on a zlib error. */
static int64_t gz_read_n(gzFile f, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        size_t want = n - got > (1u << 30) ? (1u << 30) : n - got;
        int r = gzread(f, (unsigned char *)buf + got, (unsigned)want);
        if (r < 0) {
            int errnum = 0;
            gzerror(f, &errnum);
            return errnum == Z_BUF_ERROR ? (int64_t)got : -1; /* cut-short gzip: truncated */
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    return (int64_t)got;
}

static sn_status reader_zerr(sn_tfrecord_reader *r) {
    int errnum = 0;
    const char *msg = gzerror(r->f, &errnum);
    return sn_errorf(SN_ERR_IO, "tfrecord: %s: record %lld: read failed: %s", r->path,
                     (long long)r->record, errnum == Z_ERRNO ? strerror(errno) : msg);
}

sn_status sn_tfrecord_read(sn_tfrecord_reader *r, const uint8_t **data, size_t *len,
                           bool *end) {
    if (!r || !data || !len || !end)
        return sn_errorf(SN_ERR_INVALID, "sn_tfrecord_read: NULL argument");
    *end = false;
    unsigned char hdr[12];
    int64_t got = gz_read_n(r->f, hdr, 12);
    if (got < 0) return reader_zerr(r);
    if (got == 0) {
        *end = true;
        return SN_OK;
    }
    if (got < 12)
        return sn_errorf(SN_ERR_FORMAT,
                         "tfrecord: %s: record %lld is truncated: expected a 12-byte header, "
                         "found %lld bytes",
                         r->path, (long long)r->record, (long long)got);
    uint32_t want_crc = sn_load_le32(hdr + 8), crc = sn_crc32c_masked(hdr, 8);
    if (crc != want_crc)
        return sn_errorf(SN_ERR_FORMAT,
                         "tfrecord: %s: record %lld: corrupt length (CRC-32C of the length is "
                         "0x%08x, the file says 0x%08x)",
                         r->path, (long long)r->record, crc, want_crc);
    uint64_t n = le64(hdr);
    if (n > TFRECORD_MAX_LEN)
        return sn_errorf(SN_ERR_FORMAT, "tfrecord: %s: record %lld: length %llu is too large",
                         r->path, (long long)r->record, (unsigned long long)n);
    /* The buffer grows with the bytes that actually arrive (at most doubling), never to the
     * declared length at once: a 12-byte file that claims 2 GiB fails as truncated having
     * allocated a few KB, plain or gzip alike. */
    size_t need = (size_t)n + 4, have = 0;
    while (have < need) {
        size_t step = need - have;
        if (have + step > r->cap) {
            size_t c = r->cap < 65536 ? 65536 : r->cap * 2;
            if (c > need) c = need;
            uint8_t *b = sn_realloc(r->buf, c);
            if (!b) return SN_ERR_NOMEM;
            r->buf = b;
            r->cap = c;
            step = c - have;
        }
        got = gz_read_n(r->f, r->buf + have, step);
        if (got < 0) return reader_zerr(r);
        have += (size_t)got;
        if ((size_t)got < step) break; /* end of file */
    }
    if (have < need)
        return sn_errorf(SN_ERR_FORMAT,
                         "tfrecord: %s: record %lld is truncated: expected %llu bytes of data "
                         "and 4 of CRC, found %lld",
                         r->path, (long long)r->record, (unsigned long long)n, (long long)have);
    want_crc = sn_load_le32(r->buf + n);
    crc = sn_crc32c_masked(r->buf, (size_t)n);
    if (crc != want_crc)
        return sn_errorf(SN_ERR_FORMAT,
                         "tfrecord: %s: record %lld: corrupt data (CRC-32C of its %llu bytes is "
                         "0x%08x, the file says 0x%08x)",
                         r->path, (long long)r->record, (unsigned long long)n, crc, want_crc);
    r->record++;
    *data = r->buf;
    *len = (size_t)n;
    return SN_OK;
}

int64_t sn_tfrecord_records_read(const sn_tfrecord_reader *r) { return r->record; }

void sn_tfrecord_close(sn_tfrecord_reader *r) {
    if (!r) return;
    gzclose(r->f);
    free(r->path);
    free(r->buf);
    free(r);
}

/* ---- writer ---------------------------------------------------------------------------- */

struct sn_tfrecord_writer {
    gzFile f;
    char *path;
    int64_t record;
};

sn_status sn_tfrecord_writer_open(sn_tfrecord_writer **out, const char *path, bool gzip) {
    if (!out || !path) return sn_errorf(SN_ERR_INVALID, "sn_tfrecord_writer_open: NULL argument");
    *out = NULL;
    errno = 0;
    gzFile f = gzopen(path, gzip ? "wb6" : "wbT"); /* T: plain bytes, no gzip wrapper */
    if (!f)
        return sn_errorf(SN_ERR_IO, "tfrecord: cannot create %s: %s", path,
                         errno ? strerror(errno) : "zlib could not allocate its state");
    sn_tfrecord_writer *w = sn_calloc(1, sizeof *w);
    if (w) w->path = sn_strdup(path);
    if (!w || !w->path) {
        gzclose(f);
        free(w);
        return sn_errorf(SN_ERR_NOMEM, "tfrecord: out of memory creating %s", path);
    }
    w->f = f;
    *out = w;
    return SN_OK;
}

static bool gz_write_all(gzFile f, const void *p, size_t n) {
    const unsigned char *b = p;
    while (n) {
        unsigned chunk = n > (1u << 30) ? (1u << 30) : (unsigned)n;
        if (gzwrite(f, b, chunk) != (int)chunk) return false;
        b += chunk;
        n -= chunk;
    }
    return true;
}

sn_status sn_tfrecord_write(sn_tfrecord_writer *w, const void *data, size_t len) {
    if (!w || (!data && len)) return sn_errorf(SN_ERR_INVALID, "sn_tfrecord_write: NULL argument");
    unsigned char hdr[12], tail[4];
    put_le64(hdr, len);
    sn_store_le32(hdr + 8, sn_crc32c_masked(hdr, 8));
    sn_store_le32(tail, sn_crc32c_masked(data, len));
    if (!gz_write_all(w->f, hdr, 12) || !gz_write_all(w->f, data, len) ||
        !gz_write_all(w->f, tail, 4)) {
        int errnum = 0;
        const char *msg = gzerror(w->f, &errnum);
        return sn_errorf(SN_ERR_IO, "cannot write '%s': %s (record %lld)", w->path,
                         errnum == Z_ERRNO ? strerror(errno) : msg, (long long)w->record);
    }
    w->record++;
    return SN_OK;
}

sn_status sn_tfrecord_writer_flush(sn_tfrecord_writer *w) {
    if (!w) return sn_errorf(SN_ERR_INVALID, "sn_tfrecord_writer_flush: NULL writer");
    int rc = gzflush(w->f, Z_SYNC_FLUSH);
    if (rc != Z_OK) {
        int errnum = 0;
        const char *msg = gzerror(w->f, &errnum);
        return sn_errorf(SN_ERR_IO, "cannot write '%s': %s", w->path,
                         errnum == Z_ERRNO ? strerror(errno) : msg);
    }
    return SN_OK;
}

sn_status sn_tfrecord_writer_close(sn_tfrecord_writer *w) {
    if (!w) return SN_OK;
    int rc = gzclose(w->f);
    sn_status s = SN_OK;
    /* gzclose writes what zlib still buffers: its failure is a failed write. */
    if (rc == Z_ERRNO)
        s = sn_errorf(SN_ERR_IO, "cannot write '%s': %s", w->path, strerror(errno));
    else if (rc != Z_OK)
        s = sn_errorf(SN_ERR_IO, "cannot write '%s': zlib error %d on close", w->path, rc);
    free(w->path);
    free(w);
    return s;
}
