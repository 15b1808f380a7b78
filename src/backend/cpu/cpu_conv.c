/* CONV2D, CONV2D_BWD_DATA and CONV2D_BWD_FILTER on oneDNN, and the registration of every
 * heavy convolution/pooling kernel (see docs/kernels.md for why each op runs where it does).
 *
 * Activations stay NHWC in our buffers (oneDNN's nhwc tag, so no reorder of activations);
 * weights stay Keras HWIO ([KH, KW, C, F], oneDNN's hwio tag) in our buffers, and each run
 * reorders them to or from the blocked layout oneDNN's fastest kernels want, inside the
 * scratch memory the planner hands us. Every oneDNN object is built once per plan node in
 * prepare; a run only sets data handles and executes (sn_dnnl_op, dnnl_util.h).
 *
 * Mixed bfloat16 (c->bf16, on CPUs with AVX512-BF16): x, w and dy are converted to bf16 in
 * scratch (activations NHWC, weights blocked) and oneDNN accumulates and writes f32.
 *
 * Wide 3x3 stride-1 layers (the guide CNN's) run oneDNN's Winograd convolution instead, in
 * f32 (cpu_conv_wino.c; SN_CONV_ALGO=direct for A/B); under mixed bf16 on CPUs with AVX512-BF16
 * they run sinter's own bf16 Winograd F(2x2, 3x3) instead (cpu_conv_wino_bf16.c: oneDNN has
 * no bf16 Winograd, and its bf16 direct convolution is slower than its f32 Winograd;
 * SN_CONV_ALGO=wino_f32 keeps f32 Winograd for A/B). On AVX2 CPUs without AVX-512, where
 * oneDNN 2.6 has no Winograd, they run sinter's own f32 Winograd F(2x2, 3x3) in f32
 * (cpu_conv_wino_f32.c; SN_CONV_ALGO=direct turns it off too). */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/cpu_conv_slices.h"
#include "backend/cpu/cpu_conv_wino.h"
#include "backend/cpu/cpu_conv_wino_bf16.h"
#include "backend/cpu/cpu_conv_wino_f32.h"
#include "backend/cpu/dnnl_util.h"

/* sinter's f32 Winograd alone (cpu_conv_wino_f32.c; tests, measurements, and what the oneDNN
 * kernel below runs for the wide 3x3 layers on AVX2 CPUs): fails where it does not apply. */
static sn_status wino_f32_prepare(sn_kcall *c, size_t *scratch_bytes) {
    sn_cpu_wino_f32 *w = NULL;
    sn_status st = sn_cpu_conv_wino_f32_build(&w, c, scratch_bytes);
    c->state = w;
    return st == SN_OK ? SN_OK : sn_error_context(st, "preparing f32 Winograd for node %d",
                                                  (int)c->id);
}
static sn_status wino_f32_run(sn_kcall *c) {
    return sn_cpu_conv_wino_f32_run(c->state, c->in[0], c->in[1], c->out, c->scratch);
}
static void wino_f32_release(sn_kcall *c) {
    sn_cpu_conv_wino_f32_destroy(c->state);
    c->state = NULL;
}
static const sn_kernel k_conv_wino_f32 = {.impl = "wino_avx2",
                                          .supports = sn_cpu_conv_wino_f32_applies,
                                          .prepare = wino_f32_prepare,
                                          .run = wino_f32_run,
                                          .release = wino_f32_release};

#ifdef SN_HAVE_DNNL

/* A call's state: the direct primitive, or the Winograd convolution in batch slices. */
typedef struct conv_state {
    sn_dnnl_op direct;
    sn_cpu_wino *wino; /* non-NULL: this runs instead of direct */
    sn_cpu_wino_bf16 *wbf; /* non-NULL: this runs (sinter's bf16 Winograd) */
    sn_cpu_wino_f32 *wf;   /* non-NULL: this runs (sinter's f32 Winograd, AVX2 CPUs) */
    sn_conv_slices bf16_dw;  /* this runs where sliced (a bf16 filter gradient in batch slices) */
    bool sliced;
} conv_state;

static void conv_release(sn_kcall *c) {
    conv_state *s = c->state;
    if (!s) return;
    sn_dnnl_op_destroy(&s->direct);
    sn_cpu_conv_wino_destroy(s->wino);
    sn_cpu_conv_wino_bf16_destroy(s->wbf);
    sn_cpu_conv_wino_f32_destroy(s->wf);
    sn_conv_slices_destroy(&s->bf16_dw);
    free(s);
    c->state = NULL;
}

