/* choice-tasks.c: see choice-tasks.h. Each round of tasks takes two
 * forward calls: the shared starts (sequence 0 of each task), then, once
 * the other sequences read those blocks, the rest of every sequence with
 * its rows. */
#include "app/cli/choice-tasks.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/interrupt.h"
#include "model/arch.h"
#include "model/kv-cache.h"
#include "text/tokenizer.h"

#define MC_MAX_TASKS 32 /* tasks in one round of calls */
#define MC_SEQS 128     /* their sequences (llama-perplexity's 4 x 32) */
#define MC_MAX_ROWS 512 /* logits rows of one call (more when one task needs them) */

struct mc_run {
    struct eng_session *s;
    int n_vocab, n_batch, max_rows;
    int32_t *ids;   /* [n_batch] */
    float *rows;    /* [max_rows][n_vocab] */
    struct eng_span spans[MC_SEQS];
};

int mc_tokenize(const struct fl_tokenizer *tok, const char *a, const char *b, const char *c,
                int32_t **out)
{
    const size_t n = strlen(a) + strlen(b) + strlen(c);
    char *text = malloc(n + 1);
    if (!text)
        return -ENOMEM;
    snprintf(text, n + 1, "%s%s%s", a, b, c);
    const int len = fl_tokenize_alloc(tok, text, n, true, false, out);
    free(text);
    return len;
}

int mc_common_start(const struct mc_task *t)
{
    int shortest = t->len[0], common = 0;
    for (int s = 1; s < t->n_seq; s++)
        shortest = t->len[s] < shortest ? t->len[s] : shortest;
    for (bool same = true; same && common < shortest; common += same)
        for (int s = 1; s < t->n_seq; s++)
            same = same && t->tok[s][common] == t->tok[0][common];
    return common;
}

void mc_task_share(struct mc_task *t, int common)
{
    const int upto = common < t->row0 ? common : t->row0;
    t->shared = upto / ENG_KV_BLOCK * ENG_KV_BLOCK;
}

int mc_task_score_after_start(struct mc_task *t)
{
    int shortest = t->len[0];
    for (int s = 1; s < t->n_seq; s++)
        shortest = t->len[s] < shortest ? t->len[s] : shortest;
    const int common = mc_common_start(t);
    const int first = common < shortest ? common : shortest - 1;
    if (first < 1)
        return -1;
    t->row0 = first - 1; /* the common start's last token predicts each one's first */
    mc_task_share(t, common);
    return first;
}

void mc_tasks_free(struct mc_task *t, int n)
{
    for (int i = 0; t && i < n; i++)
        for (int s = 0; s < t[i].n_seq; s++)
            free(t[i].tok[s]);
    free(t);
}

int mc_task_rows(const struct mc_task *t)
{
    int n = 0;
    for (int s = 0; s < t->n_seq; s++)
        n += t->len[s] - t->row0;
    return n;
}

/* Tokens of the second call: every sequence past the shared start. */
static int task_rest(const struct mc_task *t)
{
    int n = 0;
    for (int s = 0; s < t->n_seq; s++)
        n += t->len[s] - t->shared;
    return n;
}

int mc_task_tokens(const struct mc_task *t)
{
    return task_rest(t) > t->shared ? task_rest(t) : t->shared;
}

/* ---- llama.cpp's draws and log-probabilities ---------------------------- */

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

/* libstdc++'s uniform_int_distribution<size_t>(0, n - 1), n <= 2^32. */
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

/* The task indexes 0 .. n_file-1, and room for n drawn. */
static int draw_start(int n_file, int n, int **left, int **order)
{
    *left = malloc(sizeof(int) * (size_t)n_file);
    *order = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!*left || !*order) {
        free(*left);
        free(*order);
        return -ENOMEM;
    }
    for (int i = 0; i < n_file; i++)
        (*left)[i] = i;
    return 0;
}

