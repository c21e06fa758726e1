/* attention.c: causal attention of a batch of queries over the KV cache,
 * with the numerics of ggml's CPU flash-attention kernels (llama.cpp's
 * references ran with flash attention on):
 *  - spans of fewer than 64 queries (decode, short prompts), and every
 *    query over a cache of a block type (-ctk/-ctv q8_0, ...), follow the
 *    one-chunk kernel: Q rounded to F16 (or quantized to K's vec_dot_type),
 *    dot products with K summed as ggml's AVX-512 build sums them, online
 *    softmax, an F16 V accumulated in an F16 buffer (each step rounded to
 *    F16), a block type's V dequantized and accumulated in F32;
 *  - longer spans (prompt chunks) over an F16 cache follow the tiled kernel's arithmetic
 *    class: Q, K and V in F32. The span's keys are transposed once per call
 *    so that scores for all keys of a query are one vectorisable sweep
 *    (shared by the query heads of one KV head), then softmax, then the V
 *    sum.
 * The choice is the span's (its own sequence's chunk), never the batch's:
 * a query's bits do not depend on the other sequences sharing the step.
 * Keys and values are read through the sequence's cell table.
 * The F16 steps use F16C/FMA when the CPU has them; the scalar fallback
 * gives the same bits (conversions and FMAs are exact operations). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attention.h"
#include "backend/cpu/cpu-backend.h"
#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/threadpool.h"
#include "model/arch.h"
#include "model/kv-cache.h"

#define ENG_FA_TILE_Q 64 /* ggml's GGML_FA_TILE_Q: spans this long use the F32 kernel */
_Static_assert(ENG_SPAN_SHORT_MAX < ENG_FA_TILE_Q, "a short span's queries take the one-chunk path");

/* --- the job ---------------------------------------------------------------- */

struct attn_job {
    struct eng_ctx *c;
    const struct fl_attn_kernels *k; /* the CPU level's (backend/cpu/dispatch.c) */
    int layer;
    const struct eng_batch *b;
    /* the queries: tokens tok[0 .. n_tok) of the batch; F32 path: one span's,
     * whose sequence's cells are `cells` and n_kv its positions */
    const int32_t *tok;
    int n_tok, n_kv;
    const int32_t *cells;
    const float *q;
    int64_t q_stride, out_stride;
    const struct eng_attn *p;
    const float *sinks;  /* p->sinks' values, or NULL */
    float *out;
    float *scratch; /* per thread: scratch_per floats */
    int64_t scratch_per;
    float *kt, *vf; /* F32 path: [n_head_kv][dk][n_kv] and [n_head_kv][n_kv][dv] */
    enum fl_type type_k, type_v; /* the cache's (type_v: K's when V is read from K) */
    int rot_k, rot_v;            /* the cache's rotations (eng_kv_rot_k): Q in, output out */
    /* Q as ggml's one-chunk kernel gives it to K's dot products: converted
     * to K's vec_dot_type (F16 for an F16 cache) by the kernel table's
     * quantizer, the bytes of the types module's (integer dots per block
     * for a block type, as the matmuls of quantized weights) */
    fl_act_quant_fn q_to_kdot;
    fl_vec_dot_fn kdot;          /* a block-type K row . q, in ggml's order (row_dot) */
    fl_to_float_fn v_to_f32;     /* a block-type V row to F32 */
    /* bytes into a cell's row: KV head 0's K and V, and from one head to the next */
    size_t k_off, k_stride, v_off, v_stride;
};

/* Where KV head kvh's K (V) values start in a cell's row: whole blocks of
 * a block type (the cache checked that heads are). */
static const void *key_row(const struct attn_job *j, int cell, int kvh)
{
    const uint8_t *row = eng_kv_k(j->c->kv, j->layer, cell);
    return row + j->k_off + (size_t)kvh * j->k_stride;
}

static const void *val_row(const struct attn_job *j, int cell, int kvh)
{
    const uint8_t *row = j->p->v_in_k ? eng_kv_k(j->c->kv, j->layer, cell)
                                      : eng_kv_v(j->c->kv, j->layer, cell);
    return row + j->v_off + (size_t)kvh * j->v_stride;
}

/* First key position query position qpos may see (the window's start). */
static int first_key(const struct eng_attn *p, int qpos)
{
    return p->window > 0 && qpos - p->window + 1 > 0 ? qpos - p->window + 1 : 0;
}

