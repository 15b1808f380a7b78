/* Arena placement (plan_impl.h, sn_plan_arena): where each intermediate value of a plan lives.
 *
 * Every value's lifetime is known at plan time: from the call that writes it to the last call
 * that reads it (inputs and targets: the whole step). Two values may share bytes when their
 * lifetimes do not overlap; a value written and one read by the same call overlap. The values
 * are placed offline, each at the lowest offset clear of the values already placed whose
 * lifetimes overlap its own, in two orders: execution order (first-fit, what the planner
 * always did) and the largest first ("greedy by size", as TFLite's arena planner); the
 * smaller arena is kept (both are heuristics; the best placement is NP-hard). On the guide
 * CNN they are within 0.4 MB of each other and of the most ever live at once (502 MB): its
 * savings came from the early updates (plan.c) and the take-overs below.
 *
 * A kernel that may write its output over an input (sn_kernel.overwrite_input) gets that
 * input's bytes when the input dies at that call and is an intermediate value of the output's
 * size: the two values become one span. Example: the L2 sum's call (SN_FUSED_ADD_L2) adds the
 * penalty's gradient into the data gradient's buffer, so the guide CNN's 144 MB Dense kernel
 * gradient is not held twice.
 *
 * A kernel's scratch (what its prepare asked for) is a span live for its call alone, placed
 * after the values in both orders: the values lie where they would without it, and each
 * call's scratch takes the lowest bytes its call leaves free. The arena is then never larger
 * than the values' arena plus the largest scratch, which is what a separate scratch block
 * cost; mostly the scratch fits in bytes dead by then (the small Xception's 1x1 filter
 * gradients under mixed bf16 take 75 MB of bf16 copies of x and dy, at calls where the
 * forward's activations are mostly freed).
 *
 * The placement depends on the shapes and the order alone, so every run of a plan, and every
 * replica's plan of one graph, lays out the same. */
#include <limits.h>
#include <string.h>

#include "graph/plan_impl.h"

typedef struct span {
    size_t size, offset;
    int first, last; /* positions: written at first (-1: before the step), last read at last */
} span;

static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

/* The input of call c (at p->order[c]) whose buffer its output may take, or -1. */
static sn_node overwritable(const sn_plan *p, int c, const int *last) {
    const sn_graph *g = p->g;
    sn_node id = p->order[c];
    const sn_node_t *nd = &g->nodes[id];
    const sn_fusion *f = &p->fusion[id];
    int j = p->kern && p->kern[c] ? p->kern[c]->overwrite_input - 1 : -1;
    if (j < 0 || j >= nd->n_in + f->n_extra_in || sn_plan_root(p, id) != id) return -1;
    sn_node r = sn_plan_root(p, j < nd->n_in ? nd->in[j] : f->extra_in[j - nd->n_in]);
    if (p->loc[r].kind != LOC_ARENA || g->nodes[r].op == SN_OP_INPUT || p->is_target[r] ||
        last[r] != c || sn_plan_value_dtype(p, r) != sn_plan_value_dtype(p, id) ||
        sn_plan_value_bytes(p, r) != sn_plan_value_bytes(p, id))
        return -1;
    return r;
}

/* Sort keys: the largest first; equal sizes by first use, then by index (a total order, so
 * the placement never depends on how qsort treats ties). */
typedef struct span_key {
    size_t size;
    int first, idx;
} span_key;

static int by_size(const void *a, const void *b) {
    const span_key *x = a, *y = b;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->idx - y->idx;
}

static int by_first(const void *a, const void *b) {
    const span_key *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->idx - y->idx;
}

/* Places the spans in the given order, each at the lowest offset clear of the spans already
 * placed that are live with it; `placed` (room for ns) keeps them in offset order. Returns
 * the arena's size. */
