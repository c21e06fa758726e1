/* trace-json-read.c: reads the "faultline" aggregate of a saved trace back
 * into a tr_stats (base/json.h).
 *
 * A trace's bulk is its traceEvents (hundreds of MB for a long run, where
 * a whole-document parse takes about 12 times the file's size in memory).
 * A trace tr_json_end wrote ends with TR_JSON_AGGREGATE_MARKER, the
 * aggregate and "}": that marker cannot occur inside a JSON string (its
 * quotes would be escaped) nor as another key, so the last one in the file
 * is where the aggregate starts, and only the aggregate is parsed; the
 * events are not read. A file laid out otherwise (rewritten by another
 * tool) is parsed whole. A gzip trace (--out FILE.gz) is inflated first
 * (trace-file.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "ebpf/trace-file.h"
#include "ebpf/trace-json.h"

/* A saved trace is read whole into memory (inflated): keep it within reason. */
#define TRACE_MAX_BYTES ((size_t)4 << 30)

static const char *counter_names[] = { "faults", "fault_bytes", "stalls", "stall_ns", "reads",
                                       "read_bytes", "installs", "install_bytes", "prefetches",
                                       "evictions", "copies", "copy_bytes", "hits", "misses",
                                       "acquire_stalls", "acquire_stall_ns" };
static const char *global_keys[] = { "ring_drops", "page_faults", "uring_submits", "uring_done",
                                     "uring_bytes", "acquires", "uprobes", "tracepoints" };

static int load_counts(const json_t *a, struct tr_stats *s)
{
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *o = json_array_get(a, i);
        struct fl_tr_counts *c = tr_stats_counts(s, fl_json_i32(o, "layer"),
                                                 fl_json_i32(o, "expert"),
                                                 (uint8_t)fl_json_u64(o, "kind"));
        if (!c)
            return -ENOMEM;
        uint64_t *v = (uint64_t *)c;
        for (size_t k = 0; k < sizeof(*c) / sizeof(uint64_t); k++)
            v[k] += fl_json_u64(o, counter_names[k]);
    }
    return 0;
}

static int load_hists(const json_t *a, struct tr_stats *s)
{
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *o = json_array_get(a, i), *sl = json_object_get(o, "log2_ns");
        const char *m = fl_json_str(o, "metric");
        int metric = -1;
        for (int k = 0; k < FL_TM_N && m; k++)
            if (!strcmp(m, tr_metric_name(k)))
                metric = k;
        if (metric < 0 || !json_is_array(sl) || json_array_size(sl) > FL_TR_SLOTS)
            return -EINVAL;
        struct fl_tr_key key = { fl_json_i32(o, "layer"), fl_json_i32(o, "expert"),
                                 (uint8_t)fl_json_u64(o, "kind"), (uint8_t)metric, { 0 } };
        struct fl_tr_hist *h = tr_stats_hist(s, &key);
        if (!h)
            return -ENOMEM;
        for (size_t k = 0; k < json_array_size(sl); k++) {
            const json_t *v = json_array_get(sl, k);
            h->slots[k] += json_is_integer(v) && json_integer_value(v) > 0
                               ? (uint64_t)json_integer_value(v) : 0;
        }
        h->count += fl_json_u64(o, "count");
        h->sum_ns += fl_json_u64(o, "sum_ns");
    }
    return 0;
}

static void load_rest(const json_t *fl, struct tr_stats *s)
{
    struct tr_meta *m = tr_stats_meta(s);
    m->pid = (uint32_t)fl_json_u64(fl, "pid");
    m->duration_ns = fl_json_u64(fl, "duration_ns");
    const char *cmd = fl_json_str(fl, "command");
    snprintf(m->command, sizeof(m->command), "%s", cmd ? cmd : "");
    const json_t *g = json_object_get(fl, "globals");
    for (int i = 0; i < FL_TG_N; i++)
        tr_stats_globals(s)[i] = fl_json_u64(g, global_keys[i]);
    const json_t *st = json_object_get(fl, "stalls");
    for (size_t i = 0; i < json_array_size(st); i++) {
        const json_t *o = json_array_get(st, i);
        struct tr_stall x = { fl_json_u64(o, "ts_ns"), fl_json_u64(o, "dur_ns"),
                              fl_json_u64(o, "offset"), (uint32_t)fl_json_u64(o, "tid"),
                              fl_json_i32(o, "layer"), fl_json_i32(o, "expert"),
                              (uint8_t)fl_json_u64(o, "kind"), 0 };
        const char *src = fl_json_str(o, "source"); /* absent in older traces: a fault */
        if (src)
            x.src = strcmp(src, "acquire") ? TR_STALL_FAULT : TR_STALL_ACQUIRE;
        tr_stats_add_stall(s, &x);
    }
    const json_t *th = json_object_get(fl, "threads");
    for (size_t i = 0; i < json_array_size(th); i++) {
        const json_t *o = json_array_get(th, i);
        struct tr_thread *t = tr_stats_thread(s, (uint32_t)fl_json_u64(o, "tid"));
        if (!t)
            break;
        const char *nm = fl_json_str(o, "name");
        snprintf(t->name, sizeof(t->name), "%s", nm ? nm : "");
        t->events = fl_json_u64(o, "events");
        t->stall_ns = fl_json_u64(o, "stall_ns");
        t->page_faults = fl_json_u64(o, "page_faults");
    }
}

