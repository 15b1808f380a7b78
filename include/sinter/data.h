/* sinter — the input pipeline: IDX and TFRecord sources, and datasets (tf.data in C).
 *
 * A dataset is a stream of elements; an element is a fixed number of components (image,
 * label, ...), each a tensor. Transforms wrap a dataset in a new one that owns it:
 *
 *     sn_tensor *x, *y;                      // u8 [60000, 28, 28] and u8 [60000]
 *     SN_TRY(sn_mnist_load(dir, "train", &x, &y));
 *     sn_dataset *ds;
 *     sn_tensor *xy[2] = {x, y};
 *     SN_TRY(sn_dataset_from_tensors(&ds, 2, xy));   // copies x and y
 *     sn_tensor_free(x); sn_tensor_free(y);
 *     sn_dataset_shuffle(&ds, 60000, seed, true);   // (check every status in real code)
 *     sn_dataset_batch(&ds, 128, true);              // u8 [128, 28, 28], u8 [128]
 *     sn_dataset_map_normalize(&ds, 0, true);       // f32 [128, 28, 28, 1] in [0, 1]
 *     sn_dataset_map_cast(&ds, 1, SN_I32);          // i32 [128]
 *     sn_dataset_prefetch(&ds, 2);                   // a background thread
 *     sn_tensor *b[2]; bool end;
 *     while (sn_dataset_next(ds, b, &end) == SN_OK && !end) { ... train on b[0], b[1] ... }
 *     sn_dataset_reset(ds);                          // next epoch: a new shuffle order
 *     sn_dataset_free(ds);
 *
 * Ownership.
 *  - A transform takes `sn_dataset **ds`. On success *ds is replaced by the new dataset, which
 *    owns the old one (freeing the outermost frees the whole chain). On failure *ds is left
 *    as it was and is still the caller's to free.
 *  - Tensors returned by sn_dataset_next are owned by the dataset and stay valid until the next
 *    call of sn_dataset_next, sn_dataset_reset or sn_dataset_free on the same dataset. Never
 *    free them; copy what must outlive the step. They are always contiguous.
 *  - sn_dataset_from_tensors copies its tensors: the caller keeps (and frees) the originals.
 *  - A dataset is also its own iterator. Build the whole chain before iterating: a transform
 *    added later continues from wherever its source stands (sn_dataset_reset starts over).
 *
 * Determinism. The sequence of elements is a pure function of the sources, the transforms and
 * their arguments (seeds included), and of the epoch number: the number of times each dataset
 * has been reset. Shuffle draws its order from Philox keyed by (seed, epoch) when
 * reshuffle_each_iteration is true, (seed, 0) otherwise. prefetch never changes the sequence.
 *
 * Threads. A dataset is used from one thread at a time. prefetch runs its source on its own
 * background thread (so map callbacks below a prefetch run on that thread, one call at a
 * time). Errors met on that thread are returned, with their message, by the sn_dataset_next
 * call that would have returned the element. */
#ifndef SINTER_DATA_H
#define SINTER_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sinter/status.h"
#include "sinter/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- IDX files (MNIST, Fashion-MNIST) ------------------------------------------------------ */
/* Reads an IDX file, plain or gzip-compressed (detected from the content, not the name), into
 * a new tensor with the file's dims: u8 for type 0x08 (the MNIST case), i32 for 0x0C, f32 for
 * 0x0D, f64 for 0x0E. The caller frees *out. */
sn_status sn_idx_load(const char *path, sn_tensor **out);
/* Writes t (u8, i32, f32 or f64; 1 to 6 dims) as IDX; gzip-compressed when path ends in
 * ".gz". */
sn_status sn_idx_save(const char *path, const sn_tensor *t);
/* Loads a data set folder in the MNIST layout: split "train" reads train-images-idx3-ubyte
 * and train-labels-idx1-ubyte, split "test" (or "t10k") the t10k-* files, each with or
 * without ".gz". Images come out u8 [n, rows, cols], labels u8 [n]. The caller frees both. */
sn_status sn_mnist_load(const char *dir, const char *split, sn_tensor **images,
                        sn_tensor **labels);

/* ---- NumPy .npy / .npz --------------------------------------------------------------------- */
/* Reads a .npy file (format 1.0, 2.0 or 3.0; C order only) into a new tensor the caller frees.
 * dtypes: |b1 and |u1 -> u8 (bools as 0/1); <f2, <f4 -> f32; <f8 -> f64; |i1, <i2, <u2, <i4
 * -> i32; <u4, <i8, <u8 -> i32 when every value fits (else an error naming the element);
 * big-endian ('>') forms too. Anything else (strings, objects, complex, structured arrays,
 * fortran_order True, more than SN_MAX_DIMS dims, no elements, data shorter or longer than the
 * shape needs) is an error naming the file and the field. The header is checked before
 * anything is allocated. */
