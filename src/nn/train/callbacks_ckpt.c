/* keras.callbacks.ModelCheckpoint: a file per epoch (or per improvement), named by a
 * str.format pattern over the epoch and the logs. Weights-only files are Keras 3
 * .weights.h5; otherwise the file is a full checkpoint (nn/train/checkpoint.c), from which
 * sn_backup_opts.resume_path continues training. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinter/dist.h"
#include "io/checkpoint_io.h"
#include "nn/train/train_impl.h"

sn_model_checkpoint_opts sn_model_checkpoint_defaults(const char *filepath) {
    return (sn_model_checkpoint_opts){.filepath = filepath, .monitor = "val_loss",
                                      .mode = "auto", .save_best_only = false,
                                      .save_weights_only = false};
}

typedef struct mckpt {
    sn_cb_base base;
    sn_model *m;
    char *filepath;
    char monitor[64];
    bool maximize, best_only, weights_only;
    double best;
} mckpt;

/* One "{name[:spec]}" field into out; spec is a printf-able subset of Python's format spec:
 * flags/width/precision and a type d (epoch), f, e, g, % or none. */
static sn_status format_field(const char *field, size_t flen, int epoch, const sn_logs *l,
                              char *out, size_t cap) {
    char name[96], spec[32] = "";
    const char *colon = memchr(field, ':', flen);
    size_t nlen = colon ? (size_t)(colon - field) : flen;
    size_t slen = colon ? flen - nlen - 1 : 0;
    if (nlen == 0 || nlen >= sizeof name || slen >= sizeof spec)
        return sn_errorf(SN_ERR_INVALID, "ModelCheckpoint: field '{%.*s}' (expected {name} or "
                         "{name:spec})", (int)flen, field);
    memcpy(name, field, nlen);
    name[nlen] = 0;
    if (slen) memcpy(spec, colon + 1, slen);
    spec[slen] = 0;
    for (size_t i = 0; i + 1 < slen; i++)
        if (!strchr("0123456789.+- #", spec[i]))
            return sn_errorf(SN_ERR_INVALID, "ModelCheckpoint: format spec '%s' of '{%s}' "
                             "(expected flags, width, precision and one of d f e g)", spec, name);
    char type = slen ? spec[slen - 1] : 0;
    if (type && !strchr("dfeEgG", type)) {
        if (strchr("0123456789", type)) type = 0; /* a width only */
        else
            return sn_errorf(SN_ERR_INVALID, "ModelCheckpoint: format spec '%s' of '{%s}' has "
                             "type '%c' (expected d, f, e or g)", spec, name, type);
    }
    char fmt[48];
    if (!strcmp(name, "epoch")) {
        if (type && type != 'd')
            return sn_errorf(SN_ERR_INVALID, "ModelCheckpoint: '{epoch:%s}': epoch is an "
                             "integer (use d)", spec);
        snprintf(fmt, sizeof fmt, "%%%.*sd", type ? (int)slen - 1 : (int)slen, spec);
        snprintf(out, cap, fmt, epoch + 1); /* Keras numbers epochs from 1 in file names */
        return SN_OK;
    }
    const double *v = sn_logs_find(l, name);
    if (!v) {
        char avail[256] = "epoch";
        size_t len = strlen(avail);
        for (int i = 0; i < l->n && len < sizeof avail; i++)
            len += (size_t)snprintf(avail + len, sizeof avail - len, ", %s", l->names[i]);
        return sn_errorf(SN_ERR_NOT_FOUND, "ModelCheckpoint: '{%s}' in the file path is not in "
                         "the logs (available: %s)", name, avail);
    }
    if (type == 'd')
        return sn_errorf(SN_ERR_INVALID, "ModelCheckpoint: '{%s:%s}': %s is a float (use f, e "
                         "or g)", name, spec, name);
    if (!type) {
        if (slen == 0) {
            sn_repr_double(out, cap, *v); /* Python's str(float) */
            return SN_OK;
        }
        snprintf(fmt, sizeof fmt, "%%%sg", spec);
    } else {
        snprintf(fmt, sizeof fmt, "%%%s", spec);
    }
    snprintf(out, cap, fmt, *v);
    return SN_OK;
}

