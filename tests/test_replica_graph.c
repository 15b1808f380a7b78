/* A caller's graph run as one plan per replica (sinter/dist.h: sn_strategy_all_reduce_node,
 * sn_strategy_barrier_node, sn_strategy_run_plans), which the Python package's strategy.run
 * inside a traced function uses, and the public optimizer update (nn.h: sn_optimizer_update).
 *
 * Two replicas over two logical CPU devices share w [4]. Each step, replica r's loss is
 * sum(x_r * w) / 4 over its rows, so its gradient is the column sums of x_r / 4; the
 * all-reduce adds the replicas' gradients and losses in replica order, replica 0 applies SGD
 * (lr 0.5) and adds the summed loss to an accumulator, and a barrier ends each step. Three
 * steps in one call, a different batch each step from the feed: the weights, the
 * accumulator and the iteration count must equal the same arithmetic done here in double. */
#include <math.h>

#include "core/core.h"

#include "sinter/dist.h"
#include "sinter/nn.h"
#include "sn_test.h"

#define R 2
#define ROWS 2
#define STEPS 3

typedef struct feed {
    sn_node x[R];
    float data[STEPS][R][ROWS * 4];
    sn_replica_input in[R];
    int calls;
} feed;

static sn_status next(void *ctx, int64_t step, const sn_replica_input **in, int *n) {
    feed *f = ctx;
    for (int r = 0; r < R; r++)
        f->in[r] = (sn_replica_input){.replica = r, .node = f->x[r], .data = f->data[step][r],
                                      .bytes = sizeof f->data[step][r]};
    *in = f->in;
    *n = R;
    f->calls++;
    return SN_OK;
}

static void replicas_train(sn_strategy *s) {
    sn_graph *g = sn_graph_new();
    sn_shape s4 = {.ndim = 1, .dim = {4}}, s1 = {.ndim = 1, .dim = {1}}, xs = {.ndim = 2, .dim = {ROWS, 4}};
    sn_node w = sn_variable(g, "w", SN_F32, &s4, true);
    sn_node acc = sn_variable(g, "acc", SN_F32, &s1, false);
    sn_node it = sn_variable(g, "iterations", SN_I32, &s1, false);
    const float w0[4] = {1.0f, -2.0f, 0.5f, 3.0f};
    memcpy(sn_variable_data(g, w), w0, sizeof w0);
    feed f = {.calls = 0};
    sn_node grad[R], loss[R], red_g[R], red_l[R], bar[R];
    for (int r = 0; r < R; r++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", r);
        f.x[r] = sn_input(g, name, SN_F32, &xs);
        sn_node prod = sn_mul(g, f.x[r], w);
        loss[r] = sn_reshape(g, sn_div(g, sn_reduce_sum(g, prod, 0, NULL, false),
                                       sn_scalar(g, SN_F32, 4.0)), &s1);
        CHECK_OK(sn_gradients(g, loss[r], 1, &w, &grad[r]));
    }
    /* in one order on every replica: the gradient, then the loss */
    for (int r = 0; r < R; r++) CHECK_OK(sn_strategy_all_reduce_node(s, g, grad[r], r, &red_g[r]));
    for (int r = 0; r < R; r++) CHECK_OK(sn_strategy_all_reduce_node(s, g, loss[r], r, &red_l[r]));
    sn_optimizer_opts o = sn_optimizer_defaults(SN_SGD);
    o.learning_rate = 0.5;
    CHECK(sn_optimizer_slot_count(&o) == 0, "SGD without momentum has %d slots",
          sn_optimizer_slot_count(&o));
    sn_node up;
    CHECK_OK(sn_optimizer_update(g, &o, w, red_g[0], it, NULL, &up));
    sn_node add_acc = sn_assign_add(g, acc, red_l[0]);
    sn_node count = sn_assign_add(g, it, sn_scalar(g, SN_I32, 1));
    for (int r = 0; r < R; r++) CHECK_OK(sn_strategy_barrier_node(s, g, acc, r, &bar[r]));
    CHECK_OK(sn_graph_status(g));

    sn_plan *plans[R] = {NULL, NULL};
    sn_node t0[] = {up, add_acc, count, bar[0]};
    sn_node t1[] = {red_g[1], red_l[1], bar[1]};
    for (int r = 0; r < R; r++) {
        sn_plan_opts po = sn_plan_opts_defaults();
        po.device = sn_strategy_replica_device(s, r);
        CHECK_OK(sn_plan_new(&plans[r], g, r ? 3 : 4, r ? t1 : t0, &po));
    }
    if (!plans[0] || !plans[1]) goto out;

    /* the batches, and the same training in double */
    sn_rng rng;
    sn_rng_init(&rng, 7, 0);
    double wd[4], accd = 0;
    for (int k = 0; k < 4; k++) wd[k] = w0[k];
    for (int st = 0; st < STEPS; st++) {
        double gsum[4] = {0}, lsum = 0;
        for (int r = 0; r < R; r++)
            for (int i = 0; i < ROWS * 4; i++) {
                float v = (float)(sn_rng_uniform(&rng) * 2 - 1);
                f.data[st][r][i] = v;
                gsum[i % 4] += v / 4.0;
                lsum += v * wd[i % 4] / 4.0;
            }
        for (int k = 0; k < 4; k++) wd[k] -= 0.5 * gsum[k];
        accd += lsum;
    }
    CHECK_OK(sn_strategy_run_plans(s, plans, STEPS, next, &f));
    CHECK(f.calls == STEPS, "the feed was called %d times for %d steps", f.calls, STEPS);
    const float *wv = sn_variable_data(g, w);
    for (int k = 0; k < 4; k++)
        CHECK(fabs(wv[k] - wd[k]) < 1e-5, "w[%d] = %.7g after %d steps; expected %.7g", k,
              (double)wv[k], STEPS, wd[k]);
    const float *av = sn_variable_data(g, acc);
    CHECK(fabs(av[0] - accd) < 1e-5, "accumulated loss %.7g; expected %.7g", (double)av[0], accd);
    const int32_t *iv = sn_variable_data(g, it);
    CHECK(iv[0] == STEPS, "iterations %d after %d steps", iv[0], STEPS);

    /* bad arguments name what is wrong */
    sn_node bad;
    CHECK_ERR(sn_strategy_all_reduce_node(s, g, grad[0], 2, &bad), SN_ERR_INVALID, "replica 2");
    CHECK_ERR(sn_strategy_barrier_node(s, g, acc, -1, &bad), SN_ERR_INVALID, "replica -1");
    sn_plan *half[R] = {plans[0], NULL};
    CHECK_ERR(sn_strategy_run_plans(s, half, 1, next, &f), SN_ERR_INVALID, "replica 1's plan");
    CHECK_ERR(sn_strategy_run_plans(s, plans, -1, next, &f), SN_ERR_INVALID, "steps -1");
out:
    for (int r = 0; r < R; r++) sn_plan_free(plans[r]);
    sn_graph_free(g);
}

