/* sn_model_load / sn_model_save (sinter/nn.h): Keras 3 `.keras` archives and model JSON
 * files, through io's archive and JSON plumbing (io/keras_file.h) and the config mapping of
 * model_config*.c. */
#include <string.h>
#include <time.h>

#include "io/keras_file.h"
#include "nn/keras/model_config.h"
#include "sinter/io.h"

/* The Keras version whose file format sinter reads and writes (metadata.json). */
#define SN_KERAS_FORMAT_VERSION "3.15.1"

/* "3.x.y" is read; Keras 2's and any later major's formats differ and are refused. */
static sn_status check_version(const char *v, const char *where) {
    int major = -1;
    if (sscanf(v, "%d", &major) != 1 || major != 3)
        return sn_errorf(SN_ERR_UNSUPPORTED, "%s: keras_version is \"%s\"; sinter reads the "
                         "Keras 3 format (3.x)%s", where, v,
                         major > 3 ? ": the file is newer than sinter knows"
                                   : ": re-save the model with Keras 3");
    return SN_OK;
}

static sn_status from_root(json_t *root, const char *shown, uint64_t seed, bool for_loading,
                           sn_model **out, sn_model_file_info *info) {
    if (!json_is_object(root))
        return sn_errorf(SN_ERR_FORMAT, "%s: the JSON is %s, expected a model config object",
                         shown, sn_cfg_type(root));
    /* Keras 2's to_json adds keras_version and backend beside the model. */
    const json_t *kv = json_object_get(root, "keras_version");
    if (kv) {
        if (!json_is_string(kv))
            return sn_errorf(SN_ERR_FORMAT, "%s: keras_version is %s, expected a string", shown,
                             sn_cfg_type(kv));
        SN_TRY(check_version(json_string_value(kv), shown));
        json_object_del(root, "keras_version");
        json_object_del(root, "backend");
    }
    sn_status st = sn_model_from_config(root, seed, for_loading, out, info);
    return st == SN_OK ? SN_OK : sn_error_context(st, "%s", shown);
}

static sn_status load_archive(const char *path, uint64_t seed, sn_model **out,
                              sn_model_file_info *info) {
    sn_keras_archive a;
    SN_TRY(sn_keras_archive_read(path, &a));
    char shown[600];
    json_t *meta = NULL, *root = NULL;
    sn_model *m = NULL;
    sn_status st = SN_OK;
    if (a.metadata) {
        snprintf(shown, sizeof shown, "metadata.json in '%s'", path);
        st = sn_json_parse(a.metadata, a.metadata_len, shown, &meta);
        const json_t *kv = st == SN_OK ? json_object_get(meta, "keras_version") : NULL;
        if (st == SN_OK && kv && !json_is_string(kv))
            st = sn_errorf(SN_ERR_FORMAT, "%s: keras_version is %s, expected a string", shown,
                           sn_cfg_type(kv));
        if (st == SN_OK && kv) {
            st = check_version(json_string_value(kv), shown);
            snprintf(info->keras_version, sizeof info->keras_version, "%s", json_string_value(kv));
        }
    }
    snprintf(shown, sizeof shown, "config.json in '%s'", path);
    if (st == SN_OK) st = sn_json_parse(a.config, a.config_len, shown, &root);
    /* The archive's weights overwrite every variable: no initialiser runs. */
    if (st == SN_OK) st = from_root(root, shown, seed, true, &m, info);
    if (st == SN_OK && !a.weights)
        st = sn_errorf(SN_ERR_FORMAT, "'%s' has no model.weights.h5 (a .keras archive holds "
                       "config.json, metadata.json and model.weights.h5)", path);
    snprintf(shown, sizeof shown, "model.weights.h5 in '%s'", path);
    if (st == SN_OK) st = sn_model_load_weights_image(m, a.weights, a.weights_len, shown);
    json_decref(meta);
    json_decref(root);
    sn_keras_archive_free(&a);
    if (st != SN_OK) {
        sn_model_free(m);
        return st;
    }
    info->has_weights = true;
    *out = m;
    return SN_OK;
}

