/* The fast CPU kernels of the Transformer ops (backend/cpu/cpu_attention.c) against the
 * reference kernels (backend/ref/ref_attention.c, double, the score matrix materialised):
 * attention forward and backward at several context lengths (1, a tail shorter than a block,
 * exactly one block of 64, one past it, several blocks), causal on and off, a query block
 * after cached positions (q_offset), Tq != Tk, head sizes that are and are not a multiple of
 * the vector width; the backward both reading the forward call's log-sum-exp (as the planner
 * links them) and recomputing it alone; attention_cached (generation) against attention over
 * the concatenated keys; layer_norm and gelu_tanh with their gradients; attention with a mask
 * [B, Tq, Tk] (holes, key padding that masks whole blocks, queries that see no key).
 * f32 inputs; |cpu - ref| <= tol (1 + |ref|) with tol 2e-5 (sums of at most a few hundred f32
 * products of O(1) values, each rounded at 6e-8 relative). Exits non-zero on any mismatch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/kernel.h"
#include "kernel_test_util.h"

static sn_rng rng;
static int cases;

static float *rnd(int64_t n, double scale) {
    float *x = malloc(sizeof *x * (size_t)(n ? n : 1));
    if (!x) abort();
    for (int64_t i = 0; i < n; i++) x[i] = (float)(scale * sn_rng_normal(&rng));
    return x;
}

/* prepare (scratch as the executor gives it) and run; the state stays for the caller */
static void run_call(const sn_kernel *k, sn_kcall *c, void **scratch) {
    size_t sb = 0;
    c->scratch = NULL;
    c->scratch_bytes = 0;
    c->state = NULL;
    if (k->prepare && k->prepare(c, &sb) != SN_OK) FAIL("prepare %s: %s", k->impl, sn_last_error());
    *scratch = malloc(sb ? sb : 1);
    c->scratch = *scratch;
    c->scratch_bytes = sb;
    if (k->run(c) != SN_OK) FAIL("run %s: %s", k->impl, sn_last_error());
}

static void release(const sn_kernel *k, sn_kcall *c, void *scratch) {
    if (k->release) k->release(c);
    free(scratch);
}

static const sn_kernel *pick(const sn_kernel_table *t, const sn_kcall *c, const char *want_not) {
    const sn_kernel *k = sn_kernel_select(t, c);
    if (!k || (want_not && strcmp(k->impl, want_not) == 0))
        FAIL("op %d: no %s kernel (got %s)", (int)c->op, want_not ? "fast" : "reference",
             k ? k->impl : "none");
    return k;
}

static void compare(const char *what, const float *got, const float *want, int64_t n, double tol) {
    double worst = 0;
    int64_t at = -1;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / (1.0 + fabs((double)want[i]));
        if (!(e <= worst)) {
            worst = e;
            at = i;
        }
    }
    cases++;
    if (!(worst <= tol))
        FAIL("%s: element %lld is %.9g, reference %.9g (error %.3g > %.3g)", what, (long long)at,
             got[at], want[at], worst, tol);
}

/* mk: 0 no mask; 1 a mask [B, Tq, Tk]: batch row b sees keys below a length of its own
 * (whole key blocks masked: skipped), random holes (1 in 5), and queries 1 and Tq - 1 of the
 * last row masked from every key (Keras: the mean of the values). */
static float *mask_of(int mk, int64_t B, int64_t Tq, int64_t Tk) {
    if (!mk) return NULL;
    float *m = malloc(sizeof *m * (size_t)(B * Tq * Tk));
    if (!m) abort();
    for (int64_t b = 0; b < B; b++) {
        int64_t len = Tk - b * Tk / (2 * B) - (Tk > 70 ? 65 * b : 0);
        if (len < 1) len = 1;
        for (int64_t i = 0; i < Tq; i++)
            for (int64_t j = 0; j < Tk; j++)
                m[(b * Tq + i) * Tk + j] =
                    j < len && sn_rng_below(&rng, 5) != 0 &&
                    !(b == B - 1 && (i == 1 || i == Tq - 1));
    }
    return m;
}

/* Attention dropout for the cases below (rate 0: none): the CPU kernel draws its masks
 * inside the blocked loops, the reference per element with sn_dropout_keep, at this step. */
static double drop_rate;
static int64_t drop_step;