/* Builds the primitive for c->op. plain_weights: ask oneDNN for HWIO weights directly
 * (no reorder; used by the benchmark to show what the reorder buys). bf16: the mixed
 * precision of sn_plan_opts.bf16_compute: x, w and dy are converted to bfloat16 (in the
 * layouts oneDNN picks) and the primitive accumulates in float32 and writes float32 (bf16
 * where the plan stores the forward's output so: graph/plan_bf16.c). bias (conv2d
 * only): the forward adds an f32 bias [F] in its epilogue (SN_FUSED_CONV_BIAS). */
static sn_status conv_build_bias(sn_dnnl_op *s, const sn_kcall *c, bool plain_weights,
                                 bool bf16, bool bias, size_t *scratch_bytes) {
    sn_conv_geom g;
    SN_ASSERT(sn_conv_geom_bf16_of(c, &g));
    sn_op op = c->op;
    dnnl_engine_t eng;
    SN_TRY(sn_dnnl_engine(&eng));

    dnnl_dims_t xd = {g.n, g.c, g.h, g.w}, yd = {g.n, g.f, g.oh, g.ow}, wd = {g.f, g.c, g.kh, g.kw};
    dnnl_dims_t strides = {g.sh, g.sw}, pad_l = {g.pt, g.pl}, pad_r = {g.pb, g.pr};
    /* *u: our buffers (NHWC activations, f32 or, where the plan stores one so, bf16; Keras
     * HWIO f32 weights); *i: what the primitive reads. bf16 activations stay NHWC: with an
     * f32 NHWC partner (y, dx) and activations of format any, oneDNN 2.6 finds only its
     * reference kernel for forward and backward data (measured 100x slower); with NHWC it
     * runs brgconv / jit_bf16. A bf16 operand of ours is then what the primitive reads: no
     * reorder, no copy in scratch. */
    dnnl_memory_desc_t xu, yu, wu, xi, yi, wi, dwi;
    dnnl_format_tag_t wtag = plain_weights ? dnnl_hwio : dnnl_format_tag_any;
    sn_dtype xt = op == SN_OP_CONV2D_BWD_DATA ? SN_F32 : c->x[0].dtype;
    sn_dtype yt = op == SN_OP_CONV2D_BWD_DATA ? c->x[0].dtype
                  : op == SN_OP_CONV2D_BWD_FILTER ? c->x[1].dtype : c->y.dtype;
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&xu, 4, xd, xt == SN_BF16 ? dnnl_bf16 : dnnl_f32,
                                               dnnl_nhwc));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&yu, 4, yd, yt == SN_BF16 ? dnnl_bf16 : dnnl_f32,
                                               dnnl_nhwc));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&wu, 4, wd, dnnl_f32, dnnl_hwio));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&dwi, 4, wd, dnnl_f32, wtag));
    dnnl_memory_desc_t bu;
    dnnl_dims_t bd = {g.f};
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&bu, 1, bd, dnnl_f32, dnnl_a));
    if (bf16) {
        SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&xi, 4, xd, dnnl_bf16, dnnl_nhwc));
        SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&yi, 4, yd, dnnl_bf16, dnnl_nhwc));
        SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&wi, 4, wd, dnnl_bf16, wtag));
    } else { /* f32 (a bf16 operand of ours is converted up) */
        SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&xi, 4, xd, dnnl_f32, dnnl_nhwc));
        SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&yi, 4, yd, dnnl_f32, dnnl_nhwc));
        wi = dwi;
    }

    /* Backward primitives need the forward one as a hint: it sees the same operand types as
     * the backward op (dy's type for y). The forward writes our y as it is, f32 or bf16 (the
     * bf16 primitive rounds its f32 sums as it writes); in f32 with a bf16 y (a fallback) it
     * writes f32 into scratch and a reorder rounds that into y. */
    dnnl_convolution_desc_t fwd_d, d;
    SN_DNNL_CHECK(dnnl_convolution_forward_desc_init(
        &fwd_d, dnnl_forward_training, dnnl_convolution_direct, &xi, &wi,
        bias && op == SN_OP_CONV2D ? &bu : NULL,
        op == SN_OP_CONV2D && (bf16 || yt == SN_F32) ? &yu : &yi, strides, pad_l, pad_r));
    dnnl_primitive_attr_t attr;
    SN_TRY(sn_dnnl_attr_user_scratchpad(&attr));
    dnnl_primitive_desc_t fwd_pd = NULL, pd = NULL;
    dnnl_status_t st = dnnl_primitive_desc_create(&fwd_pd, &fwd_d, attr, eng, NULL);
    if (st == dnnl_success) {
        if (op == SN_OP_CONV2D) {
            pd = fwd_pd;
            fwd_pd = NULL;
        } else {
            if (op == SN_OP_CONV2D_BWD_DATA)
                st = dnnl_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &xu,
                                                              &wi, &yi, strides, pad_l, pad_r);
            else
                st = dnnl_convolution_backward_weights_desc_init(
                    &d, dnnl_convolution_direct, &xi, &dwi, NULL, &yi, strides, pad_l, pad_r);
            if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &d, attr, eng, fwd_pd);
        }
    }
    if (fwd_pd) dnnl_primitive_desc_destroy(fwd_pd);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        return sn_dnnl_error(st, "convolution primitive descriptor", __FILE__, __LINE__);

    sn_status r = sn_dnnl_conv_op_init(s, pd, op, &xu, &wu, &yu, scratch_bytes);
    dnnl_primitive_desc_destroy(pd);
    if (r == SN_OK && bias && op == SN_OP_CONV2D && (r = sn_dnnl_op_add_bias(s, g.f)) != SN_OK)
        sn_dnnl_op_destroy(s);
    return r;
}

