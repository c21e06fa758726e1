/* model.c: tensor table, metadata helpers and model load/free. */
#include "model/model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "model/arch.h"
#include "gguf/tensor-types.h"

static int cmp_tensor(const void *a, const void *b)
{
    return strcmp(((const struct eng_tensor *)a)->name, ((const struct eng_tensor *)b)->name);
}

static int build_table(struct eng_model *m, struct fl_err *err)
{
    int64_t n = gguf_n_tensors(m->gguf);
    m->tensors = calloc(n > 0 ? (size_t)n : 1, sizeof(*m->tensors));
    if (!m->tensors)
        return fl_err_set(err, -ENOMEM, "%s: out of memory for the tensor table", gguf_name(m->gguf));
    for (int64_t i = 0; i < n; i++) {
        const struct gguf_tensor *gt = gguf_tensor(m->gguf, i);
        struct eng_tensor *t = &m->tensors[i];
        t->name = gt->name;
        t->data = m->base + gt->offset;
        t->type = gt->type;
        t->n_dims = (int)gt->n_dims;
        for (int d = 0; d < 4; d++)
            t->ne[d] = d < (int)gt->n_dims ? gt->ne[d] : 1;
        t->offset = gt->offset;
        t->nbytes = gt->nbytes;
        t->index = i;
    }
    m->n_tensors = n;
    qsort(m->tensors, (size_t)n, sizeof(*m->tensors), cmp_tensor);
    return 0;
}

const struct eng_tensor *eng_model_find(const struct eng_model *m, const char *name)
{
    struct eng_tensor key = { .name = name };
    return bsearch(&key, m->tensors, (size_t)m->n_tensors, sizeof(key), cmp_tensor);
}

const struct eng_tensor *eng_model_tensor(struct eng_model *m, int layer, const char *name,
                                          bool required, int n_dims, const int64_t *ne,
                                          struct fl_err *err)
{
    char full[256];
    if (layer >= 0)
        snprintf(full, sizeof(full), "blk.%d.%s", layer, name);
    else
        snprintf(full, sizeof(full), "%s", name);
    const struct eng_tensor *t = eng_model_find(m, full);
    if (!t) {
        if (required)
            fl_err_set(err, -EINVAL, "%s: missing tensor %s", gguf_name(m->gguf), full);
        return NULL;
    }
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] >= 0 && t->ne[d] != ne[d]) {
            fl_err_set(err, -EINVAL, "%s: tensor %s has ne[%d] = %lld, expected %lld",
                       gguf_name(m->gguf), full, d, (long long)t->ne[d], (long long)ne[d]);
            return NULL;
        }
    }
    if (!fl_type_traits(t->type)) {
        fl_err_set(err, -EINVAL, "%s: tensor %s has unknown type %u", gguf_name(m->gguf), full,
                   t->type);
        return NULL;
    }
    m->tensors[t - m->tensors].in_pass = true; /* the model's own table */
    return t;
}

const struct eng_tensor *eng_model_need(struct eng_model *m, int layer, const char *name,
                                        int n_dims, int64_t a, int64_t b, int64_t c,
                                        struct fl_err *err)
{
    const int64_t ne[3] = { a, b, c };
    return eng_model_tensor(m, layer, name, true, n_dims < 3 ? n_dims : 3, ne, err);
}

int eng_model_dense_ffn(struct eng_model *m, int layer, const struct eng_tensor **gate,
                        const struct eng_tensor **up, const struct eng_tensor **down,
                        struct fl_err *err)
{
    const int64_t e = m->hp.n_embd, f = m->hp.n_ff;
    if (f < 1)
        return fl_err_set(err, -EINVAL, "%s: missing key %s.feed_forward_length",
                          gguf_name(m->gguf), m->hp.arch);
    if (!(*gate = eng_model_need(m, layer, "ffn_gate.weight", 2, e, f, 1, err)) ||
        !(*up = eng_model_need(m, layer, "ffn_up.weight", 2, e, f, 1, err)) ||
        !(*down = eng_model_need(m, layer, "ffn_down.weight", 2, f, e, 1, err)))
        return -EINVAL;
    return 0;
}

int eng_model_set_router(struct eng_model *m, int il, const struct eng_tensor *w,
                         const struct eng_tensor *bias, const struct eng_tensor *norm,
                         struct fl_err *err)
{
    if (il < 0 || il >= m->hp.n_layer)
        return fl_err_set(err, -EINVAL, "%s: no layer %d", gguf_name(m->gguf), il);
    if (!m->routers && !(m->routers = calloc((size_t)m->hp.n_layer, sizeof(*m->routers))))
        return fl_err_set(err, -ENOMEM, "%s: out of memory", gguf_name(m->gguf));
    m->routers[il] = (struct eng_router){ .w = w, .bias = bias, .norm = norm };
    return 0;
}

