/* multiple-choice.c: `faultline perplexity --multiple-choice`,
 * llama-perplexity's score over multiple-choice tasks with one correct
 * answer (ARC, MMLU, TruthfulQA's mc1, HellaSwag in ikawrakow's binary
 * files: text/eval-tasks.h): the model's choice is the answer whose tokens
 * after "question " have the highest mean log-probability; printed per task
 * as the running accuracy, then the final accuracy and random chance with
 * their standard errors, as llama.cpp prints them.
 *
 * --multiple-choice-tasks N draws N tasks as llama.cpp draws them (the
 * float-scaled mt19937 of its Winogrande, each read at its recorded byte
 * offset); without it, every task in file order. A task's answers share
 * their common start (choice-tasks.h). */
#include "app/cli/multiple-choice.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/choice-tasks.h"
#include "text/eval-tasks.h"
#include "text/tokenizer.h"

/* Beside its sequences (question + " " + each answer: struct mc_task). */
struct mc_choice_task {
    int prefix;     /* tokens every answer's sequence starts with (and scores from) */
    int32_t *label; /* the file's, 1 for a correct answer */
};

static int task_read(const struct fl_tokenizer *tok, struct fl_mc_task *f, int i,
                     struct mc_choice_task *t, struct mc_task *m, struct fl_err *err)
{
    if (!f->question[0] || f->n_answers < 1)
        return fl_err_set(err, -EINVAL, "task %d: an empty question or no answers", i + 1);
    m->n_seq = f->n_answers;
    for (int s = 0; s < f->n_answers; s++) {
        if (!f->answer[s][0])
            return fl_err_set(err, -EINVAL, "task %d: answer %d is empty", i + 1, s + 1);
        m->len[s] = mc_tokenize(tok, f->question, " ", f->answer[s], &m->tok[s]);
        if (m->len[s] < 0)
            return fl_err_set(err, m->len[s], "task %d: cannot tokenize it", i + 1);
    }
    if ((t->prefix = mc_task_score_after_start(m)) < 0)
        return fl_err_set(err, -EINVAL, "task %d: answers with no token after a token of its "
                          "question", i + 1);
    t->label = f->label; /* taken: the file's task is freed without it */
    f->label = NULL;
    return 0;
}

/* The answer with the highest mean log-probability, summed in float as
 * llama.cpp sums it. */
static int task_choice(const struct mc_choice_task *t, const struct mc_task *m,
                       const float *const *rows, int n_vocab)
{
    int best = 0;
    float best_lp = 0;
    for (int s = 0; s < m->n_seq; s++) {
        float lp = (float)mc_logprob_softmax(rows[s], n_vocab, m->tok[s][t->prefix]);
        int count = 1;
        for (int j = t->prefix; j < m->len[s] - 1; j++, count++)
            lp += mc_logprob(rows[s] + (size_t)(j - m->row0) * n_vocab, n_vocab, m->tok[s][j + 1]);
        lp /= count;
        if (s == 0 || lp > best_lp)
            best = s, best_lp = lp;
    }
    return best;
}

struct mc_tally {
    const struct mc_choice_task *tasks;
    int correct, answers;
};

static int score_task(void *arg, int i, const struct mc_task *m, const float *const *rows,
                      int n_vocab)
{
    struct mc_tally *y = arg;
    y->correct += y->tasks[i].label[task_choice(&y->tasks[i], m, rows, n_vocab)] == 1;
    y->answers += m->n_seq;
    printf("%d\t%.8lf\n", i + 1, 100. * y->correct / (i + 1));
    fflush(stdout);
    return 0;
}

/* Always printed: llama.cpp's "fewer than 100 drawn" test compares the
 * draw with itself after it (its n_task is the draw's by then). */
static void print_final(const struct mc_tally *y, int done)
{
    printf("\n");
    float p = 1.f * y->correct / done, sigma = sqrtf(p * (1 - p) / (done - 1));
    printf("Final result: %.4f +/- %.4f\n", 100.f * p, 100.f * sigma);
    p = 1.f * done / y->answers;
    sigma = sqrtf(p * (1 - p) / (done - 1));
    printf("Random chance: %.4f +/- %.4f\n", 100.f * p, 100.f * sigma);
}

/* The chosen tasks from the file, tokenized. */
static int read_tasks(const struct fl_tokenizer *tok, const uint8_t *buf, size_t len,
                      const uint32_t *pos, const int *order, int n, struct mc_choice_task *t,
                      struct mc_task *m, struct fl_err *err)
{
    for (int i = 0; i < n; i++) {
        struct fl_mc_task f;
        int rc = fl_mc_task_at(buf, len, pos[order ? order[i] : i], &f, err);
        if (!rc)
            rc = task_read(tok, &f, i, &t[i], &m[i], err);
        fl_mc_task_free(&f);
        if (rc)
            return rc;
    }
    return 0;
}

int ppl_multiple_choice(struct eng_session_params *sp, const uint8_t *buf, size_t len,
                        int n_tasks, struct fl_err *err)
{
    uint32_t *pos = NULL;
    const int n_file = fl_mc_header(buf, len, &pos, err);
    if (n_file < 0)
        return n_file;
    const bool subset = n_tasks > 0 && n_tasks < n_file;
    const int n = subset ? n_tasks : n_file;
    fprintf(stderr, "multiple-choice: %d tasks in the file, %s %d\n", n_file,
            subset ? "selecting at random (llama.cpp's draw)" : "scoring all", n);
    struct mc_run *r = NULL;
    int *order = NULL;
    struct mc_choice_task *t = calloc((size_t)n, sizeof(*t));
    struct mc_task *m = calloc((size_t)n, sizeof(*m));
    int rc = t && m && (!subset || !mc_draw_scaled(n_file, n, &order))
                 ? 0 : fl_err_set(err, -ENOMEM, "out of memory");
    if (!rc)
        rc = mc_open(sp, &r, err);
    if (!rc)
        rc = read_tasks(mc_tokenizer(r), buf, len, pos, order, n, t, m, err);
    struct mc_tally y = { .tasks = t };
    if (!rc)
        rc = mc_score(r, m, n, "\ntask\tacc_norm\n", score_task, &y, err);
    if (!rc)
        print_final(&y, n);
    rc = mc_close(r, rc, err);
    mc_tasks_free(m, n);
    for (int i = 0; t && i < n; i++)
        free(t[i].label);
    free(t);
    free(order);
    free(pos);
    return rc;
}
