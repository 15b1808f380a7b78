/* A device as a backend: memory, a stream to run on, and a kernel table, behind one vtable.
 *
 * This is sinter's ggml_backend (or oneDNN's engine + stream pair). Everything above the
 * backend layer — the planner and executor (graph/plan*.c), eager sn_eval, fit and the
 * distribution strategies — reaches kernels and device memory only through an sn_backend.
 * Each logical device of the registry (backend/device.c: "CPU:0", "GPU:1", ...) is one
 * backend; sn_device_backend(i) hands it out.
 *
 * Implementations: the CPU backend (backend/cpu/cpu_backend.c) — one per logical CPU device,
 * each owning a share of the cores — and, where CUDA is built, the CUDA backend
 * (backend/cuda/). An implementation fills an sn_backend_iface (backend_impl.h); callers use
 * only the functions below.
 *
 * Memory. sn_backend_alloc returns zero-filled device memory, aligned to at least 64 bytes.
 * When the backend's memory is host-visible (caps.host_visible: the CPU), the host may read
 * and write it directly and the copies are memcpy. Otherwise (a GPU) the host moves data only
 * with the copy functions; the planner then keeps host shadows of inputs, targets and
 * variables and moves them around each run (graph/plan.c says when).
 *
 * Ordering. Work on a backend runs in order on its stream: kernel runs (the executor calls
 * kernel->run with sn_kcall.stream = sn_backend_stream(b)) and copies are ordered with each
 * other. sn_backend_synchronize waits until everything issued so far has finished; a copy to
 * the host returns with the data in place (it synchronises what it needs). The CPU backend
 * runs everything at once on the calling thread, so its synchronize does nothing.
 *
 * Threads. A host thread that runs work on a backend brackets it with sn_backend_enter /
 * sn_backend_leave: the CPU backend sets the calling thread's team to its share of the cores
 * (sn_threads_enter), which also sizes the oneDNN primitives prepared inside the bracket; a
 * GPU backend makes its device current.
 *
 * Lifetime: backends of the device registry live for the process; nothing here frees them.
 * All functions are safe to call from several threads on different backends; on one backend,
 * calls from several threads must not overlap (as a CUDA stream or a oneDNN stream). */
#ifndef SN_BACKEND_BACKEND_H
#define SN_BACKEND_BACKEND_H

#include "backend/kernel.h"
#include "sinter/device.h"

typedef struct sn_backend sn_backend;

/* What a backend offers; constant over its life. */
typedef struct sn_backend_caps {
    /* Device memory is host memory: the host may dereference what sn_backend_alloc returned. */
    bool host_visible;
    /* Bit (1u << dtype) for every sn_dtype its kernels compute in (SN_F32, SN_BF16, ...). */
    uint32_t dtypes;
    /* Bytes of device memory it may allocate, 0 when it shares host memory. */
    long long memory_bytes;
    /* Threads of the host it runs kernels on (the CPU backend's share), 0 for none. */
    int threads;
} sn_backend_caps;

/* ---- identity ---------------------------------------------------------------------------- */
/* The full TensorFlow-style name, "/job:localhost/replica:0/task:0/device:CPU:0". */
const char *sn_backend_name(const sn_backend *b);
/* TensorFlow's device type: "CPU" or "GPU". */
const char *sn_backend_type(const sn_backend *b);
sn_device_kind sn_backend_kind(const sn_backend *b);
/* The device's index within its kind (CPU:<index>). */
int sn_backend_index(const sn_backend *b);
sn_backend_caps sn_backend_get_caps(const sn_backend *b);

/* ---- memory ------------------------------------------------------------------------------ */
/* bytes of zero-filled device memory (at least 64-byte aligned; bytes == 0 gives a valid
 * minimal block). NULL with SN_ERR_NOMEM recorded (sn_last_error names the device and size).
 * Free with sn_backend_free on the same backend. */
void *sn_backend_alloc(sn_backend *b, size_t bytes);
void sn_backend_free(sn_backend *b, void *p);
/* Host <-> device and device <-> device copies of `bytes` bytes, ordered on the stream.
 * copy_to_host returns once dst holds the data. Failures (a CUDA error) return a status. */
sn_status sn_backend_copy_to_device(sn_backend *b, void *dst, const void *host_src, size_t bytes);
sn_status sn_backend_copy_to_host(sn_backend *b, void *host_dst, const void *src, size_t bytes);
/* From src (memory of backend `from`) to dst (memory of backend `to`); the two may be the same
 * backend or different devices. */
sn_status sn_backend_copy(sn_backend *to, void *dst, sn_backend *from, const void *src,
                          size_t bytes);

/* ---- running ----------------------------------------------------------------------------- */
/* Makes the calling thread run on b until sn_backend_leave (see Threads above); returns what
 * leave needs to restore. Brackets nest. */
int sn_backend_enter(sn_backend *b);
void sn_backend_leave(sn_backend *b, int token);
/* The stream the backend's kernels run on, passed to them as sn_kcall.stream (NULL on the
 * CPU: its kernels run at once on the entered team). */
void *sn_backend_stream(sn_backend *b);
/* Waits for everything issued on b so far; returns the first asynchronous failure. */
sn_status sn_backend_synchronize(sn_backend *b);

/* ---- recorded steps (a CUDA graph) ------------------------------------------------------- */
/* steps_per_execution on a device with a stream: the executor records one step's kernel runs
 * once (capture_begin .. capture_end: issued but not run) and replays the recording once per
 * step, so a step costs one launch, not one per kernel. A recording keeps the kernels'
 * arguments as they were when recorded (buffers, attributes, the step counter), so the
 * executor records again when an attribute changes and never records a plan whose kernels read
 * the step counter (exec.c). A kernel run inside a capture must not synchronise. */
bool sn_backend_can_capture(const sn_backend *b);
sn_status sn_backend_capture_begin(sn_backend *b);
sn_status sn_backend_capture_end(sn_backend *b, void **graph);
sn_status sn_backend_replay(sn_backend *b, void *graph);
void sn_backend_graph_free(sn_backend *b, void *graph);

/* ---- kernels ----------------------------------------------------------------------------- */
/* The backend's kernel table (see kernel.h). */
const sn_kernel_table *sn_backend_kernels(sn_backend *b);
/* The kernel that runs call c on b (the table's row, else the reference row where the backend
 * runs reference kernels, i.e. host-visible memory), or NULL when b cannot run it. */
const sn_kernel *sn_backend_select(sn_backend *b, const sn_kcall *c);
/* Whether b runs ops of this kind on these dtypes and shapes at all (sn_backend_select != NULL). */
bool sn_backend_supports(sn_backend *b, const sn_kcall *c);
bool sn_backend_supports_dtype(const sn_backend *b, sn_dtype t);

/* ---- the device registry (backend/device.c; the public half is include/sinter/device.h) --- */
/* The backend of device i of the registry (sn_device_count(), sn_device_find), or NULL when i
 * is out of range. The CPU backends follow sn_device_configure_cpu: CPU:i gets
 * sn_device_threads(i) threads. */
sn_backend *sn_device_backend(int i);
/* The backend of a device name (sn_device_find's forms; NULL or "" = device 0). */
sn_status sn_backend_find(const char *name, sn_backend **out);

#endif
