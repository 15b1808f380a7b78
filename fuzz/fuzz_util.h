/* Shared by the fuzz targets: hand the fuzzer's bytes to a reader that takes a path.
 *
 * sinter's readers open files by name (zlib's gzopen, HDF5's H5Fopen), so each input is
 * written to one memory file (memfd, never on disk) and read back through /proc/self/fd/N:
 * no temporary files pile up, and a run is not slowed by the disk. */
#ifndef SN_FUZZ_UTIL_H
#define SN_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

/* Writes n bytes to the process's memory file and returns its path (static storage). */
static inline const char *fuzz_file(const uint8_t *data, size_t n) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("sn_fuzz", 0);
        if (fd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || (n && pwrite(fd, data, n, 0) != (ssize_t)n)) {
        perror("fuzz_file: write");
        abort();
    }
    return path;
}

/* gzip-compresses n bytes into a new buffer (free()); *out_n its size. The gzip framing is
 * then always valid, so the fuzzer explores the reader behind it, not zlib's checksums. */
static inline uint8_t *fuzz_gzip(const uint8_t *data, size_t n, size_t *out_n) {
    z_stream z = {0};
    if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) abort();
    size_t cap = deflateBound(&z, (uLong)n) + 32;
    uint8_t *out = malloc(cap);
    if (!out) abort();
    z.next_in = (Bytef *)(uintptr_t)data;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) abort();
    *out_n = z.total_out;
    deflateEnd(&z);
    return out;
}

#endif
