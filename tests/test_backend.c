/* The backend interface (src/backend/backend.h) on its first implementation, the CPU backend:
 * the registry hands out one backend per logical device with TF-style names and a share of the
 * cores; memory comes zero-filled and aligned; copies move bytes between host and devices and
 * between two devices; the bracket sets the calling thread's team and restores it; the kernel
 * choice falls back to the reference row; and a plan reaches its device through it — also on
 * a device whose memory the host may not address (a stand-in for a GPU: the CPU's kernels on
 * memory the planner must treat as the device's), where a training step must give the same
 * bits as on the CPU. */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_impl.h"
#include "graph/plan_impl.h"
#include "sinter/device.h"
#include "sinter/graph.h"
#include "sn_test.h"

static void test_registry(void) {
    sn_set_num_threads(2);
    CHECK_OK(sn_device_configure_cpu(3));
    CHECK(sn_device_count() == 3, "count %d", sn_device_count());
    int total = 0;
    for (int i = 0; i < 3; i++) {
        sn_backend *b = sn_device_backend(i);
        CHECK(b != NULL, "device %d has no backend", i);
        if (!b) continue;
        char want[96];
        snprintf(want, sizeof want, "/job:localhost/replica:0/task:0/device:CPU:%d", i);
        CHECK(!strcmp(sn_backend_name(b), want), "name %s, want %s", sn_backend_name(b), want);
        CHECK(!strcmp(sn_backend_type(b), "CPU"), "type %s", sn_backend_type(b));
        CHECK(sn_backend_kind(b) == SN_DEVICE_CPU && sn_backend_index(b) == i, "kind/index");
        sn_backend_caps caps = sn_backend_get_caps(b);
        CHECK(caps.host_visible, "CPU memory is host memory");
        CHECK(caps.threads == 1, "3 devices on 2 threads: device %d has %d", i, caps.threads);
        CHECK(caps.threads == sn_device_threads(i), "caps and registry agree");
        total += caps.threads;
        sn_backend *f = NULL;
        CHECK_OK(sn_backend_find(want, &f));
        CHECK(f == b, "find(%s) gives the registry's backend", want);
    }
    CHECK(total == 3, "one thread each when devices outnumber cores: %d", total);
    CHECK(sn_device_backend(3) == NULL && sn_device_backend(-1) == NULL, "out of range");
    sn_backend *f = NULL;
    CHECK_ERR(sn_backend_find("cpu:3", &f), SN_ERR_NOT_FOUND, "3 logical device(s)");
    CHECK(f == NULL, "a failed find leaves NULL");
    CHECK_ERR(sn_backend_find("gpu:0", &f), SN_ERR_NOT_FOUND, "no GPU");
    CHECK_OK(sn_device_configure_cpu(2));
    CHECK(sn_device_threads(0) == 1 && sn_device_threads(1) == 1, "2 cores over 2 devices");
    CHECK_OK(sn_device_configure_cpu(1));
    CHECK(sn_backend_get_caps(sn_device_backend(0)).threads == 2, "one device owns both cores");
}

