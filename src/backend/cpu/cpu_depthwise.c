/* DEPTHWISE_CONV2D, DEPTHWISE_BWD_DATA and DEPTHWISE_BWD_FILTER on oneDNN: a grouped
 * convolution with one group per input channel. The weights stay Keras's [KH, KW, C, M] in
 * our buffers; as oneDNN's grouped weights {G = C, O = M, I = 1, KH, KW} that memory is the
 * hwigo tag, and output channel g*M + o is Keras's c*M + m, so no operand is permuted by us
 * (oneDNN reorders the weights to its blocked layout in scratch, as cpu_conv.c). Activations
 * NHWC. f32 tensors only (other dtypes, and builds without oneDNN, take the reference
 * kernels), but for a forward's output that the plan stores in bf16 (dw_build_to_bf16); f32
 * compute under mixed bf16 too (dw_use_bf16 says why). */
#include <string.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/cpu_vec.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/kernel.h"

#ifdef SN_HAVE_DNNL

typedef struct dw_geom {
    int64_t n, h, w, c, m, oh, ow, kh, kw, sh, sw, pt, pl, pb, pr;
} dw_geom;

/* Geometry from the attributes and the call's shapes; false when oneDNN should not take it
 * (dtypes other than f32, an implied bottom/right padding short by a stride or more). The
 * forward's output may be bf16 under mixed bf16 where bf16 computes in bf16
 * (dw_build_to_bf16; elsewhere the plan keeps f32, as for the kernels that read it). */
static bool dw_geom_of(const sn_kcall *c, dw_geom *g) {
    bool y_bf16 = c->y.dtype == SN_BF16 && c->op == SN_OP_DEPTHWISE_CONV2D && c->bf16 &&
                  sn_cpu_bf16_pays();
    if (c->n_in != 2 || (c->y.dtype != SN_F32 && !y_bf16) || c->x[0].dtype != SN_F32 ||
        c->x[1].dtype != SN_F32)
        return false;
    const sn_shape *x = &c->attr->conv.x_shape, *w = &c->attr->conv.w_shape;
    const sn_shape *y = c->op == SN_OP_DEPTHWISE_CONV2D     ? &c->y.shape
                        : c->op == SN_OP_DEPTHWISE_BWD_DATA ? &c->x[0].shape
                                                            : &c->x[1].shape;
    if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4) return false;
    g->n = x->dim[0], g->h = x->dim[1], g->w = x->dim[2], g->c = x->dim[3];
    g->kh = w->dim[0], g->kw = w->dim[1], g->m = w->dim[3];
    g->oh = y->dim[1], g->ow = y->dim[2];
    if (w->dim[2] != g->c || y->dim[3] != g->c * g->m) return false;
    g->sh = c->attr->conv.stride_h, g->sw = c->attr->conv.stride_w;
    g->pt = c->attr->conv.pad_top, g->pl = c->attr->conv.pad_left;
    g->pb = (g->oh - 1) * g->sh + g->kh - g->h - g->pt;
    g->pr = (g->ow - 1) * g->sw + g->kw - g->w - g->pl;
    if (g->sh < 1 || g->sw < 1 || g->pt < 0 || g->pl < 0) return false;
    /* As sn_conv_geom_of (cpu_conv_geom.c): an implied padding short by less than one stride
     * means the last input rows/columns are read by no window ("valid" 3x3 stride 2 on an
     * even size, "same" 1x1 stride 2). Padding 0 gives the same output size under oneDNN's
     * floor formula, and backward-data writes zeros to those rows, as the reference does.
     * More than a stride short would lose an output row: reference. */
    if (g->pb < 0 && -g->pb < g->sh) g->pb = 0;
    if (g->pr < 0 && -g->pr < g->sw) g->pr = 0;
    return g->pb >= 0 && g->pr >= 0;
}

static bool dw_supports(const sn_kcall *c) {
    dw_geom g;
    return dw_geom_of(c, &g);
}

/* bf16: the mixed precision of sn_plan_opts.bf16_compute, as cpu_conv.c's conv_build: x, w
 * and dy are read as bfloat16 (converted from our f32 buffers by oneDNN's reorders, NHWC
 * kept), and the primitive accumulates and writes f32 (y, dx, dw). */
