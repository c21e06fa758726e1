/* host-memory.h: how much memory this process can still take, as the kernel
 * estimates it and as the memory cgroups it sits in allow; for "auto" budgets,
 * placement and the check that a plan fits.
 *
 * A container (docker --memory), a systemd unit (MemoryMax=) or a benchmark's
 * cap puts the process in a memory cgroup whose limit is far below the
 * machine's MemAvailable; crossing it gets the process killed (SIGKILL, no
 * message), so the limit, not MemAvailable, is what a plan must fit. */
#ifndef FL_HOST_MEMORY_H
#define FL_HOST_MEMORY_H

#include <stdint.h>

struct fl_mem_headroom {
    uint64_t host;         /* MemAvailable in bytes; 0 when it cannot be read */
    /* The tightest of this process's memory cgroups and their ancestors:
     * limit (cgroup v2's memory.max or memory.high, v1's limit_in_bytes)
     * minus usage, not counting inactive file pages the kernel reclaims
     * first. UINT64_MAX when no cgroup sets a limit. */
    uint64_t cgroup;
    uint64_t cgroup_limit; /* that cgroup's limit; 0 when none */
    char cgroup_dir[240];  /* its directory, "" when none */
};

/* Reads MemAvailable and the cgroups of the calling process. root is "" for
 * this machine, or a directory that stands in for "/" (tests build a fake
 * /proc/meminfo, /proc/self/cgroup and /sys/fs/cgroup under it). Cgroup
 * filesystems are looked for where systemd and container runtimes mount
 * them: v2 at /sys/fs/cgroup (or /sys/fs/cgroup/unified), v1's memory
 * controller at /sys/fs/cgroup/memory. */
void fl_mem_headroom_read(const char *root, struct fl_mem_headroom *out);

/* The smaller of h's host and cgroup figures (either alone when the other is
 * unknown); 0 when neither is known. */
uint64_t fl_mem_headroom_bytes(const struct fl_mem_headroom *h);

/* fl_mem_headroom_bytes of this process, read now. */
uint64_t fl_mem_available(void);

#endif
