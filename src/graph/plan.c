/* The planner and executor.
 *
 * A plan is the list of nodes a set of targets needs, in creation order (a topological order)
 * with side effects moved to the end, each with its kernel chosen and prepared once. Every
 * intermediate value gets a place in one arena, assigned first-fit from liveness, so a step
 * allocates nothing; reshapes are views of their input's buffer; variables and constants are
 * read where they live. sn_plan_run executes the list N times in one call. */
#include <string.h>

#include "backend/backend.h"
#include "graph/graph_impl.h"

enum { LOC_NONE = 0, LOC_ARENA, LOC_VAR, LOC_CONST, LOC_ALIAS };

typedef struct sn_loc {
    int kind;
    size_t offset;     /* LOC_ARENA: byte offset in the arena */
    sn_node alias;     /* LOC_ALIAS: the node whose buffer this one shares */
} sn_loc;

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
    void **ptr;           /* per graph node: resolved buffer */
    unsigned char *arena;
    size_t arena_bytes;
    void *scratch;
    size_t scratch_bytes;
    const unsigned char *vars_seen;
    const sn_node_t *nodes_seen; /* g->nodes when the calls' node pointers were set */
    int64_t step;
    double *prof;         /* per call: seconds spent, when profiling is on */
    sn_node_hook hook;    /* called after each kernel call, when set */
    void *hook_ctx;
    sn_backend *backend;  /* the device it runs on: memory, threads, kernels */
    int n_nodes; /* graph size when planned */
};

sn_plan_opts sn_plan_opts_defaults(void) {
    return (sn_plan_opts){.device = NULL, .reuse_buffers = true};
}

static size_t node_bytes(const sn_node_t *n) {
    return (size_t)sn_shape_numel(&n->shape) * sn_dtype_size(n->dtype);
}

/* The node whose storage a node's value lives in (following reshape views). */
static sn_node root_of(const sn_plan *p, sn_node n) {
    while (p->loc[n].kind == LOC_ALIAS) n = p->loc[n].alias;
    return n;
}

/* Resolves every needed node's pointer; called at plan time and whenever the variable buffer
 * has moved (a variable was added after planning). */
static void bind(sn_plan *p) {
    sn_graph *g = p->g;
    for (int i = 0; i < p->n_nodes; i++) {
        if (!p->needed[i]) continue;
        sn_node r = root_of(p, i);
        const sn_loc *l = &p->loc[r];
        switch (l->kind) {
        case LOC_ARENA: p->ptr[i] = p->arena + l->offset; break;
        case LOC_VAR: p->ptr[i] = g->vars + g->nodes[r].var_offset; break;
        case LOC_CONST: p->ptr[i] = g->nodes[r].const_data; break;
        default: p->ptr[i] = NULL; break;
        }
    }
    for (int c = 0; c < p->n_calls; c++) {
        sn_kcall *k = &p->calls[c];
        const sn_node_t *nd = &g->nodes[k->id];
        /* The attributes pointer too: adding nodes to the graph after planning moves the array. */
        k->attr = &nd->attr;
        for (int j = 0; j < k->n_in; j++) k->in[j] = p->ptr[nd->in[j]];
        k->out = p->ptr[k->id];
        k->scratch = p->scratch;
    }
    p->vars_seen = g->vars;
    p->nodes_seen = g->nodes;
}

/* Whether the graph moved its variable buffer or node array since bind(). */
static bool stale(const sn_plan *p) {
    return p->g->vars != p->vars_seen || p->g->nodes != p->nodes_seen;
}

typedef struct block {
    size_t offset, size;
    int last_use; /* position in the order after which the block is free */
} block;

/* First-fit placement of [size] among live blocks (sorted by offset). */
static size_t place(block *live, int nlive, size_t size) {
    size_t at = 0;
    for (int i = 0; i < nlive; i++) {
        if (live[i].offset >= at + size) break;
        if (live[i].offset + live[i].size > at) at = live[i].offset + live[i].size;
    }
    return at;
}

