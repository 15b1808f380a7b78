/* Keras's sequence layers: Embedding, LSTM and GRU (reset_after=True, Keras's default, and
 * reset_after=False), with Keras's variable names, shapes and gate order so that weights files
 * interchange with Keras.
 *
 * In fit/evaluate/predict the LSTM and the reset_after=True GRU are one whole-layer op each
 * (lstm_layer, gru_layer: graph/op_rnn.h), input projection included; the backend's kernel
 * table decides how it runs (oneDNN's RNN primitives, or the loop's kernels: one GEMM over
 * B * T rows for x @ kernel + bias, then the recurrence; backend/cpu/cpu_rnn_layer*.c). The
 * reset_after=False GRU, and sn_stepper (stepper.c, generation from carried states, whose
 * batch-1 step is tuned), build the loop's ops themselves: the projection as a matmul node,
 * the recurrence as one op whose workspace the outputs are sliced from. Initial states are
 * zeros.
 *
 * Decisions (docs/design.md): return_state is refused in a Sequential model (the next layer
 * takes one tensor; Keras's Sequential fails on it too) - the stepper hands out the states
 * instead. stateful=True takes the fixed batch as an option (Keras reads it from the Input):
 * the states are variables [batch, units] made at build, read as the initial states and
 * assigned the final ones through `updates` (the planner runs assignments after the step's
 * computation), in every plan - fit, evaluate and predict carry them as Keras 3 does. The
 * stepper (generation) keeps its own states and ignores these. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/op_rnn.h"
#include "nn/layers/layers_impl.h"

static void put(void *data, sn_dtype dt, int64_t i, double v) {
    if (dt == SN_F64) ((double *)data)[i] = v;
    else ((float *)data)[i] = (float)v;
}

/* ---- Embedding -------------------------------------------------------------------------- */
static sn_status embedding_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    if (in->ndim < 1 || in->ndim + 1 >= SN_MAX_DIMS)
        return sn_layer_shape_error(l, in, "(None, steps)");
    const sn_embedding_layer_opts *o = &l->embedding;
    sn_shape s = {.ndim = 2, .dim = {o->input_dim, o->output_dim}};
    sn_node e;
    SN_TRY(sn_layer_add_var(l, g, "embeddings", &s, true, &o->embeddings_initializer,
                            SN_INIT_RANDOM_UNIFORM, rng, &e));
    SN_TRY(sn_layer_add_regularizer(l, e, &o->embeddings_regularizer, "embeddings_regularizer"));
    l->out_shape = *in;
    l->out_shape.dim[l->out_shape.ndim++] = o->output_dim;
    return SN_OK;
}

/* Ids arrive as floats (models take f32 inputs; Keras casts them the same way) or int32. An id
 * outside [0, input_dim) fails the run with the gather kernel's message naming it. */
static sn_node embedding_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                                 sn_updates *u) {
    sn_node ids = sn_node_dtype(g, x) == SN_I32 ? x : sn_cast(g, x, SN_I32);
    return sn_gather(g, l->vars[0], ids);
}

static const sn_layer_vtable embedding_vt = {"Embedding", "embedding", embedding_build,
                                             embedding_forward, NULL};

bool sn_layer_is_embedding(const sn_layer *l) { return l && l->vt == &embedding_vt; }

sn_embedding_layer_opts sn_embedding_layer_defaults(int64_t input_dim, int64_t output_dim) {
    return (sn_embedding_layer_opts){.input_dim = input_dim, .output_dim = output_dim};
}

sn_layer *sn_layer_embedding_ex(const sn_embedding_layer_opts *o) {
    if (!o) {
        sn_errorf(SN_ERR_INVALID, "Embedding: options are NULL");
        return NULL;
    }
    if (o->input_dim <= 0 || o->output_dim <= 0 || o->input_dim > (1 << 24)) {
        sn_errorf(SN_ERR_INVALID, "Embedding: input_dim %lld and output_dim %lld, expected "
                  "positive sizes (input_dim <= 2^24, the ids exact in float)",
                  (long long)o->input_dim, (long long)o->output_dim);
        return NULL;
    }
    if (sn_check_initializer("Embedding", "embeddings_initializer",
                             &o->embeddings_initializer) != SN_OK ||
        sn_check_regularizer("Embedding", "embeddings_regularizer",
                             &o->embeddings_regularizer) != SN_OK)
        return NULL;
    sn_layer *l = sn_layer_alloc(&embedding_vt);
    if (l) l->embedding = *o;
    return l;
}

