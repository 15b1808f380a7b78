/* 2-D convolution and pooling, NHWC, TensorFlow padding rules:
 * VALID: out = (in - k) / s + 1; SAME: out = ceil(in / s), padding split with the extra cell at
 * the bottom/right (pad_top = total / 2). */
#include "graph/graph_impl.h"

#define IN(g, node, i) (&(g)->nodes[(node)->in[i]])

/* Output size and leading padding along one dimension; false when the window does not fit.
 * (graph_impl.h: shared with op_depthwise.c) */
bool sn_conv_out_size(int64_t in, int64_t k, int s, sn_padding pad, int64_t *out, int *pad_lo) {
    if (pad == SN_PAD_SAME) {
        *out = (in + s - 1) / s;
        int64_t total = (*out - 1) * s + k - in;
        if (total < 0) total = 0;
        *pad_lo = (int)(total / 2);
        return true;
    }
    if (in < k) return false;
    *out = (in - k) / s + 1;
    *pad_lo = 0;
    return true;
}

sn_status sn_conv_window(sn_node_t *node, const sn_node_t *x, const sn_node_t *w,
                         const char *op, int64_t *oh, int64_t *ow) {
    char s1[128], s2[128];
    int sh = node->attr.conv.stride_h, sw = node->attr.conv.stride_w;
    if (sh < 1 || sw < 1)
        return sn_errorf(SN_ERR_INVALID, "%s: strides must be >= 1, got (%d, %d)", op, sh, sw);
    if (!sn_conv_out_size(x->shape.dim[1], w->shape.dim[0], sh, node->attr.conv.padding, oh,
                          &node->attr.conv.pad_top) ||
        !sn_conv_out_size(x->shape.dim[2], w->shape.dim[1], sw, node->attr.conv.padding, ow,
                          &node->attr.conv.pad_left))
        return sn_errorf(SN_ERR_SHAPE, "%s: kernel %s does not fit input %s with 'valid' "
                         "padding", op, sn_shape_str(&w->shape, s2, sizeof s2),
                         sn_shape_str(&x->shape, s1, sizeof s1));
    node->attr.conv.x_shape = x->shape;
    node->attr.conv.w_shape = w->shape;
    node->dtype = x->dtype;
    return SN_OK;
}

static sn_status infer_conv2d(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0), *w = IN(g, node, 1);
    char s1[128], s2[128];
    if (x->dtype != w->dtype || !sn_dtype_is_float(x->dtype))
        return sn_errorf(SN_ERR_SHAPE, "conv2d: needs float input and kernel of one dtype, got "
                         "%s and %s", sn_dtype_name(x->dtype), sn_dtype_name(w->dtype));
    if (x->shape.ndim != 4 || w->shape.ndim != 4)
        return sn_errorf(SN_ERR_SHAPE, "conv2d: input must be [N, H, W, C] and kernel [KH, KW, C, "
                         "F], got %s and %s", sn_shape_str(&x->shape, s1, sizeof s1),
                         sn_shape_str(&w->shape, s2, sizeof s2));
    if (x->shape.dim[3] != w->shape.dim[2])
        return sn_errorf(SN_ERR_SHAPE, "conv2d: input has %lld channels but the kernel %s expects "
                         "%lld", (long long)x->shape.dim[3], sn_shape_str(&w->shape, s2, sizeof s2),
                         (long long)w->shape.dim[2]);
    int64_t oh, ow;
    SN_TRY(sn_conv_window(node, x, w, "conv2d", &oh, &ow));
    node->shape = (sn_shape){.ndim = 4, .dim = {x->shape.dim[0], oh, ow, w->shape.dim[3]}};
    return SN_OK;
}

sn_conv2d_opts sn_conv2d_opts_defaults(void) {
    return (sn_conv2d_opts){.stride_h = 1, .stride_w = 1, .padding = SN_PAD_VALID};
}

/* A VALID convolution of a zero padding (sn_zero_pad of H and W alone) whose windows fall
 * where a SAME convolution of the unpadded image puts them (the same output size and leading
 * padding) is that SAME convolution: the same windows, and the cells outside the image are
 * zeros in both. Keras's MobileNetV2 pads (0, 1) before each stride-2 depthwise layer
 * (correct_pad reproduces TensorFlow's SAME so that every backend agrees). Built on the
 * unpadded input, the padded copy is neither made nor kept for the backward, and the gradient
 * needs no slice; the padding node stays in the graph for any other reader (and is planned
 * only if there is one). */
