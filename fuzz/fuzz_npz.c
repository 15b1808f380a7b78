/* .npz archives (libzip underneath, then the .npy reader): arrays "x" and "y" load or fail
 * with *out NULL; never crash, leak or trust a member's declared size beyond its bytes. */
#include "fuzz_util.h"
#include "sinter/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    const char *names[] = {"x", "y", "x_train"};
    for (int i = 0; i < 3; i++) {
        bool has = false;
        sn_status hs = sn_npz_has(path, names[i], &has);
        sn_tensor *t = NULL;
        sn_status s = sn_npz_load(path, names[i], &t);
        if (s != SN_OK && t) abort();
        if (s == SN_OK && (hs != SN_OK || !has)) abort(); /* loaded what "has" denies */
        if (t) {
            const uint8_t *p = sn_tensor_cdata(t);
            size_t nb = (size_t)sn_tensor_numel(t) * sn_dtype_size(sn_tensor_dtype(t));
            volatile uint8_t x = 0;
            for (size_t k = 0; k < nb; k++) x ^= p[k];
            (void)x;
        }
        sn_tensor_free(t);
    }
    return 0;
}
