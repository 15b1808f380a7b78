/* The checkpoint container: named typed arrays in one HDF5 file, written atomically, with a
 * CRC-32C over everything stored (checkpoint_io.h, docs/checkpoints.md). */
#include "io/checkpoint_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/h5_util.h"
#include "sinter/data.h" /* sn_crc32c: the one CRC-32C of the project (src/data/tfrecord.c) */

size_t sn_ckpt_type_size(sn_ckpt_type t) {
    switch (t) {
    case SN_CKPT_F32: case SN_CKPT_I32: return 4;
    case SN_CKPT_F64: case SN_CKPT_I64: return 8;
    case SN_CKPT_U8: return 1;
    case SN_CKPT_STR: return sizeof(char *);
    }
    return 0;
}

static hid_t mem_type(sn_ckpt_type t) {
    switch (t) {
    case SN_CKPT_F32: return H5T_NATIVE_FLOAT;
    case SN_CKPT_F64: return H5T_NATIVE_DOUBLE;
    case SN_CKPT_I32: return H5T_NATIVE_INT32;
    case SN_CKPT_I64: return H5T_NATIVE_INT64;
    case SN_CKPT_U8: return H5T_NATIVE_UINT8;
    case SN_CKPT_STR: return H5I_INVALID_HID;
    }
    return H5I_INVALID_HID;
}

static hid_t file_type(sn_ckpt_type t) {
    switch (t) {
    case SN_CKPT_F32: return H5T_IEEE_F32LE;
    case SN_CKPT_F64: return H5T_IEEE_F64LE;
    case SN_CKPT_I32: return H5T_STD_I32LE;
    case SN_CKPT_I64: return H5T_STD_I64LE;
    case SN_CKPT_U8: return H5T_STD_U8LE;
    case SN_CKPT_STR: return H5I_INVALID_HID;
    }
    return H5I_INVALID_HID;
}

static int64_t item_numel(const sn_ckpt_item *it) { return sn_shape_numel(&it->shape); }

/* The checksum covers what a reader relies on: name, type, shape and the values, in item
 * order (little-endian hosts only, as the rest of sinter). */
static uint32_t item_crc(uint32_t crc, const sn_ckpt_item *it) {
    crc = sn_crc32c(crc, it->name, strlen(it->name) + 1);
    uint8_t ty = (uint8_t)it->type, nd = (uint8_t)it->shape.ndim;
    crc = sn_crc32c(crc, &ty, 1);
    crc = sn_crc32c(crc, &nd, 1);
    crc = sn_crc32c(crc, it->shape.dim, (size_t)it->shape.ndim * sizeof it->shape.dim[0]);
    int64_t n = item_numel(it);
    if (it->type == SN_CKPT_STR) {
        char *const *s = it->data;
        for (int64_t i = 0; i < n; i++) crc = sn_crc32c(crc, s[i], strlen(s[i]) + 1);
    } else {
        crc = sn_crc32c(crc, it->data, (size_t)n * sn_ckpt_type_size(it->type));
    }
    return crc;
}

/* ---- test hooks (environment; see checkpoint_io.h) -------------------------------------- */

/* Writes by this process, for SN_CKPT_TEST_KILL's N. File scope, not function-static state;
 * only touched by writers, which the caller serialises (fit writes from one thread). */
static int g_writes;

static void test_kill(const char *phase) {
    const char *e = getenv("SN_CKPT_TEST_KILL");
    if (!e || !*e) return;
    char *end = NULL;
    long n = strtol(e, &end, 10);
    if (!end || *end != ':' || n != g_writes || strcmp(end + 1, phase) != 0) return;
    raise(SIGKILL);
}

static void test_delay(void) {
    const char *e = getenv("SN_CKPT_TEST_DELAY_US");
    long us = e ? strtol(e, NULL, 10) : 0;
    if (us > 0) usleep((useconds_t)us);
}

/* ---- writing ---------------------------------------------------------------------------- */

