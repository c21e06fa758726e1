/* arch-prenorm.c: see model/arch-prenorm.h. */
#include "model/arch-prenorm.h"

int eng_prenorm_forward(struct eng_ctx *c, const struct eng_batch *b,
                        const struct eng_prenorm *p, struct fl_err *err)
{
    const struct eng_model *m = c->m;
    const int64_t e = m->hp.n_embd, n = b->n_tok;
    const float eps = m->hp.rms_eps;
    float *x = eng_tmp(c, n * e), *cur = eng_tmp(c, n * e), *out = eng_tmp(c, n * e);
    int rc = eng_embed(c, m->embd, b, x, err);
    for (int il = 0; !rc && il < p->n_layer; il++) {
        const struct eng_tensor *attn_norm, *ffn_norm;
        const struct eng_mark mark = eng_mark(c);
        p->norms(p->arch, il, &attn_norm, &ffn_norm);
        eng_rmsnorm(c, cur, x, attn_norm, e, n, e, eps);
        p->attention(c, p, il, cur, b, out);
        eng_add(c, x, out, n * e);
        eng_rmsnorm(c, cur, x, ffn_norm, e, n, e, eps);
        rc = p->ffn(c, p, il, cur, b, out, err);
        if (!rc)
            eng_add(c, x, out, n * e);
        eng_release(c, mark);
    }
    return rc ? rc : eng_output(c, x, b, m->out_norm, m->output, eps, err);
}
