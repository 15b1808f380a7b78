/* Memory that plans take turns with (graph.h: sn_plan_memory).
 *
 * A traced Python function makes one plan per replica, and a program like the guide holds
 * several such functions beside fit's plans: each plan's arena is sized for its whole step
 * (the guide's CNN: ~390 MB a replica), and the functions never run at the same time. Plans
 * made with one sn_plan_memory place their arena (kernel scratch included, plan_arena.c) in
 * the same block, grown to the largest plan's need; a plan whose block moved rebinds its
 * pointers at its next run (sn_plan_stale compares the generation). */
#include <stdatomic.h>

#include "graph/plan_impl.h"

struct sn_plan_memory {
    sn_backend *backend; /* the device of its first plan: every plan of it must share it */
    unsigned char *arena;
    size_t arena_bytes;
    uint64_t gen;     /* bumped whenever the block moves */
    atomic_int refs;  /* the owner's, plus one for each plan made with it */
};

sn_plan_memory *sn_plan_memory_new(void) {
    sn_plan_memory *m = sn_calloc(1, sizeof *m);
    if (!m) {
        sn_errorf(SN_ERR_NOMEM, "plan_memory_new: out of memory");
        return NULL;
    }
    atomic_init(&m->refs, 1);
    m->gen = 1;
    return m;
}

void sn_plan_memory_release(sn_plan_memory *m) {
    if (!m || atomic_fetch_sub(&m->refs, 1) != 1) return;
    if (m->backend) sn_backend_free(m->backend, m->arena);
    free(m);
}

void sn_plan_memory_free(sn_plan_memory *m) { sn_plan_memory_release(m); }

size_t sn_plan_memory_size(const sn_plan_memory *m) {
    return m ? m->arena_bytes : 0;
}

/* Grows the block to at least `need` bytes. The old contents are not kept: a plan's arena
 * holds nothing across runs that its caller does not feed again (the contract in graph.h). */
static sn_status grow(sn_backend *be, void **block, size_t *bytes, size_t need, uint64_t *gen) {
    if (need <= *bytes) return SN_OK;
    void *b = sn_backend_alloc(be, need);
    if (!b) return sn_errorf(SN_ERR_NOMEM, "plan memory: cannot allocate %zu bytes", need);
    sn_backend_free(be, *block);
    *block = b;
    *bytes = need;
    (*gen)++;
    return SN_OK;
}

sn_status sn_plan_memory_attach(sn_plan *p, sn_plan_memory *m, size_t arena) {
    if (m->backend && m->backend != p->backend)
        return sn_errorf(SN_ERR_INVALID, "plan memory: shared by a plan on %s and one on %s; the "
                         "plans of one sn_plan_memory must be on one device",
                         sn_backend_name(m->backend), sn_backend_name(p->backend));
    m->backend = p->backend;
    void *a = m->arena;
    SN_TRY(grow(p->backend, &a, &m->arena_bytes, arena, &m->gen));
    m->arena = a;
    atomic_fetch_add(&m->refs, 1);
    p->memory = m;
    sn_plan_memory_rebind(p);
    return SN_OK;
}

void sn_plan_memory_rebind(sn_plan *p) {
    p->arena = p->memory->arena;
    p->memory_gen = p->memory->gen;
}

uint64_t sn_plan_memory_gen(const sn_plan_memory *m) { return m->gen; }
