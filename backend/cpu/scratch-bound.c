/* scratch-bound.c: how much host scratch a CPU pass may take
 * (cpu-backend.h's eng_cpu_scratch_bound).
 *
 * The pass's arena holds the residual rows for the whole pass and one
 * layer's scratch at a time (arch-prenorm.c releases each layer's). So the
 * bound is the residual rows plus the largest layer: its products' outputs
 * and quantized inputs, the attention op's key/value conversion and
 * per-thread rows, and the MoE op's per-token slots and per-thread expert
 * buffers (cpu-moe.c). Architectures also keep buffers derived from a
 * product's output (rotated or gated copies, conv windows, MLA's per-head
 * queries), so each output counts a quarter more rather than each arch's
 * code being mirrored here (measured on every architecture in tests/data
 * and the 1.5 GB cpu-* models: 1.1-1.5x what passes take at 64-512
 * tokens); test-scratch-bound holds the bound above the arena's measured
 * high water on every architecture and within a factor of it. */
#include "backend/cpu/attention.h"
#include "backend/cpu/cpu-backend.h"
#include "backend/cpu/indexer.h"
#include "backend/cpu/msa.h"

#include "backend/cpu/matmul.h"
#include "gguf/tensor-names.h"
#include "model/model.h"

static uint64_t quantized_input(uint32_t type, int64_t n_in, int64_t n_tok)
{
    return fl_matmul_scratch_size(type, n_in, n_tok) + 128;
}

/* A non-expert matrix of a block: its output (per head for 3-D ones, as
 * MLA's k_b and v_b) and a quarter more, and its input quantized. */
static uint64_t product_bytes(const struct eng_tensor *t, int64_t n_tok)
{
    if (t->n_dims < 2 || t->ne[1] <= 1)
        return (uint64_t)n_tok * (uint64_t)t->ne[0] * sizeof(float); /* a norm's or a bias's row */
    const uint64_t out = (uint64_t)n_tok * (uint64_t)(t->ne[1] * t->ne[2]) * sizeof(float);
    return out + out / 4 + quantized_input(t->type, t->ne[0], n_tok);
}

/* One routed layer's experts on the CPU: routes, lists, slots of every
 * (token, choice), and a gate and up row per token in each thread's buffer. */
static uint64_t moe_bytes(const struct eng_tensor *gate, const struct eng_tensor *down,
                          int64_t k, int64_t n_tok, int n_threads)
{
    const int64_t n_embd = down->ne[1], n_ff = gate->ne[1], n_expert = gate->ne[2];
    uint64_t b = (uint64_t)(n_tok * k) * (2 * sizeof(float) + 2 * sizeof(int32_t));
    b += (uint64_t)(3 * n_expert + 1) * sizeof(int32_t) + 2 * quantized_input(gate->type, n_embd, n_tok);
    b += (uint64_t)(n_tok * k * n_embd) * sizeof(float) + (uint64_t)n_tok * sizeof(int32_t);
    const uint64_t buf = 2 * (uint64_t)(n_tok * n_ff) * sizeof(float) +
                         quantized_input(down->type, n_ff, n_tok) + 128;
    /* one token: a buffer per expert (run_batched); else one per thread */
    const int64_t nbuf = n_tok == 1 && k > n_threads ? k : n_threads;
    return b + (uint64_t)nbuf * buf;
}

/* Attention over n_kv positions: the keys and values converted to F32
 * (long spans), each thread's rows of scores and sums, the token list. */
static uint64_t attention_bytes(const struct eng_model *m, int il, int64_t n_tok, int64_t n_kv,
                                int n_threads)
{
    const int64_t kd = m->kv_k_dim ? m->kv_k_dim[il] : 0, vd = m->kv_v_dim ? m->kv_v_dim[il] : 0;
    if (!kd)
        return 0;
    const int64_t d = kd > vd ? kd : vd;
    uint64_t b = (uint64_t)((kd + (vd ? vd : kd)) * n_kv) * sizeof(float);
    /* per thread: the F32 path's rows of sums and scores, or the one-chunk
     * path's V row and up to ENG_FA_GROUP heads' sums and queries (a head's
     * dims are at most its row's) */
    const int64_t heads = m->hp.n_head < ENG_FA_GROUP ? m->hp.n_head : ENG_FA_GROUP;
    /* DSA: the selected keys and values gathered, up to top_k of each */
    const int64_t sel = m->hp.indexer_top_k < n_kv ? m->hp.indexer_top_k : n_kv;
    const int64_t f32 = m->hp.n_head * (d + n_kv) + 2 * d * sel + 16,
                  one = d + heads * (d + 2 * kd + d / 2 + 16);
    b += (uint64_t)n_threads * (uint64_t)(f32 > one ? f32 : one) * sizeof(float);
    return b + (uint64_t)n_tok * sizeof(int32_t) + 256;
}