sn_status sn_npy_load(const char *path, sn_tensor **out);
/* The same from bytes in memory; `name` stands for the file in messages. */
sn_status sn_npy_load_memory(const void *data, size_t len, const char *name, sn_tensor **out);
/* Reads array `name` (zip member "<name>.npy", stored or deflated) of an .npz archive as
 * sn_npy_load does. SN_ERR_NOT_FOUND names the arrays the archive holds. */
sn_status sn_npz_load(const char *path, const char *name, sn_tensor **out);
/* Whether the archive holds array `name`. */
sn_status sn_npz_has(const char *path, const char *name, bool *has);

/* Scans examples x [n, ...] (f32, f64 or bf16; other dtypes hold no NaN/Inf: SN_OK) for NaN
 * and Inf. The first one found is SN_ERR_NUMERIC naming it, prefixed by `what`:
 * "train data (x.npy): example 1234, feature 56 (row 2, col 0, channel 0) is NaN (expected
 * finite numbers)" (feature: the flat index within the example; row/col/channel for examples
 * of rank 2 or 3). One pass over the data; sinter's --check-numerics calls it. */
sn_status sn_data_check_numerics(const sn_tensor *x, const char *what);

/* ---- datasets ------------------------------------------------------------------------------ */
typedef struct sn_dataset sn_dataset;

#define SN_DATASET_MAX_COMPONENTS 8
#define SN_CARDINALITY_INFINITE ((int64_t)-1)
#define SN_CARDINALITY_UNKNOWN ((int64_t)-2)

/* Slices each tensor along dim 0: element i is (tensors[0][i], ..., tensors[n-1][i]). All
 * tensors need the same dim 0 (at least 1). The tensors are copied (any strides are fine). */
sn_status sn_dataset_from_tensors(sn_dataset **out, int n_components,
                                  sn_tensor *const *tensors);

/* Built-in maps on one component (the others pass through unchanged):
 * normalize: u8 -> f32 scaled by 1/255 (so [0, 1]); with add_channel a trailing dimension of
 * 1 is appended ([28, 28] -> [28, 28, 1], NHWC with one channel). */
sn_status sn_dataset_map_normalize(sn_dataset **ds, int component, bool add_channel);
/* cast between u8, i32, f32, f64 (labels u8 -> i32 for the losses). A float that is not
 * finite or out of the target's range is an error, not a silent wrap. */
sn_status sn_dataset_map_cast(sn_dataset **ds, int component, sn_dtype to);

/* A user map. `in` holds the source element's n_in components (read-only, owned by the
 * source). `out` holds n_out slots that persist from call to call and are owned by the
 * dataset: on the first call they are NULL; fill each with sn_dataset_ensure_output (which
 * reuses the previous tensor when dtype and shape are unchanged, so the steady state does not
 * allocate) and write its data. Never put an input tensor into `out`. Return SN_OK or an
 * error made with the status API. */
typedef sn_status (*sn_map_fn)(void *user, sn_tensor *const *in, int n_in, sn_tensor **out,
                               int n_out);
sn_status sn_dataset_map(sn_dataset **ds, int n_out, sn_map_fn fn, void *user);
/* Makes *slot a contiguous tensor of this dtype and shape, reusing it when it already is one;
 * contents are unspecified when reused, zero when new. */
sn_status sn_dataset_ensure_output(sn_tensor **slot, sn_dtype dtype, const sn_shape *shape);

/* Shuffles with a buffer of buffer_size elements, as tf.data: buffer_size >= the dataset's
 * size gives a uniform permutation. With reshuffle_each_iteration the epoch number is mixed
 * into the seed, so each epoch has a new, reproducible order. Elements are copied into the
 * buffer (memory: buffer_size elements). */
sn_status sn_dataset_shuffle(sn_dataset **ds, int64_t buffer_size, uint64_t seed,
                             bool reshuffle_each_iteration);
/* count -1 repeats forever. Each repetition resets the source (a new epoch for it, so a
 * shuffle below reshuffles). An empty repetition ends the stream instead of spinning. */
sn_status sn_dataset_repeat(sn_dataset **ds, int64_t count);
/* Stacks batch_size consecutive elements into [batch_size, ...] tensors (preallocated and
 * reused). Without drop_remainder the last batch may be smaller. Elements of one batch must
 * have equal shapes and dtypes. */
