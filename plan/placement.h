/* placement.h: which tier each tensor lives in — gpu (VRAM), ram (read up
 * front, resident) or disk (paged on demand under the RAM budget).
 *
 * Rules are PCRE2 regexes searched in tensor names, first match wins, as
 * llama.cpp's --override-tensor. The llama.cpp-style flags (--cpu-moe,
 * --n-cpu-moe N, -ot, -ngl) and faultline's own (--disk-moe, --n-disk-moe N,
 * --regex-offload) all become rules, in this order of precedence:
 *   1. -ot/--override-tensor rules, in command-line order
 *   2. --n-disk-moe N  (experts of layers < N on disk)
 *   3. --n-cpu-moe N   (experts of layers < N in RAM)
 *   4. --disk-moe / --cpu-moe (all experts; the later flag wins)
 *   5. --regex-offload REGEX (matching tensors on the GPU, others on the host)
 *   6. -ngl N (the last N layers, output counted as one, on the GPU)
 *   7. defaults: experts paged from disk when the file does not fit the RAM
 *      budget, resident when it does; every other tensor on the GPU when one
 *      is present, else in RAM.
 * So `--cpu-moe --n-disk-moe 10` pages the experts of layers 0-9 and keeps
 * the others resident. Without a GPU, every gpu decision falls back to ram
 * (the plan carries one warning saying so). */
#ifndef FL_PLACEMENT_H
#define FL_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"

struct gguf_file;

enum pl_tier { PL_TIER_GPU = 0, PL_TIER_RAM = 1, PL_TIER_DISK = 2, PL_TIER_COUNT };

/* What the user asked for; zero-initialise, then fill from flags. */
struct placement_options {
    const char *overrides[32];   /* -ot values, each "REGEX=TIER[,REGEX=TIER...]" */
    int n_overrides;
    const char *regex_offload;   /* --regex-offload */
    bool cpu_moe, disk_moe;      /* --cpu-moe, --disk-moe (last_all_moe says which came last) */
    enum pl_tier last_all_moe;
    int n_cpu_moe, n_disk_moe;   /* --n-cpu-moe N, --n-disk-moe N */
    int n_gpu_layers;            /* -ngl N; -1 = all (the default when a GPU is present) */
    uint64_t ram_budget;         /* --ram-budget; 0 = auto */
    uint64_t vram_budget;        /* --vram-budget; 0 = what the GPU has */
    bool verbose;
};

void placement_options_init(struct placement_options *o);

/* Consumes one placement flag at argv[*i] (and its value). Returns 1 when it
 * took the flag (advancing *i past its value), 0 when the flag is not a
 * placement flag, -EINVAL (with err) for a malformed value. */
int placement_parse_flag(struct placement_options *o, int argc, char **argv, int *i,
                         struct fl_err *err);
/* One paragraph describing the flags, for --help. */
void placement_print_usage(FILE *out);

/* Hardware the plan is made for. */
struct placement_host {
    bool have_gpu;
    uint64_t ram_available;      /* bytes the RAM tier and the page budget may use */
    /* Non-zero when ram_available is what a memory cgroup with this limit
     * leaves (a container, a systemd unit): crossing it gets the process
     * killed, so a plan that does not fit it is refused. */
    uint64_t ram_cgroup_limit;
    uint64_t vram_available;
};

/* This machine: MemAvailable, or less where a memory cgroup leaves less
 * (base/host-memory.h); no GPU unless the CUDA backend is built and finds a
 * device. */
void placement_host_detect(struct placement_host *host);

struct placement_plan;

int placement_plan_build(const struct gguf_file *f, const struct placement_options *o,
                         const struct placement_host *host, struct placement_plan **out,
                         struct fl_err *err);
void placement_plan_free(struct placement_plan *p);

enum pl_tier placement_tier(const struct placement_plan *p, int64_t tensor_index);
/* The rule that decided the tensor's tier, e.g. "-ot exps=CPU" or "default: expert, file > budget". */
const char *placement_reason(const struct placement_plan *p, int64_t tensor_index);
uint64_t placement_tier_bytes(const struct placement_plan *p, enum pl_tier t);
uint64_t placement_ram_budget(const struct placement_plan *p); /* resolved (auto → a number) */
/* Bytes the paged tier needs resident at once: the largest layer's n_expert_used
 * experts (all paged tensors of an expert); 0 when nothing is paged. */
uint64_t placement_min_budget(const struct placement_plan *p);
/* NULL, or the one-line warning the plan carries (e.g. gpu → ram without a GPU). */
const char *placement_warning(const struct placement_plan *p);
/* Whether the plan fits the host; when not, why holds one line. */
bool placement_fits(const struct placement_plan *p, const char **why);

enum placement_misfit {
    PL_FITS,
    PL_BUDGET_BELOW_MIN,   /* the paged tier's budget cannot hold one layer's experts */
    PL_OVER_RAM,           /* RAM tier + budget + staging exceed the memory available */
    PL_OVER_CGROUP,        /* ... exceed what the memory cgroup's limit leaves */
    PL_OVER_VRAM,          /* the GPU tier exceeds the VRAM */
};
/* What does not fit (the first of the above that applies); why as for
 * placement_fits. */
enum placement_misfit placement_misfit(const struct placement_plan *p, const char **why);
/* Whether the plan still fits the memory available with `extra` more bytes
 * beside it (the KV cache and the pass's scratch, sized after the plan is
 * made): PL_FITS, PL_OVER_RAM or PL_OVER_CGROUP; when not PL_FITS, why
 * (why_len bytes) gets one line that starts with `what` (a plural: "what
 * need N beside ..."). */
enum placement_misfit placement_misfit_with(const struct placement_plan *p, uint64_t extra,
                                            const char *what, char *why, size_t why_len);

/* With no --ram-budget, the budget lowered so that `extra` more bytes (the
 * KV cache and the pass's scratch) fit beside the plan with a twentieth of
 * the memory available left for the rest of the process (the auto rule's
 * fifth may be too little for a long context). false, and nothing changed,
 * when the budget is the user's, nothing is paged, or it would fall below
 * the minimum. */
bool placement_fit_auto_budget(struct placement_plan *p, uint64_t extra);
/* The memory available beyond the plan (RAM tier, expert budget, staging):
 * what a KV cache and scratch may take without lowering the budget; 0 when
 * the plan is over, UINT64_MAX when the memory available is not known. */
uint64_t placement_ram_room(const struct placement_plan *p);

/* The human report of `faultline inspect --plan`; verbose lists every tensor. */
void placement_print(const struct placement_plan *p, const struct gguf_file *f, FILE *out,
                     bool verbose);

const char *placement_tier_name(enum pl_tier t);
/* "gpu"/"ram"/"disk" and llama.cpp's buffer names ("CPU" → ram, "CUDA0" → gpu). */
int placement_tier_parse(const char *name, enum pl_tier *out);


#endif
