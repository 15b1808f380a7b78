/* .keras archives: the fuzzer's bytes as a .keras file (seeds: archives written by
 * sn_keras_archive_write with a config, metadata and Keras 3 weights). Runs libzip's reader
 * with its consistency check and sinter's member limits and reads (sn_keras_archive_read),
 * then jansson on the JSON members (sn_json_parse). libzip and jansson are not instrumented:
 * coverage counts sinter's side.
 *
 * The weights member is not loaded here. The HDF5 loader behind it is fuzz_weights_h5's
 * target; run on mutated members, HDF5 1.10 itself asks malloc for sizes read from corrupt
 * metadata (8 EB in H5C_protect, an ASan abort; a NULL and an HDF5 error in a normal build)
 * and keeps internal objects after some failed reads, with the path-based loader as much as
 * with the in-memory image. Those are HDF5's, and would drown this target's findings. */
#include "fuzz_util.h"
#include "io/keras_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sn_keras_archive a;
    if (sn_keras_archive_read(fuzz_file(data, size), &a) != SN_OK) return 0;
    if (!a.config || a.config[a.config_len] != 0) abort(); /* config.json, NUL-terminated */
    if (a.metadata && a.metadata[a.metadata_len] != 0) abort();
    json_t *j = NULL;
    if (sn_json_parse(a.config, a.config_len, "config.json", &j) == SN_OK) json_decref(j);
    if (a.metadata && sn_json_parse(a.metadata, a.metadata_len, "metadata.json", &j) == SN_OK)
        json_decref(j);
    sn_keras_archive_free(&a);
    return 0;
}
