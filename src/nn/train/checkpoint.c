/* Checkpoints of the whole training state, and BackupAndRestore (docs/checkpoints.md).
 *
 * What makes a resumed fit bit-identical to an uninterrupted one: every variable of the graph
 * (parameters, BatchNormalization's moving statistics, optimizer slots, the iteration
 * counter, the training and evaluation accumulators: one buffer, saved whole), the global
 * training step (it keys dropout masks and each replica's plan step), the learning rate, the
 * input pipeline's position (reset counts of every transform before this epoch began, and
 * the steps done in it: fit replays that many batches), the history, and the callbacks'
 * state. Checkpoints are taken between executions, so nothing is half-done on the device. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sinter/dist.h"
#include "io/checkpoint_io.h"
#include "nn/train/train_impl.h"

#define CKPT_KIND "sinter-checkpoint"
/* 2: the header in HDF5's user block (src/io/checkpoint_io.c); 1 had none and is refused. */
#define CKPT_VERSION 2
#define CKPT_PREFIX "ckpt"

sn_backup_opts sn_backup_defaults(void) {
    sn_backup_opts b;
    memset(&b, 0, sizeof b);
    b.keep = 3;
    b.resume = true;
    return b;
}

/* ---- building the item list ----------------------------------------------------------------- */

typedef struct items {
    int n, cap;
    sn_ckpt_item *it;
    /* storage the items point into, freed together */
    int n_own;
    void *own[64];
} items;

static void items_free(items *l) {
    for (int i = 0; i < l->n; i++) free(l->it[i].name);
    free(l->it);
    for (int i = 0; i < l->n_own; i++) free(l->own[i]);
}

static void *own(items *l, size_t bytes) {
    if (l->n_own == (int)(sizeof l->own / sizeof l->own[0])) return NULL;
    void *p = sn_calloc(1, bytes ? bytes : 1);
    if (p) l->own[l->n_own++] = p;
    return p;
}

static sn_status add(items *l, const char *name, sn_ckpt_type type, const sn_shape *shape,
                     void *data) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        sn_ckpt_item *p = sn_realloc(l->it, (size_t)cap * sizeof *p);
        if (!p) return SN_ERR_NOMEM;
        l->it = p;
        l->cap = cap;
    }
    sn_ckpt_item *it = &l->it[l->n];
    if (!(it->name = sn_strdup(name))) return SN_ERR_NOMEM;
    it->type = type;
    it->shape = shape ? *shape : (sn_shape){.ndim = 0};
    it->data = data;
    l->n++;
    return SN_OK;
}

static sn_status add_i64(items *l, const char *name, int64_t v) {
    int64_t *p = own(l, sizeof v);
    if (!p) return SN_ERR_NOMEM;
    *p = v;
    return add(l, name, SN_CKPT_I64, NULL, p);
}

static sn_status add_f64(items *l, const char *name, double v) {
    double *p = own(l, sizeof v);
    if (!p) return SN_ERR_NOMEM;
    *p = v;
    return add(l, name, SN_CKPT_F64, NULL, p);
}

static sn_status add_str(items *l, const char *name, const char *v) {
    char **p = own(l, sizeof *p);
    if (!p) return SN_ERR_NOMEM;
    *p = (char *)v;
    sn_shape s = {.ndim = 1, .dim = {1}};
    return add(l, name, SN_CKPT_STR, &s, p);
}

static sn_ckpt_type var_type(sn_dtype dt) {
    switch (dt) {
    case SN_F32: return SN_CKPT_F32;
    case SN_F64: return SN_CKPT_F64;
    case SN_I32: return SN_CKPT_I32;
    case SN_U8: return SN_CKPT_U8;
    default: return (sn_ckpt_type)0;
    }
}

/* "variables/<name>", with "#k" for the k-th repeat of a name (a model compiled twice keeps
 * the first optimizer's unused slots under the same names). */
static void var_path(sn_graph *g, const sn_node *vars, int i, char *buf, size_t cap) {
    const char *name = sn_node_name(g, vars[i]);
    if (!name || !*name) name = "unnamed";
    int rep = 0;
    for (int j = 0; j < i; j++) {
        const char *o = sn_node_name(g, vars[j]);
        if (o && strcmp(o, name) == 0) rep++;
    }
    if (rep) snprintf(buf, cap, "variables/%s#%d", name, rep);
    else snprintf(buf, cap, "variables/%s", name);
}

