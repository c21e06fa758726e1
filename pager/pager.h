/* pager.h: a model file as one virtual region, expert weights paged in on
 * demand under a RAM budget.
 *
 * The pager knows bytes, not file formats (as LLNL UMap's stores do): the
 * caller describes the file as a table of extents — runs of bytes, each
 * with a name for messages, a tier, and for an expert's slice of a layer's
 * expert tensor its (layer, expert); plan/pager-layout.h makes that table
 * from a GGUF header and a placement plan. pager_open reserves the whole
 * file's size as one anonymous region (offset in region = offset in file),
 * reads every RAM-tier byte up front and leaves the disk-tier extents
 * unpopulated. The unit of residency is one expert of one layer: all of its
 * slices (gate, up, down, biases), read together. In uffd mode
 * the first touch of an absent expert faults and a handler thread resolves
 * the whole expert; in explicit mode (no userfaultfd) only acquire makes an
 * expert resident, so acquire must precede every expert access.
 *
 * Errors: functions return 0 or -errno; pager_open also fills err. After a
 * read error (EIO, short read, file truncated) or a dead/stalled fault
 * handler the pager is failed for good: acquire returns the error,
 * pager_error() names the tensor and offset, and a thread that faults on a
 * missing page receives SIGBUS (never zeros). See docs/pager.md. */
#ifndef FL_PAGER_H
#define FL_PAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "base/progress.h"

struct pager;

enum pager_mode {
    PAGER_MODE_AUTO = 0,  /* uffd when the kernel and privileges allow, else explicit */
    PAGER_MODE_UFFD,      /* userfaultfd or fail */
    PAGER_MODE_EXPLICIT,  /* only prefetch/acquire read; no faults */
};

enum pager_tier { PAGER_TIER_RAM = 0, PAGER_TIER_DISK = 1 };

enum pager_direct { PAGER_DIRECT_AUTO = 0, PAGER_DIRECT_ON, PAGER_DIRECT_OFF };

/* Which unpinned resident expert makes room (pager/policy.h, docs/prefetch.md);
 * the engine's default is lfu-next. */
enum pager_cache {
    PAGER_CACHE_LRU = 0,     /* least recently used */
    PAGER_CACHE_LFU_DECAY,   /* fewest uses, each use's weight halving every few tokens */
    PAGER_CACHE_PINNED_HOT,  /* cfg.hot experts stay; LRU over the rest */
    PAGER_CACHE_LFU_STEP,    /* lfu-decay counting layer steps, not acquires; longer half-life */
    PAGER_CACHE_LFU_NEXT,    /* lfu-step's counts; evicts the farthest expected next use */
};

/* An expert and how hot a profile says it is. */
struct pager_hot_unit { int32_t layer, expert; uint64_t count; };

/* Tensor kinds carried by statistics and probes. */
enum pager_kind { PAGER_KIND_OTHER = 0, PAGER_KIND_GATE, PAGER_KIND_UP, PAGER_KIND_DOWN,
                  PAGER_KIND_GATE_UP };

/* Test hooks; all optional. They run on pager threads. */
struct pager_hooks {
    void *ctx;
    /* Sees every read completion (file offset, length asked, kernel result)
     * and returns the result to act on: res unchanged, a smaller count (short
     * read), or -errno (EIO, EINTR, ...). */
    int (*read_result)(void *ctx, uint64_t file_off, uint64_t len, int res);
    /* Called by the fault handler thread for each fault before resolving it
     * (file offset of the faulting page); a test stalls or kills the handler here. */
    void (*on_fault)(void *ctx, uint64_t file_off);
};

/* A run of the file's bytes and what it is to the pager. */
struct pager_extent {
    uint64_t off, len;       /* bytes of the file */
    const char *name;        /* what they are, for messages (a tensor's name); must outlive the pager */
    enum pager_tier tier;    /* RAM: read up front; DISK: paged */
    /* >= 0: one expert's slice of layer `layer`'s expert tensor; the disk
     * extents of one (layer, expert) are one unit, read and evicted
     * together. -1: other bytes; on disk they are paged in 2 MiB chunks in
     * uffd mode and read up front in explicit mode. */
    int32_t layer, expert;
    uint8_t kind;            /* enum pager_kind: statistics and probes */
};

/* One of several files the bytes are stored in (a model split into parts,
 * gguf/gguf.h): the file's bytes are the region's [base, base + size). */
struct pager_file {
    const char *path;
    uint64_t base, size;     /* base: a multiple of 2 MiB, the files in order */
};

/* The file as the pager sees it. Bytes no extent covers (the header) are
 * RAM-tier. The table is copied by pager_open (names are not). */
