/* IDX files as they come (plain, or gzip when the bytes say so): sn_idx_load must return a
 * tensor whose size matches its dims, or an error; never crash, hang or allocate more than
 * the file can fill. */
#include "fuzz_util.h"
#include "sinter/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sn_tensor *t = NULL;
    if (sn_idx_load(fuzz_file(data, size), &t) == SN_OK) {
        /* Every byte of the tensor must be readable (ASan checks the range). */
        const uint8_t *p = sn_tensor_cdata(t);
        size_t nb = (size_t)sn_tensor_numel(t) * sn_dtype_size(sn_tensor_dtype(t));
        volatile uint8_t x = 0;
        for (size_t i = 0; i < nb; i++) x ^= p[i];
        (void)x;
        sn_tensor_free(t);
    } else if (t) {
        abort(); /* a failed load must leave *out NULL */
    }
    return 0;
}
