/* bench-output.c: `faultline bench`'s rows in llama-bench's formats.
 *
 * Every row is first made into one JSON object holding llama-bench's
 * fields in llama-bench's order (those that apply: no build number, GPU
 * layers or CPU masks here), so csv, json and jsonl say the same things by
 * construction; md prints llama-bench's table from the same numbers. */
#include "app/cli/bench-output.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "model/kv-cache.h"

bool bench_format_parse(const char *s, enum bench_format *out)
{
    static const char *names[] = { [BENCH_MD] = "md", [BENCH_CSV] = "csv",
                                   [BENCH_JSON] = "json", [BENCH_JSONL] = "jsonl" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(s, names[i])) {
            *out = (enum bench_format)i;
            return true;
        }
    return false;
}

void bench_cpu_info(char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof(line), f)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !colon)
            continue;
        colon += strspn(colon + 1, " \t") + 1;
        snprintf(buf, cap, "%.*s", (int)strcspn(colon, "\n"), colon);
        break;
    }
    if (f)
        fclose(f);
}

/* --- statistics, as llama-bench computes them --------------------------------- */

static double mean_of(const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return n ? s / n : 0;
}

/* The sample standard deviation; 0 for fewer than two samples. */
static double sd_of(const double *v, int n)
{
    if (n < 2)
        return 0;
    const double m = mean_of(v, n);
    double s = 0;
    for (int i = 0; i < n; i++)
        s += (v[i] - m) * (v[i] - m);
    return sqrt(s / (n - 1));
}

struct row_stats {
    double avg_ns, sd_ns, avg_ts, sd_ts;
};

/* t/s of each repetition is its tokens over its time; avg and sd are of those. */
static int row_stats(const struct bench_result *r, struct row_stats *st, double **ts_out)
{
    double *ns = calloc((size_t)r->reps + 1, sizeof(double));
    double *ts = calloc((size_t)r->reps + 1, sizeof(double));
    if (!ns || !ts) {
        free(ns);
        free(ts);
        return -ENOMEM;
    }
    const int n_tokens = r->n_prompt + r->n_gen;
    for (int i = 0; i < r->reps; i++) {
        ns[i] = (double)r->samples_ns[i];
        ts[i] = ns[i] > 0 ? 1e9 * n_tokens / ns[i] : 0;
    }
    *st = (struct row_stats){ mean_of(ns, r->reps), sd_of(ns, r->reps), mean_of(ts, r->reps),
                              sd_of(ts, r->reps) };
    free(ns);
    *ts_out = ts;
    return 0;
}

/* --- the row as llama-bench's fields ------------------------------------------ */

