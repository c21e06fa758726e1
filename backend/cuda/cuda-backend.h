/* cuda-backend.h: faultline's CUDA backend, as a plain C interface.
 *
 * What is here: device discovery, device memory, the compute kernels a
 * forward pass needs (quantized matrix-vector products for decode,
 * dequantize-to-F16 + cublasGemmEx for prefill, fused MoE routing, RMSNorm,
 * RoPE, SwiGLU, attention over an F16 KV cache) and the VRAM expert cache
 * of `--gpu-experts copy|unified` (backend/cuda/expert-cache.h for the
 * device side, backend/cuda/expert-lru.h for its host bookkeeping).
 *
 * Builds: with FAULTLINE_CUDA on, FL_HAVE_CUDA is defined for every user of
 * the module and all of this header exists. Without it only discovery
 * exists: fl_cuda_available() says 0 and fl_cuda_open() fails with -ENODEV,
 * so callers that need nothing more can stay free of #ifdefs; code that
 * calls the kernels is written under #ifdef FL_HAVE_CUDA (the declarations
 * are hidden otherwise, which turns a forgotten guard into a compile error).
 *
 * Conventions: every pointer named d_* (or documented as device memory) is
 * device memory; all compute runs asynchronously, in order, on the context's
 * compute stream, so results are visible to the host after fl_cuda_sync()
 * or fl_cuda_download(). Functions return 0 or a negative errno and, given
 * a struct fl_err, say in one line what went wrong (the CUDA error's name
 * included); nothing aborts or prints. Launch errors are reported by the
 * launching call; errors inside a kernel surface at the next sync.
 *
 * Layouts are the CPU engine's (model/backend.h, backend/cpu/matmul.h):
 * activations row-major [n_tok][width] float, weights ggml-shaped rows of
 * n_in values in their GGUF type, row o at w + o * fl_row_size(type, n_in). */
#ifndef FL_CUDA_BACKEND_H
#define FL_CUDA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* Number of usable CUDA devices: 0 when there is no driver, no device, or
 * the build has no CUDA. Never fails. */
int fl_cuda_available(void);

struct fl_cuda_info {
    char name[256];
    int cc_major, cc_minor;      /* compute capability */
    int n_sm;
    size_t free_bytes, total_bytes;
    bool managed;                /* concurrent managed access (unified mode) */
};

/* Name, capability and memory of device `dev`. -ENODEV without it. */
int fl_cuda_device_info(int dev, struct fl_cuda_info *out, struct fl_err *err);

struct fl_cuda;

/* Opens device `dev`: a compute stream, a cuBLAS handle, a scratch area.
 * -ENODEV when there is no such device (or no CUDA in this build). */
int fl_cuda_open(int dev, struct fl_cuda **out, struct fl_err *err);
void fl_cuda_close(struct fl_cuda *cu);

#ifdef FL_HAVE_CUDA

/* Waits for all work queued on the compute stream; reports any error a
 * kernel hit. */
int fl_cuda_sync(struct fl_cuda *cu, struct fl_err *err);
int fl_cuda_device(const struct fl_cuda *cu);
/* The compute stream as a cudaStream_t (void * keeps this header CUDA-free). */
void *fl_cuda_stream(struct fl_cuda *cu);

/* --- memory ------------------------------------------------------------------ */

int fl_cuda_malloc(struct fl_cuda *cu, void **d_out, size_t bytes, struct fl_err *err);
void fl_cuda_free(struct fl_cuda *cu, void *d);
/* Copies queued on the compute stream (after the work before them); both
 * return once the copy is done, so `src`/`dst` may be reused at once. */
int fl_cuda_upload(struct fl_cuda *cu, void *d_dst, const void *src, size_t bytes,
                   struct fl_err *err);
int fl_cuda_download(struct fl_cuda *cu, void *dst, const void *d_src, size_t bytes,
                     struct fl_err *err);
