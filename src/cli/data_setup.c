/* Shared by train, evaluate and predict: finding the data, the input pipeline and the model. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "core/core.h" /* sn_errorf, SN_TRY: the loaders below report like the library */

const char *const sn_cli_datasets[] = {"fashion_mnist", NULL};
const char *const sn_cli_models[] = {"tpu_guide_cnn", "small_cnn", "mlp", "char_lstm_small",
                                      "char_lstm", "char_transformer_small",
                                      "char_transformer", NULL};

/* Where Debian's dataset-fashion-mnist package puts the IDX files. */
#define SN_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

static bool has_idx(const char *dir, const char *base) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, base);
    if (access(path, R_OK) == 0) return true;
    snprintf(path, sizeof path, "%s/%s.gz", dir, base);
    return access(path, R_OK) == 0;
}

/* Loads an IDX folder's split (Fashion-MNIST's by default). */
static int load_idx(const char *prog, const char *data_dir, const char *split, sn_tensor **x,
                    sn_tensor **y) {
    const char *dir = data_dir;
    if (!dir) {
        /* Only fashion_mnist is known by name; --dataset's enum has already checked it. */
        dir = SN_FASHION_MNIST_DIR;
        if (!has_idx(dir, "train-images-idx3-ubyte") || !has_idx(dir, "t10k-images-idx3-ubyte")) {
            fprintf(stderr,
                    "%s: Fashion-MNIST is not installed (no IDX files in %s): install it with "
                    "`apt-get install dataset-fashion-mnist`, or pass --data-dir DIR with a folder "
                    "holding the four IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                    "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each may end in .gz)\n",
                    prog, dir);
            return 1;
        }
    }
    if (sn_mnist_load(dir, split, x, y) != SN_OK) return sn_cli_fail(prog);
    const sn_shape *s = sn_tensor_shape(*x);
    if (s->ndim != 3) {
        fprintf(stderr, "%s: %s: the %s images have %d dimensions (expected 3: count, rows, cols)\n",
                prog, dir, split, s->ndim);
        sn_tensor_free(*x);
        sn_tensor_free(*y);
        *x = *y = NULL;
        return 1;
    }
    return 0;
}

int sn_cli_load_split(const char *prog, const char *dataset, const char *data_dir,
                      const char *split, sn_tensor **x, sn_tensor **y) {
    (void)dataset;
    *x = *y = NULL;
    return load_idx(prog, data_dir, split, x, y);
}

sn_cli_data_opts sn_cli_data_defaults(void) {
    return (sn_cli_data_opts){.dataset = "fashion_mnist", .image_feature = "image",
                              .label_feature = "label"};
}

typedef enum { SRC_IDX, SRC_NPY, SRC_NPZ, SRC_TFRECORD, SRC_TEXT } src_kind;

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

