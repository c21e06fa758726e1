/* moe.c: expert routing and the mixture-of-experts FFN.
 *
 * Routing follows llama.cpp's build_moe_ffn: gating function, optional
 * selection bias for the choice only, top-k by descending score, weights
 * renormalised (sum clamped below at F16's smallest normal) and scaled.
 * The expert FFN walks experts, not tokens: every token routed to expert e
 * goes through e's matrices in one matmul, between acquire and release of
 * that expert, so a paged expert is read once per layer and batch. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/matmul.h"
#include "backend/cpu/threadpool.h"
#include "backend/cuda/gpu-offload.h"
#include "model/ops.h"

/* Indices of the k largest scores, descending; ties go to the lower id
 * (a stable selection). k is small, so insertion into a sorted list. */
static void top_k(const float *score, int64_t n, int64_t k, int32_t *ids)
{
    int64_t have = 0;
    for (int64_t e = 0; e < n; e++) {
        if (have == k && !(score[e] > score[ids[k - 1]]))
            continue;
        int64_t pos = have < k ? have : k - 1; /* when full, the last one drops out */
        while (pos > 0 && score[ids[pos - 1]] < score[e]) {
            ids[pos] = ids[pos - 1];
            pos--;
        }
        ids[pos] = (int32_t)e;
        if (have < k)
            have++;
    }
}

static void route_one(float *logits, const struct eng_route *r, float *sel, int32_t *ids,
                      float *w)
{
    const int64_t n = r->n_expert, k = r->k;
    if (r->gating == ENG_GATING_SOFTMAX)
        eng_softmax(logits, n);
    else if (r->gating == ENG_GATING_SIGMOID)
        for (int64_t e = 0; e < n; e++)
            logits[e] = 1.0f / (1.0f + expf(-logits[e]));
    const float *score = logits;
    if (r->sel_bias) {
        for (int64_t e = 0; e < n; e++)
            sel[e] = logits[e] + r->sel_bias[e];
        score = sel;
    }
    top_k(score, n, k, ids);
    for (int64_t j = 0; j < k; j++)
        w[j] = logits[ids[j]];
    if (r->gating == ENG_GATING_SOFTMAX_WEIGHT)
        eng_softmax(w, k);
    if (r->norm) {
        double sum = 0.0;
        for (int64_t j = 0; j < k; j++)
            sum += (double)w[j];
        float s = (float)sum;
        if (!(s >= 6.103515625e-5f))
            s = 6.103515625e-5f;
        for (int64_t j = 0; j < k; j++)
            w[j] = w[j] / s;
    }
    if (r->scale != 0.0f && r->scale != 1.0f)
        for (int64_t j = 0; j < k; j++)
            w[j] *= r->scale;
}

void eng_moe_route(float *logits, int64_t n_tok, const struct eng_route *r, int32_t *ids,
                   float *weights)
{
    float *sel = malloc((size_t)r->n_expert * sizeof(float));
    if (!sel)
        abort();
    for (int64_t t = 0; t < n_tok; t++)
        route_one(logits + t * r->n_expert, r, sel, ids + t * r->k, weights + t * r->k);
    free(sel);
}

