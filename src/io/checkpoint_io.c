/* The checkpoint container: named typed arrays in one HDF5 file, written atomically, sealed by
 * a header in HDF5's user block (length and CRC-32 of the whole file) that the reader checks
 * before HDF5 parses a byte, and a CRC-32C over the items HDF5 returns (checkpoint_io.h,
 * docs/checkpoints.md). */
#include "io/checkpoint_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io/atomic_file.h"
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

/* ---- the header in HDF5's user block ---------------------------------------------------- */

/* HDF5 keeps the first SN_CKPT_USERBLOCK bytes for the application and starts its superblock
 * after them; h5dump, h5py and H5Fopen find the superblock there by themselves. Layout
 * (little-endian):
 *   0  "SINTERCKPT\r\n"  12 bytes (CR LF: a text-mode copy breaks it, as PNG's and HDF5's)
 *  12  u32 header version (1)
 *  16  u64 length of the whole file, header included
 *  24  u32 CRC-32 (zlib's crc32) of bytes [SN_CKPT_USERBLOCK, length)
 *  28  u32 CRC-32 of bytes [0, 28): the header's own check
 *  32  zeros to SN_CKPT_USERBLOCK */
static const char hdr_magic[12] = {'S', 'I', 'N', 'T', 'E', 'R', 'C', 'K', 'P', 'T', '\r', '\n'};
static const unsigned char hdf5_sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
#define HDR_VERSION 1u

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* CRC-32 of fd's bytes [from, to), read in 1 MiB pieces. */
static sn_status crc_range(int fd, const char *path, uint64_t from, uint64_t to, uint32_t *out) {
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = sn_malloc(CHUNK);
    if (!buf) return SN_ERR_NOMEM;
    uLong crc = crc32(0L, Z_NULL, 0);
    sn_status st = SN_OK;
    for (uint64_t off = from; off < to;) {
        size_t want = to - off < CHUNK ? (size_t)(to - off) : CHUNK;
        ssize_t got = pread(fd, buf, want, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            st = got < 0 ? sn_errorf(SN_ERR_IO, "checkpoint '%s': read failed at byte %llu: %s",
                                     path, (unsigned long long)off, strerror(errno))
                         : sn_errorf(SN_ERR_FORMAT, "checkpoint '%s': the file ended at byte "
                                     "%llu while it was read (it is %llu bytes)", path,
                                     (unsigned long long)off, (unsigned long long)to);
            break;
        }
        crc = crc32_z(crc, buf, (size_t)got);
        off += (uint64_t)got;
    }
    free(buf);
    *out = (uint32_t)crc;
    return st;
}

/* The header for a file of `size` bytes whose bytes after the header have CRC-32 `crc`. */
static void make_header(unsigned char h[SN_CKPT_USERBLOCK], uint64_t size, uint32_t crc) {
    memset(h, 0, SN_CKPT_USERBLOCK);
    memcpy(h, hdr_magic, sizeof hdr_magic);
    put32(h + 12, HDR_VERSION);
    put64(h + 16, size);
    put32(h + 24, crc);
    put32(h + 28, (uint32_t)crc32(0L, h, 28));
}

