/* Internal to src/backend/ref/: the index arithmetic of a strided, padded window along one
 * axis, written once for the convolution kernels (ref_conv.c, ref_depthwise.c): which input a
 * tap reads (forward, filter gradient) and which output reads an input through a tap (data
 * gradient), so all three gathers walk the same taps. */
#ifndef SN_REF_CONV_TAPS_H
#define SN_REF_CONV_TAPS_H

#include <stdint.h>

/* The input index that output o reads through tap k (o * s + k - pad), or -1 when that falls
 * in the padding (outside [0, n_in)). */
static inline int64_t ref_tap_in(int64_t o, int64_t k, int64_t s, int64_t pad, int64_t n_in) {
    int64_t i = o * s + k - pad;
    return i >= 0 && i < n_in ? i : -1;
}

/* The output index o that reads input index i through tap k, with stride s and leading
 * padding pad (o * s + k - pad == i), or -1 when no output of the n_out does: i + pad - k is
 * negative, not a multiple of s, or past the last output. */
static inline int64_t ref_tap_out(int64_t i, int64_t k, int64_t s, int64_t pad, int64_t n_out) {
    int64_t t = i + pad - k;
    if (t < 0 || t % s) return -1;
    return t / s < n_out ? t / s : -1;
}

/* The three gathers' walks. g: a geometry with h, w, oh, ow, kh, kw, sh, sw, pt, pl. In each,
 * the `for`s on the derived indices run once or not at all (an `if` that declares its
 * variable), so a body's `continue` moves on to the next tap or output.
 *
 * Every tap (ky, kx) of output (oy, ox) that reads a real input cell (iy, ix): the forward
 * pass. */
#define REF_FOR_TAPS_OF_OUTPUT(g, oy, ox, ky, kx, iy, ix)                                       \
    for (int64_t ky = 0; ky < (g)->kh; ky++)                                                    \
        for (int64_t iy = ref_tap_in(oy, ky, (g)->sh, (g)->pt, (g)->h); iy >= 0; iy = -1)      \
            for (int64_t kx = 0; kx < (g)->kw; kx++)                                            \
                for (int64_t ix = ref_tap_in(ox, kx, (g)->sw, (g)->pl, (g)->w); ix >= 0; ix = -1)

/* Every output (oy, ox) whose tap (ky, kx) reads a real input cell (iy, ix): the filter
 * gradient. */
#define REF_FOR_OUTPUTS_OF_TAP(g, ky, kx, oy, ox, iy, ix)                                       \
    for (int64_t oy = 0; oy < (g)->oh; oy++)                                                    \
        for (int64_t iy = ref_tap_in(oy, ky, (g)->sh, (g)->pt, (g)->h); iy >= 0; iy = -1)      \
            for (int64_t ox = 0; ox < (g)->ow; ox++)                                            \
                for (int64_t ix = ref_tap_in(ox, kx, (g)->sw, (g)->pl, (g)->w); ix >= 0; ix = -1)

/* Every (ky, kx, oy, ox) such that output (oy, ox) reads input (iy, ix) through tap (ky, kx):
 * the data gradient. */
#define REF_FOR_TAPS_OF_INPUT(g, iy, ix, ky, kx, oy, ox)                                        \
    for (int64_t ky = 0; ky < (g)->kh; ky++)                                                    \
        for (int64_t oy = ref_tap_out(iy, ky, (g)->sh, (g)->pt, (g)->oh); oy >= 0; oy = -1)    \
            for (int64_t kx = 0; kx < (g)->kw; kx++)                                            \
                for (int64_t ox = ref_tap_out(ix, kx, (g)->sw, (g)->pl, (g)->ow); ox >= 0;      \
                     ox = -1)

#endif
