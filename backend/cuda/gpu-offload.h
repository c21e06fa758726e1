/* gpu-offload.h: the CUDA backend inside the forward pass (issue 6).
 *
 * One object per session, `struct eng_gpu`, found in eng_ctx.gpu (NULL: the
 * pass runs on the CPU only). It opens the device, uploads every gpu-tier
 * tensor of the placement plan once (a map model tensor -> device copy),
 * and owns the VRAM expert cache (backend/cuda/expert-cache.h) through which
 * experts on host tiers reach the GPU.
 *
 * Offload is op by op, so every architecture gets it through model/ops.h:
 *  - eng_matmul of a weight in VRAM: x is uploaded, the product runs on the
 *    device, y comes back (a round trip per op: correct first; decode
 *    activations are small).
 *  - eng_moe_ffn: experts in VRAM run there; experts on host tiers go by
 *    --gpu-experts (copy: VRAM cache slots filled by cudaMemcpyAsync on a
 *    copy stream; unified: managed slots migrated by cudaMemPrefetchAsync;
 *    cpu: computed by the CPU path), except that batches of at least
 *    --offload-min-batch tokens bring host experts to the GPU in every mode.
 * An architecture can instead run its whole pass on the device ("the pass
 * on the device" below; the llama family does), with norms, RoPE,
 * attention and routing there too (docs/cuda.md).
 *
 * Without CUDA in the build, or without a device, eng_gpu_open fails with
 * -ENODEV and the session runs on the CPU; the decision and parsing helpers
 * below work everywhere (they are tested without a device). */
#ifndef FL_GPU_OFFLOAD_H
#define FL_GPU_OFFLOAD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "model/ops.h"

struct gguf_file;
struct placement_plan;

/* --gpu-experts. NONE is the zero value: sessions opened from zeroed
 * params (library users, tests) never send host experts to the GPU; the
 * CLI's default (eng_session_params_init) is COPY. */
enum eng_gpu_experts {
    ENG_GPU_EXPERTS_NONE = 0,
    ENG_GPU_EXPERTS_COPY,
    ENG_GPU_EXPERTS_UNIFIED,
    ENG_GPU_EXPERTS_CPU,
};

/* llama.cpp's GGML_OP_OFFLOAD_MIN_BATCH default. */
#define ENG_GPU_MIN_BATCH_DEFAULT 32

/* "copy", "unified", "cpu" -> the mode; -EINVAL otherwise (NULL too). */
int eng_gpu_experts_parse(const char *v, enum eng_gpu_experts *out);
const char *eng_gpu_experts_name(enum eng_gpu_experts m);

/* Where one MoE layer's experts are computed. */
enum eng_gpu_where {
    ENG_GPU_RUN_CPU = 0,  /* the CPU path of eng_moe_ffn */
    ENG_GPU_RUN_VRAM,     /* the expert tensors are on the gpu tier */
    ENG_GPU_RUN_CACHE,    /* host experts through the VRAM expert cache */
};

/* The rule, as a pure function: kernels_ok says the GPU has kernels for
 * the layer's experts (types, shapes, activation, no biases); in_vram that
 * they were uploaded; have_cache that an expert cache exists. */
enum eng_gpu_where eng_gpu_decide(enum eng_gpu_experts mode, bool kernels_ok, bool in_vram,
                                  bool have_cache, int64_t n_tok, int min_batch);

struct eng_gpu_options {
    enum eng_gpu_experts experts;
    int min_batch;           /* --offload-min-batch; 0: ENG_GPU_MIN_BATCH_DEFAULT */
    uint64_t vram_budget;    /* --vram-budget; 0: what the device has free */
    uint64_t kv_bytes;       /* the KV cache a pass on the device keeps in VRAM (eng_kv_bytes):
                                held back from the budget, or from free memory */
    bool lru_cache;          /* --cache lru: the VRAM expert cache evicts the least recently
                                used; otherwise lfu-decay with the pager's half-life */
    int device;
    FILE *log;               /* NULL, or where one-line notes go (an expert cache that cannot be made) */
    /* Called after the first pass that ran wholly on the device, once per
     * uploaded matrix the host will not read again (every later pass runs
     * there too and reads the VRAM copy): the session gives its pages back.
     * Kept: the embedding (its rows are taken on the host), norms, routers
     * and selection biases (the predictor and host routing read them),
     * experts (the CPU computes those the kernels cannot) and the head when
     * it runs on the host. NULL: the host keeps every copy. */
    void (*host_copy_unused)(void *ctx, const struct eng_tensor *t);
    void *host_copy_ctx;
    bool verbose;            /* also name each gpu-tier matrix left on the host, and why */
};