sn_layer *sn_layer_embedding(int64_t input_dim, int64_t output_dim) {
    sn_embedding_layer_opts o = sn_embedding_layer_defaults(input_dim, output_dim);
    return sn_layer_embedding_ex(&o);
}

/* ---- LSTM, GRU ---------------------------------------------------------------------------- */
static bool is_gru(const sn_layer *l);

/* GRU with reset_after=True: bias [2, 3U] (input | recurrent), the recurrent bias inside the
 * reset gate's product; reset_after=False: bias [3U], all of it on the input projection. */
static bool two_biases(const sn_layer *l) { return is_gru(l) && l->rnn.reset_after; }

static sn_status rnn_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    if (in->ndim != 2) return sn_layer_shape_error(l, in, "(None, steps, features)");
    const sn_rnn_layer_opts *o = &l->rnn;
    /* checked here, not in the constructor: a .keras reader learns it from the Input later */
    if (o->stateful && o->batch_size < 1)
        return sn_errorf(SN_ERR_INVALID, "layer '%s' (%s): stateful=True needs a fixed batch "
                         "size, got batch_size %lld (Keras: Input(batch_size=...); sn_stepper "
                         "runs any model statefully for generation)", l->name, l->vt->class_name,
                         (long long)o->batch_size);
    int64_t D = in->dim[1], U = o->units, G = (is_gru(l) ? 3 : 4) * U;
    sn_node k, r, b;
    sn_shape ks = {.ndim = 2, .dim = {D, G}}, rs = {.ndim = 2, .dim = {U, G}};
    SN_TRY(sn_layer_add_var(l, g, "kernel", &ks, true, &o->kernel_initializer,
                            SN_INIT_GLOROT_UNIFORM, rng, &k));
    SN_TRY(sn_layer_add_regularizer(l, k, &o->kernel_regularizer, "kernel_regularizer"));
    SN_TRY(sn_layer_add_var(l, g, "recurrent_kernel", &rs, true, &o->recurrent_initializer,
                            SN_INIT_ORTHOGONAL, rng, &r));
    SN_TRY(sn_layer_add_regularizer(l, r, &o->recurrent_regularizer, "recurrent_regularizer"));
    if (o->use_bias) {
        sn_shape bs = two_biases(l) ? (sn_shape){.ndim = 2, .dim = {2, G}}
                                : (sn_shape){.ndim = 1, .dim = {G}};
        SN_TRY(sn_layer_add_var(l, g, "bias", &bs, true, &o->bias_initializer, SN_INIT_ZEROS,
                                rng, &b));
        /* Keras's unit_forget_bias: the forget gate's part of the bias starts at 1 */
        if (!is_gru(l) && o->unit_forget_bias) {
            void *d = sn_variable_data(g, b);
            for (int64_t j = U; j < 2 * U; j++) put(d, l->dtype, j, 1.0);
        }
        SN_TRY(sn_layer_add_regularizer(l, b, &o->bias_regularizer, "bias_regularizer"));
    }
    l->out_shape = o->return_sequences ? (sn_shape){.ndim = 2, .dim = {in->dim[0], U}}
                                       : (sn_shape){.ndim = 1, .dim = {U}};
    l->n_carried = 0;
    if (o->stateful) {
        static const char *const names[2] = {"state_h", "state_c"};
        sn_shape ss = {.ndim = 2, .dim = {o->batch_size, U}};
        for (int i = 0; i < sn_layer_state_count(l); i++) {
            char nm[256];
            snprintf(nm, sizeof nm, "%s/%s", l->name, names[i]);
            l->carried[i] = sn_variable(g, nm, l->dtype, &ss, false);
            if (l->carried[i] == SN_NONE) return sn_graph_status(g);
            l->n_carried++;
        }
    }
    return SN_OK;
}

