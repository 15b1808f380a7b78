/* The `sinter` command's dispatch: one subcommand per file (cmd_*.c), from the table below.
 * Kept apart from main() so that a test-only program (tests/sinter_hooked.c) can run the same
 * commands with a seam of its own set. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

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

int sn_cli_main(int argc, char **argv) {
    /* Past a file size limit (ulimit -f) the kernel's default is to kill the process with
     * SIGXFSZ, mid-write and without a word; ignored, the write fails with EFBIG and the
     * command says which file could not be written and keeps the old one. */
    signal(SIGXFSZ, SIG_IGN);
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
