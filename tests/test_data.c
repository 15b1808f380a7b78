/* The input pipeline: IDX files (plain, gz, broken), Fashion-MNIST, every dataset transform
 * (order, counts, determinism, ownership), prefetch against the same pipeline without it,
 * TFRecord + Example round trips and corruption, and bad inputs with their messages. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/core.h"
#include "data/data_impl.h"
#include "sinter/data.h"
#include "sn_test.h"

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

static char tmpdir[256];
static char files[64][320];
static int nfiles;

static const char *tmp_path(const char *name) {
    snprintf(files[nfiles], sizeof files[0], "%s/%s", tmpdir, name);
    return files[nfiles++];
}

static void write_bytes(const char *path, const void *p, size_t n, bool gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        if (!f || gzwrite(f, p, (unsigned)n) != (int)n || gzclose(f) != Z_OK)
            fprintf(stderr, "test setup: cannot write %s\n", path);
    } else {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
            fprintf(stderr, "test setup: cannot write %s\n", path);
    }
}

/* An IDX u8 file written by hand (independent of sn_idx_save). */
static size_t make_idx(unsigned char *buf, uint32_t magic, int ndim, const uint32_t *dims,
                       const unsigned char *data, size_t ndata) {
    size_t o = 0;
    for (int s = 24; s >= 0; s -= 8) buf[o++] = (unsigned char)(magic >> s);
    for (int i = 0; i < ndim; i++)
        for (int s = 24; s >= 0; s -= 8) buf[o++] = (unsigned char)(dims[i] >> s);
    memcpy(buf + o, data, ndata);
    return o + ndata;
}

/* ---- IDX --------------------------------------------------------------------------------- */

static void test_idx(void) {
    unsigned char pix[5 * 4 * 3], buf[4096];
    for (int i = 0; i < 60; i++) pix[i] = (unsigned char)(i * 7 + 3);
    uint32_t dims[3] = {5, 4, 3};
    size_t n = make_idx(buf, 0x00000803, 3, dims, pix, 60);
    for (int gz = 0; gz < 2; gz++) {
        const char *p = tmp_path(gz ? "img.idx.gz" : "img.idx");
        write_bytes(p, buf, n, gz);
        sn_tensor *t = NULL;
        CHECK_OK(sn_idx_load(p, &t));
        if (!t) continue;
        const sn_shape *s = sn_tensor_shape(t);
        CHECK(sn_tensor_dtype(t) == SN_U8 && s->ndim == 3 && s->dim[0] == 5 && s->dim[1] == 4 &&
                  s->dim[2] == 3,
              "%s: got %s with %d dims", p, sn_dtype_name(sn_tensor_dtype(t)), s->ndim);
        CHECK(memcmp(sn_tensor_data(t), pix, 60) == 0, "%s: pixel data differs", p);
        sn_tensor_free(t);
    }
    /* sn_idx_save round trip for every supported dtype, plain and gz. */
    sn_dtype dts[4] = {SN_U8, SN_I32, SN_F32, SN_F64};
    for (int d = 0; d < 4; d++)
        for (int gz = 0; gz < 2; gz++) {
            sn_shape sh = sn_shape_make(2, (int64_t)3, (int64_t)5);
            sn_tensor *t = NULL, *u = NULL;
            CHECK_OK(sn_tensor_new(&t, dts[d], &sh));
            unsigned char *raw = sn_tensor_data(t);
            for (size_t i = 0; i < 15 * sn_dtype_size(dts[d]); i++) raw[i] = (unsigned char)(i * 13 + 1);
            char name[64];
            snprintf(name, sizeof name, "save_%d%s", d, gz ? ".gz" : "");
            const char *p = tmp_path(name);
            CHECK_OK(sn_idx_save(p, t));
            CHECK_OK(sn_idx_load(p, &u));
            CHECK(u && sn_tensor_dtype(u) == dts[d] && sn_shape_equal(sn_tensor_shape(u), &sh) &&
                      memcmp(sn_tensor_data(u), raw, 15 * sn_dtype_size(dts[d])) == 0,
                  "idx save/load round trip differs for %s gz=%d", sn_dtype_name(dts[d]), gz);
            sn_tensor_free(t);
            sn_tensor_free(u);
        }

    sn_tensor *t = NULL;
    /* truncated: dims say 10 x 28 x 28 = 7840 bytes, 100 are there */
    uint32_t big[3] = {10, 28, 28};
    n = make_idx(buf, 0x00000803, 3, big, pix, 60);
    memset(buf + n, 9, 40);
    n += 40;
    for (int gz = 0; gz < 2; gz++) {
        const char *p = tmp_path(gz ? "trunc.gz" : "trunc");
        write_bytes(p, buf, n, gz);
        CHECK_ERR(sn_idx_load(p, &t), SN_ERR_FORMAT, "truncated");
        CHECK(strstr(sn_last_error(), "7840 bytes of data, found 100") && strstr(sn_last_error(), p),
              "message: %s", sn_last_error());
        CHECK(t == NULL, "a failed load leaves *out NULL");
    }
    /* a cut-short gzip stream (the gzip file itself truncated) */
    {
        const char *full = tmp_path("full.gz");
        uint32_t d1[1] = {4000};
        unsigned char *b = malloc(8 + 4000);
        unsigned char *data = malloc(4000);
        for (int i = 0; i < 4000; i++) data[i] = (unsigned char)(i * 31 % 251);
        size_t m = make_idx(b, 0x00000801, 1, d1, data, 4000);
        write_bytes(full, b, m, true);
        FILE *f = fopen(full, "rb");
        unsigned char gzb[8192];
        size_t gzn = f ? fread(gzb, 1, sizeof gzb, f) : 0;
        if (f) fclose(f);
        const char *cut = tmp_path("cut.gz");
        write_bytes(cut, gzb, gzn / 2, false);
        sn_status s = sn_idx_load(cut, &t);
        CHECK(s != SN_OK && strstr(sn_last_error(), cut), "cut gzip: %s %s", sn_status_name(s),
              sn_last_error());
        free(b);
        free(data);
    }
    /* wrong magic */
    n = make_idx(buf, 0x12345678, 0, NULL, pix, 60);
    const char *p = tmp_path("magic");
    write_bytes(p, buf, n, false);
    CHECK_ERR(sn_idx_load(p, &t), SN_ERR_FORMAT, "wrong magic number 0x12345678");
    CHECK(strstr(sn_last_error(), "0x00000803") && strstr(sn_last_error(), p), "message: %s",
          sn_last_error());
    /* zero dim */
    uint32_t zd[3] = {5, 0, 3};
    n = make_idx(buf, 0x00000803, 3, zd, pix, 0);
    p = tmp_path("zero");
    write_bytes(p, buf, n, false);
    CHECK_ERR(sn_idx_load(p, &t), SN_ERR_FORMAT, "dimension 1 is zero");
    /* missing */
    CHECK_ERR(sn_idx_load("/nonexistent/dir/x-idx3-ubyte", &t), SN_ERR_IO,
              "cannot open /nonexistent/dir/x-idx3-ubyte: No such file");
    /* truncated header */
    p = tmp_path("short");
    write_bytes(p, buf, 2, false);
    CHECK_ERR(sn_idx_load(p, &t), SN_ERR_FORMAT, "expected a 4-byte magic number, found 2");
}

