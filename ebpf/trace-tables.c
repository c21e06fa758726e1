/* trace-tables.c: the text tables of `faultline trace`: the live block
 * printed every interval and the end-of-run report. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/trace-stats.h"

#define MIB (1024.0 * 1024.0)

void tr_fmt_ns(char *out, size_t n, double ns)
{
    static const char *unit[] = { "ns", "us", "ms", "s" };
    int u = 0;
    double v = ns;
    while (u < 3 && v >= 999.5) { /* 999.7 us is "1.00 ms", not "1000 us" */
        v /= 1e3;
        u++;
    }
    snprintf(out, n, u == 0 || v >= 99.95 ? "%.0f %s" : v >= 9.995 ? "%.1f %s" : "%.2f %s", v,
             unit[u]);
}

/* libbpf-tools' print_log2_hist layout; bucket k is [2^k, 2^(k+1)) ns. */
void tr_print_hist(const struct fl_tr_hist *h, const char *title, FILE *out)
{
    int lo = -1, hi = -1;
    uint64_t max = 0;
    for (int k = 0; k < FL_TR_SLOTS; k++) {
        if (!h->slots[k])
            continue;
        if (lo < 0)
            lo = k;
        hi = k;
        if (h->slots[k] > max)
            max = h->slots[k];
    }
    char mean[16], p50[16], p99[16];
    tr_fmt_ns(mean, sizeof(mean), h->count ? (double)h->sum_ns / (double)h->count : 0.0);
    tr_fmt_ns(p50, sizeof(p50), (double)tr_hist_quantile(h, 0.5));
    tr_fmt_ns(p99, sizeof(p99), (double)tr_hist_quantile(h, 0.99));
    fprintf(out, "\n%s: %" PRIu64 " samples, mean %s, p50 %s, p99 %s\n", title, h->count, mean,
            p50, p99);
    if (lo < 0)
        return;
    fprintf(out, "     %-19s : count    distribution\n", "latency");
    for (int k = lo; k <= hi; k++) {
        char a[16], b[16], range[40];
        tr_fmt_ns(a, sizeof(a), k ? (double)(1ull << k) : 0.0);
        tr_fmt_ns(b, sizeof(b), (double)(2ull << k));
        snprintf(range, sizeof(range), "%s -> %s", a, b);
        int bars = max ? (int)(40 * h->slots[k] / max) : 0;
        char bar[41];
        memset(bar, '*', (size_t)bars);
        bar[bars] = 0;
        fprintf(out, "     %19s : %-8" PRIu64 " |%-40s|\n", range, h->slots[k], bar);
    }
}

static int by_stall_desc(const void *a, const void *b)
{
    const struct tr_unit *x = a, *y = b;
    uint64_t wx = tr_wait_ns(&x->c), wy = tr_wait_ns(&y->c);
    if (wx != wy)
        return wx < wy ? 1 : -1;
    return x->c.read_bytes < y->c.read_bytes ? 1 : x->c.read_bytes > y->c.read_bytes ? -1 : 0;
}

static void print_totals(const struct tr_stats *s, const struct tr_unit *u, int n, FILE *out)
{
    struct fl_tr_counts t = { 0 };
    for (int i = 0; i < n; i++)
        tr_counts_add(&t, &u[i].c);
    const struct tr_meta *m = tr_stats_meta((struct tr_stats *)s);
    const uint64_t *g = tr_stats_globals((struct tr_stats *)s);
    double secs = (double)m->duration_ns / 1e9;
    fprintf(out, "faultline trace: pid %u, %.2f s: %s\n", m->pid, secs, m->command);
    fprintf(out, "  stalls %" PRIu64 ", stall time %.2f ms: acquire %" PRIu64 " (%.2f ms), fault %"
            PRIu64 " (%.2f ms)\n", tr_wait_count(&t), (double)tr_wait_ns(&t) / 1e6, t.acq_stalls,
            (double)t.acq_stall_ns / 1e6, t.stalls, (double)t.stall_ns / 1e6);
    fprintf(out, "  pager faults %" PRIu64 " (region page faults %" PRIu64 ")%s\n", t.faults,
            g[FL_TG_PAGE_FAULTS], t.faults || !n ? "" : ": " TR_NO_FAULTS_WHY);
    fprintf(out, "  loads %" PRIu64 ", %.2f MiB read (%.1f MiB/s); prefetches %" PRIu64
            ", evictions %" PRIu64 "\n", t.reads, (double)t.read_bytes / MIB,
            secs > 0 ? (double)t.read_bytes / MIB / secs : 0.0, t.prefetches, t.evictions);
    if (g[FL_TG_URING_DONE]) /* --detail */
        fprintf(out, "  io_uring: %" PRIu64 " requests done, %.2f MiB\n", g[FL_TG_URING_DONE],
                (double)g[FL_TG_URING_BYTES] / MIB);
    if (t.hits + t.misses)
        fprintf(out, "  acquires %" PRIu64 ": found resident %" PRIu64 ", waited %" PRIu64
                " (hit rate %.1f%%)\n", t.hits + t.misses, t.hits, t.misses,
                100.0 * (double)t.hits / (double)(t.hits + t.misses));
    if (t.copies)
        fprintf(out, "  host->GPU copies %" PRIu64 ", %.2f MiB\n", t.copies,
                (double)t.copy_bytes / MIB);
    fprintf(out, "  probe hits: %" PRIu64 " uprobes (traps), %" PRIu64 " tracepoints\n",
            g[FL_TG_UPROBES], g[FL_TG_TRACEPOINTS]);
    if (g[FL_TG_RB_DROPS])
        fprintf(out, "  warning: %" PRIu64 " events dropped from the stream (tables are exact)\n",
                g[FL_TG_RB_DROPS]);
}

