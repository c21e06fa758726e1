/* trace-html.c: the self-contained HTML report.
 *
 * The heatmap is drawn here as SVG (one <rect class="cell"> per layer x
 * expert, each carrying its three metrics as data attributes), so the page
 * shows without scripts; the inline script only recolours the cells when
 * the metric is switched. The view first shown is one that has data
 * (default_metric): in a normal run the engine acquires every expert before
 * touching it, so there are no faults to colour. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/trace-html.h"
#include "ebpf/trace-json.h"

#define CELL 14      /* px; 8 when there are many experts */
#define HEATMAP_MAX_CELLS (1 << 16)

static const char *css =
    "body{font:14px system-ui,sans-serif;margin:24px;color:#222;background:#fafafa}"
    "h1{font-size:20px}h2{font-size:16px;margin-top:28px}"
    "table{border-collapse:collapse}td,th{padding:2px 10px;text-align:right;border-bottom:1px solid #ddd}"
    "th{background:#eee}.muted{color:#777}button{margin-right:6px;padding:3px 10px}"
    "button.on{background:#333;color:#fff}.hist rect{fill:#4a7fb5}.hist text{font-size:11px}"
    ".cell{stroke:#fff;stroke-width:1}svg text{font-size:11px;fill:#444}";

/* Maps 0..1 to a white -> orange -> dark red ramp; the inline script's
 * ramp() is the same function (lround = Math.round for these values), so a
 * cell recoloured by the script gets the colour written here. */
static void color(double x, char *out, size_t n)
{
    if (x <= 0) {
        snprintf(out, n, "#f0f0f0");
        return;
    }
    x = x > 1 ? 1 : x;
    snprintf(out, n, "rgb(%ld,%ld,%ld)", lround(255 - 90 * x), lround(230 - 200 * x),
             lround(180 - 160 * x));
}

/* The heatmap's views: a data-<key> attribute per cell, a button each. */
enum { M_WAITS, M_STALL, M_P99, M_FAULTS, M_N };
static const struct {
    const char *key, *button, *legend, *fmt;
} metrics[M_N] = {
    { "waits", "acquire waits", " acquire waits", "%.0f" },
    { "stall", "stall time (ms)", " ms stalled", "%.3f" },
    { "p99", "p99 stall (&micro;s)", " us p99", "%.1f" },
    { "faults", "faults", " faults", "%.0f" },
};

/* A cell's values as its attributes print them (and the script reads them
 * back): the colour is computed from those, as the script does. */
static void cell_values(const struct tr_unit *p, char attr[M_N][32], double v[M_N])
{
    struct fl_tr_hist h = p->stall; /* fault and acquire stalls */
    tr_hist_merge(&h, &p->acquire);
    const double raw[M_N] = { (double)p->c.acq_stalls, (double)tr_wait_ns(&p->c) / 1e6,
                              (double)tr_hist_quantile(&h, 0.99) / 1e3, (double)p->c.faults };
    for (int m = 0; m < M_N; m++) {
        snprintf(attr[m], sizeof(attr[m]), metrics[m].fmt, raw[m]);
        v[m] = strtod(attr[m], NULL);
    }
}

/* The view shown first: the first of acquire waits, stall time, faults
 * that has data. An acquire-driven run has no faults, so a faults view
 * would be blank. */
static int default_metric(const double max[M_N])
{
    return max[M_WAITS] > 0 ? M_WAITS : max[M_STALL] > 0 ? M_STALL : M_FAULTS;
}