int mc_draw_uniform(int n_file, int n, int **order)
{
    int *left, *o;
    if (draw_start(n_file, n, &left, &o))
        return -ENOMEM;
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

int mc_draw_scaled(int n_file, int n, int **order)
{
    int *aux, *o;
    if (draw_start(n_file, n, &aux, &o))
        return -ENOMEM;
    struct mt19937 m;
    mt_seed(&m, 1);
    const float scale = 1 / (1.f + (float)UINT32_MAX);
    for (int i = 0, left = n_file; i < n; i++, left--) {
        int j = (int)(scale * (float)mt_next(&m) * (float)left);
        j = j < left ? j : left - 1; /* a draw that rounds to 2^32 in float */
        o[i] = aux[j];
        aux[j] = aux[left - 1];
    }
    free(aux);
    *order = o;
    return 0;
}

double mc_logprob_softmax(const float *row, int n_vocab, int32_t tok)
{
    float max = row[0];
    for (int j = 1; j < n_vocab; j++)
        max = row[j] > max ? row[j] : max;
    double sum = 0;
    for (int j = 0; j < n_vocab; j++)
        sum += expf(row[j] - max);
    return logf((float)(expf(row[tok] - max) / sum));
}

float mc_logprob(const float *row, int n_vocab, int32_t tok)
{
    float max = row[0], sum = 0;
    for (int j = 1; j < n_vocab; j++)
        max = row[j] > max ? row[j] : max;
    for (int j = 0; j < n_vocab; j++)
        sum += expf(row[j] - max);
    return row[tok] - max - logf(sum);
}

/* ---- forward calls ------------------------------------------------------ */

/* Tasks t[0..n): their shared starts in each task's first sequence, read
 * by the others, then the rest of every sequence with its rows. */
static int run_tasks(struct mc_run *r, const struct mc_task *t, int n, struct fl_err *err)
{
    int n_tok = 0, n_span = 0, rc = 0, seq0[MC_MAX_TASKS];
    for (int q = 0; q < eng_session_n_seq(r->s); q++)
        eng_session_seq_free(r->s, q);
    for (int k = 0, next = 0; k < n; next += t[k++].n_seq)
        seq0[k] = next; /* each task's first sequence */
    for (int k = 0; k < n; k++)
        if (t[k].shared > 0) {
            memcpy(r->ids + n_tok, t[k].tok[0], sizeof(int32_t) * (size_t)t[k].shared);
            r->spans[n_span++] = (struct eng_span){ .seq = seq0[k], .n_tok = t[k].shared };
            n_tok += t[k].shared;
        }
    if (n_span) {
        const struct eng_batch b = { .tokens = r->ids, .n_tok = n_tok, .spans = r->spans,
                                     .n_spans = n_span };
        rc = eng_session_forward(r->s, &b, err);
    }
    for (int k = 0; !rc && k < n; k++)
        for (int s = 1; !rc && s < t[k].n_seq && t[k].shared > 0; s++)
            rc = eng_session_seq_share(r->s, seq0[k] + s, seq0[k], t[k].shared, err);
    n_tok = n_span = 0;
    for (int k = 0; !rc && k < n; k++)
        for (int s = 0; s < t[k].n_seq; s++) {
            const int len = t[k].len[s] - t[k].shared;
            memcpy(r->ids + n_tok, t[k].tok[s] + t[k].shared, sizeof(int32_t) * (size_t)len);
            r->spans[n_span++] = (struct eng_span){ .seq = seq0[k] + s, .pos0 = t[k].shared,
                                                    .n_tok = len, .all_rows = true,
                                                    .first_row = t[k].row0 - t[k].shared };
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
static int group_end(const struct mc_run *r, const struct mc_task *t, int first, int n_tasks)
{
    int end = first, shared = 0, rest = 0, rows = 0, seqs = 0;
    while (end < n_tasks && end - first < MC_MAX_TASKS && seqs + t[end].n_seq <= MC_SEQS &&
           shared + t[end].shared <= r->n_batch &&
           rest + task_rest(&t[end]) <= r->n_batch &&
           rows + mc_task_rows(&t[end]) <= r->max_rows) {
        shared += t[end].shared;
        rest += task_rest(&t[end]);
        rows += mc_task_rows(&t[end]);
        seqs += t[end].n_seq;
        end++;
    }
    return end;
}

int mc_open(struct eng_session_params *sp, struct mc_run **out, struct fl_err *err)
{
    struct mc_run *r = calloc(1, sizeof(*r));
    if (!r)
        return fl_err_set(err, -ENOMEM, "out of memory");
    const int n_batch = sp->n_batch > 0 ? sp->n_batch : 2048;
    sp->n_seq = MC_SEQS;
    /* a round: two calls of up to n_batch tokens, a partial block a sequence */
    sp->n_ctx = 2 * n_batch + ENG_KV_BLOCK * sp->n_seq;
    sp->n_batch = n_batch;
    sp->no_prompt_cache = true;
    int rc = eng_session_open(sp, &r->s, err);
    if (!rc) {
        r->n_vocab = (int)eng_session_model(r->s)->hp.n_vocab;
        r->n_batch = eng_session_n_batch(r->s);
        if (!(r->ids = malloc(sizeof(int32_t) * (size_t)r->n_batch)))
            rc = fl_err_set(err, -ENOMEM, "out of memory");
    }
    if (rc)
        return mc_close(r, rc, NULL);
    *out = r;
    return 0;
}

const struct fl_tokenizer *mc_tokenizer(const struct mc_run *r)
{
    return eng_session_tokenizer(r->s);
}

/* Every task fits a round of -b tokens; the rows buffer holds the widest. */
static int check_sizes(struct mc_run *r, const struct mc_task *t, int n, struct fl_err *err)
{
    r->max_rows = MC_MAX_ROWS;
    for (int i = 0; i < n; i++) {
        if (mc_task_tokens(&t[i]) > r->n_batch)
            return fl_err_set(err, -E2BIG, "task %d needs %d tokens in a forward call; -b is %d",
                              i + 1, mc_task_tokens(&t[i]), r->n_batch);
        r->max_rows = mc_task_rows(&t[i]) > r->max_rows ? mc_task_rows(&t[i]) : r->max_rows;
    }
    r->rows = malloc(sizeof(float) * (size_t)r->max_rows * (size_t)r->n_vocab);
    return r->rows ? 0 : fl_err_set(err, -ENOMEM, "out of memory for %d logits rows", r->max_rows);
}

int mc_score(struct mc_run *r, const struct mc_task *t, int n, const char *header,
             mc_score_fn score, void *arg, struct fl_err *err)
{
    int rc = check_sizes(r, t, n, err);
    if (!rc && header)
        fputs(header, stdout);
    for (int i = 0; !rc && i < n;) {
        const int end = group_end(r, t, i, n);
        rc = run_tasks(r, t + i, end - i, err);
        if (!rc && cli_interrupted())
            rc = fl_err_set(err, -EINTR, "interrupted");
        const float *at = r->rows;
        for (; !rc && i < end; i++) {
            const float *rows[MC_MAX_SEQ];
            for (int s = 0; s < t[i].n_seq; s++) {
                rows[s] = at;
                at += (size_t)(t[i].len[s] - t[i].row0) * r->n_vocab;
            }
            rc = score(arg, i, &t[i], rows, r->n_vocab);
        }
    }
    return rc;
}

int mc_close(struct mc_run *r, int rc, struct fl_err *err)
{
    if (!r)
        return rc;
    if (!rc && r->s)
        rc = eng_session_report(r->s, err);
    eng_session_close(r->s);
    free(r->ids);
    free(r->rows);
    free(r);
    return rc;
}
