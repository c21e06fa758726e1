/* trace-json-read.c: reads the "faultline" aggregate of a saved trace back
 * into a tr_stats; the traceEvents array (the bulk of the file) is only
 * checked for syntax. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/json.h"
#include "ebpf/trace-json.h"

static const char *counter_names[] = { "faults", "fault_bytes", "stalls", "stall_ns", "reads",
                                       "read_bytes", "installs", "install_bytes", "prefetches",
                                       "evictions", "copies", "copy_bytes", "hits", "misses",
                                     "acquire_stalls", "acquire_stall_ns" };
static const char *global_keys[] = { "ring_drops", "page_faults", "uring_submits", "uring_done",
                                     "uring_bytes", "acquires", "uprobes", "tracepoints" };

static int load_counts(const struct jv *a, struct tr_stats *s)
{
    for (int i = 0; a && a->t == J_ARR && i < a->n; i++) {
        const struct jv *o = &a->items[i];
        struct fl_tr_counts *c = tr_stats_counts(s, jv_i32(o, "layer"), jv_i32(o, "expert"),
                                                 (uint8_t)jv_u64(o, "kind"));
        if (!c)
            return -ENOMEM;
        uint64_t *v = (uint64_t *)c;
        for (size_t k = 0; k < sizeof(*c) / sizeof(uint64_t); k++)
            v[k] += jv_u64(o, counter_names[k]);
    }
    return 0;
}

static int load_hists(const struct jv *a, struct tr_stats *s)
{
    for (int i = 0; a && a->t == J_ARR && i < a->n; i++) {
        const struct jv *o = &a->items[i], *m = jv_get(o, "metric"), *sl = jv_get(o, "log2_ns");
        int metric = -1;
        for (int k = 0; k < FL_TM_N && m && m->t == J_STR; k++)
            if (!strcmp(m->s, tr_metric_name(k)))
                metric = k;
        if (metric < 0 || !sl || sl->t != J_ARR || sl->n > FL_TR_SLOTS)
            return -EINVAL;
        struct fl_tr_key key = { jv_i32(o, "layer"), jv_i32(o, "expert"), (uint8_t)jv_u64(o, "kind"),
                                 (uint8_t)metric, { 0 } };
        struct fl_tr_hist *h = tr_stats_hist(s, &key);
        if (!h)
            return -ENOMEM;
        for (int k = 0; k < sl->n; k++)
            h->slots[k] += sl->items[k].u;
        h->count += jv_u64(o, "count");
        h->sum_ns += jv_u64(o, "sum_ns");
    }
    return 0;
}

static void load_rest(const struct jv *fl, struct tr_stats *s)
{
    struct tr_meta *m = tr_stats_meta(s);
    m->pid = (uint32_t)jv_u64(fl, "pid");
    m->duration_ns = jv_u64(fl, "duration_ns");
    const struct jv *cmd = jv_get(fl, "command");
    snprintf(m->command, sizeof(m->command), "%s", cmd && cmd->t == J_STR ? cmd->s : "");
    const struct jv *g = jv_get(fl, "globals");
    for (int i = 0; i < FL_TG_N; i++)
        tr_stats_globals(s)[i] = jv_u64(g, global_keys[i]);
    const struct jv *st = jv_get(fl, "stalls");
    for (int i = 0; st && st->t == J_ARR && i < st->n; i++) {
        const struct jv *o = &st->items[i];
        struct tr_stall x = { jv_u64(o, "ts_ns"), jv_u64(o, "dur_ns"), jv_u64(o, "offset"),
                              (uint32_t)jv_u64(o, "tid"), jv_i32(o, "layer"), jv_i32(o, "expert"),
                              (uint8_t)jv_u64(o, "kind"), 0 };
        const struct jv *src = jv_get(o, "source"); /* absent in older traces: a fault */
        if (src && src->t == J_STR)
            x.src = strcmp(src->s, "acquire") ? TR_STALL_FAULT : TR_STALL_ACQUIRE;
        tr_stats_add_stall(s, &x);
    }
    const struct jv *th = jv_get(fl, "threads");
    for (int i = 0; th && th->t == J_ARR && i < th->n; i++) {
        const struct jv *o = &th->items[i], *nm = jv_get(o, "name");
        struct tr_thread *t = tr_stats_thread(s, (uint32_t)jv_u64(o, "tid"));
        if (!t)
            break;
        snprintf(t->name, sizeof(t->name), "%s", nm && nm->t == J_STR ? nm->s : "");
        t->events = jv_u64(o, "events");
        t->stall_ns = jv_u64(o, "stall_ns");
        t->page_faults = jv_u64(o, "page_faults");
    }
}

int tr_json_load(const char *path, struct tr_stats *s, struct fl_err *err)
{
    struct jv root;
    int rc = jv_parse_file(path, "traceEvents", &root, err);
    if (rc < 0)
        return rc;
    const struct jv *fl = jv_get(&root, "faultline");
    if (!jv_get(&root, "traceEvents") || !fl || fl->t != J_OBJ)
        rc = fl_err_set(err, -EINVAL, "%s: not a faultline trace (no \"faultline\" aggregate)",
                        path);
    else if (jv_u64(fl, "version") != 1)
        rc = fl_err_set(err, -EINVAL, "%s: unknown faultline trace version", path);
    else if ((rc = load_counts(jv_get(fl, "counts"), s)) < 0 ||
             (rc = load_hists(jv_get(fl, "hists"), s)) < 0)
        fl_err_set(err, rc, "%s: %s", path, rc == -ENOMEM ? "out of memory" : "bad histogram");
    else
        load_rest(fl, s);
    jv_free(&root);
    return rc;
}