static sn_status write_item(hid_t file, hid_t lcpl, const sn_ckpt_item *it) {
    sn_status st = SN_OK;
    hid_t space = H5I_INVALID_HID, ds = H5I_INVALID_HID, st_type = H5I_INVALID_HID;
    hsize_t dims[SN_MAX_DIMS];
    for (int i = 0; i < it->shape.ndim; i++) dims[i] = (hsize_t)it->shape.dim[i];
    SN_H5(space = it->shape.ndim ? H5Screate_simple(it->shape.ndim, dims, NULL)
                                 : H5Screate(H5S_SCALAR));
    if (it->type == SN_CKPT_STR) {
        SN_H5(st_type = H5Tcopy(H5T_C_S1));
        SN_H5(H5Tset_size(st_type, H5T_VARIABLE));
        SN_H5(H5Tset_cset(st_type, H5T_CSET_UTF8));
        SN_H5(ds = H5Dcreate2(file, it->name, st_type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT));
        if (item_numel(it) > 0)
            SN_H5(H5Dwrite(ds, st_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, it->data));
    } else {
        SN_H5(ds = H5Dcreate2(file, it->name, file_type(it->type), space, lcpl, H5P_DEFAULT,
                              H5P_DEFAULT));
        if (item_numel(it) > 0)
            SN_H5(H5Dwrite(ds, mem_type(it->type), H5S_ALL, H5S_ALL, H5P_DEFAULT, it->data));
    }
done:
    sn_h5_close(&st_type);
    sn_h5_close(&ds);
    sn_h5_close(&space);
    return st;
}

static sn_status write_attrs(hid_t file, const char *kind, int version, uint32_t crc, int n,
                             const sn_ckpt_item *items) {
    sn_status st = SN_OK;
    hid_t sp = H5I_INVALID_HID, a = H5I_INVALID_HID;
    const char **names = sn_malloc((size_t)(n ? n : 1) * sizeof *names);
    if (!names) return SN_ERR_NOMEM;
    for (int i = 0; i < n; i++) names[i] = items[i].name;
    SN_H5_TRY(sn_h5_attr_vlen_str(file, "format", kind));
    int32_t v = version;
    SN_H5(sp = H5Screate(H5S_SCALAR));
    SN_H5(a = H5Acreate2(file, "version", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT));
    SN_H5(H5Awrite(a, H5T_NATIVE_INT32, &v));
    sn_h5_close(&a);
    SN_H5(a = H5Acreate2(file, "crc32c", H5T_STD_U32LE, sp, H5P_DEFAULT, H5P_DEFAULT));
    SN_H5(H5Awrite(a, H5T_NATIVE_UINT32, &crc));
    sn_h5_close(&a);
    sn_h5_close(&sp);
    /* The item order the checksum follows (HDF5 lists links by name, not creation). */
    hid_t t = H5I_INVALID_HID;
    hsize_t dn = (hsize_t)n;
    SN_H5(sp = n ? H5Screate_simple(1, &dn, NULL) : H5Screate(H5S_NULL));
    SN_H5(t = H5Tcopy(H5T_C_S1));
    SN_H5(H5Tset_size(t, H5T_VARIABLE));
    SN_H5(H5Tset_cset(t, H5T_CSET_UTF8));
    SN_H5(a = H5Acreate2(file, "items", t, sp, H5P_DEFAULT, H5P_DEFAULT));
    if (n) SN_H5(H5Awrite(a, t, names));
    sn_h5_close(&t);
done:
    free(names);
    sn_h5_close(&a);
    sn_h5_close(&sp);
    return st;
}

static sn_status fsync_path(const char *path, bool dir) {
    int fd = open(path, (dir ? O_DIRECTORY : 0) | O_RDONLY);
    if (fd < 0) return sn_errorf(SN_ERR_IO, "checkpoint: cannot open '%s' to sync it: %s", path,
                                 strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0) return sn_errorf(SN_ERR_IO, "checkpoint: fsync of '%s' failed: %s", path, strerror(e));
    return SN_OK;
}

