/* Keras-compatible weight files in HDF5: Keras 3 `.weights.h5` and legacy Keras 2 `.h5`.
 *
 * The layouts follow Keras's own writers (keras/src/saving/saving_lib.py: _save_state,
 * _save_container_state, H5IOStore; keras/src/legacy/saving/legacy_h5_format.py:
 * save_weights_to_hdf5_group, load_weights_from_hdf5_group); docs/weights.md has the details
 * and the reasons. Loading reads and checks every variable into temporaries before touching a
 * tensor, so a failed load leaves the model as it was. */
#include "sinter/io.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "io/atomic_file.h"
#include "io/h5_util.h"

/* Keras splits a string-list attribute into name0, name1, ... above this many bytes
 * (HDF5_OBJECT_HEADER_LIMIT in legacy_h5_format.py): the object header's attribute limit. */
#define KERAS_ATTR_LIMIT 64512
#define NAME_CAP 256
#define PATH_CAP 640
/* Deep enough for any Keras layer (layers/<l>/cell/vars/<i> is 4). */
#define MAX_WALK_DEPTH 8

sn_weights_h5_options sn_weights_h5_defaults(void) {
    return (sn_weights_h5_options){
        .layout = SN_WEIGHTS_AUTO,
        .model_name = "sequential",
        .keras_version = "2.15.0",
        .backend = "tensorflow",
    };
}

/* ---- Keras naming ----------------------------------------------------------------------- */

static int up(char c) { return c >= 'A' && c <= 'Z'; }
static int lo(char c) { return c >= 'a' && c <= 'z'; }

/* keras.src.utils.naming.to_snake_case, regex by regex:
 *   re.sub(r"\W+", "", name)
 *   re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
 *   re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()
 * Each re.sub scans left to right over non-overlapping matches, as the loops below do. */
char *sn_keras_snake_case(const char *cls, char *buf, size_t cap) {
    char a[NAME_CAP], b[2 * NAME_CAP], c[4 * NAME_CAP];
    size_t na = 0, nb = 0, nc = 0;
    if (!cls || !buf || cap == 0) return NULL;
    for (const char *p = cls; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        /* \w: letters, digits, underscore; bytes of non-ASCII (UTF-8) letters are kept. */
        if (up((char)ch) || lo((char)ch) || (ch >= '0' && ch <= '9') || ch == '_' || ch >= 0x80) {
            if (na + 1 >= sizeof a) return NULL;
            a[na++] = (char)ch;
        }
    }
    for (size_t i = 0; i < na;) {
        if (a[i] != '\n' && i + 2 < na && up(a[i + 1]) && lo(a[i + 2])) {
            size_t j = i + 2;
            while (j < na && lo(a[j])) j++;
            b[nb++] = a[i];
            b[nb++] = '_';
            for (size_t k = i + 1; k < j; k++) b[nb++] = a[k];
            i = j;
        } else {
            b[nb++] = a[i++];
        }
    }
    for (size_t i = 0; i < nb;) {
        if (i + 1 < nb && lo(b[i]) && up(b[i + 1])) {
            c[nc++] = b[i];
            c[nc++] = '_';
            c[nc++] = b[i + 1];
            i += 2;
        } else {
            c[nc++] = b[i++];
        }
    }
    if (nc + 1 > cap) return NULL;
    for (size_t i = 0; i < nc; i++) buf[i] = up(c[i]) ? (char)(c[i] - 'A' + 'a') : c[i];
    buf[nc] = '\0';
    return buf;
}

/* Keras's recurrent layers own no variables themselves: their cell does, and Keras 3 saves
 * it as the layer's attribute `cell` (layers/lstm/cell/vars). */
static int is_recurrent(const char *cls) {
    return !strcmp(cls, "LSTM") || !strcmp(cls, "GRU") || !strcmp(cls, "SimpleRNN");
}

/* Where a layer's variables lie in a Keras 3 file. Most layers keep them in their own vars
 * group. A recurrent layer's cell holds them (layers/lstm/cell/vars, named "<snake>_cell").
 * MultiHeadAttention's four EinsumDense sublayers hold them
 * (layers/multi_head_attention/query_dense/vars/{0 kernel, 1 bias}, then key_dense,
 * value_dense, output_dense, each vars group named as Keras names the sublayer), beside the
 * empty groups of its Dropout and Softmax sublayers. sinter's MultiHeadAttention lists the 8
 * (4 without biases) variables flat, in that order. Bidirectional: its two recurrent halves
 * (below). */
#define MAX_SUBLAYERS 6
typedef struct sublayer {
    const char *group; /* under the layer's group; NULL: the layer's own vars */
    char name[NAME_CAP + 8]; /* the vars group's "name" attribute */
    int first, n;            /* the layer's variables first .. first + n - 1 */
} sublayer;

static int keras3_sublayers(const sn_weight_layer *L, sublayer *out) {
    if (is_recurrent(L->class_name)) {
        char snake[NAME_CAP];
        sn_keras_snake_case(L->class_name, snake, sizeof snake);
        out[0] = (sublayer){.group = "cell", .first = 0, .n = L->n_vars};
        snprintf(out[0].name, sizeof out[0].name, "%s_cell", snake);
        return 1;
    }
    if (!strcmp(L->class_name, "MultiHeadAttention") && L->n_vars % 4 == 0) {
        static const char *const grp[] = {"query_dense", "key_dense", "value_dense",
                                          "output_dense", "_dropout_layer", "_softmax"};
        static const char *const nm[] = {"query", "key", "value", "attention_output",
                                         "dropout", "softmax"};
        int per = L->n_vars / 4;
        for (int k = 0; k < MAX_SUBLAYERS; k++) {
            out[k] = (sublayer){.group = grp[k], .first = k < 4 ? k * per : 0,
                                .n = k < 4 ? per : 0};
            snprintf(out[k].name, sizeof out[k].name, "%s", nm[k]);
        }
        return MAX_SUBLAYERS;
    }
    if (!strcmp(L->class_name, "Bidirectional") && L->n_vars % 2 == 0) {
        /* Its halves are recurrent layers: layers/<name>/forward_layer/vars (named after the
         * half) and forward_layer/cell/vars (named "lstm_cell") with the first n_vars / 2
         * variables, then the same under backward_layer. sinter names those variables
         * "forward_lstm/lstm_cell/kernel" (Keras's legacy weight names), which give the
         * halves' names here. */
        static const char *const grp[] = {"forward_layer", "forward_layer/cell",
                                          "backward_layer", "backward_layer/cell"};
        int per = L->n_vars / 2;
        for (int h = 0; h < 2; h++) {
            char half[NAME_CAP], cell[NAME_CAP];
            snprintf(half, sizeof half, "%s", grp[2 * h]);
            snprintf(cell, sizeof cell, "cell");
            const char *vn = per > 0 ? L->vars[h * per].name : NULL, *s1, *s2;
            if (vn && (s1 = strchr(vn, '/')) && (s2 = strchr(s1 + 1, '/'))) {
                snprintf(half, sizeof half, "%.*s", (int)(s1 - vn), vn);
                snprintf(cell, sizeof cell, "%.*s", (int)(s2 - s1 - 1), s1 + 1);
            }
            out[2 * h] = (sublayer){.group = grp[2 * h], .first = 0, .n = 0};
            snprintf(out[2 * h].name, sizeof out[2 * h].name, "%s", half);
            out[2 * h + 1] = (sublayer){.group = grp[2 * h + 1], .first = h * per, .n = per};
            snprintf(out[2 * h + 1].name, sizeof out[2 * h + 1].name, "%s", cell);
        }
        return 4;
    }
    out[0] = (sublayer){.group = NULL, .first = 0, .n = L->n_vars};
    snprintf(out[0].name, sizeof out[0].name, "%s", L->name);
    return 1;
}

