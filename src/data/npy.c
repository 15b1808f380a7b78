/* NumPy .npy files and .npz archives (read side).
 *
 * .npy (numpy/lib/format.py): "\x93NUMPY", major, minor, header length (uint16 LE for 1.0,
 * uint32 LE for 2.0 and 3.0), then a Python dict literal
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
 * padded with spaces and a newline, then the elements in C order. The header is parsed by
 * hand: it is a small documented subset of Python literals (strings, True/False, tuples of
 * ints) that no Debian C library reads; docs/dependencies.md says so. Everything is checked
 * before memory is allocated: the header's size, the dtype, the shape's product (overflow)
 * and that the data the shape needs is exactly what the file holds.
 * .npz is a zip of .npy members (np.savez stores them, np.savez_compressed deflates them),
 * read through libzip. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <zip.h>

#include "data/data_impl.h"

#define NPY_MAX_HEADER (1u << 20) /* numpy itself refuses headers past 10,000 bytes by default */
#define NPY_MAX_ELEMENTS ((int64_t)1 << 40)
#define NPY_CHUNK ((size_t)1 << 20)

/* A byte stream: a plain file or a zip member. read() sets *got < n only at the end. */
typedef struct npy_src {
    const char *name; /* for messages: "x.npy" or "d.npz: array 'x' (member x.npy)" */
    uint64_t total;   /* bytes in the stream */
    sn_status (*read)(struct npy_src *s, void *buf, size_t n, size_t *got);
    void *ctx;
} npy_src;

typedef struct npy_header {
    char kind;     /* 'b', 'i', 'u', 'f' */
    int itemsize;  /* bytes */
    bool swap;     /* big-endian on disk */
    sn_dtype out;  /* the tensor's dtype */
    sn_shape shape;
    int64_t numel;
    uint64_t data_bytes;
} npy_header;

/* ---- the header dict ------------------------------------------------------------------- */

typedef struct {
    const char *p, *end;
} lex;

static void skip_ws(lex *l) {
    while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r'))
        l->p++;
}