void sn_model_reset_states(sn_model *m) {
    for (int i = 0; m && i < m->n_layers; i++) {
        sn_layer *l = m->layers[i];
        for (int k = 0; k < l->n_carried; k++) {
            sn_shape s = sn_node_shape(m->g, l->carried[k]);
            memset(sn_variable_data(m->g, l->carried[k]), 0,
                   (size_t)sn_shape_numel(&s) * sn_dtype_size(l->dtype));
        }
    }
}

int sn_layer_state_count(const sn_layer *l) {
    if (l->vt->build != rnn_build) return 0;
    return is_gru(l) ? 1 : 2;
}

/* x [B, T, D] -> x @ kernel (+ input bias) [B, T, G*U] as one GEMM over B * T rows. */
sn_node sn_rnn_input_projection(sn_layer *l, sn_graph *g, sn_node x) {
    sn_shape xs = sn_node_shape(g, x);
    int64_t B = xs.dim[0], T = xs.dim[1], D = xs.dim[2];
    sn_shape ks = sn_node_shape(g, l->vars[0]);
    sn_node x2 = sn_reshape(g, x, &(sn_shape){.ndim = 2, .dim = {B * T, D}});
    sn_node y = sn_matmul(g, x2, l->vars[0], false, false);
    if (l->rnn.use_bias) {
        sn_node b = l->vars[2];
        if (two_biases(l)) /* bias [2, 3U]: row 0 is the input bias */
            b = sn_reshape(g, sn_slice(g, b, (int64_t[]){0, 0}, (int64_t[]){1, ks.dim[1]}),
                           &(sn_shape){.ndim = 1, .dim = {ks.dim[1]}});
        y = sn_bias_add(g, y, b);
    }
    return sn_reshape(g, y, &(sn_shape){.ndim = 3, .dim = {B, T, ks.dim[1]}});
}

sn_node sn_rnn_forward_states(sn_layer *l, sn_graph *g, sn_node x, const sn_node *state_in,
                              sn_node *state_out) {
    return sn_rnn_forward_projected(l, g, sn_rnn_input_projection(l, g, x), state_in, state_out);
}

/* Zeros of this shape in the layer's dtype (a missing bias, the initial states). */
static sn_node zeros(sn_layer *l, sn_graph *g, sn_shape shape) {
    return sn_broadcast_to(g, sn_reshape(g, sn_scalar(g, l->dtype, 0.0), &(sn_shape){0}), &shape);
}

sn_node sn_rnn_forward_projected(sn_layer *l, sn_graph *g, sn_node xw, const sn_node *state_in,
                                 sn_node *state_out) {
    int64_t U = l->rnn.units;
    sn_node ws, out;
    if (is_gru(l) && !l->rnn.reset_after) {
        ws = sn_gru_rb_seq(g, xw, l->vars[1], state_in[0]);
        if (state_out) state_out[0] = sn_rnn_slot_last(g, ws, U, SN_GRU_H);
        out = l->rnn.return_sequences ? sn_rnn_slot_seq(g, ws, U, SN_GRU_H)
                                      : sn_rnn_slot_last(g, ws, U, SN_GRU_H);
    } else if (is_gru(l)) {
        sn_node rb;
        if (l->rnn.use_bias)
            rb = sn_reshape(g, sn_slice(g, l->vars[2], (int64_t[]){1, 0}, (int64_t[]){1, 3 * U}),
                            &(sn_shape){.ndim = 1, .dim = {3 * U}});
        else
            rb = zeros(l, g, (sn_shape){.ndim = 1, .dim = {3 * U}});
        ws = sn_gru_seq(g, xw, l->vars[1], rb, state_in[0]);
        if (state_out) state_out[0] = sn_rnn_slot_last(g, ws, U, SN_GRU_H);
        out = l->rnn.return_sequences ? sn_rnn_slot_seq(g, ws, U, SN_GRU_H)
                                      : sn_rnn_slot_last(g, ws, U, SN_GRU_H);
    } else {
        ws = sn_lstm_seq(g, xw, l->vars[1], state_in[0], state_in[1]);
        if (state_out) {
            state_out[0] = sn_rnn_slot_last(g, ws, U, SN_LSTM_H);
            state_out[1] = sn_rnn_slot_last(g, ws, U, SN_LSTM_C);
        }
        out = l->rnn.return_sequences ? sn_rnn_slot_seq(g, ws, U, SN_LSTM_H)
                                      : sn_rnn_slot_last(g, ws, U, SN_LSTM_H);
    }
    return out;
}

