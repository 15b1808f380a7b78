/* Internal to src/data: the dataset object every transform extends, and tensor helpers.
 *
 * src/data depends on core only (tensors, status, RNG) and on zlib, jansson, libzip and
 * pthreads; nothing in the graph. Files: idx.c (IDX, MNIST folders), dataset.c (the iteration
 * API, sources, maps, take/skip/shard/repeat), dataset_buffer.c (shuffle, batch, cache,
 * prefetch), tfrecord.c (CRC-32C, record framing), tf_example.c (tf.train.Example),
 * tfrecord_dataset.c (the TFRecord image dataset), vocab.c (strict UTF-8, character vocabularies and their JSON), text.c (the text dataset of
 * character models). */
#ifndef SN_DATA_IMPL_H
#define SN_DATA_IMPL_H

#include "core/core.h"
#include "sinter/data.h"

typedef struct sn_dataset_ops {
    const char *name;
    /* Fill out[0 .. n-1] or set *end. Only called while the dataset has not ended. */
    sn_status (*next)(sn_dataset *ds, sn_tensor **out, bool *end);
    /* Start over; NULL means "reset the source". Called after ds->epoch was incremented. */
    sn_status (*reset)(sn_dataset *ds);
    int64_t (*cardinality)(const sn_dataset *ds);
    /* Free the kind's own state (not ds itself, not ds->src). */
    void (*destroy)(sn_dataset *ds);
    /* In-memory sources only (NULL elsewhere): element i (0 <= i < cardinality) without
     * touching the iteration position, as views valid until the next call of `next` or `at`.
     * Lets shuffle permute indices instead of copying every element into its buffer. */
    sn_status (*at)(sn_dataset *ds, int64_t i, sn_tensor **out);
} sn_dataset_ops;

/* Every kind embeds this first and is allocated by sn_dataset_alloc. */
struct sn_dataset {
    const sn_dataset_ops *ops;
    int n;           /* components per element */
    sn_dataset *src; /* owned; NULL for sources */
    uint64_t epoch;  /* times this dataset was reset */
    bool ended;
};

/* A zeroed dataset of `size` bytes (>= sizeof(sn_dataset)) with these fields set. */
sn_dataset *sn_dataset_alloc(size_t size, const sn_dataset_ops *ops, sn_dataset *src, int n);
/* Replace *ds by the new dataset `nd` (which took *ds as its source). */
static inline sn_status sn_dataset_install(sn_dataset **ds, sn_dataset *nd) {
    *ds = nd;
    return SN_OK;
}
/* Checks the `sn_dataset **ds` argument of a transform; `what` names it for the message. */
sn_status sn_dataset_check_arg(sn_dataset **ds, const char *what);

/* A tensor header pointing at memory it does not own, filled in place (no allocation). Such
 * headers live inside dataset structs and are never passed to sn_tensor_free. */
void sn_data_set_view(sn_tensor *v, sn_dtype dtype, const sn_shape *shape, void *data);
/* Bytes of a tensor's elements (numel * dtype size). */
size_t sn_data_nbytes(const sn_tensor *t);
/* Copies src (any strides) into the contiguous buffer dst of sn_data_nbytes(src) bytes. */
void sn_data_copy_to(void *dst, const sn_tensor *src);
/* Makes *slot a contiguous copy of src, reusing *slot when dtype and shape already match. */
sn_status sn_data_copy_into(sn_tensor **slot, const sn_tensor *src);

/* Records sn_tfrecord_read has returned from r so far (the dataset names a bad one by its
 * index in the file). */
int64_t sn_tfrecord_records_read(const sn_tfrecord_reader *r);

/* Little-endian 32-bit loads and stores (TFRecord framing, Example's packed fixed32). */
static inline uint32_t sn_load_le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void sn_store_le32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

#endif
