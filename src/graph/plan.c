/* The planner (graph/plan_impl.h lists the other parts: fusion, executor, profile).
 *
 * A plan is the list of nodes a set of targets needs, in creation order (a topological order)
 * with side effects moved to the end (optimizer updates to just after their variable's last
 * reader, early_updates), each with its kernel chosen and prepared once. Every intermediate
 * value gets a place in one arena from liveness (plan_arena.c), so a step
 * allocates nothing; reshapes are views of their input's buffer; variables and constants are
 * read where they live. A kernel's scratch is a place in the same arena, live for its call
 * alone, so it takes bytes the values have left (a separate block held the largest
 * scratch beside the arena's peak). The arena comes from the plan's backend; the executor
 * (exec.c) runs the list N times in one call. */
#include <limits.h>
#include <string.h>

#include "graph/plan_impl.h"

sn_plan_opts sn_plan_opts_defaults(void) {
    return (sn_plan_opts){.device = NULL, .reuse_buffers = true};
}

/* Resolves every needed node's pointer; called at plan time and whenever the variable buffer
 * has moved (a variable was added after planning). */
sn_status sn_plan_bind(sn_plan *p) {
    sn_graph *g = p->g;
    /* The device copy of the variables follows the graph's buffer as it grows. Its contents are
     * uploaded at the start of every run (exec.c), so a new block needs no copy here. */
    unsigned char *vars = g->vars;
    if (p->memory) sn_plan_memory_rebind(p); /* the shared blocks may have moved */
    /* a recording holds the old buffer addresses */
    sn_backend_graph_free(p->backend, p->graph);
    p->graph = NULL;
    if (p->mirror) {
        if (g->vars_bytes > p->dvars_bytes || !p->dvars) {
            unsigned char *d = sn_backend_alloc(p->backend, g->vars_bytes);
            if (!d) return SN_ERR_NOMEM;
            sn_backend_free(p->backend, p->dvars);
            p->dvars = d;
            p->dvars_bytes = g->vars_bytes;
        }
        vars = p->dvars;
    } else if (p->private_vars) {
        if (g->vars_bytes > p->pvars_bytes || !p->pvars) {
            unsigned char *d = sn_backend_alloc(p->backend, g->vars_bytes ? g->vars_bytes : 64);
            if (!d) return SN_ERR_NOMEM;
            memcpy(d, g->vars, g->vars_bytes);
            sn_backend_free(p->backend, p->pvars);
            p->pvars = d;
            p->pvars_bytes = g->vars_bytes;
        }
        vars = p->pvars;
    }
    for (int i = 0; i < p->n_nodes; i++) {
        if (!p->needed[i]) continue;
        sn_node r = sn_plan_root(p, i);
        const sn_loc *l = &p->loc[r];
        switch (l->kind) {
        case LOC_ARENA: p->ptr[i] = p->arena + l->offset; break;
        case LOC_VAR: p->ptr[i] = vars + g->nodes[r].var_offset; break;
        case LOC_CONST:
            p->ptr[i] = p->mirror ? p->dconst + l->offset : g->nodes[r].const_data;
            break;
        default: p->ptr[i] = NULL; break;
        }
    }
    for (int c = 0; c < p->n_calls; c++) {
        sn_kcall *k = &p->calls[c];
        const sn_node_t *nd = &g->nodes[k->id];
        const sn_fusion *f = &p->fusion[k->id];
        /* The attributes pointer too: adding nodes to the graph after planning moves the array. */
        k->attr = &nd->attr;
        for (int j = 0; j < nd->n_in; j++) k->in[j] = p->ptr[nd->in[j]];
        for (int j = 0; j < f->n_extra_in; j++) k->in[nd->n_in + j] = p->ptr[f->extra_in[j]];
        for (int j = 0; j < f->n_out2; j++) {
            k->out2[j] = p->ptr[f->out2[j]];
            k->attr2[j] = &g->nodes[f->out2[j]].attr;
        }
        k->out = p->ptr[k->id];
        k->scratch = p->scratch_need[c] ? p->arena + p->scratch_off[c] : NULL;
    }
    p->vars_seen = g->vars;
    p->nodes_seen = g->nodes;
    return SN_OK;
}