/* Whether a recurrent layer's forward in fit/evaluate/predict is a whole-layer op: always for
 * the LSTM and the reset_after=True GRU. Which kernel runs it (oneDNN's primitives, the loop's
 * kernels, cuDNN) is the backend's choice, not the layer's (backend/cpu/cpu_rnn_layer*.c).
 * Keras's reset_after=False GRU has no whole-layer op: it is the loop's gru_reset_before op. */
static bool whole_layer(const sn_layer *l) { return !(is_gru(l) && !l->rnn.reset_after); }

/* The layer as one lstm_layer / gru_layer op; the final states (stateful) are rows of its
 * output (the LSTM keeps its c for them). */
static sn_node whole_layer_forward(sn_layer *l, sn_graph *g, sn_node x, const sn_node *state_in,
                                   sn_node *state_out) {
    sn_shape bias4 = {.ndim = 1, .dim = {4 * l->rnn.units}}; /* both ops take a [4U] bias */
    sn_node y, no_bias = l->rnn.use_bias ? SN_NONE : zeros(l, g, bias4);
    if (is_gru(l)) {
        sn_node b = l->rnn.use_bias ? sn_gru_layer_bias(g, l->vars[2]) : no_bias;
        y = sn_gru_layer(g, x, l->vars[0], l->vars[1], b, state_in[0]);
        if (state_out) state_out[0] = sn_rnn_layer_last_h(g, y);
    } else {
        sn_node b = l->rnn.use_bias ? l->vars[2] : no_bias;
        y = sn_lstm_layer(g, x, l->vars[0], l->vars[1], b, state_in[0], state_in[1],
                          state_out != NULL);
        if (state_out) {
            state_out[0] = sn_rnn_layer_last_h(g, y);
            state_out[1] = sn_rnn_layer_last_c(g, y);
        }
    }
    return l->rnn.return_sequences ? sn_rnn_layer_seq(g, y) : sn_rnn_layer_last_h(g, y);
}

/* fit/evaluate/predict's forward from these states (the stepper calls sn_rnn_forward_*). */
static sn_node layer_forward(sn_layer *l, sn_graph *g, sn_node x, const sn_node *state_in,
                             sn_node *state_out) {
    if (whole_layer(l)) return whole_layer_forward(l, g, x, state_in, state_out);
    return sn_rnn_forward_states(l, g, x, state_in, state_out);
}

/* From the carried states, which get the final ones once the step has run. Without `updates`
 * (a caller that runs the forward pass once, outside fit/evaluate/predict) they are read only. */
static sn_node stateful_forward(sn_layer *l, sn_graph *g, sn_node x, sn_updates *u) {
    sn_shape xs = sn_node_shape(g, x);
    if (xs.dim[0] != l->rnn.batch_size)
        return sn_graph_fail(g, SN_ERR_SHAPE, "layer '%s' (%s) is stateful with batch size %lld, "
                             "got a batch of %lld (a stateful layer needs every batch of that "
                             "size: drop the remainder)", l->name, l->vt->class_name,
                             (long long)l->rnn.batch_size, (long long)xs.dim[0]);
    sn_node fin[2] = {SN_NONE, SN_NONE};
    sn_node y = layer_forward(l, g, x, l->carried, fin);
    for (int k = 0; u && y != SN_NONE && k < l->n_carried; k++) {
        sn_node a = sn_assign(g, l->carried[k], fin[k]);
        if (a == SN_NONE) return SN_NONE;
        if (sn_updates_push(u, a) != SN_OK)
            return sn_graph_fail(g, SN_ERR_NOMEM, "layer '%s': %s", l->name, sn_last_error());
    }
    return y;
}

