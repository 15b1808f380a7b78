/* Text datasets for character models: the pipeline of TensorFlow's text-generation tutorial
 *
 *   ids = ids_from_chars(text); seqs = Dataset.from_tensor_slices(ids).batch(L + 1,
 *   drop_remainder=True); ds = seqs.map(split_input_target).shuffle(10000).batch(64,
 *   drop_remainder=True)
 *
 * The sequence source serves x and y as views into one int32 array of ids (y is x shifted by
 * one), so nothing is copied until shuffle takes its copy of each element. */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "data/data_impl.h"

sn_text_opts sn_text_defaults(void) {
    return (sn_text_opts){.seq_length = 100,
                          .batch_size = 64,
                          .shuffle_buffer = 10000,
                          .seed = 0,
                          .bytes = false,
                          .validation_split = 0.1,
                          .prefetch = 2,
                          .vocab = NULL};
}

/* ---- the sequence source --------------------------------------------------------------- */

typedef struct {
    sn_dataset base;
    int32_t *ids; /* owned: count * (L + 1) ids */
    int64_t L, count, pos;
    sn_shape eshape;  /* [L] */
    sn_tensor view[2]; /* x, y: headers into ids */
} ds_textseq;

static sn_status textseq_next(sn_dataset *d, sn_tensor **out, bool *end) {
    ds_textseq *ds = (ds_textseq *)d;
    if (ds->pos >= ds->count) {
        *end = true;
        return SN_OK;
    }
    int32_t *seq = ds->ids + ds->pos * (ds->L + 1);
    sn_data_set_view(&ds->view[0], SN_I32, &ds->eshape, seq);     /* input: ids 0 .. L-1 */
    sn_data_set_view(&ds->view[1], SN_I32, &ds->eshape, seq + 1); /* target: ids 1 .. L */
    out[0] = &ds->view[0];
    out[1] = &ds->view[1];
    ds->pos++;
    return SN_OK;
}

static sn_status textseq_reset(sn_dataset *d) {
    ((ds_textseq *)d)->pos = 0;
    return SN_OK;
}

static int64_t textseq_card(const sn_dataset *d) { return ((const ds_textseq *)d)->count; }

static void textseq_destroy(sn_dataset *d) { free(((ds_textseq *)d)->ids); }

static const sn_dataset_ops textseq_ops = {.name = "text_sequences",
                                           .next = textseq_next,
                                           .reset = textseq_reset,
                                           .cardinality = textseq_card,
                                           .destroy = textseq_destroy};

/* A source over `count` sequences of L + 1 ids copied from ids. */
static sn_status textseq_new(sn_dataset **out, const int32_t *ids, int64_t count, int64_t L) {
    ds_textseq *ds = (ds_textseq *)sn_dataset_alloc(sizeof *ds, &textseq_ops, NULL, 2);
    if (!ds) return SN_ERR_NOMEM;
    size_t n = (size_t)count * (size_t)(L + 1);
    ds->ids = sn_malloc(n * sizeof *ds->ids);
    if (!ds->ids) {
        free(ds);
        return SN_ERR_NOMEM;
    }
    memcpy(ds->ids, ids, n * sizeof *ds->ids);
    ds->L = L;
    ds->count = count;
    ds->eshape = (sn_shape){.ndim = 1, .dim = {L}};
    *out = &ds->base;
    return SN_OK;
}

/* ---- the pipeline ---------------------------------------------------------------------- */

static sn_status check_opts(const sn_text_opts *o, const char *name) {
    if (o->seq_length < 1 || o->seq_length > (1 << 24))
        return sn_errorf(SN_ERR_INVALID, "text: %s: seq_length %lld is outside [1, %d]", name,
                         (long long)o->seq_length, 1 << 24);
    if (o->batch_size < 0 || o->shuffle_buffer < 0)
        return sn_errorf(SN_ERR_INVALID, "text: %s: batch_size %lld and shuffle_buffer %lld "
                                         "must be >= 0",
                         name, (long long)o->batch_size, (long long)o->shuffle_buffer);
    if (!(o->validation_split >= 0 && o->validation_split < 1))
        return sn_errorf(SN_ERR_INVALID, "text: %s: validation_split %g is outside [0, 1)", name,
                         o->validation_split);
    if (o->prefetch < 0 || o->prefetch > 4096)
        return sn_errorf(SN_ERR_INVALID, "text: %s: prefetch %d is outside [0, 4096]", name,
                         o->prefetch);
    if (o->vocab && sn_vocab_is_bytes(o->vocab) != o->bytes)
        return sn_errorf(SN_ERR_INVALID, "text: %s: the vocabulary given is in %s mode but the "
                                         "text is read in %s mode",
                         name, sn_vocab_is_bytes(o->vocab) ? "bytes" : "UTF-8",
                         o->bytes ? "bytes" : "UTF-8");
    return SN_OK;
}

/* Shuffle (training only), batch, prefetch on top of *ds; frees *ds on failure. */
static sn_status finish_chain(sn_dataset **ds, const sn_text_opts *o, bool train) {
    sn_status s = SN_OK;
    if (train && o->shuffle_buffer > 0) s = sn_dataset_shuffle(ds, o->shuffle_buffer, o->seed, true);
    if (s == SN_OK && o->batch_size > 0) s = sn_dataset_batch(ds, o->batch_size, train);
    if (s == SN_OK && o->prefetch > 0) s = sn_dataset_prefetch(ds, o->prefetch);
    if (s != SN_OK) {
        sn_dataset_free(*ds);
        *ds = NULL;
    }
    return s;
}