static void test_memory(void) {
    CHECK_OK(sn_device_configure_cpu(2));
    sn_backend *a = sn_device_backend(0), *b = sn_device_backend(1);
    enum { N = 1000 };
    unsigned char *pa = sn_backend_alloc(a, N), *pb = sn_backend_alloc(b, N);
    CHECK(pa && pb, "alloc: %s", sn_last_error());
    if (!pa || !pb) return;
    CHECK(((uintptr_t)pa & 63) == 0 && ((uintptr_t)pb & 63) == 0, "64-byte aligned");
    int nonzero = 0;
    for (int i = 0; i < N; i++) nonzero += pa[i] != 0 || pb[i] != 0;
    CHECK(nonzero == 0, "%d bytes not zero-filled", nonzero);
    unsigned char host[N], back[N];
    for (int i = 0; i < N; i++) host[i] = (unsigned char)(i * 7 + 1);
    CHECK_OK(sn_backend_copy_to_device(a, pa, host, N));
    CHECK_OK(sn_backend_copy(b, pb, a, pa, N));
    memset(back, 0, N);
    CHECK_OK(sn_backend_copy_to_host(b, back, pb, N));
    CHECK(!memcmp(back, host, N), "host -> CPU:0 -> CPU:1 -> host changed the bytes");
    CHECK_OK(sn_backend_copy_to_host(a, back, pa, 0)); /* zero bytes: nothing to do */
    CHECK_ERR(sn_backend_copy_to_host(a, NULL, pa, 4), SN_ERR_INVALID, "NULL pointer");
    void *z = sn_backend_alloc(a, 0);
    CHECK(z != NULL, "a zero-byte allocation is a valid block");
    sn_backend_free(a, z);
    sn_backend_free(a, pa);
    sn_backend_free(b, pb);
    sn_backend_free(a, NULL); /* allowed, as free(NULL) */
    CHECK(sn_backend_alloc(NULL, 8) == NULL, "alloc on no backend");
    CHECK_OK(sn_device_configure_cpu(1));
}

static void test_running(void) {
    sn_set_num_threads(2);
    CHECK_OK(sn_device_configure_cpu(2));
    sn_backend *b = sn_device_backend(1);
    int before = omp_get_max_threads();
    int tok = sn_backend_enter(b);
    CHECK(omp_get_max_threads() == 1, "inside CPU:1's bracket: %d threads", omp_get_max_threads());
    sn_backend_leave(b, tok);
    CHECK(omp_get_max_threads() == before, "restored: %d, was %d", omp_get_max_threads(), before);
    CHECK(sn_backend_stream(b) == NULL, "the CPU has no stream object");
    CHECK_OK(sn_backend_synchronize(b));
    CHECK(sn_backend_supports_dtype(b, SN_F32) && sn_backend_supports_dtype(b, SN_BF16) &&
              sn_backend_supports_dtype(b, SN_I32),
          "CPU dtypes");
    CHECK(sn_backend_kernels(b) == sn_cpu_kernels(), "the CPU backend's table");
    /* An add of f64 has a reference row at least; a leaf has no kernel anywhere. */
    sn_attrs at = {0};
    sn_kcall c = {.op = SN_OP_ADD, .attr = &at, .n_in = 2};
    sn_shape s = {.ndim = 1, .dim = {4}};
    c.y = c.x[0] = c.x[1] = (sn_tdesc){.dtype = SN_F64, .shape = s};
    CHECK(sn_backend_supports(b, &c), "f64 add runs on the CPU (reference row)");
    c.op = SN_OP_INPUT;
    CHECK(!sn_backend_supports(b, &c) && sn_backend_select(b, &c) == NULL, "a leaf is no kernel");
    CHECK_OK(sn_device_configure_cpu(1));
}

/* A plan allocates its arena on its device and reports the device's name; eager evaluation
 * copies its result back through the backend. */
static void test_plan_on_backend(void) {
    CHECK_OK(sn_device_configure_cpu(2));
    sn_graph *g = sn_graph_new();
    sn_shape s = {.ndim = 1, .dim = {3}};
    sn_node x = sn_input(g, "x", SN_F32, &s);
    sn_node y = sn_relu(g, sn_add(g, x, x));
    sn_plan_opts o = sn_plan_opts_defaults();
    o.device = "cpu:1";
    sn_plan *p = NULL;
    CHECK_OK(sn_plan_new(&p, g, 1, &y, &o));
    if (p) {
        CHECK(!strcmp(sn_plan_device(p), "/job:localhost/replica:0/task:0/device:CPU:1"),
              "plan device %s", sn_plan_device(p));
        float in[3] = {1.0f, -2.0f, 3.5f};
        CHECK_OK(sn_plan_set_input(p, x, in, sizeof in));
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        const float *r = sn_plan_buffer(p, y);
        CHECK(r && r[0] == 2.0f && r[1] == 0.0f && r[2] == 7.0f, "relu(x + x)");
        sn_plan_free(p);
    }
    sn_node k = sn_mul(g, sn_scalar(g, SN_F32, 3.0), sn_scalar(g, SN_F32, 0.5));
    sn_tensor *t = NULL;
    CHECK_OK(sn_eval(g, k, "/device:CPU:1", &t));
    CHECK(t && ((const float *)sn_tensor_cdata(t))[0] == 1.5f, "eager 3 * 0.5 on CPU:1");
    sn_tensor_free(t);
    CHECK_ERR(sn_eval(g, k, "cpu:2", &t), SN_ERR_NOT_FOUND, "does not exist");
    sn_graph_free(g);
    CHECK_OK(sn_device_configure_cpu(1));
}

