/* The `sinter` command: one subcommand per file (cmd_*.c), dispatched from the table below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static const sn_cli_command commands[] = {
    {"devices", "list the logical devices of this machine", sn_cmd_devices},
    {"train", "train a model (Fashion-MNIST by default) and report its test accuracy", sn_cmd_train},
    {"evaluate", "loss and accuracy of saved weights on the test split", sn_cmd_evaluate},
    {"predict", "predicted class and probabilities per test image", sn_cmd_predict},
    {"summary", "print a model's layers, output shapes and parameter counts", sn_cmd_summary},
    {"export", "write a model with its weights as a Keras .keras archive or model JSON", sn_cmd_export},
    {"generate", "write text with a trained character model (sinter train --data ... --save)", sn_cmd_generate},
    {"bench", "time training steps of a preset model (key=value line, --profile per op)", sn_cmd_bench},
    {"plot", "draw loss and accuracy per epoch from a CSV log as a PNG", sn_cmd_plot},
    {"serve", "serve models with TensorFlow Serving's REST API (batched predictions)", sn_cmd_serve},
};

static void usage(FILE *f) {
    fprintf(f, "usage: sinter <command> [flags]   (sinter <command> --help for its flags)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

/* libgomp spin-waits up to 300,000 rounds between parallel regions unless told otherwise, and it
 * reads that setting once, when it loads. On cores that something else also uses, spinning
 * workers steal the cores the other threads need: measured here, small_cnn steps went from
 * 15 ms to 1,190 ms with two busy processes beside it, while a spin count of 1,000 kept 15 ms
 * on idle cores and 20-40 ms on busy ones (docs/benchmarks.md). So, unless the user chose a
 * policy, the command starts itself again once with GOMP_SPINCOUNT=1000. */
static void tune_openmp_wait(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("GOMP_SPINCOUNT", "1000", 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* Not reached unless exec failed: go on with libgomp's default. */
}

int main(int argc, char **argv) {
    tune_openmp_wait(argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "sinter: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