static void test_mnist_folder(void) {
    /* a folder whose label count differs from its image count */
    char dir[300];
    snprintf(dir, sizeof dir, "%s/mn", tmpdir);
    mkdir(dir, 0700);
    unsigned char buf[512], pix[5 * 2 * 2] = {0};
    uint32_t di[3] = {5, 2, 2}, dl[1] = {4};
    size_t n = make_idx(buf, 0x00000803, 3, di, pix, 20);
    write_bytes(tmp_path("mn/train-images-idx3-ubyte.gz"), buf, n, true);
    n = make_idx(buf, 0x00000801, 1, dl, pix, 4);
    write_bytes(tmp_path("mn/train-labels-idx1-ubyte"), buf, n, false);
    sn_tensor *x = NULL, *y = NULL;
    CHECK_ERR(sn_mnist_load(dir, "train", &x, &y), SN_ERR_FORMAT, "holds 5 images but");
    CHECK(strstr(sn_last_error(), "train-images-idx3-ubyte.gz") &&
              strstr(sn_last_error(), "train-labels-idx1-ubyte holds 4 labels"),
          "message: %s", sn_last_error());
    CHECK(!x && !y, "failed load leaves outputs NULL");
    CHECK_ERR(sn_mnist_load(dir, "test", &x, &y), SN_ERR_NOT_FOUND, "t10k-images-idx3-ubyte.gz");
    CHECK_ERR(sn_mnist_load(dir, "valid", &x, &y), SN_ERR_INVALID, "\"valid\"");
}

static void test_fashion_mnist(void) {
    if (access(FMNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0) {
        sn_test_skip("Fashion-MNIST load: " FMNIST_DIR " is absent (Debian package "
                     "dataset-fashion-mnist)");
        return;
    }
    const char *splits[2] = {"train", "test"};
    int64_t want[2] = {60000, 10000};
    for (int sp = 0; sp < 2; sp++) {
        sn_tensor *x = NULL, *y = NULL;
        double t0 = sn_now();
        CHECK_OK(sn_mnist_load(FMNIST_DIR, splits[sp], &x, &y));
        double dt = sn_now() - t0;
        if (!x || !y) continue;
        const sn_shape *sx = sn_tensor_shape(x), *sy = sn_tensor_shape(y);
        CHECK(sx->ndim == 3 && sx->dim[0] == want[sp] && sx->dim[1] == 28 && sx->dim[2] == 28,
              "%s images: %lld x %lld x %lld", splits[sp], (long long)sx->dim[0],
              (long long)sx->dim[1], (long long)sx->dim[2]);
        CHECK(sy->ndim == 1 && sy->dim[0] == want[sp], "%s labels: %lld", splits[sp],
              (long long)sy->dim[0]);
        int64_t hist[256] = {0};
        const uint8_t *l = sn_tensor_data(y);
        for (int64_t i = 0; i < sy->dim[0]; i++) hist[l[i]]++;
        for (int c = 0; c < 10; c++)
            CHECK(hist[c] == want[sp] / 10, "%s: class %d has %lld labels, want %lld", splits[sp],
                  c, (long long)hist[c], (long long)want[sp] / 10);
        int64_t sum = 0;
        const uint8_t *px = sn_tensor_data(x);
        for (int64_t i = 0; i < 784; i++) sum += px[i];
        CHECK(sum > 0, "%s: first image is all zero", splits[sp]);
        printf("fashion-mnist %s: %lld images loaded in %.3f s\n", splits[sp],
               (long long)sx->dim[0], dt);
        sn_tensor_free(x);
        sn_tensor_free(y);
    }
}

/* ---- datasets ---------------------------------------------------------------------------- */

#define N 100

/* x: u8 [N, 2, 3] with every byte of element i equal to i; y: u8 [N] = i. */
static sn_dataset *make_ds(void) {
    sn_shape sx = sn_shape_make(3, (int64_t)N, (int64_t)2, (int64_t)3);
    sn_shape sy = sn_shape_make(1, (int64_t)N);
    sn_tensor *x = NULL, *y = NULL;
    sn_dataset *ds = NULL;
    if (sn_tensor_new(&x, SN_U8, &sx) || sn_tensor_new(&y, SN_U8, &sy)) return NULL;
    for (int i = 0; i < N; i++) {
        memset((uint8_t *)sn_tensor_data(x) + 6 * i, i, 6);
        ((uint8_t *)sn_tensor_data(y))[i] = (uint8_t)i;
    }
    sn_tensor *xy[2] = {x, y};
    sn_status s = sn_dataset_from_tensors(&ds, 2, xy);
    sn_tensor_free(x); /* from_tensors copied them */
    sn_tensor_free(y);
    if (s != SN_OK) fprintf(stderr, "make_ds: %s\n", sn_last_error());
    return ds;
}

/* Iterates one epoch; appends every label value (component 1, any batch size) to out and
 * checks that each image (component 0) is consistent with its label. Returns the count. */
static int64_t collect(sn_dataset *ds, int64_t *out, int64_t cap, int64_t *nbatches) {
    int64_t n = 0, nb = 0;
    for (;;) {
        sn_tensor *c[2] = {NULL, NULL};
        bool end = true;
        sn_status s = sn_dataset_next(ds, c, &end);
        if (s != SN_OK) {
            CHECK(s == SN_OK, "next failed: %s", sn_last_error());
            break;
        }
        if (end) break;
        nb++;
        int64_t k = sn_tensor_numel(c[1]);
        int64_t per = sn_tensor_numel(c[0]) / (k ? k : 1);
        for (int64_t i = 0; i < k; i++) {
            double v = sn_tensor_get(c[1], i);
            double px = sn_tensor_get(c[0], i * per);
            if (sn_tensor_dtype(c[0]) == SN_F32) px = px * 255.0;
            if ((int64_t)(px + 0.5) != (int64_t)v) {
                CHECK(false, "image of element with label %g holds %g", v, px);
                return n;
            }
            if (n < cap) out[n] = (int64_t)v;
            n++;
        }
    }
    if (nbatches) *nbatches = nb;
    return n;
}

static bool is_perm(const int64_t *v, int64_t n, int64_t m) {
    int seen[N] = {0};
    if (n != m) return false;
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= m || seen[v[i]]++) return false;
    }
    return true;
}