static void print_layers(const struct tr_unit *u, int n, FILE *out)
{
    fprintf(out, "\nper layer (stall = acquire + fault):\n  %5s %7s %8s %8s %11s %11s %9s %9s %10s"
            " %7s\n", "layer", "experts", "faults", "waits", "stall ms", "acq ms", "p99 us",
            "loads", "MiB read", "evicts");
    for (int i = 0; i < n;) {
        int j = i, ne = 0;
        struct fl_tr_counts c = { 0 };
        struct fl_tr_hist h = { 0 };
        for (; j < n && u[j].layer == u[i].layer; j++) {
            ne++;
            tr_counts_add(&c, &u[j].c);
            tr_hist_merge(&h, &u[j].stall);
            tr_hist_merge(&h, &u[j].acquire);
        }
        fprintf(out, "  %5d %7d %8" PRIu64 " %8" PRIu64 " %11.3f %11.3f %9.1f %9" PRIu64
                " %10.2f %7" PRIu64 "\n", u[i].layer, ne, c.faults, c.acq_stalls,
                (double)tr_wait_ns(&c) / 1e6, (double)c.acq_stall_ns / 1e6,
                (double)tr_hist_quantile(&h, 0.99) / 1e3, c.reads, (double)c.read_bytes / MIB,
                c.evictions);
        i = j;
    }
}

static void print_experts(const struct tr_unit *u, int n, FILE *out, int top)
{
    struct tr_unit *v = malloc(sizeof(*v) * (size_t)(n + 1));
    if (!v)
        return;
    memcpy(v, u, sizeof(*v) * (size_t)n);
    qsort(v, (size_t)n, sizeof(*v), by_stall_desc);
    fprintf(out, "\nper expert (by stall time = acquire + fault):\n  %5s %6s %7s %6s %10s %10s %9s"
            " %9s %7s %10s %7s %7s\n", "layer", "expert", "faults", "waits", "stall ms", "acq ms",
            "p99 us", "read p99", "loads", "MiB read", "pf", "evicts");
    for (int i = 0; i < n && i < top; i++) {
        struct fl_tr_hist h = v[i].stall;
        tr_hist_merge(&h, &v[i].acquire);
        fprintf(out, "  %5d %6d %7" PRIu64 " %6" PRIu64 " %10.3f %10.3f %9.1f %9.1f %7" PRIu64
                " %10.2f %7" PRIu64 " %7" PRIu64 "\n", v[i].layer, v[i].expert, v[i].c.faults,
                v[i].c.acq_stalls, (double)tr_wait_ns(&v[i].c) / 1e6,
                (double)v[i].c.acq_stall_ns / 1e6, (double)tr_hist_quantile(&h, 0.99) / 1e3,
                (double)tr_hist_quantile(&v[i].read, 0.99) / 1e3, v[i].c.reads,
                (double)v[i].c.read_bytes / MIB, v[i].c.prefetches, v[i].c.evictions);
    }
    if (n > top)
        fprintf(out, "  ... %d more (the JSON and HTML reports have all)\n", n - top);
    free(v);
}

static void print_stalls(const struct tr_stats *s, FILE *out)
{
    const struct tr_stall *st;
    int n = tr_stats_n_stalls(s, &st);
    if (!n)
        return;
    fprintf(out, "\nlongest stalls:\n  %10s %8s %5s %6s %7s %10s %8s\n", "at ms", "tid", "layer",
            "expert", "kind", "stall us", "waited");
    uint64_t t0 = UINT64_MAX;
    for (int i = 0; i < n; i++)
        if (st[i].ts_ns < t0)
            t0 = st[i].ts_ns;
    for (int i = 0; i < n && i < 10; i++)
        fprintf(out, "  %10.3f %8u %5d %6d %7s %10.1f %8s\n", (double)(st[i].ts_ns - t0) / 1e6,
                st[i].tid, st[i].layer, st[i].expert, tr_kind_name(st[i].kind),
                (double)st[i].dur_ns / 1e3, tr_stall_src_name(st[i].src));
}