/* A mirrored plan (device memory the host cannot address): one device block for the
 * constants, uploaded once (they never change), and a host shadow for every input and every
 * target that lives in the arena. */
static sn_status mirror_setup(sn_plan *p) {
    sn_graph *g = p->g;
    size_t cbytes = 0;
    for (int i = 0; i < p->n_nodes; i++)
        if (p->needed[i] && p->loc[i].kind == LOC_CONST) {
            p->loc[i].offset = cbytes;
            cbytes += (sn_plan_node_bytes(&g->nodes[i]) + 63) & ~(size_t)63;
        }
    if (!(p->dconst = sn_backend_alloc(p->backend, cbytes))) return SN_ERR_NOMEM;
    for (int i = 0; i < p->n_nodes; i++)
        if (p->needed[i] && p->loc[i].kind == LOC_CONST)
            SN_TRY(sn_backend_copy_to_device(p->backend, p->dconst + p->loc[i].offset,
                                             g->nodes[i].const_data,
                                             sn_plan_node_bytes(&g->nodes[i])));
    if (!(p->host = sn_calloc((size_t)p->n_nodes, sizeof *p->host))) return SN_ERR_NOMEM;
    for (int i = 0; i < p->n_nodes; i++) {
        if (!p->needed[i] || p->loc[sn_plan_root(p, i)].kind != LOC_ARENA) continue;
        if (!p->is_target[i] && g->nodes[i].op != SN_OP_INPUT) continue;
        size_t bytes = sn_plan_node_bytes(&g->nodes[i]);
        if (!(p->host[i] = sn_malloc_aligned(bytes ? bytes : 64))) return SN_ERR_NOMEM;
        memset(p->host[i], 0, bytes);
    }
    return SN_OK;
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
    free(p->fusion);
    free(p->bf16_store);
    free(p->ptr);
    free(p->prof);
    free(p->peak_live);
    free(p->scratch_need);
    free(p->scratch_off);
    sn_backend_graph_free(p->backend, p->graph);
    free(p->graph_attrs);
    if (p->memory) {
        sn_plan_memory_release(p->memory);
    } else {
        sn_backend_free(p->backend, p->arena);
    }
    sn_backend_free(p->backend, p->dvars);
    sn_backend_free(p->backend, p->pvars);
    sn_backend_free(p->backend, p->dconst);
    for (int i = 0; p->host && i < p->n_nodes; i++) sn_free_aligned(p->host[i]);
    free(p->host);
    free(p);
}

/* Early optimizer updates. An apply_optimizer call moves up from the end of the step to just
 * after the last call that reads its variable or slots (the forward, the backward-data
 * product, the L2 term's gradient), once its gradient is made; the gradient's buffer is then
 * free for the rest of the backward pass. Keras's rule that a step reads every variable's
 * value from before the step still holds, since every reader has run; the arithmetic is the
 * same, so the bits are. Example: the guide CNN's first Dense kernel gradient (144 MiB at
 * batch 200) was live through both convolutions' backward passes, the step's peak.
 * Only in plans without collectives: replicas that share one copy of the variables read
 * them on other threads until the step's end barrier, and a worker's collectives keep their
 * order. An update whose variable another side effect reads keeps its place at the end. */
