/* Run-time CPU feature detection (cpuid + xgetbv): kernels pick their ISA from this table, so
 * one binary runs everywhere and uses AVX-512 where the machine has it. */
#include <cpuid.h>
#include <string.h>

#include "core/core.h"

static sn_cpu_features sn_features;
static int sn_features_ready;

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

const sn_cpu_features *sn_cpu(void) {
    if (sn_features_ready) return &sn_features;
    sn_cpu_features f = {0};
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    /* vendor: ebx, edx, ecx spell "AuthenticAMD" */
    if (__get_cpuid(0, &a, &b, &c, &d))
        f.amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        int osxsave = (c >> 27) & 1;
        uint64_t xcr0 = osxsave ? xgetbv0() : 0;
        int ymm_ok = (xcr0 & 6) == 6, zmm_ok = (xcr0 & 0xe6) == 0xe6;
        f.fma = ((c >> 12) & 1) && ymm_ok;
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
            f.avx2 = ((b >> 5) & 1) && ymm_ok;
            f.avx512f = ((b >> 16) & 1) && zmm_ok;
            f.avx512bw = ((b >> 30) & 1) && zmm_ok;
            f.avx512vl = ((b >> 31) & 1) && zmm_ok;
            f.avx512_vnni = ((c >> 11) & 1) && zmm_ok;
            f.amx_bf16 = (d >> 22) & 1;
        }
        if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = ((a >> 5) & 1) && zmm_ok;
    }
#endif
    sn_features = f;
    sn_features_ready = 1;
    return &sn_features;
}

bool sn_cpu_bf16_pays(void) {
    const sn_cpu_features *f = sn_cpu();
    if (!f->avx512_bf16) return false;
    const char *e = sn_env(SN_ENV_BF16_COMPUTE);
    if (e && strcmp(e, "on") == 0) return true;
    if (e && strcmp(e, "off") == 0) return false;
    return f->amd || f->amx_bf16;
}
