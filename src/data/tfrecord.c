/* TFRecord files, tf.train.Example protos, and a dataset of (image, label) Examples.
 *
 * A record is: uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes, the
 * data, uint32 masked CRC-32C of the data. Files go through zlib's gzFile so that
 * GZIP-compressed TFRecords (compression_type="GZIP") read with the same code.
 *
 * Example is parsed by hand (the wire format needs ~150 lines; no Debian protobuf-c package
 * fits without generated code):
 *   Example  { Features features = 1; }
 *   Features { map<string, Feature> feature = 1; }   (entries: key = 1, value = 2)
 *   Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2;
 *                      Int64List int64_list = 3; } }
 *   BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1 [packed]; }
 *   Int64List { repeated int64 value = 1 [packed]; } */
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
static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_le32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
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
    uint32_t want_crc = le32(hdr + 8), crc = sn_crc32c_masked(hdr, 8);
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
    want_crc = le32(r->buf + n);
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
    put_le32(hdr + 8, sn_crc32c_masked(hdr, 8));
    put_le32(tail, sn_crc32c_masked(data, len));
    if (!gz_write_all(w->f, hdr, 12) || !gz_write_all(w->f, data, len) ||
        !gz_write_all(w->f, tail, 4)) {
        int errnum = 0;
        const char *msg = gzerror(w->f, &errnum);
        return sn_errorf(SN_ERR_IO, "tfrecord: %s: writing record %lld failed: %s", w->path,
                         (long long)w->record, errnum == Z_ERRNO ? strerror(errno) : msg);
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
        return sn_errorf(SN_ERR_IO, "tfrecord: %s: flushing failed: %s", w->path,
                         errnum == Z_ERRNO ? strerror(errno) : msg);
    }
    return SN_OK;
}

sn_status sn_tfrecord_writer_close(sn_tfrecord_writer *w) {
    if (!w) return SN_OK;
    int rc = gzclose(w->f);
    sn_status s = SN_OK;
    if (rc != Z_OK)
        s = sn_errorf(SN_ERR_IO, "tfrecord: closing %s failed (zlib error %d)%s%s", w->path, rc,
                      rc == Z_ERRNO ? ": " : "", rc == Z_ERRNO ? strerror(errno) : "");
    free(w->path);
    free(w);
    return s;
}

/* ---- protobuf wire format -------------------------------------------------------------- */

typedef struct {
    const uint8_t *p, *end;
} pb;

static bool pb_varint(pb *b, uint64_t *v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 64 && b->p < b->end; shift += 7) {
        uint8_t c = *b->p++;
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Reads a length-delimited field's bounds into sub. */
static bool pb_bytes(pb *b, pb *sub) {
    uint64_t n;
    if (!pb_varint(b, &n) || n > (uint64_t)(b->end - b->p)) return false;
    sub->p = b->p;
    sub->end = b->p + n;
    b->p += n;
    return true;
}

static bool pb_skip(pb *b, unsigned wt) {
    uint64_t v;
    pb sub;
    switch (wt) {
    case 0: return pb_varint(b, &v);
    case 1: if (b->end - b->p < 8) return false; b->p += 8; return true;
    case 2: return pb_bytes(b, &sub);
    case 5: if (b->end - b->p < 4) return false; b->p += 4; return true;
    default: return false; /* groups (3, 4) are not used by Example */
    }
}

/* ---- Example --------------------------------------------------------------------------- */

typedef struct {
    size_t name_off, name_len;
    sn_feature_kind kind;
    int64_t count;
    size_t val_off; /* into floats, int64s or bytes_off/bytes_len */
} feat_rec;

struct sn_example {
    uint8_t *data; /* copy of the serialized proto: bytes values point into it */
    int64_t data_cap;
    char *names; /* NUL-terminated names, one after the other */
    int64_t names_len, names_cap;
    feat_rec *recs;
    sn_feature *feats;
    int nfeat;
    int64_t recs_cap, feats_cap;
    float *floats;
    int64_t *int64s;
    size_t *bytes_off, *bytes_len; /* offsets into data while parsing ... */
    const uint8_t **bytes;         /* ... pointers once it is done */
    int64_t nfloats, nint64s, nbytes;
    int64_t floats_cap, int64s_cap, off_cap, len_cap, ptr_cap;
};

sn_status sn_example_new(sn_example **out) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "sn_example_new: out is NULL");
    *out = sn_calloc(1, sizeof **out);
    return *out ? SN_OK : SN_ERR_NOMEM;
}