/* ---- a device with its own memory ---------------------------------------------------------- */
static int fake_uploads, fake_downloads;
static sn_backend_caps fake_caps(const sn_backend *b) {
    (void)b;
    return (sn_backend_caps){.host_visible = false, .dtypes = 1u << SN_F32 | 1u << SN_I32,
                             .memory_bytes = 1 << 30, .threads = 0};
}
static void *fake_alloc(sn_backend *b, size_t bytes) {
    (void)b;
    void *p = sn_malloc_aligned(bytes ? bytes : 64);
    if (p) memset(p, 0, bytes);
    return p;
}
static void fake_free(sn_backend *b, void *p) {
    (void)b;
    sn_free_aligned(p);
}
static sn_status fake_to_device(sn_backend *b, void *dst, const void *src, size_t n) {
    (void)b;
    fake_uploads++;
    memcpy(dst, src, n);
    return SN_OK;
}
static sn_status fake_to_host(sn_backend *b, void *dst, const void *src, size_t n) {
    (void)b;
    fake_downloads++;
    memcpy(dst, src, n);
    return SN_OK;
}
static int fake_enter(sn_backend *b) {
    (void)b;
    return sn_threads_enter(0);
}
static void fake_leave(sn_backend *b, int token) {
    (void)b;
    sn_threads_leave(token);
}
static sn_status fake_sync(sn_backend *b) {
    (void)b;
    return SN_OK;
}
static const sn_kernel_table *fake_kernels(sn_backend *b) {
    (void)b;
    return sn_cpu_kernels();
}
static const sn_backend_iface fake_iface = {
    .type = "GPU", .caps = fake_caps, .alloc = fake_alloc, .free = fake_free,
    .copy_to_device = fake_to_device, .copy_to_host = fake_to_host, .copy = NULL,
    .enter = fake_enter, .leave = fake_leave, .synchronize = fake_sync, .kernels = fake_kernels,
};

/* One training step of a small dense layer: y = relu(x @ w + b), loss = mean(y * y),
 * w -= 0.1 dloss/dw. */
typedef struct step_graph {
    sn_graph *g;
    sn_node x, y, loss, update;
} step_graph;

static void build_step(step_graph *s) {
    sn_graph *g = s->g = sn_graph_new();
    sn_shape xs = {.ndim = 2, .dim = {2, 3}}, ws = {.ndim = 2, .dim = {3, 4}}, bs = {.ndim = 1, .dim = {4}};
    s->x = sn_input(g, "x", SN_F32, &xs);
    sn_node w = sn_variable(g, "w", SN_F32, &ws, true);
    float bias[4] = {0.1f, -0.2f, 0.3f, 0.0f};
    sn_node b = sn_const(g, SN_F32, &bs, bias);
    s->y = sn_relu(g, sn_bias_add(g, sn_matmul(g, s->x, w, false, false), b));
    s->loss = sn_reduce_mean(g, sn_mul(g, s->y, s->y), 0, NULL, false);
    sn_node dw;
    CHECK_OK(sn_gradients(g, s->loss, 1, &w, &dw));
    s->update = sn_assign_add(g, w, sn_mul(g, dw, sn_scalar(g, SN_F32, -0.1)));
    float *wd = sn_variable_data(g, w);
    for (int i = 0; i < 12; i++) wd[i] = 0.05f * (float)(i % 5) - 0.08f;
    CHECK_OK(sn_graph_status(g));
}

