/* indexer.c: DeepSeek's lightning indexer on the CPU (indexer.h).
 *
 * ggml's CPU op (ggml_lightning_indexer) converts each key to F32 and sums,
 * per head, the F32 dot product, ReLU and the head's weight, in head order;
 * the scores are then cut to the top_k by a partial sort. Here the same
 * sums run over (token, block of positions) items on the pool, then each
 * token's top_k is found by selection on a copy of its scores, and the
 * positions are taken in ascending order (the order attention reads them).
 * Tokens are scored a group at a time so that the scores stay within a
 * fixed scratch whatever the context. */
#include "backend/cpu/indexer.h"

#include <math.h>

#include "backend/cpu/cpu-backend.h"
#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/threadpool.h"
#include "model/kv-cache.h"

#define KEY_BLOCK 256          /* positions per scoring item */

struct idx_job {
    struct eng_ctx *c;
    int layer;
    const struct eng_batch *b;
    const float *q, *w;
    const struct eng_indexer *p;
    const struct eng_attn_sel *sel;
    const int32_t *tok; /* the group's tokens (each sees more than top_k positions) */
    int n_tok;
    int64_t n_kv;       /* scores row length: the group's last position + 1 */
    int64_t n_blocks;   /* KEY_BLOCK blocks per row */
    float *scores;      /* [n_tok][n_kv] */
    float *tmp;         /* per thread: tmp_per floats */
    int64_t tmp_per;
};

