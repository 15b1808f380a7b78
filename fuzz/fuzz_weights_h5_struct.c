/* The HDF5 weight loader, structure-aware: the fuzzer's bytes drive a generator that builds a
 * valid HDF5 file with HDF5's own API — Keras 3 or Keras 2 layout (root or /model_weights),
 * layer groups named from Keras's vocabulary, datasets of any dtype (f16/f32/f64, big-endian,
 * ints, strings) and rank, layer_names / weight_names attributes whole, split (name0, name1)
 * or of the wrong type, and the shapes a hostile file can have that the byte-level target
 * (fuzz_weights_h5) rarely reaches: hard-link cycles, dangling soft links, deep group chains.
 * Then sinter loads it into the same small model description as fuzz_weights_h5. HDF5's
 * parser sees only valid files here, so what is explored is sinter's walk of groups,
 * attributes, shapes and dtypes; a load fails cleanly or fills every tensor. */
#include <hdf5.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_util.h"
#include "sinter/io.h"

typedef struct {
    const uint8_t *p;
    size_t n;
} rd;

static unsigned next(rd *r) {
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

static const char *NAMES[16] = {"dense", "batch_normalization", "lstm", "dropout",
                                "dense_1", "cell", "vars", "layers",
                                "0", "1", "2", "kernel:0",
                                "dense/kernel:0", "dense/bias:0", "lstm/lstm_cell/kernel:0", "x"};
static const hsize_t DIMS[8] = {0, 1, 2, 3, 4, 8, 9, 2};

/* ---- the model: as fuzz_weights_h5.c ---------------------------------------------------- */
#define NT 9
static sn_tensor *t[NT];
static sn_weight_var vars[NT];
static sn_weight_layer layers[4];

static void setup(void) {
    static const int nd[NT] = {2, 1, 1, 1, 1, 1, 2, 2, 1};
    static const int64_t d[NT][2] = {{3, 2}, {2}, {2}, {2}, {2}, {2}, {2, 8}, {2, 8}, {8}};
    static const char *names[NT] = {"kernel", "bias", "gamma", "beta", "moving_mean",
                                    "moving_variance", "kernel", "recurrent_kernel", "bias"};
    for (int i = 0; i < NT; i++) {
        sn_shape s = {.ndim = nd[i], .dim = {d[i][0], d[i][1]}};
        if (sn_tensor_new(&t[i], SN_F32, &s) != SN_OK) abort();
        vars[i] = (sn_weight_var){names[i], t[i]};
    }
    layers[0] = (sn_weight_layer){"Dense", "dense", 2, &vars[0]};
    layers[1] = (sn_weight_layer){"BatchNormalization", "batch_normalization", 4, &vars[2]};
    layers[2] = (sn_weight_layer){"Dropout", "dropout", 0, NULL};
    layers[3] = (sn_weight_layer){"LSTM", "lstm", 3, &vars[6]};
}

/* ---- the generator ---------------------------------------------------------------------- */
static hid_t lcpl; /* creates intermediate groups */
static char groups[32][256];
static int ngroups;

static void note_group(const char *path) {
    if (ngroups < 32) snprintf(groups[ngroups++], sizeof groups[0], "%s", path);
}

static hid_t make_type(rd *r) {
    hid_t ty;
    switch (next(r) % 7) {
    case 0: return H5Tcopy(H5T_IEEE_F32LE);
    case 1: return H5Tcopy(H5T_IEEE_F64LE);
    case 2: /* IEEE half: what Keras writes for float16 weights */
        ty = H5Tcopy(H5T_IEEE_F32LE);
        H5Tset_fields(ty, 15, 10, 5, 0, 10);
        H5Tset_size(ty, 2);
        H5Tset_ebias(ty, 15);
        return ty;
    case 3: return H5Tcopy(H5T_IEEE_F32BE);
    case 4: return H5Tcopy(H5T_STD_I32LE);
    case 5: return H5Tcopy(H5T_STD_U8LE);
    default:
        ty = H5Tcopy(H5T_C_S1);
        H5Tset_size(ty, H5T_VARIABLE);
        return ty;
    }
}

static void make_dataset(rd *r, hid_t file, const char *path) {
    int rank = (int)(next(r) % 5);
    hsize_t dims[4];
    for (int i = 0; i < rank; i++) dims[i] = DIMS[next(r) % 8];
    hid_t ty = make_type(r);
    hid_t sp = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t ds = H5Dcreate2(file, path, ty, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    if (ds >= 0 && H5Tget_class(ty) != H5T_STRING) {
        /* Values from the input, converted by HDF5 from doubles. */
        hssize_t np = H5Sget_simple_extent_npoints(sp);
        double *v = calloc((size_t)(np > 0 ? np : 1), sizeof *v);
        for (hssize_t i = 0; v && i < np; i++) v[i] = (double)(int8_t)next(r) / 4.0;
        if (v) H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
        free(v);
    }
    if (ds >= 0) H5Dclose(ds);
    H5Sclose(sp);
    H5Tclose(ty);
}

/* A string-list attribute: fixed or variable length, or (kind 3) an int attribute. */
static void make_str_attr(rd *r, hid_t obj, const char *name, int n, const char **v) {
    unsigned kind = next(r) % 4;
    hsize_t dim = (hsize_t)n;
    hid_t sp = n ? H5Screate_simple(1, &dim, NULL) : H5Screate(H5S_NULL);
    hid_t ty;
    if (kind == 3) {
        ty = H5Tcopy(H5T_STD_I32LE);
        int vals[16] = {0};
        hid_t a = H5Acreate2(obj, name, ty, sp, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0 && n) H5Awrite(a, H5T_NATIVE_INT, vals);
        if (a >= 0) H5Aclose(a);
    } else if (kind == 2) {
        ty = H5Tcopy(H5T_C_S1);
        H5Tset_size(ty, H5T_VARIABLE);
        hid_t a = H5Acreate2(obj, name, ty, sp, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0 && n) H5Awrite(a, ty, v);
        if (a >= 0) H5Aclose(a);
    } else {
        size_t len = 1 + next(r) % 40;
        ty = H5Tcopy(H5T_C_S1);
        H5Tset_size(ty, len);
        H5Tset_strpad(ty, kind ? H5T_STR_SPACEPAD : H5T_STR_NULLPAD);
        char *buf = calloc((size_t)(n ? n : 1), len);
        for (int i = 0; i < n; i++) strncpy(buf + (size_t)i * len, v[i], len);
        hid_t a = H5Acreate2(obj, name, ty, sp, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0 && n) H5Awrite(a, ty, buf);
        if (a >= 0) H5Aclose(a);
        free(buf);
    }
    H5Tclose(ty);
    H5Sclose(sp);
}

static void build_keras3(rd *r, hid_t file) {
    const char *root = next(r) & 1 ? "_layer_checkpoint_dependencies" : "layers";
    hid_t g = H5Gcreate2(file, "vars", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g >= 0) H5Gclose(g);
    int nl = (int)(next(r) % 6);
    for (int i = 0; i < nl; i++) {
        char lpath[300], vpath[300];
        snprintf(lpath, sizeof lpath, "/%s/%s", root, NAMES[next(r) % 8]);
        snprintf(vpath, sizeof vpath, "%s%s/vars", lpath, next(r) & 1 ? "/cell" : "");
        g = H5Gcreate2(file, vpath, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        if (g >= 0) H5Gclose(g);
        note_group(lpath);
        note_group(vpath);
        int nv = (int)(next(r) % 6);
        for (int j = 0; j < nv; j++) {
            char dpath[340];
            unsigned k = next(r);
            if (k & 0x80) snprintf(dpath, sizeof dpath, "%s/%s", vpath, NAMES[k % 16]);
            else snprintf(dpath, sizeof dpath, "%s/%d", vpath, (int)(k % 5));
            make_dataset(r, file, dpath);
        }
    }
}

static void build_keras2(rd *r, hid_t file, int in_model_weights) {
    const char *base = in_model_weights ? "/model_weights" : "";
    hid_t bg = in_model_weights ? H5Gcreate2(file, "model_weights", H5P_DEFAULT, H5P_DEFAULT,
                                              H5P_DEFAULT)
                                : H5Gopen2(file, "/", H5P_DEFAULT);
    if (bg < 0) return;
    int nl = (int)(next(r) % 6);
    const char *lnames[8];
    for (int i = 0; i < nl; i++) {
        lnames[i] = NAMES[next(r) % 16];
        char gpath[300];
        snprintf(gpath, sizeof gpath, "%s/%s", base, lnames[i]);
        if (next(r) % 8 == 0) continue; /* listed but missing */
        hid_t g = H5Gcreate2(file, gpath, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        if (g < 0) g = H5Gopen2(file, gpath, H5P_DEFAULT);
        if (g < 0) continue;
        note_group(gpath);
        int nw = (int)(next(r) % 6);
        const char *wn[8];
        for (int j = 0; j < nw; j++) {
            wn[j] = NAMES[next(r) % 16];
            char dpath[340];
            snprintf(dpath, sizeof dpath, "%s/%s", gpath, wn[j]);
            if (next(r) % 8) make_dataset(r, file, dpath);
        }
        make_str_attr(r, g, "weight_names", nw, wn);
        H5Gclose(g);
    }
    if (next(r) % 4 == 0 && nl >= 2) { /* split as Keras does past 64 KB */
        make_str_attr(r, bg, "layer_names0", nl / 2, lnames);
        make_str_attr(r, bg, "layer_names1", nl - nl / 2, lnames + nl / 2);
    } else {
        make_str_attr(r, bg, "layer_names", nl, lnames);
    }
    H5Gclose(bg);
}

/* Hard-link cycles, dangling soft links, deep chains, stray attributes. */
static void extras(rd *r, hid_t file) {
    for (int k = 0; k < 12 && r->n && ngroups; k++) {
        const char *g = groups[next(r) % ngroups];
        char path[400];
        switch (next(r) % 4) {
        case 0: { /* a link back to an ancestor (or itself): a cycle */
            const char *to = groups[next(r) % ngroups];
            snprintf(path, sizeof path, "%s/loop%d", g, k);
            H5Lcreate_hard(file, to, file, path, H5P_DEFAULT, H5P_DEFAULT);
            break;
        }
        case 1:
            snprintf(path, sizeof path, "%s/dangling%d", g, k);
            H5Lcreate_soft("/no/such/object", file, path, H5P_DEFAULT, H5P_DEFAULT);
            break;
        case 2: { /* a chain of groups up to 40 deep, a dataset at the end */
            int depth = (int)(next(r) % 40);
            size_t n = (size_t)snprintf(path, sizeof path, "%s", g);
            for (int d = 0; d < depth && n + 3 < sizeof path; d++) n += (size_t)snprintf(path + n, sizeof path - n, "/d");
            if (n + 4 < sizeof path) {
                snprintf(path + n, sizeof path - n, "/0");
                make_dataset(r, file, path);
            }
            break;
        }
        default: {
            hid_t o = H5Oopen(file, g, H5P_DEFAULT);
            if (o >= 0) {
                const char *v[2] = {"dense", "lstm"};
                make_str_attr(r, o, next(r) & 1 ? "weight_names" : "layer_names", 2, v);
                H5Oclose(o);
            }
        }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!t[0]) {
        setup();
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        lcpl = H5Pcreate(H5P_LINK_CREATE);
        H5Pset_create_intermediate_group(lcpl, 1);
    }
    rd r = {data, size};
    const char *path = fuzz_file(NULL, 0);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) abort();
    ngroups = 0;
    unsigned layout = next(&r) % 3;
    if (layout == 0) build_keras3(&r, file);
    else build_keras2(&r, file, layout == 2);
    extras(&r, file);
    if (H5Fclose(file) < 0) abort();

    for (int i = 0; i < NT; i++) memset(sn_tensor_data(t[i]), 0x7f, 4 * (size_t)sn_tensor_numel(t[i]));
    sn_weights_layout lay;
    (void)sn_weights_h5_layout(path, &lay);
    sn_status s = sn_weights_load_h5(path, 4, layers, NULL);
    if (getenv("SN_FUZZ_DEBUG")) /* what happened to each input, when replaying a corpus */
        fprintf(stderr, "load: %s %s\n", sn_status_name(s), s != SN_OK ? sn_last_error() : "");
    if (s != SN_OK)
        for (int i = 0; i < NT; i++) {
            const uint8_t *p = sn_tensor_cdata(t[i]);
            for (int64_t k = 0; k < 4 * sn_tensor_numel(t[i]); k++)
                if (p[k] != 0x7f) abort();
        }
    /* Every object the generator or the loader opened is closed again. */
    if (H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) != 0) abort();
    return 0;
}
