/* test-trace-live.c: `faultline trace -- trace-driver ...` on real paged
 * runs: the per-expert fault and byte counts in the trace equal the pager's
 * own stats JSON for the same run, the region's page faults are seen, and
 * the saved trace reads back into the same tables; then the same for real
 * paged `faultline run`s ($FL_CLI; see run_case for which counters
 * correspond). Needs root (or CAP_BPF+CAP_PERFMON) and BTF: exit 77 otherwise.
 *
 * usage: test-trace-live TRACE-DRIVER [MODEL...]
 * FL_TRACE_KEEP=DIR keeps the JSON/HTML files there (test-trace-html.sh). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/json.h"
#include "ebpf/trace-bpf.h"
#include "ebpf/trace-json.h"
#include "ebpf/trace-stats.h"
#include "app/cli/commands.h"
#define CHECK_OUT stderr
#include "tests/check.h"

/* Every (layer, expert, kind)'s counters of a trace, added up. */
static struct fl_tr_counts sum_counts(const struct tr_stats *s)
{
    struct fl_tr_counts sum = { 0 };
    size_t it = 0;
    struct fl_tr_key k;
    const struct fl_tr_counts *c;
    while (tr_stats_next_counts(s, &it, &k, &c))
        tr_counts_add(&sum, c);
    return sum;
}

/* A saved trace, loaded (an empty one, after a counted failure, when it does not load). */
static struct tr_stats *load_trace(const char *json)
{
    struct tr_stats *s = tr_stats_new();
    struct fl_err err = { { 0 } };
    CHECK(tr_json_load(json, s, &err) == 0, "%s", err.msg);
    return s;
}

/* The trace's counters of (layer, expert), summed over kinds. */
static void trace_unit(const struct tr_stats *s, int layer, int expert, uint64_t *faults,
                       uint64_t *bytes)
{
    size_t it = 0;
    struct fl_tr_key k;
    const struct fl_tr_counts *c;
    *faults = *bytes = 0;
    while (tr_stats_next_counts(s, &it, &k, &c))
        if (k.layer == layer && k.expert == expert) {
            *faults += c->faults;
            *bytes += c->read_bytes;
        }
}

static void compare(const char *model, const struct tr_stats *s, const json_t *ps)
{
    const json_t *units = json_object_get(ps, "units"), *tot = json_object_get(ps, "totals");
    CHECK(json_is_array(units) && tot, "%s: pager stats have no units", model);
    if (!units || !tot)
        return;
    uint64_t pf = 0, pb = 0, tf = 0, tb = 0, mism = 0, experts = 0;
    for (size_t i = 0; i < json_array_size(units); i++) {
        const json_t *u = json_array_get(units, i);
        int l = fl_json_i32(u, "layer"), e = fl_json_i32(u, "expert");
        if (l < 0)
            continue; /* 2 MiB chunks of non-expert tensors: not paged in this run */
        uint64_t f, b;
        trace_unit(s, l, e, &f, &b);
        experts++;
        if (f != fl_json_u64(u, "faults") || b != fl_json_u64(u, "bytes_read")) {
            if (mism++ < 5)
                fprintf(stderr, "  L%d E%d: trace %llu faults %llu bytes, pager %llu / %llu\n",
                        l, e, (unsigned long long)f, (unsigned long long)b,
                        (unsigned long long)fl_json_u64(u, "faults"),
                        (unsigned long long)fl_json_u64(u, "bytes_read"));
        }
        pf += fl_json_u64(u, "faults");
        pb += fl_json_u64(u, "bytes_read");
    }
    size_t it = 0;
    struct fl_tr_key k;
    const struct fl_tr_counts *c;
    while (tr_stats_next_counts(s, &it, &k, &c)) {
        tf += c->faults;
        tb += c->read_bytes;
    }
    CHECK(mism == 0, "%s: %llu of %llu experts differ", model, (unsigned long long)mism,
          (unsigned long long)experts);
    CHECK(tf == pf && tb == pb, "%s: totals trace %llu/%llu pager %llu/%llu", model,
          (unsigned long long)tf, (unsigned long long)tb, (unsigned long long)pf,
          (unsigned long long)pb);
    CHECK(pf > 0 && fl_json_u64(tot, "evictions") > 0, "%s: the run must fault and evict", model);
    /* Not >= pf: a thread woken while its page is still absent (an eviction
     * raced the install) retries inside the same hardware fault and sends
     * the pager a second message, so the pager may count more. */
    CHECK(tr_stats_globals((struct tr_stats *)s)[FL_TG_PAGE_FAULTS] > 0,
          "%s: region page faults %llu, pager faults %llu", model,
          (unsigned long long)tr_stats_globals((struct tr_stats *)s)[FL_TG_PAGE_FAULTS],
          (unsigned long long)pf);
    printf("%s: %llu experts, %llu faults, %llu bytes read: trace == pager stats%s\n", model,
           (unsigned long long)experts, (unsigned long long)pf, (unsigned long long)pb,
           mism ? " FAILED" : "");
}

