/* Microbenchmark of the fast CPU elementwise/reduce/softmax/state kernels against the
 * reference kernels: time per call of each op at the shapes of a 784-128-10 MLP step with
 * batch 32 (the overhead budget of a small model), the sum over that step, and a few large
 * shapes (memory-bound, threaded). Kernels are called directly through the tables, as the
 * executor does, with no graph around them.
 *
 *   build-vec/examples/bench_elementwise            (threads from SN_NUM_THREADS)
 *   SN_CPU_ISA=avx2|generic build-vec/examples/bench_elementwise */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/kernel.h"

typedef struct bcall {
    sn_attrs attr; /* c.attr points here */
    void *data[SN_MAX_INPUTS];
    sn_kcall c;
    void *scratch;
} bcall;

static void *xalloc(size_t n) {
    void *p = sn_malloc_aligned(n ? n : 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    memset(p, 0, n);
    return p;
}

static void b_init(bcall *b, sn_op op, sn_dtype dt, sn_shape s) {
    memset(b, 0, sizeof *b);
    b->c.op = op;
    b->c.y.dtype = dt;
    b->c.y.shape = s;
    b->c.attr = &b->attr;
}

/* An input of dtype dt filled with small values (labels: 0..C-1 by index). */
static void b_in(bcall *b, sn_dtype dt, sn_shape s, int classes) {
    int i = b->c.n_in++;
    b->c.x[i].dtype = dt;
    b->c.x[i].shape = s;
    int64_t n = sn_shape_numel(&s);
    b->data[i] = xalloc((size_t)n * sn_dtype_size(dt));
    for (int64_t j = 0; j < n; j++)
        sn_store(dt, b->data[i], j, classes ? (double)(j % classes) : 0.25 + 0.5 * (double)((j * 7919) % 1000) / 1000.0);
    b->c.in[i] = b->data[i];
}

/* Median-free but stable enough: the best of 5 rounds of enough calls to fill ~20 ms. */
static double time_call(const sn_kernel *k, bcall *b) {
    int side = b->c.op == SN_OP_APPLY_OPTIMIZER || b->c.op == SN_OP_ASSIGN_ADD;
    size_t ob = (size_t)sn_shape_numel(&b->c.y.shape) * sn_dtype_size(b->c.y.dtype);
    void *out = side ? b->data[0] : xalloc(ob);
    size_t sb = 0;
    if (k->prepare) k->prepare(&b->c, &sb);
    void *scratch = sb ? xalloc(sb) : NULL;
    b->c.scratch = scratch;
    b->c.scratch_bytes = sb;
    b->c.out = out;
    k->run(&b->c);
    double t0 = sn_now();
    long reps = 1;
    while (sn_now() - t0 < 0.002) {
        k->run(&b->c);
        reps++;
    }
    reps = reps * 10 + 1;
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double s = sn_now();
        for (long i = 0; i < reps; i++) k->run(&b->c);
        double e = (sn_now() - s) / (double)reps;
        if (e < best) best = e;
    }
    if (scratch) sn_free_aligned(scratch);
    if (!side) sn_free_aligned(out);
    return best;
}

static void b_free(bcall *b) {
    for (int i = 0; i < b->c.n_in; i++) sn_free_aligned(b->data[i]);
}

typedef struct bcase {
    const char *name;
    bcall b;
} bcase;

static sn_shape S0(void) { return sn_shape_make(0); }
static sn_shape S1(int64_t a) { return sn_shape_make(1, a); }
static sn_shape S2(int64_t a, int64_t b) { return sn_shape_make(2, a, b); }

static void set_adam(bcall *b) {
    b->attr.optim.kind = SN_OPTIM_ADAM;
    b->attr.optim.lr = 1e-3;
    b->attr.optim.beta1 = 0.9;
    b->attr.optim.beta2 = 0.999;
    b->attr.optim.epsilon = 1e-7;
}