static void attention_case_m(int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t D,
                             bool causal, int64_t off, int mk) {
    char name[180];
    snprintf(name, sizeof name, "attention B%lld Tq%lld Tk%lld H%lld D%lld%s off %lld%s%s",
             (long long)B, (long long)Tq, (long long)Tk, (long long)H, (long long)D,
             causal ? " causal" : "", (long long)off, mk ? " masked" : "",
             drop_rate > 0 ? " dropout" : "");
    float *mask = mask_of(mk, B, Tq, Tk);
    sn_shape sm = {.ndim = 3, .dim = {B, Tq, Tk}};
    sn_shape sq = {.ndim = 4, .dim = {B, Tq, H, D}}, sk = {.ndim = 4, .dim = {B, Tk, H, D}};
    int64_t nq = sn_shape_numel(&sq), nk = sn_shape_numel(&sk);
    float *q = rnd(nq, 1.0), *k = rnd(nk, 1.0), *v = rnd(nk, 1.0), *dy = rnd(nq, 1.0);
    float *o[2], *g[3];
    for (int i = 0; i < 2; i++) o[i] = malloc(sizeof(float) * (size_t)nq);
    for (int i = 0; i < 3; i++) g[i] = malloc(sizeof(float) * (size_t)(nq + 2 * nk));
    const sn_kernel_table *tabs[2] = {sn_cpu_kernels(), sn_ref_kernels()};
    tcall f[2], b[3];
    const sn_kernel *fk[2], *bk[3];
    void *fs[2], *bs[3];
    for (int i = 0; i < 2; i++) {
        tc_init(&f[i], SN_OP_ATTENTION, SN_F32, sq);
        f[i].attr.attn.scale = 1.0 / sqrt((double)D);
        f[i].attr.attn.causal = causal;
        f[i].attr.attn.q_offset = off;
        f[i].attr.attn.drop_rate = drop_rate;
        f[i].attr.attn.drop_seed = 1234;
        f[i].attr.attn.drop_node = 17;
        f[i].c.step = drop_step;
        tc_input(&f[i], SN_F32, sq, q);
        tc_input(&f[i], SN_F32, sk, k);
        tc_input(&f[i], SN_F32, sk, v);
        if (mask) tc_input(&f[i], SN_F32, sm, mask);
        f[i].c.out = o[i];
        fk[i] = pick(tabs[i], &f[i].c, i == 0 ? "ref" : NULL);
        if (!fk[i]) return;
        run_call(fk[i], &f[i].c, &fs[i]);
    }
    compare(name, o[0], o[1], nq, 2e-5);
    /* b[0]: cpu linked to the cpu forward; b[1]: cpu alone; b[2]: reference */
    for (int i = 0; i < 3; i++) {
        tc_init(&b[i], SN_OP_ATTENTION_GRAD, SN_F32,
                (sn_shape){.ndim = 1, .dim = {nq + 2 * nk}});
        b[i].attr = f[0].attr;
        b[i].c.step = drop_step;
        tc_input(&b[i], SN_F32, sq, q);
        tc_input(&b[i], SN_F32, sk, k);
        tc_input(&b[i], SN_F32, sk, v);
        tc_input(&b[i], SN_F32, sq, o[1]);
        tc_input(&b[i], SN_F32, sq, dy);
        if (mask) tc_input(&b[i], SN_F32, sm, mask);
        b[i].c.out = g[i];
        if (i == 0) {
            b[i].c.fwd = &f[0].c;
            b[i].c.fwd_kernel = fk[0];
        }
        bk[i] = pick(i < 2 ? tabs[0] : tabs[1], &b[i].c, i < 2 ? "ref" : NULL);
        if (!bk[i]) return;
        run_call(bk[i], &b[i].c, &bs[i]);
    }
    char nm[220];
    snprintf(nm, sizeof nm, "%s grad (linked)", name);
    compare(nm, g[0], g[2], nq + 2 * nk, 2e-5);
    snprintf(nm, sizeof nm, "%s grad (alone)", name);
    compare(nm, g[1], g[2], nq + 2 * nk, 2e-5);
    for (int i = 0; i < 2; i++) release(fk[i], &f[i].c, fs[i]);
    for (int i = 0; i < 3; i++) release(bk[i], &b[i].c, bs[i]);
    free(q), free(k), free(v), free(dy), free(mask);
    for (int i = 0; i < 2; i++) free(o[i]);
    for (int i = 0; i < 3; i++) free(g[i]);
}

static void attention_case(int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t D, bool causal,
                           int64_t off) {
    attention_case_m(B, Tq, Tk, H, D, causal, off, 0);
}

/* The CPU kernel's dropout masks change with the step and the seed, and rate 0 with dropout's
 * other attributes set is the plain kernel bit for bit. */