static void insert_sorted(block *live, int *nlive, block b) {
    int i = *nlive;
    while (i > 0 && live[i - 1].offset > b.offset) {
        live[i] = live[i - 1];
        i--;
    }
    live[i] = b;
    (*nlive)++;
}

static sn_status plan_memory(sn_plan *p, bool reuse) {
    sn_graph *g = p->g;
    int nn = p->n_nodes, total = p->n_calls;
    int *last = sn_malloc(sizeof *last * (size_t)nn);
    block *live = sn_malloc(sizeof *live * (size_t)(nn + 1));
    if (!last || !live) {
        free(last);
        free(live);
        return SN_ERR_NOMEM;
    }
    for (int i = 0; i < nn; i++) last[i] = -1;
    /* Last use of each storage root, in execution positions; targets and inputs live for the
     * whole step (targets are read back after the run, inputs are filled before it). */
    for (int c = 0; c < total; c++) {
        const sn_node_t *nd = &g->nodes[p->order[c]];
        for (int j = 0; j < nd->n_in; j++) {
            sn_node r = root_of(p, nd->in[j]);
            if (last[r] < c) last[r] = c;
        }
    }
    for (int i = 0; i < nn; i++) {
        if (!p->needed[i]) continue;
        if (p->is_target[i] || g->nodes[i].op == SN_OP_INPUT || !reuse) last[root_of(p, i)] = total;
    }
    size_t peak = 0;
    int nlive = 0;
    /* Inputs first, at the bottom of the arena, alive throughout. */
    for (int i = 0; i < nn; i++) {
        if (!p->needed[i] || p->loc[i].kind != LOC_ARENA || g->nodes[i].op != SN_OP_INPUT) continue;
        size_t sz = (node_bytes(&g->nodes[i]) + 63) & ~(size_t)63;
        block b = {place(live, nlive, sz), sz, total};
        insert_sorted(live, &nlive, b);
        p->loc[i].offset = b.offset;
        if (b.offset + sz > peak) peak = b.offset + sz;
    }
    for (int c = 0; c < total; c++) {
        /* Free the blocks whose last reader ran before this position. */
        int w = 0;
        for (int i = 0; i < nlive; i++)
            if (live[i].last_use >= c) live[w++] = live[i];
        nlive = w;
        sn_node id = p->order[c];
        if (p->loc[id].kind != LOC_ARENA) continue;
        size_t sz = (node_bytes(&g->nodes[id]) + 63) & ~(size_t)63;
        int lu = last[id] < c ? c : last[id]; /* an unread value still needs its output slot */
        block b = {place(live, nlive, sz), sz, lu};
        insert_sorted(live, &nlive, b);
        p->loc[id].offset = b.offset;
        if (b.offset + sz > peak) peak = b.offset + sz;
    }
    free(last);
    free(live);
    p->arena_bytes = peak;
    p->arena = sn_backend_alloc(p->backend, peak); /* zero-filled */
    return p->arena ? SN_OK : SN_ERR_NOMEM;
}

void sn_plan_free(sn_plan *p) {
    if (!p) return;
    for (int c = 0; c < p->n_calls; c++)
        if (p->kern && p->kern[c] && p->kern[c]->release) p->kern[c]->release(&p->calls[c]);
    free(p->calls);
    free(p->kern);
    free(p->order);
    free(p->loc);
    free(p->needed);
    free(p->is_target);
    free(p->fuse_relu);
    free(p->ptr);
    free(p->prof);
    sn_backend_free(p->backend, p->arena);
    sn_backend_free(p->backend, p->scratch);
    free(p);
}

static sn_status plan_fail(sn_plan *p, sn_status s) {
    sn_plan_free(p);
    return s;
}

