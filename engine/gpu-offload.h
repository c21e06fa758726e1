/* gpu-offload.h: the CUDA backend inside the forward pass (issue 6).
 *
 * One object per session, `struct eng_gpu`, found in eng_ctx.gpu (NULL: the
 * pass runs on the CPU only). It opens the device, uploads every gpu-tier
 * tensor of the placement plan once (a map model tensor -> device copy),
 * and owns the VRAM expert cache (engine/cuda/expert-cache.h) through which
 * experts on host tiers reach the GPU.
 *
 * Offload is op by op, so every architecture gets it through engine/ops.h:
 *  - eng_matmul of a weight in VRAM: x is uploaded, the product runs on the
 *    device, y comes back (a round trip per op: correct first; decode
 *    activations are small).
 *  - eng_moe_ffn: experts in VRAM run there; experts on host tiers go by
 *    --gpu-experts (copy: VRAM cache slots filled by cudaMemcpyAsync on a
 *    copy stream; unified: managed slots migrated by cudaMemPrefetchAsync;
 *    cpu: computed by the CPU path), except that batches of at least
 *    --offload-min-batch tokens bring host experts to the GPU in every mode.
 * Attention, norms, RoPE and routing stay on the CPU (docs/cuda.md).
 *
 * Without CUDA in the build, or without a device, eng_gpu_open fails with
 * -ENODEV and the session runs on the CPU; the decision and parsing helpers
 * below work everywhere (they are tested without a device). */
#ifndef FL_GPU_OFFLOAD_H
#define FL_GPU_OFFLOAD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/fl-error.h"
#include "engine/ops.h"

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
    int device;
    FILE *log;               /* NULL, or where one-line notes go (an expert cache that cannot be made) */
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

/* 0, or the first CUDA error an op hit (then err says which). */
int eng_gpu_error(const struct eng_gpu *gpu, struct fl_err *err);

/* Matmuls plus MoE layers computed on the GPU so far (0 without one). */
uint64_t eng_gpu_ops(const struct eng_gpu *gpu);

/* --stats: what ran where, and the expert cache's per-expert host->GPU
 * copy latency. */
void eng_gpu_print_stats(const struct eng_gpu *gpu, FILE *out);

#endif
