/* Checked allocation and arenas. Every allocation failure becomes SN_ERR_NOMEM with the size,
 * so the caller can return a status instead of crashing. */
#include <string.h>
#include <time.h>

#include "core/core.h"

void *sn_malloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) sn_errorf(SN_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *sn_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) sn_errorf(SN_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *sn_realloc(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) sn_errorf(SN_ERR_NOMEM, "out of memory growing a buffer to %zu bytes", bytes);
    return q;
}

void *sn_malloc_aligned(size_t bytes) {
    void *p = NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0) {
        sn_errorf(SN_ERR_NOMEM, "out of memory allocating %zu aligned bytes", bytes);
        return NULL;
    }
    return p;
}

void sn_free_aligned(void *p) { free(p); }

char *sn_strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = sn_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ---- arena ----------------------------------------------------------------------------- */
typedef struct sn_chunk {
    struct sn_chunk *next;
    size_t cap, used;
    unsigned char *mem;
} sn_chunk;

struct sn_arena {
    sn_chunk *head;
    size_t chunk_bytes;
};

static sn_chunk *chunk_new(size_t cap) {
    sn_chunk *c = sn_malloc(sizeof *c);
    if (!c) return NULL;
    c->mem = sn_malloc_aligned(cap);
    if (!c->mem) {
        free(c);
        return NULL;
    }
    c->next = NULL;
    c->cap = cap;
    c->used = 0;
    return c;
}

sn_arena *sn_arena_new(size_t chunk_bytes) {
    sn_arena *a = sn_calloc(1, sizeof *a);
    if (!a) return NULL;
    a->chunk_bytes = chunk_bytes ? chunk_bytes : (1u << 20);
    return a;
}

void *sn_arena_alloc(sn_arena *a, size_t bytes) {
    size_t need = (bytes + 63) & ~(size_t)63;
    if (!a->head || a->head->used + need > a->head->cap) {
        sn_chunk *c = chunk_new(need > a->chunk_bytes ? need : a->chunk_bytes);
        if (!c) return NULL;
        c->next = a->head;
        a->head = c;
    }
    void *p = a->head->mem + a->head->used;
    a->head->used += need;
    return p;
}

void sn_arena_reset(sn_arena *a) {
    /* Keep the oldest chunk (the tail) so a step-scoped arena stops allocating after step 1. */
    sn_chunk *c = a->head;
    while (c && c->next) {
        sn_chunk *n = c->next;
        sn_free_aligned(c->mem);
        free(c);
        c = n;
    }
    a->head = c;
    if (c) c->used = 0;
}

void sn_arena_free(sn_arena *a) {
    if (!a) return;
    sn_chunk *c = a->head;
    while (c) {
        sn_chunk *n = c->next;
        sn_free_aligned(c->mem);
        free(c);
        c = n;
    }
    free(a);
}

double sn_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
