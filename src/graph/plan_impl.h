/* Internal to the planner and executor (graph/plan*.c, graph/exec.c): the plan itself.
 *
 *   plan.c          the planner: what the targets need, the order, storage, kernels, memory
 *   plan_fuse.c     the fusion pass the planner runs before it chooses kernels
 *   plan_bf16.c     under mixed bf16, the values stored in bfloat16 (after fusion)
 *   exec.c          the executor: runs a plan N times, feeds inputs, reads results, sn_eval
 *   plan_profile.c  per-call timing for `sinter bench --profile`
 *
 * A plan reaches its device only through its backend (backend/backend.h): arena and scratch
 * memory, kernels, the thread bracket and synchronize. */
#ifndef SN_GRAPH_PLAN_IMPL_H
#define SN_GRAPH_PLAN_IMPL_H

#include "backend/backend.h"
#include "graph/graph_impl.h"

enum { LOC_NONE = 0, LOC_ARENA, LOC_VAR, LOC_CONST, LOC_ALIAS };

typedef struct sn_loc {
    int kind;
    size_t offset;     /* LOC_ARENA: byte offset in the arena */
    sn_node alias;     /* LOC_ALIAS: the node whose buffer this one shares */
} sn_loc;

/* A call that covers several graph nodes (plan_fuse.c): which pattern, the inputs it reads
 * beyond its node's own, and the nodes it writes besides its own. */
typedef struct sn_fusion {
    int kind;                        /* sn_fused_kind; 0: the node's call is its op alone */
    int n_extra_in;
    sn_node extra_in[3];
    int n_out2;
    sn_node out2[SN_FUSED_MAX_OUT2];
} sn_fusion;

struct sn_plan {
    sn_graph *g;
    int n_calls;
    sn_kcall *calls;
    const sn_kernel **kern;
    sn_node *order;
    sn_loc *loc;          /* per graph node (only needed ones used) */
    unsigned char *needed; /* per graph node */
    unsigned char *is_target;
    unsigned char *fuse_relu; /* per graph node: a relu was fused into this bias_add */
    sn_fusion *fusion;        /* per graph node: the pattern its call computes (plan_fuse.c) */
    /* per graph node: its value is stored in bfloat16, not its graph dtype (plan_bf16.c);
     * NULL: no value is */
    unsigned char *bf16_store;
    void **ptr;           /* per graph node: resolved buffer */
    unsigned char *arena;
    size_t arena_bytes;   /* what this plan needs (its memory's block may be larger) */
    /* Per call: the scratch bytes its kernel asked for, and where in the arena they are (a
     * span live for that call alone, plan_arena.c) */
    size_t *scratch_need, *scratch_off;
    /* sn_plan_opts.memory: the arena lives in this shared block (plan_memory.c), and
     * memory_gen is its generation when the pointers were bound. */
    sn_plan_memory *memory;
    uint64_t memory_gen;
    const unsigned char *vars_seen;
    const sn_node_t *nodes_seen; /* g->nodes when the calls' attribute pointers were set */
    int64_t step;
    double *prof;         /* per call: seconds spent, when profiling is on */
    /* The arena's high-water mark (plan_memory): the call that raised it last (-1: the
     * inputs) and the storage roots live then (sn_plan_peak_value). */
    int peak_call;
    sn_node *peak_live;
    int n_peak_live;
    sn_node_hook hook;    /* called after each kernel call, when set */
    void *hook_ctx;
    sn_backend *backend;  /* the device it runs on: memory, threads, kernels */
    /* Where the device's memory is not host memory (a GPU): the kernels read device copies of
     * the variable buffer and the constants, and the host reads and fills host shadows of
     * inputs and targets (exec.c moves them; plan.c places them). */
    bool mirror;
    unsigned char *dvars;  /* device copy of g->vars */
    size_t dvars_bytes;
    unsigned char *dconst; /* device copies of the constants (LOC_CONST offsets) */
    void **host;           /* per graph node: host shadow of an input or arena target */
    bool running;          /* inside sn_plan_run (a node hook may read buffers) */
    /* sn_plan_opts.private_vars: the kernels read and write this plan's own copy of the
     * variables (pvars on a host-visible device, dvars on a mirrored one), which
     * sn_plan_load_vars refreshes from the graph's buffer; a run never writes it back. */
    bool private_vars;
    unsigned char *pvars;
    size_t pvars_bytes;
    int64_t step_mul, step_add; /* the kernels see step * step_mul + step_add (dropout keys) */
    int64_t runs;               /* sn_plan_run calls that ran steps (sn_plan_run_count) */
    uint64_t vars_loaded;       /* private_vars: g->vars_version its copy equals (+1; 0 none) */
    bool writes_vars;           /* it has side effects: its steps write the variables */
    uint64_t pvars_version;     /* private_vars: bumped when its copy is loaded or written */
    int n_nodes; /* graph size when planned */
    /* Recorded steps on a backend that can record them (exec.c): the recording, each call's
     * attributes as recorded ([n_calls][1 + SN_FUSED_MAX_OUT2]), whether the plan may be
     * recorded at all (no kernel reads the step counter or synchronises with the host), and
     * how often it was recorded and replayed (tests). */
    void *graph;
    sn_attrs *graph_attrs;
    bool no_capture;
    int64_t captures, replays;
};

