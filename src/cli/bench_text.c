/* Character-model batches and FLOP counts for sinter bench (bench_text.h). */
#include "cli/bench_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "sinter/data.h"

/* The whole file in one malloc'd buffer (*len bytes), or an error naming it. */
static sn_status read_all(const char *path, char **out, size_t *len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return sn_errorf(SN_ERR_IO, "cannot open text '%s': %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 1 << 20;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return sn_errorf(SN_ERR_NOMEM, "reading '%s': out of memory at %zu bytes", path, n);
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return sn_errorf(SN_ERR_IO, "reading text '%s' failed", path);
    }
    *out = buf;
    *len = n;
    return SN_OK;
}

sn_status sn_bench_text_load(const char *path, int64_t batch, int64_t seq, uint64_t seed,
                             sn_bench_text *t) {
    memset(t, 0, sizeof *t);
    char *text = NULL;
    size_t len = 0;
    SN_TRY(read_all(path, &text, &len));
    sn_vocab *v = NULL;
    sn_status s = sn_vocab_build(&v, text, len, false);
    if (s == SN_OK) s = sn_vocab_encode(v, text, len, &t->ids, &t->n);
    if (s != SN_OK) s = sn_error_context(s, "text '%s'", path);
    t->vocab = v ? sn_vocab_size(v) : 0;
    sn_vocab_free(v);
    free(text);
    if (s == SN_OK && t->n < seq + 2)
        s = sn_errorf(SN_ERR_INVALID, "text '%s' has %lld characters, fewer than the %lld one "
                      "sequence of --seq-length %lld needs", path, (long long)t->n,
                      (long long)(seq + 2), (long long)seq);
    if (s != SN_OK) {
        sn_bench_text_free(t);
        return s;
    }
    t->batch = batch;
    t->seq = seq;
    t->seed = seed;
    return SN_OK;
}

void sn_bench_text_free(sn_bench_text *t) {
    if (!t) return;
    free(t->ids);
    t->ids = NULL;
}

sn_status sn_bench_text_feed(void *ctx, sn_plan *p, int64_t step) {
    const sn_bench_text *t = ctx;
    float *x = sn_plan_buffer(p, t->xin);
    int32_t *y = sn_plan_buffer(p, t->yin);
    if (!x || !y) return sn_errorf(SN_ERR_STATE, "bench: the plan has no input buffers");
    uint64_t span = (uint64_t)(t->n - t->seq - 1);
    for (int64_t b = 0; b < t->batch; b++) {
        uint32_t r[4];
        sn_philox(t->seed, (uint64_t)step, (uint64_t)b, r);
        int64_t j = (int64_t)((((uint64_t)r[0] << 32) | r[1]) % span);
        for (int64_t k = 0; k < t->seq; k++) {
            x[b * t->seq + k] = (float)t->ids[j + k];
            y[b * t->seq + k] = t->ids[j + k + 1];
        }
    }
    return SN_OK;
}

double sn_bench_text_flops_per_token(sn_model *m) {
    double fwd = 0;
    sn_graph *g = sn_model_graph(m);
    for (int i = 0; i < sn_model_layer_count(m); i++) {
        const char *cls = sn_model_layer_class(m, i);
        sn_node v[16];
        int nv = sn_model_layer_variables(m, i, v, 16);
        if (!strcmp(cls, "LSTM") || !strcmp(cls, "GRU")) {
            for (int k = 0; k < 2 && k < nv; k++) { /* kernel [D, G*U], recurrent [U, G*U] */
                sn_shape s = sn_node_shape(g, v[k]);
                fwd += 2.0 * (double)s.dim[0] * (double)s.dim[1];
            }
        } else if (!strcmp(cls, "sinter>TransformerBlock") ||
                   !strcmp(cls, "MultiHeadAttention")) {
            /* every matrix (rank >= 2) once per token, and causal attention's q.k and p.v over
             * T/2 keys on average, 2 T d multiply-adds' worth per token */
            sn_shape os = sn_model_output_shape(m);
            int64_t T = os.ndim >= 2 ? os.dim[0] : 1, d = 0;
            for (int k = 0; k < nv; k++) {
                sn_shape s = sn_node_shape(g, v[k]);
                if (s.ndim >= 2) fwd += 2.0 * (double)sn_shape_numel(&s);
                if (s.ndim == 1 && !d) d = s.dim[0];
            }
            fwd += 2.0 * (double)T * (double)d;
        } else if (!strcmp(cls, "Dense") && nv >= 1) {
            sn_shape s = sn_node_shape(g, v[0]);
            fwd += 2.0 * (double)s.dim[0] * (double)s.dim[1];
        }
    }
    return 3.0 * fwd;
}
