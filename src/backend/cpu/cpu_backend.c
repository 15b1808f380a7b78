/* The CPU backend: one per logical CPU device (backend/device.c), each running its kernels on
 * its share of the cores. Device memory is host memory, so allocation is the 64-byte aligned
 * allocator and every copy is memcpy; kernels run at once on the calling thread's OpenMP team,
 * so there is no stream object and synchronize has nothing to wait for. The kernel table is
 * the CPU table (reference rows overridden by backend/cpu/; SN_KERNELS=ref keeps the
 * reference).
 *
 * Logical devices: the CPU split into N logical devices, as TensorFlow's
 * tf.config.set_logical_device_configuration does. Each logical device gets its share of the
 * thread budget (sn_num_threads(): SN_NUM_THREADS, else all cores): max(1, cores / n), the
 * first cores % n devices one more, so the shares add up to the cores. With more devices than
 * cores every device gets one thread and devices share cores round-robin (device i runs on
 * core i % cores when replicas run at once): they are logical, for placement and replication,
 * not a promise of dedicated hardware.
 *
 * The configuration is process-wide and, as in TensorFlow, meant to be set once before the
 * devices are used; it is not thread-safe against concurrent lookups. */
#include <pthread.h>
#include <string.h>

#include "backend/backend_impl.h"

/* 0 = not configured: one CPU device with the whole team. */
static int g_cpu_devices = 0;

sn_status sn_device_configure_cpu(int n) {
    if (n < 1 || n > SN_MAX_LOGICAL_DEVICES)
        return sn_errorf(SN_ERR_INVALID, "configure_cpu: %d logical CPU devices requested; "
                         "expected 1 to %d", n, SN_MAX_LOGICAL_DEVICES);
    g_cpu_devices = n;
    return SN_OK;
}

int sn_device_count_cpu(void) { return g_cpu_devices > 0 ? g_cpu_devices : 1; }
bool sn_cpu_devices_configured(void) { return g_cpu_devices > 0; }

int sn_cpu_device_threads(int i) {
    int n = sn_device_count_cpu(), cores = sn_num_threads();
    if (i < 0 || i >= n) return 0;
    if (n >= cores) return 1;
    return cores / n + (i < cores % n ? 1 : 0);
}

static sn_backend_caps cpu_caps(const sn_backend *b) {
    return (sn_backend_caps){
        .host_visible = true,
        .dtypes = 1u << SN_F32 | 1u << SN_F64 | 1u << SN_BF16 | 1u << SN_I32 | 1u << SN_U8,
        .memory_bytes = 0,
        .threads = sn_cpu_device_threads(b->index),
    };
}

static void *cpu_alloc(sn_backend *b, size_t bytes) {
    (void)b;
    void *p = sn_malloc_aligned(bytes ? bytes : 64);
    if (p) memset(p, 0, bytes);
    return p;
}

static void cpu_free(sn_backend *b, void *p) {
    (void)b;
    sn_free_aligned(p);
}

static sn_status cpu_copy_in(sn_backend *b, void *dst, const void *src, size_t bytes) {
    (void)b;
    memmove(dst, src, bytes);
    return SN_OK;
}

/* Any host-visible source: a CPU device, or a device whose memory the host can read. Others
 * are staged by the wrapper (iface.copy == NULL would stage all), so ask the source. */
static sn_status cpu_copy(sn_backend *to, void *dst, sn_backend *from, const void *src,
                          size_t bytes) {
    (void)to;
    if (from->iface->caps(from).host_visible) {
        memmove(dst, src, bytes);
        return SN_OK;
    }
    return sn_backend_copy_to_host(from, dst, src, bytes);
}

/* Logical device i runs on its share of the cores (all of them when the CPU is one device);
 * oneDNN primitives prepared inside the bracket are sized for that share. */
static int cpu_enter(sn_backend *b) { return sn_threads_enter(sn_cpu_device_threads(b->index)); }
static void cpu_leave(sn_backend *b, int token) {
    (void)b;
    sn_threads_leave(token);
}

static sn_status cpu_synchronize(sn_backend *b) {
    (void)b;
    return SN_OK;
}

static const sn_kernel_table *cpu_kernels(sn_backend *b) {
    (void)b;
    return sn_cpu_kernels();
}

static const sn_backend_iface cpu_iface = {
    .type = "CPU",
    .caps = cpu_caps,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy_to_device = cpu_copy_in,
    .copy_to_host = cpu_copy_in,
    .copy = cpu_copy,
    .enter = cpu_enter,
    .leave = cpu_leave,
    .stream = NULL,
    .synchronize = cpu_synchronize,
    .kernels = cpu_kernels,
};

/* Handles for every possible logical device, filled once; the thread share is read at enter
 * time, so sn_device_configure_cpu needs no rebuild of them. */
static sn_backend cpu_backends[SN_MAX_LOGICAL_DEVICES];
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

static void cpu_backends_init(void) {
    for (int i = 0; i < SN_MAX_LOGICAL_DEVICES; i++)
        sn_backend_init(&cpu_backends[i], &cpu_iface, SN_DEVICE_CPU, i, NULL);
}

static sn_backend *cpu_backend(int i) {
    pthread_once(&cpu_once, cpu_backends_init);
    return &cpu_backends[i];
}

const sn_device_provider sn_cpu_device_provider = {
    .kind = SN_DEVICE_CPU,
    .count = sn_device_count_cpu,
    .backend = cpu_backend,
};
