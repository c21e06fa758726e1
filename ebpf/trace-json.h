/* trace-json.h: a trace in the Chrome/Perfetto trace-event format.
 *
 * The file is one JSON object: "traceEvents" (the timeline: one track per
 * thread, stalls as slices on the thread that waited, reads and copies as
 * async slices, the rest as instants) and "faultline" (the exact aggregate:
 * counters, histograms, top stalls, threads), which `faultline trace
 * report` reads back. Perfetto and chrome://tracing ignore the extra key. */
#ifndef FL_TRACE_JSON_H
#define FL_TRACE_JSON_H

#include <stdio.h>

#include "ebpf/trace-stats.h"
#include "base/error.h"

struct tr_json;

/* Starts the document on f (not closed by tr_json_end); timestamps count
 * from t0 (CLOCK_MONOTONIC ns; 0: from the first event). */
struct tr_json *tr_json_begin(FILE *f, uint32_t pid, uint64_t t0);
/* One event of the stream. waiter/wait_ts: the thread whose page fault this
 * fault_end resolves and when it faulted (0 when unknown). */
void tr_json_event(struct tr_json *w, const struct fl_tr_event *ev, uint32_t waiter,
                   uint64_t wait_ts);
/* Thread names, the "faultline" aggregate and the closing brackets; frees w.
 * 0 or -EIO. */
int tr_json_end(struct tr_json *w, const struct tr_stats *s);

/* The "faultline" aggregate as a JSON object (also embedded in the HTML
 * report: '/' is escaped). 0, -ENOMEM or -EIO. */
int tr_json_summary(FILE *f, const struct tr_stats *s);

/* What precedes the aggregate in a trace tr_json_end writes: the last
 * member of the document. */
#define TR_JSON_AGGREGATE_MARKER "\"faultline\":"

/* Reads a saved trace's aggregate into s (fresh). 0, or -errno with err. */
int tr_json_load(const char *path, struct tr_stats *s, struct fl_err *err);

#endif
