#include <stdio.h>

#include "engine/cli/commands.h"

int cli_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("faultline %s\n", FL_VERSION);
    return 0;
}
