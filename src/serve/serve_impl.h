/* Internal to src/serve: the pieces the files of the server share.
 *
 *   http.c        libmicrohttpd daemon, routing, responses, drain
 *   json_body.c   request bodies -> f32 rows (with limits), rows -> response JSON
 *   batcher.c     per-model queue and batcher thread, buckets, the bit-for-bit check
 *   metrics.c     counters and histograms, Prometheus text */
#ifndef SN_SERVE_IMPL_H
#define SN_SERVE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "serve/serve.h"

/* ---- metrics (metrics.c) ------------------------------------------------------------------ */
#define SN_SERVE_BATCH_HIST 12 /* batch-size buckets 1, 2, 4, ..., 2048 */
typedef struct sn_serve_metrics {
    atomic_llong by_code[8];          /* 200 400 404 405 408 413 503 other */
    atomic_llong lat_bucket[16];      /* predict latency, cumulative at print time */
    atomic_llong lat_count, lat_sum_us;
    atomic_llong inflight;
} sn_serve_metrics;
void sn_serve_metrics_request(sn_serve_metrics *mt, int code, bool predict, double seconds);

/* ---- the request a predict call hands to the batcher ------------------------------------ */
struct sn_serve_model;
typedef struct sn_serve_req {
    struct sn_serve_model *model;
    int64_t n;          /* instances */
    float *x;           /* n * in_numel, the request's own */
    float *y;           /* n * out_numel, the request's own */
    int64_t next;       /* first row not yet given to a batch (batcher thread only) */
    int64_t done_rows;  /* rows answered (batcher thread only) */
    bool failed;
    char err[256];
    void *conn;         /* the suspended MHD connection to resume */
    atomic_int finished;
    struct sn_serve_req *qnext;
} sn_serve_req;

/* ---- per model: its batcher (batcher.c) --------------------------------------------------- */
#define SN_SERVE_MAX_BUCKETS 16
typedef struct sn_serve_model {
    char *name;
    sn_model *m;
    sn_shape in, out;             /* without batch */
    int64_t in_numel, out_numel;
    int max_batch;
    int64_t timeout_us;
    int n_buckets;
    int64_t bucket[SN_SERVE_MAX_BUCKETS];
    bool bucket_ok[SN_SERVE_MAX_BUCKETS];
    float *bx, *by;               /* staging rows for the largest bucket, allocated once */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sn_serve_req *head, *tail;    /* queued requests with rows left to schedule */
    int64_t queued_rows;
    bool stop;
    void (*on_done)(sn_serve_req *r); /* called by the batcher thread when a request is answered */
    atomic_llong batch_hist[SN_SERVE_BATCH_HIST + 1]; /* last: bigger */
    atomic_llong batches, batch_rows, padded_rows;
} sn_serve_model;

/* Sets up the buckets, prepares their plans, runs the bit-for-bit check and starts the
 * batcher thread. */
sn_status sn_serve_model_init(sn_serve_model *sm, const char *name, sn_model *m, int max_batch,
                              int64_t timeout_us, void (*on_done)(sn_serve_req *r));
/* Queues r (n, x, y set); on_done(r) follows from the batcher thread. Returns false (and
 * queues nothing) once the model is stopping. */
bool sn_serve_model_submit(sn_serve_model *sm, sn_serve_req *r);
/* Answers what is queued, stops the thread, frees the buffers. */
void sn_serve_model_fini(sn_serve_model *sm);

/* ---- JSON (json_body.c) ------------------------------------------------------------------- */
typedef struct sn_serve_limits {
    int max_depth;
    int max_instances;
} sn_serve_limits;
typedef enum sn_serve_format { SN_SERVE_ROWS = 0, SN_SERVE_COLUMNS } sn_serve_format;
/* Parses a :predict body for model sm into *x (malloc'ed, n * in_numel floats, the caller
 * frees), *n and *format. On a bad body returns false with TF Serving's kind of message in
 * err. */
bool sn_serve_parse_predict(const char *body, size_t len, const sn_serve_model *sm,
                            const sn_serve_limits *lim, float **x, int64_t *n,
                            sn_serve_format *format, char *err, size_t errcap);
/* {"predictions": [...]} or {"outputs": [...]} for n rows y of shape sm->out; malloc'ed and
 * NUL-terminated, the caller frees; *len its length. NULL when out of memory. */
char *sn_serve_write_predictions(const sn_serve_model *sm, sn_serve_format format,
                                 const float *y, int64_t n, size_t *len);
/* {"error": "<msg escaped>"}, malloc'ed; *len its length. NULL when out of memory. */
char *sn_serve_error_json(const char *msg, size_t *len);
/* GET /v1/models/NAME and /metadata bodies; malloc'ed, NULL when out of memory. */
char *sn_serve_status_json(const sn_serve_model *sm, size_t *len);
char *sn_serve_metadata_json(const sn_serve_model *sm, size_t *len);

/* ---- Prometheus text (metrics.c) --------------------------------------------------------- */
char *sn_serve_metrics_text(const sn_serve_metrics *mt, sn_serve_model *const *models, int n,
                            size_t *len);

#endif