static void dropout_steps_case(void) {
    enum { B = 2, T = 40, H = 2, D = 16 };
    sn_shape s = {.ndim = 4, .dim = {B, T, H, D}};
    int64_t n = sn_shape_numel(&s);
    float *q = rnd(n, 1.0), *k = rnd(n, 1.0), *v = rnd(n, 1.0);
    /* rate, seed, step: the plain kernel, rate 0 with a seed, steps 3 and 4, seed 2 step 3 */
    static const struct { double rate; uint64_t seed; int64_t step; } run[5] = {
        {0, 0, 0}, {0, 99, 7}, {0.2, 1, 3}, {0.2, 1, 4}, {0.2, 2, 3}};
    float *out[5];
    for (int r = 0; r < 5; r++) {
        tcall f;
        out[r] = malloc(sizeof(float) * (size_t)n);
        tc_init(&f, SN_OP_ATTENTION, SN_F32, s);
        f.attr.attn.scale = 0.25;
        f.attr.attn.causal = true;
        f.attr.attn.drop_rate = run[r].rate;
        f.attr.attn.drop_seed = run[r].seed;
        f.attr.attn.drop_node = 3;
        f.c.step = run[r].step;
        tc_input(&f, SN_F32, s, q);
        tc_input(&f, SN_F32, s, k);
        tc_input(&f, SN_F32, s, v);
        f.c.out = out[r];
        const sn_kernel *kk = pick(sn_cpu_kernels(), &f.c, "ref");
        if (!kk) return;
        void *scr;
        run_call(kk, &f.c, &scr);
        release(kk, &f.c, scr);
    }
    cases++;
    if (memcmp(out[0], out[1], sizeof(float) * (size_t)n))
        FAIL("attention dropout: rate 0 with a seed and step differs from the plain kernel");
    int d34 = 0, d35 = 0;
    for (int64_t i = 0; i < n; i++) {
        d34 += out[2][i] != out[3][i];
        d35 += out[2][i] != out[4][i];
    }
    if (!(d34 > n / 2 && d35 > n / 2))
        FAIL("attention dropout: steps 3 and 4 differ in %d of %lld "
          "outputs, seeds 1 and 2 in %d (expected most)", d34, (long long)n, d35);
    for (int r = 0; r < 5; r++) free(out[r]);
    free(q), free(k), free(v);
}

/* attention_cached (generation): s new queries after pos cached keys, against the
 * reference attention over the concatenated keys with q_offset pos; cache rows past pos hold
 * NaN, which must never be read. Both the CPU and the reference kernel of the cached op. */