sn_status sn_plan_new(sn_plan **out, sn_graph *g, int ntargets, const sn_node *targets,
                      const sn_plan_opts *opts) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "plan: out is NULL");
    *out = NULL;
    if (!g) return sn_errorf(SN_ERR_INVALID, "plan: graph is NULL");
    if (g->status != SN_OK)
        return sn_errorf(g->status, "plan: the graph has an earlier error (%s)", sn_last_error());
    if (ntargets < 1 || !targets)
        return sn_errorf(SN_ERR_INVALID, "plan: needs at least one target, got %d", ntargets);
    sn_plan_opts o = opts ? *opts : sn_plan_opts_defaults();
    sn_backend *be;
    SN_TRY(sn_backend_find(o.device, &be));
    /* Variables, constants and the buffers the host reads or fills (sn_plan_buffer) are used
     * in place, so the plan needs memory the host can address. */
    if (!sn_backend_get_caps(be).host_visible)
        return sn_errorf(SN_ERR_UNSUPPORTED, "plan: device %s has memory the host cannot "
                         "address; plans there are not supported yet", sn_backend_name(be));
    for (int i = 0; i < ntargets; i++)
        if (targets[i] < 0 || targets[i] >= g->n_nodes)
            return sn_errorf(SN_ERR_INVALID, "plan: target %d (node %d) is not a node of this graph",
                             i, (int)targets[i]);

    sn_plan *p = sn_calloc(1, sizeof *p);
    if (!p) return SN_ERR_NOMEM;
    int nn = g->n_nodes;
    p->g = g;
    p->n_nodes = nn;
    p->backend = be;
    p->loc = sn_calloc((size_t)nn, sizeof *p->loc);
    p->needed = sn_calloc((size_t)nn, 1);
    p->is_target = sn_calloc((size_t)nn, 1);
    p->ptr = sn_calloc((size_t)nn, sizeof *p->ptr);
    p->order = sn_malloc(sizeof *p->order * (size_t)nn);
    if (!p->loc || !p->needed || !p->is_target || !p->ptr || !p->order)
        return plan_fail(p, SN_ERR_NOMEM);

    /* What the targets need: walk inputs backwards (creation order is topological). */
    for (int i = 0; i < ntargets; i++) p->needed[targets[i]] = p->is_target[targets[i]] = 1;
    for (int i = nn - 1; i >= 0; i--)
        if (p->needed[i])
            for (int j = 0; j < g->nodes[i].n_in; j++) p->needed[g->nodes[i].in[j]] = 1;

    /* Execution order: computing nodes in creation order, then side effects. */
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nn; i++) {
            const sn_node_t *nd = &g->nodes[i];
            if (!p->needed[i] || nd->op == SN_OP_INPUT || nd->op == SN_OP_VARIABLE ||
                nd->op == SN_OP_CONST)
                continue;
            bool se = (nd->flags & SN_NODE_SIDE_EFFECT) != 0;
            if (se != (pass == 1)) continue;
            if (nd->op == SN_OP_RESHAPE) continue; /* a view: no kernel runs */
            p->order[n++] = i;
        }
    p->n_calls = n;
    for (int i = 0; i < nn; i++) {
        const sn_node_t *nd = &g->nodes[i];
        if (!p->needed[i]) continue;
        if (!(nd->flags & SN_NODE_SIDE_EFFECT))
            for (int j = 0; j < nd->n_in; j++)
                if (g->nodes[nd->in[j]].flags & SN_NODE_SIDE_EFFECT)
                    return plan_fail(p, sn_errorf(SN_ERR_INVALID,
                        "plan: node %d (%s) reads the result of side effect %d (%s); side "
                        "effects run at the end of a step, so read the variable instead",
                        i, sn_ops[nd->op]->name, (int)nd->in[j],
                        sn_ops[g->nodes[nd->in[j]].op]->name));
        switch (nd->op) {
        case SN_OP_VARIABLE: p->loc[i].kind = LOC_VAR; break;
        case SN_OP_CONST: p->loc[i].kind = LOC_CONST; break;
        case SN_OP_RESHAPE: p->loc[i] = (sn_loc){.kind = LOC_ALIAS, .alias = nd->in[0]}; break;
        default:
            if (nd->flags & SN_NODE_SIDE_EFFECT) p->loc[i] = (sn_loc){.kind = LOC_ALIAS, .alias = nd->in[0]};
            else p->loc[i].kind = LOC_ARENA;
        }
    }

    /* Fusion: a relu whose input is a bias_add read by nothing else runs inside that bias_add
     * (one pass over the activation instead of two; relu's gradient reads relu's output, so
     * the pre-activation has no other reader). The relu becomes a view of the bias_add's
     * buffer. SN_FUSE=0 turns this off (debugging, tests). */
    unsigned char *fuse_relu = p->fuse_relu = sn_calloc((size_t)nn, 1);
    if (!fuse_relu) return plan_fail(p, SN_ERR_NOMEM);
    const char *fuse_env = getenv("SN_FUSE");
    if (!(fuse_env && !strcmp(fuse_env, "0"))) {
        int *readers = sn_calloc((size_t)nn, sizeof *readers);
        if (!readers) return plan_fail(p, SN_ERR_NOMEM);
        for (int i = 0; i < nn; i++)
            if (p->needed[i])
                for (int j = 0; j < g->nodes[i].n_in; j++) readers[g->nodes[i].in[j]]++;
        int w = 0;
        for (int c = 0; c < n; c++) {
            sn_node r = p->order[c];
            const sn_node_t *nd = &g->nodes[r];
            sn_node b = nd->n_in == 1 ? nd->in[0] : SN_NONE;
            if (nd->op == SN_OP_RELU && g->nodes[b].op == SN_OP_BIAS_ADD && readers[b] == 1 &&
                !p->is_target[b] && g->nodes[b].dtype == nd->dtype) {
                fuse_relu[b] = 1;
                p->loc[r] = (sn_loc){.kind = LOC_ALIAS, .alias = b};
                continue; /* no call of its own */
            }
            p->order[w++] = r;
        }
        free(readers);
        n = p->n_calls = w;
    }

    /* Kernels: choose and prepare each call once. */
    p->calls = sn_calloc((size_t)(n ? n : 1), sizeof *p->calls);
    p->kern = sn_calloc((size_t)(n ? n : 1), sizeof *p->kern);
    if (!p->calls || !p->kern) return plan_fail(p, SN_ERR_NOMEM);
    size_t scratch = 0;
    for (int c = 0; c < n; c++) {
        sn_node id = p->order[c];
        const sn_node_t *nd = &g->nodes[id];
        sn_kcall *k = &p->calls[c];
        k->op = nd->op;
        k->attr = &nd->attr;
        k->id = id;
        k->y = (sn_tdesc){.dtype = nd->dtype, .shape = nd->shape};
        k->n_in = nd->n_in;
        k->bf16 = o.bf16_compute;
        k->relu = fuse_relu[id];
        k->stream = sn_backend_stream(be);
        for (int j = 0; j < nd->n_in; j++) {
            const sn_node_t *x = &g->nodes[nd->in[j]];
            k->x[j] = (sn_tdesc){.dtype = x->dtype, .shape = x->shape};
        }
        const sn_kernel *kern = sn_backend_select(be, k);
        char b[128];
        if (!kern)
            return plan_fail(p, sn_errorf(SN_ERR_UNSUPPORTED,
                "plan: no kernel for op %s (node %d, %s %s) on %s", sn_ops[nd->op]->name, (int)id,
                sn_dtype_name(nd->dtype), sn_shape_str(&nd->shape, b, sizeof b),
                sn_backend_name(be)));
        p->kern[c] = kern;
        if (kern->prepare) {
            size_t need = 0;
            /* oneDNN sizes its work for the thread count it sees when a primitive is made:
             * make it inside the device's bracket, with the share the plan runs with. */
            int tok = sn_backend_enter(be);
            sn_status s = kern->prepare(k, &need);
            sn_backend_leave(be, tok);
            if (s != SN_OK) {
                p->kern[c] = NULL; /* nothing to release */
                return plan_fail(p, sn_error_context(s, "plan: preparing %s (node %d)",
                                                     sn_ops[nd->op]->name, (int)id));
            }
            if (need > scratch) scratch = need;
        }
    }
    sn_status s = plan_memory(p, o.reuse_buffers);
    if (s != SN_OK) return plan_fail(p, s);
    p->scratch_bytes = scratch;
    if (scratch && !(p->scratch = sn_backend_alloc(be, scratch))) return plan_fail(p, SN_ERR_NOMEM);
    bind(p);
    *out = p;
    return SN_OK;
}

