/* gpu-impl.h: what the parts of the GPU backend share (not an interface:
 * backend/cuda/gpu.h is). gpu-open.c opens the device and uploads the gpu
 * tier; gpu-moe.c runs a MoE layer's experts on the device; gpu-pass.c is
 * the pass on the device; gpu-offload.c the CPU's pass with products sent
 * to the device, and the choice between the two; gpu-stats.c --stats.
 * Only built with FL_HAVE_CUDA (gpu-none.c stands in otherwise). */
#ifndef FL_GPU_IMPL_H
#define FL_GPU_IMPL_H

#include "backend/cuda/cuda-backend.h"
#include "backend/cuda/expert-cache.h"
#include "backend/cuda/gpu.h"
#include "model/moe-route.h"

/* Batches of at least this many tokens take the cuBLAS path, smaller ones
 * the matvec kernels (one weight pass per token). */
#define GPU_GEMM_MIN_TOK 32

/* Device buffers for activations of offloaded ops, grown on demand, one
 * per role. */
enum { B_X, B_Y, B_XG, B_G, B_U, B_D, B_SLOTS, B_W, B_TOK, B_SLOT, B_OUT, B_COUNT };

struct dbuf {
    void *p;
    size_t cap;
};

/* The device pass's scratch: blocks that are never moved (pointers handed
 * out stay valid), reused from the first block at each pass. */
#define GPU_ARENA_BLOCKS 16
struct gpu_arena {
    void *block[GPU_ARENA_BLOCKS];
    size_t cap[GPU_ARENA_BLOCKS];
    int n, cur;
    size_t used;
};

/* The KV cache of the device pass: per layer, n_ctx F16 rows of K and V. */
struct gpu_kv {
    int n_ctx, n_layer;
    uint16_t **k, **v;
    int64_t *kd, *vd;
};

/* Recurrent layers' state of the device pass's sequences (gpu-recurrent.c). */
struct gpu_rs {
    int n_layer, n_seq;
    float **conv, **ssm; /* [n_layer] device arrays of n_seq slots, NULL where none */
};

struct eng_gpu {
    struct fl_cuda *cu;
    const struct eng_model *m;
    struct eng_gpu_options o;
    void **d_tensor;            /* [m->n_tensors]: device copy, NULL on the host */
    uint64_t up_bytes, up_limit; /* uploaded; --vram-budget, or free VRAM less the reserve */
    int64_t n_up, n_kept;       /* gpu-tier matrices uploaded / left on the host */
    bool trunk_in_vram;         /* every tensor the pass reads but experts, embedding, head */
    struct fl_cuda_xcache *xc;  /* host experts; NULL: none, or no slot fits */
    size_t slot_bytes;
    bool *t_pinned;             /* [m->n_tensors]: page-locked in place (RAM-tier experts) */
    void **pins;                /* the registered page ranges */
    int n_pins;
    uint64_t pinned_bytes;
    struct dbuf buf[B_COUNT];
    struct gpu_arena arena;
    struct gpu_kv kv;
    struct gpu_rs rs;
    bool device_pass;           /* a pass ran on the device: its KV cache is in VRAM */
    const int32_t **span_cells; /* this pass's spans' cell tables in VRAM, NULL where a
                                   sequence's positions are its cells (pass scratch) */
    struct eng_backend offload; /* the CPU's ops, products of VRAM weights on the device */
    int failed;
    struct fl_err err;
    uint64_t n_matmul, n_moe_vram, n_moe_cache, n_moe_cpu, n_expert_runs, n_pass;
};

/* gpu-open.c */
/* Keeps the first error (the GPU is not used again after it); returns rc. */
int gpu_fail(struct eng_gpu *g, int rc, const struct fl_err *err);
/* The VRAM copy of a model tensor, NULL when it stays on the host. */
void *gpu_device_of(const struct eng_gpu *g, const struct eng_tensor *w);
/* Buffer `which` of at least `bytes` (grown, after the queued kernels). */
int gpu_dbuf(struct eng_gpu *g, int which, size_t bytes, void **out, struct fl_err *err);
/* One expert's share of an expert tensor: a 2-D slice of a 3-D matrix, or
 * one row of a 2-D bias [n_out, n_expert]. */
size_t gpu_expert_bytes(const struct eng_tensor *t);
/* Widths the kernels take: a whole number of 32-value units and blocks. */
bool gpu_kernel_shape_ok(uint32_t type, int64_t n_in);

/* gpu-matmul.c */
/* y = w . x over n_tok rows. row_span NULL: cuBLAS for GPU_GEMM_MIN_TOK
 * rows or more, else the matvec kernels (always them with
 * o.batch_invariant). Otherwise row_span[r] names row
 * r's span (rows of one span adjacent): each run of one span's rows of at
 * least GPU_GEMM_MIN_TOK is a cuBLAS product of its own, every other row
 * goes to the matvec kernels, so no row's bits depend on the other spans. */
int gpu_matmul_rows(struct eng_gpu *g, const void *d_w, uint32_t type, int64_t n_in,
                    int64_t n_out, const float *d_x, int64_t n_tok, float *d_y,
                    const int32_t *row_span, struct fl_err *err);
/* The span of each of a product's n_rows rows in the pass running now: the
 * batch's tokens (n_tok rows) or the rows that get logits (n_out rows, in
 * host scratch); NULL for any other count, or outside a pass. */
const int32_t *gpu_row_spans(struct eng_ctx *c, int64_t n_rows);

/* gpu-moe.c */
/* The MoE experts of one layer on the device, input d_x and routing
 * weights d_w already there, the sum left in d_out: 1 when computed, 0
 * when the CPU must compute them (eng_gpu_decide), -errno with err set. */
int gpu_moe_device(struct eng_ctx *c, int layer, const float *d_x, int64_t n_tok,
                   const struct eng_expert_lists *L, const float *d_w, int64_t k,
                   const struct eng_moe *e, float *d_out, struct fl_err *err);
/* The same from host rows x and weights, out on the host (a CPU pass). */
int gpu_moe_host(struct eng_ctx *c, int layer, const float *x, int64_t n_tok,
                 const struct eng_expert_lists *L, const float *weights, int64_t k,
                 const struct eng_moe *e, float *out, struct fl_err *err);
/* Whether gpu_moe_device would leave these experts to the CPU (so their
 * input must come to the host). */
bool gpu_moe_on_cpu(const struct eng_gpu *g, const struct eng_moe *e, int64_t n_tok);

/* gpu-pass.c */
extern const struct eng_backend gpu_pass_backend;
/* Frees the device pass's arena and KV cache (eng_gpu_close). */
void gpu_pass_free(struct eng_gpu *g);

/* gpu-recurrent.c: the device pass's recurrent ops (model/backend.h) */
void gpu_pass_ssm_conv(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *d_x,
                       const struct eng_tensor *w, int64_t state_off, float *d_out);
void gpu_pass_delta_net(struct eng_ctx *c, int layer, const struct eng_batch *b,
                        const float *d_qkv, const float *d_alpha, const float *d_beta,
                        const struct eng_delta_net *p, float *d_out);
void gpu_pass_sigmoid_gate(struct eng_ctx *c, float *d_y, const float *d_g, int64_t width,
                           int64_t n_rows, bool per_row);
void gpu_recurrent_free(struct eng_gpu *g);

/* gpu-offload.c */
/* g->offload: the CPU backend's table, its products of VRAM weights and its
 * MoE layers sent to the device. */
void gpu_offload_init(struct eng_gpu *g);

#endif
