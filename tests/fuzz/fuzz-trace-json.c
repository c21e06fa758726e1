/* fuzz-trace-json: libFuzzer target for the JSON reader behind
 * `faultline trace report` (saved traces, the pager's stats JSON).
 *
 * The input is a file (in a memfd, as the readers take paths). It is parsed
 * as plain JSON and walked; then loaded as a faultline trace and, when
 * accepted, everything the report prints from it is printed to /dev/null
 * (tables, the aggregate JSON, the HTML page), and the aggregate written out
 * must load again. A broken contract aborts, which libFuzzer reports as a
 * crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ebpf/json.h"
#include "ebpf/trace-html.h"
#include "ebpf/trace-json.h"
#include "ebpf/trace-stats.h"

static uint64_t sink;
static FILE *null_out;

static void die(const char *what)
{
    fprintf(stderr, "fuzz-trace-json: %s\n", what);
    abort();
}

/* Memfd `which` (0: the input, 1: the rewritten aggregate) holding data. */
static const char *memfile(int which, const uint8_t *data, size_t size)
{
    static char paths[2][64];
    static int fds[2] = { -1, -1 };
    if (fds[which] < 0) {
        fds[which] = memfd_create("fuzz-trace-json", 0);
        if (fds[which] < 0)
            die("memfd_create failed");
        snprintf(paths[which], sizeof(paths[which]), "/proc/self/fd/%d", fds[which]);
    }
    if (ftruncate(fds[which], 0) || (size && pwrite(fds[which], data, size, 0) != (ssize_t)size))
        die("cannot write the memfd");
    return paths[which];
}

static void walk(const struct jv *v, int depth)
{
    if (depth > 70)
        die("a tree deeper than the reader's limit");
    if (v->t == J_STR)
        sink += strlen(v->s);
    if (v->t != J_ARR && v->t != J_OBJ)
        return;
    for (int i = 0; i < v->n; i++) {
        if (v->t == J_OBJ && (!v->keys[i] || jv_get(v, v->keys[i]) == NULL))
            die("an object member that jv_get cannot find");
        walk(&v->items[i], depth + 1);
    }
}

static void one_line(const struct fl_err *err)
{
    if (!strchr(err->msg, ':') || strchr(err->msg, '\n'))
        die("error without a one-line 'PATH: problem' message");
}

/* The aggregate as `trace report` rewrites it must load back. */
static void reload(const struct tr_stats *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return;
    fputs("{\"traceEvents\":[],\"faultline\":", m);
    tr_json_summary(m, s);
    fputs("}\n", m);
    if (fclose(m)) {
        free(buf);
        return;
    }
    struct tr_stats *back = tr_stats_new();
    struct fl_err err;
    if (back && tr_json_load(memfile(1, (const uint8_t *)buf, len), back, &err))
        die("the aggregate of an accepted trace does not load back");
    tr_stats_free(back);
    free(buf);
}

static void report(const struct tr_stats *s)
{
    if (!null_out && !(null_out = fopen("/dev/null", "w")))
        die("cannot open /dev/null");
    tr_print_tables(s, null_out, 10);
    tr_json_summary(null_out, s);
    tr_html_write(null_out, s);
    struct tr_unit *u = NULL;
    int n = tr_stats_units(s, &u);
    sink += (uint64_t)(n > 0 ? n : 0);
    free(u);
    reload(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = memfile(0, data, size);
    struct jv root;
    struct fl_err err;
    int rc = jv_parse_file(path, (size & 1) ? "traceEvents" : NULL, &root, &err);
    if (rc == 0) {
        walk(&root, 0);
        jv_free(&root);
    } else {
        one_line(&err);
    }
    struct tr_stats *s = tr_stats_new();
    if (!s)
        return 0;
    rc = tr_json_load(path, s, &err);
    if (rc == 0)
        report(s);
    else
        one_line(&err);
    tr_stats_free(s);
    return 0;
}
