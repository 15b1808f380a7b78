/* .keras archives (libzip), JSON documents (jansson) and atomic file writes: see keras_file.h. */
#include "io/keras_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

/* ---- atomic writes ----------------------------------------------------------------------- */

/* fsync of the folder holding `path`, so that the rename itself survives a power cut. */
static sn_status sync_dir_of(const char *path) {
    char *copy = sn_strdup(path);
    if (!copy) return SN_ERR_NOMEM;
    const char *dir = dirname(copy);
    sn_status st = SN_OK;
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0)
        st = sn_errorf(SN_ERR_IO, "'%s': syncing its folder '%s' failed: %s", path, dir,
                       strerror(errno));
    if (fd >= 0) close(fd);
    free(copy);
    return st;
}

static sn_status sync_file(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return sn_errorf(SN_ERR_IO, "cannot reopen '%s': %s", path, strerror(errno));
    sn_status st = SN_OK;
    if (fsync(fd) != 0) st = sn_errorf(SN_ERR_IO, "fsync of '%s' failed: %s", path, strerror(errno));
    close(fd);
    return st;
}

/* "<path>.tmp<pid>": beside the target, so the rename stays on one file system. */
static char *tmp_name(const char *path) {
    size_t n = strlen(path) + 32;
    char *t = sn_malloc(n);
    if (t) snprintf(t, n, "%s.tmp%ld", path, (long)getpid());
    return t;
}

/* Renames the synced temporary over `path` and syncs the folder; removes tmp on failure. */
static sn_status commit_tmp(const char *tmp, const char *path) {
    sn_status st = sync_file(tmp);
    if (st == SN_OK && rename(tmp, path) != 0)
        st = sn_errorf(SN_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    if (st != SN_OK) {
        remove(tmp); /* best effort: the error that matters is already recorded */
        return st;
    }
    return sync_dir_of(path);
}

sn_status sn_write_file_atomic(const char *path, const void *data, size_t n) {
    if (!path) return sn_errorf(SN_ERR_INVALID, "sn_write_file_atomic: path is NULL");
    char *tmp = tmp_name(path);
    if (!tmp) return SN_ERR_NOMEM;
    sn_status st = SN_OK;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        st = sn_errorf(SN_ERR_IO, "'%s': cannot create '%s': %s", path, tmp, strerror(errno));
        free(tmp);
        return st;
    }
    if ((n && fwrite(data, 1, n, f) != n) || fflush(f) != 0)
        st = sn_errorf(SN_ERR_IO, "'%s': writing '%s' failed: %s", path, tmp, strerror(errno));
    if (fclose(f) != 0 && st == SN_OK)
        st = sn_errorf(SN_ERR_IO, "'%s': closing '%s' failed: %s", path, tmp, strerror(errno));
    if (st == SN_OK) st = commit_tmp(tmp, path);
    else remove(tmp);
    free(tmp);
    return st;
}

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
        return sn_errorf(SN_ERR_IO, "'%s': adding %s: %s", path, name, zip_strerror(z));
    zip_int64_t idx = zip_file_add(z, name, src, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
        zip_source_free(src);
        return sn_errorf(SN_ERR_IO, "'%s': adding %s: %s", path, name, zip_strerror(z));
    }
    /* Stored, as Keras stores its members: the weights barely compress and stay mappable. */
    if (zip_set_file_compression(z, (zip_uint64_t)idx, ZIP_CM_STORE, 0) != 0)
        return sn_errorf(SN_ERR_IO, "'%s': %s: %s", path, name, zip_strerror(z));
    return SN_OK;
}

sn_status sn_keras_archive_write(const char *path, const sn_keras_archive *a) {
    if (!path || !a || !a->config)
        return sn_errorf(SN_ERR_INVALID, "sn_keras_archive_write: %s is NULL",
                         !path ? "path" : !a ? "archive" : "config.json");
    char *tmp = tmp_name(path);
    if (!tmp) return SN_ERR_NOMEM;
    int err = 0;
    zip_t *z = zip_open(tmp, ZIP_CREATE | ZIP_TRUNCATE, &err);
    sn_status st = SN_OK;
    if (!z) {
        st = sn_errorf(SN_ERR_IO, "'%s': cannot create '%s': %s", path, tmp, zip_errstr(err));
        free(tmp);
        return st;
    }
    if (a->metadata) st = add_member(z, path, "metadata.json", a->metadata, a->metadata_len);
    if (st == SN_OK) st = add_member(z, path, "config.json", a->config, a->config_len);
    if (st == SN_OK && a->weights)
        st = add_member(z, path, "model.weights.h5", a->weights, a->weights_len);
    if (st != SN_OK) {
        zip_discard(z);
        remove(tmp);
        free(tmp);
        return st;
    }
    /* zip_close writes the whole archive (libzip itself goes through a temporary file). */
    if (zip_close(z) != 0) {
        st = sn_errorf(SN_ERR_IO, "'%s': writing '%s' failed: %s", path, tmp, zip_strerror(z));
        zip_discard(z);
        remove(tmp);
        free(tmp);
        return st;
    }
    st = commit_tmp(tmp, path);
    free(tmp);
    return st;
}

/* ---- JSON -------------------------------------------------------------------------------- */

sn_status sn_json_parse(const char *text, size_t len, const char *shown, json_t **out) {
    if (!text || !out) return sn_errorf(SN_ERR_INVALID, "sn_json_parse: NULL argument");
    json_error_t e;
    /* Duplicate keys are refused: which of two "units" Keras meant cannot be known. */
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    if (!j)
        return sn_errorf(SN_ERR_FORMAT, "%s is not valid JSON: %s at line %d, column %d",
                         shown ? shown : "text", e.text, e.line, e.column);
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
