/* The CUDA kernel table's selection, which needs no GPU: which calls the CUDA rows take (f32
 * guide-model shapes: dense, conv 3x3 "same", 2x2 pooling, softmax cross-entropy, Adam) and
 * that a call none supports gets NULL, never a host kernel (a host kernel would read device
 * pointers). Also that a row run with no current CUDA context fails with a message instead of
 * touching the GPU. Skips (77) in a build without CUDA. */
#include <stdio.h>
#include <string.h>


#ifndef SN_HAVE_CUDA
int main(void) {
    printf("SKIP: this build has no CUDA backend\n");
    return 77;
}
#else
#include "backend/cuda/cuda_table.h"
#include "kernel_test_util.h"

static int cases;

static void expect(const char *what, tcall *t, const char *impl) {
    cases++;
    const sn_kernel *k = sn_cuda_kernel_select(&t->c);
    if (!impl && k) FAIL("%s: expected no CUDA row, got '%s'", what, k->impl);
    if (impl && !k) FAIL("%s: expected the '%s' row, got none", what, impl);
    if (impl && k && strcmp(k->impl, impl) != 0) FAIL("%s: expected '%s', got '%s'", what, impl, k->impl);
}

int main(void) {
    tcall t;
    sn_shape s2 = sn_shape_make(2, 200, 10), s1 = sn_shape_make(1, 10), sr = sn_shape_make(1, 200);
    /* elementwise and broadcasting */
    tc_init(&t, SN_OP_ADD, SN_F32, s2);
    tc_input(&t, SN_F32, s2, NULL);
    tc_input(&t, SN_F32, s1, NULL);
    expect("add [200,10] + [10]", &t, "cuda");
    tc_init(&t, SN_OP_ADD, SN_F64, s2);
    tc_input(&t, SN_F64, s2, NULL);
    tc_input(&t, SN_F64, s2, NULL);
    expect("add f64 (unsupported: no host fallback)", &t, NULL);
    tc_init(&t, SN_OP_BIAS_ADD, SN_F32, s2);
    tc_input(&t, SN_F32, s2, NULL);
    tc_input(&t, SN_F32, s1, NULL);
    expect("bias_add", &t, "cuda");
    tc_init(&t, SN_OP_GELU, SN_F32, s2);
    tc_input(&t, SN_F32, s2, NULL);
    expect("gelu", &t, "cuda");
    tc_init(&t, SN_OP_CAST, SN_BF16, s2);
    tc_input(&t, SN_F32, s2, NULL);
    expect("cast f32 -> bf16", &t, "cuda");
    tc_init(&t, SN_OP_CAST, SN_I32, s2);
    tc_input(&t, SN_F32, s2, NULL);
    expect("cast f32 -> i32", &t, "cuda");
    tc_init(&t, SN_OP_CAST, SN_F64, s2);
    tc_input(&t, SN_F32, s2, NULL);
    expect("cast f32 -> f64 (unsupported)", &t, NULL);
    /* reductions: contiguous axes only */
    tc_init(&t, SN_OP_REDUCE_SUM, SN_F32, s1);
    tc_input(&t, SN_F32, s2, NULL);
    t.attr.reduce.mask = 1u;
    expect("reduce_sum over axis 0", &t, "cuda");
    sn_shape s3 = sn_shape_make(3, 4, 5, 6);
    tc_init(&t, SN_OP_REDUCE_SUM, SN_F32, sn_shape_make(1, 5));
    tc_input(&t, SN_F32, s3, NULL);
    t.attr.reduce.mask = 1u | 4u;
    expect("reduce_sum over axes 0 and 2 (not contiguous: unsupported)", &t, NULL);
    /* softmax family */
    tc_init(&t, SN_OP_SOFTMAX, SN_F32, s2);
    tc_input(&t, SN_F32, s2, NULL);
    t.attr.axis.axis = -1;
    expect("softmax last axis", &t, "cuda");
    t.attr.axis.axis = 0;
    expect("softmax axis 0 (unsupported)", &t, NULL);
    tc_init(&t, SN_OP_SPARSE_XENT_GRAD, SN_F32, s2);
    tc_input(&t, SN_F32, s2, NULL);
    tc_input(&t, SN_I32, sr, NULL);
    tc_input(&t, SN_F32, sr, NULL);
    expect("sparse_xent_grad", &t, "cuda");
    /* matmul, conv, pool */
    tc_init(&t, SN_OP_MATMUL, SN_F32, sn_shape_make(2, 200, 128));
    tc_input(&t, SN_F32, sn_shape_make(2, 200, 784), NULL);
    tc_input(&t, SN_F32, sn_shape_make(2, 784, 128), NULL);
    expect("matmul 200x784 @ 784x128", &t, "cublaslt");
    tc_init(&t, SN_OP_MATMUL, SN_F32, sn_shape_make(3, 2, 3, 4));
    tc_input(&t, SN_F32, sn_shape_make(3, 2, 3, 5), NULL);
    tc_input(&t, SN_F32, sn_shape_make(2, 5, 4), NULL);
    expect("batched matmul [2,3,5] @ [5,4] (one [6,5] product)", &t, "cublaslt");
    tc_init(&t, SN_OP_MATMUL, SN_F32, sn_shape_make(3, 2, 3, 4));
    tc_input(&t, SN_F32, sn_shape_make(3, 2, 3, 5), NULL);
    tc_input(&t, SN_F32, sn_shape_make(3, 2, 5, 4), NULL);
    expect("batched matmul [2,3,5] @ [2,5,4] (strided batch)", &t, "cublaslt");
    tc_init(&t, SN_OP_MATMUL, SN_F32, sn_shape_make(3, 2, 3, 4));
    tc_input(&t, SN_F32, sn_shape_make(2, 3, 5), NULL);
    tc_input(&t, SN_F32, sn_shape_make(3, 2, 5, 4), NULL);
    expect("batched matmul [3,5] @ [2,5,4] (A shared)", &t, "cublaslt");
    tc_init(&t, SN_OP_MATMUL, SN_F32, sn_shape_make(3, 2, 3, 4));
    tc_input(&t, SN_F32, sn_shape_make(3, 2, 3, 5), NULL);
    tc_input(&t, SN_F32, sn_shape_make(3, 3, 5, 4), NULL);
    expect("batched matmul, batch dims 2 vs 3 (no row)", &t, NULL);
    sn_shape sx = sn_shape_make(4, 200, 28, 28, 1), sw = sn_shape_make(4, 3, 3, 1, 32),
             sy = sn_shape_make(4, 200, 28, 28, 32);
    tc_init(&t, SN_OP_CONV2D, SN_F32, sy);
    tc_input(&t, SN_F32, sx, NULL);
    tc_input(&t, SN_F32, sw, NULL);
    t.attr.conv.stride_h = t.attr.conv.stride_w = 1;
    t.attr.conv.pad_top = t.attr.conv.pad_left = 1;
    expect("conv2d 3x3 same", &t, "cudnn");
    tc_init(&t, SN_OP_CONV2D, SN_F32, sn_shape_make(4, 200, 14, 14, 32));
    tc_input(&t, SN_F32, sx, NULL);
    tc_input(&t, SN_F32, sn_shape_make(4, 2, 2, 1, 32), NULL);
    t.attr.conv.stride_h = t.attr.conv.stride_w = 2;
    expect("conv2d 2x2 stride 2 valid", &t, "cudnn");
    tc_init(&t, SN_OP_CONV2D, SN_F32, sy);
    tc_input(&t, SN_F32, sx, NULL);
    tc_input(&t, SN_F32, sn_shape_make(4, 2, 2, 1, 32), NULL);
    t.attr.conv.stride_h = t.attr.conv.stride_w = 1;
    t.attr.conv.pad_top = t.attr.conv.pad_left = 0; /* "same" 2x2: pads only bottom/right */
    expect("conv2d 2x2 same (asymmetric: unsupported)", &t, NULL);
    tc_init(&t, SN_OP_MAX_POOL2D, SN_F32, sn_shape_make(4, 200, 14, 14, 32));
    tc_input(&t, SN_F32, sy, NULL);
    t.attr.pool.pool_h = t.attr.pool.pool_w = t.attr.pool.stride_h = t.attr.pool.stride_w = 2;
    expect("max_pool2d 2x2", &t, "cudnn");
    /* Adam */
    tc_init(&t, SN_OP_APPLY_OPTIMIZER, SN_F32, s2);
    tc_input(&t, SN_F32, s2, NULL);
    tc_input(&t, SN_F32, s2, NULL);
    tc_input(&t, SN_I32, sn_shape_make(0), NULL);
    tc_input(&t, SN_F32, s2, NULL);
    tc_input(&t, SN_F32, s2, NULL);
    t.attr.optim.kind = SN_OPTIM_ADAM;
    expect("apply_optimizer adam", &t, "cuda");
    /* no current context: an error with a message, and no GPU call */
    cases++;
    sn_cuda_make_current(NULL);
    tc_init(&t, SN_OP_RELU, SN_F32, s2);
    tc_input(&t, SN_F32, s2, NULL);
    const sn_kernel *k = sn_cuda_kernel_select(&t.c);
    sn_status st = k ? k->run(&t.c) : SN_OK;
    if (st != SN_ERR_STATE || !strstr(sn_last_error(), "no CUDA context"))
        FAIL("relu with no current context: expected SN_ERR_STATE, got %s: %s",
             sn_status_name(st), sn_last_error());
    printf("%d cases, %d failures\n", cases, failures);
    return failures ? 1 : 0;
}
#endif
