/* HDF5 helpers shared by the io layer: lock, error capture, close, string attributes. */
#include "io/h5_util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t h5_mutex = PTHREAD_MUTEX_INITIALIZER;

void sn_h5_lock(void) {
    pthread_mutex_lock(&h5_mutex);
    /* Per call, not once: another library in the process may have turned printing back on. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void sn_h5_unlock(void) { pthread_mutex_unlock(&h5_mutex); }

typedef struct {
    char desc[512];
    char minor[128];
    int err; /* the innermost errno HDF5 recorded; 0 when none */
} h5_err_walk;

/* Walking downward ends at the innermost frame, where HDF5 says what actually went wrong
 * ("unable to open file: name = 'x', errno = 2, ..."): keep the last frame seen, and the
 * last errno any frame quotes. */
static herr_t h5_err_cb(unsigned n, const H5E_error2_t *e, void *data) {
    h5_err_walk *w = data;
    (void)n;
    snprintf(w->desc, sizeof w->desc, "%s", e->desc ? e->desc : "");
    w->minor[0] = '\0';
    if (H5Eget_msg(e->min_num, NULL, w->minor, sizeof w->minor) < 0) w->minor[0] = '\0';
    const char *p = e->desc ? strstr(e->desc, "errno = ") : NULL;
    if (p) {
        int v = atoi(p + 8);
        if (v > 0) w->err = v;
    }
    return 0;
}

/* HDF5's innermost text is often a record: "file write failed: time = Tue Dec  1 ...\n,
 * filename = 'x', file descriptor = 3, errno = 28, error message = '...', buf = 0x55..,
 * total write size = 96, ...". A user needs its head ("file write failed") and the errno;
 * the record (pointers, descriptors, offsets, a line break) is for HDF5's developers. The
 * head ends at the last ':' or ',' before the first " = ". */
static void h5_desc_head(char *desc) {
    char *eq = strstr(desc, " = ");
    if (!eq) return;
    char *cut = NULL;
    for (char *p = desc; p < eq; p++)
        if (*p == ':' || *p == ',') cut = p;
    if (cut) *cut = '\0';
    else *desc = '\0'; /* nothing but the record */
}

/* __FILE__ is absolute under CMake; a message reads better from src/. */
static const char *short_file(const char *file) {
    const char *s = strstr(file, "src/");
    return s ? s : file;
}

sn_status sn_h5_fail(const char *call, const char *file, int line) {
    h5_err_walk w = {{0}, {0}, 0};
    if (H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, h5_err_cb, &w) < 0) w.desc[0] = '\0';
    H5Eclear2(H5E_DEFAULT);
    const char *fn = call;
    char name[64];
    /* "g = H5Gopen2(f, ...)" -> "H5Gopen2": the call's name, not the whole expression. */
    const char *h = strstr(call, "H5");
    if (h) {
        size_t k = 0;
        while (h[k] && h[k] != '(' && k + 1 < sizeof name) { name[k] = h[k]; k++; }
        name[k] = '\0';
        fn = name;
    }
    h5_desc_head(w.desc);
    char what[512];
    sn_foreign_text(what, sizeof what, w.desc[0] ? w.desc : w.minor);
    if (!what[0]) snprintf(what, sizeof what, "failed");
    /* An OS error is the user's to fix (disk, permissions, a missing file): SN_ERR_IO, with
     * strerror's words; the call and the source line stay at the end, for bug reports. */
    if (w.err)
        return sn_errorf(SN_ERR_IO, "%s: %s (HDF5 %s at %s:%d)", what, strerror(w.err), fn,
                         short_file(file), line);
    return sn_errorf(SN_ERR_BACKEND, "%s (HDF5 %s at %s:%d)", what, fn, short_file(file), line);
}

void sn_h5_close(hid_t *id) {
    if (*id < 0) return;
    if (H5Iis_valid(*id) > 0) {
        switch (H5Iget_type(*id)) {
        case H5I_FILE: H5Fclose(*id); break;
        case H5I_GROUP: H5Gclose(*id); break;
        case H5I_DATATYPE: H5Tclose(*id); break;
        case H5I_DATASPACE: H5Sclose(*id); break;
        case H5I_DATASET: H5Dclose(*id); break;
        case H5I_ATTR: H5Aclose(*id); break;
        case H5I_GENPROP_LST: H5Pclose(*id); break;
        default: break;
        }
    }
    *id = H5I_INVALID_HID;
}

sn_status sn_h5_attr_vlen_str(hid_t obj, const char *name, const char *value) {
    sn_status st = SN_OK;
    hid_t type = H5I_INVALID_HID, space = H5I_INVALID_HID, attr = H5I_INVALID_HID;
    SN_H5(type = H5Tcopy(H5T_C_S1));
    SN_H5(H5Tset_size(type, H5T_VARIABLE));
    SN_H5(H5Tset_cset(type, H5T_CSET_UTF8));
    SN_H5(space = H5Screate(H5S_SCALAR));
    SN_H5(attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT));
    SN_H5(H5Awrite(attr, type, &value));
done:
    sn_h5_close(&attr);
    sn_h5_close(&space);
    sn_h5_close(&type);
    return st;
}