/* Adds a sink logit to the running (M, S) of one head; acc is scaled when
 * the sink becomes the new maximum (ggml applies sinks after the keys). */
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

static void finish(const struct attn_job *j, int t, int h, float *acc, float M, float S)
{
    const struct eng_attn *p = j->p;
    if (j->sinks)
        apply_sink(j->sinks[h], &M, &S, acc, p->dv);
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    float *o = j->out + (int64_t)t * j->out_stride + (int64_t)h * p->dv;
    for (int64_t d = 0; d < p->dv; d++)
        o[d] = acc[d] * inv;
}

static float key_score(const struct attn_job *j, const void *key, const void *qk)
{
    if (j->type_k == FL_TYPE_F16)
        return j->k->dot_f16(key, qk, j->p->dk);
    float s;
    j->kdot((int)j->p->dk, &s, key, qk);
    return s;
}

/* Scratch floats of one head in the one-chunk kernel: F32 sums, the
 * rotated q, q as K's dots take it (dk floats hold it in F16 or any block
 * type), F16 sums; whole 64-byte lines. */
static int64_t head_scratch(const struct eng_attn *p)
{
    return (p->dv + 2 * p->dk + (p->dv + 1) / 2 + 15) & ~(int64_t)15;
}

/* The running state of one query head in the one-chunk kernel. */
struct head_acc {
    float *acc;    /* dv: F32 sums (a block type's V), the output at the end */
    fl_f16 *acc16; /* dv: F16 sums (an F16 V) */
    void *qk;      /* the query as K's dot products take it */
    float M, S;
};

/* A head's state before the first key, in its scratch (head_scratch
 * floats): sums zeroed, the query rotated as the cache's keys are and
 * converted for their dot products. */
static void head_begin(const struct attn_job *j, struct head_acc *a, const float *q, float *base)
{
    const struct eng_attn *p = j->p;
    float *qr = base + p->dv;
    *a = (struct head_acc){ .acc = base, .qk = qr + p->dk, .acc16 = (fl_f16 *)(qr + 2 * p->dk),
                            .M = -INFINITY };
    if (j->rot_k) { /* the query meets keys the cache holds rotated */
        memcpy(qr, q, sizeof(float) * (size_t)p->dk);
        eng_kv_rotate(qr, p->dk, j->rot_k);
        q = qr;
    }
    j->q_to_kdot(q, a->qk, p->dk);
    if (j->type_v == FL_TYPE_F16)
        memset(a->acc16, 0, (size_t)p->dv * sizeof(fl_f16));
    else
        memset(a->acc, 0, (size_t)p->dv * sizeof(float));
}

/* One key for one head: ggml's online softmax step. v32 is the key's V row
 * dequantized (a block type's) or NULL (F16: read from the cache). */
static void head_step(const struct attn_job *j, struct head_acc *a, const void *key,
                      const void *v, const float *v32)
{
    const int64_t dv = j->p->dv;
    const float s = softcapped(j->p, key_score(j, key, a->qk));
    float ms = 1.0f, vs = 1.0f;
    if (s > a->M) {
        const float Mold = a->M;
        a->M = s;
        ms = expf(Mold - a->M);
        if (v32)
            j->k->scale_f32(a->acc, ms, dv);
        else
            j->k->scale_f16(a->acc16, ms, dv);
    } else {
        vs = expf(s - a->M);
    }
    if (v32)
        j->k->mad_f32(a->acc, v32, vs, dv);
    else
        j->k->mad_f16(a->acc16, v, vs, dv);
    a->S = a->S * ms + vs;
}

/* Query token t's heads h0 .. h0+n-1, with the one-chunk kernel's
 * arithmetic, each head's steps exactly ggml's: the heads (which read the
 * same KV head) go through the keys together so that a block type's V row
 * is dequantized once for all of them (the same values each time). An F16
 * V accumulates in an F16 buffer (each step rounded to F16), a block
 * type's in F32. Scratch: a V row, then head_scratch floats per head. */
