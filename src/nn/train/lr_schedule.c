/* The learning rate between executions: setting it, and the Keras callbacks and schedules
 * that change it (ReduceLROnPlateau, LearningRateScheduler, keras.optimizers.schedules).
 *
 * Each apply_optimizer node carries the rate in its attributes, and the update kernels read
 * the attributes of their node at every run (sn_kcall.attr points into the graph), so a new
 * rate set here is used from the next execution on, without re-planning. */
#include <math.h>
#include <string.h>

#include "nn/train/train_impl.h"

void sn_train_set_lr(sn_model *m, double lr) {
    m->train->opts.optimizer.learning_rate = lr;
    sn_graph *g = m->g;
    /* Every update node of the graph: fit's plans (one per batch shape, and under a strategy
     * one per replica) each have their own. Nodes of an earlier compile are unused either way. */
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == SN_OP_APPLY_OPTIMIZER) g->nodes[i].attr.optim.lr = lr;
}

sn_status sn_model_set_learning_rate(sn_model *m, double lr) {
    if (!m) return sn_errorf(SN_ERR_INVALID, "set_learning_rate: model is NULL");
    if (!m->train || !m->train->compiled)
        return sn_errorf(SN_ERR_STATE, "set_learning_rate: model '%s' is not compiled",
                         m->name ? m->name : "");
    if (!(lr > 0) || !isfinite(lr))
        return sn_errorf(SN_ERR_INVALID, "set_learning_rate: %g must be a finite number > 0", lr);
    sn_train_set_lr(m, lr);
    return SN_OK;
}

double sn_model_get_learning_rate(const sn_model *m) {
    return m && m->train && m->train->compiled ? m->train->opts.optimizer.learning_rate : NAN;
}

/* Keras keeps the rate in a float32 variable: what it reads back and logs is that. */
static double f32(double x) { return (double)(float)x; }

/* The iteration count: the steps the optimizer has applied. */
static int64_t iterations(sn_model *m) {
    sn_train_state *t = m->train;
    if (!t || t->iterations == SN_NONE) return 0;
    return *(const int32_t *)sn_variable_cdata(m->g, t->iterations); /* read only: no reload */
}

static bool mode_max(const char *mode, const char *monitor) {
    if (!strcmp(mode, "max")) return true;
    if (!strcmp(mode, "min")) return false;
    return strstr(monitor, "acc") != NULL; /* "auto", as Keras */
}

static sn_status check_mode(const char *what, const char *mode, const char *monitor) {
    if (!monitor || !*monitor || strlen(monitor) >= 64)
        return sn_errorf(SN_ERR_INVALID, "%s: monitor '%s' must have 1 to 63 characters", what,
                         monitor ? monitor : "NULL");
    if (!mode || (strcmp(mode, "auto") && strcmp(mode, "min") && strcmp(mode, "max")))
        return sn_errorf(SN_ERR_INVALID, "%s: mode '%s' (expected auto, min or max)", what,
                         mode ? mode : "NULL");
    return SN_OK;
}

/* ---- schedules ------------------------------------------------------------------------- */

sn_status sn_lr_schedule_check(const sn_lr_schedule *s) {
    if (!s) return sn_errorf(SN_ERR_INVALID, "lr schedule: NULL");
    switch (s->type) {
    case SN_LR_EXPONENTIAL_DECAY:
        if (!(s->initial_learning_rate > 0) || s->decay_steps < 1 || !(s->decay_rate > 0) ||
            !isfinite(s->initial_learning_rate) || !isfinite(s->decay_rate))
            return sn_errorf(SN_ERR_INVALID, "ExponentialDecay: initial_learning_rate %g (> 0), "
                             "decay_steps %lld (>= 1), decay_rate %g (> 0)",
                             s->initial_learning_rate, (long long)s->decay_steps, s->decay_rate);
        return SN_OK;
    case SN_LR_PIECEWISE_CONSTANT_DECAY:
        if (s->n_boundaries < 1 || s->n_boundaries > SN_LR_MAX_BOUNDARIES)
            return sn_errorf(SN_ERR_INVALID, "PiecewiseConstantDecay: %d boundaries (1 to %d)",
                             s->n_boundaries, SN_LR_MAX_BOUNDARIES);
        for (int i = 0; i <= s->n_boundaries; i++) {
            if (!(s->values[i] > 0) || !isfinite(s->values[i]))
                return sn_errorf(SN_ERR_INVALID, "PiecewiseConstantDecay: value %d is %g; rates "
                                 "must be finite and > 0", i, s->values[i]);
            if (i > 0 && i < s->n_boundaries && s->boundaries[i] <= s->boundaries[i - 1])
                return sn_errorf(SN_ERR_INVALID, "PiecewiseConstantDecay: boundaries must "
                                 "increase (%lld after %lld)", (long long)s->boundaries[i],
                                 (long long)s->boundaries[i - 1]);
        }
        return SN_OK;
    case SN_LR_COSINE_DECAY:
        if (!(s->initial_learning_rate > 0) || s->decay_steps < 1 || !(s->alpha >= 0) ||
            !(s->alpha <= 1) || s->warmup_steps < 0 ||
            (s->warmup_steps > 0 && !(s->warmup_target > 0)))
            return sn_errorf(SN_ERR_INVALID, "CosineDecay: initial_learning_rate %g (> 0), "
                             "decay_steps %lld (>= 1), alpha %g ([0, 1]), warmup_steps %lld "
                             "(>= 0, with warmup_target %g > 0)", s->initial_learning_rate,
                             (long long)s->decay_steps, s->alpha, (long long)s->warmup_steps,
                             s->warmup_target);
        return SN_OK;
    }
    return sn_errorf(SN_ERR_INVALID, "lr schedule: unknown type %d", (int)s->type);
}

