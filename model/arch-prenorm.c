/* arch-prenorm.c: see model/arch-prenorm.h. */
#include "model/arch-prenorm.h"

/* The residual attention's checkpoints: n of the pass's rows each. */
struct bank {
    float *rows, *mixed;
    int n;
};

/* What a norm reads: the stream, or its mix with the checkpoints. */
static const float *mix(struct eng_ctx *c, const struct eng_prenorm *p, const struct bank *k,
                        const struct eng_tensor *score, const float *x, int64_t n)
{
    const int64_t e = c->m->hp.n_embd;
    if (!p->res || k->n == 0)
        return x; /* nothing banked yet: the stream itself */
    eng_res_mix(c, k->rows, k->n, x, score, n, e, c->m->hp.rms_eps, k->mixed);
    return k->mixed;
}

int eng_prenorm_forward(struct eng_ctx *c, const struct eng_batch *b,
                        const struct eng_prenorm *p, struct fl_err *err)
{
    const struct eng_model *m = c->m;
    const struct eng_res_attn *ra = p->res;
    const int64_t e = m->hp.n_embd, n = b->n_tok;
    const float eps = m->hp.rms_eps;
    float *x = eng_tmp(c, n * e), *cur = eng_tmp(c, n * e), *out = eng_tmp(c, n * e);
    struct bank k = { 0 };
    if (ra) {
        k.rows = eng_tmp(c, (int64_t)((p->n_layer + ra->block - 1) / ra->block) * n * e);
        k.mixed = eng_tmp(c, n * e);
    }
    int rc = eng_embed(c, m->embd, b, x, err);
    for (int il = 0; !rc && il < p->n_layer; il++) {
        const struct eng_tensor *attn_norm, *ffn_norm;
        const struct eng_mark mark = eng_mark(c);
        p->norms(p->arch, il, &attn_norm, &ffn_norm);
        const float *in = mix(c, p, &k, ra ? ra->attn_score[il] : NULL, x, n);
        const bool bank = ra && il % ra->block == 0;
        if (bank) /* the layer's raw input, not the mix */
            eng_copy_2d(c, k.rows + (int64_t)k.n++ * n * e, e, x, e, e, n);
        eng_rmsnorm(c, cur, in, attn_norm, e, n, e, eps);
        p->attention(c, p, il, cur, b, out);
        if (bank)
            eng_copy_2d(c, x, e, out, e, e, n);
        else
            eng_add(c, x, out, n * e);
        in = mix(c, p, &k, ra ? ra->ffn_score[il] : NULL, x, n);
        eng_rmsnorm(c, cur, in, ffn_norm, e, n, e, eps);
        rc = p->ffn(c, p, il, cur, b, out, err);
        if (!rc)
            eng_add(c, x, out, n * e);
        eng_release(c, mark);
    }
    const float *last = rc ? x : mix(c, p, &k, ra ? ra->out_score : NULL, x, n);
    return rc ? rc : eng_output(c, last, b, m->out_norm, m->output, eps, err);
}
