/* multiple-choice.h: `faultline perplexity --multiple-choice`
 * (multiple-choice.c). */
#ifndef FL_CLI_MULTIPLE_CHOICE_H
#define FL_CLI_MULTIPLE_CHOICE_H

#include <stddef.h>
#include <stdint.h>

#include "app/session.h"

/* Scores n_tasks tasks (0: all, in file order) of the binary file's bytes
 * on the model of sp, whose sequences and context are set here; prints
 * llama-perplexity's lines on stdout. 0, or a negative errno with err set
 * (-EINTR after Ctrl-C). */
int ppl_multiple_choice(struct eng_session_params *sp, const uint8_t *buf, size_t len,
                        int n_tasks, struct fl_err *err);

#endif
