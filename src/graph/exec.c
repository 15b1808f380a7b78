/* The executor: runs a plan's calls N times per host call on its backend (steps_per_execution),
 * fills inputs before each step through the feed callback, and hands out the buffers of
 * inputs and targets. No allocation happens on the step path. Eager sn_eval is a one-node
 * plan run once.
 *
 * On a device whose memory the host cannot address (a mirrored plan, plan_impl.h) the host
 * works on shadows: a run uploads the variables at its start, each step uploads the input
 * shadows after the feed, and the end of the run downloads the variables and the arena
 * targets. A node hook that asks for a buffer mid-run gets it downloaded at that moment.
 *
 * On a backend that records steps (backend.h: a CUDA graph) a run records one step's kernel
 * calls once and replays the recording every step (steps_per_execution N: N replays, one
 * synchronisation at the run's end), recording again after a rebind (new buffer addresses) or
 * a changed attribute; plans whose kernels read the step counter (dropout) or meet other
 * replicas on the host (all_reduce), and runs with a node hook or the profiler, issue their
 * kernels step by step as before. */
#include <string.h>
#include <time.h>

#include "graph/plan_impl.h"

static sn_status upload_inputs(sn_plan *p) {
    for (int i = 0; i < p->n_nodes; i++)
        if (p->host[i] && p->g->nodes[i].op == SN_OP_INPUT)
            SN_TRY(sn_backend_copy_to_device(p->backend, p->ptr[i], p->host[i],
                                             sn_plan_node_bytes(&p->g->nodes[i])));
    return SN_OK;
}

/* Node n's value into the host's view of it (shadow or the graph's variable buffer). */
static sn_status download(sn_plan *p, sn_node n) {
    sn_node r = sn_plan_root(p, n);
    const sn_node_t *nd = &p->g->nodes[n];
    if (p->loc[r].kind == LOC_VAR && p->private_vars) return SN_OK; /* never written back */
    if (p->loc[r].kind == LOC_VAR)
        return sn_backend_copy_to_host(p->backend, p->g->vars + p->g->nodes[r].var_offset,
                                       p->ptr[n], sn_plan_node_bytes(nd));
    if (p->host[n])
        return sn_backend_copy_to_host(p->backend, p->host[n], p->ptr[n], sn_plan_node_bytes(nd));
    return SN_OK;
}

static sn_status download_all(sn_plan *p) {
    if (!p->private_vars)
        SN_TRY(sn_backend_copy_to_host(p->backend, p->g->vars, p->dvars, p->g->vars_bytes));
    for (int i = 0; i < p->n_nodes; i++)
        if (p->host[i] && p->is_target[i]) SN_TRY(download(p, i));
    return SN_OK;
}

/* After a step: its side effects wrote the variables (the graph's, or a private copy), so the
 * next step's kernels see a new version (sn_kcall.vars_version). A plan without side effects
 * leaves the version alone: a kernel's copy of a weight stays valid across its steps. */
static void vars_written(sn_plan *p) {
    if (!p->writes_vars) return;
    if (p->private_vars) p->pvars_version++;
    else p->g->vars_version++;
}

/* The profile's clock: wall time, or with SN_PROFILE_CLOCK=thread the calling thread's CPU
 * time. On a shared machine wall time charges each call for the time it was not scheduled
 * (a two-thread call waits on its slowest thread: 10-100x on small parallel regions); one
 * thread's CPU time is what the call itself costs there. */