static sn_status early_updates(sn_plan *p, int n) {
    sn_graph *g = p->g;
    int nn = p->n_nodes;
    for (int c = 0; c < n; c++)
        if (g->nodes[p->order[c]].op == SN_OP_ALL_REDUCE) return SN_OK;
    size_t m = (size_t)(n ? n : 1);
    int *last_read = sn_malloc((size_t)nn * sizeof *last_read);
    int *made_at = sn_malloc((size_t)nn * sizeof *made_at);
    int *ready = sn_malloc(m * sizeof *ready);
    int *start = sn_calloc(m + 2, sizeof *start);
    sn_node *upd = sn_malloc(m * sizeof *upd), *out = sn_malloc(m * sizeof *out);
    sn_status st = SN_OK;
    if (!last_read || !made_at || !ready || !start || !upd || !out) {
        st = SN_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < nn; i++) last_read[i] = made_at[i] = -1;
    /* Where each value is made, and the last computing call that reads each variable;
     * a variable a side effect reads is pinned (INT_MAX): its writer cannot move. */
    for (int c = 0; c < n; c++) {
        sn_node id = p->order[c];
        const sn_node_t *nd = &g->nodes[id];
        const sn_fusion *f = &p->fusion[id];
        bool se = (nd->flags & SN_NODE_SIDE_EFFECT) != 0;
        made_at[id] = c;
        for (int j = 0; j < f->n_out2; j++) made_at[f->out2[j]] = c;
        for (int j = 0; j < nd->n_in + f->n_extra_in; j++) {
            sn_node r = sn_plan_root(p, j < nd->n_in ? nd->in[j] : f->extra_in[j - nd->n_in]);
            if (g->nodes[r].op != SN_OP_VARIABLE) continue;
            /* an update's own reads of what it writes do not count; its read of the
             * iteration counter (input 2) pins nothing, as nothing but the counter's own
             * increment (after every update) writes it */
            if (se && nd->op == SN_OP_APPLY_OPTIMIZER) continue;
            if (se) last_read[r] = INT_MAX;
            else if (last_read[r] < c) last_read[r] = c;
        }
    }
    /* Each update's position: after the makers of its inputs and the readers of what it
     * writes (input 0, the variable; inputs 3.., its slots); n (the end) if pinned. */
    int moved = 0;
    for (int c = 0; c < n; c++) {
        const sn_node_t *nd = &g->nodes[p->order[c]];
        ready[c] = n;
        if (nd->op != SN_OP_APPLY_OPTIMIZER) continue;
        int at = -1;
        for (int j = 0; j < nd->n_in && at < n; j++) {
            sn_node r = sn_plan_root(p, nd->in[j]);
            if (g->nodes[r].op == SN_OP_VARIABLE) {
                if (j == 0 || j >= 3)
                    at = last_read[r] == INT_MAX ? n : last_read[r] > at ? last_read[r] : at;
            } else if (made_at[r] > at) {
                at = made_at[r];
            }
        }
        if (at < c) {
            ready[c] = at;
            moved++;
        }
    }
    if (moved) {
        /* Rebuild the order: every other call in place, each moved update right after the
         * call at its position (updates that meet there keep their creation order). Buckets
         * by position: start[c + 1] counts the updates placed after call c (-1: first). */
        for (int u = 0; u < n; u++)
            if (ready[u] < n) start[ready[u] + 2]++;
        for (int c = 0; c <= n; c++) start[c + 1] += start[c];
        for (int u = 0; u < n; u++)
            if (ready[u] < n) upd[start[ready[u] + 1]++] = p->order[u];
        /* start[c + 1] is now the end of bucket c; the bucket runs from the previous end */
        int w = 0, k = 0;
        for (int c = -1; c < n; c++) {
            if (c >= 0 && ready[c] == n) out[w++] = p->order[c];
            while (k < start[c + 1]) out[w++] = upd[k++];
        }
        SN_ASSERT(w == n);
        memcpy(p->order, out, (size_t)n * sizeof *out);
    }
done:
    free(last_read);
    free(made_at);
    free(ready);
    free(start);
    free(upd);
    free(out);
    return st;
}

/* Overlap of the gradient all-reduce with the backward pass. Creation order puts the
 * all_reduce nodes after every gradient (they are added once sn_gradients returns); a hoisted
 * one (attr.allreduce.hoist), with the concats only it reads (a bucket's packing), moves up to
 * just after the call that makes the last of its inputs, so its collective starts while the
 * rest of the backward pass runs. Hoisted calls keep their creation order among themselves
 * (first in, first out), so every replica and every worker starts the same collectives in the
 * same sequence, which the in-process barrier and MPI's matching both need. Runs after fusion:
 * a fused call may make a value (an extra output) at another position than its node had. */