static sn_status conv_build(sn_dnnl_op *s, const sn_kcall *c, bool plain_weights, bool bf16,
                            size_t *scratch_bytes) {
    return conv_build_bias(s, c, plain_weights, bf16, false, scratch_bytes);
}

static const char *conv_op_name(sn_op op) {
    return op == SN_OP_CONV2D              ? "conv2d"
           : op == SN_OP_CONV2D_BWD_DATA ? "conv2d_bwd_data"
                                         : "conv2d_bwd_filter";
}

/* The layout of the weights oneDNN computes with. Blocked (oneDNN's choice) wins by 2-4x on
 * wide layers (the seed CNN's conv2, C = 256). With few input channels the blocked kernels
 * pad C up to a block of 16 and lose 2-4x, in all three ops, to the GEMM-based kernels oneDNN
 * runs on plain HWIO weights (the seed CNN's conv1, C = 1). Measured in docs/kernels.md. */
enum { CONV_PLAIN_BELOW_C = 16 };

/* Mixed bfloat16 where the plan asks for it and the CPU has AVX512-BF16 (elsewhere oneDNN
 * would emulate it, slower than f32). Narrow layers (C < 16) stay f32: a reduction over
 * kh*kw*C <= 135 terms is memory-bound, so bf16 buys nothing there (docs/kernels.md). */
static bool conv_use_bf16(const sn_kcall *c, const sn_conv_geom *g) {
    return c->bf16 && sn_cpu_bf16_pays() && g->c >= CONV_PLAIN_BELOW_C;
}

/* Whether any operand of c is bfloat16 (graph/plan_bf16.c stores a value so where every
 * reader converts it to bfloat16 anyway) */
static bool has_bf16_operand(const sn_kcall *c) {
    return c->x[0].dtype == SN_BF16 || c->x[1].dtype == SN_BF16 || c->y.dtype == SN_BF16;
}
/* The calls with bf16 operands this kernel takes: 1x1 convolutions (no Winograd applies to
 * them) that compute in bf16 under mixed bf16, so the operand is the very copy the call would
 * have made. sinter's other convolutions (Winograd, c1, im2col) read f32 only. */
static bool bf16_operands_ok(const sn_kcall *c, sn_conv_geom *g) {
    return sn_conv_geom_bf16_of(c, g) && g->kh == 1 && g->kw == 1 && conv_use_bf16(c, g);
}
/* The geometry of a call this file takes: all f32, or bf16 operands as above. */
static bool conv_geom(const sn_kcall *c, sn_conv_geom *g) {
    return has_bf16_operand(c) ? bf16_operands_ok(c, g) : sn_conv_geom_of(c, g);
}