/* The aggregate of a trace as tr_json_end lays it out, or NULL (then *rc
 * is 0 when the file is laid out otherwise, else the parse error). */
static json_t *tail_aggregate(const char *txt, size_t len, const char *path, int *rc,
                              struct fl_err *err)
{
    static const char mark[] = TR_JSON_AGGREGATE_MARKER;
    const size_t m = sizeof(mark) - 1;
    *rc = 0;
    if (len < m + 2 || txt[0] != '{' || !memmem(txt, len, "\"traceEvents\":[", 15))
        return NULL;
    const char *at = NULL;
    for (const char *p = txt; (p = memmem(p, len - (size_t)(p - txt), mark, m)); p++)
        at = p;
    if (!at)
        return NULL;
    const size_t off = (size_t)(at - txt) + m;
    json_error_t je; /* with the EOF check off, position is what the parse consumed */
    json_t *agg = json_loadb(at + m, len - off, JSON_DISABLE_EOF_CHECK, &je);
    if (!agg) {
        *rc = fl_err_set(err, -EINVAL, "%s: the aggregate, line %d column %d: %s", path, je.line,
                         je.column, je.text);
        return NULL;
    }
    size_t k = off + (size_t)je.position; /* only "}" and blanks may follow */
    while (k < len && (txt[k] == ' ' || txt[k] == '\n' || txt[k] == '\r' || txt[k] == '\t'))
        k++;
    bool closed = k < len && txt[k++] == '}';
    while (k < len && (txt[k] == ' ' || txt[k] == '\n' || txt[k] == '\r' || txt[k] == '\t'))
        k++;
    if (!closed || k != len) {
        json_decref(agg);
        *rc = fl_err_set(err, -EINVAL, "%s: the document does not end after the aggregate", path);
        return NULL;
    }
    return agg;
}

static int load_aggregate(const json_t *fl, const char *path, struct tr_stats *s,
                          struct fl_err *err)
{
    int rc;
    if (!json_is_object(fl))
        return fl_err_set(err, -EINVAL, "%s: not a faultline trace (no \"faultline\" aggregate)",
                          path);
    if (fl_json_u64(fl, "version") != 1)
        return fl_err_set(err, -EINVAL, "%s: unknown faultline trace version", path);
    if ((rc = load_counts(json_object_get(fl, "counts"), s)) < 0 ||
        (rc = load_hists(json_object_get(fl, "hists"), s)) < 0)
        return fl_err_set(err, rc, "%s: %s", path, rc == -ENOMEM ? "out of memory" : "bad histogram");
    load_rest(fl, s);
    return 0;
}

int tr_json_load(const char *path, struct tr_stats *s, struct fl_err *err)
{
    char *txt;
    size_t len;
    int rc = tr_file_read(path, TRACE_MAX_BYTES, &txt, &len);
    if (rc)
        return fl_err_set(err, rc, "%s: %s", path, rc == -EFBIG ? "too large" :
                          rc == -EBADMSG ? "damaged or truncated gzip data" : strerror(-rc));
    json_t *agg = tail_aggregate(txt, len, path, &rc, err), *root = NULL;
    if (!agg && !rc && !(rc = fl_json_load_bytes(txt, len, false, path, &root, err)) &&
        !json_object_get(root, "traceEvents"))
        rc = fl_err_set(err, -EINVAL, "%s: not a faultline trace (no \"faultline\" aggregate)",
                        path);
    free(txt);
    if (!rc)
        rc = load_aggregate(agg ? agg : json_object_get(root, "faultline"), path, s, err);
    json_decref(agg);
    json_decref(root);
    return rc;
}
