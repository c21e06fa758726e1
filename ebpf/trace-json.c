/* trace-json.c: writes the trace-event JSON and its "faultline" aggregate
 * (base/json.h). Events are streamed: each one is made and written as it
 * comes, inside the document's traceEvents array. (Reading back:
 * trace-json-read.c.) */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "ebpf/trace-json.h"

/* A pseudo thread for io_uring completions, which run in interrupt or
 * worker context: one track that shows the device side of the reads. */
#define URING_TID 0x7ffffff0u

struct tr_json {
    FILE *f;
    uint32_t pid;
    uint64_t t0;
    bool first, started;
    int err;             /* -ENOMEM / -EIO once an event could not be written */
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
    /* jansson encodes whole values, not streams: the document's frame is
     * written here, each event and the aggregate by jansson (emit, summary) */
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
    return w;
}

/* Writes one event object (its reference taken) after the previous one. */
static void emit(struct tr_json *w, json_t *ev)
{
    if (!ev) {
        w->err = -ENOMEM;
        return;
    }
    if (!w->first)
        fputc(',', w->f);
    fputc('\n', w->f);
    if (json_dumpf(ev, w->f, JSON_COMPACT | JSON_REAL_PRECISION(15)))
        w->err = -EIO;
    json_decref(ev);
    w->first = false;
}

/* The members every event has; its timestamp counts from the first event. */
static json_t *head(struct tr_json *w, const char *ph, const char *cat, uint32_t tid, uint64_t ts)
{
    if (!w->started) {
        w->t0 = ts;
        w->started = true;
    }
    const double us = ts >= w->t0 ? (double)(ts - w->t0) / 1e3 : -(double)(w->t0 - ts) / 1e3;
    return json_pack("{s:s, s:s, s:I, s:I, s:f}", "ph", ph, "cat", cat, "pid",
                     (json_int_t)w->pid, "tid", (json_int_t)tid, "ts", us);
}

static void set_name(json_t *o, const char *what, const struct fl_tr_event *ev)
{
    char buf[96];
    if (ev->layer >= 0)
        snprintf(buf, sizeof(buf), "%s L%d E%d %s", what, ev->layer, ev->expert,
                 tr_kind_name(ev->kind));
    else
        snprintf(buf, sizeof(buf), "%s", what);
    if (o)
        fl_json_set(o, "name", json_string(buf));
}

/* args {<amount_key>: amount[, offset]}. Layer, expert and kind are in the
 * name already (set_name): repeating them and the offset in every event's
 * args was over a quarter of the file. The offset says where only when the
 * name does not (no expert), or where a fault hit. */
static void set_args(json_t *o, const struct fl_tr_event *ev, const char *amount_key,
                     uint64_t amount, bool offset)
{
    json_t *a = json_pack("{s:I}", amount_key, (json_int_t)amount);
    if (a && (offset || ev->layer < 0))
        fl_json_set(a, "offset", json_integer((json_int_t)ev->offset));
    if (o)
        fl_json_set(o, "args", a);
    else
        json_decref(a);
}

static void set_hex(json_t *o, const char *key, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
    if (o)
        fl_json_set(o, key, json_string(buf));
}

/* Reads and copies overlap on their thread, so they are async slices
 * (b/e with an id: the file offset), which need not nest. */
static void async_slice(struct tr_json *w, const char *cat, const char *what,
                        const struct fl_tr_event *ev, uint32_t tid)
{
    json_t *b = head(w, "b", cat, tid, ev->ts_ns - ev->dur_ns);
    set_hex(b, "id", ev->offset);
    set_name(b, what, ev);
    set_args(b, ev, "bytes", ev->bytes, false); /* the id is the offset */
    emit(w, b);
    json_t *e = head(w, "e", cat, tid, ev->ts_ns);
    set_hex(e, "id", ev->offset);
    set_name(e, what, ev);
    emit(w, e);
}