static sn_node zero_state_forward(sn_layer *l, sn_graph *g, sn_node x) {
    sn_shape xs = sn_node_shape(g, x);
    sn_node zero = zeros(l, g, (sn_shape){.ndim = 2, .dim = {xs.dim[0], l->rnn.units}});
    sn_node st[2] = {zero, zero};
    return layer_forward(l, g, x, st, NULL);
}

/* The layer's forward with return_sequences set to `seq` for this call only (masks and
 * go_backwards, at the end of this file, need the whole sequence to pick from). */
sn_node sn_rnn_run_zero(sn_layer *l, sn_graph *g, sn_node x, bool seq) {
    bool rs = l->rnn.return_sequences;
    l->rnn.return_sequences = seq;
    sn_node y = zero_state_forward(l, g, x);
    l->rnn.return_sequences = rs;
    return y;
}

/* From zero states, as Keras's get_initial_state (or the carried ones: stateful). */
static sn_node rnn_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    bool masked = l->has_mask || l->rnn.go_backwards;
    if (l->n_carried > 0 && masked)
        return sn_graph_fail(g, SN_ERR_UNSUPPORTED, "layer '%s' (%s): stateful=True with a mask "
                             "or go_backwards is not implemented", l->name, l->vt->class_name);
    if (l->n_carried > 0) return stateful_forward(l, g, x, u);
    if (masked)
        return sn_rnn_forward_masked(l, g, x, l->has_mask ? l->mask : SN_NONE,
                                     l->rnn.go_backwards, true, l->rnn.zero_output_for_mask);
    return zero_state_forward(l, g, x);
}

static const sn_layer_vtable lstm_vt = {"LSTM", "lstm", rnn_build, rnn_forward, NULL};
static const sn_layer_vtable gru_vt = {"GRU", "gru", rnn_build, rnn_forward, NULL};

static bool is_gru(const sn_layer *l) { return l->vt == &gru_vt; }

bool sn_layer_is_rnn(const sn_layer *l) { return l && (l->vt == &gru_vt || l->vt == &lstm_vt); }

sn_rnn_layer_opts sn_lstm_layer_defaults(int64_t units) {
    return (sn_rnn_layer_opts){.units = units, .activation = SN_ACT_TANH,
                               .recurrent_activation = SN_ACT_SIGMOID, .use_bias = true,
                               .unit_forget_bias = true, .reset_after = true};
}

sn_rnn_layer_opts sn_gru_layer_defaults(int64_t units) { return sn_lstm_layer_defaults(units); }

static sn_layer *rnn_new(const sn_layer_vtable *vt, const sn_rnn_layer_opts *o) {
    const char *cls = vt->class_name;
    if (!o) {
        sn_errorf(SN_ERR_INVALID, "%s: options are NULL", cls);
        return NULL;
    }
    if (o->units <= 0) {
        sn_errorf(SN_ERR_INVALID, "%s: units is %lld, expected > 0", cls, (long long)o->units);
        return NULL;
    }
    if (o->activation != SN_ACT_TANH || o->recurrent_activation != SN_ACT_SIGMOID) {
        sn_errorf(SN_ERR_UNSUPPORTED, "%s: activation '%s' and recurrent_activation '%s': only "
                  "Keras's defaults 'tanh' and 'sigmoid' are implemented", cls,
                  sn_activation_name(o->activation), sn_activation_name(o->recurrent_activation));
        return NULL;
    }
    if (o->return_state) {
        sn_errorf(SN_ERR_UNSUPPORTED, "%s: return_state=True gives several outputs, which a "
                  "Sequential model cannot pass on; use sn_stepper for the states", cls);
        return NULL;
    }
    if (o->batch_size < 0) {
        sn_errorf(SN_ERR_INVALID, "%s: batch_size is %lld, expected >= 0", cls,
                  (long long)o->batch_size);
        return NULL;
    }
    if (sn_check_initializer(cls, "kernel_initializer", &o->kernel_initializer) != SN_OK ||
        sn_check_initializer(cls, "recurrent_initializer", &o->recurrent_initializer) != SN_OK ||
        sn_check_initializer(cls, "bias_initializer", &o->bias_initializer) != SN_OK ||
        sn_check_regularizer(cls, "kernel_regularizer", &o->kernel_regularizer) != SN_OK ||
        sn_check_regularizer(cls, "recurrent_regularizer", &o->recurrent_regularizer) != SN_OK ||
        sn_check_regularizer(cls, "bias_regularizer", &o->bias_regularizer) != SN_OK)
        return NULL;
    sn_layer *l = sn_layer_alloc(vt);
    if (l) l->rnn = *o;
    return l;
}

