/* stats.c: per-unit and global counters, the stall histogram and their
 * table and JSON renderings. Counters are relaxed atomics bumped where the
 * event happens; readers may see a slightly torn snapshot, never a wrong count. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pager/internal.h"

uint64_t pg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Bucket k counts stalls of [2^k, 2^(k+1)) microseconds (bucket 0: < 2 us). */
void pg_stall_record(struct pager *p, uint64_t ns)
{
    uint64_t us = ns / 1000;
    int k = 0;
    while (us >= 2 && k < PG_HIST - 1) {
        us >>= 1;
        k++;
    }
    pg_inc(&p->st.hist[k], 1);
    pg_inc(&p->st.stall_count, 1);
    pg_inc(&p->st.stall_ns, ns);
}

void pager_stats_totals(const struct pager *p, struct pager_totals *t)
{
    const struct pg_stats *s = &p->st;
    *t = (struct pager_totals){
        pg_ld(&s->faults), pg_ld(&s->fault_loads), pg_ld(&s->prefetches),
        pg_ld(&s->prefetch_hits), pg_ld(&s->cache_hits), pg_ld(&s->misses),
        pg_ld(&s->loads), pg_ld(&s->bytes_read), pg_ld(&s->evictions),
        pg_ld(&s->reads_retried), pg_ld(&s->stall_count), pg_ld(&s->stall_ns),
        pg_ld(&s->prefetch_skips),
    };
}

void pager_stats_reset(struct pager *p)
{
    _Atomic uint64_t *g[] = { &p->st.faults, &p->st.fault_loads, &p->st.prefetches,
                              &p->st.prefetch_hits, &p->st.cache_hits, &p->st.misses,
                              &p->st.loads, &p->st.bytes_read, &p->st.evictions,
                              &p->st.reads_retried, &p->st.stall_count, &p->st.stall_ns,
                              &p->st.prefetch_skips };
    for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++)
        atomic_store(g[i], 0);
    for (int k = 0; k < PG_HIST; k++)
        atomic_store(&p->st.hist[k], 0);
    for (uint32_t u = 0; u < p->n_units; u++) {
        struct pg_unit_stats *s = &p->units[u].st;
        _Atomic uint64_t *c[] = { &s->faults, &s->prefetch_hits, &s->cache_hits, &s->misses,
                                  &s->bytes_read, &s->evictions, &s->loads };
        for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
            atomic_store(c[i], 0);
    }
}

static uint64_t unit_activity(const struct pg_unit *n)
{
    return pg_ld(&n->st.loads) + pg_ld(&n->st.faults) + pg_ld(&n->st.cache_hits) +
           pg_ld(&n->st.prefetch_hits);
}

static int by_bytes_desc(const void *a, const void *b, void *ctx)
{
    const struct pg_unit *u = ctx;
    uint64_t x = pg_ld(&u[*(const uint32_t *)a].st.bytes_read);
    uint64_t y = pg_ld(&u[*(const uint32_t *)b].st.bytes_read);
    return x < y ? 1 : x > y ? -1 : 0;
}

static void print_units(const struct pager *p, FILE *out, int top)
{
    uint32_t *idx = malloc(sizeof(uint32_t) * (p->n_units + 1)), n = 0;
    if (!idx)
        return;
    for (uint32_t u = 0; u < p->n_units; u++)
        if (unit_activity(&p->units[u]))
            idx[n++] = u;
    qsort_r(idx, n, sizeof(uint32_t), by_bytes_desc, p->units);
    fprintf(out, "  %5s %6s %7s %7s %7s %7s %7s %10s\n", "layer", "expert", "loads", "faults",
            "hits", "pf-hits", "evicts", "MiB read");
    for (uint32_t i = 0; i < n && (int)i < top; i++) {
        const struct pg_unit *u = &p->units[idx[i]];
        fprintf(out, "  %5d %6d %7" PRIu64 " %7" PRIu64 " %7" PRIu64 " %7" PRIu64 " %7" PRIu64
                " %10.2f\n", u->layer, u->expert, pg_ld(&u->st.loads), pg_ld(&u->st.faults),
                pg_ld(&u->st.cache_hits), pg_ld(&u->st.prefetch_hits), pg_ld(&u->st.evictions),
                (double)pg_ld(&u->st.bytes_read) / (1 << 20));
    }
    if (n > (uint32_t)top)
        fprintf(out, "  ... %u more active units (--stats-json has all)\n", n - (uint32_t)top);
    free(idx);
}

