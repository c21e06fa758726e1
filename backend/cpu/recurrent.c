/* recurrent.c: Gated DeltaNet's conv and recurrence on the CPU
 * (recurrent.h), written after ggml-cpu's ssm_conv, gated_delta_net and
 * l2_norm. Jobs are (span, channel range) and (span, value head): a
 * sequence's numbers never depend on which thread or batch ran them. */
#include "backend/cpu/recurrent.h"

#include <math.h>
#include <string.h>

#include "backend/cpu/cpu-backend.h"
#include "backend/cpu/threadpool.h"
#include "model/kv-cache.h"

#define MAX_CONV 16 /* kernel widths the load accepts (Qwen3.5: 4) */

static float silu(float x) { return x / (1.0f + expf(-x)); }
static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static float softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

/* Token index of each span's first token. */
static int32_t *span_starts(struct eng_ctx *c, const struct eng_batch *b)
{
    int32_t *s = eng_scratch(c, sizeof(int32_t) * (size_t)b->n_spans);
    int32_t t = 0;
    for (int i = 0; i < b->n_spans; i++) {
        s[i] = t;
        t += b->spans[i].n_tok;
    }
    return s;
}

struct conv_job {
    struct eng_ctx *c;
    int layer;
    const struct eng_batch *b;
    const int32_t *start;
    const float *x, *w;
    int64_t width, k, state_off;
    float *out;
};

/* One channel of one span: the window is the kept d_conv-1 inputs, then
 * the span's; afterwards the last d_conv-1 of it are kept. */
static void conv_channel(const struct conv_job *j, float *st, const float *x, float *out, int n,
                         int64_t ch)
{
    const int64_t W = j->width, K = j->k, S = K - 1;
    const float *kw = j->w + ch * K;
    for (int t = 0; t < n; t++) {
        float sum = 0.0f;
        for (int64_t i = 0; i < K; i++) {
            const int64_t at = t + i;
            const float v = at < S ? st[at] : x[(at - S) * W + ch];
            sum += v * kw[i];
        }
        out[(int64_t)t * W + ch] = silu(sum);
    }
    float keep[MAX_CONV];
    for (int64_t i = 0; i < S; i++) {
        const int64_t at = n + i;
        keep[i] = at < S ? st[at] : x[(at - S) * W + ch];
    }
    memcpy(st, keep, sizeof(float) * (size_t)S);
}

static void conv_run(void *arg, int ith, int nth)
{
    const struct conv_job *j = arg;
    int64_t c0, c1;
    fl_split_range(j->width, ith, nth, &c0, &c1);
    for (int s = 0; s < j->b->n_spans; s++) {
        const struct eng_span *sp = &j->b->spans[s];
        float *st = eng_kv_rs_conv(j->c->kv, j->layer, sp->seq) + j->state_off;
        const int64_t t0 = j->start[s];
        for (int64_t ch = c0; ch < c1; ch++)
            conv_channel(j, st + ch * (j->k - 1), j->x + t0 * j->width, j->out + t0 * j->width,
                         sp->n_tok, ch);
    }
}

void cpu_ssm_conv(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *x,
                  const struct eng_tensor *w, int64_t state_off, float *out)
{
    struct conv_job j = { .c = c, .layer = layer, .b = b, .start = span_starts(c, b), .x = x,
                          .w = (const float *)w->data, .width = w->ne[1], .k = w->ne[0],
                          .state_off = state_off, .out = out };
    fl_pool_run(eng_cpu_pool_for(c, (double)b->n_tok * (double)j.width * (double)j.k), conv_run,
                &j);
}

struct delta_job {
    struct eng_ctx *c;
    int layer;
    const struct eng_batch *b;
    const int32_t *start;
    const float *qkv, *alpha, *beta, *dt_bias, *a;
    const struct eng_delta_net *p;
    float *out, *work; /* work: 3 * d_state floats per thread */
};

/* y = x / max(|x|, eps), the sum of squares in double (ggml_l2_norm). */
static void l2norm(float *y, const float *x, int64_t n, float eps)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * scale;
}

/* 4 lanes of floats (GCC/clang vector extension: one SSE register at the
 * baseline ISA; the arithmetic is the same lane by lane on every CPU). */
typedef float f4 __attribute__((vector_size(16)));

static inline f4 load4(const float *p)
{
    f4 v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* x . y as 8 lane sums (lane l: elements l, l+8, ...; two registers)
 * added in lane order, then the tail in index order: the same bits for a
 * row whoever runs it and whatever shares the batch. */
static float dot(const float *x, const float *y, int64_t n)
{
    f4 lo = { 0 }, hi = { 0 };
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        lo += load4(x + i) * load4(y + i);
        hi += load4(x + i + 4) * load4(y + i + 4);
    }
    float sum = 0.0f;
    for (int l = 0; l < 4; l++)
        sum += lo[l];
    for (int l = 0; l < 4; l++)
        sum += hi[l];
    for (; i < n; i++)
        sum += x[i] * y[i];
    return sum;
}