sn_layer *sn_layer_lstm_ex(const sn_rnn_layer_opts *o) { return rnn_new(&lstm_vt, o); }
sn_layer *sn_layer_gru_ex(const sn_rnn_layer_opts *o) { return rnn_new(&gru_vt, o); }

sn_layer *sn_layer_lstm(int64_t units, bool return_sequences) {
    sn_rnn_layer_opts o = sn_lstm_layer_defaults(units);
    o.return_sequences = return_sequences;
    return sn_layer_lstm_ex(&o);
}

sn_layer *sn_layer_gru(int64_t units, bool return_sequences) {
    sn_rnn_layer_opts o = sn_gru_layer_defaults(units);
    o.return_sequences = return_sequences;
    return sn_layer_gru_ex(&o);
}

/* ---- masks and go_backwards ----------------------------------------------------------------
 * Keras's masks for sequences: Embedding(mask_zero=True) marks id 0 as padding, and the
 * LSTM/GRU/Bidirectional after it skip the masked steps as Keras's rnn loop does: a masked
 * step keeps the previous state and output (the initial ones: zeros), so return_sequences=False
 * gives the last unmasked step's output; zero_output_for_mask (set by Bidirectional when it
 * returns sequences) outputs zero at masked steps instead.
 *
 * How, without a new kernel: skipping masked steps is the same as running the unmasked layer
 * over each row's unmasked steps moved to the front, in order (the masked ones, zeros, after
 * them, where their outputs are never read), then reading output t from compacted position
 * count(t) - 1, where count(t) is how many unmasked steps there are up to t (none: zero, the
 * initial output). Both moves are batched matmuls with one-hot [B, T, T] matrices built from
 * the mask by exact float arithmetic (a 0/1 matrix times x is exact), so the recurrence keeps
 * its whole-layer kernels and every gradient is an existing op's. Reading backwards
 * (go_backwards, Bidirectional's backward half) counts from the end instead. The cost is
 * O(B T^2 D) in the moves, small next to the recurrence for the text lengths this serves;
 * a kernel that skips steps would remove it. */

/* A constant of the layer's dtype from doubles. */
static sn_node dconst(sn_layer *l, sn_graph *g, const sn_shape *s, const double *v) {
    int64_t n = sn_shape_numel(s);
    if (l->dtype == SN_F64) return sn_const(g, SN_F64, s, v);
    float *f = sn_calloc((size_t)(n ? n : 1), sizeof *f);
    if (!f) return sn_graph_fail(g, SN_ERR_NOMEM, "layer '%s': mask constants", l->name);
    for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
    sn_node c = sn_const(g, l->dtype, s, f);
    free(f);
    return c;
}

/* [T, T]: tri[s][t] = 1 where step s counts towards t (s <= t forwards, s >= t backwards), or
 * the reversal J[s][t] = (s + t == T - 1). */
typedef enum { TRI_FWD, TRI_BWD, REVERSAL } square_kind;

static sn_node square(sn_layer *l, sn_graph *g, int64_t T, square_kind k) {
    double *v = sn_calloc((size_t)(T * T), sizeof *v);
    if (!v) return sn_graph_fail(g, SN_ERR_NOMEM, "layer '%s': mask constants", l->name);
    for (int64_t s = 0; s < T; s++)
        for (int64_t t = 0; t < T; t++)
            v[s * T + t] = k == TRI_FWD ? s <= t : k == TRI_BWD ? s >= t : s + t == T - 1;
    sn_node c = dconst(l, g, &(sn_shape){.ndim = 2, .dim = {T, T}}, v);
    free(v);
    return c;
}

