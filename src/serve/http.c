/* The HTTP side of the server: libmicrohttpd in its own polling threads, routing by TF
 * Serving's paths, request bodies under limits, and the drain on shutdown.
 *
 * A :predict request is parsed on the polling thread that received it, then its connection
 * is suspended and the request queued for the model's batcher; the batcher resumes the
 * connection when the rows are answered, and the handler, called again, sends them. So a
 * waiting request holds no thread, and slow clients hold only their connection, which the
 * idle timeout (and a deadline for the whole body) closes. */
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"
#include "serve/serve_impl.h"

struct sn_server {
    struct MHD_Daemon *d;
    MHD_socket quiesced_fd;
    int n;
    sn_serve_model *models;
    sn_serve_model **model_ptrs;
    sn_serve_opts o;
    sn_serve_metrics mt;
    atomic_bool draining;
    bool stopped;
    int port;
};

typedef struct conn_ctx {
    sn_server *srv;
    double t0;
    int code;          /* the status sent, for the metrics */
    bool answered;
    bool predict;
    bool submitted;
    bool rejected;     /* submit refused: the server is stopping */
    sn_serve_model *sm;
    char *body;
    size_t len, cap;
    bool too_big;
    sn_serve_format fmt;
    sn_serve_req req;
} conn_ctx;

sn_serve_opts sn_serve_defaults(void) {
    return (sn_serve_opts){.host = "127.0.0.1", .port = 8501, .http_threads = 2,
                           .max_batch = 32, .batch_timeout_us = 1000,
                           .max_body_bytes = (size_t)16 << 20, .max_instances = 1024,
                           .max_depth = 32, .timeout_s = 10};
}

/* ---- answers ------------------------------------------------------------------------------ */

