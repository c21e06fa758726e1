/* cli-trace.c: `faultline trace`: launch or attach, print a live table
 * every interval, and at the end the tables, the trace-event JSON and the
 * HTML report; `faultline trace report FILE.json` re-reads a saved trace.
 * docs/trace.md describes the output. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ebpf/cli-trace.h"
#include "base/out-file.h"
#include "ebpf/trace-html.h"
#include "ebpf/trace-json.h"
#include "ebpf/trace-stats.h"
#include "ebpf/trace.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: faultline trace [options] -- COMMAND [ARGS...]   launch COMMAND and trace it\n"
        "       faultline trace [options] -p PID                 trace a running faultline\n"
        "       faultline trace report FILE.json[.gz] [--report FILE.html] [--top N]\n"
        "options:\n"
        "  --out FILE.json     the event stream as Chrome/Perfetto trace-event JSON\n"
        "                      (gzip when FILE ends in .gz; `trace report` reads both)\n"
        "  --report FILE.html  a self-contained HTML report (heatmap, histograms, stalls)\n"
        "  --interval S        seconds between live tables (default 1; 0: none)\n"
        "  --top N             rows of the per-expert tables (default 20)\n"
        "  --quiet             no live tables\n"
        "  --detail            also the pager's read latency, each range's install and each\n"
        "                      io_uring request (three more probes per expert load)\n"
        "Needs root or CAP_BPF+CAP_PERFMON and a kernel with BTF. See docs/trace.md.\n");
}

/* 0, 1 after --help, or -1 after an error (printed). */
static int parse_args(int argc, char **argv, int first, struct trace_args *a)
{
    *a = (struct trace_args){ .interval = 1.0, .top = 20 };
    for (int i = first; i < argc; i++) {
        const char *o = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(o, "--")) {
            a->cmd = &argv[i + 1];
            if (!argv[i + 1])
                a->cmd = NULL;
            return 0;
        } else if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(o, "--quiet")) {
            a->quiet = true;
        } else if (!strcmp(o, "--detail")) {
            a->detail = true;
        } else if (has && !strcmp(o, "--out")) {
            a->out = argv[++i];
        } else if (has && !strcmp(o, "--report")) {
            a->report = argv[++i];
        } else if (has && (!strcmp(o, "--interval") || !strcmp(o, "--top") || !strcmp(o, "-p"))) {
            char *end;
            double v = strtod(argv[++i], &end);
            if (*end || v < 0 || v > 1e9 || (o[1] != '-' && v != (double)(pid_t)v)) {
                fprintf(stderr, "faultline trace: bad value for %s: '%s'\n", o, argv[i]);
                return -1;
            }
            if (!strcmp(o, "--interval"))
                a->interval = v;
            else if (!strcmp(o, "--top"))
                a->top = (int)v;
            else
                a->pid = (pid_t)v;
        } else {
            fprintf(stderr, "faultline trace: %s '%s' (see --help)\n",
                    o[0] == '-' && !has ? "missing value for" : "unknown argument", o);
            return -1;
        }
    }
    return 0;
}

/* Tables to out, then the HTML report when asked. 0 or 1 (error printed). */
int trace_finish(const struct trace_args *a, struct tr_stats *s, FILE *out)
{
    tr_print_tables(s, out, a->top);
    if (!a->report)
        return 0;
    FILE *f = fopen(a->report_tmp ? a->report_tmp : a->report, "w");
    int rc = f ? tr_html_write(f, s) : -errno;
    if (f && fclose(f) != 0 && rc == 0)
        rc = -EIO;
    if (rc < 0) {
        fprintf(stderr, "faultline trace: %s: %s\n", a->report, strerror(-rc));
        return 1;
    }
    fprintf(out, "\nreport: %s\n", a->report);
    return 0;
}

/* --out and --report are written whole or not at all (base/out-file.h):
 * claimed before the trace starts, renamed into place when it ends. */
static int claim_outputs(struct trace_args *a, const char *const *inputs, int n_inputs,
                         struct fl_out *out, struct fl_out *report)
{
    struct fl_err err = { { 0 } };
    if ((a->out && fl_out_begin(out, a->out, inputs, n_inputs, false, &err)) ||
        (a->report && fl_out_begin(report, a->report, inputs, n_inputs, false, &err))) {
        fl_out_abort(out);
        fprintf(stderr, "faultline trace: %s\n", err.msg);
        return -1;
    }
    a->out_tmp = a->out ? out->tmp : NULL;
    a->report_tmp = a->report ? report->tmp : NULL;
    return 0;
}

/* Renames what was written into place when it is complete. */
static int finish_outputs(bool written, int status, struct fl_out *out, struct fl_out *report)
{
    struct fl_err err = { { 0 } };
    if (written && (fl_out_commit(out, &err) || fl_out_commit(report, &err))) {
        fprintf(stderr, "faultline trace: %s\n", err.msg);
        status = 1;
    }
    fl_out_abort(out);
    fl_out_abort(report);
    return status;
}

static int cmd_report(int argc, char **argv)
{
    struct trace_args a;
    if (argc < 3 || argv[2][0] == '-') {
        fprintf(stderr, "usage: faultline trace report FILE.json[.gz] [--report FILE.html] [--top N]\n");
        return 2;
    }
    int rc = parse_args(argc, argv, 3, &a);
    if (rc)
        return rc > 0 ? 0 : 2;
    if (a.out || a.cmd || a.pid || a.detail) {
        fprintf(stderr, "faultline trace report: only --report and --top apply\n");
        return 2;
    }
    struct fl_out report = FL_OUT_NONE, none = FL_OUT_NONE;
    const char *inputs[] = { argv[2] };
    if (claim_outputs(&a, inputs, 1, &none, &report))
        return 1;
    struct tr_stats *s = tr_stats_new();
    struct fl_err err = { { 0 } };
    rc = s ? tr_json_load(argv[2], s, &err) : -ENOMEM;
    if (rc < 0)
        fprintf(stderr, "faultline trace report: %s\n", s ? err.msg : "out of memory");
    else
        rc = trace_finish(&a, s, stdout);
    tr_stats_free(s);
    return finish_outputs(rc == 0, rc < 0 ? 1 : rc, &none, &report);
}

int cli_trace(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "report"))
        return cmd_report(argc, argv);
    struct trace_args a;
    int rc = parse_args(argc, argv, 1, &a);
    if (rc)
        return rc > 0 ? 0 : 2;
    if (!a.cmd == !a.pid) {
        fprintf(stderr, "faultline trace: give either -- COMMAND ... or -p PID (see --help)\n");
        return 2;
    }
#ifdef FL_TRACE_BPF
    struct fl_out out = FL_OUT_NONE, report = FL_OUT_NONE;
    if (claim_outputs(&a, NULL, 0, &out, &report))
        return 1;
    bool written;
    rc = trace_live(&a, &written);
    return finish_outputs(written, rc, &out, &report);
#else
    fprintf(stderr, "faultline trace: this faultline was built without eBPF tracing (%s); "
            "`faultline trace report` still works\n", FL_TRACE_WHY);
    return 1;
#endif
}