static void adam_case(bcase *c, const char *name, int64_t n) {
    c->name = name;
    b_init(&c->b, SN_OP_APPLY_OPTIMIZER, SN_F32, S1(n));
    set_adam(&c->b);
    b_in(&c->b, SN_F32, S1(n), 0);
    b_in(&c->b, SN_F32, S1(n), 0);
    b_in(&c->b, SN_I32, S0(), 0);
    b_in(&c->b, SN_F32, S1(n), 0);
    b_in(&c->b, SN_F32, S1(n), 0);
}

static void run_cases(const char *title, bcase *cs, int n, const sn_kernel_table *fast) {
    printf("\n%s\n%-34s %12s %12s %8s  %s\n", title, "op [shape]", "ref us", "fast us", "speedup",
           "impl");
    double tr = 0, tf = 0;
    for (int i = 0; i < n; i++) {
        const sn_kernel *kr = sn_ref_kernels()->k[cs[i].b.c.op];
        const sn_kernel *kf = sn_kernel_select(fast, &cs[i].b.c);
        double r = time_call(kr, &cs[i].b) * 1e6, f = time_call(kf, &cs[i].b) * 1e6;
        tr += r;
        tf += f;
        printf("%-34s %12.2f %12.2f %7.1fx  %s\n", cs[i].name, r, f, r / f, kf->impl);
    }
    printf("%-34s %12.2f %12.2f %7.1fx\n", "total", tr, tf, tr / tf);
}