static sn_status hoist_collectives(sn_plan *p, int n) {
    sn_graph *g = p->g;
    int nn = p->n_nodes, n_hoist = 0;
    for (int c = 0; c < n; c++) {
        const sn_node_t *nd = &g->nodes[p->order[c]];
        if (nd->op == SN_OP_ALL_REDUCE && nd->attr.allreduce.hoist &&
            nd->attr.allreduce.phase != SN_ALLREDUCE_WAIT)
            n_hoist++;
    }
    if (n_hoist == 0) return SN_OK;
    unsigned char *hoist = sn_calloc((size_t)nn, 1);
    int *uses = sn_calloc((size_t)nn, sizeof *uses), *hoist_uses = sn_calloc((size_t)nn, sizeof *uses);
    int *made_at = sn_malloc((size_t)nn * sizeof *made_at);
    sn_node *out = sn_malloc((size_t)(n ? n : 1) * sizeof *out);
    sn_node *pend = sn_malloc((size_t)(n ? n : 1) * sizeof *pend);
    sn_status st = SN_OK;
    if (!hoist || !uses || !hoist_uses || !made_at || !out || !pend) {
        st = SN_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < nn; i++)
        if (p->needed[i])
            for (int j = 0; j < g->nodes[i].n_in; j++) uses[g->nodes[i].in[j]]++;
    /* Inputs have smaller indices than their readers: one descending pass finds the packing
     * nodes every reader of which is hoisted. */
    for (int i = nn - 1; i >= 0; i--) {
        if (!p->needed[i]) continue;
        const sn_node_t *nd = &g->nodes[i];
        bool h = nd->op == SN_OP_ALL_REDUCE ? nd->attr.allreduce.hoist &&
                                                  nd->attr.allreduce.phase != SN_ALLREDUCE_WAIT
                 : (nd->op == SN_OP_CONCAT || nd->op == SN_OP_RESHAPE) && uses[i] > 0 &&
                       hoist_uses[i] == uses[i] && !p->is_target[i];
        if (!h) continue;
        hoist[i] = 1;
        for (int j = 0; j < nd->n_in; j++) hoist_uses[nd->in[j]]++;
    }
    for (int i = 0; i < nn; i++) made_at[i] = -1;
    int w = 0, np = 0, head = 0;
    for (int c = 0; c < n; c++) {
        sn_node id = p->order[c];
        if (hoist[id]) pend[np++] = id;
    }
    for (int c = 0; c <= n; c++) {
        if (c < n) {
            sn_node id = p->order[c];
            if (hoist[id]) continue;
            /* Side effects never feed a collective: whatever is pending goes before them. */
            if (!(g->nodes[id].flags & SN_NODE_SIDE_EFFECT)) {
                out[w] = id;
                made_at[id] = w++;
                const sn_fusion *f = &p->fusion[id];
                for (int j = 0; j < f->n_out2; j++) made_at[f->out2[j]] = made_at[id];
                if (head == np) continue;
            }
        }
        /* Start the pending ones, in order, while the first of them has its inputs. */
        while (head < np) {
            const sn_node_t *hn = &g->nodes[pend[head]];
            bool ready = true;
            for (int j = 0; j < hn->n_in && ready; j++) {
                sn_node r = sn_plan_root(p, hn->in[j]);
                int k = g->nodes[r].op;
                ready = k == SN_OP_INPUT || k == SN_OP_VARIABLE || k == SN_OP_CONST ||
                        made_at[r] >= 0;
            }
            if (!ready && c < n && !(g->nodes[p->order[c]].flags & SN_NODE_SIDE_EFFECT)) break;
            out[w] = pend[head];
            made_at[pend[head++]] = w++;
        }
        if (c < n && (g->nodes[p->order[c]].flags & SN_NODE_SIDE_EFFECT)) out[w++] = p->order[c];
    }
    SN_ASSERT(w == n && head == np);
    memcpy(p->order, out, (size_t)n * sizeof *out);
done:
    free(hoist);
    free(uses);
    free(hoist_uses);
    free(made_at);
    free(out);
    free(pend);
    return st;
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
    sn_backend *be;
    SN_TRY(sn_backend_find(opts ? opts->device : NULL, &be));
    return sn_plan_new_on(out, g, ntargets, targets, opts, be);
}