static size_t place_all(span *sp, int ns, const span_key *order, int *placed) {
    size_t peak = 0;
    int np = 0;
    for (int k = 0; k < ns; k++) {
        span *s = &sp[order[k].idx];
        size_t at = 0;
        for (int q = 0; q < np; q++) {
            const span *t = &sp[placed[q]];
            if (t->last < s->first || s->last < t->first) continue; /* never live together */
            if (t->offset >= at + s->size) break;
            if (t->offset + t->size > at) at = t->offset + t->size;
        }
        s->offset = at;
        int ins = np; /* where s goes in offset order */
        for (int q = 0; q < np; q++)
            if (sp[placed[q]].offset > at) {
                ins = q;
                break;
            }
        memmove(&placed[ins + 1], &placed[ins], sizeof *placed * (size_t)(np - ins));
        placed[ins] = order[k].idx;
        np++;
        if (at + s->size > peak) peak = at + s->size;
    }
    return peak;
}

/* Records the most-filled moment (sn_plan_peak_value): the call with the most bytes live (by
 * a sweep over the spans' ends), and the values live then: value i lives from first[i] to
 * last[i]; one whose bytes a take-over passed on (taken) is not counted at that call. */
static sn_status note_peak(sn_plan *p, const span *sp, int ns, const int *first,
                           const int *last, const unsigned char *taken) {
    int total = p->n_calls;
    long long *delta = sn_calloc((size_t)total + 2, sizeof *delta); /* positions -1..total */
    if (!delta) return SN_ERR_NOMEM;
    for (int i = 0; i < ns; i++) {
        delta[sp[i].first + 1] += (long long)sp[i].size;
        if (sp[i].last + 2 <= total + 1) delta[sp[i].last + 2] -= (long long)sp[i].size;
    }
    long long live = 0, most = -1;
    int best = -1;
    for (int c = -1; c < total; c++) {
        live += delta[c + 1];
        if (live > most) {
            most = live;
            best = c;
        }
    }
    free(delta);
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        n = 0;
        for (int i = 0; i < p->n_nodes; i++) {
            if (first[i] > best || last[i] < best || first[i] == INT_MIN) continue;
            if (last[i] == best && taken[i]) continue;
            if (pass) p->peak_live[n] = i;
            n++;
        }
        if (!pass) {
            free(p->peak_live);
            if (!(p->peak_live = sn_malloc(sizeof *p->peak_live * (size_t)(n ? n : 1))))
                return SN_ERR_NOMEM;
        }
    }
    p->n_peak_live = n;
    p->peak_call = best;
    return SN_OK;
}

