/* Internal to the training half of src/nn/ (compile.c, optimizer.c, losses.c, fit.c,
 * callbacks.c, history.c): optimizer update nodes, losses and metrics as graph pieces, the
 * history's builder. Tests may include it (tests/test_optimizers.c builds updates directly). */
#ifndef SN_NN_TRAIN_IMPL_H
#define SN_NN_TRAIN_IMPL_H

#include "nn/nn_impl.h"

/* SGD momentum; Adam m, v; RMSprop velocity (+ momentum). */
#define SN_OPTIM_MAX_SLOTS 2

/* SN_ERR_INVALID naming the field when an option is out of range (lr <= 0, beta outside
 * [0, 1), ...). */
sn_status sn_optimizer_validate(const sn_optimizer_opts *o);
const char *sn_optimizer_name(sn_optimizer_type t);
/* Creates the slot variables (non-trainable, zero, the variable's dtype and shape) of n
 * variables: slots[i * SN_OPTIM_MAX_SLOTS + s]. Unused entries are SN_NONE. */
sn_status sn_optimizer_create_slots(sn_graph *g, const sn_optimizer_opts *o, int n,
                                    const sn_node *vars, sn_node *slots);
/* Adds one apply_optimizer node per variable (var, grad, iterations, slots...) into
 * updates[0 .. n-1] and, after them, iterations += 1 into updates[n]: side effects run in
 * creation order, so every update of a step sees the same iteration count. */
sn_status sn_optimizer_apply(sn_graph *g, const sn_optimizer_opts *o, int n, const sn_node *vars,
                             const sn_node *grads, const sn_node *slots, sn_node iterations,
                             sn_node *updates);

/* Keras names: "sparse_categorical_crossentropy", ... */
const char *sn_loss_name(sn_loss_type t);
/* One output's loss as compile resolved it (sn_output_loss plus the compile-wide options). */
typedef struct sn_loss_spec {
    sn_loss_type type;
    bool from_logits;
    double weight; /* Keras's loss_weights entry */
    double delta;  /* Huber */
} sn_loss_spec;
/* Per-example loss [B] for model output `out` [B, ...] and labels y (int32 [B] for the sparse
 * loss, otherwise out's shape and f32). The caller checked the shapes; graph errors are
 * sticky in g. */
sn_node sn_loss_per_example(sn_graph *g, const sn_loss_spec *l, sn_node out, sn_node y);
/* One metric of one output, as compile resolved it. */
typedef struct sn_metric_spec {
    sn_metric_type type;
    int out;          /* the model output it reads */
    double threshold; /* binary accuracy */
    char name[96];    /* the name fit logs: "accuracy", or "<output layer>_accuracy" */
} sn_metric_spec;
/* Sum over the batch of the per-example metric value (1 for a right prediction), a scalar;
 * l is the loss of the metric's output (it resolves "accuracy", as Keras does). */
sn_node sn_metric_batch_sum(sn_graph *g, const sn_metric_spec *m, const sn_loss_spec *l,
                            sn_node out, sn_node y);
/* SN_ERR_INVALID when metric m is not defined for loss t. */
sn_status sn_metric_check(sn_metric_type m, sn_loss_type t);
/* The name Keras logs: "sparse_categorical_accuracy", "accuracy", ... */
const char *sn_metric_name(sn_metric_type m);
/* Labels [B] given for an output [B, 1] (binary / regression with one unit): whether loss t
 * takes labels of the output's shape (every loss but the sparse one). */
bool sn_loss_dense_labels(sn_loss_type t);

/* ---- the training state compile creates (m->train) ------------------------------------- */
/* What a cached plan computes. */
typedef enum sn_plan_kind { SN_PLAN_TRAIN = 0, SN_PLAN_EVAL, SN_PLAN_PREDICT } sn_plan_kind;

/* Under a strategy, one local replica of a training plan: its own plan on its device, which
 * reads rows [lo, lo + rows) of the global batch from its inputs x and y. */
typedef struct sn_replica_plan {
    sn_plan *plan;
    sn_node x, y, w; /* x == xs[0], y == ys[0]; w: its rows of the sample weights (SN_NONE
                      * unless weighted) */
    sn_node xs[SN_DATASET_MAX_COMPONENTS], ys[SN_DATASET_MAX_COMPONENTS]; /* every input, label */
    int64_t lo, rows;
} sn_replica_plan;

/* The model's inputs and outputs (sn_model_input_count's, inline: functional.c, which has
 * those, reaches compile.c through model.c). */
