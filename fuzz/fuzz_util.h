/* Shared by the fuzz targets: hand the fuzzer's bytes to a reader that takes a path.
 *
 * sinter's readers open files by name (zlib's gzopen, HDF5's H5Fopen), so each input is
 * written to one file per process, in /dev/shm (memory) when there is one, and removed at
 * exit. Not a memfd's /proc/self/fd/N: HDF5 resolves the real path of every file it opens,
 * and a memfd has none (H5Fopen fails before reading a byte). */
#ifndef SN_FUZZ_UTIL_H
#define SN_FUZZ_UTIL_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

static char fuzz_path_[256];

static inline void fuzz_remove_file_(void) { unlink(fuzz_path_); }

/* Writes n bytes to the process's input file and returns its path (static storage). */
static inline const char *fuzz_file(const uint8_t *data, size_t n) {
    static int fd = -1;
    static pid_t owner;
    if (fd < 0 || owner != getpid()) { /* fork mode: each child writes its own file */
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_path_, sizeof fuzz_path_, "%s/sn_fuzz_%ld", dir, (long)getpid());
        fd = open(fuzz_path_, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) {
            perror(fuzz_path_);
            abort();
        }
        owner = getpid();
        atexit(fuzz_remove_file_);
    }
    if (ftruncate(fd, 0) != 0 || (n && pwrite(fd, data, n, 0) != (ssize_t)n)) {
        perror("fuzz_file: write");
        abort();
    }
    return fuzz_path_;
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