static void test_basic_and_maps(void) {
    sn_dataset *ds = make_ds();
    CHECK(ds != NULL, "make_ds");
    if (!ds) return;
    int64_t v[4 * N];
    CHECK(sn_dataset_cardinality(ds) == N, "cardinality %lld", (long long)sn_dataset_cardinality(ds));
    CHECK(sn_dataset_num_components(ds) == 2, "components");
    int64_t n = collect(ds, v, N, NULL);
    bool inorder = n == N;
    for (int i = 0; inorder && i < N; i++) inorder = v[i] == i;
    CHECK(inorder, "from_tensors order (got %lld elements)", (long long)n);
    /* after the end: still end, until reset */
    sn_tensor *c[2];
    bool end = false;
    CHECK_OK(sn_dataset_next(ds, c, &end));
    CHECK(end, "end is sticky");
    CHECK_OK(sn_dataset_reset(ds));
    CHECK(collect(ds, v, N, NULL) == N, "second epoch after reset");

    /* normalize with a channel, cast labels */
    CHECK_OK(sn_dataset_map_normalize(&ds, 0, true));
    CHECK_OK(sn_dataset_map_cast(&ds, 1, SN_I32));
    CHECK_OK(sn_dataset_reset(ds));
    CHECK_OK(sn_dataset_next(ds, c, &end));
    CHECK_OK(sn_dataset_next(ds, c, &end));
    if (!end) {
        const sn_shape *s = sn_tensor_shape(c[0]);
        CHECK(sn_tensor_dtype(c[0]) == SN_F32 && s->ndim == 3 && s->dim[0] == 2 &&
                  s->dim[1] == 3 && s->dim[2] == 1,
              "normalize: %s with %d dims", sn_dtype_name(sn_tensor_dtype(c[0])), s->ndim);
        CHECK(((float *)sn_tensor_data(c[0]))[5] == 1.0f / 255.0f,
              "normalize value %.9g", ((float *)sn_tensor_data(c[0]))[5]);
        CHECK(sn_tensor_dtype(c[1]) == SN_I32 && sn_tensor_shape(c[1])->ndim == 0 &&
                  *(int32_t *)sn_tensor_data(c[1]) == 1,
              "cast label: %s", sn_dtype_name(sn_tensor_dtype(c[1])));
    }
    CHECK_OK(sn_dataset_reset(ds));
    CHECK(collect(ds, v, N, NULL) == N, "mapped epoch");
    /* normalize on a float component is an error, on the first element */
    CHECK_OK(sn_dataset_map_normalize(&ds, 0, false));
    CHECK_OK(sn_dataset_reset(ds));
    CHECK_ERR(sn_dataset_next(ds, c, &end), SN_ERR_SHAPE, "normalize expects uint8");
    CHECK_ERR(sn_dataset_map_cast(&ds, 2, SN_I32), SN_ERR_INVALID, "component 2 is outside [0, 2)");
    sn_dataset_free(ds);
}

static void test_shuffle(void) {
    int64_t a[N], b[N], c[N], d[N], e[N];
    sn_dataset *d1 = make_ds(), *d2 = make_ds(), *d3 = make_ds(), *d4 = make_ds();
    CHECK_OK(sn_dataset_shuffle(&d1, N, 42, true));
    CHECK_OK(sn_dataset_shuffle(&d2, N, 42, true));
    CHECK_OK(sn_dataset_shuffle(&d3, N, 43, true));
    CHECK_OK(sn_dataset_shuffle(&d4, N, 42, false));
    CHECK(collect(d1, a, N, NULL) == N && is_perm(a, N, N), "shuffle is a permutation");
    CHECK(collect(d2, b, N, NULL) == N && memcmp(a, b, sizeof a) == 0, "same seed, same order");
    CHECK(collect(d3, c, N, NULL) == N && is_perm(c, N, N) && memcmp(a, c, sizeof a) != 0,
          "different seed, different order");
    bool ident = true;
    for (int i = 0; i < N; i++) ident = ident && a[i] == i;
    CHECK(!ident, "shuffled order is not the identity");
    /* reshuffle each iteration: epoch 1 differs from epoch 0, and equals another run's epoch 1 */
    CHECK_OK(sn_dataset_reset(d1));
    CHECK(collect(d1, d, N, NULL) == N && is_perm(d, N, N) && memcmp(a, d, sizeof a) != 0,
          "epoch 1 has a new order");
    CHECK_OK(sn_dataset_reset(d2));
    CHECK(collect(d2, e, N, NULL) == N && memcmp(d, e, sizeof d) == 0, "epoch 1 reproducible");
    /* without reshuffle: same order every epoch */
    CHECK(collect(d4, d, N, NULL) == N && memcmp(a, d, sizeof a) == 0, "reshuffle=false epoch 0");
    CHECK_OK(sn_dataset_reset(d4));
    CHECK(collect(d4, e, N, NULL) == N && memcmp(d, e, sizeof d) == 0, "reshuffle=false epoch 1");
    /* a small buffer still yields each element exactly once */
    sn_dataset *d5 = make_ds();
    CHECK_OK(sn_dataset_shuffle(&d5, 10, 7, true));
    CHECK(collect(d5, e, N, NULL) == N && is_perm(e, N, N), "buffer 10: permutation");
    bool local = true;
    for (int i = 0; i < N; i++) local = local && e[i] < i + 10; /* TF buffer semantics */
    CHECK(local, "buffer 10: element i comes out no earlier than position i - 9");
    CHECK_ERR(sn_dataset_shuffle(&d5, 0, 1, true), SN_ERR_INVALID, "buffer_size 0");
    sn_dataset_free(d1);
    sn_dataset_free(d2);
    sn_dataset_free(d3);
    sn_dataset_free(d4);
    sn_dataset_free(d5);
}