static sn_status feed_x(void *ctx, sn_plan *p, int64_t step) {
    const step_graph *s = ctx;
    float x[6];
    for (int i = 0; i < 6; i++) x[i] = (float)((i + 3 * step) % 7) * 0.3f - 0.6f;
    if (step % 2) return sn_plan_set_input(p, s->x, x, sizeof x);
    float *dst = sn_plan_buffer(p, s->x); /* the other way a caller fills an input */
    if (!dst) return SN_ERR_INVALID;
    memcpy(dst, x, sizeof x);
    return SN_OK;
}

/* A node hook reading the loss as soon as it is computed, mid-run. */
static sn_status read_loss(void *ctx, sn_plan *p, int call, sn_node n) {
    (void)call;
    step_graph *s = ctx;
    if (n != s->loss) return SN_OK;
    const float *l = sn_plan_buffer(p, s->loss);
    return l && l[0] > 0.0f ? SN_OK : sn_errorf(SN_ERR_INVALID, "mid-run loss unreadable");
}

static void test_mirrored_plan(void) {
    sn_backend dev;
    sn_backend_init(&dev, &fake_iface, SN_DEVICE_GPU, 0, NULL);
    CHECK(!strcmp(sn_backend_name(&dev), "/job:localhost/replica:0/task:0/device:GPU:0"),
          "name %s", sn_backend_name(&dev));
    step_graph a, b;
    build_step(&a);
    build_step(&b);
    sn_node ta[3] = {a.loss, a.y, a.update}, tb[3] = {b.loss, b.y, b.update};
    sn_plan *pa = NULL, *pb = NULL;
    CHECK_OK(sn_plan_new(&pa, a.g, 3, ta, NULL));
    CHECK_OK(sn_plan_new_on(&pb, b.g, 3, tb, NULL, &dev));
    if (!pa || !pb) goto done;
    CHECK(!strcmp(sn_plan_device(pb), sn_backend_name(&dev)), "plan device %s", sn_plan_device(pb));
    sn_plan_set_node_hook(pb, read_loss, &b);
    for (int run = 0; run < 3; run++) {
        int up = fake_uploads, down = fake_downloads;
        CHECK_OK(sn_plan_run(pa, 2, feed_x, &a));
        CHECK_OK(sn_plan_run(pb, 2, feed_x, &b));
        CHECK(fake_uploads > up && fake_downloads > down, "run %d moved nothing", run);
        const float *la = sn_plan_buffer(pa, a.loss), *lb = sn_plan_buffer(pb, b.loss);
        const float *ya = sn_plan_buffer(pa, a.y), *yb = sn_plan_buffer(pb, b.y);
        CHECK(la && lb && !memcmp(la, lb, sizeof *la), "run %d: loss %g vs %g", run,
              la ? la[0] : 0.0, lb ? lb[0] : 0.0);
        CHECK(ya && yb && !memcmp(ya, yb, 8 * sizeof *ya), "run %d: y differs", run);
        size_t na, nb;
        const void *va = sn_graph_variable_buffer(a.g, &na), *vb = sn_graph_variable_buffer(b.g, &nb);
        CHECK(na == nb && !memcmp(va, vb, na), "run %d: the weights differ after the update", run);
    }
    /* The host changes a weight between runs: the next run must see it. */
    sn_node wa, wb;
    sn_graph_variables(a.g, true, &wa, 1);
    sn_graph_variables(b.g, true, &wb, 1);
    ((float *)sn_variable_data(a.g, wa))[0] = 0.5f;
    ((float *)sn_variable_data(b.g, wb))[0] = 0.5f;
    CHECK_OK(sn_plan_run(pa, 1, feed_x, &a));
    CHECK_OK(sn_plan_run(pb, 1, feed_x, &b));
    size_t na, nb;
    const void *va = sn_graph_variable_buffer(a.g, &na), *vb = sn_graph_variable_buffer(b.g, &nb);
    CHECK(na == nb && !memcmp(va, vb, na), "a weight set by the host was not uploaded");
    /* Constants live on the device too: a plan of constants only. */
    sn_shape cs = {.ndim = 1, .dim = {3}};
    float cv[3] = {1.5f, -2.0f, 4.0f};
    sn_node k = sn_mul(b.g, sn_const(b.g, SN_F32, &cs, cv), sn_scalar(b.g, SN_F32, 2.0));
    sn_plan *pk = NULL;
    CHECK_OK(sn_plan_new_on(&pk, b.g, 1, &k, NULL, &dev));
    if (pk) {
        CHECK_OK(sn_plan_run(pk, 1, NULL, NULL));
        const float *r = sn_plan_buffer(pk, k);
        CHECK(r && r[0] == 3.0f && r[1] == -4.0f && r[2] == 8.0f, "constants on the device");
        sn_plan_free(pk);
    }
done:
    sn_plan_free(pa);
    sn_plan_free(pb);
    sn_graph_free(a.g);
    sn_graph_free(b.g);
}

