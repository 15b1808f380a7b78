/* tf.train.Example: parsing and encoding the protobuf by hand (the wire format needs ~150
 * lines; no Debian protobuf-c package fits without generated code):
 *   Example  { Features features = 1; }
 *   Features { map<string, Feature> feature = 1; }   (entries: key = 1, value = 2)
 *   Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2;
 *                      Int64List int64_list = 3; } }
 *   BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1 [packed]; }
 *   Int64List { repeated int64 value = 1 [packed]; } */
#include <string.h>

#include "data/data_impl.h"

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
                uint32_t u = sn_load_le32(v.p + 4 * i);
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
                    sn_store_le32(b, u);
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