static inline size_t sn_plan_node_bytes(const sn_node_t *n) {
    return (size_t)sn_shape_numel(&n->shape) * sn_dtype_size(n->dtype);
}

/* The node whose storage a node's value lives in (following views). */
static inline sn_node sn_plan_root(const sn_plan *p, sn_node n) {
    while (p->loc[n].kind == LOC_ALIAS) n = p->loc[n].alias;
    return n;
}

/* The dtype node n's value is stored in by this plan: its graph dtype, or bfloat16 where
 * plan_bf16.c chose that for its storage (every view of it too). */
static inline sn_dtype sn_plan_value_dtype(const sn_plan *p, sn_node n) {
    return p->bf16_store && p->bf16_store[sn_plan_root(p, n)] ? SN_BF16 : p->g->nodes[n].dtype;
}
static inline size_t sn_plan_value_bytes(const sn_plan *p, sn_node n) {
    return (size_t)sn_shape_numel(&p->g->nodes[n].shape) * sn_dtype_size(sn_plan_value_dtype(p, n));
}
static inline sn_tdesc sn_plan_value_desc(const sn_plan *p, sn_node n) {
    return (sn_tdesc){.dtype = sn_plan_value_dtype(p, n), .shape = p->g->nodes[n].shape};
}

/* Resolves every needed node's buffer and every call's pointers (plan.c); the executor calls
 * it again when the graph moved its variable buffer or node array (sn_plan_stale). Fails only
 * where a mirrored plan must grow its device copy of the variables. */
sn_status sn_plan_bind(sn_plan *p);

/* sn_plan_new on a given backend (plan.c); sn_plan_new resolves opts->device to one. */
sn_status sn_plan_new_on(sn_plan **out, sn_graph *g, int ntargets, const sn_node *targets,
                         const sn_plan_opts *opts, sn_backend *backend);
/* Shared plan memory (plan_memory.c): attach takes a reference and grows the block to the
 * plan's arena; rebind points the plan at the block as it is now; release drops a
 * reference. */
sn_status sn_plan_memory_attach(sn_plan *p, sn_plan_memory *m, size_t arena);
void sn_plan_memory_rebind(sn_plan *p);
void sn_plan_memory_release(sn_plan_memory *m);
uint64_t sn_plan_memory_gen(const sn_plan_memory *m);

static inline bool sn_plan_stale(const sn_plan *p) {
    return p->g->vars != p->vars_seen || p->g->nodes != p->nodes_seen ||
           (p->memory && p->memory_gen != sn_plan_memory_gen(p->memory)) ||
           (p->mirror && p->g->vars_bytes > p->dvars_bytes) ||
           (p->private_vars && !p->mirror && p->g->vars_bytes > p->pvars_bytes);
}

/* The fusion pass (plan_fuse.c): over the first n calls of p->order, marks in p->fuse_relu
 * each bias_add that absorbs the relu reading it, turns that relu into a view (LOC_ALIAS)
 * and removes it from the order; then, where the backend has a kernel for it, records in
 * p->fusion the larger patterns (kernel.h, sn_fused_kind), making the nodes they absorb views
 * or LOC_NONE and their extra outputs written by the pattern's call. Returns the new call
 * count. SN_FUSE=0: no fusion; SN_FUSE=relu: only the bias_add + relu one. */
sn_status sn_plan_fuse(sn_plan *p, int n, int *n_out);
/* Places every intermediate value of the plan in its arena (plan_arena.c): sets p->loc[].offset
 * for the LOC_ARENA values, p->scratch_off for the calls with scratch (p->scratch_need),
 * p->arena_bytes, and the record of the most-filled moment that sn_plan_peak_value reads.
 * reuse false: every value its own bytes (a call's scratch still lives for the call alone). */
sn_status sn_plan_arena(sn_plan *p, bool reuse);
/* Completes call k (its node's own fields already set) with p->fusion[k->id]: the pattern,
 * the extra inputs' and outputs' descriptions (plan_fuse.c). */
void sn_plan_fused_call(const sn_plan *p, sn_kcall *k);
/* Call k of node id as the planner makes it: op, attributes, the operands as this plan
 * stores them (sn_plan_value_desc) and the fusion (plan_fuse.c). Buffers, flags, stream and
 * state are the caller's to set. */
void sn_plan_describe_call(const sn_plan *p, sn_node id, sn_kcall *k);
/* Under mixed bf16 (bf16_compute), chooses the values stored in bfloat16 (plan_bf16.c):
 * fills p->bf16_store over the first n calls of p->order, after fusion and before the
 * kernels are prepared. SN_BF16_STORE=0: none. */
sn_status sn_plan_bf16_store(sn_plan *p, int n, bool bf16_compute);

#endif
