/* kv-cache.h: the host F16 KV cache, a pool of cells that every sequence
 * of a session shares.
 *
 * A cell holds one position's K row and V row in every layer (m->kv_k_dim[l]
 * and m->kv_v_dim[l] halves). Sequences take cells in blocks of
 * ENG_KV_BLOCK as they grow and give them all back when freed, so short
 * and long sequences share the memory (-c is the total, as llama-server's);
 * a sequence's table maps each of its positions to a cell. Blocks are
 * handed out lowest first, so a lone sequence 0 has cell = position.
 * F16 because llama.cpp's default cache is F16 and attention scores must
 * round the same way. (A device keeps its own copy in VRAM, cell for cell:
 * backend/cuda.) */
#ifndef FL_KV_CACHE_H
#define FL_KV_CACHE_H

#include <stdint.h>

#include "base/error.h"
#include "gguf/tensor-types.h"
#include "model/model.h"

#define ENG_KV_BLOCK 16

struct eng_kv;

/* n_ctx: positions in all (rounded up to whole blocks); also the most one
 * sequence may hold. n_seq: sequence ids 0 .. n_seq-1 (at least 1). */
int eng_kv_create(const struct eng_model *m, int n_ctx, int n_seq, struct eng_kv **out,
                  struct fl_err *err);
void eng_kv_destroy(struct eng_kv *kv);
int eng_kv_n_ctx(const struct eng_kv *kv);
int eng_kv_n_seq(const struct eng_kv *kv);
/* Cells in the pool (n_ctx rounded up to blocks) and those no sequence holds. */
int eng_kv_n_cells(const struct eng_kv *kv);
int eng_kv_cells_free(const struct eng_kv *kv);
/* K and V of every layer and cell: what a copy of the cache takes. */
uint64_t eng_kv_bytes(const struct eng_kv *kv);

/* Positions seq has cells for (a multiple of ENG_KV_BLOCK). */
int eng_kv_seq_capacity(const struct eng_kv *kv, int seq);
/* Gives seq cells for positions 0 .. n_pos-1 (never fewer than it has).
 * -EINVAL for a bad seq or n_pos > n_ctx; -ENOSPC when the pool lacks the
 * blocks (then nothing is taken). */
int eng_kv_seq_reserve(struct eng_kv *kv, int seq, int n_pos, struct fl_err *err);
/* Keeps positions 0 .. n_pos-1 of seq and gives back the blocks past them;
 * n_pos = 0 frees the sequence. */
void eng_kv_seq_truncate(struct eng_kv *kv, int seq, int n_pos);
/* The cell of each position of seq, [eng_kv_seq_capacity] entries. */
const int32_t *eng_kv_seq_cells(const struct eng_kv *kv, int seq);

fl_f16 *eng_kv_k(struct eng_kv *kv, int layer, int cell); /* one row of kv_k_dim */
fl_f16 *eng_kv_v(struct eng_kv *kv, int layer, int cell); /* one row of kv_v_dim */
/* Converts rows [n_tok][kv_k_dim] / [n_tok][kv_v_dim] to F16, row t into
 * cells[t]; k or v may be NULL to store only the other. */
void eng_kv_write(struct eng_kv *kv, int layer, const int32_t *cells, int n_tok, const float *k,
                  const float *v);

#endif