static sn_status dw_build(sn_dnnl_op *s, const sn_kcall *c, bool bf16, size_t *scratch_bytes) {
    dw_geom g;
    SN_ASSERT(dw_geom_of(c, &g));
    dnnl_engine_t eng;
    SN_TRY(sn_dnnl_engine(&eng));
    dnnl_dims_t xd = {g.n, g.c, g.h, g.w}, yd = {g.n, g.c * g.m, g.oh, g.ow};
    dnnl_dims_t wd = {g.c, g.m, 1, g.kh, g.kw};
    dnnl_dims_t strides = {g.sh, g.sw}, pad_l = {g.pt, g.pl}, pad_r = {g.pb, g.pr};
    dnnl_data_type_t lo = bf16 ? dnnl_bf16 : dnnl_f32;
    /* *u: our f32 buffers; *i: what the primitive reads; dwi: the f32 filter gradient */
    dnnl_memory_desc_t xu, yu, wu, xi, yi, wi, dwi;
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&xu, 4, xd, dnnl_f32, dnnl_nhwc));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&yu, 4, yd, dnnl_f32, dnnl_nhwc));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&wu, 5, wd, dnnl_f32, dnnl_hwigo));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&xi, 4, xd, lo, dnnl_nhwc));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&yi, 4, yd, lo, dnnl_nhwc));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&wi, 5, wd, lo, dnnl_format_tag_any));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&dwi, 5, wd, dnnl_f32, dnnl_format_tag_any));
    bool fwd = c->op == SN_OP_DEPTHWISE_CONV2D;
    dnnl_convolution_desc_t fwd_d, d;
    /* the forward hint sees the operand types of the backward op (dy's for y) */
    SN_DNNL_CHECK(dnnl_convolution_forward_desc_init(&fwd_d, dnnl_forward_training,
                                                     dnnl_convolution_direct, &xi, &wi, NULL,
                                                     fwd ? &yu : &yi, strides, pad_l, pad_r));
    dnnl_primitive_attr_t attr;
    SN_TRY(sn_dnnl_attr_user_scratchpad(&attr));
    dnnl_primitive_desc_t fwd_pd = NULL, pd = NULL;
    dnnl_status_t st = dnnl_primitive_desc_create(&fwd_pd, &fwd_d, attr, eng, NULL);
    sn_op kind = SN_OP_CONV2D;
    if (st == dnnl_success) {
        if (c->op == SN_OP_DEPTHWISE_CONV2D) {
            pd = fwd_pd;
            fwd_pd = NULL;
        } else {
            if (c->op == SN_OP_DEPTHWISE_BWD_DATA) {
                kind = SN_OP_CONV2D_BWD_DATA;
                st = dnnl_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &xu,
                                                              &wi, &yi, strides, pad_l, pad_r);
            } else {
                kind = SN_OP_CONV2D_BWD_FILTER;
                st = dnnl_convolution_backward_weights_desc_init(
                    &d, dnnl_convolution_direct, &xi, &dwi, NULL, &yi, strides, pad_l, pad_r);
            }
            if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &d, attr, eng, fwd_pd);
        }
    }
    /* oneDNN's reference implementation is no fast path: bf16 there is left for f32 */
    if (bf16 && st == dnnl_success && !strncmp(sn_dnnl_impl_name(pd), "ref", 3)) {
        dnnl_primitive_desc_destroy(pd);
        pd = NULL;
        st = dnnl_unimplemented;
    }
    if (fwd_pd) dnnl_primitive_desc_destroy(fwd_pd);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        return sn_dnnl_error(st, "grouped convolution primitive descriptor", __FILE__, __LINE__);
    /* the operands in the order the conv2d ops of the same role take them */
    sn_status r = sn_dnnl_conv_op_init(s, pd, kind, &xu, &wu, &yu, scratch_bytes);
    dnnl_primitive_desc_destroy(pd);
    return r;
}

