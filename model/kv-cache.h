/* kv-cache.h: the host KV cache, a pool of cells that every sequence of a
 * session shares.
 *
 * A cell holds one position's K row and V row in every layer (m->kv_k_dim[l]
 * and m->kv_v_dim[l] halves). Sequences take cells in blocks of
 * ENG_KV_BLOCK as they grow and give them all back when freed, so short
 * and long sequences share the memory (-c is the total, as llama-server's);
 * a sequence's table maps each of its positions to a cell. Blocks are
 * handed out lowest first, so a lone sequence 0 has cell = position.
 * F16 by default because llama.cpp's default cache is F16 and attention
 * scores must round the same way; -ctk/-ctv choose a ggml block type for
 * K or V as llama.cpp's do (Q8_0 takes 34 bytes per 32 values; rows are quantized as
 * ggml's CPU backend quantizes them). (A device keeps its own copy in
 * VRAM, cell for cell, F16 only: backend/cuda.) */
#ifndef FL_KV_CACHE_H
#define FL_KV_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "gguf/tensor-types.h"
#include "model/model.h"

#define ENG_KV_BLOCK 16

struct eng_kv;

/* The types a cache may hold (-ctk/-ctv): F16 and the 32-value block
 * types ggml's CPU backend quantizes (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
 * IQ4_NL). By name ("f16", "q8_0", ...): the type, or -EINVAL with the
 * list in err. */
int eng_kv_type_parse(const char *name, enum fl_type *out, struct fl_err *err);
/* Such a type's name as llama.cpp writes it ("f16", "q8_0", "iq4_nl");
 * NULL for a type a cache cannot hold. */
const char *eng_kv_type_name(enum fl_type type);

/* n_ctx: positions in all (rounded up to whole blocks); also the most one
 * sequence may hold. n_seq: sequence ids 0 .. n_seq-1 (at least 1).
 * type_k/type_v: what K and V rows are kept as (eng_kv_type_parse's; an
 * MLA model's V rows, DSA's indexer keys, take K's type, and its rows are
 * not rotated, as llama.cpp keeps them); a block type needs every head and
 * row to be whole blocks (-EINVAL naming the layer otherwise). */
int eng_kv_create(const struct eng_model *m, int n_ctx, int n_seq, enum fl_type type_k,
                  enum fl_type type_v, struct eng_kv **out, struct fl_err *err);
void eng_kv_destroy(struct eng_kv *kv);
int eng_kv_n_ctx(const struct eng_kv *kv);
int eng_kv_n_seq(const struct eng_kv *kv);
/* Cells in the pool (n_ctx rounded up to blocks) and those no sequence holds. */
int eng_kv_n_cells(const struct eng_kv *kv);
int eng_kv_cells_free(const struct eng_kv *kv);
/* K and V of every layer and cell: what a copy of the cache takes. */
uint64_t eng_kv_bytes(const struct eng_kv *kv);
/* K and V of every layer of one cell of model m's cache of these types
 * (a cache of n cells takes n times it), before the cache is made. */
uint64_t eng_kv_cell_bytes(const struct eng_model *m, enum fl_type type_k, enum fl_type type_v);

/* Positions seq has cells for (a multiple of ENG_KV_BLOCK). */
int eng_kv_seq_capacity(const struct eng_kv *kv, int seq);
/* Gives seq cells for positions 0 .. n_pos-1 (never fewer than it has).
 * -EINVAL for a bad seq or n_pos > n_ctx; -ENOSPC when the pool lacks the
 * blocks (then nothing is taken). */
int eng_kv_seq_reserve(struct eng_kv *kv, int seq, int n_pos, struct fl_err *err);
/* How many cells eng_kv_seq_reserve(seq, n_pos) would lack: 0 when it fits. */
int eng_kv_seq_lacks(const struct eng_kv *kv, int seq, int n_pos);
/* Keeps positions 0 .. n_pos-1 of seq and gives back the blocks past them;
 * n_pos = 0 frees the sequence. A block stays in use while another
 * sequence holds it; a partly kept block that another holds is given back
 * too (seq would write into it), so seq then keeps fewer positions. */
void eng_kv_seq_truncate(struct eng_kv *kv, int seq, int n_pos);
/* Gives the empty sequence dst the cells of src's first n_pos positions (a
 * multiple of ENG_KV_BLOCK, at most src's capacity): the same blocks, held
 * by both until each gives them back (a prompt's cached prefix read by
 * several sequences). Neither may write those positions again; dst grows
 * into blocks of its own. A recurrent model's state is not in cells: dst's
 * is unusable until eng_kv_rs_copy brings src's. -EINVAL, -ENOMEM. */
int eng_kv_seq_share(struct eng_kv *kv, int dst, int src, int n_pos, struct fl_err *err);
/* Cells in blocks that seq alone holds: what freeing it gives back. */
int eng_kv_seq_owned(const struct eng_kv *kv, int seq);
/* The cell of each position of seq, [eng_kv_seq_capacity] entries. */
const int32_t *eng_kv_seq_cells(const struct eng_kv *kv, int seq);