static void one(const char *driver, const char *model, const char *dir)
{
    char json[512], html[512], stats[512];
    const char *base = strrchr(model, '/') ? strrchr(model, '/') + 1 : model;
    snprintf(json, sizeof(json), "%s/%s.trace.json", dir, base);
    snprintf(html, sizeof(html), "%s/%s.report.html", dir, base);
    snprintf(stats, sizeof(stats), "%s/%s.stats.json", dir, base);
    char *av[] = { "trace", "--quiet", "--detail", "--out", json, "--report", html, "--",
                   (char *)driver, (char *)model, stats, "40", NULL };
    int rc = cli_trace(12, av);
    CHECK(rc == 0, "%s: faultline trace exited %d", model, rc);
    struct tr_stats *s = load_trace(json);
    struct fl_err err = { { 0 } };
    json_t *ps = NULL;
    CHECK(fl_json_load_file(stats, (size_t)1 << 28, &ps, &err) == 0, "%s", err.msg);
    compare(model, s, ps);
    /* --detail: every slice's read is timed from its submission and installed,
     * and a load reads at least one slice */
    struct fl_tr_counts sum = sum_counts(s);
    struct fl_tr_hist rh;
    tr_stats_metric_hist(s, FL_TM_READ, &rh);
    CHECK(sum.reads > 0 && sum.installs >= sum.reads && rh.count == sum.installs,
          "%s --detail: %llu loads, %llu installs, %llu timed reads", model,
          (unsigned long long)sum.reads, (unsigned long long)sum.installs,
          (unsigned long long)rh.count);
    const struct tr_thread *t;
    int nt = tr_stats_n_threads(s, &t), named = 0;
    for (int i = 0; i < nt; i++)
        named += t[i].name[0] != 0 && strcmp(t[i].name, "?") != 0;
    CHECK(nt >= 2 && named >= 2, "%s: threads %d named %d", model, nt, named);
    json_decref(ps);
    tr_stats_free(s);
}

/* --- `faultline trace -- faultline run ...` ------------------------------------
 * What corresponds, per (layer, expert) of the pager's --stats-json units:
 *   faults      = the trace's fault_begin count (the pager counts the same fault)
 *   bytes_read  = the sum of loaded bytes (each read completes once, in full)
 *   loads       = the loaded count (one per unit load, under the key of its
 *                 first range's kind). A refill (a fault on a resident unit
 *                 whose page went missing) reads it again without being a
 *                 load, so only >= for a unit that faulted.
 *   evictions   = evict count
 *   cache_hits + prefetch_hits + misses (all acquires) = hits + misses: the
 *                 trace's misses are the waits (acquired probes), its hits the
 *                 rest; the pager also counts an acquire of a unit a prefetch
 *                 is still loading as a prefetch hit, so hits >= cache_hits
 *                 and misses >= misses.
 * Non-expert 2 MiB chunks (layer -1) are one key in the trace: compared summed.
 * Totals: faults, bytes_read, prefetches and evictions exactly. */