sn_status sn_dataset_batch(sn_dataset **ds, int64_t batch_size, bool drop_remainder);
/* Keeps copies of the first complete pass and serves later epochs from memory without
 * touching the source. A pass interrupted by a reset is discarded, as tf.data does. */
sn_status sn_dataset_cache(sn_dataset **ds);
/* Produces up to buffer_size elements ahead on a background thread (pthreads, bounded
 * queue). Freeing or resetting stops and joins the thread. */
sn_status sn_dataset_prefetch(sn_dataset **ds, int buffer_size);
/* The first n elements (n = -1: all). */
sn_status sn_dataset_take(sn_dataset **ds, int64_t n);
/* All but the first n elements (n = -1: none). */
sn_status sn_dataset_skip(sn_dataset **ds, int64_t n);
/* Elements index, index + num_shards, index + 2 * num_shards, ... (tf.data shard): one shard
 * per worker or replica, disjoint, together the whole data set. Shard before shuffling. */
sn_status sn_dataset_shard(sn_dataset **ds, int64_t num_shards, int64_t index);

/* The next element into components[0 .. n-1] (n = sn_dataset_num_components). At the end of
 * the epoch *end is true and components are not touched; later calls keep returning end
 * until sn_dataset_reset. */
sn_status sn_dataset_next(sn_dataset *ds, sn_tensor **components, bool *end);
/* Starts a new epoch from the beginning (allowed at any point, mid-epoch too). */
sn_status sn_dataset_reset(sn_dataset *ds);
int sn_dataset_num_components(const sn_dataset *ds);
/* Elements per epoch; SN_CARDINALITY_INFINITE (-1) or SN_CARDINALITY_UNKNOWN (-2) as tf.data. */
int64_t sn_dataset_cardinality(const sn_dataset *ds);
/* Frees the dataset and every dataset it owns; NULL is fine. */
void sn_dataset_free(sn_dataset *ds);

/* Positioning, for checkpoints (docs/checkpoints.md). Every element a dataset yields depends
 * only on how often each transform of its chain was reset (shuffle's order is keyed by it)
 * and on how many elements were taken since: get records the reset counts, set restores them
 * (after a reset that stops background threads and drops buffered elements), so that the
 * next sn_dataset_reset starts the same epoch as the one that followed the get; skipping k
 * elements then reaches the same place. A cache keeps what this process filled it with. */
#define SN_DATASET_MAX_DEPTH 64
typedef struct sn_dataset_state {
    int depth;                            /* transforms from the dataset down to its source */
    uint64_t epoch[SN_DATASET_MAX_DEPTH]; /* the reset count of each */
} sn_dataset_state;
sn_status sn_dataset_state_get(const sn_dataset *ds, sn_dataset_state *out);
/* SN_ERR_INVALID when st's depth is not this dataset's (another pipeline). */
sn_status sn_dataset_state_set(sn_dataset *ds, const sn_dataset_state *st);

/* ---- TFRecord files ------------------------------------------------------------------------ */
/* CRC-32C (Castagnoli), continuing from crc (0 to start); and TFRecord's masked form. */
uint32_t sn_crc32c(uint32_t crc, const void *data, size_t n);
uint32_t sn_crc32c_masked(const void *data, size_t n);

/* Reads records: uint64 length, masked CRC-32C of the length, data, masked CRC-32C of the
 * data. Plain and gzip-compressed files are both read (detected from the content). */
typedef struct sn_tfrecord_reader sn_tfrecord_reader;
sn_status sn_tfrecord_open(sn_tfrecord_reader **out, const char *path);
/* The next record: *data (owned by the reader, valid until the next call) and *len; *end at
 * the end of the file. A bad CRC or a truncated record names the file and the record number
 * (counting from 0). */
sn_status sn_tfrecord_read(sn_tfrecord_reader *r, const uint8_t **data, size_t *len,
                           bool *end);
void sn_tfrecord_close(sn_tfrecord_reader *r);

typedef struct sn_tfrecord_writer sn_tfrecord_writer;
sn_status sn_tfrecord_writer_open(sn_tfrecord_writer **out, const char *path, bool gzip);
sn_status sn_tfrecord_write(sn_tfrecord_writer *w, const void *data, size_t len);
/* Hands every record written so far to the operating system, so that a reader of the
 * growing file (TensorBoard) sees them. */
