/* session.h: a model ready to run — the object the CLI drives.
 *
 * A session owns the parsed GGUF header, the weights region, the model, its
 * F16 KV cache, the tokenizer, a thread pool and the scratch arena.
 *
 * One sequence (eng_session_eval): tokens are evaluated at positions
 * n_past, n_past+1, ... of sequence 0; a batch longer than n_batch runs as
 * several forward calls of at most n_batch tokens, cut at multiples of
 * n_batch from the first.
 * Several (n_seq, -np): the KV cache's cells are shared by sequences
 * 0 .. n_seq-1, and eng_session_forward runs a batch of their spans
 * (model/arch.h); app/scheduler.h drives it. */
#ifndef FL_SESSION_H
#define FL_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "base/progress.h"
#include "gguf/tensor-types.h"
#include "model/expert-source.h"
#include "model/kv-cache.h"
#include "model/model.h"
#include "plan/numa.h"
#include "plan/placement.h"
#include "app/predict.h"

struct eng_session;
struct fl_tokenizer;
struct eng_batch;

#define ENG_SESSION_MAX_SEQ 1024
/* -c's largest value, and the least context a session gets without -c
 * unless the model was trained on less (llama.cpp's -fitc) */
#define ENG_SESSION_MAX_CTX (1 << 24)
#define ENG_SESSION_CTX_FLOOR 4096

#define ENG_KV_OVERRIDES_MAX 16 /* --override-kv flags; each may list several */

struct eng_session_params {
    const char *model_path;
    int n_ctx;      /* KV cache positions; 0: the training context, cut to the memory
                     * left beside the plan, at least min(4096, it) (session.c) */
    int n_batch;    /* most tokens per forward call; 0: 512 */
    int n_seq;      /* sequences at once (-np), sharing n_ctx cells; 0: 1 */
    bool no_prompt_cache; /* --no-cache-prompt: no held prefixes (eng_session_n_held) */
    int n_threads;  /* 0: physical cores */
    /* Where the weights live: tiers, RAM/VRAM budgets (plan/placement.h).
     * Zero-initialised means the defaults; call eng_session_params_init. */
    struct placement_options placement;
    int pager_mode;          /* enum pager_mode: auto, uffd, explicit */
    bool stats;              /* print the pager's per-expert table at the end */
    const char *stats_json;  /* write all pager statistics there (claimed at open:
                              * base/out-file.h, written whole by eng_session_report) */
    bool force;              /* --force: outputs may replace an existing GGUF file */
    /* Told how far the long steps of opening are: reading the RAM tier,
     * repacking, calibrating (the CLI draws a bar; zeroed: silent). */
    struct fl_progress progress;
    /* Polled between the n_batch chunks of a long prompt: nonzero stops
     * eng_session_eval with -EINTR (Ctrl-C need not wait for the prompt). */
    int (*interrupted)(void);
    enum fl_numa_mode numa;
    struct fl_predict_config predict; /* --prefetch (app/predict.h) */
    int cache;                        /* --cache: enum pager_cache */
    const char *hot_profile;          /* --cache pinned-hot:FILE */
    const char *calibrate;            /* --calibrate PROMPTS: pinned-hot's profile */
    /* The GPU (backend/cuda/gpu.h). Zeroed params use none for host
     * experts; eng_session_params_init sets the CLI's default, copy. */
    int gpu_experts;                  /* --gpu-experts: enum eng_gpu_experts */
    int offload_min_batch;            /* --offload-min-batch N; 0: 32 */
    bool gpu_flags;                   /* either was given (said when there is no GPU) */
    bool no_repack;                   /* --no-repack: RAM-tier weights stay as in the file */
    bool check_tensors;               /* --check-tensors: every tensor's bytes checked at open
                                       * (app/check-tensors.h) */
    /* -ctk/-ctv: the KV cache's types (model/kv-cache.h); 0 (F32, which a
     * cache never is) means F16, llama.cpp's default */
    enum fl_type cache_type_k, cache_type_v;
    bool no_kv_offload;               /* -nkvo: with a GPU, the KV cache stays in RAM */
    /* --override-kv (llama.cpp's): the file's metadata as these lists say
     * (gguf_override), in order, before anything reads it */
    const char *kv_overrides[ENG_KV_OVERRIDES_MAX];
    int n_kv_overrides;
    /* --rope-scaling, --rope-scale, --rope-freq-base, --rope-freq-scale,
     * --yarn-*: the rope over the file's (model/yarn.h; zeroed: the file's) */
    struct yarn_context rope;
};

