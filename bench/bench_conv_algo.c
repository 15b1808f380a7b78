/* The guide CNN's second convolution (3x3, 256 -> 256 channels, valid padding; x
 * [N, 26, 26, 256] -> y [N, 24, 24, 256]) forward, backward-data and backward-weights, on
 * oneDNN directly, in alternating rounds, several ways:
 *   nhwc:        direct convolution on NHWC activations (what sinter runs: cpu_conv.c), the
 *                weights in the blocked layout oneDNN picks;
 *   blocked:     direct convolution with activations in oneDNN's blocked layout (nChw16c);
 *   wino:        oneDNN's Winograd convolution (dnnl_convolution_winograd), blocked layouts;
 *   bf16_nhwc:   mixed bf16 as sinter runs it: x, w, dy bf16 NHWC, y/dx/dw f32;
 *   bf16_blocked: every activation bf16 in the blocked layout (kept between layers);
 * and the reorders that switching layouts per op would cost (x and dy NHWC -> blocked, y and
 * dx back; f32 -> bf16 of x and dy). Every variant's layouts are whatever its primitive
 * descriptors report; the numbers print with the implementation oneDNN chose. The Winograd
 * results are compared with the direct ones (max |difference| / max |direct|).
 *
 *   build/bench/bench_conv_algo [N ROUNDS]      (default: 200 3)
 *
 * It compiles against oneDNN 2.x (Debian's 2.6.3, what sinter links) and 3.x (the v3 API:
 * memory descriptors are handles, primitive descriptors are made in one call), so that
 * bench/onednn_versions.sh can build it against a oneDNN 3 from PyPI and run both side by side
 * (issue 28). The few calls that differ go through the md_* and conv_pds helpers below.
 *
 * Prints ms of each op per round and the best of each; docs/benchmarks.md records them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef SN_HAVE_DNNL
#include <dnnl.h>

#define CK(e)                                                                                  \
    do {                                                                                       \
        dnnl_status_t s_ = (e);                                                                \
        if (s_ != dnnl_success) {                                                              \
            fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #e, (int)s_);      \
            return -1;                                                                         \
        }                                                                                      \
    } while (0)

static dnnl_engine_t eng;
static dnnl_stream_t strm;

/* The v2/v3 difference in one place. md_t is what a descriptor is held in, md_arg what the
 * API takes, MD(m) turns the first into the second. */
#if DNNL_VERSION_MAJOR >= 3
typedef dnnl_memory_desc_t md_t; /* a handle; the bench never frees them (process exit) */
typedef const_dnnl_memory_desc_t md_arg;
#define MD(m) (m)
static dnnl_status_t md_tag(md_t *m, const dnnl_dims_t d, dnnl_data_type_t t, dnnl_format_tag_t f) {
    return dnnl_memory_desc_create_with_tag(m, 4, d, t, f);
}
#else
typedef dnnl_memory_desc_t md_t;
typedef const dnnl_memory_desc_t *md_arg;
#define MD(m) (&(m))
static dnnl_status_t md_tag(md_t *m, const dnnl_dims_t d, dnnl_data_type_t t, dnnl_format_tag_t f) {
    return dnnl_memory_desc_init_by_tag(m, 4, d, t, f);
}
#endif

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static dnnl_memory_t mem_of(md_arg md) {
    dnnl_memory_t m = NULL;
    if (dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE) != dnnl_success) return NULL;
    return m;
}

/* Fills a memory with deterministic values in [-scale, scale) through an f32 plain copy. */
static int fill(dnnl_memory_t m, md_arg plain, float scale, unsigned seed) {
    dnnl_memory_t p = mem_of(plain);
    if (!p) return -1;
    float *v;
    CK(dnnl_memory_get_data_handle(p, (void **)&v));
    size_t n = dnnl_memory_desc_get_size(plain) / sizeof(float);
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = scale * ((float)(s >> 8) / 8388608.0f - 1.0f);
    }
    md_arg md;
    CK(dnnl_memory_get_memory_desc(m, &md));
    dnnl_primitive_desc_t rpd;
    CK(dnnl_reorder_primitive_desc_create(&rpd, plain, eng, md, eng, NULL));
    dnnl_primitive_t r;
    CK(dnnl_primitive_create(&r, rpd));
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, p}, {DNNL_ARG_TO, m}};
    CK(dnnl_primitive_execute(r, strm, 2, a));
    CK(dnnl_stream_wait(strm));
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(p);
    return 0;
}