/* Page-locked host memory (for copies that overlap compute). */
int fl_cuda_host_alloc(void **out, size_t bytes, struct fl_err *err);
void fl_cuda_host_free(void *p);
/* Page-locks existing host memory (page-aligned, already resident) so the
 * GPU's copy engines read it directly: no staging copy on the CPU. The
 * range must stay mapped and its pages in place until unregistered. */
int fl_cuda_host_register(void *p, size_t bytes, struct fl_err *err);
void fl_cuda_host_unregister(void *p);

/* --- matrix products ------------------------------------------------------------ */

/* True when the kernels below take weights of this type: F32, F16, Q8_0,
 * Q4_K, Q5_K, Q6_K, MXFP4. */
bool fl_cuda_type_supported(uint32_t w_type);

/* y[t][o] = sum_i W[o][i] * x[t][i], t < n_tok, for decode-sized batches:
 * one pass over the quantized weights per token, F32 activations, float
 * accumulation of the dequantized values (dequantize-then-dot numerics; no
 * activation quantization, so it is closer to exact than the CPU path).
 * n_in must be a multiple of 32 (of 256 for K-quants). -EINVAL on a bad
 * type or shape, nothing queued. */
int fl_cuda_matvec(struct fl_cuda *cu, const void *d_w, uint32_t w_type, int64_t n_in,
                   int64_t n_out, const float *d_x, int64_t n_tok, float *d_y,
                   struct fl_err *err);

/* Up to FL_CUDA_GROUP_MAX one-token products of one type and shape in one
 * launch: y[j] = W[j] . x[j] (a decode step's routed experts, whose slots
 * lie anywhere in VRAM). Each product is bit-identical to fl_cuda_matvec's. */
#define FL_CUDA_GROUP_MAX 16
int fl_cuda_matvec_group(struct fl_cuda *cu, const void *const *d_w, uint32_t w_type,
                         int64_t n_in, int64_t n_out, const float *const *d_x,
                         float *const *d_y, int n, struct fl_err *err);

/* Dequantizes n_rows rows of n_in values to F16 (d_dst dense [n_rows][n_in]).
 * Each value is exactly the CPU's to_float result rounded to nearest F16. */
int fl_cuda_dequant_f16(struct fl_cuda *cu, const void *d_w, uint32_t w_type, int64_t n_in,
                        int64_t n_rows, uint16_t *d_dst, struct fl_err *err);

/* Prefill form of fl_cuda_matvec: W dequantized to F16 in tiles of rows,
 * x rounded to F16, cublasGemmEx with F32 accumulation. Same shapes. */
int fl_cuda_matmul_gemm(struct fl_cuda *cu, const void *d_w, uint32_t w_type, int64_t n_in,
                        int64_t n_out, const float *d_x, int64_t n_tok, float *d_y,
                        struct fl_err *err);

/* fl_cuda_matvec below `min_batch` tokens, fl_cuda_matmul_gemm from it on
 * (the --offload-min-batch rule; llama.cpp uses 32). */
int fl_cuda_matmul(struct fl_cuda *cu, const void *d_w, uint32_t w_type, int64_t n_in,
                   int64_t n_out, const float *d_x, int64_t n_tok, float *d_y, int min_batch,
                   struct fl_err *err);

/* --- element-wise and row ops ------------------------------------------------- */

/* Round-to-nearest-even F32 -> F16 of n values (KV-cache stores). */
int fl_cuda_f32_to_f16(struct fl_cuda *cu, const float *d_x, uint16_t *d_y, int64_t n,
                       struct fl_err *err);
/* y = x / sqrt(mean(x^2) + eps) * w over n_rows rows of n values, rows
 * `stride` floats apart in x and y (y may equal x); d_w NULL: no weight. */
int fl_cuda_rmsnorm(struct fl_cuda *cu, float *d_y, const float *d_x, const float *d_w,
                    int64_t n, int64_t n_rows, int64_t stride, float eps, struct fl_err *err);