void eng_router_logits(const struct eng_router *r, const float *x, float *logits)
{
    const int64_t d = r->w->ne[0];
    const float *bias = r->bias && r->bias->type == FL_TYPE_F32 ? (const float *)r->bias->data
                                                                : NULL;
    enum { LANES = 16 };
    for (int64_t e = 0; e < r->w->ne[1]; e++) {
        const float *w = (const float *)r->w->data + e * d;
        /* Independent lanes the compiler turns into vector adds: one sum
         * carried through d dependent adds took 7 % of a paged prefill's
         * CPU samples, on the main thread while the workers waited (the
         * predictor runs it per token between layers). */
        float lane[LANES] = { 0 };
        int64_t i = 0;
        for (; i + LANES <= d; i += LANES)
            for (int j = 0; j < LANES; j++)
                lane[j] += w[i + j] * x[i + j];
        double s = 0.0;
        for (int j = 0; j < LANES; j++)
            s += lane[j];
        for (; i < d; i++)
            s += (double)w[i] * x[i];
        logits[e] = bias ? (float)s + bias[e] : (float)s;
    }
}

const struct eng_router *eng_model_router(const struct eng_model *m, int il)
{
    return m->routers && il >= 0 && il < m->hp.n_layer && m->routers[il].w ? &m->routers[il]
                                                                            : NULL;
}

static int key_result(const struct eng_model *m, const char *full, int rc, bool required,
                      struct fl_err *err)
{
    if (rc == -ENOENT && !required)
        return 0;
    if (rc == -ENOENT)
        return fl_err_set(err, -EINVAL, "%s: missing key %s", gguf_name(m->gguf), full);
    if (rc < 0)
        return fl_err_set(err, -EINVAL, "%s: key %s has the wrong type", gguf_name(m->gguf), full);
    return 0;
}

#define KEYNAME(full, m, key) \
    char full[256]; \
    snprintf(full, sizeof(full), "%s.%s", (m)->hp.arch, key)

int eng_model_key_int(const struct eng_model *m, const char *key, bool required, int64_t *out,
                      struct fl_err *err)
{
    KEYNAME(full, m, key);
    int64_t v;
    int rc = gguf_get_int(m->gguf, full, &v);
    if (rc == 0)
        *out = v;
    return key_result(m, full, rc, required, err);
}

int eng_model_key_float(const struct eng_model *m, const char *key, bool required, float *out,
                        struct fl_err *err)
{
    KEYNAME(full, m, key);
    double v;
    int rc = gguf_get_float(m->gguf, full, &v);
    if (rc == 0)
        *out = (float)v;
    return key_result(m, full, rc, required, err);
}

int eng_model_key_bool(const struct eng_model *m, const char *key, bool required, bool *out,
                       struct fl_err *err)
{
    KEYNAME(full, m, key);
    bool v;
    int rc = gguf_get_bool(m->gguf, full, &v);
    if (rc == 0)
        *out = v;
    return key_result(m, full, rc, required, err);
}

static int check_positive(const struct eng_model *m, const char *what, int64_t v, int64_t max,
                          struct fl_err *err)
{
    if (v < 1 || v > max)
        return fl_err_set(err, -EINVAL, "%s: %s.%s = %lld is out of range [1, %lld]",
                          gguf_name(m->gguf), m->hp.arch, what, (long long)v, (long long)max);
    return 0;
}

/* attention.head_count_kv: a number, or one per block as llama.cpp also
 * reads it. Per block, every count must be the same but for the zeros of
 * blocks without attention, which only an architecture that says so
 * (hp.kv_heads_zero_ok: Kimi-Linear's KDA blocks) may have. */
static int kv_heads(struct eng_model *m, struct fl_err *err)
{
    struct eng_hparams *hp = &m->hp;
    char key[128];
    snprintf(key, sizeof(key), "%s.attention.head_count_kv", hp->arch);
    const struct gguf_value *v;
    if (gguf_get_arr(m->gguf, key, &v) != 0)
        return eng_model_key_int(m, "attention.head_count_kv", false, &hp->n_head_kv, err);
    if ((v->arr.type != GGUF_VT_INT32 && v->arr.type != GGUF_VT_UINT32) ||
        v->arr.n != (uint64_t)hp->n_layer)
        return fl_err_set(err, -EINVAL, "%s: %s must be %lld integers", gguf_name(m->gguf), key,
                          (long long)hp->n_layer);
    int64_t n = 0;
    for (uint64_t l = 0; l < v->arr.n; l++) {
        const int64_t x = ((const int32_t *)v->arr.elems)[l];
        if (x == 0 && hp->kv_heads_zero_ok)
            continue;
        if (x < 1 || (n && x != n))
            return fl_err_set(err, -EINVAL, "%s: %s[%llu] = %lld: per-block KV head counts "
                              "must all be the same and positive", gguf_name(m->gguf), key,
                              (unsigned long long)l, (long long)x);
        n = x;
    }
    hp->n_head_kv = n ? n : hp->n_head;
    return 0;
}

