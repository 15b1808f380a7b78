/* Fast f32 elementwise kernels: binary ops with NumPy broadcasting (add, sub, mul, div, bias
 * add, broadcast_to), unary maths (relu, sigmoid, tanh, exp, log, sqrt, neg), casts between
 * f32 and bf16 (and u8/i32 -> f32), the pointwise gradients and dropout.
 *
 * Why these paths. In a small model (784-128-10 MLP, batch 32) every one of these ops touches
 * a few thousand floats that sit in L1, so what costs is per-call overhead and scalar code,
 * not memory: the kernels therefore
 *   - run on the calling thread, without entering a parallel region, below ~32K elements
 *     (waking an OpenMP team costs several microseconds; the whole op costs less);
 *   - coalesce the broadcast pattern into at most a few strided dimensions once per call, so
 *     same-shape, scalar, row ([N,C] + [C]) and column ([N,C] + [N,1]) broadcasts all end up
 *     in one contiguous inner loop with the other operand either a vector or one scalar;
 *   - compile every inner loop three times (AVX-512, AVX2, baseline x86-64 / any CPU) with
 *     function-level target attributes and pick the widest the CPU has via sn_cpu() once, at
 *     registration. The library itself keeps baseline flags, so it runs anywhere.
 * exp/log/tanh/sigmoid use our own branch-free polynomial versions (Cephes coefficients,
 * about 2 ulp in f32) that the compiler vectorises; libm calls would keep the loops scalar.
 * Selects are written as bit masks (sel/mask, in cpu_vec.h with vexp, shared with the
 * reduce, softmax and state kernels): GCC 12 refuses to if-convert `c ? a : b` inside the
 * longer loop bodies on AVX2/SSE (measured), and then vectorises nothing.
 *
 * No -ffast-math and no FMA contraction (ISO C mode): results are the same bits whichever
 * ISA variant runs. SN_CPU_ISA=avx512|avx2|generic picks a variant for benchmarks/debugging.
 * Anything not handled here (other dtypes) falls back to the reference kernels. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_vec.h"
#include "backend/kernel.h"

/* Elements below which a kernel stays on the calling thread. Transcendental ops and dropout
 * cost 5-20x more per element, so they go parallel earlier. */
enum { GRAIN_CHEAP = 32768, GRAIN_MATH = 8192, GRAIN_DROPOUT = 4096 };

/* ---- scalar maths (inlined into every vector loop; vexp and the bit-mask selects are in
 * cpu_vec.h) ------------------------------------------------------------------------------ */

/* log(x) (Cephes logf), with log(0) = -inf, log(<0) = NaN, log(inf) = inf, denormals exact. */
INL float vlog(float x) {
    uint32_t dn = mask(x < 1.17549435e-38f);
    float xs = sel(dn, x * 8388608.0f, x);
    uint32_t u = f2u(xs);
    int32_t e = (int32_t)((u >> 23) & 0xffu) - 126 - (int32_t)(dn & 23u);
    float m = u2f((u & 0x007fffffu) | 0x3f000000u); /* [0.5, 1) */
    uint32_t lo = mask(m < 0.707106781186547524f);
    e -= (int32_t)(lo & 1u);
    m = sel(lo, m + m, m) - 1.0f;
    float z = m * m;
    float y = 7.0376836292E-2f;
    y = y * m - 1.1514610310E-1f;
    y = y * m + 1.1676998740E-1f;
    y = y * m - 1.2420140846E-1f;
    y = y * m + 1.4249322787E-1f;
    y = y * m - 1.6668057665E-1f;
    y = y * m + 2.0000714765E-1f;
    y = y * m - 2.4999993993E-1f;
    y = y * m + 3.3333331174E-1f;
    y = y * m * z;
    float fe = (float)e;
    y += fe * -2.12194440e-4f;
    y += -0.5f * z;
    float r = m + y + fe * 0.693359375f;
    r = sel(mask(x == INFINITY), x, r);
    r = sel(mask(x == 0.0f), -INFINITY, r);
    r = sel(mask(x < 0.0f), NAN, r);
    return sel(mask(x != x), x, r);
}

/* vtanh and vsigmoid live in cpu_vec.h (the recurrent kernels use them too). */

/* ---- binary ops over one contiguous segment --------------------------------------------- */

typedef enum {
    B_ADD,
    B_SUB,
    B_MUL,
    B_DIV,
    B_RELU_GRAD,    /* (x, dy): dy * (x > 0) */
    B_SIGMOID_GRAD, /* (y, dy) */
    B_TANH_GRAD,    /* (y, dy) */
    B_FIRST,        /* broadcast_to: a */
    B_ADD_RELU,     /* bias_add with a fused relu: relu1(a + b) */
} bin_op;