static sn_status graph_vars(sn_graph *g, sn_node **out, int *n) {
    *n = sn_graph_variables(g, false, NULL, 0);
    *out = sn_calloc((size_t)(*n ? *n : 1), sizeof **out);
    if (!*out) return SN_ERR_NOMEM;
    sn_graph_variables(g, false, *out, *n);
    return SN_OK;
}

static sn_status build_items(sn_model *m, items *l, sn_node **vars_out) {
    sn_train_state *t = m->train;
    sn_fit_progress *fp = t->fit;
    sn_graph *g = m->g;
    sn_node *vars = NULL;
    int nv = 0;
    SN_TRY(graph_vars(g, &vars, &nv));
    *vars_out = vars;
    SN_TRY(add_str(l, "model/name", m->name ? m->name : ""));
    SN_TRY(add_str(l, "model/optimizer", sn_optimizer_name(t->opts.optimizer.type)));
    SN_TRY(add_i64(l, "model/mixed_bfloat16", t->opts.mixed_bfloat16));
    SN_TRY(add_i64(l, "model/steps_per_execution", t->opts.steps_per_execution));
    for (int i = 0; i < nv; i++) {
        char path[512];
        var_path(g, vars, i, path, sizeof path);
        sn_shape s = sn_node_shape(g, vars[i]);
        sn_ckpt_type ty = var_type(sn_node_dtype(g, vars[i]));
        if (!ty)
            return sn_errorf(SN_ERR_UNSUPPORTED, "checkpoint: variable '%s' has dtype %s",
                             sn_node_name(g, vars[i]), sn_dtype_name(sn_node_dtype(g, vars[i])));
        SN_TRY(add(l, path, ty, &s, sn_variable_data(g, vars[i])));
    }
    SN_TRY(add_i64(l, "fit/epoch", fp->epoch));
    SN_TRY(add_i64(l, "fit/step_in_epoch", fp->done));
    SN_TRY(add_i64(l, "fit/global_step", t->step));
    SN_TRY(add_i64(l, "fit/known_steps", fp->known));
    SN_TRY(add_i64(l, "fit/epoch_done", fp->epoch_done));
    SN_TRY(add_i64(l, "fit/stopped", fp->stopped));
    SN_TRY(add_f64(l, "fit/learning_rate", t->opts.optimizer.learning_rate));
    /* The pipeline: reset counts before the current epoch's reset (uint64 stored as int64). */
    int64_t *ep = own(l, sizeof(int64_t) * SN_DATASET_MAX_DEPTH);
    if (!ep) return SN_ERR_NOMEM;
    for (int i = 0; i < fp->train_state.depth; i++) ep[i] = (int64_t)fp->train_state.epoch[i];
    sn_shape es = {.ndim = 1, .dim = {fp->train_state.depth}};
    SN_TRY(add(l, "data/train_resets", SN_CKPT_I64, &es, ep));
    if (fp->opts->validation) {
        sn_dataset_state vs;
        SN_TRY(sn_dataset_state_get(fp->opts->validation, &vs));
        int64_t *vp = own(l, sizeof(int64_t) * SN_DATASET_MAX_DEPTH);
        if (!vp) return SN_ERR_NOMEM;
        for (int i = 0; i < vs.depth; i++) vp[i] = (int64_t)vs.epoch[i];
        sn_shape vsh = {.ndim = 1, .dim = {vs.depth}};
        SN_TRY(add(l, "data/validation_resets", SN_CKPT_I64, &vsh, vp));
    }
    /* History so far. */
    const char **hn = own(l, SN_LOGS_MAX * sizeof *hn);
    if (!hn) return SN_ERR_NOMEM;
    int nn = sn_history_names(fp->history, hn);
    int ne = sn_history_epochs(fp->history);
    double *hv = own(l, (size_t)(ne * nn) * sizeof *hv);
    if (!hv) return SN_ERR_NOMEM;
    for (int e = 0; e < ne; e++)
        for (int k = 0; k < nn; k++) hv[(size_t)e * nn + k] = sn_history_value_at(fp->history, e, k);
    sn_shape hs = {.ndim = 1, .dim = {nn}}, vsh2 = {.ndim = 2, .dim = {ne, nn}};
    SN_TRY(add(l, "history/names", SN_CKPT_STR, &hs, (void *)hn));
    SN_TRY(add(l, "history/values", SN_CKPT_F64, &vsh2, hv));
    /* Callbacks with state, by position and name. */
    const sn_fit_opts *o = fp->opts;
    for (int c = 0; c < o->n_callbacks; c++) {
        const sn_callback *cb = o->callbacks[c];
        if (!cb || !cb->get_state) continue;
        double *v = own(l, 64 * sizeof *v);
        if (!v) return SN_ERR_NOMEM;
        int n = cb->get_state(cb->user, v, 64);
        if (n < 0 || n > 64) n = 0;
        char name[160];
        snprintf(name, sizeof name, "callbacks/%d_%s", c, cb->state_name ? cb->state_name : "callback");
        sn_shape cs = {.ndim = 1, .dim = {n}};
        SN_TRY(add(l, name, SN_CKPT_F64, &cs, v));
    }
    return SN_OK;
}