static void heatmap_head(FILE *f, const double max[M_N], int def, uint64_t faults, bool any)
{
    fprintf(f, "<h2>Layer &times; expert</h2><p><span id=\"metric-buttons\" data-default=\"%s\">",
            metrics[def].key);
    for (int m = 0; m < M_N; m++)
        fprintf(f, "<button data-m=\"%s\"%s>%s</button>", metrics[m].key,
                m == def ? " class=\"on\"" : "", metrics[m].button);
    char mx[32];
    snprintf(mx, sizeof(mx), metrics[def].fmt, max[def]);
    /* %.15g: the shortest form of a value of 3 decimals, as the script prints it */
    fprintf(f, "</span> <span class=\"muted\" id=\"legend\">max %.15g%s</span></p>\n",
            strtod(mx, NULL), metrics[def].legend);
    if (any && !faults)
        fprintf(f, "<p class=\"muted\" id=\"no-faults\">No faults in this trace: %s.</p>\n",
                TR_NO_FAULTS_WHY);
}

static void heatmap_cell(FILE *f, const struct tr_unit *p, int l, int e, int x, int y, int w,
                         int h, const double max[M_N], int def)
{
    static const struct tr_unit none;
    char attr[M_N][32], col[32];
    double v[M_N];
    cell_values(p ? p : &none, attr, v);
    const struct fl_tr_counts c = p ? p->c : none.c;
    color(max[def] > 0 ? sqrt(v[def] / max[def]) : 0, col, sizeof(col));
    fprintf(f, "<rect class=\"cell\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
            "data-layer=\"%d\" data-expert=\"%d\"", x, y, w, h, col, l, e);
    for (int m = 0; m < M_N; m++)
        fprintf(f, " data-%s=\"%s\"", metrics[m].key, attr[m]);
    fprintf(f, "><title>layer %d expert %d: %" PRIu64 " faults, %" PRIu64 " acquire waits, "
            "%s ms stalled (%.3f acquire), p99 %s us, %.2f MiB read</title></rect>", l, e,
            c.faults, c.acq_stalls, attr[M_STALL], (double)c.acq_stall_ns / 1e6, attr[M_P99],
            (double)c.read_bytes / 1048576.0);
}

static void heatmap(FILE *f, const struct tr_unit *u, int n)
{
    int lmin = 0, lmax = -1, emax = -1;
    uint64_t faults = 0;
    double max[M_N] = { 0 };
    for (int i = 0; i < n; i++) {
        faults += u[i].c.faults;
        if (u[i].layer < 0)
            continue;
        lmin = lmax < 0 || u[i].layer < lmin ? u[i].layer : lmin;
        lmax = u[i].layer > lmax ? u[i].layer : lmax;
        emax = u[i].expert > emax ? u[i].expert : emax;
        char attr[M_N][32];
        double v[M_N];
        cell_values(&u[i], attr, v);
        for (int m = 0; m < M_N; m++)
            max[m] = v[m] > max[m] ? v[m] : max[m];
    }
    const int def = default_metric(max);
    heatmap_head(f, max, def, faults, n > 0);
    if (lmax < 0) {
        fprintf(f, "<p class=\"muted\">No expert activity was traced.</p>\n");
        return;
    }
    int64_t rows = (int64_t)lmax - lmin + 1, cols = (int64_t)emax + 1;
    if (rows * cols > HEATMAP_MAX_CELLS) {
        /* Only a damaged or hand-edited trace gets here (the largest MoE models
         * have ~60 layers x 384 experts); an SVG of billions of cells would
         * never finish. */
        fprintf(f, "<p class=\"muted\">No heatmap: the trace names layers %d..%d and experts "
                "up to %d, more than %d cells.</p>\n", lmin, lmax, emax, HEATMAP_MAX_CELLS);
        return;
    }
    int cell = cols > 64 ? 8 : CELL, ch = CELL;
    fprintf(f, "<svg id=\"heatmap\" width=\"%d\" height=\"%d\" data-rows=\"%d\" data-cols=\"%d\">\n",
            60 + (int)cols * cell, 30 + (int)rows * ch, (int)rows, (int)cols);
    for (int e = 0; e < cols; e += cols > 32 ? 16 : 4)
        fprintf(f, "<text x=\"%d\" y=\"12\">%d</text>", 60 + e * cell, e);
    const struct tr_unit *p = u, *end = u + n;
    for (int l = lmin; l <= lmax; l++) {
        fprintf(f, "\n<text x=\"0\" y=\"%d\">layer %d</text>", 30 + (l - lmin) * ch + 11, l);
        for (int e = 0; e < cols; e++) {
            while (p < end && (p->layer < l || (p->layer == l && p->expert < e)))
                p++;
            bool here = p < end && p->layer == l && p->expert == e;
            heatmap_cell(f, here ? p : NULL, l, e, 60 + e * cell, 30 + (l - lmin) * ch, cell, ch,
                         max, def);
        }
    }
    fprintf(f, "\n</svg>\n");
}