void sn_example_free(sn_example *ex) {
    if (!ex) return;
    free(ex->data);
    free(ex->names);
    free(ex->recs);
    free(ex->feats);
    free(ex->floats);
    free(ex->int64s);
    free(ex->bytes);
    free(ex->bytes_off);
    free(ex->bytes_len);
    free(ex);
}

/* Makes room for one more item in a growable array. */
static bool grow(void **arr, int64_t *cap, int64_t need, size_t size) {
    if (need <= *cap) return true;
    int64_t c = *cap ? *cap * 2 : 16;
    while (c < need) c *= 2;
    void *p = sn_realloc(*arr, (size_t)c * size);
    if (!p) return false;
    *arr = p;
    *cap = c;
    return true;
}

static sn_status bad_proto(const char *what) {
    return sn_errorf(SN_ERR_FORMAT, "example: malformed tf.train.Example: %s", what);
}

static sn_status parse_list(sn_example *ex, pb *b, unsigned list_field, feat_rec *fr) {
    /* Values of this list start at the current end of its pool. */
    fr->kind = list_field == 1 ? SN_FEATURE_BYTES : list_field == 2 ? SN_FEATURE_FLOAT
                                                                   : SN_FEATURE_INT64;
    fr->val_off = (size_t)(list_field == 1 ? ex->nbytes : list_field == 2 ? ex->nfloats
                                                                          : ex->nint64s);
    fr->count = 0;
    while (b->p < b->end) {
        uint64_t key;
        if (!pb_varint(b, &key)) return bad_proto("bad tag in a value list");
        unsigned field = (unsigned)(key >> 3), wt = (unsigned)(key & 7);
        if (field != 1) {
            if (!pb_skip(b, wt)) return bad_proto("bad unknown field in a value list");
            continue;
        }
        if (list_field == 1) {
            pb v;
            if (wt != 2 || !pb_bytes(b, &v)) return bad_proto("bad bytes value");
            if (!grow((void **)&ex->bytes_off, &ex->off_cap, ex->nbytes + 1, sizeof(size_t)) ||
                !grow((void **)&ex->bytes_len, &ex->len_cap, ex->nbytes + 1, sizeof(size_t)))
                return SN_ERR_NOMEM;
            ex->bytes_off[ex->nbytes] = (size_t)(v.p - ex->data);
            ex->bytes_len[ex->nbytes] = (size_t)(v.end - v.p);
            ex->nbytes++;
            fr->count++;
        } else if (list_field == 2) {
            pb v = *b;
            int64_t n;
            if (wt == 2) {
                if (!pb_bytes(b, &v) || (v.end - v.p) % 4) return bad_proto("bad packed floats");
                n = (v.end - v.p) / 4;
            } else if (wt == 5) {
                if (b->end - b->p < 4) return bad_proto("cut-short float");
                v.end = v.p + 4;
                b->p += 4;
                n = 1;
            } else {
                return bad_proto("float_list value with a wrong wire type");
            }
            if (!grow((void **)&ex->floats, &ex->floats_cap, ex->nfloats + n, sizeof(float)))
                return SN_ERR_NOMEM;
            for (int64_t i = 0; i < n; i++) { /* little-endian IEEE on the wire */
                uint32_t u = le32(v.p + 4 * i);
                memcpy(&ex->floats[ex->nfloats + i], &u, 4);
            }
            ex->nfloats += n;
            fr->count += n;
        } else {
            pb v = *b;
            bool packed = wt == 2;
            if (packed) {
                if (!pb_bytes(b, &v)) return bad_proto("bad packed int64s");
            } else if (wt != 0) {
                return bad_proto("int64_list value with a wrong wire type");
            }
            /* Unpacked: one varint. Packed: as many as the bytes hold, none when empty (an
             * empty repeated field is valid protobuf). */
            for (bool first = true; packed ? v.p < v.end : first; first = false) {
                uint64_t x;
                if (!pb_varint(packed ? &v : b, &x)) return bad_proto("bad int64 varint");
                if (!grow((void **)&ex->int64s, &ex->int64s_cap, ex->nint64s + 1, sizeof(int64_t)))
                    return SN_ERR_NOMEM;
                ex->int64s[ex->nint64s++] = (int64_t)x;
                fr->count++;
            }
        }
    }
    return SN_OK;
}