static void build_lists(struct eng_ctx *c, const int32_t *ids, int64_t n_tok, int64_t k,
                        int64_t n_expert, struct eng_expert_lists *L)
{
    L->n_expert = n_expert;
    L->count = eng_scratch(c, sizeof(int32_t) * (size_t)n_expert);
    L->start = eng_scratch(c, sizeof(int32_t) * (size_t)(n_expert + 1));
    L->tok = eng_scratch(c, sizeof(int32_t) * (size_t)(n_tok * k));
    L->slot = eng_scratch(c, sizeof(int32_t) * (size_t)(n_tok * k));
    L->order = eng_scratch(c, sizeof(int32_t) * (size_t)n_expert);
    memset(L->count, 0, sizeof(int32_t) * (size_t)n_expert);
    for (int64_t i = 0; i < n_tok * k; i++)
        L->count[ids[i]]++;
    L->start[0] = 0;
    for (int64_t e = 0; e < n_expert; e++)
        L->start[e + 1] = L->start[e] + L->count[e];
    int32_t *fill = L->order; /* reused as a cursor before the order is built */
    memcpy(fill, L->start, sizeof(int32_t) * (size_t)n_expert);
    for (int64_t i = 0; i < n_tok * k; i++) {
        const int32_t e = ids[i], at = fill[e]++;
        L->tok[at] = (int32_t)(i / k);
        L->slot[at] = (int32_t)i;
    }
    L->n_order = 0;
    for (int64_t e = 0; e < n_expert; e++)
        if (L->count[e])
            L->order[L->n_order++] = (int32_t)e;
}

/* Resident experts first (they compute while the others are read). */
static void order_resident_first(const struct eng_expert_source *src, int layer,
                                 struct eng_expert_lists *L)
{
    if (!src || !src->resident)
        return;
    int front = 0;
    for (int i = 0; i < L->n_order; i++) {
        if (src->resident(src->ctx, layer, L->order[i])) {
            int32_t e = L->order[i];
            memmove(L->order + front + 1, L->order + front, sizeof(int32_t) * (size_t)(i - front));
            L->order[front++] = e;
        }
    }
}

static void add_bias_rows(float *y, int64_t ldy, const int32_t *rows, int64_t n,
                          const struct eng_tensor *b, int expert)
{
    if (!b)
        return;
    const float *bv = (const float *)b->data + (int64_t)expert * b->ne[0];
    for (int64_t i = 0; i < n; i++)
        eng_add(y + (rows ? rows[i] : i) * ldy, bv, b->ne[0]);
}

static const uint8_t *expert_data(const struct eng_tensor *w, int e)
{
    return w->data + (size_t)e * (size_t)w->ne[1] * fl_row_size(w->type, w->ne[0]);
}

/* Buffers one expert computation needs; one set per thread when experts
 * run in parallel. */
struct expert_bufs {
    float *g, *u;    /* [rows][n_ff] */
    void *dscratch;  /* down-projection activations */
};

struct moe_state {
    struct eng_ctx *c;
    const struct eng_moe *e;
    const struct eng_expert_lists *L;
    int layer;
    struct fl_qact xg, xu;
    float *slots;    /* [n_tok*k][n_embd]: each (token, slot) written by one expert */
    int32_t *iota;
    struct expert_bufs *bufs; /* [n threads] */
    /* expert-parallel waves */
    struct fl_chunks chunks;
    int wave0;
};

/* Between expert e's gate/up products (in b) and its down product: the
 * biases, the activation, and the down input quantized into *hq. */
static void activate_expert(const struct moe_state *s, const struct expert_bufs *b,
                            struct fl_pool *pool, int e, struct fl_qact *hq)
{
    const struct eng_moe *m = s->e;
    const int64_t n = s->L->count[e], n_ff = m->gate->ne[1];
    add_bias_rows(b->g, n_ff, NULL, n, m->gate_b, e);
    add_bias_rows(b->u, n_ff, NULL, n, m->up_b, e);
    const eng_act_fn act = m->act ? m->act : eng_act_swiglu;
    for (int64_t i = 0; i < n; i++)
        act(b->g + i * n_ff, b->u + i * n_ff, n_ff, m->act_arg);
    fl_quantize_act(pool, m->down->type, b->g, n_ff, n, n_ff, b->dscratch, hq);
}

