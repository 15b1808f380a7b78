/* Internal HDF5 helpers for the io layer: one lock around all of sinter's HDF5 use, a check
 * macro for every HDF5 call, a generic close, and string attributes in the forms that h5py
 * (and therefore Keras) writes and reads. Only src/io/ includes this. */
#ifndef SN_IO_H5_UTIL_H
#define SN_IO_H5_UTIL_H

#include <hdf5.h>

#include "core/core.h"

/* Debian's libhdf5 is the serial, non-thread-safe build: every use of HDF5 in sinter takes
 * this lock. sn_h5_lock also turns off HDF5's automatic printing of error stacks, because
 * the library never prints: failures become sn_status messages instead. */
void sn_h5_lock(void);
void sn_h5_unlock(void);

/* Records one line from HDF5's error stack: the innermost frame's text without HDF5's
 * record of descriptors and pointers, strerror of the errno HDF5 saw, and the call and its
 * source line at the end: "unable to open file: No such file or directory (HDF5 H5Fopen at
 * src/io/weights_h5.c:902)". Returns SN_ERR_IO when HDF5 saw an errno, else SN_ERR_BACKEND.
 * Used through SN_H5. */
sn_status sn_h5_fail(const char *call, const char *file, int line);

/* Wraps one HDF5 call (which return a negative hid_t/herr_t/htri_t on failure). The enclosing
 * function declares `sn_status st` and a cleanup label `done`. */
#define SN_H5(expr)                                                                            \
    do {                                                                                       \
        if ((expr) < 0) {                                                                      \
            st = sn_h5_fail(#expr, __FILE__, __LINE__);                                        \
            goto done;                                                                         \
        }                                                                                      \
    } while (0)

/* Jumps to `done` with st = the status of `expr` when it fails. */
#define SN_H5_TRY(expr)                                                                        \
    do {                                                                                       \
        st = (expr);                                                                           \
        if (st != SN_OK) goto done;                                                            \
    } while (0)

/* Closes any HDF5 identifier (file, group, dataset, attribute, type, space, property list)
 * and sets it to H5I_INVALID_HID; ignores invalid ones. For cleanup paths, where a second
 * error would only hide the first: the result is deliberately not checked. */
void sn_h5_close(hid_t *id);

/* Writes a scalar variable-length UTF-8 string attribute (what h5py writes for a Python str,
 * e.g. Keras 3's "name" metadata). */
sn_status sn_h5_attr_vlen_str(hid_t obj, const char *name, const char *value);
/* Writes fixed-length, NUL-padded ASCII strings (what h5py writes for numpy bytes arrays,
 * e.g. Keras 2's layer_names and weight_names). n == 0 writes an empty float64 array, which
 * is what h5py writes for Keras's empty weight_names list. scalar != 0 writes one string as
 * a scalar (Keras 2's backend and keras_version). */
sn_status sn_h5_attr_fixed_strs(hid_t obj, const char *name, int n, const char *const *values,
                                int scalar);

/* Reads a string attribute, scalar or 1-D, fixed or variable length. On success *out is an
 * array of *n malloc'd strings (free with sn_h5_free_strs); an attribute with no elements,
 * of any type, gives *n = 0. A non-empty attribute that is not a string is SN_ERR_FORMAT. */
sn_status sn_h5_read_strs(hid_t obj, const char *name, int *n, char ***out);
void sn_h5_free_strs(int n, char **strs);

/* 1 when `obj` has a link `name` (no path components), 0 when not. */
sn_status sn_h5_has_link(hid_t obj, const char *name, int *out);

#endif
