/* faultline: one CLI, one subcommand per job. */
#include <stdio.h>
#include <string.h>

#include "app/cli/commands.h"
#include "app/cli/interrupt.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
};

static const struct command commands[] = {
    FL_CLI_COMMANDS
};

static void usage(FILE *out)
{
    fprintf(out, "usage: faultline COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\n'faultline COMMAND --help' describes a command's options.\n"
                 "Exit status: 0 done, 1 a runtime error (one line says what), 2 a command-line\n"
                 "mistake, 128+N stopped by signal N (130: Ctrl-C).\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    cli_interrupt_default(); /* commands that stop cleanly install their own */
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "faultline: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
