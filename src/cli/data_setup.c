/* Shared by train, evaluate and predict: finding the data, the input pipeline and the model. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "core/core.h" /* sn_errorf */

const char *const sn_cli_datasets[] = {"fashion_mnist", NULL};
const char *const sn_cli_models[] = {"tpu_guide_cnn", "small_cnn", "mlp", NULL};

/* Where Debian's dataset-fashion-mnist package puts the IDX files. */
#define SN_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

static bool has_idx(const char *dir, const char *base) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, base);
    if (access(path, R_OK) == 0) return true;
    snprintf(path, sizeof path, "%s/%s.gz", dir, base);
    return access(path, R_OK) == 0;
}

int sn_cli_load_split(const char *prog, const char *dataset, const char *data_dir,
                      const char *split, sn_tensor **x, sn_tensor **y) {
    const char *dir = data_dir;
    if (!dir) {
        /* Only fashion_mnist is known by name; --dataset's enum has already checked it. */
        (void)dataset;
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

sn_status sn_cli_pipeline(sn_tensor *x, sn_tensor *y, int64_t take, int64_t batch, bool shuffle,
                          uint64_t seed, bool drop_remainder, sn_dataset **out) {
    sn_dataset *ds = NULL;
    sn_tensor *xy[2] = {x, y};
    sn_status s = sn_dataset_from_tensors(&ds, 2, xy);
    if (s != SN_OK) return s;
    if (take >= 0 && s == SN_OK) s = sn_dataset_take(&ds, take);
    /* Shuffle the u8 images before normalising: the shuffle buffer then holds 784 bytes per
     * image instead of 3,136 (47 MB rather than 188 MB for the whole training split). */
    if (shuffle && s == SN_OK) s = sn_dataset_shuffle(&ds, sn_tensor_shape(x)->dim[0], seed, true);
    if (s == SN_OK) s = sn_dataset_map_normalize(&ds, 0, true);
    if (s == SN_OK) s = sn_dataset_map_cast(&ds, 1, SN_I32);
    if (s == SN_OK) s = sn_dataset_batch(&ds, batch, drop_remainder);
    if (s == SN_OK) s = sn_dataset_prefetch(&ds, 2);
    if (s != SN_OK) {
        sn_dataset_free(ds);
        return s;
    }
    *out = ds;
    return SN_OK;
}

bool sn_cli_model_is_preset(const char *name) {
    for (int i = 0; sn_cli_models[i]; i++)
        if (!strcmp(name, sn_cli_models[i])) return true;
    return false;
}

sn_status sn_cli_open_model(const char *name, const sn_tensor *images, uint64_t seed,
                            sn_model **out, sn_model_file_info *info) {
    sn_shape in = {.ndim = 3, .dim = {28, 28, 1}};
    if (images) {
        const sn_shape *s = sn_tensor_shape(images);
        in.dim[0] = s->dim[1];
        in.dim[1] = s->dim[2];
    }
    sn_model *m = NULL;
    sn_status s;
    if (info) *info = (sn_model_file_info){.compile = sn_compile_defaults()};
    if (sn_cli_model_is_preset(name)) {
        s = sn_model_preset(name, &m);
        if (s == SN_OK) s = sn_model_build(m, &in, seed);
    } else if (access(name, F_OK) != 0) {
        return sn_errorf(SN_ERR_NOT_FOUND, "--model '%s' is neither a preset (tpu_guide_cnn, "
                         "small_cnn, mlp) nor an existing model file (.keras or .json)", name);
    } else {
        sn_model_file_info local;
        if (!info) info = &local;
        s = sn_model_load(name, seed, &m, info);
        /* The model brings its own input shape: it must be the images' (rows, cols, 1). */
        const sn_shape want = info->input_shape;
        if (s == SN_OK && images &&
            (want.ndim != 3 || want.dim[0] != in.dim[0] || want.dim[1] != in.dim[1] ||
             want.dim[2] != 1)) {
            char a[96], b[96];
            s = sn_errorf(SN_ERR_SHAPE, "model '%s' takes inputs of shape %s, but the data are "
                          "images of %s", name, sn_shape_str(&want, a, sizeof a),
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

sn_status sn_cli_build_model(const char *preset, const sn_tensor *images, uint64_t seed,
                             sn_model **out) {
    return sn_cli_open_model(preset, images, seed, out, NULL);
}

sn_status sn_cli_load_model(const char *preset, const sn_tensor *images, const char *weights,
                            sn_model **out) {
    sn_model *m = NULL;
    sn_model_file_info info;
    sn_status s = sn_cli_open_model(preset, images, 0, &m, &info);
    if (s != SN_OK) return s;
    if (!weights && !info.has_weights) {
        sn_model_free(m);
        return sn_errorf(SN_ERR_INVALID, "--weights is required for '%s' (only a .keras model "
                         "file carries its weights)", preset);
    }
    /* The file's compile settings (or, without them, the defaults with from_logits chosen by
     * the model's last activation) tell predict whether the output is logits. */
    s = sn_model_compile(m, &info.compile);
    if (s == SN_OK && weights) s = sn_model_load_weights(m, weights);
    if (s != SN_OK) {
        sn_model_free(m);
        return s;
    }
    *out = m;
    return SN_OK;
}