/* y[i] += x[i] (residual adds). */
int fl_cuda_add(struct fl_cuda *cu, float *d_y, const float *d_x, int64_t n, struct fl_err *err);
/* g[i] = silu(g[i]) * u[i]. */
int fl_cuda_swiglu(struct fl_cuda *cu, float *d_g, const float *d_u, int64_t n,
                   struct fl_err *err);
/* gpt-oss's SwiGLU-OAI (model/activation.h), in place on g:
 * g = min(g, limit) * sigmoid(alpha * min(g, limit)) * (clamp(u, -limit, limit) + 1). */
int fl_cuda_swiglu_oai(struct fl_cuda *cu, float *d_g, const float *d_u, int64_t n, float alpha,
                       float limit, struct fl_err *err);
/* y[r * stride + i] += b[i] for i < n, r < n_rows (a bias on every row). */
int fl_cuda_add_rows(struct fl_cuda *cu, float *d_y, const float *d_b, int64_t n, int64_t n_rows,
                     int64_t stride, struct fl_err *err);
/* n_rows rows of `width` floats from d_src (rows src_stride floats apart)
 * to d_dst (dst_stride apart), on the compute stream: the per-head slices
 * of MLA's products. Rows must not overlap. */
int fl_cuda_copy_2d(struct fl_cuda *cu, float *d_dst, int64_t dst_stride, const float *d_src,
                    int64_t src_stride, int64_t width, int64_t n_rows, struct fl_err *err);

enum fl_cuda_rope_mode { FL_CUDA_ROPE_NORM = 0, FL_CUDA_ROPE_NEOX = 2 }; /* = eng_rope_mode */

/* Rotates, in place, the first n_rot dims of n_head heads of head_dim in
 * each of n_tok rows (`stride` floats apart). d_cs holds n_rot/2 (cos, sin)
 * pairs per row, row t at d_cs + t * n_rot: the table eng_rope_table (or
 * model/yarn.h) builds, uploaded, so CPU and GPU rotate by the same angles. */
int fl_cuda_rope(struct fl_cuda *cu, float *d_x, int64_t n_tok, int64_t stride, int n_head,
                 int64_t head_dim, int n_rot, enum fl_cuda_rope_mode mode, const float *d_cs,
                 struct fl_err *err);

/* --- MoE routing ----------------------------------------------------------------- */

enum fl_cuda_gating { /* = enum eng_gating */
    FL_CUDA_GATING_SOFTMAX = 1,
    FL_CUDA_GATING_SIGMOID = 2,
    FL_CUDA_GATING_SOFTMAX_WEIGHT = 3,
};

struct fl_cuda_route {
    int n_expert, k;             /* n_expert <= 4096, k <= 64 */
    enum fl_cuda_gating gating;
    bool norm;                   /* renormalise the k weights to sum 1 */
    float scale;                 /* 0 or 1: none */
    const float *d_sel_bias;     /* NULL or [n_expert], added for the choice only */
};

/* One kernel, one block per token: gating, selection bias, top-k
 * (descending score, ties to the lower id), weights, renormalisation and
 * scale, as eng_moe_route. d_logits [n_tok][n_expert] is left untouched;
 * d_ids/d_weights are [n_tok][k]. */
int fl_cuda_route(struct fl_cuda *cu, const float *d_logits, int64_t n_tok,
                  const struct fl_cuda_route *r, int32_t *d_ids, float *d_weights,
                  struct fl_err *err);

/* Row moves of the MoE layer (all F32, rows of `width`): for j < n,
 *   dst row (d_dst_rows ? d_dst_rows[j] : j) = src row (d_src_rows ? d_src_rows[j] : j).
 * Gathers an expert's tokens (src_rows = token ids) and scatters its
 * outputs to their slots t*k+j (dst_rows), as fl_matmul_rows' rows and
 * out_rows. Row indices are not checked on the device: callers pass ids the
 * router produced. */