static sn_status format_path(const char *pat, int epoch, const sn_logs *l, char *out, size_t cap) {
    size_t n = 0;
    for (const char *p = pat; *p;) {
        char piece[256];
        if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
            piece[0] = p[0];
            piece[1] = 0;
            p += 2;
        } else if (*p == '{') {
            const char *e = strchr(p, '}');
            if (!e)
                return sn_errorf(SN_ERR_INVALID, "ModelCheckpoint: '%s' has a '{' without '}'",
                                 pat);
            SN_TRY(format_field(p + 1, (size_t)(e - p - 1), epoch, l, piece, sizeof piece));
            p = e + 1;
        } else if (*p == '}') {
            return sn_errorf(SN_ERR_INVALID, "ModelCheckpoint: '%s' has a single '}' (write "
                             "'}}')", pat);
        } else {
            piece[0] = *p++;
            piece[1] = 0;
        }
        size_t k = strlen(piece);
        if (n + k + 1 > cap)
            return sn_errorf(SN_ERR_INVALID, "ModelCheckpoint: the path from '%s' is longer than "
                             "%zu characters", pat, cap - 1);
        memcpy(out + n, piece, k);
        n += k;
    }
    out[n] = 0;
    return SN_OK;
}

static sn_status mc_train_begin(void *user, sn_model *m) {
    mckpt *c = user;
    c->m = m;
    return SN_OK;
}

static sn_status mc_epoch_end(void *user, const sn_logs *l, bool *stop) {
    mckpt *c = user;
    if (!c->m) return SN_OK;
    if (c->best_only) {
        const double *v = sn_logs_find(l, c->monitor);
        if (!v)
            return sn_errorf(SN_ERR_NOT_FOUND, "ModelCheckpoint: monitor '%s' is not in the logs "
                             "(save_best_only needs it)", c->monitor);
        bool better = c->maximize ? *v > c->best : *v < c->best;
        if (!better) return SN_OK;
        c->best = *v;
    }
    /* Under multi_worker the workers hold the same state: the chief writes. */
    if (c->m->strategy && !sn_strategy_is_chief(c->m->strategy)) return SN_OK;
    char path[4096];
    SN_TRY(format_path(c->filepath, l->epoch, l, path, sizeof path));
    char *slash = strrchr(path, '/');
    if (slash && slash != path) {
        *slash = 0;
        sn_status s = sn_ckpt_mkdir(path); /* Keras creates the folder */
        *slash = '/';
        SN_TRY(s);
    }
    if (c->weights_only)
        return sn_error_context(sn_model_save_weights(c->m, path), "ModelCheckpoint");
    return sn_error_context(sn_fit_checkpoint_write(c->m, path), "ModelCheckpoint");
}

static int mc_get(void *user, double *v, int cap) {
    if (cap < 1) return 0;
    v[0] = ((mckpt *)user)->best;
    return 1;
}

static sn_status mc_set(void *user, const double *v, int n) {
    if (n != 1) return sn_errorf(SN_ERR_FORMAT, "ModelCheckpoint: a state of %d values", n);
    ((mckpt *)user)->best = v[0];
    return SN_OK;
}

static void mc_destroy(sn_cb_base *b) { free(((mckpt *)b)->filepath); }

sn_callback *sn_callback_model_checkpoint(const sn_model_checkpoint_opts *o) {
    if (!o || !o->filepath || !*o->filepath) {
        sn_errorf(SN_ERR_INVALID, "ModelCheckpoint: filepath is %s", !o ? "missing (NULL "
                  "options)" : o->filepath ? "empty" : "NULL");
        return NULL;
    }
    const char *monitor = o->monitor ? o->monitor : "val_loss";
    const char *mode = o->mode ? o->mode : "auto";
    if (!*monitor || strlen(monitor) >= 64 ||
        (strcmp(mode, "auto") && strcmp(mode, "min") && strcmp(mode, "max"))) {
        sn_errorf(SN_ERR_INVALID, "ModelCheckpoint: monitor '%s' (1 to 63 characters), mode "
                  "'%s' (auto, min or max)", monitor, mode);
        return NULL;
    }
    mckpt *c = sn_calloc(1, sizeof *c);
    if (!c) return NULL;
    if (!(c->filepath = sn_strdup(o->filepath))) {
        free(c);
        return NULL;
    }
    snprintf(c->monitor, sizeof c->monitor, "%s", monitor);
    c->maximize = !strcmp(mode, "max") || (!strcmp(mode, "auto") && strstr(monitor, "acc"));
    c->best = c->maximize ? -INFINITY : INFINITY;
    c->best_only = o->save_best_only;
    c->weights_only = o->save_weights_only;
    c->base.destroy = mc_destroy;
    c->base.cb = (sn_callback){.user = c, .on_train_begin = mc_train_begin,
                               .on_epoch_end = mc_epoch_end, .state_name = "model_checkpoint",
                               .get_state = mc_get, .set_state = mc_set};
    return &c->base.cb;
}
