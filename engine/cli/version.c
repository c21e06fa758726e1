#include <stdio.h>

#include "engine/cli/commands.h"
#include "engine/cpu/cpu.h"
#include "engine/tensor-types.h"

int cli_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fl_types_init();
    printf("faultline %s\n", FL_VERSION);
    printf("cpu: %s\n", fl_cpu_features());
    return 0;
}
