/* test-trace-live.c: `faultline trace -- trace-driver ...` on real paged
 * runs: the per-expert fault and byte counts in the trace equal the pager's
 * own stats JSON for the same run, the region's page faults are seen, and
 * the saved trace reads back into the same tables. Needs root (or
 * CAP_BPF+CAP_PERFMON) and BTF: exit 77 otherwise.
 *
 * usage: test-trace-live TRACE-DRIVER [MODEL...]
 * FL_TRACE_KEEP=DIR keeps the JSON/HTML files there (test-trace-html.sh). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebpf/json.h"
#include "ebpf/trace-bpf.h"
#include "ebpf/trace-json.h"
#include "ebpf/trace-stats.h"
#include "engine/cli/commands.h"

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); \
    fputc('\n', stderr); } } while (0)

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

static void compare(const char *model, const struct tr_stats *s, const struct jv *ps)
{
    const struct jv *units = jv_get(ps, "units"), *tot = jv_get(ps, "totals");
    CHECK(units && units->t == J_ARR && tot, "%s: pager stats have no units", model);
    if (!units || !tot)
        return;
    uint64_t pf = 0, pb = 0, tf = 0, tb = 0, mism = 0, experts = 0;
    for (int i = 0; i < units->n; i++) {
        const struct jv *u = &units->items[i];
        int l = jv_i32(u, "layer"), e = jv_i32(u, "expert");
        if (l < 0)
            continue; /* 2 MiB chunks of non-expert tensors: not paged in this run */
        uint64_t f, b;
        trace_unit(s, l, e, &f, &b);
        experts++;
        if (f != jv_u64(u, "faults") || b != jv_u64(u, "bytes_read")) {
            if (mism++ < 5)
                fprintf(stderr, "  L%d E%d: trace %llu faults %llu bytes, pager %llu / %llu\n",
                        l, e, (unsigned long long)f, (unsigned long long)b,
                        (unsigned long long)jv_u64(u, "faults"),
                        (unsigned long long)jv_u64(u, "bytes_read"));
        }
        pf += jv_u64(u, "faults");
        pb += jv_u64(u, "bytes_read");
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
    CHECK(pf > 0 && jv_u64(tot, "evictions") > 0, "%s: the run must fault and evict", model);
    CHECK(tr_stats_globals((struct tr_stats *)s)[FL_TG_PAGE_FAULTS] >= pf,
          "%s: region page faults %llu < pager faults %llu", model,
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
    char *av[] = { "trace", "--quiet", "--out", json, "--report", html, "--",
                   (char *)driver, (char *)model, stats, "40", NULL };
    int rc = cli_trace(11, av);
    CHECK(rc == 0, "%s: faultline trace exited %d", model, rc);
    struct tr_stats *s = tr_stats_new();
    struct fl_err err = { { 0 } };
    struct jv ps;
    CHECK(tr_json_load(json, s, &err) == 0, "%s", err.msg);
    CHECK(jv_parse_file(stats, NULL, &ps, &err) == 0, "%s", err.msg);
    compare(model, s, &ps);
    const struct tr_thread *t;
    int nt = tr_stats_n_threads(s, &t), named = 0;
    for (int i = 0; i < nt; i++)
        named += t[i].name[0] != 0 && strcmp(t[i].name, "?") != 0;
    CHECK(nt >= 2 && named >= 2, "%s: threads %d named %d", model, nt, named);
    jv_free(&ps);
    tr_stats_free(s);
}

/* -p: attach to a driver that is already running; it learns the region
 * from /proc and stops when the process ends. */
static void attached(const char *driver, const char *dir)
{
    char json[512], stats[512];
    snprintf(json, sizeof(json), "%s/attached.trace.json", dir);
    snprintf(stats, sizeof(stats), "%s/attached.stats.json", dir);
    pid_t pid = fork();
    if (pid == 0) {
        execl(driver, driver, "tests/data/qwen3moe-tiny-F16.gguf", stats, "400", (char *)NULL);
        _exit(127);
    }
    usleep(300 * 1000);
    char pids[16];
    snprintf(pids, sizeof(pids), "%d", (int)pid);
    char *av[] = { "trace", "--quiet", "--out", json, "-p", pids, NULL };
    int rc = cli_trace(6, av), status = 0;
    waitpid(pid, &status, 0);
    CHECK(rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "-p: trace %d, driver %d",
          rc, status);
    struct tr_stats *s = tr_stats_new();
    struct fl_err err = { { 0 } };
    CHECK(tr_json_load(json, s, &err) == 0, "%s", err.msg);
    uint64_t faults = 0, pf = tr_stats_globals(s)[FL_TG_PAGE_FAULTS];
    size_t it = 0;
    struct fl_tr_key k;
    const struct fl_tr_counts *c;
    while (tr_stats_next_counts(s, &it, &k, &c))
        faults += c->faults;
    CHECK(faults > 0 && pf > 0, "-p: %llu faults, %llu region page faults",
          (unsigned long long)faults, (unsigned long long)pf);
    printf("-p %d: %llu faults, %llu region page faults after attaching late\n", (int)pid,
           (unsigned long long)faults, (unsigned long long)pf);
    tr_stats_free(s);
}

/* The probes no code fires yet (trace-probes): 40 copies of 8192 bytes,
 * each at least 200 us; 30 hits and 10 misses; 64 faults in the region. */
static void other_probes(const char *prog, const char *dir)
{
    char json[512];
    snprintf(json, sizeof(json), "%s/probes.trace.json", dir);
    char *av[] = { "trace", "--quiet", "--out", json, "--", (char *)prog, "40", NULL };
    CHECK(cli_trace(7, av) == 0, "trace of %s", prog);
    struct tr_stats *s = tr_stats_new();
    struct fl_err err = { { 0 } };
    CHECK(tr_json_load(json, s, &err) == 0, "%s", err.msg);
    struct fl_tr_counts sum = { 0 };
    size_t it = 0;
    struct fl_tr_key k;
    const struct fl_tr_counts *c;
    while (tr_stats_next_counts(s, &it, &k, &c))
        tr_counts_add(&sum, c);
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
    uint64_t pf = tr_stats_globals(s)[FL_TG_PAGE_FAULTS];
    CHECK(pf >= 64 && pf < 80, "region page faults %llu", (unsigned long long)pf);
    printf("copy/hit/miss/region probes: %llu copies (p50 %.0f us), %llu hits, %llu misses, "
           "%llu region faults\n", (unsigned long long)sum.copies,
           (double)tr_hist_quantile(&h, 0.5) / 1e3, (unsigned long long)sum.hits,
           (unsigned long long)sum.misses, (unsigned long long)pf);
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
    const char *probes = getenv("FL_TRACE_PROBES");
    if (probes)
        other_probes(probes, keep ? keep : dir);
    if (!keep) {
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    printf("%s\n", failures ? "FAILED" : "all ok");
    return failures ? 1 : 0;
}