void sn_conv_fold_zero_pad(const sn_graph *g, sn_node *x, sn_node w, sn_conv2d_opts *o) {
    if (!g || g->status != SN_OK || o->padding != SN_PAD_VALID || *x < 0 || *x >= g->n_nodes ||
        w < 0 || w >= g->n_nodes)
        return;
    const sn_node_t *p = &g->nodes[*x], *k = &g->nodes[w];
    if (p->op != SN_OP_SLICE_GRAD || p->shape.ndim != 4 || k->shape.ndim != 4) return;
    const sn_node_t *u = &g->nodes[p->in[0]];
    if (p->attr.slice.begin[0] || p->attr.slice.begin[3] || u->shape.dim[0] != p->shape.dim[0] ||
        u->shape.dim[3] != p->shape.dim[3])
        return;
    const int stride[2] = {o->stride_h, o->stride_w};
    for (int i = 0; i < 2; i++) {
        int64_t out_valid, out_same;
        int lo_valid, lo_same;
        if (stride[i] < 1 ||
            !sn_conv_out_size(p->shape.dim[1 + i], k->shape.dim[i], stride[i], SN_PAD_VALID,
                              &out_valid, &lo_valid) ||
            !sn_conv_out_size(u->shape.dim[1 + i], k->shape.dim[i], stride[i], SN_PAD_SAME,
                              &out_same, &lo_same) ||
            out_valid != out_same || lo_same != p->attr.slice.begin[1 + i])
            return;
    }
    *x = p->in[0];
    o->padding = SN_PAD_SAME;
}

sn_node sn_conv2d(sn_graph *g, sn_node x, sn_node w, const sn_conv2d_opts *opts) {
    sn_conv2d_opts o = opts ? *opts : sn_conv2d_opts_defaults();
    sn_conv_fold_zero_pad(g, &x, w, &o);
    sn_node in[2] = {x, w};
    sn_attrs a = {.conv = {.stride_h = o.stride_h, .stride_w = o.stride_w, .padding = o.padding}};
    return sn_graph_add(g, SN_OP_CONV2D, 2, in, &a);
}

static void grad_conv2d(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_node in_d[2] = {dy, node.in[1]}, in_f[2] = {node.in[0], dy};
    dx[0] = sn_graph_add(g, SN_OP_CONV2D_BWD_DATA, 2, in_d, &node.attr);
    dx[1] = sn_graph_add(g, SN_OP_CONV2D_BWD_FILTER, 2, in_f, &node.attr);
}

/* conv2d_bwd_data as a layer of its own (Conv2DTranspose, op_depthwise.c): z = bwd_data(x, w)
 * is linear in x and in w, its adjoints are the forward convolution and the filter gradient
 * of that same convolution (whose input is z's shape). */
static void grad_conv_bwd_data(sn_graph *g, sn_node n, sn_node dz, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_node in_c[2] = {dz, node.in[1]}, in_f[2] = {dz, node.in[0]};
    dx[0] = sn_graph_add(g, SN_OP_CONV2D, 2, in_c, &node.attr);
    dx[1] = sn_graph_add(g, SN_OP_CONV2D_BWD_FILTER, 2, in_f, &node.attr);
}

sn_status sn_infer_conv_x_shape(const sn_graph *g, sn_node_t *node) {
    node->shape = node->attr.conv.x_shape;
    node->dtype = IN(g, node, 0)->dtype;
    return SN_OK;
}

sn_status sn_infer_conv_w_shape(const sn_graph *g, sn_node_t *node) {
    node->shape = node->attr.conv.w_shape;
    node->dtype = IN(g, node, 0)->dtype;
    return SN_OK;
}

