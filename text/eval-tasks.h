/* eval-tasks.h: the data files of llama-perplexity's multiple-choice
 * scores, read as llama.cpp reads them (`faultline perplexity --hellaswag`
 * and `--winogrande`: app/cli/hellaswag.c, winogrande.c).
 *
 * HellaSwag (hellaswag_val_full.txt): six lines a task, the context, the
 * gold ending's index (0-3), four endings. Winogrande
 * (winogrande-debiased-eval.csv): index, sentence with one '_' (quoted when
 * it holds commas), choice 1, choice 2, answer (1 or 2); a line that is not
 * a task is skipped, as llama.cpp skips it (a header, say).
 *
 * Both parsers cut the text in place (it must stay alive while the tasks
 * are used) and, as llama.cpp's -f does, drop one final newline first; the
 * Winogrande reader then never reads the last line, as llama.cpp's never
 * does (its getline loop stops at the end of the text). */
#ifndef FL_EVAL_TASKS_H
#define FL_EVAL_TASKS_H

#include <stddef.h>

#include "base/error.h"

struct fl_hellaswag_task {
    const char *context, *ending[4];
    int gold; /* 0..3 */
    int line; /* of its context, 1-based */
};

/* The tasks, in file order, or -EINVAL (lines not a multiple of 6, a gold
 * index that is not 0-3: "line N: ..." in err), -ENOMEM. Free *out. */
int fl_hellaswag_parse(char *text, size_t len, struct fl_hellaswag_task **out,
                       struct fl_err *err);

struct fl_winogrande_task {
    const char *first, *second; /* the sentence before and after its '_' */
    const char *choice[2];
    int answer; /* 1 or 2 */
    int line;   /* 1-based */
};

/* The tasks, in file order (their count; -ENOMEM); *skipped: lines that are
 * not tasks, *first_skip the first one's number. Free *out. */
int fl_winogrande_parse(char *text, size_t len, struct fl_winogrande_task **out, int *skipped,
                        int *first_skip);

#endif
