/* test-trace-stats.c: the trace aggregate without BPF: log2 quantiles, the
 * top-stalls list, per-unit sums over kinds, the JSON write/read round trip
 * (every counter and bucket back exactly; plain and gzip, the compact event
 * layout), bad files, the HTML heatmap (its first view the one with data,
 * the line saying why there are no faults) and the one label format of
 * every histogram.
 * With --make-report IN.json OUT.html it runs `faultline trace report` (for
 * tests/test-trace-html.sh). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ebpf/trace-file.h"
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

/* The same 200 events and s's aggregate to path (gzip when it ends in .gz);
 * add: also count the events into s. */
static void write_trace(const char *path, struct tr_stats *s, bool add)
{
    int rc;
    FILE *f = tr_file_create(path, tr_file_is_gz_name(path), &rc);
    CHECK(f, "%s: %d", path, rc);
    if (!f)
        return;
    struct tr_json *w = tr_json_begin(f, 1234, 0);
    for (int i = 0; i < 200; i++) {
        struct fl_tr_event ev = { .ts_ns = 1000000 + (uint64_t)i * 1000, .bytes = 4096,
                                  .offset = (uint64_t)i << 12, .dur_ns = 500, .pid = 1234,
                                  .tid = 1235 + (uint32_t)(i % 3), .layer = i % 5 - 1,
                                  .expert = i % 16, .type = (uint8_t)(i % FL_TR_N_TYPES),
                                  .kind = 1 };
        tr_json_event(w, &ev, i % 2 ? 999 : 0, 0);
        if (add)
            tr_stats_event(s, &ev, 0);
    }
    CHECK(tr_json_end(w, s) == 0, "json end");
    CHECK(fclose(f) == 0, "%s: close", path);
}

/* The compact layout: one event a line, no blanks between tokens, no
 * instant scope (the thread's is the default), and layer/expert/kind only
 * in the name, not repeated in args. */
static void check_compact(const char *path)
{
    size_t len;
    char *txt = check_read_file(path, &len);
    CHECK(txt, "%s: read", path);
    if (!txt)
        return;
    char *agg = strstr(txt, "\n],\n" TR_JSON_AGGREGATE_MARKER);
    CHECK(agg, "%s: the aggregate after the events", path);
    if (agg)
        *agg = 0;
    int lines = 0, events = 0;
    for (char *p = strchr(txt, '\n'); p; p = strchr(p + 1, '\n'))
        lines++;
    for (char *p = strstr(txt, "\n{\"ph\":"); p; p = strstr(p + 1, "\n{\"ph\":"))
        events++;
    CHECK(lines == events && events > 150, "one event a line: %d lines, %d events", lines, events);
    CHECK(!strstr(txt, "\": ") && !strstr(txt, ", \"") && !strstr(txt, "\"s\":") &&
          !strstr(txt, "\"layer\"") && !strstr(txt, "\"kind\""), "%s: not compact", path);
    CHECK(strstr(txt, "\"offset\"") && strstr(txt, "\"bytes\""), "offsets and bytes kept");
    free(txt);
}

/* --out FILE.gz: a valid gzip file (gunzip -t) holding the very bytes the
 * plain file has, which the reader loads back; cut short, it is refused. */
static void test_gzip(const char *dir, const char *plain, struct tr_stats *s)
{
    char gz[512], cmd[1800];
    snprintf(gz, sizeof(gz), "%s/rt.json.gz", dir);
    write_trace(gz, s, false);
    snprintf(cmd, sizeof(cmd), "gunzip -t '%s' && gunzip -c '%s' | cmp -s - '%s'", gz, gz, plain);
    CHECK(system(cmd) == 0, "%s: not gzip of the plain trace", gz);
    struct tr_stats *back = tr_stats_new();
    struct fl_err err = { { 0 } };
    CHECK(tr_json_load(gz, back, &err) == 0 && same(s, back), "gzip load: %s", err.msg);
    tr_stats_free(back);
    size_t len, zlen;
    char *z = check_read_file(gz, &zlen);
    free(check_read_file(plain, &len));
    CHECK(z && zlen * 3 < len, "gzip %zu bytes of %zu", zlen, len);
    char cut[512];
    snprintf(cut, sizeof(cut), "%s/cut.json.gz", dir);
    FILE *f = fopen(cut, "w");
    fwrite(z, 1, zlen * 2 / 3, f);
    fclose(f);
    back = tr_stats_new();
    CHECK(tr_json_load(cut, back, &err) < 0 && strstr(err.msg, "gzip"), "cut gzip: %s", err.msg);
    printf("gzip: %zu bytes for %zu, gunzip -t ok, loads back; cut short: %s\n", zlen, len,
           err.msg);
    tr_stats_free(back);
    free(z);
}

