/* CONV2D, CONV2D_BWD_DATA and CONV2D_BWD_FILTER on oneDNN, and the registration of every
 * heavy convolution/pooling kernel (see docs/kernels.md for why each op runs where it does).
 *
 * Activations stay NHWC in our buffers (oneDNN's nhwc tag, so no reorder of activations);
 * weights stay Keras HWIO ([KH, KW, C, F], oneDNN's hwio tag) in our buffers, and each run
 * reorders them to or from the blocked layout oneDNN's fastest kernels want, inside the
 * scratch memory the planner hands us. Every oneDNN object is built once per plan node in
 * prepare; a run only sets data handles and executes. */
#include <string.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/dnnl_util.h"

bool sn_conv_geom_of(const sn_kcall *c, sn_conv_geom *g) {
    const sn_node_t *nd = c->node;
    if (c->n_in != 2 || nd->dtype != SN_F32) return false;
    if (c->in_node[0]->dtype != SN_F32 || c->in_node[1]->dtype != SN_F32) return false;
    const sn_shape *xs, *ws, *ys;
    switch (nd->op) {
    case SN_OP_CONV2D:
        xs = &c->in_node[0]->shape, ws = &c->in_node[1]->shape, ys = &nd->shape;
        break;
    case SN_OP_CONV2D_BWD_DATA:
        xs = &nd->shape, ws = &c->in_node[1]->shape, ys = &c->in_node[0]->shape;
        break;
    case SN_OP_CONV2D_BWD_FILTER:
        xs = &c->in_node[0]->shape, ws = &nd->shape, ys = &c->in_node[1]->shape;
        break;
    default: return false;
    }
    if (xs->ndim != 4 || ws->ndim != 4 || ys->ndim != 4) return false;
    g->n = xs->dim[0], g->h = xs->dim[1], g->w = xs->dim[2], g->c = xs->dim[3];
    g->kh = ws->dim[0], g->kw = ws->dim[1], g->f = ws->dim[3];
    g->oh = ys->dim[1], g->ow = ys->dim[2];
    if (ws->dim[2] != g->c || ys->dim[0] != g->n || ys->dim[3] != g->f) return false;
    g->sh = nd->attr.conv.stride_h, g->sw = nd->attr.conv.stride_w;
    g->pt = nd->attr.conv.pad_top, g->pl = nd->attr.conv.pad_left;
    if (g->sh < 1 || g->sw < 1 || g->pt < 0 || g->pl < 0) return false;
    if (g->n < 1 || g->h < 1 || g->w < 1 || g->c < 1 || g->kh < 1 || g->kw < 1 || g->f < 1 ||
        g->oh < 1 || g->ow < 1)
        return false;
    g->pb = (g->oh - 1) * g->sh + g->kh - g->h - g->pt;
    g->pr = (g->ow - 1) * g->sw + g->kw - g->w - g->pl;
    /* A negative implied padding (rows the output never reads) is left to the reference. */
    if (g->pb < 0 || g->pr < 0) return false;
    /* Windows that lie wholly in the padding: legal, but not worth a fast path. */
    if (g->pt >= g->kh || g->pl >= g->kw || g->pb >= g->kh || g->pr >= g->kw) return false;
    return true;
}

#ifdef SN_HAVE_DNNL

typedef struct conv_dnnl {
    dnnl_primitive_t prim;
    dnnl_primitive_t reorder;      /* weights HWIO <-> oneDNN's layout; NULL when equal */
    dnnl_memory_t in0, in1, out;   /* our buffers (one of them is the HWIO weights) */
    dnnl_memory_t w_int;           /* weights in oneDNN's layout, in scratch */
    dnnl_memory_t scratch, reorder_scratch;
    size_t w_int_off;              /* byte offset of w_int in c->scratch */
} conv_dnnl;

static void conv_release(sn_kcall *c) {
    conv_dnnl *s = c->state;
    if (!s) return;
    if (s->prim) dnnl_primitive_destroy(s->prim);
    if (s->reorder) dnnl_primitive_destroy(s->reorder);
    dnnl_memory_t mems[] = {s->in0, s->in1, s->out, s->w_int, s->scratch, s->reorder_scratch};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    free(s);
    c->state = NULL;
}

static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

static size_t pd_scratch(const_dnnl_primitive_desc_t pd, const dnnl_memory_desc_t **md) {
    *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    return *md ? dnnl_memory_desc_get_size(*md) : 0;
}