/* y = y * s (x NULL) or y += x * s, elementwise. */
static void scale_add(float *y, const float *x, float s, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const f4 r = x ? load4(y + i) + load4(x + i) * s : load4(y + i) * s;
        memcpy(y + i, &r, sizeof(r));
    }
    for (; i < n; i++)
        y[i] = x ? y[i] + x[i] * s : y[i] * s;
}

/* y = y * x, elementwise. */
static void mul(float *y, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const f4 r = load4(y + i) * load4(x + i);
        memcpy(y + i, &r, sizeof(r));
    }
    for (; i < n; i++)
        y[i] *= x[i];
}

/* Kimi Delta Attention's decay of token t, head h: exp(g_i) per key channel
 * (Kimi K3's bounded gate: ggml's add, mul, negate, sigmoid, scale). */
static void channel_decay(const struct delta_job *j, int64_t t, int h, float *decay)
{
    const struct eng_delta_net *p = j->p;
    const int64_t D = p->d_state, at = (t * p->n_v_head + h) * D;
    for (int64_t i = 0; i < D; i++) {
        const float y = j->alpha[at + i] + j->dt_bias[h * D + i];
        const float g = p->bounded ? p->lower_bound * sigmoid(-(y * j->a[h]))
                                   : softplus(y) * j->a[h];
        decay[i] = expf(g);
    }
}

/* One token of value head h: M is the head's state stored transposed
 * (M[j][i] = S[i][j], ggml's layout), so every product reads rows; a row
 * depends on no other, so each is decayed, read, updated and read again
 * while it is in cache. */
static void delta_step(const struct delta_job *j, float *M, int64_t t, int h, float *w)
{
    const struct eng_delta_net *p = j->p;
    const int64_t D = p->d_state, nk = p->n_k_head, H = p->n_v_head;
    const int64_t width = 2 * nk * D + H * D, kh = p->k_grouped ? h / (H / nk) : h % nk;
    const float *in = j->qkv + t * width; /* this token's [q | k | v] */
    float *q = w, *k = w + D, *channel = w + 2 * D;
    l2norm(q, in + kh * D, D, p->eps);
    l2norm(k, in + nk * D + kh * D, D, p->eps);
    const float *v = in + 2 * nk * D + h * D;
    float decay = 0.0f;
    if (p->per_channel)
        channel_decay(j, t, h, channel);
    else
        decay = expf(softplus(j->alpha[t * H + h] + j->dt_bias[h]) * j->a[h]);
    const float beta = sigmoid(j->beta[t * H + h]);
    const float scale = 1.0f / sqrtf((float)D);
    float *o = j->out + t * H * D + h * D;
    for (int64_t r = 0; r < D; r++) {
        float *row = M + r * D;
        if (p->per_channel)
            mul(row, channel, D);
        else
            scale_add(row, NULL, decay, D);
        const float delta = (v[r] - dot(row, k, D)) * beta;
        scale_add(row, k, delta, D);
        o[r] = dot(row, q, D) * scale;
    }
}

static void delta_run(void *arg, int ith, int nth)
{
    const struct delta_job *j = arg;
    const int64_t H = j->p->n_v_head, D = j->p->d_state;
    float *w = j->work + (int64_t)ith * 3 * D;
    int64_t b0, b1;
    fl_split_range((int64_t)j->b->n_spans * H, ith, nth, &b0, &b1);
    for (int64_t job = b0; job < b1; job++) {
        const int s = (int)(job / H), h = (int)(job % H);
        const struct eng_span *sp = &j->b->spans[s];
        float *M = eng_kv_rs_ssm(j->c->kv, j->layer, sp->seq) + (int64_t)h * D * D;
        for (int t = 0; t < sp->n_tok; t++)
            delta_step(j, M, j->start[s] + t, h, w);
    }
}

void cpu_delta_net(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *qkv,
                   const float *alpha, const float *beta, const struct eng_delta_net *p,
                   float *out)
{
    const int64_t D = p->d_state;
    struct fl_pool *pool = eng_cpu_pool_for(c, 4.0 * (double)b->n_tok * (double)p->n_v_head *
                                                   (double)D * (double)D);
    struct delta_job j = {
        .c = c, .layer = layer, .b = b, .start = span_starts(c, b), .qkv = qkv, .alpha = alpha,
        .beta = beta, .dt_bias = (const float *)p->dt_bias->data, .a = (const float *)p->a->data,
        .p = p, .out = out,
        .work = eng_scratch_f32(c, (int64_t)fl_pool_size(pool) * 3 * D),
    };
    fl_pool_run(pool, delta_run, &j);
}

void cpu_sigmoid_gate(struct eng_ctx *c, float *y, const float *g, int64_t width, int64_t n_rows,
                      bool per_row)
{
    (void)c;
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t i = 0; i < width; i++)
            y[r * width + i] *= sigmoid(per_row ? g[r] : g[r * width + i]);
}