/* Expert e over its n routed rows, on `pool` (NULL: this thread only). */
static void run_expert(struct moe_state *s, const struct expert_bufs *b, struct fl_pool *pool,
                       int e)
{
    const struct eng_moe *m = s->e;
    const int32_t *tok = s->L->tok + s->L->start[e], *slot = s->L->slot + s->L->start[e];
    const int64_t n = s->L->count[e], n_ff = m->gate->ne[1], n_embd = m->down->ne[1];
    fl_matmul_rows(pool, expert_data(m->gate, e), m->gate->type, n_ff, &s->xg, tok, n, b->g, n_ff, NULL);
    fl_matmul_rows(pool, expert_data(m->up, e), m->up->type, n_ff, &s->xu, tok, n, b->u, n_ff, NULL);
    struct fl_qact hq;
    activate_expert(s, b, pool, e, &hq);
    fl_matmul_rows(pool, expert_data(m->down, e), m->down->type, n_embd, &hq, s->iota, n, s->slots,
                   n_embd, slot);
    add_bias_rows(s->slots, n_embd, slot, n, m->down_b, e);
}

static void prepare_state(struct moe_state *s, const float *x, int64_t n_tok, int64_t k, int nbuf)
{
    struct eng_ctx *c = s->c;
    const struct eng_moe *m = s->e;
    const int64_t n_in = m->gate->ne[0], n_ff = m->gate->ne[1], n_embd = m->down->ne[1];
    const int64_t rows = n_tok; /* an expert sees each token at most once */
    struct fl_pool *qpool = eng_pool_for(c, (double)n_tok * n_in * 16);
    fl_quantize_act(qpool, m->gate->type, x, n_in, n_tok, n_in,
                    eng_scratch(c, fl_matmul_scratch_size(m->gate->type, n_in, n_tok) + 64), &s->xg);
    if (fl_act_type(m->up->type) == fl_act_type(m->gate->type))
        s->xu = s->xg;
    else
        fl_quantize_act(qpool, m->up->type, x, n_in, n_tok, n_in,
                        eng_scratch(c, fl_matmul_scratch_size(m->up->type, n_in, n_tok) + 64), &s->xu);
    s->slots = eng_scratch_f32(c, n_tok * k * n_embd);
    s->iota = eng_scratch(c, sizeof(int32_t) * (size_t)rows);
    for (int64_t i = 0; i < rows; i++)
        s->iota[i] = (int32_t)i;
    s->bufs = eng_scratch(c, sizeof(*s->bufs) * (size_t)nbuf);
    for (int i = 0; i < nbuf; i++) {
        s->bufs[i].g = eng_scratch_f32(c, rows * n_ff);
        s->bufs[i].u = eng_scratch_f32(c, rows * n_ff);
        s->bufs[i].dscratch = eng_scratch(c, fl_matmul_scratch_size(m->down->type, n_ff, rows) + 64);
    }
}

static int acquire(const struct eng_expert_source *src, int layer, int e, struct fl_err *err)
{
    int rc = src ? src->acquire(src->ctx, layer, e) : 0;
    if (rc < 0)
        return fl_err_set(err, rc, "layer %d expert %d: reading its weights failed: %s", layer, e,
                          strerror(-rc));
    return 0;
}

static void release_range(const struct eng_expert_source *src, int layer, const int32_t *order,
                          int n)
{
    for (int i = 0; src && i < n; i++)
        src->release(src->ctx, layer, order[i]);
}

/* One expert at a time, each matmul spread over the pool: decode steps and
 * batches that route few experts. */
static int run_serial(struct moe_state *s, struct fl_err *err)
{
    const struct eng_expert_source *src = s->c->experts;
    const struct eng_moe *m = s->e;
    for (int i = 0; i < s->L->n_order; i++) {
        const int e = s->L->order[i];
        int rc = acquire(src, s->layer, e, err);
        if (rc)
            return rc;
        const double work = (double)s->L->count[e] * m->gate->ne[1] * m->down->ne[1];
        run_expert(s, &s->bufs[0], eng_pool_for(s->c, work), e);
        release_range(src, s->layer, &s->L->order[i], 1);
    }
    return 0;
}

