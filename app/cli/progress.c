/* progress.c: a long step's bar or line on stderr (progress.h). */
#include "app/cli/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/units.h"

/* shorter steps are not worth a line; FL_PROGRESS_AFTER_S changes it (tests) */
#define SHOW_AFTER_S 1.0
#define REDRAW_S 0.1

struct bar {
    bool tty;
    double after_s;
    char step[96];
    double t0, drawn_at;
    bool drawn;
};

static struct bar g_bar;

/* "1.2 GiB" for bytes, "512 tokens" otherwise. */
static const char *amount(const char *unit, uint64_t n, char *buf, size_t cap)
{
    if (!strcmp(unit, "B"))
        return fl_format_size(n, buf, cap);
    snprintf(buf, cap, "%llu %s", (unsigned long long)n, unit);
    return buf;
}

static void rate(const char *unit, uint64_t done, double s, char *buf, size_t cap)
{
    if (s <= 0)
        snprintf(buf, cap, "-");
    else if (!strcmp(unit, "B"))
        snprintf(buf, cap, "%.0f MiB/s", (double)done / s / 1048576.0);
    else
        snprintf(buf, cap, "%.1f %s/s", (double)done / s, unit);
}

static void draw(struct bar *b, const char *unit, uint64_t done, uint64_t total, double s)
{
    const int width = 30;
    const double f = total ? (double)done / (double)total : 0;
    const int fill = (int)(f * width + 0.5);
    char a[32], t[32], r[32];
    rate(unit, done, s, r, sizeof(r));
    fprintf(stderr, "\r%s [%.*s%*s] %3.0f%%  %s of %s  %s   ", b->step, fill,
            "##############################", width - fill, "", 100 * f,
            amount(unit, done, a, sizeof(a)), amount(unit, total, t, sizeof(t)), r);
    fflush(stderr);
    b->drawn = true;
}

static void report(void *ctx, const char *step, const char *unit, uint64_t done, uint64_t total,
                   bool last)
{
    struct bar *b = ctx;
    const double now = fl_clock_s();
    if (strcmp(b->step, step)) { /* a new step (an ended one left step empty) */
        snprintf(b->step, sizeof(b->step), "%s", step);
        b->t0 = now;
        b->drawn = false;
        b->drawn_at = 0;
    }
    const double s = now - b->t0;
    /* on a terminal a step past the threshold ends on its full bar */
    if (b->tty && (last ? b->drawn || s >= b->after_s
                        : s >= b->after_s && now - b->drawn_at >= REDRAW_S)) {
        draw(b, unit, done, total, s);
        b->drawn_at = now;
    }
    if (!last)
        return;
    if (b->drawn) {
        fputc('\n', stderr);
    } else if (s >= b->after_s) {
        char a[32], r[32];
        rate(unit, done, s, r, sizeof(r));
        fprintf(stderr, "faultline: %s: %s in %.1f s (%s)\n", step, amount(unit, done, a, sizeof(a)),
                s, r);
    }
    b->step[0] = '\0';
    b->t0 = 0;
    b->drawn = false;
}

struct fl_progress cli_progress_stderr(bool quiet)
{
    if (quiet)
        return (struct fl_progress){ 0 };
    g_bar.tty = isatty(STDERR_FILENO);
    const char *env = getenv("FL_PROGRESS_AFTER_S");
    char *end = NULL;
    g_bar.after_s = env ? strtod(env, &end) : SHOW_AFTER_S;
    if (!env || end == env || *end || !(g_bar.after_s >= 0))
        g_bar.after_s = SHOW_AFTER_S;
    return (struct fl_progress){ .report = report, .ctx = &g_bar };
}