/* ---- small helpers ---------------------------------------------------------------------- */

static const char *var_name(const sn_weight_layer *L, int j) {
    return L->vars[j].name ? L->vars[j].name : "?";
}

static void dims_str(int nd, const int64_t *d, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < nd && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %lld" : "%lld", (long long)d[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* Copies between a tensor of any strides and a dense row-major f32 buffer. */
static void copy_tensor_f32(sn_tensor *t, float *dense, int to_tensor) {
    int64_t n = sn_tensor_numel(t);
    if (sn_tensor_is_contiguous(t)) {
        if (to_tensor)
            memcpy(sn_tensor_data(t), dense, (size_t)n * sizeof(float));
        else
            memcpy(dense, sn_tensor_cdata(t), (size_t)n * sizeof(float));
        return;
    }
    const sn_shape *s = sn_tensor_shape(t);
    const int64_t *st = sn_tensor_strides(t);
    char *base = sn_tensor_data(t);
    int64_t idx[SN_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int d = 0; d < s->ndim; d++) off += idx[d] * st[d];
        float *e = (float *)(void *)(base + off);
        if (to_tensor)
            *e = dense[i];
        else
            dense[i] = *e;
        for (int d = s->ndim - 1; d >= 0; d--) {
            if (++idx[d] < s->dim[d]) break;
            idx[d] = 0;
        }
    }
}

/* Checks the caller's description; messages name the layer and variable. */
static sn_status check_layers(int n, const sn_weight_layer *layers) {
    if (n < 0) return sn_errorf(SN_ERR_INVALID, "n_layers is %d, expected >= 0", n);
    if (n > 0 && !layers) return sn_errorf(SN_ERR_INVALID, "layers is NULL with n_layers %d", n);
    for (int i = 0; i < n; i++) {
        const sn_weight_layer *L = &layers[i];
        if (!L->class_name || !L->class_name[0] || !L->name || !L->name[0])
            return sn_errorf(SN_ERR_INVALID, "layer %d: class_name and name are required", i);
        char snake[NAME_CAP];
        if (!sn_keras_snake_case(L->class_name, snake, sizeof snake) || !snake[0])
            return sn_errorf(SN_ERR_INVALID, "layer '%s': class name '%s' gives no Keras path",
                             L->name, L->class_name);
        if (L->n_vars < 0 || (L->n_vars > 0 && !L->vars))
            return sn_errorf(SN_ERR_INVALID, "layer '%s' (%s): n_vars %d with vars %s", L->name,
                             L->class_name, L->n_vars, L->vars ? "set" : "NULL");
        for (int j = 0; j < L->n_vars; j++) {
            const sn_tensor *t = L->vars[j].value;
            if (!t)
                return sn_errorf(SN_ERR_INVALID, "layer '%s' (%s) variable %d '%s': tensor is NULL",
                                 L->name, L->class_name, j, var_name(L, j));
            if (sn_tensor_dtype(t) != SN_F32)
                return sn_errorf(SN_ERR_SHAPE,
                                 "layer '%s' (%s) variable %d '%s': tensor dtype is %s, weight "
                                 "files hold f32",
                                 L->name, L->class_name, j, var_name(L, j),
                                 sn_dtype_name(sn_tensor_dtype(t)));
        }
    }
    return SN_OK;
}

/* Keras 3 group of each layer: "dense", "dense_1", ... counted per class in model order
 * (_save_container_state's used_names). Writes names[i] (NAME_CAP each). */
static void keras3_names(int n, const sn_weight_layer *layers, const char *const *paths,
                         char (*names)[NAME_CAP]) {
    for (int i = 0; i < n; i++) {
        if (paths && paths[i]) {
            snprintf(names[i], NAME_CAP, "%s", paths[i]);
            continue;
        }
        char s[NAME_CAP];
        sn_keras_snake_case(layers[i].class_name, s, sizeof s); /* checked in check_layers */
        int seen = 0;
        for (int k = 0; k < i; k++) {
            char sk[NAME_CAP];
            if (paths && paths[k]) continue;
            sn_keras_snake_case(layers[k].class_name, sk, sizeof sk);
            if (!strcmp(s, sk)) seen++;
        }
        if (seen)
            snprintf(names[i], NAME_CAP, "%.200s_%d", s, seen);
        else
            snprintf(names[i], NAME_CAP, "%s", s);
    }
}

/* Whether every component of a relative path exists (H5Lexists needs the parents). */
static sn_status path_exists(hid_t loc, const char *path, int *out) {
    sn_status st = SN_OK;
    char buf[PATH_CAP];
    *out = 0;
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf;; p++) {
        if (*p == '/' || *p == '\0') {
            char save = *p;
            *p = '\0';
            htri_t r;
            if (buf[0]) {
                SN_H5(r = H5Lexists(loc, buf, H5P_DEFAULT));
                if (r == 0) return SN_OK;
            }
            *p = save;
            if (!save) break;
        }
    }
    *out = 1;
done:
    return st;
}

/* ---- writing ---------------------------------------------------------------------------- */

/* Keras's Normalization keeps its count (its third variable) as int64; the f32 tensor holds
 * it here and HDF5 converts on write and read. */
static bool int64_var(const sn_weight_layer *L, int j) {
    return j == 2 && !strcmp(L->class_name, "Normalization");
}

/* One f32 dataset with exactly the tensor's shape (scalar for ndim 0), little-endian, as
 * h5py writes a float32 numpy array. */
