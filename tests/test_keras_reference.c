/* sinter's activations and initializers against real Keras 3 (TensorFlow backend), from the
 * reference venv of scripts/pyenv.sh (exit 77, SKIPPED, when it cannot be made):
 *   - every activation by name and its derivative (TensorFlow's gradient kernels, kinks
 *     included: leaky_relu at 0, elu at 0, relu6 at 0 and 6) on a grid over [-12, 8], against
 *     sinter's fast f32 kernels through the graph;
 *   - each initializer's statistics on a Dense [200, 300] and a Conv2D [3, 3, 64, 32] kernel:
 *     variance within 4% (the sampling error of 18-60K draws is ~1%), and the range (the
 *     uniform limit, the truncation at two standard deviations) within 3%. The values differ
 *     (another RNG); the distributions must not. */
#include <stdlib.h>
#include <sys/wait.h>

#include "nn/layers/initializers.h"
#include "nn/nn_impl.h"
#include "sn_test.h"

/* The venv's python (its path in buf), or exit code 77 / 1. */
static int find_python(char *buf, size_t cap) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s/scripts/pyenv.sh' '%s'", SN_SOURCE_DIR, SN_BINARY_DIR);
    FILE *p = popen(cmd, "r");
    if (!p) return 1;
    buf[0] = 0;
    char line[1024];
    while (fgets(line, sizeof line, p)) snprintf(buf, cap, "%s", line);
    int st = pclose(p);
    buf[strcspn(buf, "\n")] = 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) return 77;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 && buf[0] ? 0 : 1;
}

static sn_activation act_of(const char *name) {
    sn_activation a = SN_ACT_NONE;
    if (sn_activation_from_name(name, &a) != SN_OK) return (sn_activation)-1;
    return a;
}

/* f(x) and f'(x) by sinter in f32 (fast kernels) for one value. */
static bool sinter_act(sn_activation act, float x, float *y, float *dy) {
    sn_graph *g = sn_graph_new();
    sn_node xn = sn_input(g, "x", SN_F32, &(sn_shape){.ndim = 1, .dim = {1}});
    sn_node yn = sn_apply_activation(g, xn, act);
    sn_node loss = sn_reduce_sum(g, yn, 0, NULL, false), dx;
    bool ok = sn_gradients(g, loss, 1, &xn, &dx) == SN_OK;
    sn_plan *p = NULL;
    sn_node t[2] = {yn, dx};
    ok = ok && sn_plan_new(&p, g, 2, t, NULL) == SN_OK;
    if (ok) {
        *(float *)sn_plan_buffer(p, xn) = x;
        ok = sn_plan_run(p, 1, NULL, NULL) == SN_OK;
        *y = *(float *)sn_plan_buffer(p, yn);
        *dy = *(float *)sn_plan_buffer(p, dx);
    }
    sn_plan_free(p);
    sn_graph_free(g);
    return ok;
}

int main(void) {
    char py[1024];
    int r = find_python(py, sizeof py);
    if (r == 77) {
        printf("test_keras_reference: SKIPPED: no Keras reference venv (PyPI unreachable?)\n");
        return 77;
    }
    CHECK(r == 0, "scripts/pyenv.sh failed (see %s/pyenv.log)", SN_BINARY_DIR);
    if (r != 0) return sn_test_finish("test_keras_reference");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/py/keras_activations_ref.py' 2>/dev/null", py, SN_SOURCE_DIR);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL, "running %s", cmd);
    if (!p) return sn_test_finish("test_keras_reference");
    char line[512];
    int n_act = 0, n_grad = 0, n_init = 0, bad_act = 0, bad_grad = 0;
    while (fgets(line, sizeof line, p)) {
        char kind[16], name[64];
        double a, b, c, d, e;
        int rank;
        if (sscanf(line, "%15s %63s", kind, name) != 2) continue;
        if (!strcmp(kind, "act") || !strcmp(kind, "grad")) {
            if (sscanf(line, "%*s %*s %lf %lf", &a, &b) != 2) continue;
            sn_activation act = act_of(name);
            CHECK((int)act >= 0, "unknown activation '%s' from Keras", name);
            float y = 0, dy = 0;
            if ((int)act < 0 || !sinter_act(act, (float)a, &y, &dy)) continue;
            bool grad = kind[0] == 'g';
            double got = grad ? dy : y;
            /* float32 on both sides; TensorFlow's erf/exp differ from ours by a few ulp */
            bool ok = fabs(got - b) <= 2e-6 * (1 + fabs(b));
            if (!ok && (grad ? bad_grad : bad_act) < 3)
                fprintf(stderr, "  %s %s(%g): sinter %.9g, keras %.9g\n", kind, name, a, got, b);
            if (grad) {
                n_grad++;
                bad_grad += !ok;
            } else {
                n_act++;
                bad_act += !ok;
            }
        } else if (!strcmp(kind, "init")) {
            if (sscanf(line, "%*s %*s %d %lf %lf %lf %lf", &rank, &a, &b, &c, &d) != 5) continue;
            sn_initializer in;
            CHECK_OK(sn_initializer_from_name(name, &in));
            sn_shape s = rank == 2 ? (sn_shape){.ndim = 2, .dim = {200, 300}}
                                   : (sn_shape){.ndim = 4, .dim = {3, 3, 64, 32}};
            int64_t n = sn_shape_numel(&s);
            double *v = malloc(sizeof *v * (size_t)n);
            sn_rng rng;
            sn_rng_init(&rng, 1, 0);
            CHECK_OK(sn_init_fill(&in, SN_INIT_ZEROS, v, SN_F64, &s, 0, 0, &rng, name));
            double mean = 0, var = 0, mn = INFINITY, mx = -INFINITY;
            for (int64_t i = 0; i < n; i++) {
                mean += v[i];
                mn = fmin(mn, v[i]);
                mx = fmax(mx, v[i]);
            }
            mean /= (double)n;
            for (int64_t i = 0; i < n; i++) var += (v[i] - mean) * (v[i] - mean);
            var /= (double)n;
            free(v);
            e = sqrt(b);
            CHECK(fabs(var / b - 1) < 0.04, "%s rank %d: variance %.5g, keras %.5g", name, rank, var, b);
            CHECK(fabs(mean - a) < 5 * e / sqrt((double)n), "%s rank %d: mean %.3g, keras %.3g", name, rank, mean, a);
            /* unbounded normals: extremes are noisy, compare only bounded draws' ranges */
            bool bounded = strcmp(name, "random_normal") != 0 && strcmp(name, "orthogonal") != 0;
            if (bounded)
                CHECK(fabs(mn - c) < 0.03 * fabs(c) && fabs(mx - d) < 0.03 * fabs(d),
                      "%s rank %d: range [%.5g, %.5g], keras [%.5g, %.5g]", name, rank, mn, mx, c, d);
            n_init++;
        }
    }
    int st = pclose(p);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the Keras script failed (exit %d)", WEXITSTATUS(st));
    CHECK(n_act >= 6 * 160 && n_grad == n_act, "values read: %d activations, %d gradients", n_act, n_grad);
    CHECK(n_init == 20, "initializer rows read: %d", n_init);
    CHECK(bad_act == 0, "%d of %d activation values differ from Keras", bad_act, n_act);
    CHECK(bad_grad == 0, "%d of %d derivatives differ from TensorFlow's", bad_grad, n_grad);
    printf("compared %d activation values, %d derivatives, %d initializer distributions with Keras\n", n_act,
           n_grad, n_init);
    return sn_test_finish("test_keras_reference");
}
