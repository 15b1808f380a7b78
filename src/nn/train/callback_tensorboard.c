/* Keras's TensorBoard callback over sinter/events.h: one event writer for the training logs
 * (log_dir/train) and one for the validation logs (log_dir/validation), opened on first use in
 * each training run, as Keras's callback opens its summary writers. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/train/train_impl.h"
#include "sinter/events.h"

typedef struct tensorboard {
    sn_cb_base base; /* first: sn_callback_free casts back */
    sn_tensorboard_opts o;
    char *log_dir;
    sn_model *model;      /* from on_train_begin; not owned */
    sn_event_writer *train, *val;
    int64_t steps_before; /* without a model: the steps of the epochs before this one */
    int64_t last_step;    /* global step at the last batch callback or epoch start */
} tensorboard;

sn_tensorboard_opts sn_tensorboard_defaults(void) {
    sn_tensorboard_opts o;
    memset(&o, 0, sizeof o);
    return o;
}

/* *w, opened in log_dir/sub when still closed. */
static sn_status writer(tensorboard *t, sn_event_writer **w, const char *sub) {
    if (*w) return SN_OK;
    size_t n = strlen(t->log_dir) + strlen(sub) + 2;
    char *dir = sn_malloc(n);
    if (!dir) return SN_ERR_NOMEM;
    snprintf(dir, n, "%s/%s", t->log_dir, sub);
    sn_status s = sn_event_writer_open(dir, w);
    free(dir);
    if (s != SN_OK) return sn_error_context(s, "tensorboard");
    return SN_OK;
}

static sn_status tb_train_begin(void *user, sn_model *m) {
    ((tensorboard *)user)->model = m;
    return SN_OK;
}

/* The global step: the model's own count (right after a resume too), else what this callback
 * has seen. */
static int64_t global_step(const tensorboard *t, int64_t epoch_step) {
    if (t->model && t->model->train) return t->model->train->step;
    return t->steps_before + epoch_step;
}

static sn_status tb_epoch_begin(void *user, int epoch, int epochs) {
    tensorboard *t = user;
    t->last_step = global_step(t, 0);
    return writer(t, &t->train, "train");
}

/* "<prefix>_<name>" into buf. */
static const char *tag(char *buf, size_t cap, const char *prefix, const char *name) {
    snprintf(buf, cap, "%s_%s", prefix, name);
    return buf;
}

static sn_status tb_batch_end(void *user, const sn_logs *l, bool *stop) {
    tensorboard *t = user;
    int64_t step = global_step(t, l->step), n = t->o.update_freq;
    int64_t prev = t->last_step;
    t->last_step = step;
    if (n <= 0 || step / n == prev / n) return SN_OK;
    SN_TRY(writer(t, &t->train, "train"));
    char buf[96];
    for (int i = 0; i < l->n; i++) {
        if (!strncmp(l->names[i], "val_", 4)) continue;
        SN_TRY(sn_event_write_scalar(t->train, tag(buf, sizeof buf, "batch", l->names[i]), step,
                                     l->values[i]));
    }
    return SN_OK;
}

static sn_status write_histograms(tensorboard *t, int64_t step) {
    const sn_model *m = t->model;
    if (m->dtype != SN_F32)
        return sn_errorf(SN_ERR_UNSUPPORTED, "tensorboard: histograms of %s variables are not "
                         "supported (float32 only)", sn_dtype_name(m->dtype));
    char buf[256];
    for (int i = 0; i < m->n_layers; i++) {
        const sn_layer *l = m->layers[i];
        for (int j = 0; j < l->n_vars; j++) {
            sn_shape s = sn_node_shape(m->g, l->vars[j]);
            int64_t n = 1;
            for (int a = 0; a < s.ndim; a++) n *= s.dim[a];
            const float *v = sn_variable_data(m->g, l->vars[j]);
            if (!v || n < 1) continue;
            snprintf(buf, sizeof buf, "%s/%s/histogram", l->name, l->var_names[j]);
            SN_TRY(sn_event_write_histogram(t->train, buf, step, v, n, 0));
        }
    }
    return SN_OK;
}

static sn_status tb_epoch_end(void *user, const sn_logs *l, bool *stop) {
    tensorboard *t = user;
    t->steps_before += l->step;
    SN_TRY(writer(t, &t->train, "train"));
    char buf[96];
    const int64_t step = l->epoch;
    bool have_lr = false, have_val = false;
    for (int i = 0; i < l->n; i++) {
        const char *name = l->names[i];
        if (!strncmp(name, "val_", 4)) {
            have_val = true;
            continue;
        }
        have_lr |= !strcmp(name, "learning_rate");
        SN_TRY(sn_event_write_scalar(t->train, tag(buf, sizeof buf, "epoch", name), step,
                                     l->values[i]));
    }
    /* Keras's _collect_learning_rate: the optimizer's rate when the logs do not carry it. */
    if (!have_lr && t->model && t->model->train)
        SN_TRY(sn_event_write_scalar(t->train, "epoch_learning_rate", step,
                                     sn_model_get_learning_rate(t->model)));
    if (t->model && t->o.histogram_freq > 0 && l->epoch % t->o.histogram_freq == 0)
        SN_TRY(write_histograms(t, step));
    SN_TRY(sn_event_writer_flush(t->train));
    if (!have_val) return SN_OK;
    SN_TRY(writer(t, &t->val, "validation"));
    for (int i = 0; i < l->n; i++)
        if (!strncmp(l->names[i], "val_", 4))
            SN_TRY(sn_event_write_scalar(t->val, tag(buf, sizeof buf, "epoch", l->names[i] + 4),
                                         step, l->values[i]));
    return sn_event_writer_flush(t->val);
}

/* Cannot report: a failed final flush only loses what the epoch-end flush did not write. */
static void tb_train_end(void *user) {
    tensorboard *t = user;
    /* Nor may it replace the message of the failure that ended training (a full disk makes
     * the close fail after the flush did). */
    char why[1024];
    snprintf(why, sizeof why, "%s", sn_last_error());
    sn_event_writer_close(t->train);
    sn_event_writer_close(t->val);
    sn_errorf(SN_OK, "%s", why);
    t->train = t->val = NULL;
    t->steps_before = t->last_step = 0;
    t->model = NULL;
}

static void tb_destroy(sn_cb_base *b) {
    tensorboard *t = (tensorboard *)b;
    tb_train_end(t);
    free(t->log_dir);
}

sn_callback *sn_callback_tensorboard(const sn_tensorboard_opts *o) {
    if (!o || !o->log_dir || !*o->log_dir || o->update_freq < 0 || o->histogram_freq < 0) {
        sn_errorf(SN_ERR_INVALID, "tensorboard: %s",
                  !o                                      ? "options are NULL"
                  : !o->log_dir || !*o->log_dir           ? "log_dir is empty or NULL"
                  : o->update_freq < 0                    ? "update_freq must be >= 0"
                                                          : "histogram_freq must be >= 0");
        return NULL;
    }
    tensorboard *t = sn_calloc(1, sizeof *t);
    if (!t) return NULL;
    if (!(t->log_dir = sn_strdup(o->log_dir))) {
        free(t);
        return NULL;
    }
    t->o = *o;
    t->o.log_dir = t->log_dir;
    t->base.destroy = tb_destroy;
    t->base.cb = (sn_callback){.user = t, .on_epoch_begin = tb_epoch_begin,
                          .on_batch_end = tb_batch_end, .on_epoch_end = tb_epoch_end,
                               .on_train_begin = tb_train_begin,
                          .on_train_end = tb_train_end};
    return &t->base.cb;
}
