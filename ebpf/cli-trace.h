/* cli-trace.h: what the parts of `faultline trace` share (private). */
#ifndef FL_CLI_TRACE_H
#define FL_CLI_TRACE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "ebpf/trace-stats.h"

struct trace_args {
    const char *out, *report;
    /* Where they are written until complete (base/out-file.h claims,
     * renamed over out/report at the end); NULL: straight to the name. */
    const char *out_tmp, *report_tmp;
    double interval;
    int top;
    bool quiet;
    bool detail;         /* --detail: installs and io_uring requests on the timeline too */
    pid_t pid;
    char **cmd;          /* after "--" */
};

/* Tables to out, then the HTML report when asked; 0, or 1 after an error (printed). */
int trace_finish(const struct trace_args *a, struct tr_stats *s, FILE *out);
/* Launches a->cmd or attaches to a->pid and traces until it ends
 * (trace-live.c). Returns the command's exit status (1 for the tracer's
 * own errors); *written: the trace files are complete. */
int trace_live(const struct trace_args *a, bool *written);

#endif