struct unit_sum { uint64_t faults, bytes, evictions, hits, misses, reads_min, reads_max; };

/* The trace's counters of (layer, expert) over its kinds; layer -1: all chunks. */
static void trace_sum(const struct tr_stats *s, int layer, int expert, struct unit_sum *u)
{
    size_t it = 0;
    struct fl_tr_key k;
    const struct fl_tr_counts *c;
    *u = (struct unit_sum){ .reads_min = UINT64_MAX };
    while (tr_stats_next_counts(s, &it, &k, &c)) {
        if (k.layer != layer || (layer >= 0 && k.expert != expert))
            continue;
        u->faults += c->faults;
        u->bytes += c->read_bytes;
        u->evictions += c->evictions;
        u->hits += c->hits;
        u->misses += c->misses;
        if (c->reads && c->reads < u->reads_min)
            u->reads_min = c->reads;
        if (c->reads > u->reads_max)
            u->reads_max = c->reads;
    }
    if (u->reads_min == UINT64_MAX)
        u->reads_min = 0;
}

/* One unit of the pager's stats JSON (or the chunks summed). */
struct pager_unit { int layer, expert; uint64_t loads, faults, bytes, evictions, cache_hits,
                    prefetch_hits, misses; };

static void pager_unit_add(struct pager_unit *d, const json_t *u)
{
    d->loads += fl_json_u64(u, "loads");
    d->faults += fl_json_u64(u, "faults");
    d->bytes += fl_json_u64(u, "bytes_read");
    d->evictions += fl_json_u64(u, "evictions");
    d->cache_hits += fl_json_u64(u, "cache_hits");
    d->prefetch_hits += fl_json_u64(u, "prefetch_hits");
    d->misses += fl_json_u64(u, "misses");
}

static bool unit_matches(const struct tr_stats *s, const struct pager_unit *p)
{
    struct unit_sum t;
    trace_sum(s, p->layer, p->expert, &t);
    uint64_t acq = p->cache_hits + p->prefetch_hits + p->misses;
    /* chunks: one key for many units, so reads per kind say nothing of loads */
    bool loads_ok = p->layer < 0 || (p->faults ? t.reads_min >= p->loads :
                                     t.reads_min == p->loads && t.reads_max == p->loads);
    bool ok = t.faults == p->faults && t.bytes == p->bytes && t.evictions == p->evictions &&
              loads_ok && t.hits + t.misses == acq && t.hits >= p->cache_hits &&
              t.misses >= p->misses;
    if (!ok)
        fprintf(stderr, "  L%d E%d: trace faults %llu bytes %llu reads/kind %llu..%llu evicts "
                "%llu hit %llu miss %llu; pager faults %llu bytes %llu loads %llu evicts %llu "
                "acquires %llu (cache hits %llu, misses %llu)\n", p->layer, p->expert,
                (unsigned long long)t.faults, (unsigned long long)t.bytes,
                (unsigned long long)t.reads_min, (unsigned long long)t.reads_max,
                (unsigned long long)t.evictions, (unsigned long long)t.hits,
                (unsigned long long)t.misses, (unsigned long long)p->faults,
                (unsigned long long)p->bytes, (unsigned long long)p->loads,
                (unsigned long long)p->evictions, (unsigned long long)acq,
                (unsigned long long)p->cache_hits, (unsigned long long)p->misses);
    return ok;
}

