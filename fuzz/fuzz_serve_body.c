/* Request bodies of `sinter serve`'s :predict (src/serve/json_body.c), the server's one reader
 * of outside data besides HTTP itself (libmicrohttpd's). The first byte picks the model's
 * input shape; the rest is the body. A body must parse to exactly n * numel finite floats with
 * 1 <= n <= max_instances, or fail with a message; the answer written for rows of any values
 * and the error JSON for the message must be valid JSON again. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const sn_shape shapes[] = {
        {.ndim = 1, .dim = {3}}, {.ndim = 2, .dim = {2, 3}}, {.ndim = 3, .dim = {2, 2, 1}}};
    sn_serve_model sm;
    memset(&sm, 0, sizeof sm);
    sm.name = "m";
    sm.in = shapes[data[0] % 3];
    sm.out = (sn_shape){.ndim = 1, .dim = {2}};
    sm.in_numel = sn_shape_numel(&sm.in);
    sm.out_numel = 2;
    sn_serve_limits lim = {.max_depth = 8, .max_instances = 4};
    float *x = NULL;
    int64_t n = -1;
    sn_serve_format fmt;
    char err[512];
    err[0] = '\0';
    if (sn_serve_parse_predict((const char *)data + 1, size - 1, &sm, &lim, &x, &n, &fmt, err,
                               sizeof err)) {
        if (!x || n < 1 || n > lim.max_instances) abort();
        volatile float acc = 0;
        for (int64_t i = 0; i < n * sm.in_numel; i++) {
            if (!isfinite(x[i])) abort();
            acc += x[i];
        }
        (void)acc;
        /* Answers for rows of the parsed values (NaN and infinities included) parse again. */
        float *y = malloc((size_t)(n * sm.out_numel) * sizeof *y);
        if (!y) abort();
        for (int64_t i = 0; i < n * sm.out_numel; i++) y[i] = x[i % (n * sm.in_numel)] * 1e30f;
        if (n > 1) y[1] = NAN;
        size_t len = 0;
        char *js = sn_serve_write_predictions(&sm, fmt, y, n, &len);
        if (!js || len != strlen(js)) abort();
        json_error_t je;
        json_t *back = json_loadb(js, len, JSON_ALLOW_NUL, &je);
        /* jansson is strict JSON: NaN/Infinity (TF Serving's tokens) do not load; only rows
         * without them are checked. */
        if (!back && n == 1 && isfinite(y[0]) && isfinite(y[1])) abort();
        json_decref(back);
        free(js);
        free(y);
        free(x);
    } else {
        if (x || !err[0]) abort(); /* a failed parse leaves nothing and says why */
        size_t len = 0;
        char *js = sn_serve_error_json(err, &len);
        json_error_t je;
        json_t *back = js ? json_loadb(js, len, 0, &je) : NULL;
        if (!back || !json_is_string(json_object_get(back, "error"))) abort();
        json_decref(back);
        free(js);
    }
    return 0;
}