sn_status sn_fit_checkpoint_write(sn_model *m, const char *path) {
    if (!m || !m->train || !m->train->fit)
        return sn_errorf(SN_ERR_STATE, "checkpoint '%s': only written while fit runs",
                         path ? path : "");
    items l = {0};
    sn_node *vars = NULL;
    sn_status s = build_items(m, &l, &vars);
    if (s == SN_OK) s = sn_ckpt_write(path, CKPT_KIND, CKPT_VERSION, l.n, l.it);
    items_free(&l);
    free(vars);
    return s;
}

/* ---- restoring ------------------------------------------------------------------------------ */

static sn_status get_i64(int n, const sn_ckpt_item *it, const char *path, const char *name,
                         int64_t *out) {
    const sn_ckpt_item *x = sn_ckpt_find(n, it, name);
    if (!x || x->type != SN_CKPT_I64 || x->shape.ndim != 0)
        return sn_errorf(SN_ERR_FORMAT, "checkpoint '%s': '%s' is missing or not an int64 scalar",
                         path, name);
    *out = *(const int64_t *)x->data;
    return SN_OK;
}

static sn_status get_resets(int n, const sn_ckpt_item *it, const char *path, const char *name,
                            sn_dataset_state *st) {
    const sn_ckpt_item *x = sn_ckpt_find(n, it, name);
    if (!x || x->type != SN_CKPT_I64 || x->shape.ndim != 1 ||
        x->shape.dim[0] > SN_DATASET_MAX_DEPTH)
        return sn_errorf(SN_ERR_FORMAT, "checkpoint '%s': '%s' is missing or malformed", path,
                         name);
    memset(st, 0, sizeof *st);
    st->depth = (int)x->shape.dim[0];
    for (int i = 0; i < st->depth; i++) st->epoch[i] = (uint64_t)((const int64_t *)x->data)[i];
    return SN_OK;
}

static char *shape_text(const sn_shape *s, char *buf, size_t cap) {
    return sn_shape_str(s, buf, cap);
}

