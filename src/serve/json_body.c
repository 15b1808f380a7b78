/* Request bodies of :predict -> f32 rows, and the JSON the server answers with.
 *
 * Bodies are untrusted: before jansson builds a tree, one pass over the bytes bounds the
 * nesting depth and the number of values, so a body within --max-body-bytes cannot make the
 * parser recurse deeply or allocate a node per byte beyond what a valid request of
 * max_instances rows needs. Numbers must fit a float; NaN/Infinity tokens, which TF Serving
 * accepts, are rejected by jansson (strict JSON) with a 400. */
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "serve/serve_impl.h"

#define SN_SERVE_INPUT_NAME "input"
#define SN_SERVE_OUTPUT_NAME "output_0"

static bool fail(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return false;
}

/* Depth and value count of the raw bytes, strings skipped. Values are counted by commas
 * and strings: every array element after the first follows a comma. */
static bool prescan(const char *b, size_t n, int max_depth, int64_t max_values, char *err,
                    size_t cap) {
    int depth = 0;
    int64_t values = 0;
    bool in_str = false, esc = false;
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        if (in_str) {
            if (esc) esc = false;
            else if (c == '\\') esc = true;
            else if (c == '"') in_str = false;
            continue;
        }
        switch (c) {
        case '"': in_str = true; values++; break;
        case '[':
        case '{':
            if (++depth > max_depth)
                return fail(err, cap, "JSON Parse error: nesting deeper than %d levels at byte %zu",
                            max_depth, i);
            break;
        case ']':
        case '}': depth--; break;
        case ',': values++; break;
        default: break;
        }
        if (values > max_values)
            return fail(err, cap, "JSON Parse error: more than %lld values in the body (this "
                        "server takes at most %lld per request)", (long long)max_values,
                        (long long)max_values);
    }
    return true;
}

static void shape_text(const sn_shape *s, bool batch, char *out, size_t cap) {
    size_t k = 0;
    k += (size_t)snprintf(out + k, cap - k, "[%s", batch ? "-1" : "");
    for (int i = 0; i < s->ndim && k < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%lld", (i || batch) ? ", " : "",
                              (long long)s->dim[i]);
    if (k < cap) snprintf(out + k, cap - k, "]");
}

