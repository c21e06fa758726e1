/* attention.c: causal attention of a batch of queries over the F16 KV cache,
 * with the numerics of ggml's CPU flash-attention kernels (llama.cpp's
 * references ran with flash attention on):
 *  - batches of fewer than 64 queries (decode, short prompts) follow the
 *    one-chunk kernel: Q rounded to F16, F16 dot products with K, online
 *    softmax, V accumulated in an F16 buffer;
 *  - larger batches follow the tiled kernel: Q and K in F32, V in F32. */
#include <math.h>
#include <string.h>

#include "engine/cpu/threadpool.h"
#include "engine/ops.h"

#define ENG_FA_TILE_Q 64 /* ggml's GGML_FA_TILE_Q: batches this large use the F32 kernel */

struct attn_job {
    struct eng_ctx *c;
    int layer, n_tok, pos0;
    const float *q;
    int64_t q_stride, out_stride;
    const struct eng_attn *p;
    float *out;
    float *scratch; /* per thread: scratch_per floats */
    int64_t scratch_per;
};

static const fl_f16 *key_row(const struct attn_job *j, int pos, int kvh)
{
    return eng_kv_k(j->c->kv, j->layer, pos) + j->p->k_off + kvh * j->p->k_stride;
}

static const fl_f16 *val_row(const struct attn_job *j, int pos, int kvh)
{
    const fl_f16 *row = j->p->v_in_k ? eng_kv_k(j->c->kv, j->layer, pos)
                                     : eng_kv_v(j->c->kv, j->layer, pos);
    return row + j->p->v_off + kvh * j->p->v_stride;
}

/* q.k over F16 values in the order llama.cpp's AVX-512 build sums them
 * (ggml_vec_dot_f16, which produced the references): 64-value steps into
 * four 16-lane FMA accumulators, reduced pairwise, then the rest as float
 * products added in double. Scalar here; attention is not the hot path. */
static float dot_f16(const fl_f16 *x, const fl_f16 *y, int64_t n)
{
    const int64_t np = n & ~(int64_t)63;
    double sum = 0.0;
    if (np) {
        float acc[4][16] = { { 0 } };
        for (int64_t i = 0; i < np; i += 64)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 16; l++)
                    acc[j][l] = fmaf(fl_f16_to_f32(x[i + j * 16 + l]),
                                     fl_f16_to_f32(y[i + j * 16 + l]), acc[j][l]);
        float v[16];
        for (int l = 0; l < 16; l++)
            v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
        /* _mm512_reduce_add_ps: 256-bit halves, 128-bit halves, lanes
         * (0+2) and (1+3), then those two */
        float h8[8], h4[4];
        for (int l = 0; l < 8; l++)
            h8[l] = v[l] + v[l + 8];
        for (int l = 0; l < 4; l++)
            h4[l] = h8[l] + h8[l + 4];
        const float a = h4[0] + h4[2], b = h4[1] + h4[3];
        sum = (double)(a + b);
    }
    for (int64_t i = np; i < n; i++)
        sum += (double)(fl_f16_to_f32(x[i]) * fl_f16_to_f32(y[i]));
    return (float)sum;
}

static bool masked(const struct eng_attn *p, int qpos, int kpos)
{
    return kpos > qpos || (p->window > 0 && qpos - kpos >= p->window);
}

/* Adds a sink logit to the running (M, S) of one head; acc is scaled when
 * the sink becomes the new maximum. */
static void apply_sink(float sink, float *M, float *S, float *acc, int64_t dv)
{
    float ms = 1.0f, vs = 1.0f;
    if (sink > *M) {
        ms = expf(*M - sink);
        *M = sink;
        for (int64_t d = 0; d < dv; d++)
            acc[d] *= ms;
    } else {
        vs = expf(sink - *M);
    }
    *S = *S * ms + vs;
}

static float softcapped(const struct eng_attn *p, float s)
{
    if (p->softcap != 0.0f)
        return p->softcap * tanhf(s * (p->scale / p->softcap));
    return s * p->scale;
}

