/* trace-event.h: what faultline's BPF programs and the trace tool share:
 * the event record of the ring buffer, the histogram key and value, and the
 * counters kept per (layer, expert, kind). Included by ebpf/faultline.bpf.c
 * (with vmlinux.h's types) and by the user-space tool (with <stdint.h>), so
 * it only uses the fixed-width fl_ types defined here for both sides. */
#ifndef FL_TRACE_EVENT_H
#define FL_TRACE_EVENT_H

#ifdef __VMLINUX_H__
typedef __u8 fl_u8;
typedef __u32 fl_u32;
typedef __s32 fl_s32;
typedef __u64 fl_u64;
#else
#include <stdint.h>
typedef uint8_t fl_u8;
typedef uint32_t fl_u32;
typedef int32_t fl_s32;
typedef uint64_t fl_u64;
#endif

/* Log2 buckets: bucket k holds latencies in [2^k, 2^(k+1)) ns (bucket 0: < 2 ns). */
#define FL_TR_SLOTS 40

/* Event types; the first nine are the USDT probes of the same name (read_submit
 * and copy_begin only start timers: their ends carry the durations; read_submit,
 * read_done and installed are attached with --detail only). */
enum fl_tr_type {
    FL_TR_FAULT_BEGIN = 0,
    FL_TR_FAULT_END,     /* dur_ns = the stall the pager measured */
    FL_TR_READ_SUBMIT,
    FL_TR_READ_DONE,     /* dur_ns = since its read_submit (0 when unseen) */
    FL_TR_INSTALLED,
    FL_TR_PREFETCH,
    FL_TR_EVICT,
    FL_TR_COPY_BEGIN,
    FL_TR_COPY_END,      /* dur_ns = since its copy_begin */
    FL_TR_PAGE_FAULT,    /* exceptions:page_fault_user inside the region; offset = the address */
    FL_TR_URING_DONE,    /* io_uring_complete of a request the process submitted; bytes = res */
    FL_TR_REGION,        /* the region probe: offset = base address, bytes = size */
    FL_TR_THREAD,        /* precedes a thread's first event: bytes..offset = its comm[16] */
    FL_TR_ACQUIRED,      /* pager_acquire's wait ended: dur_ns = the wait, tid = the waiter */
    FL_TR_LOADED,        /* a unit's reads all completed and were installed; bytes = all read */
    FL_TR_N_TYPES
};

/* Latency metrics of the histograms. */
enum fl_tr_metric {
    FL_TM_STALL = 0, /* fault_end: how long a faulting thread waited */
    FL_TM_READ,      /* read_submit -> read_done (the pager's view of one read; --detail) */
    FL_TM_COPY,      /* copy_begin -> copy_end (host -> GPU) */
    FL_TM_URING,     /* io_uring submit_req -> complete, in the kernel (not per expert) */
    FL_TM_ACQUIRE,   /* acquired: how long a pager_acquire waited (the pager's measure) */
    FL_TM_N
};

struct fl_tr_event {
    fl_u64 ts_ns;      /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
    fl_u64 bytes;
    fl_u64 offset;
    fl_u64 dur_ns;
    fl_u32 pid, tid;
    fl_s32 layer, expert;
    fl_u8 type;        /* enum fl_tr_type */
    fl_u8 kind;        /* enum pager_kind */
    fl_u8 pad[6];
};

/* Histograms and counters are keyed by (layer, expert, kind, metric);
 * counters use metric 0. layer = expert = -1: a non-expert chunk, or (with
 * FL_TM_URING) the process-wide io_uring latency. */
struct fl_tr_key {
    fl_s32 layer, expert;
    fl_u8 kind, metric;
    fl_u8 pad[2];
};

struct fl_tr_hist {
    fl_u64 slots[FL_TR_SLOTS];
    fl_u64 count, sum_ns;
};

/* Counters per (layer, expert, kind). */
struct fl_tr_counts {
    fl_u64 faults, fault_bytes;    /* fault_begin */
    fl_u64 stalls, stall_ns;       /* fault_end */
    fl_u64 reads, read_bytes;      /* loaded: unit loads and refills, all their bytes */
    fl_u64 installs, install_bytes;
    fl_u64 prefetches, evictions;
    fl_u64 copies, copy_bytes;
    /* Acquire outcomes: misses = acquired probes (waits); hits = the pager's
     * acquires minus those (or, attached late with -p, hit probes). */
    fl_u64 hits, misses;
    /* acquired: the waits of acquires that missed. The engine acquires every
     * expert before touching it, so in a normal run these are its stalls; the
     * pager counts both kinds in its stats' stall_count. */
    fl_u64 acq_stalls, acq_stall_ns;
};

/* Process-wide counters (one array slot each). */
enum fl_tr_global {
    FL_TG_RB_DROPS = 0,  /* events the ring buffer had no room for */
    FL_TG_PAGE_FAULTS,   /* page_fault_user inside the region */
    FL_TG_URING_SUBMITS,
    FL_TG_URING_DONE,
    FL_TG_URING_BYTES,
    FL_TG_ACQUIRES,      /* the pager's acquires, as of its latest probe (the live hit rate) */
    FL_TG_UPROBES,       /* USDT hits of the process: each a trap (the cost of tracing) */
    FL_TG_TRACEPOINTS,   /* tracepoint hits of the process (page faults, io_uring) */
    FL_TG_N
};

#endif