void tr_print_tables(const struct tr_stats *s, FILE *out, int top)
{
    struct tr_unit *u = NULL;
    int n = tr_stats_units(s, &u);
    if (n < 0)
        return;
    print_totals(s, u, n, out);
    if (n) {
        print_layers(u, n, out);
        print_experts(u, n, out, top);
    }
    print_stalls(s, out);
    for (int m = 0; m < FL_TM_N; m++) {
        struct fl_tr_hist h;
        tr_stats_metric_hist(s, m, &h);
        if (!h.count)
            continue;
        const char *titles[] = { "fault stall latency (fault -> installed, per faulting thread)",
                                 "pager read latency (submit -> done, per slice)",
                                 "host->GPU copy latency", "io_uring request latency (kernel)",
                                 "acquire wait latency (miss -> resident, per waiting thread)" };
        _Static_assert(sizeof(titles) / sizeof(titles[0]) == FL_TM_N, "a title per metric");
        tr_print_hist(&h, titles[m], out);
    }
    free(u);
}

/* --- live ------------------------------------------------------------------- */

static const struct tr_unit *unit_in(const struct tr_unit *v, int n, int32_t l, int32_t e)
{
    int a = 0, b = n;   /* sorted by (layer, expert) */
    while (a < b) {
        int m = (a + b) / 2;
        if (v[m].layer < l || (v[m].layer == l && v[m].expert < e))
            a = m + 1;
        else
            b = m;
    }
    return a < n && v[a].layer == l && v[a].expert == e ? &v[a] : NULL;
}

void tr_print_live(const struct tr_stats *prev, const struct tr_stats *cur, double secs,
                   FILE *out, int top)
{
    struct tr_unit *p = NULL, *c = NULL;
    int np = tr_stats_units(prev, &p), nc = tr_stats_units(cur, &c);
    if (np < 0 || nc < 0) {
        free(p);
        free(c);
        return;
    }
    struct fl_tr_counts d = { 0 };
    for (int i = 0; i < nc; i++) {
        const struct tr_unit *o = unit_in(p, np, c[i].layer, c[i].expert);
        uint64_t *cv = (uint64_t *)&c[i].c;
        const uint64_t *ov = o ? (const uint64_t *)&o->c : NULL;
        for (size_t k = 0; k < sizeof(c[i].c) / sizeof(uint64_t); k++)
            cv[k] -= ov ? ov[k] : 0;      /* c now holds the interval's delta */
        tr_counts_add(&d, &c[i].c);
    }
    /* The interval's acquires: the pager's count as of its latest probe
     * (per-expert hits arrive later, with each expert's next probe). n/a
     * when nothing acquired, or a new pager restarted the count. */
    char hit[16] = "n/a";
    uint64_t a0 = tr_stats_globals((struct tr_stats *)prev)[FL_TG_ACQUIRES];
    uint64_t a1 = tr_stats_globals((struct tr_stats *)cur)[FL_TG_ACQUIRES];
    if (a1 > a0 && a1 - a0 >= d.misses)
        snprintf(hit, sizeof(hit), "%.1f%%", 100.0 * (double)(a1 - a0 - d.misses) /
                 (double)(a1 - a0));
    fprintf(out, "[%7.1fs] faults/s %7.0f  MB/s read %8.1f  stall %8.2f ms  hit %6s"
            "  prefetch/s %6.0f  evict/s %6.0f\n",
            (double)tr_stats_meta((struct tr_stats *)cur)->duration_ns / 1e9,
            (double)d.faults / secs, (double)d.read_bytes / 1e6 / secs,
            (double)tr_wait_ns(&d) / 1e6,
            hit, (double)d.prefetches / secs, (double)d.evictions / secs);
    qsort(c, (size_t)nc, sizeof(*c), by_stall_desc);
    for (int i = 0; i < nc && i < top && tr_wait_ns(&c[i].c); i++)
        fprintf(out, "    L%-3d E%-4d stall %8.2f ms (acquire %8.2f)  waits %4" PRIu64
                "  faults %5" PRIu64 "  read %7.2f MiB\n", c[i].layer, c[i].expert,
                (double)tr_wait_ns(&c[i].c) / 1e6, (double)c[i].c.acq_stall_ns / 1e6,
                c[i].c.acq_stalls, c[i].c.faults, (double)c[i].c.read_bytes / MIB);
    free(p);
    free(c);
}