/* Builds the primitive for c->node->op. plain_weights: ask oneDNN for HWIO weights directly
 * (no reorder; used by the benchmark to show what the reorder buys). */
static sn_status conv_build(conv_dnnl *s, const sn_kcall *c, bool plain_weights,
                            size_t *scratch_bytes) {
    sn_conv_geom g;
    SN_ASSERT(sn_conv_geom_of(c, &g));
    sn_op op = c->node->op;
    dnnl_engine_t eng;
    SN_TRY(sn_dnnl_engine(&eng));

    dnnl_dims_t xd = {g.n, g.c, g.h, g.w}, yd = {g.n, g.f, g.oh, g.ow}, wd = {g.f, g.c, g.kh, g.kw};
    dnnl_dims_t strides = {g.sh, g.sw}, pad_l = {g.pt, g.pl}, pad_r = {g.pb, g.pr};
    dnnl_memory_desc_t xmd, ymd, wuser, wany;
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&xmd, 4, xd, dnnl_f32, dnnl_nhwc));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&ymd, 4, yd, dnnl_f32, dnnl_nhwc));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&wuser, 4, wd, dnnl_f32, dnnl_hwio));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&wany, 4, wd, dnnl_f32,
                                               plain_weights ? dnnl_hwio : dnnl_format_tag_any));

    /* Backward primitives need the forward one as a hint. */
    dnnl_convolution_desc_t fwd_d, d;
    SN_DNNL_CHECK(dnnl_convolution_forward_desc_init(&fwd_d, dnnl_forward_training,
                                                     dnnl_convolution_direct, &xmd, &wany, NULL,
                                                     &ymd, strides, pad_l, pad_r));
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
                st = dnnl_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &xmd,
                                                              &wany, &ymd, strides, pad_l, pad_r);
            else
                st = dnnl_convolution_backward_weights_desc_init(
                    &d, dnnl_convolution_direct, &xmd, &wany, NULL, &ymd, strides, pad_l, pad_r);
            if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &d, attr, eng, fwd_pd);
        }
    }
    if (fwd_pd) dnnl_primitive_desc_destroy(fwd_pd);
    if (st != dnnl_success) {
        dnnl_primitive_attr_destroy(attr);
        return sn_dnnl_error(st, "convolution primitive descriptor", __FILE__, __LINE__);
    }

    const dnnl_memory_desc_t *smd;
    size_t prim_scratch = pd_scratch(pd, &smd);
    if (prim_scratch) st = dnnl_memory_create(&s->scratch, smd, eng, DNNL_MEMORY_NONE);
    const dnnl_memory_desc_t *wint = dnnl_primitive_desc_query_md(
        pd, op == SN_OP_CONV2D_BWD_FILTER ? dnnl_query_diff_weights_md : dnnl_query_weights_md, 0);
    if (!wint) st = dnnl_runtime_error;
    dnnl_memory_desc_t wint_md = wint ? *wint : wuser;
    if (st == dnnl_success) st = dnnl_primitive_create(&s->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) {
        dnnl_primitive_attr_destroy(attr);
        return sn_dnnl_error(st, "convolution primitive", __FILE__, __LINE__);
    }

    size_t reorder_scratch = 0;
    if (!dnnl_memory_desc_equal(&wint_md, &wuser)) {
        dnnl_primitive_desc_t rpd;
        if (op == SN_OP_CONV2D_BWD_FILTER)
            st = dnnl_reorder_primitive_desc_create(&rpd, &wint_md, eng, &wuser, eng, attr);
        else
            st = dnnl_reorder_primitive_desc_create(&rpd, &wuser, eng, &wint_md, eng, attr);
        if (st == dnnl_success) {
            reorder_scratch = pd_scratch(rpd, &smd);
            if (reorder_scratch)
                st = dnnl_memory_create(&s->reorder_scratch, smd, eng, DNNL_MEMORY_NONE);
            if (st == dnnl_success) st = dnnl_primitive_create(&s->reorder, rpd);
            dnnl_primitive_desc_destroy(rpd);
        }
        if (st == dnnl_success)
            st = dnnl_memory_create(&s->w_int, &wint_md, eng, DNNL_MEMORY_NONE);
    }
    dnnl_primitive_attr_destroy(attr);
    SN_DNNL_CHECK(st);

    /* The two scratchpads are used one after the other: they share offset 0; the weights in
     * oneDNN's layout follow them. */
    size_t pads = round64(prim_scratch > reorder_scratch ? prim_scratch : reorder_scratch);
    s->w_int_off = pads;
    *scratch_bytes = pads + (s->w_int ? round64(dnnl_memory_desc_get_size(&wint_md)) : 0);

    const dnnl_memory_desc_t *in0 = op == SN_OP_CONV2D_BWD_DATA ? &ymd : &xmd;
    const dnnl_memory_desc_t *in1 = op == SN_OP_CONV2D_BWD_FILTER ? &ymd : &wuser;
    const dnnl_memory_desc_t *out =
        op == SN_OP_CONV2D ? &ymd : op == SN_OP_CONV2D_BWD_DATA ? &xmd : &wuser;
    SN_DNNL_CHECK(dnnl_memory_create(&s->in0, in0, eng, DNNL_MEMORY_NONE));
    SN_DNNL_CHECK(dnnl_memory_create(&s->in1, in1, eng, DNNL_MEMORY_NONE));
    SN_DNNL_CHECK(dnnl_memory_create(&s->out, out, eng, DNNL_MEMORY_NONE));
    return SN_OK;
}