/* Every unit, the chunks summed, and the totals; returns the pager's faults. */
static uint64_t compare_run(const char *name, const struct tr_stats *s, const json_t *ps)
{
    const json_t *units = json_object_get(ps, "units"), *tot = json_object_get(ps, "totals");
    CHECK(json_is_array(units) && tot, "%s: pager stats have no units", name);
    if (!json_is_array(units) || !tot)
        return 0;
    struct pager_unit chunks = { .layer = -1, .expert = -1 };
    int bad = 0, experts = 0;
    for (size_t i = 0; i < json_array_size(units); i++) {
        const json_t *u = json_array_get(units, i);
        struct pager_unit p = { fl_json_i32(u, "layer"), fl_json_i32(u, "expert"), 0, 0, 0, 0, 0, 0, 0 };
        if (p.layer < 0) {
            pager_unit_add(&chunks, u);
            continue;
        }
        pager_unit_add(&p, u);
        experts++;
        bad += !unit_matches(s, &p);
    }
    bad += !unit_matches(s, &chunks);
    CHECK(bad == 0, "%s: %d of %d experts (+ chunks) differ from the pager's stats", name, bad,
          experts);
    struct fl_tr_counts sum = sum_counts(s);
    CHECK(sum.faults == fl_json_u64(tot, "faults") && sum.read_bytes == fl_json_u64(tot, "bytes_read") &&
          sum.prefetches == fl_json_u64(tot, "prefetches") &&
          sum.evictions == fl_json_u64(tot, "evictions"),
          "%s: totals: trace faults %llu bytes %llu prefetches %llu evictions %llu, pager "
          "%llu/%llu/%llu/%llu", name, (unsigned long long)sum.faults,
          (unsigned long long)sum.read_bytes, (unsigned long long)sum.prefetches,
          (unsigned long long)sum.evictions, (unsigned long long)fl_json_u64(tot, "faults"),
          (unsigned long long)fl_json_u64(tot, "bytes_read"),
          (unsigned long long)fl_json_u64(tot, "prefetches"),
          (unsigned long long)fl_json_u64(tot, "evictions"));
    uint64_t acq = fl_json_u64(tot, "cache_hits") + fl_json_u64(tot, "prefetch_hits") +
                   fl_json_u64(tot, "misses");
    CHECK(acq > 0 && fl_json_u64(tot, "loads") > 0 && fl_json_u64(tot, "evictions") > 0,
          "%s: the run must acquire, load and evict experts", name);
    printf("%s: %d experts + chunks: %llu loads, %llu faults, %llu bytes, %llu evictions, hit "
           "rate %.1f%% (%llu acquires): trace == pager stats%s\n", name, experts,
           (unsigned long long)fl_json_u64(tot, "loads"), (unsigned long long)sum.faults,
           (unsigned long long)sum.read_bytes, (unsigned long long)sum.evictions,
           sum.hits + sum.misses ? 100.0 * (double)sum.hits / (double)(sum.hits + sum.misses) :
           0.0, (unsigned long long)acq, bad ? " FAILED" : "");
    return fl_json_u64(tot, "faults");
}

/* Per (layer, expert): every acquire that waited ended resident (the run
 * does not fail) and fired acquired once: acquire stalls = misses = timed. */
static int acquire_units_bad(const struct tr_stats *s)
{
    struct tr_unit *u = NULL;
    int n = tr_stats_units(s, &u), bad = 0;
    for (int i = 0; i < n; i++) {
        const struct fl_tr_counts *c = &u[i].c;
        if (c->acq_stalls != c->misses || u[i].acquire.count != c->acq_stalls) {
            if (bad++ < 5)
                fprintf(stderr, "  L%d E%d: %llu acquire stalls (%llu ns, %llu timed), %llu "
                        "misses\n", u[i].layer, u[i].expert, (unsigned long long)c->acq_stalls,
                        (unsigned long long)c->acq_stall_ns, (unsigned long long)u[i].acquire.count,
                        (unsigned long long)c->misses);
        }
    }
    free(u);
    return n < 0 ? 1 : bad;
}

/* The pager's stall_count / stall_ns (pg_stall_record) count an acquire's
 * wait and a fault's, at the very points where acquired and fault_end fire
 * with the measured ns: the trace's counts and ns equal them exactly, and so
 * does the acquire histogram's sum. must_acquire: the run stalls in acquire
 * only. */