/* The kind of --data: by what the path is (a folder), its name, or its first bytes. */
static int data_kind(const char *prog, const sn_cli_data_opts *o, src_kind *kind) {
    if (!o->data) {
        *kind = SRC_IDX;
        return 0;
    }
    if (o->data_dir) {
        fprintf(stderr, "%s: --data and --data-dir both name the data; give one\n", prog);
        return 2;
    }
    if (o->text) {
        *kind = SRC_TEXT;
        return 0;
    }
    struct stat st;
    if (stat(o->data, &st) != 0) {
        fprintf(stderr, "%s: --data: cannot read '%s': %s\n", prog, o->data, strerror(errno));
        return 1;
    }
    if (S_ISDIR(st.st_mode)) *kind = SRC_IDX;
    else if (ends_with(o->data, ".npy")) *kind = SRC_NPY;
    else if (ends_with(o->data, ".npz")) *kind = SRC_NPZ;
    else if (ends_with(o->data, ".tfrecord") || ends_with(o->data, ".tfrecords") ||
             ends_with(o->data, ".tfrecord.gz") || ends_with(o->data, ".tfrec"))
        *kind = SRC_TFRECORD;
    else if (ends_with(o->data, ".txt")) *kind = SRC_TEXT;
    else {
        unsigned char head[6] = {0};
        FILE *f = fopen(o->data, "rb");
        size_t n = f ? fread(head, 1, sizeof head, f) : 0;
        if (f) fclose(f);
        if (n == 6 && memcmp(head, "\x93NUMPY", 6) == 0) *kind = SRC_NPY;
        else if (n >= 4 && memcmp(head, "PK\x03\x04", 4) == 0) *kind = SRC_NPZ;
        else {
            fprintf(stderr,
                    "%s: --data: cannot tell what kind of data '%s' is; expected a folder of IDX "
                    "files, a .npy, .npz, .tfrecord/.tfrecords or .txt file (--text reads any file "
                    "as text)\n",
                    prog, o->data);
            return 2;
        }
    }
    if (o->labels && *kind != SRC_NPY) {
        fprintf(stderr, "%s: --labels goes with --data x.npy; '%s' carries its own labels\n", prog,
                o->data);
        return 2;
    }
    if (*kind == SRC_NPY && !o->labels && !o->labels_optional) {
        fprintf(stderr, "%s: --data %s: an .npy file holds the examples only; give the labels with "
                        "--labels y.npy\n",
                prog, o->data);
        return 2;
    }
    return 0;
}

bool sn_cli_data_is_text(const sn_cli_data_opts *o) {
    /* With --data-dir too it is not text: data_kind then says the two flags conflict. */
    return o->data && !o->data_dir && (o->text || ends_with(o->data, ".txt"));
}

/* "28,28,1" -> [28, 28, 1]; prints the error and returns 2 when it is not such a list. */
static int parse_shape(const char *prog, const char *text, sn_shape *out) {
    out->ndim = 0;
    const char *p = text;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 1 || v > (1LL << 31) || out->ndim == SN_MAX_DIMS - 1 ||
            (*end && *end != ',')) {
            fprintf(stderr, "%s: --input-shape: '%s' is not a list of 1 to %d positive integers "
                            "separated by commas (e.g. 28,28,1)\n",
                    prog, text, SN_MAX_DIMS - 1);
            return 2;
        }
        out->dim[out->ndim++] = v;
        p = *end ? end + 1 : end;
    }
    if (out->ndim == 0) {
        fprintf(stderr, "%s: --input-shape is empty (expected e.g. 28,28,1)\n", prog);
        return 2;
    }
    return 0;
}

/* Whether the first record of the TFRecord file `path` has the feature `name` (false for a file
 * without records: the reader then says what is wrong). */
static sn_status first_record_has(const char *path, const char *name, bool *has) {
    sn_tfrecord_reader *rd = NULL;
    sn_example *ex = NULL;
    const uint8_t *rec = NULL;
    size_t len = 0;
    bool end = false;
    *has = false;
    sn_status s = sn_tfrecord_open(&rd, path);
    if (s == SN_OK) s = sn_tfrecord_read(rd, &rec, &len, &end);
    if (s == SN_OK && !end && (s = sn_example_new(&ex)) == SN_OK &&
        (s = sn_example_parse(ex, rec, len)) == SN_OK)
        *has = sn_example_find(ex, name) != NULL;
    sn_example_free(ex);
    sn_tfrecord_close(rd);
    return s;
}

/* Reads a whole TFRecord image dataset into tensors; *y stays NULL when the labels are
 * optional and the first record has no label feature. */