/* Mixed bf16 only in the "dnnl_bf16" kernel (tests, A/B), where the plan asks for it and the
 * CPU has AVX512-BF16. The table's kernel stays f32 under mixed bf16: a depthwise
 * convolution sums kh*kw terms per output, so it is memory-bound, and with our f32 buffers
 * bf16 adds a conversion pass over x and dy. Measured on MobileNetV2's shapes (batch 32,
 * 3x3, one thread, CPU time, loaded Zen 4): bf16/f32 time 1.07-1.64 forward, 0.87-1.07
 * backward data, 0.75-1.42 backward filter; slower in sum. On the small Xception's shapes
 * (C 128-728, whole training step, same method): 0.95, 0.85-0.9 and 1.04-1.09, no gain in
 * sum (docs/benchmarks-notes.md, issue 23). As cpu_conv.c keeps its narrow
 * layers (kh*kw*C <= 135 terms) f32 for the same reason. */
static bool dw_use_bf16(const sn_kcall *c, bool allow) {
    return allow && c->bf16 && sn_cpu_bf16_pays();
}

static sn_status dw_build_either(sn_dnnl_op *s, const sn_kcall *c, bool allow_bf16,
                                 size_t *scratch_bytes) {
    sn_status st = SN_ERR_UNSUPPORTED;
    if (dw_use_bf16(c, allow_bf16)) st = dw_build(s, c, true, scratch_bytes);
    /* a oneDNN without a fast bf16 kernel for this shape: f32 is still correct */
    if (st == SN_ERR_UNSUPPORTED) st = dw_build(s, c, false, scratch_bytes);
    return st;
}

/* A forward whose output the plan stores in bfloat16 (graph/plan_bf16.c: its readers are 1x1
 * convolutions that would convert it so themselves, as Xception's SeparableConv2D's pointwise
 * half does): oneDNN computes it in f32 into scratch, a slice of the batch at a time small
 * enough to stay in cache, and each slice is rounded into the output (sn_cpu_to_bf16, the
 * conversion's rounding). The f32 output never reaches memory: half the bytes written, and
 * the readers' conversion passes go. Slices of at most 1 MB of f32 output (at least an
 * image): on Zen 4 (1 MB of L2 a core) 512 KB, 1 and 2 MB ran the small Xception's
 * depthwise forwards alike, 8 MB ~15 % slower. */
enum { DW_BF16_SLICE_BYTES = 1 << 20 };

typedef struct dw_state {
    sn_dnnl_op op[2];  /* op[0]: the whole batch, or `slice` images; op[1]: the last slice */
    bool to_bf16;
    int64_t n, slice, ypix; /* images, images per slice, output values per image */
    size_t xstep, y_off;    /* bytes per input image; offset of the f32 slice in scratch */
} dw_state;

/* c's forward as if its batch held k images, output f32 */
static sn_status dw_build_slice(sn_dnnl_op *op, const sn_kcall *c, int64_t k, bool allow_bf16,
                                size_t *scratch_bytes) {
    sn_attrs a = *c->attr;
    a.conv.x_shape.dim[0] = k;
    sn_kcall cs = *c;
    cs.attr = &a;
    cs.x[0].shape.dim[0] = k;
    cs.y.shape.dim[0] = k;
    cs.y.dtype = SN_F32;
    return dw_build_either(op, &cs, allow_bf16, scratch_bytes);
}

static sn_status dw_build_to_bf16(dw_state *s, const sn_kcall *c, const dw_geom *g,
                                  bool allow_bf16, size_t *scratch_bytes) {
    s->to_bf16 = true;
    s->n = g->n;
    s->ypix = g->oh * g->ow * g->c * g->m;
    s->xstep = (size_t)(g->h * g->w * g->c) * sizeof(float);
    int64_t k = DW_BF16_SLICE_BYTES / (s->ypix * (int64_t)sizeof(float));
    s->slice = k < 1 ? 1 : k > g->n ? g->n : k;
    int64_t last = g->n - (g->n - 1) / s->slice * s->slice;
    size_t s0 = 0, s1 = 0;
    SN_TRY(dw_build_slice(&s->op[0], c, s->slice, allow_bf16, &s0));
    if (last != s->slice) SN_TRY(dw_build_slice(&s->op[1], c, last, allow_bf16, &s1));
    s->y_off = ((s0 > s1 ? s0 : s1) + 63) & ~(size_t)63;
    *scratch_bytes = s->y_off + (size_t)(s->slice * s->ypix) * sizeof(float);
    return SN_OK;
}

