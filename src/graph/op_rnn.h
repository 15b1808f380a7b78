/* Internal builders of the recurrent ops (op_rnn.c), for the sequence layers of src/nn and the
 * tests. Each op runs the whole recurrence over a sequence whose input projection x @ W + b
 * the caller has already computed as one big matmul; the op's output is a workspace that holds
 * the outputs and the saved gate activations the gradient needs, from which the caller slices
 * what it returns.
 *
 *   LSTM: xw [B, T, 4U] (gate order i, f, c, o as Keras), r [U, 4U], h0 [B, U], c0 [B, U]
 *         -> ws [B, T, 6U], per (b, t): h | c | i | f | g | o   (activated gates, g = tanh)
 *   GRU (Keras reset_after=True): xw [B, T, 3U] (z, r, h, input bias included),
 *         r [U, 3U], rb [3U] (recurrent bias), h0 [B, U]
 *         -> ws [B, T, 5U], per (b, t): h | z | r | hh | rh   (rh = (h_prev @ r + rb)[h part])
 *   GRU (Keras reset_after=False): xw [B, T, 3U] (z, r, h, the whole bias included),
 *         r [U, 3U], h0 [B, U]; hh = tanh(xw_h + (r * h_prev) @ r_h)
 *         -> ws [B, T, 5U], per (b, t): h | z | r | hh | rh   (rh = r * h_prev)
 *
 * Gradients flow into xw, r (and rb); the initial states get none: Keras does not train them
 * either (they are zeros, or a stateful layer's carried state, which is a constant of the
 * step). Only the h and c slots of the workspace are outputs; a gradient reaching a gate slot
 * is ignored (nothing but these layers reads the workspace). */
#ifndef SN_GRAPH_OP_RNN_H
#define SN_GRAPH_OP_RNN_H

#include "graph/graph_impl.h"

sn_node sn_lstm_seq(sn_graph *g, sn_node xw, sn_node r, sn_node h0, sn_node c0);
sn_node sn_gru_seq(sn_graph *g, sn_node xw, sn_node r, sn_node rb, sn_node h0);
sn_node sn_gru_rb_seq(sn_graph *g, sn_node xw, sn_node r, sn_node h0);

/* One LSTM step and a linear Dense on top (generation, nn/model/stepper.c): xw [B, 4U] (the
 * step's input projection plus bias), r [U, 4U], h, c [B, U], wd [U, V], bd [V] -> [B, 2U + V],
 * per row h' | c' | h' @ wd + bd. One op so that a kernel can keep both weights in its own
 * layout (the batch-1 bf16 step, backend/cpu/cpu_lstm_step.c, which the kernel table picks
 * for a plan with bf16_compute); the reference computes it in double. No gradient. */
sn_node sn_lstm_dense_step(sn_graph *g, sn_node xw, sn_node r, sn_node h, sn_node c, sn_node wd,
                           sn_node bd);

/* The whole LSTM layer as one op, for backends whose kernel takes the input projection too
 * (oneDNN's RNN primitives): x [B, T, D], w [D, 4U], r [U, 4U], b [4U], h0, c0 [B, U] ->
 * y [B, T, U], the h sequence; with keep_c, [B, T+1, U] whose row T of each batch row is the
 * final c (a stateful or return_state layer reads it). Its gradient op gives x, w, r and b
 * theirs (the initial states none, as above) in one flat buffer the rule slices. The kernels
 * may keep the forward's saved state (oneDNN's workspace) for the gradient's call: the only
 * reader of what they keep is that op (op_def.fwd_state_input). */
sn_node sn_lstm_layer(sn_graph *g, sn_node x, sn_node w, sn_node r, sn_node b, sn_node h0,
                      sn_node c0, bool keep_c);
/* Of an lstm_layer's or gru_layer's output: the h sequence [B, T, U] (the output itself
 * unless keep_c), and the final h or c [B, U] (c only with keep_c). */
sn_node sn_rnn_layer_seq(sn_graph *g, sn_node y);
sn_node sn_rnn_layer_last_h(sn_graph *g, sn_node y);
sn_node sn_rnn_layer_last_c(sn_graph *g, sn_node y);

/* The whole GRU layer (Keras's reset_after=True, which is oneDNN's linear-before-reset GRU):
 * x [B, T, D], w [D, 3U], r [U, 3U], b [4U], h0 [B, U] -> y [B, T, U] (the final h is row
 * T-1). b is oneDNN's [b_z, b_r, b_h, b_h'], where Keras's bias [2, 3U] (input; recurrent)
 * gives b_z and b_r as the sums of its two rows' parts, b_h as the input part of h and b_h' as
 * the recurrent part, which sits inside the reset gate's product:
 *   z, r = sigmoid(x W_zr + h_{t-1} R_zr + b_zr), hh = tanh(x W_h + b_h + r (h_{t-1} R_h + b_h')),
 *   h_t = z h_{t-1} + (1 - z) hh. Its gradient op gives x, w, r and b theirs, like the LSTM's. */
sn_node sn_gru_layer(sn_graph *g, sn_node x, sn_node w, sn_node r, sn_node b, sn_node h0);
/* Keras's GRU bias [2, 3U] (input; recurrent) as gru_layer's [4U]: slices, one add, a concat,
 * so that autodiff maps the gradient back onto Keras's bias. */
sn_node sn_gru_layer_bias(sn_graph *g, sn_node keras_bias);

/* Slots of a workspace (SN_LSTM_H, ..., SN_GRU_WS) are in backend/op_desc.h: the kernels
 * read them too. */

/* ws [B, T, S*U] -> [B, T, U]: slot k of every step (the output sequence for k = h). */
sn_node sn_rnn_slot_seq(sn_graph *g, sn_node ws, int64_t units, int slot);
/* ws [B, T, S*U] -> [B, U]: slot k of the last step (the final h or c). */
sn_node sn_rnn_slot_last(sn_graph *g, sn_node ws, int64_t units, int slot);

#endif
