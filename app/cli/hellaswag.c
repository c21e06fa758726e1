/* hellaswag.c: `faultline perplexity --hellaswag`, llama-perplexity's
 * HellaSwag score (acc_norm): for each task, a context and four endings;
 * the model's choice is the ending whose tokens have the highest mean
 * log-probability after the context, and the score is how often that is
 * the gold ending, with a Wilson 95 % interval, printed after every task as
 * llama.cpp prints it.
 *
 * The data file is llama.cpp's (hellaswag_val_full.txt): six lines a task,
 * the context, the gold ending's index, the four endings. Tasks are drawn as
 * llama.cpp draws them (mt19937 seeded 1, libstdc++'s uniform_int_distribution,
 * each drawn task taken out), so the same --hellaswag-tasks N runs the same
 * tasks in the same order and the running figures can be compared line by
 * line.
 *
 * The four sequences of a task share their context's KV blocks, several
 * tasks to a forward call (choice-tasks.h). */
#include "app/cli/hellaswag.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/choice-tasks.h"
#include "text/eval-tasks.h"
#include "text/tokenizer.h"

/* Beside its sequences (context + " " + each ending: struct mc_task). */
struct hs_task {
    int gold;
    int prefix; /* tokens the four sequences start with (and score from) */
};

/* ---- the file ----------------------------------------------------------- */

/* The four sequences context + " " + ending. */
static int task_read(const struct fl_tokenizer *tok, const struct fl_hellaswag_task *f,
                     struct hs_task *t, struct mc_task *m, struct fl_err *err)
{
    m->n_seq = 4;
    t->gold = f->gold;
    for (int s = 0; s < 4; s++) {
        m->len[s] = mc_tokenize(tok, f->context, " ", f->ending[s], &m->tok[s]);
        if (m->len[s] < 0)
            return fl_err_set(err, m->len[s], "line %d: cannot tokenize the task", f->line);
    }
    if ((t->prefix = mc_task_score_after_start(m)) < 0)
        return fl_err_set(err, -EINVAL, "line %d: a task whose endings have no token after "
                          "its context", f->line);
    return 0;
}

/* ---- scoring ------------------------------------------------------------ */

/* Mean log-probability of each ending; rows[s]: sequence s's rows from
 * the context's last token on. Returns the best ending. */
static int task_choice(const struct hs_task *t, const struct mc_task *m, const float *const *rows,
                       int n_vocab)
{
    int best = 0;
    double best_lp = 0;
    for (int s = 0; s < 4; s++) {
        const int n = m->len[s] - t->prefix; /* tokens scored */
        double lp = mc_logprob_softmax(rows[s], n_vocab, m->tok[s][t->prefix]);
        for (int j = 1; j < n; j++)
            lp += mc_logprob(rows[s] + (size_t)j * n_vocab, n_vocab, m->tok[s][t->prefix + j]);
        lp /= n;
        if (s == 0 || lp > best_lp)
            best = s, best_lp = lp;
    }
    return best;
}

/* The running acc_norm after task i and its Wilson 95 % interval. */
static void print_task(int i, int correct)
{
    const double n = i + 1, freq = correct / n, za = 1.95996398454;
    const double z = za * za / n;
    const double cnf = z * sqrt(n * (4.0 * freq * (1 - freq) + z)) / (za + za);
    const double a = (freq + z * 0.5 - cnf) / (1.0 + z), b = (freq + z * 0.5 + cnf) / (1.0 + z);
    printf("%d\t%3.8lf%%\t[%3.4lf%%, %3.4lf%%]\n", i + 1, freq * 100.0, a * 100.0, b * 100.0);
    fflush(stdout);
}

struct hs_score {
    const struct hs_task *tasks;
    int correct;
};

static int score_task(void *arg, int i, const struct mc_task *m, const float *const *rows,
                      int n_vocab)
{
    struct hs_score *sc = arg;
    sc->correct += task_choice(&sc->tasks[i], m, rows, n_vocab) == sc->tasks[i].gold;
    print_task(i, sc->correct);
    return 0;
}

/* The selected tasks, tokenized. */
static int read_tasks(const struct fl_tokenizer *tok, const struct fl_hellaswag_task *f,
                      const int *order, int n, struct hs_task *t, struct mc_task *m,
                      struct fl_err *err)
{
    for (int i = 0; i < n; i++) {
        int rc = task_read(tok, &f[order[i]], &t[i], &m[i], err);
        if (rc)
            return rc;
    }
    return 0;
}

int ppl_hellaswag(struct eng_session_params *sp, char *text, size_t len, int n_tasks,
                  struct fl_err *err)
{
    struct fl_hellaswag_task *file = NULL;
    const int n_file = fl_hellaswag_parse(text, len, &file, err);
    if (n_file < 0)
        return n_file;
    const int n = n_tasks < n_file ? n_tasks : n_file;
    fprintf(stderr, "hellaswag: loaded %d tasks, selecting %d at random (llama.cpp's draw)\n",
            n_file, n);
    struct mc_run *r = NULL;
    int *order = NULL;
    struct hs_task *t = calloc((size_t)n, sizeof(*t));
    struct mc_task *m = calloc((size_t)n, sizeof(*m));
    int rc = t && m && !mc_draw_uniform(n_file, n, &order) ? 0
                                                           : fl_err_set(err, -ENOMEM, "out of memory");
    if (!rc)
        rc = mc_open(sp, &r, err);
    if (!rc)
        rc = read_tasks(mc_tokenizer(r), file, order, n, t, m, err);
    struct hs_score sc = { .tasks = t };
    if (!rc) {
        rc = mc_score(r, m, n, "\ntask\tacc_norm\t95% confidence interval\n", score_task, &sc,
                      err);
        if (!rc)
            printf("\n");
    }
    rc = mc_close(r, rc, err);
    mc_tasks_free(m, n);
    free(t);
    free(order);
    free(file);
    return rc;
}