static float dot(const float *a, const float *b, int64_t n)
{
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* Scores of token tok[i] for positions [j0, j1) of its sequence. */
static void score_block(const struct idx_job *j, int i, int64_t j0, int64_t j1, float *key)
{
    const struct eng_indexer *p = j->p;
    const int t = j->tok[i];
    const int32_t *cells = eng_kv_seq_cells(j->c->kv, j->b->seq[t]);
    const float *q = j->q + (int64_t)t * p->n_head * p->head_dim, *w = j->w + (int64_t)t * p->n_head;
    const float scale = 1.0f / sqrtf((float)(p->head_dim * p->n_head));
    const struct fl_attn_kernels *k = &fl_cpu_kernels()->attn;
    float *s = j->scores + (int64_t)i * j->n_kv;
    for (int64_t pos = j0; pos < j1; pos++) {
        k->f16_to_f32(eng_kv_v(j->c->kv, j->layer, cells[pos]), key, p->head_dim);
        float score = 0.0f;
        for (int h = 0; h < p->n_head; h++) {
            const float qk = dot(q + (int64_t)h * p->head_dim, key, p->head_dim);
            score += (qk > 0.0f ? qk : 0.0f) * (w[h] * scale); /* ggml_scale's product first */
        }
        s[pos] = score;
    }
}

static void score_worker(void *arg, int ith, int nth)
{
    const struct idx_job *j = arg;
    int64_t begin, end;
    fl_split_range((int64_t)j->n_tok * j->n_blocks, ith, nth, &begin, &end);
    float *key = j->tmp + ith * j->tmp_per;
    for (int64_t it = begin; it < end; it++) {
        const int i = (int)(it / j->n_blocks);
        const int64_t j0 = (it % j->n_blocks) * KEY_BLOCK, last = j->b->pos[j->tok[i]] + 1;
        if (j0 < last)
            score_block(j, i, j0, j0 + KEY_BLOCK < last ? j0 + KEY_BLOCK : last, key);
    }
}

/* The k-th largest of a[0 .. n) (1 <= k <= n, no NaN; a is reordered):
 * quickselect over Hoare partitions around the middle element. */
static float kth_largest(float *a, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1;
    const int64_t want = k - 1;
    while (lo < hi) {
        const float pivot = a[lo + (hi - lo) / 2];
        int64_t i = lo, r = hi;
        while (i <= r) {
            while (a[i] > pivot)
                i++;
            while (a[r] < pivot)
                r--;
            if (i <= r) {
                const float x = a[i];
                a[i++] = a[r];
                a[r--] = x;
            }
        }
        /* a[lo..r] >= pivot >= a[i..hi]; between them, the pivot's equals */
        if (want <= r)
            hi = r;
        else if (want >= i)
            lo = i;
        else
            return a[want];
    }
    return a[want];
}

/* Token tok[i]'s top_k positions, ascending: those above the k-th score,
 * then those equal to it from the earliest on. */
static void select_token(const struct idx_job *j, int i, float *copy)
{
    const int t = j->tok[i], top_k = j->p->top_k;
    const int64_t n = j->b->pos[t] + 1;
    const float *s = j->scores + (int64_t)i * j->n_kv;
    for (int64_t pos = 0; pos < n; pos++) /* a NaN score (a broken weight) never wins */
        copy[pos] = s[pos] == s[pos] ? s[pos] : -INFINITY;
    const float thr = kth_largest(copy, n, top_k);
    int above = 0;
    for (int64_t pos = 0; pos < n; pos++)
        above += s[pos] > thr;
    int32_t *out = j->sel->pos + (int64_t)t * j->sel->stride;
    int got = 0, ties = top_k - above;
    for (int64_t pos = 0; pos < n && got < top_k; pos++) {
        if (s[pos] > thr || (s[pos] == thr && ties-- > 0))
            out[got++] = (int32_t)pos;
    }
    j->sel->n[t] = got;
}

static void select_worker(void *arg, int ith, int nth)
{
    const struct idx_job *j = arg;
    int64_t begin, end;
    fl_split_range(j->n_tok, ith, nth, &begin, &end);
    for (int64_t i = begin; i < end; i++)
        select_token(j, (int)i, j->tmp + ith * j->tmp_per);
}

/* One group of tokens: scores on the pool, then each token's selection. */
static void run_group(struct idx_job *j)
{
    const struct eng_indexer *p = j->p;
    j->n_kv = 0;
    for (int i = 0; i < j->n_tok; i++)
        j->n_kv = j->b->pos[j->tok[i]] + 1 > j->n_kv ? j->b->pos[j->tok[i]] + 1 : j->n_kv;
    j->n_blocks = (j->n_kv + KEY_BLOCK - 1) / KEY_BLOCK;
    const double work = (double)j->n_tok * (double)j->n_kv * p->n_head * (double)p->head_dim;
    struct fl_pool *pool = eng_cpu_pool_for(j->c, work);
    const int nth = fl_pool_size(pool);
    j->tmp_per = ((j->n_kv > p->head_dim ? j->n_kv : p->head_dim) + 15) & ~(int64_t)15;
    const struct eng_scratch_mark mark = eng_scratch_mark(j->c->arena);
    j->tmp = eng_scratch_f32(j->c, j->tmp_per * nth);
    j->scores = eng_scratch_f32(j->c, (int64_t)j->n_tok * j->n_kv);
    fl_pool_run(pool, score_worker, j);
    fl_pool_run(pool, select_worker, j);
    eng_scratch_release(j->c->arena, mark);
}

void cpu_indexer(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *q,
                 const float *w, const struct eng_indexer *p, const struct eng_attn_sel *sel)
{
    int32_t *tok = eng_scratch(c, sizeof(int32_t) * (size_t)b->n_tok);
    int n = 0;
    for (int t = 0; t < b->n_tok; t++) {
        sel->n[t] = -1; /* sees no more than top_k: reads them all */
        if (b->pos[t] + 1 > p->top_k)
            tok[n++] = t;
    }
    struct idx_job j = { .c = c, .layer = layer, .b = b, .q = q, .w = w, .p = p, .sel = sel };
    for (int i0 = 0; i0 < n;) {
        /* as many tokens as keep their scores within CPU_INDEXER_SCORE_FLOATS (one at least) */
        int i1 = i0 + 1;
        int64_t widest = b->pos[tok[i0]] + 1;
        while (i1 < n) {
            const int64_t wide = b->pos[tok[i1]] + 1 > widest ? b->pos[tok[i1]] + 1 : widest;
            if ((int64_t)(i1 + 1 - i0) * wide > CPU_INDEXER_SCORE_FLOATS)
                break;
            widest = wide;
            i1++;
        }
        j.tok = tok + i0, j.n_tok = i1 - i0;
        run_group(&j);
        i0 = i1;
    }
}