/* ---- a GPU stand-in that records steps (a CUDA graph) and one with a gap in its table ------ */

/* Every row: the CPU's kernel for the call, run at once, or (between capture_begin and
 * capture_end) recorded with copies of its arguments, as a CUDA graph keeps a kernel's
 * parameters: a recording does not see later changes to an attribute or the step counter. */
typedef struct rec_call {
    const sn_kernel *k;
    sn_kcall call;
    sn_attrs attr;
} rec_call;
typedef struct rec_graph {
    int n;
    rec_call calls[256];
} rec_graph;
static rec_graph *recording;
static int rec_captures, rec_replays, rec_syncs, rec_loose_runs, rec_uploads;
static char rec_log[4096]; /* U upload, B capture begin, E end, P replay, S sync, K kernel */
static size_t rec_log_n;

static void rec_note(char ch) {
    if (rec_log_n + 1 < sizeof rec_log) rec_log[rec_log_n++] = ch, rec_log[rec_log_n] = '\0';
}
static const sn_kernel *rec_cpu(const sn_kcall *c) { return sn_kernel_select(sn_cpu_kernels(), c); }
static bool rec_supports(const sn_kcall *c) { return rec_cpu(c) != NULL; }
static sn_status rec_prepare(sn_kcall *c, size_t *scratch) {
    const sn_kernel *k = rec_cpu(c);
    *scratch = 0;
    return k->prepare ? k->prepare(c, scratch) : SN_OK;
}
static void rec_release(sn_kcall *c) {
    const sn_kernel *k = rec_cpu(c);
    if (k->release) k->release(c);
}
static sn_status rec_run(sn_kcall *c) {
    const sn_kernel *k = rec_cpu(c);
    if (recording) {
        if (recording->n >= 256) return sn_errorf(SN_ERR_INVALID, "stand-in: recording full");
        rec_call *r = &recording->calls[recording->n++];
        r->k = k;
        r->call = *c;
        if (c->attr) r->attr = *c->attr;
        r->call.attr = &r->attr;
        return SN_OK;
    }
    rec_loose_runs++;
    rec_note('K');
    return k->run(c);
}
static const sn_kernel k_rec = {.impl = "standin", .supports = rec_supports,
                                .prepare = rec_prepare, .run = rec_run, .release = rec_release};
