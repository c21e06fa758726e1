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

/* The tokens of a + b + c as llama-perplexity tokenizes a task's text
 * (special tokens added, none parsed): their count or -errno; *out
 * malloc'ed. */
struct fl_tokenizer;
int mc_tokenize(const struct fl_tokenizer *tok, const char *a, const char *b, const char *c,
                int32_t **out);
/* How many tokens every sequence of t starts with. */
int mc_common_start(const struct mc_task *t);
/* Sets t->shared from common (mc_common_start) and t->row0 (which must be
 * below every sequence's length). */
void mc_task_share(struct mc_task *t, int common);
/* For tasks scored from the first token past their common start (HellaSwag's
 * endings, multiple choice's answers): that position, cut so that every
 * sequence scores at least one token, with row0 the token before it and
 * shared set; -1 when it would be 0 (no token of common start). */
int mc_task_score_after_start(struct mc_task *t);
/* Frees the sequences of n tasks and the array. */
void mc_tasks_free(struct mc_task *t, int n);

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
/* Closes the session (r may be NULL); when rc is 0, after
 * eng_session_report. Returns rc, else the report's status. */
int mc_close(struct mc_run *r, int rc, struct fl_err *err);

/* llama-perplexity's two draws of n of n_file tasks, each over std::mt19937
 * seeded 1: *order (malloc'ed) the file's task index of each drawn task, in
 * the order drawn; -ENOMEM. HellaSwag's takes libstdc++'s
 * uniform_int_distribution (Lemire's multiply-and-reject) over the tasks
 * left, each drawn one taken out; Winogrande's and multiple choice's scale
 * a draw by 2^-32 in float and fill the drawn slot from the end. */
int mc_draw_uniform(int n_file, int n, int **order);
int mc_draw_scaled(int n_file, int n, int **order);

/* log p(tok) of a logits row as llama-perplexity's compute_logprobs (a
 * float sum) and as its softmax (float probabilities over a double sum). */
float mc_logprob(const float *row, int n_vocab, int32_t tok);
double mc_logprob_softmax(const float *row, int n_vocab, int32_t tok);

#endif
