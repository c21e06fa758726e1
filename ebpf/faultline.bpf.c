// SPDX-License-Identifier: GPL-2.0
/* faultline.bpf.c: the tracer's kernel half.
 *
 * This kernel offers uprobes and tracepoints but no kprobes or fentry, so
 * everything hangs off the pager's own USDT probes (pager/probes.h, copies:
 * backend/cuda/probes-gpu.h) plus three tracepoint families:
 *   exceptions:page_fault_user  faults inside the paged region, whoever takes them
 *   io_uring:io_uring_submit_req / io_uring_complete  in-kernel read latency (--detail)
 *   syscalls:sys_enter_ioctl    UFFDIO_REGISTER tells where the region is
 * Every program drops events of other processes first (targ_tgid), so an
 * attached tracer costs other processes nothing but the tracepoint check.
 * Aggregates (counters, log2 histograms) stay in maps and are exact; the
 * ring buffer carries the event stream for the timeline and may drop under
 * pressure (counted in FL_TG_RB_DROPS). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h>

#include "trace-event.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 targ_tgid = 0;
const volatile bool emit_events = true;
/* Per-request io_uring completions (three or more per expert load) go into
 * the stream with --detail. (trace-bpf.c attaches the io_uring tracepoints,
 * read_submit, read_done and installed with --detail only.) */
const volatile bool emit_detail = false;
/* Traced from its first instruction (launch mode): the pager's acquire
 * counts on evict, acquired and acquires give the hits exactly, with no
 * probe per acquire that hits. Attached late (-p) they would include the
 * acquires before the attach: the hit probe is attached and counted instead. */
const volatile bool count_acquires = false;

/* The region learnt from the region USDT or from UFFDIO_REGISTER calls:
 * [region_lo, region_hi) in the traced process. Page faults carry the
 * address; user space maps it to a file offset. */
__u64 region_lo = 0, region_hi = 0;

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 16 << 20);
} events SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 65536);
    __type(key, struct fl_tr_key);
    __type(value, struct fl_tr_hist);
} hists SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 65536);
    __type(key, struct fl_tr_key);
    __type(value, struct fl_tr_counts);
} counts SEC(".maps");

/* Per CPU: every probe bumps FL_TG_UPROBES, and one shared counter would
 * bounce its cache line between the CPUs of the threads that probe. */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, FL_TG_N);
    __type(key, __u32);
    __type(value, __u64);
} globals SEC(".maps");

/* Start times of reads and copies in flight, by file offset, and of
 * io_uring requests, by request pointer. LRU: a start whose end never
 * comes (a failed read) ages out instead of filling the map. */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 16384);
    __type(key, __u64);
    __type(value, __u64);
} read_start SEC(".maps"), copy_start SEC(".maps"), uring_start SEC(".maps");

/* The acquire count each unit's latest probe carried (count_acquires), and
 * of which pager: a pager's counts start at zero, and each pager_open fires
 * the region probe, which moves pager_gen on. */
struct acq_seen { __u64 gen, count; };
__u64 pager_gen = 0;

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 65536);
    __type(key, struct fl_tr_key);
    __type(value, struct acq_seen);
} acq_seen SEC(".maps");

/* Threads already announced with an FL_TR_THREAD event. */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, __u8);
} seen_tids SEC(".maps");

/* The thread each CPU announced last: a thread that probes again on the same
 * CPU (the common case) is known without the LRU lookup. */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u32);
} last_tid SEC(".maps");

#define UFFDIO_REGISTER_CMD 0xc020aa00u /* _IOWR(0xAA, 0x00, struct uffdio_register) */
#define EFD_KICK_TAG 1                  /* the pager's eventfd read (pager/io.c): not I/O */

static __always_inline bool ours(void)
{
    return (bpf_get_current_pid_tgid() >> 32) == targ_tgid;
}

/* A program runs to its end on one CPU: a plain add is enough per CPU. */
static __always_inline void global_add(__u32 i, __u64 v)
{
    __u64 *c = bpf_map_lookup_elem(&globals, &i);
    if (c)
        *c += v;
}

/* A USDT of the traced process: each one was a trap, what tracing costs it
 * most (docs/trace.md, Overhead), so they are counted. */
static __always_inline bool ours_usdt(void)
{
    if (!ours())
        return false;
    global_add(FL_TG_UPROBES, 1);
    return true;
}