static sn_kernel_table rec_table, gap_table;
static const sn_kernel_table *rec_kernels(sn_backend *b) {
    (void)b;
    return &rec_table;
}
static const sn_kernel_table *gap_kernels(sn_backend *b) {
    (void)b;
    return &gap_table;
}
static sn_status rec_to_device(sn_backend *b, void *dst, const void *src, size_t n) {
    if (recording) return sn_errorf(SN_ERR_INVALID, "stand-in: a copy inside a recording");
    rec_uploads++;
    rec_note('U');
    return fake_to_device(b, dst, src, n);
}
static sn_status rec_sync(sn_backend *b) {
    (void)b;
    if (recording) return sn_errorf(SN_ERR_INVALID, "stand-in: a sync inside a recording");
    rec_syncs++;
    rec_note('S');
    return SN_OK;
}
static sn_status rec_begin(sn_backend *b) {
    (void)b;
    if (recording) return sn_errorf(SN_ERR_INVALID, "stand-in: nested recording");
    recording = calloc(1, sizeof *recording);
    rec_note('B');
    return recording ? SN_OK : SN_ERR_NOMEM;
}
static sn_status rec_end(sn_backend *b, void **graph) {
    (void)b;
    *graph = recording;
    recording = NULL;
    rec_captures++;
    rec_note('E');
    return SN_OK;
}
static sn_status rec_replay(sn_backend *b, void *graph) {
    (void)b;
    rec_graph *g = graph;
    rec_replays++;
    rec_note('P');
    for (int i = 0; i < g->n; i++) SN_TRY(g->calls[i].k->run(&g->calls[i].call));
    return SN_OK;
}
static void rec_free(sn_backend *b, void *graph) {
    (void)b;
    free(graph);
}
static const sn_backend_iface rec_iface = {
    .type = "GPU", .caps = fake_caps, .alloc = fake_alloc, .free = fake_free,
    .copy_to_device = rec_to_device, .copy_to_host = fake_to_host, .copy = NULL,
    .enter = fake_enter, .leave = fake_leave, .synchronize = rec_sync, .kernels = rec_kernels,
    .capture_begin = rec_begin, .capture_end = rec_end, .replay = rec_replay,
    .graph_free = rec_free,
};
/* The same device without recording: every step issues its kernels. */
static const sn_backend_iface issue_iface = {
    .type = "GPU", .caps = fake_caps, .alloc = fake_alloc, .free = fake_free,
    .copy_to_device = rec_to_device, .copy_to_host = fake_to_host, .copy = NULL,
    .enter = fake_enter, .leave = fake_leave, .synchronize = rec_sync, .kernels = rec_kernels,
};
/* A device whose table lacks reduce_mean (and has no reference fallback: its memory is its own). */
static const sn_backend_iface gap_iface = {
    .type = "GPU", .caps = fake_caps, .alloc = fake_alloc, .free = fake_free,
    .copy_to_device = fake_to_device, .copy_to_host = fake_to_host, .copy = NULL,
    .enter = fake_enter, .leave = fake_leave, .synchronize = fake_sync, .kernels = gap_kernels,
};

static void standin_tables(void) {
    memset(&rec_table, 0, sizeof rec_table);
    const sn_kernel_table *cpu = sn_cpu_kernels();
    for (int op = 0; op < SN_OP_COUNT; op++)
        if (cpu->k[op]) rec_table.k[op] = &k_rec;
    gap_table = rec_table;
    gap_table.k[SN_OP_REDUCE_MEAN] = NULL;
}

static size_t count_char(const char *s, size_t from, size_t to, char ch) {
    size_t n = 0;
    for (size_t i = from; i < to && s[i]; i++) n += s[i] == ch;
    return n;
}

/* A plan that needs an op the device's table lacks is refused when it is made, by the op's
 * name and the device's; nothing runs on the host instead. */
static void test_refusal(void) {
    standin_tables();
    sn_backend dev;
    sn_backend_init(&dev, &gap_iface, SN_DEVICE_GPU, 0, NULL);
    step_graph a;
    build_step(&a);
    sn_node t[3] = {a.loss, a.y, a.update};
    sn_plan *p = NULL;
    CHECK_ERR(sn_plan_new_on(&p, a.g, 3, t, NULL, &dev), SN_ERR_UNSUPPORTED,
              "no kernel for op reduce_mean");
    CHECK(strstr(sn_last_error(), "/job:localhost/replica:0/task:0/device:GPU:0") != NULL,
          "the refusal names the device: %s", sn_last_error());
    CHECK(p == NULL, "a refused plan is not returned");
    /* a graph without reduce_mean plans there */
    sn_graph *g = sn_graph_new();
    sn_shape s = {.ndim = 1, .dim = {3}};
    sn_node x = sn_input(g, "x", SN_F32, &s);
    sn_node y = sn_tanh(g, sn_add(g, x, x));
    CHECK_OK(sn_plan_new_on(&p, g, 1, &y, NULL, &dev));
    sn_plan_free(p);
    sn_graph_free(g);
    sn_graph_free(a.g);
}

