/* .keras archives (libzip) and JSON documents (jansson): see keras_file.h. */
#include "io/keras_file.h"

#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

/* ---- zip --------------------------------------------------------------------------------- */

bool sn_file_is_zip(const char *path) {
    unsigned char sig[4] = {0};
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) return false;
    size_t got = fread(sig, 1, sizeof sig, f);
    fclose(f);
    return got == 4 && sig[0] == 'P' && sig[1] == 'K' &&
           ((sig[2] == 3 && sig[3] == 4) || (sig[2] == 5 && sig[3] == 6));
}

static const char *zip_errstr(int code) {
    /* zip_error_strerror's buffer belongs to the zip_error_t: keep one per thread. */
    static _Thread_local char buf[256];
    zip_error_t e;
    zip_error_init_with_code(&e, code);
    snprintf(buf, sizeof buf, "%s", zip_error_strerror(&e));
    zip_error_fini(&e);
    return buf;
}

/* Reads member `name` (absent: *out = NULL) of at most `limit` bytes, NUL-terminated. */
static sn_status read_member(zip_t *z, const char *path, const char *name, size_t limit,
                             char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    zip_stat_t s;
    zip_stat_init(&s);
    if (zip_stat(z, name, 0, &s) != 0) return SN_OK; /* absent */
    if (!(s.valid & ZIP_STAT_SIZE))
        return sn_errorf(SN_ERR_FORMAT, "'%s': member %s has no size in the zip directory", path,
                         name);
    if (s.size > limit)
        return sn_errorf(SN_ERR_FORMAT, "'%s': member %s is %llu bytes, more than the %zu "
                         "allowed", path, name, (unsigned long long)s.size, limit);
    char *buf = sn_malloc((size_t)s.size + 1);
    if (!buf) return SN_ERR_NOMEM;
    zip_file_t *f = zip_fopen_index(z, s.index, 0);
    if (!f) {
        sn_status st = sn_errorf(SN_ERR_FORMAT, "'%s': cannot open member %s: %s", path, name,
                                 zip_strerror(z));
        free(buf);
        return st;
    }
    zip_uint64_t got = 0;
    while (got < s.size) {
        zip_int64_t r = zip_fread(f, buf + got, s.size - got);
        if (r <= 0) break;
        got += (zip_uint64_t)r;
    }
    sn_status st = SN_OK;
    if (got != s.size)
        st = sn_errorf(SN_ERR_FORMAT, "'%s': member %s is damaged: read %llu of %llu bytes (%s)",
                       path, name, (unsigned long long)got, (unsigned long long)s.size,
                       zip_file_strerror(f));
    zip_fclose(f);
    if (st != SN_OK) {
        free(buf);
        return st;
    }
    buf[s.size] = 0;
    *out = buf;
    *len = (size_t)s.size;
    return SN_OK;
}

void sn_keras_archive_free(sn_keras_archive *a) {
    if (!a) return;
    free(a->config);
    free(a->metadata);
    free(a->weights);
    *a = (sn_keras_archive){0};
}

sn_status sn_keras_archive_read(const char *path, sn_keras_archive *out) {
    if (!path || !out) return sn_errorf(SN_ERR_INVALID, "sn_keras_archive_read: NULL argument");
    *out = (sn_keras_archive){0};
    int err = 0;
    /* zip_open's error code drops errno ("Can't open file" without the cause): the OS says
     * first why a file cannot be read. */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sn_errorf(SN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    close(fd);
    /* ZIP_CHECKCONS: a truncated or inconsistent archive is refused at open. */
    zip_t *z = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!z) {
        if (err == ZIP_ER_OPEN || err == ZIP_ER_NOENT || err == ZIP_ER_READ)
            return sn_errorf(SN_ERR_IO, "cannot open '%s': %s", path, zip_errstr(err));
        return sn_errorf(SN_ERR_FORMAT, "'%s' is not a valid .keras archive (a zip file): %s",
                         path, zip_errstr(err));
    }
    sn_status st = read_member(z, path, "config.json", SN_KERAS_MAX_JSON_BYTES, &out->config,
                               &out->config_len);
    if (st == SN_OK && !out->config)
        st = sn_errorf(SN_ERR_FORMAT, "'%s' is a zip file but not a Keras model: it has no "
                       "config.json (a .keras archive holds config.json, metadata.json and "
                       "model.weights.h5)", path);
    if (st == SN_OK)
        st = read_member(z, path, "metadata.json", SN_KERAS_MAX_JSON_BYTES, &out->metadata,
                         &out->metadata_len);
    char *w = NULL;
    if (st == SN_OK)
        st = read_member(z, path, "model.weights.h5", SN_KERAS_MAX_WEIGHTS_BYTES, &w,
                         &out->weights_len);
    out->weights = w;
    zip_discard(z);
    if (st != SN_OK) sn_keras_archive_free(out);
    return st;
}

static sn_status add_member(zip_t *z, const char *path, const char *name, const void *data,
                            size_t n) {
    zip_source_t *src = zip_source_buffer(z, data, n, 0);
    if (!src)
        return sn_errorf(SN_ERR_IO, "cannot write .keras archive '%s': adding %s: %s", path,
                         name, zip_strerror(z));
    zip_int64_t idx = zip_file_add(z, name, src, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
        zip_source_free(src);
        return sn_errorf(SN_ERR_IO, "cannot write .keras archive '%s': adding %s: %s", path,
                         name, zip_strerror(z));
    }
    /* Stored, as Keras stores its members: the weights barely compress and stay mappable. */
    if (zip_set_file_compression(z, (zip_uint64_t)idx, ZIP_CM_STORE, 0) != 0)
        return sn_errorf(SN_ERR_IO, "cannot write .keras archive '%s': %s: %s", path, name,
                         zip_strerror(z));
    return SN_OK;
}

