/* choice-tasks.h: what llama-perplexity's multiple-choice scores share
 * (HellaSwag: hellaswag.c; Winogrande: winogrande.c; --multiple-choice:
 * multiple-choice.c): tasks of a few sequences that start with the same
 * tokens, several tasks to a round of two forward calls (at most 32 tasks
 * and 128 sequences), the common start run once and its whole KV blocks read by
 * the task's other sequences (eng_session_seq_share; a recurrent model's
 * state copied), and the logits rows of each sequence from a given position
 * on handed to the scorer. Also llama.cpp's random draw (std::mt19937 and
 * libstdc++'s uniform_int_distribution) and its log-probabilities. */
#ifndef FL_CLI_CHOICE_TASKS_H
#define FL_CLI_CHOICE_TASKS_H

#include <stdint.h>

#include "app/session.h"

#define MC_MAX_SEQ 100 /* sequences of a task (text/eval-tasks.h's FL_MC_MAX_ANSWERS) */

struct mc_task {
    int n_seq;
    int32_t *tok[MC_MAX_SEQ];
    int len[MC_MAX_SEQ];
    int row0;   /* rows are wanted for positions row0 .. len-1 of every sequence */
    int shared; /* positions run once (whole KV blocks, at most row0 and the common start) */
};

/* Sets t->shared from the sequences' common start and t->row0 (which must
 * be below every sequence's length). */
void mc_task_share(struct mc_task *t);
void mc_task_free(struct mc_task *t);

/* Logits rows the task's sequences get, and tokens the larger of its two
 * calls takes (the shared start; the rest of every sequence). */
int mc_task_rows(const struct mc_task *t);
int mc_task_tokens(const struct mc_task *t);

/* Called for each task in order: rows[s] holds sequence s's rows for
 * positions row0 .. len-1. Nonzero stops the run with that status. */
typedef int (*mc_score_fn)(void *arg, int i, const struct mc_task *t, const float *const *rows,
                           int n_vocab);

/* Opens a session on sp (its sequences and context set here); then checks
 * that every task fits a forward call of -b, prints header (NULL: none) on
 * stdout, and scores the tasks in order. 0, a negative errno with err set
 * (-EINTR after Ctrl-C, -E2BIG for a task larger than -b), or score's
 * status. The session's tokenizer is needed before the tasks exist: open
 * with mc_open, then run with mc_score. */
struct mc_run;
int mc_open(struct eng_session_params *sp, struct mc_run **out, struct fl_err *err);
const struct fl_tokenizer *mc_tokenizer(const struct mc_run *r);
int mc_score(struct mc_run *r, const struct mc_task *t, int n, const char *header,
             mc_score_fn score, void *arg, struct fl_err *err);
/* Closes the session after eng_session_report when ok. */
int mc_close(struct mc_run *r, bool ok, struct fl_err *err);

/* llama.cpp's draw: std::mt19937 seeded as given, and libstdc++'s
 * uniform_int_distribution<size_t>(0, n - 1) over it (Lemire's
 * multiply-and-reject), n <= 2^32. */
struct mc_mt19937 {
    uint32_t s[624];
    int i;
};
void mc_mt_seed(struct mc_mt19937 *m, uint32_t seed);
uint32_t mc_mt_next(struct mc_mt19937 *m);
uint32_t mc_mt_below(struct mc_mt19937 *m, uint32_t n);

/* log p(tok) of a logits row as llama-perplexity's compute_logprobs (a
 * float sum) and as its softmax (float probabilities over a double sum). */
float mc_logprob(const float *row, int n_vocab, int32_t tok);
double mc_logprob_softmax(const float *row, int n_vocab, int32_t tok);

#endif
