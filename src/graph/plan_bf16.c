/* Values stored in bfloat16 under mixed bf16 (plan_impl.h, sn_plan_bf16_store).
 *
 * Under mixed bf16 a convolution computes in bfloat16 from float32 operands: each call
 * converts its x (forward, filter gradient) and dy (both gradients) to bfloat16 copies in
 * scratch first. A 1x1 convolution after BatchNormalization (Xception's and MobileNetV2's
 * pointwise layers) has its dy converted twice, by its data and its filter gradient, from the
 * float32 dx that bn_grad_x wrote a moment before; MobileNetV2's projection reads the
 * normalised activation that bn_train wrote, converted in the forward and again in the filter
 * gradient; Xception's SeparableConv2D has its pointwise half convert the depthwise half's
 * output, twice too. Where every reader of such a value converts it so, the plan stores the
 * value in bfloat16: the producer rounds as it writes (to nearest even, as the conversion
 * does), the readers take it as it is. The conversions' passes go, the producer writes half
 * the bytes, and the value takes half the arena. The readers compute on the same bfloat16
 * numbers as before, so the results are the same (tests/test_bf16_store.c compares the
 * plans).
 *
 * One step further, the values of Keras's mixed_bfloat16 itself: there a layer's output is a
 * bfloat16 tensor, and BatchNormalization casts its input up and computes in float32 (so does
 * PyTorch's autocast on the CPU). The convolution before a BatchNormalization (Xception's and
 * MobileNetV2's pointwise layers, MobileNetV2's depthwise ones) writes its output in
 * bfloat16, rounded from its float32 sums as it writes, and the BatchNormalization calls
 * (statistics, normalisation and both gradients) read it so: the convolution writes half the
 * bytes and the normaliser's four passes over it read half. Likewise a BatchNormalization
 * before a max pool (Xception's blocks) writes bfloat16 for the pool and its gradient. These
 * change results: the reader sees the rounded value, as in Keras (test_bf16_store checks the
 * plan against one with explicit casts). SN_BF16_STORE=exact keeps to the values that change
 * nothing.
 *
 * A value qualifies when it is the output of a bn_train, bn_grad_x (fused or not),
 * depthwise_conv2d or conv2d call, lives in the arena, is no target (nothing outside the plan
 * reads it), and every call that reads it (through any view) reads it as an operand that
 * takes bfloat16: one the call converts to bfloat16 (conv2d's x, conv2d_bwd_data's dy,
 * conv2d_bwd_filter's x and dy), or BatchNormalization's or a max pool's x. The backend has
 * the last word: each call involved must select a kernel that takes the bfloat16 operand
 * (sn_kernel.bf16_io); where one does not (a CPU where mixed bf16 computes in f32, another
 * shape, the reference kernels, a GPU), the value stays float32. */
#include <string.h>

#include "graph/plan_impl.h"

/* Whether input j of a call of op may be stored in bfloat16: an operand the op converts to
 * bfloat16 under mixed bf16 (the same numbers), or, unless exact_only, BatchNormalization's or
 * a max pool's x (rounded, as Keras's mixed_bfloat16 has it) */
static bool bf16_operand(sn_op op, int j, bool exact_only) {
    switch (op) {
    case SN_OP_CONV2D:
    case SN_OP_CONV2D_BWD_DATA: return j == 0;
    case SN_OP_CONV2D_BWD_FILTER: return j == 0 || j == 1;
    case SN_OP_BN_STATS:
    case SN_OP_BN_TRAIN:
    case SN_OP_BN_GRAD_PARAMS:
    case SN_OP_BN_GRAD_X:
    case SN_OP_MAX_POOL2D:
    case SN_OP_MAX_POOL2D_GRAD: return j == 0 && !exact_only;
    default: return false;
    }
}

/* Whether a call of op may write its output in bfloat16 */
static bool bf16_producer(sn_op op) {
    return op == SN_OP_BN_TRAIN || op == SN_OP_BN_GRAD_X || op == SN_OP_DEPTHWISE_CONV2D ||
           op == SN_OP_CONV2D;
}

/* The input nodes of node id's call: its own, then its fusion's extras. */
static int call_inputs(const sn_plan *p, sn_node id, sn_node *in) {
    const sn_node_t *nd = &p->g->nodes[id];
    const sn_fusion *f = &p->fusion[id];
    int n = 0;
    for (int j = 0; j < nd->n_in; j++) in[n++] = nd->in[j];
    for (int j = 0; j < f->n_extra_in; j++) in[n++] = f->extra_in[j];
    return n;
}

/* Whether node id's call, described with the storage chosen so far, has a kernel that takes
 * it with bfloat16 operands where they are. */
static bool kernel_takes(const sn_plan *p, sn_node id, bool bf16_compute) {
    sn_kcall k = {0};
    sn_plan_describe_call(p, id, &k);
    k.bf16 = bf16_compute;
    const sn_kernel *kern = sn_backend_select(p->backend, &k);
    return kern && kern->bf16_io;
}

sn_status sn_plan_bf16_store(sn_plan *p, int n, bool bf16_compute) {
    const char *env = sn_env(SN_ENV_BF16_STORE);
    if (!bf16_compute || (env && !strcmp(env, "0"))) return SN_OK;
    const bool exact_only = env && !strcmp(env, "exact");
    const sn_graph *g = p->g;
    const int nn = p->n_nodes;
    /* per storage root: the calls that read it, and how many of them read it as an operand
     * that takes bfloat16 */
    int *reads = sn_calloc((size_t)nn, sizeof *reads);
    int *takes_bf16 = sn_calloc((size_t)nn, sizeof *takes_bf16);
    unsigned char *store = sn_calloc((size_t)nn, 1);
    if (!reads || !takes_bf16 || !store) {
        free(reads);
        free(takes_bf16);
        free(store);
        return SN_ERR_NOMEM;
    }
    sn_node in[SN_MAX_INPUTS];
    for (int c = 0; c < n; c++) {
        sn_node id = p->order[c];
        int m = call_inputs(p, id, in);
        for (int j = 0; j < m; j++) {
            sn_node r = sn_plan_root(p, in[j]);
            reads[r]++;
            if (j < g->nodes[id].n_in && bf16_operand(g->nodes[id].op, j, exact_only))
                takes_bf16[r]++;
        }
    }
    /* a target's storage is read from outside the plan */
    for (int i = 0; i < nn; i++)
        if (p->needed[i] && p->is_target[i]) reads[sn_plan_root(p, i)] = -1;
    p->bf16_store = store;
    for (int c = 0; c < n; c++) {
        sn_node v = p->order[c];
        const sn_node_t *vd = &g->nodes[v];
        if (!bf16_producer(vd->op) || vd->dtype != SN_F32 ||
            p->loc[v].kind != LOC_ARENA || reads[v] <= 0 || takes_bf16[v] != reads[v])
            continue;
        store[v] = 1;
        bool ok = kernel_takes(p, v, bf16_compute);
        for (int r = 0; r < n && ok; r++) {
            sn_node rid = p->order[r];
            int m = call_inputs(p, rid, in);
            for (int j = 0; j < m && ok; j++)
                if (sn_plan_root(p, in[j]) == v) ok = kernel_takes(p, rid, bf16_compute);
        }
        if (!ok) store[v] = 0;
    }
    free(reads);
    free(takes_bf16);
    return SN_OK;
}