/* This CPU's latest value; user space takes the largest (counts only grow). */
static __always_inline void global_set(__u32 i, __u64 v)
{
    __u64 *c = bpf_map_lookup_elem(&globals, &i);
    if (c)
        *c = v;
}

static __always_inline __u32 log2_slot(__u64 v)
{
    __u32 k = 0;
    /* Bounded loop of binary steps: the verifier sees a constant trip count. */
    if (v >> 32) { v >>= 32; k += 32; }
    if (v >> 16) { v >>= 16; k += 16; }
    if (v >> 8) { v >>= 8; k += 8; }
    if (v >> 4) { v >>= 4; k += 4; }
    if (v >> 2) { v >>= 2; k += 2; }
    if (v >> 1) { k += 1; }
    return k < FL_TR_SLOTS ? k : FL_TR_SLOTS - 1;
}

static __always_inline void hist_add(__s32 layer, __s32 expert, __u8 kind, __u8 metric, __u64 ns)
{
    struct fl_tr_key key = { .layer = layer, .expert = expert, .kind = kind, .metric = metric };
    struct fl_tr_hist *h = bpf_map_lookup_elem(&hists, &key);
    if (!h) {
        static const struct fl_tr_hist zero;
        bpf_map_update_elem(&hists, &key, &zero, BPF_NOEXIST);
        h = bpf_map_lookup_elem(&hists, &key);
        if (!h)
            return;
    }
    __u32 k = log2_slot(ns);
    if (k < FL_TR_SLOTS)
        __sync_fetch_and_add(&h->slots[k], 1);
    __sync_fetch_and_add(&h->count, 1);
    __sync_fetch_and_add(&h->sum_ns, ns);
}

static __always_inline struct fl_tr_counts *counts_of(__s32 layer, __s32 expert, __u8 kind)
{
    struct fl_tr_key key = { .layer = layer, .expert = expert, .kind = kind };
    struct fl_tr_counts *c = bpf_map_lookup_elem(&counts, &key);
    if (!c) {
        static const struct fl_tr_counts zero;
        bpf_map_update_elem(&counts, &key, &zero, BPF_NOEXIST);
        c = bpf_map_lookup_elem(&counts, &key);
    }
    return c;
}

/* The first event of a thread is preceded by its name, read now: a short
 * run may be over before user space could look in /proc. */
static __always_inline void announce_thread(__u64 now)
{
    __u64 id = bpf_get_current_pid_tgid();
    __u32 tid = (__u32)id, zero = 0, *last = bpf_map_lookup_elem(&last_tid, &zero);
    __u8 one = 1;
    if (last && *last == tid)
        return;
    if (last)
        *last = tid;
    if (bpf_map_lookup_elem(&seen_tids, &tid))
        return;
    bpf_map_update_elem(&seen_tids, &tid, &one, BPF_ANY);
    struct fl_tr_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        global_add(FL_TG_RB_DROPS, 1);
        return;
    }
    __builtin_memset(e, 0, sizeof(*e));
    e->ts_ns = now;
    e->pid = id >> 32;
    e->tid = tid;
    e->layer = e->expert = -1;
    e->type = FL_TR_THREAD;
    bpf_get_current_comm(&e->bytes, 16); /* bytes and offset: 16 contiguous bytes */
    bpf_ringbuf_submit(e, 0);
}