/* The filter gradient under mixed bf16 converts x and dy to bf16 copies in scratch, which
 * on wide layers are the largest scratch of a step, and it runs while every activation saved
 * for the backward pass is live: the small Xception's 728 -> 728 pointwise gradient at 12x12
 * set the plan's peak with 17 MB of scratch (13 MB of them the copies). So a call whose copies
 * exceed BF16_DW_SLICE_BYTES runs over slices of the batch of at most that much each, but of
 * at least BF16_DW_MIN_ROWS output pixels: each slice adds a pass over dw (oneDNN's reduction
 * over threads, the reorder to HWIO, the sum into dw), which a GEMM of a few thousand rows
 * hides. Measured in docs/benchmarks-notes.md. */
enum { BF16_DW_MIN_ROWS = 2048 };
static const size_t BF16_DW_SLICE_BYTES = (size_t)4 << 20;

static int64_t bf16_dw_slice_images(const sn_kcall *c, const sn_conv_geom *g) {
    if (c->op != SN_OP_CONV2D_BWD_FILTER) return g->n;
    /* the bf16 copies of the f32 operands (one already bf16 needs none) */
    size_t per_image = (size_t)((c->x[0].dtype == SN_F32 ? g->h * g->w * g->c : 0) +
                                (c->x[1].dtype == SN_F32 ? g->oh * g->ow * g->f : 0)) * 2;
    if (per_image == 0) return g->n;
    int64_t by_bytes = (int64_t)(BF16_DW_SLICE_BYTES / per_image);
    int64_t by_rows = (BF16_DW_MIN_ROWS + g->oh * g->ow - 1) / (g->oh * g->ow);
    int64_t n = by_bytes > by_rows ? by_bytes : by_rows;
    return n < g->n ? n : g->n;
}
static sn_status bf16_dw_build_n(sn_dnnl_op *op, const sn_kcall *c, int64_t n,
                                 size_t *scratch_bytes) {
    sn_kcall cn = sn_conv_call_with_batch(c, n);
    return conv_build(op, &cn, false, true, scratch_bytes);
}
static sn_status bf16_dw_build(conv_state *s, const sn_kcall *c, const sn_conv_geom *g,
                               size_t *scratch_bytes) {
    sn_status st = sn_conv_slices_build(&s->bf16_dw, c, bf16_dw_slice_images(c, g),
                                        bf16_dw_build_n, scratch_bytes);
    s->sliced = st == SN_OK;
    return st;
}

/* wino: take the Winograd convolution (cpu_conv_wino.c) where it applies, is enabled and
 * this oneDNN has it; otherwise direct. */
static sn_status conv_prepare_impl(sn_kcall *c, size_t *scratch_bytes, bool plain, bool wino) {
    sn_conv_geom g;
    SN_ASSERT(conv_geom(c, &g));
    conv_state *s = sn_calloc(1, sizeof *s);
    if (!s) return SN_ERR_NOMEM;
    c->state = s;
    *scratch_bytes = 0;
    sn_status st = SN_ERR_UNSUPPORTED;
    /* Under mixed bf16: sinter's bf16 Winograd first (fewer multiplications at the bf16
     * rate); where it does not apply or is switched off, what follows. */
    if (wino && !plain && conv_use_bf16(c, &g) && sn_cpu_conv_wino_bf16_enabled() &&
        sn_cpu_conv_wino_bf16_applies(c) &&
        sn_cpu_conv_wino_bf16_build(&s->wbf, c, scratch_bytes) == SN_OK)
        return SN_OK;
    if (wino && !plain &&
        (!conv_use_bf16(c, &g) || (sn_cpu_conv_wino_over_bf16() && sn_cpu_conv_wino_wide(c))) &&
        sn_cpu_conv_wino_enabled() && sn_cpu_conv_wino_pays(c))
        st = sn_cpu_conv_wino_build(&s->wino, c, scratch_bytes);
    if (st == SN_OK) return SN_OK;
    /* AVX2 CPUs (no oneDNN Winograd): sinter's f32 Winograd, in f32 only (under mixed bf16
     * such a CPU has no bf16 and runs f32 anyway). */
    if (wino && !plain && !conv_use_bf16(c, &g) && sn_cpu_conv_wino_enabled() &&
        sn_cpu_conv_wino_f32_applies(c) &&
        sn_cpu_conv_wino_f32_build(&s->wf, c, scratch_bytes) == SN_OK)
        return SN_OK;
    st = SN_ERR_UNSUPPORTED; /* no Winograd here: direct, as below */
    if (!plain && conv_use_bf16(c, &g) && bf16_dw_slice_images(c, &g) < g.n) {
        st = bf16_dw_build(s, c, &g, scratch_bytes);
    } else if (conv_use_bf16(c, &g)) {
        st = conv_build(&s->direct, c, plain, true, scratch_bytes);
        /* A oneDNN without a bf16 kernel for this shape: f32 is still correct. */
    }
    if (st == SN_ERR_UNSUPPORTED) st = conv_build(&s->direct, c, plain, false, scratch_bytes);
    if (st != SN_OK) {
        conv_release(c);
        return sn_error_context(st, "preparing oneDNN %s for node %d", conv_op_name(c->op),
                                (int)c->id);
    }
    return SN_OK;
}

