/* internal.h: the pager's private state, shared by its .c files only.
 *
 * Locking: one mutex (mu) guards unit states, pins, the LRU, the request
 * queues, the pending-fault list and the budget. The I/O thread owns the
 * io_uring and the staging slots; the fault thread owns the uffd reads; both
 * take mu only to change state. Statistics are relaxed atomics. */
#ifndef FL_PAGER_INTERNAL_H
#define FL_PAGER_INTERNAL_H

#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pager/pager.h"

#define PG_NONE UINT32_MAX
#define PG_CHUNK (2u << 20)    /* fault granularity outside expert slices */
#define PG_HIST PAGER_STALL_BUCKETS /* log2 buckets of stall time in microseconds */

enum pg_state { PG_ABSENT = 0, PG_QUEUED, PG_LOADING, PG_RESIDENT };

/* One contiguous run of disk-tier file bytes: an expert's slice of one
 * expert tensor, or a 2 MiB chunk of a non-expert disk-tier tensor. */
struct pg_range {
    uint64_t off, len;    /* exact file bytes */
    uint32_t unit;
    int32_t ext;          /* the extent it comes from (p->ext), for messages */
    uint8_t kind;         /* enum pager_kind */
};

struct pg_unit_stats {
    _Atomic uint64_t faults, prefetch_hits, cache_hits, misses, bytes_read, evictions, loads;
};

/* The unit of residency: an expert of a layer (all its ranges) or one chunk. */
struct pg_unit {
    int32_t layer, expert;  /* -1, -1 for a chunk */
    uint32_t first, n;      /* ranges[first .. first + n) */
    uint64_t charge;        /* page-rounded bytes: what it costs the budget */
    uint8_t state;          /* enum pg_state */
    bool demand;            /* in the demand queue */
    bool prefetch;          /* in the prefetch queue */
    bool refill;            /* resident but a page is missing: copy again */
    bool by_prefetch;       /* loaded by a prefetch and not yet used */
    bool spec;              /* asked for by a prediction only, not yet used */
    bool wanted;            /* routed (or guessed, until its layer routes): acquire is coming */
    bool cold;              /* a wrong guess still loading: evict first once loaded */
    bool hot;               /* pinned-hot: kept over the others (policy.c) */
    int32_t pins;
    uint32_t lru_prev, lru_next;
    float freq;             /* lfu-decay: decayed use count as of freq_tick */
    uint64_t freq_tick;
    struct pg_unit_stats st;
};

struct pg_pending {         /* a fault whose page is not installed yet */
    uint64_t page_off;
    uint32_t unit;
    uint64_t t_ns;
};

/* One file of the store: its bytes are the region's [base, base + size). */
struct pg_file {
    char *path;
    int fd, dfd;             /* buffered fd; O_DIRECT fd or -1 */
    uint64_t base, size;
};

struct pg_read {            /* one range of a unit in flight */
    struct pg_slot *slot;
    uint32_t range;
    uint64_t off, len, done; /* aligned window of the region being read into buf */
    uint8_t *buf;
    const struct pg_file *file; /* the file that holds it */
};

struct pg_slot {            /* a pinned staging buffer for one unit */
    uint8_t *buf;
    uint64_t size;
    uint64_t map_len;       /* bytes mapped for buf (huge-page or page rounded) */
    uint32_t unit;
    bool busy;
    bool refill;            /* a re-copy of a resident unit */
    int left;               /* reads not completed */
    int err;
    uint64_t err_off;
    int32_t err_ext;
    struct pg_read *reads;  /* [max ranges per unit] */
};

struct pg_queue { uint32_t *v; uint32_t head, len, cap; };

struct pg_stats {
    _Atomic uint64_t faults, fault_loads, prefetches, prefetch_hits, cache_hits, misses;
    _Atomic uint64_t loads, bytes_read, evictions, reads_retried, stall_count, stall_ns;
    _Atomic uint64_t prefetch_skips;  /* not read: held in VRAM (pager_set_held_elsewhere) */
    _Atomic uint64_t hist[PG_HIST];
};

struct pager {
    char *path;
    struct pager_extent *ext;  /* the layout's table, in its order */
    int64_t n_ext;
    int64_t *ext_by_off;       /* ext indices sorted by offset (names of offsets) */
    int layout_used;           /* the layout's n_used */
    struct pager_config cfg;
    uint64_t page;
    uint64_t file_size, map_size;
    uint8_t *base;
    void *map_raw;
    uint64_t map_raw_len;

    /* layout */
    struct pg_range *ranges;   /* grouped by unit */
    uint32_t *by_off;          /* range indices sorted by file offset */
    uint32_t n_ranges;
    struct pg_unit *units;
    uint32_t n_units, max_ranges;
    int n_layers, n_expert, n_used;
    int32_t *unit_of;          /* [layer * n_expert + expert] -> unit, or -1 */
    uint64_t *ram_pg;          /* sorted, merged page-index intervals [a, b) read up front */
    uint32_t n_ram;
    uint64_t budget, min_budget, max_unit_window;

    /* modes */
    bool uffd_mode, direct;
    int uffd, stop_efd;
    struct pg_file *files;     /* in order of base; one unless the model is split */
    int n_files;
    uint64_t dio_align;        /* file offset and memory alignment for every dfd */

