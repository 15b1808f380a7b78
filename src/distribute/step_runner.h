/* The step runner a strategy provides to the layers above it (fit, src/nn/fit_distributed.c):
 * what one data-parallel step does between "the replicas' inputs are set" and "here are the
 * summed targets". The caller builds the replicas' graphs and plans (it knows the model);
 * the runner knows the strategy: it runs the local replicas' plans, sums the same targets of
 * every replica in replica order, and all-reduces that sum across workers (in buckets,
 * started during the backward pass when the strategy overlaps). Nothing here knows models,
 * losses or optimizers: layering (docs/design.md) puts the strategy below nn.
 *
 *     sn_step_runner *r;  sn_step_runner_new(s, g, n_tg, tg, &r);  // tg[rep][k]: f32 targets
 *     per execution:      sn_step_runner_prepare(r, plans);         // plans may be remade
 *     per step:           set each plans[rep]'s inputs and step;
 *                         sn_step_runner_run(r, plans, rows, step); // at once, summed
 *                         sn_step_runner_sum(r, k) ... ;            // global sums of target k
 *     sn_step_runner_free(r);
 *
 * Bitwise: the sums are replica 0 + replica 1 + ... per element, then MPI's sum over the
 * workers, whether the replicas ran at once or one after another and whether the all-reduce
 * overlapped the backward pass or followed it. */
#ifndef SN_DISTRIBUTE_STEP_RUNNER_H
#define SN_DISTRIBUTE_STEP_RUNNER_H

#include "core/core.h"
#include "sinter/dist.h"
#include "sinter/graph.h"

typedef struct sn_step_runner sn_step_runner;

/* The runner for the local replicas of s (sn_strategy_local_replicas) whose plans compute
 * n_tg f32 targets each: tg[r][k] is target k of replica r, of the same shape for every r.
 * tg is copied; g must outlive the runner. */
sn_status sn_step_runner_new(const sn_strategy *s, sn_graph *g, int n_tg, sn_node *const *tg,
                             sn_step_runner **out);
void sn_step_runner_free(sn_step_runner *r);

/* Before the steps of an execution, on every worker at the same point: the first call agrees
 * with the other workers on the gradient buckets (rank 0's order); every call finds, in the
 * given plans (which may have been remade), after which kernel call each bucket is complete.
 * plans[r] is replica r's plan. */
sn_status sn_step_runner_prepare(sn_step_runner *r, sn_plan *const *plans);
/* One step: runs plans[0 .. local replicas) once each, at once (one host thread per replica,
 * each on its device's share of the cores), sums target k over them into sum(r, k) and adds
 * `rows` (the examples of this worker's replicas) into the count; then all-reduces sums and
 * count across workers. The plans' inputs and steps are set by the caller. `step` (0-based)
 * names the step in errors. */
sn_status sn_step_runner_run(sn_step_runner *r, sn_plan *const *plans, float rows, int64_t step);
/* After a run: the global sum of target k (numel of its shape) and the global example count. */
const float *sn_step_runner_sum(const sn_step_runner *r, int k);
float sn_step_runner_count(const sn_step_runner *r);
/* What the all-reduce has done (multi-worker; zeros otherwise): pieces started, how many of
 * them during the backward pass, and seconds spent after the replicas' runs summing and
 * waiting (the communication the backward pass did not hide). Added to *buckets, *early,
 * *wait_s. */
void sn_step_runner_stats(const sn_step_runner *r, int64_t *buckets, int64_t *early,
                          double *wait_s);

/* Every worker ends with rank 0's bytes (with one worker: nothing to do). */
sn_status sn_strategy_broadcast(const sn_strategy *s, void *buf, size_t bytes);

#endif
