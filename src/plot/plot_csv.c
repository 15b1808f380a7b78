/* Reads the CSV logger's file (header line, then numeric rows) for sinter plot. A small
 * reader of its own: the file is ours (sn_callback_csv_logger: no quotes, no embedded
 * commas), so a general CSV library would add a dependency for nothing. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "plot/plot.h"

void sn_plot_table_free(sn_plot_table *t) {
    if (!t) return;
    for (int i = 0; i < t->n_cols; i++) free(t->names[i]);
    free(t->names);
    free(t->v);
    memset(t, 0, sizeof *t);
}

int sn_plot_table_col(const sn_plot_table *t, const char *name) {
    for (int i = 0; i < t->n_cols; i++)
        if (!strcmp(t->names[i], name)) return i;
    return -1;
}

static void chomp(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = '\0';
}

static sn_status parse_header(sn_plot_table *t, char *line, const char *path) {
    int n = 1;
    for (char *p = line; *p; p++) n += *p == ',';
    if (!(t->names = sn_calloc((size_t)n, sizeof *t->names))) return SN_ERR_NOMEM;
    char *save = NULL;
    for (char *tok = strtok_r(line, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!*tok) continue;
        if (!(t->names[t->n_cols] = sn_strdup(tok))) return SN_ERR_NOMEM;
        t->n_cols++;
    }
    if (t->n_cols != n)
        return sn_errorf(SN_ERR_INVALID, "plot: %s: line 1: %d column names for %d columns (an "
                         "empty name?)", path, t->n_cols, n);
    return SN_OK;
}

static sn_status parse_row(sn_plot_table *t, char *line, const char *path, int lineno,
                           double *row) {
    int col = 0;
    char *p = line;
    for (;;) {
        char *end = strchr(p, ',');
        if (end) *end = '\0';
        if (col >= t->n_cols)
            return sn_errorf(SN_ERR_INVALID, "plot: %s: line %d has more than the header's %d "
                             "fields", path, lineno, t->n_cols);
        if (!*p || !strcasecmp(p, "NA") || !strcasecmp(p, "nan")) {
            row[col] = NAN;
        } else {
            char *e;
            errno = 0;
            row[col] = strtod(p, &e);
            if (*e || errno == ERANGE)
                return sn_errorf(SN_ERR_INVALID, "plot: %s: line %d, column '%s': '%s' is not a "
                                 "number", path, lineno, t->names[col], p);
        }
        col++;
        if (!end) break;
        p = end + 1;
    }
    if (col != t->n_cols)
        return sn_errorf(SN_ERR_INVALID, "plot: %s: line %d has %d fields; the header has %d",
                         path, lineno, col, t->n_cols);
    return SN_OK;
}

sn_status sn_plot_table_read_csv(const char *path, sn_plot_table *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) return sn_errorf(SN_ERR_IO, "plot: cannot open '%s': %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, cap_rows = 0;
    sn_status s = SN_OK;
    while (s == SN_OK && getline(&line, &cap, f) >= 0) {
        lineno++;
        chomp(line);
        if (!*line) continue;
        if (!out->names) {
            s = parse_header(out, line, path);
            continue;
        }
        if (out->n_rows == cap_rows) {
            int nc = cap_rows ? 2 * cap_rows : 16;
            double *v = sn_realloc(out->v, (size_t)nc * (size_t)out->n_cols * sizeof *v);
            if (!v) {
                s = SN_ERR_NOMEM;
                break;
            }
            out->v = v;
            cap_rows = nc;
        }
        s = parse_row(out, line, path, lineno, out->v + (size_t)out->n_rows * out->n_cols);
        if (s == SN_OK) out->n_rows++;
    }
    if (s == SN_OK && ferror(f))
        s = sn_errorf(SN_ERR_IO, "plot: reading '%s' failed: %s", path, strerror(errno));
    if (s == SN_OK && !out->names)
        s = sn_errorf(SN_ERR_INVALID, "plot: '%s' is empty; expected a CSV log with a header "
                      "(sinter train --csv)", path);
    free(line);
    fclose(f);
    return s;
}
