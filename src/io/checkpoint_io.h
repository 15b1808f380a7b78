/* Internal to src/io and its callers in nn: the checkpoint container. A checkpoint is a list of
 * named, typed arrays (variables, counters, history, callback state) in one HDF5 file; this
 * layer knows nothing of models. docs/checkpoints.md describes the file.
 *
 * Writing is atomic: the file is built in memory (HDF5's core driver), sealed, and written by
 * sn_atomic_write (io/atomic_file.h: a temporary file beside the target, fsync'ed, renamed
 * over it, the folder fsync'ed; on failure the temporary file is removed and an existing
 * target untouched). The seal is a header in HDF5's user block (the file's
 * first SN_CKPT_USERBLOCK bytes): magic, length of the file and a CRC-32 of everything after
 * the header. The reader checks it before HDF5 sees the file, so a torn or corrupted file is
 * SN_ERR_FORMAT and never reaches HDF5's parser; a CRC-32C over every item (name, type,
 * shape, bytes), the root attribute "crc32c", checks what HDF5 returns. */
#ifndef SN_IO_CHECKPOINT_IO_H
#define SN_IO_CHECKPOINT_IO_H

#include "core/core.h"

/* Bytes reserved before HDF5's superblock for the header (a power of two >= 512, as HDF5
 * requires). */
#define SN_CKPT_USERBLOCK 512

typedef enum sn_ckpt_type {
    SN_CKPT_F32 = 1,
    SN_CKPT_F64,
    SN_CKPT_I32,
    SN_CKPT_I64,
    SN_CKPT_U8,
    SN_CKPT_STR, /* data: a char ** of shape.dim[0] NUL-terminated strings (1-D only) */
} sn_ckpt_type;

typedef struct sn_ckpt_item {
    char *name;        /* "variables/dense/kernel", "fit/epoch": '/' makes HDF5 groups */
    sn_ckpt_type type;
    sn_shape shape;    /* ndim 0: a scalar */
    void *data;        /* write: the caller's; read: owned by the item array */
} sn_ckpt_item;

/* Writes items to `path` atomically (see above). `kind` is the root attribute "format"
 * ("sinter-checkpoint"). */
sn_status sn_ckpt_write(const char *path, const char *kind, int version, int n,
                        const sn_ckpt_item *items);
/* Reads every item of `path` after checking its header (length, whole-file CRC), then format,
 * version <= max_version and the items' checksum. *items (n of them) are freed with
 * sn_ckpt_items_free. A file that is torn, corrupted or not a checkpoint is SN_ERR_FORMAT
 * naming the path (a caller may fall back to an older one); an HDF5 file without the header
 * (checkpoint format 1, or not sinter's) is SN_ERR_UNSUPPORTED and is not opened; a file that
 * cannot be opened is SN_ERR_IO. */
/* A seam for tests, never set by the library or the `sinter` command: when set, every write
 * calls hook(N, PHASE, ctx), N the write's number in this process (1-based), at PHASE "data"
 * (half the items written), "sealed" (header written, before the fsync), "synced" (before the
 * rename) and "renamed" (before the folder's fsync). The test-only program
 * tests/sinter_hooked.c uses it to SIGKILL itself or to sleep inside a write. */
typedef void (*sn_ckpt_write_hook)(int write_no, const char *phase, void *ctx);
void sn_ckpt_set_write_hook(sn_ckpt_write_hook hook, void *ctx);

sn_status sn_ckpt_read(const char *path, const char *kind, int max_version, int *n,
                       sn_ckpt_item **items);
void sn_ckpt_items_free(int n, sn_ckpt_item *items);
/* Writes the header into the first SN_CKPT_USERBLOCK bytes of the open file fd: its length
 * and the CRC-32 of the bytes after the header (sn_ckpt_write seals its image in memory the
 * same way). fuzz_checkpoint's CRC-bypass mode uses it to hand HDF5 arbitrary sealed bytes. */
sn_status sn_ckpt_seal_fd(int fd, const char *path);
/* The item called name (NULL when absent). */
const sn_ckpt_item *sn_ckpt_find(int n, const sn_ckpt_item *items, const char *name);
size_t sn_ckpt_type_size(sn_ckpt_type t);

/* Checkpoints of a folder: files "<prefix>-<number>.h5", newest (largest number) first. *paths
 * (malloc'd strings) and *numbers are freed with sn_ckpt_list_free. A missing folder is an
 * empty list. */
sn_status sn_ckpt_list(const char *dir, const char *prefix, int *n, char ***paths,
                       int64_t **numbers);
void sn_ckpt_list_free(int n, char **paths, int64_t *numbers);
/* Creates dir (one level) when missing. */
sn_status sn_ckpt_mkdir(const char *dir);

#endif