static const char *conv_op_name(sn_op op) {
    return op == SN_OP_CONV2D              ? "conv2d"
           : op == SN_OP_CONV2D_BWD_DATA ? "conv2d_bwd_data"
                                         : "conv2d_bwd_filter";
}

static sn_status conv_prepare_impl(sn_kcall *c, size_t *scratch_bytes, bool plain) {
    conv_dnnl *s = sn_calloc(1, sizeof *s);
    if (!s) return SN_ERR_NOMEM;
    c->state = s;
    *scratch_bytes = 0;
    sn_status st = conv_build(s, c, plain, scratch_bytes);
    if (st != SN_OK) {
        conv_release(c);
        return sn_error_context(st, "preparing oneDNN %s for node %d", conv_op_name(c->node->op),
                                (int)c->id);
    }
    return SN_OK;
}

/* The layout of the weights oneDNN computes with. Blocked (oneDNN's choice) wins by 2-4x on
 * wide layers (the seed CNN's conv2, C = 256). With few input channels the blocked kernels
 * pad C up to a block of 16 and lose 2-4x, in all three ops, to the GEMM-based kernels oneDNN
 * runs on plain HWIO weights (the seed CNN's conv1, C = 1). Measured in docs/kernels.md. */
enum { CONV_PLAIN_BELOW_C = 16 };

static sn_status conv_prepare(sn_kcall *c, size_t *scratch_bytes) {
    sn_conv_geom g;
    SN_ASSERT(sn_conv_geom_of(c, &g));
    return conv_prepare_impl(c, scratch_bytes, g.c < CONV_PLAIN_BELOW_C);
}
static sn_status conv_prepare_blocked(sn_kcall *c, size_t *scratch_bytes) {
    return conv_prepare_impl(c, scratch_bytes, false);
}
static sn_status conv_prepare_plain(sn_kcall *c, size_t *scratch_bytes) {
    return conv_prepare_impl(c, scratch_bytes, true);
}

static sn_status run_reorder(conv_dnnl *s, dnnl_stream_t stream, dnnl_memory_t from,
                             dnnl_memory_t to) {
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to},
                               {DNNL_ARG_SCRATCHPAD, s->reorder_scratch}};
    SN_DNNL_CHECK(dnnl_primitive_execute(s->reorder, stream, s->reorder_scratch ? 3 : 2, args));
    return SN_OK;
}

/* CONV2D:            x [N, H, W, C], w [KH, KW, C, F] -> y [N, OH, OW, F]
 * CONV2D_BWD_DATA:   dy [N, OH, OW, F], w [KH, KW, C, F] -> dx [N, H, W, C]
 * CONV2D_BWD_FILTER: x [N, H, W, C], dy [N, OH, OW, F] -> dw [KH, KW, C, F] */
