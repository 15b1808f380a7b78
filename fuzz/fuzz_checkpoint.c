/* The checkpoint container (src/io/checkpoint_io.c): the fuzzer's bytes as a checkpoint file,
 * read by sn_ckpt_read as `sinter train --checkpoint-dir` reads the newest file of its folder.
 * Seeds: real checkpoints written by sn_ckpt_write (every item type, scalars and 2-D arrays,
 * strings), sealed by their header (length and CRC-32 of the whole file), and the inputs that
 * crashed HDF5 before the header existed (regress-*). A read either fails with a status or
 * returns items whose sizes agree with their shapes and types, each findable by its name.
 *
 * Almost every mutation breaks the header's CRC, so the reader refuses it before HDF5 opens
 * the file: that is the promise checked here. With SN_FUZZ_CKPT_SEAL=1 the harness seals
 * every input first (sn_ckpt_seal_fd), as a deliberately crafted file would be, so HDF5
 * 1.10.8's parser sees the mutated bytes: a crash then is HDF5's (docs/reliability.md), and
 * that mode is not part of CI. HDF5 itself is not instrumented. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "io/checkpoint_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    const char *seal = getenv("SN_FUZZ_CKPT_SEAL");
    if (seal && *seal == '1' && size >= SN_CKPT_USERBLOCK) {
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0 || sn_ckpt_seal_fd(fd, path) != SN_OK) abort();
        close(fd);
    }
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
