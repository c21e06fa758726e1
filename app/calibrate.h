/* calibrate.h: a pinned-hot profile from a calibration pass.
 *
 * The text of a prompt file runs through the model (prefill only, in
 * windows of the context size, each from position 0) while the router's
 * choices are counted per (layer, expert), token by token: the heat
 * `--cache pinned-hot` keeps resident. Like llama.cpp's imatrix tool, it
 * measures the experts a workload uses instead of guessing. */
#ifndef FL_CALIBRATE_H
#define FL_CALIBRATE_H

#include <stdint.h>

#include "base/error.h"
#include "base/progress.h"
#include "pager/pager.h"

struct eng_session;

/* Runs the pass on the session (which is left at n_past 0) and returns
 * the experts chosen at least once with their selection counts (*out is
 * malloc'ed) and the number of tokens evaluated. Errors name the file. */
int eng_calibrate(struct eng_session *s, const char *prompt_path,
                  const struct fl_progress *progress, struct pager_hot_unit **out,
                  int *n, int64_t *n_tokens, struct fl_err *err);

#endif
