/* A plan's arena, checked from outside the planner (tests only; needs graph/plan_impl.h):
 * no two values that are live at the same call share a byte. Lifetimes are recomputed here
 * from the plan's order alone: a value lives from the call that writes it (inputs: before the
 * first call) to the last call that reads it (inputs and targets: to the end); a value that a
 * call writes over its dying input (sn_kernel.overwrite_input) may share that input's bytes.
 * And each call's kernel scratch (p->scratch_off, p->scratch_need) lies in the arena and
 * shares no byte with a value live at that call. */
#ifndef SN_TEST_PLAN_CHECK_H
#define SN_TEST_PLAN_CHECK_H

#include <stdlib.h>

#include "graph/plan_impl.h"
#include "sn_test.h"

static inline void plan_check_arena(const sn_plan *p, const char *what) {
    const sn_graph *g = p->g;
    int nn = p->n_nodes, total = p->n_calls;
    int *first = malloc(sizeof *first * (size_t)nn), *last = malloc(sizeof *last * (size_t)nn);
    if (!first || !last) {
        free(first);
        free(last);
        CHECK(false, "%s: out of memory", what);
        return;
    }
    for (int i = 0; i < nn; i++) {
        first[i] = -2; /* not an arena value */
        last[i] = -1;
    }
    for (int i = 0; i < nn; i++)
        if (p->needed[i] && p->loc[i].kind == LOC_ARENA && g->nodes[i].op == SN_OP_INPUT)
            first[i] = -1;
    for (int c = 0; c < total; c++) {
        sn_node id = p->order[c];
        const sn_node_t *nd = &g->nodes[id];
        const sn_fusion *f = &p->fusion[id];
        for (int j = 0; j < nd->n_in + f->n_extra_in; j++) {
            sn_node r = sn_plan_root(p, j < nd->n_in ? nd->in[j] : f->extra_in[j - nd->n_in]);
            if (last[r] < c) last[r] = c;
        }
        for (int o = 0; o <= f->n_out2; o++) {
            sn_node v = o == 0 ? id : f->out2[o - 1];
            if (p->loc[v].kind == LOC_ARENA && first[v] == -2) first[v] = c;
        }
    }
    for (int i = 0; i < nn; i++) {
        if (first[i] == -2) continue;
        if (p->is_target[i] || g->nodes[i].op == SN_OP_INPUT) last[i] = total;
        for (int k = 0; k < nn; k++) /* a target view keeps its root alive */
            if (p->needed[k] && p->is_target[k] && sn_plan_root(p, k) == i) last[i] = total;
        if (last[i] < first[i]) last[i] = first[i];
    }
    int bad = 0;
    for (int a = 0; a < nn && !bad; a++) {
        if (first[a] == -2) continue;
        size_t a0 = p->loc[a].offset, a1 = a0 + sn_plan_value_bytes(p, a);
        for (int b = a + 1; b < nn && !bad; b++) {
            if (first[b] == -2 || last[a] < first[b] || last[b] < first[a]) continue;
            size_t b0 = p->loc[b].offset, b1 = b0 + sn_plan_value_bytes(p, b);
            if (a1 <= b0 || b1 <= a0 || a0 == a1 || b0 == b1) continue;
            /* a call writing its output over the input that dies there */
            int c = first[b] >= first[a] ? first[b] : first[a];
            sn_node older = first[b] >= first[a] ? a : b, newer = older == a ? b : a;
            if (c >= 0 && p->order[c] == newer && last[older] == c && a0 == b0 &&
                p->kern[c]->overwrite_input > 0)
                continue;
            bad = 1;
            CHECK(false, "%s: values %d (%s, calls %d..%d, bytes %zu..%zu) and %d (%s, calls "
                  "%d..%d, bytes %zu..%zu) are live together and overlap", what, a,
                  sn_ops[g->nodes[a].op]->name, first[a], last[a], a0, a1, b,
                  sn_ops[g->nodes[b].op]->name, first[b], last[b], b0, b1);
        }
    }
    CHECK(!bad, "%s: no two values live together share bytes", what);
    for (int c = 0; c < total && !bad; c++) {
        size_t s0 = p->scratch_off[c], s1 = s0 + p->scratch_need[c];
        if (s0 == s1) continue;
        if (s1 > p->arena_bytes) {
            bad = 1;
            CHECK(false, "%s: call %d's scratch (bytes %zu..%zu) ends past the arena (%zu)",
                  what, c, s0, s1, p->arena_bytes);
        }
        for (int a = 0; a < nn && !bad; a++) {
            if (first[a] == -2 || c < first[a] || c > last[a]) continue;
            size_t a0 = p->loc[a].offset, a1 = a0 + sn_plan_value_bytes(p, a);
            if (a1 <= s0 || s1 <= a0 || a0 == a1) continue;
            bad = 1;
            CHECK(false, "%s: call %d's scratch (bytes %zu..%zu) overlaps value %d (%s, calls "
                  "%d..%d, bytes %zu..%zu)", what, c, s0, s1, a, sn_ops[g->nodes[a].op]->name,
                  first[a], last[a], a0, a1);
        }
    }
    CHECK(!bad, "%s: no call's scratch shares bytes with a value live at that call", what);
    free(first);
    free(last);
}

#endif