/* One (query, head) with the one-chunk kernel's F16 arithmetic. */
static void attend_f16(const struct attn_job *j, int t, int h, float *scr)
{
    const struct eng_attn *p = j->p;
    const int kvh = h / (p->n_head / p->n_head_kv), qpos = j->pos0 + t;
    fl_f16 *q16 = (fl_f16 *)scr, *acc16 = q16 + p->dk;
    float *acc = scr + (p->dk + p->dv + 1) / 2 + 1;
    const float *q = j->q + (int64_t)t * j->q_stride + (int64_t)h * p->dk;
    for (int64_t d = 0; d < p->dk; d++)
        q16[d] = fl_f32_to_f16(q[d]);
    memset(acc16, 0, (size_t)p->dv * sizeof(fl_f16));
    float M = -INFINITY, S = 0.0f;
    for (int kp = 0; kp <= qpos; kp++) {
        if (masked(p, qpos, kp))
            continue;
        float s = softcapped(p, dot_f16(key_row(j, kp, kvh), q16, p->dk));
        float ms = 1.0f, vs = 1.0f;
        const float Mold = M;
        if (s > M) {
            M = s;
            ms = expf(Mold - M);
            for (int64_t d = 0; d < p->dv; d++)
                acc16[d] = fl_f32_to_f16(fl_f16_to_f32(acc16[d]) * ms);
        } else {
            vs = expf(s - M);
        }
        const fl_f16 *v = val_row(j, kp, kvh);
        for (int64_t d = 0; d < p->dv; d++)
            acc16[d] = fl_f32_to_f16(fmaf(fl_f16_to_f32(v[d]), vs, fl_f16_to_f32(acc16[d])));
        S = S * ms + vs;
    }
    for (int64_t d = 0; d < p->dv; d++)
        acc[d] = fl_f16_to_f32(acc16[d]);
    if (p->sinks)
        apply_sink(p->sinks[h], &M, &S, acc, p->dv);
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    float *o = j->out + (int64_t)t * j->out_stride + (int64_t)h * p->dv;
    for (int64_t d = 0; d < p->dv; d++)
        o[d] = acc[d] * inv;
}

/* One (query, head) with the tiled kernel's F32 arithmetic. */
static void attend_f32(const struct attn_job *j, int t, int h, float *scr)
{
    const struct eng_attn *p = j->p;
    const int kvh = h / (p->n_head / p->n_head_kv), qpos = j->pos0 + t;
    float *acc = scr;
    const float *q = j->q + (int64_t)t * j->q_stride + (int64_t)h * p->dk;
    memset(acc, 0, (size_t)p->dv * sizeof(float));
    float M = -INFINITY, S = 0.0f;
    for (int kp = 0; kp <= qpos; kp++) {
        if (masked(p, qpos, kp))
            continue;
        const fl_f16 *k = key_row(j, kp, kvh);
        float s = 0.0f;
        for (int64_t d = 0; d < p->dk; d++)
            s += q[d] * fl_f16_to_f32(k[d]);
        s = softcapped(p, s);
        float ms = 1.0f, vs = 1.0f;
        if (s > M) {
            ms = expf(M - s);
            M = s;
            for (int64_t d = 0; d < p->dv; d++)
                acc[d] *= ms;
        } else {
            vs = expf(s - M);
        }
        const fl_f16 *v = val_row(j, kp, kvh);
        for (int64_t d = 0; d < p->dv; d++)
            acc[d] += vs * fl_f16_to_f32(v[d]);
        S = S * ms + vs;
    }
    if (p->sinks)
        apply_sink(p->sinks[h], &M, &S, acc, p->dv);
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    float *o = j->out + (int64_t)t * j->out_stride + (int64_t)h * p->dv;
    for (int64_t d = 0; d < p->dv; d++)
        o[d] = acc[d] * inv;
}

static void attn_worker(void *arg, int ith, int nth)
{
    const struct attn_job *j = arg;
    int64_t begin, end;
    fl_split_range((int64_t)j->n_tok * j->p->n_head, ith, nth, &begin, &end);
    float *scr = j->scratch + ith * j->scratch_per;
    for (int64_t i = begin; i < end; i++) {
        const int t = (int)(i / j->p->n_head), h = (int)(i % j->p->n_head);
        if (j->n_tok < ENG_FA_TILE_Q)
            attend_f16(j, t, h, scr);
        else
            attend_f32(j, t, h, scr);
    }
}

void eng_attention(struct eng_ctx *c, int layer, const float *q, int64_t q_stride, int n_tok,
                   int pos0, const struct eng_attn *p, float *out, int64_t out_stride)
{
    const int nth = fl_pool_size(c->pool);
    struct attn_job j = {
        .c = c, .layer = layer, .n_tok = n_tok, .pos0 = pos0, .q = q, .q_stride = q_stride,
        .out_stride = out_stride, .p = p, .out = out,
        /* F16 q + F16 acc (counted in floats) + F32 acc, cache-line padded */
        .scratch_per = ((p->dk + p->dv + 1) / 2 + 1 + p->dv + 15) & ~(int64_t)15,
    };
    j.scratch = eng_scratch_f32(c, j.scratch_per * nth);
    fl_pool_run(c->pool, attn_worker, &j);
}
