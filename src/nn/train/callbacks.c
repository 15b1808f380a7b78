/* Built-in callbacks: Keras's progress bar (Progbar), CSVLogger, EarlyStopping, TerminateOnNaN.
 *
 * Each built-in is an sn_callback as the first member of its own struct, so
 * sn_callback_free finds the rest. The progress bar is the one place the library writes text,
 * and only to the FILE* the user gave it. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/train/train_impl.h"

typedef sn_cb_base cb_base;

void sn_callback_free(sn_callback *cb) {
    if (!cb) return;
    cb_base *b = (cb_base *)cb;
    if (b->destroy) b->destroy(b);
    free(b);
}

const double *sn_logs_find(const sn_logs *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0) return &l->values[i];
    return NULL;
}

/* ---- progress bar ------------------------------------------------------------------------ */

typedef struct progbar {
    cb_base base;
    FILE *out;
    int verbose;
    bool tty;
    int epochs;
    double start, t_first;
    int64_t step_first;
    size_t prev_width;
} progbar;

/* Keras's Progbar._format_time: " 24ms/step". */
static int fmt_time(char *buf, size_t cap, double per_step) {
    if (per_step >= 1 || per_step == 0) return snprintf(buf, cap, " %.0fs/step", per_step);
    if (per_step >= 1e-3) return snprintf(buf, cap, " %.0fms/step", per_step * 1e3);
    return snprintf(buf, cap, " %.0fus/step", per_step * 1e6);
}