/* Copies m into a plain f32 buffer of layout `plain` (the caller frees it). */
static float *to_plain(dnnl_memory_t m, md_arg plain) {
    dnnl_memory_t p = mem_of(plain);
    md_arg md;
    dnnl_primitive_desc_t rpd;
    dnnl_primitive_t r;
    if (!p || dnnl_memory_get_memory_desc(m, &md) ||
        dnnl_reorder_primitive_desc_create(&rpd, md, eng, plain, eng, NULL) ||
        dnnl_primitive_create(&r, rpd))
        return NULL;
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, p}};
    dnnl_primitive_execute(r, strm, 2, a);
    dnnl_stream_wait(strm);
    size_t n = dnnl_memory_desc_get_size(plain);
    float *out = malloc(n);
    void *h;
    dnnl_memory_get_data_handle(p, &h);
    if (out) memcpy(out, h, n);
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(p);
    return out;
}

static const char *impl_of(const_dnnl_primitive_desc_t pd) {
    const char *s = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
    return s;
}

enum { FWD, BWD_D, BWD_W, NOPS };
static const char *op_names[NOPS] = {"fwd", "bwd_data", "bwd_weights"};

typedef struct variant {
    const char *name;
    dnnl_primitive_t prim[NOPS];
    char impl[NOPS][64];
    dnnl_memory_t x, w, y;      /* forward operands, in the layouts the primitive chose */
    dnnl_memory_t dy, wb, dx;   /* backward data */
    dnnl_memory_t xw, dyw, dw;  /* backward weights */
    double best[NOPS];
} variant;

static dnnl_dims_t xd, yd, wd;
static const dnnl_dims_t strides = {1, 1}, pad = {0, 0};
static md_t x_nhwc, y_nhwc, w_hwio;

/* xt/yt: activation tag (dnnl_format_tag_any allowed); act/acc: data type of x, w, dy and of
 * the outputs y, dx, dw. */
static int variant_init(variant *v, const char *name, dnnl_alg_kind_t alg, dnnl_format_tag_t at,
                        dnnl_data_type_t act, dnnl_data_type_t acc) {
    memset(v, 0, sizeof *v);
    v->name = name;
    md_t x, w, y, xo, yo, wo;
    CK(md_tag(&x, xd, act, at));
    CK(md_tag(&w, wd, act, dnnl_format_tag_any));
    CK(md_tag(&y, yd, act, at));
    CK(md_tag(&xo, xd, acc, at));
    CK(md_tag(&yo, yd, acc, at));
    CK(md_tag(&wo, wd, acc, dnnl_format_tag_any));
    dnnl_primitive_desc_t fpd, bpd, wpd;
#if DNNL_VERSION_MAJOR >= 3
    dnnl_status_t s = dnnl_convolution_forward_primitive_desc_create(
        &fpd, eng, dnnl_forward_training, alg, x, w, NULL, yo, strides, NULL, pad, pad, NULL);
#else
    dnnl_convolution_desc_t fd, bd, wdsc;
    CK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, alg, &x, &w, NULL, &yo,
                                          strides, pad, pad));
    dnnl_status_t s = dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL);
#endif
    if (s != dnnl_success) {
        printf("%-13s forward: unimplemented (status %d)\n", name, (int)s);
        return 1;
    }
#if DNNL_VERSION_MAJOR >= 3
    s = dnnl_convolution_backward_data_primitive_desc_create(&bpd, eng, alg, xo, w, y, strides,
                                                             NULL, pad, pad, fpd, NULL);
    if (s == dnnl_success)
        s = dnnl_convolution_backward_weights_primitive_desc_create(
            &wpd, eng, alg, x, wo, NULL, y, strides, NULL, pad, pad, fpd, NULL);
#else
    CK(dnnl_convolution_backward_data_desc_init(&bd, alg, &xo, &w, &y, strides, pad, pad));
    s = dnnl_primitive_desc_create(&bpd, &bd, NULL, eng, fpd);
    if (s == dnnl_success) {
        CK(dnnl_convolution_backward_weights_desc_init(&wdsc, alg, &x, &wo, NULL, &y, strides,
                                                       pad, pad));
        s = dnnl_primitive_desc_create(&wpd, &wdsc, NULL, eng, fpd);
    }
