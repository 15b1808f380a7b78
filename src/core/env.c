/* The environment switches of sinter: the one place they are read, and the one list of them
 * (docs/environment.md is checked against this table by tests/test_env_switches.sh). Each is
 * a debugging or tuning switch; the defaults are what users get, and no switch changes a
 * result beyond floating-point summation order except SN_KERNELS=ref (slower, in double) and
 * SN_BF16_COMPUTE (bfloat16 or float32 arithmetic under mixed bf16). */
#include <stdlib.h>

#include "core/core.h"

static const struct {
    const char *name, *doc;
} switches[SN_ENV_COUNT] = {
    [SN_ENV_NUM_THREADS] = {"SN_NUM_THREADS", "threads of the one OpenMP team (default: all "
                                              "cores; an MPI worker: its cores shared with the "
                                              "workers on them)"},
    [SN_ENV_KERNELS] = {"SN_KERNELS", "`ref`: run the portable reference kernels only"},
    [SN_ENV_CPU_ISA] = {"SN_CPU_ISA", "`avx512`, `avx2` or `generic`: the widest ISA our own "
                                      "kernels may use"},
    [SN_ENV_CONV_ALGO] = {"SN_CONV_ALGO", "`direct`: no Winograd convolution; `wino_f32`: "
                                          "oneDNN's f32 Winograd under mixed bf16 instead of "
                                          "sinter's bf16 one (A/B)"},
    [SN_ENV_FUSE] = {"SN_FUSE", "`0`: the planner fuses no ops"},
    [SN_ENV_RNN] = {"SN_RNN", "`loop`: the whole-layer LSTM/GRU ops on the loop's kernels "
                              "instead of oneDNN's primitives"},
    [SN_ENV_DIST_TIMEOUT] = {"SN_DIST_TIMEOUT", "seconds a collective waits for a peer before "
                                                "it fails (default 25)"},
    [SN_ENV_DIST_BUCKET_MB] = {"SN_DIST_BUCKET_MB", "gradient all-reduce bucket size in MiB "
                                                    "(default 1)"},
    [SN_ENV_DIST_OVERLAP] = {"SN_DIST_OVERLAP", "`0`: start no all-reduce bucket during the "
                                                "backward pass"},
    [SN_ENV_DIST_CONCURRENT] = {"SN_DIST_CONCURRENT", "`0`: run the local replicas one after "
                                                      "another"},
    [SN_ENV_PROFILE_CLOCK] = {"SN_PROFILE_CLOCK", "`thread`: a plan profile times each call in "
                                                  "the calling thread's CPU time, not wall time "
                                                  "(with SN_NUM_THREADS=1, per-op costs that a "
                                                  "busy machine does not inflate)"},
    [SN_ENV_BF16_COMPUTE] = {"SN_BF16_COMPUTE", "`on`: mixed bf16 computes in bfloat16 on every "
                                                "CPU with AVX512-BF16, even where that is "
                                                "slower than float32 (Intel without AMX); "
                                                "`off`: in float32 everywhere (A/B)"},
    [SN_ENV_BF16_STORE] = {"SN_BF16_STORE", "`0`: under mixed bf16 the planner stores no "
                                            "value between ops in bfloat16 (A/B); `exact`: "
                                            "only the values whose storage changes no result "
                                            "(not a convolution's output for "
                                            "BatchNormalization)"},
};

const char *sn_env_name(sn_env_var v) {
    return (unsigned)v < SN_ENV_COUNT ? switches[v].name : NULL;
}

const char *sn_env_doc(sn_env_var v) {
    return (unsigned)v < SN_ENV_COUNT ? switches[v].doc : NULL;
}

const char *sn_env(sn_env_var v) {
    const char *name = sn_env_name(v);
    const char *e = name ? getenv(name) : NULL;
    return e && *e ? e : NULL;
}

double sn_env_double(sn_env_var v, double dflt, double lo, double hi) {
    const char *e = sn_env(v);
    if (!e) return dflt;
    char *end;
    double x = strtod(e, &end);
    return (*end || !(x >= lo && x <= hi)) ? dflt : x;
}
