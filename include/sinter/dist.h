/* sinter — distribution strategies (tf.distribute in C).
 *
 * A strategy owns replicas: copies of the same computation on several devices, each given
 * its share of a global batch. Three kinds stand behind one interface:
 *
 *   one_device    one replica on one named device;
 *   mirrored      one replica per local logical device (sn_device_configure_cpu), in this
 *                 process: synchronous data parallel, variables mirrored (a copy per replica,
 *                 each updated with the same bits; the first is the model's own);
 *   multi_worker  one process per worker, started by mpirun, each with one replica (or
 *                 several local ones): data sharded per worker, gradients all-reduced over
 *                 MPI, rank 0 alone prints and writes files. Only in builds with MPI
 *                 (SN_HAVE_MPI); elsewhere sn_strategy_multi_worker is SN_ERR_UNSUPPORTED.
 *
 *     sn_device_configure_cpu(2);
 *     sn_strategy *s; sn_strategy_mirrored(0, NULL, &s);    // every logical device
 *     sn_per_replica *r; sn_strategy_run(s, my_fn, ctx, &r);
 *     sn_per_replica_print(r, stdout);                       // PerReplica:{ 0: ..., 1: ... }
 *     sn_tensor *sum; sn_strategy_reduce(s, SN_REDUCE_SUM, r, -1, &sum);
 *     sn_model_set_strategy(model, s);                       // fit now trains data parallel
 *
 * Training: with a strategy attached, fit splits every global batch B into per-replica
 * batches (B / replicas, the first B % replicas replicas one more), each replica computes
 * gradients of sum(per-example loss) / B (compute_average_loss), the gradients are summed in
 * replica order (then across workers by MPI_Allreduce) by all_reduce nodes inside each
 * replica's plan, and every replica applies the same optimizer update to its copy of the
 * variables; steps_per_execution steps run per entry of each replica's plan. Loss and metrics are global sums. Batch
 * normalization uses each replica's batch statistics and its moving averages take the mean
 * of the replicas' new values (TensorFlow's MirroredVariable with aggregation MEAN).
 * Dropout masks differ per replica (keyed by step * replicas + replica id). */
#ifndef SINTER_DIST_H
#define SINTER_DIST_H

#include <stdio.h>

#include "sinter/data.h"
#include "sinter/device.h"
#include "sinter/graph.h"
#include "sinter/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sn_strategy_kind {
    SN_STRATEGY_ONE_DEVICE = 0,
    SN_STRATEGY_MIRRORED,
    SN_STRATEGY_MULTI_WORKER,
} sn_strategy_kind;

typedef struct sn_strategy sn_strategy;

/* One replica on `device` ("cpu:0", full names too; NULL = the default device). */
sn_status sn_strategy_one_device(const char *device, sn_strategy **out);
/* One replica per listed device: n devices named in `devices`, or, with devices NULL, the
 * first n logical devices (n = 0: all of them). A device listed twice or unknown is an
 * error. */
sn_status sn_strategy_mirrored(int n, const char *const *devices, sn_strategy **out);
/* Multi-worker over MPI: initialises MPI when nobody has (MPI_Init_thread), takes the rank
 * and size of MPI_COMM_WORLD. local_replicas >= 1 replicas per worker on the first logical
 * devices (0 means 1). SN_ERR_UNSUPPORTED in builds without MPI. */
sn_status sn_strategy_multi_worker(int local_replicas, sn_strategy **out);
/* Frees the strategy (detach it from models first: sn_model_set_strategy(m, NULL)). */
void sn_strategy_free(sn_strategy *s);

sn_strategy_kind sn_strategy_get_kind(const sn_strategy *s);
const char *sn_strategy_name(const sn_strategy *s); /* "OneDeviceStrategy", ... */
/* num_replicas_in_sync: replicas over all workers. */
int sn_strategy_num_replicas(const sn_strategy *s);
/* Replicas in this process, and the device of local replica i. */
int sn_strategy_local_replicas(const sn_strategy *s);
const char *sn_strategy_replica_device(const sn_strategy *s, int local_replica);
/* This worker's rank and the number of workers (0 and 1 without MPI). */
int sn_strategy_worker_rank(const sn_strategy *s);
int sn_strategy_num_workers(const sn_strategy *s);
/* True on the worker that prints and writes files (rank 0). */
bool sn_strategy_is_chief(const sn_strategy *s);
/* Seconds a collective may wait for the other workers before it fails with SN_ERR_DIST
 * ("worker stopped responding"): default 25, or $SN_DIST_TIMEOUT. */
