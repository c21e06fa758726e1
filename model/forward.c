/* forward.c: the entry point of a pass and the pieces every architecture
 * builds from the backend's ops (model/backend.h). */
#include <errno.h>
#include <math.h>

#include "model/backend.h"
#include "model/kv-cache.h"
#include "model/rope.h"

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
    /* the one place a pass's backend is chosen */
    c->be = c->pick ? c->pick(c) : c->cpu;
    if (c->be->begin)
        c->be->begin(c);
    return c->m->arch->forward(c, b, err);
}

void eng_ffn(struct eng_ctx *c, const float *x, int64_t n_tok, const struct eng_tensor *gate,
             const struct eng_tensor *up, const struct eng_tensor *down, float *out)
{
    const int64_t n_ff = gate->ne[1];
    float *g = eng_tmp(c, n_tok * n_ff), *u = eng_tmp(c, n_tok * n_ff);
    const struct eng_tensor *gu[2] = { gate, up };
    eng_matmul_shared(c, 2, gu, x, n_tok, (float *const[2]){ g, u });
    eng_swiglu(c, g, u, n_tok * n_ff);
    eng_matmul(c, down, g, n_tok, out);
}

void eng_rope_cache(float *cs, int n_rot, float freq_base, float freq_scale, int pos0, int n_pos)
{
    const float theta_scale = powf(freq_base, -2.0f / (float)n_rot);
    for (int p = 0; p < n_pos; p++) {
        float theta = (float)(pos0 + p);
        float *c = cs + (int64_t)p * n_rot;
        for (int i0 = 0; i0 < n_rot; i0 += 2) {
            const float th = freq_scale * theta;
            c[i0] = cosf(th);
            c[i0 + 1] = sinf(th);
            theta *= theta_scale;
        }
    }
}

const float *eng_rope_table(struct eng_ctx *c, const struct eng_batch *b, int n_rot,
                            float freq_base, float freq_scale)
{
    const int64_t n = (int64_t)b->n_tok * (n_rot > 0 ? n_rot : 1);
    float *cs = eng_scratch_f32(c, n);
    eng_rope_cache(cs, n_rot, freq_base, freq_scale, b->pos0, b->n_tok);
    return eng_upload(c, cs, n);
}
