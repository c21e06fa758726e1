/* msa.c: MiniMax's sparse attention block selection on the CPU (msa.h).
 *
 * llama.cpp (src/models/minimax-m3.cpp) scores every visible position by
 * an F32 dot product of the indexer query with the position's indexer key,
 * takes each block's largest score (pool_2d max), adds 1e30 to the local
 * blocks and keeps the top_k blocks. Here the items are tokens on the pool:
 * a token's keys are converted and transposed a block of positions at a
 * time and every head's dot products taken in one sweep of attention's F32
 * key-score kernel, folded into per-block maxima as they come. */
#include "backend/cpu/msa.h"

#include <math.h>

#include "backend/cpu/cpu-backend.h"
#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/threadpool.h"
#include "model/kv-cache.h"

#define KEY_BLOCK 256 /* positions converted and scored together */

struct msa_job {
    struct eng_ctx *c;
    int layer;
    const struct eng_batch *b;
    const float *q;
    const struct eng_msa *p;
    const struct eng_attn_sel *sel;
    int64_t n_blocks;  /* block maxima per head: the batch's widest */
    float *tmp;
    int64_t tmp_per;
};

int64_t cpu_msa_thread_floats(const struct eng_msa *p, int64_t max_pos)
{
    const int64_t blocks = max_pos / p->block + 1;
    return (p->head_dim + 2) * KEY_BLOCK + p->head_dim + (int64_t)p->n_head * blocks + 16;
}

/* Token t's block maxima [n_head][n_blocks] over its positions 0..pos. */
static void block_maxima(const struct msa_job *j, int t, float *buf, float *bmax)
{
    const struct eng_msa *p = j->p;
    const int64_t dim = p->head_dim, pos = j->b->pos[t], blk = p->block;
    const int32_t *cells = eng_kv_seq_cells(j->c->kv, j->b->seq[t]);
    const struct fl_attn_kernels *k = &fl_cpu_kernels()->attn;
    float *kt = buf, *row = kt + dim * KEY_BLOCK, *qk = row + dim;
    for (int64_t i = 0; i < (int64_t)p->n_head * j->n_blocks; i++)
        bmax[i] = -INFINITY;
    for (int64_t j0 = 0; j0 <= pos; j0 += KEY_BLOCK) {
        const int nb = (int)(pos + 1 - j0 < KEY_BLOCK ? pos + 1 - j0 : KEY_BLOCK);
        for (int c = 0; c < nb; c++) {
            const uint8_t *v = eng_kv_v(j->c->kv, j->layer, cells[j0 + c]);
            k->f16_to_f32((const fl_f16 *)v + p->key_off, row, dim);
            for (int64_t d = 0; d < dim; d++)
                kt[d * KEY_BLOCK + c] = row[d];
        }
        for (int h = 0; h < p->n_head; h++) {
            k->key_scores(qk, j->q + ((int64_t)t * p->n_head + h) * dim, kt, KEY_BLOCK, dim, nb);
            float *m = bmax + (int64_t)h * j->n_blocks;
            for (int c = 0; c < nb; c++) {
                const int64_t b = (j0 + c) / blk;
                m[b] = qk[c] > m[b] ? qk[c] : m[b]; /* a NaN never wins */
            }
        }
    }
}

/* One head's choice from its block maxima m[0..nvis): the local blocks,
 * then the best others (ties: the earlier), as positions ascending. */
static void choose(const struct msa_job *j, int t, int h, float *m, int64_t nvis)
{
    const struct eng_msa *p = j->p;
    const int64_t pos = j->b->pos[t], blk = p->block, row = (int64_t)t * p->n_head + h;
    const int64_t nlocal = p->local < p->top_k ? p->local : p->top_k;
    int32_t *out = j->sel->pos + row * j->sel->stride;
    for (int64_t l = 0; l < nlocal && nvis - 1 - l >= 0; l++)
        m[nvis - 1 - l] = INFINITY; /* chosen whatever their scores */
    for (int64_t want = p->top_k; want > 0; want--) { /* mark the best left with NaN */
        int64_t best = -1;
        for (int64_t b = 0; b < nvis; b++)
            if (m[b] == m[b] && (best < 0 || m[b] > m[best]))
                best = b;
        if (best < 0)
            break;
        m[best] = NAN;
    }
    int n = 0;
    for (int64_t b = 0; b < nvis; b++)
        for (int64_t q = b * blk; m[b] != m[b] && q < (b + 1) * blk && q <= pos; q++)
            out[n++] = (int32_t)q;
    j->sel->n[row] = n;
}

static void msa_worker(void *arg, int ith, int nth)
{
    const struct msa_job *j = arg;
    const struct eng_msa *p = j->p;
    float *buf = j->tmp + ith * j->tmp_per;
    float *bmax = buf + (p->head_dim + 2) * KEY_BLOCK + p->head_dim;
    int64_t begin, end;
    fl_split_range(j->b->n_tok, ith, nth, &begin, &end);
    for (int64_t t = begin; t < end; t++) {
        const int64_t nvis = j->b->pos[t] / p->block + 1;
        if (nvis <= p->top_k) { /* every block it may see */
            for (int h = 0; h < p->n_head; h++)
                j->sel->n[t * p->n_head + h] = -1;
            continue;
        }
        block_maxima(j, (int)t, buf, bmax);
        for (int h = 0; h < p->n_head; h++)
            choose(j, (int)t, h, bmax + (int64_t)h * j->n_blocks, nvis);
    }
}

void cpu_msa_select(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *q,
                    const struct eng_msa *p, const struct eng_attn_sel *sel)
{
    int64_t max_pos = 0;
    double work = 0;
    for (int t = 0; t < b->n_tok; t++) {
        max_pos = b->pos[t] > max_pos ? b->pos[t] : max_pos;
        work += (double)(b->pos[t] + 1) * (double)p->n_head * (double)p->head_dim;
    }
    struct fl_pool *pool = eng_cpu_pool_for(c, work);
    struct msa_job j = { .c = c, .layer = layer, .b = b, .q = q, .p = p, .sel = sel,
                         .n_blocks = max_pos / p->block + 1,
                         .tmp_per = (cpu_msa_thread_floats(p, max_pos) + 15) & ~(int64_t)15 };
    j.tmp = eng_scratch_f32(c, j.tmp_per * fl_pool_size(pool));
    fl_pool_run(pool, msa_worker, &j);
}