/* 1, 2, ..., T in the given shape (numel T). */
static sn_node positions(sn_layer *l, sn_graph *g, sn_shape s) {
    int64_t T = sn_shape_numel(&s);
    double *v = sn_calloc((size_t)T, sizeof *v);
    if (!v) return sn_graph_fail(g, SN_ERR_NOMEM, "layer '%s': mask constants", l->name);
    for (int64_t i = 0; i < T; i++) v[i] = (double)(i + 1);
    sn_node c = dconst(l, g, &s, v);
    free(v);
    return c;
}

/* relu(1 - d^2): 1 where d == 0, else 0, for the integer-valued d here (exact in float). */
static sn_node is_zero(sn_layer *l, sn_graph *g, sn_node d) {
    sn_node one = sn_scalar(g, l->dtype, 1.0);
    return sn_relu(g, sn_sub(g, one, sn_mul(g, d, d)));
}

/* Reverses x [B, T, C] in time (J @ x). */
static sn_node flip_time(sn_layer *l, sn_graph *g, sn_node x) {
    sn_shape s = sn_node_shape(g, x);
    return sn_matmul(g, square(l, g, s.dim[1], REVERSAL), x, false, false);
}

sn_node sn_rnn_forward_masked(sn_layer *l, sn_graph *g, sn_node x, sn_node m, bool reverse,
                              bool keras_order, bool zero_out) {
    sn_shape xs = sn_node_shape(g, x);
    if (sn_graph_status(g) != SN_OK) return SN_NONE;
    int64_t B = xs.dim[0], T = xs.dim[1];
    bool seq = l->rnn.return_sequences;
    sn_node y;
    if (m == SN_NONE) {
        if (!reverse) return sn_rnn_run_zero(l, g, x, seq);
        y = sn_rnn_run_zero(l, g, flip_time(l, g, x), seq); /* Keras's order already */
        if (seq && !keras_order) y = flip_time(l, g, y);
        return y;
    }
    /* cnt[b, t]: unmasked steps up to t in reading order; E[b, p, t] = (cnt[b, t] == p + 1):
     * step t's output is compacted position p's; P = E * m moves unmasked step t to p. */
    sn_node cnt = sn_matmul(g, m, square(l, g, T, reverse ? TRI_BWD : TRI_FWD), false, false);
    sn_node c3 = sn_reshape(g, cnt, &(sn_shape){.ndim = 3, .dim = {B, 1, T}});
    sn_node E = is_zero(l, g, sn_sub(g, c3, positions(l, g, (sn_shape){.ndim = 2, .dim = {T, 1}})));
    sn_node m3 = sn_reshape(g, m, &(sn_shape){.ndim = 3, .dim = {B, 1, T}});
    sn_node P = sn_mul(g, E, m3);
    sn_node hs = sn_rnn_run_zero(l, g, sn_matmul(g, P, x, false, false), true);
    int64_t U = l->rnn.units;
    if (seq) {
        y = sn_matmul(g, zero_out ? P : E, hs, true, false); /* [B, T, U], time order */
        if (reverse && keras_order) y = flip_time(l, g, y);
        return y;
    }
    /* The last output: compacted position n - 1, n the row's unmasked steps (none: zeros). */
    int ax = 1;
    sn_node n = sn_reshape(g, sn_reduce_sum(g, m, 1, &ax, false),
                           &(sn_shape){.ndim = 3, .dim = {B, 1, 1}});
    sn_node sel = is_zero(l, g, sn_sub(g, n, positions(l, g, (sn_shape){.ndim = 2, .dim = {1, T}})));
    y = sn_reshape(g, sn_matmul(g, sel, hs, false, false), &(sn_shape){.ndim = 2, .dim = {B, U}});
    if (zero_out) { /* Keras: the last step's output, zero when that step is masked */
        int64_t t = reverse ? 0 : T - 1;
        y = sn_mul(g, y, sn_slice(g, m, (int64_t[]){0, t}, (int64_t[]){B, 1}));
    }
    return y;
}

