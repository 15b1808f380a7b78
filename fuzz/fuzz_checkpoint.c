/* The checkpoint container (src/io/checkpoint_io.c): the fuzzer's bytes as a checkpoint file,
 * read by sn_ckpt_read as `sinter train --checkpoint-dir` reads the newest file of its folder.
 * Seeds: real checkpoints written by sn_ckpt_write (every item type, scalars and 2-D arrays,
 * strings). HDF5's own parser is not instrumented; the coverage is sinter's walk of the items,
 * its type and shape checks and the CRC-32C. A read either fails with a status or returns
 * items whose sizes agree with their shapes and types, each findable by its name. */
#include <stdio.h>
#include <string.h>

#include "fuzz_util.h"
#include "io/checkpoint_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    int n = 0;
    sn_ckpt_item *items = NULL;
    sn_status s = sn_ckpt_read(path, "sinter-checkpoint", 1 << 20, &n, &items);
    if (getenv("SN_FUZZ_DEBUG"))
        fprintf(stderr, "read: %s %s\n", sn_status_name(s), s != SN_OK ? sn_last_error() : "");
    if (s != SN_OK) {
        if (items || n) abort(); /* nothing handed out on failure */
        return 0;
    }
    for (int i = 0; i < n; i++) {
        const sn_ckpt_item *it = &items[i];
        if (!it->name || sn_ckpt_find(n, items, it->name) == NULL) abort();
        int64_t numel = 1;
        for (int d = 0; d < it->shape.ndim; d++) {
            if (it->shape.dim[d] < 0) abort();
            numel *= it->shape.dim[d];
        }
        if (numel && !it->data) abort();
        if (it->type == SN_CKPT_STR) {
            for (int64_t k = 0; k < numel; k++) /* every string readable and terminated */
                if (((char **)it->data)[k] && strlen(((char **)it->data)[k]) > size) abort();
        } else if (numel) { /* touch every byte: ASan flags a buffer shorter than the shape */
            volatile uint8_t acc = 0;
            const uint8_t *p = it->data;
            size_t bytes = (size_t)numel * sn_ckpt_type_size(it->type);
            for (size_t k = 0; k < bytes; k++) acc ^= p[k];
            (void)acc;
        }
    }
    sn_ckpt_items_free(n, items);
    return 0;
}