sn_status sn_ckpt_write(const char *path, const char *kind, int version, int n,
                        const sn_ckpt_item *items) {
    if (!path || !*path || !kind || n < 0 || (n > 0 && !items))
        return sn_errorf(SN_ERR_INVALID, "checkpoint write: bad arguments (path %s, %d items)",
                         path ? path : "NULL", n);
    g_writes++;
    size_t plen = strlen(path) + 32;
    char *tmp = sn_malloc(plen), *dir = sn_strdup(path);
    if (!tmp || !dir) {
        free(tmp);
        free(dir);
        return SN_ERR_NOMEM;
    }
    /* Same folder as the target, so the rename is atomic; the pid keeps two writers apart. */
    snprintf(tmp, plen, "%s.tmp%ld", path, (long)getpid());
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    else snprintf(dir, strlen(path) + 1, ".");

    sn_status st = SN_OK;
    hid_t file = H5I_INVALID_HID, lcpl = H5I_INVALID_HID;
    bool created = false;
    uint32_t crc = 0;
    sn_h5_lock();
    SN_H5(lcpl = H5Pcreate(H5P_LINK_CREATE));
    SN_H5(H5Pset_create_intermediate_group(lcpl, 1));
    SN_H5(file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    created = true;
    for (int i = 0; i < n; i++) {
        SN_H5_TRY(sn_error_context(write_item(file, lcpl, &items[i]), "checkpoint '%s': item '%s'",
                                   path, items[i].name));
        crc = item_crc(crc, &items[i]);
        if (i == n / 2) test_kill("data");
    }
    SN_H5_TRY(write_attrs(file, kind, version, crc, n, items));
    SN_H5(H5Fflush(file, H5F_SCOPE_GLOBAL));
    SN_H5(H5Fclose(file));
    file = H5I_INVALID_HID;
    SN_H5_TRY(fsync_path(tmp, false));
    test_delay();
    test_kill("synced");
    if (rename(tmp, path) != 0) {
        st = sn_errorf(SN_ERR_IO, "checkpoint: cannot rename '%s' to '%s': %s", tmp, path,
                       strerror(errno));
        goto done;
    }
    created = false;
    test_kill("renamed");
    SN_H5_TRY(fsync_path(dir, true));
done:
    sn_h5_close(&file);
    sn_h5_close(&lcpl);
    sn_h5_unlock();
    if (created) remove(tmp); /* best effort: the error that matters is recorded */
    free(tmp);
    free(dir);
    return st;
}

/* ---- reading ---------------------------------------------------------------------------- */

void sn_ckpt_items_free(int n, sn_ckpt_item *items) {
    if (!items) return;
    for (int i = 0; i < n; i++) {
        if (items[i].type == SN_CKPT_STR && items[i].data) {
            char **s = items[i].data;
            for (int64_t k = 0; k < item_numel(&items[i]); k++) free(s[k]);
        }
        free(items[i].data);
        free(items[i].name);
    }
    free(items);
}

const sn_ckpt_item *sn_ckpt_find(int n, const sn_ckpt_item *items, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(items[i].name, name) == 0) return &items[i];
    return NULL;
}

static sn_status type_of(hid_t t, sn_ckpt_type *out) {
    H5T_class_t c = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    if (c == H5T_FLOAT && sz == 4) *out = SN_CKPT_F32;
    else if (c == H5T_FLOAT && sz == 8) *out = SN_CKPT_F64;
    else if (c == H5T_INTEGER && sz == 4) *out = SN_CKPT_I32;
    else if (c == H5T_INTEGER && sz == 8) *out = SN_CKPT_I64;
    else if (c == H5T_INTEGER && sz == 1) *out = SN_CKPT_U8;
    else if (c == H5T_STRING && H5Tis_variable_str(t) > 0) *out = SN_CKPT_STR;
    else return sn_errorf(SN_ERR_FORMAT, "a dataset of HDF5 type class %d, %zu bytes", (int)c, sz);
    return SN_OK;
}

