/* What a strategy provides to the training step of the layers above (nn/train/compile.c builds the
 * replicas' plans, nn/train/fit.c runs them):
 *
 *   - the collective that the all_reduce nodes of its replicas' plans name (graph op
 *     all_reduce, backend/op_desc.h): in process, the local replicas meet at a barrier and each
 *     sums every replica's buffer in replica order, so all end with the same bits whatever the
 *     thread timing; across workers, replica 0 then all-reduces that sum over MPI (rank order,
 *     deterministic) and the others copy its result. An NCCL collective would be a third
 *     table behind the same handle, with a GPU kernel row for the op;
 *   - the replica workers: one host thread per local replica but the first, made on the
 *     strategy's first run and kept until sn_strategy_free; each runs its replica's plan N steps
 *     per call (steps_per_execution) while the calling thread runs replica 0's.
 *
 * Nothing here knows models, losses or optimizers: layering (docs/design.md) puts the
 * strategy below nn. Bitwise: the sums are replica 0 + replica 1 + ... per element, then MPI's
 * sum over the workers, whether the replicas run at once or one after another
 * ($SN_DIST_CONCURRENT=0) and whether the all-reduce overlaps the backward pass or follows it
 * ($SN_DIST_OVERLAP=0). */
#ifndef SN_DISTRIBUTE_REPLICAS_H
#define SN_DISTRIBUTE_REPLICAS_H

#include "backend/op_desc.h"
#include "core/core.h"
#include "sinter/dist.h"
#include "sinter/graph.h"

/* The collective of s's local replicas (made on first use, freed with the strategy). */
sn_status sn_strategy_allreduce(sn_strategy *s, sn_allreduce_comm **out);
/* Whether gradient all-reduces are split in a start that the planner hoists into the backward
 * pass and a wait before the update: several workers and $SN_DIST_OVERLAP not 0. */
bool sn_strategy_overlaps(const sn_strategy *s);
/* Whether s's local replicas share one copy of the variables: several of them, all on host
 * memory (CPU devices). Then only replica 0 applies the update, its all-reduces go to replica
 * 0 alone (sn_all_reduce_to_first) and a barrier ends each step (sn_all_reduce_barrier); the
 * others read the graph's buffer instead of keeping a copy (weights and optimizer slots: the
 * memory that made 8 replicas of the guide's CNN take 16 GB). Replicas on GPUs keep their own.
   (sn_strategy_shares_variables is public: sinter/dist.h) */

/* How each step's inputs reach the replicas: next, on the calling thread once per step before
 * any replica reads that step's inputs, gets the step's global batch ready (a non-SN_OK
 * return ends the execution before that step on every replica and is returned); fill, on
 * replica r's thread, copies replica r's rows into its plan. The batch next made stays valid
 * until every replica has filled: next for step s + 1 runs only after that. */
typedef struct sn_replica_feed {
    sn_status (*next)(void *ctx, int64_t step);
    sn_status (*fill)(void *ctx, int replica, sn_plan *p, int64_t step);
    void *ctx;
} sn_replica_feed;

/* Runs plans[r] (local replica r of s; s NULL: one plan, no strategy) for `steps` steps, at
 * once: each replica's plan is entered once per call, and the all_reduce nodes inside the
 * plans synchronise the replicas. Replicas 1.. that keep their own copy of the variables
 * (not sn_strategy_shares_variables) first load the graph's into it (sn_plan_load_vars). feed NULL: the inputs keep what they hold. Returns the first
 * failure (the replica that failed first, by its message), or next's status when it ended
 * the execution; each plan's step advances by the steps run, the same for all. */
sn_status sn_replicas_run(sn_strategy *s, sn_plan *const *plans, int64_t steps,
                          const sn_replica_feed *feed);

/* What the cross-worker all-reduce has done (several workers; zeros otherwise): pieces of at
 * most bucket_bytes started, how many of them before the backward pass ended, and seconds
 * spent waiting for them (the communication the backward pass did not hide). Added to *buckets,
 * *early and *wait_s. */
void sn_strategy_allreduce_stats(const sn_strategy *s, int64_t *buckets, int64_t *early,
                                 double *wait_s);

/* Every worker ends with rank 0's bytes (with one worker: nothing to do). */
sn_status sn_strategy_broadcast(const sn_strategy *s, void *buf, size_t bytes);

#endif
