/* IDX through gzip: the fuzzer's bytes are the decompressed content, compressed here into a
 * valid gzip stream, so sinter's gzip path (zlib's gzread and the size checks behind it)
 * sees every header and body the fuzzer makes. */
#include "fuzz_util.h"
#include "sinter/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t gz_n = 0;
    uint8_t *gz = fuzz_gzip(data, size, &gz_n);
    sn_tensor *t = NULL;
    sn_status s = sn_idx_load(fuzz_file(gz, gz_n), &t);
    free(gz);
    if (s == SN_OK) {
        /* What came out is what went in: header, then the elements (byte-swapped). */
        size_t nb = (size_t)sn_tensor_numel(t) * sn_dtype_size(sn_tensor_dtype(t));
        size_t hdr = 4 + 4 * (size_t)sn_tensor_shape(t)->ndim;
        if (hdr + nb > size) abort();
        sn_tensor_free(t);
    } else if (t) {
        abort();
    }
    return 0;
}