static int load_attention_hparams(struct eng_model *m, struct fl_err *err)
{
    struct eng_hparams *hp = &m->hp;
    int rc = 0;
    rc = rc ? rc : eng_model_key_int(m, "attention.head_count", true, &hp->n_head, err);
    hp->n_head_kv = hp->n_head;
    rc = rc ? rc : kv_heads(m, err);
    if (rc)
        return rc;
    rc = check_positive(m, "attention.head_count", hp->n_head, 1 << 16, err);
    rc = rc ? rc : check_positive(m, "attention.head_count_kv", hp->n_head_kv, hp->n_head, err);
    if (rc)
        return rc;
    if (hp->n_head % hp->n_head_kv)
        return fl_err_set(err, -EINVAL, "%s: head_count %lld is not a multiple of head_count_kv %lld",
                          gguf_name(m->gguf), (long long)hp->n_head, (long long)hp->n_head_kv);
    hp->n_embd_head_k = hp->n_embd / hp->n_head;
    hp->n_embd_head_v = hp->n_embd_head_k;
    rc = eng_model_key_int(m, "attention.key_length", false, &hp->n_embd_head_k, err);
    rc = rc ? rc : eng_model_key_int(m, "attention.value_length", false, &hp->n_embd_head_v, err);
    rc = rc ? rc : check_positive(m, "attention.key_length", hp->n_embd_head_k, 1 << 16, err);
    rc = rc ? rc : check_positive(m, "attention.value_length", hp->n_embd_head_v, 1 << 16, err);
    if (rc)
        return rc;
    hp->n_rot = hp->n_embd_head_k;
    rc = eng_model_key_int(m, "rope.dimension_count", false, &hp->n_rot, err);
    if (rc)
        return rc;
    if (hp->n_rot < 0 || hp->n_rot > hp->n_embd_head_k || hp->n_rot % 2)
        return fl_err_set(err, -EINVAL, "%s: rope.dimension_count %lld does not fit head dim %lld",
                          gguf_name(m->gguf), (long long)hp->n_rot, (long long)hp->n_embd_head_k);
    if (hp->n_rot > 0) {
        struct yarn_params yp;
        rc = yarn_from_gguf(m->gguf, hp->arch, (int)hp->n_rot, &m->rope_ctx, &yp, NULL, err);
        if (rc)
            return rc;
        if (yarn_rope_init(&hp->rope, &yp) < 0)
            return fl_err_set(err, -EINVAL, "%s: bad rope settings", gguf_name(m->gguf));
    }
    return eng_model_key_float(m, "attention.layer_norm_rms_epsilon", true, &hp->rms_eps, err);
}

static int load_expert_hparams(struct eng_model *m, struct fl_err *err)
{
    struct eng_hparams *hp = &m->hp;
    int64_t gating = ENG_GATING_SOFTMAX;
    int rc = eng_model_key_int(m, "expert_count", false, &hp->n_expert, err);
    rc = rc ? rc : eng_model_key_int(m, "expert_used_count", false, &hp->n_expert_used, err);
    rc = rc ? rc : eng_model_key_int(m, "expert_feed_forward_length", false, &hp->n_ff_exp, err);
    rc = rc ? rc : eng_model_key_int(m, "expert_shared_count", false, &hp->n_expert_shared, err);
    rc = rc ? rc : eng_model_key_int(m, "leading_dense_block_count", false, &hp->n_layer_dense_lead, err);
    rc = rc ? rc : eng_model_key_int(m, "expert_gating_func", false, &gating, err);
    rc = rc ? rc : eng_model_key_bool(m, "expert_weights_norm", false, &hp->expert_weights_norm, err);
    rc = rc ? rc : eng_model_key_float(m, "expert_weights_scale", false, &hp->expert_weights_scale, err);
    if (rc)
        return rc;
    if (gating < ENG_GATING_SOFTMAX || gating > ENG_GATING_SOFTMAX_WEIGHT)
        return fl_err_set(err, -EINVAL, "%s: %s.expert_gating_func = %lld is not supported",
                          gguf_name(m->gguf), hp->arch, (long long)gating);
    hp->gating = (enum eng_gating)gating;
    if (hp->n_expert < 0 || hp->n_expert > 4096 || hp->n_expert_used < 0 ||
        hp->n_expert_used > hp->n_expert || (hp->n_expert > 0 && hp->n_expert_used == 0))
        return fl_err_set(err, -EINVAL, "%s: bad expert counts (expert_count %lld, used %lld)",
                          gguf_name(m->gguf), (long long)hp->n_expert, (long long)hp->n_expert_used);
    return 0;
}