sn_status sn_plan_new_on(sn_plan **out, sn_graph *g, int ntargets, const sn_node *targets,
                         const sn_plan_opts *opts, sn_backend *be) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "plan: out is NULL");
    *out = NULL;
    if (!g || !be) return sn_errorf(SN_ERR_INVALID, "plan: %s is NULL", g ? "backend" : "graph");
    if (g->status != SN_OK)
        return sn_errorf(g->status, "plan: the graph has an earlier error (%s)", sn_last_error());
    if (ntargets < 1 || !targets)
        return sn_errorf(SN_ERR_INVALID, "plan: needs at least one target, got %d", ntargets);
    sn_plan_opts o = opts ? *opts : sn_plan_opts_defaults();
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
    p->mirror = !sn_backend_get_caps(be).host_visible;
    p->private_vars = o.private_vars;
    p->step_mul = 1;
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
            /* an all_reduce barrier is a side effect for its place only: it writes nothing */
            if (se && nd->op != SN_OP_ALL_REDUCE) p->writes_vars = true;
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
            /* Side effects write their variable; an all_reduce's wait phase completes its start
             * phase's sum where it is; a replica that only gives its value to replica 0
             * (to_first) keeps it where it is. */
            if ((nd->flags & SN_NODE_SIDE_EFFECT) ||
                (nd->op == SN_OP_ALL_REDUCE && (nd->attr.allreduce.phase == SN_ALLREDUCE_WAIT ||
                                                (nd->attr.allreduce.to_first &&
                                                 nd->attr.allreduce.replica > 0))))
                p->loc[i] = (sn_loc){.kind = LOC_ALIAS, .alias = nd->in[0]};
            else p->loc[i].kind = LOC_ARENA;
        }
    }

    /* Fusion (plan_fuse.c), before kernels are chosen: a fused call is a different call. */
    sn_status fs = sn_plan_fuse(p, n, &n);
    if (fs != SN_OK) return plan_fail(p, fs);
    p->n_calls = n;
    if ((fs = hoist_collectives(p, n)) != SN_OK) return plan_fail(p, fs);
    if ((fs = early_updates(p, n)) != SN_OK) return plan_fail(p, fs);
    const unsigned char *fuse_relu = p->fuse_relu;
    if ((fs = sn_plan_bf16_store(p, n, o.bf16_compute)) != SN_OK) return plan_fail(p, fs);

    /* Kernels: choose and prepare each call once. */
    p->calls = sn_calloc((size_t)(n ? n : 1), sizeof *p->calls);
    p->kern = sn_calloc((size_t)(n ? n : 1), sizeof *p->kern);
    p->scratch_need = sn_calloc((size_t)(n ? n : 1), sizeof *p->scratch_need);
    p->scratch_off = sn_calloc((size_t)(n ? n : 1), sizeof *p->scratch_off);
    if (!p->calls || !p->kern || !p->scratch_need || !p->scratch_off)
        return plan_fail(p, SN_ERR_NOMEM);
    for (int c = 0; c < n; c++) {
        sn_node id = p->order[c];
        const sn_node_t *nd = &g->nodes[id];
        sn_kcall *k = &p->calls[c];
        sn_plan_describe_call(p, id, k);
        k->bf16 = o.bf16_compute;
        k->fp32_strict = o.fp32_strict;
        k->relu = fuse_relu[id];
        k->stream = sn_backend_stream(be);
        if (sn_ops[nd->op]->fwd_state_input > 0) { /* the forward's call ran prepare first */
            sn_node f = nd->in[sn_ops[nd->op]->fwd_state_input - 1];
            for (int j = 0; j < c; j++)
                if (p->calls[j].id == f && !p->calls[j].fused) {
                    k->fwd = &p->calls[j];
                    k->fwd_kernel = p->kern[j];
                }
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
            p->scratch_need[c] = need;
        }
    }
    /* Recording steps: not where a kernel reads the step counter (a recording would keep one
     * step's dropout mask) or waits for other replicas on the host (the in-process
     * all-reduce's barrier). */
    for (int c = 0; c < n; c++) {
        sn_op op = p->calls[c].op;
        if (op == SN_OP_DROPOUT || op == SN_OP_DROPOUT_GRAD || op == SN_OP_ALL_REDUCE)
            p->no_capture = true;
        if ((op == SN_OP_ATTENTION || op == SN_OP_ATTENTION_GRAD) && p->calls[c].attr &&
            p->calls[c].attr->attn.drop_rate > 0)
            p->no_capture = true; /* attention dropout reads the step too */
    }
    sn_status s = sn_plan_arena(p, o.reuse_buffers);
    if (s != SN_OK) return plan_fail(p, s);
    if (o.memory) {
        if ((s = sn_plan_memory_attach(p, o.memory, p->arena_bytes)) != SN_OK)
            return plan_fail(p, s);
    } else if (!(p->arena = sn_backend_alloc(be, p->arena_bytes))) { /* zero-filled */
        return plan_fail(p, SN_ERR_NOMEM);
    }
    if (p->mirror && (s = mirror_setup(p)) != SN_OK) return plan_fail(p, s);
    if ((s = sn_plan_bind(p)) != SN_OK) return plan_fail(p, s);
    *out = p;
    return SN_OK;
}

