/* The `sinter` command: one subcommand per file (cmd_*.c), dispatched from the table below. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const sn_cli_command commands[] = {
    {"devices", "list the logical devices of this machine", sn_cmd_devices},
};

static void usage(FILE *f) {
    fprintf(f, "usage: sinter <command> [flags]   (sinter <command> --help for its flags)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv) {
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