INL float bin1(bin_op op, float a, float b) {
    switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_RELU_GRAD: return relu_grad1(a, b);
    case B_SIGMOID_GRAD: return b * a * (1.0f - a);
    case B_TANH_GRAD: return b * (1.0f - a * a);
    case B_FIRST: return a;
    case B_ADD_RELU: {
        return relu1(a + b); /* NaN stays NaN, as relu */
    }
    }
    return 0;
}

/* o[i] = a[i*sa] op b[i*sb] for i < n, with sa, sb in {0, 1}: vector-vector, vector-scalar or
 * scalar-vector. `op` is a constant at every call site, so each case becomes its own loop. */
INL void bin_pattern(bin_op op, float *o, const float *a, int sa, const float *b, int sb,
                     int64_t n) {
    /* omp simd: o may be a or b exactly (in-place), never a shifted overlap, so there is no
     * dependence to check for at run time. */
    if (sa && sb) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = bin1(op, a[i], b[i]);
    } else if (sa) {
        const float s = b[0];
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = bin1(op, a[i], s);
    } else if (sb) {
        const float s = a[0];
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = bin1(op, s, b[i]);
    } else {
        const float v = bin1(op, a[0], b[0]);
        for (int64_t i = 0; i < n; i++) o[i] = v;
    }
}

INL void bin_body(int op, float *o, const float *a, int sa, const float *b, int sb, int64_t n) {
    switch ((bin_op)op) {
    case B_ADD: bin_pattern(B_ADD, o, a, sa, b, sb, n); break;
    case B_SUB: bin_pattern(B_SUB, o, a, sa, b, sb, n); break;
    case B_MUL: bin_pattern(B_MUL, o, a, sa, b, sb, n); break;
    case B_DIV: bin_pattern(B_DIV, o, a, sa, b, sb, n); break;
    case B_RELU_GRAD: bin_pattern(B_RELU_GRAD, o, a, sa, b, sb, n); break;
    case B_SIGMOID_GRAD: bin_pattern(B_SIGMOID_GRAD, o, a, sa, b, sb, n); break;
    case B_TANH_GRAD: bin_pattern(B_TANH_GRAD, o, a, sa, b, sb, n); break;
    case B_ADD_RELU: bin_pattern(B_ADD_RELU, o, a, sa, b, sb, n); break;
    case B_FIRST:
        if (sa)
            memmove(o, a, (size_t)n * sizeof(float));
        else
            bin_pattern(B_FIRST, o, a, 0, b, 0, n);
        break;
    }
}

/* ---- unary ops over one contiguous segment ---------------------------------------------- */

typedef enum { U_RELU, U_SIGMOID, U_TANH, U_EXP, U_LOG, U_SQRT, U_NEG } un_op;

INL float un1(un_op op, float x) {
    switch (op) {
    case U_RELU: return relu1(x); /* NaN stays NaN, as the reference */
    case U_SIGMOID: return vsigmoid(x);
    case U_TANH: return vtanh(x);
    case U_EXP: return vexp(x);
    case U_LOG: return vlog(x);
    case U_SQRT: return sqrtf(x); /* only the generic variant; see un_body */
    case U_NEG: return -x;
    }
    return 0;
}

INL void un_loop(un_op op, float *o, const float *x, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) o[i] = un1(op, x[i]);
}

/* sqrtf does not vectorise without -fno-math-errno (which the build does not set), so the
 * x86 variants call the instruction directly. */
INL void un_body(int op, float *o, const float *x, int64_t n) {
    switch ((un_op)op) {
    case U_RELU: un_loop(U_RELU, o, x, n); break;
    case U_SIGMOID: un_loop(U_SIGMOID, o, x, n); break;
    case U_TANH: un_loop(U_TANH, o, x, n); break;
    case U_EXP: un_loop(U_EXP, o, x, n); break;
    case U_LOG: un_loop(U_LOG, o, x, n); break;
    case U_SQRT: un_loop(U_SQRT, o, x, n); break;
    case U_NEG: un_loop(U_NEG, o, x, n); break;
    }
}

/* ---- casts ------------------------------------------------------------------------------ */

/* Same rounding as sn_f32_to_bf16: nearest even, NaN kept quiet. */
INL void to_bf16_body(uint16_t *o, const float *x, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) o[i] = bf16_rne1(x[i]);
}

INL void from_bf16_body(float *o, const uint16_t *x, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) o[i] = bf16_f32(x[i]);
}

/* ---- dropout mask: Philox4x32-10 for PG counters at once -------------------------------- */

enum { PG = 16 }; /* groups of four elements drawn together: 64 elements per batch */

/* Elements [4 * g0, 4 * g0 + 4 * PG) of dropout: the words of sn_philox(key, hi, g0 + j) for
 * j < PG, computed lane-parallel (the same arithmetic as core/rng.c, written so that the
 * compiler vectorises across j), then kept or zeroed. The test checks the bits against the
 * reference, which calls sn_dropout_keep. */