#define BAR 46       /* px: wide enough for a label such as "16.8 ms" */
#define BAR_STEP 54

static void histogram(FILE *f, const struct fl_tr_hist *h, const char *title)
{
    int lo = -1, hi = -1;
    uint64_t max = 0;
    for (int k = 0; k < FL_TR_SLOTS; k++)
        if (h->slots[k]) {
            lo = lo < 0 ? k : lo;
            hi = k;
            max = h->slots[k] > max ? h->slots[k] : max;
        }
    if (lo < 0)
        return;
    char mean[16], p50[16], p99[16];
    tr_fmt_ns(mean, sizeof(mean), h->count ? (double)h->sum_ns / (double)h->count : 0.0);
    tr_fmt_ns(p50, sizeof(p50), (double)tr_hist_quantile(h, 0.5));
    tr_fmt_ns(p99, sizeof(p99), (double)tr_hist_quantile(h, 0.99));
    fprintf(f, "<h3>%s</h3><p class=\"muted\">%" PRIu64 " samples, mean %s, p50 %s, p99 %s</p>\n"
            "<svg class=\"hist\" width=\"%d\" height=\"150\">", title, h->count, mean, p50, p99,
            40 + (hi - lo + 1) * BAR_STEP);
    for (int k = lo; k <= hi; k++) {
        int bh = (int)(100 * h->slots[k] / max), x = 20 + (k - lo) * BAR_STEP;
        char a[16], b[16];
        tr_fmt_ns(a, sizeof(a), k ? (double)(1ull << k) : 0.0);
        tr_fmt_ns(b, sizeof(b), (double)(2ull << k));
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"><title>[%s, %s): %" PRIu64
                "</title></rect><text class=\"edge\" x=\"%d\" y=\"135\">%s</text><text x=\"%d\" "
                "y=\"%d\">%" PRIu64 "</text>", x, 115 - bh, BAR, bh, a, b, h->slots[k], x, b, x,
                110 - bh, h->slots[k]);
    }
    fprintf(f, "<text x=\"20\" y=\"148\">bucket upper edge</text></svg>\n");
}

static void stalls_table(FILE *f, const struct tr_stats *s)
{
    const struct tr_stall *st;
    int n = tr_stats_n_stalls(s, &st);
    fprintf(f, "<h2>Longest stalls</h2>\n");
    if (!n) {
        fprintf(f, "<p class=\"muted\">none</p>\n");
        return;
    }
    uint64_t t0 = UINT64_MAX;
    for (int i = 0; i < n; i++)
        t0 = st[i].ts_ns < t0 ? st[i].ts_ns : t0;
    fprintf(f, "<table id=\"stalls\"><tr><th>at (ms)</th><th>thread</th><th>layer</th>"
            "<th>expert</th><th>kind</th><th>stall (&micro;s)</th><th>waited in</th></tr>\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "<tr><td>%.3f</td><td>%u</td><td>%d</td><td>%d</td><td>%s</td><td>%.1f</td>"
                "<td>%s</td></tr>\n", (double)(st[i].ts_ns - t0) / 1e6, st[i].tid, st[i].layer,
                st[i].expert, tr_kind_name(st[i].kind), (double)st[i].dur_ns / 1e3,
                tr_stall_src_name(st[i].src));
    fprintf(f, "</table>\n");
}

