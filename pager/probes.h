/* probes.h: the pager's USDT probe points (provider "faultline").
 *
 * They cost a nop when nobody traces; the tracer (bpftrace, or faultline's
 * own BPF programs) attaches with usdt:PATH:faultline:NAME. An attached
 * probe costs the thread that hits it a trap into the kernel (~1 us), so
 * there are as few per token as the tracer's outputs allow: one per expert
 * load (loaded), not one per slice, and none per acquire that finds its
 * expert resident (the acquire counts ride on the probes that fire anyway,
 * docs/trace.md "Overhead"). The first five arguments are the same for all:
 *   arg0 layer   (int; -1 for a 2 MiB chunk of a non-expert tensor)
 *   arg1 expert  (int; -1 likewise)
 *   arg2 kind    (int; enum pager_kind: 0 other, 1 gate, 2 up, 3 down, 4 gate_up)
 *   arg3 bytes   (uint64)
 *   arg4 offset  (uint64; file offset, = region offset)
 * Probes:
 *   fault_begin   the handler took a fault (bytes = the unit's charge, offset = the page)
 *   fault_end     that fault's page is installed (bytes = stall in ns)
 *   loaded        (+ arg5 refill: 0 a load, 1 a re-read of a resident unit) every read
 *                 of a unit completed and was installed (bytes = all its reads, offset of
 *                 its first range)
 *   read_submit   one slice's io_uring read was submitted (bytes asked, file offset)
 *   read_done     that read completed in full (bytes read, file offset)
 *   installed     a slice was installed into the region (exact bytes, offset)
 *   prefetch      a prefetch was queued (bytes = the unit's charge, offset of its first range)
 *   evict         (+ acquires) a unit was evicted (bytes = its charge, first offset)
 *   hit           pager_acquire found the expert resident (bytes = charge, first offset)
 *   acquired      (+ acquires) pager_acquire had to wait and the wait ended with the expert
 *                 resident (bytes = the wait in ns, the same interval the pager's stats count
 *                 as one stall; first offset)
 *   acquires      (+ acquires) at pager_close, once per resident unit ever acquired
 *                 (bytes = 0; the others' acquires all went with an evict or acquired)
 *   region        (two args) the region was mapped: base address, mapped size
 * "+ acquires" is two more arguments: arg5 the unit's acquires so far, arg6 all
 * units' (the pager's counters, hits and misses alike): a tracer that saw the
 * process from its start counts hits as acquires minus acquired, without
 * the hit probe.
 * read_submit, read_done and installed fire per slice (three per expert):
 * the tracer attaches them for --detail only. */
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
#define FL_PROBE_ACQ_(name, l, e, k, b, o, unit_acq, all_acq) \
    DTRACE_PROBE7(faultline, name, (int)(l), (int)(e), (int)(k), (uint64_t)(b), (uint64_t)(o), \
                  (uint64_t)(unit_acq), (uint64_t)(all_acq))

#define FL_PROBE_FAULT_BEGIN(l, e, k, b, o) FL_PROBE_(fault_begin, l, e, k, b, o)
#define FL_PROBE_FAULT_END(l, e, k, b, o)   FL_PROBE_(fault_end, l, e, k, b, o)
#define FL_PROBE_LOADED(l, e, k, b, o, refill) \
    DTRACE_PROBE6(faultline, loaded, (int)(l), (int)(e), (int)(k), (uint64_t)(b), (uint64_t)(o), \
                  (int)(refill))
#define FL_PROBE_READ_SUBMIT(l, e, k, b, o) FL_PROBE_(read_submit, l, e, k, b, o)
#define FL_PROBE_READ_DONE(l, e, k, b, o)   FL_PROBE_(read_done, l, e, k, b, o)
#define FL_PROBE_INSTALLED(l, e, k, b, o)   FL_PROBE_(installed, l, e, k, b, o)
#define FL_PROBE_PREFETCH(l, e, k, b, o)    FL_PROBE_(prefetch, l, e, k, b, o)
#define FL_PROBE_HIT(l, e, k, b, o)         FL_PROBE_(hit, l, e, k, b, o)
#define FL_PROBE_EVICT(l, e, k, b, o, ua, aa)    FL_PROBE_ACQ_(evict, l, e, k, b, o, ua, aa)
#define FL_PROBE_ACQUIRED(l, e, k, b, o, ua, aa) FL_PROBE_ACQ_(acquired, l, e, k, b, o, ua, aa)
#define FL_PROBE_ACQUIRES(l, e, k, o, ua, aa)    FL_PROBE_ACQ_(acquires, l, e, k, 0, o, ua, aa)
#define FL_PROBE_REGION(base, size) \
    DTRACE_PROBE2(faultline, region, (uint64_t)(uintptr_t)(base), (uint64_t)(size))

/* A pager_stats-like struct's acquires: every pager_acquire is counted as
 * exactly one of these three (pager/residency.c). */
#define FL_PROBE_ACQ_COUNT(st) \
    (atomic_load_explicit(&(st).cache_hits, memory_order_relaxed) + \
     atomic_load_explicit(&(st).prefetch_hits, memory_order_relaxed) + \
     atomic_load_explicit(&(st).misses, memory_order_relaxed))

#endif
