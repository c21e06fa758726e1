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
#include <stdint.h>

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

/* llama-perplexity's --multiple-choice file (ikawrakow's ARC, MMLU,
 * TruthfulQA and HellaSwag sets for llama.cpp), little-endian:
 *   uint32 n_task; uint32 pos[n_task] (each task's byte offset);
 *   a task: string question, then two answer sets (mc1, single correct;
 *   mc2, unused): uint32 n (<= 100), n strings, int32 labels[n];
 *   a string: uint32 length, its bytes. */
#define FL_MC_MAX_ANSWERS 100

struct fl_mc_task {
    char *question;
    int n_answers;
    char **answer;  /* [n_answers] NUL-terminated copies */
    int32_t *label; /* [n_answers] 1: a correct answer */
};

/* The task count and positions: n_task, or -EINVAL ("no tasks", a header
 * past the end) with err set; *pos (malloc'ed) the offsets. */
int fl_mc_header(const uint8_t *buf, size_t len, uint32_t **pos, struct fl_err *err);
/* The task at byte offset `at` (llama.cpp reads it there, whatever comes
 * before): 0, or -EINVAL when it runs past the end or holds more than
 * FL_MC_MAX_ANSWERS answers, -ENOMEM. Free with fl_mc_task_free. */
int fl_mc_task_at(const uint8_t *buf, size_t len, uint64_t at, struct fl_mc_task *t,
                  struct fl_err *err);
void fl_mc_task_free(struct fl_mc_task *t);

#endif
