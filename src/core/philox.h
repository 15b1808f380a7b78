/* Philox-4x32-10, the one definition: the CPU (core/rng.c) and the CUDA kernels
 * (backend/cuda/cuda_kernels.cu) both include it, so dropout masks agree by construction.
 * Plain C99 with fixed-width integers; under nvcc it is compiled for host and device. */
#ifndef SN_CORE_PHILOX_H
#define SN_CORE_PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define SN_PHILOX_FN __host__ __device__ static inline
#else
#define SN_PHILOX_FN static inline
#endif

SN_PHILOX_FN void sn_philox4x32_10(uint64_t key, uint64_t counter_hi, uint64_t counter_lo,
                                   uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter_lo, c1 = (uint32_t)(counter_lo >> 32);
    uint32_t c2 = (uint32_t)counter_hi, c3 = (uint32_t)(counter_hi >> 32);
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

#undef SN_PHILOX_FN
#endif