void sn_strategy_set_timeout(sn_strategy *s, double seconds);

/* ---- per-replica values and run ------------------------------------------------------- */
typedef struct sn_per_replica sn_per_replica;

/* What a replica function learns about its replica (tf.distribute.ReplicaContext). */
typedef struct sn_replica_context {
    int replica_id_in_sync_group; /* global replica id: rank * local replicas + local id */
    int local_replica;
    int num_replicas_in_sync;
    const char *device;           /* full name of the replica's device */
} sn_replica_context;

/* Computes one replica's value: *out receives a new tensor the per-replica value takes over
 * (or NULL for none). */
typedef sn_status (*sn_replica_fn)(void *ctx, const sn_replica_context *rc, sn_tensor **out);

/* strategy.run: calls fn once per local replica, in replica order, and collects the values
 * into *out (freed with sn_per_replica_free). A failing replica stops the run; its message
 * names the replica. */
sn_status sn_strategy_run(sn_strategy *s, sn_replica_fn fn, void *ctx, sn_per_replica **out);

/* A per-replica value from n tensors; takes ownership of them (also on failure). */
sn_status sn_per_replica_new(int n, sn_tensor **values, sn_per_replica **out);
int sn_per_replica_count(const sn_per_replica *v);
/* Local replica i's tensor (owned by v), NULL when out of range. */
sn_tensor *sn_per_replica_get(const sn_per_replica *v, int i);
/* TensorFlow's print: "PerReplica:{\n  0: tf.Tensor(...),\n  1: ...\n}" (one entry alone
 * prints as the bare tensor, as TensorFlow does for one replica). */
sn_status sn_per_replica_print(const sn_per_replica *v, FILE *out);
void sn_per_replica_free(sn_per_replica *v);

typedef enum sn_reduce_op { SN_REDUCE_SUM = 0, SN_REDUCE_MEAN } sn_reduce_op;
/* strategy.reduce(op, value, axis): axis -1 (None) combines the replicas elementwise (all
 * must have one shape); axis 0 also reduces dimension 0 of each value (MEAN divides by the
 * total length along it). Over all workers (MPI_Allreduce in double). Sums run in double, in
 * replica order. *out is a new f32 tensor (f64 for f64 inputs) the caller frees. */
sn_status sn_strategy_reduce(sn_strategy *s, sn_reduce_op op, const sn_per_replica *v, int axis,
                             sn_tensor **out);

/* ---- distributed datasets ------------------------------------------------------------- */
typedef struct sn_dist_dataset sn_dist_dataset;

/* experimental_distribute_dataset: `ds` (borrowed, must outlive the result) yields GLOBAL
 * batches; each is cut along dimension 0 into one slice per replica over all workers (the
 * slices of replica g in global order are rows [lo_g, hi_g) of sn_split_range), and this
 * worker keeps its local replicas' slices, so the replicas of all workers together see every
 * example of every global batch once. */
sn_status sn_strategy_distribute_dataset(sn_strategy *s, sn_dataset *ds, sn_dist_dataset **out);

/* tf.distribute.InputContext. */
typedef struct sn_input_context {
    int num_input_pipelines; /* workers */
    int input_pipeline_id;   /* this worker's rank */
    int num_replicas_in_sync;
} sn_input_context;
/* global_batch / num_replicas_in_sync; SN_ERR_INVALID when it does not divide evenly. */
sn_status sn_input_context_per_replica_batch(const sn_input_context *ic, int64_t global_batch,
                                             int64_t *out);
/* Makes this worker's dataset (shard it with sn_dataset_shard(&ds, ic->num_input_pipelines,
 * ic->input_pipeline_id)), batched per replica. The result is owned by the dist dataset. */
typedef sn_status (*sn_dataset_fn)(void *ctx, const sn_input_context *ic, sn_dataset **out);
/* distribute_datasets_from_function: fn is called once in this worker; each step gives its
 * local replicas consecutive batches of the worker's dataset. */
sn_status sn_strategy_distribute_datasets_from_function(sn_strategy *s, sn_dataset_fn fn,
                                                        void *ctx, sn_dist_dataset **out);
