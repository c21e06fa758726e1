/* progress.h: what a user sees of a long step (base/progress.h): on a
 * terminal, a bar once the step has run for a second; otherwise one line
 * when a step that took a second or more ends. Steps under a second stay
 * silent either way (FL_PROGRESS_AFTER_S=SECONDS sets that second). */
#ifndef FL_CLI_PROGRESS_H
#define FL_CLI_PROGRESS_H

#include <stdbool.h>

#include "base/progress.h"

/* The reporter that draws on stderr (quiet: a reporter that says nothing,
 * for --log-disable and -q). One per process: steps run one at a time. */
struct fl_progress cli_progress_stderr(bool quiet);

#endif
