/* sinter — Keras-compatible weight files (HDF5).
 *
 * The io layer does not know the model: it works on a neutral description of a model's
 * weights (a list of layers, each a list of named f32 tensors), which the Sequential model
 * produces. Two layouts are understood (see docs/weights.md for the exact file structure):
 *
 *   - Keras 3 `.weights.h5` (model.save_weights / model.load_weights in Keras 3):
 *       /vars                                     (group, attribute name = model name)
 *       /layers/<snake_case(class)>[_k]/vars/<i>  (one f32 dataset per variable)
 *     Layers are addressed by class, not by name: the k-th repeat (k >= 1) of a class in
 *     model order gets the suffix "_k" ("dense", "dense_1", ...). Recurrent layers (LSTM,
 *     GRU, SimpleRNN) keep their variables one level deeper, in .../<layer>/cell/vars.
 *   - legacy Keras 2 `.h5` (tf.keras save_weights to .h5, or model.save to .h5 whose weights
 *     sit under /model_weights): root attributes layer_names, backend, keras_version; one
 *     group per layer name with attribute weight_names; datasets at <layer>/<weight name>.
 *     Layers are matched by order among the layers that have weights, as Keras does.
 *
 * Loading never half-modifies the model: every variable is read and checked into temporary
 * memory first, and the tensors are written only when the whole file matched.
 *
 * HDF5 is not thread-safe in Debian's serial build; sinter serialises its own HDF5 use
 * behind one lock, so these functions may be called from any thread. */
#ifndef SINTER_IO_H
#define SINTER_IO_H

#include <stddef.h>

#include "sinter/status.h"
#include "sinter/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One variable of a layer: Keras's variable name ("kernel", "bias", "gamma", "beta",
 * "moving_mean", "moving_variance", "recurrent_kernel", "embeddings") and its value, an f32
 * tensor (any strides). The name is used in messages and in legacy weight names. */
typedef struct sn_weight_var {
    const char *name;
    sn_tensor *value;
} sn_weight_var;

/* One layer. `vars` lists the variables in Keras order: trainable first (kernel, bias),
 * then non-trainable (BatchNormalization: gamma, beta, moving_mean, moving_variance).
 * Layers without weights (Flatten, Dropout, MaxPooling2D) may be listed with n_vars = 0:
 * saving then writes the empty groups Keras writes for them; loading skips them. Listing
 * them is optional, as the class-based numbering counts each class separately. */
typedef struct sn_weight_layer {
    const char *class_name; /* Keras class: "Dense", "Conv2D", "BatchNormalization", ... */
    const char *name;       /* layer name: "dense", "dense_1" */
    int n_vars;
    const sn_weight_var *vars;
} sn_weight_layer;

typedef enum sn_weights_layout {
    SN_WEIGHTS_AUTO = 0, /* save: Keras 3; load: detect from the file's contents */
    SN_WEIGHTS_KERAS3,   /* Keras 3 `.weights.h5` */
    SN_WEIGHTS_KERAS2,   /* legacy Keras 2 `.h5` */
} sn_weights_layout;

typedef struct sn_weights_h5_options {
    sn_weights_layout layout;  /* see above */
    const char *model_name;    /* Keras 3: "name" attribute of /vars; default "sequential" */
    const char *keras_version; /* Keras 2 save: root keras_version; default "2.15.0" */
    const char *backend;       /* Keras 2 save: root backend; default "tensorflow" */
    /* Keras 3: NULL, or one entry per layer: the layer's group under /layers when it is not
     * its class's name numbered in order, as for a nested model's layer
     * ("functional/layers/dense"); entries with a path are not counted in the numbering. */
    const char *const *paths;
} sn_weights_h5_options;

sn_weights_h5_options sn_weights_h5_defaults(void);

/* Writes the weights of `layers` to `path` (opt NULL = defaults). The file is written under
 * a temporary name beside `path` and renamed over it at the end, so a failed save leaves an
 * existing file untouched. Tensors must be SN_F32; they are stored as little-endian f32 with
 * exactly the tensor's shape (Keras layouts: Dense [in, out], Conv2D [kh, kw, in, out],
 * which are sinter's layouts too, so nothing is transposed). */
sn_status sn_weights_save_h5(const char *path, int n_layers, const sn_weight_layer *layers,
                             const sn_weights_h5_options *opt);

/* Reads `path` into the tensors of `layers` in place (opt NULL = defaults: detect the
 * layout). Every layer with weights must be found in the file with the same number of
 * variables and the same shapes; on any mismatch nothing is written and the message names
 * the layer, the variable and both shapes or counts. Floating-point datasets of any width
 * are converted to f32 by HDF5; other dtypes are rejected. */
sn_status sn_weights_load_h5(const char *path, int n_layers, const sn_weight_layer *layers,
                             const sn_weights_h5_options *opt);

/* The same two, on an HDF5 file image in memory (the model.weights.h5 member of a .keras
 * archive): no temporary file. `shown` names the image in messages. The saved image is
 * malloc'd; the caller frees *image. */
sn_status sn_weights_load_h5_image(const void *image, size_t size, const char *shown,
                                   int n_layers, const sn_weight_layer *layers,
                                   const sn_weights_h5_options *opt);
sn_status sn_weights_save_h5_image(int n_layers, const sn_weight_layer *layers,
                                   const sn_weights_h5_options *opt, void **image, size_t *size);

/* Tells which layout a weights file has (SN_WEIGHTS_KERAS3 or SN_WEIGHTS_KERAS2). */
sn_status sn_weights_h5_layout(const char *path, sn_weights_layout *out);

/* Keras's naming rule for a class (keras.src.utils.naming.to_snake_case):
 * "Conv2D" -> "conv2d", "BatchNormalization" -> "batch_normalization", "SimpleRNN" ->
 * "simple_rnn". Keras uses it both for default layer names and for Keras 3 file paths.
 * Writes into buf (always NUL-terminated); returns buf, or NULL when cap is too small. */
char *sn_keras_snake_case(const char *class_name, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
