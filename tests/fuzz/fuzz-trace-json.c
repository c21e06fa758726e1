/* fuzz-trace-json: libFuzzer target for the JSON readers behind
 * `faultline trace report` (saved traces) and --cache pinned-hot (the
 * pager's stats JSON).
 *
 * The input is a file (in a memfd, as the readers take paths). It is parsed
 * as plain JSON (base/json.h) and walked, read as a pinned-hot profile; then
 * loaded as a faultline trace and, when
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

#include "record/stats-json.h"
#include "base/json.h"
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

static void walk(const json_t *v, int depth)
{
    if (depth > 2100)
        die("a tree deeper than the parser's limit");
    if (json_is_string(v))
        sink += json_string_length(v);
    if (json_is_array(v))
        for (size_t i = 0; i < json_array_size(v); i++)
            walk(json_array_get(v, i), depth + 1);
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            if (json_object_get(v, k) != x)
                die("an object member that json_object_get cannot find");
            walk(x, depth + 1);
        }
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
    fputs("{\"traceEvents\":[],\n" TR_JSON_AGGREGATE_MARKER, m);
    if (tr_json_summary(m, s))
        die("the aggregate of an accepted trace cannot be written");
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
    json_t *root;
    struct fl_err err;
    int rc = fl_json_load_file(path, (size_t)1 << 24, &root, &err);
    if (rc == 0) {
        walk(root, 0);
        json_decref(root);
    } else {
        one_line(&err);
    }
    struct pager_hot_unit *hot = NULL;
    int n_hot = 0;
    if (eng_hot_profile_load(path, &hot, &n_hot, &err) == 0)
        for (int i = 0; i < n_hot; i++)
            sink += hot[i].count + (uint64_t)hot[i].layer;
    else
        one_line(&err);
    free(hot);
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
