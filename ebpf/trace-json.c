/* trace-json.c: writes the trace-event JSON and its "faultline" aggregate.
 * (Reading back: trace-json-read.c.) */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/trace-json.h"

/* A pseudo thread for io_uring completions, which run in interrupt or
 * worker context: one track that shows the device side of the reads. */
#define URING_TID 0x7ffffff0u

struct tr_json {
    FILE *f;
    uint32_t pid;
    uint64_t t0;
    bool first, started;
};

static const char *field_names[] = { "faults", "fault_bytes", "stalls", "stall_ns", "reads",
                                     "read_bytes", "installs", "install_bytes", "prefetches",
                                     "evictions", "copies", "copy_bytes", "hits", "misses",
                                     "acquire_stalls", "acquire_stall_ns" };
_Static_assert(sizeof(field_names) / sizeof(field_names[0]) ==
               sizeof(struct fl_tr_counts) / sizeof(uint64_t), "a name per counter");

static const char *global_names[] = { "ring_drops", "page_faults", "uring_submits",
                                      "uring_done", "uring_bytes", "acquires", "uprobes", "tracepoints" };
_Static_assert(sizeof(global_names) / sizeof(global_names[0]) == FL_TG_N, "a name per global");

struct tr_json *tr_json_begin(FILE *f, uint32_t pid, uint64_t t0)
{
    struct tr_json *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->f = f;
    w->pid = pid;
    w->first = true;
    w->t0 = t0;
    w->started = t0 != 0;
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
    return w;
}

static void head(struct tr_json *w, const char *ph, const char *cat, uint32_t tid, uint64_t ts)
{
    if (!w->started) { /* timestamps count from the first event */
        w->t0 = ts;
        w->started = true;
    }
    fprintf(w->f, "%s\n{\"ph\":\"%s\",\"cat\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f",
            w->first ? "" : ",", ph, cat, w->pid, tid,
            ts >= w->t0 ? (double)(ts - w->t0) / 1e3 : -(double)(w->t0 - ts) / 1e3);
    w->first = false;
}

static void args(struct tr_json *w, const struct fl_tr_event *ev)
{
    fprintf(w->f, ",\"args\":{\"layer\":%d,\"expert\":%d,\"kind\":\"%s\",\"bytes\":%" PRIu64
            ",\"offset\":%" PRIu64 "}}", ev->layer, ev->expert, tr_kind_name(ev->kind),
            ev->bytes, ev->offset);
}

static void name(struct tr_json *w, const char *what, const struct fl_tr_event *ev)
{
    if (ev->layer >= 0)
        fprintf(w->f, ",\"name\":\"%s L%d E%d %s\"", what, ev->layer, ev->expert,
                tr_kind_name(ev->kind));
    else
        fprintf(w->f, ",\"name\":\"%s\"", what);
}

/* Reads and copies overlap on their thread, so they are async slices
 * (b/e with an id: the file offset), which need not nest. */
static void async_slice(struct tr_json *w, const char *cat, const char *what,
                        const struct fl_tr_event *ev, uint32_t tid)
{
    head(w, "b", cat, tid, ev->ts_ns - ev->dur_ns);
    fprintf(w->f, ",\"id\":\"0x%" PRIx64 "\"", ev->offset);
    name(w, what, ev);
    args(w, ev);
    head(w, "e", cat, tid, ev->ts_ns);
    fprintf(w->f, ",\"id\":\"0x%" PRIx64 "\"", ev->offset);
    name(w, what, ev);
    fprintf(w->f, "}");
}

static void instant(struct tr_json *w, const char *cat, const char *what,
                    const struct fl_tr_event *ev)
{
    head(w, "i", cat, ev->tid, ev->ts_ns);
    fprintf(w->f, ",\"s\":\"t\"");
    name(w, what, ev);
    args(w, ev);
}

