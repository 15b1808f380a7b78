/* IDX files (the MNIST format) and MNIST-layout folders.
 *
 * Format: magic 0x0000TTNN big-endian (TT the element type, NN the number of dims), NN
 * big-endian uint32 dims, then the elements row-major, big-endian. zlib's gzread reads plain
 * files unchanged, so one code path serves ".gz" and plain files. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/data_impl.h"

#define IDX_MAX_ELEMENTS ((int64_t)1 << 40) /* far above any real data set; stops overflow */
/* deflate never expands more than 1032:1 (RFC 1951: a 258-byte match in 2 bits, at best), so
 * a gzip file of N bytes cannot hold more than 1032 N bytes. */
#define GZIP_MAX_RATIO 1032

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static int idx_type_to_dtype(unsigned t, sn_dtype *dt) {
    switch (t) {
    case 0x08: *dt = SN_U8; return 1;
    case 0x0C: *dt = SN_I32; return 1;
    case 0x0D: *dt = SN_F32; return 1;
    case 0x0E: *dt = SN_F64; return 1;
    default: return 0;
    }
}

static int dtype_to_idx_type(sn_dtype dt, unsigned *t) {
    switch (dt) {
    case SN_U8: *t = 0x08; return 1;
    case SN_I32: *t = 0x0C; return 1;
    case SN_F32: *t = 0x0D; return 1;
    case SN_F64: *t = 0x0E; return 1;
    default: return 0;
    }
}

/* IDX is big-endian; reverse each element's bytes in place (a no-op for u8). */
static void swap_elements(unsigned char *p, size_t nbytes, size_t esize) {
    if (esize == 1) return;
    for (size_t i = 0; i + esize <= nbytes; i += esize)
        for (size_t a = 0, b = esize - 1; a < b; a++, b--) {
            unsigned char c = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = c;
        }
}

/* Reads up to n bytes (gzread takes an unsigned length, so large reads go in chunks). Returns
 * the count read, or -1 on a zlib error other than a short stream. */
static int64_t read_fully(gzFile f, void *buf, int64_t n) {
    int64_t got = 0;
    while (got < n) {
        int64_t want = n - got;
        if (want > (1 << 30)) want = 1 << 30;
        int r = gzread(f, (unsigned char *)buf + got, (unsigned)want);
        if (r < 0) {
            int errnum = 0;
            gzerror(f, &errnum);
            /* A gzip stream cut short reads as Z_BUF_ERROR: report it as truncation. */
            return errnum == Z_BUF_ERROR ? got : -1;
        }
        if (r == 0) break;
        got += r;
    }
    return got;
}

static sn_status gz_fail(gzFile f, const char *path, const char *what) {
    int errnum = 0;
    const char *msg = gzerror(f, &errnum);
    return sn_errorf(errnum == Z_ERRNO ? SN_ERR_IO : SN_ERR_FORMAT, "idx: %s: %s failed: %s",
                     path, what, errnum == Z_ERRNO ? strerror(errno) : msg);
}

