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

struct mc_choice_task {
    struct mc_task seqs; /* question + " " + each answer */
    int prefix;          /* tokens every answer's sequence starts with */
    int32_t *label;      /* the file's, 1 for a correct answer */
};

/* llama.cpp's --multiple-choice-tasks draw (its Winogrande's). */
static int select_tasks(int n_file, int n, int **order)
{
    int *aux = malloc(sizeof(int) * (size_t)n_file), *o = malloc(sizeof(int) * (size_t)n);
    if (!aux || !o) {
        free(aux);
        free(o);
        return -ENOMEM;
    }
    for (int i = 0; i < n_file; i++)
        aux[i] = i;
    struct mc_mt19937 m;
    mc_mt_seed(&m, 1);
    const float scale = 1 / (1.f + (float)UINT32_MAX);
    for (int i = 0, left = n_file; i < n; i++, left--) {
        int j = (int)(scale * (float)mc_mt_next(&m) * (float)left);
        j = j < left ? j : left - 1; /* a draw that rounds to 2^32 in float */
        o[i] = aux[j];
        aux[j] = aux[left - 1];
    }
    free(aux);
    *order = o;
    return 0;
}

static int task_read(const struct fl_tokenizer *tok, struct fl_mc_task *f, int i,
                     struct mc_choice_task *t, struct fl_err *err)
{
    memset(t, 0, sizeof(*t));
    struct mc_task *m = &t->seqs;
    if (!f->question[0] || f->n_answers < 1)
        return fl_err_set(err, -EINVAL, "task %d: an empty question or no answers", i + 1);
    m->n_seq = f->n_answers;
    int shortest = 0;
    for (int s = 0; s < f->n_answers; s++) {
        if (!f->answer[s][0])
            return fl_err_set(err, -EINVAL, "task %d: answer %d is empty", i + 1, s + 1);
        const size_t n = strlen(f->question) + 1 + strlen(f->answer[s]);
        char *text = malloc(n + 1);
        if (!text)
            return fl_err_set(err, -ENOMEM, "out of memory");
        snprintf(text, n + 1, "%s %s", f->question, f->answer[s]);
        m->len[s] = fl_tokenize_alloc(tok, text, n, true, false, &m->tok[s]);
        free(text);
        if (m->len[s] < 0)
            return fl_err_set(err, m->len[s], "task %d: cannot tokenize it", i + 1);
        shortest = s == 0 || m->len[s] < shortest ? m->len[s] : shortest;
    }
    for (bool same = true; same && t->prefix < shortest; t->prefix += same)
        for (int s = 1; s < m->n_seq; s++)
            same = same && m->tok[s][t->prefix] == m->tok[0][t->prefix];
    if (t->prefix >= shortest) /* every answer scores at least one token */
        t->prefix = shortest - 1;
    if (t->prefix < 1)
        return fl_err_set(err, -EINVAL, "task %d: answers with no token after a token of its "
                          "question", i + 1);
    m->row0 = t->prefix - 1;
    mc_task_share(m);
    t->label = f->label; /* taken: the file's task is freed without it */
    f->label = NULL;
    return 0;
}

/* The answer with the highest mean log-probability, summed in float as
 * llama.cpp sums it. */
static int task_choice(const struct mc_choice_task *t, const float *const *rows, int n_vocab)
{
    const struct mc_task *m = &t->seqs;
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
    y->correct += y->tasks[i].label[task_choice(&y->tasks[i], rows, n_vocab)] == 1;
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
            rc = task_read(tok, &f, i, &t[i], err);
        fl_mc_task_free(&f);
        if (rc)
            return rc;
        m[i] = t[i].seqs;
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
    int rc = t && m && (!subset || !select_tasks(n_file, n, &order))
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
    if (r) {
        const int closed = mc_close(r, !rc, err);
        rc = rc ? rc : closed;
    }
    for (int i = 0; t && i < n; i++) {
        mc_task_free(&t[i].seqs);
        free(t[i].label);
    }
    free(t);
    free(m);
    free(order);
    free(pos);
    return rc;
}