/* The defaults (the CLI's flags: app/cli/session-flags.h). */
void eng_session_params_init(struct eng_session_params *p);

/* Opens the model (errors name the file and the problem). */
int eng_session_open(const struct eng_session_params *p, struct eng_session **out,
                     struct fl_err *err);
void eng_session_close(struct eng_session *s);

const struct eng_model *eng_session_model(const struct eng_session *s);
const struct fl_tokenizer *eng_session_tokenizer(const struct eng_session *s);
const struct gguf_file *eng_session_gguf(const struct eng_session *s);
int eng_session_n_ctx(const struct eng_session *s);
int eng_session_n_past(const struct eng_session *s);
int eng_session_n_threads(const struct eng_session *s);
uint64_t eng_session_file_size(const struct eng_session *s);
/* The --override-kv lists applied to the file's metadata (*n of them). */
const char *const *eng_session_kv_overrides(const struct eng_session *s, int *n);
/* Every tensor's elements (gguf/param-count.h, as llama.cpp counts them). */
int64_t eng_session_n_params(const struct eng_session *s);
void eng_session_reset(struct eng_session *s); /* forget sequence 0: n_past = 0 */
/* Forgets sequence 0's positions from n_past on (0 <= n_past <= the current
 * one); -ENOTSUP for a recurrent model (its state sums every position and
 * cannot go back: reset it instead) unless eng_session_rs_restore put its
 * state at n_past, -EINVAL out of range. */
int eng_session_rewind(struct eng_session *s, int n_past);
int eng_session_n_seq(const struct eng_session *s);
/* Sequence ids n_seq .. n_seq+n_held-1 never run: they hold cells of
 * prompts' prefixes for later requests to share (the scheduler's prompt
 * cache); a recurrent model's also a copy of the state at the prefix's
 * end. 0 with no_prompt_cache. */
int eng_session_n_held(const struct eng_session *s);
/* Host bytes the session takes at most: its RAM tier, expert budget, KV
 * cache at every cell, logits rows and the largest step's scratch. */
uint64_t eng_session_host_need(const struct eng_session *s);
/* The memory check of opening again, with bytes more taken beside the
 * session (a draft model opened after it): an auto expert budget is
 * lowered to make room, else a refusal in one line says what does not fit
 * (as at opening). */
int eng_session_fit_beside(struct eng_session *s, uint64_t bytes, struct fl_err *err);
/* The smallest --ram-budget this placement allows (0: nothing on disk). */
uint64_t eng_session_min_budget(const struct eng_session *s);
int eng_session_n_batch(const struct eng_session *s);
/* Whether the session was opened with --check-tensors (a draft model
 * opened beside it is checked too). */
bool eng_session_checked_tensors(const struct eng_session *s);
/* The most bytes the forward pass's host scratch had live so far, and the
 * bytes its arena spans (at open, the bound the memory check counted;
 * more only if a pass needed more). */
size_t eng_session_scratch_high_water(const struct eng_session *s);
size_t eng_session_scratch_held(const struct eng_session *s);
/* Between passes, as llama-bench's -t and -b lists do between tests: a
 * pool of n threads in place of the current one (bound to NUMA nodes as at
 * open; on failure the old one stays), and the most tokens eng_session_eval
 * hands one forward call (the scratch grows as a larger batch needs). */
int eng_session_set_threads(struct eng_session *s, int n, struct fl_err *err);
void eng_session_set_batch(struct eng_session *s, int n_batch);
int eng_session_cells_free(const struct eng_session *s);
/* The session's KV cache (its types and rotations: model/kv-cache.h). */
struct eng_kv;
const struct eng_kv *eng_session_kv(const struct eng_session *s);

/* Sequence seq gets cells for positions 0 .. n_pos-1 (kv-cache.h's
 * eng_kv_seq_reserve: -ENOSPC when the cache is full), or gives all back. */
int eng_session_seq_reserve(struct eng_session *s, int seq, int n_pos, struct fl_err *err);
void eng_session_seq_free(struct eng_session *s, int seq);
/* Keeps seq's positions 0 .. n_pos-1 and gives back the blocks past them
 * (kv-cache.h's eng_kv_seq_truncate); not for a recurrent model's sequence,
 * whose state has seen the positions past n_pos. */