static sn_status vocab_copy(const sn_vocab *v, sn_vocab **out) {
    int n = sn_vocab_size(v);
    uint32_t *c = sn_malloc((size_t)n * sizeof *c);
    if (!c) return SN_ERR_NOMEM;
    for (int i = 0; i < n; i++) c[i] = (uint32_t)sn_vocab_char(v, i);
    sn_status s = sn_vocab_from_chars(out, c, n, sn_vocab_is_bytes(v));
    free(c);
    return s;
}

sn_status sn_text_dataset_from_memory(const void *text, size_t len, const char *name,
                                      const sn_text_opts *opts, sn_vocab **vocab,
                                      sn_dataset **train, sn_dataset **validation,
                                      sn_text_info *info) {
    if (!vocab || !train || (!text && len))
        return sn_errorf(SN_ERR_INVALID, "sn_text_dataset: NULL argument");
    *vocab = NULL;
    *train = NULL;
    if (validation) *validation = NULL;
    if (!name) name = "(text)";
    sn_text_opts o = opts ? *opts : sn_text_defaults();
    SN_TRY(check_opts(&o, name));
    size_t bad = 0;
    if (!o.bytes && !sn_utf8_validate(text, len, &bad)) {
        const uint8_t *p = text;
        char hex[16] = {0};
        for (size_t i = 0, k = 0; i < 4 && bad + i < len; i++)
            k += (size_t)snprintf(hex + k, sizeof hex - k, "%s%02x", i ? " " : "", p[bad + i]);
        return sn_errorf(SN_ERR_FORMAT,
                         "text: %s is not valid UTF-8: the sequence at byte offset %zu (bytes "
                         "%s) is invalid; read it in bytes mode (sinter train --bytes) to take "
                         "the file byte by byte",
                         name, bad, hex);
    }
    sn_vocab *v = NULL;
    sn_status s = o.vocab ? vocab_copy(o.vocab, &v) : sn_vocab_build(&v, text, len, o.bytes);
    if (s != SN_OK) return sn_error_context(s, "text: %s", name);
    int32_t *ids = NULL;
    int64_t n = 0;
    s = sn_vocab_encode(v, text, len, &ids, &n);
    if (s != SN_OK) {
        sn_vocab_free(v);
        return sn_error_context(s, "text: %s", name);
    }
    const int64_t L = o.seq_length, n_seq = n / (L + 1);
    int64_t n_train = n_seq;
    if (o.validation_split > 0) n_train = (int64_t)floor((double)n_seq * (1 - o.validation_split));
    const int64_t n_val = n_seq - n_train;
    sn_dataset *tr = NULL, *va = NULL;
    if (n_train < 1 || (o.validation_split > 0 && n_val < 1)) {
        s = sn_errorf(SN_ERR_INVALID,
                      "text: %s has %lld %s, which make %lld sequences of %lld + 1; that is "
                      "too short for a training set%s",
                      name, (long long)n, o.bytes ? "bytes" : "characters", (long long)n_seq,
                      (long long)L, o.validation_split > 0 ? " and a validation split" : "");
        goto fail;
    }
    if ((s = textseq_new(&tr, ids, n_train, L)) != SN_OK) goto fail;
    if ((s = finish_chain(&tr, &o, true)) != SN_OK) {
        s = sn_error_context(s, "text: %s: %lld training sequences", name, (long long)n_train);
        goto fail;
    }
    if (validation && n_val > 0) {
        if ((s = textseq_new(&va, ids + n_train * (L + 1), n_val, L)) != SN_OK) goto fail;
        if ((s = finish_chain(&va, &o, false)) != SN_OK) goto fail;
    }
    free(ids);
    if (info)
        *info = (sn_text_info){.n_units = n, .n_sequences = n_seq, .n_train = n_train,
                               .n_validation = n_val};
    *vocab = v;
    *train = tr;
    if (validation) *validation = va;
    return SN_OK;
fail:
    sn_dataset_free(tr);
    sn_dataset_free(va);
    free(ids);
    sn_vocab_free(v);
    return s;
}

sn_status sn_text_dataset(const char *path, const sn_text_opts *opts, sn_vocab **vocab,
                          sn_dataset **train, sn_dataset **validation, sn_text_info *info) {
    if (!path) return sn_errorf(SN_ERR_INVALID, "sn_text_dataset: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return sn_errorf(SN_ERR_IO, "text: cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return sn_errorf(SN_ERR_IO, "text: %s is not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    char *buf = sn_malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return SN_ERR_NOMEM;
    }
    size_t got = fread(buf, 1, n, f);
    bool err = ferror(f) != 0;
    fclose(f);
    if (err || got != n) {
        free(buf);
        return sn_errorf(SN_ERR_IO, "text: reading %s failed after %zu of %zu bytes%s%s", path,
                         got, n, err ? ": " : "", err ? strerror(errno) : "");
    }
    sn_status s =
        sn_text_dataset_from_memory(buf, n, path, opts, vocab, train, validation, info);
    free(buf);
    return s;
}