static sn_status conv_prepare(sn_kcall *c, size_t *scratch_bytes) {
    sn_conv_geom g;
    SN_ASSERT(conv_geom(c, &g));
    return conv_prepare_impl(c, scratch_bytes, g.c < CONV_PLAIN_BELOW_C, true);
}
static sn_status conv_prepare_blocked(sn_kcall *c, size_t *scratch_bytes) {
    return conv_prepare_impl(c, scratch_bytes, false, false);
}
static sn_status conv_prepare_plain(sn_kcall *c, size_t *scratch_bytes) {
    return conv_prepare_impl(c, scratch_bytes, true, false);
}
/* Winograd only (tests, measurements): fails where it does not apply or is not built. */
static sn_status conv_prepare_wino(sn_kcall *c, size_t *scratch_bytes) {
    conv_state *s = sn_calloc(1, sizeof *s);
    if (!s) return SN_ERR_NOMEM;
    c->state = s;
    sn_status st = sn_cpu_conv_wino_build(&s->wino, c, scratch_bytes);
    if (st != SN_OK) {
        conv_release(c);
        return sn_error_context(st, "preparing oneDNN Winograd %s for node %d",
                                conv_op_name(c->op), (int)c->id);
    }
    return SN_OK;
}

/* CONV2D:            x [N, H, W, C], w [KH, KW, C, F] -> y [N, OH, OW, F]
 * CONV2D_BWD_DATA:   dy [N, OH, OW, F], w [KH, KW, C, F] -> dx [N, H, W, C]
 * CONV2D_BWD_FILTER: x [N, H, W, C], dy [N, OH, OW, F] -> dw [KH, KW, C, F] */
static sn_status conv_run(sn_kcall *c) {
    conv_state *s = c->state;
    if (s->wbf) return sn_cpu_conv_wino_bf16_run(s->wbf, c->in[0], c->in[1], c->out, c->scratch);
    if (s->wino) return sn_cpu_conv_wino_run(s->wino, c->in[0], c->in[1], c->out, c->scratch);
    if (s->wf) return sn_cpu_conv_wino_f32_run(s->wf, c->in[0], c->in[1], c->out, c->scratch);
    if (s->sliced) return sn_conv_slices_run(&s->bf16_dw, c->in[0], c->in[1], c->out, c->scratch);
    return sn_dnnl_op_run(&s->direct, c->in[0], c->in[1], c->out, c->scratch);
}

/* sinter's bf16 Winograd only (tests, measurements), whatever c->bf16 says: fails where it
 * does not apply. */
static sn_status conv_prepare_wino_bf16(sn_kcall *c, size_t *scratch_bytes) {
    conv_state *s = sn_calloc(1, sizeof *s);
    if (!s) return SN_ERR_NOMEM;
    c->state = s;
    sn_status st = sn_cpu_conv_wino_bf16_build(&s->wbf, c, scratch_bytes);
    if (st != SN_OK) {
        conv_release(c);
        return sn_error_context(st, "preparing bf16 Winograd %s for node %d",
                                conv_op_name(c->op), (int)c->id);
    }
    return SN_OK;
}

static bool conv_supports(const sn_kcall *c) {
    sn_conv_geom g;
    return conv_geom(c, &g);
}
static bool conv_supports_wino(const sn_kcall *c) { return sn_cpu_conv_wino_applies(c); }
static bool conv_supports_wino_bf16(const sn_kcall *c) {
    return sn_cpu_conv_wino_bf16_applies(c);
}

/* bf16_io: every supports() here takes bf16 operands only where the call computes in bf16
 * anyway (conv_geom; the Winograd ones never) */
#define CONV_DNNL_KERNEL(name, impl_name, prep, sup)                                           \
    static const sn_kernel name = {.impl = impl_name,                                          \
                                   .supports = sup,                                            \
                                   .prepare = prep,                                            \
                                   .run = conv_run,                                            \
                                   .release = conv_release,                                    \
                                   .bf16_io = true}
