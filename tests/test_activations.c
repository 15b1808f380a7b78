/* The activation ops of graph/op_activation.c (gelu, silu, elu, leaky_relu, relu6):
 *   - values against numbers computed independently (Python's math.erf, exp, by hand);
 *   - finite-difference gradients in double precision through the graph (reference kernels),
 *     with inputs kept at least 0.05 away from the kinks (leaky_relu, elu and relu6 at 0,
 *     relu6 at 6), where the derivative is undefined; and the kink values themselves as
 *     TensorFlow defines them;
 *   - the fast f32 kernels against the reference, per ISA variant (AVX-512, AVX2, generic;
 *     the variants must agree bit for bit), over loop tails, large inputs split over threads,
 *     the tails of gelu/silu (relative error) and special values (NaN, infinities). */
#include <stdlib.h>

#include "backend/kernel.h"
#include "graph/graph_impl.h"
#include "fd_test_util.h"
#include "sn_test.h"

#define S1(a) {.ndim = 1, .dim = {a}}

typedef struct act_case {
    const char *name;
    sn_op op, grad_op;
    double alpha;
} act_case;

static const act_case acts[] = {
    {"gelu", SN_OP_GELU, SN_OP_GELU_GRAD, 0},
    {"silu", SN_OP_SILU, SN_OP_SILU_GRAD, 0},
    {"elu", SN_OP_ELU, SN_OP_ELU_GRAD, 1.0},
    {"elu alpha 0.5", SN_OP_ELU, SN_OP_ELU_GRAD, 0.5},
    {"leaky_relu", SN_OP_LEAKY_RELU, SN_OP_LEAKY_RELU_GRAD, 0.2},
    {"relu6", SN_OP_RELU6, SN_OP_RELU6_GRAD, 0},
};
enum { N_ACTS = sizeof acts / sizeof acts[0] };

static sn_node build(sn_graph *g, const act_case *a, sn_node x) {
    switch (a->op) {
    case SN_OP_GELU: return sn_gelu(g, x);
    case SN_OP_SILU: return sn_silu(g, x);
    case SN_OP_ELU: return sn_elu(g, x, a->alpha);
    case SN_OP_LEAKY_RELU: return sn_leaky_relu(g, x, a->alpha);
    default: return sn_relu6(g, x);
    }
}

/* ---- values -------------------------------------------------------------------------------- */
static void test_values(void) {
    /* x and the expected f(x) per op; gelu from 0.5 x (1 + math.erf(x / sqrt(2))), silu from
     * x / (1 + math.exp(-x)), elu from math.expm1 */
    const double x[] = {-3.0, -1.0, -1e-3, 0.0, 0.5, 2.0, 7.0};
    const double want[N_ACTS][7] = {
        {-0.00404969409489031, -0.15865525393145707, -0.000499601057786089, 0, 0.34573123063700656,
         1.9544997361036416, 6.999999999991041},
        {-0.14227761953270035, -0.2689414213699951, -0.0004997500000208334, 0, 0.3112296656009273,
         1.7615941559557646, 6.993622641639196},
        {-0.950212931632136, -0.6321205588285577, -0.0009995001666250085, 0, 0.5, 2, 7},
        {-0.475106465816068, -0.31606027941427883, -0.0004997500833125042, 0, 0.5, 2, 7},
        {-0.6, -0.2, -2e-4, 0, 0.5, 2, 7},
        {0, 0, 0, 0, 0.5, 2, 6},
    };
    for (int k = 0; k < N_ACTS; k++) {
        sn_graph *g = sn_graph_new();
        sn_node xn = sn_const(g, SN_F64, &(sn_shape)S1(7), x);
        sn_node y = build(g, &acts[k], xn);
        sn_tensor *t = NULL;
        CHECK_OK(sn_eval(g, y, NULL, &t));
        if (t) {
            const double *v = sn_tensor_data(t);
            for (int i = 0; i < 7; i++)
                CHECK(fabs(v[i] - want[k][i]) <= 1e-9 * fmax(1, fabs(want[k][i])) + 1e-15,
                      "%s(%g) = %.15g, expected %.15g", acts[k].name, x[i], v[i], want[k][i]);
        }
        sn_tensor_free(t);
        sn_graph_free(g);
    }
    /* bad inputs: an int tensor, a non-finite alpha */
    sn_graph *g = sn_graph_new();
    int32_t iv[2] = {1, 2};
    sn_node xi = sn_const(g, SN_I32, &(sn_shape)S1(2), iv);
    CHECK(sn_gelu(g, xi) == SN_NONE && strstr(sn_last_error(), "gelu: needs a float input, got int32"),
          "gelu on int: '%s'", sn_last_error());
    sn_graph_free(g);
    g = sn_graph_new();
    sn_node xf = sn_scalar(g, SN_F32, 1);
    CHECK(sn_leaky_relu(g, xf, NAN) == SN_NONE && strstr(sn_last_error(), "leaky_relu: alpha nan"),
          "leaky_relu alpha NaN: '%s'", sn_last_error());
    sn_graph_free(g);
}