static sn_status load_tfrecord(const sn_cli_data_opts *o, const sn_shape *shape, sn_tensor **x,
                               sn_tensor **y) {
    sn_tfrecord_image_spec sp = sn_tfrecord_image_spec_defaults();
    sp.image_key = o->image_feature;
    sp.label_key = o->label_feature;
    if (shape) sp.image_shape = *shape;
    bool labelled = true;
    if (o->labels_optional) SN_TRY(first_record_has(o->data, o->label_feature, &labelled));
    if (!labelled) sp.label_key = NULL;
    sn_dataset *ds = NULL;
    const char *path = o->data;
    SN_TRY(sn_dataset_from_tfrecord_images(&ds, &path, 1, &sp));
    sn_status s = SN_OK;
    unsigned char *xb = NULL;
    int32_t *yb = NULL;
    int64_t n = 0, cap = 0;
    size_t eb = 0;
    sn_dtype dt = SN_U8;
    for (;;) {
        sn_tensor *c[2];
        bool end = false;
        if ((s = sn_dataset_next(ds, c, &end)) != SN_OK || end) break;
        if (n == 0) {
            dt = sn_tensor_dtype(c[0]);
            eb = (size_t)sn_tensor_numel(c[0]) * sn_dtype_size(dt);
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            unsigned char *nx = realloc(xb, (size_t)cap * eb);
            if (nx) xb = nx;
            int32_t *ny = nx && labelled ? realloc(yb, (size_t)cap * sizeof *yb) : NULL;
            if (ny) yb = ny;
            if (!nx || (labelled && !ny)) {
                s = sn_errorf(SN_ERR_NOMEM, "tfrecord: out of memory reading %s", path);
                break;
            }
        }
        memcpy(xb + (size_t)n * eb, sn_tensor_cdata(c[0]), eb);
        if (labelled) yb[n] = *(const int32_t *)sn_tensor_cdata(c[1]);
        n++;
    }
    sn_dataset_free(ds);
    if (s == SN_OK && n == 0) s = sn_errorf(SN_ERR_FORMAT, "tfrecord: %s holds no records", path);
    if (s == SN_OK) {
        sn_shape xs = {.ndim = sp.image_shape.ndim + 1}, ys = {.ndim = 1, .dim = {n}};
        xs.dim[0] = n;
        for (int i = 0; i < sp.image_shape.ndim; i++) xs.dim[i + 1] = sp.image_shape.dim[i];
        s = sn_tensor_from_data(x, dt, &xs, xb);
        if (s == SN_OK && labelled && (s = sn_tensor_from_data(y, SN_I32, &ys, yb)) != SN_OK) {
            sn_tensor_free(*x);
            *x = NULL;
        }
    }
    free(xb);
    free(yb);
    return s;
}

/* The arrays of an .npz split: x_<split>/y_<split> when the archive has them, else x/y for
 * the training split (or a required test split). *x stays NULL when there is nothing; *y
 * when the labels are optional and the archive has none. */
static sn_status load_npz(const char *path, const char *split, bool required,
                          bool labels_optional, sn_tensor **x, sn_tensor **y) {
    char xn[32], yn[32];
    snprintf(xn, sizeof xn, "x_%s", split);
    snprintf(yn, sizeof yn, "y_%s", split);
    bool has = false;
    SN_TRY(sn_npz_has(path, xn, &has));
    if (!has) {
        bool plain = false;
        SN_TRY(sn_npz_has(path, "x", &plain));
        bool train_only = false;
        if (!plain) SN_TRY(sn_npz_has(path, "x_train", &train_only));
        if (!strcmp(split, "test") && !required) return SN_OK; /* no test split: none */
        if (plain) {
            strcpy(xn, "x");
            strcpy(yn, "y");
        } else if (train_only) {
            strcpy(xn, "x_train");
            strcpy(yn, "y_train");
        } else {
            return sn_errorf(SN_ERR_NOT_FOUND, "npz: %s has neither arrays x_%s/y_%s nor x/y", path,
                             split, split);
        }
    }
    SN_TRY(sn_npz_load(path, xn, x));
    bool has_y = true;
    sn_status s = labels_optional ? sn_npz_has(path, yn, &has_y) : SN_OK;
    if (s == SN_OK && has_y) s = sn_npz_load(path, yn, y);
    if (s != SN_OK) {
        sn_tensor_free(*x);
        *x = NULL;
        return sn_error_context(s, "the labels of '%s'", xn);
    }
    return SN_OK;
}