static enum MHD_Result send_body(conn_ctx *x, struct MHD_Connection *c, int code, char *body,
                                 size_t len, const char *ctype, const char *allow) {
    static const char oom[] = "{\"error\": \"out of memory\"}";
    struct MHD_Response *r;
    if (body) {
        r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
        if (!r) free(body);
    } else {
        code = MHD_HTTP_INTERNAL_SERVER_ERROR;
        ctype = "application/json";
        r = MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
    }
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (atomic_load(&x->srv->draining)) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    x->answered = true;
    x->code = code;
    /* Counted before the answer is queued, not when the connection completes: a client that
     * reads its answer and then asks /monitoring/prometheus/metrics must find it counted. */
    sn_serve_metrics_request(&x->srv->mt, code, x->predict && code == 200, sn_now() - x->t0);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_error(conn_ctx *x, struct MHD_Connection *c, int code,
                                  const char *allow, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static enum MHD_Result send_error(conn_ctx *x, struct MHD_Connection *c, int code,
                                  const char *allow, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len = 0;
    char *body = sn_serve_error_json(msg, &len);
    return send_body(x, c, code, body, len, "application/json", allow);
}

static enum MHD_Result send_text(conn_ctx *x, struct MHD_Connection *c, int code, const char *s,
                                 const char *ctype) {
    char *body = strdup(s);
    return send_body(x, c, code, body, body ? strlen(body) : 0, ctype, NULL);
}

/* ---- routing ------------------------------------------------------------------------------ */

static sn_serve_model *find_model(sn_server *srv, const char *name, size_t len) {
    for (int i = 0; i < srv->n; i++)
        if (strlen(srv->models[i].name) == len && !memcmp(srv->models[i].name, name, len))
            return &srv->models[i];
    return NULL;
}

/* /v1/models/NAME[/versions/V][/metadata | :VERB]: TF Serving's paths. */
static enum MHD_Result route_v1(conn_ctx *x, struct MHD_Connection *c, const char *url,
                                const char *method) {
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    const char *p = url + strlen("/v1/models");
    if (*p == '\0' || !strcmp(p, "/")) {
        if (get) return send_error(x, c, 400, NULL, "Missing model name in request.");
        return send_error(x, c, 405, "GET", "Method %s not allowed on %s (GET only)", method, url);
    }
    if (*p != '/') return send_error(x, c, 404, NULL, "Malformed request: %s %s", method, url);
    const char *name = ++p;
    size_t name_len = strcspn(name, "/:");
    p = name + name_len;
    const char *version = NULL;
    size_t version_len = 0;
    if (!strncmp(p, "/versions/", 10)) {
        version = p + 10;
        version_len = strspn(version, "0123456789");
        p = version + version_len;
        if (version_len == 0) return send_error(x, c, 404, NULL, "Malformed request: %s %s", method, url);
    }
    const char *verb = NULL;
    bool metadata = false;
    if (*p == ':') verb = p + 1;
    else if (!strcmp(p, "/metadata")) metadata = true;
    else if (*p != '\0') return send_error(x, c, 404, NULL, "Malformed request: %s %s", method, url);
    if (name_len == 0) return send_error(x, c, 404, NULL, "Malformed request: %s %s", method, url);
    if (verb && strcmp(verb, "predict") && strcmp(verb, "classify") && strcmp(verb, "regress"))
        return send_error(x, c, 404, NULL, "Malformed request: %s %s", method, url);
    if (verb && !post)
        return send_error(x, c, 405, "POST", "Malformed request: %s %s (:%s takes POST)", method,
                          url, verb);
    if (!verb && !get)
        return send_error(x, c, 405, "GET", "Malformed request: %s %s (takes GET)", method, url);
    if (version_len > 18)
        return send_error(x, c, 400, NULL, "Failed to convert version: %.*s to numeric.",
                          (int)version_len, version);
    sn_serve_model *sm = find_model(x->srv, name, name_len);
    bool v1 = !version || (version_len == 1 && version[0] == '1');
    if (!sm || !v1) {
        if (version)
            return send_error(x, c, 404, NULL, "Servable not found for request: Specific(%.*s, %lld)",
                              (int)name_len, name, strtoll(version, NULL, 10));
        return send_error(x, c, 404, NULL, "Servable not found for request: Latest(%.*s)",
                          (int)name_len, name);
    }
    size_t len = 0;
    if (!verb) {
        char *body = metadata ? sn_serve_metadata_json(sm, &len) : sn_serve_status_json(sm, &len);
        return send_body(x, c, 200, body, len, "application/json", NULL);
    }
    if (strcmp(verb, "predict") != 0)
        return send_error(x, c, 400, NULL, "Expected %s signature method_name to be "
                          "tensorflow/serving/%s. Was: tensorflow/serving/predict (model '%s' "
                          "has only the predict signature 'serving_default'; use :predict)",
                          !strcmp(verb, "classify") ? "classification" : "regression", verb,
                          sm->name);
    /* predict: the body follows. */
    x->predict = true;
    x->sm = sm;
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        unsigned long long n = strtoull(cl, NULL, 10);
        /* Up to twice the limit the body is read and dropped, so that a client that sends it
         * all before reading (most do) gets the 413 rather than a reset connection. */
        if (n > 2 * (unsigned long long)x->srv->o.max_body_bytes)
            return send_error(x, c, 413, NULL, "Request body of %llu bytes is over this server's "
                              "limit of %zu bytes (--max-body-bytes)", n, x->srv->o.max_body_bytes);
        if (n > x->srv->o.max_body_bytes) x->too_big = true;
        else x->cap = (size_t)n + 1;
    }
    return MHD_YES;
}

static enum MHD_Result first_call(conn_ctx *x, struct MHD_Connection *c, const char *url,
                                  const char *method) {
    sn_server *srv = x->srv;
    bool get = !strcmp(method, "GET");
    if (atomic_load(&srv->draining))
        return send_error(x, c, 503, NULL, "The server is shutting down");
    if (!strcmp(url, "/healthz") || !strcmp(url, "/readyz")) {
        if (!get) return send_error(x, c, 405, "GET", "Method %s not allowed on %s (GET only)", method, url);
        return send_text(x, c, 200, "ok\n", "text/plain");
    }
    if (!strcmp(url, "/monitoring/prometheus/metrics")) {
        if (!get) return send_error(x, c, 405, "GET", "Method %s not allowed on %s (GET only)", method, url);
        size_t len = 0;
        char *body = sn_serve_metrics_text(&srv->mt, srv->model_ptrs, srv->n, &len);
        return send_body(x, c, 200, body, len, "text/plain; version=0.0.4", NULL);
    }
    if (!strncmp(url, "/v1/models", 10) && (url[10] == '\0' || url[10] == '/'))
        return route_v1(x, c, url, method);
    return send_error(x, c, 404, NULL, "Not found: %s %s", method, url);
}

/* ---- predict -------------------------------------------------------------------------------- */

static void on_done(sn_serve_req *r) {
    MHD_resume_connection((struct MHD_Connection *)r->conn);
}

static enum MHD_Result end_of_body(conn_ctx *x, struct MHD_Connection *c) {
    sn_server *srv = x->srv;
    if (x->too_big)
        return send_error(x, c, 413, NULL, "Request body is over this server's limit of %zu "
                          "bytes (--max-body-bytes)", srv->o.max_body_bytes);
    /* No draining check here: a request whose headers arrived before the drain began is in
     * flight and is answered, even if its body finishes after SIGTERM (the batchers run until
     * the in-flight count reaches zero). Refusing it raced with the drain test's signal. */
    sn_serve_model *sm = x->sm;
    sn_serve_limits lim = {.max_depth = srv->o.max_depth, .max_instances = srv->o.max_instances};
    char err[512];
    float *rows = NULL;
    int64_t n = 0;
    bool ok = sn_serve_parse_predict(x->body ? x->body : "", x->len, sm, &lim, &rows, &n, &x->fmt,
                                     err, sizeof err);
    free(x->body);
    x->body = NULL;
    if (!ok) return send_error(x, c, 400, NULL, "%s", err);
    x->req.x = rows;
    x->req.n = n;
    x->req.y = malloc((size_t)(n * sm->out_numel) * sizeof(float));
    if (!x->req.y) return send_error(x, c, 500, NULL, "out of memory for %lld predictions", (long long)n);
    x->req.conn = c;
    /* Suspend first: the batcher may answer before this handler returns. */
    MHD_suspend_connection(c);
    x->submitted = true;
    if (!sn_serve_model_submit(sm, &x->req)) {
        x->rejected = true;
        MHD_resume_connection(c);
    }
    return MHD_YES;
}

static enum MHD_Result after_batch(conn_ctx *x, struct MHD_Connection *c) {
    if (x->rejected) return send_error(x, c, 503, NULL, "The server is shutting down");
    if (!atomic_load_explicit(&x->req.finished, memory_order_acquire)) return MHD_YES;
    if (x->req.failed)
        return send_error(x, c, 500, NULL, "Prediction failed: %s", x->req.err);
    size_t len = 0;
    char *body = sn_serve_write_predictions(x->sm, x->fmt, x->req.y, x->req.n, &len);
    return send_body(x, c, 200, body, len, "application/json", NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
    (void)version;
    conn_ctx *x = *con_cls;
    if (!x) {
        x = calloc(1, sizeof *x);
        if (!x) return MHD_NO;
        x->srv = cls;
        x->t0 = sn_now();
        *con_cls = x;
        atomic_fetch_add(&x->srv->mt.inflight, 1);
        return first_call(x, c, url, method);
    }
    if (x->answered) {
        *upload_size = 0; /* discard the rest of a refused body */
        return MHD_YES;
    }
    if (x->submitted) return after_batch(x, c);
    if (*upload_size > 0) {
        size_t k = *upload_size;
        *upload_size = 0;
        /* libmicrohttpd takes no answer while a body is still arriving, so a request refused
         * here has its connection closed: a body slower than 3x the idle timeout, or one
         * over twice the size limit. */
        if (sn_now() - x->t0 > 3.0 * x->srv->o.timeout_s) return MHD_NO;
        if (x->too_big || x->len + k > x->srv->o.max_body_bytes) {
            /* A body over the limit: read and drop the rest so that the client, still
             * sending, gets its 413 at the end rather than a reset; past twice the limit the
             * connection is closed. */
            x->too_big = true;
            x->len += k;
            return x->len > 2 * x->srv->o.max_body_bytes ? MHD_NO : MHD_YES;
        }
        if (x->len + k + 1 > x->cap) {
            size_t cap = x->cap ? x->cap : 4096;
            while (cap < x->len + k + 1) cap *= 2;
            if (cap > x->srv->o.max_body_bytes + 1) cap = x->srv->o.max_body_bytes + 1;
            char *b = realloc(x->body, cap);
            if (!b) return MHD_NO;
            x->body = b;
            x->cap = cap;
        }
        if (!x->body) {
            x->body = malloc(x->cap);
            if (!x->body) return MHD_NO;
        }
        memcpy(x->body + x->len, upload, k);
        x->len += k;
        return MHD_YES;
    }
    return end_of_body(x, c);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)c;
    (void)toe;
    sn_server *srv = cls;
    conn_ctx *x = *con_cls;
    if (!x) return;
    *con_cls = NULL;
    free(x->body);
    free(x->req.x);
    free(x->req.y);
    free(x);
    atomic_fetch_sub(&srv->mt.inflight, 1);
}

/* While sn_server_start runs MHD_start_daemon, libmicrohttpd's messages (on that thread) are
 * kept here: the first one is why the daemon did not start ("Failed to bind to port 8501:
 * Address already in use"), and becomes part of the returned error instead of a line on
 * stderr. */
#define MHD_WHY_CAP 256
static _Thread_local char *mhd_start_why;

/* libmicrohttpd's messages end in "\n" and may quote what a client sent: one clean line. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char raw[512], line[MHD_WHY_CAP];
    vsnprintf(raw, sizeof raw, fmt, ap);
    sn_foreign_text(line, sizeof line, raw);
    if (mhd_start_why) {
        /* "Failed to bind to port 0: Address already in use": MHD names the port it was
         * given (0 with a socket address), so the OS's words after the last ": " are kept
         * and the error names the address itself. */
        const char *cause = strrchr(line, ':');
        if (cause)
            while (*++cause == ' ') {}
        if (!mhd_start_why[0])
            snprintf(mhd_start_why, MHD_WHY_CAP, "%s", cause && *cause ? cause : line);
        return;
    }
    /* Serving: the server's own log (a request cut off, a socket error); the app layer. */
    fprintf(stderr, "sinter serve: http: %s\n", line);
}