int main(void) {
    sn_kernel_table fast = *sn_ref_kernels();
    sn_cpu_register_elementwise(&fast);
    sn_cpu_register_reduce(&fast);
    sn_cpu_register_softmax(&fast);
    sn_cpu_register_state(&fast);
    printf("threads %d, SN_CPU_ISA=%s\n", sn_num_threads(),
           getenv("SN_CPU_ISA") ? getenv("SN_CPU_ISA") : "(auto)");

    /* The non-matmul ops of one training step of Dense(128, relu) -> Dense(10), batch 32,
     * sparse categorical cross-entropy, Adam. */
    bcase mlp[16];
    int n = 0;
    mlp[n].name = "bias_add [32,128]+[128]";
    b_init(&mlp[n].b, SN_OP_BIAS_ADD, SN_F32, S2(32, 128));
    b_in(&mlp[n].b, SN_F32, S2(32, 128), 0);
    b_in(&mlp[n++].b, SN_F32, S1(128), 0);
    mlp[n].name = "relu [32,128]";
    b_init(&mlp[n].b, SN_OP_RELU, SN_F32, S2(32, 128));
    b_in(&mlp[n++].b, SN_F32, S2(32, 128), 0);
    mlp[n].name = "bias_add [32,10]+[10]";
    b_init(&mlp[n].b, SN_OP_BIAS_ADD, SN_F32, S2(32, 10));
    b_in(&mlp[n].b, SN_F32, S2(32, 10), 0);
    b_in(&mlp[n++].b, SN_F32, S1(10), 0);
    mlp[n].name = "sparse_xent [32,10]";
    b_init(&mlp[n].b, SN_OP_SPARSE_XENT, SN_F32, S1(32));
    b_in(&mlp[n].b, SN_F32, S2(32, 10), 0);
    b_in(&mlp[n++].b, SN_I32, S1(32), 10);
    mlp[n].name = "reduce_mean [32]->[]";
    b_init(&mlp[n].b, SN_OP_REDUCE_MEAN, SN_F32, S0());
    mlp[n].b.attr.reduce.mask = 1;
    b_in(&mlp[n++].b, SN_F32, S1(32), 0);
    mlp[n].name = "broadcast_to []->[32]";
    b_init(&mlp[n].b, SN_OP_BROADCAST_TO, SN_F32, S1(32));
    b_in(&mlp[n++].b, SN_F32, S0(), 0);
    mlp[n].name = "sparse_xent_grad [32,10]";
    b_init(&mlp[n].b, SN_OP_SPARSE_XENT_GRAD, SN_F32, S2(32, 10));
    b_in(&mlp[n].b, SN_F32, S2(32, 10), 0);
    b_in(&mlp[n].b, SN_I32, S1(32), 10);
    b_in(&mlp[n++].b, SN_F32, S1(32), 0);
    mlp[n].name = "reduce_sum [32,10]->[10]";
    b_init(&mlp[n].b, SN_OP_REDUCE_SUM, SN_F32, S1(10));
    mlp[n].b.attr.reduce.mask = 1;
    b_in(&mlp[n++].b, SN_F32, S2(32, 10), 0);
    mlp[n].name = "relu_grad [32,128]";
    b_init(&mlp[n].b, SN_OP_RELU_GRAD, SN_F32, S2(32, 128));
    b_in(&mlp[n].b, SN_F32, S2(32, 128), 0);
    b_in(&mlp[n++].b, SN_F32, S2(32, 128), 0);
    mlp[n].name = "reduce_sum [32,128]->[128]";
    b_init(&mlp[n].b, SN_OP_REDUCE_SUM, SN_F32, S1(128));
    mlp[n].b.attr.reduce.mask = 1;
    b_in(&mlp[n++].b, SN_F32, S2(32, 128), 0);
    adam_case(&mlp[n++], "adam [784*128]", 784 * 128);
    adam_case(&mlp[n++], "adam [128]", 128);
    adam_case(&mlp[n++], "adam [128*10]", 1280);
    adam_case(&mlp[n++], "adam [10]", 10);
    mlp[n].name = "assign_add i32 [] (iterations)";
    b_init(&mlp[n].b, SN_OP_ASSIGN_ADD, SN_I32, S0());
    b_in(&mlp[n].b, SN_I32, S0(), 0);
    b_in(&mlp[n++].b, SN_I32, S0(), 0);
    mlp[n].name = "sparse_accuracy [32,10]";
    b_init(&mlp[n].b, SN_OP_SPARSE_ACCURACY, SN_F32, S1(32));
    b_in(&mlp[n].b, SN_F32, S2(32, 10), 0);
    b_in(&mlp[n++].b, SN_I32, S1(32), 10);
    run_cases("MLP 784-128-10, batch 32: non-matmul ops of one training step", mlp, n, &fast);
    for (int i = 0; i < n; i++) b_free(&mlp[i].b);

    bcase big[8];
    n = 0;
    big[n].name = "add [1M]+[1M]";
    b_init(&big[n].b, SN_OP_ADD, SN_F32, S1(1 << 20));
    b_in(&big[n].b, SN_F32, S1(1 << 20), 0);
    b_in(&big[n++].b, SN_F32, S1(1 << 20), 0);
    big[n].name = "exp [1M]";
    b_init(&big[n].b, SN_OP_EXP, SN_F32, S1(1 << 20));
    b_in(&big[n++].b, SN_F32, S1(1 << 20), 0);
    big[n].name = "tanh [1M]";
    b_init(&big[n].b, SN_OP_TANH, SN_F32, S1(1 << 20));
    b_in(&big[n++].b, SN_F32, S1(1 << 20), 0);
    big[n].name = "reduce_sum [156800,32]->[32]";
    b_init(&big[n].b, SN_OP_REDUCE_SUM, SN_F32, S1(32));
    big[n].b.attr.reduce.mask = 1;
    b_in(&big[n++].b, SN_F32, S2(156800, 32), 0);
    big[n].name = "softmax [1024,1000]";
    b_init(&big[n].b, SN_OP_SOFTMAX, SN_F32, S2(1024, 1000));
    big[n].b.attr.axis.axis = 1;
    b_in(&big[n++].b, SN_F32, S2(1024, 1000), 0);
    big[n].name = "dropout 0.5 [1M]";
    b_init(&big[n].b, SN_OP_DROPOUT, SN_F32, S1(1 << 20));
    big[n].b.attr.dropout.rate = 0.5;
    b_in(&big[n++].b, SN_F32, S1(1 << 20), 0);
    adam_case(&big[n++], "adam [4M]", 4 << 20);
    run_cases("Large tensors", big, n, &fast);
    for (int i = 0; i < n; i++) b_free(&big[i].b);
    return 0;
}