/* Text into HTML: '<' and '&' escaped (a command line may hold them). */
static void html_text(FILE *f, const char *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++) {
        if (t[i] == '<')
            fputs("&lt;", f);
        else if (t[i] == '&')
            fputs("&amp;", f);
        else
            fputc(t[i], f);
    }
}

/* Recolours the cells when a view's button is pressed; at load it shows
 * the view the page's address names (report.html#faults), else the
 * default the page was drawn with. */
static const char *script =
    "(function(){var units={faults:' faults',waits:' acquire waits',stall:' ms stalled',"
    "p99:' us p99'};"
    "var cells=document.querySelectorAll('#heatmap .cell');"
    "var btns=document.getElementById('metric-buttons');"
    "function ramp(x){if(x<=0)return'#f0f0f0';x=Math.min(1,x);"
    "return'rgb('+Math.round(255-90*x)+','+Math.round(230-200*x)+','+Math.round(180-160*x)+')';}"
    "function show(m){var max=0;cells.forEach(function(c){max=Math.max(max,+c.dataset[m]);});"
    "cells.forEach(function(c){c.setAttribute('fill',ramp(max?Math.sqrt(+c.dataset[m]/max):0));});"
    "document.getElementById('legend').textContent='max '+max+units[m];"
    "btns.querySelectorAll('button').forEach(function(b){"
    "b.className=b.dataset.m==m?'on':'';});}"
    "btns.querySelectorAll('button').forEach(function(b){"
    "b.onclick=function(){show(b.dataset.m);};});"
    "var h=location.hash.slice(1);show(units[h]?h:btns.dataset.default);"
    "document.body.dataset.ready='1';})();";

int tr_html_write(FILE *f, const struct tr_stats *s)
{
    struct tr_unit *u = NULL;
    int n = tr_stats_units(s, &u);
    if (n < 0)
        return n;
    fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>faultline trace</title>"
            "<style>%s</style></head><body>\n<h1>faultline trace</h1>\n", css);
    char *txt = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&txt, &len);
    if (mem) {
        tr_print_tables(s, mem, 1 << 20);
        fclose(mem);
    }
    /* The totals (the tables' first lines) head the page; all tables close it. */
    size_t head = 0;
    for (int nl = 0; txt && head < len && nl < 5; head++)
        nl += txt[head] == '\n';
    fprintf(f, "<pre id=\"summary\">");
    html_text(f, txt, head);
    fprintf(f, "</pre>\n");
    heatmap(f, u, n);
    fprintf(f, "<h2>Latency histograms</h2>\n");
    const char *titles[] = { "Fault stall", "Pager read (submit &rarr; done)",
                             "Host &rarr; GPU copy", "io_uring request (kernel)",
                             "Acquire wait (miss &rarr; resident)" };
    _Static_assert(sizeof(titles) / sizeof(titles[0]) == FL_TM_N, "a title per metric");
    for (int k = 0; k < FL_TM_N; k++) {
        struct fl_tr_hist h;
        tr_stats_metric_hist(s, k, &h);
        histogram(f, &h, titles[k]);
    }
    stalls_table(f, s);
    fprintf(f, "<h2>Tables</h2><details><summary>per layer, every expert, histograms as text"
            "</summary><pre id=\"tables\">");
    html_text(f, txt, len);
    fprintf(f, "</pre></details>\n");
    free(txt);
    fprintf(f, "<script type=\"application/json\" id=\"faultline-data\">");
    /* The aggregate for scripts; "</" cannot occur in it (no such strings). */
    tr_json_summary(f, s);
    fprintf(f, "</script>\n<script>%s</script>\n</body></html>\n", script);
    free(u);
    return fflush(f) || ferror(f) ? -EIO : 0;
}