sn_status sn_plan_arena(sn_plan *p, bool reuse) {
    sn_graph *g = p->g;
    int nn = p->n_nodes, total = p->n_calls;
    int *last = sn_malloc(sizeof *last * (size_t)nn);
    int *span_of = sn_malloc(sizeof *span_of * (size_t)nn);
    /* one span per value, plus one per call's scratch */
    size_t cap = (size_t)nn + (size_t)total + 1;
    span *sp = sn_malloc(sizeof *sp * cap);
    span_key *order = sn_malloc(sizeof *order * cap);
    int *placed = sn_malloc(sizeof *placed * cap);
    int *vfirst = sn_malloc(sizeof *vfirst * (size_t)nn), *vlast = sn_malloc(sizeof *vlast * (size_t)nn);
    unsigned char *taken = sn_calloc((size_t)nn, 1);
    sn_status st = SN_OK;
    if (!last || !span_of || !sp || !order || !placed || !vfirst || !vlast || !taken) {
        st = SN_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < nn; i++) {
        last[i] = span_of[i] = -1;
        vfirst[i] = vlast[i] = INT_MIN; /* not in the arena */
    }
    /* Last use of each storage root, in execution positions; targets and inputs live for the
     * whole step (targets are read back after the run, inputs are filled before it). */
    for (int c = 0; c < total; c++) {
        const sn_node_t *nd = &g->nodes[p->order[c]];
        const sn_fusion *f = &p->fusion[p->order[c]];
        for (int j = 0; j < nd->n_in + f->n_extra_in; j++) {
            sn_node r = sn_plan_root(p, j < nd->n_in ? nd->in[j] : f->extra_in[j - nd->n_in]);
            if (last[r] < c) last[r] = c;
        }
    }
    for (int i = 0; i < nn; i++) {
        if (!p->needed[i]) continue;
        if (p->is_target[i] || g->nodes[i].op == SN_OP_INPUT || !reuse)
            last[sn_plan_root(p, i)] = total;
    }
    /* The spans: inputs, then each call's outputs (its node, then a fused call's extras). */
    int ns = 0;
    for (int i = 0; i < nn; i++) {
        if (!p->needed[i] || p->loc[i].kind != LOC_ARENA || g->nodes[i].op != SN_OP_INPUT) continue;
        sp[ns] = (span){round64(sn_plan_value_bytes(p, i)), 0, -1, total};
        span_of[i] = ns++;
        vfirst[i] = -1;
        vlast[i] = total;
    }
    for (int c = 0; c < total; c++) {
        const sn_fusion *f = &p->fusion[p->order[c]];
        for (int o = 0; o <= f->n_out2; o++) {
            sn_node id = o == 0 ? p->order[c] : f->out2[o - 1];
            if (p->loc[id].kind != LOC_ARENA) continue;
            int lu = last[id] < c ? c : last[id]; /* an unread value still needs its slot */
            vfirst[id] = c;
            vlast[id] = lu;
            sn_node r = o == 0 && reuse ? overwritable(p, c, last) : -1;
            if (r >= 0 && span_of[r] >= 0) {
                span_of[id] = span_of[r];
                sp[span_of[r]].last = lu;
                taken[r] = 1;
                continue;
            }
            sp[ns] = (span){round64(sn_plan_value_bytes(p, id)), 0, c, lu};
            span_of[id] = ns++;
        }
    }
    /* The calls' scratch, each live at its call alone; sorted after the values below. */
    const int nv = ns;
    for (int c = 0; c < total; c++)
        if (p->scratch_need[c]) sp[ns++] = (span){round64(p->scratch_need[c]), 0, c, c};
    /* Both orders of the values, each followed by the scratch in call order; the smaller
     * arena wins (ties: largest first). */
    size_t *off = sn_malloc(sizeof *off * (size_t)(ns ? ns : 1));
    if (!off) {
        st = SN_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < ns; i++) order[i] = (span_key){sp[i].size, sp[i].first, i};
    qsort(order, (size_t)nv, sizeof *order, by_first);
    size_t peak = place_all(sp, ns, order, placed);
    for (int i = 0; i < ns; i++) off[i] = sp[i].offset;
    qsort(order, (size_t)nv, sizeof *order, by_size);
    size_t peak_size = place_all(sp, ns, order, placed);
    if (peak_size <= peak) peak = peak_size;
    else
        for (int i = 0; i < ns; i++) sp[i].offset = off[i];
    free(off);
    for (int i = 0; i < nn; i++)
        if (span_of[i] >= 0) p->loc[i].offset = sp[span_of[i]].offset;
    for (int c = 0, k = nv; c < total; c++)
        p->scratch_off[c] = p->scratch_need[c] ? sp[k++].offset : 0;
    p->arena_bytes = peak;
    st = note_peak(p, sp, ns, vfirst, vlast, taken);
done:
    free(vfirst);
    free(vlast);
    free(taken);
    free(last);
    free(span_of);
    free(sp);
    free(order);
    free(placed);
    return st;
}

int sn_plan_peak_call(const sn_plan *p) { return p ? p->peak_call : -1; }

bool sn_plan_peak_value(const sn_plan *p, int i, sn_node *node, size_t *bytes) {
    if (!p || i < 0 || i >= p->n_peak_live) return false;
    sn_node id = p->peak_live[i];
    if (node) *node = id;
    if (bytes) *bytes = sn_plan_value_bytes(p, id);
    return true;
}
