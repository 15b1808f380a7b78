/* Internal to the sinter command: a small flag parser shared by the subcommands.
 *
 * Flags are "--name VALUE" or "--name=VALUE" (booleans: "--name", or "--name=true|false").
 * Each flag writes into a variable of the caller whose initial value is the default shown by
 * --help. A bad flag prints one line naming the flag, the value and what is accepted:
 *
 *     sinter train: --batch-size: 'abc' is not an integer (expected 1 to 65536)
 *
 * and the subcommand exits with 2 (usage error), as the flag errors of common Unix tools. */
#ifndef SN_CLI_FLAGS_H
#define SN_CLI_FLAGS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum sn_flag_kind {
    SN_FLAG_INT,    /* value: int64_t *, within [imin, imax] */
    SN_FLAG_FLOAT,  /* value: double *, finite, within (or [) fmin, fmax] */
    SN_FLAG_ENUM,   /* value: const char **, one of `choices` (the pointer stored is the choice) */
    SN_FLAG_STRING, /* value: const char ** (points into argv) */
    SN_FLAG_BOOL,   /* value: bool * */
} sn_flag_kind;

typedef struct sn_flag {
    const char *name;     /* without the dashes: "batch-size" */
    sn_flag_kind kind;
    void *value;
    const char *help;
    int64_t imin, imax;
    double fmin, fmax;
    bool fmin_exclusive;  /* "> fmin" rather than ">= fmin" (learning rates) */
    const char *const *choices; /* SN_FLAG_ENUM: NULL-terminated */
    const char *metavar;  /* shown in --help: "PATH", "N" (default from the kind) */
    const char *default_text; /* shown instead of the initial value when set */
    bool required;
    bool set;             /* written by the parser: the flag was given */
} sn_flag;

typedef struct sn_flag_set {
    const char *prog;        /* "sinter train" */
    const char *description; /* a paragraph for --help */
    int n;
    sn_flag *flags;
} sn_flag_set;

/* Parses argv[1 .. argc-1] (argv[0] is the subcommand). Returns -1 when the command should go
 * on, 0 after printing --help to stdout, 2 after printing a usage error to stderr. */
int sn_flags_parse(sn_flag_set *fs, int argc, char **argv);
/* The flag called `name` (NULL when there is none). */
sn_flag *sn_flags_find(sn_flag_set *fs, const char *name);
/* Prints "<prog>: <sn_last_error()>" to stderr and returns 1 (the exit code of a library
 * failure). */
int sn_cli_fail(const char *prog);
/* Applies --threads (0 keeps $SN_NUM_THREADS or all cores). */
void sn_cli_set_threads(int64_t threads);
/* --device NAME of train, evaluate, predict, bench, generate and serve: the flag's entry, the
 * check after parsing (an unknown device, or a GPU where there is none, prints the reason and
 * returns 1; -1 = go on; NULL = the default device) and the compile options it goes into
 * (every model the command compiles runs its plans there). */
#define SN_CLI_DEVICE_FLAG(addr)                                                               \
    {.name = "device", .kind = SN_FLAG_STRING, .value = (addr), .metavar = "NAME",              \
     .default_text = "cpu:0",                                                                  \
     .help = "device the model runs on: cpu:0, gpu:0, /device:GPU:0 or "                       \
             "/job:localhost/replica:0/task:0/device:GPU:0"}
int sn_cli_set_device(const char *prog, const char *name);
struct sn_compile_opts;
void sn_cli_apply_device(struct sn_compile_opts *co);

#endif