/* Checks the labels y [n] or [n, 1] against x [n, ...] and makes them [n]. */
static int check_labels(const char *prog, const char *xname, const char *yname,
                        const sn_tensor *x, sn_tensor **y) {
    char b0[128];
    const sn_shape *xs = sn_tensor_shape(x), *ys = sn_tensor_shape(*y);
    if (ys->ndim != 1 && !(ys->ndim == 2 && ys->dim[1] == 1)) {
        fprintf(stderr, "%s: %s has shape %s; expected one class index per example ([n] or [n, 1])\n",
                prog, yname, sn_shape_str(ys, b0, sizeof b0));
        return 1;
    }
    if (xs->dim[0] != ys->dim[0]) {
        fprintf(stderr, "%s: %s holds %lld examples (shape %s) but %s holds %lld labels; the counts "
                        "must match\n",
                prog, xname, (long long)xs->dim[0], sn_shape_str(xs, b0, sizeof b0), yname,
                (long long)ys->dim[0]);
        return 1;
    }
    sn_dtype yd = sn_tensor_dtype(*y);
    for (int64_t i = 0; (yd == SN_F32 || yd == SN_F64) && i < ys->dim[0]; i++) {
        double v = sn_tensor_get(*y, i);
        if (!(v >= 0 && v <= 2147483647.0 && v == (double)(int64_t)v)) {
            fprintf(stderr, "%s: %s: label %lld is %g; labels are class indices (integers >= 0)\n",
                    prog, yname, (long long)i, v);
            return 1;
        }
    }
    if (yd == SN_I32)
        for (int64_t i = 0; i < ys->dim[0]; i++)
            if (((const int32_t *)sn_tensor_cdata(*y))[i] < 0) {
                fprintf(stderr, "%s: %s: label %lld is %d; labels are class indices (>= 0)\n", prog,
                        yname, (long long)i, ((const int32_t *)sn_tensor_cdata(*y))[i]);
                return 1;
            }
    sn_shape ns = {.ndim = 1, .dim = {ys->dim[0]}};
    if (ys->ndim == 2) { /* [n, 1] -> [n] */
        sn_tensor *t = NULL;
        if (sn_tensor_from_data(&t, yd, &ns, sn_tensor_cdata(*y)) != SN_OK) return sn_cli_fail(prog);
        sn_tensor_free(*y);
        *y = t;
    }
    return 0;
}

/* Checks x (and y, when there are labels) and reshapes x by --input-shape. `xname`/`yname`
 * name them. */
static int check_xy(const char *prog, const sn_shape *want, const char *xname, const char *yname,
                    sn_tensor **x, sn_tensor **y) {
    char b0[128], b1[128];
    const sn_shape *xs = sn_tensor_shape(*x);
    if (xs->ndim < 1) {
        fprintf(stderr, "%s: %s is a scalar; expected examples [n, ...]\n", prog, xname);
        return 1;
    }
    int rc = *y ? check_labels(prog, xname, yname, *x, y) : 0;
    if (rc) return rc;
    if (want) {
        sn_shape es = {.ndim = xs->ndim - 1};
        for (int i = 1; i < xs->ndim; i++) es.dim[i - 1] = xs->dim[i];
        if (sn_shape_numel(want) != sn_shape_numel(&es)) {
            fprintf(stderr, "%s: --input-shape %s has %lld values per example but the examples of "
                            "%s are %s (%lld values)\n",
                    prog, sn_shape_str(want, b0, sizeof b0), (long long)sn_shape_numel(want), xname,
                    sn_shape_str(&es, b1, sizeof b1), (long long)sn_shape_numel(&es));
            return 1;
        }
        sn_shape full = {.ndim = want->ndim + 1};
        full.dim[0] = xs->dim[0];
        for (int i = 0; i < want->ndim; i++) full.dim[i + 1] = want->dim[i];
        sn_tensor *t = NULL;
        if (sn_tensor_from_data(&t, sn_tensor_dtype(*x), &full, sn_tensor_cdata(*x)) != SN_OK)
            return sn_cli_fail(prog);
        sn_tensor_free(*x);
        *x = t;
    }
    return 0;
}