static sn_status parse_feature(sn_example *ex, pb *b, feat_rec *fr) {
    fr->kind = SN_FEATURE_NONE;
    fr->count = 0;
    fr->val_off = 0;
    while (b->p < b->end) {
        uint64_t key;
        if (!pb_varint(b, &key)) return bad_proto("bad tag in a Feature");
        unsigned field = (unsigned)(key >> 3), wt = (unsigned)(key & 7);
        if (field >= 1 && field <= 3 && wt == 2) {
            pb sub;
            if (!pb_bytes(b, &sub)) return bad_proto("cut-short value list");
            SN_TRY(parse_list(ex, &sub, field, fr)); /* oneof: the last one set wins */
        } else if (!pb_skip(b, wt)) {
            return bad_proto("bad unknown field in a Feature");
        }
    }
    return SN_OK;
}

static sn_status parse_entry(sn_example *ex, pb *b) {
    feat_rec fr = {0};
    bool have_name = false;
    while (b->p < b->end) {
        uint64_t key;
        if (!pb_varint(b, &key)) return bad_proto("bad tag in a feature map entry");
        unsigned field = (unsigned)(key >> 3), wt = (unsigned)(key & 7);
        pb sub;
        if (field == 1 && wt == 2) {
            if (!pb_bytes(b, &sub)) return bad_proto("cut-short feature name");
            size_t n = (size_t)(sub.end - sub.p);
            if (!grow((void **)&ex->names, &ex->names_cap, ex->names_len + (int64_t)n + 1, 1))
                return SN_ERR_NOMEM;
            memcpy(ex->names + ex->names_len, sub.p, n);
            ex->names[ex->names_len + n] = 0;
            fr.name_off = (size_t)ex->names_len;
            fr.name_len = n;
            ex->names_len += (int64_t)n + 1;
            have_name = true;
        } else if (field == 2 && wt == 2) {
            if (!pb_bytes(b, &sub)) return bad_proto("cut-short Feature");
            SN_TRY(parse_feature(ex, &sub, &fr));
        } else if (!pb_skip(b, wt)) {
            return bad_proto("bad unknown field in a feature map entry");
        }
    }
    if (!have_name) { /* proto3 maps allow an empty key: store "" */
        if (!grow((void **)&ex->names, &ex->names_cap, ex->names_len + 1, 1)) return SN_ERR_NOMEM;
        ex->names[ex->names_len] = 0;
        fr.name_off = (size_t)ex->names_len++;
    }
    if (ex->nfeat == INT32_MAX) return bad_proto("too many features");
    if (!grow((void **)&ex->recs, &ex->recs_cap, ex->nfeat + 1, sizeof *ex->recs))
        return SN_ERR_NOMEM;
    ex->recs[ex->nfeat++] = fr;
    return SN_OK;
}

