/* Strict UTF-8, and vocabularies of characters: build, look up, encode, save/load as JSON.
 *
 * UTF-8 is decoded by hand (RFC 3629's table, ~40 lines): what is needed is the byte offset of
 * the first invalid sequence and a code point at a time, which iconv does not report.
 * JSON goes through jansson. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/data_impl.h"

/* ---- UTF-8 ----------------------------------------------------------------------------- */

bool sn_utf8_decode(const void *s, size_t n, size_t *pos, uint32_t *cp) {
    const uint8_t *p = (const uint8_t *)s + *pos;
    size_t left = n - *pos;
    if (*pos >= n) return false;
    uint8_t b0 = p[0];
    if (b0 < 0x80) {
        *cp = b0;
        *pos += 1;
        return true;
    }
    int len;
    uint8_t lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
    if (b0 >= 0xC2 && b0 <= 0xDF) len = 2;
    else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3;
        if (b0 == 0xE0) lo = 0xA0;      /* overlong */
        else if (b0 == 0xED) hi = 0x9F; /* surrogates */
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4;
        if (b0 == 0xF0) lo = 0x90;      /* overlong */
        else if (b0 == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else {
        return false; /* continuation byte, C0/C1 (overlong) or F5..FF */
    }
    if (left < (size_t)len || p[1] < lo || p[1] > hi) return false;
    for (int i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return false;
    uint32_t c = b0 & (0x7F >> len);
    for (int i = 1; i < len; i++) c = c << 6 | (p[i] & 0x3F);
    *cp = c;
    *pos += (size_t)len;
    return true;
}

bool sn_utf8_validate(const void *s, size_t n, size_t *bad_offset) {
    const uint8_t *p = s;
    size_t pos = 0;
    uint32_t cp;
    while (pos < n) {
        if (p[pos] < 0x80) { /* the ASCII run: no decode call per byte */
            pos++;
            continue;
        }
        if (!sn_utf8_decode(s, n, &pos, &cp)) {
            if (bad_offset) *bad_offset = pos;
            return false;
        }
    }
    return true;
}

int sn_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF) return 0;
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- the vocabulary -------------------------------------------------------------------- */

#define SN_UNICODE_END 0x110000u

struct sn_vocab {
    bool bytes;
    int n;
    uint32_t *chars; /* strictly increasing */
    int32_t low[256]; /* id of each c < 256 (-1: absent): the common case without a search */
};

static sn_status vocab_new(sn_vocab **out, const uint32_t *chars, int n, bool bytes) {
    sn_vocab *v = sn_calloc(1, sizeof *v);
    if (!v) return SN_ERR_NOMEM;
    v->chars = sn_malloc((size_t)(n > 0 ? n : 1) * sizeof *v->chars);
    if (!v->chars) {
        free(v);
        return SN_ERR_NOMEM;
    }
    v->bytes = bytes;
    v->n = n;
    if (n > 0) memcpy(v->chars, chars, (size_t)n * sizeof *chars);
    for (int i = 0; i < 256; i++) v->low[i] = -1;
    for (int i = 0; i < n && chars[i] < 256; i++) v->low[chars[i]] = i;
    *out = v;
    return SN_OK;
}

sn_status sn_vocab_from_chars(sn_vocab **out, const uint32_t *chars, int n, bool bytes) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "sn_vocab_from_chars: out is NULL");
    *out = NULL;
    if (n < 1 || !chars)
        return sn_errorf(SN_ERR_INVALID, "vocab: %d characters; a vocabulary needs at least one",
                         n);
    uint32_t end = bytes ? 256 : SN_UNICODE_END;
    for (int i = 0; i < n; i++) {
        if (chars[i] >= end || (!bytes && chars[i] >= 0xD800 && chars[i] <= 0xDFFF))
            return sn_errorf(SN_ERR_INVALID, "vocab: entry %d is 0x%x, not a %s", i,
                             (unsigned)chars[i], bytes ? "byte (0..255)" : "Unicode scalar value");
        if (i && chars[i] <= chars[i - 1])
            return sn_errorf(SN_ERR_INVALID,
                             "vocab: entry %d (0x%x) does not follow entry %d (0x%x); entries "
                             "must be strictly increasing",
                             i, (unsigned)chars[i], i - 1, (unsigned)chars[i - 1]);
    }
    return vocab_new(out, chars, n, bytes);
}