static inline int sn_train_n_inputs(const sn_model *m) { return m->fn ? m->fn->n_inputs : 1; }
static inline int sn_train_n_outputs(const sn_model *m) { return m->fn ? m->fn->n_outputs : 1; }

/* Inputs and labels a plan takes: a dataset's components. */
#define SN_FIT_MAX_IO SN_DATASET_MAX_COMPONENTS
#define SN_TRAIN_MAX_METRICS (SN_MAX_OUTPUTS * SN_MAX_METRICS)

/* One plan per (kind, batch shape): a last partial batch gets its own. */
typedef struct sn_cached_plan {
    sn_plan_kind kind;
    int64_t batch;
    sn_shape y_shape; /* labels with the batch dimension (unused for predict): output 0's */
    sn_dtype y_dtype;
    sn_plan *plan;     /* the plan (under a strategy: replica 0's, rep[0].plan) */
    sn_node x, y, out; /* the whole batch's inputs (SN_NONE under a strategy); out: predict's */
    /* A model of several inputs or outputs: every input, label and output (xs[0] == x,
     * ys[0] == y, outs[0] == out); n_y 0 for predict. */
    int n_x, n_y, n_out;
    sn_node xs[SN_FIT_MAX_IO], ys[SN_FIT_MAX_IO], outs[SN_FIT_MAX_IO];
    sn_shape y_shapes[SN_FIT_MAX_IO];
    sn_dtype y_dtypes[SN_FIT_MAX_IO];
    /* Keras's sample_weight: the plan takes a third fed tensor w [B] f32 that multiplies each
     * example's loss before the batch mean (the dataset's last component, after the labels) */
    bool weighted;
    sn_node w;
    int n_targets;
    sn_node *targets;
    int n_rep;         /* local replicas of a training plan under a strategy; 0 otherwise */
    sn_replica_plan *rep;
} sn_cached_plan;

/* Accumulators: [0] loss sum, [1 .. L] each output's loss sum (L = n_out_losses: the outputs
 * when there are several, else 0), [L + 1 .. L + M] metric sums, [L + M + 1] example count. */
#define SN_ACC_MAX (SN_TRAIN_MAX_METRICS + SN_MAX_OUTPUTS + 2)

struct sn_train_state {
    bool compiled; /* false: created by predict on an uncompiled model (plans only) */
    sn_compile_opts opts;
    int n_vars;      /* trainable variables at compile */
    sn_node *vars;
    sn_node *slots;  /* n_vars * SN_OPTIM_MAX_SLOTS */
    sn_node iterations;
    sn_node acc[2][SN_ACC_MAX]; /* [0] training, [1] evaluation; non-trainable f32 scalars */
    /* The losses and metrics compile resolved, per output (sn_compile_opts.outputs or the
     * one loss); n_acc = 1 + n_out_losses + n_met, the logged values. */
    int n_out, n_out_losses, n_met, n_acc;
    sn_loss_spec loss[SN_MAX_OUTPUTS];
    sn_metric_spec met[SN_TRAIN_MAX_METRICS];
    char out_loss_names[SN_MAX_OUTPUTS][96]; /* "<output layer>_loss" */
    char val_out_loss_names[SN_MAX_OUTPUTS][100];
    sn_cached_plan *plans;
    int n_plans, cap_plans;
    int64_t step;    /* training steps run so far: the plan step that keys dropout masks */
    char val_names[SN_ACC_MAX][104]; /* "val_loss", "val_<output>_loss", "val_<metric>" */
    struct sn_fit_progress *fit; /* while fit runs: where it is (checkpoints read it) */
    bool log_lr;     /* a learning-rate callback is attached: epoch logs get "learning_rate" */
};

/* The model's training state, created (uncompiled) when missing; NULL when out of memory. */
sn_train_state *sn_train_state_get(sn_model *m);
/* The cached plan of this kind for a batch (x [B, ...], labels of y_shape/y_dtype), built
 * on first use. */
sn_status sn_train_plan(sn_model *m, sn_plan_kind kind, int64_t batch, const sn_shape *y_shape,
                        sn_dtype y_dtype, sn_cached_plan **out);
/* The same with one label per output (n_y labels; 0 for predict). */
sn_status sn_train_plan_n(sn_model *m, sn_plan_kind kind, int64_t batch, int n_y,
                          const sn_shape *y_shapes, const sn_dtype *y_dtypes,
                          sn_cached_plan **out);
/* The same, with per-example weights when `weighted` (training and evaluation plans): the
 * batch function then gives them as y[n_y], [B] f32. */
sn_status sn_train_plan_w(sn_model *m, sn_plan_kind kind, int64_t batch, int n_y,
                          const sn_shape *y_shapes, const sn_dtype *y_dtypes, bool weighted,
                          sn_cached_plan **out);