sn_status sn_tfrecord_writer_flush(sn_tfrecord_writer *w);
/* Flushes and closes; a failed flush is reported here. NULL is fine. */
sn_status sn_tfrecord_writer_close(sn_tfrecord_writer *w);

/* ---- tf.train.Example ---------------------------------------------------------------------- */
typedef enum sn_feature_kind {
    SN_FEATURE_NONE = 0, /* a Feature with no list set */
    SN_FEATURE_BYTES,
    SN_FEATURE_FLOAT,
    SN_FEATURE_INT64,
} sn_feature_kind;

/* One feature: `count` values of one kind. For encoding the caller fills it; from a parsed
 * Example every pointer is owned by the sn_example. */
typedef struct sn_feature {
    const char *name;
    sn_feature_kind kind;
    int64_t count;
    const float *floats;              /* SN_FEATURE_FLOAT */
    const int64_t *int64s;            /* SN_FEATURE_INT64 */
    const uint8_t *const *bytes;      /* SN_FEATURE_BYTES: count strings ... */
    const size_t *bytes_len;          /* ... and their lengths */
} sn_feature;

typedef struct sn_example sn_example;
sn_status sn_example_new(sn_example **out);
/* Parses a serialized tf.train.Example into ex, replacing what it held (buffers are reused).
 * Packed and unpacked repeated fields are accepted; unknown fields are skipped. */
sn_status sn_example_parse(sn_example *ex, const void *data, size_t len);
int sn_example_num_features(const sn_example *ex);
const sn_feature *sn_example_feature(const sn_example *ex, int i);
/* The feature with this name (the last one if repeated), or NULL. */
const sn_feature *sn_example_find(const sn_example *ex, const char *name);
void sn_example_free(sn_example *ex);
/* Serializes features as a tf.train.Example into a new buffer *out (free with free()). */
sn_status sn_example_encode(const sn_feature *features, int n, uint8_t **out, size_t *len);

/* A dataset of (image, label) from TFRecord files of Examples: the image is either a bytes
 * feature of raw u8 pixels (one value of numel(image_shape) bytes), which comes out u8
 * image_shape, or a float list of numel(image_shape) values, which comes out f32 image_shape
 * (every record of the files the same kind); the label is an int64 feature (one value) and
 * comes out i32 []. Files are read in order. Errors name the file, the record and the
 * feature. */
typedef struct sn_tfrecord_image_spec {
    const char *image_key; /* default "image" */
    const char *label_key; /* default "label"; NULL: images only (one component) */
    sn_shape image_shape;  /* default [28, 28] */
} sn_tfrecord_image_spec;
sn_tfrecord_image_spec sn_tfrecord_image_spec_defaults(void);
sn_status sn_dataset_from_tfrecord_images(sn_dataset **out, const char *const *paths,
                                          int n_paths, const sn_tfrecord_image_spec *spec);

/* ---- UTF-8 --------------------------------------------------------------------------------- */
/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates (U+D800..U+DFFF), nothing above
 * U+10FFFF, no cut-short sequences. Returns true when s[0 .. n-1] is valid; otherwise false
 * with *bad_offset (may be NULL) the byte offset of the first invalid sequence. */
bool sn_utf8_validate(const void *s, size_t n, size_t *bad_offset);
/* Decodes the code point at s[*pos] (strictly, as above) and advances *pos past it. Returns
 * false (pos unchanged) at an invalid sequence or at the end. */
bool sn_utf8_decode(const void *s, size_t n, size_t *pos, uint32_t *cp);
/* Writes the UTF-8 form of cp into out (1 to 4 bytes, no NUL) and returns its length; 0 when
 * cp is a surrogate or above U+10FFFF. */
int sn_utf8_encode(uint32_t cp, char out[4]);

/* ---- vocabularies of characters ------------------------------------------------------------ */
/* The characters of a text, sorted: id i is the i-th smallest code point (UTF-8 mode) or byte
 * value (bytes mode). As the TensorFlow text-generation tutorial's sorted(set(text)), except
 * that no id is reserved for an unknown character ([UNK]): tinyshakespeare has 65 ids. */
typedef struct sn_vocab sn_vocab;
/* The vocabulary of text[0 .. len-1]: its distinct code points (the text must be valid UTF-8;
 * an error names the byte offset of the first invalid sequence) or, with bytes, its distinct
 * byte values. The caller frees *out with sn_vocab_free. */
