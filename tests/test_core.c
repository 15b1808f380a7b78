/* Core: tensors and views, bf16 conversion, the counter-based RNG, arenas, CPU features,
 * error text. */
#include <omp.h>

#include "core/core.h"
#include "sn_test.h"

static void test_tensors(void) {
    sn_tensor *t = NULL, *v = NULL;
    sn_shape s = sn_shape_make(3, (int64_t)2, (int64_t)3, (int64_t)4);
    CHECK_OK(sn_tensor_new(&t, SN_F32, &s));
    if (!t) return;
    CHECK(sn_tensor_numel(t) == 24 && sn_tensor_is_contiguous(t), "numel %lld", (long long)sn_tensor_numel(t));
    const int64_t *st = sn_tensor_strides(t);
    CHECK(st[0] == 48 && st[1] == 16 && st[2] == 4, "strides %lld %lld %lld", (long long)st[0], (long long)st[1], (long long)st[2]);
    float *d = sn_tensor_data(t);
    for (int i = 0; i < 24; i++) d[i] = (float)i;
    /* A transposed view of the last two dims of batch 1: shape [4, 3], strides (4, 16) bytes. */
    sn_shape vs = sn_shape_make(2, (int64_t)4, (int64_t)3);
    int64_t vstr[2] = {4, 16};
    CHECK_OK(sn_tensor_view(&v, t, &vs, vstr, 48));
    if (v) {
        CHECK(!sn_tensor_is_contiguous(v), "transposed view reported contiguous");
        CHECK(sn_tensor_base(v) == t, "view base");
        /* element (i, j) of the view = t[1, j, i] = 12 + 4j + i */
        CHECK(sn_tensor_get(v, 1 * 3 + 2) == 12 + 8 + 1, "view element %g", sn_tensor_get(v, 5));
        sn_tensor_free(v);
    }
    /* Views that reach outside their source are refused with both shapes named. */
    CHECK_ERR(sn_tensor_view(&v, t, &vs, vstr, 64), SN_ERR_SHAPE, "reaches outside");
    sn_shape big = sn_shape_make(1, (int64_t)25);
    CHECK_ERR(sn_tensor_view(&v, t, &big, NULL, 0), SN_ERR_SHAPE, "[2, 3, 4]");
    CHECK_ERR(sn_tensor_view(&v, NULL, &big, NULL, 0), SN_ERR_INVALID, "NULL");
    sn_shape neg = sn_shape_make(1, (int64_t)-2);
    CHECK_ERR(sn_tensor_new(&v, SN_F32, &neg), SN_ERR_SHAPE, "negative");
    CHECK_ERR(sn_tensor_new(&v, (sn_dtype)42, &s), SN_ERR_INVALID, "dtype 42");
    CHECK_ERR(sn_tensor_new(NULL, SN_F32, &s), SN_ERR_INVALID, "out is NULL");
    sn_tensor_free(t);

    char buf[64];
    CHECK(!strcmp(sn_shape_str(&s, buf, sizeof buf), "[2, 3, 4]"), "shape str %s", buf);
    CHECK(sn_dtype_size(SN_BF16) == 2 && !strcmp(sn_dtype_name(SN_BF16), "bfloat16"), "bf16 size/name");
}

static void test_bf16(void) {
    CHECK(sn_f32_to_bf16(1.0f) == 0x3F80, "1.0 -> %#x", sn_f32_to_bf16(1.0f));
    /* 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties go to even (1.0). */
    CHECK(sn_f32_to_bf16(1.00390625f) == 0x3F80, "tie -> %#x", sn_f32_to_bf16(1.00390625f));
    /* 1 + 3 * 2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even): rounds up. */
    CHECK(sn_f32_to_bf16(1.01171875f) == 0x3F82, "tie up -> %#x", sn_f32_to_bf16(1.01171875f));
    CHECK(isnan(sn_bf16_to_f32(sn_f32_to_bf16(NAN))), "NaN must stay NaN");
    CHECK(sn_bf16_to_f32(sn_f32_to_bf16(-2.5f)) == -2.5f, "exact values round-trip");
}

