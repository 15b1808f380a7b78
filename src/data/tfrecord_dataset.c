/* A dataset of (image, label) tf.train.Example records read from TFRecord files
 * (sn_dataset_from_tfrecord_images): records through tfrecord.c's reader, Examples through
 * tf_example.c's parser. */
#include <string.h>

#include "data/data_impl.h"

/* ---- dataset of (image, label) Examples ------------------------------------------------ */

sn_tfrecord_image_spec sn_tfrecord_image_spec_defaults(void) {
    sn_tfrecord_image_spec s = {.image_key = "image", .label_key = "label"};
    s.image_shape.ndim = 2;
    s.image_shape.dim[0] = 28;
    s.image_shape.dim[1] = 28;
    return s;
}

typedef struct {
    sn_dataset base;
    char **paths;
    int n_paths, file;
    char *image_key, *label_key;
    sn_shape shape;
    sn_tfrecord_reader *rd;
    sn_example *ex;
    sn_tensor *img, *lbl;
    sn_feature_kind kind; /* the image feature's kind in the first record (NONE before it) */
} ds_tfrec;

static sn_status tfrec_next(sn_dataset *d, sn_tensor **out, bool *end) {
    ds_tfrec *ds = (ds_tfrec *)d;
    for (;;) {
        if (!ds->rd) {
            if (ds->file >= ds->n_paths) {
                *end = true;
                return SN_OK;
            }
            SN_TRY(sn_tfrecord_open(&ds->rd, ds->paths[ds->file]));
        }
        const uint8_t *rec;
        size_t len;
        bool e;
        SN_TRY(sn_tfrecord_read(ds->rd, &rec, &len, &e));
        if (e) {
            sn_tfrecord_close(ds->rd);
            ds->rd = NULL;
            ds->file++;
            continue;
        }
        const char *path = ds->paths[ds->file];
        long long recno = (long long)sn_tfrecord_records_read(ds->rd) - 1;
        sn_status s = sn_example_parse(ds->ex, rec, len);
        if (s != SN_OK) return sn_error_context(s, "tfrecord: %s: record %lld", path, recno);
        const sn_feature *fi = sn_example_find(ds->ex, ds->image_key);
        const sn_feature *fl = ds->label_key ? sn_example_find(ds->ex, ds->label_key) : NULL;
        int64_t numel = sn_shape_numel(&ds->shape);
        char b[128];
        sn_shape_str(&ds->shape, b, sizeof b);
        if (!fi || (fi->kind != SN_FEATURE_BYTES && fi->kind != SN_FEATURE_FLOAT))
            return sn_errorf(SN_ERR_FORMAT,
                             "tfrecord: %s: record %lld: feature \"%s\" should be one bytes value "
                             "of %lld raw u8 pixels or a float list of %lld values (shape %s); "
                             "found %s",
                             path, recno, ds->image_key, (long long)numel, (long long)numel, b,
                             !fi ? "no such feature"
                             : fi->kind == SN_FEATURE_INT64 ? "an int64 list" : "an empty Feature");
        if (fi->kind == SN_FEATURE_BYTES &&
            (fi->count != 1 || (int64_t)fi->bytes_len[0] != numel))
            return sn_errorf(SN_ERR_FORMAT,
                             "tfrecord: %s: record %lld: feature \"%s\" should be one bytes value "
                             "of %lld raw u8 pixels (shape %s); found %lld values%s%lld bytes",
                             path, recno, ds->image_key, (long long)numel, b,
                             (long long)fi->count, fi->count == 1 ? " of " : ", the first of ",
                             fi->count ? (long long)fi->bytes_len[0] : 0LL);
        if (fi->kind == SN_FEATURE_FLOAT && fi->count != numel)
            return sn_errorf(SN_ERR_FORMAT,
                             "tfrecord: %s: record %lld: feature \"%s\" has %lld floats; shape %s "
                             "needs %lld",
                             path, recno, ds->image_key, (long long)fi->count, b, (long long)numel);
        if (ds->kind != SN_FEATURE_NONE && fi->kind != ds->kind)
            return sn_errorf(SN_ERR_FORMAT,
                             "tfrecord: %s: record %lld: feature \"%s\" is a %s list but it was a "
                             "%s list in the first record; every record needs the same kind",
                             path, recno, ds->image_key,
                             fi->kind == SN_FEATURE_BYTES ? "bytes" : "float",
                             ds->kind == SN_FEATURE_BYTES ? "bytes" : "float");
        ds->kind = fi->kind;
        if (ds->label_key && (!fl || fl->kind != SN_FEATURE_INT64 || fl->count != 1))
            return sn_errorf(SN_ERR_FORMAT,
                             "tfrecord: %s: record %lld: feature \"%s\" should be one int64 "
                             "label; found %s",
                             path, recno, ds->label_key,
                             !fl ? "no such feature"
                             : fl->kind != SN_FEATURE_INT64 ? "another kind of list"
                                                            : "a count other than 1");
        if (fl && (fl->int64s[0] < INT32_MIN || fl->int64s[0] > INT32_MAX))
            return sn_errorf(SN_ERR_FORMAT, "tfrecord: %s: record %lld: label %lld does not fit in int32",
                             path, recno, (long long)fl->int64s[0]);
        sn_shape scalar = {.ndim = 0};
        SN_TRY(sn_dataset_ensure_output(&ds->img, fi->kind == SN_FEATURE_BYTES ? SN_U8 : SN_F32,
                                        &ds->shape));
        if (fl) SN_TRY(sn_dataset_ensure_output(&ds->lbl, SN_I32, &scalar));
        if (fi->kind == SN_FEATURE_BYTES) memcpy(ds->img->data, fi->bytes[0], (size_t)numel);
        else memcpy(ds->img->data, fi->floats, (size_t)numel * sizeof(float));
        out[0] = ds->img;
        if (fl) {
            *(int32_t *)ds->lbl->data = (int32_t)fl->int64s[0];
            out[1] = ds->lbl;
        }
        return SN_OK;
    }
}

