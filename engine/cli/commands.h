/* commands.h: the subcommands of the faultline CLI. Each takes argc/argv
 * starting at its own name and returns the process exit status. A module that
 * adds a command declares it here and adds one line to FL_CLI_COMMANDS. */
#ifndef FL_CLI_COMMANDS_H
#define FL_CLI_COMMANDS_H

int cli_version(int argc, char **argv);

#define FL_CLI_COMMANDS \
    { "version", cli_version, "print the version and the CPU features in use" },

#endif