/* No "s": an instant's scope defaults to its thread. */
static void instant(struct tr_json *w, const char *cat, const char *what,
                    const struct fl_tr_event *ev)
{
    json_t *o = head(w, "i", cat, ev->tid, ev->ts_ns);
    set_name(o, what, ev);
    set_args(o, ev, "bytes", ev->bytes, !strcmp(cat, "fault"));
    emit(w, o);
}

/* A stall slice [from, to] on the thread that waited. An acquire wait's
 * slice is the wait the pager measured, and its name says which expert: no
 * args. A fault's slice starts at the page fault, before the pager saw it:
 * args hold the pager's measure and where the fault hit. */
static void stall(struct tr_json *w, const char *what, const struct fl_tr_event *ev,
                  uint32_t tid, uint64_t from, uint64_t to)
{
    json_t *o = head(w, "X", "stall", tid, from);
    if (o)
        fl_json_set(o, "dur", json_real((double)(to - from) / 1e3));
    set_name(o, what, ev);
    if (ev->type != FL_TR_ACQUIRED || ev->layer < 0)
        set_args(o, ev, "stall_ns", ev->dur_ns, true);
    emit(w, o);
}

void tr_json_event(struct tr_json *w, const struct fl_tr_event *ev, uint32_t waiter,
                   uint64_t wait_ts)
{
    switch (ev->type) {
    case FL_TR_FAULT_END: {
        /* The stall belongs on the thread that waited: from its page fault
         * when seen, else from when the pager queued it. */
        uint64_t a = wait_ts && wait_ts <= ev->ts_ns ? wait_ts : ev->ts_ns - ev->dur_ns;
        stall(w, "stall", ev, waiter ? waiter : ev->tid, a, ev->ts_ns);
        break;
    }
    case FL_TR_ACQUIRED:    /* on the thread that waited: the probe fires there */
        stall(w, "acquire wait", ev, ev->tid, ev->ts_ns - ev->dur_ns, ev->ts_ns);
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
    case FL_TR_URING_DONE: {
        json_t *o = head(w, "X", "io_uring", URING_TID, ev->ts_ns - ev->dur_ns);
        if (o) {
            fl_json_set(o, "dur", json_real((double)ev->dur_ns / 1e3));
            fl_json_set(o, "name", json_string("io_uring read"));
            json_t *a = json_pack("{s:I}", "res", (json_int_t)ev->bytes);
            set_hex(a, "user_data", ev->offset);
            fl_json_set(o, "args", a);
        }
        emit(w, o);
        break;
    }
    case FL_TR_FAULT_BEGIN: instant(w, "fault", "fault", ev); break;
    case FL_TR_PAGE_FAULT:  instant(w, "fault", "page fault", ev); break;
    case FL_TR_INSTALLED:   instant(w, "pager", "installed", ev); break;
    case FL_TR_LOADED:      instant(w, "io", "loaded", ev); break;
    case FL_TR_PREFETCH:    instant(w, "pager", "prefetch", ev); break;
    case FL_TR_EVICT:       instant(w, "pager", "evict", ev); break;
    default: break;         /* read_submit, copy_begin: the slices show them */
    }
}

/* Appends to array a; a failure marks the whole summary failed. */
static bool append(json_t *a, json_t *v)
{
    return a && v && json_array_append_new(a, v) == 0;
}