/* file_size: bytes of the file on disk, to check the dims against before allocating. */
static sn_status idx_load_open(gzFile f, const char *path, int64_t file_size, sn_tensor **out) {
    unsigned char hdr[4 + 4 * SN_MAX_DIMS];
    int64_t got = read_fully(f, hdr, 4);
    if (got < 0) return gz_fail(f, path, "reading the header");
    if (got < 4)
        return sn_errorf(SN_ERR_FORMAT,
                         "idx: %s is truncated: expected a 4-byte magic number, found %lld "
                         "bytes",
                         path, (long long)got);
    uint32_t magic = be32(hdr);
    unsigned type = hdr[2], ndim = hdr[3];
    sn_dtype dtype = SN_U8;
    if (hdr[0] != 0 || hdr[1] != 0 || !idx_type_to_dtype(type, &dtype) || ndim < 1 ||
        ndim > SN_MAX_DIMS)
        return sn_errorf(SN_ERR_FORMAT,
                         "idx: %s: wrong magic number 0x%08x; expected 0x00000803 (images), "
                         "0x00000801 (labels) or another IDX header 0x0000TTNN (TT: 08 u8, 0C "
                         "i32, 0D f32, 0E f64; NN: 1 to %d dims). Is this an IDX file?",
                         path, (unsigned)magic, SN_MAX_DIMS);
    got = read_fully(f, hdr + 4, 4 * (int64_t)ndim);
    if (got < 0) return gz_fail(f, path, "reading the dims");
    if (got < 4 * (int64_t)ndim)
        return sn_errorf(SN_ERR_FORMAT,
                         "idx: %s is truncated: expected %u dims (%u bytes) after the magic "
                         "number, found %lld bytes",
                         path, ndim, 4 * ndim, (long long)got);
    sn_shape shape = {.ndim = (int)ndim};
    int64_t numel = 1;
    for (unsigned i = 0; i < ndim; i++) {
        shape.dim[i] = be32(hdr + 4 + 4 * i);
        if (shape.dim[i] == 0) {
            char b[128];
            return sn_errorf(SN_ERR_FORMAT,
                             "idx: %s: dimension %u is zero (dims %s); an IDX file must hold at "
                             "least one element",
                             path, i, sn_shape_str(&shape, b, sizeof b));
        }
        /* Checked before multiplying: a product of four u32 dims overflows int64. */
        if (shape.dim[i] > IDX_MAX_ELEMENTS / numel) {
            char b[128];
            shape.ndim = (int)i + 1;
            return sn_errorf(SN_ERR_FORMAT, "idx: %s: dims %s... multiply past 2^40 elements",
                             path, sn_shape_str(&shape, b, sizeof b));
        }
        numel *= shape.dim[i];
    }
    size_t esize = sn_dtype_size(dtype);
    int64_t want = numel * (int64_t)esize;
    /* The file must be able to hold what the header declares before anything is allocated:
     * a 20-byte file claiming 4 GB is an error, not a 4 GB allocation. */
    int64_t hbytes = 4 + 4 * (int64_t)ndim;
    bool plain = gzdirect(f) == 1;
    int64_t room = plain ? file_size - hbytes : file_size * GZIP_MAX_RATIO;
    if (file_size >= 0 && want > room) {
        char b[128];
        sn_shape_str(&shape, b, sizeof b);
        if (plain)
            return sn_errorf(SN_ERR_FORMAT,
                             "idx: %s is truncated: dims %s need %lld bytes of data, found %lld "
                             "(the plain file has %lld bytes)",
                             path, b, (long long)want, (long long)(room > 0 ? room : 0),
                             (long long)file_size);
        return sn_errorf(SN_ERR_FORMAT,
                         "idx: %s is truncated or corrupt: dims %s need %lld bytes of data, more "
                         "than the gzip file of %lld bytes can hold (deflate: at most 1032 bytes "
                         "per byte)",
                         path, b, (long long)want, (long long)file_size);
    }
    sn_tensor *t = NULL;
    SN_TRY(sn_tensor_new(&t, dtype, &shape));
    got = read_fully(f, sn_tensor_data(t), want);
    if (got < 0) {
        sn_tensor_free(t);
        return gz_fail(f, path, "reading the data");
    }
    if (got < want) {
        char b[128];
        sn_tensor_free(t);
        return sn_errorf(SN_ERR_FORMAT,
                         "idx: %s is truncated: dims %s need %lld bytes of data, found %lld",
                         path, sn_shape_str(&shape, b, sizeof b), (long long)want,
                         (long long)got);
    }
    swap_elements(sn_tensor_data(t), (size_t)want, esize);
    *out = t;
    return SN_OK;
}