static void compare_stalls(const char *name, const struct tr_stats *s, const json_t *ps,
                           bool must_acquire)
{
    const json_t *tot = json_object_get(ps, "totals");
    struct fl_tr_counts sum = sum_counts(s);
    uint64_t pc = fl_json_u64(tot, "stall_count"), pns = fl_json_u64(tot, "stall_ns");
    CHECK(sum.acq_stalls + sum.stalls == pc && sum.acq_stall_ns + sum.stall_ns == pns,
          "%s: trace stalls acquire %llu + fault %llu (%llu + %llu ns), pager %llu (%llu ns)",
          name, (unsigned long long)sum.acq_stalls, (unsigned long long)sum.stalls,
          (unsigned long long)sum.acq_stall_ns, (unsigned long long)sum.stall_ns,
          (unsigned long long)pc, (unsigned long long)pns);
    CHECK(!must_acquire || (sum.acq_stalls > 0 && sum.stalls == 0),
          "%s: an acquire-driven run must stall in acquire only (%llu acquire, %llu fault)",
          name, (unsigned long long)sum.acq_stalls, (unsigned long long)sum.stalls);
    int bad = acquire_units_bad(s);
    CHECK(bad == 0, "%s: %d experts' acquire stalls differ from their misses", name, bad);
    struct fl_tr_hist h;
    tr_stats_metric_hist(s, FL_TM_ACQUIRE, &h);
    CHECK(h.count == sum.acq_stalls && h.sum_ns == sum.acq_stall_ns,
          "%s: acquire wait histogram %llu (%.3f ms), counters %llu (%.3f ms)", name,
          (unsigned long long)h.count, (double)h.sum_ns / 1e6,
          (unsigned long long)sum.acq_stalls, (double)sum.acq_stall_ns / 1e6);
    printf("%s: stalls %llu (acquire %llu, %.3f ms; fault %llu, %.3f ms) "
           "== pager stall_count %llu, %.3f ms\n", name,
           (unsigned long long)(sum.acq_stalls + sum.stalls), (unsigned long long)sum.acq_stalls,
           (double)sum.acq_stall_ns / 1e6,
           (unsigned long long)sum.stalls, (double)sum.stall_ns / 1e6, (unsigned long long)pc,
           (double)pns / 1e6);
}

/* faultline run in uffd mode under the tracer; must_fault: the placement
 * puts non-expert tensors on disk, which the engine touches without
 * acquiring, so they fault in. The runs that do not fault write their trace
 * gzip (--out X.gz: it loads back, test-trace-json checks it) and an HTML
 * report, whose first view test-trace-html checks is not the empty faults. */
static void run_case(const char *cli, const char *name, const char *model, const char *flags,
                     bool must_fault, const char *dir)
{
    char json[512], html[512], stats[512], fl[256];
    snprintf(json, sizeof(json), "%s/run-%s.trace.json%s", dir, name, must_fault ? "" : ".gz");
    snprintf(html, sizeof(html), "%s/run-%s.report.html", dir, name);
    snprintf(stats, sizeof(stats), "%s/run-%s.stats.json", dir, name);
    snprintf(fl, sizeof(fl), "%s", flags);
    char *av[40] = { "trace", "--quiet", "--out", json, "--report", html, "--", (char *)cli,
                     "run", "-m", (char *)model, "-p", "hello world", "-n", "16", "--temp", "0",
                     "--pager", "uffd", "--stats-json", stats };
    int ac = 21;
    for (char *t = strtok(fl, " "); t && ac < 38; t = strtok(NULL, " "))
        av[ac++] = t;
    av[ac] = NULL;
    fflush(stdout);
    int rc = cli_trace(ac, av);
    CHECK(rc == 0, "%s: faultline trace -- faultline run exited %d", name, rc);
    struct tr_stats *s = load_trace(json);
    struct fl_err err = { { 0 } };
    json_t *ps = NULL;
    if (fl_json_load_file(stats, (size_t)1 << 28, &ps, &err) == 0) {
        uint64_t faults = compare_run(name, s, ps);
        compare_stalls(name, s, ps, !must_fault);
        uint64_t pf = tr_stats_globals(s)[FL_TG_PAGE_FAULTS];
        CHECK(must_fault ? faults > 0 && pf > 0 : faults == 0, /* pf: see compare() */
              "%s: pager faults %llu, region page faults %llu", name,
              (unsigned long long)faults, (unsigned long long)pf);
        json_decref(ps);
    } else {
        CHECK(0, "%s", err.msg);
    }
    tr_stats_free(s);
}

