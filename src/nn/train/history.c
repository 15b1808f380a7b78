/* History: the per-epoch logs fit returns (Keras's History.history, by epoch and name). */
#include <math.h>
#include <string.h>

#include "nn/train/train_impl.h"

#define HIST_MAX_NAMES SN_LOGS_MAX

struct sn_history {
    int n_names;
    char *names[HIST_MAX_NAMES];
    int n_epochs, cap_epochs;
    double *values; /* n_epochs rows of HIST_MAX_NAMES; NaN where a name is absent */
};

sn_history *sn_history_new(void) { return sn_calloc(1, sizeof(sn_history)); }

static int name_index(const sn_history *h, const char *name) {
    for (int i = 0; i < h->n_names; i++)
        if (strcmp(h->names[i], name) == 0) return i;
    return -1;
}

sn_status sn_history_append(sn_history *h, const sn_logs *logs) {
    if (h->n_epochs == h->cap_epochs) {
        int cap = h->cap_epochs ? 2 * h->cap_epochs : 8;
        double *v = sn_realloc(h->values, (size_t)cap * HIST_MAX_NAMES * sizeof *v);
        if (!v) return SN_ERR_NOMEM;
        h->values = v;
        h->cap_epochs = cap;
    }
    double *row = h->values + (size_t)h->n_epochs * HIST_MAX_NAMES;
    for (int i = 0; i < HIST_MAX_NAMES; i++) row[i] = NAN;
    for (int i = 0; i < logs->n; i++) {
        int k = name_index(h, logs->names[i]);
        if (k < 0) {
            if (h->n_names == HIST_MAX_NAMES) continue; /* cannot happen: logs has as many */
            if (!(h->names[h->n_names] = sn_strdup(logs->names[i]))) return SN_ERR_NOMEM;
            k = h->n_names++;
        }
        row[k] = logs->values[i];
    }
    h->n_epochs++;
    return SN_OK;
}

int sn_history_epochs(const sn_history *h) { return h ? h->n_epochs : 0; }

double sn_history_get(const sn_history *h, const char *name, int epoch) {
    if (!h || !name || epoch < 0 || epoch >= h->n_epochs) return NAN;
    int k = name_index(h, name);
    return k < 0 ? NAN : h->values[(size_t)epoch * HIST_MAX_NAMES + k];
}

void sn_history_free(sn_history *h) {
    if (!h) return;
    for (int i = 0; i < h->n_names; i++) free(h->names[i]);
    free(h->values);
    free(h);
}

/* ---- checkpoints (nn/train/checkpoint.c) ------------------------------------------------------- */

int sn_history_names(const sn_history *h, const char **names) {
    for (int i = 0; i < h->n_names; i++) names[i] = h->names[i];
    return h->n_names;
}

double sn_history_value_at(const sn_history *h, int epoch, int k) {
    return h->values[(size_t)epoch * HIST_MAX_NAMES + k];
}

sn_status sn_history_restore(sn_history *h, int n_names, char *const *names, int n_epochs,
                             const double *values) {
    if (n_names < 0 || n_names > HIST_MAX_NAMES || n_epochs < 0)
        return sn_errorf(SN_ERR_FORMAT, "history of %d names (at most %d) and %d epochs",
                         n_names, HIST_MAX_NAMES, n_epochs);
    for (int i = 0; i < h->n_names; i++) free(h->names[i]);
    h->n_names = 0;
    h->n_epochs = 0;
    for (int i = 0; i < n_names; i++) {
        if (!(h->names[i] = sn_strdup(names[i]))) return SN_ERR_NOMEM;
        h->n_names = i + 1;
    }
    if (n_epochs > h->cap_epochs) {
        double *v = sn_realloc(h->values, (size_t)n_epochs * HIST_MAX_NAMES * sizeof *v);
        if (!v) return SN_ERR_NOMEM;
        h->values = v;
        h->cap_epochs = n_epochs;
    }
    for (int e = 0; e < n_epochs; e++)
        for (int k = 0; k < HIST_MAX_NAMES; k++)
            h->values[(size_t)e * HIST_MAX_NAMES + k] =
                k < n_names ? values[(size_t)e * n_names + k] : NAN;
    h->n_epochs = n_epochs;
    return SN_OK;
}