static sn_status write_var(hid_t loc, const char *name, hid_t lcpl, sn_tensor *t, bool int64) {
    sn_status st = SN_OK;
    hid_t space = H5I_INVALID_HID, dset = H5I_INVALID_HID;
    float *tmp = NULL;
    const sn_shape *s = sn_tensor_shape(t);
    hsize_t dims[SN_MAX_DIMS];
    for (int d = 0; d < s->ndim; d++) dims[d] = (hsize_t)s->dim[d];
    if (s->ndim == 0)
        SN_H5(space = H5Screate(H5S_SCALAR));
    else
        SN_H5(space = H5Screate_simple(s->ndim, dims, NULL));
    /* an int64 variable (Keras's Normalization count): HDF5 converts the floats on write */
    SN_H5(dset = H5Dcreate2(loc, name, int64 ? H5T_STD_I64LE : H5T_IEEE_F32LE, space, lcpl,
                            H5P_DEFAULT, H5P_DEFAULT));
    const void *data = sn_tensor_cdata(t);
    if (!sn_tensor_is_contiguous(t)) {
        tmp = sn_malloc((size_t)sn_tensor_numel(t) * sizeof(float));
        if (!tmp) { st = SN_ERR_NOMEM; goto done; }
        copy_tensor_f32(t, tmp, 0);
        data = tmp;
    }
    if (sn_tensor_numel(t) > 0) SN_H5(H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
done:
    free(tmp);
    sn_h5_close(&dset);
    sn_h5_close(&space);
    return st;
}

/* Keras 3: /vars (model), /layers/<name>/vars/<i>; every saveable gets a vars group carrying
 * its name (H5IOStore.make with metadata {"name": ...}), even when it holds no variable. */
static sn_status save_keras3(hid_t file, int n, const sn_weight_layer *layers,
                             const sn_weights_h5_options *o) {
    sn_status st = SN_OK;
    hid_t root_vars = H5I_INVALID_HID, lg = H5I_INVALID_HID, g = H5I_INVALID_HID,
          v = H5I_INVALID_HID, cg = H5I_INVALID_HID, cv = H5I_INVALID_HID,
          lcpl = H5I_INVALID_HID;
    char(*names)[NAME_CAP] = NULL;
    if (n > 0) {
        names = sn_calloc((size_t)n, NAME_CAP);
        if (!names) return SN_ERR_NOMEM;
        keras3_names(n, layers, o->paths, names);
    }
    SN_H5(root_vars = H5Gcreate2(file, "vars", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    SN_H5_TRY(sn_h5_attr_vlen_str(root_vars, "name", o->model_name ? o->model_name : "sequential"));
    SN_H5(lg = H5Gcreate2(file, "layers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    /* a nested model's layers ("functional/layers/dense") need their parents made */
    SN_H5(lcpl = H5Pcreate(H5P_LINK_CREATE));
    SN_H5(H5Pset_create_intermediate_group(lcpl, 1));
    for (int i = 0; i < n; i++) {
        const sn_weight_layer *L = &layers[i];
        SN_H5(g = H5Gcreate2(lg, names[i], lcpl, H5P_DEFAULT, H5P_DEFAULT));
        SN_H5(v = H5Gcreate2(g, "vars", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        SN_H5_TRY(sn_h5_attr_vlen_str(v, "name", L->name));
        sublayer sub[MAX_SUBLAYERS];
        int ns = keras3_sublayers(L, sub);
        for (int k = 0; k < ns; k++) {
            hid_t target = v;
            if (sub[k].group) {
                SN_H5(cg = H5Gcreate2(g, sub[k].group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
                SN_H5(cv = H5Gcreate2(cg, "vars", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
                SN_H5_TRY(sn_h5_attr_vlen_str(cv, "name", sub[k].name));
                target = cv;
            }
            for (int j = sub[k].first; j < sub[k].first + sub[k].n; j++) {
                char key[16];
                snprintf(key, sizeof key, "%d", j - sub[k].first);
                st = write_var(target, key, H5P_DEFAULT, L->vars[j].value, int64_var(L, j));
                if (st != SN_OK) {
                    sn_error_context(st, "layer '%s' (%s) variable %d '%s'", L->name,
                                     L->class_name, j, var_name(L, j));
                    goto done;
                }
            }
            sn_h5_close(&cv);
            sn_h5_close(&cg);
        }
        sn_h5_close(&cv);
        sn_h5_close(&cg);
        sn_h5_close(&v);
        sn_h5_close(&g);
    }
done:
    free(names);
    sn_h5_close(&cv);
    sn_h5_close(&cg);
    sn_h5_close(&v);
    sn_h5_close(&g);
    sn_h5_close(&lg);
    sn_h5_close(&lcpl);
    sn_h5_close(&root_vars);
    return st;
}

/* A list of strings as Keras's save_attributes_to_hdf5_group writes it: one attribute, or
 * name0, name1, ... when the array would pass the object header limit (np.array_split). */
static sn_status write_str_list(hid_t obj, const char *name, int n, const char *const *v) {
    size_t len = 1;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(v[i]);
        if (l > KERAS_ATTR_LIMIT)
            return sn_errorf(SN_ERR_INVALID, "attribute '%s': string of %zu bytes is over HDF5's "
                             "limit of %d", name, l, KERAS_ATTR_LIMIT);
        if (l > len) len = l;
    }
    if ((size_t)n * len <= KERAS_ATTR_LIMIT) return sn_h5_attr_fixed_strs(obj, name, n, v, 0);
    int k = 1;
    while ((size_t)((n + k - 1) / k) * len > KERAS_ATTR_LIMIT) k++;
    for (int c = 0, at = 0; c < k; c++) {
        int cnt = n / k + (c < n % k ? 1 : 0);
        char cname[NAME_CAP];
        snprintf(cname, sizeof cname, "%s%d", name, c);
        SN_TRY(sn_h5_attr_fixed_strs(obj, cname, cnt, v + at, 0));
        at += cnt;
    }
    return SN_OK;
}

static int cmp_layer_name(const void *a, const void *b) {
    const sn_weight_layer *x = *(const sn_weight_layer *const *)a;
    const sn_weight_layer *y = *(const sn_weight_layer *const *)b;
    return strcmp(x->name, y->name);
}

/* Keras 2: root attributes layer_names/backend/keras_version, one group per layer (created
 * in name order, as Keras does), datasets at <layer>/<layer>/<var>:0 (TF variable names), and
 * an empty top_level_model_weights group (Keras >= 2.13 and Keras 3 write it). */
static sn_status save_keras2(hid_t file, int n, const sn_weight_layer *layers,
                             const sn_weights_h5_options *o) {
    sn_status st = SN_OK;
    hid_t lcpl = H5I_INVALID_HID, g = H5I_INVALID_HID;
    const char **lnames = NULL;
    const sn_weight_layer **sorted = NULL;
    char **wnames = NULL;
    int nw = 0;
    for (int i = 0; i < n; i++) {
        const char *nm = layers[i].name;
        if (strchr(nm, '/') || !strcmp(nm, ".") || !strcmp(nm, "top_level_model_weights"))
            return sn_errorf(SN_ERR_INVALID, "layer name '%s' cannot name a Keras 2 group", nm);
        for (int k = 0; k < i; k++)
            if (!strcmp(nm, layers[k].name))
                return sn_errorf(SN_ERR_INVALID, "layers %d and %d are both named '%s'; Keras 2 "
                                 "files need unique layer names", k, i, nm);
    }
    if (n > 0) {
        lnames = sn_calloc((size_t)n, sizeof *lnames);
        sorted = sn_calloc((size_t)n, sizeof *sorted);
        if (!lnames || !sorted) { st = SN_ERR_NOMEM; goto done; }
    }
    for (int i = 0; i < n; i++) {
        lnames[i] = layers[i].name;
        sorted[i] = &layers[i];
    }
    SN_H5_TRY(write_str_list(file, "layer_names", n, lnames));
    const char *be = o->backend ? o->backend : "tensorflow";
    const char *kv = o->keras_version ? o->keras_version : "2.15.0";
    SN_H5_TRY(sn_h5_attr_fixed_strs(file, "backend", 1, &be, 1));
    SN_H5_TRY(sn_h5_attr_fixed_strs(file, "keras_version", 1, &kv, 1));
    if (n > 0) qsort(sorted, (size_t)n, sizeof *sorted, cmp_layer_name);
    /* Weight names hold a '/', so datasets need their parent groups created on the way. */
    SN_H5(lcpl = H5Pcreate(H5P_LINK_CREATE));
    SN_H5(H5Pset_create_intermediate_group(lcpl, 1));
    for (int i = 0; i < n; i++) {
        const sn_weight_layer *L = sorted[i];
        SN_H5(g = H5Gcreate2(file, L->name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        nw = L->n_vars;
        if (nw > 0) {
            wnames = sn_calloc((size_t)nw, sizeof *wnames);
            if (!wnames) { st = SN_ERR_NOMEM; goto done; }
        }
        char cell[NAME_CAP + 8] = "";
        if (is_recurrent(L->class_name)) {
            char snake[NAME_CAP];
            sn_keras_snake_case(L->class_name, snake, sizeof snake);
            snprintf(cell, sizeof cell, "%s_cell/", snake);
        }
        for (int j = 0; j < nw; j++) {
            char var[NAME_CAP];
            if (L->vars[j].name)
                snprintf(var, sizeof var, "%s", L->vars[j].name);
            else
                snprintf(var, sizeof var, "weight_%d", j);
            size_t need = strlen(L->name) + strlen(cell) + strlen(var) + 8;
            wnames[j] = sn_malloc(need);
            if (!wnames[j]) { st = SN_ERR_NOMEM; goto done; }
            snprintf(wnames[j], need, "%s/%s%s:0", L->name, cell, var);
            for (int k = 0; k < j; k++)
                if (!strcmp(wnames[k], wnames[j])) {
                    st = sn_errorf(SN_ERR_INVALID, "layer '%s' (%s): two variables named '%s'",
                                   L->name, L->class_name, var);
                    goto done;
                }
        }
        SN_H5_TRY(write_str_list(g, "weight_names", nw, (const char *const *)wnames));
        for (int j = 0; j < nw; j++) {
            st = write_var(g, wnames[j], lcpl, L->vars[j].value, int64_var(L, j));
            if (st != SN_OK) {
                sn_error_context(st, "layer '%s' (%s) variable %d '%s'", L->name, L->class_name,
                                 j, var_name(L, j));
                goto done;
            }
        }
        sn_h5_free_strs(nw, wnames);
        wnames = NULL;
        sn_h5_close(&g);
    }
    SN_H5(g = H5Gcreate2(file, "top_level_model_weights", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    SN_H5_TRY(write_str_list(g, "weight_names", 0, NULL));
done:
    sn_h5_free_strs(nw, wnames);
    free(lnames);
    free(sorted);
    sn_h5_close(&g);
    sn_h5_close(&lcpl);
    return st;
}

/* Built in memory (sn_weights_save_h5_image) and written by sn_atomic_write, for the same
 * reasons as checkpoints (io/checkpoint_io.c): the only disk write is one write(2) whose errno
 * becomes the message, and a failure leaves an existing file as it was. */
sn_status sn_weights_save_h5(const char *path, int n_layers, const sn_weight_layer *layers,
                             const sn_weights_h5_options *opt) {
    if (!path) return sn_errorf(SN_ERR_INVALID, "weights file path is NULL");
    void *img = NULL;
    size_t n = 0;
    sn_status st = sn_weights_save_h5_image(n_layers, layers, opt, &img, &n);
    if (st != SN_OK) return sn_error_context(st, "weights file '%s'", path);
    st = sn_atomic_write(path, "weights file", img, n, NULL);
    free(img);
    return st;
}

/* ---- reading ---------------------------------------------------------------------------- */

static void dtype_desc(hid_t type, char *buf, size_t cap) {
    H5T_class_t c = H5Tget_class(type);
    size_t sz = H5Tget_size(type);
    switch (c) {
    case H5T_INTEGER:
        snprintf(buf, cap, "%s%zu", H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int", sz * 8);
        break;
    case H5T_FLOAT: snprintf(buf, cap, "float%zu", sz * 8); break;
    case H5T_STRING: snprintf(buf, cap, "string"); break;
    case H5T_OPAQUE: snprintf(buf, cap, "opaque (%zu bytes)", sz); break;
    case H5T_COMPOUND: snprintf(buf, cap, "compound"); break;
    default: snprintf(buf, cap, "a non-numeric type (class %d)", (int)c); break;
    }
}

/* Reads one variable into `out` (numel floats) after checking dtype and shape. `shown` is
 * the dataset's full path for messages. */
static sn_status read_var(hid_t loc, const char *dpath, const char *shown, const sn_weight_layer *L,
                          int j, float *out) {
    sn_status st = SN_OK;
    hid_t dset = H5I_INVALID_HID, type = H5I_INVALID_HID, space = H5I_INVALID_HID;
    int ex;
    SN_H5_TRY(path_exists(loc, dpath, &ex));
    if (!ex) {
        st = sn_errorf(SN_ERR_FORMAT, "layer '%s' (%s) variable %d '%s': no dataset '%s' in the file",
                       L->name, L->class_name, j, var_name(L, j), shown);
        goto done;
    }
    SN_H5(dset = H5Dopen2(loc, dpath, H5P_DEFAULT));
    SN_H5(type = H5Dget_type(dset));
    H5T_class_t cls;
    SN_H5(cls = H5Tget_class(type));
    if (cls != H5T_FLOAT && !(cls == H5T_INTEGER && int64_var(L, j))) {
        char d[64];
        dtype_desc(type, d, sizeof d);
        st = sn_errorf(SN_ERR_SHAPE, "layer '%s' (%s) variable %d '%s': file has dtype %s at '%s', "
                       "model expects float32", L->name, L->class_name, j, var_name(L, j), d, shown);
        goto done;
    }
    SN_H5(space = H5Dget_space(dset));
    int nd;
    SN_H5(nd = H5Sget_simple_extent_ndims(space));
    hsize_t hd[H5S_MAX_RANK];
    int64_t fd[H5S_MAX_RANK];
    SN_H5(H5Sget_simple_extent_dims(space, hd, NULL));
    for (int d = 0; d < nd; d++) fd[d] = (int64_t)hd[d];
    const sn_shape *ms = sn_tensor_shape(L->vars[j].value);
    int same = nd == ms->ndim;
    for (int d = 0; same && d < nd; d++) same = fd[d] == ms->dim[d];
    if (!same) {
        char a[160], b[160];
        dims_str(nd, fd, a, sizeof a);
        dims_str(ms->ndim, ms->dim, b, sizeof b);
        st = sn_errorf(SN_ERR_SHAPE, "layer '%s' (%s) variable %d '%s': file has shape %s, model "
                       "expects %s (dataset '%s')", L->name, L->class_name, j, var_name(L, j), a, b,
                       shown);
        goto done;
    }
    /* HDF5 converts float16/float64 datasets to f32 here, as Keras's assign would. */
    if (sn_tensor_numel(L->vars[j].value) > 0)
        SN_H5(H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out));
done:
    sn_h5_close(&space);
    sn_h5_close(&type);
    sn_h5_close(&dset);
    return st;
}

/* At most this many objects are opened to decide whether one layer group holds a dataset.
 * Hard links can make cycles (a group linking to its parent), so depth alone does not bound
 * the walk: with k self-links and depth 8 it would visit k^8 objects (fuzz_weights_h5_struct
 * found the hang). A Keras layer has a handful of objects. */
#define MAX_WALK_OBJECTS 4096

/* Whether any dataset lies below `obj` (a walk of at most MAX_WALK_DEPTH levels, stopping at
 * the first dataset); *budget counts down the objects opened. */
static sn_status has_dataset(hid_t obj, const char *shown, int depth, int64_t *budget,
                             int *found) {
    sn_status st = SN_OK;
    H5G_info_t info;
    hid_t child = H5I_INVALID_HID;
    SN_H5(H5Gget_info(obj, &info));
    for (hsize_t i = 0; i < info.nlinks && !*found; i++) {
        char name[NAME_CAP];
        ssize_t len;
        SN_H5(len = H5Lget_name_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                                       H5P_DEFAULT));
        if ((size_t)len >= sizeof name) continue; /* no Keras name is this long */
        if (--*budget < 0) {
            st = sn_errorf(SN_ERR_FORMAT, "%s holds more than %d objects (or its links form a "
                           "cycle); a Keras layer holds a few", shown, MAX_WALK_OBJECTS);
            goto done;
        }
        SN_H5(child = H5Oopen(obj, name, H5P_DEFAULT));
        H5I_type_t t = H5Iget_type(child);
        if (t == H5I_DATASET)
            *found = 1;
        else if (t == H5I_GROUP && depth < MAX_WALK_DEPTH)
            SN_H5_TRY(has_dataset(child, shown, depth + 1, budget, found));
        sn_h5_close(&child);
    }
done:
    sn_h5_close(&child);
    return st;
}

typedef struct file_layers {
    int n;
    char (*names)[NAME_CAP];
} file_layers;

/* Children of the Keras 3 layers group that hold at least one dataset, in name order. */
static sn_status keras3_file_layers(hid_t lg, file_layers *fl) {
    sn_status st = SN_OK;
    H5G_info_t info;
    hid_t child = H5I_INVALID_HID;
    fl->n = 0;
    fl->names = NULL;
    SN_H5(H5Gget_info(lg, &info));
    if (info.nlinks == 0) goto done;
    fl->names = sn_calloc((size_t)info.nlinks, NAME_CAP);
    if (!fl->names) { st = SN_ERR_NOMEM; goto done; }
    for (hsize_t i = 0; i < info.nlinks; i++) {
        char name[NAME_CAP];
        ssize_t len;
        SN_H5(len = H5Lget_name_by_idx(lg, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                                       H5P_DEFAULT));
        if ((size_t)len >= sizeof name) continue;
        SN_H5(child = H5Oopen(lg, name, H5P_DEFAULT));
        int found = 0;
        int64_t budget = MAX_WALK_OBJECTS;
        char shown[NAME_CAP + 64];
        snprintf(shown, sizeof shown, "layer group '%s'", name);
        if (H5Iget_type(child) == H5I_GROUP) SN_H5_TRY(has_dataset(child, shown, 1, &budget, &found));
        if (found) snprintf(fl->names[fl->n++], NAME_CAP, "%s", name);
        sn_h5_close(&child);
    }
done:
    sn_h5_close(&child);
    return st;
}

/* Whether names[i]'s first component (a nested model's group for "functional/layers/dense")
 * is `top`. */
static int same_top(const char *name, const char *top) {
    size_t k = strcspn(name, "/");
    return strlen(top) == k && !strncmp(name, top, k);
}

/* The groups under /layers that hold weights: one per layer with variables, one per nested
 * model whose layers have any (names NULL: one per layer, Keras 2). */
static int count_weighted(int n, const sn_weight_layer *layers, char (*names)[NAME_CAP]) {
    int c = 0;
    for (int i = 0; i < n; i++) {
        if (layers[i].n_vars == 0) continue;
        int seen = 0;
        for (int k = 0; names && k < i && !seen; k++) {
            char top[NAME_CAP];
            snprintf(top, sizeof top, "%.*s", (int)strcspn(names[i], "/"), names[i]);
            seen = layers[k].n_vars > 0 && same_top(names[k], top);
        }
        c += !seen;
    }
    return c;
}

/* Temporaries: one dense f32 buffer per variable of every layer, in order. */
typedef struct staging {
    int n;
    float **buf;
} staging;

static sn_status staging_new(staging *s, int n, const sn_weight_layer *layers) {
    s->n = 0;
    s->buf = NULL;
    for (int i = 0; i < n; i++) s->n += layers[i].n_vars;
    if (s->n == 0) return SN_OK;
    s->buf = sn_calloc((size_t)s->n, sizeof *s->buf);
    if (!s->buf) return SN_ERR_NOMEM;
    for (int i = 0, k = 0; i < n; i++)
        for (int j = 0; j < layers[i].n_vars; j++, k++) {
            int64_t ne = sn_tensor_numel(layers[i].vars[j].value);
            s->buf[k] = sn_malloc((size_t)(ne > 0 ? ne : 1) * sizeof(float));
            if (!s->buf[k]) return SN_ERR_NOMEM;
        }
    return SN_OK;
}

static void staging_free(staging *s) {
    for (int k = 0; k < s->n && s->buf; k++) free(s->buf[k]);
    free(s->buf);
}

static int staging_index(const sn_weight_layer *layers, int i) {
    int k = 0;
    for (int a = 0; a < i; a++) k += layers[a].n_vars;
    return k;
}

static sn_status load_keras3(hid_t file, int n, const sn_weight_layer *layers,
                             const char *const *paths, staging *sg) {
    sn_status st = SN_OK;
    hid_t lg = H5I_INVALID_HID, vg = H5I_INVALID_HID;
    char(*names)[NAME_CAP] = NULL;
    char(*vpath)[PATH_CAP] = NULL;
    file_layers fl = {0, NULL};
    int has;
    /* Keras 2.13's new-format files used _layer_checkpoint_dependencies for layers (Keras 3's
     * H5IOStore falls back to it the same way). */
    const char *root = "layers";
    SN_H5_TRY(sn_h5_has_link(file, "layers", &has));
    if (!has) root = "_layer_checkpoint_dependencies";
    SN_H5_TRY(sn_h5_has_link(file, root, &has));
    if (!has) {
        st = sn_errorf(SN_ERR_FORMAT, "Keras 3 layout without a /layers group");
        goto done;
    }
    SN_H5(lg = H5Gopen2(file, root, H5P_DEFAULT));
    SN_H5_TRY(keras3_file_layers(lg, &fl));
    if (n > 0) {
        names = sn_calloc((size_t)n, NAME_CAP);
        if (!names) { st = SN_ERR_NOMEM; goto done; }
        keras3_names(n, layers, paths, names);
        vpath = sn_calloc((size_t)n, PATH_CAP);
        if (!vpath) { st = SN_ERR_NOMEM; goto done; }
    }
    int first_missing = -1;
    for (int i = 0; i < n; i++) {
        sublayer sub[MAX_SUBLAYERS];
        int ns = keras3_sublayers(&layers[i], sub);
        for (int k = 0; k < ns; k++) {
            if (sub[k].n == 0) continue;
            snprintf(vpath[i], PATH_CAP, "%s%s%s/vars", names[i], sub[k].group ? "/" : "",
                     sub[k].group ? sub[k].group : "");
            int ex;
            SN_H5_TRY(path_exists(lg, vpath[i], &ex));
            if (!ex && first_missing < 0) first_missing = i;
            if (!ex) break; /* vpath[i] names the missing group */
        }
    }
    int nm = count_weighted(n, layers, names);
    if (nm != fl.n || first_missing >= 0) {
        char tail[PATH_CAP + 200] = "";
        if (first_missing >= 0) {
            snprintf(tail, sizeof tail, "; first missing: layer '%s' (%s), expected at '/%s/%s'",
                     layers[first_missing].name, layers[first_missing].class_name, root,
                     vpath[first_missing]);
        } else {
            for (int f = 0; f < fl.n; f++) {
                int used = 0;
                for (int i = 0; i < n && !used; i++) used = layers[i].n_vars > 0 && same_top(names[i], fl.names[f]);
                if (!used) {
                    snprintf(tail, sizeof tail, "; the model has no layer for '/%s/%s'", root,
                             fl.names[f]);
                    break;
                }
            }
        }
        st = sn_errorf(SN_ERR_SHAPE, "layer count mismatch: model has %d layers with weights, "
                       "file has %d (Keras 3 layout)%s", nm, fl.n, tail);
        goto done;
    }
    for (int i = 0; i < n && st == SN_OK; i++) {
        const sn_weight_layer *L = &layers[i];
        if (L->n_vars == 0) continue;
        sublayer sub[MAX_SUBLAYERS];
        int ns = keras3_sublayers(L, sub);
        int k0 = staging_index(layers, i);
        for (int k = 0; k < ns && st == SN_OK; k++) {
            if (sub[k].n == 0) continue;
            H5G_info_t info;
            snprintf(vpath[i], PATH_CAP, "%s%s%s/vars", names[i], sub[k].group ? "/" : "",
                     sub[k].group ? sub[k].group : "");
            SN_H5(vg = H5Gopen2(lg, vpath[i], H5P_DEFAULT));
            SN_H5(H5Gget_info(vg, &info));
            if ((int64_t)info.nlinks != sub[k].n) {
                st = sn_errorf(SN_ERR_SHAPE, "layer '%s' (%s): file has %lld variables at "
                               "'/%s/%s', model expects %d", L->name, L->class_name,
                               (long long)info.nlinks, root, vpath[i], sub[k].n);
                break;
            }
            for (int j = sub[k].first; j < sub[k].first + sub[k].n && st == SN_OK; j++) {
                char key[16], shown[PATH_CAP + 64];
                snprintf(key, sizeof key, "%d", j - sub[k].first);
                snprintf(shown, sizeof shown, "/%s/%s/%s", root, vpath[i], key);
                st = read_var(vg, key, shown, L, j, sg->buf[k0 + j]);
            }
            sn_h5_close(&vg);
        }
        sn_h5_close(&vg);
    }
done:
    free(vpath);
    free(names);
    free(fl.names);
    sn_h5_close(&vg);
    sn_h5_close(&lg);
    return st;
}

/* A string list attribute that Keras may have split into name0, name1, ... */
static sn_status read_str_list(hid_t obj, const char *name, int *found, int *n, char ***out) {
    sn_status st = SN_OK;
    htri_t ex;
    *found = 0;
    *n = 0;
    *out = NULL;
    SN_H5(ex = H5Aexists(obj, name));
    if (ex) {
        *found = 1;
        return sn_h5_read_strs(obj, name, n, out);
    }
    for (int c = 0;; c++) {
        char cname[NAME_CAP];
        snprintf(cname, sizeof cname, "%s%d", name, c);
        SN_H5(ex = H5Aexists(obj, cname));
        if (!ex) break;
        *found = 1;
        int m;
        char **part;
        SN_TRY(sn_h5_read_strs(obj, cname, &m, &part));
        char **all = sn_realloc(*out, (size_t)(*n + m + 1) * sizeof *all);
        if (!all) {
            sn_h5_free_strs(m, part);
            return SN_ERR_NOMEM;
        }
        memcpy(all + *n, part, (size_t)m * sizeof *part);
        free(part);
        *out = all;
        *n += m;
    }
done:
    return st;
}

typedef struct legacy_layer {
    char *name;
    int nw;
    char **wnames;
} legacy_layer;

static sn_status load_keras2(hid_t root, const char *root_path, int n,
                             const sn_weight_layer *layers, staging *sg) {
    sn_status st = SN_OK;
    hid_t g = H5I_INVALID_HID;
    char **lnames = NULL;
    int nl = 0, found, nf = 0;
    legacy_layer *fl = NULL;
    SN_H5_TRY(read_str_list(root, "layer_names", &found, &nl, &lnames));
    if (nl > 0) {
        fl = sn_calloc((size_t)nl, sizeof *fl);
        if (!fl) { st = SN_ERR_NOMEM; goto done; }
    }
    /* As load_weights_from_hdf5_group: keep the file's layers that list weights. */
    for (int i = 0; i < nl; i++) {
        int ex, nw;
        char **wn;
        SN_H5_TRY(path_exists(root, lnames[i], &ex));
        if (!ex) {
            st = sn_errorf(SN_ERR_FORMAT, "layer_names lists '%s' but there is no group '%s/%s'",
                           lnames[i], root_path, lnames[i]);
            goto done;
        }
        SN_H5(g = H5Gopen2(root, lnames[i], H5P_DEFAULT));
        st = read_str_list(g, "weight_names", &found, &nw, &wn);
        if (st != SN_OK) {
            sn_error_context(st, "group '%s/%s'", root_path, lnames[i]);
            goto done;
        }
        sn_h5_close(&g);
        if (nw == 0) continue;
        fl[nf].name = lnames[i];
        lnames[i] = NULL;
        fl[nf].nw = nw;
        fl[nf].wnames = wn;
        nf++;
    }
    int nm = count_weighted(n, layers, NULL);
    if (nm != nf) {
        /* Matching is by order, so the first unmatched layer is the one past the shorter list. */
        char tail[NAME_CAP * 2] = "";
        if (nm > nf) {
            for (int i = 0, w = 0; i < n; i++) {
                if (layers[i].n_vars == 0) continue;
                if (w++ == nf) {
                    snprintf(tail, sizeof tail, "; first missing: layer '%s' (%s)", layers[i].name,
                             layers[i].class_name);
                    break;
                }
            }
        } else {
            snprintf(tail, sizeof tail, "; the model has no layer for the file's '%s'", fl[nm].name);
        }
        st = sn_errorf(SN_ERR_SHAPE, "layer count mismatch: model has %d layers with weights, "
                       "file has %d (Keras 2 layout, matched by order)%s", nm, nf, tail);
        goto done;
    }
    for (int i = 0, f = 0; i < n; i++) {
        const sn_weight_layer *L = &layers[i];
        if (L->n_vars == 0) continue;
        legacy_layer *F = &fl[f++];
        if (F->nw != L->n_vars) {
            st = sn_errorf(SN_ERR_SHAPE, "layer '%s' (%s): file layer '%s' has %d weights, model "
                           "expects %d", L->name, L->class_name, F->name, F->nw, L->n_vars);
            goto done;
        }
        SN_H5(g = H5Gopen2(root, F->name, H5P_DEFAULT));
        int k = staging_index(layers, i);
        for (int j = 0; j < L->n_vars; j++) {
            char shown[PATH_CAP];
            snprintf(shown, sizeof shown, "%s/%s/%s", root_path, F->name, F->wnames[j]);
            SN_H5_TRY(read_var(g, F->wnames[j], shown, L, j, sg->buf[k + j]));
        }
        sn_h5_close(&g);
    }
done:
    for (int f = 0; f < nf; f++) {
        free(fl[f].name);
        sn_h5_free_strs(fl[f].nw, fl[f].wnames);
    }
    free(fl);
    sn_h5_free_strs(nl, lnames);
    sn_h5_close(&g);
    return st;
}

/* Keras 2 when the root (weights file) or /model_weights (whole-model file) has layer_names;
 * Keras 3 when there is a layers group. */
static sn_status detect_layout(hid_t file, sn_weights_layout *out, int *in_model_weights) {
    sn_status st = SN_OK;
    htri_t a, b;
    int has;
    *in_model_weights = 0;
    SN_H5(a = H5Aexists(file, "layer_names"));
    SN_H5(b = H5Aexists(file, "layer_names0"));
    if (a || b) {
        *out = SN_WEIGHTS_KERAS2;
        return SN_OK;
    }
    SN_H5_TRY(sn_h5_has_link(file, "model_weights", &has));
    if (has) {
        *out = SN_WEIGHTS_KERAS2;
        *in_model_weights = 1;
        return SN_OK;
    }
    int l1, l2;
    SN_H5_TRY(sn_h5_has_link(file, "layers", &l1));
    SN_H5_TRY(sn_h5_has_link(file, "_layer_checkpoint_dependencies", &l2));
    if (l1 || l2) {
        *out = SN_WEIGHTS_KERAS3;
        return SN_OK;
    }
    st = sn_errorf(SN_ERR_FORMAT, "an HDF5 file, but not Keras weights: no /layers group "
                   "(Keras 3) and no layer_names attribute (Keras 2)");
done:
    return st;
}

/* Opens `path` read-only after checking that it exists and is HDF5. Caller holds the lock. */
static sn_status open_weights(const char *path, hid_t *file) {
    sn_status st = SN_OK;
    unsigned char sig[4] = {0};
    FILE *fp = fopen(path, "rb");
    if (!fp) return sn_errorf(SN_ERR_IO, "cannot open: %s", strerror(errno));
    size_t got = fread(sig, 1, sizeof sig, fp);
    fclose(fp);
    htri_t is;
    SN_H5(is = H5Fis_hdf5(path));
    if (!is) {
        if (got >= 2 && sig[0] == 'P' && sig[1] == 'K')
            return sn_errorf(SN_ERR_FORMAT, "not an HDF5 file (a zip archive: a .keras model "
                             "keeps its weights in model.weights.h5 inside it)");
        return sn_errorf(SN_ERR_FORMAT, "not an HDF5 file (no HDF5 signature)");
    }
    SN_H5(*file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT));
done:
    return st;
}

static const char *layout_name(sn_weights_layout l) {
    return l == SN_WEIGHTS_KERAS2 ? "Keras 2 (.h5)" : "Keras 3 (.weights.h5)";
}

/* Reads an open file into the layers (the caller holds the lock and closes the file). */
static sn_status load_opened(hid_t file, int n_layers, const sn_weight_layer *layers,
                             const sn_weights_h5_options *o) {
    sn_status st = SN_OK;
    staging sg = {0, NULL};
    hid_t root = H5I_INVALID_HID;
    sn_weights_layout lay;
    int in_mw;
    SN_H5_TRY(detect_layout(file, &lay, &in_mw));
    if (o->layout != SN_WEIGHTS_AUTO && o->layout != lay) {
        st = sn_errorf(SN_ERR_FORMAT, "the file has the %s layout, the caller asked for %s",
                       layout_name(lay), layout_name(o->layout));
        goto done;
    }
    SN_H5_TRY(staging_new(&sg, n_layers, layers));
    if (lay == SN_WEIGHTS_KERAS3) {
        SN_H5_TRY(load_keras3(file, n_layers, layers, o->paths, &sg));
    } else {
        SN_H5(root = H5Gopen2(file, in_mw ? "model_weights" : "/", H5P_DEFAULT));
        SN_H5_TRY(load_keras2(root, in_mw ? "/model_weights" : "", n_layers, layers, &sg));
    }
    /* Everything matched: only now write into the model. */
    for (int i = 0, k = 0; i < n_layers; i++)
        for (int j = 0; j < layers[i].n_vars; j++, k++)
            copy_tensor_f32(layers[i].vars[j].value, sg.buf[k], 1);
done:
    staging_free(&sg);
    sn_h5_close(&root);
    return st;
}

sn_status sn_weights_load_h5(const char *path, int n_layers, const sn_weight_layer *layers,
                             const sn_weights_h5_options *opt) {
    sn_weights_h5_options o = opt ? *opt : sn_weights_h5_defaults();
    if (!path) return sn_errorf(SN_ERR_INVALID, "weights file path is NULL");
    sn_status st = check_layers(n_layers, layers);
    if (st != SN_OK) return sn_error_context(st, "weights file '%s'", path);

    hid_t file = H5I_INVALID_HID;
    sn_h5_lock();
    SN_H5_TRY(open_weights(path, &file));
    SN_H5_TRY(load_opened(file, n_layers, layers, &o));
done:
    sn_h5_close(&file);
    sn_h5_unlock();
    if (st != SN_OK) sn_error_context(st, "weights file '%s'", path);
    return st;
}

/* HDF5's core driver holds a file in memory; backing_store 0: nothing touches the disk. */
static sn_status core_fapl(hid_t *fapl) {
    sn_status st = SN_OK;
    SN_H5(*fapl = H5Pcreate(H5P_FILE_ACCESS));
    SN_H5(H5Pset_fapl_core(*fapl, (size_t)1 << 20, 0));
done:
    return st;
}

sn_status sn_weights_load_h5_image(const void *image, size_t size, const char *shown,
                                   int n_layers, const sn_weight_layer *layers,
                                   const sn_weights_h5_options *opt) {
    sn_weights_h5_options o = opt ? *opt : sn_weights_h5_defaults();
    if (!shown) shown = "weights image";
    if (!image || size == 0) return sn_errorf(SN_ERR_FORMAT, "%s is empty", shown);
    sn_status st = check_layers(n_layers, layers);
    if (st != SN_OK) return sn_error_context(st, "%s", shown);
    if (size < 8 || memcmp(image, "\x89HDF\r\n\x1a\n", 8) != 0)
        return sn_errorf(SN_ERR_FORMAT, "%s is not an HDF5 file (no HDF5 signature)", shown);
    hid_t fapl = H5I_INVALID_HID, file = H5I_INVALID_HID;
    sn_h5_lock();
    SN_H5_TRY(core_fapl(&fapl));
    /* HDF5 copies the image into the property list and opens the copy read-only. */
    SN_H5(H5Pset_file_image(fapl, (void *)image, size));
    SN_H5(file = H5Fopen(shown, H5F_ACC_RDONLY, fapl));
    SN_H5_TRY(load_opened(file, n_layers, layers, &o));
done:
    sn_h5_close(&file);
    sn_h5_close(&fapl);
    sn_h5_unlock();
    if (st != SN_OK) sn_error_context(st, "%s", shown);
    return st;
}

sn_status sn_weights_save_h5_image(int n_layers, const sn_weight_layer *layers,
                                   const sn_weights_h5_options *opt, void **image, size_t *size) {
    sn_weights_h5_options o = opt ? *opt : sn_weights_h5_defaults();
    if (!image || !size) return sn_errorf(SN_ERR_INVALID, "sn_weights_save_h5_image: NULL out");
    *image = NULL;
    *size = 0;
    sn_status st = check_layers(n_layers, layers);
    if (st != SN_OK) return st;
    hid_t fapl = H5I_INVALID_HID, file = H5I_INVALID_HID;
    void *buf = NULL;
    sn_h5_lock();
    SN_H5_TRY(core_fapl(&fapl));
    SN_H5(file = H5Fcreate("model.weights.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl));
    if (o.layout == SN_WEIGHTS_KERAS2)
        SN_H5_TRY(save_keras2(file, n_layers, layers, &o));
    else
        SN_H5_TRY(save_keras3(file, n_layers, layers, &o));
    SN_H5(H5Fflush(file, H5F_SCOPE_GLOBAL));
    ssize_t n;
    SN_H5(n = H5Fget_file_image(file, NULL, 0));
    if (!(buf = sn_malloc((size_t)n))) {
        st = SN_ERR_NOMEM;
        goto done;
    }
    ssize_t got;
    SN_H5(got = H5Fget_file_image(file, buf, (size_t)n));
    if (got != n) {
        st = sn_errorf(SN_ERR_BACKEND, "HDF5 gave a file image of %zd bytes, expected %zd", got, n);
        goto done;
    }
    *image = buf;
    *size = (size_t)n;
    buf = NULL;
done:
    free(buf);
    sn_h5_close(&file);
    sn_h5_close(&fapl);
    sn_h5_unlock();
    if (st != SN_OK) sn_error_context(st, "writing the weights image");
    return st;
}

sn_status sn_weights_h5_layout(const char *path, sn_weights_layout *out) {
    if (!path || !out) return sn_errorf(SN_ERR_INVALID, "sn_weights_h5_layout: NULL argument");
    sn_status st = SN_OK;
    hid_t file = H5I_INVALID_HID;
    int in_mw;
    sn_h5_lock();
    SN_H5_TRY(open_weights(path, &file));
    SN_H5_TRY(detect_layout(file, out, &in_mw));
done:
    sn_h5_close(&file);
    sn_h5_unlock();
    if (st != SN_OK) sn_error_context(st, "weights file '%s'", path);
    return st;
}