/* ---- gradients ------------------------------------------------------------------------------- */
/* loss = sum(f(x) * r); d loss / d x against central differences (eps 1e-6), tolerance per op:
 * 1e-7 relative (a pointwise op, |loss| ~ 10, so rounding noise ~1e-9). */
static void test_gradients(void) {
    enum { N = 64 };
    sn_rng rng;
    sn_rng_init(&rng, 3, 0);
    for (int k = 0; k < N_ACTS; k++) {
        sn_graph *g = sn_graph_new();
        sn_node x = sn_input(g, "x", SN_F64, &(sn_shape)S1(N));
        double r[N];
        for (int i = 0; i < N; i++) r[i] = sn_rng_normal(&rng);
        sn_node y = build(g, &acts[k], x);
        sn_node loss = sn_reduce_sum(g, sn_mul(g, y, sn_const(g, SN_F64, &(sn_shape)S1(N), r)), 0,
                                     NULL, false);
        sn_node dx;
        CHECK_OK(sn_gradients(g, loss, 1, &x, &dx));
        CHECK(strcmp(sn_node_op_name(g, dx), "mul") != 0, "%s: gradient op %s", acts[k].name,
              sn_node_op_name(g, dx));
        sn_plan *p = NULL;
        sn_node t[2] = {loss, dx};
        CHECK_OK(sn_plan_new(&p, g, 2, t, NULL));
        if (!p) {
            sn_graph_free(g);
            continue;
        }
        double *xv = sn_plan_buffer(p, x);
        /* spread over [-8, 8] (both tails of gelu/silu, both sides of relu6's 6), each at
         * least 0.05 from 0 and from 6 */
        for (int i = 0; i < N; i++) {
            double v = -8.0 + 16.0 * (i + 0.5) / N + 0.1 * sn_rng_normal(&rng);
            if (fabs(v) < 0.05) v = v < 0 ? -0.05 : 0.05;
            if (fabs(v - 6) < 0.05) v = v < 6 ? 5.95 : 6.05;
            xv[i] = v;
        }
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        double ga[N];
        memcpy(ga, sn_plan_buffer(p, dx), sizeof ga);
        double worst = 0;
        int bad = fd_check(p, loss, xv, ga, N, 1e-7, acts[k].name, &worst);
        CHECK(bad == 0, "%s: %d gradient entries off (worst %.3g)", acts[k].name, bad, worst);
        if (bad == 0) printf("ok  grad %-14s worst relative error %.2e\n", acts[k].name, worst);
        sn_plan_free(p);
        sn_graph_free(g);
    }
}

/* At the kinks the gradient is TensorFlow's choice: leaky_relu alpha at 0, relu6 0 at 0 and
 * at 6, elu 1 at 0. */
static void test_kinks(void) {
    struct { int act; double x, want; } c[] = {
        {4, 0.0, 0.2}, {5, 0.0, 0.0}, {5, 6.0, 0.0}, {2, 0.0, 1.0}, {3, 0.0, 1.0},
        {0, 0.0, 0.5}, {1, 0.0, 0.5},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        for (int f32 = 0; f32 < 2; f32++) {
            const act_case *a = &acts[c[i].act];
            sn_graph *g = sn_graph_new();
            sn_dtype dt = f32 ? SN_F32 : SN_F64;
            sn_node x = sn_input(g, "x", dt, &(sn_shape)S1(1));
            sn_node loss = sn_reduce_sum(g, build(g, a, x), 0, NULL, false), dx;
            CHECK_OK(sn_gradients(g, loss, 1, &x, &dx));
            sn_plan *p = NULL;
            CHECK_OK(sn_plan_new(&p, g, 1, &dx, NULL));
            if (p) {
                if (f32) *(float *)sn_plan_buffer(p, x) = (float)c[i].x;
                else *(double *)sn_plan_buffer(p, x) = c[i].x;
                CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
                double got = f32 ? *(float *)sn_plan_buffer(p, dx) : *(double *)sn_plan_buffer(p, dx);
                CHECK(fabs(got - c[i].want) < 1e-7, "%s'(%g) %s = %g, expected %g", a->name, c[i].x,
                      f32 ? "f32" : "f64", got, c[i].want);
            }
            sn_plan_free(p);
            sn_graph_free(g);
        }
}

/* ---- fast kernels against the reference --------------------------------------------------------- */
typedef struct call {
    sn_attrs attr; /* c.attr points here */
    sn_kcall c;
} call;

static void call_init(call *t, const act_case *a, bool grad, int64_t n, float *x, float *dy, float *out) {
    memset(t, 0, sizeof *t);
    t->c.op = grad ? a->grad_op : a->op;
    t->c.y.dtype = SN_F32;
    t->c.y.shape = (sn_shape)S1(n);
    t->attr.act.alpha = a->alpha;
    t->c.attr = &t->attr;
    t->c.n_in = grad ? 2 : 1;
    const float *ins[2] = {x, dy};
    for (int i = 0; i < t->c.n_in; i++) {
        t->c.x[i].dtype = SN_F32;
        t->c.x[i].shape = t->c.y.shape;
        t->c.in[i] = ins[i];
    }
    t->c.out = out;
}

static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 6.0f, 5.9999995f, 6.0000005f,
                                 1e-40f, -1e-40f, -1e-30f, -0.4999f, -0.5f, -0.5001f, 88.0f, -88.0f,
                                 -100.0f, 100.0f, -1e6f, 1e6f, 3.4e38f, -3.4e38f, -13.0f, -9.0f};