sn_status sn_example_parse(sn_example *ex, const void *data, size_t len) {
    if (!ex || (!data && len)) return sn_errorf(SN_ERR_INVALID, "sn_example_parse: NULL argument");
    if (!grow((void **)&ex->data, &ex->data_cap, (int64_t)len + 1, 1)) return SN_ERR_NOMEM;
    if (len) memcpy(ex->data, data, len);
    ex->names_len = 0;
    ex->nfeat = 0;
    ex->nfloats = ex->nint64s = ex->nbytes = 0;
    pb b = {ex->data, ex->data + len};
    while (b.p < b.end) {
        uint64_t key;
        if (!pb_varint(&b, &key)) return bad_proto("bad tag in Example");
        unsigned field = (unsigned)(key >> 3), wt = (unsigned)(key & 7);
        pb feats;
        if (field == 1 && wt == 2) {
            if (!pb_bytes(&b, &feats)) return bad_proto("cut-short Features");
            while (feats.p < feats.end) {
                uint64_t k2;
                if (!pb_varint(&feats, &k2)) return bad_proto("bad tag in Features");
                pb entry;
                if ((k2 >> 3) == 1 && (k2 & 7) == 2) {
                    if (!pb_bytes(&feats, &entry)) return bad_proto("cut-short feature entry");
                    SN_TRY(parse_entry(ex, &entry));
                } else if (!pb_skip(&feats, (unsigned)(k2 & 7))) {
                    return bad_proto("bad unknown field in Features");
                }
            }
        } else if (!pb_skip(&b, wt)) {
            return bad_proto("bad unknown field in Example");
        }
    }
    /* The pools stopped moving: turn offsets into pointers. */
    if (!grow((void **)&ex->feats, &ex->feats_cap, ex->nfeat, sizeof *ex->feats) ||
        !grow((void **)&ex->bytes, &ex->ptr_cap, ex->nbytes, sizeof *ex->bytes))
        return SN_ERR_NOMEM;
    for (int64_t i = 0; i < ex->nbytes; i++) ex->bytes[i] = ex->data + ex->bytes_off[i];
    for (int i = 0; i < ex->nfeat; i++) {
        feat_rec *r = &ex->recs[i];
        sn_feature *o = &ex->feats[i];
        memset(o, 0, sizeof *o);
        o->name = ex->names + r->name_off;
        o->kind = r->kind;
        o->count = r->count;
        /* An empty list leaves its pointers NULL: its pool may never have been allocated, and
         * NULL + 0 is undefined behaviour in C (found by fuzz_example under UBSan). */
        if (r->count == 0) continue;
        if (r->kind == SN_FEATURE_FLOAT) o->floats = ex->floats + r->val_off;
        if (r->kind == SN_FEATURE_INT64) o->int64s = ex->int64s + r->val_off;
        if (r->kind == SN_FEATURE_BYTES) {
            o->bytes = ex->bytes + r->val_off;
            o->bytes_len = ex->bytes_len + r->val_off;
        }
    }
    return SN_OK;
}

int sn_example_num_features(const sn_example *ex) { return ex ? ex->nfeat : 0; }

const sn_feature *sn_example_feature(const sn_example *ex, int i) {
    return ex && i >= 0 && i < ex->nfeat ? &ex->feats[i] : NULL;
}

const sn_feature *sn_example_find(const sn_example *ex, const char *name) {
    if (!ex || !name) return NULL;
    for (int i = ex->nfeat - 1; i >= 0; i--) /* last wins, as protobuf map merging */
        if (strcmp(ex->feats[i].name, name) == 0) return &ex->feats[i];
    return NULL;
}

/* ---- Example encoding ------------------------------------------------------------------ */

typedef struct {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} wbuf;

static void wb_put(wbuf *w, const void *d, size_t n) {
    if (w->oom) return;
    if (w->n + n > w->cap) {
        size_t c = w->cap ? w->cap * 2 : 256;
        while (c < w->n + n) c *= 2;
        uint8_t *q = sn_realloc(w->p, c);
        if (!q) {
            w->oom = true;
            return;
        }
        w->p = q;
        w->cap = c;
    }
    if (n) memcpy(w->p + w->n, d, n);
    w->n += n;
}

static void wb_varint(wbuf *w, uint64_t v) {
    uint8_t b[10];
    int n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) b[n] |= 0x80;
        n++;
    } while (v);
    wb_put(w, b, (size_t)n);
}

static size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Size of the value list message (BytesList / FloatList / Int64List) of f. */
static size_t list_size(const sn_feature *f) {
    size_t s = 0;
    if (f->kind == SN_FEATURE_BYTES) {
        for (int64_t i = 0; i < f->count; i++)
            s += 1 + varint_size(f->bytes_len[i]) + f->bytes_len[i];
    } else if (f->kind == SN_FEATURE_FLOAT) {
        if (f->count) s = 1 + varint_size((uint64_t)f->count * 4) + (size_t)f->count * 4;
    } else if (f->kind == SN_FEATURE_INT64) {
        size_t p = 0;
        for (int64_t i = 0; i < f->count; i++) p += varint_size((uint64_t)f->int64s[i]);
        if (f->count) s = 1 + varint_size(p) + p;
    }
    return s;
}

static size_t feature_size(const sn_feature *f) {
    if (f->kind == SN_FEATURE_NONE) return 0;
    size_t l = list_size(f);
    return 1 + varint_size(l) + l;
}

static size_t entry_size(const sn_feature *f) {
    size_t nl = strlen(f->name), fs = feature_size(f);
    return 1 + varint_size(nl) + nl + 1 + varint_size(fs) + fs;
}

