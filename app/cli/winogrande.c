/* winogrande.c: `faultline perplexity --winogrande`, llama-perplexity's
 * Winogrande score: a sentence with a blank and two choices for it; the
 * model's answer is the choice after which the rest of the sentence is
 * the more likely (mean log-probability of its tokens, the last left out
 * when there are several), printed per task and as a final score with its
 * standard error, as llama.cpp prints them.
 *
 * The data file is llama.cpp's CSV (text/eval-tasks.h: index,
 * sentence with one '_', choice 1, choice 2, answer 1 or 2; a quoted
 * sentence may hold commas). llama.cpp's reading is kept so that scores
 * compare: a line it cannot read is skipped (a header, say), and the last
 * line of the file is never read (its reader stops at the end of the text,
 * which its -f left without a final newline). --winogrande-tasks N draws N
 * tasks as it draws them (mt19937 seeded 1, scaled in float, the drawn
 * slot filled from the end); without it, every task in file order. Where
 * the rest of a sentence is 3 tokens or shorter, llama.cpp scores the
 * choice words too, and the second choice's first token then reads the
 * first sequence's last logits (its FIXME); kept too, for the same
 * numbers. The two sequences share their common start (choice-tasks.h). */
#include "app/cli/winogrande.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/choice-tasks.h"
#include "text/eval-tasks.h"
#include "text/tokenizer.h"

#define MIN_TRAILING 3 /* llama.cpp's k_min_trailing_ctx */

/* Beside its sequences (first + choice + second: struct mc_task). */
struct wg_task {
    int answer;
    int common;  /* tokens the two sequences start with */
    int base[2]; /* tokens of first + choice alone */
};

static int task_read(const struct fl_tokenizer *tok, const struct fl_winogrande_task *w,
                     struct wg_task *t, struct mc_task *m, struct fl_err *err)
{
    m->n_seq = 2;
    t->answer = w->answer;
    for (int s = 0; s < 2; s++) {
        int32_t *base = NULL;
        m->len[s] = mc_tokenize(tok, w->first, w->choice[s], w->second, &m->tok[s]);
        t->base[s] = m->len[s] < 0 ? m->len[s] : mc_tokenize(tok, w->first, w->choice[s], "", &base);
        free(base);
        if (m->len[s] < 0 || t->base[s] < 0)
            return fl_err_set(err, m->len[s] < 0 ? m->len[s] : t->base[s], "line %d: cannot "
                              "tokenize it", w->line);
        if (m->len[s] < 2)
            return fl_err_set(err, -EINVAL, "line %d: a sentence of %d token", w->line, m->len[s]);
    }
    t->common = mc_common_start(m);
    /* every row llama.cpp reads: the common start's last, each choice's
     * base on, the first sequence's last */
    int row0 = t->common - 1;
    for (int s = 0; s < 2; s++)
        row0 = t->base[s] - 1 < row0 ? t->base[s] - 1 : row0;
    m->row0 = row0 < 0 ? 0 : row0;
    mc_task_share(m, t->common);
    return 0;
}

/* The row llama.cpp's batch holds at `index` of a task's logits: 0 the
 * common start's last token, then the first sequence's tokens from the
 * common start on, then the second's. NULL outside them. */
static const float *llama_row(const struct wg_task *t, const struct mc_task *m,
                              const float *const *rows, int n_vocab, long index)
{
    const long n0 = m->len[0] - t->common, n1 = m->len[1] - t->common;
    int s = 0;
    long pos = t->common - 1 + index;
    if (index > n0) {
        s = 1;
        pos = t->common - 1 + (index - n0);
    }
    if (index < 0 || index > n0 + n1 || pos < m->row0 || pos >= m->len[s])
        return NULL;
    return rows[s] + (size_t)(pos - m->row0) * n_vocab;
}

/* One choice's score: the mean log-probability of its sequence's tokens
 * after base (the last one left out when there are several), summed in
 * float from the rows llama.cpp reads. */