#endif
    if (s != dnnl_success) {
        printf("%-13s backward: unimplemented (status %d)\n", name, (int)s);
        return 1;
    }
    dnnl_primitive_desc_t pds[NOPS] = {fpd, bpd, wpd};
    for (int i = 0; i < NOPS; i++) {
        CK(dnnl_primitive_create(&v->prim[i], pds[i]));
        snprintf(v->impl[i], sizeof v->impl[i], "%s", impl_of(pds[i]));
        v->best[i] = 1e30;
    }
    /* Each op gets its operands in the layouts its own descriptor reports (the backward
     * ops may want other weight or activation layouts than the forward one). */
    v->x = mem_of(dnnl_primitive_desc_query_md(fpd, dnnl_query_src_md, 0));
    v->w = mem_of(dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0));
    v->y = mem_of(dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0));
    v->dy = mem_of(dnnl_primitive_desc_query_md(bpd, dnnl_query_diff_dst_md, 0));
    v->wb = mem_of(dnnl_primitive_desc_query_md(bpd, dnnl_query_weights_md, 0));
    v->dx = mem_of(dnnl_primitive_desc_query_md(bpd, dnnl_query_diff_src_md, 0));
    v->xw = mem_of(dnnl_primitive_desc_query_md(wpd, dnnl_query_src_md, 0));
    v->dyw = mem_of(dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_dst_md, 0));
    v->dw = mem_of(dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_weights_md, 0));
    if (!v->x || !v->w || !v->y || !v->dy || !v->wb || !v->dx || !v->xw || !v->dyw || !v->dw)
        return -1;
    if (fill(v->x, MD(x_nhwc), 1.0f, 1) || fill(v->w, MD(w_hwio), 0.03f, 2) ||
        fill(v->dy, MD(y_nhwc), 1.0f, 3) || fill(v->wb, MD(w_hwio), 0.03f, 2) ||
        fill(v->xw, MD(x_nhwc), 1.0f, 1) || fill(v->dyw, MD(y_nhwc), 1.0f, 3))
        return -1;
    for (int i = 0; i < NOPS; i++) dnnl_primitive_desc_destroy(pds[i]);
    return 0;
}

static int variant_run(variant *v, int op, double *ms) {
    dnnl_exec_arg_t a[3];
    if (op == FWD)
        a[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, v->x}, a[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, v->w},
        a[2] = (dnnl_exec_arg_t){DNNL_ARG_DST, v->y};
    else if (op == BWD_D)
        a[0] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, v->dy},
        a[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, v->wb},
        a[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, v->dx};
    else
        a[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, v->xw}, a[1] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, v->dyw},
        a[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, v->dw};
    double t0 = now_ms();
    CK(dnnl_primitive_execute(v->prim[op], strm, 3, a));
    CK(dnnl_stream_wait(strm));
    *ms = now_ms() - t0;
    return 0;
}

/* A reorder between two layouts of the same dims, timed like an op. */
typedef struct reorder {
    const char *name;
    dnnl_primitive_t r;
    dnnl_memory_t from, to;
    double best;
} reorder;

static int reorder_init(reorder *r, const char *name, md_arg from, md_arg to) {
    r->name = name;
    r->best = 1e30;
    dnnl_primitive_desc_t pd;
    CK(dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, NULL));
    CK(dnnl_primitive_create(&r->r, pd));
    dnnl_primitive_desc_destroy(pd);
    r->from = mem_of(from);
    r->to = mem_of(to);
    if (!r->from || !r->to) return -1;
    return fill(r->from, from, 1.0f, 4);
}

static int reorder_run(reorder *r, double *ms) {
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, r->from}, {DNNL_ARG_TO, r->to}};
    double t0 = now_ms();
    CK(dnnl_primitive_execute(r->r, strm, 2, a));
    CK(dnnl_stream_wait(strm));
    *ms = now_ms() - t0;
    return 0;
}