/* Appends printf output to buf at *len, never past cap. */
static void app(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void app(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    if (*len >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0) *len = *len + (size_t)n < cap ? *len + (size_t)n : cap - 1;
}

/* The logs in Keras 3's order: its TensorFlow trainer returns them through tf.nest, which
 * sorts a dict's keys, and adds the val_ logs after; callbacks add the rest (ReduceLROnPlateau's
 * learning_rate) after both. So: the training logs by name, the val_ logs by name, then the
 * others as they come. Keras's verbose-1 bar prints 4 decimals when |v| > 1e-3 and scientific
 * notation otherwise; its verbose-2 line tests v > 1e-3 (no abs), so a negative value prints
 * in scientific notation there. */
static int log_group(const char *name) {
    if (!strncmp(name, "val_", 4)) return 1;
    return strcmp(name, "learning_rate") ? 0 : 2;
}

static void metrics_text(char *buf, size_t cap, size_t *len, const sn_logs *l, int verbose) {
    int order[SN_LOGS_MAX], n = 0;
    for (int i = 0; i < l->n && n < SN_LOGS_MAX; i++) {
        int k = n++;
        /* insertion sort: by group, then by name within groups 0 and 1 */
        while (k > 0) {
            int gp = log_group(l->names[order[k - 1]]), gi = log_group(l->names[i]);
            if (gp < gi || (gp == gi && (gi == 2 || strcmp(l->names[order[k - 1]],
                                                           l->names[i]) <= 0)))
                break;
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    for (int j = 0; j < n; j++) {
        double v = l->values[order[j]];
        bool fixed = verbose == 2 ? v > 1e-3 : fabs(v) > 1e-3;
        if (fixed) app(buf, cap, len, " - %s: %.4f", l->names[order[j]], v);
        else app(buf, cap, len, " - %s: %.4e", l->names[order[j]], v);
    }
}

/* Columns a line takes on a terminal: no escape sequences, one per UTF-8 character. */
static size_t visible_width(const char *s) {
    size_t w = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == 0x1b) {
            while (p[1] && p[1] != 'm') p++;
            if (p[1]) p++;
        } else if ((*p & 0xC0) != 0x80) {
            w++;
        }
    }
    return w;
}

/* Keras 3's Progbar (keras/src/utils/progbar.py): verbose 1 draws
 * "\e[1m3/8\e[0m \e[32m━━━━━━━\e[0m\e[37m━━━━━━━━━━━━━\e[0m \e[1m2s\e[0m 24ms/step - ..." (the
 * bar 20 wide; the ETA while running, the elapsed seconds at the end), with its escape codes
 * also outside a terminal, as Keras writes them; verbose 2 prints one plain line at the end. */
static sn_status progbar_draw(progbar *p, const sn_logs *l, bool final) {
    char line[2048], t[64];
    size_t len = 0;
    double now = sn_now(), elapsed = now - p->start;
    int64_t cur = l->step, target = l->steps;
    /* Time per step without the first execution (planning, cold caches), as Keras excludes
     * the first step. */
    double per_step = 0;
    if (cur > 0) {
        if (p->step_first > 0 && cur > p->step_first)
            per_step = (now - p->t_first) / (double)(cur - p->step_first);
        else
            per_step = elapsed / (double)cur;
        if (p->step_first == 0) {
            p->step_first = cur;
            p->t_first = now;
        }
    }
    fmt_time(t, sizeof t, per_step);
    if (p->verbose == 2) {
        if (target > 0) {
            int digits = (int)floor(log10((double)target)) + 1;
            app(line, sizeof line, &len, "%*lld/%lld", digits, (long long)cur, (long long)target);
        } else {
            app(line, sizeof line, &len, "%lld", (long long)cur);
        }
        app(line, sizeof line, &len, " - %.0fs -%s", elapsed, t);
    } else {
        if (target > 0) {
            int digits = (int)floor(log10((double)target)) + 1;
            app(line, sizeof line, &len, "\x1b[1m%*lld/%lld\x1b[0m ", digits, (long long)cur,
                (long long)target);
            int width = 20, pw = (int)(width * ((double)cur / (double)target));
            if (pw > width) pw = width;
            if (pw > 0) {
                app(line, sizeof line, &len, "\x1b[32m");
                for (int i = 0; i < pw; i++) app(line, sizeof line, &len, "\u2501");
                app(line, sizeof line, &len, "\x1b[0m");
            }
            app(line, sizeof line, &len, "\x1b[37m");
            for (int i = pw; i < width; i++) app(line, sizeof line, &len, "\u2501");
            app(line, sizeof line, &len, "\x1b[0m");
        } else {
            app(line, sizeof line, &len, "%7lld/Unknown", (long long)cur);
        }
        if (final || target <= 0) {
            app(line, sizeof line, &len, " \x1b[1m%.0fs\x1b[0m", elapsed);
        } else {
            double eta = per_step * (double)(target - cur);
            long e = (long)eta;
            if (eta > 3600)
                app(line, sizeof line, &len, " \x1b[1m%ld:%02ld:%02ld\x1b[0m", e / 3600,
                    (e % 3600) / 60, e % 60);
            else if (eta > 60)
                app(line, sizeof line, &len, " \x1b[1m%ld:%02ld\x1b[0m", e / 60, e % 60);
            else
                app(line, sizeof line, &len, " \x1b[1m%lds\x1b[0m", e);
        }
        app(line, sizeof line, &len, "%s", t);
    }
    metrics_text(line, sizeof line, &len, l, p->verbose);
    int rc;
    if (p->tty && p->verbose == 1) {
        /* redraw in place; blank what a longer previous line left */
        size_t w = visible_width(line);
        size_t pad = p->prev_width > w ? p->prev_width - w : 0;
        rc = fprintf(p->out, "\r%s%*s%s", line, (int)pad, "", final ? "\n" : "");
        p->prev_width = final ? 0 : w;
    } else {
        rc = fprintf(p->out, "%s\n", line);
    }
    if (rc < 0 || fflush(p->out) != 0)
        return sn_errorf(SN_ERR_IO, "progress bar: writing failed: %s", strerror(errno));
    return SN_OK;
}

static sn_status progbar_epoch_begin(void *user, int epoch, int epochs) {
    progbar *p = user;
    p->epochs = epochs;
    p->start = sn_now();
    p->step_first = 0;
    p->prev_width = 0;
    /* Keras 3's ProgbarLogger names the epoch only when fit runs more than one */
    if (p->verbose == 0 || epochs <= 1) return SN_OK;
    if (fprintf(p->out, "Epoch %d/%d\n", epoch + 1, epochs) < 0 || fflush(p->out) != 0)
        return sn_errorf(SN_ERR_IO, "progress bar: writing failed: %s", strerror(errno));
    return SN_OK;
}

static sn_status progbar_batch_end(void *user, const sn_logs *l, bool *stop) {
    progbar *p = user;
    if (p->verbose != 1 || !p->tty) return SN_OK; /* elsewhere only the final line */
    return progbar_draw(p, l, false);
}

static sn_status progbar_epoch_end(void *user, const sn_logs *l, bool *stop) {
    progbar *p = user;
    if (p->verbose == 0) return SN_OK;
    return progbar_draw(p, l, true);
}

sn_callback *sn_callback_progress_bar(FILE *out, int verbose) {
    if (!out || verbose < 0 || verbose > 2) {
        sn_errorf(SN_ERR_INVALID, "progress_bar: %s", !out ? "out is NULL"
                                                         : "verbose must be 0, 1 or 2");
        return NULL;
    }
    progbar *p = sn_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->out = out;
    p->verbose = verbose;
    p->tty = isatty(fileno(out)) == 1;
    p->base.cb = (sn_callback){.user = p, .on_epoch_begin = progbar_epoch_begin,
                               .on_batch_end = progbar_batch_end,
                               .on_epoch_end = progbar_epoch_end};
    return &p->base.cb;
}

/* ---- CSV logger -------------------------------------------------------------------------- */

typedef struct csvlog {
    cb_base base;
    char *path;
    sn_model *m; /* from on_train_begin: a resumed fit's restored history */
    FILE *f;
    int n_keys;
    const char *keys[SN_LOGS_MAX];
    char key_store[SN_LOGS_MAX][64];
} csvlog;

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Python's repr of a float: the shortest text that reads back to the same double. */
void sn_repr_double(char *buf, size_t cap, double v) {
    if (isnan(v)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, cap, v > 0 ? "inf" : "-inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".e")) strncat(buf, ".0", cap - strlen(buf) - 1);
}

/* The header: "epoch" and the keys, as Keras writes them (sorted). */
static int csv_header(FILE *f, const csvlog *c) {
    int rc = fprintf(f, "epoch") < 0;
    for (int i = 0; i < c->n_keys; i++) rc |= fprintf(f, ",%s", c->keys[i]) < 0;
    return rc | (fprintf(f, "\n") < 0);
}

static void csv_set_keys(csvlog *c, int n, const char *const *names) {
    c->n_keys = 0;
    for (int i = 0; i < n && i < SN_LOGS_MAX; i++) {
        snprintf(c->key_store[i], sizeof c->key_store[i], "%s", names[i]);
        c->keys[c->n_keys++] = c->key_store[i];
    }
    qsort(c->keys, (size_t)c->n_keys, sizeof c->keys[0], cmp_str);
}

/* A resumed fit (sn_backup_opts): the file gets the restored history's rows, written to a
 * temporary file beside it and renamed over it (a crash leaves the old file or the new one),
 * so that it holds the whole run, as an uninterrupted run's file does; the resumed epochs are
 * appended after them. Epochs before `next` are the history's rows. NaN is "nan" (the
 * history does not tell an absent value from NaN). */
static sn_status csv_rewrite(csvlog *c, const sn_history *h, int next) {
    const char *names[SN_LOGS_MAX];
    int nn = sn_history_names(h, names), ne = sn_history_epochs(h);
    csv_set_keys(c, nn, names);
    size_t len = strlen(c->path) + 32;
    char *tmp = sn_malloc(len);
    if (!tmp) return SN_ERR_NOMEM;
    snprintf(tmp, len, "%s.tmp%ld", c->path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        sn_status s = sn_errorf(SN_ERR_IO, "csv_logger: cannot create '%s': %s", tmp,
                                strerror(errno));
        free(tmp);
        return s;
    }
    int rc = csv_header(f, c);
    for (int e = 0; e < ne; e++) {
        rc |= fprintf(f, "%d", next - ne + e) < 0;
        for (int i = 0; i < c->n_keys; i++) {
            char num[64];
            sn_repr_double(num, sizeof num, sn_history_get(h, c->keys[i], e));
            rc |= fprintf(f, ",%s", num) < 0;
        }
        rc |= fprintf(f, "\n") < 0;
    }
    int e = errno;
    rc |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    if (rc) e = errno;
    rc |= fclose(f) != 0;
    sn_status s = SN_OK;
    if (rc)
        s = sn_errorf(SN_ERR_IO, "csv_logger: cannot write '%s': %s", c->path, strerror(e));
    else if (rename(tmp, c->path) != 0)
        s = sn_errorf(SN_ERR_IO, "csv_logger: cannot rename '%s' to '%s': %s", tmp, c->path,
                      strerror(errno));
    if (s != SN_OK) remove(tmp);
    free(tmp);
    if (s != SN_OK) return s;
    /* The folder's entry: the rename must outlive a crash as the data does. */
    char *dir = sn_strdup(c->path);
    if (!dir) return SN_ERR_NOMEM;
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    int fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0)
        s = sn_errorf(SN_ERR_IO, "csv_logger: syncing the folder of '%s' failed: %s", c->path,
                      strerror(errno));
    if (fd >= 0) close(fd);
    free(dir);
    return s;
}

static sn_status csv_train_begin(void *user, sn_model *m) {
    ((csvlog *)user)->m = m;
    return SN_OK;
}

static sn_status csv_epoch_begin(void *user, int epoch, int epochs) {
    csvlog *c = user;
    (void)epochs;
    if (c->f) return SN_OK;
    /* Keras's CSVLogger(append=False): a new file per training run; a run resumed from a
     * checkpoint is the same run, so its file starts with the restored history. */
    const sn_history *h = c->m && c->m->train && c->m->train->fit ? c->m->train->fit->history
                                                                  : NULL;
    c->n_keys = 0;
    if (h && sn_history_epochs(h) > 0) {
        SN_TRY(csv_rewrite(c, h, epoch));
        c->f = fopen(c->path, "a");
    } else {
        c->f = fopen(c->path, "w");
    }
    if (!c->f)
        return sn_errorf(SN_ERR_IO, "csv_logger: cannot open '%s' for writing: %s", c->path,
                         strerror(errno));
    return SN_OK;
}

static sn_status csv_epoch_end(void *user, const sn_logs *l, bool *stop) {
    csvlog *c = user;
    if (!c->f) return SN_OK;
    int rc = 0;
    if (c->n_keys == 0) {
        /* Keras writes the keys sorted: epoch,accuracy,loss,val_accuracy,val_loss */
        csv_set_keys(c, l->n, l->names);
        rc |= csv_header(c->f, c);
    }
    rc |= fprintf(c->f, "%d", l->epoch) < 0;
    for (int i = 0; i < c->n_keys; i++) {
        const double *v = sn_logs_find(l, c->keys[i]);
        char num[64] = "NA";
        if (v) sn_repr_double(num, sizeof num, *v);
        rc |= fprintf(c->f, ",%s", num) < 0;
    }
    rc |= fprintf(c->f, "\n") < 0;
    if (rc || fflush(c->f) != 0)
        return sn_errorf(SN_ERR_IO, "csv_logger: cannot write '%s': %s", c->path,
                         strerror(errno));
    return SN_OK;
}

static void csv_train_end(void *user) {
    csvlog *c = user;
    if (c->f) fclose(c->f);
    c->f = NULL;
}

static void csv_destroy(cb_base *b) {
    csvlog *c = (csvlog *)b;
    csv_train_end(c);
    free(c->path);
}

sn_callback *sn_callback_csv_logger(const char *path) {
    if (!path || !*path) {
        sn_errorf(SN_ERR_INVALID, "csv_logger: path is %s", path ? "empty" : "NULL");
        return NULL;
    }
    csvlog *c = sn_calloc(1, sizeof *c);
    if (!c) return NULL;
    if (!(c->path = sn_strdup(path))) {
        free(c);
        return NULL;
    }
    c->base.destroy = csv_destroy;
    c->base.cb = (sn_callback){.user = c, .on_train_begin = csv_train_begin,
                               .on_epoch_begin = csv_epoch_begin, .on_epoch_end = csv_epoch_end,
                               .on_train_end = csv_train_end};
    return &c->base.cb;
}

/* ---- early stopping ---------------------------------------------------------------------- */

typedef struct earlystop {
    cb_base base;
    char monitor[64];
    double min_delta;
    int patience;
    bool maximize, active;
    int wait;
    double best;
} earlystop;

static sn_status es_epoch_begin(void *user, int epoch, int epochs) {
    earlystop *e = user;
    if (!e->active) { /* a new training run */
        e->active = true;
        e->wait = 0;
        e->best = e->maximize ? -INFINITY : INFINITY;
    }
    return SN_OK;
}

static sn_status es_epoch_end(void *user, const sn_logs *l, bool *stop) {
    earlystop *e = user;
    const double *v = sn_logs_find(l, e->monitor);
    if (!v) {
        char avail[256] = "";
        size_t len = 0;
        for (int i = 0; i < l->n; i++)
            app(avail, sizeof avail, &len, "%s%s", i ? ", " : "", l->names[i]);
        return sn_errorf(SN_ERR_NOT_FOUND, "early_stopping: monitor '%s' is not in the logs "
                         "(available: %s)", e->monitor, avail);
    }
    /* keras.callbacks.EarlyStopping: improvement when better than best by min_delta */
    e->wait++;
    bool better = e->maximize ? *v - e->min_delta > e->best : *v + e->min_delta < e->best;
    if (better) {
        e->best = *v;
        e->wait = 0;
        return SN_OK;
    }
    if (e->wait >= e->patience && l->epoch > 0) *stop = true;
    return SN_OK;
}

static void es_train_end(void *user) { ((earlystop *)user)->active = false; }

/* Checkpointed: best and wait (the run resumed from a checkpoint is the same run). */
static int es_get_state(void *user, double *v, int cap) {
    earlystop *e = user;
    if (cap < 2) return 0;
    v[0] = e->best;
    v[1] = e->wait;
    return 2;
}

static sn_status es_set_state(void *user, const double *v, int n) {
    earlystop *e = user;
    if (n != 2 || !(v[1] >= 0))
        return sn_errorf(SN_ERR_FORMAT, "early_stopping: a state of %d values (expected best, "
                         "wait)", n);
    e->best = v[0];
    e->wait = (int)v[1];
    e->active = true;
    return SN_OK;
}

sn_callback *sn_callback_early_stopping(const char *monitor, double min_delta, int patience) {
    if (!monitor) monitor = "val_loss";
    if (!*monitor || strlen(monitor) >= 64 || patience < 0 || !isfinite(min_delta)) {
        sn_errorf(SN_ERR_INVALID, "early_stopping: monitor '%s' (1 to 63 characters), patience "
                  "%d (>= 0), min_delta %g (finite)", monitor, patience, min_delta);
        return NULL;
    }
    earlystop *e = sn_calloc(1, sizeof *e);
    if (!e) return NULL;
    snprintf(e->monitor, sizeof e->monitor, "%s", monitor);
    e->min_delta = fabs(min_delta);
    e->patience = patience;
    /* mode "auto": accuracy-like names are maximised, everything else minimised */
    e->maximize = strstr(monitor, "acc") != NULL;
    e->base.cb = (sn_callback){.user = e, .on_epoch_begin = es_epoch_begin,
                               .on_epoch_end = es_epoch_end, .on_train_end = es_train_end,
                               .state_name = "early_stopping", .get_state = es_get_state,
                               .set_state = es_set_state};
    return &e->base.cb;
}

/* ---- terminate on NaN -------------------------------------------------------------------- */

/* The loss in the logs is the epoch's running mean, so it stays NaN from the first batch
 * whose loss was NaN. With steps_per_execution > 1 the callback sees a whole execution at
 * once: the batch is then one of the steps since the previous call, and the message gives
 * that range. */
typedef struct nan_guard {
    cb_base base;
    int64_t prev_step; /* the step of the previous call in this epoch */
} nan_guard;

static sn_status nan_epoch_begin(void *user, int epoch, int epochs) {
    (void)epoch, (void)epochs;
    ((nan_guard *)user)->prev_step = 0;
    return SN_OK;
}

static sn_status nan_batch_end(void *user, const sn_logs *l, bool *stop) {
    nan_guard *g = user;
    const double *v = sn_logs_find(l, "loss");
    int64_t first = g->prev_step + 1;
    g->prev_step = l->step;
    if (!v || isfinite(*v)) return SN_OK;
    const char *what = isnan(*v) ? "NaN" : "Inf";
    if (first >= l->step)
        return sn_errorf(SN_ERR_NUMERIC, "loss became %s at epoch %d, step %lld (TerminateOnNaN)",
                         what, l->epoch + 1, (long long)l->step);
    return sn_errorf(SN_ERR_NUMERIC, "loss became %s at epoch %d, in steps %lld-%lld (one "
                     "execution of %lld steps; TerminateOnNaN)", what, l->epoch + 1,
                     (long long)first, (long long)l->step, (long long)(l->step - first + 1));
}

sn_callback *sn_callback_terminate_on_nan(void) {
    nan_guard *g = sn_calloc(1, sizeof *g);
    if (!g) return NULL;
    g->base.cb = (sn_callback){.user = g, .on_epoch_begin = nan_epoch_begin,
                               .on_batch_end = nan_batch_end};
    return &g->base.cb;
}