sn_status sn_h5_attr_fixed_strs(hid_t obj, const char *name, int n, const char *const *values,
                                int scalar) {
    sn_status st = SN_OK;
    hid_t type = H5I_INVALID_HID, space = H5I_INVALID_HID, attr = H5I_INVALID_HID;
    char *buf = NULL;
    if (n == 0) {
        /* h5py stores np.asarray([]) : float64 with shape (0,). */
        hsize_t dim0 = 0;
        SN_H5(space = H5Screate_simple(1, &dim0, NULL));
        SN_H5(attr = H5Acreate2(obj, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT));
        goto done;
    }
    size_t len = 1; /* numpy's narrowest bytes dtype is S1 */
    for (int i = 0; i < n; i++) {
        size_t l = strlen(values[i]);
        if (l > len) len = l;
    }
    buf = sn_calloc((size_t)n, len);
    if (!buf) return SN_ERR_NOMEM;
    for (int i = 0; i < n; i++) memcpy(buf + (size_t)i * len, values[i], strlen(values[i]));
    SN_H5(type = H5Tcopy(H5T_C_S1));
    SN_H5(H5Tset_size(type, len));
    SN_H5(H5Tset_strpad(type, H5T_STR_NULLPAD));
    SN_H5(H5Tset_cset(type, H5T_CSET_ASCII));
    if (scalar) {
        SN_H5(space = H5Screate(H5S_SCALAR));
    } else {
        hsize_t dim = (hsize_t)n;
        SN_H5(space = H5Screate_simple(1, &dim, NULL));
    }
    SN_H5(attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT));
    SN_H5(H5Awrite(attr, type, buf));
done:
    free(buf);
    sn_h5_close(&attr);
    sn_h5_close(&space);
    sn_h5_close(&type);
    return st;
}

void sn_h5_free_strs(int n, char **strs) {
    if (!strs) return;
    for (int i = 0; i < n; i++) free(strs[i]);
    free(strs);
}

sn_status sn_h5_read_strs(hid_t obj, const char *name, int *n_out, char ***out) {
    sn_status st = SN_OK;
    hid_t attr = H5I_INVALID_HID, space = H5I_INVALID_HID, type = H5I_INVALID_HID,
          mtype = H5I_INVALID_HID;
    char **strs = NULL, **vbuf = NULL, *raw = NULL;
    int n = 0, vread = 0;
    hssize_t np;
    *n_out = 0;
    *out = NULL;
    SN_H5(attr = H5Aopen(obj, name, H5P_DEFAULT));
    SN_H5(space = H5Aget_space(attr));
    SN_H5(np = H5Sget_simple_extent_npoints(space));
    if (np == 0) goto done;
    if (np > (1 << 24)) {
        st = sn_errorf(SN_ERR_FORMAT, "attribute '%s' holds %lld strings, more than any model has",
                       name, (long long)np);
        goto done;
    }
    n = (int)np;
    SN_H5(type = H5Aget_type(attr));
    H5T_class_t cls;
    SN_H5(cls = H5Tget_class(type));
    if (cls != H5T_STRING) {
        st = sn_errorf(SN_ERR_FORMAT, "attribute '%s' is not a string attribute", name);
        goto done;
    }
    strs = sn_calloc((size_t)n, sizeof *strs);
    if (!strs) { st = SN_ERR_NOMEM; goto done; }
    htri_t is_var;
    SN_H5(is_var = H5Tis_variable_str(type));
    if (is_var) {
        H5T_cset_t cset;
        SN_H5(cset = H5Tget_cset(type));
        SN_H5(mtype = H5Tcopy(H5T_C_S1));
        SN_H5(H5Tset_size(mtype, H5T_VARIABLE));
        SN_H5(H5Tset_cset(mtype, cset));
        vbuf = sn_calloc((size_t)n, sizeof *vbuf);
        if (!vbuf) { st = SN_ERR_NOMEM; goto done; }
        SN_H5(H5Aread(attr, mtype, vbuf));
        vread = 1;
        for (int i = 0; i < n; i++) {
            strs[i] = sn_strdup(vbuf[i] ? vbuf[i] : "");
            if (!strs[i]) { st = SN_ERR_NOMEM; goto done; }
        }
    } else {
        size_t len = H5Tget_size(type);
        if (len == 0) {
            st = sn_errorf(SN_ERR_FORMAT, "attribute '%s' has strings of size 0", name);
            goto done;
        }
        H5T_str_t pad;
        SN_H5(pad = H5Tget_strpad(type));
        raw = sn_malloc((size_t)n * len);
        if (!raw) { st = SN_ERR_NOMEM; goto done; }
        SN_H5(H5Aread(attr, type, raw));
        for (int i = 0; i < n; i++) {
            const char *s = raw + (size_t)i * len;
            size_t l = 0;
            while (l < len && s[l]) l++;
            if (pad == H5T_STR_SPACEPAD)
                while (l > 0 && s[l - 1] == ' ') l--;
            strs[i] = sn_malloc(l + 1);
            if (!strs[i]) { st = SN_ERR_NOMEM; goto done; }
            memcpy(strs[i], s, l);
            strs[i][l] = '\0';
        }
    }
done:
    if (vread) {
#if H5_VERSION_GE(1, 12, 0)
        H5Treclaim(mtype, space, H5P_DEFAULT, vbuf);
#else
        H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, vbuf);
#endif
    }
    free(vbuf);
    free(raw);
    sn_h5_close(&mtype);
    sn_h5_close(&type);
    sn_h5_close(&space);
    sn_h5_close(&attr);
    if (st != SN_OK) {
        sn_h5_free_strs(n, strs);
        return st;
    }
    *n_out = strs ? n : 0;
    *out = strs;
    return SN_OK;
}

sn_status sn_h5_has_link(hid_t obj, const char *name, int *out) {
    sn_status st = SN_OK;
    htri_t r;
    *out = 0;
    SN_H5(r = H5Lexists(obj, name, H5P_DEFAULT));
    *out = r > 0;
done:
    return st;
}