static void dw_release(sn_kcall *c) {
    dw_state *s = c->state;
    if (!s) return;
    sn_dnnl_op_destroy(&s->op[0]);
    sn_dnnl_op_destroy(&s->op[1]);
    free(s);
    c->state = NULL;
}

static sn_status dw_prepare_impl(sn_kcall *c, size_t *scratch_bytes, bool allow_bf16) {
    dw_geom g;
    SN_ASSERT(dw_geom_of(c, &g));
    dw_state *s = sn_calloc(1, sizeof *s);
    if (!s) return SN_ERR_NOMEM;
    *scratch_bytes = 0;
    sn_status st = c->y.dtype == SN_BF16 ? dw_build_to_bf16(s, c, &g, allow_bf16, scratch_bytes)
                                         : dw_build_either(&s->op[0], c, allow_bf16, scratch_bytes);
    if (st != SN_OK) {
        c->state = s;
        dw_release(c);
        return sn_error_context(st, "preparing oneDNN %s for node %d",
                                c->op == SN_OP_DEPTHWISE_CONV2D     ? "depthwise_conv2d"
                                : c->op == SN_OP_DEPTHWISE_BWD_DATA ? "depthwise_bwd_data"
                                                                    : "depthwise_bwd_filter",
                                (int)c->id);
    }
    c->state = s;
    return SN_OK;
}

static sn_status dw_prepare(sn_kcall *c, size_t *scratch_bytes) {
    return dw_prepare_impl(c, scratch_bytes, false);
}

static sn_status dw_prepare_bf16(sn_kcall *c, size_t *scratch_bytes) {
    return dw_prepare_impl(c, scratch_bytes, true);
}

static sn_status dw_run(sn_kcall *c) {
    dw_state *s = c->state;
    if (!s->to_bf16) return sn_dnnl_op_run(&s->op[0], c->in[0], c->in[1], c->out, c->scratch);
    float *yf = (float *)((char *)c->scratch + s->y_off);
    for (int64_t i = 0; i < s->n; i += s->slice) {
        int64_t k = s->n - i < s->slice ? s->n - i : s->slice;
        SN_TRY(sn_dnnl_op_run(k == s->slice ? &s->op[0] : &s->op[1],
                              (const char *)c->in[0] + (size_t)i * s->xstep, c->in[1], yf,
                              c->scratch));
        sn_cpu_to_bf16((uint16_t *)c->out + i * s->ypix, yf, k * s->ypix);
    }
    return SN_OK;
}

static const sn_kernel k_dw_dnnl = {.impl = "dnnl", .supports = dw_supports,
                                    .prepare = dw_prepare, .run = dw_run,
                                    .release = dw_release, .bf16_io = true};
static const sn_kernel k_dw_dnnl_bf16 = {.impl = "dnnl_bf16", .supports = dw_supports,
                                         .prepare = dw_prepare_bf16, .run = dw_run,
                                         .release = dw_release};
#endif /* SN_HAVE_DNNL */

const sn_kernel *sn_cpu_depthwise_impl(const char *impl) {
#ifdef SN_HAVE_DNNL
    if (!strcmp(impl, "dnnl")) return &k_dw_dnnl;
    if (!strcmp(impl, "dnnl_bf16")) return &k_dw_dnnl_bf16;
#else
    (void)impl;
#endif
    return NULL;
}

void sn_cpu_register_depthwise(sn_kernel_table *t) {
#ifdef SN_HAVE_DNNL
    t->k[SN_OP_DEPTHWISE_CONV2D] = &k_dw_dnnl;
    t->k[SN_OP_DEPTHWISE_BWD_DATA] = &k_dw_dnnl;
    t->k[SN_OP_DEPTHWISE_BWD_FILTER] = &k_dw_dnnl;
#else
    (void)t; /* the reference rows stay */
#endif
}
