/* test-trace-stats.c: the trace aggregate without BPF: log2 quantiles, the
 * top-stalls list, per-unit sums over kinds, the JSON write/read round trip
 * (every counter and bucket back exactly), bad files, and the HTML heatmap.
 * With --make-report IN.json OUT.html it runs `faultline trace report` (for
 * tests/test-trace-html.sh). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ebpf/trace-html.h"
#include "ebpf/trace-json.h"
#include "ebpf/trace-stats.h"
#include "app/cli/commands.h"
#define CHECK_OUT stderr
#include "tests/check.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    return check_xorshift64(&rng);
}

static void test_quantile(void)
{
    struct fl_tr_hist h = { 0 };
    /* 90 samples in [2^10, 2^11) ns, 10 in [2^20, 2^21) */
    h.slots[10] = 90;
    h.slots[20] = 10;
    h.count = 100;
    CHECK(tr_hist_quantile(&h, 0.5) == 2048, "p50 %llu", (unsigned long long)tr_hist_quantile(&h, 0.5));
    CHECK(tr_hist_quantile(&h, 0.90) == 2048, "p90");
    CHECK(tr_hist_quantile(&h, 0.91) == 2u << 20, "p91");
    CHECK(tr_hist_quantile(&h, 0.99) == 2u << 20, "p99");
    struct fl_tr_hist e = { 0 };
    CHECK(tr_hist_quantile(&e, 0.99) == 0, "empty");
    printf("quantiles of log2 histograms: ok\n");
}

static void test_stalls(void)
{
    struct tr_stats *s = tr_stats_new();
    uint64_t max = 0;
    for (int i = 0; i < 500; i++) {
        struct tr_stall st = { .ts_ns = (uint64_t)i, .dur_ns = rnd() % 1000000, .tid = 7 };
        max = st.dur_ns > max ? st.dur_ns : max;
        tr_stats_add_stall(s, &st);
    }
    const struct tr_stall *v;
    int n = tr_stats_n_stalls(s, &v);
    CHECK(n == TR_TOP_STALLS, "kept %d", n);
    CHECK(v[0].dur_ns == max, "longest first");
    for (int i = 1; i < n; i++)
        CHECK(v[i - 1].dur_ns >= v[i].dur_ns, "order at %d", i);
    tr_stats_free(s);
    printf("top stalls: longest %d kept in order\n", n);
}

/* Random counters and histograms over layers x experts x kinds. */
static void fill(struct tr_stats *s, int layers, int experts)
{
    for (int l = 0; l < layers; l++)
        for (int e = 0; e < experts; e++)
            for (uint8_t k = 1; k <= 3; k++) {
                if (rnd() % 3 == 0)
                    continue;
                struct fl_tr_counts *c = tr_stats_counts(s, l, e, k);
                uint64_t *v = (uint64_t *)c;
                for (size_t i = 0; i < sizeof(*c) / 8; i++)
                    v[i] = rnd() % 100000 + (i == 0); /* faults >= 1 */
                for (uint8_t m = 0; m < 2; m++) {
                    struct fl_tr_key key = { l, e, k, m, { 0 } };
                    struct fl_tr_hist *h = tr_stats_hist(s, &key);
                    for (int b = 0; b < FL_TR_SLOTS; b++)
                        h->slots[b] = rnd() % 5 == 0 ? rnd() % 1000 : 0;
                    h->count = rnd() % 5000;
                    h->sum_ns = rnd() >> 12;
                }
            }
    for (int i = 0; i < FL_TG_N; i++)
        tr_stats_globals(s)[i] = rnd() >> 20;
    struct tr_meta *m = tr_stats_meta(s);
    m->pid = 1234;
    m->duration_ns = 987654321;
    snprintf(m->command, sizeof(m->command), "faultline run -m \"x<y>.gguf\"");
}