INL void dropout_batch_body(float *o, const float *x, uint64_t key, uint64_t hi, uint64_t g0,
                            float thresh, double scale) {
    uint32_t c0[PG], c1[PG], c2[PG], c3[PG];
    for (int j = 0; j < PG; j++) {
        uint64_t lo = g0 + (uint64_t)j;
        c0[j] = (uint32_t)lo;
        c1[j] = (uint32_t)(lo >> 32);
        c2[j] = (uint32_t)hi;
        c3[j] = (uint32_t)(hi >> 32);
    }
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int round = 0; round < 10; round++) {
        for (int j = 0; j < PG; j++) {
            uint64_t p0 = (uint64_t)0xD2511F53u * c0[j];
            uint64_t p1 = (uint64_t)0xCD9E8D57u * c2[j];
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[j] ^ k0;
            uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[j] ^ k1;
            c1[j] = (uint32_t)p1;
            c3[j] = (uint32_t)p0;
            c0[j] = n0;
            c2[j] = n2;
        }
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    for (int j = 0; j < PG; j++) {
        const uint32_t w[4] = {c0[j], c1[j], c2[j], c3[j]};
        for (int k = 0; k < 4; k++) {
            float v = (float)((double)x[4 * j + k] * scale);
            o[4 * j + k] = sel(mask(sn_u32_to_unit(w[k]) >= thresh), v, 0.0f);
        }
    }
}

/* ---- the three compiled variants --------------------------------------------------------- */

typedef struct ew_isa {
    const char *name;
    void (*binary)(int op, float *o, const float *a, int sa, const float *b, int sb, int64_t n);
    void (*unary)(int op, float *o, const float *x, int64_t n);
    void (*to_bf16)(uint16_t *o, const float *x, int64_t n);
    void (*from_bf16)(float *o, const uint16_t *x, int64_t n);
    void (*dropout)(float *o, const float *x, uint64_t key, uint64_t hi, uint64_t g0,
                    float thresh, double scale);
} ew_isa;

static void bin_generic(int op, float *o, const float *a, int sa, const float *b, int sb,
                        int64_t n) {
    bin_body(op, o, a, sa, b, sb, n);
}
static void un_generic(int op, float *o, const float *x, int64_t n) { un_body(op, o, x, n); }
static void to_bf16_generic(uint16_t *o, const float *x, int64_t n) { to_bf16_body(o, x, n); }
static void from_bf16_generic(float *o, const uint16_t *x, int64_t n) { from_bf16_body(o, x, n); }
static void dropout_generic(float *o, const float *x, uint64_t key, uint64_t hi, uint64_t g0,
                            float thresh, double scale) {
    dropout_batch_body(o, x, key, hi, g0, thresh, scale);
}
static const ew_isa isa_generic = {"cpu", bin_generic, un_generic, to_bf16_generic,
                                   from_bf16_generic, dropout_generic};

#ifdef SN_CPU_X86
TGT_AVX512 static void bin_avx512(int op, float *o, const float *a, int sa, const float *b,
                                  int sb, int64_t n) {
    bin_body(op, o, a, sa, b, sb, n);
}
TGT_AVX512 static void un_avx512(int op, float *o, const float *x, int64_t n) {
    if (op != U_SQRT) {
        un_body(op, o, x, n);
        return;
    }
    vsqrt_avx512(o, x, n);
}
TGT_AVX512 static void to_bf16_avx512(uint16_t *o, const float *x, int64_t n) {
    to_bf16_body(o, x, n);
}
TGT_AVX512 static void from_bf16_avx512(float *o, const uint16_t *x, int64_t n) {
    from_bf16_body(o, x, n);
}
TGT_AVX512 static void dropout_avx512(float *o, const float *x, uint64_t key, uint64_t hi,
                                      uint64_t g0, float thresh, double scale) {
    dropout_batch_body(o, x, key, hi, g0, thresh, scale);
}
static const ew_isa isa_avx512 = {"avx512", bin_avx512, un_avx512, to_bf16_avx512,
                                  from_bf16_avx512, dropout_avx512};

TGT_AVX2 static void bin_avx2(int op, float *o, const float *a, int sa, const float *b, int sb,
                              int64_t n) {
    bin_body(op, o, a, sa, b, sb, n);
}
TGT_AVX2 static void un_avx2(int op, float *o, const float *x, int64_t n) {
    if (op != U_SQRT) {
        un_body(op, o, x, n);
        return;
    }
    vsqrt_avx2(o, x, n);
}
TGT_AVX2 static void to_bf16_avx2(uint16_t *o, const float *x, int64_t n) { to_bf16_body(o, x, n); }
TGT_AVX2 static void from_bf16_avx2(float *o, const uint16_t *x, int64_t n) {
    from_bf16_body(o, x, n);
}
TGT_AVX2 static void dropout_avx2(float *o, const float *x, uint64_t key, uint64_t hi,
                                  uint64_t g0, float thresh, double scale) {
    dropout_batch_body(o, x, key, hi, g0, thresh, scale);
}
static const ew_isa isa_avx2 = {"avx2", bin_avx2, un_avx2, to_bf16_avx2, from_bf16_avx2,
                                dropout_avx2};
