/* belady.c: Belady's MIN over grouped requests (pager/belady.h).
 *
 * next[i] is the index of the next request of keys[i] (n: none). The
 * resident keys live in an array with the index of their next request;
 * a miss with the cache full scans it for the farthest. Capacities are a
 * few thousand experts at most and misses a fraction of the requests, so
 * the scan costs less than building a heap would save. fl_static_top_loads
 * is counting and a sort. */
#include "pager/belady.h"

#include <errno.h>
#include <stdlib.h>

struct min_state {
    int32_t *slot_of;  /* [n_keys]: index into res, or -1 */
    int32_t *res;      /* [capacity]: resident keys */
    size_t *res_next;  /* [capacity]: each one's next request */
    int32_t *held_by;  /* [n_keys]: the group that last requested it */
    int n_res;
};

/* next[i] for every request: one pass from the end. */
static size_t *next_uses(const int32_t *keys, size_t n, int32_t n_keys)
{
    size_t *next = malloc(n * sizeof(*next) + 1);
    size_t *last = malloc((size_t)n_keys * sizeof(*last));
    if (next && last) {
        for (int32_t k = 0; k < n_keys; k++)
            last[k] = n;
        for (size_t i = n; i-- > 0;) {
            next[i] = last[keys[i]];
            last[keys[i]] = i;
        }
    } else {
        free(next);
        next = NULL;
    }
    free(last);
    return next;
}

/* The resident key to evict for group g: the farthest next request among
 * those g does not hold; -1 when g holds them all. */
static int victim(const struct min_state *s, int32_t g)
{
    int best = -1;
    for (int j = 0; j < s->n_res; j++)
        if (s->held_by[s->res[j]] != g && (best < 0 || s->res_next[j] > s->res_next[best]))
            best = j;
    return best;
}

static int64_t run(struct min_state *s, const int32_t *keys, const int32_t *group,
                   const size_t *next, size_t n, int capacity)
{
    int64_t loads = 0;
    for (size_t i = 0; i < n; i++) {
        const int32_t k = keys[i];
        int j = s->slot_of[k];
        if (j < 0) {
            loads++;
            if (s->n_res < capacity) {
                j = s->n_res++;
            } else if ((j = victim(s, group[i])) < 0) {
                return -EINVAL; /* the group alone is larger than the cache */
            } else {
                s->slot_of[s->res[j]] = -1;
            }
            s->res[j] = k;
            s->slot_of[k] = j;
        }
        s->res_next[j] = next[i];
        s->held_by[k] = group[i];
    }
    return loads;
}

int64_t fl_belady_loads(const int32_t *keys, const int32_t *group, size_t n, int32_t n_keys,
                        int capacity)
{
    if (capacity < 1 || n_keys < 1)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (keys[i] < 0 || keys[i] >= n_keys || (i && group[i] < group[i - 1]))
            return -EINVAL;
    struct min_state s = { 0 };
    size_t *next = next_uses(keys, n, n_keys);
    s.slot_of = malloc((size_t)n_keys * sizeof(int32_t));
    s.held_by = malloc((size_t)n_keys * sizeof(int32_t));
    s.res = malloc((size_t)capacity * sizeof(int32_t));
    s.res_next = malloc((size_t)capacity * sizeof(size_t));
    int64_t rc = -ENOMEM;
    if (next && s.slot_of && s.held_by && s.res && s.res_next) {
        for (int32_t k = 0; k < n_keys; k++)
            s.slot_of[k] = -1, s.held_by[k] = INT32_MIN;
        rc = run(&s, keys, group, next, n, capacity);
    }
    free(next);
    free(s.slot_of);
    free(s.held_by);
    free(s.res);
    free(s.res_next);
    return rc;
}

static int more_requests(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

int64_t fl_static_top_loads(const int32_t *keys, const int32_t *group, size_t n, int32_t n_keys,
                            int capacity)
{
    if (capacity < 1 || n_keys < 1)
        return -EINVAL;
    int64_t *count = calloc((size_t)n_keys, sizeof(*count));
    if (!count)
        return -ENOMEM;
    size_t widest = 0;
    for (size_t i = 0, first = 0; i < n; i++) {
        if (keys[i] < 0 || keys[i] >= n_keys || (i && group[i] < group[i - 1])) {
            free(count);
            return -EINVAL;
        }
        first = i && group[i] != group[i - 1] ? i : first;
        widest = i - first + 1 > widest ? i - first + 1 : widest;
        count[keys[i]]++;
    }
    if (widest > (size_t)capacity) {
        free(count);
        return -EINVAL;
    }
    qsort(count, (size_t)n_keys, sizeof(*count), more_requests);
    int64_t loads = (int64_t)n;
    for (size_t i = 0; i < (size_t)capacity - widest && i < (size_t)n_keys && count[i]; i++)
        loads -= count[i] - 1; /* held: only its first request reads it */
    free(count);
    return loads;
}