/* The steps themselves; sn_plan_run wraps them in the device's thread count. */
static sn_status run_steps(sn_plan *p, int64_t steps, sn_feed_fn feed, void *ctx) {
    for (int64_t s = 0; s < steps; s++) {
        if (feed) {
            sn_status fs = feed(ctx, p, s);
            if (fs != SN_OK) return sn_error_context(fs, "feeding step %lld", (long long)p->step);
        }
        for (int c = 0; c < p->n_calls; c++) {
            sn_kcall *k = &p->calls[c];
            k->step = p->step;
            double t0 = p->prof ? sn_now() : 0;
            sn_status st = p->kern[c]->run(k);
            if (p->prof) p->prof[c] += sn_now() - t0;
            if (st == SN_OK && p->hook) st = p->hook(p->hook_ctx, p, c, k->id);
            if (st != SN_OK)
                return sn_error_context(st, "step %lld, node %d (%s)", (long long)p->step,
                                        (int)k->id, sn_ops[k->op]->name);
        }
        p->step++;
    }
    return SN_OK;
}

sn_status sn_plan_run(sn_plan *p, int64_t steps, sn_feed_fn feed, void *ctx) {
    if (!p) return sn_errorf(SN_ERR_INVALID, "plan_run: plan is NULL");
    if (steps < 0) return sn_errorf(SN_ERR_INVALID, "plan_run: steps %lld is negative", (long long)steps);
    if (stale(p)) bind(p);
    /* A plan placed on logical device i runs its kernels on that device's share of the cores
     * (all of them when the CPU is one device): the backend's bracket. */
    int tok = sn_backend_enter(p->backend);
    sn_status s = run_steps(p, steps, feed, ctx);
    sn_status sy = sn_backend_synchronize(p->backend);
    sn_backend_leave(p->backend, tok);
    return s != SN_OK ? s : sy;
}

