/* arch-prenorm.c: see engine/arch-prenorm.h. */
#include "engine/arch-prenorm.h"

int eng_prenorm_forward(struct eng_ctx *c, const struct eng_batch *b,
                        const struct eng_prenorm *p, struct fl_err *err)
{
    const struct eng_hparams *hp = &c->m->hp;
    const int64_t e = hp->n_embd, n = b->n_tok;
    float *x = eng_scratch_f32(c, n * e);
    float *cur = eng_scratch_f32(c, n * e);
    float *out = eng_scratch_f32(c, n * e);
    int rc = eng_get_rows(p->embd, b->tokens, b->n_tok, x, err);
    for (int il = 0; !rc && il < p->n_layer; il++) {
        const struct eng_tensor *attn_norm, *ffn_norm;
        const struct eng_scratch_mark mark = eng_scratch_mark(c);
        p->norms(p->arch, il, &attn_norm, &ffn_norm);
        eng_rmsnorm_rows(cur, x, attn_norm, e, n, e, hp->rms_eps);
        p->attention(c, p->arch, il, cur, b, out);
        eng_add(x, out, n * e);
        eng_rmsnorm_rows(cur, x, ffn_norm, e, n, e, hp->rms_eps);
        rc = p->ffn(c, p->arch, il, cur, b, out, err);
        if (!rc)
            eng_add(x, out, n * e);
        eng_scratch_release(c, mark);
    }
    if (!rc)
        eng_output(c, x, b, p->out_norm, p->output, hp->rms_eps);
    return rc;
}
