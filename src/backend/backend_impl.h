/* For implementers of a backend (backend/cpu/cpu_backend.c, backend/cuda/): the vtable behind
 * the sn_backend handle and the device providers that fill the registry. Users of a backend
 * include backend/backend.h only. */
#ifndef SN_BACKEND_IMPL_H
#define SN_BACKEND_IMPL_H

#include "backend/backend.h"

/* One function per operation of backend.h; the wrappers in backend/backend.c check arguments
 * and record errors, so an implementation may assume a valid handle and non-NULL pointers. */
typedef struct sn_backend_iface {
    const char *type; /* TensorFlow's device type: "CPU", "GPU" */
    sn_backend_caps (*caps)(const sn_backend *b);
    /* Zero-filled, >= 64-byte aligned; NULL with SN_ERR_NOMEM recorded on failure. */
    void *(*alloc)(sn_backend *b, size_t bytes);
    void (*free)(sn_backend *b, void *p);
    sn_status (*copy_to_device)(sn_backend *b, void *dst, const void *host_src, size_t bytes);
    sn_status (*copy_to_host)(sn_backend *b, void *host_dst, const void *src, size_t bytes);
    /* Device to device, called on the destination's iface. from may be another backend (of
     * any kind); NULL: the wrapper stages the bytes through host memory. */
    sn_status (*copy)(sn_backend *to, void *dst, sn_backend *from, const void *src,
                      size_t bytes);
    int (*enter)(sn_backend *b);
    void (*leave)(sn_backend *b, int token);
    void *(*stream)(sn_backend *b);  /* NULL allowed: no stream object */
    sn_status (*synchronize)(sn_backend *b);
    const sn_kernel_table *(*kernels)(sn_backend *b);
    /* Optional, all four or none (backend.h, "Recorded steps"): what is issued on the stream
     * between capture_begin and capture_end is recorded, not run, as an opaque graph that
     * replay issues again, with the arguments it was recorded with. */
    sn_status (*capture_begin)(sn_backend *b);
    sn_status (*capture_end)(sn_backend *b, void **graph);
    sn_status (*replay)(sn_backend *b, void *graph);
    void (*graph_free)(sn_backend *b, void *graph);
} sn_backend_iface;

struct sn_backend {
    const sn_backend_iface *iface;
    sn_device_kind kind;
    int index;       /* within its kind */
    char name[96];   /* "/job:localhost/replica:0/task:0/device:CPU:0" */
    void *ctx;       /* the implementation's own (CUDA: device, stream, handles) */
};

/* Fills b's identity fields: kind, index and the TensorFlow-style name of device type:index. */
void sn_backend_init(sn_backend *b, const sn_backend_iface *iface, sn_device_kind kind,
                     int index, void *ctx);

/* A provider lists the devices of one kind to the registry (backend/device.c). The registry
 * numbers devices kind by kind: every CPU device first, then every GPU. */
typedef struct sn_device_provider {
    sn_device_kind kind;
    int (*count)(void);                 /* devices of this kind in this process */
    sn_backend *(*backend)(int index);  /* index < count(); lives for the process */
} sn_device_provider;

/* The logical CPU devices (backend/cpu/cpu_backend.c). */
extern const sn_device_provider sn_cpu_device_provider;
/* How many logical CPU devices there are, whether sn_device_configure_cpu set it, and the
 * threads of CPU:i (backend/cpu/cpu_backend.c, which owns the logical CPU configuration). */
int sn_device_count_cpu(void);
bool sn_cpu_devices_configured(void);
int sn_cpu_device_threads(int i);
/* A GPU provider, where CUDA is built, is listed in device.c under SN_HAVE_CUDA. */

#endif