static sn_status tfrec_reset(sn_dataset *d) {
    ds_tfrec *ds = (ds_tfrec *)d;
    sn_tfrecord_close(ds->rd);
    ds->rd = NULL;
    ds->file = 0;
    ds->kind = SN_FEATURE_NONE;
    return SN_OK;
}

static int64_t tfrec_card(const sn_dataset *d) { return SN_CARDINALITY_UNKNOWN; }

static void tfrec_destroy(sn_dataset *d) {
    ds_tfrec *ds = (ds_tfrec *)d;
    sn_tfrecord_close(ds->rd);
    sn_example_free(ds->ex);
    sn_tensor_free(ds->img);
    sn_tensor_free(ds->lbl);
    for (int i = 0; i < ds->n_paths; i++) free(ds->paths ? ds->paths[i] : NULL);
    free(ds->paths);
    free(ds->image_key);
    free(ds->label_key);
}

static const sn_dataset_ops tfrec_ops = {.name = "tfrecord_images",
                                         .next = tfrec_next,
                                         .reset = tfrec_reset,
                                         .cardinality = tfrec_card,
                                         .destroy = tfrec_destroy};

sn_status sn_dataset_from_tfrecord_images(sn_dataset **out, const char *const *paths,
                                          int n_paths, const sn_tfrecord_image_spec *spec) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "from_tfrecord_images: out is NULL");
    *out = NULL;
    if (!paths || n_paths < 1)
        return sn_errorf(SN_ERR_INVALID, "from_tfrecord_images: no files (n_paths %d)", n_paths);
    sn_tfrecord_image_spec sp = spec ? *spec : sn_tfrecord_image_spec_defaults();
    if (!sp.image_key) return sn_errorf(SN_ERR_INVALID, "from_tfrecord_images: image_key is NULL");
    if (sp.image_shape.ndim < 1 || sp.image_shape.ndim > SN_MAX_DIMS - 1 ||
        sn_shape_numel(&sp.image_shape) < 1)
        return sn_errorf(SN_ERR_SHAPE, "from_tfrecord_images: image_shape needs 1 to %d positive dims",
                         SN_MAX_DIMS - 1);
    for (int i = 0; i < sp.image_shape.ndim; i++)
        if (sp.image_shape.dim[i] < 1)
            return sn_errorf(SN_ERR_SHAPE, "from_tfrecord_images: image_shape dim %d is %lld", i,
                             (long long)sp.image_shape.dim[i]);
    ds_tfrec *ds = (ds_tfrec *)sn_dataset_alloc(sizeof *ds, &tfrec_ops, NULL,
                                                  sp.label_key ? 2 : 1);
    if (!ds) return SN_ERR_NOMEM;
    ds->shape = sp.image_shape;
    ds->paths = sn_calloc((size_t)n_paths, sizeof *ds->paths);
    bool ok = ds->paths != NULL;
    if (ok) ds->n_paths = n_paths;
    for (int i = 0; ok && i < n_paths; i++) {
        if (!paths[i]) {
            sn_dataset_free(&ds->base);
            return sn_errorf(SN_ERR_INVALID, "from_tfrecord_images: path %d is NULL", i);
        }
        ok = (ds->paths[i] = sn_strdup(paths[i])) != NULL;
    }
    if (ok) ok = (ds->image_key = sn_strdup(sp.image_key)) &&
                 (!sp.label_key || (ds->label_key = sn_strdup(sp.label_key)));
    if (ok) ok = sn_example_new(&ds->ex) == SN_OK;
    if (!ok) {
        sn_dataset_free(&ds->base);
        return SN_ERR_NOMEM;
    }
    *out = &ds->base;
    return SN_OK;
}