sn_status sn_idx_load(const char *path, sn_tensor **out) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "sn_idx_load: out is NULL");
    *out = NULL;
    if (!path) return sn_errorf(SN_ERR_INVALID, "sn_idx_load: path is NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sn_errorf(SN_ERR_IO, "idx: cannot open %s: %s", path, strerror(errno));
    struct stat st;
    /* -1 (unknown: a pipe) skips the size check; the read then finds any truncation. */
    int64_t file_size = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
    gzFile f = gzdopen(fd, "rb"); /* owns fd from here; gzclose closes it */
    if (!f) {
        close(fd);
        return sn_errorf(SN_ERR_NOMEM, "idx: %s: zlib could not allocate its state", path);
    }
    if (gzbuffer(f, 1 << 17) != 0) { /* larger reads: fewer syscalls on 47 MB */
        gzclose(f);
        return sn_errorf(SN_ERR_NOMEM, "idx: %s: gzbuffer failed", path);
    }
    sn_status s = idx_load_open(f, path, file_size, out);
    gzclose(f); /* read side: nothing to flush, and errors were seen by gzread already */
    return s;
}

sn_status sn_idx_save(const char *path, const sn_tensor *t) {
    if (!path || !t)
        return sn_errorf(SN_ERR_INVALID, "sn_idx_save: NULL %s", path ? "tensor" : "path");
    unsigned type = 0;
    const sn_shape *shape = sn_tensor_shape(t);
    if (!dtype_to_idx_type(sn_tensor_dtype(t), &type))
        return sn_errorf(SN_ERR_UNSUPPORTED,
                         "idx: cannot write %s: dtype %s has no IDX type (u8, i32, f32, f64 do)",
                         path, sn_dtype_name(sn_tensor_dtype(t)));
    if (shape->ndim < 1 || shape->ndim > SN_MAX_DIMS)
        return sn_errorf(SN_ERR_SHAPE, "idx: cannot write %s: rank %d is outside [1, %d]", path,
                         shape->ndim, SN_MAX_DIMS);
    for (int i = 0; i < shape->ndim; i++)
        if (shape->dim[i] > UINT32_MAX)
            return sn_errorf(SN_ERR_SHAPE, "idx: cannot write %s: dim %d is %lld > 2^32-1",
                             path, i, (long long)shape->dim[i]);
    size_t n = strlen(path);
    bool gz = n >= 3 && strcmp(path + n - 3, ".gz") == 0;
    errno = 0;
    gzFile f = gzopen(path, gz ? "wb6" : "wbT"); /* T: write plain bytes, no gzip header */
    if (!f)
        return sn_errorf(SN_ERR_IO, "idx: cannot create %s: %s", path,
                         errno ? strerror(errno) : "zlib could not allocate its state");
    unsigned char hdr[4 + 4 * SN_MAX_DIMS];
    const int nd = shape->ndim;
    put_be32(hdr, (uint32_t)(type << 8 | (unsigned)nd));
    /* A constant trip count: with `i < nd` GCC 12 -O3 unrolls past the array and warns. */
    for (int i = 0; i < SN_MAX_DIMS; i++)
        if (i < nd) put_be32(hdr + 4 + 4 * i, (uint32_t)shape->dim[i]);
    unsigned hbytes = 4 + 4 * (unsigned)nd;
    sn_status s = SN_OK;
    if (gzwrite(f, hdr, hbytes) != (int)hbytes) s = gz_fail(f, path, "writing the header");
    /* Data goes through a bounce buffer: contiguous, big-endian. */
    size_t esize = sn_dtype_size(sn_tensor_dtype(t));
    size_t total = sn_data_nbytes(t);
    unsigned char *buf = NULL;
    if (s == SN_OK) {
        buf = sn_malloc(total);
        if (!buf) s = SN_ERR_NOMEM;
    }
    if (s == SN_OK) {
        sn_data_copy_to(buf, t);
        swap_elements(buf, total, esize);
        for (size_t off = 0; off < total && s == SN_OK;) {
            size_t chunk = total - off > (1u << 30) ? (1u << 30) : total - off;
            if (gzwrite(f, buf + off, (unsigned)chunk) != (int)chunk)
                s = gz_fail(f, path, "writing the data");
            off += chunk;
        }
    }
    free(buf);
    int rc = gzclose(f);
    if (s == SN_OK && rc != Z_OK)
        s = sn_errorf(SN_ERR_IO, "idx: closing %s failed (zlib error %d): %s", path, rc,
                      rc == Z_ERRNO ? strerror(errno) : "flush failed");
    return s;
}

