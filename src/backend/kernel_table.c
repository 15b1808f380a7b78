/* Kernel tables: the reference table (backend/ref/), the CPU table (reference rows overridden
 * by the fast kernels of backend/cpu/) and the per-call choice between them. Tables are built
 * once per process and then only read. */
#include <pthread.h>
#include <string.h>

#include "backend/kernel.h"

/* The fast CPU kernels are written separately. A family not yet committed is declared weak:
 * its register function is then an undefined weak symbol (address NULL) and the reference
 * rows stay. Once a family exists it must be referenced strongly (declared only in kernel.h):
 * from a static library a weak reference does not pull the archive member in, so a weak
 * reference to an existing family would silently leave programs on the reference kernels. */
extern void sn_cpu_register_elementwise(sn_kernel_table *t) __attribute__((weak));
extern void sn_cpu_register_reduce(sn_kernel_table *t) __attribute__((weak));
extern void sn_cpu_register_softmax(sn_kernel_table *t) __attribute__((weak));
extern void sn_cpu_register_state(sn_kernel_table *t) __attribute__((weak));

static sn_kernel_table ref_table, cpu_table;
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
}

static void build_cpu(void) {
    cpu_table = *sn_ref_kernels();
    void (*const fast[])(sn_kernel_table *) = {
        sn_cpu_register_elementwise, sn_cpu_register_reduce, sn_cpu_register_softmax,
        sn_cpu_register_matmul,      sn_cpu_register_conv,   sn_cpu_register_state,
    };
    for (size_t i = 0; i < sizeof fast / sizeof fast[0]; i++)
        if (fast[i]) fast[i](&cpu_table);
}

const sn_kernel_table *sn_ref_kernels(void) {
    pthread_once(&ref_once, build_ref);
    return &ref_table;
}

const sn_kernel_table *sn_cpu_kernels(void) {
    /* Read at every call (it is cheap) so a test can compare both tables in one process. */
    const char *env = getenv("SN_KERNELS");
    if (env && strcmp(env, "ref") == 0) return sn_ref_kernels();
    pthread_once(&cpu_once, build_cpu);
    return &cpu_table;
}

const sn_kernel *sn_kernel_select(const sn_kernel_table *t, const sn_kcall *c) {
    sn_op op = c->node->op;
    if ((unsigned)op >= SN_OP_COUNT) return NULL;
    const sn_kernel *k = t ? t->k[op] : NULL;
    if (k && (k->supports == NULL || k->supports(c))) return k;
    k = sn_ref_kernels()->k[op];
    if (k && (k->supports == NULL || k->supports(c))) return k;
    return NULL;
}