static void test_batch_repeat_take_skip_shard(void) {
    int64_t v[4 * N], nb = 0;
    sn_dataset *ds = make_ds();
    CHECK_OK(sn_dataset_batch(&ds, 32, false));
    CHECK(sn_dataset_cardinality(ds) == 4, "batch card %lld", (long long)sn_dataset_cardinality(ds));
    int64_t n = collect(ds, v, N, &nb);
    bool inorder = n == N;
    for (int i = 0; inorder && i < N; i++) inorder = v[i] == i;
    CHECK(nb == 4 && inorder, "batch(32): %lld batches, %lld elements in order=%d", (long long)nb,
          (long long)n, inorder);
    /* the shapes: full batches [32, 2, 3], the last [4, 2, 3] */
    CHECK_OK(sn_dataset_reset(ds));
    sn_tensor *c[2];
    bool end;
    int64_t dims0[5] = {0};
    for (int i = 0; i < 5; i++) {
        CHECK_OK(sn_dataset_next(ds, c, &end));
        if (end) break;
        dims0[i] = sn_tensor_shape(c[0])->dim[0];
        CHECK(sn_tensor_shape(c[0])->ndim == 3 && sn_tensor_shape(c[1])->ndim == 1 &&
                  sn_tensor_shape(c[1])->dim[0] == dims0[i],
              "batch %d shapes", i);
    }
    CHECK(dims0[0] == 32 && dims0[3] == 4 && dims0[4] == 0, "batch sizes %lld..%lld",
          (long long)dims0[0], (long long)dims0[3]);
    sn_dataset_free(ds);

    ds = make_ds();
    CHECK_OK(sn_dataset_batch(&ds, 32, true));
    CHECK(sn_dataset_cardinality(ds) == 3, "drop card");
    CHECK(collect(ds, v, N, &nb) == 96 && nb == 3, "drop_remainder: %lld batches", (long long)nb);
    sn_dataset_free(ds);

    ds = make_ds();
    CHECK_OK(sn_dataset_repeat(&ds, 3));
    CHECK(sn_dataset_cardinality(ds) == 3 * N, "repeat card");
    n = collect(ds, v, 4 * N, NULL);
    CHECK(n == 3 * N && v[N] == 0 && v[2 * N + 99] == 99, "repeat(3): %lld", (long long)n);
    sn_dataset_free(ds);

    ds = make_ds();
    CHECK_OK(sn_dataset_shuffle(&ds, N, 5, true));
    CHECK_OK(sn_dataset_repeat(&ds, -1));
    CHECK(sn_dataset_cardinality(ds) == SN_CARDINALITY_INFINITE, "repeat(-1) card");
    CHECK_OK(sn_dataset_take(&ds, 250));
    CHECK(sn_dataset_cardinality(ds) == 250, "take card");
    n = collect(ds, v, 4 * N, NULL);
    CHECK(n == 250 && is_perm(v, N, N) && is_perm(v + N, N, N) && memcmp(v, v + N, N * 8) != 0,
          "repeat(-1).take(250) over a shuffle: epochs are permutations with new orders");
    sn_dataset_free(ds);

    ds = make_ds();
    CHECK_OK(sn_dataset_skip(&ds, 95));
    CHECK(sn_dataset_cardinality(ds) == 5, "skip card");
    n = collect(ds, v, N, NULL);
    CHECK(n == 5 && v[0] == 95 && v[4] == 99, "skip(95)");
    CHECK_OK(sn_dataset_reset(ds));
    CHECK(collect(ds, v, N, NULL) == 5 && v[0] == 95, "skip after reset");
    CHECK_OK(sn_dataset_take(&ds, 2));
    CHECK_OK(sn_dataset_reset(ds)); /* the skip below had reached its end: start over */
    CHECK(collect(ds, v, N, NULL) == 2 && v[1] == 96, "skip(95).take(2)");
    sn_dataset_free(ds);

    /* shards: disjoint, covering, sizes 34/33/33 */
    int seen[N] = {0};
    for (int k = 0; k < 3; k++) {
        ds = make_ds();
        CHECK_OK(sn_dataset_shard(&ds, 3, k));
        int64_t want = k == 0 ? 34 : 33;
        CHECK(sn_dataset_cardinality(ds) == want, "shard %d card %lld", k,
              (long long)sn_dataset_cardinality(ds));
        n = collect(ds, v, N, NULL);
        CHECK(n == want, "shard %d has %lld", k, (long long)n);
        for (int64_t i = 0; i < n; i++) {
            CHECK(v[i] % 3 == k, "shard %d got %lld", k, (long long)v[i]);
            seen[v[i]]++;
        }
        CHECK_ERR(sn_dataset_shard(&ds, 3, 3), SN_ERR_INVALID, "index 3 is outside [0, 3)");
        sn_dataset_free(ds);
    }
    bool cover = true;
    for (int i = 0; i < N; i++) cover = cover && seen[i] == 1;
    CHECK(cover, "shards cover the data exactly once");
}

/* Counts calls; element 50 fails when fail_at says so; odd elements get another shape when
 * vary is set. Output: f32 copy of component 0 (scaled /255), label passed through as i32. */
typedef struct {
    int calls, fail_at;
    bool vary;
} map_ctx;

