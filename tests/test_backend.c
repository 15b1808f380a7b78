/* The backend interface (src/backend/backend.h) on its first implementation, the CPU backend:
 * the registry hands out one backend per logical device with TF-style names and a share of the
 * cores; memory comes zero-filled and aligned; copies move bytes between host and devices and
 * between two devices; the bracket sets the calling thread's team and restores it; the kernel
 * choice falls back to the reference row; and a plan reaches its device through it. */
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"
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

int main(void) {
    test_registry();
    test_memory();
    test_running();
    test_plan_on_backend();
    return sn_test_finish("test_backend");
}