static void attend_heads(const struct attn_job *j, int t, int h0, int n, float *scr)
{
    const struct eng_attn *p = j->p;
    const int g = h0 / (p->n_head / p->n_head_kv), qpos = j->b->pos[t];
    const int32_t *cells = eng_kv_seq_cells(j->c->kv, j->b->seq[t]);
    const bool v16 = j->type_v == FL_TYPE_F16;
    float *v32 = scr;
    struct head_acc heads[ENG_FA_GROUP];
    for (int hh = 0; hh < n; hh++)
        head_begin(j, &heads[hh], j->q + (int64_t)t * j->q_stride + (int64_t)(h0 + hh) * p->dk,
                   scr + p->dv + (int64_t)hh * head_scratch(p));
    /* the positions it reads: its selection (DSA, MSA), else all it may see */
    const int64_t row = p->sel ? eng_attn_sel_row(p->sel, t, g, p->n_head_kv) : 0;
    const int ns = p->sel ? p->sel->n[row] : -1, k0 = first_key(p, qpos);
    const int32_t *sp = ns >= 0 ? p->sel->pos + row * p->sel->stride : NULL;
    for (int i = 0, nk = sp ? ns : qpos + 1 - k0; i < nk; i++) {
        const int kp = sp ? sp[i] : k0 + i;
        const void *key = key_row(j, cells[kp], g), *v = val_row(j, cells[kp], g);
        if (!v16)
            j->v_to_f32(v, v32, p->dv);
        for (int hh = 0; hh < n; hh++)
            head_step(j, &heads[hh], key, v, v16 ? NULL : v32);
    }
    for (int hh = 0; hh < n; hh++) {
        struct head_acc *a = &heads[hh];
        if (v16)
            j->k->f16_to_f32(a->acc16, a->acc, p->dv);
        finish(j, t, h0 + hh, a->acc, a->M, a->S);
        if (j->rot_v) /* a sum of rotated values, rotated back */
            eng_kv_rotate(j->out + (int64_t)t * j->out_stride + (int64_t)(h0 + hh) * p->dv,
                          p->dv, j->rot_v);
    }
}

/* Query token t's heads that read KV head g, ENG_FA_GROUP at a time. */
static void attend_one_chunk(const struct attn_job *j, int t, int g, float *scr)
{
    const int r = j->p->n_head / j->p->n_head_kv;
    for (int h = 0; h < r; h += ENG_FA_GROUP)
        attend_heads(j, t, g * r + h, r - h < ENG_FA_GROUP ? r - h : ENG_FA_GROUP, scr);
}

/* The F32 steps of one query (batch token t) and the r query heads of KV
 * head g over nk keys: kt their transposed keys (rows ld apart), v their
 * value rows; scores, softmax, V sum. Scratch: r rows of (dv + n_kv). */
static void attend_f32_keys(const struct attn_job *j, int t, int g, const float *kt, int64_t ld,
                            const float *v, int nk, float *scr)
{
    const struct eng_attn *p = j->p;
    const int r = p->n_head / p->n_head_kv;
    const int64_t lds = p->dv + j->n_kv;
    const float *q = j->q + (int64_t)t * j->q_stride + (int64_t)g * r * p->dk;
    if (j->k->key_scores_group) /* each block of keys loaded once for several heads */
        j->k->key_scores_group(scr + p->dv, lds, q, r, kt, ld, p->dk, nk);
    else
        for (int h = 0; h < r; h++)
            j->k->key_scores(scr + p->dv + h * lds, q + h * p->dk, kt, ld, p->dk, nk);
    for (int h0 = 0; h0 < r; h0 += 8) { /* 8 heads' softmax, their V sums, their outputs */
        const int rr = r - h0 < 8 ? r - h0 : 8;
        float M[8], S[8];
        for (int hh = 0; hh < rr; hh++) {
            float *s = scr + (h0 + hh) * lds + p->dv;
            if (p->softcap == 0.0f) {
                M[hh] = j->k->scale_max(s, nk, p->scale);
            } else {
                M[hh] = -INFINITY;
                for (int i = 0; i < nk; i++) {
                    s[i] = softcapped(p, s[i]);
                    M[hh] = s[i] > M[hh] ? s[i] : M[hh];
                }
            }
            S[hh] = j->k->exp_shifted(s, nk, M[hh]);
        }
        float *acc0 = scr + h0 * lds;
        if (j->k->weighted_rows_group)
            j->k->weighted_rows_group(acc0, lds, acc0 + p->dv, rr, v, nk, p->dv);
        else
            for (int hh = 0; hh < rr; hh++)
                j->k->weighted_rows(acc0 + hh * lds, acc0 + hh * lds + p->dv, v, nk, p->dv);
        for (int hh = 0; hh < rr; hh++)
            finish(j, t, g * r + h0 + hh, acc0 + hh * lds, M[hh], S[hh]);
    }
}