static sn_status my_map(void *user, sn_tensor *const *in, int n_in, sn_tensor **out, int n_out) {
    map_ctx *m = user;
    m->calls++;
    int label = (int)sn_tensor_get(in[1], 0);
    if (m->fail_at >= 0 && label == m->fail_at)
        return sn_errorf(SN_ERR_NUMERIC, "my_map: element %d is cursed", label);
    sn_shape s = *sn_tensor_shape(in[0]);
    if (m->vary && label % 2) s.dim[0] = 1; /* [1, 3] instead of [2, 3] */
    sn_shape sc = {.ndim = 0};
    SN_TRY(sn_dataset_ensure_output(&out[0], SN_F32, &s));
    SN_TRY(sn_dataset_ensure_output(&out[1], SN_I32, &sc));
    float *y = sn_tensor_data(out[0]);
    for (int64_t i = 0; i < sn_shape_numel(&s); i++) y[i] = (float)sn_tensor_get(in[0], i) / 255.0f;
    *(int32_t *)sn_tensor_data(out[1]) = label;
    return SN_OK;
}

static void test_user_map_cache_prefetch(void) {
    int64_t a[4 * N], b[4 * N];
    map_ctx m = {0, -1, false};
    sn_dataset *ds = make_ds();
    CHECK_OK(sn_dataset_map(&ds, 2, my_map, &m));
    CHECK_OK(sn_dataset_cache(&ds));
    CHECK(collect(ds, a, N, NULL) == N && m.calls == N, "cache pass 1: %d calls", m.calls);
    CHECK_OK(sn_dataset_reset(ds));
    CHECK(collect(ds, b, N, NULL) == N && m.calls == N && memcmp(a, b, sizeof(int64_t) * N) == 0,
          "cache pass 2 served from memory: %d calls", m.calls);
    sn_dataset_free(ds);
    /* a pass interrupted by reset is discarded */
    m.calls = 0;
    ds = make_ds();
    CHECK_OK(sn_dataset_map(&ds, 2, my_map, &m));
    CHECK_OK(sn_dataset_cache(&ds));
    sn_tensor *c[2];
    bool end;
    for (int i = 0; i < 10; i++) CHECK_OK(sn_dataset_next(ds, c, &end));
    CHECK_OK(sn_dataset_reset(ds));
    CHECK(collect(ds, a, N, NULL) == N && m.calls == 10 + N, "partial cache discarded: %d", m.calls);
    CHECK_OK(sn_dataset_reset(ds));
    CHECK(collect(ds, a, N, NULL) == N && m.calls == 10 + N, "then cached: %d", m.calls);
    sn_dataset_free(ds);

    /* prefetch gives exactly the sequence without it, over three epochs, with a reset in the
     * middle of one; compared byte for byte */
    sn_dataset *p = make_ds(), *q = make_ds();
    sn_dataset **both[2] = {&p, &q};
    for (int k = 0; k < 2; k++) {
        CHECK_OK(sn_dataset_map_normalize(both[k], 0, true));
        CHECK_OK(sn_dataset_map_cast(both[k], 1, SN_I32));
        CHECK_OK(sn_dataset_shuffle(both[k], 30, 9, true));
        CHECK_OK(sn_dataset_batch(both[k], 7, false));
    }
    CHECK_OK(sn_dataset_prefetch(&q, 2));
    CHECK(sn_dataset_cardinality(q) == 15, "prefetch card");
    int mism = 0, steps = 0;
    for (int epoch = 0; epoch < 3; epoch++) {
        for (int step = 0;; step++) {
            if (epoch == 1 && step == 5) break; /* reset mid-epoch */
            sn_tensor *cp[2], *cq[2];
            bool ep = false, eq = false;
            CHECK_OK(sn_dataset_next(p, cp, &ep));
            CHECK_OK(sn_dataset_next(q, cq, &eq));
            if (ep != eq) {
                mism++;
                break;
            }
            if (ep) break;
            steps++;
            for (int k = 0; k < 2; k++)
                if (!sn_shape_equal(sn_tensor_shape(cp[k]), sn_tensor_shape(cq[k])) ||
                    memcmp(sn_tensor_data(cp[k]), sn_tensor_data(cq[k]),
                           sn_data_nbytes(cp[k])) != 0)
                    mism++;
        }
        CHECK_OK(sn_dataset_reset(p));
        CHECK_OK(sn_dataset_reset(q));
    }
    CHECK(mism == 0 && steps == 15 + 5 + 15, "prefetch differs from no prefetch: %d mismatches in %d steps",
          mism, steps);
    /* free while the worker is mid-epoch and the queue is full: must not hang or leak */
    CHECK_OK(sn_dataset_next(q, c, &end));
    sn_dataset_free(p);
    sn_dataset_free(q);

    /* an error on the worker thread comes back with its message, after the good elements */
    m = (map_ctx){0, 50, false};
    ds = make_ds();
    CHECK_OK(sn_dataset_map(&ds, 2, my_map, &m));
    CHECK_OK(sn_dataset_prefetch(&ds, 4));
    int good = 0;
    sn_status s = SN_OK;
    for (;;) {
        s = sn_dataset_next(ds, c, &end);
        if (s != SN_OK || end) break;
        good++;
    }
    CHECK(s == SN_ERR_NUMERIC && good == 50 && strstr(sn_last_error(), "element 50 is cursed"),
          "worker error: %s after %d elements: %s", sn_status_name(s), good, sn_last_error());
    CHECK_OK(sn_dataset_reset(ds));
    CHECK_OK(sn_dataset_next(ds, c, &end));
    sn_dataset_free(ds);

    /* shapes that differ between elements: batch says which */
    m = (map_ctx){0, -1, true};
    ds = make_ds();
    CHECK_OK(sn_dataset_map(&ds, 2, my_map, &m));
    CHECK_OK(sn_dataset_batch(&ds, 4, false));
    CHECK_ERR(sn_dataset_next(ds, c, &end), SN_ERR_SHAPE,
              "element 1 of a batch has float32 [1, 3] in component 0 but element 0 has float32 [2, 3]");
    sn_dataset_free(ds);
}

