/* Whole-file writes: temporary file, fsync, rename, folder fsync (atomic_file.h). Written
 * with open/write/fsync rather than stdio, so that the errno of the call that failed is the
 * one reported (fclose after a failed fwrite may overwrite it). */
#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The folder part of `path` ("." when it has none), malloc'd. */
static char *dir_of(const char *path) {
    char *d = sn_strdup(path);
    if (!d) return NULL;
    char *slash = strrchr(d, '/');
    if (!slash) {
        free(d);
        return sn_strdup(".");
    }
    *(slash == d ? slash + 1 : slash) = '\0';
    return d;
}

static sn_status write_all(int fd, const void *data, size_t n) {
    const unsigned char *p = data;
    while (n) {
        /* 1 GiB pieces: Linux writes at most 0x7ffff000 bytes per call anyway. */
        size_t chunk = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        ssize_t w = write(fd, p, chunk);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return SN_ERR_IO;
        if (w == 0) {
            errno = ENOSPC; /* a regular file that takes no bytes is full */
            return SN_ERR_IO;
        }
        p += w;
        n -= (size_t)w;
    }
    return SN_OK;
}

sn_status sn_atomic_write(const char *path, const char *what, const void *data, size_t n,
                          sn_atomic_hook hook) {
    if (!what) what = "file";
    if (!path || !*path || (!data && n))
        return sn_errorf(SN_ERR_INVALID, "cannot write %s: %s", what,
                         !path || !*path ? "no file name given" : "no data");
    struct stat sb;
    bool existed = stat(path, &sb) == 0;
    const char *kept = existed ? " (the existing file is unchanged)" : "";
    size_t tl = strlen(path) + 32;
    char *tmp = sn_malloc(tl), *dir = dir_of(path);
    if (!tmp || !dir) {
        free(tmp);
        free(dir);
        return sn_errorf(SN_ERR_NOMEM, "cannot write %s '%s': out of memory", what, path);
    }
    snprintf(tmp, tl, "%s.tmp%ld", path, (long)getpid());
    sn_status st = SN_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        st = sn_errorf(SN_ERR_IO, "cannot write %s '%s': %s%s", what, path, strerror(errno), kept);
        goto out;
    }
    if (write_all(fd, data, n) != SN_OK) {
        st = sn_errorf(SN_ERR_IO, "cannot write %s '%s': %s%s", what, path, strerror(errno),
                       kept);
        goto fail;
    }
    if (hook) hook("written");
    if (fsync(fd) != 0) {
        st = sn_errorf(SN_ERR_IO, "cannot write %s '%s': syncing it to disk failed: %s%s", what,
                       path, strerror(errno), kept);
        goto fail;
    }
    /* close can report a deferred write error (NFS): the bytes are not known to be there. */
    int rc = close(fd);
    fd = -1;
    if (rc != 0) {
        st = sn_errorf(SN_ERR_IO, "cannot write %s '%s': %s%s", what, path, strerror(errno), kept);
        goto fail;
    }
    if (hook) hook("synced");
    if (rename(tmp, path) != 0) {
        st = sn_errorf(SN_ERR_IO, "cannot write %s '%s': renaming '%s' over it failed: %s%s",
                       what, path, tmp, strerror(errno), kept);
        goto fail;
    }
    if (hook) hook("renamed");
    /* The folder's entry must outlive a power cut as the bytes do. The file is in place by
     * now: a failure here says so rather than claiming nothing was written. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0)
        st = sn_errorf(SN_ERR_IO, "%s '%s' was written, but syncing its folder '%s' failed: %s",
                       what, path, dir, strerror(errno));
    if (dfd >= 0) close(dfd);
    goto out;
fail:
    if (fd >= 0) close(fd);
    unlink(tmp); /* best effort: the error that matters is recorded */
out:
    free(tmp);
    free(dir);
    return st;
}

sn_status sn_write_file_atomic(const char *path, const void *data, size_t n) {
    return sn_atomic_write(path, "file", data, n, NULL);
}