sn_status sn_vocab_build(sn_vocab **out, const void *text, size_t len, bool bytes) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "sn_vocab_build: out is NULL");
    *out = NULL;
    if (!text && len) return sn_errorf(SN_ERR_INVALID, "sn_vocab_build: text is NULL");
    const uint8_t *p = text;
    uint32_t nwords = (bytes ? 256 : SN_UNICODE_END) / 64;
    uint64_t *seen = sn_calloc(nwords, sizeof *seen); /* a bitmap of the code points met */
    if (!seen) return SN_ERR_NOMEM;
    size_t pos = 0;
    while (pos < len) {
        uint32_t c = p[pos];
        if (bytes || c < 0x80) {
            pos++;
        } else if (!sn_utf8_decode(text, len, &pos, &c)) {
            free(seen);
            return sn_errorf(SN_ERR_FORMAT,
                             "vocab: invalid UTF-8 at byte offset %zu (byte 0x%02x); read the "
                             "text in bytes mode to take it byte by byte",
                             pos, p[pos]);
        }
        seen[c >> 6] |= (uint64_t)1 << (c & 63);
    }
    int n = 0;
    for (uint32_t w = 0; w < nwords; w++) n += __builtin_popcountll(seen[w]);
    if (n == 0) {
        free(seen);
        return sn_errorf(SN_ERR_FORMAT, "vocab: the text is empty; a vocabulary needs characters");
    }
    uint32_t *chars = sn_malloc((size_t)n * sizeof *chars);
    if (!chars) {
        free(seen);
        return SN_ERR_NOMEM;
    }
    n = 0;
    for (uint32_t w = 0; w < nwords; w++) /* ascending: the vocabulary comes out sorted */
        for (uint64_t bits = seen[w]; bits; bits &= bits - 1)
            chars[n++] = w * 64 + (uint32_t)__builtin_ctzll(bits);
    free(seen);
    sn_status s = vocab_new(out, chars, n, bytes);
    free(chars);
    return s;
}

void sn_vocab_free(sn_vocab *v) {
    if (!v) return;
    free(v->chars);
    free(v);
}

int sn_vocab_size(const sn_vocab *v) { return v ? v->n : 0; }
bool sn_vocab_is_bytes(const sn_vocab *v) { return v && v->bytes; }