/* max |a - b| / max |b| over n values. */
static double rel_diff(const float *a, const float *b, size_t n) {
    double md = 0, mb = 0;
    for (size_t i = 0; i < n; i++) {
        double d = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        double m = b[i] < 0 ? -b[i] : b[i];
        if (d > md) md = d;
        if (m > mb) mb = m;
    }
    return mb > 0 ? md / mb : md;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200, rounds = argc > 2 ? atoi(argv[2]) : 3;
    if (n <= 0 || rounds <= 0) {
        fprintf(stderr, "usage: %s [N ROUNDS] (positive integers)\n", argv[0]);
        return 2;
    }
    const int C = 256, F = 256, H = 26, K = 3, OH = H - K + 1;
    xd[0] = n, xd[1] = C, xd[2] = H, xd[3] = H;
    yd[0] = n, yd[1] = F, yd[2] = OH, yd[3] = OH;
    wd[0] = F, wd[1] = C, wd[2] = K, wd[3] = K;
    CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
    CK(md_tag(&x_nhwc, xd, dnnl_f32, dnnl_nhwc));
    CK(md_tag(&y_nhwc, yd, dnnl_f32, dnnl_nhwc));
    CK(md_tag(&w_hwio, wd, dnnl_f32, dnnl_hwio));
    printf("oneDNN %d.%d.%d\n", dnnl_version()->major, dnnl_version()->minor,
           dnnl_version()->patch);

    variant v[5];
    int nv = 0, st;
    struct {
        const char *name;
        dnnl_alg_kind_t alg;
        dnnl_format_tag_t tag;
        dnnl_data_type_t act, acc;
    } spec[5] = {
        {"nhwc", dnnl_convolution_direct, dnnl_nhwc, dnnl_f32, dnnl_f32},
        {"blocked", dnnl_convolution_direct, dnnl_format_tag_any, dnnl_f32, dnnl_f32},
        {"wino", dnnl_convolution_winograd, dnnl_format_tag_any, dnnl_f32, dnnl_f32},
        {"bf16_nhwc", dnnl_convolution_direct, dnnl_nhwc, dnnl_bf16, dnnl_f32},
        {"bf16_blocked", dnnl_convolution_direct, dnnl_format_tag_any, dnnl_bf16, dnnl_bf16},
    };
    for (int i = 0; i < 5; i++) {
        if ((st = variant_init(&v[nv], spec[i].name, spec[i].alg, spec[i].tag, spec[i].act,
                               spec[i].acc)) < 0)
            return 1;
        if (st == 0) nv++;
    }
    for (int i = 0; i < nv; i++)
        printf("%-13s %s | %s | %s\n", v[i].name, v[i].impl[0], v[i].impl[1], v[i].impl[2]);

    md_t x_blk, y_blk, x_bf, y_bf;
    CK(md_tag(&x_blk, xd, dnnl_f32, dnnl_nChw16c));
    CK(md_tag(&y_blk, yd, dnnl_f32, dnnl_nChw16c));
    CK(md_tag(&x_bf, xd, dnnl_bf16, dnnl_nhwc));
    CK(md_tag(&y_bf, yd, dnnl_bf16, dnnl_nhwc));
    reorder r[4];
    if (reorder_init(&r[0], "x nhwc->nChw16c", MD(x_nhwc), MD(x_blk)) ||
        reorder_init(&r[1], "y nChw16c->nhwc", MD(y_blk), MD(y_nhwc)) ||
        reorder_init(&r[2], "x f32->bf16", MD(x_nhwc), MD(x_bf)) ||
        reorder_init(&r[3], "y f32->bf16", MD(y_nhwc), MD(y_bf)))
        return 1;

    /* warm-up: one run of everything (JIT, page faults) */
    double ms;
    for (int i = 0; i < nv; i++)
        for (int op = 0; op < NOPS; op++)
            if (variant_run(&v[i], op, &ms)) return 1;
    for (int i = 0; i < 4; i++)
        if (reorder_run(&r[i], &ms)) return 1;

    /* Winograd against direct (both f32, same inputs). */
    for (int i = 0; i < nv; i++) {
        if (strcmp(v[i].name, "wino") != 0) continue;
        dnnl_memory_t pairs[3][2] = {{v[i].y, v[0].y}, {v[i].dx, v[0].dx}, {v[i].dw, v[0].dw}};
        md_arg pl[3] = {MD(y_nhwc), MD(x_nhwc), MD(w_hwio)};
        for (int k = 0; k < 3; k++) {
            float *a = to_plain(pairs[k][0], pl[k]), *b = to_plain(pairs[k][1], pl[k]);
            if (!a || !b) return 1;
            printf("wino vs nhwc %-11s max|diff|/max|direct| = %.2e\n", op_names[k],
                   rel_diff(a, b, dnnl_memory_desc_get_size(pl[k]) / sizeof(float)));
            free(a);
            free(b);
        }
    }

    for (int round = 1; round <= rounds; round++) {
        double load[1] = {0};
        if (getloadavg(load, 1) < 1) load[0] = -1;
        printf("round %d (load %.1f):", round, load[0]);
        for (int i = 0; i < nv; i++) {
            double sum = 0;
            for (int op = 0; op < NOPS; op++) {
                if (variant_run(&v[i], op, &ms)) return 1;
                if (ms < v[i].best[op]) v[i].best[op] = ms;
                sum += ms;
            }
            printf(" %s %.0f", v[i].name, sum);
        }
        for (int i = 0; i < 4; i++) {
            if (reorder_run(&r[i], &ms)) return 1;
            if (ms < r[i].best) r[i].best = ms;
        }
        printf(" ms (fwd+bwd_data+bwd_weights)\n");
        fflush(stdout);
    }
    printf("best of %d rounds, ms, N = %d:\n%-13s %9s %9s %11s %9s\n", rounds, n, "variant", "fwd",
           "bwd_data", "bwd_weights", "sum");
    for (int i = 0; i < nv; i++)
        printf("%-13s %9.1f %9.1f %11.1f %9.1f\n", v[i].name, v[i].best[0], v[i].best[1],
               v[i].best[2], v[i].best[0] + v[i].best[1] + v[i].best[2]);
    for (int i = 0; i < 4; i++) printf("reorder %-22s %9.1f\n", r[i].name, r[i].best);
    return 0;
}
#else
int main(void) {
    fprintf(stderr, "bench_conv_algo needs a build with oneDNN\n");
    return 77;
}
#endif
