/* sinter serve: models behind TensorFlow Serving's REST API (src/serve, docs/serving.md).
 *
 *     sinter serve --model small_cnn --weights small_cnn.weights.h5 [--model mlp --name m2 ...]
 *
 * --model may be given several times; --name and --weights belong to the --model before them.
 * SIGTERM or SIGINT stops accepting connections, answers the requests in flight and exits 0. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "serve/serve.h"

#define MAX_MODELS 16

typedef struct model_arg {
    const char *model, *name, *weights;
} model_arg;

/* "dir/small_cnn.weights.h5" -> "small_cnn"; a preset name stays itself. */
static void default_name(const char *model, char *out, size_t cap) {
    const char *base = strrchr(model, '/');
    base = base ? base + 1 : model;
    snprintf(out, cap, "%s", base);
    char *dot = strchr(out, '.');
    if (dot && dot != out) *dot = '\0';
}

/* Takes the --model/--name/--weights groups out of argv (into args) and leaves the other
 * flags in rest. Returns -1 to go on, 2 after printing a usage error. */
static int split_models(const char *prog, int argc, char **argv, model_arg *args, int *n,
                        char **rest, int *nrest) {
    *n = 0;
    *nrest = 0;
    rest[(*nrest)++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *which = NULL;
        if (!strncmp(a, "--model", 7) && (a[7] == '\0' || a[7] == '=')) which = "model";
        else if (!strncmp(a, "--name", 6) && (a[6] == '\0' || a[6] == '=')) which = "name";
        else if (!strncmp(a, "--weights", 9) && (a[9] == '\0' || a[9] == '=')) which = "weights";
        if (!which) {
            rest[(*nrest)++] = argv[i];
            continue;
        }
        const char *eq = strchr(a, '=');
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v || !*v) {
            fprintf(stderr, "%s: --%s needs a value\n", prog, which);
            return 2;
        }
        if (!strcmp(which, "model")) {
            if (*n == MAX_MODELS) {
                fprintf(stderr, "%s: --model: more than %d models (expected at most %d)\n", prog,
                        MAX_MODELS, MAX_MODELS);
                return 2;
            }
            args[(*n)++] = (model_arg){.model = v};
        } else if (*n == 0) {
            fprintf(stderr, "%s: --%s '%s' comes before any --model (it belongs to the --model "
                    "before it)\n", prog, which, v);
            return 2;
        } else if (!strcmp(which, "name")) {
            args[*n - 1].name = v;
        } else {
            args[*n - 1].weights = v;
        }
    }
    return -1;
}

/* A .keras file carries its weights; the shared loader of evaluate and predict opens it. */
static bool is_keras_file(const char *model) {
    size_t n = strlen(model);
    return n > 6 && !strcmp(model + n - 6, ".keras");
}

static sn_status load(const model_arg *a, sn_model **out) {
    if (a->weights || is_keras_file(a->model))
        return sn_cli_load_model(a->model, NULL, a->weights, out);
    /* No weights: the model as sn_cli_load_model builds it (seed 0), for trying the API. */
    sn_model *m = NULL;
    sn_status s = sn_cli_build_model(a->model, NULL, 0, &m);
    if (s != SN_OK) return s;
    sn_compile_opts co = sn_compile_defaults();
    sn_cli_apply_device(&co);
    s = sn_model_compile(m, &co);
    if (s != SN_OK) {
        sn_model_free(m);
        return s;
    }
    *out = m;
    return SN_OK;
}

