/* oneDNN's LSTM and LBR-GRU primitives (forward training + backward) over a whole
 * sequence, on our buffers in Keras's layouts: x [B, T, D], kernel w [D, 4U], recurrent
 * kernel r [U, 4U], bias [4U] (gate order i, f, c, o, which is oneDNN's i, f, c~, o), states
 * [B, U]. Internal to the CPU backend (backend/cpu/cpu_lstm_layer.c, the kernels of the graph
 * op lstm_layer), the benchmark (bench/bench_rnn.c) and the tests (tests/test_rnn_dnnl.c);
 * docs/kernels.md records the measurements against sinter's own loop (cpu_rnn.c).
 *
 * What a caller of the primitives has to get right (each was checked against the reference):
 *   - the initial states are always passed (zeros when the caller has none): oneDNN 2.6.3
 *     with `tnc` activations and no src_iter computes the recurrent-kernel gradient from the
 *     wrong step, sum_t h_t^T dgates_t instead of sum_t h_{t-1}^T dgates_t (dx, dW, db and the
 *     forward are right; with `ntc` it is right but runs the reference kernel, 10x slower);
 *   - the weight gradients are zeroed first (the backward primitive adds into them) in the
 *     primitive's own layout, then reordered back to ours;
 *   - the backward primitive gets the forward training primitive's workspace, source and
 *     destination memories, and the weights in the layout *it* chose (ldgoi for the backward
 *     pass, ldigo for the forward);
 *   - activations run in oneDNN's [T, B, C] (`tnc`) layout, transposed from and to ours.
 *
 * A handle holds one forward's saved state until the next forward: forward, then backward.
 * Not thread-safe; one handle per concurrent caller. Every entry point returns SN_OK or a
 * status with a message; builds without oneDNN return SN_ERR_UNSUPPORTED from _new. */
#ifndef SN_BACKEND_CPU_CPU_RNN_DNNL_H
#define SN_BACKEND_CPU_CPU_RNN_DNNL_H

#include <stdbool.h>
#include <stdint.h>

#include "sinter/status.h"

typedef struct sn_dnnl_rnn sn_dnnl_rnn;

/* The cells: Keras's LSTM, and Keras's GRU with reset_after=True, which is oneDNN's
 * linear-before-reset GRU (gates u, r, o = Keras's z, r, h; h_t = u h_{t-1} + (1 - u) o). Its
 * kernels are [D, 3U] / [U, 3U] and its bias [4U] in oneDNN's order: b_u, b_r (each the sum of
 * Keras's input and recurrent parts), b_o (Keras's input bias of h) and b_u' (the recurrent
 * bias of h, inside the reset gate's product). A GRU has no c: the c pointers are ignored. */
typedef enum sn_dnnl_cell { SN_DNNL_LSTM = 0, SN_DNNL_GRU_LBR } sn_dnnl_cell;

/* bf16: the primitives compute in bfloat16 (activations and weights converted from our f32
 * buffers by reorders; bias, cell state and weight gradients stay f32). SN_ERR_UNSUPPORTED
 * when oneDNN has no bf16 RNN for this CPU (it needs AVX512-BF16 or AVX512-core emulation).
 * y and dy have batch rows y_ld floats apart (T * U when dense), the final c and its gradient
 * (cT, dcT) rows c_ld apart (U when dense): the graph op lstm_layer with keep_c writes both
 * into one [B, T+1, U] buffer. */
sn_status sn_dnnl_rnn_new(sn_dnnl_rnn **out, sn_dnnl_cell cell, int64_t B, int64_t T, int64_t D,
                          int64_t U, bool bf16, int64_t y_ld, int64_t c_ld);
/* An LSTM on dense buffers. */
sn_status sn_dnnl_lstm_new(sn_dnnl_rnn **out, int64_t B, int64_t T, int64_t D, int64_t U,
                           bool bf16);
void sn_dnnl_rnn_free(sn_dnnl_rnn *l);
/* oneDNN's implementation names, "forward / backward" (for the benchmark's report). */
const char *sn_dnnl_rnn_impl(const sn_dnnl_rnn *l);

typedef struct sn_dnnl_rnn_fwd {
    const float *x, *w, *r, *b; /* [B,T,D], [D,GU], [U,GU], [4U]; G = 4 (LSTM) or 3 (GRU) */
    const float *h0, *c0;       /* [B, U]; NULL: zeros */
    float *y;                   /* [B, T, U] */
    float *hT, *cT;             /* [B, U]; NULL: not wanted */
} sn_dnnl_rnn_fwd;

typedef struct sn_dnnl_rnn_bwd {
    const float *dy;          /* [B, T, U]: gradient of y */
    const float *dhT, *dcT;   /* [B, U]: gradients of the final states; NULL: zeros */
    float *dx, *dw, *dr, *db; /* gradients of x, w, r, b (overwritten, not accumulated) */
    float *dh0, *dc0;         /* [B, U]: gradients of the initial states; NULL: not wanted */
} sn_dnnl_rnn_bwd;

/* The forward pass, keeping what the backward pass needs. The pointers of a are read during
 * the call only. */
sn_status sn_dnnl_rnn_forward(sn_dnnl_rnn *l, const sn_dnnl_rnn_fwd *a);
/* The backward pass of the last forward (whose w and r it reads again: same values). */
sn_status sn_dnnl_rnn_backward(sn_dnnl_rnn *l, const sn_dnnl_rnn_fwd *f,
                                const sn_dnnl_rnn_bwd *a);

#endif