/* sn_optimizer_update's Adam against Keras's formulas in double, two steps. */
static void adam_update(void) {
    sn_graph *g = sn_graph_new();
    sn_shape s3 = {.ndim = 1, .dim = {3}}, s1 = {.ndim = 1, .dim = {1}};
    sn_node w = sn_variable(g, "w", SN_F32, &s3, true);
    sn_node gr = sn_input(g, "g", SN_F32, &s3);
    sn_node it = sn_variable(g, "iterations", SN_I32, &s1, false);
    sn_optimizer_opts o = sn_optimizer_defaults(SN_ADAM);
    o.learning_rate = 0.01;
    CHECK(sn_optimizer_slot_count(&o) == 2, "Adam has %d slots", sn_optimizer_slot_count(&o));
    CHECK(!strcmp(sn_optimizer_slot_name(&o, 0), "momentum") &&
          !strcmp(sn_optimizer_slot_name(&o, 1), "velocity") && !sn_optimizer_slot_name(&o, 2),
          "Adam's slot names");
    sn_node slots[2] = {sn_variable(g, "m", SN_F32, &s3, false), sn_variable(g, "v", SN_F32, &s3, false)};
    sn_node up, none;
    int before = sn_graph_node_count(g);
    CHECK_OK(sn_optimizer_update(g, &o, w, gr, it, slots, &up));
    /* one update node and nothing else: the step count is the caller's, so no dead
     * assign_add is left in the graph for every traced update */
    CHECK(sn_graph_node_count(g) == before + 1, "sn_optimizer_update added %d nodes, expected 1",
          sn_graph_node_count(g) - before);
    CHECK_ERR(sn_optimizer_update(g, &o, w, gr, it, NULL, &none), SN_ERR_INVALID, "2 slot");
    sn_node count = sn_assign_add(g, it, sn_scalar(g, SN_I32, 1));
    sn_node tg[] = {up, count};
    sn_plan *p = NULL;
    CHECK_OK(sn_plan_new(&p, g, 2, tg, NULL));
    if (!p) {
        sn_graph_free(g);
        return;
    }
    const float w0[3] = {0.5f, -1.0f, 2.0f}, gs[2][3] = {{0.1f, -0.2f, 0.3f}, {-0.4f, 0.05f, 0.0f}};
    memcpy(sn_variable_data(g, w), w0, sizeof w0);
    double wd[3], m[3] = {0}, v[3] = {0};
    for (int k = 0; k < 3; k++) wd[k] = w0[k];
    for (int st = 0; st < 2; st++) {
        CHECK_OK(sn_plan_set_input(p, gr, gs[st], sizeof gs[st]));
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        double t = st + 1, alpha = 0.01 * sqrt(1 - pow(0.999, t)) / (1 - pow(0.9, t));
        for (int k = 0; k < 3; k++) {
            m[k] += (gs[st][k] - m[k]) * (1 - 0.9);
            v[k] += (gs[st][k] * (double)gs[st][k] - v[k]) * (1 - 0.999);
            wd[k] -= m[k] * alpha / (sqrt(v[k]) + 1e-7);
        }
    }
    const float *wv = sn_variable_data(g, w);
    for (int k = 0; k < 3; k++)
        CHECK(fabs(wv[k] - wd[k]) < 1e-6, "Adam w[%d] = %.8g; Keras's formula gives %.8g", k,
              (double)wv[k], wd[k]);
    sn_plan_free(p);
    sn_graph_free(g);
}

int main(void) {
    CHECK_OK(sn_device_configure_cpu(2));
    sn_strategy *s = NULL;
    CHECK_OK(sn_strategy_mirrored(2, NULL, &s));
    if (s) {
        CHECK(sn_strategy_local_replicas(s) == 2 && sn_strategy_shares_variables(s),
              "two CPU replicas sharing the variables");
        replicas_train(s);
        sn_strategy_free(s);
    }
    adam_update();
    return sn_test_finish("test_replica_graph");
}