/* The names of the values fit logs and evaluate returns, in order: "loss", each output's
 * loss, each metric (n_acc of them). */
const char *sn_train_log_name(const sn_train_state *t, int i);
/* The model's output shape without the batch dimension. */
sn_shape sn_model_out_shape(const sn_model *m);

/* The head of every built-in callback (callbacks.c, callback_*.c): the sn_callback first, so
 * sn_callback_free casts back and calls destroy (optional) before freeing the whole struct. */
typedef struct sn_cb_base {
    sn_callback cb;
    void (*destroy)(struct sn_cb_base *b);
} sn_cb_base;

/* History: fit appends one row of logs per epoch. */
sn_history *sn_history_new(void);
sn_status sn_history_append(sn_history *h, const sn_logs *logs);
/* For checkpoints: the names (pointers into h, at most SN_LOGS_MAX), the value of name k
 * after epoch e (NaN when absent), and replacing everything by n_epochs rows of n_names
 * values (row-major). */
int sn_history_names(const sn_history *h, const char **names);
double sn_history_value_at(const sn_history *h, int epoch, int k);
sn_status sn_history_restore(sn_history *h, int n_names, char *const *names, int n_epochs,
                             const double *values);

/* ---- where fit is, for checkpoints (fit.c keeps it, checkpoint.c saves and restores it) --- */
typedef struct sn_fit_progress {
    const sn_fit_opts *opts;
    sn_dataset *train;
    sn_history *history;
    int epoch;          /* the current epoch, 0-based */
    int64_t done;       /* training steps done in it */
    int64_t known;      /* steps per epoch learnt from the data, -1 before */
    bool epoch_done;    /* the epoch is complete (validation, history and callbacks ran) */
    bool stopped;       /* a callback stopped training */
    bool resumed;       /* restored mid-epoch: fit skips `done` batches instead of zeroing */
    sn_dataset_state train_state; /* the training data's counters before this epoch's reset */
} sn_fit_progress;

/* Writes the whole training state of m (which must be inside fit) to path, atomically. */
sn_status sn_fit_checkpoint_write(sn_model *m, const char *path);
/* Restores m and m->train->fit from path. SN_ERR_FORMAT: the file is torn or corrupt (the
 * caller may fall back); other errors (another model, optimizer) name the variable. Nothing
 * is changed unless everything matched. */
sn_status sn_fit_checkpoint_restore(sn_model *m, const char *path);
/* BackupAndRestore: at fit's start, resume from b (sets *resumed); after an execution or an
 * epoch, write a checkpoint when b says so and prune the folder. */
sn_status sn_fit_backup_resume(sn_model *m, const sn_backup_opts *b, bool *resumed);
sn_status sn_fit_backup_save(sn_model *m, const sn_backup_opts *b);
/* The log `name` (NULL when absent). */
const double *sn_logs_find(const sn_logs *l, const char *name);
/* Python's repr of a float (CSV logs, ModelCheckpoint file names): shortest round-trip text. */
void sn_repr_double(char *buf, size_t cap, double v);
/* Sets the learning rate every optimizer update node of m's graph reads (lr_schedule.c). */
void sn_train_set_lr(sn_model *m, double lr);

/* ---- running a cached plan (fit.c): one path with and without a strategy ---------------- */
/* The global batch of a step: next sets x[i] and y[j] to its inputs and labels, contiguous,
 * of cp's shapes (x[0] and y[0] for a model of one input and output: *x and *y), and for a
 * weighted plan y[n_y] to the sample weights [B] f32; they stay
 * valid until the next call. A non-SN_OK return ends the execution
 * before that step and is returned. */
typedef sn_status (*sn_batch_fn)(void *ctx, int64_t step, const void **x, const void **y);
/* Runs cp for up to `steps` steps in one entry of the executor per plan (steps_per_execution):
 * without a strategy cp's plan, under one every local replica's plan at once, each reading its
 * rows of the batch next gives (next NULL: the inputs keep what they hold). Each plan's step
 * advances by the steps run. */
sn_status sn_train_run(sn_model *m, sn_cached_plan *cp, int64_t steps, sn_batch_fn next,
                       void *ctx);
/* What the gradient all-reduce of m's strategy has done so far (multi-worker; zeros
 * otherwise): all-reduces started (one per bucket_bytes piece), how many of them before the
 * backward pass ended, and the seconds spent waiting for them after it. For tests and
 * measurements. */
void sn_dist_allreduce_stats(const sn_model *m, int64_t *buckets, int64_t *early,
                             double *wait_s);

#endif