sn_status sn_model_load(const char *path, uint64_t seed, sn_model **out, sn_model_file_info *info) {
    if (!path || !out) return sn_errorf(SN_ERR_INVALID, "sn_model_load: %s is NULL", !path ? "path" : "out");
    *out = NULL;
    sn_model_file_info local;
    if (!info) info = &local;
    *info = (sn_model_file_info){.compile = sn_compile_defaults()};
    if (sn_file_is_zip(path)) return load_archive(path, seed, out, info);
    json_t *root = NULL;
    SN_TRY(sn_json_read_file(path, &root));
    char shown[600];
    snprintf(shown, sizeof shown, "'%s'", path);
    sn_status st = from_root(root, shown, seed, false, out, info);
    json_decref(root);
    return st;
}

sn_status sn_model_from_json(const char *json, size_t len, uint64_t seed, sn_model **out,
                             sn_model_file_info *info) {
    if (!json || !out) return sn_errorf(SN_ERR_INVALID, "sn_model_from_json: NULL argument");
    *out = NULL;
    sn_model_file_info local;
    if (!info) info = &local;
    *info = (sn_model_file_info){.compile = sn_compile_defaults()};
    json_t *root = NULL;
    SN_TRY(sn_json_parse(json, len, "the model JSON", &root));
    sn_status st = from_root(root, "the model JSON", seed, false, out, info);
    json_decref(root);
    return st;
}

sn_status sn_model_to_json(sn_model *m, char **json) {
    if (!json) return sn_errorf(SN_ERR_INVALID, "sn_model_to_json: json is NULL");
    *json = NULL;
    json_t *root = sn_model_to_config(m);
    if (!root) return sn_error_context(SN_ERR_INVALID, "writing the config of model '%s'",
                                       m ? m->name : "(null)");
    char *s = sn_json_dump(root, 0);
    json_decref(root);
    if (!s) return SN_ERR_NOMEM;
    *json = s;
    return SN_OK;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static sn_status save_archive(sn_model *m, const char *path, const char *config) {
    char meta[128], date[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%d@%H:%M:%S", &tm);
    snprintf(meta, sizeof meta, "{\"keras_version\": \"%s\", \"date_saved\": \"%s\"}",
             SN_KERAS_FORMAT_VERSION, date);
    sn_keras_archive a = {.config = (char *)config, .config_len = strlen(config),
                          .metadata = meta, .metadata_len = strlen(meta)};
    SN_TRY(sn_model_save_weights_image(m, &a.weights, &a.weights_len));
    sn_status st = sn_keras_archive_write(path, &a);
    free(a.weights);
    return st;
}

sn_status sn_model_save(sn_model *m, const char *path) {
    if (!m || !path) return sn_errorf(SN_ERR_INVALID, "sn_model_save: %s is NULL", !m ? "model" : "path");
    bool keras = ends_with(path, ".keras"), json = ends_with(path, ".json");
    if (!keras && !json)
        return sn_errorf(SN_ERR_INVALID, "saving model '%s' to '%s': expected a path ending in "
                         ".keras (architecture, compile settings and weights) or .json "
                         "(architecture); for weights alone use .weights.h5 "
                         "(sn_model_save_weights)", m->name, path);
    /* The char_transformer presets' composites have no Keras class: their Keras twin is
     * written instead (keras_twin.c), which Keras opens. */
    sn_model *twin = NULL;
    SN_TRY(sn_model_keras_twin(m, &twin));
    if (twin) {
        sn_status ts = sn_model_save(twin, path);
        sn_model_free(twin);
        return ts;
    }
    char *config = NULL;
    sn_status st = sn_model_to_json(m, &config);
    if (st == SN_OK) {
        st = keras ? save_archive(m, path, config)
                   : sn_atomic_write(path, "model JSON", config, strlen(config), NULL);
    }
    free(config);
    /* A failed write already says "cannot write ... '<path>': <why>". */
    if (st == SN_ERR_IO) return st;
    if (st != SN_OK) return sn_error_context(st, "saving model '%s' to '%s'", m->name, path);
    return SN_OK;
}
