/* trace-stats.h: what a trace adds up to, whether it comes live from the
 * BPF maps or back from a saved trace: counters and log2 latency histograms
 * per (layer, expert, kind), process-wide counters, per-thread activity and
 * the longest stalls; and the tables made from them (docs/trace.md). */
#ifndef FL_TRACE_STATS_H
#define FL_TRACE_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ebpf/trace-event.h"

#define TR_TOP_STALLS 20
#define TR_MAX_THREADS 256

enum tr_stall_src { TR_STALL_FAULT = 0, TR_STALL_ACQUIRE = 1 };

struct tr_stall {          /* one long stall, for the "top stalls" table */
    uint64_t ts_ns, dur_ns, offset;
    uint32_t tid;
    int32_t layer, expert;
    uint8_t kind;
    uint8_t src;           /* enum tr_stall_src: a page fault's or an acquire's wait */
};
/* "fault" or "acquire". */
const char *tr_stall_src_name(int src);

struct tr_thread {
    uint32_t tid;
    char name[16];
    uint64_t events, stall_ns, page_faults;
};

struct tr_stats;

struct tr_stats *tr_stats_new(void);
void tr_stats_free(struct tr_stats *s);
/* Makes dst an exact copy of src (dst already allocated). 0 or -ENOMEM. */
int tr_stats_copy(struct tr_stats *dst, const struct tr_stats *src);

/* The entry for key (created zeroed when absent); NULL only without memory. */
struct fl_tr_counts *tr_stats_counts(struct tr_stats *s, int32_t layer, int32_t expert, uint8_t kind);
struct fl_tr_hist *tr_stats_hist(struct tr_stats *s, const struct fl_tr_key *key);
uint64_t *tr_stats_globals(struct tr_stats *s);   /* [FL_TG_N] */

/* What the event stream adds: top stalls and per-thread activity. */
void tr_stats_event(struct tr_stats *s, const struct fl_tr_event *ev, uint32_t stall_tid);
void tr_stats_add_stall(struct tr_stats *s, const struct tr_stall *st);
struct tr_thread *tr_stats_thread(struct tr_stats *s, uint32_t tid);

/* Run metadata. */
struct tr_meta {
    uint32_t pid;
    uint64_t duration_ns;
    char command[256];
};
struct tr_meta *tr_stats_meta(struct tr_stats *s);

/* Iteration (order unspecified). Returns false at the end. */
bool tr_stats_next_counts(const struct tr_stats *s, size_t *it, struct fl_tr_key *key,
                          const struct fl_tr_counts **c);
bool tr_stats_next_hist(const struct tr_stats *s, size_t *it, struct fl_tr_key *key,
                        const struct fl_tr_hist **h);
int tr_stats_n_stalls(const struct tr_stats *s, const struct tr_stall **v); /* longest first */
int tr_stats_n_threads(const struct tr_stats *s, const struct tr_thread **v);

/* Per (layer, expert), summed over kinds; sorted by layer then expert. */
struct tr_unit {
    int32_t layer, expert;
    struct fl_tr_counts c;
    struct fl_tr_hist stall, read, copy, acquire; /* stall: fault stalls only */
};

/* Every stall of c, fault and acquire: what generation waited for. */
static inline uint64_t tr_wait_count(const struct fl_tr_counts *c)
{
    return c->stalls + c->acq_stalls;
}
static inline uint64_t tr_wait_ns(const struct fl_tr_counts *c)
{
    return c->stall_ns + c->acq_stall_ns;
}
int tr_stats_units(const struct tr_stats *s, struct tr_unit **out); /* count or -ENOMEM */

void tr_counts_add(struct fl_tr_counts *dst, const struct fl_tr_counts *src);

/* Histogram helpers. */
void tr_hist_merge(struct fl_tr_hist *dst, const struct fl_tr_hist *src);
/* The q-quantile (0..1) as the upper edge of its log2 bucket, in ns; 0 when empty. */
uint64_t tr_hist_quantile(const struct fl_tr_hist *h, double q);
/* Everything of metric m merged. */
void tr_stats_metric_hist(const struct tr_stats *s, int metric, struct fl_tr_hist *out);
const char *tr_metric_name(int metric);
const char *tr_kind_name(int kind);

/* The end-of-run tables: totals, per layer, per expert (top n), histograms. */
void tr_print_tables(const struct tr_stats *s, FILE *out, int top);
/* libbpf-tools style log2 histogram, its labels made by tr_fmt_ns. */
void tr_print_hist(const struct fl_tr_hist *h, const char *title, FILE *out);
/* A duration as every histogram label shows it, text and HTML: three
 * significant digits and a unit (ns, us, ms, s), e.g. "512 ns", "16.4 us",
 * "1.05 ms". */
void tr_fmt_ns(char *out, size_t n, double ns);

/* Why a trace can have no pager faults at all: said where the count shows. */
#define TR_NO_FAULTS_WHY "the engine acquires every expert before it touches it; " \
    "userfaultfd only catches touches nothing announced"

/* The live line block: cur - prev over secs seconds. */
void tr_print_live(const struct tr_stats *prev, const struct tr_stats *cur, double secs,
                   FILE *out, int top);

#endif