sn_status sn_example_encode(const sn_feature *features, int n, uint8_t **out, size_t *len) {
    if (!out || !len || (!features && n)) return sn_errorf(SN_ERR_INVALID, "sn_example_encode: NULL argument");
    *out = NULL;
    *len = 0;
    for (int i = 0; i < n; i++) {
        const sn_feature *f = &features[i];
        if (!f->name) return sn_errorf(SN_ERR_INVALID, "example_encode: feature %d has no name", i);
        if (f->count < 0 || (f->kind != SN_FEATURE_NONE && f->kind != SN_FEATURE_BYTES &&
                             f->kind != SN_FEATURE_FLOAT && f->kind != SN_FEATURE_INT64))
            return sn_errorf(SN_ERR_INVALID, "example_encode: feature \"%s\" has kind %d, count %lld",
                             f->name, (int)f->kind, (long long)f->count);
        bool ok = f->count == 0 || (f->kind == SN_FEATURE_BYTES ? f->bytes && f->bytes_len
                                    : f->kind == SN_FEATURE_FLOAT ? f->floats != NULL
                                    : f->kind == SN_FEATURE_INT64 ? f->int64s != NULL : true);
        if (!ok)
            return sn_errorf(SN_ERR_INVALID, "example_encode: feature \"%s\" has %lld values but "
                             "a NULL value pointer", f->name, (long long)f->count);
    }
    size_t total = 0;
    for (int i = 0; i < n; i++) total += 1 + varint_size(entry_size(&features[i])) + entry_size(&features[i]);
    wbuf w = {0};
    if (n) {
        wb_varint(&w, 1 << 3 | 2); /* Example.features */
        wb_varint(&w, total);
    }
    for (int i = 0; i < n; i++) {
        const sn_feature *f = &features[i];
        size_t nl = strlen(f->name);
        wb_varint(&w, 1 << 3 | 2); /* Features.feature (a map entry) */
        wb_varint(&w, entry_size(f));
        wb_varint(&w, 1 << 3 | 2); /* key */
        wb_varint(&w, nl);
        wb_put(&w, f->name, nl);
        wb_varint(&w, 2 << 3 | 2); /* value: Feature */
        wb_varint(&w, feature_size(f));
        if (f->kind == SN_FEATURE_NONE) continue;
        wb_varint(&w, (uint64_t)f->kind << 3 | 2); /* bytes_list = 1, float_list 2, int64 3 */
        wb_varint(&w, list_size(f));
        if (f->kind == SN_FEATURE_BYTES) {
            for (int64_t j = 0; j < f->count; j++) {
                wb_varint(&w, 1 << 3 | 2);
                wb_varint(&w, f->bytes_len[j]);
                wb_put(&w, f->bytes[j], f->bytes_len[j]);
            }
        } else if (f->count) {
            wb_varint(&w, 1 << 3 | 2); /* packed */
            if (f->kind == SN_FEATURE_FLOAT) {
                wb_varint(&w, (uint64_t)f->count * 4);
                for (int64_t j = 0; j < f->count; j++) {
                    uint32_t u;
                    unsigned char b[4];
                    memcpy(&u, &f->floats[j], 4);
                    put_le32(b, u);
                    wb_put(&w, b, 4);
                }
            } else {
                size_t p = 0;
                for (int64_t j = 0; j < f->count; j++) p += varint_size((uint64_t)f->int64s[j]);
                wb_varint(&w, p);
                for (int64_t j = 0; j < f->count; j++) wb_varint(&w, (uint64_t)f->int64s[j]);
            }
        }
    }
    if (w.oom) {
        free(w.p);
        return SN_ERR_NOMEM;
    }
    if (!w.p) { /* an empty Example is zero bytes; still hand back a buffer to free */
        w.p = sn_malloc(1);
        if (!w.p) return SN_ERR_NOMEM;
    }
    *out = w.p;
    *len = w.n;
    return SN_OK;
}

/* ---- dataset of (image, label) Examples ------------------------------------------------ */

sn_tfrecord_image_spec sn_tfrecord_image_spec_defaults(void) {
    sn_tfrecord_image_spec s = {.image_key = "image", .label_key = "label"};
    s.image_shape.ndim = 2;
    s.image_shape.dim[0] = 28;
    s.image_shape.dim[1] = 28;
    return s;
}