/* The next step's per-replica values, one per component (the caller frees each with
 * sn_per_replica_free). At the end *end is true and nothing is written. */
sn_status sn_dist_dataset_next(sn_dist_dataset *d, sn_per_replica **components, bool *end);
sn_status sn_dist_dataset_reset(sn_dist_dataset *d);
int sn_dist_dataset_num_components(const sn_dist_dataset *d);
void sn_dist_dataset_free(sn_dist_dataset *d);

/* ---- training under a strategy --------------------------------------------------------- */
struct sn_model;
/* Attaches s to the model (NULL detaches): from the next fit on, training steps run data
 * parallel over s's replicas (see the top of this header). The strategy must outlive the
 * model or be detached first. Evaluation and prediction run on each worker's first replica
 * device over the whole dataset given, so they report global values without a reduction. */
sn_status sn_model_set_strategy(struct sn_model *m, sn_strategy *s);
sn_strategy *sn_model_get_strategy(const struct sn_model *m);
/* Training steps run under the attached strategy since it was attached (or since the last
 * compile): a check that fit honoured it. */
int64_t sn_model_distributed_steps(const struct sn_model *m);

/* ---- a graph run as one plan per replica (traced programs: the Python package's
 * strategy.run inside a sinter.function) -------------------------------------------------
 * The caller builds one graph that holds every local replica's nodes (its inputs, its step)
 * over shared variables, adds the all-reduces and the end-of-step barrier below, makes one
 * plan per local replica from that graph (targets: that replica's nodes; device:
 * sn_strategy_replica_device) and runs them with sn_strategy_run_plans, as fit runs its step:
 * each replica on its own thread, N steps per call. */

/* Whether s's local replicas read one copy of the variables (several replicas, all on the
 * CPU): then only replica 0 applies updates (its all-reduce nodes give it the sums) and a
 * barrier (sn_strategy_barrier_node) must end every replica's step; otherwise every replica
 * receives the sums and updates its own copy (sn_plan_opts.private_vars for replicas 1..). */
bool sn_strategy_shares_variables(const sn_strategy *s);
/* Local replica `replica`'s all-reduce of x (f32): the sum over the replicas in replica order
 * (then over the workers), bitwise the same whatever the timing. Sharing variables, only
 * replica 0's node holds the sum; another replica's node is its x, handed to replica 0. The
 * replicas must create their all-reduces in one order (each meets the others at every one). */
sn_status sn_strategy_all_reduce_node(sn_strategy *s, sn_graph *g, sn_node x, int replica,
                                      sn_node *out);
/* The end of local replica `replica`'s step when the variables are shared: every replica
 * waits here until all arrived, so none reads a variable replica 0 is still updating. Create
 * it after every other node of the step; var is any variable of the step (left as it is). */
sn_status sn_strategy_barrier_node(sn_strategy *s, sn_graph *g, sn_node var, int replica,
                                   sn_node *out);
/* One input of one replica for one step: copied into plans[replica]'s input node. */
typedef struct sn_replica_input {
    int replica;
    sn_node node;
    const void *data;
    size_t bytes;
} sn_replica_input;
/* Gets step `step`'s inputs ready, on the calling thread, before any replica reads them: *in
 * (n entries) must stay valid until the next call or the end of the run. A non-SN_OK return
 * ends the run before that step on every replica and is returned. */
typedef sn_status (*sn_replica_next_fn)(void *ctx, int64_t step, const sn_replica_input **in,
                                        int *n);
/* Runs plans[r] (one per local replica) `steps` steps at once on the replica threads (made
 * once per strategy), next (NULL: the inputs keep what they hold) feeding every step. Returns
 * the first failure, naming the replica, or next's status. */
sn_status sn_strategy_run_plans(sn_strategy *s, sn_plan *const *plans, int64_t steps,
                                sn_replica_next_fn next, void *ctx);

/* ---- process lifetime (for programs, never called by the library itself) ---------------- */
/* Ends MPI cleanly (MPI_Finalize) when ok, or ends the whole job (MPI_Abort with code 1) after
 * a failure so that no worker waits forever on the others. Nothing without MPI or when MPI
 * was not started by sinter. */
void sn_dist_shutdown(bool ok);

#ifdef __cplusplus
}
#endif
#endif