void *sn_plan_buffer(sn_plan *p, sn_node n) {
    if (!p || n < 0 || n >= p->n_nodes || !p->needed[n]) {
        sn_errorf(SN_ERR_INVALID, "plan_buffer: node %d is not part of this plan", (int)n);
        return NULL;
    }
    const sn_node_t *nd = &p->g->nodes[n];
    if (!p->is_target[n] && nd->op != SN_OP_INPUT && nd->op != SN_OP_VARIABLE) {
        sn_errorf(SN_ERR_INVALID, "plan_buffer: node %d (%s) is neither an input nor a target of "
                  "this plan, so its buffer may be shared with other values", (int)n,
                  sn_ops[nd->op]->name);
        return NULL;
    }
    if (stale(p)) bind(p);
    return p->ptr[n];
}

sn_status sn_plan_set_input(sn_plan *p, sn_node n, const void *data, size_t bytes) {
    if (!p || !data) return sn_errorf(SN_ERR_INVALID, "plan_set_input: NULL %s", p ? "data" : "plan");
    if (n < 0 || n >= p->n_nodes || p->g->nodes[n].op != SN_OP_INPUT)
        return sn_errorf(SN_ERR_INVALID, "plan_set_input: node %d is not an input", (int)n);
    const sn_node_t *nd = &p->g->nodes[n];
    if (!p->needed[n])
        return sn_errorf(SN_ERR_INVALID, "plan_set_input: input '%s' is not used by this plan",
                         nd->name ? nd->name : "");
    size_t want = node_bytes(nd);
    char b[128];
    if (bytes != want)
        return sn_errorf(SN_ERR_SHAPE, "plan_set_input: input '%s' (%s %s) takes %zu bytes, got %zu",
                         nd->name ? nd->name : "", sn_dtype_name(nd->dtype),
                         sn_shape_str(&nd->shape, b, sizeof b), want, bytes);
    return sn_backend_copy_to_device(p->backend, p->ptr[n], data, bytes);
}