/* A lightning indexer's (DSA's, a layer with an indexer key row): the
 * scores of a group of tokens, each thread's copy of a token's scores, the
 * weights and the token list; all but the list given back when it ends. */
static uint64_t indexer_bytes(const struct eng_model *m, int il, int64_t n_tok, int64_t n_kv,
                              int n_threads)
{
    if (!m->kv_latent || !m->kv_v_dim || !m->kv_v_dim[il] || n_kv <= m->hp.indexer_top_k)
        return 0; /* no query sees more than top_k positions: none is scored */
    const int64_t one = n_kv > CPU_INDEXER_SCORE_FLOATS ? n_kv : CPU_INDEXER_SCORE_FLOATS;
    const int64_t scores = n_tok * n_kv < one ? n_tok * n_kv : one;
    const int64_t row = cpu_indexer_thread_floats(m->kv_v_dim[il], n_kv) + 16;
    return (uint64_t)(scores + n_threads * row + n_tok * (m->hp.indexer_n_head + 2)) *
               sizeof(float) + 256;
}

/* MiniMax's block selection in block il: the pass's selection rows and
 * each thread's key block and block maxima (cpu_msa_thread_floats). */
static uint64_t msa_bytes(const struct eng_model *m, int il, int64_t n_tok, int64_t n_kv,
                          int n_threads)
{
    const struct eng_msa_sizes *s = &m->hp.msa;
    if (!m->hp.msa_layers || il >= m->hp.n_layer || !m->hp.msa_layers[il])
        return 0;
    const struct eng_msa p = { .n_head = s->n_head, .head_dim = s->head_dim, .block = s->block,
                               .top_k = s->top_k };
    const int64_t rows = n_tok * s->n_head;
    return (uint64_t)(rows * ((int64_t)s->top_k * s->block + 1)) * sizeof(int32_t) +
           (uint64_t)n_threads * (uint64_t)(cpu_msa_thread_floats(&p, n_kv) + 16) * sizeof(float) +
           256;
}

uint64_t eng_cpu_scratch_bound(const struct eng_model *m, int64_t n_tok, int64_t n_kv,
                               int64_t n_out, int n_threads)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t n_layer = hp->n_layer;
    uint64_t worst = 0;
    for (int il = 0; il < n_layer; il++) {
        /* the indexer gives its scratch back before attention takes its own */
        const uint64_t attn = attention_bytes(m, il, n_tok, n_kv, n_threads),
                       index = indexer_bytes(m, il, n_tok, n_kv, n_threads);
        uint64_t layer = attn > index ? attn : index;
        layer += msa_bytes(m, il, n_tok, n_kv, n_threads); /* the selection lives on into attention */
        const struct eng_tensor *gate = NULL, *down = NULL;
        for (int64_t i = 0; i < m->n_tensors; i++) {
            const struct eng_tensor *t = &m->tensors[i];
            if (fl_tensor_block(t->name) != il)
                continue;
            bool bias;
            const int part = fl_tensor_expert_part(t->name, &bias);
            if (part == FL_EXPERT_GATE && !bias)
                gate = t;
            else if (part == FL_EXPERT_DOWN && !bias)
                down = t;
            else if (!fl_tensor_is_expert(t->name))
                layer += product_bytes(t, n_tok);
        }
        if (gate && down)
            layer += moe_bytes(gate, down, hp->n_expert_used, n_tok, n_threads);
        worst = layer > worst ? layer : worst;
    }
    /* the residual rows, positions and rope tables, and the head's rows */
    uint64_t pass = 3 * (uint64_t)(n_tok * hp->n_embd) * sizeof(float);
    pass += (uint64_t)n_tok * (8 * sizeof(int32_t) + 2 * (uint64_t)hp->n_rot * sizeof(float));
    pass += (uint64_t)n_tok * (uint64_t)(hp->indexer_top_k + 1) * sizeof(int32_t); /* DSA's choice */
    if (hp->res_attn_block > 0) /* Kimi K3's banked inputs and their mix */
        pass += (uint64_t)((n_layer + hp->res_attn_block - 1) / hp->res_attn_block + 1) *
                (uint64_t)(n_tok * hp->n_embd) * sizeof(float);
    if (m->output)
        pass += (uint64_t)(n_out * hp->n_embd) * sizeof(float) +
                quantized_input(m->output->type, hp->n_embd, n_out);
    return pass + worst + 4096;
}