/* steps_per_execution on a recording device: one step recorded once, replayed per step, the
 * inputs uploaded before each replay, one synchronisation per run; bitwise the steps the same
 * device issues kernel by kernel. */
static void test_recorded_steps(void) {
    standin_tables();
    sn_backend rec, iss;
    sn_backend_init(&rec, &rec_iface, SN_DEVICE_GPU, 0, NULL);
    sn_backend_init(&iss, &issue_iface, SN_DEVICE_GPU, 1, NULL);
    CHECK(sn_backend_can_capture(&rec) && !sn_backend_can_capture(&iss), "capture hooks");
    step_graph a, b;
    build_step(&a);
    build_step(&b);
    sn_node ta[3] = {a.loss, a.y, a.update}, tb[3] = {b.loss, b.y, b.update};
    sn_plan *pa = NULL, *pb = NULL;
    CHECK_OK(sn_plan_new_on(&pa, a.g, 3, ta, NULL, &iss));
    CHECK_OK(sn_plan_new_on(&pb, b.g, 3, tb, NULL, &rec));
    if (!pa || !pb) goto done;
    enum { N = 4, RUNS = 3 };
    for (int run = 0; run < RUNS; run++) {
        CHECK_OK(sn_plan_run(pa, N, feed_x, &a));
        rec_log_n = 0;
        rec_log[0] = '\0';
        int syncs = rec_syncs, ups = rec_uploads, loose = rec_loose_runs;
        CHECK_OK(sn_plan_run(pb, N, feed_x, &b));
        CHECK(rec_syncs - syncs == 1, "run %d: %d synchronisations, want 1 per %d steps", run,
              rec_syncs - syncs, N);
        CHECK(rec_uploads - ups == 1 + N, "run %d: %d uploads, want the variables + %d inputs",
              run, rec_uploads - ups, N);
        CHECK(rec_loose_runs == loose, "run %d: %d kernels ran outside the recording", run,
              rec_loose_runs - loose);
        /* the order: variables up, then per step the input up and a replay (the first step
         * records first), the sync last */
        const char *want = run == 0 ? "UUBEPUPUPUPS" : "UUPUPUPUPS";
        CHECK(!strcmp(rec_log, want), "run %d: events %s, want %s", run, rec_log, want);
        const float *la = sn_plan_buffer(pa, a.loss), *lb = sn_plan_buffer(pb, b.loss);
        CHECK(la && lb && !memcmp(la, lb, sizeof *la), "run %d: loss %.9g replayed vs %.9g issued",
              run, lb ? lb[0] : 0.0, la ? la[0] : 0.0);
        size_t na, nb;
        const void *va = sn_graph_variable_buffer(a.g, &na), *vb = sn_graph_variable_buffer(b.g, &nb);
        CHECK(na == nb && !memcmp(va, vb, na), "run %d: weights differ after replays", run);
    }
    CHECK(pb->captures == 1 && pb->replays == N * RUNS, "recorded %lld times, replayed %lld; "
          "want 1 and %d", (long long)pb->captures, (long long)pb->replays, N * RUNS);
    CHECK(count_char(rec_log, 0, rec_log_n, 'K') == 0, "no kernel issued outside replays");

    /* Another run with nothing changed replays the same recording. */
    CHECK_OK(sn_plan_run(pb, 1, feed_x, &b));
    CHECK(pb->captures == 1, "recorded again with nothing changed (%lld)", (long long)pb->captures);
    /* A node hook needs the host after every kernel: issued, not replayed. */
    sn_plan_set_node_hook(pb, read_loss, &b);
    int64_t rp = pb->replays;
    CHECK_OK(sn_plan_run(pb, 2, feed_x, &b));
    CHECK(pb->replays == rp, "a plan with a node hook was replayed");
    sn_plan_set_node_hook(pb, NULL, NULL);
done:
    sn_plan_free(pa);
    sn_plan_free(pb);
    sn_graph_free(a.g);
    sn_graph_free(b.g);
}