size_t sn_plan_peak_bytes(const sn_plan *p) { return p ? p->arena_bytes : 0; }
size_t sn_plan_memory_bytes(const sn_plan *p) {
    return p ? p->arena_bytes + (p->mirror ? 0 : p->pvars_bytes) : 0;
}
int sn_plan_node_count(const sn_plan *p) { return p ? p->n_calls : 0; }
int64_t sn_plan_step(const sn_plan *p) { return p ? p->step : 0; }
int64_t sn_plan_run_count(const sn_plan *p) { return p ? p->runs : 0; }
void sn_plan_set_step_key(sn_plan *p, int64_t mul, int64_t add) {
    if (!p || mul < 1) return;
    p->step_mul = mul;
    p->step_add = add;
}

sn_status sn_plan_load_vars(sn_plan *p) {
    if (!p) return sn_errorf(SN_ERR_INVALID, "plan_load_vars: plan is NULL");
    if (!p->private_vars) return SN_OK;
    if (sn_plan_stale(p)) SN_TRY(sn_plan_bind(p));
    if (p->vars_loaded == p->g->vars_version + 1) return SN_OK; /* nothing changed since */
    if (p->mirror)
        SN_TRY(sn_backend_copy_to_device(p->backend, p->dvars, p->g->vars, p->g->vars_bytes));
    else memcpy(p->pvars, p->g->vars, p->g->vars_bytes);
    p->vars_loaded = p->g->vars_version + 1;
    p->pvars_version++;
    return SN_OK;
}

void sn_plan_vars_synced(sn_plan *p) {
    if (p && p->private_vars) p->vars_loaded = p->g->vars_version + 1;
}
void sn_plan_set_step(sn_plan *p, int64_t step) {
    if (p) p->step = step;
}
const char *sn_plan_device(const sn_plan *p) { return p ? sn_backend_name(p->backend) : ""; }

int sn_plan_call_of(const sn_plan *p, sn_node n) {
    for (int c = 0; p && c < p->n_calls; c++) {
        if (p->calls[c].id == n) return c;
        const sn_fusion *f = &p->fusion[p->calls[c].id]; /* a fused call's extra outputs */
        for (int j = 0; j < f->n_out2; j++)
            if (f->out2[j] == n) return c;
    }
    return -1;
}