/* The archive is built in memory and written by sn_atomic_write: libzip writing a file
 * itself goes through its own temporary file, and on a full disk answers with its own text
 * ("Write error") and leaves that file's clean-up to libzip; in memory, the only disk write
 * is ours, with errno's text. The weights member is in memory already, so this costs one more
 * copy of the archive at most. */
sn_status sn_keras_archive_write(const char *path, const sn_keras_archive *a) {
    if (!path || !a || !a->config)
        return sn_errorf(SN_ERR_INVALID, "sn_keras_archive_write: %s is NULL",
                         !path ? "path" : !a ? "archive" : "config.json");
    zip_error_t ze;
    zip_error_init(&ze);
    sn_status st = SN_OK;
    void *bytes = NULL;
    zip_int64_t nbytes = 0;
    zip_t *z = NULL;
    zip_source_t *buf = zip_source_buffer_create(NULL, 0, 0, &ze);
    if (!buf || !(z = zip_open_from_source(buf, ZIP_TRUNCATE, &ze))) {
        st = sn_errorf(SN_ERR_NOMEM, "cannot write .keras archive '%s': %s", path,
                       zip_error_strerror(&ze));
        zip_source_free(buf);
        goto done;
    }
    zip_source_keep(buf); /* zip_close would free it; its bytes are read below */
    if (a->metadata) st = add_member(z, path, "metadata.json", a->metadata, a->metadata_len);
    if (st == SN_OK) st = add_member(z, path, "config.json", a->config, a->config_len);
    if (st == SN_OK && a->weights)
        st = add_member(z, path, "model.weights.h5", a->weights, a->weights_len);
    if (st != SN_OK) {
        zip_discard(z);
        zip_source_free(buf);
        goto done;
    }
    if (zip_close(z) != 0) {
        st = sn_errorf(SN_ERR_IO, "cannot write .keras archive '%s': %s", path, zip_strerror(z));
        zip_discard(z);
        zip_source_free(buf);
        goto done;
    }
    zip_stat_t zs;
    zip_stat_init(&zs);
    if (zip_source_stat(buf, &zs) != 0 || !(zs.valid & ZIP_STAT_SIZE) ||
        zip_source_open(buf) != 0) {
        st = sn_errorf(SN_ERR_IO, "cannot write .keras archive '%s': %s", path,
                       zip_error_strerror(zip_source_error(buf)));
        zip_source_free(buf);
        goto done;
    }
    bytes = sn_malloc(zs.size ? (size_t)zs.size : 1);
    if (bytes) nbytes = zip_source_read(buf, bytes, zs.size);
    zip_source_close(buf);
    zip_source_free(buf);
    if (!bytes) {
        st = SN_ERR_NOMEM;
        goto done;
    }
    if (nbytes < 0 || (zip_uint64_t)nbytes != zs.size) {
        st = sn_errorf(SN_ERR_IO, "cannot write .keras archive '%s': libzip gave %lld of its "
                       "%llu bytes", path, (long long)nbytes, (unsigned long long)zs.size);
        goto done;
    }
    st = sn_atomic_write(path, ".keras archive", bytes, (size_t)nbytes, NULL);
done:
    free(bytes);
    zip_error_fini(&ze);
    return st;
}

/* ---- JSON -------------------------------------------------------------------------------- */

sn_status sn_json_parse(const char *text, size_t len, const char *shown, json_t **out) {
    if (!text || !out) return sn_errorf(SN_ERR_INVALID, "sn_json_parse: NULL argument");
    json_error_t e;
    /* Duplicate keys are refused: which of two "units" Keras meant cannot be known. */
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    if (!j) {
        /* jansson quotes the offending token ("near '...'"), which may hold any byte. */
        char why[JSON_ERROR_TEXT_LENGTH * 4];
        return sn_errorf(SN_ERR_FORMAT, "%s is not valid JSON: %s at line %d, column %d",
                         shown ? shown : "text", sn_foreign_text(why, sizeof why, e.text),
                         e.line, e.column);
    }
    *out = j;
    return SN_OK;
}

sn_status sn_json_read_file(const char *path, json_t **out) {
    if (!path || !out) return sn_errorf(SN_ERR_INVALID, "sn_json_read_file: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f) return sn_errorf(SN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return sn_errorf(SN_ERR_IO, "'%s' is not a regular file", path);
    }
    if ((size_t)sb.st_size > SN_KERAS_MAX_JSON_BYTES) {
        fclose(f);
        return sn_errorf(SN_ERR_FORMAT, "'%s' is %lld bytes, more than the %zu allowed for a "
                         "model JSON file", path, (long long)sb.st_size, SN_KERAS_MAX_JSON_BYTES);
    }
    size_t n = (size_t)sb.st_size;
    char *buf = sn_malloc(n + 1);
    if (!buf) {
        fclose(f);
        return SN_ERR_NOMEM;
    }
    size_t got = fread(buf, 1, n, f);
    int rerr = ferror(f);
    fclose(f);
    if (got != n || rerr) {
        free(buf);
        return sn_errorf(SN_ERR_IO, "reading '%s' failed", path);
    }
    buf[n] = 0;
    char shown[512];
    snprintf(shown, sizeof shown, "'%s'", path);
    sn_status st = sn_json_parse(buf, n, shown, out);
    free(buf);
    return st;
}

char *sn_json_dump(const json_t *j, int indent) {
    /* 17 significant digits: every double reads back to the same bits. */
    char *s = json_dumps(j, JSON_INDENT(indent) | JSON_REAL_PRECISION(17));
    if (!s) sn_errorf(SN_ERR_NOMEM, "serialising JSON: out of memory");
    return s;
}