/* Whether a usable device exists; *vram_free gets its free memory. When
 * not, *why says in a few words why ("built without CUDA", "no CUDA
 * device"). Never fails. */
bool eng_gpu_detect(uint64_t *vram_free, const char **why);

/* Opens the device, uploads the plan's gpu-tier tensors of m (those the
 * kernels take; the rest stay on the host) and creates the expert cache
 * for host-tier experts when the mode can use one. -ENODEV without a
 * device; CUDA errors and -ENOMEM as one line in err. */
int eng_gpu_open(const struct eng_model *m, const struct gguf_file *g,
                 const struct placement_plan *plan, const struct eng_gpu_options *o,
                 struct eng_gpu **out, struct fl_err *err);
void eng_gpu_close(struct eng_gpu *gpu);

/* eng_matmul's GPU half: true when it computed y (w is in VRAM), false
 * when the caller must compute on the CPU (w on the host, or the GPU
 * failed: that error is kept for eng_gpu_error and the GPU is not used
 * again). */
bool eng_gpu_matmul(struct eng_ctx *c, const struct eng_tensor *w, int expert, const float *x,
                    int64_t n_tok, float *y);

/* eng_moe_ffn's GPU half, called after routing (L: its per-expert lists)
 * and the expert source's prefetch: 1 when out was computed on the GPU, 0
 * when the CPU path must run (eng_gpu_decide said so), or a negative errno
 * with err set (the expert source's read error, or a CUDA error). */
int eng_gpu_moe(struct eng_ctx *c, int layer, const float *x, int64_t n_tok,
                const struct eng_expert_lists *L, const float *weights, int64_t k,
                const struct eng_moe *e, float *out, struct fl_err *err);

/* --- the pass on the device ---------------------------------------------------------
 * An architecture whose blocks the kernels cover (the llama family:
 * model/arch-llama.c) keeps a pass's activations in VRAM from the
 * embedding to the logits: norms, projections, RoPE, the KV cache and
 * attention, the router and the residual adds run on the device; the host
 * sees the router's choices (for the pager and the expert cache, one wait
 * per MoE layer) and the logits. The pass is taken only when every tensor
 * it reads is in VRAM (eng_gpu_on_device), and for every batch of the
 * session alike, since its KV cache lives in VRAM. Ops queue on the
 * compute stream and do nothing once the GPU has failed; eng_gpu_pass_end
 * reports the first failure, so a pass reads like the CPU one. Device
 * pointers (d_*) come from eng_gpu_tmp. */

/* c->gpu usable, and every non-NULL w[i] in VRAM. */
bool eng_gpu_on_device(const struct eng_ctx *c, const struct eng_tensor *const *w, int n);
/* Starts a pass: scratch reset, x [n floats] uploaded; its device copy. */
float *eng_gpu_pass_begin(struct eng_ctx *c, const float *x, int64_t n);
/* n floats of device scratch until the pass ends (NULL once failed). */
float *eng_gpu_tmp(struct eng_ctx *c, int64_t n);
struct eng_gpu_mark {
    int block;
    size_t used;
};
struct eng_gpu_mark eng_gpu_tmp_mark(const struct eng_ctx *c);
void eng_gpu_tmp_release(struct eng_ctx *c, struct eng_gpu_mark m);
void eng_gpu_put(struct eng_ctx *c, float *d, const float *x, int64_t n);
/* The CPU ops of model/ops.h over device rows (same arguments). */
void eng_gpu_rmsnorm_rows(struct eng_ctx *c, float *d_y, const float *d_x,
                          const struct eng_tensor *w, int64_t n, int64_t n_rows, int64_t stride,
                          float eps);
void eng_gpu_mm(struct eng_ctx *c, const struct eng_tensor *w, const float *d_x, int64_t n_tok,
                float *d_y);
void eng_gpu_rope_rows(struct eng_ctx *c, float *d_x, int n_tok, int64_t stride, int n_head,
                       int64_t head_dim, int n_rot, enum eng_rope_mode mode, const float *d_cs);
/* K/V rows [n_tok][kd] / [n_tok][vd] into the device cache at pos0.. */
void eng_gpu_kv_store(struct eng_ctx *c, int layer, int pos0, int n_tok, const float *d_k,
                      int64_t kd, const float *d_v, int64_t vd);
