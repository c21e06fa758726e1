/* trace-bpf.h: a live tracing session: the BPF programs of faultline.bpf.c
 * loaded, attached to one process (its faultline USDTs, page faults in its
 * region, its io_uring requests) and read back. */
#ifndef FL_TRACE_BPF_H
#define FL_TRACE_BPF_H

#include <stdbool.h>
#include <sys/types.h>

#include "ebpf/trace-stats.h"
#include "base/error.h"

struct tr_session;

struct tr_session_opts {
    pid_t pid;               /* the process to trace */
    const char *binary;      /* its executable (the USDTs' home) */
    bool events;             /* feed the event stream (else aggregates only) */
    bool detail;             /* also each range's install and io_uring request */
    bool region_from_maps;   /* learn the region from /proc/PID/smaps now (attaching late) */
    void (*on_event)(void *ctx, const struct fl_tr_event *ev);
    void *ctx;
};

/* Says what is missing (privileges, BTF, tracefs) in err, or NULL-free 0. */
int tr_session_check(struct fl_err *err);
/* Loads and attaches. -errno with a one-line err on failure. */
int tr_session_open(const struct tr_session_opts *o, struct tr_session **out, struct fl_err *err);
/* Delivers events to on_event for up to timeout_ms. Count or -errno. */
int tr_session_poll(struct tr_session *s, int timeout_ms);
/* Copies the in-kernel counters, histograms and globals into st. */
int tr_session_collect(struct tr_session *s, struct tr_stats *st);
/* The region is registered (the pager took its first fault): stops
 * watching ioctls. */
void tr_session_region_known(struct tr_session *s);
void tr_session_close(struct tr_session *s);

#endif