/* ---- start and stop ----------------------------------------------------------------------- */

static bool valid_name(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-' || *s == '.'))
            return false;
    return true;
}

static sn_status check_opts(const sn_serve_opts *o) {
    if (!o->host || !*o->host) return sn_errorf(SN_ERR_INVALID, "serve: no host to bind");
    if (o->port < 0 || o->port > 65535)
        return sn_errorf(SN_ERR_INVALID, "serve: port %d (expected 0 to 65535)", o->port);
    if (o->max_batch < 1 || o->max_batch > 4096)
        return sn_errorf(SN_ERR_INVALID, "serve: max_batch %d (expected 1 to 4096)", o->max_batch);
    if (o->http_threads < 1 || o->http_threads > 256)
        return sn_errorf(SN_ERR_INVALID, "serve: http_threads %d (expected 1 to 256)", o->http_threads);
    if (o->batch_timeout_us < 0 || o->max_body_bytes < 2 || o->max_instances < 1 ||
        o->max_depth < 2 || o->timeout_s < 1)
        return sn_errorf(SN_ERR_INVALID, "serve: batch_timeout_us %lld, max_body_bytes %zu, "
                         "max_instances %d, max_depth %d, timeout_s %d (expected >= 0, >= 2, >= 1, "
                         ">= 2, >= 1)", (long long)o->batch_timeout_us, o->max_body_bytes,
                         o->max_instances, o->max_depth, o->timeout_s);
    return SN_OK;
}