#endif

static const ew_isa *isa = &isa_generic;

/* ---- SN_FUSED_ADD_L2 (kernel.h): o = g + 2 (s w), the graph's roundings ---------------------
 * (each product fl(s w), their sum 2 fl(s w) exactly, then + g; no contraction can change it:
 * the only product left to fuse with the add is the exact doubling). */
#define ADD_L2_BODY                                                                            \
    for (int64_t i = 0; i < n; i++) {                                                          \
        float p = s * w[i];                                                                     \
        o[i] = g[i] + (p + p);                                                                  \
    }
typedef void (*add_l2_fn)(float *restrict o, const float *restrict g, const float *restrict w,
                          float s, int64_t n);
static void add_l2_generic(float *restrict o, const float *restrict g, const float *restrict w,
                           float s, int64_t n) {
    ADD_L2_BODY
}
#ifdef SN_CPU_X86
TGT_AVX512 static void add_l2_avx512(float *restrict o, const float *restrict g,
                                     const float *restrict w, float s, int64_t n) {
    ADD_L2_BODY
}
TGT_AVX2 static void add_l2_avx2(float *restrict o, const float *restrict g,
                                 const float *restrict w, float s, int64_t n) {
    ADD_L2_BODY
}
#endif
static add_l2_fn add_l2 = add_l2_generic;

/* In place (o is G's buffer, the planner's overwrite_input): o += 2 (s w), the same roundings. */
#define ADD_L2_INPLACE_BODY                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                          \
        float p = s * w[i];                                                                     \
        o[i] = o[i] + (p + p);                                                                  \
    }
typedef void (*add_l2_inplace_fn)(float *restrict o, const float *restrict w, float s,
                                  int64_t n);
static void add_l2_inplace_generic(float *restrict o, const float *restrict w, float s,
                                   int64_t n) {
    ADD_L2_INPLACE_BODY
}
#ifdef SN_CPU_X86
TGT_AVX512 static void add_l2_inplace_avx512(float *restrict o, const float *restrict w, float s,
                                             int64_t n) {
    ADD_L2_INPLACE_BODY
}
TGT_AVX2 static void add_l2_inplace_avx2(float *restrict o, const float *restrict w, float s,
                                         int64_t n) {
    ADD_L2_INPLACE_BODY
}
#endif
static add_l2_inplace_fn add_l2_inplace = add_l2_inplace_generic;

typedef struct add_l2_ctx {
    float *o;
    const float *g, *w;
    float s;
    int64_t n;
} add_l2_ctx;

