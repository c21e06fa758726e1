/* probes.h: the pager's USDT probe points (provider "faultline").
 *
 * They cost a nop when nobody traces; the tracer (bpftrace, or faultline's
 * own BPF programs) attaches with usdt:PATH:faultline:NAME. Every probe
 * carries the same five arguments, so one handler fits all:
 *   arg0 layer   (int; -1 for a 2 MiB chunk of a non-expert tensor)
 *   arg1 expert  (int; -1 likewise)
 *   arg2 kind    (int; enum pager_kind: 0 other, 1 gate, 2 up, 3 down, 4 gate_up)
 *   arg3 bytes   (uint64)
 *   arg4 offset  (uint64; file offset, = region offset)
 * Probes:
 *   fault_begin   the handler took a fault (bytes = the unit's charge, offset = the page)
 *   fault_end     that fault's page is installed (bytes = stall in ns)
 *   read_submit   an io_uring read was submitted (bytes asked, file offset)
 *   read_done     a read completed in full (bytes read, file offset)
 *   installed     a range was installed into the region (exact bytes, offset)
 *   prefetch      a prefetch was queued (bytes = the unit's charge, offset of its first range)
 *   evict         a unit was evicted (bytes = its charge, offset of its first range)
 *   hit           pager_acquire found the expert resident (bytes = charge, first offset)
 *   miss          pager_acquire had to wait for it (bytes = charge, first offset)
 *   acquired      that wait ended with the expert resident (bytes = the wait in ns,
 *                 the same interval the pager's stats count as one stall; first offset)
 *   region        (two args) the region was mapped: base address, mapped size
 */
#ifndef FL_PAGER_PROBES_H
#define FL_PAGER_PROBES_H

/* Simple register/memory operands only: libbpf 1.1 cannot parse the indexed
 * operands gcc otherwise emits (e.g. -4@(%rax,%rsi,8)). */
#ifndef STAP_SDT_ARG_CONSTRAINT
#define STAP_SDT_ARG_CONSTRAINT nr
#endif
#include <sys/sdt.h>

#define FL_PROBE_(name, l, e, k, b, o) \
    DTRACE_PROBE5(faultline, name, (int)(l), (int)(e), (int)(k), (uint64_t)(b), (uint64_t)(o))

#define FL_PROBE_FAULT_BEGIN(l, e, k, b, o) FL_PROBE_(fault_begin, l, e, k, b, o)
#define FL_PROBE_FAULT_END(l, e, k, b, o)   FL_PROBE_(fault_end, l, e, k, b, o)
#define FL_PROBE_READ_SUBMIT(l, e, k, b, o) FL_PROBE_(read_submit, l, e, k, b, o)
#define FL_PROBE_READ_DONE(l, e, k, b, o)   FL_PROBE_(read_done, l, e, k, b, o)
#define FL_PROBE_INSTALLED(l, e, k, b, o)   FL_PROBE_(installed, l, e, k, b, o)
#define FL_PROBE_PREFETCH(l, e, k, b, o)    FL_PROBE_(prefetch, l, e, k, b, o)
#define FL_PROBE_EVICT(l, e, k, b, o)       FL_PROBE_(evict, l, e, k, b, o)
#define FL_PROBE_HIT(l, e, k, b, o)         FL_PROBE_(hit, l, e, k, b, o)
#define FL_PROBE_MISS(l, e, k, b, o)        FL_PROBE_(miss, l, e, k, b, o)
#define FL_PROBE_ACQUIRED(l, e, k, b, o)    FL_PROBE_(acquired, l, e, k, b, o)
#define FL_PROBE_REGION(base, size) \
    DTRACE_PROBE2(faultline, region, (uint64_t)(uintptr_t)(base), (uint64_t)(size))

#endif