typedef struct {
    sn_dataset base;
    char **paths;
    int n_paths, file;
    char *image_key, *label_key;
    sn_shape shape;
    sn_tfrecord_reader *rd;
    sn_example *ex;
    sn_tensor *img, *lbl;
    sn_feature_kind kind; /* the image feature's kind in the first record (NONE before it) */
} ds_tfrec;

static sn_status tfrec_next(sn_dataset *d, sn_tensor **out, bool *end) {
    ds_tfrec *ds = (ds_tfrec *)d;
    for (;;) {
        if (!ds->rd) {
            if (ds->file >= ds->n_paths) {
                *end = true;
                return SN_OK;
            }
            SN_TRY(sn_tfrecord_open(&ds->rd, ds->paths[ds->file]));
        }
        const uint8_t *rec;
        size_t len;
        bool e;
        SN_TRY(sn_tfrecord_read(ds->rd, &rec, &len, &e));
        if (e) {
            sn_tfrecord_close(ds->rd);
            ds->rd = NULL;
            ds->file++;
            continue;
        }
        const char *path = ds->paths[ds->file];
        long long recno = (long long)ds->rd->record - 1;
        sn_status s = sn_example_parse(ds->ex, rec, len);
        if (s != SN_OK) return sn_error_context(s, "tfrecord: %s: record %lld", path, recno);
        const sn_feature *fi = sn_example_find(ds->ex, ds->image_key);
        const sn_feature *fl = sn_example_find(ds->ex, ds->label_key);
        int64_t numel = sn_shape_numel(&ds->shape);
        char b[128];
        sn_shape_str(&ds->shape, b, sizeof b);
        if (!fi || (fi->kind != SN_FEATURE_BYTES && fi->kind != SN_FEATURE_FLOAT))
            return sn_errorf(SN_ERR_FORMAT,
                             "tfrecord: %s: record %lld: feature \"%s\" should be one bytes value "
                             "of %lld raw u8 pixels or a float list of %lld values (shape %s); "
                             "found %s",
                             path, recno, ds->image_key, (long long)numel, (long long)numel, b,
                             !fi ? "no such feature"
                             : fi->kind == SN_FEATURE_INT64 ? "an int64 list" : "an empty Feature");
        if (fi->kind == SN_FEATURE_BYTES &&
            (fi->count != 1 || (int64_t)fi->bytes_len[0] != numel))
            return sn_errorf(SN_ERR_FORMAT,
                             "tfrecord: %s: record %lld: feature \"%s\" should be one bytes value "
                             "of %lld raw u8 pixels (shape %s); found %lld values%s%lld bytes",
                             path, recno, ds->image_key, (long long)numel, b,
                             (long long)fi->count, fi->count == 1 ? " of " : ", the first of ",
                             fi->count ? (long long)fi->bytes_len[0] : 0LL);
        if (fi->kind == SN_FEATURE_FLOAT && fi->count != numel)
            return sn_errorf(SN_ERR_FORMAT,
                             "tfrecord: %s: record %lld: feature \"%s\" has %lld floats; shape %s "
                             "needs %lld",
                             path, recno, ds->image_key, (long long)fi->count, b, (long long)numel);
        if (ds->kind != SN_FEATURE_NONE && fi->kind != ds->kind)
            return sn_errorf(SN_ERR_FORMAT,
                             "tfrecord: %s: record %lld: feature \"%s\" is a %s list but it was a "
                             "%s list in the first record; every record needs the same kind",
                             path, recno, ds->image_key,
                             fi->kind == SN_FEATURE_BYTES ? "bytes" : "float",
                             ds->kind == SN_FEATURE_BYTES ? "bytes" : "float");
        ds->kind = fi->kind;
        if (!fl || fl->kind != SN_FEATURE_INT64 || fl->count != 1)
            return sn_errorf(SN_ERR_FORMAT,
                             "tfrecord: %s: record %lld: feature \"%s\" should be one int64 "
                             "label; found %s",
                             path, recno, ds->label_key,
                             !fl ? "no such feature"
                             : fl->kind != SN_FEATURE_INT64 ? "another kind of list"
                                                            : "a count other than 1");
        if (fl->int64s[0] < INT32_MIN || fl->int64s[0] > INT32_MAX)
            return sn_errorf(SN_ERR_FORMAT, "tfrecord: %s: record %lld: label %lld does not fit in int32",
                             path, recno, (long long)fl->int64s[0]);
        sn_shape scalar = {.ndim = 0};
        SN_TRY(sn_dataset_ensure_output(&ds->img, fi->kind == SN_FEATURE_BYTES ? SN_U8 : SN_F32,
                                        &ds->shape));
        SN_TRY(sn_dataset_ensure_output(&ds->lbl, SN_I32, &scalar));
        if (fi->kind == SN_FEATURE_BYTES) memcpy(ds->img->data, fi->bytes[0], (size_t)numel);
        else memcpy(ds->img->data, fi->floats, (size_t)numel * sizeof(float));
        *(int32_t *)ds->lbl->data = (int32_t)fl->int64s[0];
        out[0] = ds->img;
        out[1] = ds->lbl;
        return SN_OK;
    }
}