static const char *kind_of(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

typedef struct walker {
    float *dst;
    const sn_shape *s;
    const char *root;    /* "instances[3]" or "inputs" */
    const char *expect;  /* "[28, 28, 1]" */
    int64_t idx[SN_MAX_DIMS];
    char *err;
    size_t cap;
} walker;

static void path_text(const walker *w, int depth, char *out, size_t cap) {
    size_t k = (size_t)snprintf(out, cap, "%s", w->root);
    for (int i = 0; i < depth && k < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "[%lld]", (long long)w->idx[i]);
}

/* Fills w->dst with the values of v, which must have shape w->s from `axis` on. */
static bool fill(walker *w, const json_t *v, int axis) {
    char path[160];
    if (axis == w->s->ndim) {
        double d;
        if (json_is_integer(v)) d = (double)json_integer_value(v);
        else if (json_is_real(v)) d = json_real_value(v);
        else {
            path_text(w, axis, path, sizeof path);
            return fail(w->err, w->cap, "%s: expected shape %s of numbers (DT_FLOAT); %s is %s, "
                        "not a number", w->root, w->expect, path, kind_of(v));
        }
        if (!(fabs(d) <= FLT_MAX)) {
            path_text(w, axis, path, sizeof path);
            return fail(w->err, w->cap, "%s: %s = %g is out of the float range (DT_FLOAT, "
                        "magnitude at most %g)", w->root, path, d, (double)FLT_MAX);
        }
        *w->dst++ = (float)d;
        return true;
    }
    int64_t want = w->s->dim[axis];
    if (!json_is_array(v) || (int64_t)json_array_size(v) != want) {
        path_text(w, axis, path, sizeof path);
        if (json_is_array(v))
            return fail(w->err, w->cap, "%s: expected shape %s (DT_FLOAT); %s is a list of %zu "
                        "elements, not %lld", w->root, w->expect, path, json_array_size(v),
                        (long long)want);
        return fail(w->err, w->cap, "%s: expected shape %s (DT_FLOAT); %s is %s, not a list of "
                    "%lld elements", w->root, w->expect, path, kind_of(v), (long long)want);
    }
    for (int64_t i = 0; i < want; i++) {
        w->idx[axis] = i;
        if (!fill(w, json_array_get(v, (size_t)i), axis + 1)) return false;
    }
    return true;
}

/* The tensor of a named-input object {"input": tensor} (the only input), or v itself. */
static const json_t *unwrap_named(const json_t *v, const char *where, char *err, size_t cap,
                                  bool *ok) {
    *ok = true;
    if (!json_is_object(v)) return v;
    const json_t *t = json_object_get(v, SN_SERVE_INPUT_NAME);
    if (!t || json_object_size(v) != 1) {
        *ok = fail(err, cap, "%s is an object; the model has one named input, '%s' (expected "
                   "{\"%s\": <tensor>} or the tensor itself)", where, SN_SERVE_INPUT_NAME,
                   SN_SERVE_INPUT_NAME);
        return NULL;
    }
    return t;
}

static bool parse_tree(const json_t *root, const sn_serve_model *sm, const sn_serve_limits *lim,
                       float **x, int64_t *n, sn_serve_format *format, char *err, size_t cap) {
    if (!json_is_object(root))
        return fail(err, cap, "The request body must be a JSON object with 'instances' or "
                    "'inputs'; it is %s", kind_of(root));
    const json_t *sig = json_object_get(root, "signature_name");
    if (sig) {
        if (!json_is_string(sig)) return fail(err, cap, "'signature_name' key must be a string value.");
        const char *s = json_string_value(sig);
        if (*s && strcmp(s, "serving_default") != 0)
            return fail(err, cap, "Serving signature name: \"%.100s\" not found in signature def",
                        s);
    }
    const json_t *inst = json_object_get(root, "instances");
    const json_t *cols = json_object_get(root, "inputs");
    if (inst && cols) return fail(err, cap, "Not allowed to have both 'instances' and 'inputs' keys");
    if (!inst && !cols) return fail(err, cap, "Missing 'inputs' or 'instances' key");
    char expect[128];
    bool ok;
    if (inst) {
        *format = SN_SERVE_ROWS;
        if (!json_is_array(inst) || json_array_size(inst) == 0)
            return fail(err, cap, "'instances' must be a non-empty list of instances of shape %s; "
                        "it is %s%s", (shape_text(&sm->in, false, expect, sizeof expect), expect),
                        kind_of(inst), json_is_array(inst) ? " with no elements" : "");
        size_t count = json_array_size(inst);
        if (count > (size_t)lim->max_instances)
            return fail(err, cap, "'instances' has %zu instances; this server takes at most %d "
                        "per request", count, lim->max_instances);
        *n = (int64_t)count;
    } else {
        *format = SN_SERVE_COLUMNS;
        cols = unwrap_named(cols, "'inputs'", err, cap, &ok);
        if (!ok) return false;
        shape_text(&sm->in, true, expect, sizeof expect);
        if (!json_is_array(cols) || json_array_size(cols) == 0)
            return fail(err, cap, "'inputs': expected shape %s (DT_FLOAT); it is %s%s", expect,
                        kind_of(cols), json_is_array(cols) ? " with no elements" : "");
        size_t count = json_array_size(cols);
        if (count > (size_t)lim->max_instances)
            return fail(err, cap, "'inputs' has a batch of %zu; this server takes at most %d per "
                        "request", count, lim->max_instances);
        *n = (int64_t)count;
    }
    float *buf = malloc((size_t)(*n * sm->in_numel) * sizeof *buf);
    if (!buf) return fail(err, cap, "out of memory for %lld instances", (long long)*n);
    shape_text(&sm->in, false, expect, sizeof expect);
    walker w = {.dst = buf, .s = &sm->in, .expect = expect, .err = err, .cap = cap};
    char root_name[48];
    for (int64_t i = 0; i < *n; i++) {
        const json_t *v;
        if (inst) {
            snprintf(root_name, sizeof root_name, "instances[%lld]", (long long)i);
            v = unwrap_named(json_array_get(inst, (size_t)i), root_name, err, cap, &ok);
            if (!ok) {
                free(buf);
                return false;
            }
        } else {
            snprintf(root_name, sizeof root_name, "inputs[%lld]", (long long)i);
            v = json_array_get(cols, (size_t)i);
        }
        w.root = root_name;
        if (!fill(&w, v, 0)) {
            free(buf);
            return false;
        }
    }
    *x = buf;
    return true;
}

bool sn_serve_parse_predict(const char *body, size_t len, const sn_serve_model *sm,
                            const sn_serve_limits *lim, float **x, int64_t *n,
                            sn_serve_format *format, char *err, size_t errcap) {
    *x = NULL;
    *n = 0;
    if (len == 0) return fail(err, errcap, "JSON Parse error: The document is empty");
    /* Twice the values a valid request can need (plus room for keys), so that a request
     * with somewhat too many instances hears how many it may send. */
    int64_t max_values = 2 * (int64_t)lim->max_instances * sm->in_numel + 1024;
    if (!prescan(body, len, lim->max_depth, max_values, err, errcap)) return false;
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        char why[JSON_ERROR_TEXT_LENGTH * 4]; /* jansson quotes the token: any byte */
        return fail(err, errcap, "JSON Parse error: %s at line %d column %d",
                    sn_foreign_text(why, sizeof why, je.text), je.line, je.column);
    }
    bool ok = parse_tree(root, sm, lim, x, n, format, err, errcap);
    json_decref(root);
    return ok;
}

/* ---- answers ---------------------------------------------------------------------------- */

