/* Internal to src/nn/: Keras's initializers (keras/src/initializers/) filling a variable's
 * storage, shared by the layers of layers.c and the sequence layers. */
#ifndef SN_NN_INITIALIZERS_H
#define SN_NN_INITIALIZERS_H

#include "core/core.h"
#include "sinter/nn.h"

/* Fills `data` (shape, dtype SN_F32 or SN_F64, row-major) as `init` says; SN_INIT_DEFAULT (or
 * init NULL) means `default_type` with Keras's default arguments for it. fan_in/fan_out are
 * those of the variance-scaling initializers; pass 0 to have them computed from the shape as
 * Keras's compute_fans does (rank 1: both the size; rank 2: [in, out]; higher: receptive
 * field * channels, e.g. a Conv2D kernel [kh, kw, cin, cout] has fan_in kh*kw*cin). Random
 * values come from `rng` in row-major order, or, when init->has_seed, from a stream seeded by
 * init->seed. `what` names the variable in errors ("layer 'lstm' recurrent_kernel"). Errors:
 * an invalid type or argument (negative stddev, orthogonal of rank < 2). */
sn_status sn_init_fill(const sn_initializer *init, sn_initializer_type default_type,
                       void *data, sn_dtype dtype, const sn_shape *shape, int64_t fan_in,
                       int64_t fan_out, sn_rng *rng, const char *what);

/* Keras's compute_fans for a kernel shape. */
void sn_init_fans(const sn_shape *shape, int64_t *fan_in, int64_t *fan_out);

#endif
