/* ops.c: the per-forward scratch arena, the forward entry point, matmul
 * wrappers, the dense FFN and the output head. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/matmul.h"
#include "backend/cpu/threadpool.h"
#include "backend/cuda/gpu-offload.h"
#include "model/ops.h"

/* Chunks never move while a forward pass holds pointers into them; on reset
 * several chunks are merged into one big enough for the whole last pass, so
 * steady state is a single allocation. */
struct arena_chunk {
    struct arena_chunk *next;
    size_t size, used;
    _Alignas(64) unsigned char data[];
};

struct eng_arena {
    struct arena_chunk *head;
    size_t total; /* bytes handed out since the last reset */
    size_t peak;  /* most bytes live at once since the last reset */
};

int eng_arena_create(struct eng_arena **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : -ENOMEM;
}

static void free_chunks(struct arena_chunk *c)
{
    while (c) {
        struct arena_chunk *n = c->next;
        free(c);
        c = n;
    }
}

void eng_arena_destroy(struct eng_arena *a)
{
    if (!a)
        return;
    free_chunks(a->head);
    free(a);
}

static struct arena_chunk *new_chunk(size_t size)
{
    struct arena_chunk *c = aligned_alloc(64, (sizeof(*c) + size + 63) & ~(size_t)63);
    if (!c) {
        fprintf(stderr, "faultline: out of memory (%zu bytes of scratch)\n", size);
        abort();
    }
    c->next = NULL;
    c->size = size;
    c->used = 0;
    return c;
}

void eng_arena_reset(struct eng_arena *a)
{
    if (a->head && a->head->next) {
        size_t want = (a->peak > a->total ? a->peak : a->total) + 4096;
        free_chunks(a->head);
        a->head = new_chunk(want);
    } else if (a->head) {
        a->head->used = 0;
    }
    a->total = 0;
    a->peak = 0;
}

