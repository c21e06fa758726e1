/* matmul.h: y = W·x on quantized weights, the op every forward pass uses.
 *
 * Shapes: W is n_out rows of n_in values of type w_type, row o at
 * w + o * fl_row_size(w_type, n_in) (a GGUF 2-D tensor [n_in, n_out], or one
 * expert's slice of a 3-D one). x is row-major [n_tok][n_in] float, y is
 * row-major [n_tok][n_out] float: y[t][o] = sum_i W[o][i] * x[t][i].
 *
 * Numerics (what llama.cpp's CPU backend does, so routing matches it): the
 * activations are first quantized to the weight type's vec_dot_type (Q8_0
 * for Q8_0/Q4_0/Q5_0/IQ4_NL/MXFP4, Q8_1 for Q4_1/Q5_1, Q8_K for the
 * K-quants and IQ4_XS, F16 for F16, BF16 for BF16, none for F32), then every
 * dot product runs on the quantized blocks; a weight matrix is never
 * dequantized. Q8_0/Q8_1 activations are rounded as llama.cpp's x86 build
 * does (scale 127/amax, round half to even), Q8_K as quantize_row_q8_K:
 * byte for byte the types module's fl_type_from_float_act.
 *
 * Determinism: within one call, each y value is computed by the same
 * instruction sequence whatever the thread count or the tile it falls in,
 * and whether the token came through fl_matmul or fl_matmul_rows: results
 * are bit-identical across -t 1/-t N and run to run. A one-token call
 * (n_tok or n_rows == 1) may use a different kernel than a batched one, so
 * a token's row can differ in the last bits between decode and prefill.
 *
 * Typical use:
 *   // one dense projection
 *   fl_matmul(pool, w, type, n_in, n_out, x, n_tok, y, scratch);
 *
 *   // gate and up share x: quantize once (for both types if they differ)
 *   struct fl_qact xq;
 *   fl_quantize_act(pool, gate_type, x, n_in, n_tok, n_in, scratch, &xq);
 *   fl_matmul_q(pool, gate_w, gate_type, n_out, &xq, g, n_out);
 *   fl_matmul_q(pool, up_w,   up_type,   n_out, &xq, u, n_out);  // needs
 *       // fl_act_type(up_type) == xq.type; else quantize for it separately
 *
 *   // expert e: the tokens routed to it, rows tok[0..cnt) of xq
 *   fl_matmul_rows(pool, w_e, type, n_out, &xq, tok, cnt, h, n_out, NULL);
 *
 * Threading: every function takes a pool (NULL = calling thread only) and
 * spreads its work over all of the pool's threads. */
#ifndef FL_CPU_MATMUL_H
#define FL_CPU_MATMUL_H

#include <stddef.h>
#include <stdint.h>

struct fl_pool;

/* Activations in a weight type's vec_dot_type: n_tok rows of n_in values,
 * row t at (char *)data + t * row_stride. Points into the caller's scratch
 * (or at x itself for F32 weights): valid as long as both are. */
struct fl_qact {
    const void *data;
    uint32_t type;       /* the vec_dot_type, an enum fl_type */
    int64_t n_in;
    int64_t n_tok;
    size_t row_stride;
    /* Q8_0 only (else NULL): the sum of each block's 32 quants, n_in/32 per
     * row, row t at sums + t * (n_in/32); some kernels need them. */
    const int16_t *sums;
};

/* The vec_dot_type activations must be in for weights of w_type, or -1
 * when w_type has no dot product. */
int fl_act_type(uint32_t w_type);

/* Bytes of scratch fl_matmul / fl_quantize_act need for n_tok rows of n_in
 * activations against w_type weights (0 for F32). Scratch must be aligned
 * as malloc aligns (16 bytes; 64 is best) and may be reused between calls. */
size_t fl_matmul_scratch_size(uint32_t w_type, int64_t n_in, int64_t n_tok);

/* Quantizes x [n_tok][n_in] (rows ldx floats apart; ldx = n_in when dense)
 * for w_type weights into scratch and describes the result in *out (build
 * a struct fl_qact only this way).
 * Returns 0, or -EINVAL when w_type is unknown / n_in not a multiple of its
 * block size. */
int fl_quantize_act(struct fl_pool *pool, uint32_t w_type, const float *x, int64_t n_in,
                    int64_t n_tok, int64_t ldx, void *scratch, struct fl_qact *out);

/* y[t][o] = W[o] · xq[t] for all n_tok rows of xq; y rows ldy floats apart.
 * xq->type must be fl_act_type(w_type) and xq->n_in the row length of W.
 * Returns 0 or -EINVAL on a type/shape mismatch (nothing written). */
int fl_matmul_q(struct fl_pool *pool, const void *w, uint32_t w_type, int64_t n_out,
                const struct fl_qact *xq, float *y, int64_t ldy);

/* Gather/scatter variant for expert matmuls: for j in [0, n_rows),
 *   y_row(j)[o] = W[o] · xq[rows[j]]
 * where y_row(j) = y + (out_rows ? out_rows[j] : j) * ldy. rows[] values
 * must lie in [0, xq->n_tok); out_rows lets the outputs land in a larger
 * buffer (e.g. [n_tok][k][n_out] slot tok*k+slot). Returns 0 or -EINVAL. */
int fl_matmul_rows(struct fl_pool *pool, const void *w, uint32_t w_type, int64_t n_out,
                   const struct fl_qact *xq, const int32_t *rows, int64_t n_rows,
                   float *y, int64_t ldy, const int32_t *out_rows);

/* One product of a batch: the arguments of fl_matmul_rows (rows and
 * out_rows may be NULL: xq's first n_rows rows, y dense). */
struct fl_matmul_task {
    const void *w;
    uint32_t w_type;
    int64_t n_out;
    const struct fl_qact *xq;
    const int32_t *rows;
    int64_t n_rows;
    float *y;
    int64_t ldy;
    const int32_t *out_rows;
};

/* Several independent products (at most 64) in one pool round: their units
 * share one work counter, so small products (a decode step's experts, each
 * a few MB) cost one wake-up and one wait instead of one each, and threads
 * that finish a product early take the next one's rows. Each output gets
 * the bits fl_matmul_rows gives it. 0, -EINVAL as fl_matmul_rows (nothing
 * computed), or -ENOMEM. */
int fl_matmul_batch(struct fl_pool *pool, const struct fl_matmul_task *tasks, int n_tasks);

/* The one-call form: quantize x (dense, [n_tok][n_in]) into scratch
 * (fl_matmul_scratch_size bytes) and multiply; y dense [n_tok][n_out].
 * Returns 0 or -EINVAL (unknown type, n_in not a multiple of the block). */
int fl_matmul(struct fl_pool *pool, const void *w, uint32_t w_type, int64_t n_in, int64_t n_out,
              const float *x, int64_t n_tok, float *y, void *scratch);

#endif