CONV_DNNL_KERNEL(k_conv_dnnl, "dnnl", conv_prepare, conv_supports);
CONV_DNNL_KERNEL(k_conv_dnnl_blocked, "dnnl_blocked", conv_prepare_blocked, conv_supports);
CONV_DNNL_KERNEL(k_conv_dnnl_plain, "dnnl_plain", conv_prepare_plain, conv_supports);
CONV_DNNL_KERNEL(k_conv_dnnl_wino, "dnnl_wino", conv_prepare_wino, conv_supports_wino);
/* Next to oneDNN's f32 Winograd: the bf16 one of our own (cpu_conv_wino_bf16.c), which the
 * default kernel takes under mixed bf16; "wino_bf16" runs it alone. */
CONV_DNNL_KERNEL(k_conv_wino_bf16, "wino_bf16", conv_prepare_wino_bf16,
                 conv_supports_wino_bf16);

/* The filter gradient of a one-channel input with few filters goes to cpu_conv_c1.c (oneDNN
 * runs it far below peak, docs/kernels.md); every other one to oneDNN. The choice is made in
 * prepare and kept with the chosen kernel's own state: at release the call's shapes and
 * attributes may no longer be readable (the graph can go first). */
typedef struct bwdf_state {
    const sn_kernel *k;
    void *inner; /* k's state */
} bwdf_state;

static bool bwdf_supports(const sn_kcall *c) {
    return sn_cpu_conv_c1_kernel()->supports(c) || conv_supports(c);
}
static sn_status bwdf_prepare(sn_kcall *c, size_t *scratch_bytes) {
    const sn_kernel *k =
        sn_cpu_conv_c1_kernel()->supports(c) ? sn_cpu_conv_c1_kernel() : &k_conv_dnnl;
    bwdf_state *w = sn_calloc(1, sizeof *w);
    if (!w) return SN_ERR_NOMEM;
    c->state = NULL;
    sn_status s = k->prepare(c, scratch_bytes);
    if (s != SN_OK) {
        free(w);
        return s;
    }
    w->k = k;
    w->inner = c->state;
    c->state = w;
    return SN_OK;
}
static sn_status bwdf_run(sn_kcall *c) {
    bwdf_state *w = c->state;
    c->state = w->inner;
    sn_status s = w->k->run(c);
    c->state = w;
    return s;
}
static void bwdf_release(sn_kcall *c) {
    bwdf_state *w = c->state;
    if (!w) return;
    c->state = w->inner;
    if (w->k->release) w->k->release(c);
    free(w);
    c->state = NULL;
}
static const sn_kernel k_conv_bwd_filter = {.impl = "dnnl|c1",
                                            .supports = bwdf_supports,
                                            .prepare = bwdf_prepare,
                                            .run = bwdf_run,
                                            .release = bwdf_release,
                                            .bf16_io = true};

/* SN_FUSED_CONV_BIAS: conv2d -> bias_add with no relu after it (a convolution followed by
 * BatchNormalization, as in Xception's SeparableConv2D pointwise halves and residual 1x1s):
 * the bias goes into the primitive's epilogue, which saves the bias_add's pass over the
 * output (a read and a write of y). Direct convolution only, in the precision conv_prepare
 * would pick: where a Winograd convolution would run, the pattern is left unfused.
 *
 * Only on AVX-512 CPUs: there oneDNN's kernels add the bias to the finished sum, the bits of
 * the unfused conv2d then bias_add (tests/test_fused.c). Its AVX2 kernels start the sum from
 * the bias instead (measured on an AMD Zen 3, 2026-12-02: relative differences of ~3e-7), so
 * there the pattern stays unfused and a fusion never changes a result. */