void tr_json_event(struct tr_json *w, const struct fl_tr_event *ev, uint32_t waiter,
                   uint64_t wait_ts)
{
    switch (ev->type) {
    case FL_TR_FAULT_END: {
        /* The stall belongs on the thread that waited: from its page fault
         * when seen, else from when the pager queued it. */
        uint64_t a = wait_ts && wait_ts <= ev->ts_ns ? wait_ts : ev->ts_ns - ev->dur_ns;
        head(w, "X", "stall", waiter ? waiter : ev->tid, a);
        fprintf(w->f, ",\"dur\":%.3f", (double)(ev->ts_ns - a) / 1e3);
        name(w, "stall", ev);
        fprintf(w->f, ",\"args\":{\"layer\":%d,\"expert\":%d,\"kind\":\"%s\",\"stall_ns\":%"
                PRIu64 ",\"offset\":%" PRIu64 "}}", ev->layer, ev->expert,
                tr_kind_name(ev->kind), ev->dur_ns, ev->offset);
        break;
    }
    case FL_TR_ACQUIRED:    /* on the thread that waited: the probe fires there */
        head(w, "X", "stall", ev->tid, ev->ts_ns - ev->dur_ns);
        fprintf(w->f, ",\"dur\":%.3f", (double)ev->dur_ns / 1e3);
        name(w, "acquire wait", ev);
        fprintf(w->f, ",\"args\":{\"layer\":%d,\"expert\":%d,\"kind\":\"%s\",\"stall_ns\":%"
                PRIu64 ",\"offset\":%" PRIu64 "}}", ev->layer, ev->expert,
                tr_kind_name(ev->kind), ev->dur_ns, ev->offset);
        break;
    case FL_TR_READ_DONE:   /* a slice when its submission was timed (--detail) */
        if (ev->dur_ns)
            async_slice(w, "io", "read", ev, ev->tid);
        else
            instant(w, "io", "read done", ev);
        break;
    case FL_TR_COPY_END:
        if (ev->dur_ns)
            async_slice(w, "copy", "copy", ev, ev->tid);
        break;
    case FL_TR_URING_DONE:
        head(w, "X", "io_uring", URING_TID, ev->ts_ns - ev->dur_ns);
        fprintf(w->f, ",\"dur\":%.3f,\"name\":\"io_uring read\",\"args\":{\"res\":%" PRIu64
                ",\"user_data\":\"0x%" PRIx64 "\"}}", (double)ev->dur_ns / 1e3, ev->bytes,
                ev->offset);
        break;
    case FL_TR_FAULT_BEGIN: instant(w, "fault", "fault", ev); break;
    case FL_TR_PAGE_FAULT:  instant(w, "fault", "page fault", ev); break;
    case FL_TR_INSTALLED:   instant(w, "pager", "installed", ev); break;
    case FL_TR_LOADED:      instant(w, "io", "loaded", ev); break;
    case FL_TR_PREFETCH:    instant(w, "pager", "prefetch", ev); break;
    case FL_TR_EVICT:       instant(w, "pager", "evict", ev); break;
    default: break;         /* read_submit, copy_begin: the slices show them */
    }
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == '<') /* '<': the aggregate is embedded in HTML too */
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void summary_counts(FILE *f, const struct tr_stats *s)
{
    size_t it = 0;
    struct fl_tr_key k;
    const struct fl_tr_counts *c;
    bool first = true;
    fprintf(f, ",\n\"counts\":[");
    while (tr_stats_next_counts(s, &it, &k, &c)) {
        const uint64_t *v = (const uint64_t *)c;
        fprintf(f, "%s\n {\"layer\":%d,\"expert\":%d,\"kind\":%u", first ? "" : ",", k.layer,
                k.expert, k.kind);
        for (size_t i = 0; i < sizeof(*c) / sizeof(uint64_t); i++)
            fprintf(f, ",\"%s\":%" PRIu64, field_names[i], v[i]);
        fputc('}', f);
        first = false;
    }
    fprintf(f, "]");
}