sn_status sn_ckpt_seal_fd(int fd, const char *path) {
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return sn_errorf(SN_ERR_IO, "checkpoint '%s': stat failed: %s", path, strerror(errno));
    if ((uint64_t)sb.st_size < SN_CKPT_USERBLOCK)
        return sn_errorf(SN_ERR_INVALID, "checkpoint '%s': %lld bytes, no room for the %d-byte "
                         "header", path, (long long)sb.st_size, SN_CKPT_USERBLOCK);
    unsigned char h[SN_CKPT_USERBLOCK];
    uint32_t crc = 0;
    SN_TRY(crc_range(fd, path, SN_CKPT_USERBLOCK, (uint64_t)sb.st_size, &crc));
    make_header(h, (uint64_t)sb.st_size, crc);
    for (size_t done = 0; done < sizeof h;) {
        ssize_t w = pwrite(fd, h + done, sizeof h - done, (off_t)done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return sn_errorf(SN_ERR_IO, "checkpoint '%s': writing its header failed: %s", path,
                             w < 0 ? strerror(errno) : "no progress");
        done += (size_t)w;
    }
    return SN_OK;
}

/* The reader's side: everything about the bytes, nothing through HDF5. SN_ERR_FORMAT for a
 * torn or corrupted file, SN_ERR_UNSUPPORTED for an HDF5 file without the header (a
 * checkpoint of format 1, written before the header existed), SN_ERR_IO when it cannot be
 * read at all. */
static sn_status check_header(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sn_errorf(SN_ERR_IO, "cannot open it: %s", strerror(errno));
    sn_status st = SN_OK;
    struct stat sb;
    unsigned char h[SN_CKPT_USERBLOCK];
    if (fstat(fd, &sb) != 0) {
        st = sn_errorf(SN_ERR_IO, "stat failed: %s", strerror(errno));
        goto done;
    }
    uint64_t size = (uint64_t)sb.st_size;
    size_t got = 0;
    while (got < sizeof h && got < size) {
        ssize_t r = pread(fd, h + got, sizeof h - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    if (got >= sizeof hdf5_sig && memcmp(h, hdf5_sig, sizeof hdf5_sig) == 0) {
        st = sn_errorf(SN_ERR_UNSUPPORTED, "it is an HDF5 file without sinter's checksum header: "
                       "a checkpoint of format 1 (written before the header existed) or not a "
                       "checkpoint at all; it is not opened. Finish that run with the sinter that "
                       "wrote it, or start over (--no-resume)");
        goto done;
    }
    if (got < sizeof h) {
        st = sn_errorf(SN_ERR_FORMAT, "it has %llu bytes, less than its %d-byte header: the "
                       "file is torn", (unsigned long long)size, SN_CKPT_USERBLOCK);
        goto done;
    }
    if (memcmp(h, hdr_magic, sizeof hdr_magic) != 0) {
        st = sn_errorf(SN_ERR_FORMAT, "it does not start with \"SINTERCKPT\": not a checkpoint, "
                       "or its header is corrupted");
        goto done;
    }
    if (get32(h + 28) != (uint32_t)crc32(0L, h, 28)) {
        st = sn_errorf(SN_ERR_FORMAT, "header checksum mismatch (stored %08x, computed %08x): "
                       "the header is corrupted", get32(h + 28), (uint32_t)crc32(0L, h, 28));
        goto done;
    }
    if (get32(h + 12) != HDR_VERSION) {
        st = sn_errorf(SN_ERR_UNSUPPORTED, "header version %u (this build reads %u)",
                       get32(h + 12), HDR_VERSION);
        goto done;
    }
    uint64_t len = get64(h + 16);
    if (len != size) {
        st = sn_errorf(SN_ERR_FORMAT, "it has %llu bytes but was written with %llu: the file is "
                       "%s", (unsigned long long)size, (unsigned long long)len,
                       size < len ? "torn (truncated)" : "corrupted (bytes appended)");
        goto done;
    }
    uint32_t crc = 0;
    st = crc_range(fd, path, SN_CKPT_USERBLOCK, size, &crc);
    if (st == SN_OK && crc != get32(h + 24))
        st = sn_errorf(SN_ERR_FORMAT, "whole-file checksum mismatch (stored crc32 %08x, computed "
                       "%08x): the file is torn or corrupted", get32(h + 24), crc);
done:
    close(fd);
    return st;
}

/* ---- the test seam (see checkpoint_io.h) ----------------------------------------------- */

/* Writes by this process, numbered for the hook. File scope, not function-static state; only
 * touched by writers, which the caller serialises (fit writes from one thread). */
static int g_writes;
static sn_ckpt_write_hook g_hook;
static void *g_hook_ctx;

void sn_ckpt_set_write_hook(sn_ckpt_write_hook hook, void *ctx) {
    g_hook = hook;
    g_hook_ctx = ctx;
}

static void at_phase(const char *phase) {
    if (g_hook) g_hook(g_writes, phase, g_hook_ctx);
}

/* The phases of sn_atomic_write under the seam's names: its "written" (every byte, header
 * included, in the temporary file; not yet fsync'ed) is "sealed"; "synced" and "renamed"
 * are the same. */
static void write_phase(const char *phase) { at_phase(strcmp(phase, "written") ? phase : "sealed"); }

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

/* The whole file is built in memory (HDF5's core driver, nothing on disk) and written by
 * sn_atomic_write in one piece: a full disk or a file size limit then fails in one write(2)
 * with its errno, never inside HDF5, whose failed H5Fclose on a full disk leaves a file
 * object that crashes the library at exit (HDF5 1.10.8), and whose message is a record of
 * descriptors and pointers. The price is the file's size in memory, twice, while it is
 * written (docs/checkpoints.md). */
sn_status sn_ckpt_write(const char *path, const char *kind, int version, int n,
                        const sn_ckpt_item *items) {
    if (!path || !*path || !kind || n < 0 || (n > 0 && !items))
        return sn_errorf(SN_ERR_INVALID, "checkpoint write: bad arguments (path %s, %d items)",
                         path ? path : "NULL", n);
    g_writes++;
    sn_status st = SN_OK;
    hid_t file = H5I_INVALID_HID, lcpl = H5I_INVALID_HID, fcpl = H5I_INVALID_HID,
          fapl = H5I_INVALID_HID;
    uint32_t crc = 0;
    unsigned char *img = NULL;
    size_t total = 0;
    sn_h5_lock();
    SN_H5(lcpl = H5Pcreate(H5P_LINK_CREATE));
    SN_H5(H5Pset_create_intermediate_group(lcpl, 1));
    SN_H5(fcpl = H5Pcreate(H5P_FILE_CREATE));
    SN_H5(H5Pset_userblock(fcpl, SN_CKPT_USERBLOCK));
    SN_H5(fapl = H5Pcreate(H5P_FILE_ACCESS));
    SN_H5(H5Pset_fapl_core(fapl, (size_t)1 << 20, 0)); /* grow by 1 MiB; no backing store */
    SN_H5(file = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl));
    for (int i = 0; i < n; i++) {
        SN_H5_TRY(sn_error_context(write_item(file, lcpl, &items[i]), "checkpoint '%s': item '%s'",
                                   path, items[i].name));
        crc = item_crc(crc, &items[i]);
        if (i == n / 2) at_phase("data");
    }
    SN_H5_TRY(write_attrs(file, kind, version, crc, n, items));
    SN_H5(H5Fflush(file, H5F_SCOPE_GLOBAL));
    /* The core driver's image starts at the superblock: the user block is not in it, and
     * goes in front (the file is then byte for byte what the sec2 driver would write). */
    ssize_t len;
    SN_H5(len = H5Fget_file_image(file, NULL, 0));
    total = SN_CKPT_USERBLOCK + (size_t)len;
    if (!(img = sn_malloc(total))) {
        st = sn_errorf(SN_ERR_NOMEM, "cannot write checkpoint '%s': out of memory for its %zu "
                       "bytes", path, total);
        goto done;
    }
    ssize_t got;
    SN_H5(got = H5Fget_file_image(file, img + SN_CKPT_USERBLOCK, (size_t)len));
    if (got != len) {
        st = sn_errorf(SN_ERR_BACKEND, "checkpoint '%s': HDF5 gave a file image of %zd bytes, "
                       "expected %zd", path, got, len);
        goto done;
    }
done:
    sn_h5_close(&file);
    sn_h5_close(&fapl);
    sn_h5_close(&fcpl);
    sn_h5_close(&lcpl);
    sn_h5_unlock();
    if (st == SN_OK) {
        uLong c = crc32_z(crc32(0L, Z_NULL, 0), img + SN_CKPT_USERBLOCK, total - SN_CKPT_USERBLOCK);
        make_header(img, (uint64_t)total, (uint32_t)c);
        st = sn_atomic_write(path, "checkpoint", img, total, write_phase);
    }
    free(img);
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
    /* The bytes first, outside HDF5's lock: HDF5 1.10's parser trusts what it reads
     * (docs/reliability.md), so a torn or corrupted file must never reach it. */
    st = check_header(path);
    if (st != SN_OK) return sn_error_context(st, "checkpoint '%s' is not readable", path);
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
        /* Any other failure to read a file that exists is a corrupt checkpoint to the caller
         * (it may fall back to an older one); a file it cannot open, memory, and a file of
         * another format generation are not. */
        bool keep = st == SN_ERR_NOMEM || st == SN_ERR_IO || st == SN_ERR_UNSUPPORTED;
        return sn_error_context(keep ? st : SN_ERR_FORMAT, "checkpoint '%s' is not readable",
                                path);
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