/* Starts prog (argv, which must run for seconds: long enough to still be
 * running once the probes are attached on a loaded machine), attaches
 * `faultline trace -p` to it 300 ms later, writing json; the tracer stops
 * when the program exits. Checks that both succeeded; returns the pid. */
static pid_t trace_attached_late(char *const argv[], const char *json, const char *what)
{
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    usleep(300 * 1000);
    char pids[16];
    snprintf(pids, sizeof(pids), "%d", (int)pid);
    char *av[] = { "trace", "--quiet", "--out", (char *)json, "-p", pids, NULL };
    int rc = cli_trace(6, av), status = 0;
    waitpid(pid, &status, 0);
    CHECK(rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: trace %d, program %d",
          what, rc, status);
    return pid;
}

/* -p: attach to a driver that is already running; it learns the region
 * from /proc and stops when the process ends. */
static void attached(const char *driver, const char *dir)
{
    char json[512], stats[512];
    snprintf(json, sizeof(json), "%s/attached.trace.json", dir);
    snprintf(stats, sizeof(stats), "%s/attached.stats.json", dir);
    char *const argv[] = { (char *)driver, "tests/data/qwen3moe-tiny-F16.gguf", stats, "4000",
                           NULL };
    pid_t pid = trace_attached_late(argv, json, "-p");
    struct tr_stats *s = load_trace(json);
    uint64_t faults = sum_counts(s).faults, pf = tr_stats_globals(s)[FL_TG_PAGE_FAULTS];
    CHECK(faults > 0 && pf > 0, "-p: %llu faults, %llu region page faults",
          (unsigned long long)faults, (unsigned long long)pf);
    printf("-p %d: %llu faults, %llu region page faults after attaching late\n", (int)pid,
           (unsigned long long)faults, (unsigned long long)pf);
    tr_stats_free(s);
}

/* The probes no code fires yet (trace-probes): 40 copies of 8192 bytes,
 * each at least 200 us; 40 acquires, 10 of which wait (acquired, claiming
 * 100 us each), counted from the acquire counts; 64 faults in the region. */
static void other_probes(const char *prog, const char *dir)
{
    char json[512];
    snprintf(json, sizeof(json), "%s/probes.trace.json", dir);
    char *av[] = { "trace", "--quiet", "--out", json, "--", (char *)prog, "40", NULL };
    CHECK(cli_trace(7, av) == 0, "trace of %s", prog);
    struct tr_stats *s = load_trace(json);
    struct fl_tr_counts sum = sum_counts(s);
    struct fl_tr_hist h;
    tr_stats_metric_hist(s, FL_TM_COPY, &h);
    uint64_t fast = 0;
    for (int b = 0; b < 17; b++) /* bucket 17 starts at 131 us */
        fast += h.slots[b];
    CHECK(sum.copies == 40 && sum.copy_bytes == 40 * 8192, "copies %llu bytes %llu",
          (unsigned long long)sum.copies, (unsigned long long)sum.copy_bytes);
    CHECK(h.count == 40 && fast == 0, "copy histogram: %llu samples, %llu under 131 us",
          (unsigned long long)h.count, (unsigned long long)fast);
    CHECK(sum.hits == 30 && sum.misses == 10, "hits %llu misses %llu",
          (unsigned long long)sum.hits, (unsigned long long)sum.misses);
    struct fl_tr_hist ah;
    tr_stats_metric_hist(s, FL_TM_ACQUIRE, &ah);
    CHECK(sum.acq_stalls == 10 && sum.acq_stall_ns == 10 * 100000 && ah.count == 10 &&
          ah.sum_ns == 10 * 100000, "acquired: %llu stalls, %llu ns claimed, %llu in the "
          "histogram (%llu ns)", (unsigned long long)sum.acq_stalls, (unsigned long long)sum.acq_stall_ns,
          (unsigned long long)ah.count, (unsigned long long)ah.sum_ns);
    uint64_t pf = tr_stats_globals(s)[FL_TG_PAGE_FAULTS];
    CHECK(pf >= 64 && pf < 80, "region page faults %llu", (unsigned long long)pf);
    printf("copy/hit/miss/region probes: %llu copies (p50 %.0f us), %llu hits, %llu misses, "
           "%llu region faults\n", (unsigned long long)sum.copies,
           (double)tr_hist_quantile(&h, 0.5) / 1e3, (unsigned long long)sum.hits,
           (unsigned long long)sum.misses, (unsigned long long)pf);
    tr_stats_free(s);
}

