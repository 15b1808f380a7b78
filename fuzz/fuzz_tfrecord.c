/* TFRecord framing and the (image, label) dataset on top of it. The first input byte picks
 * the form: bit 0 set = gzip-compress the rest (a valid gzip stream, so the framing behind it
 * is what gets explored). The rest is the file. Every record is read until the end or an
 * error; then the same file is read as a dataset of 2x2 u8 images with int64 labels. */
#include <string.h>

#include "fuzz_util.h"
#include "sinter/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t *body = data + 1;
    size_t n = size - 1;
    uint8_t *gz = NULL;
    if (data[0] & 1) {
        gz = fuzz_gzip(body, n, &n);
        body = gz;
    }
    const char *path = fuzz_file(body, n);
    free(gz);

    sn_tfrecord_reader *r = NULL;
    if (sn_tfrecord_open(&r, path) == SN_OK) {
        for (int i = 0; i < 1000; i++) {
            const uint8_t *rec = NULL;
            size_t len = 0;
            bool end = false;
            if (sn_tfrecord_read(r, &rec, &len, &end) != SN_OK || end) break;
            volatile uint8_t x = 0;
            for (size_t k = 0; k < len; k++) x ^= rec[k]; /* the whole record is readable */
            (void)x;
        }
        sn_tfrecord_close(r);
    }

    sn_tfrecord_image_spec spec = sn_tfrecord_image_spec_defaults();
    spec.image_shape.dim[0] = 2;
    spec.image_shape.dim[1] = 2;
    sn_dataset *ds = NULL;
    const char *paths[1] = {path};
    if (sn_dataset_from_tfrecord_images(&ds, paths, 1, &spec) == SN_OK) {
        for (int i = 0; i < 100; i++) {
            sn_tensor *el[2];
            bool end = false;
            if (sn_dataset_next(ds, el, &end) != SN_OK || end) break;
            if (sn_tensor_numel(el[0]) != 4 || sn_tensor_numel(el[1]) != 1) abort();
        }
        sn_dataset_free(ds);
    }
    return 0;
}