/* A decode step with every expert in RAM: the gate and up products of all
 * routed experts in one pool round, then all down products in another;
 * two wake-ups and waits per layer instead of three per expert (top-8:
 * 24), and threads done with one expert's rows take the next one's. The
 * same products as run_expert, so the same bits. */
#define MOE_BATCH_EXPERTS 32

struct act_job {
    struct moe_state *s;
    struct fl_qact *hq; /* [n_order]: each expert's down-projection input */
};

/* activate_expert for every ith expert (each expert's result is the same
 * whichever thread makes it). */
static void act_worker(void *arg, int ith, int nth)
{
    const struct act_job *j = arg;
    for (int i = ith; i < j->s->L->n_order; i += nth)
        activate_expert(j->s, &j->s->bufs[i], NULL, j->s->L->order[i], &j->hq[i]);
}

static int run_batched(struct moe_state *s, struct fl_err *err)
{
    const struct eng_moe *m = s->e;
    const struct eng_expert_lists *L = s->L;
    const int64_t n_ff = m->gate->ne[1], n_embd = m->down->ne[1];
    struct fl_matmul_task t[2 * MOE_BATCH_EXPERTS] = { { 0 } };
    struct fl_qact hq[MOE_BATCH_EXPERTS];
    const int n = L->n_order;
    for (int i = 0; i < n; i++) {
        const int e = L->order[i];
        const int32_t *tok = L->tok + L->start[e];
        t[2 * i] = (struct fl_matmul_task){ expert_data(m->gate, e), m->gate->type, n_ff, &s->xg,
                                            tok, L->count[e], s->bufs[i].g, n_ff, NULL };
        t[2 * i + 1] = (struct fl_matmul_task){ expert_data(m->up, e), m->up->type, n_ff, &s->xu,
                                                tok, L->count[e], s->bufs[i].u, n_ff, NULL };
    }
    int rc = fl_matmul_batch(s->c->pool, t, 2 * n);
    if (!rc) { /* the activation (expf per value) is too long to leave to one thread */
        struct act_job aj = { .s = s, .hq = hq };
        fl_pool_run(s->c->pool, act_worker, &aj);
    }
    for (int i = 0; i < n && !rc; i++) {
        const int e = L->order[i];
        t[i] = (struct fl_matmul_task){ expert_data(m->down, e), m->down->type, n_embd, &hq[i],
                                        s->iota, L->count[e], s->slots, n_embd,
                                        L->slot + L->start[e] };
    }
    if (!rc)
        rc = fl_matmul_batch(s->c->pool, t, n);
    if (rc < 0)
        return fl_err_set(err, rc, "layer %d: expert products failed: %s", s->layer,
                          strerror(-rc));
    for (int i = 0; i < n; i++) {
        const int e = L->order[i];
        add_bias_rows(s->slots, n_embd, L->slot + L->start[e], L->count[e], m->down_b, e);
    }
    return 0;
}

static void wave_worker(void *arg, int ith, int nth)
{
    struct moe_state *s = arg;
    (void)nth;
    int64_t b, e;
    while (fl_chunks_next(&s->chunks, &b, &e))
        for (int64_t i = b; i < e; i++)
            run_expert(s, &s->bufs[ith], NULL, s->L->order[s->wave0 + i]);
}

/* Whole experts per thread, in waves of a few per thread: a batch that
 * routes many experts (prefill) would otherwise pay a pool round trip per
 * small matmul. Acquire and release stay on this thread, and at most one
 * wave is pinned at a time. */
