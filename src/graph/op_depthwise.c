/* Depthwise 2-D convolution (Keras's DepthwiseConv2D, the first half of SeparableConv2D) and
 * the transposed convolution (Conv2DTranspose), NHWC, TensorFlow padding rules as op_conv.c.
 *
 * Depthwise: every input channel c is convolved with its own M filters w[:, :, c, m] into
 * output channel c*M + m, TensorFlow's depthwise_conv2d order (Keras's depthwise_kernel
 * [KH, KW, C, M] is that layout), so the weights load with no transpose.
 *
 * Transposed: built as a conv2d_bwd_data node (op_conv.c), whose kernels every backend
 * already has; its gradient rule there is the forward convolution and the filter gradient. */
#include "graph/graph_impl.h"

#define IN(g, node, i) (&(g)->nodes[(node)->in[i]])

static sn_status infer_depthwise(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0), *w = IN(g, node, 1);
    char s1[128], s2[128];
    if (x->dtype != w->dtype || !sn_dtype_is_float(x->dtype))
        return sn_errorf(SN_ERR_SHAPE, "depthwise_conv2d: needs float input and kernel of one "
                         "dtype, got %s and %s", sn_dtype_name(x->dtype), sn_dtype_name(w->dtype));
    if (x->shape.ndim != 4 || w->shape.ndim != 4 || x->shape.dim[3] != w->shape.dim[2])
        return sn_errorf(SN_ERR_SHAPE, "depthwise_conv2d: input must be [N, H, W, C] and kernel "
                         "[KH, KW, C, M] with the same C, got %s and %s",
                         sn_shape_str(&x->shape, s1, sizeof s1), sn_shape_str(&w->shape, s2, sizeof s2));
    int64_t oh, ow;
    SN_TRY(sn_conv_window(node, x, w, "depthwise_conv2d", &oh, &ow));
    node->shape = (sn_shape){.ndim = 4,
                             .dim = {x->shape.dim[0], oh, ow, w->shape.dim[2] * w->shape.dim[3]}};
    return SN_OK;
}

sn_node sn_depthwise_conv2d(sn_graph *g, sn_node x, sn_node w, const sn_conv2d_opts *opts) {
    sn_conv2d_opts o = opts ? *opts : sn_conv2d_opts_defaults();
    sn_conv_fold_zero_pad(g, &x, w, &o);
    sn_node in[2] = {x, w};
    sn_attrs a = {.conv = {.stride_h = o.stride_h, .stride_w = o.stride_w, .padding = o.padding}};
    return sn_graph_add(g, SN_OP_DEPTHWISE_CONV2D, 2, in, &a);
}

static void grad_depthwise(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_node in_d[2] = {dy, node.in[1]}, in_f[2] = {node.in[0], dy};
    dx[0] = sn_graph_add(g, SN_OP_DEPTHWISE_BWD_DATA, 2, in_d, &node.attr);
    dx[1] = sn_graph_add(g, SN_OP_DEPTHWISE_BWD_FILTER, 2, in_f, &node.attr);
}

/* Keras's deconv_output_length with output_padding None. */
static int64_t transpose_len(int64_t in, int64_t k, int s, sn_padding pad) {
    return pad == SN_PAD_SAME ? in * s : in * s + (k > s ? k - s : 0);
}

sn_node sn_conv2d_transpose(sn_graph *g, sn_node x, sn_node w, const sn_conv2d_opts *opts) {
    sn_conv2d_opts o = opts ? *opts : sn_conv2d_opts_defaults();
    if (sn_graph_status(g) != SN_OK) return SN_NONE;
    if (x < 0 || x >= g->n_nodes || w < 0 || w >= g->n_nodes)
        return sn_graph_fail(g, SN_ERR_INVALID, "conv2d_transpose: input node %d or kernel node "
                             "%d does not exist", (int)x, (int)w);
    const sn_node_t *xn = &g->nodes[x], *wn = &g->nodes[w];
    char s1[128], s2[128];
    if (xn->dtype != wn->dtype || !sn_dtype_is_float(xn->dtype))
        return sn_graph_fail(g, SN_ERR_SHAPE, "conv2d_transpose: needs float input and kernel "
                             "of one dtype, got %s and %s", sn_dtype_name(xn->dtype),
                             sn_dtype_name(wn->dtype));
    if (xn->shape.ndim != 4 || wn->shape.ndim != 4 || xn->shape.dim[3] != wn->shape.dim[3])
        return sn_graph_fail(g, SN_ERR_SHAPE, "conv2d_transpose: input must be [N, H, W, I] and "
                             "kernel [KH, KW, O, I] with the same I, got %s and %s",
                             sn_shape_str(&xn->shape, s1, sizeof s1),
                             sn_shape_str(&wn->shape, s2, sizeof s2));
    if (o.stride_h < 1 || o.stride_w < 1)
        return sn_graph_fail(g, SN_ERR_INVALID, "conv2d_transpose: strides must be >= 1, got "
                             "(%d, %d)", o.stride_h, o.stride_w);
    int64_t oh = transpose_len(xn->shape.dim[1], wn->shape.dim[0], o.stride_h, o.padding);
    int64_t ow = transpose_len(xn->shape.dim[2], wn->shape.dim[1], o.stride_w, o.padding);
    sn_attrs a = {.conv = {.stride_h = o.stride_h, .stride_w = o.stride_w, .padding = o.padding}};
    int64_t ih, iw; /* the convolution this is the data gradient of maps z back onto x */
    if (!sn_conv_out_size(oh, wn->shape.dim[0], o.stride_h, o.padding, &ih, &a.conv.pad_top) ||
        !sn_conv_out_size(ow, wn->shape.dim[1], o.stride_w, o.padding, &iw, &a.conv.pad_left) ||
        ih != xn->shape.dim[1] || iw != xn->shape.dim[2])
        return sn_graph_fail(g, SN_ERR_SHAPE, "conv2d_transpose: kernel %s and strides (%d, %d) "
                             "give no output for input %s", sn_shape_str(&wn->shape, s2, sizeof s2),
                             o.stride_h, o.stride_w, sn_shape_str(&xn->shape, s1, sizeof s1));
    a.conv.x_shape = (sn_shape){.ndim = 4, .dim = {xn->shape.dim[0], oh, ow, wn->shape.dim[2]}};
    a.conv.w_shape = wn->shape;
    sn_node in[2] = {x, w};
    return sn_graph_add(g, SN_OP_CONV2D_BWD_DATA, 2, in, &a);
}

const sn_op_def sn_def_depthwise_conv2d = {.name = "depthwise_conv2d", .n_in = 2,
    .infer = infer_depthwise, .grad = grad_depthwise};
const sn_op_def sn_def_depthwise_bwd_data = {.name = "depthwise_bwd_data", .n_in = 2,
    .infer = sn_infer_conv_x_shape};
const sn_op_def sn_def_depthwise_bwd_filter = {.name = "depthwise_bwd_filter", .n_in = 2,
    .infer = sn_infer_conv_w_shape};