static sn_status tfrec_reset(sn_dataset *d) {
    ds_tfrec *ds = (ds_tfrec *)d;
    sn_tfrecord_close(ds->rd);
    ds->rd = NULL;
    ds->file = 0;
    ds->kind = SN_FEATURE_NONE;
    return SN_OK;
}

static int64_t tfrec_card(const sn_dataset *d) { return SN_CARDINALITY_UNKNOWN; }

static void tfrec_destroy(sn_dataset *d) {
    ds_tfrec *ds = (ds_tfrec *)d;
    sn_tfrecord_close(ds->rd);
    sn_example_free(ds->ex);
    sn_tensor_free(ds->img);
    sn_tensor_free(ds->lbl);
    for (int i = 0; i < ds->n_paths; i++) free(ds->paths ? ds->paths[i] : NULL);
    free(ds->paths);
    free(ds->image_key);
    free(ds->label_key);
}

static const sn_dataset_ops tfrec_ops = {.name = "tfrecord_images",
                                         .next = tfrec_next,
                                         .reset = tfrec_reset,
                                         .cardinality = tfrec_card,
                                         .destroy = tfrec_destroy};

sn_status sn_dataset_from_tfrecord_images(sn_dataset **out, const char *const *paths,
                                          int n_paths, const sn_tfrecord_image_spec *spec) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "from_tfrecord_images: out is NULL");
    *out = NULL;
    if (!paths || n_paths < 1)
        return sn_errorf(SN_ERR_INVALID, "from_tfrecord_images: no files (n_paths %d)", n_paths);
    sn_tfrecord_image_spec sp = spec ? *spec : sn_tfrecord_image_spec_defaults();
    if (!sp.image_key || !sp.label_key)
        return sn_errorf(SN_ERR_INVALID, "from_tfrecord_images: image_key or label_key is NULL");
    if (sp.image_shape.ndim < 1 || sp.image_shape.ndim > SN_MAX_DIMS - 1 ||
        sn_shape_numel(&sp.image_shape) < 1)
        return sn_errorf(SN_ERR_SHAPE, "from_tfrecord_images: image_shape needs 1 to %d positive dims",
                         SN_MAX_DIMS - 1);
    for (int i = 0; i < sp.image_shape.ndim; i++)
        if (sp.image_shape.dim[i] < 1)
            return sn_errorf(SN_ERR_SHAPE, "from_tfrecord_images: image_shape dim %d is %lld", i,
                             (long long)sp.image_shape.dim[i]);
    ds_tfrec *ds = (ds_tfrec *)sn_dataset_alloc(sizeof *ds, &tfrec_ops, NULL, 2);
    if (!ds) return SN_ERR_NOMEM;
    ds->shape = sp.image_shape;
    ds->paths = sn_calloc((size_t)n_paths, sizeof *ds->paths);
    bool ok = ds->paths != NULL;
    if (ok) ds->n_paths = n_paths;
    for (int i = 0; ok && i < n_paths; i++) {
        if (!paths[i]) {
            sn_dataset_free(&ds->base);
            return sn_errorf(SN_ERR_INVALID, "from_tfrecord_images: path %d is NULL", i);
        }
        ok = (ds->paths[i] = sn_strdup(paths[i])) != NULL;
    }
    if (ok) ok = (ds->image_key = sn_strdup(sp.image_key)) && (ds->label_key = sn_strdup(sp.label_key));
    if (ok) ok = sn_example_new(&ds->ex) == SN_OK;
    if (!ok) {
        sn_dataset_free(&ds->base);
        return SN_ERR_NOMEM;
    }
    *out = &ds->base;
    return SN_OK;
}