/* One query (batch token t) and the r query heads of KV head g, F32
 * arithmetic: the keys it may see, or only the positions DSA chose for it
 * (their keys and values gathered after the r heads' rows of scratch; the
 * positions it skips count for nothing, as the keys ggml's kernels see
 * masked). */
static void attend_f32(const struct attn_job *j, int t, int g, float *scr)
{
    const struct eng_attn *p = j->p;
    const float *kt = j->kt + (int64_t)g * p->dk * j->n_kv;
    const float *vf = j->vf + (int64_t)g * j->n_kv * p->dv;
    const int64_t row = p->sel ? eng_attn_sel_row(p->sel, t, g, p->n_head_kv) : 0;
    if (!p->sel || p->sel->n[row] < 0) {
        const int k0 = first_key(p, j->b->pos[t]);
        attend_f32_keys(j, t, g, kt + k0, j->n_kv, vf + (int64_t)k0 * p->dv,
                        j->b->pos[t] + 1 - k0, scr);
        return;
    }
    const int r = p->n_head / p->n_head_kv, ns = p->sel->n[row];
    const int32_t *sp = p->sel->pos + row * p->sel->stride;
    float *kg = scr + r * (p->dv + j->n_kv), *vg = kg + p->dk * (int64_t)ns;
    for (int64_t d = 0; d < p->dk; d++)
        for (int i = 0; i < ns; i++)
            kg[d * ns + i] = kt[d * j->n_kv + sp[i]];
    for (int i = 0; i < ns; i++)
        memcpy(vg + (int64_t)i * p->dv, vf + (int64_t)sp[i] * p->dv, sizeof(float) * (size_t)p->dv);
    attend_f32_keys(j, t, g, kg, ns, vg, ns, scr);
}

/* F32 path, phase 1: the span's K transposed and V converted, split by
 * position. */
static void convert_worker(void *arg, int ith, int nth)
{
    const struct attn_job *j = arg;
    const struct eng_attn *p = j->p;
    int64_t begin, end;
    fl_split_range(j->n_kv, ith, nth, &begin, &end);
    float *tmp = j->scratch + ith * j->scratch_per;
    for (int g = 0; g < p->n_head_kv; g++) {
        float *kt = j->kt + (int64_t)g * p->dk * j->n_kv;
        for (int64_t kp = begin; kp < end; kp++) {
            j->k->f16_to_f32((const fl_f16 *)key_row(j, j->cells[kp], g), tmp, p->dk);
            for (int64_t d = 0; d < p->dk; d++)
                kt[d * j->n_kv + kp] = tmp[d];
            j->k->f16_to_f32((const fl_f16 *)val_row(j, j->cells[kp], g),
                             j->vf + ((int64_t)g * j->n_kv + kp) * p->dv, p->dv);
        }
    }
}

static void attn_worker(void *arg, int ith, int nth)
{
    const struct attn_job *j = arg;
    /* one item per (token, KV head): its query heads together */
    const int per_tok = j->p->n_head_kv;
    int64_t begin, end;
    fl_split_range((int64_t)j->n_tok * per_tok, ith, nth, &begin, &end);
    float *scr = j->scratch + ith * j->scratch_per;
    for (int64_t i = begin; i < end; i++) {
        const int t = j->tok[i / per_tok], h = (int)(i % per_tok);
        if (j->kt)
            attend_f32(j, t, h, scr);
        else
            attend_one_chunk(j, t, h, scr);
    }
}

/* Scratch floats per thread: a V row and up to ENG_FA_GROUP heads'
 * head_scratch (one-chunk path), or r rows of acc + scores (F32 path); and
 * a K row. */
static int64_t scratch_per(const struct eng_attn *p, bool f32, int n_kv)
{
    const int r = p->n_head / p->n_head_kv;
    int64_t per = p->dv + (r < ENG_FA_GROUP ? r : ENG_FA_GROUP) * head_scratch(p);
    if (f32) { /* with a selection, its keys and values gathered after the rows */
        const int64_t grp = (int64_t)r * (p->dv + n_kv) +
                            (p->sel ? (p->dk + p->dv) * (int64_t)p->sel->stride : 0);
        per = grp > per ? grp : per;
    }
    per = per > p->dk ? per : p->dk;
    return (per + 15) & ~(int64_t)15;
}