static void add_l2_task(void *vctx, int ith, int nth) {
    const add_l2_ctx *x = vctx;
    int64_t lo, hi;
    sn_split_range(x->n, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    if (x->o == x->g) add_l2_inplace(x->o + lo, x->w + lo, x->s, hi - lo);
    else add_l2(x->o + lo, x->g + lo, x->w + lo, x->s, hi - lo);
}

/* op ADD, in (-, -, G, w, s): f32, G and w of the output's size, s one element */
static bool add_l2_supports(const sn_kcall *c) {
    if (c->op != SN_OP_ADD || c->fused != SN_FUSED_ADD_L2 || c->n_in != 5 ||
        c->y.dtype != SN_F32)
        return false;
    int64_t n = sn_shape_numel(&c->y.shape);
    return c->x[2].dtype == SN_F32 && sn_shape_numel(&c->x[2].shape) == n &&
           c->x[3].dtype == SN_F32 && sn_shape_numel(&c->x[3].shape) == n &&
           c->x[4].dtype == SN_F32 && sn_shape_numel(&c->x[4].shape) == 1;
}

static sn_status add_l2_run(sn_kcall *c) {
    add_l2_ctx x = {.o = c->out, .g = c->in[2], .w = c->in[3],
                    .s = ((const float *)c->in[4])[0], .n = sn_shape_numel(&c->y.shape)};
    run_tasks(add_l2_task, &x, x.n, GRAIN_CHEAP, x.n);
    return SN_OK;
}

/* ---- broadcasting: the output index space as a few coalesced strided dimensions ---------- */

typedef struct bc_plan {
    int nd;                           /* >= 1 */
    int64_t n[SN_MAX_DIMS];           /* sizes, outermost first */
    int64_t s[2][SN_MAX_DIMS];        /* element strides of each input; 0 = broadcast */
    int64_t total;
} bc_plan;

/* Fills p for inputs (nin = 1 or 2) broadcast to out; false when a shape does not broadcast. */
static bool bc_make(bc_plan *p, const sn_shape *out, int nin, const sn_shape *const *in) {
    int64_t n[SN_MAX_DIMS], s[2][SN_MAX_DIMS] = {{0}};
    int nd = 0;
    if (out->ndim > SN_MAX_DIMS) return false;
    for (int k = 0; k < nin; k++)
        if (in[k]->ndim > out->ndim) return false;
    int64_t inner[2] = {1, 1};
    /* Walk from the innermost dimension out, so an input's stride is the product of its
     * dimensions inside this one. Size-1 output dimensions are dropped. */
    int64_t rn[SN_MAX_DIMS], rs[2][SN_MAX_DIMS];
    int rd = 0;
    for (int d = out->ndim - 1; d >= 0; d--) {
        int64_t od = out->dim[d];
        int64_t st[2] = {0, 0};
        for (int k = 0; k < nin; k++) {
            int kd = d - (out->ndim - in[k]->ndim);
            int64_t id = kd >= 0 ? in[k]->dim[kd] : 1;
            if (id == od)
                st[k] = id == 1 ? 0 : inner[k];
            else if (id != 1)
                return false;
            inner[k] *= id;
        }
        if (od == 1) continue;
        rn[rd] = od;
        rs[0][rd] = st[0];
        rs[1][rd] = st[1];
        rd++;
    }
    /* Reverse to outermost-first and merge a dimension into the one inside it when every
     * input steps through both as through one. */
    for (int i = rd - 1; i >= 0; i--) {
        if (nd > 0) {
            bool merge = true;
            for (int k = 0; k < nin; k++)
                if (s[k][nd - 1] != rs[k][i] * rn[i]) merge = false;
            if (merge) {
                n[nd - 1] *= rn[i];
                for (int k = 0; k < nin; k++) s[k][nd - 1] = rs[k][i];
                continue;
            }
        }
        n[nd] = rn[i];
        for (int k = 0; k < 2; k++) s[k][nd] = rs[k][i];
        nd++;
    }
    if (nd == 0) { /* a scalar output */
        n[0] = 1;
        s[0][0] = s[1][0] = 0;
        nd = 1;
    }
    p->nd = nd;
    p->total = 1;
    for (int d = 0; d < nd; d++) {
        p->n[d] = n[d];
        p->s[0][d] = s[0][d];
        p->s[1][d] = s[1][d];
        p->total *= n[d];
    }
    for (int k = nin; k < 2; k++)
        for (int d = 0; d < nd; d++) p->s[k][d] = 0;
    for (int d = 0; d < out->ndim; d++)
        if (out->dim[d] == 0) p->total = 0;
    return true;
}

typedef struct bin_ctx {
    const bc_plan *p;
    int op;
    float *o;
    const float *a, *b;
} bin_ctx;

/* Output elements [lo, hi) of this thread, one inner-dimension segment at a time. */
static void bin_task(void *vctx, int ith, int nth) {
    const bin_ctx *x = vctx;
    const bc_plan *p = x->p;
    int64_t lo, hi;
    sn_split_range(p->total, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    int nd = p->nd;
    int64_t len = p->n[nd - 1];
    int64_t ia = p->s[0][nd - 1], ib = p->s[1][nd - 1];
    int64_t idx[SN_MAX_DIMS] = {0}, row = lo / len, col = lo % len;
    int64_t offa = 0, offb = 0;
    for (int d = nd - 2; d >= 0; d--) {
        idx[d] = row % p->n[d];
        row /= p->n[d];
        offa += idx[d] * p->s[0][d];
        offb += idx[d] * p->s[1][d];
    }
    for (int64_t pos = lo; pos < hi;) {
        int64_t m = len - col < hi - pos ? len - col : hi - pos;
        isa->binary(x->op, x->o + pos, x->a + offa + col * ia, (int)ia, x->b + offb + col * ib,
                    (int)ib, m);
        pos += m;
        col = 0;
        for (int d = nd - 2; d >= 0; d--) {
            offa += p->s[0][d];
            offb += p->s[1][d];
            if (++idx[d] < p->n[d]) break;
            offa -= p->s[0][d] * p->n[d];
            offb -= p->s[1][d] * p->n[d];
            idx[d] = 0;
        }
    }
}

static bool all_f32(const sn_kcall *c) {
    if (c->y.dtype != SN_F32) return false;
    for (int i = 0; i < c->n_in; i++)
        if (c->x[i].dtype != SN_F32) return false;
    return true;
}

static bool binary_supports(const sn_kcall *c) {
    bc_plan p;
    const sn_shape *in[2] = {&c->x[0].shape, &c->x[1].shape};
    return c->n_in == 2 && all_f32(c) && bc_make(&p, &c->y.shape, 2, in);
}

static sn_status binary_common(sn_kcall *c, bin_op op) {
    bc_plan p;
    const sn_shape *in[2] = {&c->x[0].shape, &c->x[1].shape};
    SN_ASSERT(bc_make(&p, &c->y.shape, 2, in));
    bin_ctx x = {&p, op, c->out, c->in[0], c->in[1]};
    int64_t grain = op == B_DIV ? GRAIN_MATH : GRAIN_CHEAP;
    run_tasks(bin_task, &x, p.total, grain, p.total);
    return SN_OK;
}

/* a, b: f32 shapes broadcasting (NumPy) to out -> out */
static sn_status add_run(sn_kcall *c) { return binary_common(c, B_ADD); }
static sn_status sub_run(sn_kcall *c) { return binary_common(c, B_SUB); }
static sn_status mul_run(sn_kcall *c) { return binary_common(c, B_MUL); }
/* x [..., C], b [C] -> [..., C]: the row broadcast of add */
static sn_status bias_add_run(sn_kcall *c) { return binary_common(c, c->relu ? B_ADD_RELU : B_ADD); }
static sn_status div_run(sn_kcall *c) { return binary_common(c, B_DIV); }

/* x [shape broadcastable to out] -> out [node shape] */
static bool bcast_supports(const sn_kcall *c) {
    bc_plan p;
    const sn_shape *in[1] = {&c->x[0].shape};
    return c->n_in == 1 && all_f32(c) && bc_make(&p, &c->y.shape, 1, in);
}
static sn_status broadcast_to_run(sn_kcall *c) {
    bc_plan p;
    const sn_shape *in[1] = {&c->x[0].shape};
    SN_ASSERT(bc_make(&p, &c->y.shape, 1, in));
    bin_ctx x = {&p, B_FIRST, c->out, c->in[0], c->in[0]};
    run_tasks(bin_task, &x, p.total, GRAIN_CHEAP, p.total);
    return SN_OK;
}

/* ---- same-shape ops: split [0, n) ------------------------------------------------------ */

typedef struct flat_ctx {
    int op;
    int64_t n;
    void *o;
    const void *a, *b;
    const sn_kcall *c;
    double scale;
} flat_ctx;

static bool same_numel(const sn_kcall *c) {
    int64_t n = sn_shape_numel(&c->y.shape);
    for (int i = 0; i < c->n_in; i++)
        if (sn_shape_numel(&c->x[i].shape) != n) return false;
    return true;
}

static bool unary_supports(const sn_kcall *c) { return c->n_in == 1 && all_f32(c) && same_numel(c); }
static bool pair_supports(const sn_kcall *c) { return c->n_in == 2 && all_f32(c) && same_numel(c); }

static void unary_task(void *vctx, int ith, int nth) {
    const flat_ctx *x = vctx;
    int64_t lo, hi;
    sn_split_range(x->n, ith, nth, &lo, &hi);
    if (lo < hi) isa->unary(x->op, (float *)x->o + lo, (const float *)x->a + lo, hi - lo);
}

static sn_status unary_common(sn_kcall *c, un_op op) {
    flat_ctx x = {.op = op, .n = sn_shape_numel(&c->y.shape), .o = c->out, .a = c->in[0]};
    bool cheap = op == U_RELU || op == U_NEG;
    run_tasks(unary_task, &x, x.n, cheap ? GRAIN_CHEAP : GRAIN_MATH, x.n);
    return SN_OK;
}

/* x [any] f32 -> same shape */
static sn_status relu_run(sn_kcall *c) { return unary_common(c, U_RELU); }
static sn_status sigmoid_run(sn_kcall *c) { return unary_common(c, U_SIGMOID); }
static sn_status tanh_run(sn_kcall *c) { return unary_common(c, U_TANH); }
static sn_status exp_run(sn_kcall *c) { return unary_common(c, U_EXP); }
static sn_status log_run(sn_kcall *c) { return unary_common(c, U_LOG); }
static sn_status sqrt_run(sn_kcall *c) { return unary_common(c, U_SQRT); }
static sn_status neg_run(sn_kcall *c) { return unary_common(c, U_NEG); }

static void pair_task(void *vctx, int ith, int nth) {
    const flat_ctx *x = vctx;
    int64_t lo, hi;
    sn_split_range(x->n, ith, nth, &lo, &hi);
    if (lo < hi)
        isa->binary(x->op, (float *)x->o + lo, (const float *)x->a + lo, 1,
                    (const float *)x->b + lo, 1, hi - lo);
}

/* (x or y, dy) f32, same shape -> dx */
static sn_status grad_common(sn_kcall *c, bin_op op) {
    flat_ctx x = {.op = op, .n = sn_shape_numel(&c->y.shape), .o = c->out, .a = c->in[0],
                  .b = c->in[1]};
    run_tasks(pair_task, &x, x.n, GRAIN_CHEAP, x.n);
    return SN_OK;
}
static sn_status relu_grad_run(sn_kcall *c) { return grad_common(c, B_RELU_GRAD); }
static sn_status sigmoid_grad_run(sn_kcall *c) { return grad_common(c, B_SIGMOID_GRAD); }
static sn_status tanh_grad_run(sn_kcall *c) { return grad_common(c, B_TANH_GRAD); }

/* ---- cast ------------------------------------------------------------------------------- */

static bool cast_supports(const sn_kcall *c) {
    if (c->n_in != 1 || !same_numel(c)) return false;
    sn_dtype from = c->x[0].dtype, to = c->y.dtype;
    if (from == to) return true;
    if (to == SN_F32) return from == SN_BF16 || from == SN_U8 || from == SN_I32;
    return to == SN_BF16 && from == SN_F32;
}

static void cast_task(void *vctx, int ith, int nth) {
    const flat_ctx *x = vctx;
    sn_dtype from = x->c->x[0].dtype, to = x->c->y.dtype;
    int64_t lo, hi;
    sn_split_range(x->n, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    if (from == to) {
        size_t sz = sn_dtype_size(to);
        memmove((char *)x->o + lo * sz, (const char *)x->a + lo * sz, (size_t)(hi - lo) * sz);
    } else if (to == SN_BF16) {
        isa->to_bf16((uint16_t *)x->o + lo, (const float *)x->a + lo, hi - lo);
    } else if (from == SN_BF16) {
        isa->from_bf16((float *)x->o + lo, (const uint16_t *)x->a + lo, hi - lo);
    } else if (from == SN_U8) {
        const uint8_t *s = x->a;
        float *d = x->o;
        for (int64_t i = lo; i < hi; i++) d[i] = (float)s[i];
    } else {
        const int32_t *s = x->a;
        float *d = x->o;
        for (int64_t i = lo; i < hi; i++) d[i] = (float)s[i];
    }
}

/* the cast's f32 -> bf16 rounding on buffers without a call (flat_ctx: n, o, a) */
static void to_bf16_task(void *vctx, int ith, int nth) {
    const flat_ctx *x = vctx;
    int64_t lo, hi;
    sn_split_range(x->n, ith, nth, &lo, &hi);
    if (lo < hi) isa->to_bf16((uint16_t *)x->o + lo, (const float *)x->a + lo, hi - lo);
}

void sn_cpu_to_bf16(uint16_t *o, const float *x, int64_t n) {
    flat_ctx t = {.n = n, .o = o, .a = x};
    run_tasks(to_bf16_task, &t, n, GRAIN_CHEAP, n);
}

/* x [any] -> same shape in the node's dtype (f32 -> bf16 rounds to nearest even) */
static sn_status cast_run(sn_kcall *c) {
    flat_ctx x = {.n = sn_shape_numel(&c->y.shape), .o = c->out, .a = c->in[0], .c = c};
    run_tasks(cast_task, &x, x.n, GRAIN_CHEAP, x.n);
    return SN_OK;
}

/* ---- dropout ---------------------------------------------------------------------------- */

/* The mask must equal sn_dropout_keep bit for bit (the reference and the gradient node use
 * it); one Philox call yields the words of four consecutive elements, so it is drawn once per
 * aligned group of four, PG groups at a time lane-parallel (dropout_batch_body), the rest
 * through sn_philox, with the counters spelled exactly as sn_dropout_keep spells them (the
 * test compares the two). */
static void dropout_task(void *vctx, int ith, int nth) {
    const flat_ctx *x = vctx;
    const sn_attrs *at = x->c->attr;
    uint64_t seed = at->dropout.seed;
    int32_t mask_node = at->dropout.mask_node;
    float thresh = (float)at->dropout.rate;
    uint64_t hi_ctr = ((uint64_t)(uint32_t)mask_node << 40) |
                      ((uint64_t)x->c->step & ((1ull << 40) - 1));
    const float *in = x->a;
    float *out = x->o;
    int64_t lo, hi;
    /* Split on groups of four so that no group is drawn by two threads. */
    sn_split_range((x->n + 3) / 4, ith, nth, &lo, &hi);
    lo *= 4;
    hi = hi * 4 < x->n ? hi * 4 : x->n;
    int64_t g = lo;
    for (; g + 4 * PG <= hi; g += 4 * PG)
        isa->dropout(out + g, in + g, seed, hi_ctr, (uint64_t)g >> 2, thresh, x->scale);
    for (; g < hi; g += 4) {
        uint32_t r[4];
        sn_philox(seed, hi_ctr, (uint64_t)g >> 2, r);
        int64_t m = hi - g < 4 ? hi - g : 4;
        for (int64_t j = 0; j < m; j++) {
            bool keep = sn_u32_to_unit(r[j]) >= thresh;
            out[g + j] = keep ? (float)((double)in[g + j] * x->scale) : 0.0f;
        }
    }
}

/* x [any] f32 -> same shape: x / (1 - rate) where kept, else 0. DROPOUT_GRAD (dy) carries the
 * forward node's attributes, so the same function gives the gradient. */
static sn_status dropout_run(sn_kcall *c) {
    double rate = c->attr->dropout.rate;
    flat_ctx x = {.n = sn_shape_numel(&c->y.shape), .o = c->out, .a = c->in[0], .c = c,
                  .scale = rate < 1.0 ? 1.0 / (1.0 - rate) : 0.0};
    run_tasks(dropout_task, &x, x.n, GRAIN_DROPOUT, x.n);
    return SN_OK;
}

/* ---- registration ----------------------------------------------------------------------- */

#define EW_KERNEL(sup, fn) {.impl = "cpu", .supports = sup, .run = fn}
/* The binary and gradient loops may write over an input (bin_pattern: o is a or b exactly):
 * the planner gives them a dying input's buffer (overwrite_input: x for the binary ops, dy
 * for the activation gradients). */
#define EW_KERNEL_OVER(sup, fn, in) {.impl = "cpu", .supports = sup, .run = fn, .overwrite_input = in}
static sn_kernel k_add = EW_KERNEL_OVER(binary_supports, add_run, 1),
                 k_sub = EW_KERNEL_OVER(binary_supports, sub_run, 1),
                 k_mul = EW_KERNEL_OVER(binary_supports, mul_run, 1),
                 k_div = EW_KERNEL_OVER(binary_supports, div_run, 1),
                 k_bias_add = EW_KERNEL_OVER(binary_supports, bias_add_run, 1),
                 k_bcast = EW_KERNEL(bcast_supports, broadcast_to_run),
                 k_relu = EW_KERNEL(unary_supports, relu_run),
                 k_sigmoid = EW_KERNEL(unary_supports, sigmoid_run),
                 k_tanh = EW_KERNEL(unary_supports, tanh_run),
                 k_exp = EW_KERNEL(unary_supports, exp_run),
                 k_log = EW_KERNEL(unary_supports, log_run),
                 k_sqrt = EW_KERNEL(unary_supports, sqrt_run),
                 k_neg = EW_KERNEL(unary_supports, neg_run),
                 k_cast = EW_KERNEL(cast_supports, cast_run),
                 k_relu_grad = EW_KERNEL_OVER(pair_supports, relu_grad_run, 2),
                 k_sigmoid_grad = EW_KERNEL_OVER(pair_supports, sigmoid_grad_run, 2),
                 k_tanh_grad = EW_KERNEL_OVER(pair_supports, tanh_grad_run, 2),
                 k_dropout = EW_KERNEL(unary_supports, dropout_run),
                 k_add_l2 = EW_KERNEL_OVER(add_l2_supports, add_l2_run, 3 /* G */);

void sn_cpu_register_elementwise(sn_kernel_table *t) {
#ifdef SN_CPU_X86
    isa = pick_variant(&isa_generic, &isa_avx2, &isa_avx512);
    add_l2 = isa == &isa_avx512 ? add_l2_avx512 : isa == &isa_avx2 ? add_l2_avx2 : add_l2_generic;
    add_l2_inplace = isa == &isa_avx512 ? add_l2_inplace_avx512
                     : isa == &isa_avx2 ? add_l2_inplace_avx2 : add_l2_inplace_generic;
#endif
    sn_kernel *all[] = {&k_add,  &k_sub,  &k_mul,     &k_div,       &k_bias_add,
                        &k_bcast, &k_relu, &k_sigmoid, &k_tanh,      &k_exp,
                        &k_log,  &k_sqrt, &k_neg,     &k_cast,      &k_relu_grad,
                        &k_sigmoid_grad, &k_tanh_grad, &k_dropout, &k_add_l2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) all[i]->impl = isa->name;
    t->k[SN_OP_ADD] = &k_add;
    t->k[SN_OP_SUB] = &k_sub;
    t->k[SN_OP_MUL] = &k_mul;
    t->k[SN_OP_DIV] = &k_div;
    t->k[SN_OP_BIAS_ADD] = &k_bias_add;
    t->k[SN_OP_BROADCAST_TO] = &k_bcast;
    t->k[SN_OP_RELU] = &k_relu;
    t->k[SN_OP_SIGMOID] = &k_sigmoid;
    t->k[SN_OP_TANH] = &k_tanh;
    t->k[SN_OP_EXP] = &k_exp;
    t->k[SN_OP_LOG] = &k_log;
    t->k[SN_OP_SQRT] = &k_sqrt;
    t->k[SN_OP_NEG] = &k_neg;
    t->k[SN_OP_CAST] = &k_cast;
    t->k[SN_OP_RELU_GRAD] = &k_relu_grad;
    t->k[SN_OP_SIGMOID_GRAD] = &k_sigmoid_grad;
    t->k[SN_OP_TANH_GRAD] = &k_tanh_grad;
    t->k[SN_OP_DROPOUT] = &k_dropout;
    t->k[SN_OP_DROPOUT_GRAD] = &k_dropout;
    t->fused[SN_FUSED_ADD_L2] = &k_add_l2;
}