static void test_roundtrip(const char *dir)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/rt.json", dir);
    struct tr_stats *s = tr_stats_new(), *back = tr_stats_new();
    fill(s, 4, 16);
    write_trace(path, s, true);
    struct fl_err err = { { 0 } };
    CHECK(tr_json_load(path, back, &err) == 0, "load: %s", err.msg);
    CHECK(same(s, back), "every counter, bucket and global back exactly");
    check_compact(path);
    test_gzip(dir, path, s);
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
    FILE *in = fopen(path, "r"), *f;
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

/* The report of s as a string (NULL after a counted failure). */
static char *html_of(const struct tr_stats *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    CHECK(m && tr_html_write(m, s) == 0, "html");
    if (m)
        fclose(m);
    return buf;
}

/* One expert of layer 0 with the given faults, fault stall ns, acquire waits. */
static struct tr_stats *one_expert(uint64_t faults, uint64_t stall_ns, uint64_t waits)
{
    struct tr_stats *s = tr_stats_new();
    struct fl_tr_counts *c = tr_stats_counts(s, 0, 3, 1);
    c->faults = faults;
    c->stalls = stall_ns ? faults : 0;
    c->stall_ns = stall_ns;
    c->acq_stalls = c->misses = waits;
    c->acq_stall_ns = waits * 300000;
    c->reads = 1 + waits;
    struct fl_tr_key k = { 0, 3, 1, FL_TM_ACQUIRE, { 0 } };
    tr_stats_hist(s, &k)->slots[18] = waits;
    tr_stats_hist(s, &k)->count = waits;
    return s;
}

/* The heatmap first shows the view that has data: acquire waits, else stall
 * time, else faults (still a button); with no faults it says why. */
