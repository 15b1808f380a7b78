/* One oneDNN convolution call run over slices of its batch (cpu_conv_slices.h). Used by the
 * Winograd convolution (cpu_conv_wino.c: oneDNN's Winograd scratch grows with the batch) and
 * by the bf16 filter gradient (cpu_conv.c: its bf16 copies of x and dy would otherwise be
 * the largest scratch of the plan). */
#include "backend/cpu/cpu_conv_slices.h"

#include <string.h>

#ifdef SN_HAVE_DNNL
#include "backend/cpu/cpu_blas.h"

static size_t align64(size_t b) { return (b + 63) & ~(size_t)63; }

sn_kcall sn_conv_call_with_batch(const sn_kcall *c, int64_t n) {
    sn_kcall r = *c;
    r.x[0].shape.dim[0] = n;
    /* the other activation: the output (conv2d, bwd_data), or dy (the filter gradient) */
    if (c->op == SN_OP_CONV2D_BWD_FILTER) r.x[1].shape.dim[0] = n;
    else r.y.shape.dim[0] = n;
    return r;
}

sn_status sn_conv_slices_build(sn_conv_slices *s, const sn_kcall *c, int64_t max_images,
                               sn_conv_slice_build_fn build, size_t *scratch_bytes) {
    memset(s, 0, sizeof *s);
    *scratch_bytes = 0;
    sn_conv_geom g;
    if (!sn_conv_geom_bf16_of(c, &g) || max_images < 1) return SN_ERR_UNSUPPORTED;
    s->kind = c->op;
    s->n = g.n;
    int64_t slices = (g.n + max_images - 1) / max_images;
    s->slice = (g.n + slices - 1) / slices; /* even slices: 200 -> 4 x 50 */
    int64_t last = g.n - (slices - 1) * s->slice;
    /* bytes per image: outputs are f32; an input may be bf16 (sn_conv_geom_bf16_of) */
    size_t x_px = (size_t)(g.h * g.w * g.c), y_px = (size_t)(g.oh * g.ow * g.f);
    size_t in0 = sn_dtype_size(c->x[0].dtype), in1 = sn_dtype_size(c->x[1].dtype);
    switch (c->op) {
    case SN_OP_CONV2D: s->step[0] = x_px * in0, s->step[2] = y_px * sizeof(float); break;
    case SN_OP_CONV2D_BWD_DATA: s->step[0] = y_px * in0, s->step[2] = x_px * sizeof(float); break;
    default: s->step[0] = x_px * in0, s->step[1] = y_px * in1; break;
    }
    size_t s0 = 0, s1 = 0;
    sn_status st = build(&s->op[0], c, s->slice, &s0);
    if (st == SN_OK && last != s->slice) st = build(&s->op[1], c, last, &s1);
    if (st != SN_OK) {
        sn_conv_slices_destroy(s);
        return st;
    }
    size_t need = align64(s0 > s1 ? s0 : s1);
    if (c->op == SN_OP_CONV2D_BWD_FILTER && slices > 1) {
        s->dw_numel = g.kh * g.kw * g.c * g.f;
        s->acc_off = need;
        need += align64((size_t)s->dw_numel * sizeof(float));
    }
    *scratch_bytes = need;
    return SN_OK;
}

sn_status sn_conv_slices_run(sn_conv_slices *s, const void *in0, const void *in1, void *out,
                             void *scratch) {
    const char *a = in0, *b = in1;
    char *y = out;
    for (int64_t i0 = 0, k = 0; i0 < s->n; i0 += s->slice, k++) {
        sn_dnnl_op *op = s->n - i0 >= s->slice ? &s->op[0] : &s->op[1];
        size_t i = (size_t)i0;
        /* filter gradient: the first slice writes dw, later ones a partial sum added to it */
        bool partial = s->kind == SN_OP_CONV2D_BWD_FILTER && k > 0;
        float *dst = partial ? (float *)((char *)scratch + s->acc_off)
                             : (float *)(y + i * s->step[2]);
        SN_TRY(sn_dnnl_op_run(op, a + i * s->step[0], b + i * s->step[1], dst, scratch));
        if (partial) {
            float *dw = out;
            for (int64_t j = 0; j < s->dw_numel; j++) dw[j] += dst[j];
        }
    }
    return SN_OK;
}

void sn_conv_slices_destroy(sn_conv_slices *s) {
    sn_dnnl_op_destroy(&s->op[0]);
    sn_dnnl_op_destroy(&s->op[1]);
}
#endif