int sn_cmd_serve(int argc, char **argv) {
    const char *prog = "sinter serve";
    const char *model_doc = NULL, *name_doc = NULL, *weights_doc = NULL, *host = "127.0.0.1";
    sn_serve_opts so = sn_serve_defaults();
    int64_t port = so.port, threads = 0, http_threads = so.http_threads, max_batch = so.max_batch;
    int64_t timeout_us = so.batch_timeout_us, max_body = (int64_t)so.max_body_bytes;
    int64_t max_instances = so.max_instances, timeout_s = so.timeout_s;
    const char *device = NULL;
    sn_flag flags[] = {
        {.name = "model", .kind = SN_FLAG_STRING, .value = &model_doc, .metavar = "NAME_OR_PATH",
         .required = false, .default_text = "required; repeat for more models",
         .help = "model to serve: a preset (tpu_guide_cnn, small_cnn, mlp) or what predict's --model takes"},
        {.name = "weights", .kind = SN_FLAG_STRING, .value = &weights_doc, .metavar = "PATH",
         .default_text = "none: freshly initialised weights (seed 0)",
         .help = "weights of the --model before it (.weights.h5 or Keras .h5)"},
        {.name = "name", .kind = SN_FLAG_STRING, .value = &name_doc, .metavar = "NAME",
         .default_text = "the model's name", .help = "URL name of the --model before it"},
        {.name = "host", .kind = SN_FLAG_STRING, .value = &host, .metavar = "ADDR",
         .help = "address to listen on (0.0.0.0 exposes the server to the network)"},
        {.name = "port", .kind = SN_FLAG_INT, .value = &port, .imin = 0, .imax = 65535,
         .help = "TCP port, 0 = any free port (printed)"},
        {.name = "threads", .kind = SN_FLAG_INT, .value = &threads, .imin = 0, .imax = 4096,
         .help = "compute threads, 0 = $SN_NUM_THREADS or all cores"},
        SN_CLI_DEVICE_FLAG(&device),
        {.name = "http-threads", .kind = SN_FLAG_INT, .value = &http_threads, .imin = 1,
         .imax = 256, .help = "threads polling connections and parsing bodies"},
        {.name = "max-batch", .kind = SN_FLAG_INT, .value = &max_batch, .imin = 1, .imax = 4096,
         .help = "instances per model run (dynamic batching)"},
        {.name = "batch-timeout-us", .kind = SN_FLAG_INT, .value = &timeout_us, .imin = 0,
         .imax = 10000000, .help = "how long a request waits for others to fill a batch"},
        {.name = "max-body-bytes", .kind = SN_FLAG_INT, .value = &max_body, .imin = 2,
         .imax = (int64_t)1 << 32, .help = "larger request bodies get 413"},
        {.name = "max-instances", .kind = SN_FLAG_INT, .value = &max_instances, .imin = 1,
         .imax = 1 << 20, .help = "instances per request (more get 400)"},
        {.name = "timeout-s", .kind = SN_FLAG_INT, .value = &timeout_s, .imin = 1, .imax = 3600,
         .help = "idle connection timeout; a body must arrive within 3x this"},
    };
    sn_flag_set fs = {prog,
                      "Serves models with TensorFlow Serving's REST API: GET /v1/models/NAME[/metadata],\n"
                      "POST /v1/models/NAME:predict with {\"instances\": [...]} or {\"inputs\": ...},\n"
                      "GET /healthz, /readyz, /monitoring/prometheus/metrics. Concurrent requests are\n"
                      "batched. SIGTERM/SIGINT drain the requests in flight and exit 0 (docs/serving.md).",
                      (int)(sizeof flags / sizeof flags[0]), flags};
    model_arg args[MAX_MODELS];
    int n = 0, nrest = 0;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest) return 1;
    int rc = split_models(prog, argc, argv, args, &n, rest, &nrest);
    if (rc < 0) rc = sn_flags_parse(&fs, nrest, rest);
    free(rest);
    if (rc >= 0) return rc;
    if (n == 0) {
        fprintf(stderr, "%s: --model NAME_OR_PATH is required (see %s --help)\n", prog, prog);
        return 2;
    }
    sn_cli_set_threads(threads);
    if ((rc = sn_cli_set_device(prog, device)) >= 0) return rc;
    so.host = host;
    so.port = (int)port;
    so.http_threads = (int)http_threads;
    so.max_batch = (int)max_batch;
    so.batch_timeout_us = timeout_us;
    so.max_body_bytes = (size_t)max_body;
    so.max_instances = (int)max_instances;
    so.timeout_s = (int)timeout_s;

    /* SIGTERM and SIGINT are taken by sigwait below; blocked before any thread starts, so
     * that every thread inherits the mask and none is interrupted. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    sn_model *models[MAX_MODELS] = {0};
    char names[MAX_MODELS][128];
    const char *name_ptrs[MAX_MODELS];
    sn_server *srv = NULL;
    rc = 1;
    for (int i = 0; i < n; i++) {
        if (load(&args[i], &models[i]) != SN_OK) {
            fprintf(stderr, "%s: --model %s: %s\n", prog, args[i].model, sn_last_error());
            goto done;
        }
        if (!args[i].weights && !is_keras_file(args[i].model))
            fprintf(stderr, "%s: --model %s has no --weights: serving freshly initialised "
                    "weights (seed 0)\n", prog, args[i].model);
        if (args[i].name) snprintf(names[i], sizeof names[i], "%s", args[i].name);
        else default_name(args[i].model, names[i], sizeof names[i]);
        name_ptrs[i] = names[i];
    }
    if (sn_server_start(n, models, name_ptrs, &so, &srv) != SN_OK) {
        rc = sn_cli_fail(prog);
        goto done;
    }
    int port_now = sn_server_port(srv);
    bool v6 = strchr(host, ':') != NULL;
    for (int i = 0; i < n; i++) {
        int64_t b[16];
        int nb = sn_server_buckets(srv, i, b, 16);
        printf("Serving %s at http://%s%s%s:%d/v1/models/%s (batch buckets", names[i],
               v6 ? "[" : "", host, v6 ? "]" : "", port_now, names[i]);
        for (int k = 0; k < nb && k < 16; k++) printf(" %lld", (long long)b[k]);
        printf(")\n");
    }
    fflush(stdout);
    int sig = 0;
    while (sigwait(&sigs, &sig) != 0) {
    }
    fprintf(stderr, "%s: %s: draining the requests in flight\n", prog,
            sig == SIGTERM ? "SIGTERM" : "SIGINT");
    int left = sn_server_drain(srv, 30.0);
    if (left > 0)
        fprintf(stderr, "%s: %d requests were still in flight after 30 s; closed them\n", prog, left);
    else
        fprintf(stderr, "%s: stopped\n", prog);
    rc = 0;
done:
    sn_server_free(srv);
    for (int i = 0; i < n; i++) sn_model_free(models[i]);
    return rc;
}