enum fl_type eng_kv_type_k(const struct eng_kv *kv);
enum fl_type eng_kv_type_v(const struct eng_kv *kv);
/* One cell's row of kv_k_dim / kv_v_dim values in the cache's type; value
 * i of a block type lies in block i / 32. */
const void *eng_kv_k(const struct eng_kv *kv, int layer, int cell);
const void *eng_kv_v(const struct eng_kv *kv, int layer, int cell);
/* A block-type cache holds its rows rotated, as llama.cpp's does (its
 * attn_rot_k / attn_rot_v): each run of n values multiplied by the
 * orthonormal Walsh-Hadamard matrix H_n, which spreads an outlier over the
 * run before it is quantized. K (and so every query) is rotated in runs of
 * the largest power of two from 64 up that divides the head, V in runs of
 * 64, and attention's output rotated back (H_n is its own inverse). 0: not
 * rotated (F16, or heads not a multiple of 64). */
int eng_kv_rot_k(const struct eng_kv *kv);
int eng_kv_rot_v(const struct eng_kv *kv);
/* x[0 .. n) in place, run by run of rot values (n a multiple of rot, a
 * power of two): ggml's fast Walsh-Hadamard transform (scaled by
 * 1/sqrt(rot), then butterflies of 1, 2, .. rot/2: the same bits at any
 * vector width). */
void eng_kv_rotate(float *x, int64_t n, int rot);
/* Converts rows [n_tok][kv_k_dim] / [n_tok][kv_v_dim] to the cache's
 * types (rotated first where eng_kv_rot_* say), row t into cells[t]; k or
 * v may be NULL to store only the other. */
void eng_kv_write(struct eng_kv *kv, int layer, const int32_t *cells, int n_tok, const float *k,
                  const float *v);

/* --- recurrent state (m->rs_conv_dim / rs_ssm_dim) ---------------------------
 * A recurrent layer keeps, per sequence, F32 state that sums up every
 * position so far: it cannot be cut back to an earlier position. A span at
 * pos0 0 starts it from zeros; any other span must continue where the
 * sequence's state ends. Truncating a sequence to 0 resets it; to anything
 * else leaves it unusable until the sequence restarts at 0. */
bool eng_kv_recurrent(const struct eng_kv *kv);
/* F32 bytes of every layer's state of every sequence. */
uint64_t eng_kv_rs_bytes(const struct eng_kv *kv);
/* Whether a span of seq may start at pos0: 0, or -EINVAL naming both
 * positions when the state ends elsewhere. */
int eng_kv_rs_check(const struct eng_kv *kv, int seq, int pos0, struct fl_err *err);
/* Before a checked span of seq at pos0..pos0+n_tok-1: zeroes the state when
 * pos0 is 0; it then counts as covering pos0 + n_tok positions. */
void eng_kv_rs_begin(struct eng_kv *kv, int seq, int pos0, int n_tok);
/* Positions seq's state covers (-1: unusable; 0 for a model without). */
int eng_kv_rs_pos(const struct eng_kv *kv, int seq);
/* dst's state becomes a copy of src's, with its position (a prompt
 * cache's snapshot taken or read). Nothing for a model without. */
void eng_kv_rs_copy(struct eng_kv *kv, int dst, int src);
/* seq's state, every layer's conv then ssm floats (eng_kv_rs_bytes / the
 * sequences' count), copied out to buf; and back, covering n_pos
 * positions: a span that may be taken back (speculative decoding's) keeps
 * the state before it. */
void eng_kv_rs_save(const struct eng_kv *kv, int seq, float *buf);
void eng_kv_rs_restore(struct eng_kv *kv, int seq, const float *buf, int n_pos);
float *eng_kv_rs_conv(struct eng_kv *kv, int layer, int seq); /* rs_conv_dim floats */
float *eng_kv_rs_ssm(struct eng_kv *kv, int layer, int seq);  /* rs_ssm_dim floats */

/* --- a sequence's positions as bytes (app/prompt-file.h's files) -----------
 * The first n_pos positions of a sequence, exactly as the cache holds them:
 * for each layer its n_pos K rows then its n_pos V rows, in position order,
 * then, for a recurrent model, each layer's state (conv, then ssm), which
 * must cover exactly n_pos positions. io moves len bytes to or from buf
 * (0, or a negative errno that ends the walk). */
typedef int (*eng_kv_io_fn)(void *arg, void *buf, size_t len);
/* The bytes of n_pos positions so written. */
uint64_t eng_kv_seq_bytes(const struct eng_kv *kv, int n_pos);
/* Writes seq's first n_pos positions through put: -EINVAL when seq lacks
 * the cells or its state covers other positions; put's error. */
int eng_kv_seq_save(const struct eng_kv *kv, int seq, int n_pos, eng_kv_io_fn put, void *arg);
/* Reads n_file positions' bytes through get, the first n_keep of them into
 * seq's cells (which it must hold: eng_kv_seq_reserve); the rest, and the
 * state when n_keep < n_file, are read and dropped. A recurrent model's
 * state comes back (covering n_keep) only when n_keep == n_file: anything
 * shorter is -EINVAL (its state is that of the whole). get's error. */
int eng_kv_seq_load(struct eng_kv *kv, int seq, int n_file, int n_keep, eng_kv_io_fn get,
                    void *arg);

#endif
