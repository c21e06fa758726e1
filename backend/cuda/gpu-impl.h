/* gpu-impl.h: what the two halves of the GPU backend inside the forward
 * pass share (not an interface: backend/cuda/gpu-offload.h is). gpu-offload.c
 * opens the device, uploads the gpu tier, runs offloaded matmuls and MoE
 * layers; gpu-forward.c keeps a whole pass's activations in VRAM. Only
 * built with FL_HAVE_CUDA. */
#ifndef FL_GPU_IMPL_H
#define FL_GPU_IMPL_H

#ifdef FL_HAVE_CUDA

#include "backend/cuda/cuda-backend.h"
#include "backend/cuda/expert-cache.h"
#include "backend/cuda/gpu-offload.h"

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

struct eng_gpu {
    struct fl_cuda *cu;
    const struct eng_model *m;
    struct eng_gpu_options o;
    void **d_tensor;            /* [m->n_tensors]: device copy, NULL on the host */
    uint64_t up_bytes, up_limit; /* uploaded; --vram-budget, or free VRAM less the reserve */
    int64_t n_up, n_kept;       /* gpu-tier matrices uploaded / left on the host */
    struct fl_cuda_xcache *xc;  /* host experts; NULL: none, or no slot fits */
    size_t slot_bytes;
    bool *t_pinned;             /* [m->n_tensors]: page-locked in place (RAM-tier experts) */
    void **pins;                /* the registered page ranges */
    int n_pins;
    uint64_t pinned_bytes;
    struct dbuf buf[B_COUNT];
    struct gpu_arena arena;
    struct gpu_kv kv;
    bool device_pass;           /* a pass ran on the device: its KV cache is in VRAM */
    int failed;
    struct fl_err err;
    uint64_t n_matmul, n_moe_vram, n_moe_cache, n_moe_cpu, n_expert_runs, n_pass;
};

/* Keeps the first error (the GPU is not used again after it); returns rc. */
int gpu_fail(struct eng_gpu *g, int rc, const struct fl_err *err);
/* The VRAM copy of a model tensor, NULL when it stays on the host. */
void *gpu_device_of(const struct eng_gpu *g, const struct eng_tensor *w);
/* The MoE experts of one layer on the device, input d_x and routing
 * weights d_w already there, the sum left in d_out: 1 when computed, 0
 * when the CPU must compute them (eng_gpu_decide), -errno with err set. */
int gpu_moe_device(struct eng_ctx *c, int layer, const float *d_x, int64_t n_tok,
                   const struct eng_expert_lists *L, const float *d_w, int64_t k,
                   const struct eng_moe *e, float *d_out, struct fl_err *err);
/* Whether gpu_moe_device would leave these experts to the CPU (so their
 * input must come to the host). */
bool gpu_moe_on_cpu(const struct eng_gpu *g, const struct eng_moe *e, int64_t n_tok);
/* Frees the device pass's arena and KV cache (eng_gpu_close). */
void gpu_forward_free(struct eng_gpu *g);

#endif /* FL_HAVE_CUDA */
#endif
