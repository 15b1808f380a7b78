/* The sinter command's flag parser (see flags.h). */
#include "cli/flags.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinter/device.h"
#include "sinter/nn.h"
#include "sinter/status.h"

sn_flag *sn_flags_find(sn_flag_set *fs, const char *name) {
    for (int i = 0; i < fs->n; i++)
        if (!strcmp(fs->flags[i].name, name)) return &fs->flags[i];
    return NULL;
}

static const char *metavar(const sn_flag *f) {
    if (f->metavar) return f->metavar;
    switch (f->kind) {
    case SN_FLAG_INT: return "N";
    case SN_FLAG_FLOAT: return "X";
    case SN_FLAG_ENUM: return "NAME";
    case SN_FLAG_STRING: return "VALUE";
    case SN_FLAG_BOOL: return "";
    }
    return "";
}

/* "sgd, adam, adamw or rmsprop" */
static void print_choices(FILE *out, const char *const *c) {
    for (int i = 0; c[i]; i++)
        fprintf(out, "%s%s", i == 0 ? "" : c[i + 1] ? ", " : " or ", c[i]);
}

static void print_float_range(FILE *out, const sn_flag *f) {
    fprintf(out, "a number %s %g and <= %g", f->fmin_exclusive ? ">" : ">=", f->fmin, f->fmax);
}

static void print_help(const sn_flag_set *fs) {
    printf("usage: %s [flags]\n\n%s\n\nflags:\n", fs->prog, fs->description);
    for (int i = 0; i < fs->n; i++) {
        const sn_flag *f = &fs->flags[i];
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", f->name, f->kind == SN_FLAG_BOOL ? "" : " ",
                 metavar(f));
        printf("  %-26s %s", left, f->help);
        printf(" (");
        switch (f->kind) {
        case SN_FLAG_INT:
            printf("%lld to %lld; ", (long long)f->imin, (long long)f->imax);
            break;
        case SN_FLAG_FLOAT:
            print_float_range(stdout, f);
            printf("; ");
            break;
        case SN_FLAG_ENUM:
            print_choices(stdout, f->choices);
            printf("; ");
            break;
        case SN_FLAG_STRING:
        case SN_FLAG_BOOL: break;
        }
        if (f->required) {
            printf("required");
        } else {
            printf("default: ");
            if (f->default_text) {
                printf("%s", f->default_text);
            } else {
                switch (f->kind) {
                case SN_FLAG_INT: printf("%lld", (long long)*(int64_t *)f->value); break;
                case SN_FLAG_FLOAT: printf("%g", *(double *)f->value); break;
                case SN_FLAG_ENUM:
                case SN_FLAG_STRING: {
                    const char *s = *(const char **)f->value;
                    printf("%s", s ? s : "none");
                    break;
                }
                case SN_FLAG_BOOL: printf("%s", *(bool *)f->value ? "on" : "off"); break;
                }
            }
        }
        printf(")\n");
    }
    printf("  %-26s %s\n", "--help", "print this help and exit");
}