static void cached_case(int64_t B, int64_t S, int64_t pos, int64_t C, int64_t H, int64_t D) {
    char name[128];
    snprintf(name, sizeof name, "attention_cached B%lld s%lld pos %lld C%lld H%lld D%lld",
             (long long)B, (long long)S, (long long)pos, (long long)C, (long long)H,
             (long long)D);
    sn_shape sq = {.ndim = 4, .dim = {B, S, H, D}}, sc = {.ndim = 4, .dim = {B, C, H, D}},
             sf = {.ndim = 4, .dim = {B, pos + S, H, D}};
    int64_t nq = sn_shape_numel(&sq), nc = sn_shape_numel(&sc), nf = sn_shape_numel(&sf);
    float *q = rnd(nq, 1.0), *k = rnd(nq, 1.0), *v = rnd(nq, 1.0), *kc = rnd(nc, 1.0),
          *vc = rnd(nc, 1.0), *kf = malloc(sizeof(float) * (size_t)nf),
          *vf = malloc(sizeof(float) * (size_t)nf), *want = malloc(sizeof(float) * (size_t)nq),
          *got = malloc(sizeof(float) * (size_t)nq);
    int64_t row = H * D;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < pos + S; t++) {
            const float *sk = t < pos ? kc + (b * C + t) * row : k + (b * S + t - pos) * row;
            const float *sv = t < pos ? vc + (b * C + t) * row : v + (b * S + t - pos) * row;
            memcpy(kf + (b * (pos + S) + t) * row, sk, sizeof(float) * (size_t)row);
            memcpy(vf + (b * (pos + S) + t) * row, sv, sizeof(float) * (size_t)row);
        }
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = pos; t < C; t++)
            for (int64_t x = 0; x < row; x++) kc[(b * C + t) * row + x] = vc[(b * C + t) * row + x] = NAN;
    tcall f;
    tc_init(&f, SN_OP_ATTENTION, SN_F32, sq);
    f.attr.attn.scale = 1.0 / sqrt((double)D);
    f.attr.attn.causal = true;
    f.attr.attn.q_offset = pos;
    tc_input(&f, SN_F32, sq, q);
    tc_input(&f, SN_F32, sf, kf);
    tc_input(&f, SN_F32, sf, vf);
    f.c.out = want;
    void *sbuf;
    const sn_kernel *rk = pick(sn_ref_kernels(), &f.c, NULL);
    if (rk) {
        run_call(rk, &f.c, &sbuf);
        release(rk, &f.c, sbuf);
    }
    int32_t p32 = (int32_t)pos;
    const sn_kernel_table *tabs[2] = {sn_cpu_kernels(), sn_ref_kernels()};
    for (int i = 0; i < 2; i++) {
        tcall t;
        tc_init(&t, SN_OP_ATTENTION_CACHED, SN_F32, sq);
        t.attr = f.attr;
        t.attr.attn.q_offset = 0;
        tc_input(&t, SN_F32, sq, q);
        tc_input(&t, SN_F32, sq, k);
        tc_input(&t, SN_F32, sq, v);
        tc_input(&t, SN_F32, sc, kc);
        tc_input(&t, SN_F32, sc, vc);
        tc_input(&t, SN_I32, (sn_shape){.ndim = 1, .dim = {1}}, &p32);
        t.c.out = got;
        const sn_kernel *k2 = pick(tabs[i], &t.c, i == 0 ? "ref" : NULL);
        if (!k2) continue;
        run_call(k2, &t.c, &sbuf);
        release(k2, &t.c, sbuf);
        char nm[160];
        snprintf(nm, sizeof nm, "%s (%s)", name, k2->impl);
        compare(nm, got, want, nq, 2e-5);
    }
    /* a position whose new keys overflow the cache is refused with the sizes */
    tcall t;
    tc_init(&t, SN_OP_ATTENTION_CACHED, SN_F32, sq);
    t.attr = f.attr;
    tc_input(&t, SN_F32, sq, q);
    tc_input(&t, SN_F32, sq, k);
    tc_input(&t, SN_F32, sq, v);
    tc_input(&t, SN_F32, sc, kc);
    tc_input(&t, SN_F32, sc, vc);
    int32_t bad = (int32_t)(C - S + 1);
    tc_input(&t, SN_I32, (sn_shape){.ndim = 1, .dim = {1}}, &bad);
    t.c.out = got;
    const sn_kernel *k3 = sn_kernel_select(sn_cpu_kernels(), &t.c);
    size_t sb = 0;
    t.c.state = NULL;
    if (k3 && k3->prepare) k3->prepare(&t.c, &sb);
    void *scr = malloc(sb ? sb : 1);
    t.c.scratch = scr;
    t.c.scratch_bytes = sb;
    sn_status st = k3 ? k3->run(&t.c) : SN_OK;
    cases++;
    if (st == SN_OK || !strstr(sn_last_error(), "does not fit a cache"))
        FAIL("%s: overflow not refused ('%s')", name, sn_last_error());
    if (k3) release(k3, &t.c, scr);
    free(q), free(k), free(v), free(kc), free(vc), free(kf), free(vf), free(want), free(got);
}

/* y = op(in...) on both tables */
static void pointwise_case(const char *name, sn_op op, sn_shape ys, int n_in, const sn_shape *xs,
                           float **x, const sn_attrs *attr) {
    int64_t n = sn_shape_numel(&ys);
    float *y[2] = {malloc(sizeof(float) * (size_t)n), malloc(sizeof(float) * (size_t)n)};
    const sn_kernel_table *tabs[2] = {sn_cpu_kernels(), sn_ref_kernels()};
    for (int i = 0; i < 2; i++) {
        tcall t;
        tc_init(&t, op, SN_F32, ys);
        if (attr) t.attr = *attr;
        for (int j = 0; j < n_in; j++) tc_input(&t, SN_F32, xs[j], x[j]);
        t.c.out = y[i];
        const sn_kernel *k = pick(tabs[i], &t.c, i == 0 ? "ref" : NULL);
        if (!k) return;
        void *s;
        run_call(k, &t.c, &s);
        release(k, &t.c, s);
    }
    compare(name, y[0], y[1], n, 2e-5);
    free(y[0]), free(y[1]);
}

