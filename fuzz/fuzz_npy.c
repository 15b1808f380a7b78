/* NumPy .npy bytes (sn_npy_load_memory, and the same bytes through sn_npy_load on a file):
 * a tensor whose size is what its header says, or an error; both paths agree; never crash or
 * allocate more than the bytes can fill (the header is checked against the length first). */
#include <string.h>

#include "fuzz_util.h"
#include "sinter/data.h"

static size_t nbytes(const sn_tensor *t) {
    return (size_t)sn_tensor_numel(t) * sn_dtype_size(sn_tensor_dtype(t));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sn_tensor *a = NULL, *b = NULL;
    sn_status sa = sn_npy_load_memory(data, size, "fuzz.npy", &a);
    sn_status sb = sn_npy_load(fuzz_file(data, size), &b);
    if ((sa == SN_OK) != (sb == SN_OK)) abort(); /* memory and file readers disagree */
    if ((sa != SN_OK && a) || (sb != SN_OK && b)) abort(); /* a failure leaves *out NULL */
    if (a && b) {
        if (sn_tensor_dtype(a) != sn_tensor_dtype(b) ||
            !sn_shape_equal(sn_tensor_shape(a), sn_tensor_shape(b)) ||
            memcmp(sn_tensor_cdata(a), sn_tensor_cdata(b), nbytes(a)) != 0)
            abort();
        if (nbytes(a) > size) abort(); /* no element without its bytes in the input */
    }
    sn_tensor_free(a);
    sn_tensor_free(b);
    return 0;
}