static json_t *summary_counts(const struct tr_stats *s)
{
    size_t it = 0;
    struct fl_tr_key k;
    const struct fl_tr_counts *c;
    json_t *a = json_array();
    while (a && tr_stats_next_counts(s, &it, &k, &c)) {
        const uint64_t *v = (const uint64_t *)c;
        json_t *o = json_pack("{s:i, s:i, s:i}", "layer", k.layer, "expert", k.expert, "kind",
                              (int)k.kind);
        for (size_t i = 0; o && i < sizeof(*c) / sizeof(uint64_t); i++)
            fl_json_set(o, field_names[i], json_integer((json_int_t)v[i]));
        if (!append(a, o)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *summary_hists(const struct tr_stats *s)
{
    size_t it = 0;
    struct fl_tr_key k;
    const struct fl_tr_hist *h;
    json_t *a = json_array();
    while (a && tr_stats_next_hist(s, &it, &k, &h)) {
        json_t *slots = json_array();
        for (int i = 0; slots && i < FL_TR_SLOTS; i++)
            if (!append(slots, json_integer((json_int_t)h->slots[i])))
                slots = (json_decref(slots), NULL);
        if (!append(a, json_pack("{s:i, s:i, s:i, s:s, s:I, s:I, s:o}", "layer", k.layer,
                                 "expert", k.expert, "kind", (int)k.kind, "metric",
                                 tr_metric_name(k.metric), "count", (json_int_t)h->count,
                                 "sum_ns", (json_int_t)h->sum_ns, "log2_ns", slots))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *summary_stalls(const struct tr_stats *s)
{
    const struct tr_stall *st;
    const int n = tr_stats_n_stalls(s, &st);
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (!append(a, json_pack("{s:I, s:I, s:I, s:I, s:i, s:i, s:i, s:s}", "ts_ns",
                                 (json_int_t)st[i].ts_ns, "dur_ns", (json_int_t)st[i].dur_ns,
                                 "offset", (json_int_t)st[i].offset, "tid",
                                 (json_int_t)st[i].tid, "layer", st[i].layer, "expert",
                                 st[i].expert, "kind", (int)st[i].kind, "source",
                                 tr_stall_src_name(st[i].src))))
            a = (json_decref(a), NULL);
    return a;
}

static json_t *summary_threads(const struct tr_stats *s)
{
    const struct tr_thread *t;
    const int n = tr_stats_n_threads(s, &t);
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (!append(a, json_pack("{s:I, s:o, s:I, s:I, s:I}", "tid", (json_int_t)t[i].tid,
                                 "name", fl_json_string(t[i].name), "events",
                                 (json_int_t)t[i].events, "stall_ns", (json_int_t)t[i].stall_ns,
                                 "page_faults", (json_int_t)t[i].page_faults)))
            a = (json_decref(a), NULL);
    return a;
}

static json_t *summary(const struct tr_stats *s)
{
    const struct tr_meta *m = tr_stats_meta((struct tr_stats *)s);
    const uint64_t *g = tr_stats_globals((struct tr_stats *)s);
    json_t *globals = json_object();
    for (int i = 0; globals && i < FL_TG_N; i++)
        fl_json_set(globals, global_names[i], json_integer((json_int_t)g[i]));
    return json_pack("{s:i, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "version", 1, "pid",
                     (json_int_t)m->pid, "duration_ns", (json_int_t)m->duration_ns, "command",
                     fl_json_string(m->command), "globals", globals, "counts",
                     summary_counts(s), "hists", summary_hists(s), "stalls", summary_stalls(s),
                     "threads", summary_threads(s));
}

int tr_json_summary(FILE *f, const struct tr_stats *s)
{
    json_t *o = summary(s);
    /* '/' escaped: the aggregate is embedded in the HTML report's <script> too */
    int rc = o ? fl_json_write(f, o, FL_JSON_HTML) : -ENOMEM;
    json_decref(o);
    return rc;
}

static void meta_event(struct tr_json *w, const char *what, uint32_t tid, const char *nm)
{
    emit(w, json_pack("{s:s, s:s, s:I, s:I, s:{s:o}}", "ph", "M", "name", what, "pid",
                      (json_int_t)w->pid, "tid", (json_int_t)tid, "args", "name",
                      fl_json_string(nm)));
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
    /* the aggregate last, after this exact marker: tr_json_load finds it
     * there without parsing the events */
    fprintf(w->f, "\n],\n" TR_JSON_AGGREGATE_MARKER);
    int rc = tr_json_summary(w->f, s);
    fprintf(w->f, "}\n");
    if (!rc)
        rc = w->err;
    if (!rc && (fflush(w->f) || ferror(w->f)))
        rc = -EIO;
    free(w);
    return rc;
}