struct pager_layout {
    uint64_t file_size;      /* the size the layout was made for (checked against the file) */
    const struct pager_extent *extents;
    int64_t n_extents;
    int n_used;              /* experts a layer pins at once (per token): the minimum budget */
    /* the files the bytes are in (copied); n_files 0: the one file
     * pager_open names, all of the region. Bytes between files are in none:
     * no extent may cover them, and they read as zeros. */
    const struct pager_file *files;
    int n_files;
};

struct pager_config {
    /* Bytes of disk-tier data that may be resident at once; 0 = auto. */
    uint64_t ram_budget;
    /* auto budget = this fraction of MemAvailable (0 → 0.5). */
    double auto_fraction;
    enum pager_mode mode;
    enum pager_direct direct;  /* O_DIRECT for reads (auto: when the file system supports it) */
    /* A fault left unresolved this long (stuck or dead handler, stalled read)
     * fails the pager; 0 → 10000. */
    unsigned watchdog_ms;
    bool quiet;                /* do not print the one-line explicit-mode notice to stderr */
    enum pager_cache cache;
    /* pinned-hot: the profile, in any order (read during pager_open only);
     * the hottest ones up to hot_fraction of the budget (0 -> 0.5) are kept. */
    const struct pager_hot_unit *hot;
    int n_hot;
    double hot_fraction;
    /* Optional NUMA placement (app/session.c passes plan/numa.h's):
     * place_memory gets every host buffer the pager allocates outside the
     * region (the staging slots) before it is pinned; bind_thread runs first
     * thing on the pager's I/O and fault threads. Failures only cost speed. */
    void (*place_memory)(void *ctx, void *addr, size_t len);
    void (*bind_thread)(void *ctx);
    void *place_ctx;
    struct pager_hooks hooks;
    /* Reading the RAM tier up front ("reading the RAM tier", bytes). */
    struct fl_progress progress;
};

/* Fills c with the defaults (auto budget, auto mode). */
void pager_config_init(struct pager_config *c);

/* Opens path, laid out as `layout` says, as a region. cfg may be NULL
 * (defaults). Errors: -errno with err "PATH: ..."; -EINVAL for a layout
 * the file contradicts (another size, extents outside it); -ENOMEM with the
 * minimum when the budget is below one layer's n_used largest experts. */
int pager_open(const char *path, const struct pager_layout *layout,
               const struct pager_config *cfg, struct pager **out, struct fl_err *err);
/* Stops the threads and unmaps the region. */
void pager_close(struct pager *p);

/* The region: base + file offset is the byte at that offset. */
const uint8_t *pager_base(const struct pager *p);
uint64_t pager_size(const struct pager *p);
bool pager_uses_uffd(const struct pager *p);
bool pager_uses_direct_io(const struct pager *p);
uint64_t pager_budget(const struct pager *p);
/* A new budget, at least the minimum (-EINVAL below it): the session lowers
 * an auto budget once the KV cache is sized. Resident units beyond it are
 * evicted now, all but pinned-hot's hot ones: that choice is the caller's
 * to redo (pager_set_hot), then to call this again. */
int pager_set_budget(struct pager *p, uint64_t bytes);
uint64_t pager_min_budget(const struct pager *p);   /* 0 when nothing is paged */
/* The pinned staging buffers a pager whose largest unit spans unit_bytes
 * allocates beside its budget (reads land there before they are copied into
 * the region): about 64 MiB, at least two units, each buffer counted rounded
 * up to 2 MiB. For plans that must fit a memory limit. */
uint64_t pager_staging_bytes(uint64_t unit_bytes);
uint64_t pager_resident_bytes(const struct pager *p); /* charged disk-tier bytes now */
uint64_t pager_peak_resident_bytes(const struct pager *p);

/* The engine keeps its own copy of the RAM-tier bytes [off, off + len) (a
 * repacked layout) and will not read the region there again: the pages
 * wholly inside the range are given back to the system and made
 * inaccessible, so a stray read faults loudly instead of seeing zeros.
 * Pages shared with other bytes stay. 0, or -EINVAL when the range is
 * outside the file or overlaps the disk tier. */
int pager_drop_range(struct pager *p, uint64_t off, uint64_t len);

/* Starts asynchronous reads of the listed experts of a layer (demand reads
 * go first). Experts not paged are ignored. 0, or -errno once failed. */
int pager_prefetch(struct pager *p, int layer, const int32_t *experts, int n);
/* The same for a guess (a predicted later layer): kept like a routed
 * expert until that layer routes; pager_prefetch_settle(layer) then makes
 * the guesses it did not choose the first to evict, so a wrong guess costs
 * its read but not a useful expert's place in the cache. */
