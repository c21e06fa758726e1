/* session-flags.c: see app/cli/session-flags.h. */
#include "app/cli/session-flags.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "app/predict.h"
#include "backend/cuda/gpu.h"
#include "model/kv-cache.h"
#include "pager/pager.h"
#include "pager/policy.h"
#include "plan/numa.h"
#include "plan/placement.h"

static int parse_pager_mode(const char *v, int *out)
{
    static const struct { const char *name; enum pager_mode mode; } modes[] = {
        { "auto", PAGER_MODE_AUTO }, { "uffd", PAGER_MODE_UFFD }, { "explicit", PAGER_MODE_EXPLICIT },
    };
    for (size_t i = 0; v && i < sizeof(modes) / sizeof(modes[0]); i++)
        if (!strcmp(v, modes[i].name)) {
            *out = modes[i].mode;
            return 0;
        }
    return -EINVAL;
}

int eng_session_parse_flag(struct eng_session_params *p, int argc, char **argv, int *i,
                           struct fl_err *err)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int rc = placement_parse_flag(&p->placement, argc, argv, i, err);
    if (rc)
        return rc;
    if (!strcmp(a, "--stats")) {
        p->stats = true;
        return 1;
    }
    if (!strcmp(a, "--no-repack")) {
        p->no_repack = true;
        return 1;
    }
    if (!strcmp(a, "-nkvo") || !strcmp(a, "--no-kv-offload") || !strcmp(a, "-kvo") ||
        !strcmp(a, "--kv-offload")) {
        p->no_kv_offload = !strcmp(a, "-nkvo") || !strcmp(a, "--no-kv-offload");
        return 1;
    }
    if (!strcmp(a, "--force")) {
        p->force = true;
        return 1;
    }
    if (!strcmp(a, "--stats-json")) {
        if (!v)
            return fl_err_set(err, -EINVAL, "--stats-json needs a file name");
        p->stats_json = v;
    } else if (!strcmp(a, "--pager")) {
        if (parse_pager_mode(v, &p->pager_mode))
            return fl_err_set(err, -EINVAL, "--pager: expected auto, uffd or explicit, got '%s'",
                              v ? v : "");
    } else if (!strcmp(a, "--prefetch")) {
        if ((rc = fl_predict_parse(v, &p->predict, err)))
            return rc;
    } else if (!strcmp(a, "--cache")) {
        enum pager_cache c;
        if ((rc = pager_cache_parse(v, &c, &p->hot_profile, err)))
            return rc;
        p->cache = c;
    } else if (!strcmp(a, "--calibrate")) {
        if (!v)
            return fl_err_set(err, -EINVAL, "--calibrate needs a prompt file");
        p->calibrate = v;
    } else if (!strcmp(a, "--gpu-experts")) {
        enum eng_gpu_experts m;
        if (eng_gpu_experts_parse(v, &m))
            return fl_err_set(err, -EINVAL, "--gpu-experts: expected copy, unified or cpu, got '%s'",
                              v ? v : "");
        p->gpu_experts = m;
        p->gpu_flags = true;
    } else if (!strcmp(a, "--offload-min-batch")) {
        char *end = NULL;
        long n = v ? strtol(v, &end, 10) : 0;
        if (!v || end == v || *end || n < 1 || n > 1000000)
            return fl_err_set(err, -EINVAL, "--offload-min-batch: expected a token count of 1 or "
                              "more, got '%s'", v ? v : "");
        p->offload_min_batch = (int)n;
        p->gpu_flags = true;
    } else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k") || !strcmp(a, "-ctv") ||
               !strcmp(a, "--cache-type-v")) {
        const bool k = !strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k");
        if (v && strchr(v, ','))
            return fl_err_set(err, -EINVAL, "%s %s: one type per run here (llama-bench's lists: "
                              "run once per type)", a, v);
        struct fl_err why;
        if ((rc = eng_kv_type_parse(v, k ? &p->cache_type_k : &p->cache_type_v, &why)))
            return fl_err_set(err, rc, "%s: %s", a, why.msg);
    } else if (!strcmp(a, "--override-kv")) {
        if (!v)
            return fl_err_set(err, -EINVAL, "--override-kv needs KEY=TYPE:VALUE[,...]");
        if (p->n_kv_overrides == ENG_KV_OVERRIDES_MAX)
            return fl_err_set(err, -EINVAL, "--override-kv: at most %d flags (each may list "
                              "several, comma-separated)", ENG_KV_OVERRIDES_MAX);
        p->kv_overrides[p->n_kv_overrides++] = v;
    } else if (!strcmp(a, "--numa")) {
        if (!v || fl_numa_parse(v, &p->numa))
            return fl_err_set(err, -EINVAL,
                              "--numa: expected distribute, isolate, gpu-local or off, got '%s'",
                              v ? v : "");
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

void eng_session_print_usage(FILE *out)
{
    placement_print_usage(out);
    fprintf(out,
        "paging:\n"
        "  --pager auto|uffd|explicit  userfaultfd faults, or reads only where the engine asks\n"
        "  --stats                     per-expert paging table at the end\n"
        "  --stats-json FILE           all paging statistics as JSON (checked before the work,\n"
        "                              written whole at the end, also after Ctrl-C)\n"
        "  --force                     outputs may replace an existing GGUF file\n"
        "  --prefetch none|router|lookahead[:D]|history[:W]\n"
        "                              what to read ahead (docs/prefetch.md; default lookahead:1)\n"
        "  --cache lru|lfu-decay|lfu-step|lfu-next|pinned-hot[:STATS.json]\n"
        "                              which expert to evict (default lfu-next); the VRAM\n"
        "                              expert cache follows: lru, else lfu-next\n"
        "  --calibrate PROMPTS.txt     pinned-hot's profile from a pass over these prompts\n"
        "  --numa distribute|isolate|gpu-local|off\n"
        "  --verbose                   say where things go\n"
        "  --no-repack                 keep RAM-tier weights in the file's layout (default:\n"
        "                              Q4_K rebuilt for AVX-512 VNNI kernels; same results)\n"
        "  -ctk, --cache-type-k TYPE   the KV cache's K as f16 (default), q8_0, q4_0, q4_1,\n"
        "  -ctv, --cache-type-v TYPE   q5_0, q5_1 or iq4_nl, as llama.cpp's (q8_0: 53 %% of the\n"
        "                              bytes; with a GPU, attention then runs on the CPU)\n"
        "  -nkvo, --no-kv-offload      with a GPU, keep the KV cache in RAM (attention on the CPU,\n"
        "                              its VRAM left to weights and experts); -kvo: the default\n"
        "  --override-kv KEY=TYPE:VALUE[,...]  the file's metadata overridden, as llama.cpp's\n"
        "                              (TYPE int, float, bool or str), e.g. fewer experts per\n"
        "                              token: qwen3moe.expert_used_count=int:6 (fewer bytes read,\n"
        "                              other answers)\n"
        "gpu:\n"
        "  --gpu-experts copy|unified|cpu  host experts on the GPU through a VRAM cache (copy,\n"
        "                              default), managed memory (unified), or on the CPU (cpu)\n"
        "  --offload-min-batch N       batches of N+ tokens bring host experts to the GPU in\n"
        "                              every mode (default 32)\n");
}
