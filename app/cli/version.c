#include <stdio.h>

#include "app/cli/commands.h"
#include "backend/cpu/cpu.h"
#include "gguf/tensor-types.h"

int cli_version(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "faultline version: takes no options ('%s')\n", argv[1]);
        return 2;
    }
    fl_types_init();
    printf("faultline %s\n", FL_VERSION);
    printf("cpu: %s\n", fl_cpu_features());
    return 0;
}