static sn_status conv_run(sn_kcall *c) {
    conv_dnnl *s = c->state;
    sn_op op = c->node->op;
    dnnl_stream_t stream;
    SN_TRY(sn_dnnl_stream(&stream));
    SN_DNNL_CHECK(dnnl_memory_set_data_handle(s->in0, (void *)c->in[0]));
    SN_DNNL_CHECK(dnnl_memory_set_data_handle(s->in1, (void *)c->in[1]));
    SN_DNNL_CHECK(dnnl_memory_set_data_handle(s->out, c->out));
    if (s->scratch) SN_DNNL_CHECK(dnnl_memory_set_data_handle(s->scratch, c->scratch));
    if (s->reorder_scratch)
        SN_DNNL_CHECK(dnnl_memory_set_data_handle(s->reorder_scratch, c->scratch));
    if (s->w_int)
        SN_DNNL_CHECK(
            dnnl_memory_set_data_handle(s->w_int, (unsigned char *)c->scratch + s->w_int_off));

    dnnl_memory_t w = s->w_int ? s->w_int : op == SN_OP_CONV2D_BWD_FILTER ? s->out : s->in1;
    if (s->reorder && op != SN_OP_CONV2D_BWD_FILTER) SN_TRY(run_reorder(s, stream, s->in1, w));
    dnnl_exec_arg_t args[4];
    switch (op) {
    case SN_OP_CONV2D:
        args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, s->in0};
        args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, w};
        args[2] = (dnnl_exec_arg_t){DNNL_ARG_DST, s->out};
        break;
    case SN_OP_CONV2D_BWD_DATA:
        args[0] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, s->in0};
        args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, w};
        args[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, s->out};
        break;
    default:
        args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, s->in0};
        args[1] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, s->in1};
        args[2] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, w};
        break;
    }
    args[3] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, s->scratch};
    SN_DNNL_CHECK(dnnl_primitive_execute(s->prim, stream, s->scratch ? 4 : 3, args));
    if (s->reorder && op == SN_OP_CONV2D_BWD_FILTER) SN_TRY(run_reorder(s, stream, w, s->out));
    return SN_OK;
}

static bool conv_supports(const sn_kcall *c) {
    sn_conv_geom g;
    return sn_conv_geom_of(c, &g);
}

#define CONV_DNNL_KERNEL(name, impl_name, prep)                                                \
    static const sn_kernel name = {.impl = impl_name,                                          \
                                   .supports = conv_supports,                                  \
                                   .prepare = prep,                                            \
                                   .run = conv_run,                                            \
                                   .release = conv_release}
CONV_DNNL_KERNEL(k_conv_dnnl, "dnnl", conv_prepare);
CONV_DNNL_KERNEL(k_conv_dnnl_blocked, "dnnl_blocked", conv_prepare_blocked);
CONV_DNNL_KERNEL(k_conv_dnnl_plain, "dnnl_plain", conv_prepare_plain);
#endif /* SN_HAVE_DNNL */

const sn_kernel *sn_cpu_conv_impl(sn_op op, const char *impl) {
    if (op != SN_OP_CONV2D && op != SN_OP_CONV2D_BWD_DATA && op != SN_OP_CONV2D_BWD_FILTER)
        return NULL;
    if (strcmp(impl, "openblas") == 0) return sn_cpu_conv_gemm_kernel();
#ifdef SN_HAVE_DNNL
    if (strcmp(impl, "dnnl") == 0) return &k_conv_dnnl;
    if (strcmp(impl, "dnnl_blocked") == 0) return &k_conv_dnnl_blocked;
    if (strcmp(impl, "dnnl_plain") == 0) return &k_conv_dnnl_plain;
#endif
    return NULL;
}

void sn_cpu_register_conv(sn_kernel_table *t) {
    /* The choice per op is measured: see docs/kernels.md. */
#ifdef SN_HAVE_DNNL
    t->k[SN_OP_CONV2D] = &k_conv_dnnl;
    t->k[SN_OP_CONV2D_BWD_DATA] = &k_conv_dnnl;
    t->k[SN_OP_CONV2D_BWD_FILTER] = &k_conv_dnnl;
#else
    t->k[SN_OP_CONV2D] = sn_cpu_conv_gemm_kernel();
    t->k[SN_OP_CONV2D_BWD_DATA] = sn_cpu_conv_gemm_kernel();
    t->k[SN_OP_CONV2D_BWD_FILTER] = sn_cpu_conv_gemm_kernel();
#endif
    static const sn_op pools[] = {SN_OP_MAX_POOL2D, SN_OP_MAX_POOL2D_GRAD, SN_OP_AVG_POOL2D,
                                  SN_OP_AVG_POOL2D_GRAD};
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
        t->k[pools[i]] = sn_cpu_pool_impl(pools[i]);
}