static void summary_hists(FILE *f, const struct tr_stats *s)
{
    size_t it = 0;
    struct fl_tr_key k;
    const struct fl_tr_hist *h;
    bool first = true;
    fprintf(f, ",\n\"hists\":[");
    while (tr_stats_next_hist(s, &it, &k, &h)) {
        fprintf(f, "%s\n {\"layer\":%d,\"expert\":%d,\"kind\":%u,\"metric\":\"%s\",\"count\":%"
                PRIu64 ",\"sum_ns\":%" PRIu64 ",\"log2_ns\":[", first ? "" : ",", k.layer,
                k.expert, k.kind, tr_metric_name(k.metric), h->count, h->sum_ns);
        for (int i = 0; i < FL_TR_SLOTS; i++)
            fprintf(f, "%s%" PRIu64, i ? "," : "", h->slots[i]);
        fprintf(f, "]}");
        first = false;
    }
    fprintf(f, "]");
}

void tr_json_summary(FILE *f, const struct tr_stats *s)
{
    const struct tr_meta *m = tr_stats_meta((struct tr_stats *)s);
    const uint64_t *g = tr_stats_globals((struct tr_stats *)s);
    fprintf(f, "{\"version\":1,\"pid\":%u,\"duration_ns\":%" PRIu64 ",\"command\":", m->pid,
            m->duration_ns);
    json_str(f, m->command);
    fprintf(f, ",\n\"globals\":{");
    for (int i = 0; i < FL_TG_N; i++)
        fprintf(f, "%s\"%s\":%" PRIu64, i ? "," : "", global_names[i], g[i]);
    fprintf(f, "}");
    summary_counts(f, s);
    summary_hists(f, s);
    const struct tr_stall *st;
    int n = tr_stats_n_stalls(s, &st);
    fprintf(f, ",\n\"stalls\":[");
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\n {\"ts_ns\":%" PRIu64 ",\"dur_ns\":%" PRIu64 ",\"offset\":%" PRIu64
                ",\"tid\":%u,\"layer\":%d,\"expert\":%d,\"kind\":%u,\"source\":\"%s\"}",
                i ? "," : "", st[i].ts_ns, st[i].dur_ns, st[i].offset, st[i].tid, st[i].layer,
                st[i].expert, st[i].kind, tr_stall_src_name(st[i].src));
    const struct tr_thread *t;
    n = tr_stats_n_threads(s, &t);
    fprintf(f, "],\n\"threads\":[");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s\n {\"tid\":%u,\"name\":", i ? "," : "", t[i].tid);
        json_str(f, t[i].name);
        fprintf(f, ",\"events\":%" PRIu64 ",\"stall_ns\":%" PRIu64 ",\"page_faults\":%" PRIu64
                "}", t[i].events, t[i].stall_ns, t[i].page_faults);
    }
    fprintf(f, "]}");
}

static void meta_event(struct tr_json *w, const char *what, uint32_t tid, const char *nm)
{
    fprintf(w->f, "%s\n{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":",
            w->first ? "" : ",", what, w->pid, tid);
    json_str(w->f, nm);
    fprintf(w->f, "}}");
    w->first = false;
}

int tr_json_end(struct tr_json *w, const struct tr_stats *s)
{
    char pname[300];
    snprintf(pname, sizeof(pname), "faultline %s", tr_stats_meta((struct tr_stats *)s)->command);
    meta_event(w, "process_name", w->pid, pname);
    const struct tr_thread *t;
    int n = tr_stats_n_threads(s, &t);
    for (int i = 0; i < n; i++)
        if (t[i].name[0])
            meta_event(w, "thread_name", t[i].tid, t[i].name);
    meta_event(w, "thread_name", URING_TID, "io_uring (kernel)");
    fprintf(w->f, "\n],\n\"faultline\":");
    tr_json_summary(w->f, s);
    fprintf(w->f, "}\n");
    int rc = fflush(w->f) || ferror(w->f) ? -EIO : 0;
    free(w);
    return rc;
}
