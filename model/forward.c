/* forward.c: the entry point of a pass and the pieces every architecture
 * builds from the backend's ops (model/backend.h). */
#include <errno.h>
#include <math.h>

#include "model/backend.h"
#include "model/kv-cache.h"

/* Checks the spans against the batch, the context and each other. */
static int check_spans(const struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err)
{
    const int n_ctx = eng_kv_n_ctx(c->kv), n_seq = eng_kv_n_seq(c->kv);
    int total = 0;
    for (int i = 0; i < b->n_spans; i++) {
        const struct eng_span *s = &b->spans[i];
        if (s->n_tok < 1 || s->seq < 0 || s->seq >= n_seq)
            return fl_err_set(err, -EINVAL, "batch span %d: %d tokens of sequence %d (0..%d)", i,
                              s->n_tok, s->seq, n_seq - 1);
        if (s->pos0 < 0 || s->pos0 > n_ctx - s->n_tok)
            return fl_err_set(err, -ENOSPC, "positions %d..%d do not fit the context of %d",
                              s->pos0, s->pos0 + s->n_tok - 1, n_ctx);
        for (int j = 0; j < i; j++)
            if (b->spans[j].seq == s->seq)
                return fl_err_set(err, -EINVAL, "sequence %d appears twice in one batch", s->seq);
        total += s->n_tok;
    }
    if (total != b->n_tok)
        return fl_err_set(err, -EINVAL, "batch spans hold %d tokens, the batch %d", total, b->n_tok);
    return 0;
}

int eng_batch_prepare(struct eng_ctx *c, const struct eng_batch *in, struct eng_batch *b,
                         struct fl_err *err)
{
    *b = *in;
    if (!in->spans) {
        struct eng_span *one = eng_scratch(c, sizeof(*one));
        *one = (struct eng_span){ .seq = 0, .pos0 = in->pos0, .n_tok = in->n_tok, .logits = true };
        b->spans = one;
        b->n_spans = 1;
    }
    int rc = check_spans(c, b, err);
    for (int i = 0; !rc && i < b->n_spans; i++)
        rc = eng_kv_rs_check(c->kv, b->spans[i].seq, b->spans[i].pos0, err);
    for (int i = 0; !rc && i < b->n_spans; i++)
        rc = eng_kv_seq_reserve(c->kv, b->spans[i].seq, b->spans[i].pos0 + b->spans[i].n_tok, err);
    if (rc)
        return rc;
    for (int i = 0; i < b->n_spans; i++) /* recurrent state: zeroed at a sequence's start */
        eng_kv_rs_begin(c->kv, b->spans[i].seq, b->spans[i].pos0, b->spans[i].n_tok);
    const size_t n = (size_t)b->n_tok;
    int32_t *pos = eng_scratch(c, 6 * n * sizeof(int32_t));
    int32_t *seq = pos + n, *span = seq + n, *cell = span + n, *out = cell + n, *eout = out + n;
    int t = 0, n_out = 0, n_eout = 0;
    for (int i = 0; i < b->n_spans; i++) {
        const struct eng_span *s = &b->spans[i];
        const int32_t *cells = eng_kv_seq_cells(c->kv, s->seq);
        for (int j = 0; j < s->n_tok; j++, t++) {
            pos[t] = s->pos0 + j;
            seq[t] = s->seq;
            span[t] = i;
            cell[t] = cells[pos[t]];
            if (!(b->all_logits || (s->all_rows && j >= s->first_row) ||
                  (s->logits && j == s->n_tok - 1)))
                continue;
            if (s->embd)
                eout[n_eout++] = t;
            else
                out[n_out++] = t;
        }
    }
    b->pos = pos, b->seq = seq, b->span = span, b->cell = cell, b->out = out, b->n_out = n_out;
    b->embd_out = eout, b->n_embd_out = n_eout;
    return 0;
}

int eng_forward(struct eng_ctx *c, const struct eng_batch *in, struct fl_err *err)
{
    if (in->n_tok < 1)
        return fl_err_set(err, -EINVAL, "empty batch");
    for (int i = 0; i < in->n_tok; i++)
        if (in->tokens[i] < 0 || in->tokens[i] >= c->m->hp.n_vocab)
            return fl_err_set(err, -EINVAL, "token id %d is outside the vocabulary [0, %lld)",
                              in->tokens[i], (long long)c->m->hp.n_vocab);
    eng_arena_reset(c->arena);
    struct eng_batch b;
    int rc = eng_batch_prepare(c, in, &b, err);
    if (rc)
        return rc;
    if (b.n_embd_out > 0 && !b.embd)
        return fl_err_set(err, -EINVAL, "a span asks for embeddings and the batch has no room");
    /* the one place a pass's backend is chosen */
    c->be = c->pick ? c->pick(c) : c->cpu;
    c->batch = &b;
    if (c->be->begin)
        c->be->begin(c);
    rc = c->m->arch->forward(c, &b, err);
    c->batch = NULL; /* b lives on this stack frame */
    return rc;
}

void eng_ffn_act(struct eng_ctx *c, const float *x, int64_t n_tok, const struct eng_tensor *gate,
                 const struct eng_tensor *up, const struct eng_tensor *down,
                 const struct eng_gated *a, float *out)
{
    const int64_t n_ff = gate->ne[1];
    float *g = eng_tmp(c, n_tok * n_ff), *u = eng_tmp(c, n_tok * n_ff);
    const struct eng_tensor *gu[2] = { gate, up };
    eng_matmul_shared(c, 2, gu, x, n_tok, (float *const[2]){ g, u });
    eng_gated_act(c, g, u, n_tok * n_ff, a);
    eng_matmul(c, down, g, n_tok, out);
}

void eng_ffn(struct eng_ctx *c, const float *x, int64_t n_tok, const struct eng_tensor *gate,
             const struct eng_tensor *up, const struct eng_tensor *down, float *out)
{
    const struct eng_gated swiglu = { .act = ENG_ACT_SWIGLU };
    eng_ffn_act(c, x, n_tok, gate, up, down, &swiglu, out);
}

void eng_gqa_attend(struct eng_ctx *c, int il, const struct eng_batch *b, float *q, float *k,
                    const float *v, const float *cs, float *out)
{
    const struct eng_hparams *hp = &c->m->hp;
    const int n = b->n_tok;
    const int64_t hd = hp->n_embd_head_k, nq = hp->n_head * hd, nkv = hp->n_head_kv * hd;
    eng_rope(c, q, n, nq, (int)hp->n_head, hd, (int)hp->n_rot, hp->rope_mode, cs);
    eng_rope(c, k, n, nkv, (int)hp->n_head_kv, hd, (int)hp->n_rot, hp->rope_mode, cs);
    eng_kv_store(c, il, b, k, nkv, v, nkv);
    const struct eng_attn at = {
        .n_head = (int)hp->n_head, .n_head_kv = (int)hp->n_head_kv, .dk = hd, .dv = hd,
        .k_stride = hd, .v_stride = hd, .scale = 1.0f / sqrtf((float)hd),
    };
    eng_attention(c, il, b, q, nq, &at, out, nq);
}

const float *eng_rope_table(struct eng_ctx *c, const struct eng_batch *b,
                            const struct yarn_rope *rope)
{
    const int64_t n = (int64_t)b->n_tok * (rope->p.n_dims > 0 ? rope->p.n_dims : 1);
    float *cs = eng_scratch_f32(c, n);
    yarn_rope_table(rope, cs, b->pos, b->n_tok);
    return eng_upload(c, cs, n);
}