void pager_stats_print(const struct pager *p, FILE *out)
{
    struct pager_totals t;
    pager_stats_totals(p, &t);
    uint64_t acc = t.cache_hits + t.prefetch_hits + t.misses;
    fprintf(out, "pager: %s mode, %s reads, budget %.1f MiB (min %.1f), peak resident %.1f MiB\n",
            p->uffd_mode ? "uffd" : "explicit", p->direct ? "O_DIRECT" : "buffered",
            (double)p->budget / (1 << 20), (double)p->min_budget / (1 << 20),
            (double)pager_peak_resident_bytes(p) / (1 << 20));
    fprintf(out, "  acquires %" PRIu64 ": cache hits %" PRIu64 ", prefetch hits %" PRIu64
            ", misses %" PRIu64 " (hit rate %.1f%%)\n", acc, t.cache_hits, t.prefetch_hits,
            t.misses, acc ? 100.0 * (double)(t.cache_hits + t.prefetch_hits) / (double)acc : 0.0);
    fprintf(out, "  faults %" PRIu64 " (%" PRIu64 " started a load), prefetches %" PRIu64
            ", loads %" PRIu64 ", evictions %" PRIu64 ", read %.1f MiB, retried reads %" PRIu64
            "\n",
            t.faults, t.fault_loads, t.prefetches, t.loads, t.evictions,
            (double)t.bytes_read / (1 << 20), t.reads_retried);
    if (t.prefetch_skips)
        fprintf(out, "  prefetches not read (the expert was in VRAM): %" PRIu64 "\n",
                t.prefetch_skips);
    fprintf(out, "  stalls %" PRIu64 ", mean %.1f us; histogram (us):", t.stall_count,
            t.stall_count ? (double)t.stall_ns / 1000.0 / (double)t.stall_count : 0.0);
    for (int k = 0; k < PG_HIST; k++) {
        uint64_t c = pg_ld(&p->st.hist[k]);
        if (c)
            fprintf(out, " [%llu,%llu):%" PRIu64, k ? 1ull << k : 0ull, 1ull << (k + 1), c);
    }
    fprintf(out, "\n");
    print_units(p, out, 16);
}

void pager_stats_hist(const struct pager *p, uint64_t hist[PAGER_STALL_BUCKETS])
{
    for (int k = 0; k < PAGER_STALL_BUCKETS; k++)
        hist[k] = pg_ld(&p->st.hist[k]);
}

uint32_t pager_n_units(const struct pager *p)
{
    return p->n_units;
}

bool pager_unit_stats(const struct pager *p, uint32_t unit, struct pager_unit_stats *out)
{
    if (unit >= p->n_units || !unit_activity(&p->units[unit]))
        return false;
    const struct pg_unit *n = &p->units[unit];
    *out = (struct pager_unit_stats){
        .layer = n->layer, .expert = n->expert, .offset = p->ranges[n->first].off,
        .bytes = n->charge, .loads = pg_ld(&n->st.loads), .faults = pg_ld(&n->st.faults),
        .cache_hits = pg_ld(&n->st.cache_hits), .prefetch_hits = pg_ld(&n->st.prefetch_hits),
        .misses = pg_ld(&n->st.misses), .evictions = pg_ld(&n->st.evictions),
        .bytes_read = pg_ld(&n->st.bytes_read),
    };
    return true;
}