/* Draws by index from many threads and from one must agree: the RNG is counter based. */
static void test_rng(void) {
    enum { N = 4096 };
    static uint32_t a[N], b[N];
    for (int i = 0; i < N; i++) {
        uint32_t r[4];
        sn_philox(7, 3, (uint64_t)i, r);
        a[i] = r[i & 3];
    }
#pragma omp parallel for num_threads(2)
    for (int i = N - 1; i >= 0; i--) {
        uint32_t r[4];
        sn_philox(7, 3, (uint64_t)i, r);
        b[i] = r[i & 3];
    }
    CHECK(!memcmp(a, b, sizeof a), "parallel draws differ from serial ones");
    sn_rng r1, r2, r3;
    sn_rng_init(&r1, 42, 0);
    sn_rng_init(&r2, 42, 0);
    sn_rng_init(&r3, 43, 0);
    int same = 1, differ = 0, inside = 1;
    double sum = 0, sum2 = 0;
    for (int i = 0; i < 10000; i++) {
        double u = sn_rng_uniform(&r1);
        same &= u == sn_rng_uniform(&r2);
        differ |= u != sn_rng_uniform(&r3);
        inside &= u >= 0 && u < 1;
        sum += u;
        sum2 += u * u;
    }
    CHECK(inside, "a uniform draw fell outside [0, 1)");
    CHECK(same, "same seed gave different numbers");
    CHECK(differ, "different seeds gave the same numbers");
    double mean = sum / 10000, var = sum2 / 10000 - mean * mean;
    CHECK(fabs(mean - 0.5) < 0.02 && fabs(var - 1.0 / 12) < 0.01, "uniform mean %g var %g", mean, var);
    int counts[5] = {0};
    for (int i = 0; i < 5000; i++) counts[sn_rng_below(&r1, 5)]++;
    for (int k = 0; k < 5; k++) CHECK(counts[k] > 850 && counts[k] < 1150, "below(5): %d hits of %d", counts[k], k);
}

static void test_arena_and_errors(void) {
    sn_arena *a = sn_arena_new(1024);
    CHECK(a != NULL, "arena");
    char *p = sn_arena_alloc(a, 10), *q = sn_arena_alloc(a, 5000);
    CHECK(p && q && ((uintptr_t)p % 64) == 0 && ((uintptr_t)q % 64) == 0, "aligned allocations");
    memset(q, 1, 5000);
    sn_arena_reset(a);
    CHECK(sn_arena_alloc(a, 100) != NULL, "alloc after reset");
    sn_arena_free(a);

    sn_errorf(SN_ERR_IO, "file '%s' is missing", "x.idx");
    sn_error_context(SN_ERR_IO, "loading weights");
    CHECK(!strcmp(sn_last_error(), "loading weights: file 'x.idx' is missing"), "context: %s", sn_last_error());
    /* a success adds nothing: the stepper wraps every character's plan run in a context */
    CHECK(sn_error_context(SN_OK, "stepper") == SN_OK, "context of SN_OK returns SN_OK");
    CHECK(!strcmp(sn_last_error(), "loading weights: file 'x.idx' is missing"),
          "context of SN_OK changed the message: %s", sn_last_error());
    CHECK(!strcmp(sn_status_name(SN_ERR_SHAPE), "SN_ERR_SHAPE"), "status name");
    const sn_cpu_features *f = sn_cpu();
    CHECK(f != NULL && (!f->avx512f || f->avx2), "an AVX-512 CPU also has AVX2");
    CHECK(sn_num_threads() >= 1, "threads %d", sn_num_threads());
}

int main(void) {
    test_tensors();
    test_bf16();
    test_rng();
    test_arena_and_errors();
    return sn_test_finish("test_core");
}
