/* Fashion-MNIST subsets for training tests. Include after sn_test.h (uses CHECK_OK). */
#ifndef SN_FMNIST_TEST_UTIL_H
#define SN_FMNIST_TEST_UTIL_H

#include "sinter/data.h"

#define FMNIST "/usr/share/datasets/fashion-mnist"

/* The first n examples of (x u8 [N, 28, 28], y u8 [N]) as batched (f32 [B, 28, 28(, 1)] in
 * [0, 1], i32 [B]); shuffled with `seed` when seed != 0; the last partial batch kept. */
static inline sn_dataset *fmnist_ds(sn_tensor *x, sn_tensor *y, int64_t n, int64_t batch,
                                    uint64_t seed, bool add_channel) {
    sn_tensor *v[2] = {NULL, NULL};
    sn_shape xs = sn_shape_make(3, n, (int64_t)28, (int64_t)28), ys = sn_shape_make(1, n);
    CHECK_OK(sn_tensor_view(&v[0], x, &xs, NULL, 0));
    CHECK_OK(sn_tensor_view(&v[1], y, &ys, NULL, 0));
    sn_dataset *ds = NULL;
    CHECK_OK(sn_dataset_from_tensors(&ds, 2, v));
    sn_tensor_free(v[0]);
    sn_tensor_free(v[1]);
    CHECK_OK(sn_dataset_map_normalize(&ds, 0, add_channel));
    CHECK_OK(sn_dataset_map_cast(&ds, 1, SN_I32));
    if (seed) CHECK_OK(sn_dataset_shuffle(&ds, n, seed, true));
    CHECK_OK(sn_dataset_batch(&ds, batch, false));
    return ds;
}

#endif