/* DIR/NAME or DIR/NAME.gz, whichever exists (plain first), into buf. */
static sn_status find_file(const char *dir, const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s", dir, name);
    if (access(buf, R_OK) == 0) return SN_OK;
    snprintf(buf, cap, "%s/%s.gz", dir, name);
    if (access(buf, R_OK) == 0) return SN_OK;
    return sn_errorf(SN_ERR_NOT_FOUND,
                     "mnist: neither %s/%s nor %s/%s.gz exists (or is readable); a data set "
                     "folder holds the four IDX files of MNIST or Fashion-MNIST",
                     dir, name, dir, name);
}

sn_status sn_mnist_load(const char *dir, const char *split, sn_tensor **images,
                        sn_tensor **labels) {
    if (!images || !labels)
        return sn_errorf(SN_ERR_INVALID, "sn_mnist_load: images or labels is NULL");
    *images = *labels = NULL;
    if (!dir || !split) return sn_errorf(SN_ERR_INVALID, "sn_mnist_load: dir or split is NULL");
    const char *prefix;
    if (strcmp(split, "train") == 0) prefix = "train";
    else if (strcmp(split, "test") == 0 || strcmp(split, "t10k") == 0) prefix = "t10k";
    else
        return sn_errorf(SN_ERR_INVALID, "mnist: split \"%s\" is neither \"train\" nor \"test\"",
                         split);
    char name[64], ipath[4096], lpath[4096];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
    SN_TRY(find_file(dir, name, ipath, sizeof ipath));
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
    SN_TRY(find_file(dir, name, lpath, sizeof lpath));
    sn_tensor *x = NULL, *y = NULL;
    SN_TRY(sn_idx_load(ipath, &x));
    sn_status s = sn_idx_load(lpath, &y);
    char b[128];
    if (s == SN_OK && (sn_tensor_dtype(x) != SN_U8 || sn_tensor_shape(x)->ndim != 3))
        s = sn_errorf(SN_ERR_FORMAT, "mnist: %s holds %s %s; expected u8 images [n, rows, cols]",
                      ipath, sn_dtype_name(sn_tensor_dtype(x)),
                      sn_shape_str(sn_tensor_shape(x), b, sizeof b));
    if (s == SN_OK && (sn_tensor_dtype(y) != SN_U8 || sn_tensor_shape(y)->ndim != 1))
        s = sn_errorf(SN_ERR_FORMAT, "mnist: %s holds %s %s; expected u8 labels [n]", lpath,
                      sn_dtype_name(sn_tensor_dtype(y)),
                      sn_shape_str(sn_tensor_shape(y), b, sizeof b));
    if (s == SN_OK && sn_tensor_shape(x)->dim[0] != sn_tensor_shape(y)->dim[0])
        s = sn_errorf(SN_ERR_FORMAT,
                      "mnist: %s holds %lld images but %s holds %lld labels; the counts must "
                      "match",
                      ipath, (long long)sn_tensor_shape(x)->dim[0], lpath,
                      (long long)sn_tensor_shape(y)->dim[0]);
    if (s != SN_OK) {
        sn_tensor_free(x);
        sn_tensor_free(y);
        return s;
    }
    *images = x;
    *labels = y;
    return SN_OK;
}
