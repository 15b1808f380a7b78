/* Internal to src/nn/: what every layer file (layers.c, layers_shape.c, the sequence layers)
 * shares: allocation, argument checks, variables with their initializer, and the error that
 * names a layer and the input shape it did not expect. */
#ifndef SN_NN_LAYERS_IMPL_H
#define SN_NN_LAYERS_IMPL_H

#include "nn/nn_impl.h"

/* A zeroed layer of class vt (dtype f32); NULL (error set) when out of memory. */
sn_layer *sn_layer_alloc(const sn_layer_vtable *vt);
/* Records SN_ERR_INVALID from fmt (with one %s for `what` and one %g for v) and returns NULL:
 * the constructors' one-line refusal. */
sn_layer *sn_layer_bad_arg(const char *fmt, const char *what, double v);
/* "layer 'dense' (Dense): got input of shape (None, 3, 4), expected ..." */
sn_status sn_layer_shape_error(const sn_layer *l, const sn_shape *in, const char *expected);
/* "(None, 28, 28, 1)": a shape without its batch, as Keras shows it. */
const char *sn_layer_kshape(const sn_shape *s, char *buf, size_t cap);

/* Constructor checks of an option: the initializer's type and arguments, the regularizer's
 * factors (finite, >= 0). SN_ERR_INVALID naming the class and the field. */
sn_status sn_check_initializer(const char *cls, const char *field, const sn_initializer *in);
sn_status sn_check_regularizer(const char *cls, const char *field, const sn_regularizer *r);
/* The four checks of a kernel-and-bias layer's options (kernel_initializer, bias_initializer,
 * kernel_regularizer, bias_regularizer, in that order); the first failure's status. */
sn_status sn_check_kernel_bias(const char *cls, const sn_initializer *kernel_init,
                               const sn_initializer *bias_init,
                               const sn_regularizer *kernel_reg,
                               const sn_regularizer *bias_reg);

/* Creates variable "<layer>/<var>" (slot l->n_vars) of l->dtype and fills it with `init`
 * (SN_INIT_DEFAULT: default_type), fans from the shape as Keras computes them. The data
 * pointer of a variable is only valid until the next sn_variable call, so the filling happens
 * here, at once. *out (optional) receives the node. */
sn_status sn_layer_add_var(sn_layer *l, sn_graph *g, const char *var, const sn_shape *shape,
                           bool trainable, const sn_initializer *init,
                           sn_initializer_type default_type, sn_rng *rng, sn_node *out);

/* The normalisation layers' optional gamma (scale, ones) then beta (center, zeros) over
 * `features`, in Keras's variable order, each with its regularizer (BatchNormalization and
 * LayerNormalization share this). */
sn_status sn_layer_add_scale_center(sn_layer *l, sn_graph *g, int64_t features, bool scale,
                                    bool center, const sn_initializer *gamma_init,
                                    const sn_initializer *beta_init,
                                    const sn_regularizer *gamma_reg,
                                    const sn_regularizer *beta_reg, sn_rng *rng);
/* A "kernel" of shape ks (glorot_uniform by default) then, with use_bias, a "bias" [units]
 * (zeros by default), each with its regularizer, in Keras's variable order (Dense, Conv1D,
 * Conv2D and Conv2DTranspose share this). */
sn_status sn_layer_add_kernel_bias(sn_layer *l, sn_graph *g, const sn_shape *ks, int64_t units,
                                   bool use_bias, const sn_initializer *kernel_init,
                                   const sn_initializer *bias_init,
                                   const sn_regularizer *kernel_reg,
                                   const sn_regularizer *bias_reg, sn_rng *rng);

#endif