static void test_bad_inputs(void) {
    sn_dataset *ds = NULL;
    sn_shape sx = sn_shape_make(2, (int64_t)100, (int64_t)4), sy = sn_shape_make(1, (int64_t)99);
    sn_shape s0 = sn_shape_make(2, (int64_t)0, (int64_t)4);
    sn_tensor *x = NULL, *y = NULL, *z = NULL;
    CHECK_OK(sn_tensor_new(&x, SN_U8, &sx));
    CHECK_OK(sn_tensor_new(&y, SN_U8, &sy));
    CHECK_OK(sn_tensor_new(&z, SN_U8, &s0));
    sn_tensor *xy[2] = {x, y};
    CHECK_ERR(sn_dataset_from_tensors(&ds, 2, xy), SN_ERR_SHAPE,
              "component 1 has 99 elements (shape [99]) but component 0 has 100");
    CHECK(ds == NULL, "no dataset on error");
    CHECK_ERR(sn_dataset_from_tensors(&ds, 1, &z), SN_ERR_SHAPE, "empty");
    CHECK_ERR(sn_dataset_from_tensors(&ds, 0, xy), SN_ERR_INVALID, "n_components 0");
    CHECK_OK(sn_dataset_from_tensors(&ds, 1, &x));
    sn_dataset *before = ds;
    CHECK_ERR(sn_dataset_batch(&ds, 0, false), SN_ERR_INVALID, "batch_size 0 must be at least 1");
    CHECK_ERR(sn_dataset_batch(&ds, 512, true), SN_ERR_INVALID,
              "batch: batch_size 512 is larger than the 100 elements of the dataset with "
              "drop_remainder=true, so no batch can be made");
    CHECK(ds == before, "a failed transform leaves *ds as it was");
    CHECK_OK(sn_dataset_batch(&ds, 512, false)); /* one short batch is fine */
    sn_tensor *c[1];
    bool end;
    CHECK_OK(sn_dataset_next(ds, c, &end));
    CHECK(!end && sn_tensor_shape(c[0])->dim[0] == 100, "short batch of 100");
    CHECK_ERR(sn_dataset_prefetch(&ds, 0), SN_ERR_INVALID, "buffer_size 0");
    CHECK_ERR(sn_dataset_repeat(&ds, -2), SN_ERR_INVALID, "count -2");
    CHECK_ERR(sn_dataset_take(NULL, 1), SN_ERR_INVALID, "NULL");
    CHECK_ERR(sn_dataset_next(ds, NULL, &end), SN_ERR_INVALID, "components");
    sn_dataset_free(ds);
    /* take(0) is an empty dataset; repeat(-1) over it ends instead of spinning */
    CHECK_OK(sn_dataset_from_tensors(&ds, 1, &x));
    CHECK_OK(sn_dataset_take(&ds, 0));
    CHECK_OK(sn_dataset_repeat(&ds, -1));
    CHECK(sn_dataset_cardinality(ds) == 0, "repeat of empty: card 0");
    CHECK_OK(sn_dataset_next(ds, c, &end));
    CHECK(end, "repeat(-1) of an empty dataset ends");
    sn_dataset_free(ds);
    sn_tensor_free(x);
    sn_tensor_free(y);
    sn_tensor_free(z);
}

/* ---- TFRecord and Example ---------------------------------------------------------------- */

static void test_tfrecord(void) {
    CHECK(sn_crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c check value: 0x%08x",
          sn_crc32c(0, "123456789", 9));
    /* slicing-by-8 must agree with a split computation at every length */
    unsigned char big[1000];
    for (int i = 0; i < 1000; i++) big[i] = (unsigned char)(i * 97 + 5);
    CHECK(sn_crc32c(sn_crc32c(0, big, 333), big + 333, 667) == sn_crc32c(0, big, 1000), "crc continuation");

    static unsigned char recs[3][300];
    size_t lens[3] = {0, 17, 300};
    for (int r = 0; r < 3; r++)
        for (size_t i = 0; i < lens[r]; i++) recs[r][i] = (unsigned char)(r * 50 + i);
    for (int gz = 0; gz < 2; gz++) {
        const char *p = tmp_path(gz ? "r.tfrecord.gz" : "r.tfrecord");
        sn_tfrecord_writer *w = NULL;
        CHECK_OK(sn_tfrecord_writer_open(&w, p, gz));
        for (int r = 0; r < 3; r++) CHECK_OK(sn_tfrecord_write(w, recs[r], lens[r]));
        CHECK_OK(sn_tfrecord_writer_close(w));
        sn_tfrecord_reader *rd = NULL;
        CHECK_OK(sn_tfrecord_open(&rd, p));
        if (!rd) continue;
        for (int r = 0; r < 4; r++) {
            const uint8_t *d = NULL;
            size_t len = 0;
            bool end = false;
            CHECK_OK(sn_tfrecord_read(rd, &d, &len, &end));
            if (r == 3) CHECK(end, "end after 3 records");
            else CHECK(!end && len == lens[r] && (len == 0 || memcmp(d, recs[r], len) == 0),
                       "record %d (gz=%d) differs: len %zu", r, gz, len);
        }
        sn_tfrecord_close(rd);
    }
    /* corruption: flip one data byte of record 1 (at 12 + 0 + 4 + 12 + 3), then one length
     * byte of record 2, then cut the file short */
    const char *p = files[nfiles - 2]; /* the plain file */
    FILE *f = fopen(p, "rb");
    unsigned char raw[1024];
    size_t n = f ? fread(raw, 1, sizeof raw, f) : 0;
    if (f) fclose(f);
    CHECK(n == 3 * 16 + 317, "file size %zu", n);
    struct {
        size_t at;
        const char *want;
        size_t len;
    } cases[3] = {{16 + 12 + 3, "record 1: corrupt data", n},
                  {16 + 33 + 2, "record 2: corrupt length", n},
                  {0, "record 2 is truncated: expected 300 bytes", n - 10}};
    for (int k = 0; k < 3; k++) {
        unsigned char bad[1024];
        memcpy(bad, raw, n);
        if (cases[k].at) bad[cases[k].at] ^= 0x40;
        const char *q = tmp_path(k == 0 ? "bad0.tfrecord" : k == 1 ? "bad1.tfrecord" : "bad2.tfrecord");
        write_bytes(q, bad, cases[k].len, false);
        sn_tfrecord_reader *rd = NULL;
        CHECK_OK(sn_tfrecord_open(&rd, q));
        sn_status s = SN_OK;
        for (int r = 0; r < 4 && s == SN_OK; r++) {
            const uint8_t *d;
            size_t len;
            bool end;
            s = sn_tfrecord_read(rd, &d, &len, &end);
        }
        CHECK(s == SN_ERR_FORMAT && strstr(sn_last_error(), cases[k].want) && strstr(sn_last_error(), q),
              "case %d: %s: %s", k, sn_status_name(s), sn_last_error());
        sn_tfrecord_close(rd);
    }
}