static double prof_now(bool thread_cpu) {
    if (!thread_cpu) return sn_now();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One step's kernel runs, issued on the backend's stream (or run, on the CPU). */
static sn_status issue_calls(sn_plan *p, int64_t key) {
    uint64_t vv = p->private_vars ? p->pvars_version : p->g->vars_version;
    const char *clk = p->prof ? sn_env(SN_ENV_PROFILE_CLOCK) : NULL;
    const bool tcpu = clk && !strcmp(clk, "thread");
    for (int c = 0; c < p->n_calls; c++) {
        sn_kcall *k = &p->calls[c];
        k->step = key;
        k->vars_version = vv;
        double t0 = p->prof ? prof_now(tcpu) : 0;
        sn_status st = p->kern[c]->run(k);
        if (p->prof) p->prof[c] += prof_now(tcpu) - t0;
        if (st == SN_OK && p->hook) st = p->hook(p->hook_ctx, p, c, k->id);
        if (st != SN_OK) {
            vars_written(p); /* some side effects may have run */
            return sn_error_context(st, "step %lld, node %d (%s)", (long long)p->step,
                                    (int)k->id, sn_ops[k->op]->name);
        }
    }
    return SN_OK;
}

enum { ATTRS_PER_CALL = 1 + SN_FUSED_MAX_OUT2 };

/* Call c's attributes (its own and a fused call's extra outputs') into dst[ATTRS_PER_CALL]. */
static void call_attrs(const sn_kcall *k, sn_attrs *dst) {
    memset(dst, 0, ATTRS_PER_CALL * sizeof *dst);
    if (k->attr) memcpy(&dst[0], k->attr, sizeof *dst);
    for (int j = 0; j < k->n_out2 && j < SN_FUSED_MAX_OUT2; j++)
        if (k->attr2[j]) memcpy(&dst[1 + j], k->attr2[j], sizeof *dst);
}

/* Whether an attribute changed since the recording (a learning-rate schedule writes optim.lr
 * between runs): a recording keeps the values it was made with. */
static bool attrs_changed(const sn_plan *p) {
    sn_attrs now[ATTRS_PER_CALL];
    for (int c = 0; c < p->n_calls; c++) {
        call_attrs(&p->calls[c], now);
        if (memcmp(now, &p->graph_attrs[(size_t)c * ATTRS_PER_CALL], sizeof now)) return true;
    }
    return false;
}

/* Records one step's calls (issued, not run); the caller replays the recording. */
static sn_status record_step(sn_plan *p, int64_t key) {
    if (!p->graph_attrs) {
        p->graph_attrs = sn_calloc((size_t)(p->n_calls ? p->n_calls : 1) * ATTRS_PER_CALL,
                                   sizeof *p->graph_attrs);
        if (!p->graph_attrs) return SN_ERR_NOMEM;
    }
    SN_TRY(sn_backend_capture_begin(p->backend));
    sn_status st = issue_calls(p, key);
    void *graph = NULL;
    sn_status e = sn_backend_capture_end(p->backend, &graph); /* ends it even after a failure */
    if (st == SN_OK) st = e;
    if (st != SN_OK) {
        sn_backend_graph_free(p->backend, graph);
        return sn_error_context(st, "recording step %lld on %s", (long long)p->step,
                                sn_backend_name(p->backend));
    }
    p->graph = graph;
    for (int c = 0; c < p->n_calls; c++)
        call_attrs(&p->calls[c], &p->graph_attrs[(size_t)c * ATTRS_PER_CALL]);
    p->captures++;
    return SN_OK;
}

/* The steps themselves; sn_plan_run wraps them in the device's thread count. On a backend
 * that records steps (a CUDA graph) the first step is recorded once and every step replays
 * it: one launch per step, and no host synchronisation until the run's end. */
static sn_status run_steps(sn_plan *p, int64_t steps, sn_feed_fn feed, void *ctx) {
    bool rec = sn_backend_can_capture(p->backend) && !p->no_capture && !p->hook && !p->prof;
    if (p->graph && (!rec || attrs_changed(p))) {
        sn_backend_graph_free(p->backend, p->graph);
        p->graph = NULL;
    }
    for (int64_t s = 0; s < steps; s++) {
        if (feed) {
            sn_status fs = feed(ctx, p, s);
            if (fs != SN_OK) return sn_error_context(fs, "feeding step %lld", (long long)p->step);
        }
        if (p->mirror) SN_TRY(upload_inputs(p));
        int64_t key = p->step * p->step_mul + p->step_add;
        if (rec) {
            if (!p->graph) SN_TRY(record_step(p, key));
            sn_status st = sn_backend_replay(p->backend, p->graph);
            if (st != SN_OK) return sn_error_context(st, "step %lld (replayed)", (long long)p->step);
            p->replays++;
        } else {
            SN_TRY(issue_calls(p, key));
        }
        p->step++;
        vars_written(p);
    }
    return SN_OK;
}

sn_status sn_plan_run(sn_plan *p, int64_t steps, sn_feed_fn feed, void *ctx) {
    if (!p) return sn_errorf(SN_ERR_INVALID, "plan_run: plan is NULL");
    if (steps < 0) return sn_errorf(SN_ERR_INVALID, "plan_run: steps %lld is negative", (long long)steps);
    if (sn_plan_stale(p)) SN_TRY(sn_plan_bind(p));
    /* A plan placed on logical device i runs its kernels on that device's share of the cores
     * (all of them when the CPU is one device): the backend's bracket. */
    int tok = sn_backend_enter(p->backend);
    sn_status s = SN_OK;
    if (p->mirror && !p->private_vars)
        s = sn_backend_copy_to_device(p->backend, p->dvars, p->g->vars, p->g->vars_bytes);
    if (steps > 0) p->runs++;
    p->running = true;
    if (s == SN_OK) s = run_steps(p, steps, feed, ctx);
    p->running = false;
    sn_status sy = sn_backend_synchronize(p->backend);
    if (s == SN_OK) s = sy;
    /* Even after a failed step: the host's variables then hold what the device computed, as
     * they would on the CPU. */
    if (p->mirror) {
        sn_status d = download_all(p);
        if (s == SN_OK) s = d;
    }
    sn_backend_leave(p->backend, tok);
    return s;
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
    if (sn_plan_stale(p) && sn_plan_bind(p) != SN_OK) return NULL;
    if (!p->private_vars && p->loc[sn_plan_root(p, n)].kind == LOC_VAR) p->g->vars_version++;
    if (!p->mirror) return p->ptr[n];
    if (p->running && nd->op != SN_OP_INPUT && download(p, n) != SN_OK) return NULL;
    sn_node r = sn_plan_root(p, n);
    if (p->loc[r].kind == LOC_VAR && !p->private_vars) {
        p->g->vars_version++; /* the caller may write it */
        return p->g->vars + p->g->nodes[r].var_offset;
    }
    return p->host[n];
}

sn_status sn_plan_set_input(sn_plan *p, sn_node n, const void *data, size_t bytes) {
    if (!p || !data) return sn_errorf(SN_ERR_INVALID, "plan_set_input: NULL %s", p ? "data" : "plan");
    if (n < 0 || n >= p->n_nodes || p->g->nodes[n].op != SN_OP_INPUT)
        return sn_errorf(SN_ERR_INVALID, "plan_set_input: node %d is not an input", (int)n);
    const sn_node_t *nd = &p->g->nodes[n];
    if (!p->needed[n])
        return sn_errorf(SN_ERR_INVALID, "plan_set_input: input '%s' is not used by this plan",
                         nd->name ? nd->name : "");
    size_t want = sn_plan_node_bytes(nd);
    char b[128];
    if (bytes != want)
        return sn_errorf(SN_ERR_SHAPE, "plan_set_input: input '%s' (%s %s) takes %zu bytes, got %zu",
                         nd->name ? nd->name : "", sn_dtype_name(nd->dtype),
                         sn_shape_str(&nd->shape, b, sizeof b), want, bytes);
    if (p->mirror) { /* uploaded before the next step */
        memcpy(p->host[n], data, bytes);
        return SN_OK;
    }
    /* the input's place moves with a shared memory's blocks (sn_plan_memory) */
    if (sn_plan_stale(p)) SN_TRY(sn_plan_bind(p));
    return sn_backend_copy_to_device(p->backend, p->ptr[n], data, bytes);
}

void sn_plan_set_node_hook(sn_plan *p, sn_node_hook hook, void *ctx) {
    if (!p) return;
    p->hook = hook;
    p->hook_ctx = ctx;
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
                                    sn_plan_node_bytes(&g->nodes[n]));
    if (s != SN_OK && *out) {
        sn_tensor_free(*out);
        *out = NULL;
    }
    sn_plan_free(p);
    return s;
}
