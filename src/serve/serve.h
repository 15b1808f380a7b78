/* The prediction server behind `sinter serve` (internal to sinter: the CLI and tests use it).
 *
 * TensorFlow Serving's REST API over libmicrohttpd: model status and metadata, :predict in
 * the row ("instances") and columnar ("inputs") formats, errors as {"error": "..."}, plus
 * /healthz, /readyz and Prometheus metrics. Concurrent predict requests of one model are
 * batched on the server (src/serve/batcher.c). docs/serving.md describes the API and limits.
 *
 * Layering: apps (this folder) use nn and below; nothing below uses this folder. */
#ifndef SN_SERVE_H
#define SN_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "sinter/nn.h"

typedef struct sn_serve_opts {
    const char *host;          /* numeric address or name to bind; "127.0.0.1" */
    int port;                  /* 8501; 0: any free port (sn_server_port says which) */
    int http_threads;          /* threads polling the connections: 2 */
    int max_batch;             /* instances per model run: 32 */
    int64_t batch_timeout_us;  /* how long the first queued request waits for others: 1000 */
    size_t max_body_bytes;     /* larger bodies get 413: 16 MiB */
    int max_instances;         /* instances per request: 1024 */
    int max_depth;             /* JSON nesting: 32 */
    int timeout_s;             /* idle connection timeout; a body must arrive within 3x: 10 */
} sn_serve_opts;
sn_serve_opts sn_serve_defaults(void);

typedef struct sn_server sn_server;

/* Starts serving n models under their names (copied; each a URL path segment of letters,
 * digits, '_', '-', '.'). The server borrows the models: they must outlive it and nothing
 * else may use them meanwhile. Prepares one prediction plan per batch-size bucket and checks
 * each bucket's rows against single-row runs bit for bit before it listens. The caller frees
 * *out with sn_server_free. */
sn_status sn_server_start(int n, sn_model *const *models, const char *const *names,
                          const sn_serve_opts *o, sn_server **out);
/* The port it listens on. */
int sn_server_port(const sn_server *s);
/* Buckets (batch sizes with a prepared plan) of model i that passed the bit-for-bit check,
 * written to sizes[0 .. cap-1]; returns how many there are. */
int sn_server_buckets(const sn_server *s, int i, int64_t *sizes, int cap);
/* Stops accepting connections, answers new requests on open connections with 503, waits
 * up to max_wait_s for the requests in flight to be answered, then closes everything.
 * Returns the number of requests still in flight when it gave up (0 after a clean drain). */
int sn_server_drain(sn_server *s, double max_wait_s);
/* Drains (if not done yet) and frees. NULL is fine. */
void sn_server_free(sn_server *s);

#endif
