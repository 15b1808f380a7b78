/* sn_stepper: stateful stepping of a sequence model, and sampling from logits (generation).
 *
 * The stepper builds, in the model's graph, the inference forward pass of every layer with the
 * LSTM/GRU initial states as inputs and their final states as extra plan targets; after each
 * run the final states are copied (batch * units floats per state) into host arrays that feed
 * the next run. One plan per `steps` value: typically the prompt length once, then 1. */
#include <math.h>
#include <string.h>

#include "nn/nn_impl.h"

#define STEPPER_MAX_PLANS 4
#define STEPPER_MAX_STATES 16

typedef struct stepper_plan {
    int64_t steps;
    sn_plan *plan;
    sn_node x, out;
    sn_node sin[STEPPER_MAX_STATES], sout[STEPPER_MAX_STATES];
} stepper_plan;

struct sn_stepper {
    sn_model *m;
    int64_t batch, classes;
    int n_states;
    int64_t state_units[STEPPER_MAX_STATES];
    float *state[STEPPER_MAX_STATES]; /* [batch, units] each, owned */
    stepper_plan plans[STEPPER_MAX_PLANS];
    int n_plans;
};

void sn_stepper_free(sn_stepper *s) {
    if (!s) return;
    for (int i = 0; i < s->n_plans; i++) sn_plan_free(s->plans[i].plan);
    for (int i = 0; i < s->n_states; i++) free(s->state[i]);
    free(s);
}

void sn_stepper_reset(sn_stepper *s) {
    for (int i = 0; s && i < s->n_states; i++)
        memset(s->state[i], 0, sizeof(float) * (size_t)(s->batch * s->state_units[i]));
}

sn_status sn_stepper_new(sn_model *m, int64_t batch, sn_stepper **out) {
    if (!m || !out) return sn_errorf(SN_ERR_INVALID, "sn_stepper_new: NULL argument");
    *out = NULL;
    if (!m->built) return sn_errorf(SN_ERR_STATE, "stepper: model '%s' is not built", m->name);
    if (m->dtype != SN_F32 || m->input_shape.ndim != 1)
        return sn_errorf(SN_ERR_UNSUPPORTED, "stepper: model '%s' must be an f32 sequence model "
                         "with input shape (steps,), got rank %d", m->name, m->input_shape.ndim);
    if (batch < 1) return sn_errorf(SN_ERR_INVALID, "stepper: batch %lld, expected >= 1", (long long)batch);
    sn_stepper *s = sn_calloc(1, sizeof *s);
    if (!s) return SN_ERR_NOMEM;
    s->m = m;
    s->batch = batch;
    for (int i = 0; i < m->n_layers; i++) {
        const sn_layer *l = m->layers[i];
        for (int k = 0; k < sn_layer_state_count(l); k++) {
            if (s->n_states == STEPPER_MAX_STATES) {
                sn_stepper_free(s);
                return sn_errorf(SN_ERR_UNSUPPORTED, "stepper: more than %d recurrent states",
                                 STEPPER_MAX_STATES);
            }
            s->state_units[s->n_states] = l->rnn.units;
            s->state[s->n_states] = sn_calloc((size_t)(batch * l->rnn.units), sizeof(float));
            if (!s->state[s->n_states++]) {
                sn_stepper_free(s);
                return SN_ERR_NOMEM;
            }
        }
    }
    sn_shape os = m->layers[m->n_layers - 1]->out_shape;
    s->classes = os.dim[os.ndim - 1];
    *out = s;
    return SN_OK;
}

