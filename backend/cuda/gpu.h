/* gpu.h: the CUDA backend of the forward pass, as the session sees it.
 *
 * One object per session, `struct eng_gpu`. It opens the device, uploads
 * every gpu-tier tensor of the placement plan once (a map model tensor ->
 * device copy), and owns the VRAM expert cache (backend/cuda/expert-cache.h)
 * through which experts on host tiers reach the GPU. The session sets
 * ctx.pick = eng_gpu_pick; for each pass it chooses one of two backends
 * (model/backend.h):
 *  - the pass on the device, when every tensor the pass reads (but the
 *    experts, the embedding and the output matrix) is in VRAM: norms,
 *    projections, RoPE, the KV cache and attention, the router and the
 *    residual adds run there; the host sees the router's choices (for the
 *    pager and the expert cache, one wait per MoE layer) and the logits.
 *    Once a pass ran there, every later one does (its KV cache is in VRAM);
 *  - otherwise the CPU's pass with the products of weights in VRAM sent to
 *    the device (a round trip per product: decode activations are small).
 * In both, a MoE layer's experts run where eng_gpu_decide says: in VRAM,
 * through the expert cache (--gpu-experts copy: slots filled by
 * cudaMemcpyAsync on a copy stream; unified: managed slots migrated by
 * cudaMemPrefetchAsync), or on the CPU (--gpu-experts cpu, or no kernel),
 * except that batches of at least --offload-min-batch tokens bring host
 * experts to the GPU in every mode (not with batch_invariant).
 * Products choose cuBLAS or the matvec kernels by the length of each row's
 * span, never by the batch's (gpu_matmul_rows), and the device pass keeps
 * every sequence's KV rows in the host cache's cells and each sequence's
 * recurrent state: a request's logits are the same bits alone or batched.
 *
 * Without CUDA in the build, or without a device, eng_gpu_open fails with
 * -ENODEV and the session runs on the CPU; the decision and parsing helpers
 * work everywhere (they are tested without a device). */
#ifndef FL_GPU_H
#define FL_GPU_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "model/backend.h"

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
    ENG_GPU_RUN_CPU = 0,  /* the CPU's experts (backend/cpu/cpu-backend.h) */
    ENG_GPU_RUN_VRAM,     /* the expert tensors are on the gpu tier */
    ENG_GPU_RUN_CACHE,    /* host experts through the VRAM expert cache */
};

/* The rule, as a pure function: kernels_ok says the GPU has kernels for
 * the layer's experts (types, shapes, activation, biases); in_vram that
 * they were uploaded; have_cache that an expert cache exists. */
enum eng_gpu_where eng_gpu_decide(enum eng_gpu_experts mode, bool kernels_ok, bool in_vram,
                                  bool have_cache, int64_t n_tok, int min_batch);

struct eng_gpu_options {
    enum eng_gpu_experts experts;
    int min_batch;           /* --offload-min-batch; 0: ENG_GPU_MIN_BATCH_DEFAULT */
    uint64_t vram_budget;    /* --vram-budget; 0: what the device has free */
    uint64_t kv_bytes;       /* the KV cache and recurrent state a pass on the device keeps
                                in VRAM (eng_kv_bytes + eng_kv_rs_bytes): held back from
                                the budget, or from free memory (0 with kv_on_host) */
    bool kv_on_host;         /* the KV cache stays in host memory (-nkvo, or a quantized
                                cache, which the device does not keep): no pass runs wholly
                                on the device, attention stays on the CPU */
    bool lru_cache;          /* --cache lru: the VRAM expert cache evicts the least recently
                                used; otherwise lfu-next, as the pager's default */
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
    /* Several sequences share passes (-np > 1): a row's bits may depend on
     * its own span only, so --gpu-experts cpu keeps host experts on the CPU
     * whatever the batch's size (--offload-min-batch goes by the batch). */
    bool batch_invariant;
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

/* ctx.pick for a context whose ctx.gpu is open: the backend of the next
 * pass (the device's, or the CPU's with products offloaded). */
const struct eng_backend *eng_gpu_pick(struct eng_ctx *c);

/* 0, or the first CUDA error an op hit (then err says which). */
int eng_gpu_error(const struct eng_gpu *gpu, struct fl_err *err);

/* Sequence dst's recurrent state in VRAM becomes a copy of src's, in every
 * layer the device keeps one for (kv-cache.h's eng_kv_rs_copy for the
 * host's): a prompt cache's snapshot taken or read. A copy that fails
 * fails the GPU (the next pass reports it). Nothing without a GPU. */
void eng_gpu_rs_copy(struct eng_gpu *gpu, int dst, int src);

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