int sn_cli_load_data(const char *prog, const sn_cli_data_opts *o, const char *split,
                     bool required, sn_tensor **x, sn_tensor **y) {
    *x = *y = NULL;
    src_kind kind;
    int rc = data_kind(prog, o, &kind);
    if (rc) return rc;
    sn_shape want, *wp = NULL;
    if (o->input_shape) {
        if ((rc = parse_shape(prog, o->input_shape, &want)) != 0) return rc;
        wp = &want;
    }
    if (kind != SRC_TFRECORD &&
        (strcmp(o->image_feature, "image") != 0 || strcmp(o->label_feature, "label") != 0)) {
        fprintf(stderr, "%s: --image-feature and --label-feature go with TFRecord data\n", prog);
        return 2;
    }
    char xname[4200], yname[4200];
    sn_status s = SN_OK;
    switch (kind) {
    case SRC_TEXT:
        fprintf(stderr, "%s: --data %s is text, which a character model reads (--model "
                        "char_lstm_small or char_lstm)\n",
                prog, o->data);
        return 2;
    case SRC_IDX:
        if ((rc = load_idx(prog, o->data ? o->data : o->data_dir, split, x, y)) != 0) return rc;
        snprintf(xname, sizeof xname, "the %s images", split);
        snprintf(yname, sizeof yname, "the %s labels", split);
        break;
    case SRC_NPY:
        if (!strcmp(split, "test") && !required) return 0;
        s = sn_npy_load(o->data, x);
        if (s == SN_OK && o->labels && (s = sn_npy_load(o->labels, y)) != SN_OK) {
            sn_tensor_free(*x);
            *x = NULL;
        }
        snprintf(xname, sizeof xname, "%s", o->data);
        snprintf(yname, sizeof yname, "%s", o->labels ? o->labels : "");
        break;
    case SRC_NPZ:
        s = load_npz(o->data, split, required, o->labels_optional, x, y);
        if (s == SN_OK && !*x) return 0;
        snprintf(xname, sizeof xname, "%s (x)", o->data);
        snprintf(yname, sizeof yname, "%s (y)", o->data);
        break;
    case SRC_TFRECORD:
        if (!strcmp(split, "test") && !required) return 0;
        s = load_tfrecord(o, wp, x, y);
        snprintf(xname, sizeof xname, "%s (feature \"%s\")", o->data, o->image_feature);
        snprintf(yname, sizeof yname, "%s (feature \"%s\")", o->data, o->label_feature);
        break;
    }
    if (s != SN_OK) return sn_cli_fail(prog);
    rc = check_xy(prog, wp, xname, yname, x, y);
    if (rc == 0 && o->check_numerics) {
        char what[4300];
        snprintf(what, sizeof what, "%s data (%s)", split, xname);
        if (sn_data_check_numerics(*x, what) != SN_OK) rc = sn_cli_fail(prog);
    }
    if (rc) {
        sn_tensor_free(*x);
        sn_tensor_free(*y);
        *x = *y = NULL;
    }
    return rc;
}

/* Element shape of x [n, ...] as the model sees it: [rows, cols] images get a channel. */
static sn_shape model_input(const sn_tensor *x) {
    const sn_shape *s = sn_tensor_shape(x);
    sn_shape in = {.ndim = s->ndim - 1};
    for (int i = 1; i < s->ndim; i++) in.dim[i - 1] = s->dim[i];
    if (in.ndim == 2) in.dim[in.ndim++] = 1;
    return in;
}