static sn_status build_plan(sn_stepper *s, int64_t steps, stepper_plan *sp) {
    sn_model *m = s->m;
    sn_graph *g = m->g;
    sp->steps = steps;
    sp->x = sn_input(g, "stepper_x", SN_F32, &(sn_shape){.ndim = 2, .dim = {s->batch, steps}});
    sn_node y = sp->x;
    int k = 0;
    for (int i = 0; i < m->n_layers && sn_graph_status(g) == SN_OK; i++) {
        sn_layer *l = m->layers[i];
        int ns = sn_layer_state_count(l);
        if (ns == 0) {
            y = l->vt->forward(l, g, y, false, NULL);
            continue;
        }
        for (int j = 0; j < ns; j++)
            sp->sin[k + j] = sn_input(g, "stepper_state", SN_F32,
                                      &(sn_shape){.ndim = 2, .dim = {s->batch, l->rnn.units}});
        y = sn_rnn_forward_states(l, g, y, sp->sin + k, sp->sout + k);
        k += ns;
    }
    SN_TRY(sn_error_context(sn_graph_status(g), "stepper: building model '%s'", m->name));
    sn_shape ys = sn_node_shape(g, y);
    if (ys.ndim == 3) { /* return_sequences: the last step */
        y = sn_slice(g, y, (int64_t[]){0, ys.dim[1] - 1, 0}, (int64_t[]){ys.dim[0], 1, ys.dim[2]});
        y = sn_reshape(g, y, &(sn_shape){.ndim = 2, .dim = {ys.dim[0], ys.dim[2]}});
    }
    sp->out = y;
    sn_node targets[1 + STEPPER_MAX_STATES] = {y};
    for (int j = 0; j < s->n_states; j++) targets[1 + j] = sp->sout[j];
    SN_TRY(sn_graph_status(g));
    sn_plan_opts po = sn_plan_opts_defaults();
    return sn_plan_new(&sp->plan, g, 1 + s->n_states, targets, &po);
}

sn_status sn_stepper_run(sn_stepper *s, const float *x, int64_t steps, const float **out,
                         int64_t *classes) {
    if (!s || !x || !out) return sn_errorf(SN_ERR_INVALID, "sn_stepper_run: NULL argument");
    if (steps < 1) return sn_errorf(SN_ERR_INVALID, "stepper: steps %lld, expected >= 1", (long long)steps);
    stepper_plan *sp = NULL;
    for (int i = 0; i < s->n_plans; i++)
        if (s->plans[i].steps == steps) sp = &s->plans[i];
    if (!sp) {
        if (s->n_plans == STEPPER_MAX_PLANS) { /* keep the most recent: drop the oldest */
            sn_plan_free(s->plans[0].plan);
            memmove(s->plans, s->plans + 1, sizeof s->plans[0] * (STEPPER_MAX_PLANS - 1));
            s->n_plans--;
        }
        sp = &s->plans[s->n_plans];
        memset(sp, 0, sizeof *sp);
        sn_status st = build_plan(s, steps, sp);
        if (st != SN_OK) {
            sn_plan_free(sp->plan);
            return st;
        }
        s->n_plans++;
    }
    SN_TRY(sn_plan_set_input(sp->plan, sp->x, x, sizeof(float) * (size_t)(s->batch * steps)));
    for (int j = 0; j < s->n_states; j++)
        SN_TRY(sn_plan_set_input(sp->plan, sp->sin[j], s->state[j],
                                 sizeof(float) * (size_t)(s->batch * s->state_units[j])));
    SN_TRY(sn_error_context(sn_plan_run(sp->plan, 1, NULL, NULL), "stepper"));
    for (int j = 0; j < s->n_states; j++) {
        const float *f = sn_plan_buffer(sp->plan, sp->sout[j]);
        if (!f) return sn_errorf(SN_ERR_STATE, "stepper: state %d has no buffer", j);
        memcpy(s->state[j], f, sizeof(float) * (size_t)(s->batch * s->state_units[j]));
    }
    *out = sn_plan_buffer(sp->plan, sp->out);
    if (classes) *classes = s->classes;
    return *out ? SN_OK : sn_errorf(SN_ERR_STATE, "stepper: the output has no buffer");
}

sn_status sn_sample_logits(const float *logits, int64_t n, double temperature, uint64_t seed,
                           uint64_t index, int32_t *out) {
    if (!logits || n < 1 || !out)
        return sn_errorf(SN_ERR_INVALID, "sn_sample_logits: no logits");
    if (!(temperature > 0) || isinf(temperature))
        return sn_errorf(SN_ERR_INVALID, "temperature %g, expected a finite value > 0", temperature);
    double mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++) mx = fmax(mx, (double)logits[i] / temperature);
    for (int64_t i = 0; i < n; i++) sum += exp((double)logits[i] / temperature - mx);
    uint32_t r[4];
    sn_philox(seed, 0x5A4D504C45ull /* "sample" stream */, index, r);
    double u = ((double)(r[0] >> 5) * 67108864.0 + (double)(r[1] >> 6)) / 9007199254740992.0;
    double target = u * sum, acc = 0;
    int32_t pick = (int32_t)(n - 1);
    for (int64_t i = 0; i < n; i++) {
        acc += exp((double)logits[i] / temperature - mx);
        if (acc > target) {
            pick = (int32_t)i;
            break;
        }
    }
    *out = pick;
    return SN_OK;
}
