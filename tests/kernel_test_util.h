/* Shared by the kernel tests that call kernels directly, without a graph (test_ref_kernels.c,
 * test_cpu_kernels_vec.c): FAIL, which prints file:line and a message and counts a failure,
 * and a kernel call built by hand (its attributes and the sn_kcall over them). */
#ifndef SN_KERNEL_TEST_UTIL_H
#define SN_KERNEL_TEST_UTIL_H

#include <stdio.h>
#include <string.h>

#include "backend/kernel.h"

static int failures;

#define FAIL(...)                                                                              \
    do {                                                                                       \
        printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
        printf(__VA_ARGS__);                                                                   \
        printf("\n");                                                                          \
        failures++;                                                                            \
    } while (0)

typedef struct tcall {
    sn_attrs attr; /* c.attr points here */
    void *data[SN_MAX_INPUTS]; /* inputs the test allocated itself (test_cpu_kernels_vec.c) */
    sn_kcall c;
} tcall;

/* A call of op producing dtype dt of this shape, with no inputs yet (attributes: zero). */
static inline void tc_init(tcall *t, sn_op op, sn_dtype dt, sn_shape shape) {
    memset(t, 0, sizeof *t);
    t->c.op = op;
    t->c.y.dtype = dt;
    t->c.y.shape = shape;
    t->c.attr = &t->attr;
}

/* Appends an input of dtype dt and this shape that reads `data` (not copied, not owned). */
static inline void tc_input(tcall *t, sn_dtype dt, sn_shape shape, const void *data) {
    int i = t->c.n_in++;
    t->c.x[i].dtype = dt;
    t->c.x[i].shape = shape;
    t->c.in[i] = data;
}

#endif