/* Parses `text` into flag f; prints the error and returns false on a bad value. */
static bool set_value(const sn_flag_set *fs, sn_flag *f, const char *text) {
    switch (f->kind) {
    case SN_FLAG_INT: {
        char *end;
        errno = 0;
        long long v = strtoll(text, &end, 10);
        if (!*text || *end || errno == ERANGE) {
            fprintf(stderr, "%s: --%s: '%s' is not an integer (expected %lld to %lld)\n",
                    fs->prog, f->name, text, (long long)f->imin, (long long)f->imax);
            return false;
        }
        if (v < f->imin || v > f->imax) {
            fprintf(stderr, "%s: --%s: %lld is out of range (expected %lld to %lld)\n", fs->prog,
                    f->name, v, (long long)f->imin, (long long)f->imax);
            return false;
        }
        *(int64_t *)f->value = v;
        return true;
    }
    case SN_FLAG_FLOAT: {
        char *end;
        errno = 0;
        double v = strtod(text, &end);
        if (!*text || *end || errno == ERANGE || !isfinite(v)) {
            fprintf(stderr, "%s: --%s: '%s' is not a finite number (expected ", fs->prog,
                    f->name, text);
            print_float_range(stderr, f);
            fprintf(stderr, ")\n");
            return false;
        }
        if (v > f->fmax || v < f->fmin || (f->fmin_exclusive && v == f->fmin)) {
            fprintf(stderr, "%s: --%s: %g is out of range (expected ", fs->prog, f->name, v);
            print_float_range(stderr, f);
            fprintf(stderr, ")\n");
            return false;
        }
        *(double *)f->value = v;
        return true;
    }
    case SN_FLAG_ENUM:
        for (int i = 0; f->choices[i]; i++) {
            if (!strcmp(text, f->choices[i])) {
                *(const char **)f->value = f->choices[i];
                return true;
            }
        }
        fprintf(stderr, "%s: --%s: '%s' is not accepted (expected ", fs->prog, f->name, text);
        print_choices(stderr, f->choices);
        fprintf(stderr, ")\n");
        return false;
    case SN_FLAG_STRING:
        if (!*text) {
            fprintf(stderr, "%s: --%s: the value is empty (expected %s)\n", fs->prog, f->name,
                    metavar(f));
            return false;
        }
        *(const char **)f->value = text;
        return true;
    case SN_FLAG_BOOL:
        if (!strcmp(text, "true") || !strcmp(text, "1")) {
            *(bool *)f->value = true;
        } else if (!strcmp(text, "false") || !strcmp(text, "0")) {
            *(bool *)f->value = false;
        } else {
            fprintf(stderr, "%s: --%s: '%s' is not accepted (expected true or false)\n",
                    fs->prog, f->name, text);
            return false;
        }
        return true;
    }
    return false;
}

int sn_flags_parse(sn_flag_set *fs, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            print_help(fs);
            return 0;
        }
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            fprintf(stderr, "%s: unexpected argument '%s' (flags start with --; see %s --help)\n",
                    fs->prog, arg, fs->prog);
            return 2;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        sn_flag *f = NULL;
        for (int k = 0; k < fs->n; k++)
            if (strlen(fs->flags[k].name) == len && !strncmp(fs->flags[k].name, name, len))
                f = &fs->flags[k];
        if (!f) {
            fprintf(stderr, "%s: unknown flag '--%.*s' (see %s --help for the accepted flags)\n",
                    fs->prog, (int)len, name, fs->prog);
            return 2;
        }
        const char *value;
        if (eq) {
            value = eq + 1;
        } else if (f->kind == SN_FLAG_BOOL) {
            value = "true";
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            fprintf(stderr, "%s: --%s needs a value (%s)\n", fs->prog, f->name, metavar(f));
            return 2;
        }
        if (!set_value(fs, f, value)) return 2;
        f->set = true;
    }
    for (int k = 0; k < fs->n; k++) {
        if (fs->flags[k].required && !fs->flags[k].set) {
            fprintf(stderr, "%s: --%s %s is required: %s (see %s --help)\n", fs->prog,
                    fs->flags[k].name, metavar(&fs->flags[k]), fs->flags[k].help, fs->prog);
            return 2;
        }
    }
    return -1;
}

int sn_cli_fail(const char *prog) {
    const char *msg = sn_last_error();
    fprintf(stderr, "%s: %s\n", prog, msg && *msg ? msg : "failed (no message)");
    return 1;
}

void sn_cli_set_threads(int64_t threads) {
    if (threads > 0) sn_set_num_threads((int)threads);
}

/* The command's --device, checked once; a process runs one command. */
static char g_device[sizeof ((sn_compile_opts *)0)->device];

int sn_cli_set_device(const char *prog, const char *name) {
    g_device[0] = '\0';
    if (!name) return -1;
    if (strlen(name) >= sizeof g_device) {
        fprintf(stderr, "%s: --device: '%.40s...' is longer than %zu characters\n", prog, name,
                sizeof g_device - 1);
        return 2;
    }
    int idx;
    if (sn_device_find(name, &idx) != SN_OK) return sn_cli_fail(prog);
    snprintf(g_device, sizeof g_device, "%s", name);
    return -1;
}

void sn_cli_apply_device(sn_compile_opts *co) {
    if (co && g_device[0]) snprintf(co->device, sizeof co->device, "%s", g_device);
}
