/* indexer.c: DeepSeek's lightning indexer on the CPU (indexer.h).
 *
 * ggml's CPU op (ggml_lightning_indexer) converts each key to F32 and sums,
 * per head, the F32 dot product, ReLU and the head's weight, in head order;
 * the scores are then cut to the top_k by a partial sort. Here the same
 * sums run over (token, block of positions) items on the pool: a block's
 * keys converted and transposed once, each head's dot products with all of
 * them in one sweep of attention's F32 key-score kernel (each key's sum in
 * dimension order, whatever the CPU level's width), then each token's
 * top_k is found by selection on a copy of its scores, and the positions
 * are taken in ascending order (the order attention reads them).
 * Tokens are scored a group at a time so that the scores stay within a
 * fixed scratch whatever the context. */
#include "backend/cpu/indexer.h"

#include <math.h>

#include "backend/cpu/cpu-backend.h"
#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/threadpool.h"
#include "model/kv-cache.h"

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
    int64_t n_blocks;   /* CPU_INDEXER_KEY_BLOCK blocks per row */
    float *scores;      /* [n_tok][n_kv] */
    float *tmp;         /* per thread: tmp_per floats */
    int64_t tmp_per;
};

/* Scores of token tok[i] for positions [j0, j1) of its sequence (at most a
 * key block). buf: the keys transposed [head_dim][block], a key row, and
 * one head's dot products. */
static void score_block(const struct idx_job *j, int i, int64_t j0, int64_t j1, float *buf)
{
    const struct eng_indexer *p = j->p;
    const int t = j->tok[i], nb = (int)(j1 - j0);
    const int64_t dim = p->head_dim, ld = CPU_INDEXER_KEY_BLOCK;
    const int32_t *cells = eng_kv_seq_cells(j->c->kv, j->b->seq[t]);
    const float *q = j->q + (int64_t)t * p->n_head * dim, *w = j->w + (int64_t)t * p->n_head;
    const float scale = 1.0f / sqrtf((float)(dim * p->n_head));
    const struct fl_attn_kernels *k = &fl_cpu_kernels()->attn;
    const enum fl_type type = eng_kv_type_v(j->c->kv); /* F16, or K's block type */
    const fl_to_float_fn to_f32 = fl_type_traits(type)->to_float;
    float *kt = buf, *row = kt + dim * ld, *qk = row + dim, *s = j->scores + (int64_t)i * j->n_kv;
    for (int c = 0; c < nb; c++) {
        const void *key = eng_kv_v(j->c->kv, j->layer, cells[j0 + c]);
        if (type == FL_TYPE_F16)
            k->f16_to_f32(key, row, dim);
        else
            to_f32(key, row, dim);
        for (int64_t d = 0; d < dim; d++)
            kt[d * ld + c] = row[d];
    }
    for (int c = 0; c < nb; c++)
        s[j0 + c] = 0.0f;
    for (int h = 0; h < p->n_head; h++) { /* heads in order, as ggml sums them */
        k->key_scores(qk, q + (int64_t)h * dim, kt, ld, dim, nb);
        const float wh = w[h] * scale; /* ggml_scale's product first */
        for (int c = 0; c < nb; c++)
            s[j0 + c] += (qk[c] > 0.0f ? qk[c] : 0.0f) * wh;
    }
}

static void score_worker(void *arg, int ith, int nth)
{
    const struct idx_job *j = arg;
    int64_t begin, end;
    fl_split_range((int64_t)j->n_tok * j->n_blocks, ith, nth, &begin, &end);
    float *buf = j->tmp + ith * j->tmp_per;
    for (int64_t it = begin; it < end; it++) {
        const int i = (int)(it / j->n_blocks);
        const int64_t j0 = (it % j->n_blocks) * CPU_INDEXER_KEY_BLOCK, last = j->b->pos[j->tok[i]] + 1;
        if (j0 < last)
            score_block(j, i, j0, last - j0 > CPU_INDEXER_KEY_BLOCK ? j0 + CPU_INDEXER_KEY_BLOCK : last,
                        buf);
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
    j->n_blocks = (j->n_kv + CPU_INDEXER_KEY_BLOCK - 1) / CPU_INDEXER_KEY_BLOCK;
    const double work = (double)j->n_tok * (double)j->n_kv * p->n_head * (double)p->head_dim;
    struct fl_pool *pool = eng_cpu_pool_for(j->c, work);
    const int nth = fl_pool_size(pool);
    j->tmp_per = (cpu_indexer_thread_floats(p->head_dim, j->n_kv) + 15) & ~(int64_t)15;
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
