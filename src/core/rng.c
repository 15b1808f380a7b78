/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
 * Counter based: the numbers depend only on (key, counter), so any thread can draw element i
 * of a mask directly and the result is the same whatever the thread count. */
#include <math.h>

#include "core/core.h"
#include "core/philox.h"

void sn_philox(uint64_t key, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4]) {
    sn_philox4x32_10(key, counter_hi, counter_lo, out);
}

void sn_rng_init(sn_rng *r, uint64_t seed, uint64_t stream) {
    r->key = seed;
    r->counter = stream << 40; /* 2^40 draws of 4 words per stream before streams overlap */
    r->avail = 0;
}

uint32_t sn_rng_u32(sn_rng *r) {
    if (r->avail == 0) {
        sn_philox(r->key, 0x5eed, r->counter++, r->buf);
        r->avail = 4;
    }
    return r->buf[4 - r->avail--];
}

double sn_rng_uniform(sn_rng *r) {
    uint64_t hi = sn_rng_u32(r) >> 5, lo = sn_rng_u32(r) >> 6; /* 27 + 26 = 53 bits */
    return ((double)hi * 67108864.0 + (double)lo) * (1.0 / 9007199254740992.0);
}

double sn_rng_normal(sn_rng *r) {
    double u1 = sn_rng_uniform(r), u2 = sn_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t sn_rng_below(sn_rng *r, uint64_t n) {
    /* Rejection sampling: no modulo bias. */
    if (n <= 1) return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
        uint64_t x = ((uint64_t)sn_rng_u32(r) << 32) | sn_rng_u32(r);
        if (x < limit) return x % n;
    }
}
