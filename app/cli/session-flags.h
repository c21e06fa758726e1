/* session-flags.h: the command-line flags that configure a session
 * (placement, paging, prefetch, cache, NUMA, GPU): what run, eval and
 * bench take into their eng_session_params, and their --help. */
#ifndef FL_CLI_SESSION_FLAGS_H
#define FL_CLI_SESSION_FLAGS_H

#include <stdio.h>

#include "app/session.h"
#include "base/error.h"

/* Takes one session flag at argv[*i] (placement flags, --pager MODE,
 * --stats, --stats-json FILE, --numa MODE, --no-repack, ...): 1 when taken
 * (*i advanced past its value), 0 when not a session flag, -EINVAL with
 * err for a bad value. */
int eng_session_parse_flag(struct eng_session_params *p, int argc, char **argv, int *i,
                           struct fl_err *err);
void eng_session_print_usage(FILE *out);

#endif
