/* Kernel tables: the reference table (backend/ref/), the CPU table (reference rows overridden
 * by the fast kernels of backend/cpu/) and the per-call choice between them. Tables are built
 * once per process and then only read. */
#include <pthread.h>
#include <string.h>

#include "backend/kernel.h"

static sn_kernel_table ref_table, cpu_table, cpu_loop_table;
static pthread_once_t ref_once = PTHREAD_ONCE_INIT, cpu_once = PTHREAD_ONCE_INIT;

static void build_ref(void) {
    memset(&ref_table, 0, sizeof ref_table);
    sn_ref_register_elementwise(&ref_table);
    sn_ref_register_reduce(&ref_table);
    sn_ref_register_softmax(&ref_table);
    sn_ref_register_shape(&ref_table);
    sn_ref_register_matmul(&ref_table);
    sn_ref_register_conv(&ref_table);
    sn_ref_register_state(&ref_table);
    sn_ref_register_rnn(&ref_table);
    sn_ref_register_rnn_layer(&ref_table);
    sn_ref_register_activation(&ref_table);
    sn_ref_register_attention(&ref_table);
    sn_ref_register_batch_norm(&ref_table);
}

/* Plain (strong) calls on purpose: they are what pulls backend/cpu/ out of libsinter.a into
 * static programs. A weak reference would not, and would leave them on reference kernels. */
static void build_cpu(void) {
    cpu_table = *sn_ref_kernels();
    sn_cpu_register_elementwise(&cpu_table);
    sn_cpu_register_reduce(&cpu_table);
    sn_cpu_register_softmax(&cpu_table);
    sn_cpu_register_matmul(&cpu_table);
    sn_cpu_register_conv(&cpu_table);
    sn_cpu_register_state(&cpu_table);
    sn_cpu_register_rnn(&cpu_table);
    sn_cpu_register_gru_rb(&cpu_table);
    sn_cpu_register_rnn_layer_loop(&cpu_table);
    sn_cpu_register_rnn_layer(&cpu_table);
    sn_cpu_register_shape(&cpu_table);
    sn_cpu_register_activation(&cpu_table);
    sn_cpu_register_fused(&cpu_table);
    sn_cpu_register_attention(&cpu_table);
    sn_cpu_register_lstm_step(&cpu_table);
    sn_cpu_register_batch_norm(&cpu_table);
    /* SN_RNN=loop: the same table with the whole-layer recurrent ops on the loop's kernels */
    cpu_loop_table = cpu_table;
    sn_cpu_register_rnn_layer_loop(&cpu_loop_table);
}

const sn_kernel_table *sn_ref_kernels(void) {
    pthread_once(&ref_once, build_ref);
    return &ref_table;
}

const sn_kernel_table *sn_cpu_kernels(void) {
    /* Read at every call (it is cheap) so a test can compare both tables in one process. */
    const char *env = sn_env(SN_ENV_KERNELS);
    if (env && strcmp(env, "ref") == 0) return sn_ref_kernels();
    pthread_once(&cpu_once, build_cpu);
    const char *rnn = sn_env(SN_ENV_RNN);
    return rnn && strcmp(rnn, "loop") == 0 ? &cpu_loop_table : &cpu_table;
}

const sn_kernel *sn_kernel_select(const sn_kernel_table *t, const sn_kcall *c) {
    sn_op op = c->op;
    if ((unsigned)op >= SN_OP_COUNT) return NULL;
    if (c->fused) {
        const sn_kernel *f = t && (unsigned)c->fused < SN_FUSED_COUNT ? t->fused[c->fused] : NULL;
        return f && (f->supports == NULL || f->supports(c)) ? f : NULL;
    }
    const sn_kernel *k = t ? t->k[op] : NULL;
    if (k && (k->supports == NULL || k->supports(c))) return k;
    k = sn_ref_kernels()->k[op];
    if (k && (k->supports == NULL || k->supports(c))) return k;
    return NULL;
}
