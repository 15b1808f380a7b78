/* Internal: the batch-1 LSTM step with bf16 weights (generation): the kernel of
 * lstm_dense_step (graph/op_rnn.h) that the CPU table picks for a plan with bf16_compute at
 * batch 1 (nn/model/stepper.c builds that plan), and what bench/bench_lstm_step.c times.
 *
 * At batch 1 a step of a large LSTM is one matrix-vector product with the [U, 4U] recurrent
 * kernel, bound by reading that kernel (16 MB of f32 for U = 1024, every character). A bf16
 * copy, packed once in the order AVX512-BF16's VDPBF16PS reads it, halves the bytes. The
 * Dense layer on top (logits) stays f32: its kernel is [U, V], a few percent of the bytes,
 * and it sets the probabilities that are sampled.
 *
 * Results depend only on the weights and the inputs, never on the thread count: every unit
 * and every logit is computed by one thread, its sum over k in one fixed order. They may
 * differ in the last bits between CPUs (VDPBF16PS's rounding of its pair sum is the CPU's).
 * docs/kernels.md ("The batch-1 LSTM step in bf16") has the layout and the measurements. */
#ifndef SN_CPU_LSTM_STEP_H
#define SN_CPU_LSTM_STEP_H

#include "core/core.h"

typedef struct sn_lstm_step sn_lstm_step;

/* Whether this CPU runs the bf16 step (AVX-512 F/BW/VL + AVX512-BF16) and SN_CPU_ISA does
 * not ask for a narrower instruction set. */
bool sn_lstm_step_bf16_supported(void);

/* Packs R [U, 4U] (Keras gate order i, f, c, o) to bf16 and the Dense kernel Wd [U, V] and
 * bias bd [V] (NULL: none) to f32 panels. The caller owns *out (sn_lstm_step_free). Errors:
 * SN_ERR_UNSUPPORTED when the CPU lacks AVX512-BF16, SN_ERR_NOMEM. */
sn_status sn_lstm_step_new(const float *R, int64_t U, const float *Wd, const float *bd,
                           int64_t V, sn_lstm_step **out);
void sn_lstm_step_free(sn_lstm_step *s);

/* One step on the team of threads: xw [4U] the step's input projection plus bias, h [U] and
 * c [U] the carried state (replaced by the new one), logits [V] out. Uses scratch inside s:
 * one call at a time per s. */
void sn_lstm_step_run(sn_lstm_step *s, const float *xw, float *h, float *c, float *logits);

#endif