static __always_inline void emit(__u8 type, __s32 layer, __s32 expert, __u8 kind, __u64 bytes,
                                 __u64 offset, __u64 now, __u64 dur)
{
    if (!emit_events)
        return;
    if (type != FL_TR_URING_DONE) /* completions run in any context */
        announce_thread(now);
    struct fl_tr_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
    if (!e) {
        global_add(FL_TG_RB_DROPS, 1);
        return;
    }
    __u64 id = bpf_get_current_pid_tgid();
    e->ts_ns = now;
    e->bytes = bytes;
    e->offset = offset;
    e->dur_ns = dur;
    e->pid = id >> 32;
    e->tid = (__u32)id;
    e->layer = layer;
    e->expert = expert;
    e->type = type;
    e->kind = kind;
    /* Waking the reader per event would cost the traced process a context
     * switch each time, and even asking how full the ring is costs a cache
     * miss on its shared positions: the reader drains it every 100 ms, and
     * 16 MiB holds 300,000 events, far more than 100 ms of any run makes
     * (overflow would be counted in FL_TG_RB_DROPS). */
    bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* --- the pager's USDTs: (layer, expert, kind, bytes, offset) --------------- */

SEC("usdt")
int BPF_USDT(fault_begin, int layer, int expert, int kind, __u64 bytes, __u64 off)
{
    if (!ours_usdt())
        return 0;
    struct fl_tr_counts *c = counts_of(layer, expert, kind);
    if (c) {
        __sync_fetch_and_add(&c->faults, 1);
        __sync_fetch_and_add(&c->fault_bytes, bytes);
    }
    emit(FL_TR_FAULT_BEGIN, layer, expert, kind, bytes, off, bpf_ktime_get_ns(), 0);
    return 0;
}

SEC("usdt")
int BPF_USDT(fault_end, int layer, int expert, int kind, __u64 stall_ns, __u64 off)
{
    if (!ours_usdt())
        return 0;
    struct fl_tr_counts *c = counts_of(layer, expert, kind);
    if (c) {
        __sync_fetch_and_add(&c->stalls, 1);
        __sync_fetch_and_add(&c->stall_ns, stall_ns);
    }
    hist_add(layer, expert, kind, FL_TM_STALL, stall_ns);
    emit(FL_TR_FAULT_END, layer, expert, kind, 0, off, bpf_ktime_get_ns(), stall_ns);
    return 0;
}

SEC("usdt")
int BPF_USDT(read_submit, int layer, int expert, int kind, __u64 bytes, __u64 off)
{
    if (!ours_usdt())
        return 0;
    __u64 now = bpf_ktime_get_ns();
    /* A retry of the rest of a short read keeps the first start. No event:
     * read_done carries the duration, and the timeline draws the slice. */
    bpf_map_update_elem(&read_start, &off, &now, BPF_NOEXIST);
    return 0;
}

SEC("usdt")
int BPF_USDT(read_done, int layer, int expert, int kind, __u64 bytes, __u64 off)
{
    if (!ours_usdt())
        return 0;
    __u64 now = bpf_ktime_get_ns(), dur = 0, *t0 = bpf_map_lookup_elem(&read_start, &off);
    if (t0) {
        dur = now - *t0;
        bpf_map_delete_elem(&read_start, &off);
        hist_add(layer, expert, kind, FL_TM_READ, dur);
    }
    emit(FL_TR_READ_DONE, layer, expert, kind, bytes, off, now, dur);
    return 0;
}

/* loaded: a unit's reads (every slice) completed and were installed: the
 * read counters, one probe per load whether or not --detail times slices. */
SEC("usdt")
int BPF_USDT(loaded, int layer, int expert, int kind, __u64 bytes, __u64 off, int refill)
{
    if (!ours_usdt())
        return 0;
    struct fl_tr_counts *c = counts_of(layer, expert, kind);
    if (c) {
        __sync_fetch_and_add(&c->reads, 1);
        __sync_fetch_and_add(&c->read_bytes, bytes);
    }
    emit(FL_TR_LOADED, layer, expert, kind, bytes, off, bpf_ktime_get_ns(), 0);
    return 0;
}

SEC("usdt")
int BPF_USDT(installed, int layer, int expert, int kind, __u64 bytes, __u64 off)
{
    if (!ours_usdt())
        return 0;
    struct fl_tr_counts *c = counts_of(layer, expert, kind);
    if (c) {
        __sync_fetch_and_add(&c->installs, 1);
        __sync_fetch_and_add(&c->install_bytes, bytes);
    }
    emit(FL_TR_INSTALLED, layer, expert, kind, bytes, off, bpf_ktime_get_ns(), 0);
    return 0;
}

SEC("usdt")
int BPF_USDT(prefetch, int layer, int expert, int kind, __u64 bytes, __u64 off)
{
    if (!ours_usdt())
        return 0;
    struct fl_tr_counts *c = counts_of(layer, expert, kind);
    if (c)
        __sync_fetch_and_add(&c->prefetches, 1);
    emit(FL_TR_PREFETCH, layer, expert, kind, bytes, off, bpf_ktime_get_ns(), 0);
    return 0;
}

/* The pager's acquire counts as of this probe: unit_acq of this unit, all_acq
 * of all. The unit's acquires since its previous probe count as hits (less
 * one for an acquired, which counts the wait as a miss): the pager counts an
 * acquire before a miss waits, so hits never go below zero. The pager
 * serialises these probes under its lock. */
static __always_inline void count_acq(struct fl_tr_counts *c, __s32 layer, __s32 expert,
                                      __u8 kind, __u64 unit_acq, __u64 all_acq, bool miss)
{
    if (!count_acquires) {
        if (miss)
            global_add(FL_TG_ACQUIRES, 1);
        return;
    }
    global_set(FL_TG_ACQUIRES, all_acq);
    struct fl_tr_key key = { .layer = layer, .expert = expert, .kind = kind };
    struct acq_seen *seen = bpf_map_lookup_elem(&acq_seen, &key);
    struct acq_seen now = { pager_gen, unit_acq };
    __u64 prev = seen && seen->gen == now.gen ? seen->count : 0;
    __u64 d = unit_acq > prev ? unit_acq - prev : 0;
    if (seen)   /* in place: a hash update swaps in a new element, under a lock */
        *seen = now;
    else
        bpf_map_update_elem(&acq_seen, &key, &now, BPF_ANY);
    if (c)
        __sync_fetch_and_add(&c->hits, d - (miss ? 1 : 0));
}

SEC("usdt")
int BPF_USDT(evict, int layer, int expert, int kind, __u64 bytes, __u64 off, __u64 unit_acq,
             __u64 all_acq)
{
    if (!ours_usdt())
        return 0;
    struct fl_tr_counts *c = counts_of(layer, expert, kind);
    if (c)
        __sync_fetch_and_add(&c->evictions, 1);
    count_acq(c, layer, expert, kind, unit_acq, all_acq, false);
    emit(FL_TR_EVICT, layer, expert, kind, bytes, off, bpf_ktime_get_ns(), 0);
    return 0;
}

SEC("usdt")
int BPF_USDT(copy_begin, int layer, int expert, int kind, __u64 bytes, __u64 off)
{
    if (!ours_usdt())
        return 0;
    __u64 now = bpf_ktime_get_ns();
    bpf_map_update_elem(&copy_start, &off, &now, BPF_ANY);
    return 0;   /* no event: copy_end carries the duration */
}

SEC("usdt")
int BPF_USDT(copy_end, int layer, int expert, int kind, __u64 bytes, __u64 off)
{
    if (!ours_usdt())
        return 0;
    __u64 now = bpf_ktime_get_ns(), dur = 0, *t0 = bpf_map_lookup_elem(&copy_start, &off);
    if (t0) {
        dur = now - *t0;
        bpf_map_delete_elem(&copy_start, &off);
        hist_add(layer, expert, kind, FL_TM_COPY, dur);
    }
    struct fl_tr_counts *c = counts_of(layer, expert, kind);
    if (c) {
        __sync_fetch_and_add(&c->copies, 1);
        __sync_fetch_and_add(&c->copy_bytes, bytes);
    }
    emit(FL_TR_COPY_END, layer, expert, kind, bytes, off, now, dur);
    return 0;
}

/* hit: an acquire found the expert resident. Attached only when the acquire
 * counts cannot be used (-p, see count_acquires): a trap per acquire. */
SEC("usdt")
int BPF_USDT(hit, int layer, int expert, int kind, __u64 bytes, __u64 off)
{
    if (!ours_usdt())
        return 0;
    struct fl_tr_counts *c = counts_of(layer, expert, kind);
    if (c)
        __sync_fetch_and_add(&c->hits, 1);
    global_add(FL_TG_ACQUIRES, 1);
    return 0;
}

/* acquired: an acquire had to wait (a miss) and got its expert; wait_ns is
 * the wait the pager's stats count as a stall, the counters and histogram
 * keep it. It fires on the thread that waited, at the end of the wait, so
 * the event (tid = the waiter) draws the wait as [now - wait_ns, now] (a
 * fault stall's waiter must be matched from its page fault instead). */
SEC("usdt")
int BPF_USDT(acquired, int layer, int expert, int kind, __u64 wait_ns, __u64 off, __u64 unit_acq,
             __u64 all_acq)
{
    if (!ours_usdt())
        return 0;
    struct fl_tr_counts *c = counts_of(layer, expert, kind);
    if (c) {
        __sync_fetch_and_add(&c->misses, 1);
        __sync_fetch_and_add(&c->acq_stalls, 1);
        __sync_fetch_and_add(&c->acq_stall_ns, wait_ns);
    }
    count_acq(c, layer, expert, kind, unit_acq, all_acq, true);
    hist_add(layer, expert, kind, FL_TM_ACQUIRE, wait_ns);
    emit(FL_TR_ACQUIRED, layer, expert, kind, 0, off, bpf_ktime_get_ns(), wait_ns);
    return 0;
}

/* acquires: at pager_close, the final count of each unit whose hits may
 * not have been reported yet. */
SEC("usdt")
int BPF_USDT(acquires, int layer, int expert, int kind, __u64 zero, __u64 off, __u64 unit_acq,
             __u64 all_acq)
{
    if (!ours_usdt() || !count_acquires)
        return 0;
    count_acq(counts_of(layer, expert, kind), layer, expert, kind, unit_acq, all_acq, false);
    return 0;
}

/* region(base, size): the pager mapped its region (pg_region_map, before
 * the first fault): the page-fault filter, and user space's base for
 * turning fault addresses into file offsets. */
SEC("usdt")
int BPF_USDT(region, __u64 base, __u64 size)
{
    if (!ours_usdt())
        return 0;
    region_lo = base;
    region_hi = base + size;
    __sync_fetch_and_add(&pager_gen, 1);
    emit(FL_TR_REGION, -1, -1, 0, size, base, bpf_ktime_get_ns(), 0);
    return 0;
}

/* --- tracepoints ------------------------------------------------------------ */

/* exceptions:page_fault_user; its record is not in BTF, so spelled out
 * from the tracepoint's format file (offsets 8, 16, 24). */
struct fl_tp_page_fault {
    struct trace_entry ent;
    unsigned long address, ip, error_code;
};

SEC("tracepoint/exceptions/page_fault_user")
int page_fault_user(struct fl_tp_page_fault *ctx)
{
    if (!ours())
        return 0;
    global_add(FL_TG_TRACEPOINTS, 1);
    __u64 a = ctx->address;
    if (a < region_lo || a >= region_hi)
        return 0;
    global_add(FL_TG_PAGE_FAULTS, 1);
    emit(FL_TR_PAGE_FAULT, -1, -1, 0, ctx->error_code, a, bpf_ktime_get_ns(), 0);
    return 0;
}

/* Without the region probe, the userfaultfd registrations mark the region:
 * the pager registers exactly its disk-tier spans. */
SEC("tracepoint/syscalls/sys_enter_ioctl")
int uffd_register(struct syscall_trace_enter *ctx)
{
    if (!ours() || (__u32)ctx->args[1] != UFFDIO_REGISTER_CMD)
        return 0;
    __u64 range[2];
    if (bpf_probe_read_user(range, sizeof(range), (void *)ctx->args[2]))
        return 0;
    if (region_hi == 0 || range[0] < region_lo)
        region_lo = range[0];
    if (range[0] + range[1] > region_hi)
        region_hi = range[0] + range[1];
    return 0;
}

SEC("tracepoint/io_uring/io_uring_submit_req")
int uring_submit(struct trace_event_raw_io_uring_submit_req *ctx)
{
    if (!ours())
        return 0;
    global_add(FL_TG_TRACEPOINTS, 1);
    if (ctx->user_data == EFD_KICK_TAG)
        return 0;
    __u64 req = (__u64)ctx->req, now = bpf_ktime_get_ns();
    bpf_map_update_elem(&uring_start, &req, &now, BPF_ANY);
    global_add(FL_TG_URING_SUBMITS, 1);
    return 0;
}

/* Completions may run in interrupt or worker context: no pid filter, the
 * request must be one the traced process submitted. */
SEC("tracepoint/io_uring/io_uring_complete")
int uring_complete(struct trace_event_raw_io_uring_complete *ctx)
{
    /* Every field read once, up front: the verifier rejects a ctx pointer
     * that clang offsets in a register. */
    __u64 req = (__u64)ctx->req, user_data = ctx->user_data;
    int res = ctx->res;
    __u64 *t0 = bpf_map_lookup_elem(&uring_start, &req);
    if (!t0)
        return 0;
    global_add(FL_TG_TRACEPOINTS, 1);
    __u64 now = bpf_ktime_get_ns(), dur = now - *t0;
    __u64 got = res > 0 ? (__u64)res : 0;
    bpf_map_delete_elem(&uring_start, &req);
    hist_add(-1, -1, 0, FL_TM_URING, dur);
    global_add(FL_TG_URING_DONE, 1);
    global_add(FL_TG_URING_BYTES, got);
    if (emit_detail)
        emit(FL_TR_URING_DONE, -1, -1, 0, got, user_data, now, dur);
    return 0;
}
