/* Internal to io (used by nn's model-file code): Keras model files at the level of bytes and
 * JSON documents, never model objects.
 *
 *   - a Keras 3 `.keras` archive is a zip of config.json, metadata.json and model.weights.h5
 *     (keras/src/saving/saving_lib.py); libzip reads and writes it;
 *   - JSON (config.json, metadata.json, model.to_json() files) is parsed by jansson, strictly
 *     (RFC 8259, no duplicate keys, no NaN), with the line and column of a syntax error;
 *   - files are written atomically (io/atomic_file.h).
 * The weights inside an archive are an HDF5 file image in memory; sn_weights_load_h5_image /
 * sn_weights_save_h5_image (sinter/io.h) read and write it without a temporary file. */
#ifndef SN_IO_KERAS_FILE_H
#define SN_IO_KERAS_FILE_H

#include <jansson.h>
#include <stdbool.h>

#include "core/core.h"
#include "io/atomic_file.h" /* sn_write_file_atomic, for model JSON files */

/* The members of a .keras archive, each a malloc'd buffer (NUL-terminated for the JSON
 * ones) and its length; a member that is absent is NULL with length 0. */
typedef struct sn_keras_archive {
    char *config;
    size_t config_len;
    char *metadata;
    size_t metadata_len;
    void *weights;
    size_t weights_len;
} sn_keras_archive;

/* Reads the archive at `path`. Not a zip, a damaged zip, or a zip without config.json is
 * SN_ERR_FORMAT naming the path and what was found; a member larger than the limits below is
 * SN_ERR_FORMAT too (a zip bomb must not exhaust memory). Free with sn_keras_archive_free. */
#define SN_KERAS_MAX_JSON_BYTES ((size_t)64 << 20)
#define SN_KERAS_MAX_WEIGHTS_BYTES ((size_t)16 << 30)
sn_status sn_keras_archive_read(const char *path, sn_keras_archive *out);
void sn_keras_archive_free(sn_keras_archive *a);
/* Writes the members that are non-NULL (stored uncompressed, as Keras stores them) to `path`
 * atomically. */
sn_status sn_keras_archive_write(const char *path, const sn_keras_archive *a);

/* True when the file starts with a zip signature (a .keras archive, whatever its name). */
bool sn_file_is_zip(const char *path);

/* Parses `len` bytes of JSON; `shown` names the text in messages ("config.json in
 * 'm.keras'"). A syntax error is SN_ERR_FORMAT with jansson's message, line and column.
 * The caller owns *out (json_decref). */
sn_status sn_json_parse(const char *text, size_t len, const char *shown, json_t **out);
/* Reads and parses a JSON file (at most SN_KERAS_MAX_JSON_BYTES). */
sn_status sn_json_read_file(const char *path, json_t **out);
/* Serialises `j` (indent 0: one line, Python json.dumps' separators) into a malloc'd string
 * the caller frees; NULL with the error set when out of memory. */
char *sn_json_dump(const json_t *j, int indent);

#endif
