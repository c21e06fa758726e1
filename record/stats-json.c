/* stats-json.c: see record/stats-json.h. */
#include "record/stats-json.h"

#include <errno.h>
#include <stdlib.h>

#include "base/json.h"

/* ~100 bytes per expert: room for a million experts */
#define PROFILE_MAX_BYTES ((size_t)1 << 28)

static json_t *totals(const struct pager *p)
{
    struct pager_totals t;
    pager_stats_totals(p, &t);
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                     "faults", (json_int_t)t.faults, "fault_loads", (json_int_t)t.fault_loads,
                     "prefetches", (json_int_t)t.prefetches, "prefetch_hits",
                     (json_int_t)t.prefetch_hits, "cache_hits", (json_int_t)t.cache_hits,
                     "misses", (json_int_t)t.misses, "loads", (json_int_t)t.loads, "bytes_read",
                     (json_int_t)t.bytes_read, "evictions", (json_int_t)t.evictions,
                     "reads_retried", (json_int_t)t.reads_retried, "stall_count",
                     (json_int_t)t.stall_count, "stall_ns", (json_int_t)t.stall_ns,
                     "prefetch_skips", (json_int_t)t.prefetch_skips);
}

static json_t *histogram(const struct pager *p)
{
    uint64_t h[PAGER_STALL_BUCKETS];
    pager_stats_hist(p, h);
    json_t *a = json_array();
    for (int k = 0; a && k < PAGER_STALL_BUCKETS; k++)
        if (json_array_append_new(a, json_integer((json_int_t)h[k]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *unit(const struct pager_unit_stats *u)
{
    return json_pack("{s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "layer",
                     u->layer, "expert", u->expert, "offset", (json_int_t)u->offset, "bytes",
                     (json_int_t)u->bytes, "loads", (json_int_t)u->loads, "faults",
                     (json_int_t)u->faults, "cache_hits", (json_int_t)u->cache_hits,
                     "prefetch_hits", (json_int_t)u->prefetch_hits, "misses",
                     (json_int_t)u->misses, "evictions", (json_int_t)u->evictions,
                     "bytes_read", (json_int_t)u->bytes_read);
}

static json_t *units(const struct pager *p)
{
    json_t *a = json_array();
    struct pager_unit_stats u;
    for (uint32_t i = 0; a && i < pager_n_units(p); i++)
        if (pager_unit_stats(p, i, &u) && json_array_append_new(a, unit(&u))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* Precision and recall are null where nothing was predicted. */
static json_t *prediction(const struct eng_stats_prediction *st)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "predictor",
                     st->predictor, "routed", (json_int_t)st->routed,
                     "ready", (json_int_t)st->ready, "scored", (json_int_t)st->scored,
                     "predicted", (json_int_t)st->predicted, "hits", (json_int_t)st->hits,
                     "chosen", (json_int_t)st->chosen, "precision",
                     st->precision >= 0 ? fl_json_real(st->precision) : json_null(),
                     "recall", st->recall >= 0 ? fl_json_real(st->recall) : json_null());
}

int eng_stats_json_write(FILE *f, const struct pager *p, const struct eng_stats_prediction *pred)
{
    json_t *d = json_pack("{s:s, s:b, s:I, s:I, s:I, s:o, s:o, s:o}", "mode",
                          pager_uses_uffd(p) ? "uffd" : "explicit", "direct_io",
                          pager_uses_direct_io(p), "budget", (json_int_t)pager_budget(p),
                          "min_budget", (json_int_t)pager_min_budget(p), "peak_resident",
                          (json_int_t)pager_peak_resident_bytes(p), "totals", totals(p),
                          "stall_hist_log2_us", histogram(p), "units", units(p));
    if (d && pred && fl_json_set(d, "prediction", prediction(pred))) {
        json_decref(d);
        d = NULL;
    }
    int rc = d ? fl_json_write(f, d, FL_JSON_COMPACT) : -ENOMEM;
    json_decref(d);
    return rc;
}

/* One unit object into u; false when it is not one. */
static bool parse_unit(const json_t *o, struct pager_hot_unit *u)
{
    const json_t *l = json_object_get(o, "layer"), *e = json_object_get(o, "expert");
    const char *need[] = { "cache_hits", "prefetch_hits", "misses" };
    if (!json_is_integer(l) || !json_is_integer(e) || json_integer_value(l) < 0 ||
        json_integer_value(e) < 0 || json_integer_value(l) > INT32_MAX ||
        json_integer_value(e) > INT32_MAX)
        return false;
    for (int i = 0; i < 3; i++)
        if (!json_is_integer(json_object_get(o, need[i])) ||
            json_integer_value(json_object_get(o, need[i])) < 0)
            return false;
    *u = (struct pager_hot_unit){ (int32_t)json_integer_value(l), (int32_t)json_integer_value(e),
                                  fl_json_u64(o, "cache_hits") + fl_json_u64(o, "prefetch_hits") +
                                      fl_json_u64(o, "misses") + fl_json_u64(o, "faults") };
    return true;
}

int eng_hot_profile_load(const char *path, struct pager_hot_unit **out, int *n,
                         struct fl_err *err)
{
    *out = NULL;
    *n = 0;
    json_t *d;
    int rc = fl_json_load_file(path, PROFILE_MAX_BYTES, &d, err);
    if (rc)
        return rc;
    const json_t *a = json_object_get(d, "units");
    if (!json_is_array(a)) {
        json_decref(d);
        return fl_err_set(err, -EINVAL, "%s: not a faultline --stats-json file (no \"units\")", path);
    }
    const size_t cnt = json_array_size(a);
    if (cnt > INT32_MAX || !(*out = malloc(sizeof(**out) * (cnt ? cnt : 1)))) {
        json_decref(d);
        return fl_err_set(err, -ENOMEM, "%s: out of memory", path);
    }
    for (size_t i = 0; i < cnt; i++)
        if (!parse_unit(json_array_get(a, i), &(*out)[i])) {
            json_decref(d);
            free(*out);
            *out = NULL;
            return fl_err_set(err, -EINVAL, "%s: a unit object lacks layer/expert/counts", path);
        }
    *n = (int)cnt;
    json_decref(d);
    return 0;
}
