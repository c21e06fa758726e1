/* trace-html.h: the one-page HTML report of a trace (docs/trace.md): a
 * layer x expert heatmap (faults, stall time, p99 stall; switchable), the
 * latency histograms, the longest stalls and the per-layer table. Inline
 * CSS, SVG and JS only: it fetches nothing. */
#ifndef FL_TRACE_HTML_H
#define FL_TRACE_HTML_H

#include <stdio.h>

#include "ebpf/trace-stats.h"

/* 0, or -EIO / -ENOMEM. */
int tr_html_write(FILE *f, const struct tr_stats *s);

#endif