typedef struct out_buf {
    char *p;
    size_t len, cap;
} out_buf;

/* Appends one float: %.9g gives back the same float when parsed (FLT_DECIMAL_DIG); NaN and
 * infinities as TF Serving writes them. */
static void put_float(out_buf *o, float v) {
    if (isnan(v)) o->len += (size_t)snprintf(o->p + o->len, o->cap - o->len, "NaN");
    else if (isinf(v)) o->len += (size_t)snprintf(o->p + o->len, o->cap - o->len, v > 0 ? "Infinity" : "-Infinity");
    else o->len += (size_t)snprintf(o->p + o->len, o->cap - o->len, "%.9g", (double)v);
}

static void put_str(out_buf *o, const char *s) {
    size_t k = strlen(s);
    memcpy(o->p + o->len, s, k);
    o->len += k;
}

static void put_tensor(out_buf *o, const sn_shape *s, int axis, const float **src) {
    if (axis == s->ndim) {
        put_float(o, *(*src)++);
        return;
    }
    put_str(o, "[");
    for (int64_t i = 0; i < s->dim[axis]; i++) {
        if (i) put_str(o, ",");
        put_tensor(o, s, axis + 1, src);
    }
    put_str(o, "]");
}

char *sn_serve_write_predictions(const sn_serve_model *sm, sn_serve_format format,
                                 const float *y, int64_t n, size_t *len) {
    /* At most 15 characters per number ("-1.23456789e-38") and a comma; per list (a row and
     * each list inside it) two brackets and a comma; the frame; the final NUL. */
    size_t lists = 1, inner = 1;
    for (int k = 0; k + 1 < sm->out.ndim; k++) {
        inner *= (size_t)sm->out.dim[k];
        lists += inner;
    }
    size_t cap = (size_t)(n * sm->out_numel) * 16 + (size_t)n * lists * 3 + 64;
    out_buf o = {.p = malloc(cap), .cap = cap};
    if (!o.p) return NULL;
    put_str(&o, format == SN_SERVE_ROWS ? "{\"predictions\": [" : "{\"outputs\": [");
    const float *src = y;
    for (int64_t i = 0; i < n; i++) {
        if (i) put_str(&o, ",");
        put_tensor(&o, &sm->out, 0, &src);
    }
    put_str(&o, "]}");
    o.p[o.len] = '\0';
    *len = o.len;
    return o.p;
}

static char *dump(json_t *v, size_t *len) {
    if (!v) return NULL;
    char *s = json_dumps(v, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(v);
    if (s) *len = strlen(s);
    return s;
}

char *sn_serve_error_json(const char *msg, size_t *len) {
    /* jansson takes UTF-8 only; the message may quote bytes from the URL or the body. */
    char clean[1024];
    size_t k = 0;
    for (; msg[k] && k + 1 < sizeof clean; k++) {
        unsigned char c = (unsigned char)msg[k];
        clean[k] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
    }
    clean[k] = '\0';
    return dump(json_pack("{s:s}", "error", clean), len);
}

char *sn_serve_status_json(const sn_serve_model *sm, size_t *len) {
    (void)sm;
    return dump(json_pack("{s:[{s:s, s:s, s:{s:s, s:s}}]}", "model_version_status", "version",
                          "1", "state", "AVAILABLE", "status", "error_code", "OK",
                          "error_message", ""),
                len);
}

static json_t *tensor_info(const sn_shape *s, const char *name) {
    json_t *dims = json_array();
    if (!dims) return NULL;
    json_array_append_new(dims, json_pack("{s:s, s:s}", "size", "-1", "name", ""));
    for (int i = 0; i < s->ndim; i++) {
        char b[32];
        snprintf(b, sizeof b, "%lld", (long long)s->dim[i]);
        json_array_append_new(dims, json_pack("{s:s, s:s}", "size", b, "name", ""));
    }
    return json_pack("{s:s, s:{s:o, s:b}, s:s}", "dtype", "DT_FLOAT", "tensor_shape", "dim", dims,
                     "unknown_rank", 0, "name", name);
}

char *sn_serve_metadata_json(const sn_serve_model *sm, size_t *len) {
    json_t *in = tensor_info(&sm->in, SN_SERVE_INPUT_NAME ":0");
    json_t *out = tensor_info(&sm->out, SN_SERVE_OUTPUT_NAME ":0");
    if (!in || !out) {
        json_decref(in);
        json_decref(out);
        return NULL;
    }
    return dump(json_pack("{s:{s:s, s:s, s:s}, s:{s:{s:{s:{s:{s:o}, s:{s:o}, s:s, s:{}}}}}}",
                          "model_spec", "name", sm->name, "signature_name", "", "version", "1",
                          "metadata", "signature_def", "signature_def", "serving_default",
                          "inputs", SN_SERVE_INPUT_NAME, in, "outputs", SN_SERVE_OUTPUT_NAME,
                          out, "method_name", "tensorflow/serving/predict", "defaults"),
                len);
}