static sn_status read_item(hid_t file, sn_ckpt_item *it) {
    sn_status st = SN_OK;
    hid_t ds = H5I_INVALID_HID, t = H5I_INVALID_HID, sp = H5I_INVALID_HID, mt = H5I_INVALID_HID;
    SN_H5(ds = H5Dopen2(file, it->name, H5P_DEFAULT));
    SN_H5(t = H5Dget_type(ds));
    SN_H5_TRY(type_of(t, &it->type));
    SN_H5(sp = H5Dget_space(ds));
    int nd = H5Sget_simple_extent_ndims(sp);
    if (nd < 0 || nd > SN_MAX_DIMS) {
        st = sn_errorf(SN_ERR_FORMAT, "%d dimensions", nd);
        goto done;
    }
    hsize_t dims[SN_MAX_DIMS];
    if (nd) SN_H5(H5Sget_simple_extent_dims(sp, dims, NULL));
    it->shape.ndim = nd;
    for (int i = 0; i < nd; i++) it->shape.dim[i] = (int64_t)dims[i];
    if (it->type == SN_CKPT_STR && nd != 1) {
        st = sn_errorf(SN_ERR_FORMAT, "a string dataset of %d dimensions (expected 1)", nd);
        goto done;
    }
    int64_t n = item_numel(it);
    if (n < 0 || n > (int64_t)1 << 40) {
        st = sn_errorf(SN_ERR_FORMAT, "%lld elements", (long long)n);
        goto done;
    }
    it->data = sn_calloc((size_t)(n ? n : 1), sn_ckpt_type_size(it->type));
    if (!it->data) {
        st = SN_ERR_NOMEM;
        goto done;
    }
    if (it->type == SN_CKPT_STR) {
        SN_H5(mt = H5Tcopy(H5T_C_S1));
        SN_H5(H5Tset_size(mt, H5T_VARIABLE));
        char **v = sn_calloc((size_t)(n ? n : 1), sizeof *v);
        if (!v) {
            st = SN_ERR_NOMEM;
            goto done;
        }
        herr_t rr = n ? H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) : 0;
        /* Copies into our allocator; HDF5's own strings go back to HDF5. */
        char **s = it->data;
        for (int64_t i = 0; rr >= 0 && i < n; i++)
            if (!(s[i] = sn_strdup(v[i] ? v[i] : ""))) st = SN_ERR_NOMEM;
        if (rr >= 0 && n) {
#if H5_VERSION_GE(1, 12, 0)
            H5Treclaim(mt, sp, H5P_DEFAULT, v);
#else
            H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, v);
#endif
        }
        free(v);
        if (rr < 0) st = sn_h5_fail("H5Dread", __FILE__, __LINE__);
        if (st != SN_OK) goto done;
    } else if (n) {
        SN_H5(H5Dread(ds, mem_type(it->type), H5S_ALL, H5S_ALL, H5P_DEFAULT, it->data));
    }
done:
    sn_h5_close(&mt);
    sn_h5_close(&sp);
    sn_h5_close(&t);
    sn_h5_close(&ds);
    return st;
}

static sn_status read_u32_attr(hid_t obj, const char *name, hid_t mtype, void *out) {
    sn_status st = SN_OK;
    hid_t a = H5I_INVALID_HID;
    SN_H5(a = H5Aopen(obj, name, H5P_DEFAULT));
    SN_H5(H5Aread(a, mtype, out));
done:
    sn_h5_close(&a);
    return st;
}

sn_status sn_ckpt_read(const char *path, const char *kind, int max_version, int *n_out,
                       sn_ckpt_item **out) {
    if (!path || !kind || !n_out || !out)
        return sn_errorf(SN_ERR_INVALID, "checkpoint read: NULL argument");
    *n_out = 0;
    *out = NULL;
    sn_status st = SN_OK;
    hid_t file = H5I_INVALID_HID;
    int nf = 0, nitems = 0;
    char **fmt = NULL, **names = NULL;
    sn_ckpt_item *items = NULL;
    int32_t version = 0;
    uint32_t want = 0, crc = 0;
    sn_h5_lock();
    SN_H5(file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT));
    SN_H5_TRY(sn_h5_read_strs(file, "format", &nf, &fmt));
    if (nf != 1 || strcmp(fmt[0], kind) != 0) {
        st = sn_errorf(SN_ERR_FORMAT, "its format is '%s' (expected '%s')", nf ? fmt[0] : "",
                       kind);
        goto done;
    }
    SN_H5_TRY(read_u32_attr(file, "version", H5T_NATIVE_INT32, &version));
    if (version < 1 || version > max_version) {
        st = sn_errorf(SN_ERR_FORMAT, "version %d (this build reads 1 to %d)", (int)version,
                       max_version);
        goto done;
    }
    SN_H5_TRY(read_u32_attr(file, "crc32c", H5T_NATIVE_UINT32, &want));
    SN_H5_TRY(sn_h5_read_strs(file, "items", &nitems, &names));
    items = sn_calloc((size_t)(nitems ? nitems : 1), sizeof *items);
    if (!items) {
        st = SN_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < nitems; i++) {
        items[i].name = names[i];
        names[i] = NULL;
        SN_H5_TRY(sn_error_context(read_item(file, &items[i]), "item '%s'", items[i].name));
        crc = item_crc(crc, &items[i]);
    }
    if (crc != want) {
        st = sn_errorf(SN_ERR_FORMAT, "checksum mismatch (stored crc32c %08x, computed %08x): "
                       "the file is torn or corrupted", want, crc);
        goto done;
    }