double sn_lr_schedule_value(const sn_lr_schedule *s, int64_t step) {
    double st = (double)step;
    switch (s->type) {
    case SN_LR_EXPONENTIAL_DECAY: {
        double p = st / (double)s->decay_steps;
        if (s->staircase) p = floor(p);
        return s->initial_learning_rate * pow(s->decay_rate, p);
    }
    case SN_LR_PIECEWISE_CONSTANT_DECAY:
        for (int i = 0; i < s->n_boundaries; i++)
            if (step <= s->boundaries[i]) return s->values[i];
        return s->values[s->n_boundaries];
    case SN_LR_COSINE_DECAY: {
        double lr0 = s->initial_learning_rate;
        if (s->warmup_steps > 0) {
            if (step < s->warmup_steps)
                return lr0 + (s->warmup_target - lr0) * (st / (double)s->warmup_steps);
            lr0 = s->warmup_target;
            st -= (double)s->warmup_steps;
        }
        double d = (double)s->decay_steps;
        if (st > d) st = d;
        double cosine = 0.5 * (1.0 + cos(M_PI * st / d));
        return lr0 * ((1.0 - s->alpha) * cosine + s->alpha);
    }
    }
    return NAN;
}

typedef struct sched_cb {
    sn_cb_base base;
    sn_model *m;
    sn_lr_schedule s;
    sn_lr_schedule_fn fn; /* LearningRateScheduler */
    void *user;
} sched_cb;

static sn_status sched_apply(sched_cb *c) {
    double lr = f32(sn_lr_schedule_value(&c->s, iterations(c->m)));
    if (!(lr > 0) || !isfinite(lr))
        return sn_errorf(SN_ERR_NUMERIC, "lr schedule: the rate at step %lld is %g",
                         (long long)iterations(c->m), lr);
    sn_train_set_lr(c->m, lr);
    return SN_OK;
}

static sn_status sched_train_begin(void *user, sn_model *m) {
    sched_cb *c = user;
    c->m = m;
    m->train->log_lr = true;
    return sched_apply(c);
}

static sn_status sched_batch_end(void *user, const sn_logs *l, bool *stop) {
    return sched_apply(user);
}

static sn_status sched_epoch_begin(void *user, int epoch, int epochs) {
    return ((sched_cb *)user)->m ? sched_apply(user) : SN_OK;
}

sn_callback *sn_callback_lr_schedule(const sn_lr_schedule *s) {
    if (sn_lr_schedule_check(s) != SN_OK) return NULL;
    sched_cb *c = sn_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->s = *s;
    c->base.cb = (sn_callback){.user = c, .on_train_begin = sched_train_begin,
                               .on_epoch_begin = sched_epoch_begin,
                               .on_batch_end = sched_batch_end};
    return &c->base.cb;
}

/* ---- LearningRateScheduler ------------------------------------------------------------- */

static sn_status lrs_train_begin(void *user, sn_model *m) {
    sched_cb *c = user;
    c->m = m;
    m->train->log_lr = true;
    return SN_OK;
}

static sn_status lrs_epoch_begin(void *user, int epoch, int epochs) {
    sched_cb *c = user;
    if (!c->m) return SN_OK;
    double lr = c->fn(c->user, epoch, f32(c->m->train->opts.optimizer.learning_rate));
    if (!(lr > 0) || !isfinite(lr))
        return sn_errorf(SN_ERR_INVALID, "LearningRateScheduler: the schedule returned %g for "
                         "epoch %d; a rate must be finite and > 0", lr, epoch);
    sn_train_set_lr(c->m, f32(lr));
    return SN_OK;
}

sn_callback *sn_callback_lr_scheduler(sn_lr_schedule_fn schedule, void *user) {
    if (!schedule) {
        sn_errorf(SN_ERR_INVALID, "lr_scheduler: the schedule function is NULL");
        return NULL;
    }
    sched_cb *c = sn_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fn = schedule;
    c->user = user;
    c->base.cb = (sn_callback){.user = c, .on_train_begin = lrs_train_begin,
                               .on_epoch_begin = lrs_epoch_begin};
    return &c->base.cb;
}

