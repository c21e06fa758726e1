/* progress.h: how a long step (reading the RAM tier, repacking, a
 * calibration pass, writing a model) tells whoever drives it how far it
 * is. The module doing the work calls fl_progress_report; the CLI decides
 * what a user sees (app/cli/progress.h: a bar on a terminal, a line per
 * step otherwise). */
#ifndef FL_PROGRESS_H
#define FL_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fl_progress {
    /* done of total units of the named step (unit "B" for bytes, else a
     * word such as "tokens"); last: the step is over. Called from one
     * thread at a time. NULL: nobody asks. */
    void (*report)(void *ctx, const char *step, const char *unit, uint64_t done, uint64_t total,
                   bool last);
    void *ctx;
};

static inline void fl_progress_report(const struct fl_progress *p, const char *step,
                                      const char *unit, uint64_t done, uint64_t total, bool last)
{
    if (p && p->report)
        p->report(p->ctx, step, unit, done, total, last);
}

#endif
