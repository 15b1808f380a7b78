/* sinter train's Keras callbacks from flags (train_callbacks.h). */
#include "cli/train_callbacks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sn_cli_cb_modes[] = {"auto", "min", "max", NULL};
const char *const sn_cli_cb_schedules[] = {"none", "exponential", "piecewise", "cosine", NULL};

sn_cli_cb_flags sn_cli_cb_defaults(void) {
    sn_cli_cb_flags v;
    memset(&v, 0, sizeof v);
    sn_reduce_lr_opts r = sn_reduce_lr_defaults();
    v.mc_monitor = "val_loss";
    v.mc_mode = "auto";
    v.rl_patience = -1;
    v.rl_monitor = r.monitor;
    v.rl_factor = r.factor;
    v.rl_min_delta = r.min_delta;
    v.rl_min_lr = r.min_lr;
    v.sched = "none";
    v.decay_rate = 0.96;
    v.decay_steps = 1000;
    return v;
}

/* "a,b,c" -> up to cap numbers; returns how many, -1 on a bad one. */
static int parse_list(const char *s, double *out, int cap) {
    int n = 0;
    while (s && *s) {
        char *end = NULL;
        double x = strtod(s, &end);
        if (end == s || n == cap || (*end && *end != ',')) return -1;
        out[n++] = x;
        s = *end ? end + 1 : end;
    }
    return n;
}

static int add(const char *prog, sn_callback *cb, sn_callback **cbs, int *n, int cap) {
    if (!cb || *n >= cap) {
        fprintf(stderr, "%s: %s\n", prog, cb ? "too many callbacks" : sn_last_error());
        if (cb) sn_callback_free(cb);
        return 1;
    }
    cbs[(*n)++] = cb;
    return 0;
}

int sn_cli_make_callbacks(const char *prog, const sn_cli_cb_flags *v, double lr,
                          sn_callback **cbs, int *n, int cap) {
    if (v->mc_path) {
        sn_model_checkpoint_opts o = sn_model_checkpoint_defaults(v->mc_path);
        o.monitor = v->mc_monitor;
        o.mode = v->mc_mode;
        o.save_best_only = v->mc_best_only;
        o.save_weights_only = v->mc_weights_only;
        if (add(prog, sn_callback_model_checkpoint(&o), cbs, n, cap)) return 1;
    } else if (v->mc_best_only || v->mc_weights_only) {
        fprintf(stderr, "%s: --save-best-only and --save-weights-only need --model-checkpoint\n",
                prog);
        return 2;
    }
    if (v->rl_patience >= 0) {
        sn_reduce_lr_opts o = sn_reduce_lr_defaults();
        o.monitor = v->rl_monitor;
        o.factor = v->rl_factor;
        o.patience = (int)v->rl_patience;
        o.min_delta = v->rl_min_delta;
        o.cooldown = (int)v->rl_cooldown;
        o.min_lr = v->rl_min_lr;
        if (add(prog, sn_callback_reduce_lr_on_plateau(&o), cbs, n, cap)) return 1;
    }
    if (strcmp(v->sched, "none") != 0) {
        sn_lr_schedule s;
        memset(&s, 0, sizeof s);
        s.initial_learning_rate = lr;
        s.decay_steps = v->decay_steps;
        if (!strcmp(v->sched, "exponential")) {
            s.type = SN_LR_EXPONENTIAL_DECAY;
            s.decay_rate = v->decay_rate;
            s.staircase = v->staircase;
        } else if (!strcmp(v->sched, "cosine")) {
            s.type = SN_LR_COSINE_DECAY;
            s.alpha = v->alpha;
            s.warmup_steps = v->warmup_steps;
            s.warmup_target = v->warmup_target;
        } else {
            s.type = SN_LR_PIECEWISE_CONSTANT_DECAY;
            double b[SN_LR_MAX_BOUNDARIES + 1];
            int nb = parse_list(v->boundaries, b, SN_LR_MAX_BOUNDARIES);
            int nv = parse_list(v->values, s.values, SN_LR_MAX_BOUNDARIES + 1);
            if (nb < 1 || nv != nb + 1) {
                fprintf(stderr, "%s: --lr-schedule piecewise: --lr-boundaries '%s' (1 to %d "
                                "numbers) and --lr-values '%s' (one more)\n", prog,
                        v->boundaries ? v->boundaries : "", SN_LR_MAX_BOUNDARIES,
                        v->values ? v->values : "");
                return 2;
            }
            s.n_boundaries = nb;
            for (int i = 0; i < nb; i++) s.boundaries[i] = (int64_t)b[i];
        }
        if (sn_lr_schedule_check(&s) != SN_OK) {
            fprintf(stderr, "%s: --lr-schedule %s: %s\n", prog, v->sched, sn_last_error());
            return 2;
        }
        if (add(prog, sn_callback_lr_schedule(&s), cbs, n, cap)) return 1;
    }
    return 0;
}
