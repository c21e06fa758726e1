/* hellaswag.h: `faultline perplexity --hellaswag` (hellaswag.c). */
#ifndef FL_CLI_HELLASWAG_H
#define FL_CLI_HELLASWAG_H

#include <stddef.h>

#include "app/session.h"

/* Scores n_tasks tasks of the data file's text (modified) on the model of
 * sp, whose sequences and context are set here; prints llama-perplexity's
 * lines on stdout. 0, or a negative errno with err set (-EINTR after
 * Ctrl-C). */
int ppl_hellaswag(struct eng_session_params *sp, char *text, size_t len, int n_tasks,
                  struct fl_err *err);

#endif
