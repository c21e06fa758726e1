/* kv-cache.c: the F16 KV cache, one K and one V array per layer, slot p
 * holding position p of the single sequence. F16 because llama.cpp's default
 * cache is F16 and attention scores must round the same way. */
#include <errno.h>
#include <stdlib.h>

#include "model/kv-cache.h"

struct eng_kv {
    int n_ctx;
    int64_t n_layer;
    const int64_t *k_dim, *v_dim;
    fl_f16 **k, **v; /* [n_layer] arrays of n_ctx rows */
};

int eng_kv_create(const struct eng_model *m, int n_ctx, struct eng_kv **out, struct fl_err *err)
{
    if (n_ctx < 1)
        return fl_err_set(err, -EINVAL, "context size %d must be at least 1", n_ctx);
    struct eng_kv *kv = calloc(1, sizeof(*kv));
    if (!kv)
        return fl_err_set(err, -ENOMEM, "out of memory for the KV cache");
    kv->n_ctx = n_ctx;
    kv->n_layer = m->hp.n_layer;
    kv->k_dim = m->kv_k_dim;
    kv->v_dim = m->kv_v_dim;
    kv->k = calloc((size_t)kv->n_layer, sizeof(*kv->k));
    kv->v = calloc((size_t)kv->n_layer, sizeof(*kv->v));
    int ok = kv->k && kv->v;
    for (int64_t l = 0; ok && l < kv->n_layer; l++) {
        /* calloc: slots past n_past are never read, but zeroed pages cost
         * nothing until touched. */
        if (kv->k_dim[l] > 0)
            ok = (kv->k[l] = calloc((size_t)n_ctx * (size_t)kv->k_dim[l], sizeof(fl_f16))) != NULL;
        if (ok && kv->v_dim[l] > 0)
            ok = (kv->v[l] = calloc((size_t)n_ctx * (size_t)kv->v_dim[l], sizeof(fl_f16))) != NULL;
    }
    if (!ok) {
        eng_kv_destroy(kv);
        return fl_err_set(err, -ENOMEM, "out of memory for a KV cache of %d positions", n_ctx);
    }
    *out = kv;
    return 0;
}

void eng_kv_destroy(struct eng_kv *kv)
{
    if (!kv)
        return;
    for (int64_t l = 0; l < kv->n_layer; l++) {
        if (kv->k)
            free(kv->k[l]);
        if (kv->v)
            free(kv->v[l]);
    }
    free(kv->k);
    free(kv->v);
    free(kv);
}

int eng_kv_n_ctx(const struct eng_kv *kv)
{
    return kv->n_ctx;
}

uint64_t eng_kv_bytes(const struct eng_kv *kv)
{
    uint64_t rows = 0;
    for (int l = 0; l < kv->n_layer; l++)
        rows += (uint64_t)(kv->k_dim[l] + kv->v_dim[l]);
    return rows * (uint64_t)kv->n_ctx * sizeof(fl_f16);
}

fl_f16 *eng_kv_k(struct eng_kv *kv, int layer, int pos)
{
    return kv->k[layer] + (int64_t)pos * kv->k_dim[layer];
}

fl_f16 *eng_kv_v(struct eng_kv *kv, int layer, int pos)
{
    return kv->v[layer] + (int64_t)pos * kv->v_dim[layer];
}

static void to_f16(fl_f16 *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = fl_f32_to_f16(src[i]);
}

void eng_kv_write(struct eng_kv *kv, int layer, int pos0, int n_tok, const float *k,
                  const float *v)
{
    const int64_t kd = kv->k_dim[layer], vd = kv->v_dim[layer];
    for (int t = 0; t < n_tok; t++) {
        if (k && kd)
            to_f16(eng_kv_k(kv, layer, pos0 + t), k + t * kd, kd);
        if (v && vd)
            to_f16(eng_kv_v(kv, layer, pos0 + t), v + t * vd, vd);
    }
}