done:
    sn_h5_close(&file);
    sn_h5_unlock();
    sn_h5_free_strs(nf, fmt);
    sn_h5_free_strs(nitems, names);
    if (st != SN_OK) {
        sn_ckpt_items_free(nitems, items);
        /* Any failure to read a file that exists is a corrupt checkpoint to the caller. */
        return sn_error_context(st == SN_ERR_NOMEM ? st : SN_ERR_FORMAT,
                                "checkpoint '%s' is not readable", path);
    }
    *n_out = nitems;
    *out = items;
    return SN_OK;
}

/* ---- folders ---------------------------------------------------------------------------- */

void sn_ckpt_list_free(int n, char **paths, int64_t *numbers) {
    for (int i = 0; paths && i < n; i++) free(paths[i]);
    free(paths);
    free(numbers);
}

sn_status sn_ckpt_list(const char *dir, const char *prefix, int *n_out, char ***paths_out,
                       int64_t **numbers_out) {
    *n_out = 0;
    *paths_out = NULL;
    *numbers_out = NULL;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return SN_OK;
        return sn_errorf(SN_ERR_IO, "checkpoint folder '%s': %s", dir, strerror(errno));
    }
    int n = 0, cap = 0;
    char **paths = NULL;
    int64_t *nums = NULL;
    sn_status st = SN_OK;
    size_t pl = strlen(prefix);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *s = e->d_name;
        if (strncmp(s, prefix, pl) != 0 || s[pl] != '-') continue;
        char *end = NULL;
        errno = 0;
        long long v = strtoll(s + pl + 1, &end, 10);
        if (errno || end == s + pl + 1 || strcmp(end, ".h5") != 0 || v < 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **np = sn_realloc(paths, (size_t)cap * sizeof *np);
            if (!np) { st = SN_ERR_NOMEM; break; }
            paths = np;
            int64_t *nn = sn_realloc(nums, (size_t)cap * sizeof *nn);
            if (!nn) { st = SN_ERR_NOMEM; break; }
            nums = nn;
        }
        size_t len = strlen(dir) + strlen(s) + 2;
        if (!(paths[n] = sn_malloc(len))) { st = SN_ERR_NOMEM; break; }
        snprintf(paths[n], len, "%s/%s", dir, s);
        nums[n++] = v;
    }
    closedir(d);
    if (st != SN_OK) {
        sn_ckpt_list_free(n, paths, nums);
        return st;
    }
    /* newest first (insertion sort: a folder keeps a handful) */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && nums[j] > nums[j - 1]; j--) {
            int64_t tv = nums[j]; nums[j] = nums[j - 1]; nums[j - 1] = tv;
            char *tp = paths[j]; paths[j] = paths[j - 1]; paths[j - 1] = tp;
        }
    *n_out = n;
    *paths_out = paths;
    *numbers_out = nums;
    return SN_OK;
}

sn_status sn_ckpt_mkdir(const char *dir) {
    if (mkdir(dir, 0777) == 0 || errno == EEXIST) {
        struct stat sb;
        if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) return SN_OK;
        return sn_errorf(SN_ERR_IO, "checkpoint folder '%s' exists and is not a folder", dir);
    }
    return sn_errorf(SN_ERR_IO, "cannot create the checkpoint folder '%s': %s", dir,
                     strerror(errno));
}