sn_status sn_server_start(int n, sn_model *const *models, const char *const *names,
                          const sn_serve_opts *o, sn_server **out) {
    if (!out || !models || !names || n < 1)
        return sn_errorf(SN_ERR_INVALID, "serve: no models to serve");
    *out = NULL;
    sn_serve_opts opts = o ? *o : sn_serve_defaults();
    SN_TRY(check_opts(&opts));
    for (int i = 0; i < n; i++) {
        if (!names[i] || !valid_name(names[i]))
            return sn_errorf(SN_ERR_INVALID, "serve: model name '%s' (expected letters, digits, "
                             "'_', '-' or '.')", names[i] ? names[i] : "");
        for (int j = 0; j < i; j++)
            if (!strcmp(names[i], names[j]))
                return sn_errorf(SN_ERR_INVALID, "serve: two models are named '%s' (give each "
                                 "--model its own --name)", names[i]);
    }
    sn_server *s = calloc(1, sizeof *s);
    if (!s) return SN_ERR_NOMEM;
    s->o = opts;
    s->quiesced_fd = MHD_INVALID_SOCKET;
    s->models = calloc((size_t)n, sizeof *s->models);
    s->model_ptrs = calloc((size_t)n, sizeof *s->model_ptrs);
    if (!s->models || !s->model_ptrs) {
        sn_server_free(s);
        return SN_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++) {
        s->model_ptrs[i] = &s->models[i];
        sn_status st = sn_serve_model_init(&s->models[i], names[i], models[i], opts.max_batch,
                                           opts.batch_timeout_us, on_done);
        s->n = i + 1;
        if (st != SN_OK) {
            sn_server_free(s);
            return st;
        }
    }
    char port[16];
    snprintf(port, sizeof port, "%d", opts.port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE}, *ai = NULL;
    int gai = getaddrinfo(opts.host, port, &hints, &ai);
    if (gai != 0 || !ai) {
        sn_server_free(s);
        return sn_errorf(SN_ERR_INVALID, "serve: --host '%s': %s (expected an address such as "
                         "127.0.0.1 or ::1)", opts.host, gai_strerror(gai));
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    char why[MHD_WHY_CAP] = "";
    mhd_start_why = why;
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)opts.http_threads,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)opts.timeout_s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)1024,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_END);
    mhd_start_why = NULL;
    freeaddrinfo(ai);
    if (!s->d) {
        sn_server_free(s);
        if (why[0])
            return sn_errorf(SN_ERR_IO, "serve: cannot listen on %s port %d: %s", opts.host,
                             opts.port, why);
        return sn_errorf(SN_ERR_IO, "serve: cannot listen on %s port %d (in use, or not an "
                         "address of this machine?)", opts.host, opts.port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? (int)di->port : opts.port;
    *out = s;
    return SN_OK;
}

int sn_server_port(const sn_server *s) { return s ? s->port : 0; }

int sn_server_buckets(const sn_server *s, int i, int64_t *sizes, int cap) {
    if (!s || i < 0 || i >= s->n) return 0;
    int k = 0;
    for (int b = 0; b < s->models[i].n_buckets; b++)
        if (s->models[i].bucket_ok[b]) {
            if (k < cap) sizes[k] = s->models[i].bucket[b];
            k++;
        }
    return k;
}

int sn_server_drain(sn_server *s, double max_wait_s) {
    if (!s || s->stopped) return 0;
    atomic_store(&s->draining, true);
    if (s->d) s->quiesced_fd = MHD_quiesce_daemon(s->d);
    double end = sn_now() + max_wait_s;
    long long left;
    while ((left = atomic_load(&s->mt.inflight)) > 0 && sn_now() < end) usleep(5000);
    /* The batchers answer what they hold, then the daemon closes the connections. */
    for (int i = 0; i < s->n; i++) sn_serve_model_fini(&s->models[i]);
    if (s->d) MHD_stop_daemon(s->d);
    s->d = NULL;
    if (s->quiesced_fd != MHD_INVALID_SOCKET) close(s->quiesced_fd);
    s->quiesced_fd = MHD_INVALID_SOCKET;
    s->stopped = true;
    return (int)left;
}

void sn_server_free(sn_server *s) {
    if (!s) return;
    sn_server_drain(s, 0);
    free(s->models);
    free(s->model_ptrs);
    free(s);
}