sn_status sn_cli_pipeline(sn_tensor *x, sn_tensor *y, int64_t take, int64_t batch, bool shuffle,
                          uint64_t seed, bool drop_remainder, sn_dataset **out) {
    sn_dataset *ds = NULL;
    sn_tensor *xv = NULL;
    const sn_shape *xs = sn_tensor_shape(x);
    sn_dtype xd = sn_tensor_dtype(x);
    /* [n, rows, cols] float images get their channel here (a view: from_tensors copies);
     * u8 images get it from normalize. */
    if (xs->ndim == 3 && xd != SN_U8) {
        sn_shape in = model_input(x), full = {.ndim = in.ndim + 1};
        full.dim[0] = xs->dim[0];
        for (int i = 0; i < in.ndim; i++) full.dim[i + 1] = in.dim[i];
        SN_TRY(sn_tensor_view(&xv, x, &full, NULL, 0));
    }
    sn_tensor *xy[2] = {xv ? xv : x, y};
    sn_status s = sn_dataset_from_tensors(&ds, y ? 2 : 1, xy);
    sn_tensor_free(xv);
    if (s != SN_OK) return s;
    if (take >= 0 && s == SN_OK) s = sn_dataset_take(&ds, take);
    /* Shuffle the u8 images before normalising: the shuffle buffer then holds 784 bytes per
     * image instead of 3,136 (47 MB rather than 188 MB for the whole training split). */
    if (shuffle && s == SN_OK) s = sn_dataset_shuffle(&ds, xs->dim[0], seed, true);
    /* Batch first, then convert whole batches: the same values, but one map call per batch
     * instead of one per image, and the batch copies u8 pixels (a quarter of the bytes). */
    if (s == SN_OK) s = sn_dataset_batch(&ds, batch, drop_remainder);
    if (s == SN_OK && xd == SN_U8) s = sn_dataset_map_normalize(&ds, 0, xs->ndim == 3);
    else if (s == SN_OK && xd != SN_F32) s = sn_dataset_map_cast(&ds, 0, SN_F32);
    if (s == SN_OK && y && sn_tensor_dtype(y) != SN_I32) s = sn_dataset_map_cast(&ds, 1, SN_I32);
    /* The source is in memory, so a batch costs only CPU time (~15 us for 32 images): a
     * prefetch thread overlaps it with the step only on a core the step leaves free. With every
     * core in the kernels' team it would preempt a team member instead, and each step's
     * barriers wait for that thread (on 2 cores, with the thread and a 50-us batch, the tiny MLP
     * took 0.50 ms/step through fit against 0.13 for its bare step; docs/benchmarks.md). Then
     * the batch is made inline, in the feed. */
    if (s == SN_OK && sn_num_threads() < sn_num_cores()) s = sn_dataset_prefetch(&ds, 2);
    if (s != SN_OK) {
        sn_dataset_free(ds);
        return s;
    }
    *out = ds;
    return SN_OK;
}

bool sn_cli_model_is_preset(const char *name) {
    /* A model file is named by its suffix or exists; anything else is a preset name, which
     * sn_model_preset checks against the presets it has. */
    size_t n = strlen(name);
    bool suffix = (n > 6 && !strcmp(name + n - 6, ".keras")) || (n > 5 && !strcmp(name + n - 5, ".json"));
    return !suffix && access(name, F_OK) != 0;
}

sn_status sn_cli_check_one_io(const char *name, const sn_model *m) {
    int ni = sn_model_input_count(m), no = sn_model_output_count(m);
    if (ni == 1 && no == 1) return SN_OK;
    return sn_errorf(SN_ERR_UNSUPPORTED, "model '%s' has %d inputs and %d outputs; the command "
                     "line feeds one array of examples and one of labels, so it trains, "
                     "evaluates and predicts models of one input and one output (train this one "
                     "with the C API: a dataset of its inputs then one label per output; "
                     "`sinter summary` and `sinter export` take it)", name, ni, no);
}