static void test_units(void)
{
    struct tr_stats *s = tr_stats_new();
    fill(s, 3, 9);
    struct tr_unit *u;
    int n = tr_stats_units(s, &u);
    CHECK(n > 0, "units %d", n);
    for (int i = 0; i < n; i++) {
        uint64_t faults = 0;
        for (uint8_t k = 1; k <= 3; k++) {
            size_t it = 0;
            struct fl_tr_key key;
            const struct fl_tr_counts *c;
            while (tr_stats_next_counts(s, &it, &key, &c))
                if (key.layer == u[i].layer && key.expert == u[i].expert && key.kind == k)
                    faults += c->faults;
        }
        CHECK(faults == u[i].c.faults, "unit %d/%d sums kinds", u[i].layer, u[i].expert);
        if (i)
            CHECK(u[i - 1].layer < u[i].layer ||
                  (u[i - 1].layer == u[i].layer && u[i - 1].expert < u[i].expert), "sorted");
    }
    free(u);
    tr_stats_free(s);
    printf("per-unit sums over kinds: %d units ok\n", n);
}

static bool same(const struct tr_stats *a, const struct tr_stats *b)
{
    size_t it = 0, na = 0, nb = 0;
    struct fl_tr_key k;
    const struct fl_tr_counts *c;
    const struct fl_tr_hist *h;
    bool ok = true;
    while (tr_stats_next_counts(a, &it, &k, &c)) {
        na++;
        struct fl_tr_counts *d = tr_stats_counts((struct tr_stats *)b, k.layer, k.expert, k.kind);
        ok &= memcmp(c, d, sizeof(*c)) == 0;
    }
    it = 0;
    while (tr_stats_next_counts(b, &it, &k, &c))
        nb++;
    ok &= na == nb;
    it = 0;
    while (tr_stats_next_hist(a, &it, &k, &h)) {
        struct fl_tr_hist *d = tr_stats_hist((struct tr_stats *)b, &k);
        ok &= memcmp(h, d, sizeof(*h)) == 0;
    }
    ok &= memcmp(tr_stats_globals((struct tr_stats *)a), tr_stats_globals((struct tr_stats *)b),
                 sizeof(uint64_t) * FL_TG_N) == 0;
    ok &= !strcmp(tr_stats_meta((struct tr_stats *)a)->command,
                  tr_stats_meta((struct tr_stats *)b)->command);
    return ok;
}