void eng_session_seq_truncate(struct eng_session *s, int seq, int n_pos);
/* The empty sequence dst reads src's first n_pos positions from the same
 * cells (kv-cache.h's eng_kv_seq_share: whole blocks). A recurrent model's
 * state cannot be cut back: src's must cover exactly n_pos positions
 * (else -EINVAL), and dst gets a copy of it (host and VRAM). */
int eng_session_seq_share(struct eng_session *s, int dst, int src, int n_pos, struct fl_err *err);
/* The empty sequence seq gets the first n_keep of n_file positions whose
 * bytes get reads (model/kv-cache.h's eng_kv_seq_load: a prompt-state
 * file's body; cells reserved here); for sequence 0 they become n_past.
 * -ENOTSUP with a GPU (its cache is in VRAM), -ENOSPC without the cells,
 * get's error; on failure seq holds nothing. */
int eng_session_seq_load(struct eng_session *s, int seq, int n_file, int n_keep, eng_kv_io_fn get,
                         void *arg, struct fl_err *err);
/* Whether the model keeps recurrent state (its prompt cache then holds
 * prefixes whole: app/prompt-cache.h). */
bool eng_session_recurrent(const struct eng_session *s);
/* A recurrent model's state of sequence seq, kept aside before a span that
 * may be taken back (speculative decoding's drafts) and put back after:
 * eng_session_rs_seq_floats of them (0: no recurrent state); restore makes
 * it cover n_pos positions (cut the cells with eng_session_seq_truncate or
 * eng_session_rewind after it). -ENOTSUP with a GPU (its state is in VRAM). */
size_t eng_session_rs_seq_floats(const struct eng_session *s);
int eng_session_rs_save(struct eng_session *s, int seq, float *buf);
int eng_session_rs_restore(struct eng_session *s, int seq, const float *buf, int n_pos);
/* Cells that freeing seq would give back (blocks no other sequence holds). */
int eng_session_seq_owned(const struct eng_session *s, int seq);
/* Cells eng_session_seq_reserve(seq, n_pos) would lack (0: it fits). */
int eng_session_seq_lacks(const struct eng_session *s, int seq, int n_pos);
/* One forward call over spans of several sequences, as given (eng_forward
 * checks it; keeping it near n_batch tokens is the caller's part, as the
 * scratch grows with the batch). A failed pager read names the tensor. */
int eng_session_forward(struct eng_session *s, const struct eng_batch *b, struct fl_err *err);

/* Where experts come from (NULL: resident) and who hears the routing (NULL:
 * nobody). The pointed-to structs must outlive their use. */
void eng_session_set_experts(struct eng_session *s, const struct eng_expert_source *src);
void eng_session_set_routing(struct eng_session *s, const struct eng_routing_sink *sink);

/* Evaluates n tokens at n_past..n_past+n-1 and advances n_past. logits gets
 * a row of n_vocab per token (all_logits) or the last token's row only.
 * -ENOSPC when the tokens do not fit the context; -EINVAL for a bad id;
 * the expert source's -errno. On error n_past is left unchanged. */
/* The pager behind the weights (statistics, errors). */
struct pager *eng_session_pager(const struct eng_session *s);
/* Bytes of weights whose host copy was given back after the first pass on
 * the device (only the GPU reads them; eng_gpu_options.host_copy_unused). */
uint64_t eng_session_host_released(const struct eng_session *s);
/* Whether any tensor is paged from disk (the disk tier is not empty). */
bool eng_session_paged(const struct eng_session *s);
/* The expert predictor between engine and pager; NULL when nothing is paged. */
struct fl_predictor *eng_session_predictor(const struct eng_session *s);
/* The GPU context (backend/cuda/gpu.h); NULL when everything runs on the CPU. */
struct eng_gpu *eng_session_gpu(const struct eng_session *s);
/* Prints/writes the statistics asked for in the params (--stats, --stats-json). */
int eng_session_report(struct eng_session *s, struct fl_err *err);

int eng_session_eval(struct eng_session *s, const int32_t *tokens, int n, bool all_logits,
                     float *logits, struct fl_err *err);

#endif
