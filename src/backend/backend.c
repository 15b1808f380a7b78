/* The sn_backend wrappers (backend.h): argument checks and error text in one place, then the
 * implementation's vtable (backend_impl.h). */
#include <string.h>

#include "backend/backend_impl.h"

void sn_backend_init(sn_backend *b, const sn_backend_iface *iface, sn_device_kind kind,
                     int index, void *ctx) {
    b->iface = iface;
    b->kind = kind;
    b->index = index;
    b->ctx = ctx;
    snprintf(b->name, sizeof b->name, "/job:localhost/replica:0/task:0/device:%s:%d",
             iface->type, index);
}

const char *sn_backend_name(const sn_backend *b) { return b ? b->name : ""; }
const char *sn_backend_type(const sn_backend *b) { return b ? b->iface->type : ""; }
sn_device_kind sn_backend_kind(const sn_backend *b) { return b ? b->kind : SN_DEVICE_CPU; }
int sn_backend_index(const sn_backend *b) { return b ? b->index : -1; }

sn_backend_caps sn_backend_get_caps(const sn_backend *b) {
    if (!b) return (sn_backend_caps){0};
    return b->iface->caps(b);
}

void *sn_backend_alloc(sn_backend *b, size_t bytes) {
    if (!b) {
        sn_errorf(SN_ERR_INVALID, "backend_alloc: backend is NULL");
        return NULL;
    }
    void *p = b->iface->alloc(b, bytes);
    if (!p) sn_error_context(SN_ERR_NOMEM, "allocating %zu bytes on %s", bytes, b->name);
    return p;
}

void sn_backend_free(sn_backend *b, void *p) {
    if (b && p) b->iface->free(b, p);
}

sn_status sn_backend_copy_to_device(sn_backend *b, void *dst, const void *host_src,
                                    size_t bytes) {
    if (!b || ((!dst || !host_src) && bytes))
        return sn_errorf(SN_ERR_INVALID, "backend copy to device: NULL %s",
                         !b ? "backend" : "pointer");
    if (!bytes) return SN_OK;
    return b->iface->copy_to_device(b, dst, host_src, bytes);
}

sn_status sn_backend_copy_to_host(sn_backend *b, void *host_dst, const void *src, size_t bytes) {
    if (!b || ((!host_dst || !src) && bytes))
        return sn_errorf(SN_ERR_INVALID, "backend copy to host: NULL %s",
                         !b ? "backend" : "pointer");
    if (!bytes) return SN_OK;
    return b->iface->copy_to_host(b, host_dst, src, bytes);
}

sn_status sn_backend_copy(sn_backend *to, void *dst, sn_backend *from, const void *src,
                          size_t bytes) {
    if (!to || !from || ((!dst || !src) && bytes))
        return sn_errorf(SN_ERR_INVALID, "backend copy: NULL %s",
                         !to || !from ? "backend" : "pointer");
    if (!bytes) return SN_OK;
    if (to->iface->copy) return to->iface->copy(to, dst, from, src, bytes);
    /* No direct path: stage through host memory (correct for any pair, not fast). */
    void *tmp = sn_malloc_aligned(bytes);
    if (!tmp) return SN_ERR_NOMEM;
    sn_status s = sn_backend_copy_to_host(from, tmp, src, bytes);
    if (s == SN_OK) s = sn_backend_copy_to_device(to, dst, tmp, bytes);
    sn_free_aligned(tmp);
    return s;
}

int sn_backend_enter(sn_backend *b) { return b ? b->iface->enter(b) : 0; }
void sn_backend_leave(sn_backend *b, int token) {
    if (b) b->iface->leave(b, token);
}

void *sn_backend_stream(sn_backend *b) {
    return b && b->iface->stream ? b->iface->stream(b) : NULL;
}

sn_status sn_backend_synchronize(sn_backend *b) {
    if (!b) return sn_errorf(SN_ERR_INVALID, "backend_synchronize: backend is NULL");
    return b->iface->synchronize(b);
}

const sn_kernel_table *sn_backend_kernels(sn_backend *b) {
    return b ? b->iface->kernels(b) : NULL;
}

const sn_kernel *sn_backend_select(sn_backend *b, const sn_kcall *c) {
    if (!b || !c || (unsigned)c->op >= SN_OP_COUNT) return NULL;
    /* The reference kernels dereference their buffers on the host: they are a fallback only
     * where device memory is host memory. */
    if (b->iface->caps(b).host_visible || c->fused) return sn_kernel_select(sn_backend_kernels(b), c);
    const sn_kernel *k = sn_backend_kernels(b)->k[c->op];
    return k && (k->supports == NULL || k->supports(c)) ? k : NULL;
}

bool sn_backend_supports(sn_backend *b, const sn_kcall *c) {
    return sn_backend_select(b, c) != NULL;
}

bool sn_backend_supports_dtype(const sn_backend *b, sn_dtype t) {
    return b && (unsigned)t < 32 && (b->iface->caps(b).dtypes >> (unsigned)t & 1u);
}

bool sn_backend_can_capture(const sn_backend *b) {
    return b && b->iface->capture_begin && b->iface->capture_end && b->iface->replay &&
           b->iface->graph_free;
}

sn_status sn_backend_capture_begin(sn_backend *b) {
    if (!sn_backend_can_capture(b))
        return sn_errorf(SN_ERR_UNSUPPORTED, "%s cannot record steps", b ? b->name : "(NULL backend)");
    return b->iface->capture_begin(b);
}

sn_status sn_backend_capture_end(sn_backend *b, void **graph) {
    if (!graph) return sn_errorf(SN_ERR_INVALID, "backend_capture_end: graph is NULL");
    *graph = NULL;
    if (!sn_backend_can_capture(b))
        return sn_errorf(SN_ERR_UNSUPPORTED, "%s cannot record steps", b ? b->name : "(NULL backend)");
    return b->iface->capture_end(b, graph);
}

sn_status sn_backend_replay(sn_backend *b, void *graph) {
    if (!sn_backend_can_capture(b) || !graph)
        return sn_errorf(SN_ERR_INVALID, "backend_replay: no %s", graph ? "recording backend" : "graph");
    return b->iface->replay(b, graph);
}

void sn_backend_graph_free(sn_backend *b, void *graph) {
    if (graph && sn_backend_can_capture(b)) b->iface->graph_free(b, graph);
}