static void test_example(void) {
    const uint8_t b0[] = {1, 2, 3}, b1[] = {0xff};
    const uint8_t *bv[2] = {b0, b1};
    size_t bl[2] = {3, 1};
    float fv[3] = {1.5f, -2.25f, 1e30f};
    int64_t iv[4] = {0, -5, INT64_MAX, INT64_MIN};
    sn_feature in[5] = {
        {.name = "img", .kind = SN_FEATURE_BYTES, .count = 2, .bytes = bv, .bytes_len = bl},
        {.name = "f", .kind = SN_FEATURE_FLOAT, .count = 3, .floats = fv},
        {.name = "label", .kind = SN_FEATURE_INT64, .count = 4, .int64s = iv},
        {.name = "empty", .kind = SN_FEATURE_FLOAT, .count = 0},
        {.name = "none", .kind = SN_FEATURE_NONE},
    };
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK_OK(sn_example_encode(in, 5, &buf, &len));
    sn_example *ex = NULL;
    CHECK_OK(sn_example_new(&ex));
    for (int rep = 0; rep < 2; rep++) { /* parse twice: buffers are reused */
        CHECK_OK(sn_example_parse(ex, buf, len));
        CHECK(sn_example_num_features(ex) == 5, "features: %d", sn_example_num_features(ex));
        const sn_feature *f = sn_example_find(ex, "img");
        CHECK(f && f->kind == SN_FEATURE_BYTES && f->count == 2 && f->bytes_len[0] == 3 &&
                  memcmp(f->bytes[0], b0, 3) == 0 && f->bytes_len[1] == 1 && f->bytes[1][0] == 0xff,
              "bytes feature");
        f = sn_example_find(ex, "f");
        CHECK(f && f->kind == SN_FEATURE_FLOAT && f->count == 3 && memcmp(f->floats, fv, 12) == 0,
              "float feature");
        f = sn_example_find(ex, "label");
        CHECK(f && f->kind == SN_FEATURE_INT64 && f->count == 4 && memcmp(f->int64s, iv, 32) == 0,
              "int64 feature");
        f = sn_example_find(ex, "empty");
        CHECK(f && f->count == 0, "empty list");
        f = sn_example_find(ex, "none");
        CHECK(f && f->kind == SN_FEATURE_NONE, "feature with no list");
        CHECK(sn_example_find(ex, "nope") == NULL, "absent feature");
    }
    free(buf);
    /* bytes as TensorFlow writes them: {"a": int64_list [1]} packed; and unpacked [1], float
     * as a single fixed32 (wire type 5) */
    const uint8_t tf_packed[] = {0x0a, 0x0c, 0x0a, 0x0a, 0x0a, 0x01, 'a', 0x12,
                                 0x05, 0x1a, 0x03, 0x0a, 0x01, 0x01};
    CHECK_OK(sn_example_parse(ex, tf_packed, sizeof tf_packed));
    const sn_feature *f = sn_example_find(ex, "a");
    CHECK(f && f->kind == SN_FEATURE_INT64 && f->count == 1 && f->int64s[0] == 1, "TF bytes");
    const uint8_t unpacked[] = {0x0a, 0x0b, 0x0a, 0x09, 0x0a, 0x01, 'a', 0x12,
                                0x04, 0x1a, 0x02, 0x08, 0x07};
    CHECK_OK(sn_example_parse(ex, unpacked, sizeof unpacked));
    f = sn_example_find(ex, "a");
    CHECK(f && f->count == 1 && f->int64s[0] == 7, "unpacked int64");
    const uint8_t fixed32[] = {0x0a, 0x0e, 0x0a, 0x0c, 0x0a, 0x01, 'b', 0x12, 0x07,
                               0x12, 0x05, 0x0d, 0x00, 0x00, 0xc0, 0x3f};
    CHECK_OK(sn_example_parse(ex, fixed32, sizeof fixed32));
    f = sn_example_find(ex, "b");
    CHECK(f && f->kind == SN_FEATURE_FLOAT && f->count == 1 && f->floats[0] == 1.5f, "wt5 float");
    CHECK_ERR(sn_example_parse(ex, tf_packed, sizeof tf_packed - 3), SN_ERR_FORMAT, "malformed");
    CHECK_OK(sn_example_parse(ex, NULL, 0));
    CHECK(sn_example_num_features(ex) == 0, "empty Example");
    sn_example_free(ex);
}

static void test_tfrecord_dataset(void) {
    const char *paths[2] = {tmp_path("img0.tfrecord"), tmp_path("img1.tfrecord.gz")};
    uint8_t pix[784];
    for (int fi = 0; fi < 2; fi++) {
        sn_tfrecord_writer *w = NULL;
        CHECK_OK(sn_tfrecord_writer_open(&w, paths[fi], fi == 1));
        for (int i = 0; i < 10; i++) {
            int lab = fi * 10 + i;
            memset(pix, lab, sizeof pix);
            const uint8_t *bv[1] = {pix};
            size_t bl[1] = {784};
            int64_t l = lab;
            sn_feature f[2] = {
                {.name = "image", .kind = SN_FEATURE_BYTES, .count = 1, .bytes = bv, .bytes_len = bl},
                {.name = "label", .kind = SN_FEATURE_INT64, .count = 1, .int64s = &l}};
            uint8_t *buf;
            size_t len;
            CHECK_OK(sn_example_encode(f, 2, &buf, &len));
            CHECK_OK(sn_tfrecord_write(w, buf, len));
            free(buf);
        }
        CHECK_OK(sn_tfrecord_writer_close(w));
    }
    sn_dataset *ds = NULL;
    CHECK_OK(sn_dataset_from_tfrecord_images(&ds, paths, 2, NULL));
    CHECK(sn_dataset_cardinality(ds) == SN_CARDINALITY_UNKNOWN, "tfrecord card unknown");
    CHECK_OK(sn_dataset_map_normalize(&ds, 0, true));
    CHECK_OK(sn_dataset_batch(&ds, 6, false));
    int64_t v[64], nb = 0;
    for (int ep = 0; ep < 2; ep++) {
        int64_t n = collect(ds, v, 64, &nb);
        bool ok = n == 20 && nb == 4;
        for (int i = 0; ok && i < 20; i++) ok = v[i] == i;
        CHECK(ok, "tfrecord dataset epoch %d: %lld elements in %lld batches", ep, (long long)n,
              (long long)nb);
        CHECK_OK(sn_dataset_reset(ds));
    }
    sn_dataset_free(ds);
    sn_tfrecord_image_spec sp = sn_tfrecord_image_spec_defaults();
    sp.image_shape = sn_shape_make(2, (int64_t)28, (int64_t)27);
    CHECK_OK(sn_dataset_from_tfrecord_images(&ds, paths, 2, &sp));
    sn_tensor *c[2];
    bool end;
    CHECK_ERR(sn_dataset_next(ds, c, &end), SN_ERR_FORMAT, "756 raw u8 pixels");
    sn_dataset_free(ds);
    /* label_key NULL: the images alone (predict on unlabelled records), in order. */
    sp = sn_tfrecord_image_spec_defaults();
    sp.label_key = NULL;
    CHECK_OK(sn_dataset_from_tfrecord_images(&ds, paths, 2, &sp));
    CHECK(sn_dataset_num_components(ds) == 1, "images only: %d components",
          sn_dataset_num_components(ds));
    int64_t n_img = 0;
    bool in_order = true;
    for (;;) {
        sn_tensor *img[1] = {NULL};
        sn_status st = sn_dataset_next(ds, img, &end);
        if (st != SN_OK) {
            CHECK_OK(st);
            break;
        }
        if (end) break;
        in_order = in_order && ((const uint8_t *)sn_tensor_cdata(img[0]))[0] == n_img;
        n_img++;
    }
    CHECK(n_img == 20 && in_order, "images only: %lld images, in order %d", (long long)n_img,
          in_order);
    sn_dataset_free(ds);
}