int fl_cuda_copy_rows(struct fl_cuda *cu, float *d_dst, const float *d_src, int64_t width,
                      const int32_t *d_src_rows, const int32_t *d_dst_rows, int64_t n,
                      struct fl_err *err);
/* out[t] = sum_j w[t][j] * y[t*k + j], summed in slot order j = 0..k-1 as
 * eng_moe_ffn; y is [n_tok*k][width], w [n_tok][k]. */
int fl_cuda_moe_combine(struct fl_cuda *cu, float *d_out, const float *d_y, const float *d_w,
                        int64_t n_tok, int k, int64_t width, struct fl_err *err);

/* --- attention -------------------------------------------------------------------- */

struct fl_cuda_attn {
    int n_head, n_head_kv;       /* GQA: query head h reads KV head h / (n_head/n_head_kv) */
    int64_t dk, dv;              /* head dims; dv <= 1024 */
    int64_t k_row, v_row;        /* halves per cache row (one position, all KV heads) */
    int64_t k_off, v_off;        /* where KV head 0 starts inside a row */
    int64_t k_stride, v_stride;  /* distance between KV heads inside a row */
    float scale;
    float softcap;               /* 0 = none; else softcap * tanh(s * scale / softcap) */
    int window;                  /* >0: key p0 masked for query p1 iff p1 - p0 >= window */
    const float *d_sinks;        /* NULL or [n_head] logits added to the softmax denominator */
};

/* out[t][h*dv ..] = softmax(q_t . K^T + causal mask) V over cache positions
 * 0 .. pos0 + t of one layer's F16 cache (d_k, d_v: [n_ctx][k_row/v_row]).
 * q [n_tok][q_stride] with head h at h*dk, rounded to F16 before the dots
 * as the CPU does; online softmax in float. */
int fl_cuda_attention(struct fl_cuda *cu, const float *d_q, int64_t q_stride, int n_tok,
                      int pos0, const uint16_t *d_k, const uint16_t *d_v,
                      const struct fl_cuda_attn *p, float *d_out, int64_t out_stride,
                      struct fl_err *err);

/* --- Gated DeltaNet (backend/cpu/recurrent.h's ops, one sequence) ------------ */

/* y[r][i] *= sigmoid(g[r][i]) (per_row: g[r]) over n_rows rows of width. */
int fl_cuda_sigmoid_gate(struct fl_cuda *cu, float *d_y, const float *d_g, int64_t width,
                         int64_t n_rows, bool per_row, struct fl_err *err);
/* out = silu(causal conv of d_state's k-1 kept rows (zeros when reset)
 * then x's n_tok rows of width, kernel d_w F32 [width][k]); d_state
 * [width][k-1] keeps the last k-1 inputs. k <= 16. */
int fl_cuda_ssm_conv(struct fl_cuda *cu, const float *d_x, const float *d_w, float *d_state,
                     float *d_out, int64_t n_tok, int64_t width, int k, bool reset,
                     struct fl_err *err);
struct fl_cuda_delta_net {
    int n_k_head, n_v_head, d;          /* d <= 1024: one thread per state row */
    bool k_grouped;                     /* key head h / (n_v/n_k), else h % n_k */
    const float *d_dt_bias, *d_a;       /* [n_v_head] */
    float eps;
};
/* The delta rule over n_tok tokens from d_state [n_v_head][d][d] (zeros
 * when reset) into it: qkv rows [q | k | v], alpha/beta [n_tok][n_v_head],
 * out [n_tok][n_v_head * d]. */
int fl_cuda_delta_net(struct fl_cuda *cu, const struct fl_cuda_delta_net *p, const float *d_qkv,
                      const float *d_alpha, const float *d_beta, float *d_state, float *d_out,
                      int64_t n_tok, bool reset, struct fl_err *err);

#endif /* FL_HAVE_CUDA */
#endif