int pager_prefetch_guess(struct pager *p, int layer, const int32_t *experts, int n);
/* Experts another tier already holds (the GPU's VRAM expert cache): their
 * prefetches and guesses read nothing, since the computation will not
 * touch their host bytes; an acquire still reads them (prefetch is a hint,
 * so a wrong answer costs a read, never a result). fn runs under the
 * pager's lock, on the thread that prefetches. NULL: none. */
typedef bool (*pager_held_fn)(void *arg, int layer, int expert);
void pager_set_held_elsewhere(struct pager *p, pager_held_fn fn, void *arg);
/* The layer has routed (and its choice was given to pager_prefetch). */
void pager_prefetch_settle(struct pager *p, int layer);
/* Drops the prefetches still queued (not yet reading): predictions that
 * the next routing made stale. Reads in flight finish. */
void pager_prefetch_cancel(struct pager *p);
/* Blocks until the expert's bytes in every expert tensor of the layer are
 * resident and pins them (a count). 0 at once for experts not paged.
 * -EINVAL for an unknown layer/expert, -errno after a failure (pager_error). */
int pager_acquire(struct pager *p, int layer, int expert);
/* pager_acquire counting `uses` uses of the expert (the tokens of the step
 * that chose it: lfu-step and lfu-decay add that many; others ignore it). */
int pager_acquire_uses(struct pager *p, int layer, int expert, uint32_t uses);
/* Drops one pin; an unpinned expert may be evicted. */
void pager_release(struct pager *p, int layer, int expert);
/* True when the expert is resident now (or not paged at all). */
bool pager_resident(struct pager *p, int layer, int expert);

/* 0 while healthy; after a failure the error and its one-line message
 * ("FILE: read of tensor T at offset N: Input/output error"). */
int pager_error(struct pager *p, struct fl_err *err);

/* How many experts may be pinned at once without waiting forever for a
 * release (the budget holds this many of the largest); 0: no limit (nothing
 * is paged). */
int pager_max_pinned(const struct pager *p);

/* At a quiet point (no compute running, e.g. before the final statistics):
 * waits up to timeout_ms until no fault is left waiting for a load in
 * flight. The kernel may retry a fault and let its thread run on once the
 * page is installed, before the load is done and the stall counted; this
 * lets the last such stall into the statistics. 0, -ETIMEDOUT, or the
 * pager's error. */
int pager_settle(struct pager *p, int timeout_ms);

/* Statistics (counters are cheap atomics). */
struct pager_totals {
    uint64_t faults, fault_loads, prefetches, prefetch_hits, cache_hits, misses;
    uint64_t loads, bytes_read, evictions, reads_retried;
    uint64_t stall_count, stall_ns;
    uint64_t prefetch_skips;   /* prefetches not read: another tier held the expert */
};
void pager_stats_totals(const struct pager *p, struct pager_totals *t);
/* Zeroes every counter (the histogram too). */
void pager_stats_reset(struct pager *p);
/* A summary table: totals, stall histogram and the busiest experts. */
void pager_stats_print(const struct pager *p, FILE *out);

/* Stalls by log2 of their microseconds: hist[k] counts [2^k, 2^(k+1)) us
 * (k = 0: below 2 us). */
#define PAGER_STALL_BUCKETS 32
void pager_stats_hist(const struct pager *p, uint64_t hist[PAGER_STALL_BUCKETS]);

/* One unit's counters (an expert of a layer; layer and expert -1 for a
 * chunk of other paged bytes). */
struct pager_unit_stats {
    int32_t layer, expert;
    uint64_t offset;         /* its first byte in the file */
    uint64_t bytes;          /* what it charges the budget (page-rounded) */
    uint64_t loads, faults, cache_hits, prefetch_hits, misses, evictions, bytes_read;
};
/* Units are numbered 0 .. pager_n_units() - 1; false for one that saw no
 * load, fault or hit (nothing worth reporting). */
uint32_t pager_n_units(const struct pager *p);
bool pager_unit_stats(const struct pager *p, uint32_t unit, struct pager_unit_stats *out);
/* pinned-hot only (-EINVAL otherwise): replaces the hot set with the
 * hottest of hot[0..n) that fit the policy's share of the budget and starts
 * reading those not resident; returns how many experts are hot now. For a
 * profile made after opening (a calibration pass over prompts). */
int pager_set_hot(struct pager *p, const struct pager_hot_unit *hot, int n);

#endif
