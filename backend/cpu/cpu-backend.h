/* cpu-backend.h: the CPU's instance of the backend interface
 * (model/backend.h), and the pieces of it another backend reuses.
 *
 * Every op runs on host rows with the pool's threads. The composite ops
 * (the head, MLA's per-head products, the dense FFN) reach their products
 * through c->be, so a backend made of this table with the products
 * replaced (the GPU's offload of the weights it holds, backend/cuda/) sends
 * those products elsewhere and keeps the rest. */
#ifndef FL_CPU_BACKEND_H
#define FL_CPU_BACKEND_H

#include "model/backend.h"
#include "model/moe-route.h"

extern const struct eng_backend eng_cpu_backend;

/* The experts of a routed layer on the CPU (after eng_moe_begin): the
 * resident ones first, acquire / compute / release each, all tokens routed
 * to an expert in one product; the slots summed in order 0..k-1 into out
 * (x and out on the host). 0, or the expert source's -errno with err set. */
int eng_cpu_moe_experts(struct eng_ctx *c, int layer, const float *x, int64_t n_tok,
                        struct eng_expert_lists *L, const float *weights, int64_t k,
                        const struct eng_moe *e, float *out, struct fl_err *err);

/* c->pool when `work` (multiply-adds, roughly) is worth waking the other
 * threads for, NULL (run on the caller) when a pool round trip would cost
 * more than the work: small models and decode steps are dominated by it. */
struct fl_pool *eng_cpu_pool_for(const struct eng_ctx *c, double work);

/* At most how many bytes of host scratch (model/scratch.h) a CPU pass over
 * model m takes for a step of n_tok tokens reading up to n_kv positions of
 * a sequence, n_out of them with logits, on n_threads threads: what a memory
 * limit must leave the pass beside the weights and the KV cache. An
 * estimate from the tensor shapes, not a replay of the pass; its test keeps
 * it above what passes measure. */
uint64_t eng_cpu_scratch_bound(const struct eng_model *m, int64_t n_tok, int64_t n_kv,
                               int64_t n_out, int n_threads);

/* Rebuilds, in memory of their own, the weights that only matmuls read and
 * that the CPU kernels have a faster layout for (backend/cpu/repack.h:
 * Q4_K with 8 rows interleaved, on AVX-512 VNNI CPUs): attention and FFN
 * projections, experts, the output matrix; never the token embeddings
 * (rows are looked up one at a time) nor a router. Only tensors for which
 * want(ctx, t) is true are considered: the caller's say on where the bytes
 * live (the pager's RAM tier, not a GPU). done(ctx, t, ...), when not NULL,
 * is called on the calling thread after each rebuilt tensor (t still names
 * its file bytes), so the caller can release the region's copy and report
 * progress: bytes rebuilt so far of the bytes all candidates take.
 * Calling it again does nothing.
 * A tensor whose copy would leave less free memory (MemAvailable, or a memory
 * cgroup's headroom: base/host-memory.h) than its own size, or that cannot be
 * allocated, keeps the file layout. Results are bit-identical to the file
 * layout's (repack.h). Returns the number of tensors rebuilt. */
int64_t eng_model_repack(struct eng_model *m, struct fl_pool *pool,
                         bool (*want)(void *ctx, const struct eng_tensor *t),
                         void (*done)(void *ctx, const struct eng_tensor *t, size_t done_bytes,
                                      size_t total_bytes),
                         void *ctx);

#endif
