/* host-memory.c: /proc/meminfo's MemAvailable (host-memory.h). */
#include "base/host-memory.h"

#include <stdio.h>

uint64_t fl_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kb * 1024;
}
