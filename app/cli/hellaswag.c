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
 * The four sequences of a task share their context: it runs once in one
 * sequence, up to its last whole KV block, which the other three then read
 * (eng_session_seq_share; a recurrent model's state is copied there too),
 * and the rest of each sequence runs in a second forward call with the rows
 * of the endings' tokens. Tasks go several at a time into each call. */
#include "app/cli/hellaswag.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/interrupt.h"
#include "model/arch.h"
#include "model/kv-cache.h"
#include "text/tokenizer.h"

#define HS_MAX_TASKS 32  /* tasks in one forward call (4 sequences each) */
#define HS_MAX_ROWS 512  /* logits rows of one call (more when one task needs them) */

struct hs_task {
    int gold;
    int32_t *tok[4];
    int len[4];
    int prefix; /* tokens the four sequences start with */
    int shared; /* the prefix up to whole KV blocks, short of its last token */
};

/* ---- llama.cpp's draw: std::mt19937(1) and libstdc++'s
 * uniform_int_distribution<size_t>, which maps a 32-bit draw into a range
 * by Lemire's multiply-and-reject ---------------------------------------- */

struct mt19937 {
    uint32_t s[624];
    int i;
};

static void mt_seed(struct mt19937 *m, uint32_t seed)
{
    m->s[0] = seed;
    for (int i = 1; i < 624; i++)
        m->s[i] = 1812433253u * (m->s[i - 1] ^ (m->s[i - 1] >> 30)) + (uint32_t)i;
    m->i = 624;
}

static uint32_t mt_next(struct mt19937 *m)
{
    if (m->i == 624) {
        for (int k = 0; k < 624; k++) {
            const uint32_t y = (m->s[k] & 0x80000000u) | (m->s[(k + 1) % 624] & 0x7fffffffu);
            m->s[k] = m->s[(k + 397) % 624] ^ (y >> 1) ^ (y & 1 ? 0x9908b0dfu : 0);
        }
        m->i = 0;
    }
    uint32_t y = m->s[m->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

/* A draw in [0, n), n <= 2^32. */
static uint32_t mt_below(struct mt19937 *m, uint32_t n)
{
    uint64_t product = (uint64_t)mt_next(m) * n;
    uint32_t low = (uint32_t)product;
    if (low < n) {
        const uint32_t threshold = (uint32_t)-n % n;
        while (low < threshold) {
            product = (uint64_t)mt_next(m) * n;
            low = (uint32_t)product;
        }
    }
    return (uint32_t)(product >> 32);
}

/* ---- the file ----------------------------------------------------------- */

/* The text's lines (as std::getline splits it, after llama.cpp's -f drops
 * one final newline): pointers into text, which is modified. */
static int split_lines(char *text, size_t len, char ***out)
{
    if (len && text[len - 1] == '\n')
        text[--len] = 0;
    int n = 0, cap = 0;
    char **lines = NULL;
    for (size_t at = 0; len && at <= len;) {
        char *nl = memchr(text + at, '\n', len - at);
        const size_t end = nl ? (size_t)(nl - text) : len;
        if (n == cap) {
            char **l = realloc(lines, sizeof(*l) * (size_t)(cap = cap ? 2 * cap : 1024));
            if (!l) {
                free(lines);
                return -ENOMEM;
            }
            lines = l;
        }
        text[end] = 0;
        lines[n++] = text + at;
        at = end + 1;
        if (!nl)
            break;
    }
    *out = lines;
    return n;
}

static void task_free(struct hs_task *t)
{
    for (int s = 0; s < 4; s++)
        free(t->tok[s]);
}

/* Task from lines l[0..5]: the four sequences context + " " + ending. */
static int task_read(const struct fl_tokenizer *tok, char *const *l, int line0, struct hs_task *t,
                     struct fl_err *err)
{
    memset(t, 0, sizeof(*t));
    char *end;
    const long gold = strtol(l[1], &end, 10);
    if (end == l[1] || *end || gold < 0 || gold > 3)
        return fl_err_set(err, -EINVAL, "line %d: the gold ending's index is '%s', not 0-3",
                          line0 + 2, l[1]);
    t->gold = (int)gold;
    for (int s = 0; s < 4; s++) {
        const size_t n = strlen(l[0]) + 1 + strlen(l[2 + s]);
        char *text = malloc(n + 1);
        if (!text)
            return fl_err_set(err, -ENOMEM, "out of memory");
        snprintf(text, n + 1, "%s %s", l[0], l[2 + s]);
        t->len[s] = fl_tokenize_alloc(tok, text, n, true, false, &t->tok[s]);
        free(text);
        if (t->len[s] < 0)
            return fl_err_set(err, t->len[s], "line %d: cannot tokenize the task", line0 + 1);
    }
    int shortest = t->len[0];
    for (int s = 1; s < 4; s++)
        shortest = t->len[s] < shortest ? t->len[s] : shortest;
    while (t->prefix < shortest && t->tok[0][t->prefix] == t->tok[1][t->prefix] &&
           t->tok[0][t->prefix] == t->tok[2][t->prefix] &&
           t->tok[0][t->prefix] == t->tok[3][t->prefix])
        t->prefix++;
    /* every ending scores at least one token after a token of context */
    if (t->prefix >= shortest)
        t->prefix = shortest - 1;
    if (t->prefix < 1)
        return fl_err_set(err, -EINVAL, "line %d: a task whose endings have no token after "
                          "its context", line0 + 1);
    t->shared = (t->prefix - 1) / ENG_KV_BLOCK * ENG_KV_BLOCK;
    return 0;
}

/* llama.cpp's selection: n tasks drawn at random, each taken out of the
 * ones left. order[i]: the file's task index of the i-th task. */
static int select_tasks(int n_file, int n, int **order)
{
    int *left = malloc(sizeof(int) * (size_t)n_file), *o = malloc(sizeof(int) * (size_t)n);
    if (!left || !o) {
        free(left);
        free(o);
        return -ENOMEM;
    }
    for (int i = 0; i < n_file; i++)
        left[i] = i;
    struct mt19937 m;
    mt_seed(&m, 1);
    for (int i = 0, n_left = n_file; i < n; i++, n_left--) {
        const uint32_t k = mt_below(&m, (uint32_t)n_left);
        o[i] = left[k];
        memmove(left + k, left + k + 1, sizeof(int) * (size_t)(n_left - 1 - (int)k));
    }
    free(left);
    *order = o;
    return 0;
}

/* ---- scoring ------------------------------------------------------------ */

/* log p(tok) from a row as llama.cpp's first ending token: float
 * probabilities normalised by a double sum, then a float log. */
static double first_logprob(const float *row, int n_vocab, int32_t tok)
{
    float max = row[0];
    for (int j = 1; j < n_vocab; j++)
        max = row[j] > max ? row[j] : max;
    double sum = 0;
    for (int j = 0; j < n_vocab; j++)
        sum += expf(row[j] - max);
    return logf((float)(expf(row[tok] - max) / sum));
}

/* log p(tok) as llama.cpp's compute_logprobs: a float sum. */
static float logprob(const float *row, int n_vocab, int32_t tok)
{
    float max = row[0], sum = 0;
    for (int j = 1; j < n_vocab; j++)
        max = row[j] > max ? row[j] : max;
    for (int j = 0; j < n_vocab; j++)
        sum += expf(row[j] - max);
    return row[tok] - max - logf(sum);
}

/* Mean log-probability of each ending; rows: the task's rows in span order
 * (sequence s: positions prefix-1 .. len-1). Returns the best ending. */
static int task_choice(const struct hs_task *t, const float *rows, int n_vocab)
{
    int best = 0;
    double best_lp = 0;
    for (int s = 0; s < 4; s++) {
        const int n = t->len[s] - t->prefix; /* tokens scored */
        double lp = first_logprob(rows, n_vocab, t->tok[s][t->prefix]);
        for (int j = 1; j < n; j++)
            lp += logprob(rows + (size_t)j * n_vocab, n_vocab, t->tok[s][t->prefix + j]);
        lp /= n;
        if (s == 0 || lp > best_lp)
            best = s, best_lp = lp;
        rows += (size_t)(n + 1) * n_vocab;
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

/* ---- forward calls ------------------------------------------------------ */

struct hs_run {
    struct eng_session *s;
    int n_vocab, n_batch, max_rows;
    int32_t *ids;    /* [n_batch] */
    float *rows;     /* [HS_MAX_ROWS][n_vocab] */
    struct eng_span spans[4 * HS_MAX_TASKS];
};

static int task_rows(const struct hs_task *t)
{
    return t->len[0] + t->len[1] + t->len[2] + t->len[3] - 4 * t->prefix + 4;
}

static int task_tokens(const struct hs_task *t)
{
    return t->len[0] + t->len[1] + t->len[2] + t->len[3] - 4 * t->shared;
}

/* Tasks t[0..n): their shared contexts in sequences 4k, read by 4k+1..4k+3,
 * then the rest of every sequence with the endings' rows. */
static int run_tasks(struct hs_run *r, const struct hs_task *t, int n, struct fl_err *err)
{
    int n_tok = 0, n_span = 0, rc = 0;
    for (int q = 0; q < eng_session_n_seq(r->s); q++)
        eng_session_seq_free(r->s, q);
    for (int k = 0; k < n; k++)
        if (t[k].shared > 0) {
            memcpy(r->ids + n_tok, t[k].tok[0], sizeof(int32_t) * (size_t)t[k].shared);
            r->spans[n_span++] = (struct eng_span){ .seq = 4 * k, .n_tok = t[k].shared };
            n_tok += t[k].shared;
        }
    if (n_span) {
        const struct eng_batch b = { .tokens = r->ids, .n_tok = n_tok, .spans = r->spans,
                                     .n_spans = n_span };
        rc = eng_session_forward(r->s, &b, err);
    }
    for (int k = 0; !rc && k < n; k++)
        for (int s = 1; !rc && s < 4 && t[k].shared > 0; s++)
            rc = eng_session_seq_share(r->s, 4 * k + s, 4 * k, t[k].shared, err);
    n_tok = n_span = 0;
    for (int k = 0; !rc && k < n; k++)
        for (int s = 0; s < 4; s++) {
            const int len = t[k].len[s] - t[k].shared;
            memcpy(r->ids + n_tok, t[k].tok[s] + t[k].shared, sizeof(int32_t) * (size_t)len);
            r->spans[n_span++] = (struct eng_span){ .seq = 4 * k + s, .pos0 = t[k].shared,
                                                    .n_tok = len, .all_rows = true,
                                                    .first_row = t[k].prefix - 1 - t[k].shared };
            n_tok += len;
        }
    if (!rc) {
        const struct eng_batch b = { .tokens = r->ids, .n_tok = n_tok, .spans = r->spans,
                                     .n_spans = n_span, .logits = r->rows };
        rc = eng_session_forward(r->s, &b, err);
    }
    return rc;
}

/* The tasks from `first` that go into one round of calls. */
static int group_end(const struct hs_run *r, const struct hs_task *t, int first, int n_tasks)
{
    int end = first, tokens = 0, rows = 0;
    while (end < n_tasks && end - first < HS_MAX_TASKS &&
           tokens + task_tokens(&t[end]) <= r->n_batch && rows + task_rows(&t[end]) <= r->max_rows) {
        tokens += task_tokens(&t[end]);
        rows += task_rows(&t[end]);
        end++;
    }
    return end;
}

static int score_tasks(struct hs_run *r, const struct hs_task *t, int n_tasks, struct fl_err *err)
{
    int correct = 0, rc = 0;
    printf("\ntask\tacc_norm\t95%% confidence interval\n");
    for (int i = 0; !rc && i < n_tasks;) {
        const int end = group_end(r, t, i, n_tasks);
        rc = run_tasks(r, t + i, end - i, err);
        if (!rc && cli_interrupted())
            rc = fl_err_set(err, -EINTR, "interrupted");
        const float *rows = r->rows;
        for (; !rc && i < end; i++) {
            correct += task_choice(&t[i], rows, r->n_vocab) == t[i].gold;
            print_task(i, correct);
            rows += (size_t)task_rows(&t[i]) * r->n_vocab;
        }
    }
    printf("\n");
    return rc;
}

/* Every task fits a forward call of n_batch tokens (the rows buffer is
 * made to hold the widest); the rows the widest needs. */
static int check_sizes(const struct hs_task *t, int n, int n_batch, const int *order,
                       int *max_rows, struct fl_err *err)
{
    *max_rows = HS_MAX_ROWS;
    for (int i = 0; i < n; i++) {
        if (task_tokens(&t[i]) > n_batch)
            return fl_err_set(err, -E2BIG, "the task at line %d needs %d tokens in a forward "
                              "call; -b is %d", 6 * order[i] + 1, task_tokens(&t[i]), n_batch);
        *max_rows = task_rows(&t[i]) > *max_rows ? task_rows(&t[i]) : *max_rows;
    }
    return 0;
}

/* The selected tasks, tokenized. */
static int read_tasks(const struct fl_tokenizer *tok, char *const *lines, const int *order, int n,
                      struct hs_task *t, struct fl_err *err)
{
    for (int i = 0; i < n; i++) {
        int rc = task_read(tok, lines + 6 * order[i], 6 * order[i], &t[i], err);
        if (rc)
            return rc;
    }
    return 0;
}

int ppl_hellaswag(struct eng_session_params *sp, char *text, size_t len, int n_tasks,
                  struct fl_err *err)
{
    char **lines = NULL;
    const int n_lines = split_lines(text, len, &lines);
    if (n_lines < 0)
        return fl_err_set(err, n_lines, "out of memory");
    if (n_lines == 0 || n_lines % 6) {
        free(lines);
        return fl_err_set(err, -EINVAL, "the file has %d lines, not a multiple of 6 (HellaSwag's "
                          "context, gold index and four endings a task)", n_lines);
    }
    const int n_file = n_lines / 6, n = n_tasks < n_file ? n_tasks : n_file;
    fprintf(stderr, "hellaswag: loaded %d tasks, selecting %d at random (llama.cpp's draw)\n",
            n_file, n);
    struct hs_run r = { 0 };
    const int n_batch = sp->n_batch > 0 ? sp->n_batch : 2048;
    sp->n_seq = 4 * HS_MAX_TASKS;
    sp->n_ctx = n_batch + ENG_KV_BLOCK * sp->n_seq; /* a call's tokens, a partial block each */
    sp->n_batch = n_batch;
    sp->no_prompt_cache = true;
    int *order = NULL;
    struct hs_task *t = calloc((size_t)n, sizeof(*t));
    int rc = t && !select_tasks(n_file, n, &order) ? 0 : fl_err_set(err, -ENOMEM, "out of memory");
    if (!rc)
        rc = eng_session_open(sp, &r.s, err);
    if (!rc)
        rc = read_tasks(eng_session_tokenizer(r.s), lines, order, n, t, err);
    if (!rc) {
        r.n_vocab = (int)eng_session_model(r.s)->hp.n_vocab;
        r.n_batch = eng_session_n_batch(r.s);
        rc = check_sizes(t, n, r.n_batch, order, &r.max_rows, err);
    }
    if (!rc) {
        r.ids = malloc(sizeof(int32_t) * (size_t)r.n_batch);
        r.rows = malloc(sizeof(float) * (size_t)r.max_rows * (size_t)r.n_vocab);
        rc = r.ids && r.rows ? score_tasks(&r, t, n, err) : fl_err_set(err, -ENOMEM, "out of memory");
    }
    if (!rc)
        rc = eng_session_report(r.s, err);
    for (int i = 0; t && i < n; i++)
        task_free(&t[i]);
    free(t);
    free(order);
    free(lines);
    free(r.ids);
    free(r.rows);
    eng_session_close(r.s);
    return rc;
}