static void test_roundtrip(const char *dir)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/rt.json", dir);
    struct tr_stats *s = tr_stats_new(), *back = tr_stats_new();
    fill(s, 4, 16);
    FILE *f = fopen(path, "w");
    struct tr_json *w = tr_json_begin(f, 1234, 0);
    for (int i = 0; i < 200; i++) {
        struct fl_tr_event ev = { .ts_ns = 1000000 + (uint64_t)i * 1000, .bytes = 4096,
                                  .offset = (uint64_t)i << 12, .dur_ns = 500, .pid = 1234,
                                  .tid = 1235 + (uint32_t)(i % 3), .layer = i % 4,
                                  .expert = i % 16, .type = (uint8_t)(i % FL_TR_N_TYPES),
                                  .kind = 1 };
        tr_json_event(w, &ev, i % 2 ? 999 : 0, 0);
        tr_stats_event(s, &ev, 0);
    }
    CHECK(tr_json_end(w, s) == 0, "json end");
    fclose(f);
    struct fl_err err = { { 0 } };
    CHECK(tr_json_load(path, back, &err) == 0, "load: %s", err.msg);
    CHECK(same(s, back), "every counter, bucket and global back exactly");
    const struct tr_stall *v1, *v2;
    int n1 = tr_stats_n_stalls(s, &v1), n2 = tr_stats_n_stalls(back, &v2);
    CHECK(n1 == n2 && n1 > 0, "stalls back: %d of %d", n2, n1);
    for (int i = 0; i < n1 && i < n2; i++)   /* field by field: the struct has padding */
        CHECK(v1[i].ts_ns == v2[i].ts_ns && v1[i].dur_ns == v2[i].dur_ns &&
              v1[i].offset == v2[i].offset && v1[i].tid == v2[i].tid &&
              v1[i].layer == v2[i].layer && v1[i].expert == v2[i].expert &&
              v1[i].kind == v2[i].kind && v1[i].src == v2[i].src, "stall %d back", i);
    int acq = 0;   /* acquired events are stalls too, on the thread that fired them */
    for (int i = 0; i < n1; i++)
        acq += v1[i].src == TR_STALL_ACQUIRE &&
               v1[i].tid == 1235 + (uint32_t)(v1[i].offset >> 12) % 3;
    CHECK(acq > 0 && acq < n1, "fault and acquire stalls both kept (%d acquire of %d)", acq, n1);
    printf("JSON round trip: ok (%s)\n", path);

    /* truncated and foreign files: one clear error each */
    FILE *in = fopen(path, "r");
    fseek(in, 0, SEEK_END);
    long len = ftell(in);
    char *buf = malloc((size_t)len);
    fseek(in, 0, SEEK_SET);
    CHECK(fread(buf, 1, (size_t)len, in) == (size_t)len, "read back");
    fclose(in);
    for (long cut = 1; cut < len; cut += len / 37 + 1) {
        snprintf(path, sizeof(path), "%s/cut.json", dir);
        f = fopen(path, "w");
        fwrite(buf, 1, (size_t)cut, f);
        fclose(f);
        struct tr_stats *t = tr_stats_new();
        err.msg[0] = 0;
        CHECK(tr_json_load(path, t, &err) < 0 && err.msg[0], "truncated at %ld accepted", cut);
        tr_stats_free(t);
    }
    free(buf);
    f = fopen(path, "w");
    fputs("{\"traceEvents\":[]}", f);
    fclose(f);
    struct tr_stats *t = tr_stats_new();
    CHECK(tr_json_load(path, t, &err) == -EINVAL && strstr(err.msg, "not a faultline trace"),
          "foreign: %s", err.msg);
    printf("bad files: %s\n", err.msg);
    tr_stats_free(t);
    tr_stats_free(s);
    tr_stats_free(back);
}

static void test_html(const char *dir)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/r.html", dir);
    struct tr_stats *s = tr_stats_new();
    fill(s, 3, 10);
    FILE *f = fopen(path, "w");
    CHECK(tr_html_write(f, s) == 0, "html");
    fclose(f);
    f = fopen(path, "r");
    char line[1 << 16];
    int cells = 0, scripts = 0, remote = 0;
    while (fgets(line, sizeof(line), f)) {
        for (char *p = line; (p = strstr(p, "class=\"cell\"")); p++)
            cells++;
        scripts += strstr(line, "<script") != NULL;
        remote += strstr(line, "http://") || strstr(line, "https://") || strstr(line, "src=");
    }
    fclose(f);
    struct tr_unit *u;
    int n = tr_stats_units(s, &u), lmax = 0, emax = 0;
    for (int i = 0; i < n; i++) {
        lmax = u[i].layer > lmax ? u[i].layer : lmax;
        emax = u[i].expert > emax ? u[i].expert : emax;
    }
    free(u);
    CHECK(cells == (lmax + 1) * (emax + 1), "cells %d for %d x %d", cells, lmax + 1, emax + 1);
    CHECK(scripts >= 1 && remote == 0, "self-contained (%d scripts, %d remote refs)", scripts, remote);
    tr_stats_free(s);
    printf("HTML: %d heatmap cells, no remote references\n", cells);
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--make-report")) {
        char *av[] = { "trace", "report", argv[2], "--report", argv[3], NULL };
        return cli_trace(5, av);
    }
    char dir[] = "/tmp/test-trace-stats.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    test_quantile();
    test_stalls();
    test_units();
    test_roundtrip(dir);
    test_html(dir);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_summary("test-trace-stats");
}