/* ---- the training pipeline on the real data, timed --------------------------------------- */

/* Runs two epochs of ds checking [128, 28, 28, 1] f32 images and [128] i32 labels. */
static void run_fit_epochs(sn_dataset *ds, const char *what) {
    CHECK(sn_dataset_cardinality(ds) == 468, "card %lld", (long long)sn_dataset_cardinality(ds));
    for (int ep = 0; ep < 2; ep++) {
        double t0 = sn_now();
        int64_t nb = 0, hist[10] = {0};
        bool shapes = true;
        for (;;) {
            sn_tensor *c[2];
            bool end;
            sn_status s = sn_dataset_next(ds, c, &end);
            if (s != SN_OK) {
                CHECK_OK(s);
                break;
            }
            if (end) break;
            nb++;
            const sn_shape *a = sn_tensor_shape(c[0]), *b = sn_tensor_shape(c[1]);
            shapes = shapes && sn_tensor_dtype(c[0]) == SN_F32 && a->ndim == 4 &&
                     a->dim[0] == 128 && a->dim[1] == 28 && a->dim[2] == 28 && a->dim[3] == 1 &&
                     sn_tensor_dtype(c[1]) == SN_I32 && b->ndim == 1 && b->dim[0] == 128;
            const int32_t *l = sn_tensor_data(c[1]);
            for (int i = 0; i < 128; i++)
                if (l[i] >= 0 && l[i] < 10) hist[l[i]]++;
        }
        double dt = sn_now() - t0;
        int64_t tot = 0;
        for (int k = 0; k < 10; k++) tot += hist[k];
        CHECK(nb == 468 && shapes && tot == 468 * 128, "%s epoch %d: %lld batches, shapes ok %d",
              what, ep, (long long)nb, shapes);
        printf("fit pipeline %s, epoch %d: %lld batches in %.3f s, %.1f us/batch\n", what, ep,
               (long long)nb, dt, 1e6 * dt / (double)(nb ? nb : 1));
        CHECK_OK(sn_dataset_reset(ds));
    }
}

static void test_fit_pipeline(void) {
    if (access(FMNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0) {
        sn_test_skip("fit pipeline: " FMNIST_DIR " is absent");
        return;
    }
    sn_tensor *x = NULL, *y = NULL;
    CHECK_OK(sn_mnist_load(FMNIST_DIR, "train", &x, &y));
    if (!x) return;
    sn_tensor *xy[2] = {x, y};
    /* map per element, then shuffle the f32 elements (as the lead's fit sketch does) */
    sn_dataset *ds = NULL;
    CHECK_OK(sn_dataset_from_tensors(&ds, 2, xy));
    CHECK_OK(sn_dataset_map_normalize(&ds, 0, true));
    CHECK_OK(sn_dataset_map_cast(&ds, 1, SN_I32));
    CHECK_OK(sn_dataset_shuffle(&ds, 60000, 1234, true));
    CHECK_OK(sn_dataset_batch(&ds, 128, true));
    CHECK_OK(sn_dataset_prefetch(&ds, 2));
    if (ds) run_fit_epochs(ds, "map-shuffle-batch-prefetch");
    sn_dataset_free(ds);
    /* shuffle the u8 elements, map whole batches: 4x less to shuffle, one map call a batch */
    ds = NULL;
    CHECK_OK(sn_dataset_from_tensors(&ds, 2, xy));
    CHECK_OK(sn_dataset_shuffle(&ds, 60000, 1234, true));
    CHECK_OK(sn_dataset_batch(&ds, 128, true));
    CHECK_OK(sn_dataset_map_normalize(&ds, 0, true));
    CHECK_OK(sn_dataset_map_cast(&ds, 1, SN_I32));
    CHECK_OK(sn_dataset_prefetch(&ds, 2));
    if (ds) run_fit_epochs(ds, "shuffle-batch-map-prefetch");
    sn_dataset_free(ds);
    sn_tensor_free(x);
    sn_tensor_free(y);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sn_test_data_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_idx();
    test_mnist_folder();
    test_fashion_mnist();
    test_basic_and_maps();
    test_shuffle();
    test_batch_repeat_take_skip_shard();
    test_user_map_cache_prefetch();
    test_bad_inputs();
    test_tfrecord();
    test_example();
    test_tfrecord_dataset();
    test_fit_pipeline();
    for (int i = nfiles - 1; i >= 0; i--) unlink(files[i]);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/mn", tmpdir);
    rmdir(sub);
    rmdir(tmpdir);
    return sn_test_finish("test_data");
}
