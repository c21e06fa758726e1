/* arch-prenorm.c: see model/arch-prenorm.h. */
#include "model/arch-prenorm.h"

#include "backend/cuda/gpu-offload.h"

/* Every tensor of the trunk the device pass reads is in VRAM. */
static bool on_device(const struct eng_ctx *c, const struct eng_prenorm *p)
{
    if (!c->gpu || !p->gpu_tensors || !eng_gpu_on_device(c, &p->out_norm, 1))
        return false;
    for (int il = 0; il < p->n_layer; il++) {
        const struct eng_tensor *w[PRENORM_GPU_TENSORS + 2];
        p->norms(p->arch, il, &w[0], &w[1]);
        const int n = p->gpu_tensors(p->arch, il, w + 2);
        if (!eng_gpu_on_device(c, w, n + 2))
            return false;
    }
    return true;
}

/* The same loop over activations in VRAM. */
static int gpu_forward(struct eng_ctx *c, const struct eng_batch *b, const struct eng_prenorm *p,
                       struct fl_err *err)
{
    const struct eng_hparams *hp = &c->m->hp;
    const int64_t e = hp->n_embd, n = b->n_tok;
    float *x = eng_scratch_f32(c, n * e);
    int rc = eng_get_rows(p->embd, b->tokens, b->n_tok, x, err);
    if (rc)
        return rc;
    float *d_x = eng_gpu_pass_begin(c, x, n * e);
    float *d_cur = eng_gpu_tmp(c, n * e), *d_out = eng_gpu_tmp(c, n * e);
    for (int il = 0; il < p->n_layer; il++) {
        const struct eng_tensor *attn_norm, *ffn_norm;
        const struct eng_scratch_mark mark = eng_scratch_mark(c);
        const struct eng_gpu_mark dmark = eng_gpu_tmp_mark(c);
        p->norms(p->arch, il, &attn_norm, &ffn_norm);
        eng_gpu_rmsnorm_rows(c, d_cur, d_x, attn_norm, e, n, e, hp->rms_eps);
        p->gpu_attention(c, p->arch, il, d_cur, b, d_out);
        eng_gpu_add(c, d_x, d_out, n * e);
        eng_gpu_rmsnorm_rows(c, d_cur, d_x, ffn_norm, e, n, e, hp->rms_eps);
        p->gpu_ffn(c, p->arch, il, d_cur, b, d_out);
        eng_gpu_add(c, d_x, d_out, n * e);
        eng_gpu_tmp_release(c, dmark);
        eng_scratch_release(c, mark);
    }
    return eng_gpu_pass_end(c, d_x, b, p->out_norm, p->output, hp->rms_eps, err);
}

int eng_prenorm_forward(struct eng_ctx *c, const struct eng_batch *b,
                        const struct eng_prenorm *p, struct fl_err *err)
{
    if (on_device(c, p))
        return gpu_forward(c, b, p, err);
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