static json_t *row_object(const struct bench_printer *p, const struct bench_result *r,
                          const struct row_stats *st)
{
    const struct bench_model *m = p->model;
    json_t *o = json_object();
    int bad = !o;
    const char *tk = eng_kv_type_name(r->type_k), *tv = eng_kv_type_name(r->type_v);
    const struct { const char *key; json_t *v; } f[] = {
        { "cpu_info", fl_json_string(m->cpu_info) },
        { "backends", fl_json_string(m->backend) },
        { "model_filename", fl_json_string(m->filename) },
        { "model_type", fl_json_string(m->type) },
        { "model_size", json_integer((json_int_t)m->size) },
        { "model_n_params", json_integer((json_int_t)m->n_params) },
        { "model_n_params_active", json_integer((json_int_t)m->n_active) },
        { "n_batch", json_integer(r->n_batch) },
        { "n_ubatch", json_integer(r->n_ubatch) },
        { "n_threads", json_integer(r->n_threads) },
        { "type_k", fl_json_string(tk) },
        { "type_v", fl_json_string(tv) },
        { "flash_attn", json_integer(r->flash_attn) },
        { "n_prompt", json_integer(r->n_prompt) },
        { "n_gen", json_integer(r->n_gen) },
        { "n_depth", json_integer(r->n_depth) },
        { "test_time", fl_json_string(r->test_time) },
        { "avg_ns", json_integer((json_int_t)llround(st->avg_ns)) },
        { "stddev_ns", json_integer((json_int_t)llround(st->sd_ns)) },
        { "avg_ts", fl_json_real(st->avg_ts) },
        { "stddev_ts", fl_json_real(st->sd_ts) },
    };
    /* every value is set (or released) even after a failure, so none leaks */
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        bad |= o ? fl_json_set(o, f[i].key, f[i].v) != 0 : (json_decref(f[i].v), 1);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* samples_ns and samples_ts, which json and jsonl add after the fields */
static int add_samples(json_t *o, const struct bench_result *r, const double *ts)
{
    json_t *ns_arr = json_array(), *ts_arr = json_array();
    int bad = !ns_arr || !ts_arr;
    for (int i = 0; !bad && i < r->reps; i++)
        bad = json_array_append_new(ns_arr, json_integer((json_int_t)r->samples_ns[i])) ||
              json_array_append_new(ts_arr, fl_json_real(ts[i]));
    if (bad) {
        json_decref(ns_arr);
        json_decref(ts_arr);
        return -ENOMEM;
    }
    return fl_json_set(o, "samples_ns", ns_arr) | fl_json_set(o, "samples_ts", ts_arr);
}

/* --- csv ---------------------------------------------------------------------- */

/* llama-bench's csv: every value in double quotes, quotes doubled; reals
 * with six decimals (C++'s std::to_string). */
static void csv_value(const json_t *v)
{
    char num[64];
    const char *s = num;
    if (json_is_string(v))
        s = json_string_value(v);
    else if (json_is_integer(v))
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else
        snprintf(num, sizeof(num), "%f", json_is_real(v) ? json_real_value(v) : 0.0);
    putchar('"');
    for (; *s; s++) {
        if (*s == '"')
            putchar('"');
        putchar(*s);
    }
    putchar('"');
}

static void csv_row(const json_t *o, bool header)
{
    const char *key;
    json_t *v;
    bool first = true;
    if (header) {
        json_object_foreach((json_t *)o, key, v) {
            printf("%s%s", first ? "" : ",", key);
            first = false;
        }
        putchar('\n');
    }
    first = true;
    json_object_foreach((json_t *)o, key, v) {
        if (!first)
            putchar(',');
        csv_value(v);
        first = false;
    }
    putchar('\n');
}

/* --- md ----------------------------------------------------------------------- */

/* llama-bench's columns: width < 0 left-aligned, header and rule as it makes them */
struct md_col {
    const char *name;
    int width;
};

static int md_cols(const struct bench_printer *p, struct md_col *c)
{
    int n = 0;
    c[n++] = (struct md_col){ "model", -30 };
    c[n++] = (struct md_col){ "size", 10 };
    c[n++] = (struct md_col){ "params", 10 };
    c[n++] = (struct md_col){ "backend", -10 };
    c[n++] = (struct md_col){ "threads", 7 };
    if (p->col_batch)
        c[n++] = (struct md_col){ "n_batch", 7 };
    if (p->col_ubatch)
        c[n++] = (struct md_col){ "n_ubatch", 8 };
    if (p->col_type_k)
        c[n++] = (struct md_col){ "type_k", 6 };
    if (p->col_type_v)
        c[n++] = (struct md_col){ "type_v", 6 };
    if (p->col_fa)
        c[n++] = (struct md_col){ "fa", 3 };
    c[n++] = (struct md_col){ "test", 15 };
    c[n++] = (struct md_col){ "t/s", 20 };
    return n;
}

static void md_header(const struct bench_printer *p)
{
    struct md_col c[12];
    const int n = md_cols(p, c);
    putchar('|');
    for (int i = 0; i < n; i++)
        printf(" %*s |", c[i].width, c[i].name);
    printf("\n|");
    for (int i = 0; i < n; i++) {
        putchar(' ');
        for (int k = 1; k < abs(c[i].width); k++)
            putchar('-');
        printf("%s |", c[i].width > 0 ? ":" : "-");
    }
    putchar('\n');
}

static void md_size(uint64_t bytes, char *buf, size_t cap)
{
    if (bytes < 1024ull * 1024 * 1024)
        snprintf(buf, cap, "%.2f MiB", (double)bytes / 1024 / 1024);
    else
        snprintf(buf, cap, "%.2f GiB", (double)bytes / 1024 / 1024 / 1024);
}

static void md_value(const struct bench_printer *p, const struct bench_result *r,
                     const struct row_stats *st, const char *col, char *v, size_t cap)
{
    const struct bench_model *m = p->model;
    if (!strcmp(col, "model"))
        snprintf(v, cap, "%s", m->type);
    else if (!strcmp(col, "size"))
        md_size(m->size, v, cap);
    else if (!strcmp(col, "params"))
        snprintf(v, cap, m->n_params < 1000000000 ? "%.2f M" : "%.2f B",
                 (double)m->n_params / (m->n_params < 1000000000 ? 1e6 : 1e9));
    else if (!strcmp(col, "backend"))
        snprintf(v, cap, "%s", m->backend);
    else if (!strcmp(col, "threads"))
        snprintf(v, cap, "%d", r->n_threads);
    else if (!strcmp(col, "n_batch"))
        snprintf(v, cap, "%d", r->n_batch);
    else if (!strcmp(col, "n_ubatch"))
        snprintf(v, cap, "%d", r->n_ubatch);
    else if (!strcmp(col, "fa"))
        snprintf(v, cap, "%d", r->flash_attn);
    else if (!strcmp(col, "type_k") || !strcmp(col, "type_v"))
        snprintf(v, cap, "%s", eng_kv_type_name(col[5] == 'k' ? r->type_k : r->type_v));
    else if (!strcmp(col, "test") && r->n_depth) /* llama-bench's "pp512 @ d512" */
        snprintf(v, cap, r->n_gen ? "tg%d @ d%d" : "pp%d @ d%d", r->n_gen ? r->n_gen : r->n_prompt,
                 r->n_depth);
    else if (!strcmp(col, "test"))
        snprintf(v, cap, r->n_gen ? "tg%d" : "pp%d", r->n_gen ? r->n_gen : r->n_prompt);
    else
        snprintf(v, cap, "%.2f ± %.2f", st->avg_ts, st->sd_ts);
}

static void md_row(const struct bench_printer *p, const struct bench_result *r,
                   const struct row_stats *st)
{
    struct md_col c[12];
    const int n = md_cols(p, c);
    putchar('|');
    for (int i = 0; i < n; i++) {
        char v[192];
        md_value(p, r, st, c[i].name, v, sizeof(v));
        /* "±" is two bytes and one column: one more byte keeps the bars aligned */
        printf(" %*s |", c[i].width + (strcmp(c[i].name, "t/s") ? 0 : 1), v);
    }
    putchar('\n');
}

/* --- the printer -------------------------------------------------------------- */

int bench_out_begin(struct bench_printer *p, struct fl_err *err)
{
    if (p->format == BENCH_MD)
        md_header(p);
    if (p->format == BENCH_JSON && !(p->rows = json_array()))
        return fl_err_set(err, -ENOMEM, "out of memory");
    fflush(stdout);
    return 0;
}

int bench_out_row(struct bench_printer *p, const struct bench_result *r, struct fl_err *err)
{
    struct row_stats st;
    double *ts = NULL;
    if (row_stats(r, &st, &ts))
        return fl_err_set(err, -ENOMEM, "out of memory");
    int rc = 0;
    json_t *o = NULL;
    if (p->format == BENCH_MD)
        md_row(p, r, &st);
    else if (!(o = row_object(p, r, &st)) ||
             (p->format != BENCH_CSV && add_samples(o, r, ts)))
        rc = fl_err_set(err, -ENOMEM, "out of memory");
    if (!rc && p->format == BENCH_CSV)
        csv_row(o, !p->rows_done++);
    else if (!rc && p->format == BENCH_JSONL && fl_json_write(stdout, o, FL_JSON_COMPACT))
        rc = fl_err_set(err, -EIO, "cannot write the results: %s", strerror(errno));
    else if (!rc && p->format == BENCH_JSON) {
        rc = json_array_append(p->rows, o) ? fl_err_set(err, -ENOMEM, "out of memory") : 0;
    }
    json_decref(o);
    free(ts);
    fflush(stdout);
    return rc;
}

int bench_out_end(struct bench_printer *p, struct fl_err *err)
{
    if (p->format != BENCH_JSON || !p->rows)
        return 0;
    if (fl_json_write(stdout, p->rows, FL_JSON_INDENT))
        return fl_err_set(err, -EIO, "cannot write the results: %s", strerror(errno));
    fflush(stdout);
    return 0;
}

void bench_out_free(struct bench_printer *p)
{
    json_decref(p->rows);
    p->rows = NULL;
}
