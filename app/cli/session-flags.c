/* session-flags.c: see app/cli/session-flags.h. */
#include "app/cli/session-flags.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stddef.h>
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

static int rope_number(const char *a, const char *v, float *out, struct fl_err *err)
{
    char *end = NULL;
    float x = v ? strtof(v, &end) : 0.0f;
    if (!v || end == v || *end || !isfinite(x))
        return fl_err_set(err, -EINVAL, "%s: expected a number, got '%s'", a, v ? v : "");
    *out = x;
    return 0;
}

/* llama.cpp's rope flags (common/arg.cpp), with its "unset" values: 0 for
 * the base, the scale and the original context, negative for the YaRN
 * factors and betas. 1: taken, 0: not a rope flag, < 0: bad value. */
static int parse_rope_flag(struct yarn_context *r, const char *a, const char *v,
                           struct fl_err *err)
{
    static const struct { const char *flag; unsigned bit; size_t off; } yarn[] = {
        { "--yarn-ext-factor", YARN_SET_EXT_FACTOR, offsetof(struct yarn_context, ext_factor) },
        { "--yarn-attn-factor", YARN_SET_ATTN_FACTOR, offsetof(struct yarn_context, attn_factor) },
        { "--yarn-beta-fast", YARN_SET_BETA_FAST, offsetof(struct yarn_context, beta_fast) },
        { "--yarn-beta-slow", YARN_SET_BETA_SLOW, offsetof(struct yarn_context, beta_slow) },
    };
    float x = 0.0f;
    if (!strcmp(a, "--rope-scaling")) {
        if (!v || yarn_scaling_parse(v, &r->scaling) < 0)
            return fl_err_set(err, -EINVAL, "--rope-scaling: expected none, linear or yarn, got "
                              "'%s'", v ? v : "");
        return 1;
    }
    for (size_t k = 0; k < sizeof(yarn) / sizeof(yarn[0]); k++)
        if (!strcmp(a, yarn[k].flag)) {
            if (rope_number(a, v, &x, err))
                return -EINVAL;
            *(float *)((char *)r + yarn[k].off) = x;
            r->set = x < 0 ? r->set & ~yarn[k].bit : r->set | yarn[k].bit;
            return 1;
        }
    const bool scale = !strcmp(a, "--rope-scale"), fscale = !strcmp(a, "--rope-freq-scale");
    const bool base = !strcmp(a, "--rope-freq-base"), orig = !strcmp(a, "--yarn-orig-ctx");
    if (!scale && !fscale && !base && !orig)
        return 0;
    if (rope_number(a, v, &x, err))
        return -EINVAL;
    if (x < 0 || (scale && x == 0) || (orig && (x != floorf(x) || x > INT32_MAX)))
        return fl_err_set(err, -EINVAL, "%s: expected a %s, got '%s'", a,
                          orig ? "context length (0: the model's)"
                          : scale ? "factor above 0" : "number of 0 (the model's) or more", v);
    const unsigned bit = base ? YARN_SET_FREQ_BASE : orig ? YARN_SET_ORIG_CTX : YARN_SET_FREQ_SCALE;
    r->set = x == 0 ? r->set & ~bit : r->set | bit;
    if (base)
        r->freq_base = x;
    else if (orig)
        r->n_ctx_orig = (int)x;
    else
        r->freq_scale = scale ? 1.0f / x : x;
    return 1;
}

int eng_session_parse_flag(struct eng_session_params *p, int argc, char **argv, int *i,
                           struct fl_err *err)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int rc = placement_parse_flag(&p->placement, argc, argv, i, err);
    if (rc)
        return rc;
    if ((rc = parse_rope_flag(&p->rope, a, v, err)) != 0) {
        if (rc > 0)
            (*i)++;
        return rc;
    }
    if (!strcmp(a, "--stats")) {
        p->stats = true;
        return 1;
    }
    if (!strcmp(a, "--no-repack")) {
        p->no_repack = true;
        return 1;
    }
    if (!strcmp(a, "--check-tensors")) {
        p->check_tensors = true;
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
        "  --check-tensors             read every tensor first and refuse NaN or infinite\n"
        "                              values or scales (llama.cpp's check)\n"
        "  -ctk, --cache-type-k TYPE   the KV cache's K as f16 (default), q8_0, q4_0, q4_1,\n"
        "  -ctv, --cache-type-v TYPE   q5_0, q5_1 or iq4_nl, as llama.cpp's (q8_0: 53 %% of the\n"
        "                              bytes; with a GPU, attention then runs on the CPU)\n"
        "  -nkvo, --no-kv-offload      with a GPU, keep the KV cache in RAM (attention on the CPU,\n"
        "                              its VRAM left to weights and experts); -kvo: the default\n"
        "  --override-kv KEY=TYPE:VALUE[,...]  the file's metadata overridden, as llama.cpp's\n"
        "                              (TYPE int, float, bool or str), e.g. fewer experts per\n"
        "                              token: qwen3moe.expert_used_count=int:6 (fewer bytes read,\n"
        "                              other answers)\n"
        "rope (llama.cpp's; default: the file's):\n"
        "  --rope-scaling none|linear|yarn   how positions beyond the trained context scale\n"
        "  --rope-scale N              context expanded N times (--rope-freq-scale 1/N)\n"
        "  --rope-freq-base N          RoPE base frequency (NTK-aware scaling)\n"
        "  --rope-freq-scale N         position scale\n"
        "  --yarn-orig-ctx N           YaRN: the context the model was trained on\n"
        "  --yarn-ext-factor N, --yarn-attn-factor N, --yarn-beta-fast N, --yarn-beta-slow N\n"
        "                              YaRN's mix, magnitude and correction dims (negative:\n"
        "                              the default), e.g. Qwen3 at 128K: --rope-scaling yarn\n"
        "                              --rope-scale 4 --yarn-orig-ctx 32768 -c 131072\n"
        "gpu:\n"
        "  --gpu-experts copy|unified|cpu  host experts on the GPU through a VRAM cache (copy,\n"
        "                              default), managed memory (unified), or on the CPU (cpu)\n"
        "  --offload-min-batch N       batches of N+ tokens bring host experts to the GPU in\n"
        "                              every mode (default 32)\n");
}