    /* residency (under mu) */
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* a unit changed state, or the pager failed */
    uint64_t charged, peak;
    uint32_t lru_head, lru_tail;  /* head = least recently used */
    struct pg_queue dq, pq;       /* demand and prefetch requests */
    uint64_t tick;                /* acquires so far: the policies' clock */
    double half_life;             /* lfu-decay, lfu-step: clock ticks for a use to count half */
    double window_frac;           /* lfu-step: share of the budget a recency window holds (0) */
    bool step_clock;              /* lfu-step: the decay counts layer steps, not acquires */
    uint64_t steps;               /* n_used per layer step the acquires made */
    int32_t clock_layer;          /* the layer of the last acquire */
    struct pg_pending *pend;
    uint32_t n_pend, cap_pend;
    pager_held_fn held;        /* pager_set_held_elsewhere: prefetches it answers true for are skipped */
    void *held_arg;
    _Atomic int failed;        /* 0 or -errno, sticky */
    struct fl_err errmsg;

    /* I/O thread */
    struct io_uring ring;
    bool ring_ok;
    int io_efd;                /* wakes the I/O thread (read through the ring) */
    uint64_t io_efd_buf;
    struct pg_slot *slots;
    int n_slots;
    pthread_t io_thread;
    bool io_started;
    _Atomic bool stopping;

    /* fault handler and watchdog */
    pthread_t fault_thread, wd_thread;
    bool fault_started, wd_started;
    _Atomic uint64_t hb_busy_since; /* ns when the handler took a fault; 0 when idle */
    _Atomic uint64_t hb_busy_off;   /* page it is on */
    _Atomic bool handler_gone;

    bool res_ok;
    struct pg_stats st;
};

/* region.c */
int pg_layout_build(struct pager *p, struct fl_err *err);
int pg_region_map(struct pager *p, struct fl_err *err);
int pg_region_read_ram(struct pager *p, struct fl_err *err);
int pg_uffd_setup(struct pager *p, struct fl_err *err);
void pg_region_unmap(struct pager *p);
/* The name of the extent holding file offset off ("(header)" outside them). */
const char *pg_name_at(const struct pager *p, uint64_t off);
/* Index of the first range whose end is past off, or n_ranges. */
uint32_t pg_range_at(const struct pager *p, uint64_t off);
bool pg_page_is_ram(const struct pager *p, uint64_t page_index);

/* io.c */
int pg_io_open(struct pager *p, struct fl_err *err);
int pg_ring_init(struct pager *p, struct fl_err *err);
int pg_io_start(struct pager *p, struct fl_err *err);
void pg_io_stop(struct pager *p);
void pg_io_close(struct pager *p);
void pg_io_kick(struct pager *p);
/* Synchronous read of [off, off+len) into dst (used before the threads run). */
int pg_read_sync(struct pager *p, uint64_t off, uint64_t len, uint8_t *dst, struct fl_err *err);
/* The file holding the region's byte off, or the last one before it (off
 * past its end: in the bytes between files, or an aligned window's tail). */
const struct pg_file *pg_file_at(const struct pager *p, uint64_t off);

/* residency.c */
int pg_res_init(struct pager *p);
/* Under mu: the list of unpinned resident units (head = least recent).
 * remove is a no-op for a unit not in it. (Also sim.c's replay.) */
void pg_lru_remove(struct pager *p, uint32_t u);
void pg_lru_push_mru(struct pager *p, uint32_t u);
void pg_lru_push_lru(struct pager *p, uint32_t u);
void pg_res_free(struct pager *p);
/* Under mu: evicts the policy's victims until what is charged fits the
 * budget (one just lowered), or none is left that may go. */
void pg_res_fit_budget_locked(struct pager *p);
/* Under mu: queue u for loading (demand or prefetch). */
void pg_request_locked(struct pager *p, uint32_t u, bool demand);
/* Under mu, I/O thread: next unit to read with its budget reserved, or
 * PG_NONE when nothing can start now. *refill says it is a re-copy. */
uint32_t pg_next_load_locked(struct pager *p, bool allow_prefetch, bool *refill);
/* Under mu, I/O thread: a load finished (err 0) or failed. */
void pg_load_done_locked(struct pager *p, uint32_t u, bool refill, int err);
/* Marks the pager failed (first error wins) and wakes every waiter. */
void pg_fail(struct pager *p, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void pg_pending_add_locked(struct pager *p, uint64_t page_off, uint32_t u);

/* policy.c (the cache policy: which unpinned resident unit to evict) */
/* Under mu: a unit was acquired: `uses` uses (the pager counts one per
 * acquire; sim.c's replay may count the tokens that chose it). */
void pg_policy_touch_locked(struct pager *p, uint32_t u, uint32_t uses);
/* Under mu: the unit to evict next among the unpinned resident ones, or PG_NONE. */
uint32_t pg_policy_victim_locked(struct pager *p);
/* Marks cfg.hot units (up to cfg.hot_fraction of the budget) and sets the
 * lfu-decay clock; before the threads start. */
void pg_policy_init(struct pager *p);
/* After the threads start: queues the hot units as prefetches (warm start). */
void pg_policy_warm(struct pager *p);

/* fault.c */
int pg_uffd_open(struct pager *p, struct fl_err *err);
int pg_fault_start(struct pager *p, struct fl_err *err);
void pg_fault_stop(struct pager *p);
/* uffd: makes the page raise SIGBUS for whoever touches it (never zeros). */
void pg_poison_page(struct pager *p, uint64_t page_off);
void pg_wake_range(struct pager *p, uint64_t off, uint64_t len);

/* stats.c */
uint64_t pg_now_ns(void);
void pg_stall_record(struct pager *p, uint64_t ns);

/* The pages a range touches: region offsets [*a, *b), page-aligned. */
static inline void pg_range_pages(const struct pager *p, const struct pg_range *r, uint64_t *a,
                                  uint64_t *b)
{
    *a = r->off / p->page * p->page;
    *b = (r->off + r->len + p->page - 1) / p->page * p->page;
}

static inline void pg_inc(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static inline uint64_t pg_ld(const _Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

#endif
