/* winogrande.h: `faultline perplexity --winogrande` (winogrande.c). */
#ifndef FL_CLI_WINOGRANDE_H
#define FL_CLI_WINOGRANDE_H

#include <stddef.h>

#include "app/session.h"

/* Scores n_tasks tasks (0: all, in file order) of the CSV text (modified)
 * on the model of sp, whose sequences and context are set here; prints
 * llama-perplexity's lines on stdout. 0, or a negative errno with err set
 * (-EINTR after Ctrl-C). */
int ppl_winogrande(struct eng_session_params *sp, char *text, size_t len, int n_tasks,
                   struct fl_err *err);

#endif
