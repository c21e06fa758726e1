/* cpu-moe.c: the mixture-of-experts FFN's experts on the CPU.
 *
 * It walks experts, not tokens: every token routed to expert e goes through
 * e's matrices in one matmul, between acquire and release of that expert,
 * so a paged expert is read once per layer and batch. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu-backend.h"
#include "backend/cpu/cpu-ops.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/threadpool.h"
#include "gguf/tensor-types.h"
#include "model/activation.h"

static void add_bias_rows(float *y, int64_t ldy, const int32_t *rows, int64_t n,
                          const struct eng_tensor *b, int expert)
{
    if (!b)
        return;
    const float *bv = (const float *)b->data + (int64_t)expert * b->ne[0];
    for (int64_t i = 0; i < n; i++)
        cpu_add(y + (rows ? rows[i] : i) * ldy, bv, b->ne[0]);
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
    for (int64_t i = 0; i < n; i++) {
        float *g = b->g + i * n_ff;
        if (m->act.act != ENG_ACT_SWIGLU)
            eng_gated_f32(&m->act, g, b->u + i * n_ff, g, n_ff);
        else
            cpu_swiglu(g, b->u + i * n_ff, n_ff);
    }
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
    struct fl_pool *qpool = eng_cpu_pool_for(c, (double)n_tok * n_in * 16);
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
        run_expert(s, &s->bufs[0], eng_cpu_pool_for(s->c, work), e);
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

int eng_cpu_moe_experts(struct eng_ctx *c, int layer, const float *x, int64_t n_tok,
                        struct eng_expert_lists *L, const float *weights, int64_t k,
                        const struct eng_moe *e, float *out, struct fl_err *err)
{
    const int64_t n_embd = e->down->ne[1];
    const struct eng_expert_source *src = c->experts;
    eng_moe_resident_first(src, layer, L);
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