static void test_html_views(void)
{
    const struct { uint64_t faults, stall_ns, waits; const char *view; } cases[] = {
        { 0, 0, 12, "waits" },       /* a --disk-moe run: acquires only */
        { 5, 2000000, 0, "stall" },  /* faults that stalled, no acquire */
        { 5, 0, 0, "faults" },       /* faults, no stall time */
        { 5, 2000000, 12, "waits" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct tr_stats *s = one_expert(cases[i].faults, cases[i].stall_ns, cases[i].waits);
        char *h = html_of(s), want[96], on[96];
        snprintf(want, sizeof(want), "data-default=\"%s\"", cases[i].view);
        snprintf(on, sizeof(on), "<button data-m=\"%s\" class=\"on\">", cases[i].view);
        bool why = h && strstr(h, "id=\"no-faults\"") && strstr(h, TR_NO_FAULTS_WHY);
        CHECK(h && strstr(h, want) && strstr(h, on) && strstr(h, "<button data-m=\"faults\""),
              "case %zu: first view %s", i, cases[i].view);
        CHECK(why == !cases[i].faults, "case %zu: the no-faults line %s", i,
              why ? "shown with faults" : "missing");
        /* the one cell with data is drawn in the first view's darkest colour */
        CHECK(h && strstr(h, "fill=\"rgb(165,30,20)\" data-layer=\"0\" data-expert=\"3\""),
              "case %zu: the cell is not coloured by %s", i, cases[i].view);
        free(h);
        tr_stats_free(s);
    }
    printf("HTML first view: the one with data (acquire waits, stall time, faults); the "
           "no-faults line\n");
}

/* Whether t is one tr_fmt_ns label: 3 significant digits and a unit. */
static bool is_label(const char *t, size_t n)
{
    char buf[32], unit[8];
    double v;
    int used = 0;
    if (n >= sizeof(buf))
        return false;
    memcpy(buf, t, n);
    buf[n] = 0;
    if (sscanf(buf, "%lf %7s%n", &v, unit, &used) != 2 || used != (int)n)
        return false;
    int digits = 0;
    for (const char *p = buf; *p != ' '; p++)
        digits += *p >= '0' && *p <= '9';
    bool known = !strcmp(unit, "ns") || !strcmp(unit, "us") || !strcmp(unit, "ms") ||
                 !strcmp(unit, "s");
    return known && v < 1000 && (digits == 3 || (v < 100 && !strcmp(unit, "ns")));
}

/* The HTML histograms of h: each bar's label, its range and the summary
 * line's mean, p50 and p99. */
static void test_html_labels(const struct fl_tr_hist *h)
{
    struct tr_stats *s = tr_stats_new();
    struct fl_tr_key k = { 1, 2, 1, FL_TM_STALL, { 0 } };
    *tr_stats_hist(s, &k) = *h;
    tr_stats_counts(s, 1, 2, 1)->faults = 1;
    char *html = html_of(s);
    size_t labels = 0, bad = 0;
    for (char *p = html ? strstr(html, "<text class=\"edge\"") : NULL; p;
         p = strstr(p + 1, "<text class=\"edge\"")) {
        char *a = strchr(p, '>') + 1, *e = strchr(a, '<');
        labels++;
        bad += !is_label(a, (size_t)(e - a));
    }
    for (char *p = html ? strstr(html, "<title>[") : NULL; p; p = strstr(p + 1, "<title>[")) {
        char *a = p + 8, *c = strstr(a, ", "), *e = c ? strstr(c, "): ") : NULL;
        bad += !e || !is_label(a, (size_t)(c - a)) || !is_label(c + 2, (size_t)(e - c - 2));
    }
    const char *sum = html ? strstr(html, "samples, mean ") : NULL;
    char mean[16], p50[16], p99[16];
    CHECK(sum && sscanf(sum, "samples, mean %15[^,], p50 %15[^,], p99 %15[^<]", mean, p50,
                        p99) == 3 && is_label(mean, strlen(mean)) && is_label(p50, strlen(p50)) &&
          is_label(p99, strlen(p99)), "HTML summary line: %.60s", sum ? sum : "none");
    CHECK(labels == 34 && bad == 0, "HTML histogram: %zu labels, %zu bad", labels, bad);
    free(html);
    tr_stats_free(s);
}

/* tr_fmt_ns, and every label of every histogram, text and HTML, made by it. */
static void test_labels(void)
{
    const struct { double ns; const char *want; } f[] = {
        { 0, "0 ns" }, { 512, "512 ns" }, { 999.4, "999 ns" }, { 1024, "1.02 us" },
        { 16384, "16.4 us" }, { 131072, "131 us" }, { 999700, "1.00 ms" },
        { 16777216, "16.8 ms" }, { 1073741824, "1.07 s" },
    };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        char out[16];
        tr_fmt_ns(out, sizeof(out), f[i].ns);
        CHECK(!strcmp(out, f[i].want), "tr_fmt_ns(%.1f) = \"%s\", want \"%s\"", f[i].ns, out,
              f[i].want);
    }
    struct fl_tr_hist h = { 0 };
    for (int k = 0; k < 34; k++)
        h.slots[k] = 1 + (uint64_t)k;
    h.count = 34 * 35 / 2;
    h.sum_ns = h.count * 5000;
    char *txt = NULL;
    size_t len = 0, rows = 0, bad = 0;
    FILE *m = open_memstream(&txt, &len);
    tr_print_hist(&h, "t", m);
    fclose(m);
    for (char *l = strstr(txt, " -> "); l; l = strstr(l + 1, " -> ")) {
        char *a = l, *b = l + 4, *e = strstr(b, " : ");
        while (a > txt + 1 && a[-1] != '\n' && !(a[-1] == ' ' && a[-2] == ' '))
            a--;
        rows++;
        bad += !e || !is_label(a, (size_t)(l - a)) || !is_label(b, (size_t)(e - b));
    }
    CHECK(rows == 34 && bad == 0, "text histogram: %zu rows, %zu bad labels:\n%s", rows, bad, txt);
    CHECK(strstr(txt, "mean 5.00 us, p50 ") != NULL, "text summary: %.80s", txt);
    free(txt);
    test_html_labels(&h);
    printf("histogram labels: one format (tr_fmt_ns) in text and HTML\n");
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
    test_html_views();
    test_labels();
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_summary("test-trace-stats");
}
