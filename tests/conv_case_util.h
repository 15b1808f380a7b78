/* The three ops of one convolution case with their shapes and attributes, for the tests and
 * benchmarks that call convolution kernels directly (test_cpu_kernels_blas.c, test_bf16.c,
 * bench/bench_depthwise_bf16.c): x [n,h,w,c], w [kh,kw,c,f], stride (sh,sw), VALID or Keras's
 * SAME (top/left padding as Keras puts it; the bottom/right padding is implied by the shapes).
 * Depthwise: f is the channel multiplier and the output has c * f channels. */
#ifndef SN_CONV_CASE_UTIL_H
#define SN_CONV_CASE_UTIL_H

#include <stdbool.h>
#include <string.h>

#include "backend/kernel.h"
#include "sinter/graph.h"

typedef struct conv_op {
    const char *what; /* "fwd", "bwd_data", "bwd_filter" */
    sn_op op;
    sn_shape in[2], out;
} conv_op;

typedef struct conv_case {
    sn_attrs attr;
    conv_op ops[3];
} conv_case;

static inline conv_case conv_case_make(bool depthwise, int64_t n, int64_t h, int64_t w,
                                       int64_t c, int64_t kh, int64_t kw, int64_t f, int sh,
                                       int sw, bool same) {
    int64_t oh, ow, pt = 0, pl = 0;
    if (same) {
        oh = (h + sh - 1) / sh, ow = (w + sw - 1) / sw;
        int64_t ph = (oh - 1) * sh + kh - h, pw = (ow - 1) * sw + kw - w;
        pt = (ph > 0 ? ph : 0) / 2, pl = (pw > 0 ? pw : 0) / 2;
    } else {
        oh = (h - kh) / sh + 1, ow = (w - kw) / sw + 1;
    }
    sn_shape xs = sn_shape_make(4, n, h, w, c), ws = sn_shape_make(4, kh, kw, c, f),
             ys = sn_shape_make(4, n, oh, ow, depthwise ? c * f : f);
    conv_case k;
    memset(&k, 0, sizeof k);
    k.attr.conv.stride_h = sh, k.attr.conv.stride_w = sw;
    k.attr.conv.padding = same ? SN_PAD_SAME : SN_PAD_VALID;
    k.attr.conv.pad_top = (int)pt, k.attr.conv.pad_left = (int)pl;
    k.attr.conv.x_shape = xs, k.attr.conv.w_shape = ws;
    const sn_op fwd = depthwise ? SN_OP_DEPTHWISE_CONV2D : SN_OP_CONV2D,
                bd = depthwise ? SN_OP_DEPTHWISE_BWD_DATA : SN_OP_CONV2D_BWD_DATA,
                bf = depthwise ? SN_OP_DEPTHWISE_BWD_FILTER : SN_OP_CONV2D_BWD_FILTER;
    k.ops[0].what = "fwd", k.ops[0].op = fwd, k.ops[0].in[0] = xs, k.ops[0].in[1] = ws, k.ops[0].out = ys;
    k.ops[1].what = "bwd_data", k.ops[1].op = bd, k.ops[1].in[0] = ys, k.ops[1].in[1] = ws, k.ops[1].out = xs;
    k.ops[2].what = "bwd_filter", k.ops[2].op = bf, k.ops[2].in[0] = xs, k.ops[2].in[1] = ys, k.ops[2].out = ws;
    return k;
}

#endif
