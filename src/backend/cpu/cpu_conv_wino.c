/* Winograd convolution (oneDNN's dnnl_convolution_winograd: F(4x4, 3x3) tiles, about half the
 * multiplications of a direct 3x3 convolution) for the wide 3x3 stride-1 layers, forward,
 * backward-data and backward-weights.
 *
 * oneDNN 2.6 implements it only on its blocked layouts (nChw16c activations, OIhw16i16o
 * weights) on AVX-512 CPUs. Our activations stay NHWC between ops, so each run reorders its
 * activation operands into the blocked layout in scratch and its output back (sn_dnnl_op does
 * that: the primitive's operands are declared "any" here). bench/bench_conv_algo.c measured
 * those reorders at a few % of the convolution they serve, and the Winograd ops at ~0.6x the
 * direct ones on the guide CNN's second layer (docs/benchmarks-notes.md, "guide CNN: Winograd").
 *
 * The Winograd transforms round differently from a direct sum: relative differences of a few
 * 1e-6 on that layer (tests/test_conv_wino.c bounds them), and the one-epoch test accuracy
 * is recorded in docs/benchmarks.md. SN_CONV_ALGO=direct turns it off for A/B runs.
 *
 * Memory: oneDNN's Winograd scratch and the blocked copies grow with the batch (738 MB of
 * scratch for backward-data alone at the guide CNN's batch 200), so a call runs over slices
 * of at most WINO_SLICE_IMAGES images (images are independent in forward and backward-data;
 * backward-weights adds the slices' gradients in slice order, so results stay deterministic).
 *
 * Under mixed bf16 (sn_plan_opts.bf16_compute) these layers also take f32 Winograd on CPUs
 * without AMX (sn_cpu_conv_wino_over_bf16): there bf16 direct convolution is slower than
 * f32 direct, let alone Winograd. Where the CPU has AVX512-BF16, sinter's own bf16 Winograd
 * (cpu_conv_wino_bf16.c) runs instead unless SN_CONV_ALGO=wino_f32. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/cpu_conv_wino.h"
#include "backend/cpu/cpu_conv_slices.h"

/* Only the layers it was measured on and wins for: 3x3, stride 1, at least this many input
 * and output channels (multiples of 16: oneDNN's block). The guide CNN's 256 -> 256 layer
 * (~0.6x direct) and small_cnn's 32 -> 64 layer: one small_cnn epoch through fit took 0.91x
 * the direct convolution's time at the same test accuracy (quiet Zen 4, 2026-12-02, three
 * alternating rounds, docs/benchmarks-notes.md). Narrower layers were not measured. */
enum { WINO_MIN_CHANNELS = 32 };
/* Under mixed bf16 only the wide layers it was measured on (the guide CNN's) take a
 * Winograd; narrower ones keep bf16 direct as before. */
enum { WINO_WIDE_CHANNELS = 128 };

bool sn_cpu_conv_wino_wide(const sn_kcall *c) {
    sn_conv_geom g;
    return sn_conv_geom_of(c, &g) && g.c >= WINO_WIDE_CHANNELS && g.f >= WINO_WIDE_CHANNELS;
}

bool sn_cpu_conv_wino_applies(const sn_kcall *c) {
    sn_conv_geom g;
    if (!sn_conv_geom_of(c, &g)) return false;
    return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.c >= WINO_MIN_CHANNELS &&
           g.f >= WINO_MIN_CHANNELS && g.c % 16 == 0 && g.f % 16 == 0 && sn_cpu()->avx512f;
}

/* small_cnn's 32 -> 64 layer (batch 128, 13x13 in; Zen 4, 2026-12-07, `sinter bench --model
 * small_cnn --profile`, docs/benchmarks-notes.md): under SN_CONV_ALGO=direct against Winograd
 * (a loaded machine) the forward took 5.5 against 4.0 ms and the filter gradient 7.3 against
 * 5.0, but the data gradient 5.6 against 6.3; then, quiet, 6 alternating runs with the data
 * gradient direct and the rest Winograd against all three Winograd: the data gradient 3.10
 * against 3.60 ms (medians; lower in every pair), the step 11.55 against 12.41. The data
 * gradient's output has the layer's input channels, 32 there: the output transform and the
 * reorder back weigh more against GEMMs over 64 channels. The guide CNN's 256 -> 256 layer
 * keeps all three (~0.6x direct). */
bool sn_cpu_conv_wino_pays(const sn_kcall *c) {
    sn_conv_geom g;
    if (!sn_cpu_conv_wino_applies(c) || !sn_conv_geom_of(c, &g)) return false;
    return c->op != SN_OP_CONV2D_BWD_DATA || g.c >= WINO_WIDE_CHANNELS;
}

bool sn_cpu_conv_wino_enabled(void) {
    /* Read at every prepare (cheap) so that one process can build both for a comparison. */
    const char *e = sn_env(SN_ENV_CONV_ALGO);
    return !(e && strcmp(e, "direct") == 0);
}

bool sn_cpu_conv_wino_over_bf16(void) { return !sn_cpu()->amx_bf16; }