/* |fast - ref| <= 1e-5 (1 + |ref|), and for gelu/silu in their negative tail (x < -3, values
 * down to ~1e-31) a relative 3e-5 too: there the exponent -x^2 / 2 (down to -72) is itself a
 * float with an ulp of 8e-6, so e^(-x^2 / 2) cannot be closer than that relative step (1.1e-5
 * measured at x = -11.7); NaN must match NaN, infinities exactly. */
static int compare(const char *what, const float *x, const float *got, const float *want, int64_t n,
                   bool tail) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        bool ok;
        if (isnan(w) || isinf(w)) ok = (isnan(w) && isnan(g)) || g == w;
        else ok = fabs(g - w) <= 1e-5 * (1 + fabs(w));
        if (ok && tail && x[i] < -3 && fabs(w) > 1e-35) ok = fabs(g - w) <= 3e-5 * fabs(w);
        if (!ok && bad++ < 4)
            fprintf(stderr, "  %s x=%.9g: fast %.9g ref %.9g\n", what, x[i], g, w);
    }
    return bad;
}

static void test_fast(void) {
    static const char *isas[] = {"avx512", "avx2", "generic"};
    const int64_t sizes[] = {1, 15, 17, 1000, 200003};
    const int64_t nmax = 200003;
    float *x = malloc(sizeof *x * nmax), *dy = malloc(sizeof *dy * nmax);
    float *ref = malloc(sizeof *ref * nmax), *got = malloc(sizeof *got * nmax);
    float *first = malloc(sizeof *first * nmax);
    sn_rng rng;
    sn_rng_init(&rng, 11, 0);
    for (int64_t i = 0; i < nmax; i++) {
        x[i] = (float)(-12.0 + 20.0 * sn_rng_uniform(&rng));
        dy[i] = (float)sn_rng_normal(&rng);
    }
    const sn_kernel_table *rt = sn_ref_kernels();
    int variants = 0;
    for (int k = 0; k < N_ACTS; k++)
        for (int grad = 0; grad < 2; grad++)
            for (int s = 0; s < 6; s++) {
                bool sp = s == 5;
                int64_t n = sp ? (int64_t)(sizeof specials / sizeof specials[0]) : sizes[s];
                const float *xs = sp ? specials : x;
                call t;
                call_init(&t, &acts[k], grad, n, (float *)xs, dy, ref);
                const sn_kernel *rk = rt->k[t.c.op];
                CHECK(rk && strcmp(rk->impl, "ref") == 0, "no reference kernel for %s", acts[k].name);
                if (!rk) continue;
                CHECK_OK(rk->run(&t.c));
                for (int v = 0; v < 3; v++) {
                    setenv("SN_CPU_ISA", isas[v], 1);
                    sn_kernel_table fast = *rt;
                    sn_cpu_register_activation(&fast);
                    const sn_kernel *fk = sn_kernel_select(&fast, &t.c);
                    CHECK(fk && strcmp(fk->impl, "ref") != 0, "%s: the fast kernel declined", acts[k].name);
                    if (!fk || strcmp(fk->impl, "ref") == 0) continue;
                    t.c.out = got;
                    memset(got, 0xff, sizeof *got * (size_t)n);
                    CHECK_OK(fk->run(&t.c));
                    t.c.out = ref;
                    char what[96];
                    snprintf(what, sizeof what, "%s%s [%lld%s] %s", acts[k].name, grad ? " grad" : "",
                             (long long)n, sp ? " specials" : "", fk->impl);
                    int bad = compare(what, xs, got, ref, n, !grad && (k == 0 || k == 1));
                    CHECK(bad == 0, "%s: %d values differ from the reference", what, bad);
                    if (v == 0) {
                        memcpy(first, got, sizeof *got * (size_t)n);
                    } else {
                        CHECK(memcmp(first, got, sizeof *got * (size_t)n) == 0,
                              "%s: differs from the first variant's bits", what);
                        variants++;
                    }
                }
            }
    unsetenv("SN_CPU_ISA");
    printf("fast vs reference: %d variant comparisons\n", variants);
    /* f64 and mismatched shapes are left to the reference */
    call t;
    call_init(&t, &acts[0], false, 4, x, dy, ref);
    t.c.y.dtype = SN_F64;
    const sn_kernel *fk = sn_kernel_select(sn_cpu_kernels(), &t.c);
    CHECK(fk && strcmp(fk->impl, "ref") == 0, "f64 gelu took '%s'", fk ? fk->impl : "none");
    free(x);
    free(dy);
    free(ref);
    free(got);
    free(first);
}