/* Every check first; the model and fit are changed only when all passed. */
static sn_status restore_items(sn_model *m, const char *path, int n, const sn_ckpt_item *it) {
    sn_train_state *t = m->train;
    sn_fit_progress *fp = t->fit;
    sn_graph *g = m->g;
    sn_node *vars = NULL;
    int nv = 0;
    SN_TRY(graph_vars(g, &vars, &nv));
    sn_status s = SN_OK;
    const sn_ckpt_item **src = sn_calloc((size_t)(nv ? nv : 1), sizeof *src);
    if (!src) {
        free(vars);
        return SN_ERR_NOMEM;
    }
    const sn_ckpt_item *opt = sn_ckpt_find(n, it, "model/optimizer");
    const char *want_opt = sn_optimizer_name(t->opts.optimizer.type);
    if (opt && opt->type == SN_CKPT_STR && strcmp(((char **)opt->data)[0], want_opt) != 0) {
        s = sn_errorf(SN_ERR_INVALID, "checkpoint '%s' was written with optimizer '%s' but the "
                      "model is compiled with '%s'", path, ((char **)opt->data)[0], want_opt);
        goto done;
    }
    for (int i = 0; i < nv && s == SN_OK; i++) {
        char vp[512], b1[128], b2[128];
        var_path(g, vars, i, vp, sizeof vp);
        const sn_ckpt_item *x = sn_ckpt_find(n, it, vp);
        sn_shape vs = sn_node_shape(g, vars[i]);
        if (!x) {
            s = sn_errorf(SN_ERR_INVALID, "checkpoint '%s' has no variable '%s' (the model has "
                          "it, shape %s): it was written for another model or optimizer", path,
                          vp + 10, shape_text(&vs, b1, sizeof b1));
        } else if (x->type != var_type(sn_node_dtype(g, vars[i])) ||
                   !sn_shape_equal(&x->shape, &vs)) {
            s = sn_errorf(SN_ERR_SHAPE, "checkpoint '%s': variable '%s' is %s in the file but "
                          "%s %s in the model", path, vp + 10, shape_text(&x->shape, b1, sizeof b1),
                          sn_dtype_name(sn_node_dtype(g, vars[i])), shape_text(&vs, b2, sizeof b2));
        }
        src[i] = x;
    }
    for (int i = 0; i < n && s == SN_OK; i++)
        if (strncmp(it[i].name, "variables/", 10) == 0) {
            bool found = false;
            for (int j = 0; j < nv && !found; j++) found = src[j] == &it[i];
            if (!found)
                s = sn_errorf(SN_ERR_INVALID, "checkpoint '%s' has variable '%s' that the model "
                              "does not have: it was written for another model or optimizer",
                              path, it[i].name + 10);
        }
    int64_t epoch = 0, done = 0, gstep = 0, known = -1, edone = 0, stopped = 0;
    sn_dataset_state ts, vs;
    bool has_val = false;
    if (s == SN_OK) s = get_i64(n, it, path, "fit/epoch", &epoch);
    if (s == SN_OK) s = get_i64(n, it, path, "fit/step_in_epoch", &done);
    if (s == SN_OK) s = get_i64(n, it, path, "fit/global_step", &gstep);
    if (s == SN_OK) s = get_i64(n, it, path, "fit/known_steps", &known);
    if (s == SN_OK) s = get_i64(n, it, path, "fit/epoch_done", &edone);
    if (s == SN_OK) s = get_i64(n, it, path, "fit/stopped", &stopped);
    if (s == SN_OK) s = get_resets(n, it, path, "data/train_resets", &ts);
    if (s == SN_OK && (epoch < 0 || done < 0 || gstep < 0 || epoch > INT32_MAX))
        s = sn_errorf(SN_ERR_FORMAT, "checkpoint '%s': epoch %lld, step %lld, global step %lld "
                      "out of range", path, (long long)epoch, (long long)done, (long long)gstep);
    if (s == SN_OK && fp->opts->validation && sn_ckpt_find(n, it, "data/validation_resets")) {
        s = get_resets(n, it, path, "data/validation_resets", &vs);
        has_val = true;
    }
    const sn_ckpt_item *lr = sn_ckpt_find(n, it, "fit/learning_rate");
    if (s == SN_OK && (!lr || lr->type != SN_CKPT_F64 || !(*(double *)lr->data > 0)))
        s = sn_errorf(SN_ERR_FORMAT, "checkpoint '%s': 'fit/learning_rate' is missing or not "
                      "positive", path);
    const sn_ckpt_item *hn = sn_ckpt_find(n, it, "history/names");
    const sn_ckpt_item *hv = sn_ckpt_find(n, it, "history/values");
    if (s == SN_OK && (!hn || !hv || hn->type != SN_CKPT_STR || hv->type != SN_CKPT_F64 ||
                       hv->shape.ndim != 2 || hv->shape.dim[1] != hn->shape.dim[0]))
        s = sn_errorf(SN_ERR_FORMAT, "checkpoint '%s': the history is missing or malformed", path);
    /* Positions first: they check the pipelines (a depth mismatch names them). */
    if (s == SN_OK) {
        sn_dataset_state cur;
        s = sn_dataset_state_get(fp->train, &cur);
        if (s == SN_OK && cur.depth != ts.depth)
            s = sn_errorf(SN_ERR_INVALID, "checkpoint '%s': the training pipeline had %d "
                          "transforms, this one has %d", path, ts.depth, cur.depth);
    }
    if (s != SN_OK) goto done;

    /* ---- apply ---- */
    for (int i = 0; i < nv; i++) {
        sn_shape vsh = sn_node_shape(g, vars[i]);
        memcpy(sn_variable_data(g, vars[i]), src[i]->data,
               (size_t)sn_shape_numel(&vsh) * sn_dtype_size(sn_node_dtype(g, vars[i])));
    }
    SN_TRY(sn_dataset_state_set(fp->train, &ts));
    if (has_val) s = sn_dataset_state_set(fp->opts->validation, &vs);
    if (s != SN_OK) goto done;
    s = sn_history_restore(fp->history, (int)hn->shape.dim[0], (char *const *)hn->data,
                           (int)hv->shape.dim[0], hv->data);
    if (s != SN_OK) goto done;
    sn_train_set_lr(m, *(double *)lr->data);
    t->step = gstep;
    fp->epoch = (int)epoch;
    fp->done = done;
    fp->known = known;
    fp->epoch_done = edone != 0;
    fp->stopped = stopped != 0;
    fp->train_state = ts;
    for (int c = 0; c < fp->opts->n_callbacks && s == SN_OK; c++) {
        const sn_callback *cb = fp->opts->callbacks[c];
        if (!cb || !cb->set_state) continue;
        char name[160];
        snprintf(name, sizeof name, "callbacks/%d_%s", c, cb->state_name ? cb->state_name : "callback");
        const sn_ckpt_item *x = sn_ckpt_find(n, it, name);
        if (!x) continue; /* a callback added since: it starts fresh */
        if (x->type != SN_CKPT_F64 || x->shape.ndim != 1) {
            s = sn_errorf(SN_ERR_FORMAT, "checkpoint '%s': '%s' is malformed", path, name);
            break;
        }
        s = sn_error_context(cb->set_state(cb->user, x->data, (int)x->shape.dim[0]),
                             "checkpoint '%s': restoring callback %s", path, name + 10);
    }
done:
    free(src);
    free(vars);
    return s;
}