/* ---- ReduceLROnPlateau (keras/src/callbacks/reduce_lr_on_plateau.py) ---------------------- */

sn_reduce_lr_opts sn_reduce_lr_defaults(void) {
    return (sn_reduce_lr_opts){.monitor = "val_loss", .factor = 0.1, .patience = 10,
                               .mode = "auto", .min_delta = 1e-4, .cooldown = 0, .min_lr = 0};
}

typedef struct plateau {
    sn_cb_base base;
    sn_model *m;
    char monitor[64];
    double factor, min_delta, min_lr;
    int patience, cooldown;
    bool maximize;
    double best;
    int wait, cooldown_counter;
} plateau;

static sn_status plateau_train_begin(void *user, sn_model *m) {
    plateau *p = user;
    p->m = m;
    m->train->log_lr = true;
    p->best = p->maximize ? -INFINITY : INFINITY; /* _reset() */
    p->wait = p->cooldown_counter = 0;
    return SN_OK;
}

static sn_status plateau_epoch_end(void *user, const sn_logs *l, bool *stop) {
    plateau *p = user;
    const double *v = sn_logs_find(l, p->monitor);
    if (!v) {
        char avail[256] = "";
        size_t len = 0;
        for (int i = 0; i < l->n && len < sizeof avail; i++)
            len += (size_t)snprintf(avail + len, sizeof avail - len, "%s%s", i ? ", " : "",
                                    l->names[i]);
        return sn_errorf(SN_ERR_NOT_FOUND, "ReduceLROnPlateau: monitor '%s' is not in the logs "
                         "(available: %s)", p->monitor, avail);
    }
    double cur = *v;
    if (p->cooldown_counter > 0) {
        p->cooldown_counter--;
        p->wait = 0;
    }
    bool better = p->maximize ? cur > p->best + p->min_delta : cur < p->best - p->min_delta;
    if (better) {
        p->best = cur;
        p->wait = 0;
    } else if (p->cooldown_counter <= 0) {
        p->wait++;
        if (p->wait >= p->patience) {
            double old = f32(p->m->train->opts.optimizer.learning_rate);
            if (old > f32(p->min_lr)) {
                double lr = old * p->factor;
                if (lr < p->min_lr) lr = p->min_lr;
                sn_train_set_lr(p->m, f32(lr));
                p->cooldown_counter = p->cooldown;
                p->wait = 0;
            }
        }
    }
    return SN_OK;
}

static int plateau_get(void *user, double *v, int cap) {
    plateau *p = user;
    if (cap < 3) return 0;
    v[0] = p->best;
    v[1] = p->wait;
    v[2] = p->cooldown_counter;
    return 3;
}

static sn_status plateau_set(void *user, const double *v, int n) {
    plateau *p = user;
    if (n != 3)
        return sn_errorf(SN_ERR_FORMAT, "ReduceLROnPlateau: a state of %d values (expected "
                         "best, wait, cooldown)", n);
    p->best = v[0];
    p->wait = (int)v[1];
    p->cooldown_counter = (int)v[2];
    return SN_OK;
}

sn_callback *sn_callback_reduce_lr_on_plateau(const sn_reduce_lr_opts *o) {
    sn_reduce_lr_opts d = sn_reduce_lr_defaults();
    if (!o) o = &d;
    if (check_mode("ReduceLROnPlateau", o->mode, o->monitor) != SN_OK) return NULL;
    if (!(o->factor > 0 && o->factor < 1) || o->patience < 0 || o->cooldown < 0 ||
        !(o->min_lr >= 0) || !isfinite(o->min_lr) || !isfinite(o->min_delta)) {
        sn_errorf(SN_ERR_INVALID, "ReduceLROnPlateau: factor %g (in (0, 1)), patience %d and "
                  "cooldown %d (>= 0), min_lr %g (>= 0), min_delta %g (finite)", o->factor,
                  o->patience, o->cooldown, o->min_lr, o->min_delta);
        return NULL;
    }
    plateau *p = sn_calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->monitor, sizeof p->monitor, "%s", o->monitor);
    p->factor = o->factor;
    p->min_delta = fabs(o->min_delta);
    p->min_lr = o->min_lr;
    p->patience = o->patience;
    p->cooldown = o->cooldown;
    p->maximize = mode_max(o->mode, o->monitor);
    p->base.cb = (sn_callback){.user = p, .on_train_begin = plateau_train_begin,
                               .on_epoch_end = plateau_epoch_end,
                               .state_name = "reduce_lr_on_plateau", .get_state = plateau_get,
                               .set_state = plateau_set};
    return &p->base.cb;
}
