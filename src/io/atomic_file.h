/* Internal to io: every file sinter writes whole (checkpoints, weights, .keras archives, model
 * JSON) goes to disk through sn_atomic_write, so there is one place where a full disk, a file
 * size limit or a vanished folder becomes a message, and one crash-safe sequence:
 *
 *   <path>.tmp<pid> beside the target (the rename must stay on one file system), every byte
 *   written with write(2), fsync, close, rename over <path>, fsync of the folder.
 *
 * On any failure before the rename the temporary file is removed and <path> is untouched (an
 * existing file keeps every byte). The message is one line:
 *   "cannot write checkpoint 'ckpt/ckpt-000005.h5': No space left on device"
 * followed by "(the existing file is unchanged)" when <path> existed. A crash leaves at worst
 * a stale <path>.tmp<pid>, never a torn <path>. */
#ifndef SN_IO_ATOMIC_FILE_H
#define SN_IO_ATOMIC_FILE_H

#include "core/core.h"

/* Called between the steps with "written" (all bytes in the temporary file, before fsync),
 * "synced" (before the rename) and "renamed" (before the folder's fsync). For the
 * checkpoint writer's kill tests; NULL elsewhere. */
typedef void (*sn_atomic_hook)(const char *phase);

/* Writes `n` bytes to `path` as above. `what` names the file in the message ("checkpoint",
 * "weights file", ".keras archive"). SN_ERR_IO on every OS failure, with strerror's text. */
sn_status sn_atomic_write(const char *path, const char *what, const void *data, size_t n,
                          sn_atomic_hook hook);

/* sn_atomic_write for a file with no better name ("file"). */
sn_status sn_write_file_atomic(const char *path, const void *data, size_t n);

#endif
