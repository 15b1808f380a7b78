/* Results do not depend on the thread count: the CPU kernels that call OpenBLAS (matmul,
 * the im2col convolution's three ops) and oneDNN's matmul give the same bits on 1, 2 and 3
 * threads, on the shapes that once differed: the generation stepper's input table (65 ids x
 * 16 -> 2048 gates), dense layers forward and backward, batched and tall products, and a
 * filter gradient summed over 11 samples.
 *
 * OpenBLAS's Haswell/Zen kernels (what Debian's OpenBLAS picks on AMD Zen 4) change an
 * element's bits with the way a product is cut; its Cooperlake kernels do not. CTest runs this
 * test once as the CPU detects and once more with OPENBLAS_CORETYPE=Haswell
 * (test_thread_count_openblas_haswell), so the check bites on any x86 machine. */
#include <stdlib.h>

#include "backend/cpu/cpu_blas.h"
#include "f32_case_util.h"
#include "sn_test.h"

static sn_rng rng;

/* Runs k on the case at 1, 2 and 3 threads; the three outputs must be the same bits. */
static void check_threads(const char *name, sn_op op, const sn_attrs *attr, const sn_shape *in,
                          sn_shape out, const sn_kernel *k) {
    if (!k) return;
    tcase t;
    init_case(&t, &rng, op, attr, 2, in, &out, false);
    if (k->supports && !k->supports(&t.call)) {
        CHECK(false, "%s (%s): the kernel does not support the call", name, k->impl);
        free_case(&t);
        return;
    }
    int keep = sn_num_threads();
    float *y[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        sn_set_num_threads(i + 1);
        CHECK_OK(run_kernel(&t, k, false, &y[i]));
    }
    sn_set_num_threads(keep);
    int64_t n = sn_shape_numel(&out), first = -1, count = 0;
    for (int i = 1; i < 3; i++)
        for (int64_t j = 0; j < n; j++)
            if (memcmp(&y[0][j], &y[i][j], sizeof(float)) != 0) {
                if (first < 0) first = j;
                count++;
            }
    CHECK(count == 0, "%s (%s): %lld elements differ between 1, 2 and 3 threads (first at %lld: "
          "%.9g on 1 thread)", name, k->impl, (long long)count, (long long)first,
          first >= 0 ? (double)y[0][first] : 0.0);
    for (int i = 0; i < 3; i++) sn_free_aligned(y[i]);
    free_case(&t);
}

static void check_matmul(const char *tag, sn_shape a, sn_shape b, bool ta, bool tb) {
    sn_attrs attr;
    sn_shape out, in[2];
    matmul_case(a, b, ta, tb, &attr, &out, in);
    char name[96];
    snprintf(name, sizeof name, "matmul %s", tag);
    check_threads(name, SN_OP_MATMUL, &attr, in, out, sn_cpu_matmul_impl("openblas"));
    check_threads(name, SN_OP_MATMUL, &attr, in, out, sn_cpu_matmul_impl("dnnl"));
}

/* x [n,12,12,8], w [3,3,8,16], VALID: the three ops of the im2col convolution. */
static void check_conv(void) {
    sn_shape xs = sn_shape_make(4, 11, 12, 12, 8), ws = sn_shape_make(4, 3, 3, 8, 16),
             ys = sn_shape_make(4, 11, 10, 10, 16);
    sn_attrs attr;
    memset(&attr, 0, sizeof attr);
    attr.conv.stride_h = attr.conv.stride_w = 1;
    attr.conv.padding = SN_PAD_VALID;
    attr.conv.x_shape = xs, attr.conv.w_shape = ws;
    sn_shape fwd[2] = {xs, ws}, bwd_data[2] = {ys, ws}, bwd_filter[2] = {xs, ys};
    check_threads("conv fwd", SN_OP_CONV2D, &attr, fwd, ys,
                  sn_cpu_conv_impl(SN_OP_CONV2D, "openblas"));
    check_threads("conv bwd_data", SN_OP_CONV2D_BWD_DATA, &attr, bwd_data, xs,
                  sn_cpu_conv_impl(SN_OP_CONV2D_BWD_DATA, "openblas"));
    check_threads("conv bwd_filter (11 samples)", SN_OP_CONV2D_BWD_FILTER, &attr, bwd_filter, ws,
                  sn_cpu_conv_impl(SN_OP_CONV2D_BWD_FILTER, "openblas"));
}

int main(void) {
    sn_rng_init(&rng, 7, 0);
    check_matmul("stepper table 65x16 @ 16x2048", sn_shape_make(2, 65, 16),
                 sn_shape_make(2, 16, 2048), false, false);
    check_matmul("dense fwd 300x1152 @ 1152x64", sn_shape_make(2, 300, 1152),
                 sn_shape_make(2, 1152, 64), false, false);
    check_matmul("dense bwd_data 300x64 @ (1152x64)^T", sn_shape_make(2, 300, 64),
                 sn_shape_make(2, 1152, 64), false, true);
    check_matmul("dense bwd_weights (300x1152)^T @ 300x64", sn_shape_make(2, 300, 1152),
                 sn_shape_make(2, 300, 64), true, false);
    check_matmul("batch-1 logits 1x512 @ 512x65", sn_shape_make(2, 1, 512),
                 sn_shape_make(2, 512, 65), false, false);
    check_matmul("tall [3,70,40] @ 40x300", sn_shape_make(3, 3, 70, 40),
                 sn_shape_make(2, 40, 300), false, false);
    check_matmul("batched [4,37,53] @ [4,53,290]", sn_shape_make(3, 4, 37, 53),
                 sn_shape_make(3, 4, 53, 290), false, false);
    check_matmul("batched ta tb [4,53,37]^T @ [4,290,53]^T", sn_shape_make(3, 4, 53, 37),
                 sn_shape_make(3, 4, 290, 53), true, true);
    check_conv();
    return sn_test_finish("test_thread_count");
}