int32_t sn_vocab_id(const sn_vocab *v, uint32_t c) {
    if (!v) return -1;
    if (c < 256) return v->low[c];
    int lo = 0, hi = v->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (v->chars[mid] == c) return mid;
        if (v->chars[mid] < c) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int64_t sn_vocab_char(const sn_vocab *v, int32_t id) {
    if (!v || id < 0 || id >= v->n) return -1;
    return v->chars[id];
}

int sn_vocab_decode(const sn_vocab *v, int32_t id, char out[4]) {
    if (!v || id < 0 || id >= v->n) return 0;
    if (v->bytes) {
        out[0] = (char)v->chars[id];
        return 1;
    }
    return sn_utf8_encode(v->chars[id], out);
}

/* "'a' (U+0061)" or "U+000A" for what does not print well. */
static void describe_char(uint32_t c, bool bytes, char *buf, size_t cap) {
    if (bytes) {
        if (c >= 0x20 && c < 0x7F) snprintf(buf, cap, "byte 0x%02x ('%c')", (unsigned)c, (char)c);
        else snprintf(buf, cap, "byte 0x%02x", (unsigned)c);
        return;
    }
    char u[5] = {0};
    if (c >= 0x20 && c != 0x7F && (c < 0x80 || c >= 0xA0) && sn_utf8_encode(c, u) > 0)
        snprintf(buf, cap, "character '%s' (U+%04X)", u, (unsigned)c);
    else
        snprintf(buf, cap, "character U+%04X", (unsigned)c);
}

sn_status sn_vocab_encode(const sn_vocab *v, const void *text, size_t len, int32_t **ids,
                          int64_t *n) {
    if (!v || !ids || !n || (!text && len))
        return sn_errorf(SN_ERR_INVALID, "sn_vocab_encode: NULL argument");
    *ids = NULL;
    *n = 0;
    int32_t *out = sn_malloc((len ? len : 1) * sizeof *out); /* at most one id per byte */
    if (!out) return SN_ERR_NOMEM;
    const uint8_t *p = text;
    size_t pos = 0;
    int64_t k = 0;
    while (pos < len) {
        size_t at = pos;
        uint32_t c = p[pos];
        if (v->bytes || c < 0x80) {
            pos++;
        } else if (!sn_utf8_decode(text, len, &pos, &c)) {
            free(out);
            return sn_errorf(SN_ERR_FORMAT,
                             "vocab: invalid UTF-8 at byte offset %zu (byte 0x%02x)", at, p[at]);
        }
        int32_t id = sn_vocab_id(v, c);
        if (id < 0) {
            char d[64];
            describe_char(c, v->bytes, d, sizeof d);
            free(out);
            return sn_errorf(SN_ERR_INVALID,
                             "vocab: %s at byte offset %zu is not in the vocabulary (%d %s)", d,
                             at, v->n, v->bytes ? "byte values" : "characters");
        }
        out[k++] = id;
    }
    *ids = out;
    *n = k;
    return SN_OK;
}

char *sn_vocab_path_for(const char *weights_path) {
    if (!weights_path) return NULL;
    size_t n = strlen(weights_path) + sizeof ".vocab.json";
    char *p = sn_malloc(n);
    if (p) snprintf(p, n, "%s.vocab.json", weights_path);
    return p;
}

/* ---- JSON ------------------------------------------------------------------------------ */

#define VOCAB_FORMAT "sinter.vocab"

static atomic_uint tmp_counter; /* distinct temporary names within one process */
#define VOCAB_VERSION 1

/* path's bytes written atomically: a temporary file beside it, fsync, rename, fsync of the
 * folder, so a crash leaves the old file or the new one, never half of one. */
static sn_status write_atomic(const char *path, const char *data, size_t n) {
    size_t plen = strlen(path);
    char *tmp = sn_malloc(plen + 40);
    char *dir = sn_malloc(plen + 2);
    if (!tmp || !dir) {
        free(tmp);
        free(dir);
        return SN_ERR_NOMEM;
    }
    /* Not mkstemp: its 0600 would make the vocabulary unreadable to others, unlike every
     * other file sinter writes. O_EXCL with a per-process name is as safe. */
    snprintf(tmp, plen + 40, "%s.tmp.%ld.%u", path, (long)getpid(),
             atomic_fetch_add(&tmp_counter, 1u));
    const char *slash = strrchr(path, '/');
    if (slash) {
        size_t dl = slash == path ? 1 : (size_t)(slash - path);
        memcpy(dir, path, dl);
        dir[dl] = 0;
    } else {
        strcpy(dir, ".");
    }
    sn_status s = SN_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        s = sn_errorf(SN_ERR_IO, "vocab: cannot create a temporary file beside %s: %s", path,
                      strerror(errno));
        goto out;
    }
    for (size_t off = 0; off < n && s == SN_OK;) {
        ssize_t w = write(fd, data + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) s = sn_errorf(SN_ERR_IO, "vocab: writing %s failed: %s", tmp, strerror(errno));
        else off += (size_t)w;
    }
    if (s == SN_OK && fsync(fd) != 0)
        s = sn_errorf(SN_ERR_IO, "vocab: fsync of %s failed: %s", tmp, strerror(errno));
    if (close(fd) != 0 && s == SN_OK)
        s = sn_errorf(SN_ERR_IO, "vocab: closing %s failed: %s", tmp, strerror(errno));
    if (s == SN_OK && rename(tmp, path) != 0)
        s = sn_errorf(SN_ERR_IO, "vocab: cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (s != SN_OK) {
        unlink(tmp); /* best effort: the error that matters is recorded */
        goto out;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { /* the rename is durable once the folder is synced */
        if (fsync(dfd) != 0)
            s = sn_errorf(SN_ERR_IO, "vocab: fsync of folder %s failed: %s", dir, strerror(errno));
        close(dfd);
    }
out:
    free(tmp);
    free(dir);
    return s;
}

sn_status sn_vocab_save(const sn_vocab *v, const char *path) {
    if (!v || !path) return sn_errorf(SN_ERR_INVALID, "sn_vocab_save: NULL argument");
    json_t *root = json_object(), *arr = json_array();
    bool ok = root && arr;
    ok = ok && !json_object_set_new(root, "format", json_string(VOCAB_FORMAT));
    ok = ok && !json_object_set_new(root, "version", json_integer(VOCAB_VERSION));
    ok = ok && !json_object_set_new(root, "mode", json_string(v->bytes ? "bytes" : "utf8"));
    ok = ok && !json_object_set_new(root, "size", json_integer(v->n));
    for (int i = 0; ok && i < v->n; i++) {
        char u[4];
        int k = v->bytes ? 0 : sn_utf8_encode(v->chars[i], u);
        ok = !json_array_append_new(arr, v->bytes ? json_integer(v->chars[i])
                                                  : json_stringn(u, (size_t)k));
    }
    if (ok) {
        ok = !json_object_set_new(root, v->bytes ? "bytes" : "chars", arr);
        arr = NULL;
    }
    char *text = ok ? json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(arr);
    json_decref(root);
    if (!text) return sn_errorf(SN_ERR_NOMEM, "vocab: cannot build the JSON of %s", path);
    size_t n = strlen(text);
    char *withnl = sn_malloc(n + 2);
    sn_status s = SN_ERR_NOMEM;
    if (withnl) {
        memcpy(withnl, text, n);
        withnl[n] = '\n';
        s = write_atomic(path, withnl, n + 1);
    }
    free(withnl);
    free(text);
    return s;
}

sn_status sn_vocab_load(sn_vocab **out, const char *path) {
    if (!out || !path) return sn_errorf(SN_ERR_INVALID, "sn_vocab_load: NULL argument");
    *out = NULL;
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
    if (!root) {
        if (access(path, R_OK) != 0)
            return sn_errorf(SN_ERR_IO, "vocab: cannot read %s: %s", path, strerror(errno));
        char why[JSON_ERROR_TEXT_LENGTH * 4]; /* jansson quotes the token: any byte */
        return sn_errorf(SN_ERR_FORMAT, "vocab: %s is not valid JSON (line %d, column %d): %s",
                         path, err.line, err.column, sn_foreign_text(why, sizeof why, err.text));
    }
    sn_status s = SN_OK;
    uint32_t *chars = NULL;
    const char *fmt = json_string_value(json_object_get(root, "format"));
    json_t *ver = json_object_get(root, "version");
    const char *mode = json_string_value(json_object_get(root, "mode"));
    json_t *size = json_object_get(root, "size");
    if (!json_is_object(root) || !fmt || strcmp(fmt, VOCAB_FORMAT) != 0) {
        s = sn_errorf(SN_ERR_FORMAT, "vocab: %s: field \"format\" should be \"%s\"; is this a "
                                     "vocabulary file written by sinter?",
                      path, VOCAB_FORMAT);
        goto done;
    }
    if (!json_is_integer(ver) || json_integer_value(ver) != VOCAB_VERSION) {
        s = sn_errorf(SN_ERR_FORMAT, "vocab: %s: field \"version\" is %s%lld; this sinter reads "
                                     "version %d",
                      path, json_is_integer(ver) ? "" : "not an integer: ",
                      json_is_integer(ver) ? (long long)json_integer_value(ver) : 0LL,
                      VOCAB_VERSION);
        goto done;
    }
    if (!mode || (strcmp(mode, "utf8") != 0 && strcmp(mode, "bytes") != 0)) {
        s = sn_errorf(SN_ERR_FORMAT, "vocab: %s: field \"mode\" is %s%s%s; expected \"utf8\" or "
                                     "\"bytes\"",
                      path, mode ? "\"" : "", mode ? mode : "missing or not a string",
                      mode ? "\"" : "");
        goto done;
    }
    bool bytes = strcmp(mode, "bytes") == 0;
    const char *key = bytes ? "bytes" : "chars";
    json_t *arr = json_object_get(root, key);
    if (!json_is_array(arr) || json_array_size(arr) < 1 ||
        json_array_size(arr) > (bytes ? 256 : SN_UNICODE_END)) {
        s = sn_errorf(SN_ERR_FORMAT, "vocab: %s: field \"%s\" should be an array of 1 to %u %s",
                      path, key, bytes ? 256u : SN_UNICODE_END,
                      bytes ? "byte values" : "one-character strings");
        goto done;
    }
    int n = (int)json_array_size(arr);
    if (!json_is_integer(size) || json_integer_value(size) != n) {
        s = sn_errorf(SN_ERR_FORMAT, "vocab: %s: field \"size\" should be %d, the length of "
                                     "\"%s\"",
                      path, n, key);
        goto done;
    }
    chars = sn_malloc((size_t)n * sizeof *chars);
    if (!chars) {
        s = SN_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        json_t *e = json_array_get(arr, (size_t)i);
        if (bytes) {
            json_int_t b = json_is_integer(e) ? json_integer_value(e) : -1;
            if (b < 0 || b > 255) {
                s = sn_errorf(SN_ERR_FORMAT, "vocab: %s: \"bytes\"[%d] should be an integer in "
                                             "0..255",
                              path, i);
                goto done;
            }
            chars[i] = (uint32_t)b;
        } else {
            const char *str = json_string_value(e);
            size_t len = str ? json_string_length(e) : 0, pos = 0;
            uint32_t c = 0;
            if (!str || !sn_utf8_decode(str, len, &pos, &c) || pos != len) {
                s = sn_errorf(SN_ERR_FORMAT, "vocab: %s: \"chars\"[%d] should be a string of "
                                             "exactly one character",
                              path, i);
                goto done;
            }
            chars[i] = c;
        }
        if (i && chars[i] <= chars[i - 1]) {
            s = sn_errorf(SN_ERR_FORMAT, "vocab: %s: \"%s\"[%d] (U+%04X) should come after "
                                         "\"%s\"[%d] (U+%04X): entries are sorted and distinct",
                          path, key, i, (unsigned)chars[i], key, i - 1, (unsigned)chars[i - 1]);
            goto done;
        }
    }
    s = vocab_new(out, chars, n, bytes);
done:
    free(chars);
    json_decref(root);
    return s;
}
