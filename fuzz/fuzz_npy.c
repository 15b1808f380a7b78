/* NumPy files. The first input byte picks the form: bit 0 clear = the rest is a .npy file
 * (sn_npy_load_memory); set = the rest is an .npz archive (a zip, written to a file) whose
 * member "x" is read (sn_npz_has, sn_npz_load). A load fails, leaving *out NULL, or gives a
 * tensor whose every byte is readable. */
#include "fuzz_util.h"
#include "sinter/data.h"

static void touch(sn_tensor *t) {
    const uint8_t *p = sn_tensor_cdata(t);
    size_t nb = (size_t)sn_tensor_numel(t) * sn_dtype_size(sn_tensor_dtype(t));
    volatile uint8_t x = 0;
    for (size_t i = 0; i < nb; i++) x ^= p[i];
    (void)x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    sn_tensor *t = NULL;
    sn_status s;
    if (data[0] & 1) {
        const char *path = fuzz_file(data + 1, size - 1);
        bool has = false;
        (void)sn_npz_has(path, "x", &has);
        s = sn_npz_load(path, "x", &t);
    } else {
        s = sn_npy_load_memory(data + 1, size - 1, "fuzz.npy", &t);
    }
    if (getenv("SN_FUZZ_DEBUG"))
        fprintf(stderr, "load: %s %s\n", sn_status_name(s), s != SN_OK ? sn_last_error() : "");
    if (s == SN_OK) {
        touch(t);
        sn_tensor_free(t);
    } else if (t) {
        abort();
    }
    return 0;
}