/* A recording keeps its arguments: a changed attribute records the step again, and a plan
 * whose kernels read the step counter (dropout) is never recorded. Both stay equal to the
 * kernel-by-kernel run. */
static void attr_graph(sn_graph **g, sn_node *x, sn_node *y, bool dropout) {
    *g = sn_graph_new();
    sn_shape s = {.ndim = 2, .dim = {4, 8}};
    *x = sn_input(*g, "x", SN_F32, &s);
    sn_node h = sn_leaky_relu(*g, *x, 0.25);
    if (dropout) h = sn_dropout(*g, h, 0.5, 7);
    *y = sn_reduce_sum(*g, sn_mul(*g, h, h), 0, NULL, false);
}

static sn_status feed_attr(void *ctx, sn_plan *p, int64_t step) {
    sn_node x = *(const sn_node *)ctx;
    float v[32];
    for (int i = 0; i < 32; i++) v[i] = (float)((i * 5 + step) % 11) * 0.2f - 1.0f;
    return sn_plan_set_input(p, x, v, sizeof v);
}

static void set_alpha(sn_plan *p, double alpha) {
    for (int c = 0; c < p->n_calls; c++)
        if (p->calls[c].op == SN_OP_LEAKY_RELU) ((sn_attrs *)p->calls[c].attr)->act.alpha = alpha;
}

static void test_recording_keeps_arguments(void) {
    standin_tables();
    sn_backend rec, iss;
    sn_backend_init(&rec, &rec_iface, SN_DEVICE_GPU, 0, NULL);
    sn_backend_init(&iss, &issue_iface, SN_DEVICE_GPU, 1, NULL);
    for (int drop = 0; drop < 2; drop++) {
        sn_graph *ga, *gb;
        sn_node xa, ya, xb, yb;
        attr_graph(&ga, &xa, &ya, drop);
        attr_graph(&gb, &xb, &yb, drop);
        sn_plan *pa = NULL, *pb = NULL;
        CHECK_OK(sn_plan_new_on(&pa, ga, 1, &ya, NULL, &iss));
        CHECK_OK(sn_plan_new_on(&pb, gb, 1, &yb, NULL, &rec));
        if (!pa || !pb) {
            sn_plan_free(pa);
            sn_plan_free(pb);
            sn_graph_free(ga);
            sn_graph_free(gb);
            continue;
        }
        for (int run = 0; run < 3; run++) {
            if (run == 2) { /* a new alpha between runs */
                set_alpha(pa, 0.5);
                set_alpha(pb, 0.5);
            }
            CHECK_OK(sn_plan_run(pa, 3, feed_attr, &xa));
            CHECK_OK(sn_plan_run(pb, 3, feed_attr, &xb));
            const float *ra = sn_plan_buffer(pa, ya), *rb = sn_plan_buffer(pb, yb);
            CHECK(ra && rb && !memcmp(ra, rb, sizeof *ra), "%s, run %d: %.9g replayed vs %.9g",
                  drop ? "dropout" : "leaky_relu", run, rb ? rb[0] : 0.0, ra ? ra[0] : 0.0);
        }
        if (drop)
            CHECK(pb->captures == 0 && pb->replays == 0, "a dropout plan was recorded (%lld)",
                  (long long)pb->captures);
        else
            CHECK(pb->captures == 2 && pb->replays == 9, "recorded %lld times (want 2: alpha "
                  "changed once), replayed %lld (want 9)", (long long)pb->captures,
                  (long long)pb->replays);
        sn_plan_free(pa);
        sn_plan_free(pb);
        sn_graph_free(ga);
        sn_graph_free(gb);
    }
}

int main(void) {
    test_registry();
    test_memory();
    test_running();
    test_plan_on_backend();
    test_mirrored_plan();
    test_refusal();
    test_recorded_steps();
    test_recording_keeps_arguments();
    return sn_test_finish("test_backend");
}