/* p->sinks, when set, is a device pointer (eng_gpu_tensor); p->v_in_k reads
 * the values from the K cache (MLA: store with vd 0). */
void eng_gpu_attention(struct eng_ctx *c, int layer, const float *d_q, int64_t q_stride,
                       int n_tok, int pos0, const struct eng_attn *p, float *d_out,
                       int64_t out_stride);
void eng_gpu_add(struct eng_ctx *c, float *d_y, const float *d_x, int64_t n);
void eng_gpu_swiglu(struct eng_ctx *c, float *d_g, const float *d_u, int64_t n);
/* d_y (n_rows rows of b's width) += the F32 bias b, which is in VRAM. */
void eng_gpu_add_bias(struct eng_ctx *c, float *d_y, const struct eng_tensor *b, int64_t n_rows);
/* n_rows rows of width floats, strides in floats (per-head slices). */
void eng_gpu_copy_2d(struct eng_ctx *c, float *d_dst, int64_t dst_stride, const float *d_src,
                     int64_t src_stride, int64_t width, int64_t n_rows);
/* eng_matmul(c, w, i, ...): the product with slice i of a 3-D tensor in VRAM. */
void eng_gpu_mm_slice(struct eng_ctx *c, const struct eng_tensor *w, int64_t i, const float *d_x,
                      int64_t n_tok, float *d_y);
/* y_h = (slice h of the 3-D w) . x_h for every head h < n_head and token:
 * x_h's row of a token at d_x + h * x_head, tokens x_stride floats apart;
 * y_h likewise (MLA's per-head products, without moving the heads). */
void eng_gpu_mm_heads(struct eng_ctx *c, const struct eng_tensor *w, int n_head,
                      const float *d_x, int64_t x_head, int64_t x_stride, float *d_y,
                      int64_t y_head, int64_t y_stride, int64_t n_tok);
/* The VRAM copy of t (NULL: on the host), for the device pointers of
 * struct eng_attn / eng_route in a device pass. */
const void *eng_gpu_tensor(const struct eng_ctx *c, const struct eng_tensor *t);
/* n floats back to the host (waits for the pass so far). */
void eng_gpu_get(struct eng_ctx *c, float *x, const float *d, int64_t n);
/* eng_moe_route + eng_moe_ffn from device router logits: routing on the
 * device (r->sel_bias, when set, a device pointer), experts where
 * --gpu-experts says (the CPU ones get their input downloaded and their sum
 * uploaded), the sum in d_out. */
void eng_gpu_moe_ffn(struct eng_ctx *c, int layer, int pos0, const float *d_x, int64_t n_tok,
                     const float *d_logits, const struct eng_route *r, const struct eng_moe *e,
                     float *d_out);
/* The same after routing on the host (ids, w [n_tok][k]: a rule the router
 * kernel lacks, DeepSeek-V3's expert groups). */
void eng_gpu_moe_ffn_routed(struct eng_ctx *c, int layer, int pos0, const float *d_x,
                            int64_t n_tok, const int32_t *ids, const float *w, int64_t k,
                            const struct eng_moe *e, float *d_out);
/* The head (on the device when its tensors are, else on the host) into
 * b->logits; 0, or the pass's first failure. */
int eng_gpu_pass_end(struct eng_ctx *c, const float *d_x, const struct eng_batch *b,
                     const struct eng_tensor *norm, const struct eng_tensor *output, float eps,
                     struct fl_err *err);

/* 0, or the first CUDA error an op hit (then err says which). */
int eng_gpu_error(const struct eng_gpu *gpu, struct fl_err *err);

/* Whether (layer, expert) sits in the VRAM expert cache, so reading its
 * host bytes ahead of time is wasted (pager_held_fn: gpu is a struct
 * eng_gpu; false without a cache, and in --gpu-experts cpu mode). */
bool eng_gpu_holds_expert(void *gpu, int layer, int expert);
/* MoE layers whose experts the CPU computed so far (0 without a GPU). */
uint64_t eng_gpu_moe_on_cpu(const struct eng_gpu *gpu);
/* Passes run wholly on the device so far (0 without a GPU). */
uint64_t eng_gpu_passes(const struct eng_gpu *gpu);
/* Passes on the device, matmuls and MoE layers offloaded so far (0 without one). */
uint64_t eng_gpu_ops(const struct eng_gpu *gpu);

/* --stats: what ran where, and the expert cache's per-expert host->GPU
 * copy latency. */
void eng_gpu_print_stats(const struct eng_gpu *gpu, FILE *out);

#endif
