/* trace-probes.c: fires probes at known times and counts, for
 * test-trace-live: host->GPU copies (engine/probes-gpu.h, which only CUDA
 * builds fire), the pager's hit/miss and region probes, and page faults in
 * that region; and after each miss an acquired that claims a 100 us wait
 * after a real one of >= 300 us (the counters keep the claim, the histogram
 * the kernel's timing).
 *
 * usage: trace-probes N   (N copies of 8192 bytes, each ~200 us long) */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/probes-gpu.h"
#include "pager/pager.h"
#include "pager/probes.h"

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 50;
    size_t size = 64 * 4096;
    uint8_t *region = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED)
        return 1;
    DTRACE_PROBE2(faultline, region, (uint64_t)(uintptr_t)region, (uint64_t)size);
    for (size_t i = 0; i < size; i += 4096)
        region[i] = 1;   /* 64 first-touch faults inside the region */
    for (int i = 0; i < n; i++) {
        int layer = i % 3, expert = i % 5;
        uint64_t off = (uint64_t)i * 8192;
        FL_PROBE_COPY_BEGIN(layer, expert, PAGER_KIND_DOWN, 8192, off);
        usleep(200);
        FL_PROBE_COPY_END(layer, expert, PAGER_KIND_DOWN, 8192, off);
        if (i % 4)
            DTRACE_PROBE5(faultline, hit, layer, expert, PAGER_KIND_DOWN, 0, off);
        else {
            DTRACE_PROBE5(faultline, miss, layer, expert, PAGER_KIND_DOWN, 0, off);
            usleep(300);
            FL_PROBE_ACQUIRED(layer, expert, PAGER_KIND_DOWN, 100000, off);
        }
    }
    munmap(region, size);
    return 0;
}