static void run_job(struct attn_job *j, bool f32)
{
    const struct eng_attn *p = j->p;
    const int last = j->b->pos[j->tok[j->n_tok - 1]] + 1;
    const double keys = (double)j->n_tok * (f32 ? j->n_kv : last);
    struct fl_pool *pool = eng_cpu_pool_for(j->c, keys * p->n_head * (p->dk + p->dv));
    const int nth = fl_pool_size(pool);
    j->scratch_per = scratch_per(p, f32, j->n_kv);
    j->scratch = eng_scratch_f32(j->c, j->scratch_per * nth);
    j->kt = j->vf = NULL;
    if (f32) {
        j->kt = eng_scratch_f32(j->c, (int64_t)p->n_head_kv * p->dk * j->n_kv);
        j->vf = eng_scratch_f32(j->c, (int64_t)p->n_head_kv * p->dv * j->n_kv);
        fl_pool_run(pool, convert_worker, j);
    }
    fl_pool_run(pool, attn_worker, j);
}

void cpu_attention(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *q,
                   int64_t q_stride, const struct eng_attn *p, float *out, int64_t out_stride)
{
    const struct fl_cpu_kernels *ck = fl_cpu_kernels();
    struct attn_job j = {
        .c = c, .k = &ck->attn, .layer = layer, .b = b, .q = q,
        .q_stride = q_stride, .out_stride = out_stride, .p = p, .out = out,
        .sinks = p->sinks ? (const float *)p->sinks->data : NULL,
        .type_k = eng_kv_type_k(c->kv),
        .type_v = p->v_in_k ? eng_kv_type_k(c->kv) : eng_kv_type_v(c->kv),
        .rot_k = eng_kv_rot_k(c->kv), .rot_v = p->v_in_k ? 0 : eng_kv_rot_v(c->kv),
    };
    j.q_to_kdot = ck->quant[fl_type_traits(j.type_k)->vec_dot_type];
    j.kdot = ck->row_dot[j.type_k];
    j.v_to_f32 = j.type_v == FL_TYPE_Q8_0 && ck->attn.q8_0_to_f32 ? ck->attn.q8_0_to_f32
                                                                 : fl_type_traits(j.type_v)->to_float;
    j.k_off = fl_row_size(j.type_k, p->k_off), j.k_stride = fl_row_size(j.type_k, p->k_stride);
    j.v_off = fl_row_size(j.type_v, p->v_off), j.v_stride = fl_row_size(j.type_v, p->v_stride);
    /* ggml tiles only an F16 (or F32) cache of one type: a block type's
     * queries all take the one-chunk kernel */
    const bool tiled = j.type_k == FL_TYPE_F16 && j.type_v == FL_TYPE_F16;
    /* the tokens of short spans together (one-chunk path); each long span alone */
    int32_t *tok = eng_scratch(c, sizeof(int32_t) * (size_t)b->n_tok);
    int n_short = 0;
    for (int t = 0; t < b->n_tok; t++)
        if (!tiled || b->spans[b->span[t]].n_tok < ENG_FA_TILE_Q)
            tok[n_short++] = t;
    if (n_short) {
        j.tok = tok, j.n_tok = n_short, j.n_kv = 0;
        run_job(&j, false);
    }
    for (int i = 0, t0 = 0; i < b->n_spans; t0 += b->spans[i++].n_tok) {
        const struct eng_span *s = &b->spans[i];
        if (!tiled || s->n_tok < ENG_FA_TILE_Q)
            continue;
        for (int t = 0; t < s->n_tok; t++)
            tok[t] = t0 + t;
        j.tok = tok, j.n_tok = s->n_tok, j.n_kv = s->pos0 + s->n_tok;
        j.cells = eng_kv_seq_cells(c->kv, s->seq);
        /* each span's F32 keys and values go before the next span's: the
         * scratch holds the longest span's, not the sum of them */
        const struct eng_scratch_mark mark = eng_scratch_mark(c->arena);
        run_job(&j, true);
        eng_scratch_release(c->arena, mark);
    }
}