/* -p on trace-probes: attached late, the acquire counts would include the
 * acquires before the attach, so hits come from the hit probe instead: of
 * every 4 acquires 3 hit and 1 waits, wherever the attach fell. */
static void attached_hits(const char *prog, const char *dir)
{
    char json[512];
    snprintf(json, sizeof(json), "%s/attached-probes.trace.json", dir);
    char *const argv[] = { (char *)prog, "2500", "1500", NULL }; /* ~4 s */
    pid_t pid = trace_attached_late(argv, json, "-p probes");
    struct tr_stats *s = load_trace(json);
    struct fl_tr_counts sum = sum_counts(s);
    CHECK(sum.misses > 10 && sum.hits + 3 >= 3 * sum.misses && sum.hits <= 3 * sum.misses + 3,
          "-p probes: %llu hits, %llu misses (want 3 hits a miss)",
          (unsigned long long)sum.hits, (unsigned long long)sum.misses);
    printf("-p %d: %llu hits, %llu misses from the hit probe after attaching late\n", (int)pid,
           (unsigned long long)sum.hits, (unsigned long long)sum.misses);
    tr_stats_free(s);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test-trace-live TRACE-DRIVER [MODEL...]\n");
        return 2;
    }
    const char *src = getenv("FL_SOURCE_DIR");
    if (src && chdir(src) != 0)
        perror(src);
    struct fl_err err = { { 0 } };
    if (tr_session_check(&err) < 0) {
        printf("skipped: %s\n", err.msg);
        return 77;
    }
    const char *keep = getenv("FL_TRACE_KEEP");
    char dir[] = "/tmp/test-trace-live.XXXXXX";
    if (!keep && !mkdtemp(dir))
        return 1;
    const char *models[] = { "tests/data/qwen3moe-tiny-F16.gguf",
                             "tests/data/mixtral-tiny-Q4_K_M.gguf" };
    if (argc > 2)
        for (int i = 2; i < argc; i++)
            one(argv[1], argv[i], keep ? keep : dir);
    else
        for (int i = 0; i < 2; i++)
            one(argv[1], models[i], keep ? keep : dir);
    attached(argv[1], keep ? keep : dir);
    const char *cli = getenv("FL_CLI");
    if (cli && argc <= 2) {
        const char *d = keep ? keep : dir;
        run_case(cli, "qwen3moe-disk-moe", models[0], "--disk-moe --ram-budget 600K", false, d);
        run_case(cli, "mixtral-disk-moe", models[1], "--disk-moe --ram-budget 1M", false, d);
        run_case(cli, "qwen3moe-attn-faults", models[0],
                 "-ot attn_output=disk,exps=disk --ram-budget 1M", true, d);
    }
    const char *probes = getenv("FL_TRACE_PROBES");
    if (probes) {
        other_probes(probes, keep ? keep : dir);
        attached_hits(probes, keep ? keep : dir);
    }
    if (!keep) {
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    return check_summary("test-trace-live");
}
