/* Internal core: error reporting, checked allocation, arenas, RNG, threads, CPU features.
 * Everything under src/ may include this; nothing here includes anything above core. */
#ifndef SN_CORE_H
#define SN_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "sinter/status.h"
#include "sinter/tensor.h"

/* Records a printf-style message for sn_last_error() and returns `code`. */
sn_status sn_errorf(sn_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current message: "while loading weights: <old message>". Returns code; with
 * SN_OK it does nothing (the message is left alone). */
sn_status sn_error_context(sn_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Every message is one line: sn_errorf and sn_error_context turn control characters
 * (newlines from a foreign library's text) into spaces. */

/* Copies a foreign library's text (jansson, libzip, HDF5, libmicrohttpd) into dst (cap > 0)
 * as one line a user can read: line breaks and tabs become one space, other control bytes
 * \xNN, a byte value written "0xNN" becomes "\xNN", and longer "0x..." numbers (memory
 * addresses) are dropped; surrounding spaces are trimmed. Returns dst. */
char *sn_foreign_text(char *dst, size_t cap, const char *src);

/* Propagate a failing status. */
#define SN_TRY(expr)                                                                           \
    do {                                                                                       \
        sn_status sn_try_s_ = (expr);                                                          \
        if (sn_try_s_ != SN_OK) return sn_try_s_;                                              \
    } while (0)

/* Broken internal invariant (never a user error): print file:line and abort. */
#define SN_ASSERT(cond)                                                                        \
    do {                                                                                       \
        if (!(cond)) sn_assert_fail(#cond, __FILE__, __LINE__);                               \
    } while (0)
_Noreturn void sn_assert_fail(const char *what, const char *file, int line);

/* Checked allocation: on failure record SN_ERR_NOMEM naming the size and return NULL. */
void *sn_malloc(size_t bytes);
void *sn_calloc(size_t n, size_t size);
void *sn_realloc(void *p, size_t bytes);
/* 64-byte aligned (cache line, AVX-512 vector); free with sn_free_aligned. */
void *sn_malloc_aligned(size_t bytes);
void sn_free_aligned(void *p);
char *sn_strdup(const char *s);

/* ---- arena: a bump allocator freed all at once ------------------------------------------ */
typedef struct sn_arena sn_arena;
sn_arena *sn_arena_new(size_t chunk_bytes);
void *sn_arena_alloc(sn_arena *a, size_t bytes); /* 64-byte aligned; NULL on OOM */
void sn_arena_reset(sn_arena *a);                /* keeps the first chunk */
void sn_arena_free(sn_arena *a);

/* ---- RNG: Philox4x32-10, counter based --------------------------------------------------- */
/* Four 32-bit words of randomness for (key, counter): the same inputs give the same words on
 * every thread and every run, so parallel work draws by index, not by sequence. */
void sn_philox(uint64_t key, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4]);
/* Uniform in [0, 1) from one 32-bit word (24 bits of mantissa). */
static inline float sn_u32_to_unit(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
/* A sequential stream over Philox for initialisers and shuffles. */
typedef struct sn_rng {
    uint64_t key, counter;
    uint32_t buf[4];
    int avail;
} sn_rng;
void sn_rng_init(sn_rng *r, uint64_t seed, uint64_t stream);
uint32_t sn_rng_u32(sn_rng *r);
double sn_rng_uniform(sn_rng *r);                 /* [0, 1) with 53 bits */
double sn_rng_normal(sn_rng *r);                  /* N(0, 1), Box-Muller */
uint64_t sn_rng_below(sn_rng *r, uint64_t n);     /* uniform integer in [0, n) */

/* ---- threads ----------------------------------------------------------------------------- */
/* One team of OpenMP threads serves every kernel, oneDNN and OpenBLAS (see
 * docs/dependencies.md). The count comes from SN_NUM_THREADS, else all cores. */
int sn_num_threads(void);
void sn_set_num_threads(int n);
/* Whether the count was chosen (SN_NUM_THREADS, sn_set_num_threads) rather than defaulted to
 * every core: an MPI worker sharing its cores with others shrinks only a default count. */
bool sn_num_threads_chosen(void);
/* Cores this process may run on (its affinity mask), whatever the thread count. */
int sn_num_cores(void);
/* Runs the calling thread's kernels (ours and oneDNN's) on n threads until sn_threads_leave:
 * a plan placed on a logical device uses that device's share of the cores. Returns what
 * sn_threads_leave needs to restore. */
int sn_threads_enter(int n);
void sn_threads_leave(int prev);
/* Runs fn(ctx, ith, nth) on nth threads of the team (nth <= sn_num_threads()) and waits. */
typedef void (*sn_task_fn)(void *ctx, int ith, int nth);
void sn_parallel(sn_task_fn fn, void *ctx, int nth);
/* Splits [0, n) into nth nearly equal parts; part ith is [*lo, *hi). */
static inline void sn_split_range(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t q = n / nth, r = n % nth;
    *lo = ith * q + (ith < r ? ith : r);
    *hi = *lo + q + (ith < r ? 1 : 0);
}

/* ---- CPU features ------------------------------------------------------------------------ */
typedef struct sn_cpu_features {
    int avx2, fma, avx512f, avx512bw, avx512vl, avx512_bf16, avx512_vnni, amx_bf16;
    int amd; /* vendor AuthenticAMD */
} sn_cpu_features;
const sn_cpu_features *sn_cpu(void);
/* Whether bfloat16 arithmetic is faster than float32 on this CPU: AVX512-BF16 on AMD (Zen
 * 4/5: VDPBF16PS at twice the FMA's rate) or with AMX; not on Intel CPUs whose AMX is absent
 * or hidden (Cooper Lake, or a VM that hides it), where VDPBF16PS runs at the FMA's rate on
 * one port and the conversions make bf16 products slower than f32 ones (docs/kernels.md,
 * "Mixed bf16 where bf16 is slower"). Under mixed bf16 (sn_kcall.bf16) the arithmetic-bound
 * kernels (matmul, convolutions, attention, the RNN primitives) compute in bf16 only where
 * this holds; the batch-1 LSTM step, bound by reading its weights, takes bf16 wherever
 * AVX512-BF16 is. SN_BF16_COMPUTE=on / off overrides (on still needs AVX512-BF16). Read at
 * each call. */
bool sn_cpu_bf16_pays(void);

/* ---- tensors: the internal layout (public API treats them as opaque) --------------------- */
struct sn_tensor {
    sn_dtype dtype;
    sn_shape shape;
    int64_t strides[SN_MAX_DIMS]; /* bytes */
    void *data;
    sn_tensor *base; /* the tensor viewed, or NULL when this one owns `data` */
    int owns;
};

/* Monotonic seconds, for progress bars and benchmarks. */
double sn_now(void);

/* ---- environment switches (env.c: the one place they are read and listed) --------------- */
typedef enum sn_env_var {
    SN_ENV_NUM_THREADS,
    SN_ENV_KERNELS,
    SN_ENV_CPU_ISA,
    SN_ENV_CONV_ALGO,
    SN_ENV_FUSE,
    SN_ENV_RNN,
    SN_ENV_DIST_TIMEOUT,
    SN_ENV_DIST_BUCKET_MB,
    SN_ENV_DIST_OVERLAP,
    SN_ENV_DIST_CONCURRENT,
    SN_ENV_PROFILE_CLOCK,
    SN_ENV_BF16_COMPUTE,
    SN_ENV_BF16_STORE,
    SN_ENV_COUNT
} sn_env_var;
/* The switch's value, NULL when unset or empty. Read at each call (cheap), so one process
 * (a test, an A/B benchmark) can compare both settings. */
const char *sn_env(sn_env_var v);
/* Its value as a number in [lo, hi]; dflt when unset, unparsable or out of range. */
double sn_env_double(sn_env_var v, double dflt, double lo, double hi);
const char *sn_env_name(sn_env_var v); /* "SN_NUM_THREADS"; NULL past the last */
const char *sn_env_doc(sn_env_var v);

#endif
