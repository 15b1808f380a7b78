/* sinter — status codes and error text.
 *
 * Every call a user can make fail returns an sn_status. On failure the library also keeps a
 * message for the calling thread (sn_last_error) that names what was wrong: the file, the
 * value and what was expected. The library never prints and never exits. */
#ifndef SINTER_STATUS_H
#define SINTER_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sn_status {
    SN_OK = 0,
    SN_ERR_INVALID,     /* a bad argument: NULL handle, bad flag, out-of-range value */
    SN_ERR_SHAPE,       /* shapes or dtypes that do not fit together */
    SN_ERR_NOMEM,       /* an allocation failed */
    SN_ERR_IO,          /* a file could not be opened, read or written */
    SN_ERR_FORMAT,      /* a file's contents are corrupt or not what was expected */
    SN_ERR_NOT_FOUND,   /* an unknown name: device, op, layer, model preset */
    SN_ERR_UNSUPPORTED, /* valid, but not implemented on this backend or build */
    SN_ERR_BACKEND,     /* a foreign library (oneDNN, BLAS, HDF5, CUDA) reported failure */
    SN_ERR_DIST,        /* a distributed failure: MPI error, dead worker */
    SN_ERR_NUMERIC,     /* NaN or Inf where a finite number was required */
    SN_ERR_STATE,       /* a call made in the wrong order (fit before compile, ...) */
} sn_status;

/* The message of the last failure on this thread; "" when none. Valid until the next failing
 * call on the same thread. */
const char *sn_last_error(void);

/* A short constant name for a status ("SN_ERR_SHAPE"). */
const char *sn_status_name(sn_status s);

#ifdef __cplusplus
}
#endif
#endif