void *eng_scratch(struct eng_ctx *c, size_t bytes)
{
    struct eng_arena *a = c->arena;
    bytes = (bytes + 63) & ~(size_t)63;
    if (!a->head || a->head->size - a->head->used < bytes) {
        size_t size = a->head ? a->head->size * 2 : (size_t)1 << 20;
        if (size < bytes)
            size = bytes;
        struct arena_chunk *ch = new_chunk(size);
        ch->next = a->head;
        a->head = ch;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += bytes;
    a->total += bytes;
    if (a->total > a->peak)
        a->peak = a->total;
    return p;
}

struct eng_scratch_mark eng_scratch_mark(struct eng_ctx *c)
{
    struct eng_arena *a = c->arena;
    return (struct eng_scratch_mark){ .chunk = a->head, .used = a->head ? a->head->used : 0,
                                      .total = a->total };
}

void eng_scratch_release(struct eng_ctx *c, struct eng_scratch_mark m)
{
    struct eng_arena *a = c->arena;
    /* chunks opened since the mark are kept (the next layer needs as much)
     * but emptied; the marked chunk goes back to where it was */
    for (struct arena_chunk *ch = a->head; ch && ch != m.chunk; ch = ch->next)
        ch->used = 0;
    if (m.chunk)
        ((struct arena_chunk *)m.chunk)->used = m.used;
    a->total = m.total;
}

float *eng_scratch_f32(struct eng_ctx *c, int64_t n)
{
    return eng_scratch(c, (size_t)n * sizeof(float));
}

int eng_forward(struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err)
{
    if (b->n_tok < 1)
        return fl_err_set(err, -EINVAL, "empty batch");
    const int n_ctx = eng_kv_n_ctx(c->kv);
    if (b->pos0 < 0 || b->pos0 > n_ctx - b->n_tok)
        return fl_err_set(err, -ENOSPC, "positions %d..%d do not fit the context of %d", b->pos0,
                          b->pos0 + b->n_tok - 1, n_ctx);
    for (int i = 0; i < b->n_tok; i++)
        if (b->tokens[i] < 0 || b->tokens[i] >= c->m->hp.n_vocab)
            return fl_err_set(err, -EINVAL, "token id %d is outside the vocabulary [0, %lld)",
                              b->tokens[i], (long long)c->m->hp.n_vocab);
    eng_arena_reset(c->arena);
    return c->m->arch->forward(c, b, err);
}

/* Below this many multiply-adds a job runs on the calling thread: a pool
 * round trip costs a few microseconds on idle cores (far more on busy
 * ones), about what one core needs for this much quantized dot product.
 * (256K kept a decode's attention over the first 128 positions on one
 * thread while the others spun; at 64K it is split from 32 positions.) */
#define ENG_PARALLEL_WORK (64.0 * 1024.0)

struct fl_pool *eng_pool_for(const struct eng_ctx *c, double work)
{
    return work >= ENG_PARALLEL_WORK ? c->pool : NULL;
}

void eng_matmul(struct eng_ctx *c, const struct eng_tensor *w, int expert, const float *x,
                int64_t n_tok, float *y)
{
    if (c->gpu && eng_gpu_matmul(c, w, expert, x, n_tok, y))
        return;
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    const uint8_t *data = w->data;
    if (expert >= 0)
        data += (size_t)expert * (size_t)n_out * fl_row_size(w->type, n_in);
    void *scratch = eng_scratch(c, fl_matmul_scratch_size(w->type, n_in, n_tok) + 64);
    /* Shapes and types were checked at load, so this cannot fail. */
    (void)fl_matmul(eng_pool_for(c, (double)n_in * n_out * n_tok), data, w->type, n_in, n_out, x,
                    n_tok, y, scratch);
}

void eng_matmul_shared(struct eng_ctx *c, int n, const struct eng_tensor *const *w,
                       const float *x, int64_t n_tok, float *const *y)
{
    enum { MAX = 8 };
    if (c->gpu || n > MAX) {
        for (int i = 0; i < n; i++)
            eng_matmul(c, w[i], -1, x, n_tok, y[i]);
        return;
    }
    struct fl_qact xq[MAX];
    struct fl_matmul_task t[MAX];
    const int64_t n_in = w[0]->ne[0];
    double work = 0;
    for (int i = 0; i < n; i++) {
        int same = -1;
        for (int j = 0; j < i && same < 0; j++)
            if (fl_act_type(w[j]->type) == fl_act_type(w[i]->type))
                same = j;
        if (same >= 0)
            xq[i] = xq[same];
        else /* shapes and types were checked at load: cannot fail */
            (void)fl_quantize_act(eng_pool_for(c, (double)n_in * n_tok * 16), w[i]->type, x, n_in,
                                  n_tok, n_in,
                                  eng_scratch(c, fl_matmul_scratch_size(w[i]->type, n_in, n_tok) + 64),
                                  &xq[i]);
        t[i] = (struct fl_matmul_task){ w[i]->data, w[i]->type, w[i]->ne[1], &xq[i], NULL, n_tok,
                                        y[i], w[i]->ne[1], NULL };
        work += (double)n_in * (double)w[i]->ne[1] * (double)n_tok;
    }
    (void)fl_matmul_batch(eng_pool_for(c, work), t, n);
}

void eng_ffn(struct eng_ctx *c, const float *x, int64_t n_tok, const struct eng_tensor *gate,
             const struct eng_tensor *up, const struct eng_tensor *down, float *out)
{
    const int64_t n_ff = gate->ne[1];
    float *g = eng_scratch_f32(c, n_tok * n_ff);
    float *u = eng_scratch_f32(c, n_tok * n_ff);
    const struct eng_tensor *gu[2] = { gate, up };
    eng_matmul_shared(c, 2, gu, x, n_tok, (float *const[2]){ g, u });
    eng_swiglu(g, u, n_tok * n_ff);
    eng_matmul(c, down, -1, g, n_tok, out);
}

void eng_output(struct eng_ctx *c, const float *x, const struct eng_batch *b,
                const struct eng_tensor *norm, const struct eng_tensor *output, float eps)
{
    const int64_t n_embd = c->m->hp.n_embd;
    const int64_t first = b->all_logits ? 0 : b->n_tok - 1;
    const int64_t n = b->n_tok - first;
    float *h = eng_scratch_f32(c, n * n_embd);
    eng_rmsnorm_rows(h, x + first * n_embd, norm, n_embd, n, n_embd, eps);
    eng_matmul(c, output, -1, h, n, b->logits);
}