static float choice_score(const struct wg_task *t, const struct mc_task *m, int s,
                          bool skip_choice, const float *const *rows, int n_vocab)
{
    const int base = skip_choice ? t->base[s] : t->common;
    const int last = m->len[s] - base > 1 ? 1 : 0;
    /* the first row's index in llama.cpp's batch (see llama_row) */
    long index = s == 0 ? base - t->common : (m->len[0] - t->common) + (base - t->common);
    float score = 0;
    for (int j = base - 1; j < m->len[s] - 1 - last; j++, index++) {
        const float *row = llama_row(t, m, rows, n_vocab, index);
        if (!row && j >= m->row0) /* an index llama.cpp would read out of its task: the right row */
            row = rows[s] + (size_t)(j - m->row0) * n_vocab;
        if (row)
            score += mc_logprob(row, n_vocab, m->tok[s][j + 1]);
    }
    return score / (float)(m->len[s] - base - last);
}

struct wg_score {
    const struct wg_task *tasks;
    int correct;
};

static int score_task(void *arg, int i, const struct mc_task *m, const float *const *rows,
                      int n_vocab)
{
    struct wg_score *sc = arg;
    const struct wg_task *t = &sc->tasks[i];
    const bool skip = m->len[0] - t->common > MIN_TRAILING && m->len[1] - t->common > MIN_TRAILING;
    const float s1 = choice_score(t, m, 0, skip, rows, n_vocab);
    const float s2 = choice_score(t, m, 1, skip, rows, n_vocab);
    const int result = s1 > s2 ? 1 : 2;
    sc->correct += result == t->answer;
    printf("%d\t%.4lf\t%10.6f  %10.6f  %d  %d\n", i + 1, 100.0 * sc->correct / (i + 1), s1, s2,
           result, t->answer);
    fflush(stdout);
    return 0;
}

static void print_final(int correct, int done)
{
    printf("\n");
    if (done < 100) {
        fprintf(stderr, "winogrande: %d tasks, too few for a final score (100 or more)\n", done);
        return;
    }
    const float p = 1.f * correct / done;
    const float sigma = 100.f * sqrtf(p * (1 - p) / (done - 1));
    printf("Final Winogrande score(%d tasks): %.4lf +/- %.4lf\n", done, 100 * p, sigma);
}

static int read_tasks(const struct fl_tokenizer *tok, const struct fl_winogrande_task *w,
                      const int *order, int n, struct wg_task *t, struct mc_task *m,
                      struct fl_err *err)
{
    for (int i = 0; i < n; i++) {
        int rc = task_read(tok, &w[order ? order[i] : i], &t[i], &m[i], err);
        if (rc)
            return rc;
    }
    return 0;
}

int ppl_winogrande(struct eng_session_params *sp, char *text, size_t len, int n_tasks,
                   struct fl_err *err)
{
    struct fl_winogrande_task *w = NULL;
    int skipped = 0, first_skip = 0;
    const int n_file = fl_winogrande_parse(text, len, &w, &skipped, &first_skip);
    if (n_file < 0)
        return fl_err_set(err, n_file, "out of memory");
    if (skipped)
        fprintf(stderr, "winogrande: %d lines are not tasks (index,sentence with _,choice 1,"
                "choice 2,answer 1|2), skipped as llama.cpp skips them (the first: line %d)\n",
                skipped, first_skip);
    if (n_file == 0) {
        free(w);
        return fl_err_set(err, -EINVAL, "no tasks in the file (llama.cpp's Winogrande CSV; its "
                          "last line is not read)");
    }
    const int n = n_tasks > 0 && n_tasks < n_file ? n_tasks : n_file;
    fprintf(stderr, "winogrande: loaded %d tasks, %s %d\n", n_file,
            n < n_file ? "selecting at random (llama.cpp's draw)" : "scoring all", n);
    struct mc_run *r = NULL;
    int *order = NULL;
    struct wg_task *t = calloc((size_t)n, sizeof(*t));
    struct mc_task *m = calloc((size_t)n, sizeof(*m));
    int rc = t && m && (n == n_file || !mc_draw_scaled(n_file, n, &order))
                 ? 0 : fl_err_set(err, -ENOMEM, "out of memory");
    if (!rc)
        rc = mc_open(sp, &r, err);
    if (!rc)
        rc = read_tasks(mc_tokenizer(r), w, order, n, t, m, err);
    struct wg_score sc = { .tasks = t };
    if (!rc)
        rc = mc_score(r, m, n, NULL, score_task, &sc, err);
    if (!rc)
        print_final(sc.correct, n);
    rc = mc_close(r, rc, err);
    mc_tasks_free(m, n);
    free(t);
    free(order);
    free(w);
    return rc;
}