int eng_model_load_common_hparams(struct eng_model *m, struct fl_err *err)
{
    struct eng_hparams *hp = &m->hp;
    const struct eng_tensor *embd = eng_model_tensor(m, -1, "token_embd.weight", true, 0, NULL, err);
    if (!embd)
        return -EINVAL;
    int rc = 0;
    rc = rc ? rc : eng_model_key_int(m, "context_length", true, &hp->n_ctx_train, err);
    rc = rc ? rc : eng_model_key_int(m, "embedding_length", true, &hp->n_embd, err);
    rc = rc ? rc : eng_model_key_int(m, "block_count", true, &hp->n_layer, err);
    rc = rc ? rc : eng_model_key_int(m, "feed_forward_length", false, &hp->n_ff, err);
    rc = rc ? rc : check_positive(m, "embedding_length", hp->n_embd, 1 << 20, err);
    rc = rc ? rc : check_positive(m, "block_count", hp->n_layer, 4096, err);
    rc = rc ? rc : check_positive(m, "context_length", hp->n_ctx_train, INT32_MAX, err);
    if (rc)
        return rc;
    if (embd->n_dims != 2 || embd->ne[0] != hp->n_embd)
        return fl_err_set(err, -EINVAL, "%s: token_embd.weight is not [%lld, n_vocab]",
                          gguf_name(m->gguf), (long long)hp->n_embd);
    hp->n_vocab = embd->ne[1];
    rc = load_attention_hparams(m, err);
    return rc ? rc : load_expert_hparams(m, err);
}

int eng_model_default_kv_dims(struct eng_model *m, struct fl_err *err)
{
    free(m->kv_k_dim);
    free(m->kv_v_dim);
    m->kv_k_dim = calloc((size_t)m->hp.n_layer, sizeof(int64_t));
    m->kv_v_dim = calloc((size_t)m->hp.n_layer, sizeof(int64_t));
    if (!m->kv_k_dim || !m->kv_v_dim)
        return fl_err_set(err, -ENOMEM, "%s: out of memory", gguf_name(m->gguf));
    for (int64_t l = 0; l < m->hp.n_layer; l++) {
        m->kv_k_dim[l] = m->hp.n_head_kv * m->hp.n_embd_head_k;
        m->kv_v_dim[l] = m->hp.n_head_kv * m->hp.n_embd_head_v;
    }
    return 0;
}

int eng_model_load(const struct gguf_file *g, const uint8_t *base,
                   const struct yarn_context *rope, struct eng_model **out, struct fl_err *err)
{
    const char *arch_name = NULL;
    if (gguf_get_str(g, "general.architecture", &arch_name) < 0)
        return fl_err_set(err, -EINVAL, "%s: missing key general.architecture", gguf_name(g));
    const struct eng_arch *arch = eng_arch_find(arch_name);
    if (!arch)
        return fl_err_set(err, -EINVAL, "%s: unsupported architecture '%s' (known: %s)",
                          gguf_name(g), arch_name, eng_arch_names());
    struct eng_model *m = calloc(1, sizeof(*m));
    if (!m)
        return fl_err_set(err, -ENOMEM, "%s: out of memory", gguf_name(g));
    m->gguf = g;
    m->base = base;
    m->arch = arch;
    m->hp.arch = arch_name;
    if (rope)
        m->rope_ctx = *rope;
    int rc = build_table(m, err);
    if (!rc)
        rc = arch->load(m, err);
    if (!rc && (!m->kv_k_dim || !m->kv_v_dim || !m->embd || !m->out_norm || !m->output))
        rc = fl_err_set(err, -EINVAL, "%s: architecture %s set no KV cache layout or head",
                        gguf_name(g), arch_name);
    if (rc) {
        eng_model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void eng_model_free(struct eng_model *m)
{
    if (!m)
        return;
    if (m->arch && m->arch->unload)
        m->arch->unload(m);
    free(m->kv_k_dim);
    free(m->kv_v_dim);
    free(m->rs_conv_dim);
    free(m->rs_ssm_dim);
    free(m->routers);
    if (m->repack_arena)
        munmap(m->repack_arena, m->repack_arena_size);
    free(m->tensors);
    free(m);
}