static void layer_norm_case(int64_t R, int64_t C) {
    sn_shape xs = {.ndim = 2, .dim = {R, C}}, cs = {.ndim = 1, .dim = {C}};
    float *x = rnd(R * C, 3.0), *ga = rnd(C, 1.0), *be = rnd(C, 1.0), *dy = rnd(R * C, 1.0);
    for (int64_t i = 0; i < R * C; i++) x[i] += 2.0f; /* a mean away from 0 */
    sn_attrs a = {.norm = {.epsilon = 1e-3}};
    char nm[64];
    snprintf(nm, sizeof nm, "layer_norm %lldx%lld", (long long)R, (long long)C);
    pointwise_case(nm, SN_OP_LAYER_NORM, xs, 3, (sn_shape[]){xs, cs, cs}, (float *[]){x, ga, be},
                   &a);
    snprintf(nm, sizeof nm, "layer_norm_grad %lldx%lld", (long long)R, (long long)C);
    pointwise_case(nm, SN_OP_LAYER_NORM_GRAD, (sn_shape){.ndim = 1, .dim = {R * C + 2 * C}}, 3,
                   (sn_shape[]){xs, cs, xs}, (float *[]){x, ga, dy}, &a);
    free(x), free(ga), free(be), free(dy);
}

static void gelu_tanh_case(int64_t n) {
    sn_shape s = {.ndim = 1, .dim = {n}};
    float *x = rnd(n, 3.0), *dy = rnd(n, 1.0);
    pointwise_case("gelu_tanh", SN_OP_GELU_TANH, s, 1, &s, &x, NULL);
    pointwise_case("gelu_tanh_grad", SN_OP_GELU_TANH_GRAD, s, 2, (sn_shape[]){s, s},
                   (float *[]){x, dy}, NULL);
    free(x), free(dy);
}

int main(void) {
    sn_rng_init(&rng, 26, 0);
    static const int64_t T[] = {1, 5, 64, 65, 130, 200};
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        for (int causal = 0; causal < 2; causal++) {
            attention_case(2, T[i], T[i], 2, 32, causal, 0);
            attention_case(1, T[i], T[i], 3, 7, causal, 0);
        }
    attention_case(2, 65, 65, 2, 24, true, 0);   /* AVX2 tiles: a 16- and an 8-wide chunk */
    attention_case(1, 70, 130, 3, 8, false, 0);
    attention_case(2, 70, 150, 2, 16, false, 0); /* cross attention, Tq != Tk */
    attention_case(1, 3, 131, 2, 16, true, 128); /* 3 new queries after 128 cached keys */
    attention_case(1, 1, 77, 4, 32, true, 76);   /* one generated position */
    static const int64_t TM[] = {3, 64, 65, 200};
    for (size_t i = 0; i < sizeof TM / sizeof TM[0]; i++)
        for (int causal = 0; causal < 2; causal++) {
            attention_case_m(2, TM[i], TM[i], 2, 32, causal, 0, 1);
            attention_case_m(3, TM[i], TM[i], 3, 7, causal, 0, 1);
        }
    attention_case_m(2, 70, 150, 2, 16, false, 0, 1); /* cross attention with a mask */
    attention_case_m(2, 9, 300, 2, 16, true, 0, 1);   /* causal, Tq < Tk */
    /* dropout 0.3 on the probabilities, CPU against the reference with the same masks:
     * plain, causal, masked with queries that see no key, Tq != Tk, both tile kinds */
    drop_rate = 0.3;
    drop_step = 5;
    static const int64_t TD[] = {5, 65, 130};
    for (size_t i = 0; i < sizeof TD / sizeof TD[0]; i++)
        for (int causal = 0; causal < 2; causal++) {
            attention_case(2, TD[i], TD[i], 2, 32, causal, 0);
            attention_case(1, TD[i], TD[i], 3, 7, causal, 0);
            attention_case_m(2, TD[i], TD[i], 2, 16, causal, 0, 1);
        }
    attention_case_m(2, 70, 150, 2, 16, false, 0, 1);
    drop_rate = 0.5;
    drop_step = 123456789;
    attention_case(2, 64, 64, 4, 32, true, 0);
    drop_rate = 0;
    drop_step = 0;
    dropout_steps_case();
    cached_case(1, 1, 0, 64, 4, 32);    /* the first character */
    cached_case(1, 1, 37, 64, 4, 32);   /* one character after 37 */
    cached_case(2, 5, 60, 70, 2, 16);   /* a prompt of 5 across a block edge */
    cached_case(1, 3, 100, 256, 3, 7);  /* portable tiles */
    layer_norm_case(1, 7);
    layer_norm_case(100, 128);
    layer_norm_case(33, 40);
    gelu_tanh_case(1001);
    gelu_tanh_case(15);
    printf("%d comparisons, %d failures\n", cases, failures);
    return failures ? 1 : 0;
}