#ifdef SN_HAVE_DNNL

/* Images per slice: the scratch and blocked copies shrink with it, the per-slice overhead
 * (weights reordered and transformed again) grows. 48 keeps the guide CNN's batch 200 in 4
 * slices of 50, each still thousands of 4x4 tiles per transform-domain GEMM. */
enum { WINO_SLICE_IMAGES = 48 };

struct sn_cpu_wino {
    sn_conv_slices s;
};

/* One primitive over n images. */
static sn_status wino_build_n(sn_dnnl_op *s, const sn_kcall *c, int64_t n,
                              size_t *scratch_bytes) {
    sn_conv_geom g;
    if (!sn_conv_geom_of(c, &g) || !sn_cpu_conv_wino_applies(c))
        return sn_errorf(SN_ERR_UNSUPPORTED, "Winograd convolution: node %d is not a 3x3 "
                         "stride-1 convolution with >= %d channels (multiples of 16) on AVX-512",
                         (int)c->id, WINO_MIN_CHANNELS);
    sn_op op = c->op;
    dnnl_engine_t eng;
    SN_TRY(sn_dnnl_engine(&eng));
    dnnl_dims_t xd = {n, g.c, g.h, g.w}, yd = {n, g.f, g.oh, g.ow}, wd = {g.f, g.c, g.kh, g.kw};
    dnnl_dims_t strides = {g.sh, g.sw}, pad_l = {g.pt, g.pl}, pad_r = {g.pb, g.pr};
    /* *u: our buffers (NHWC, Keras HWIO); *a: "any", i.e. the blocked layouts oneDNN's
     * Winograd kernels take, into which sn_dnnl_op reorders at run time. */
    dnnl_memory_desc_t xu, yu, wu, xa, ya, wa;
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&xu, 4, xd, dnnl_f32, dnnl_nhwc));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&yu, 4, yd, dnnl_f32, dnnl_nhwc));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&wu, 4, wd, dnnl_f32, dnnl_hwio));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&xa, 4, xd, dnnl_f32, dnnl_format_tag_any));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&ya, 4, yd, dnnl_f32, dnnl_format_tag_any));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&wa, 4, wd, dnnl_f32, dnnl_format_tag_any));

    dnnl_convolution_desc_t fwd_d, d;
    SN_DNNL_CHECK(dnnl_convolution_forward_desc_init(&fwd_d, dnnl_forward_training,
                                                     dnnl_convolution_winograd, &xa, &wa, NULL,
                                                     &ya, strides, pad_l, pad_r));
    dnnl_primitive_attr_t attr;
    SN_TRY(sn_dnnl_attr_user_scratchpad(&attr));
    dnnl_primitive_desc_t fwd_pd = NULL, pd = NULL;
    /* unimplemented here (no AVX-512 Winograd in this oneDNN or CPU) is SN_ERR_UNSUPPORTED:
     * the caller falls back to direct convolution. */
    dnnl_status_t st = dnnl_primitive_desc_create(&fwd_pd, &fwd_d, attr, eng, NULL);
    if (st == dnnl_success) {
        if (op == SN_OP_CONV2D) {
            pd = fwd_pd;
            fwd_pd = NULL;
        } else {
            if (op == SN_OP_CONV2D_BWD_DATA)
                st = dnnl_convolution_backward_data_desc_init(
                    &d, dnnl_convolution_winograd, &xa, &wa, &ya, strides, pad_l, pad_r);
            else
                st = dnnl_convolution_backward_weights_desc_init(
                    &d, dnnl_convolution_winograd, &xa, &wa, NULL, &ya, strides, pad_l, pad_r);
            if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &d, attr, eng, fwd_pd);
        }
    }
    if (fwd_pd) dnnl_primitive_desc_destroy(fwd_pd);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        return sn_dnnl_error(st, "Winograd convolution primitive descriptor", __FILE__,
                             __LINE__);

    sn_status r = sn_dnnl_conv_op_init(s, pd, op, &xu, &wu, &yu, scratch_bytes);
    dnnl_primitive_desc_destroy(pd);
    return r;
}

sn_status sn_cpu_conv_wino_build(sn_cpu_wino **out, const sn_kcall *c, size_t *scratch_bytes) {
    *out = NULL;
    *scratch_bytes = 0;
    sn_cpu_wino *w = sn_calloc(1, sizeof *w);
    if (!w) return SN_ERR_NOMEM;
    sn_status st = sn_conv_slices_build(&w->s, c, WINO_SLICE_IMAGES, wino_build_n, scratch_bytes);
    if (st != SN_OK) {
        free(w);
        return st;
    }
    *out = w;
    return SN_OK;
}

sn_status sn_cpu_conv_wino_run(sn_cpu_wino *w, const void *in0, const void *in1, void *out,
                               void *scratch) {
    return sn_conv_slices_run(&w->s, in0, in1, out, scratch);
}

void sn_cpu_conv_wino_destroy(sn_cpu_wino *w) {
    if (!w) return;
    sn_conv_slices_destroy(&w->s);
    free(w);
}

#endif /* SN_HAVE_DNNL */
