/* Counters and histograms of the server, written as Prometheus text at
 * GET /monitoring/prometheus/metrics (TF Serving's path). Updated with relaxed atomics from
 * the HTTP and batcher threads; a scrape reads them without stopping anyone. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve_impl.h"

static const int codes[] = {200, 400, 404, 405, 408, 413, 503};
#define N_CODES ((int)(sizeof codes / sizeof codes[0]))
/* Predict latency buckets, seconds. */
static const double lat_le[] = {0.0005, 0.001, 0.0025, 0.005, 0.01,  0.025, 0.05, 0.1,
                                0.25,   0.5,   1,      2.5,   5,     10,    30};
#define N_LAT ((int)(sizeof lat_le / sizeof lat_le[0]))

void sn_serve_metrics_request(sn_serve_metrics *mt, int code, bool predict, double seconds) {
    int c = N_CODES;
    for (int i = 0; i < N_CODES; i++)
        if (codes[i] == code) c = i;
    atomic_fetch_add_explicit(&mt->by_code[c], 1, memory_order_relaxed);
    if (!predict) return;
    int b = 0;
    while (b < N_LAT && seconds > lat_le[b]) b++;
    if (b < N_LAT) atomic_fetch_add_explicit(&mt->lat_bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&mt->lat_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&mt->lat_sum_us, (long long)(seconds * 1e6), memory_order_relaxed);
}

typedef struct text {
    char *p;
    size_t len, cap;
    bool oom;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    if (t->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (k >= 0 && (size_t)k < t->cap - t->len) {
            t->len += (size_t)k;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)(k > 0 ? k : 0);
        char *p = realloc(t->p, cap);
        if (!p) {
            t->oom = true;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
}

#define LD(x) ((long long)atomic_load_explicit(&(x), memory_order_relaxed))

char *sn_serve_metrics_text(const sn_serve_metrics *mt, sn_serve_model *const *models, int n,
                            size_t *len) {
    sn_serve_metrics *m = (sn_serve_metrics *)mt; /* atomic loads take non-const pointers */
    text t = {.p = malloc(4096), .cap = 4096};
    if (!t.p) return NULL;
    put(&t, "# HELP sinter_serve_requests_total HTTP requests answered, by status code.\n"
            "# TYPE sinter_serve_requests_total counter\n");
    for (int i = 0; i < N_CODES; i++)
        put(&t, "sinter_serve_requests_total{code=\"%d\"} %lld\n", codes[i], LD(m->by_code[i]));
    put(&t, "sinter_serve_requests_total{code=\"other\"} %lld\n", LD(m->by_code[N_CODES]));
    put(&t, "# HELP sinter_serve_errors_total HTTP requests answered with an error, by status code.\n"
            "# TYPE sinter_serve_errors_total counter\n");
    for (int i = 1; i < N_CODES; i++)
        put(&t, "sinter_serve_errors_total{code=\"%d\"} %lld\n", codes[i], LD(m->by_code[i]));
    put(&t, "sinter_serve_errors_total{code=\"other\"} %lld\n", LD(m->by_code[N_CODES]));
    put(&t, "# HELP sinter_serve_inflight_requests Requests received and not yet answered.\n"
            "# TYPE sinter_serve_inflight_requests gauge\n"
            "sinter_serve_inflight_requests %lld\n", LD(m->inflight));
    put(&t, "# HELP sinter_serve_predict_latency_seconds Time from a predict request's first "
            "byte to its answer.\n# TYPE sinter_serve_predict_latency_seconds histogram\n");
    long long cum = 0;
    for (int i = 0; i < N_LAT; i++) {
        cum += LD(m->lat_bucket[i]);
        put(&t, "sinter_serve_predict_latency_seconds_bucket{le=\"%g\"} %lld\n", lat_le[i], cum);
    }
    put(&t, "sinter_serve_predict_latency_seconds_bucket{le=\"+Inf\"} %lld\n", LD(m->lat_count));
    put(&t, "sinter_serve_predict_latency_seconds_sum %.6f\n", 1e-6 * (double)LD(m->lat_sum_us));
    put(&t, "sinter_serve_predict_latency_seconds_count %lld\n", LD(m->lat_count));
    put(&t, "# HELP sinter_serve_batch_size Instances per model run (before padding to the "
            "bucket).\n# TYPE sinter_serve_batch_size histogram\n");
    for (int k = 0; k < n; k++) {
        sn_serve_model *sm = models[k];
        cum = 0;
        for (int i = 0; i < SN_SERVE_BATCH_HIST; i++) {
            cum += LD(sm->batch_hist[i]);
            put(&t, "sinter_serve_batch_size_bucket{model=\"%s\",le=\"%lld\"} %lld\n", sm->name,
                1LL << i, cum);
        }
        put(&t, "sinter_serve_batch_size_bucket{model=\"%s\",le=\"+Inf\"} %lld\n", sm->name,
            LD(sm->batches));
        put(&t, "sinter_serve_batch_size_sum{model=\"%s\"} %lld\n", sm->name, LD(sm->batch_rows));
        put(&t, "sinter_serve_batch_size_count{model=\"%s\"} %lld\n", sm->name, LD(sm->batches));
    }
    put(&t, "# HELP sinter_serve_padded_rows_total Zero rows added to fill a bucket.\n"
            "# TYPE sinter_serve_padded_rows_total counter\n");
    for (int k = 0; k < n; k++)
        put(&t, "sinter_serve_padded_rows_total{model=\"%s\"} %lld\n", models[k]->name,
            LD(models[k]->padded_rows));
    if (t.oom) {
        free(t.p);
        return NULL;
    }
    *len = t.len;
    return t.p;
}
