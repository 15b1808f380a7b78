/* Optimizers: three steps of each (SGD, SGD momentum, SGD nesterov, Adam, AdamW, RMSprop,
 * RMSprop momentum) on a tiny variable, against Keras's formulas evaluated here in double.
 * The loss sum(c * w + w^2 / 2) has gradient c + w, so it changes from step to step and
 * the slots' history matters. */
#include <math.h>
#include <string.h>

#include "nn/train/train_impl.h"
#include "sn_test.h"

#define N 4
static const float W0[N] = {0.5f, -1.0f, 2.0f, 0.0f};
static const float C[N] = {0.3f, -0.7f, 1.5f, 0.0f}; /* last: zero gradient at w = 0 */

/* Keras 3 (keras/src/optimizers/{sgd,adam,rmsprop}.py), in double. */
static void reference(const sn_optimizer_opts *o, int steps, double *w) {
    double m[N] = {0}, v[N] = {0};
    for (int i = 0; i < N; i++) w[i] = W0[i];
    for (int t = 1; t <= steps; t++) {
        for (int i = 0; i < N; i++) {
            double g = C[i] + w[i], lr = o->learning_rate;
            if (o->weight_decay > 0) w[i] = w[i] - w[i] * o->weight_decay * lr;
            switch (o->type) {
            case SN_SGD:
                if (o->momentum == 0) {
                    w[i] -= lr * g;
                } else {
                    m[i] = -g * lr + m[i] * o->momentum;
                    w[i] += o->nesterov ? -g * lr + m[i] * o->momentum : m[i];
                }
                break;
            case SN_ADAM:
            case SN_ADAMW: {
                double alpha = lr * sqrt(1 - pow(o->beta_2, t)) / (1 - pow(o->beta_1, t));
                m[i] += (g - m[i]) * (1 - o->beta_1);
                v[i] += (g * g - v[i]) * (1 - o->beta_2);
                w[i] -= m[i] * alpha / (sqrt(v[i]) + o->epsilon);
                break;
            }
            case SN_RMSPROP: {
                v[i] = o->rho * v[i] + (1 - o->rho) * g * g;
                double inc = lr * g / sqrt(v[i] + o->epsilon);
                if (o->momentum > 0) {
                    m[i] = o->momentum * m[i] + inc;
                    w[i] -= m[i];
                } else {
                    w[i] -= inc;
                }
                break;
            }
            }
        }
    }
}

static void check_optimizer(const char *label, sn_optimizer_opts o) {
    sn_graph *g = sn_graph_new();
    sn_shape s = sn_shape_make(1, (int64_t)N), s0 = {.ndim = 0};
    sn_node w = sn_variable(g, "w", SN_F32, &s, true);
    memcpy(sn_variable_data(g, w), W0, sizeof W0);
    sn_node c = sn_const(g, SN_F32, &s, C);
    sn_node loss = sn_reduce_sum(
        g, sn_add(g, sn_mul(g, c, w), sn_mul(g, sn_scalar(g, SN_F32, 0.5), sn_mul(g, w, w))), 0,
        NULL, false);
    sn_node grad, slots[SN_OPTIM_MAX_SLOTS], upd[2];
    CHECK_OK(sn_gradients(g, loss, 1, &w, &grad));
    CHECK_OK(sn_optimizer_create_slots(g, &o, 1, &w, slots));
    sn_node it = sn_variable(g, "iterations", SN_I32, &s0, false);
    CHECK_OK(sn_optimizer_apply(g, &o, 1, &w, &grad, slots, it, upd));
    CHECK(sn_graph_status(g) == SN_OK, "%s: graph: %s", label, sn_last_error());
    sn_plan *p = NULL;
    CHECK_OK(sn_plan_new(&p, g, 2, upd, NULL));
    if (!p) {
        sn_graph_free(g);
        return;
    }
    for (int step = 1; step <= 3; step++) {
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        double ref[N];
        reference(&o, step, ref);
        const float *got = sn_variable_data(g, w);
        for (int i = 0; i < N; i++)
            CHECK(fabs(got[i] - ref[i]) <= 2e-6 * (1 + fabs(ref[i])),
                  "%s step %d w[%d] = %.9g, Keras formula gives %.9g", label, step, i, got[i],
                  ref[i]);
    }
    CHECK(*(const int32_t *)sn_variable_data(g, it) == 3, "%s: iterations %d after 3 steps",
          label, *(const int32_t *)sn_variable_data(g, it));
    /* The update moved every variable with a non-zero gradient. */
    CHECK(((const float *)sn_variable_data(g, w))[0] != W0[0], "%s: w[0] did not move", label);
    sn_plan_free(p);
    sn_graph_free(g);
}

static void test_defaults_and_names(void) {
    sn_optimizer_opts o;
    CHECK_OK(sn_optimizer_from_name("adam", &o));
    CHECK(o.type == SN_ADAM && o.learning_rate == 1e-3 && o.beta_1 == 0.9 && o.beta_2 == 0.999 &&
              o.epsilon == 1e-7 && o.weight_decay == 0,
          "adam defaults");
    CHECK_OK(sn_optimizer_from_name("SGD", &o));
    CHECK(o.type == SN_SGD && o.learning_rate == 0.01 && o.momentum == 0 && !o.nesterov,
          "sgd defaults");
    CHECK_OK(sn_optimizer_from_name("adamw", &o));
    CHECK(o.type == SN_ADAMW && o.weight_decay == 0.004, "adamw weight decay %g", o.weight_decay);
    CHECK_OK(sn_optimizer_from_name("rmsprop", &o));
    CHECK(o.type == SN_RMSPROP && o.rho == 0.9 && o.learning_rate == 1e-3, "rmsprop defaults");
    CHECK_ERR(sn_optimizer_from_name("adagrad", &o), SN_ERR_INVALID, "sgd, adam, adamw, rmsprop");
    o = sn_optimizer_defaults(SN_ADAM);
    o.learning_rate = 0;
    CHECK_ERR(sn_optimizer_validate(&o), SN_ERR_INVALID, "learning_rate 0");
    o = sn_optimizer_defaults(SN_ADAM);
    o.beta_1 = 1.0;
    CHECK_ERR(sn_optimizer_validate(&o), SN_ERR_INVALID, "beta_1 1");
    o = sn_optimizer_defaults(SN_SGD);
    o.momentum = -0.5;
    CHECK_ERR(sn_optimizer_validate(&o), SN_ERR_INVALID, "momentum -0.5");
    o.momentum = NAN;
    CHECK_ERR(sn_optimizer_validate(&o), SN_ERR_INVALID, "momentum");
}

int main(void) {
    test_defaults_and_names();
    sn_optimizer_opts o = sn_optimizer_defaults(SN_SGD);
    o.learning_rate = 0.1;
    check_optimizer("sgd", o);
    o.momentum = 0.9;
    check_optimizer("sgd momentum", o);
    o.nesterov = true;
    check_optimizer("sgd nesterov", o);
    o = sn_optimizer_defaults(SN_ADAM);
    o.learning_rate = 0.05;
    check_optimizer("adam", o);
    o = sn_optimizer_defaults(SN_ADAMW);
    o.learning_rate = 0.05;
    o.weight_decay = 0.1;
    check_optimizer("adamw", o);
    o = sn_optimizer_defaults(SN_RMSPROP);
    o.learning_rate = 0.05;
    check_optimizer("rmsprop", o);
    o.momentum = 0.5;
    check_optimizer("rmsprop momentum", o);
    return sn_test_finish("test_optimizers");
}
