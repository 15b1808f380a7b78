/* Weight files against hostile structure and handle leaks:
 *  1. HDF5 handles: 1,000 weight files saved and loaded (through the io layer and through a
 *     model), good ones and failing ones, leave HDF5's count of open objects (files, groups,
 *     datasets, attributes, types) at zero — a leaked handle on any path, error paths
 *     included, fails here long before a user runs out of file descriptors.
 *  2. A layer group whose hard links form a cycle (a group linking to itself, many times)
 *     is refused in bounded time with a message naming it; before the walk had an object
 *     budget this hung (fuzz_weights_h5_struct's finding: k self-links, depth 8, k^8 visits).
 *  3. A dataset 40 groups deep below a layer is not followed past the depth limit: the layer
 *     reads as empty, and the count mismatch is reported. */
#if __has_include(<hdf5.h>)
#include <hdf5.h>
#else
#include <hdf5/serial/hdf5.h>
#endif
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"
#include "sinter/io.h"
#include "sinter/nn.h"
#include "sn_test.h"
#include "tmp_test_util.h"

/* Dense [3, 2] + [2] */
static sn_tensor *t[2];
static sn_weight_var vars[2];
static sn_weight_layer dense;

static void setup(void) {
    sn_shape k = {.ndim = 2, .dim = {3, 2}}, b = {.ndim = 1, .dim = {2}};
    CHECK_OK(sn_tensor_new(&t[0], SN_F32, &k));
    CHECK_OK(sn_tensor_new(&t[1], SN_F32, &b));
    if (!t[0] || !t[1]) exit(1);
    vars[0] = (sn_weight_var){"kernel", t[0]};
    vars[1] = (sn_weight_var){"bias", t[1]};
    dense = (sn_weight_layer){"Dense", "dense", 2, vars};
}

static ssize_t open_objects(void) { return H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL); }

/* ---- 1. no handle outlives a call -------------------------------------------------------- */
static void test_handles(void) {
    const char *good = test_tmp("good.weights.h5"), *k2 = test_tmp("good_k2.h5");
    sn_weights_h5_options o2 = sn_weights_h5_defaults();
    o2.layout = SN_WEIGHTS_KERAS2;
    /* A file with the wrong shape and one that is not HDF5: the error paths. */
    sn_shape ws = {.ndim = 2, .dim = {4, 2}};
    sn_tensor *wrong = NULL;
    CHECK_OK(sn_tensor_new(&wrong, SN_F32, &ws));
    sn_weight_var wv[2] = {{"kernel", wrong}, {"bias", t[1]}};
    sn_weight_layer wl = {"Dense", "dense", 2, wv};
    const char *bad_shape = test_tmp("bad_shape.weights.h5"), *not_h5 = test_tmp("text.h5");
    const char *missing = test_tmp("missing.h5"); /* tmp_path has 8 slots: no calls in the loop */
    CHECK_OK(sn_weights_save_h5(bad_shape, 1, &wl, NULL));
    FILE *f = fopen(not_h5, "w");
    if (f) {
        fputs("not an HDF5 file\n", f);
        fclose(f);
    }
    int fails = 0;
    for (int i = 0; i < 1000; i++) {
        ((float *)sn_tensor_data(t[0]))[0] = (float)i;
        sn_status s1 = sn_weights_save_h5(i % 2 ? k2 : good, 1, &dense, i % 2 ? &o2 : NULL);
        sn_status s2 = s1 == SN_OK ? sn_weights_load_h5(i % 2 ? k2 : good, 1, &dense, NULL) : s1;
        if (s2 != SN_OK && fails++ == 0) printf("file %d: %s\n", i, sn_last_error());
        if (i % 10 == 0) { /* the error paths: a shape mismatch, not HDF5, no such file */
            sn_status want[3] = {SN_ERR_SHAPE, SN_ERR_FORMAT, SN_ERR_IO};
            const char *p[3] = {bad_shape, not_h5, missing};
            for (int k = 0; k < 3; k++)
                if (sn_weights_load_h5(p[k], 1, &dense, NULL) != want[k] && fails++ == 0)
                    printf("file %d, error path %d: %s\n", i, k, sn_last_error());
        }
        if (open_objects() != 0) {
            CHECK(0, "after file %d HDF5 still holds %zd open objects", i, open_objects());
            break;
        }
    }
    CHECK(fails == 0, "%d of the 1,000 saves/loads gave an unexpected status: %s", fails,
          sn_last_error());
    CHECK(((float *)sn_tensor_data(t[0]))[0] == 999.0f, "the last load read the last save");

    /* Through a model (nn's save/load over the io layer): 100 more. */
    sn_model *m = sn_sequential_new("handles");
    CHECK_OK(sn_model_add(m, sn_layer_flatten()));
    CHECK_OK(sn_model_add(m, sn_layer_dense(4, SN_ACT_RELU)));
    CHECK_OK(sn_model_add(m, sn_layer_dense(2, SN_ACT_NONE)));
    CHECK_OK(sn_model_build(m, &(sn_shape){.ndim = 1, .dim = {3}}, 1));
    const char *mp = test_tmp("model.weights.h5");
    for (int i = 0; i < 100; i++) {
        CHECK_OK(sn_model_save_weights(m, mp));
        CHECK_OK(sn_model_load_weights(m, mp));
        if (sn_model_load_weights(m, bad_shape) == SN_OK) CHECK(0, "bad file loaded");
    }
    CHECK(open_objects() == 0, "after 100 model saves/loads: %zd open HDF5 objects",
          open_objects());
    sn_model_free(m);
    sn_tensor_free(wrong);
}