sn_status sn_vocab_build(sn_vocab **out, const void *text, size_t len, bool bytes);
/* A vocabulary of the given code points (or byte values), which must be strictly increasing. */
sn_status sn_vocab_from_chars(sn_vocab **out, const uint32_t *chars, int n, bool bytes);
void sn_vocab_free(sn_vocab *v);
int sn_vocab_size(const sn_vocab *v);
bool sn_vocab_is_bytes(const sn_vocab *v);
/* The id of code point (or byte) c, or -1 when it is not in the vocabulary. */
int32_t sn_vocab_id(const sn_vocab *v, uint32_t c);
/* The code point (or byte) of id, or -1 when id is outside [0, size). */
int64_t sn_vocab_char(const sn_vocab *v, int32_t id);
/* The bytes of id's character into out: its UTF-8 form (1 to 4 bytes), or the one byte in
 * bytes mode. Returns the length; 0 when id is outside [0, size). */
int sn_vocab_decode(const sn_vocab *v, int32_t id, char out[4]);
/* Maps text[0 .. len-1] to ids: *ids (caller frees with free()) holds *n ids. A character
 * outside the vocabulary, or invalid UTF-8 in UTF-8 mode, is an error naming it and its byte
 * offset. */
sn_status sn_vocab_encode(const sn_vocab *v, const void *text, size_t len, int32_t **ids,
                          int64_t *n);
/* Saves as JSON, written atomically (a temporary file in the same folder, fsync, rename):
 *   {"format": "sinter.vocab", "version": 1, "mode": "utf8", "size": 65,
 *    "chars": ["\n", " ", "!", ...]}
 * ("mode": "bytes" with "bytes": [10, 32, ...] in bytes mode). */
sn_status sn_vocab_save(const sn_vocab *v, const char *path);
/* Loads what sn_vocab_save wrote; anything else (not JSON, another format or version, an
 * entry that is not one character, entries out of order) is an error naming the file and
 * the entry. */
sn_status sn_vocab_load(sn_vocab **out, const char *path);
/* Where a model's vocabulary lives beside its weights: "<weights>.vocab.json". Returns a new
 * string the caller frees with free(), or NULL when out of memory. */
char *sn_vocab_path_for(const char *weights_path);

/* ---- text datasets (character models) ------------------------------------------------------ */
/* The pipeline of TensorFlow's text-generation tutorial: text -> ids -> sequences of
 * seq_length + 1 ids (consecutive, not overlapping; a last partial one is dropped) -> x = the
 * first seq_length ids, y = the last seq_length (the next character of each) -> shuffle ->
 * batch (drop remainder). Elements are x i32 [seq_length], y i32 [seq_length]; batches i32
 * [batch_size, seq_length] each. With validation_split > 0 the last sequences (Keras's rule:
 * n_train = floor(n * (1 - split))) form a separate validation dataset, neither shuffled nor
 * shared with training; its last batch keeps its remainder. */
typedef struct sn_text_opts {
    int64_t seq_length;      /* L, default 100 */
    int64_t batch_size;      /* default 64; 0: no batching (elements are single sequences) */
    int64_t shuffle_buffer;  /* default 10,000; 0: no shuffle */
    uint64_t seed;           /* shuffle seed, default 0; a new order each epoch */
    bool bytes;              /* default false: the text must be UTF-8; true: one id per byte */
    double validation_split; /* default 0.1; 0: no validation dataset */
    int prefetch;            /* batches prepared ahead on a thread, default 2; 0: none */
    const sn_vocab *vocab;   /* NULL (default): built from the text; else used (borrowed) */
} sn_text_opts;
sn_text_opts sn_text_defaults(void);

/* Counts of what sn_text_dataset made. */
typedef struct sn_text_info {
    int64_t n_units;      /* characters (UTF-8 mode) or bytes */
    int64_t n_sequences;  /* floor(n_units / (seq_length + 1)) */
    int64_t n_train, n_validation; /* sequences in each */
} sn_text_info;

/* The text of `path` as training (and optionally validation) datasets. *vocab receives the
 * vocabulary (built, or a copy of opts->vocab); validation and info may be NULL. On success
 * the caller frees *vocab, *train and *validation (NULL when validation_split is 0). */
sn_status sn_text_dataset(const char *path, const sn_text_opts *opts, sn_vocab **vocab,
                          sn_dataset **train, sn_dataset **validation, sn_text_info *info);
/* The same from text in memory; `name` stands for the file in messages. */
sn_status sn_text_dataset_from_memory(const void *text, size_t len, const char *name,
                                      const sn_text_opts *opts, sn_vocab **vocab,
                                      sn_dataset **train, sn_dataset **validation,
                                      sn_text_info *info);

#ifdef __cplusplus
}
#endif
#endif