static int run_waves(struct moe_state *s, int nth, struct fl_err *err)
{
    const struct eng_expert_source *src = s->c->experts;
    int wave = 4 * nth;
    if (src && src->max_pinned > 0 && wave > src->max_pinned)
        wave = src->max_pinned;
    for (int w0 = 0; w0 < s->L->n_order; w0 += wave) {
        const int n = s->L->n_order - w0 < wave ? s->L->n_order - w0 : wave;
        for (int i = 0; i < n; i++) {
            int rc = acquire(src, s->layer, s->L->order[w0 + i], err);
            if (rc) {
                release_range(src, s->layer, &s->L->order[w0], i);
                return rc;
            }
        }
        s->wave0 = w0;
        fl_chunks_init(&s->chunks, n, 1);
        fl_pool_run(s->c->pool, wave_worker, s);
        release_range(src, s->layer, &s->L->order[w0], n);
    }
    return 0;
}

int eng_moe_begin(struct eng_ctx *c, int layer, int pos0, const float *x, int64_t n_tok,
                  const int32_t *ids, const float *weights, int64_t k, const struct eng_moe *e,
                  struct eng_expert_lists *L, struct fl_err *err)
{
    if (c->routing)
        c->routing->record(c->routing->ctx, layer, pos0, (int)n_tok, (int)k, ids, weights);
    build_lists(c, ids, n_tok, k, e->gate->ne[2], L);
    const struct eng_expert_source *src = c->experts;
    if (src && src->hidden)
        src->hidden(src->ctx, layer, x, n_tok);
    if (src && src->prefetch) {
        int rc = src->prefetch(src->ctx, layer, L->order, L->n_order);
        if (rc < 0)
            return fl_err_set(err, rc, "layer %d: prefetching experts failed: %s", layer,
                              strerror(-rc));
    }
    return 0;
}

int eng_moe_cpu(struct eng_ctx *c, int layer, const float *x, int64_t n_tok,
                struct eng_expert_lists *L, const float *weights, int64_t k,
                const struct eng_moe *e, float *out, struct fl_err *err)
{
    const int64_t n_embd = e->down->ne[1];
    const struct eng_expert_source *src = c->experts;
    order_resident_first(src, layer, L);
    const int nth = fl_pool_size(c->pool);
    /* one token, nothing paged: no reads to overlap, only pool rounds to save */
    const bool batched = nth > 1 && n_tok == 1 && !src && L->n_order <= MOE_BATCH_EXPERTS;
    const bool waves = !batched && nth > 1 && L->n_order >= 2 * nth;
    struct moe_state s = { .c = c, .e = e, .L = L, .layer = layer };
    prepare_state(&s, x, n_tok, k, batched ? L->n_order : waves ? nth : 1);
    int rc = batched ? run_batched(&s, err) : waves ? run_waves(&s, nth, err) : run_serial(&s, err);
    if (rc < 0)
        return rc;
    /* llama.cpp scales each slot's output by its weight, then adds the
     * slots in order 0..k-1. */
    for (int64_t t = 0; t < n_tok; t++) {
        float *o = out + t * n_embd;
        for (int64_t j = 0; j < k; j++) {
            const float w = weights[t * k + j];
            const float *y = s.slots + (t * k + j) * n_embd;
            if (j == 0)
                for (int64_t d = 0; d < n_embd; d++)
                    o[d] = y[d] * w;
            else
                for (int64_t d = 0; d < n_embd; d++)
                    o[d] += y[d] * w;
        }
    }
    return 0;
}

int eng_moe_ffn(struct eng_ctx *c, int layer, int pos0, const float *x, int64_t n_tok,
                const int32_t *ids, const float *weights, int64_t k, const struct eng_moe *e,
                float *out, struct fl_err *err)
{
    struct eng_expert_lists L;
    int rc = eng_moe_begin(c, layer, pos0, x, n_tok, ids, weights, k, e, &L, err);
    if (rc)
        return rc;
    if (c->gpu) { /* experts in VRAM, or brought there by --gpu-experts */
        rc = eng_gpu_moe(c, layer, x, n_tok, &L, weights, k, e, out, err);
        if (rc)
            return rc < 0 ? rc : 0;
    }
    return eng_moe_cpu(c, layer, x, n_tok, &L, weights, k, e, out, err);
}