static bool conv_bias_base(const sn_kcall *c, sn_kcall *base, sn_conv_geom *g) {
    const sn_cpu_features *cpu = sn_cpu();
    if (c->op != SN_OP_CONV2D || c->fused != SN_FUSED_CONV_BIAS || c->n_in != 3 ||
        c->n_out2 != 0 || !(cpu->avx512f && cpu->avx512bw && cpu->avx512vl))
        return false;
    *base = *c;
    base->n_in = 2;
    base->fused = SN_FUSED_NONE;
    return conv_geom(base, g) && c->x[2].dtype == SN_F32 &&
           sn_shape_numel(&c->x[2].shape) == g->f && !sn_cpu_conv_wino_applies(base) &&
           !sn_cpu_conv_wino_bf16_applies(base);
}
static bool conv_bias_supports(const sn_kcall *c) {
    sn_kcall base;
    sn_conv_geom g;
    return conv_bias_base(c, &base, &g);
}
static sn_status conv_bias_prepare(sn_kcall *c, size_t *scratch_bytes) {
    sn_kcall base;
    sn_conv_geom g;
    SN_ASSERT(conv_bias_base(c, &base, &g));
    conv_state *s = sn_calloc(1, sizeof *s);
    if (!s) return SN_ERR_NOMEM;
    c->state = s;
    bool plain = g.c < CONV_PLAIN_BELOW_C;
    sn_status st = SN_ERR_UNSUPPORTED;
    if (conv_use_bf16(&base, &g))
        st = conv_build_bias(&s->direct, &base, plain, true, true, scratch_bytes);
    if (st == SN_ERR_UNSUPPORTED)
        st = conv_build_bias(&s->direct, &base, plain, false, true, scratch_bytes);
    if (st != SN_OK) {
        conv_release(c);
        return sn_error_context(st, "preparing oneDNN conv2d with bias for node %d", (int)c->id);
    }
    return SN_OK;
}
static sn_status conv_bias_run(sn_kcall *c) {
    conv_state *s = c->state;
    return sn_dnnl_op_run_bias(&s->direct, c->in[0], c->in[1], c->in[2], c->out, c->scratch);
}
static const sn_kernel k_conv_bias = {.impl = "dnnl_bias",
                                      .supports = conv_bias_supports,
                                      .prepare = conv_bias_prepare,
                                      .run = conv_bias_run,
                                      .release = conv_release,
                                      .bf16_io = true};
#endif /* SN_HAVE_DNNL */

const sn_kernel *sn_cpu_conv_impl(sn_op op, const char *impl) {
    if (op != SN_OP_CONV2D && op != SN_OP_CONV2D_BWD_DATA && op != SN_OP_CONV2D_BWD_FILTER)
        return NULL;
    if (strcmp(impl, "openblas") == 0) return sn_cpu_conv_gemm_kernel();
    if (strcmp(impl, "c1") == 0)
        return op == SN_OP_CONV2D_BWD_FILTER ? sn_cpu_conv_c1_kernel() : NULL;
    if (strcmp(impl, "wino_avx2") == 0) return &k_conv_wino_f32;
#ifdef SN_HAVE_DNNL
    if (strcmp(impl, "dnnl") == 0) return &k_conv_dnnl;
    if (strcmp(impl, "dnnl_blocked") == 0) return &k_conv_dnnl_blocked;
    if (strcmp(impl, "dnnl_plain") == 0) return &k_conv_dnnl_plain;
    if (strcmp(impl, "dnnl_wino") == 0) return &k_conv_dnnl_wino;
    if (strcmp(impl, "wino_bf16") == 0) return &k_conv_wino_bf16;
    if (strcmp(impl, "dnnl_bias") == 0) return op == SN_OP_CONV2D ? &k_conv_bias : NULL;
#endif
    return NULL;
}

void sn_cpu_register_conv(sn_kernel_table *t) {
    /* The choice per op is measured: see docs/kernels.md. */
#ifdef SN_HAVE_DNNL
    t->k[SN_OP_CONV2D] = &k_conv_dnnl;
    t->k[SN_OP_CONV2D_BWD_DATA] = &k_conv_dnnl;
    t->k[SN_OP_CONV2D_BWD_FILTER] = &k_conv_bwd_filter;
    t->fused[SN_FUSED_CONV_BIAS] = &k_conv_bias;
#else
    t->k[SN_OP_CONV2D] = sn_cpu_conv_gemm_kernel();
    t->k[SN_OP_CONV2D_BWD_DATA] = sn_cpu_conv_gemm_kernel();
    t->k[SN_OP_CONV2D_BWD_FILTER] = sn_cpu_conv_gemm_kernel();
#endif
    static const sn_op pools[] = {SN_OP_MAX_POOL2D, SN_OP_MAX_POOL2D_GRAD, SN_OP_AVG_POOL2D,
                                  SN_OP_AVG_POOL2D_GRAD};
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
        t->k[pools[i]] = sn_cpu_pool_impl(pools[i]);
    sn_cpu_register_depthwise(t); /* cpu_depthwise.c */
}