size_t sn_plan_peak_bytes(const sn_plan *p) { return p ? p->arena_bytes + p->scratch_bytes : 0; }
int sn_plan_node_count(const sn_plan *p) { return p ? p->n_calls : 0; }
int64_t sn_plan_step(const sn_plan *p) { return p ? p->step : 0; }
void sn_plan_set_step(sn_plan *p, int64_t step) {
    if (p) p->step = step;
}
const char *sn_plan_device(const sn_plan *p) { return p ? sn_backend_name(p->backend) : ""; }

void sn_plan_set_node_hook(sn_plan *p, sn_node_hook hook, void *ctx) {
    if (!p) return;
    p->hook = hook;
    p->hook_ctx = ctx;
}

int sn_plan_call_of(const sn_plan *p, sn_node n) {
    for (int c = 0; p && c < p->n_calls; c++)
        if (p->calls[c].id == n) return c;
    return -1;
}

sn_status sn_plan_profile(sn_plan *p, bool on) {
    if (!p) return sn_errorf(SN_ERR_INVALID, "plan_profile: plan is NULL");
    free(p->prof);
    p->prof = NULL;
    if (on && !(p->prof = sn_calloc((size_t)(p->n_calls ? p->n_calls : 1), sizeof *p->prof)))
        return SN_ERR_NOMEM;
    return SN_OK;
}

bool sn_plan_profile_entry(const sn_plan *p, int c, sn_node *node, const char **impl,
                           double *seconds) {
    if (!p || c < 0 || c >= p->n_calls) return false;
    if (node) *node = p->calls[c].id;
    if (impl) *impl = p->kern[c]->impl;
    if (seconds) *seconds = p->prof ? p->prof[c] : 0.0;
    return true;
}

sn_status sn_eval(sn_graph *g, sn_node n, const char *device, sn_tensor **out) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "eval: out is NULL");
    *out = NULL;
    if (!g) return sn_errorf(SN_ERR_INVALID, "eval: graph is NULL");
    sn_plan_opts o = sn_plan_opts_defaults();
    o.device = device;
    sn_plan *p;
    SN_TRY(sn_plan_new(&p, g, 1, &n, &o));
    for (int i = 0; i < p->n_nodes; i++)
        if (p->needed[i] && g->nodes[i].op == SN_OP_INPUT) {
            sn_status s = sn_errorf(SN_ERR_INVALID, "eval: node %d needs input '%s', which eager "
                                    "evaluation cannot feed; use a plan", (int)n,
                                    g->nodes[i].name ? g->nodes[i].name : "");
            sn_plan_free(p);
            return s;
        }
    sn_status s = sn_plan_run(p, 1, NULL, NULL);
    if (s == SN_OK) s = sn_tensor_new(out, g->nodes[n].dtype, &g->nodes[n].shape);
    if (s == SN_OK)
        s = sn_backend_copy_to_host(p->backend, sn_tensor_data(*out), p->ptr[n],
                                    node_bytes(&g->nodes[n]));
    if (s != SN_OK && *out) {
        sn_tensor_free(*out);
        *out = NULL;
    }
    sn_plan_free(p);
    return s;
}