sn_status sn_fit_checkpoint_restore(sn_model *m, const char *path) {
    if (!m || !m->train || !m->train->fit)
        return sn_errorf(SN_ERR_STATE, "checkpoint '%s': only restored by fit", path ? path : "");
    int n = 0;
    sn_ckpt_item *it = NULL;
    SN_TRY(sn_ckpt_read(path, CKPT_KIND, CKPT_VERSION, &n, &it));
    sn_status s = restore_items(m, path, n, it);
    sn_ckpt_items_free(n, it);
    return s;
}

/* ---- BackupAndRestore -------------------------------------------------------------------- */

static void say(const sn_backup_opts *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const sn_backup_opts *b, const char *fmt, ...) {
    if (!b->log) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(b->log, fmt, ap);
    va_end(ap);
    fflush(b->log);
}

static void said_resume(sn_model *m, const sn_backup_opts *b, const char *path) {
    const sn_fit_progress *fp = m->train->fit;
    if (fp->epoch_done)
        say(b, "Resuming from %s: after epoch %d (step %lld)\n", path, fp->epoch + 1,
            (long long)m->train->step);
    else
        say(b, "Resuming from %s: epoch %d, step %lld\n", path, fp->epoch + 1,
            (long long)fp->done);
}

sn_status sn_fit_backup_resume(sn_model *m, const sn_backup_opts *b, bool *resumed) {
    *resumed = false;
    if (b->resume_path) {
        SN_TRY(sn_error_context(sn_fit_checkpoint_restore(m, b->resume_path), "resume"));
        *resumed = true;
        said_resume(m, b, b->resume_path);
        return SN_OK;
    }
    if (!b->dir) return SN_OK;
    int n = 0;
    char **paths = NULL;
    int64_t *nums = NULL;
    SN_TRY(sn_ckpt_list(b->dir, CKPT_PREFIX, &n, &paths, &nums));
    sn_status s = SN_OK;
    if (!b->resume) {
        /* Starting over: the old run's checkpoints would otherwise look newer than this
         * run's after an interruption. The chief removes them; the other workers wait at
         * the first all-reduce, long after. */
        bool chief = !m->strategy || sn_strategy_is_chief(m->strategy);
        for (int i = 0; chief && i < n; i++)
            if (remove(paths[i]) != 0)
                s = sn_errorf(SN_ERR_IO, "starting over: cannot remove the old checkpoint '%s': "
                              "%s", paths[i], strerror(errno));
        if (chief && n > 0 && s == SN_OK)
            say(b, "Starting over: removed %d old checkpoint(s) from %s\n", n, b->dir);
        sn_ckpt_list_free(n, paths, nums);
        return s;
    }
    for (int i = 0; i < n; i++) {
        s = sn_fit_checkpoint_restore(m, paths[i]);
        if (s == SN_OK) {
            *resumed = true;
            said_resume(m, b, paths[i]);
            break;
        }
        /* Only a torn or corrupted file falls back; a valid file for another model, an old
         * format or an unreadable file is an error. */
        if (s != SN_ERR_FORMAT) break;
        if (i + 1 < n) {
            say(b, "Warning: %s; using the previous checkpoint\n", sn_last_error());
            continue;
        }
        /* Every file is damaged. Starting over here would also let the next save's pruning
         * delete this run's new, lower-numbered checkpoints in favour of the damaged ones:
         * the user decides (--no-resume removes them, --resume PATH names one). */
        say(b, "Warning: %s\n", sn_last_error());
        char why[512];
        snprintf(why, sizeof why, "%s", sn_last_error()); /* sn_errorf overwrites it */
        s = sn_errorf(SN_ERR_FORMAT, "resume: no valid checkpoint in '%s': all %d are torn or "
                      "corrupted (the oldest: %s); start over with --no-resume (it removes "
                      "them) or name one with --resume PATH", b->dir, n, why);
    }
    sn_ckpt_list_free(n, paths, nums);
    return s;
}

