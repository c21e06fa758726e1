/* trace-probes.c: fires probes at known times and counts, for
 * test-trace-live: host->GPU copies (backend/cuda/probes-gpu.h, which only CUDA
 * builds fire), the region probe and page faults in that region, and the
 * acquire accounting: 3 of 4 acquires hit (the hit probe, which a launched
 * tracer leaves unattached), every 4th waits and fires acquired claiming a
 * 100 us wait, with the acquire counts so far; at the end each unit's final
 * count (acquires), as pager_close does.
 *
 * usage: trace-probes N [US]   (N copies of 8192 bytes, each ~200 us long,
 *                              US more microseconds between them: long
 *                              enough runs for a tracer to attach with -p) */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/cuda/probes-gpu.h"
#include "pager/pager.h"
#include "pager/probes.h"

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 50, gap = argc > 2 ? atoi(argv[2]) : 0;
    size_t size = 64 * 4096;
    uint8_t *region = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED)
        return 1;
    DTRACE_PROBE2(faultline, region, (uint64_t)(uintptr_t)region, (uint64_t)size);
    uint64_t acq[15] = { 0 }, all = 0; /* units: (i % 3, i % 5), i.e. i % 15 */
    for (size_t i = 0; i < size; i += 4096)
        region[i] = 1;   /* 64 first-touch faults inside the region */
    for (int i = 0; i < n; i++) {
        int layer = i % 3, expert = i % 5;
        uint64_t off = (uint64_t)i * 8192;
        FL_PROBE_COPY_BEGIN(layer, expert, PAGER_KIND_DOWN, 8192, off);
        usleep(200);
        FL_PROBE_COPY_END(layer, expert, PAGER_KIND_DOWN, 8192, off);
        if (gap > 0)
            usleep((useconds_t)gap);
        acq[i % 15]++;
        all++;
        if (i % 4)
            FL_PROBE_HIT(layer, expert, PAGER_KIND_DOWN, 0, off);
        else
            FL_PROBE_ACQUIRED(layer, expert, PAGER_KIND_DOWN, 100000, off, acq[i % 15], all);
    }
    for (int u = 0; u < 15; u++)
        if (acq[u])
            FL_PROBE_ACQUIRES(u % 3, u % 5, PAGER_KIND_DOWN, 0, acq[u], all);
    munmap(region, size);
    return 0;
}