/* relu6's gradient on every pair of special x and special dy, each ISA variant against the
 * reference bit for bit (NaN matches NaN): TensorFlow's Relu6Grad dy * (0 < x < 6), so 0 at
 * x = 0 and at x = 6, dy for 0 < x < 6 (the smallest denormal too), dy * 0 elsewhere (a NaN
 * or infinite dy gives NaN outside (0, 6), a NaN x gives 0 * dy). The grid is 80 long, so
 * the vector body and its tail both see every value. */
static void test_relu6_grad_grid(void) {
    static const float xs[] = {-1.0f, -0.0f, 0.0f, 1e-45f, 3.0f, 5.9999995f, 6.0f, 6.0000005f,
                               NAN, INFINITY, -INFINITY, -1e-45f, 100.0f, 1.0f, 0.5f, 7.0f};
    static const float dys[] = {1.0f, -2.5f, 0.0f, NAN, INFINITY};
    enum { NX = sizeof xs / sizeof xs[0], ND = sizeof dys / sizeof dys[0], N = NX * ND };
    float x[N], dy[N], ref[N], got[N];
    for (int i = 0; i < N; i++) x[i] = xs[i % NX], dy[i] = dys[i / NX];
    const act_case *a = &acts[5];
    CHECK(a->grad_op == SN_OP_RELU6_GRAD, "acts[5] is %s, not relu6", a->name);
    call t;
    call_init(&t, a, true, N, x, dy, ref);
    CHECK_OK(sn_ref_kernels()->k[SN_OP_RELU6_GRAD]->run(&t.c));
    /* the reference itself, as TensorFlow defines it */
    for (int i = 0; i < N; i++) {
        bool in = x[i] > 0 && x[i] < 6;
        float want = in ? dy[i] : dy[i] * 0.0f;
        bool same = (isnan(want) && isnan(ref[i])) || want == ref[i];
        CHECK(same, "relu6 grad reference at x=%g dy=%g: %g, expected %g", x[i], dy[i], ref[i],
              want);
    }
    static const char *isas[] = {"avx512", "avx2", "generic"};
    for (int v = 0; v < 3; v++) {
        setenv("SN_CPU_ISA", isas[v], 1);
        sn_kernel_table fast = *sn_ref_kernels();
        sn_cpu_register_activation(&fast);
        const sn_kernel *fk = sn_kernel_select(&fast, &t.c);
        CHECK(fk && strcmp(fk->impl, "ref") != 0, "relu6 grad: the fast kernel declined");
        if (!fk || strcmp(fk->impl, "ref") == 0) continue;
        memset(got, 0xff, sizeof got);
        t.c.out = got;
        CHECK_OK(fk->run(&t.c));
        t.c.out = ref;
        int bad = 0;
        for (int i = 0; i < N; i++) {
            bool same = (isnan(ref[i]) && isnan(got[i])) || !memcmp(&ref[i], &got[i], sizeof(float));
            if (!same && bad++ < 4)
                fprintf(stderr, "  relu6 grad %s x=%g dy=%g: fast %g ref %g\n", fk->impl, x[i],
                        dy[i], got[i], ref[i]);
        }
        CHECK(bad == 0, "relu6 grad grid %s: %d of %d values differ from the reference", fk->impl,
              bad, N);
        if (!bad) printf("ok  relu6 grad grid %-8s %d values equal to the reference\n", fk->impl, N);
    }
    unsetenv("SN_CPU_ISA");
}

int main(void) {
    test_values();
    test_gradients();
    test_kinks();
    test_fast();
    test_relu6_grad_grid();
    return sn_test_finish("test_activations");
}