/* for_loading: a preset is built without initialisers (its weights are loaded next). */
static sn_status open_model(const char *name, const sn_tensor *images, uint64_t seed,
                            bool for_loading, sn_model **out, sn_model_file_info *info) {
    sn_shape in = {.ndim = 3, .dim = {28, 28, 1}};
    if (images) in = model_input(images);
    sn_model *m = NULL;
    sn_status s;
    if (info) *info = (sn_model_file_info){.compile = sn_compile_defaults()};
    if (sn_cli_is_text_model(name)) {
        /* train reads text through its own path, and the commands that load saved weights
         * open character models with sn_cli_open_text_model: here the data is not text. */
        s = sn_errorf(SN_ERR_INVALID, "model preset '%s' is a character model: it reads text "
                      "(sinter train --data TEXT), not these examples", name);
    } else if (sn_cli_model_is_preset(name)) {
        s = sn_model_preset(name, &m);
        if (s == SN_ERR_NOT_FOUND)
            sn_error_context(s, "--model '%s' is neither a model file (.keras, .json) nor a preset",
                             name);
        if (s == SN_OK && (s = for_loading ? sn_model_build_for_loading(m, &in)
                                           : sn_model_build(m, &in, seed)) != SN_OK) {
            char b[128];
            sn_error_context(s, "model %s cannot take examples of shape %s", name,
                             sn_shape_str(&in, b, sizeof b));
        }
    } else {
        sn_model_file_info local;
        if (!info) info = &local;
        s = sn_model_load(name, seed, &m, info);
        if (s == SN_OK && images) s = sn_cli_check_one_io(name, m);
        /* The model brings its own input shape: the data's examples must have it. */
        if (s == SN_OK && images && !sn_shape_equal(&info->input_shape, &in)) {
            char a[96], b[96];
            s = sn_errorf(SN_ERR_SHAPE, "model '%s' takes inputs of shape %s, but the data's "
                          "examples have shape %s (--input-shape reshapes them when the number "
                          "of values agrees)", name,
                          sn_shape_str(&info->input_shape, a, sizeof a),
                          sn_shape_str(&in, b, sizeof b));
        }
    }
    if (s != SN_OK) {
        sn_model_free(m);
        return s;
    }
    *out = m;
    return SN_OK;
}

sn_status sn_cli_open_model(const char *name, const sn_tensor *images, uint64_t seed,
                            sn_model **out, sn_model_file_info *info) {
    return open_model(name, images, seed, false, out, info);
}

sn_status sn_cli_build_model(const char *preset, const sn_tensor *images, uint64_t seed,
                             sn_model **out) {
    return sn_cli_open_model(preset, images, seed, out, NULL);
}

bool sn_cli_weights_missing(const char *prog, const char *model, const char *weights) {
    size_t n = strlen(model);
    if (weights || (n > 6 && !strcmp(model + n - 6, ".keras"))) return false;
    fprintf(stderr, "%s: --weights PATH is required (unless --model is a .keras file, which "
            "carries its weights)\n", prog);
    return true;
}

sn_status sn_cli_load_model(const char *preset, const sn_tensor *images, const char *weights,
                            sn_model **out) {
    sn_model *m = NULL;
    sn_model_file_info info;
    sn_status s = open_model(preset, images, 0, weights != NULL, &m, &info);
    if (s != SN_OK) return s;
    if ((s = sn_cli_check_one_io(preset, m)) != SN_OK) {
        sn_model_free(m);
        return s;
    }
    if (!weights && !info.has_weights) {
        sn_model_free(m);
        return sn_errorf(SN_ERR_INVALID, "--weights is required for '%s' (only a .keras model "
                         "file carries its weights)", preset);
    }
    /* The file's compile settings (or, without them, the defaults with from_logits chosen by
     * the model's last activation) tell predict whether the output is logits. */
    sn_cli_apply_device(&info.compile);
    s = sn_model_compile(m, &info.compile);
    if (s == SN_OK && weights) s = sn_model_load_weights(m, weights);
    if (s != SN_OK) {
        sn_model_free(m);
        return s;
    }
    *out = m;
    return SN_OK;
}
