/* kv-cache.h: the host F16 KV cache, one K and one V array per layer, slot p
 * holding position p of the single sequence. F16 because llama.cpp's default
 * cache is F16 and attention scores must round the same way. (A device
 * keeps its own copy in VRAM: backend/cuda.) */
#ifndef FL_KV_CACHE_H
#define FL_KV_CACHE_H

#include <stdint.h>

#include "base/error.h"
#include "gguf/tensor-types.h"
#include "model/model.h"

struct eng_kv;

/* n_ctx rows per layer of m->kv_k_dim[l] (K) and m->kv_v_dim[l] (V) halves. */
int eng_kv_create(const struct eng_model *m, int n_ctx, struct eng_kv **out, struct fl_err *err);
void eng_kv_destroy(struct eng_kv *kv);
int eng_kv_n_ctx(const struct eng_kv *kv);
/* K and V of every layer and position: what a copy of the cache takes. */
uint64_t eng_kv_bytes(const struct eng_kv *kv);
fl_f16 *eng_kv_k(struct eng_kv *kv, int layer, int pos); /* one row of kv_k_dim */
fl_f16 *eng_kv_v(struct eng_kv *kv, int layer, int pos); /* one row of kv_v_dim */
/* Converts rows [n_tok][kv_k_dim] / [n_tok][kv_v_dim] to F16 at pos0..; k or
 * v may be NULL to store only the other. */
void eng_kv_write(struct eng_kv *kv, int layer, int pos0, int n_tok, const float *k,
                  const float *v);

#endif