/* Keeps the newest b->keep checkpoints; removes temporary files other writers left behind
 * (a process killed mid-write). Failures to remove are not errors: the next save retries. */
static void prune(const sn_backup_opts *b) {
    int n = 0;
    char **paths = NULL;
    int64_t *nums = NULL;
    if (sn_ckpt_list(b->dir, CKPT_PREFIX, &n, &paths, &nums) != SN_OK) return;
    for (int i = b->keep; i < n; i++) remove(paths[i]);
    sn_ckpt_list_free(n, paths, nums);
    DIR *d = opendir(b->dir);
    if (!d) return;
    char mine[32];
    snprintf(mine, sizeof mine, ".tmp%ld", (long)getpid());
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *tmp = strstr(e->d_name, ".h5.tmp");
        if (strncmp(e->d_name, CKPT_PREFIX "-", sizeof CKPT_PREFIX) != 0 || !tmp ||
            strcmp(tmp + 3, mine) == 0)
            continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", b->dir, e->d_name);
        remove(p);
    }
    closedir(d);
}

/* The message of a failed save says what a user wants to know next: whether the run can
 * still be resumed, and from which file ("(the previous checkpoint 'ckpt/ckpt-000004.h5' is
 * kept)"). The failed file itself never appears: it was written under a temporary name. */
static sn_status backup_failed(sn_status s, const sn_backup_opts *b, const char *path) {
    char why[768];
    snprintf(why, sizeof why, "%s", sn_last_error());
    int n = 0;
    char **paths = NULL;
    int64_t *nums = NULL;
    const char *prev = NULL;
    if (sn_ckpt_list(b->dir, CKPT_PREFIX, &n, &paths, &nums) == SN_OK)
        for (int i = 0; i < n && !prev; i++)
            if (strcmp(paths[i], path) != 0) prev = paths[i];
    if (prev)
        s = sn_errorf(s, "%s (the previous checkpoint '%s' is kept)", why, prev);
    else
        s = sn_errorf(s, "%s (no earlier checkpoint in '%s')", why, b->dir);
    sn_ckpt_list_free(n, paths, nums);
    return s;
}

sn_status sn_fit_backup_save(sn_model *m, const sn_backup_opts *b) {
    /* Under multi_worker the workers' states are identical: the chief writes. */
    if (!b->dir || (m->strategy && !sn_strategy_is_chief(m->strategy))) return SN_OK;
    SN_TRY(sn_ckpt_mkdir(b->dir));
    char path[4096];
    snprintf(path, sizeof path, "%s/%s-%06lld.h5", b->dir, CKPT_PREFIX, (long long)m->train->step);
    sn_status s = sn_fit_checkpoint_write(m, path);
    if (s != SN_OK) return backup_failed(s, b, path);
    prune(b);
    return SN_OK;
}
