/* host-memory.h: how much memory this machine can still give, as the kernel
 * estimates it; for "auto" budgets and placement. */
#ifndef FL_HOST_MEMORY_H
#define FL_HOST_MEMORY_H

#include <stdint.h>

/* MemAvailable from /proc/meminfo in bytes (free memory plus the page cache
 * and slab the kernel can reclaim); 0 when it cannot be read. */
uint64_t fl_mem_available(void);

#endif