static bool eat(lex *l, char c) {
    skip_ws(l);
    if (l->p < l->end && *l->p == c) {
        l->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes (numpy's keys and descr never have any). */
static bool lex_string(lex *l, char *out, size_t cap) {
    skip_ws(l);
    if (l->p >= l->end || (*l->p != '\'' && *l->p != '"')) return false;
    char q = *l->p++;
    size_t n = 0;
    while (l->p < l->end && *l->p != q) {
        if (*l->p == '\\' || n + 1 >= cap) return false;
        out[n++] = *l->p++;
    }
    if (l->p >= l->end) return false;
    l->p++;
    out[n] = 0;
    return true;
}

static bool lex_word(lex *l, const char *w) {
    skip_ws(l);
    size_t n = strlen(w);
    if ((size_t)(l->end - l->p) < n || memcmp(l->p, w, n) != 0) return false;
    l->p += n;
    return true;
}

static sn_status bad_header(const npy_src *s, const char *what) {
    return sn_errorf(SN_ERR_FORMAT, "npy: %s: bad header: %s", s->name, what);
}

static sn_status parse_shape(lex *l, const npy_src *s, sn_shape *shape) {
    if (!eat(l, '(')) return bad_header(s, "'shape' is not a tuple");
    shape->ndim = 0;
    for (;;) {
        skip_ws(l);
        if (eat(l, ')')) break;
        if (l->p >= l->end || *l->p < '0' || *l->p > '9')
            return bad_header(s, "'shape' holds something other than non-negative integers");
        int64_t v = 0;
        while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
            if (v > (INT64_MAX - 9) / 10) return bad_header(s, "a dimension of 'shape' overflows");
            v = v * 10 + (*l->p++ - '0');
        }
        if (l->p < l->end && *l->p == 'L') l->p++; /* Python 2 wrote long ints as 3L */
        if (shape->ndim == SN_MAX_DIMS)
            return sn_errorf(SN_ERR_UNSUPPORTED, "npy: %s: 'shape' has more than %d dimensions",
                             s->name, SN_MAX_DIMS);
        shape->dim[shape->ndim++] = v;
        if (eat(l, ')')) break;
        if (!eat(l, ',')) return bad_header(s, "'shape' is not a tuple of integers");
    }
    return SN_OK;
}

static const char *const supported_dtypes =
    "|b1, |u1, |i1, <i2, <u2, <i4, <u4, <i8, <u8, <f2, <f4, <f8 (or big-endian '>')";

static sn_status parse_descr(const char *d, const npy_src *s, npy_header *h) {
    char order = d[0];
    char kind = order ? d[1] : 0;
    int size = 0;
    const char *q = order && kind ? d + 2 : d;
    bool digits = *q != 0;
    for (; *q; q++) {
        if (*q < '0' || *q > '9' || size > 100) {
            digits = false;
            break;
        }
        size = size * 10 + (*q - '0');
    }
    bool ok = digits && (order == '<' || order == '>' || order == '|' || order == '=');
    ok = ok && ((kind == 'b' && size == 1) || ((kind == 'i' || kind == 'u') &&
                (size == 1 || size == 2 || size == 4 || size == 8)) ||
                (kind == 'f' && (size == 2 || size == 4 || size == 8)));
    if (ok && order == '|' && size != 1) ok = false; /* "not applicable" only fits one byte */
    if (!ok)
        return sn_errorf(SN_ERR_UNSUPPORTED,
                         "npy: %s: dtype '%s' is not supported; supported: %s (int64 and uint32 "
                         "values must fit in int32)",
                         s->name, d, supported_dtypes);
    h->kind = kind;
    h->itemsize = size;
    h->swap = order == '>' && size > 1;
    if (kind == 'b' || (kind == 'u' && size == 1)) h->out = SN_U8;
    else if (kind == 'f') h->out = size == 8 ? SN_F64 : SN_F32;
    else h->out = SN_I32;
    return SN_OK;
}

/* Reads and checks the header; on success the stream stands at the first data byte. */
static sn_status read_header(npy_src *s, npy_header *h) {
    unsigned char pre[12];
    size_t got = 0;
    SN_TRY(s->read(s, pre, 10, &got));
    if (got < 10 || memcmp(pre, "\x93NUMPY", 6) != 0)
        return sn_errorf(SN_ERR_FORMAT,
                         "npy: %s is not a NumPy .npy file: %s", s->name,
                         got < 10 ? "shorter than the 10-byte preamble" : "no \\x93NUMPY magic");
    unsigned major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0)
        return sn_errorf(SN_ERR_UNSUPPORTED,
                         "npy: %s: format version %u.%u is not one this reader knows (1.0, 2.0, "
                         "3.0)",
                         s->name, major, minor);
    size_t pre_len = major == 1 ? 10 : 12;
    uint32_t hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
    if (major > 1) {
        SN_TRY(s->read(s, pre + 10, 2, &got));
        if (got < 2) return sn_errorf(SN_ERR_FORMAT, "npy: %s is truncated in its preamble", s->name);
        hlen |= (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
    }
    if (hlen > NPY_MAX_HEADER)
        return sn_errorf(SN_ERR_FORMAT, "npy: %s: header length %u is past the %u bytes this "
                                        "reader accepts",
                         s->name, (unsigned)hlen, NPY_MAX_HEADER);
    if (pre_len + hlen > s->total)
        return sn_errorf(SN_ERR_FORMAT, "npy: %s is truncated: its header says %u bytes, the "
                                        "file has %llu after the preamble",
                         s->name, (unsigned)hlen, (unsigned long long)(s->total - pre_len));
    char *text = sn_malloc(hlen + 1);
    if (!text) return SN_ERR_NOMEM;
    sn_status st = s->read(s, text, hlen, &got);
    if (st == SN_OK && got < hlen)
        st = sn_errorf(SN_ERR_FORMAT, "npy: %s is truncated in its header", s->name);
    if (st != SN_OK) {
        free(text);
        return st;
    }
    text[hlen] = 0;
    lex l = {text, text + hlen};
    char key[32], descr[32] = {0};
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    if (!eat(&l, '{')) st = bad_header(s, "it does not start with '{'");
    while (st == SN_OK) {
        if (eat(&l, '}')) break;
        if (!lex_string(&l, key, sizeof key) || !eat(&l, ':')) {
            st = bad_header(s, "expected a quoted key and ':'");
            break;
        }
        bool *seen = !strcmp(key, "descr") ? &have_descr : !strcmp(key, "fortran_order") ? &have_order
                     : !strcmp(key, "shape") ? &have_shape : NULL;
        if (!seen) {
            st = sn_errorf(SN_ERR_FORMAT, "npy: %s: bad header: unknown key '%s' (expected "
                                          "'descr', 'fortran_order', 'shape')",
                           s->name, key);
            break;
        }
        if (*seen) {
            st = sn_errorf(SN_ERR_FORMAT, "npy: %s: bad header: key '%s' appears twice", s->name, key);
            break;
        }
        *seen = true;
        if (seen == &have_descr) {
            if (!lex_string(&l, descr, sizeof descr))
                st = sn_errorf(SN_ERR_UNSUPPORTED, "npy: %s: 'descr' is not a simple dtype "
                                                   "string (structured arrays are not supported; "
                                                   "supported: %s)",
                               s->name, supported_dtypes);
        } else if (seen == &have_order) {
            if (lex_word(&l, "True")) fortran = true;
            else if (!lex_word(&l, "False")) st = bad_header(s, "'fortran_order' is not True or False");
        } else {
            st = parse_shape(&l, s, &h->shape);
        }
        if (st == SN_OK && !eat(&l, ',')) {
            if (!eat(&l, '}')) st = bad_header(s, "expected ',' or '}' after a value");
            break;
        }
    }
    if (st == SN_OK) {
        skip_ws(&l);
        if (l.p != l.end) st = bad_header(s, "text after the closing '}'");
    }
    free(text);
    SN_TRY(st);
    if (!have_descr || !have_order || !have_shape)
        return sn_errorf(SN_ERR_FORMAT, "npy: %s: bad header: key '%s' is missing", s->name,
                         !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    if (fortran)
        return sn_errorf(SN_ERR_UNSUPPORTED, "npy: %s: fortran_order is True; only C-order arrays "
                                             "are read (save np.ascontiguousarray(a))",
                         s->name);
    SN_TRY(parse_descr(descr, s, h));
    h->numel = 1;
    for (int i = 0; i < h->shape.ndim; i++) {
        int64_t d = h->shape.dim[i];
        if (d != 0 && h->numel > NPY_MAX_ELEMENTS / d)
            return sn_errorf(SN_ERR_FORMAT, "npy: %s: the shape's dimensions multiply past 2^40 "
                                            "elements",
                             s->name);
        h->numel *= d;
    }
    char b[128];
    if (h->numel == 0)
        return sn_errorf(SN_ERR_FORMAT, "npy: %s: shape %s holds no elements", s->name,
                         sn_shape_str(&h->shape, b, sizeof b));
    h->data_bytes = (uint64_t)h->numel * (uint64_t)h->itemsize;
    uint64_t have = s->total - pre_len - hlen;
    if (have != h->data_bytes)
        return sn_errorf(SN_ERR_FORMAT,
                         "npy: %s %s: shape %s of '%s' needs %llu bytes of data, the file has "
                         "%llu after its header",
                         s->name, have < h->data_bytes ? "is truncated" : "has extra bytes",
                         sn_shape_str(&h->shape, b, sizeof b), descr,
                         (unsigned long long)h->data_bytes, (unsigned long long)have);
    return SN_OK;
}

/* ---- the data -------------------------------------------------------------------------- */

static uint64_t load_uint(const unsigned char *p, int size, bool swap) {
    uint64_t v = 0;
    for (int i = 0; i < size; i++) v |= (uint64_t)p[swap ? size - 1 - i : i] << (8 * i);
    return v;
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = h >> 10 & 0x1F, man = h & 0x3FF, u;
    if (exp == 0x1F) {
        u = sign | 0x7F800000u | man << 13; /* inf, NaN */
    } else if (exp == 0) {
        float f = (float)man * (1.0f / 16777216.0f); /* subnormal: man * 2^-24 */
        return sign ? -f : f;
    } else {
        u = sign | (exp + 112) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Converts n raw elements starting at element `first` into dst. */
static sn_status convert(const npy_header *h, const npy_src *s, const unsigned char *raw,
                         int64_t n, int64_t first, void *dst) {
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *p = raw + i * h->itemsize;
        uint64_t u = load_uint(p, h->itemsize, h->swap);
        switch (h->out) {
        case SN_U8: ((uint8_t *)dst)[i] = h->kind == 'b' ? (u != 0) : (uint8_t)u; break;
        case SN_F32:
            if (h->itemsize == 2) ((float *)dst)[i] = half_to_float((uint16_t)u);
            else {
                uint32_t w = (uint32_t)u;
                memcpy((float *)dst + i, &w, 4);
            }
            break;
        case SN_F64: memcpy((double *)dst + i, &u, 8); break;
        case SN_I32: {
            int64_t v = 0; /* the signed value, for the message too */
            if (h->kind == 'u') {
                if (u > INT32_MAX) goto range;
                v = (int64_t)u;
            } else { /* sign-extend */
                int bits = 8 * h->itemsize;
                v = bits == 64 ? (int64_t)u : (int64_t)(u << (64 - bits)) >> (64 - bits);
                if (v < INT32_MIN || v > INT32_MAX) goto range;
            }
            ((int32_t *)dst)[i] = (int32_t)v;
            break;
        range:
            return sn_errorf(SN_ERR_FORMAT,
                             "npy: %s: element %lld is %s%llu, which does not fit in int32 (%c%d "
                             "arrays are read as int32)",
                             s->name, (long long)(first + i),
                             h->kind == 'i' && v < 0 ? "-" : "",
                             /* negated in unsigned arithmetic: -INT64_MIN has no int64_t */
                             h->kind == 'i' && v < 0 ? 0ull - (unsigned long long)v
                                                     : (unsigned long long)u,
                             h->kind, 8 * h->itemsize);
        }
        default: SN_ASSERT(!"npy output dtypes are u8, f32, f64, i32");
        }
    }
    return SN_OK;
}

static sn_status read_array(npy_src *s, sn_tensor **out) {
    npy_header h = {0};
    SN_TRY(read_header(s, &h));
    sn_tensor *t = NULL;
    SN_TRY(sn_tensor_new(&t, h.out, &h.shape));
    /* Little-endian data of the tensor's own type goes straight in; the rest through a
     * bounce buffer. */
    bool direct = !h.swap && (size_t)h.itemsize == sn_dtype_size(h.out) && h.kind != 'b' &&
                  !(h.kind == 'u' && h.itemsize == 4);
    sn_status st = SN_OK;
    size_t got = 0;
    if (direct) {
        st = s->read(s, t->data, (size_t)h.data_bytes, &got);
        if (st == SN_OK && got < h.data_bytes)
            st = sn_errorf(SN_ERR_FORMAT, "npy: %s is truncated: %zu of %llu data bytes", s->name,
                           got, (unsigned long long)h.data_bytes);
    } else {
        size_t per = NPY_CHUNK / (size_t)h.itemsize;
        unsigned char *buf = sn_malloc(per * (size_t)h.itemsize);
        if (!buf) st = SN_ERR_NOMEM;
        size_t osize = sn_dtype_size(h.out);
        for (int64_t done = 0; st == SN_OK && done < h.numel;) {
            int64_t n = h.numel - done < (int64_t)per ? h.numel - done : (int64_t)per;
            st = s->read(s, buf, (size_t)n * (size_t)h.itemsize, &got);
            if (st == SN_OK && got < (size_t)n * (size_t)h.itemsize)
                st = sn_errorf(SN_ERR_FORMAT, "npy: %s is truncated at element %lld", s->name,
                               (long long)(done + (int64_t)got / h.itemsize));
            if (st == SN_OK) st = convert(&h, s, buf, n, done, (char *)t->data + (size_t)done * osize);
            done += n;
        }
        free(buf);
    }
    if (st != SN_OK) {
        sn_tensor_free(t);
        return st;
    }
    *out = t;
    return SN_OK;
}

/* ---- sources: memory, files, zip members ----------------------------------------------- */

typedef struct {
    const unsigned char *p;
    size_t n, pos;
} mem_ctx;

static sn_status mem_read(npy_src *s, void *buf, size_t n, size_t *got) {
    mem_ctx *m = s->ctx;
    size_t k = m->n - m->pos < n ? m->n - m->pos : n;
    memcpy(buf, m->p + m->pos, k);
    m->pos += k;
    *got = k;
    return SN_OK;
}

sn_status sn_npy_load_memory(const void *data, size_t len, const char *name, sn_tensor **out) {
    if (!out || (!data && len)) return sn_errorf(SN_ERR_INVALID, "sn_npy_load_memory: NULL argument");
    *out = NULL;
    mem_ctx m = {data, len, 0};
    npy_src s = {.name = name ? name : "(memory)", .total = len, .read = mem_read, .ctx = &m};
    return read_array(&s, out);
}

static sn_status file_read(npy_src *s, void *buf, size_t n, size_t *got) {
    FILE *f = s->ctx;
    *got = fread(buf, 1, n, f);
    if (*got < n && ferror(f))
        return sn_errorf(SN_ERR_IO, "npy: reading %s failed: %s", s->name, strerror(errno));
    return SN_OK;
}

sn_status sn_npy_load(const char *path, sn_tensor **out) {
    if (!out || !path) return sn_errorf(SN_ERR_INVALID, "sn_npy_load: NULL argument");
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return sn_errorf(SN_ERR_IO, "npy: cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return sn_errorf(SN_ERR_IO, "npy: %s is not a regular file", path);
    }
    npy_src s = {.name = path, .total = (uint64_t)st.st_size, .read = file_read, .ctx = f};
    sn_status r = read_array(&s, out);
    fclose(f);
    return r;
}

static sn_status zip_fail(zip_error_t *e, const char *path, const char *what) {
    sn_status s = sn_errorf(SN_ERR_FORMAT, "npz: %s: %s: %s", path, what, zip_error_strerror(e));
    zip_error_fini(e);
    return s;
}

static sn_status npz_open(const char *path, zip_t **out) {
    int code = 0;
    zip_t *z = zip_open(path, ZIP_RDONLY, &code);
    if (!z) {
        zip_error_t e;
        zip_error_init_with_code(&e, code);
        sn_status s = sn_errorf(code == ZIP_ER_NOENT || code == ZIP_ER_OPEN ? SN_ERR_IO : SN_ERR_FORMAT,
                                "npz: cannot open %s as a zip archive: %s", path,
                                zip_error_strerror(&e));
        zip_error_fini(&e);
        return s;
    }
    *out = z;
    return SN_OK;
}

typedef struct {
    zip_file_t *zf;
} zmember;

static sn_status zip_member_read(npy_src *s, void *buf, size_t n, size_t *got) {
    zmember *m = s->ctx;
    *got = 0;
    while (*got < n) {
        zip_int64_t r = zip_fread(m->zf, (char *)buf + *got, n - *got);
        if (r < 0)
            return sn_errorf(SN_ERR_FORMAT, "npz: %s: reading failed: %s", s->name,
                             zip_file_strerror(m->zf));
        if (r == 0) break;
        *got += (size_t)r;
    }
    return SN_OK;
}

sn_status sn_npz_has(const char *path, const char *name, bool *has) {
    if (!path || !name || !has) return sn_errorf(SN_ERR_INVALID, "sn_npz_has: NULL argument");
    *has = false;
    zip_t *z = NULL;
    SN_TRY(npz_open(path, &z));
    char member[512];
    snprintf(member, sizeof member, "%s.npy", name);
    *has = zip_name_locate(z, member, 0) >= 0;
    zip_discard(z);
    return SN_OK;
}

sn_status sn_npz_load(const char *path, const char *name, sn_tensor **out) {
    if (!out || !path || !name) return sn_errorf(SN_ERR_INVALID, "sn_npz_load: NULL argument");
    *out = NULL;
    zip_t *z = NULL;
    SN_TRY(npz_open(path, &z));
    char member[512], label[1024];
    snprintf(member, sizeof member, "%s.npy", name);
    snprintf(label, sizeof label, "%s: array '%s' (member %s)", path, name, member);
    sn_status s = SN_OK;
    zip_int64_t idx = zip_name_locate(z, member, 0);
    if (idx < 0) {
        /* Name what is there: the user picked the wrong array name or the wrong file. */
        char names[512] = "";
        size_t k = 0;
        zip_int64_t n = zip_get_num_entries(z, 0);
        for (zip_int64_t i = 0; i < n && k + 64 < sizeof names; i++) {
            const char *nm = zip_get_name(z, (zip_uint64_t)i, 0);
            size_t l = nm ? strlen(nm) : 0;
            if (l > 4 && !strcmp(nm + l - 4, ".npy") && l - 4 < 60)
                k += (size_t)snprintf(names + k, sizeof names - k, "%s'%.*s'", k ? ", " : "",
                                      (int)(l - 4), nm);
        }
        s = sn_errorf(SN_ERR_NOT_FOUND, "npz: %s has no array '%s' (no member %s); it holds %s",
                      path, name, member, k ? names : "no .npy members");
        zip_discard(z);
        return s;
    }
    zip_stat_t zs;
    zip_stat_init(&zs);
    if (zip_stat_index(z, (zip_uint64_t)idx, 0, &zs) != 0 || !(zs.valid & ZIP_STAT_SIZE)) {
        s = zip_fail(zip_get_error(z), label, "cannot read its size");
        zip_discard(z);
        return s;
    }
    if ((zs.valid & ZIP_STAT_ENCRYPTION_METHOD) && zs.encryption_method != ZIP_EM_NONE) {
        zip_discard(z);
        return sn_errorf(SN_ERR_UNSUPPORTED, "npz: %s is encrypted", label);
    }
    zip_file_t *zf = zip_fopen_index(z, (zip_uint64_t)idx, 0);
    if (!zf) {
        s = sn_errorf(SN_ERR_FORMAT, "npz: %s: cannot open it: %s", label,
                      zip_error_strerror(zip_get_error(z)));
        zip_discard(z);
        return s;
    }
    zmember m = {zf};
    npy_src src = {.name = label, .total = zs.size, .read = zip_member_read, .ctx = &m};
    s = read_array(&src, out);
    if (s == SN_OK) {
        /* Reading to the end makes libzip check the member's CRC-32. */
        char extra;
        size_t got = 0;
        s = zip_member_read(&src, &extra, 1, &got);
        if (s == SN_OK && got)
            s = sn_errorf(SN_ERR_FORMAT, "npz: %s holds more bytes than its directory says", label);
        if (s != SN_OK) {
            sn_tensor_free(*out);
            *out = NULL;
        }
    }
    zip_fclose(zf);
    zip_discard(z);
    return s;
}