/* ---- 2 and 3. cycles and depth ----------------------------------------------------------- */

/* /layers/dense/vars with the right datasets, plus what `extra` adds; returns the path. */
static const char *keras3_file(const char *name, void (*extra)(hid_t file)) {
    const char *p = test_tmp(name);
    CHECK_OK(sn_weights_save_h5(p, 1, &dense, NULL));
    hid_t file = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(file >= 0, "reopen %s", p);
    if (file >= 0) {
        extra(file);
        H5Fclose(file);
    }
    return p;
}

static void add_cycle(hid_t file) {
    /* /layers/empty with 16 links to itself and no dataset anywhere below. */
    hid_t g = H5Gcreate2(file, "/layers/empty", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(g >= 0, "create /layers/empty");
    for (int i = 0; i < 16; i++) {
        char n[32];
        snprintf(n, sizeof n, "/layers/empty/self%d", i);
        CHECK(H5Lcreate_hard(file, "/layers/empty", file, n, H5P_DEFAULT, H5P_DEFAULT) >= 0,
              "hard link %s", n);
    }
    if (g >= 0) H5Gclose(g);
}

static void add_deep(hid_t file) {
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    char path[512] = "/layers/deep";
    for (int i = 0; i < 40; i++) strcat(path, "/d");
    strcat(path, "/0");
    hsize_t one = 1;
    hid_t sp = H5Screate_simple(1, &one, NULL);
    hid_t ds = H5Dcreate2(file, path, H5T_IEEE_F32LE, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(ds >= 0, "create the deep dataset");
    if (ds >= 0) H5Dclose(ds);
    H5Sclose(sp);
    H5Pclose(lcpl);
}

static void test_structure(void) {
    const char *cyc = keras3_file("cycle.weights.h5", add_cycle);
    double t0 = sn_now();
    CHECK_ERR(sn_weights_load_h5(cyc, 1, &dense, NULL), SN_ERR_FORMAT,
              "layer group 'empty' holds more than 4096 objects (or its links form a cycle)");
    /* Bounded: 4,096 opens take milliseconds; the unbounded walk took longer than any
     * timeout. The limit here is generous so a busy machine cannot fail it. */
    CHECK(sn_now() - t0 < 120, "the cyclic file took %.1f s", sn_now() - t0);
    const char *deep = keras3_file("deep.weights.h5", add_deep);
    /* 'deep' holds a dataset only past the depth limit: it counts as a layer without
     * weights, so the file has exactly the model's one layer and loads. */
    CHECK_OK(sn_weights_load_h5(deep, 1, &dense, NULL));
    CHECK(open_objects() == 0, "open HDF5 objects after the hostile files: %zd", open_objects());
}

int main(void) {
    if (!test_tmpdir_make("sn_test_h5limits")) return 1;
    setup();
    test_handles();
    test_structure();
    sn_tensor_free(t[0]);
    sn_tensor_free(t[1]);
    test_tmpdir_remove();
    return sn_test_finish("test_weights_h5_limits");
}