static sn_status infer_pool(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    const char *op = sn_ops[node->op]->name;
    char s1[128];
    if (x->shape.ndim != 4 || !sn_dtype_is_float(x->dtype))
        return sn_errorf(SN_ERR_SHAPE, "%s: input must be a float [N, H, W, C] tensor, got %s %s",
                         op, sn_dtype_name(x->dtype), sn_shape_str(&x->shape, s1, sizeof s1));
    int ph = node->attr.pool.pool_h, pw = node->attr.pool.pool_w;
    if (ph < 1 || pw < 1)
        return sn_errorf(SN_ERR_INVALID, "%s: pool size must be >= 1, got (%d, %d)", op, ph, pw);
    if (node->attr.pool.stride_h == 0) node->attr.pool.stride_h = ph;
    if (node->attr.pool.stride_w == 0) node->attr.pool.stride_w = pw;
    if (node->attr.pool.stride_h < 0 || node->attr.pool.stride_w < 0)
        return sn_errorf(SN_ERR_INVALID, "%s: strides must be >= 1", op);
    int64_t oh, ow;
    if (!sn_conv_out_size(x->shape.dim[1], ph, node->attr.pool.stride_h, node->attr.pool.padding, &oh,
                  &node->attr.pool.pad_top) ||
        !sn_conv_out_size(x->shape.dim[2], pw, node->attr.pool.stride_w, node->attr.pool.padding, &ow,
                  &node->attr.pool.pad_left))
        return sn_errorf(SN_ERR_SHAPE, "%s: a %dx%d window does not fit input %s with 'valid' "
                         "padding", op, ph, pw, sn_shape_str(&x->shape, s1, sizeof s1));
    node->shape = (sn_shape){.ndim = 4, .dim = {x->shape.dim[0], oh, ow, x->shape.dim[3]}};
    node->attr.pool.x_shape = x->shape;
    node->dtype = x->dtype;
    return SN_OK;
}

sn_pool2d_opts sn_pool2d_opts_defaults(void) {
    return (sn_pool2d_opts){.pool_h = 2, .pool_w = 2, .stride_h = 0, .stride_w = 0,
                            .padding = SN_PAD_VALID};
}

static sn_node pool(sn_graph *g, sn_op op, sn_node x, const sn_pool2d_opts *opts) {
    sn_pool2d_opts o = opts ? *opts : sn_pool2d_opts_defaults();
    sn_attrs a = {.pool = {.pool_h = o.pool_h, .pool_w = o.pool_w, .stride_h = o.stride_h,
                           .stride_w = o.stride_w, .padding = o.padding}};
    return sn_graph_add(g, op, 1, &x, &a);
}

sn_node sn_max_pool2d(sn_graph *g, sn_node x, const sn_pool2d_opts *opts) {
    return pool(g, SN_OP_MAX_POOL2D, x, opts);
}
sn_node sn_avg_pool2d(sn_graph *g, sn_node x, const sn_pool2d_opts *opts) {
    return pool(g, SN_OP_AVG_POOL2D, x, opts);
}

static void grad_max_pool(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_node in[2] = {node.in[0], dy};
    dx[0] = sn_graph_add(g, SN_OP_MAX_POOL2D_GRAD, 2, in, &node.attr);
}

static void grad_avg_pool(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_attrs a = g->nodes[n].attr;
    dx[0] = sn_graph_add(g, SN_OP_AVG_POOL2D_GRAD, 1, &dy, &a);
}

static sn_status infer_pool_grad(const sn_graph *g, sn_node_t *node) {
    node->shape = node->attr.pool.x_shape;
    node->dtype = IN(g, node, node->n_in - 1)->dtype;
    return SN_OK;
}

const sn_op_def sn_def_conv2d = {.name = "conv2d", .n_in = 2, .infer = infer_conv2d,
    .grad = grad_conv2d};
const sn_op_def sn_def_conv2d_bwd_data = {.name = "conv2d_bwd_data", .n_in = 2,
    .infer = sn_infer_conv_x_shape, .grad = grad_conv_bwd_data};
const sn_op_def sn_def_conv2d_bwd_filter = {.name = "conv2d_bwd_filter", .n_in = 2,
    .infer = sn_infer_conv_w_shape};
const sn_op_def sn_def_max_pool2d = {.name = "max_pool2d", .n_in = 1, .infer = infer_pool,
    .grad = grad_max_pool};
const sn_op_def sn_def_avg_pool2d = {.name = "avg_pool2d", .n_in = 1, .infer = infer_pool,
    .grad = grad_avg_pool};
const sn_op_def sn_def_max_pool2d_grad = {.name = "max_pool2d_grad", .n_in = 2,
    .infer = infer_pool_grad};
const sn_op_def sn_def_avg_pool2d_grad = {.name = "avg_pool2d_grad", .n_in = 1,
    .infer = infer_pool_grad};
