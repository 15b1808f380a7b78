/* Internal to the sinter command. */
#ifndef SN_CLI_H
#define SN_CLI_H

typedef struct sn_cli_command {
    const char *name, *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the command name; returns the exit code */
} sn_cli_command;

int sn_cmd_devices(int argc, char **argv);

#endif
