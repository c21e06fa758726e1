/* test-gpu-engine: the forward pass with the GPU against the CPU, on every
 * model in tests/data (needs a CUDA device; exit 77 without one).
 *
 * For each model, the CPU session (zeroed params: no GPU at all) and GPU
 * sessions (-ngl all, each --gpu-experts mode; --offload-min-batch 4 so the
 * prompt takes the prefill path in cpu mode too; one with experts paged
 * from disk under a small RAM budget) evaluate the same prompt, all logits
 * kept, and the routing of every MoE layer is recorded. Checks: mean
 * KL(cpu || gpu) <= 1e-3 for F16/Q8_0 weights (Q4_K/MXFP4: 1e-2, their CPU
 * path quantizes activations more coarsely), at least 90 % of the
 * (position, layer) expert sets identical (near-ties may flip), and that
 * the GPU did run something (matmuls or MoE layers were sent to it). Every
 * model must take the device pass (activations, KV cache and attention in
 * VRAM: the llama family, deepseek2's MLA, gpt-oss's sinks and biases): a
 * variant feeds the prompt as a 4-token batch and then token by token, so
 * decode steps read the device KV cache that earlier batches wrote. Outside
 * --gpu-experts cpu no MoE layer may fall back to the CPU (gpt-oss's biased
 * SwiGLU-OAI experts included). With experts paged from disk, decode steps
 * must skip the pager's read-ahead of experts the VRAM cache holds (some
 * model must show it; test-pager-pin checks the rule itself). After the
 * first pass on the device, the host copies of VRAM-only matrices are given
 * back (inaccessible: the passes after it would fault on a host read). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/gpu.h"
#include "gen/model-gen.h"
#include "gguf/tensor-types.h"
#include "pager/pager.h"
#include "record/flref.h"
#include "app/session.h"
#include "tests/check.h"
#include "model/arch.h"

static const int32_t prompt[] = { 464, 649, 636, 481, 670, 351, 477, 286, 606, 11, 523, 326 };
#define NP ((int)(sizeof(prompt) / sizeof(prompt[0])))
#define MAX_LAYERS 64
#define MAX_K 16

struct routing {
    int n_layer, k;
    int32_t ids[MAX_LAYERS][NP][MAX_K]; /* sorted per (layer, position) */
};

static void record(void *ctx, int layer, const struct eng_batch *b, int k, const int32_t *ids,
                   const float *w)
{
    struct routing *r = ctx;
    (void)w;
    if (layer >= MAX_LAYERS || k > MAX_K)
        return;
    if (layer + 1 > r->n_layer)
        r->n_layer = layer + 1;
    r->k = k;
    for (int t = 0; t < b->n_tok && b->pos[t] < NP; t++) {
        int32_t *s = r->ids[layer][b->pos[t]];
        memcpy(s, ids + t * k, sizeof(int32_t) * (size_t)k);
        for (int i = 1; i < k; i++) /* sets, not orders: insertion sort */
            for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
                int32_t x = s[j];
                s[j] = s[j - 1];
                s[j - 1] = x;
            }
    }
}

/* Bytes of host copies the last session gave back after its first device pass. */
static uint64_t last_released;

static float *eval(struct eng_session_params *p, struct routing *r, int64_t *n_vocab,
                   uint64_t *gpu_ops, uint64_t *passes, uint64_t *moe_cpu, uint64_t *skips,
                   int split)
{
    struct eng_session *s;
    struct fl_err err = { { 0 } };
    if (eng_session_open(p, &s, &err)) {
        CHECK(0, "open %s: %s", p->model_path, err.msg);
        return NULL;
    }
    struct eng_routing_sink sink = { .ctx = r, .record = record };
    memset(r, 0, sizeof(*r));
    eng_session_set_routing(s, &sink);
    *n_vocab = eng_session_model(s)->hp.n_vocab;
    float *l = malloc(sizeof(float) * (size_t)(*n_vocab * NP));
    int rc = split ? eng_session_eval(s, prompt, split, true, l, &err)
                   : eng_session_eval(s, prompt, NP, true, l, &err);
    for (int t = split; split && t < NP && !rc; t++) /* then one token per pass */
        rc = eng_session_eval(s, prompt + t, 1, true, l + (size_t)t * (size_t)*n_vocab, &err);
    CHECK(rc == 0, "eval %s: %s", p->model_path, err.msg);
    *gpu_ops = eng_gpu_ops(eng_session_gpu(s));
    *passes = eng_gpu_passes(eng_session_gpu(s));
    *moe_cpu = eng_gpu_moe_on_cpu(eng_session_gpu(s));
    struct pager_totals t;
    pager_stats_totals(eng_session_pager(s), &t);
    *skips = t.prefetch_skips;
    last_released = eng_session_host_released(s);
    eng_session_close(s);
    if (rc) {
        free(l);
        return NULL;
    }
    return l;
}

/* A small F16 model of arch (3 layers, 8 experts, top 2) at path; groups:
 * deepseek2 with 4 expert groups of which 2 may be chosen (routed on the host). */
static bool generate(enum gen_arch arch, int groups, const char *path)
{
    struct gen_params g = { .arch = arch, .type = FL_TYPE_F16, .seed = 7, .skew = -1,
                            .n_embd = 128, .n_layer = 3, .n_expert = 8, .n_expert_used = 2,
                            .n_ff_exp = 128, .n_head = 4 };
    if (arch == GEN_ARCH_GPT_OSS)
        g.n_head_kv = 2, g.head_dim = 32;
    else if (arch == GEN_ARCH_DEEPSEEK2)
        g.n_expert_shared = 1, g.n_layer_dense = 1, g.n_ff = 192;
    else /* qwen3moe: 16 experts, 8 per token */
        g.n_head_kv = 2, g.head_dim = 32, g.n_expert = 16, g.n_expert_used = 8;
    g.n_expert_groups = groups;
    g.n_expert_groups_used = groups / 2;
    struct fl_err err = { { 0 } };
    int rc = gen_resolve(&g, &err);
    if (!rc)
        rc = gen_write(&g, path, NULL, NULL, &err);
    CHECK(rc == 0, "generating %s: %s", path, err.msg);
    return rc == 0;
}

static double routing_agreement(const struct routing *a, const struct routing *b);

/* Decode steps whose 8 experts miss a cache of a few slots and come from
 * disk (not page-locked: each is staged through one of 4 pinned buffers
 * before its copy): a staging buffer refilled before its copy ran, or a
 * kernel not waiting for its slot's fill, changes the logits (the emulated
 * device defers such copies until something waits for them). */
/* A GPU session of path: -ngl all, --gpu-experts `experts`, the test's context and threads. */
static void gpu_params(struct eng_session_params *p, const char *path, int experts)
{
    eng_session_params_init(p);
    p->model_path = path;
    p->n_ctx = 64;
    p->n_threads = 2;
    p->placement.n_gpu_layers = -1;
    p->gpu_experts = experts;
}

/* Mean KL(ref || got) over the NP positions of n_vocab logits each. */
static double mean_kl(const float *ref, const float *got, int64_t nv)
{
    double kl = 0.0;
    for (int t = 0; t < NP; t++)
        kl += flref_kl(ref + t * nv, got + t * nv, nv);
    return kl / NP;
}

static void test_staged_decode(const char *path)
{
    struct eng_session_params cpu = { .model_path = path, .n_ctx = 64, .n_threads = 2 };
    static struct routing rc, rg;
    int64_t nv = 0, nv2 = 0;
    uint64_t ops = 0, passes = 0, moe_cpu = 0, skips = 0;
    float *ref = eval(&cpu, &rc, &nv, &ops, &passes, &moe_cpu, &skips, 0);
    struct eng_session_params p;
    gpu_params(&p, path, ENG_GPU_EXPERTS_COPY);
    p.placement.ram_budget = 2 << 20;
    p.placement.vram_budget = 2 << 20;
    p.pager_mode = 2; /* explicit */
    float *got = ref ? eval(&p, &rg, &nv2, &ops, &passes, &moe_cpu, &skips, 4) : NULL;
    if (got) {
        const double kl = mean_kl(ref, got, nv);
        printf("%-28s %-20s mean KL %.3g, routing %.1f%% identical\n", "qwen3moe-16x8-F16",
               "staged decode", kl, 100.0 * routing_agreement(&rc, &rg));
        CHECK(passes > 0 && moe_cpu == 0 && kl <= 5e-5, "staged decode: KL %.3g, %llu passes, "
              "%llu MoE layers on the CPU", kl, (unsigned long long)passes,
              (unsigned long long)moe_cpu);
    }
    free(ref);
    free(got);
}

static double routing_agreement(const struct routing *a, const struct routing *b)
{
    if (a->n_layer != b->n_layer || a->k != b->k)
        return 0.0;
    int same = 0, n = 0;
    for (int l = 0; l < a->n_layer; l++)
        for (int t = 0; t < NP; t++, n++)
            same += !memcmp(a->ids[l][t], b->ids[l][t], sizeof(int32_t) * (size_t)a->k);
    return n ? (double)same / n : 1.0;
}

struct variant {
    const char *name;
    int experts;          /* enum eng_gpu_experts */
    int min_batch;
    bool paged;           /* experts from disk under a small RAM budget */
    int split;            /* 0: the prompt in one batch; n: n tokens, then one at a time */
    bool vram;            /* -ot exps=gpu: the experts too live in VRAM */
};

/* The CLI's --stats on the device: what ran where and the per-expert
 * host->GPU copy latency of the expert cache (issue 6's acceptance). */
static void test_cli_stats(void)
{
    const char *cli = getenv("FL_CLI") ? getenv("FL_CLI") : "build/faultline";
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "%s run -m tests/data/qwen3moe-tiny-F16.gguf -p 'The quick brown' "
             "-n 4 -t 2 -ngl all --gpu-experts copy --stats 2>&1 >/dev/null", cli);
    FILE *f = popen(cmd, "r");
    char line[4096];
    bool where = false, latency = false;
    while (f && fgets(line, sizeof(line), f)) {
        where |= strstr(line, "passes wholly on the GPU") && strstr(line, "through the expert cache");
        latency |= strstr(line, "gpu expert cache (copy)") && strstr(line, "per expert") &&
                   strstr(line, "us mean");
    }
    const int rc = f ? pclose(f) : -1;
    CHECK(rc == 0 && where && latency, "%s: exit %d, what-ran-where line %s, copy latency line %s",
          cmd, rc, where ? "seen" : "missing", latency ? "seen" : "missing");
}

/* Prefetches the pager skipped in the paged decode variants: experts the
 * VRAM cache held (a model whose experts stay resident in RAM skips none). */
static uint64_t paged_skips;

static void test_model(const char *path, double max_kl)
{
    const char *file = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    struct eng_session_params cpu = { .model_path = path, .n_ctx = 64, .n_threads = 2 };
    static struct routing rc, rg;
    int64_t nv = 0, nv2 = 0;
    uint64_t ops = 0, passes = 0, moe_cpu = 0, skips = 0;
    float *ref = eval(&cpu, &rc, &nv, &ops, &passes, &moe_cpu, &skips, 0);
    if (!ref)
        return;
    CHECK(ops == 0, "%s: zeroed params keep the CPU session off the GPU", file);
    static const struct variant vs[] = {
        { "copy", ENG_GPU_EXPERTS_COPY, 0, false, 0, false },
        { "unified", ENG_GPU_EXPERTS_UNIFIED, 0, false, 0, false },
        { "cpu", ENG_GPU_EXPERTS_CPU, 0, false, 0, false },
        { "cpu, min batch 4", ENG_GPU_EXPERTS_CPU, 4, false, 0, false },
        { "copy, paged", ENG_GPU_EXPERTS_COPY, 0, true, 0, false },
        { "copy, 4 then 1 by 1", ENG_GPU_EXPERTS_COPY, 0, false, 4, false },
        { "copy, paged, 4 then 1", ENG_GPU_EXPERTS_COPY, 0, true, 4, false },
        { "cpu, 4 then 1 by 1", ENG_GPU_EXPERTS_CPU, 0, false, 4, false },
        { "vram, 4 then 1 by 1", ENG_GPU_EXPERTS_COPY, 0, false, 4, true },
    };
    for (size_t v = 0; v < sizeof(vs) / sizeof(vs[0]); v++) {
        struct eng_session_params p;
        gpu_params(&p, path, vs[v].experts);
        p.offload_min_batch = vs[v].min_batch;
        if (vs[v].vram) {
            p.placement.overrides[0] = "exps=gpu";
            p.placement.n_overrides = 1;
        }
        if (vs[v].paged) {
            p.placement.ram_budget = 1 << 20;
            p.pager_mode = 2; /* explicit: no userfaultfd rights needed */
        }
        float *got = eval(&p, &rg, &nv2, &ops, &passes, &moe_cpu, &skips, vs[v].split);
        if (!got)
            continue;
        CHECK(ops > 0 && nv2 == nv, "%s (%s): nothing ran on the GPU", file, vs[v].name);
        CHECK(passes > 0, "%s (%s): no pass on the device", file, vs[v].name);
        /* the later passes ran with them gone: a host read would have faulted */
        CHECK(last_released > 0, "%s (%s): no host copy given back", file, vs[v].name);
        CHECK(vs[v].experts == ENG_GPU_EXPERTS_CPU || moe_cpu == 0,
              "%s (%s): %llu MoE layers on the CPU", file, vs[v].name, (unsigned long long)moe_cpu);
        if (vs[v].paged && vs[v].split)
            paged_skips += skips;
        const double kl = mean_kl(ref, got, nv);
        const double agree = routing_agreement(&rc, &rg);
        printf("%-28s %-20s mean KL %.3g, routing %.1f%% identical, %llu GPU ops, %llu device "
               "passes\n", file, vs[v].name, kl, 100.0 * agree, (unsigned long long)ops,
               (unsigned long long)passes);
        CHECK(kl <= max_kl, "%s (%s): mean KL %.3g > %.3g", file, vs[v].name, kl, max_kl);
        CHECK(agree >= 0.9, "%s (%s): routing %.1f%% identical", file, vs[v].name, 100 * agree);
        free(got);
    }
    free(ref);
}

int main(void)
{
    const char *src = getenv("FL_SOURCE_DIR");
    if (src && chdir(src) != 0) {
        printf("cannot enter %s\n", src);
        return 1;
    }
    uint64_t vram = 0;
    const char *why = NULL;
    if (!eng_gpu_detect(&vram, &why)) {
        printf("skipped: no CUDA device (%s)\n", why);
        return 77;
    }
    test_cli_stats();
    test_model("tests/data/qwen3moe-tiny-F16.gguf", 1e-3);
    test_model("tests/data/qwen3moe-tiny-Q8_0.gguf", 1e-3);
    test_model("tests/data/deepseek2-tiny-F16.gguf", 1e-3);
    test_model("tests/data/mixtral-tiny-Q4_K_M.gguf", 1e-2);
    test_model("tests/data/gpt-oss-tiny-MXFP4.gguf", 1e-2);
    /* the 2026 families: biased routing with shared experts and partial
     * RoPE, QK norm over all heads, Gated DeltaNet's state in VRAM */
    test_model("tests/data/glm4moe-tiny-F16.gguf", 1e-3);
    test_model("tests/data/minimax-m2-tiny-F16.gguf", 1e-3);
    test_model("tests/data/qwen35moe-tiny-F16.gguf", 1e-3);
    test_model("tests/data/qwen3next-ssm-in-tiny-F16.gguf", 1e-3); /* grouped key heads */
    /* the device multiplies Q8_0 by float activations (the CPU quantizes
     * them, as llama.cpp's CPU backend): 4 % of this file's expert choices
     * are near-ties that flip, as in the Q4_K_M and MXFP4 files */
    test_model("tests/data/qwen35moe-tiny-Q8_0.gguf", 1e-2);
    /* F16 weights of the two architectures with biases (gpt-oss: q/k/v/o,
     * router and expert biases; deepseek2: the selection bias): close to the
     * CPU, so a bias or slice the device pass gets wrong shows in the KL */
    char dir[] = "/tmp/fl-gpu-engine-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp: %s", strerror(errno));
        return check_summary("test-gpu-engine");
    }
    static const struct { enum gen_arch arch; int groups; const char *name; } gen[] = {
        { GEN_ARCH_GPT_OSS, 0, "gpt-oss-F16.gguf" },
        { GEN_ARCH_DEEPSEEK2, 0, "deepseek2-F16.gguf" },
        { GEN_ARCH_DEEPSEEK2, 4, "deepseek2-groups-F16.gguf" },
    };
    for (size_t i = 0; i < sizeof(gen) / sizeof(gen[0]); i++) {
        char path[96];
        snprintf(path, sizeof(path), "%s/%s", dir, gen[i].name);
        if (generate(gen[i].arch, gen[i].groups, path))
            test_model(path, 5e-5);
        unlink(path);
    }
    char staged[96];
    snprintf(staged, sizeof(staged), "%s/qwen3moe-16x8-F16.gguf", dir);
    if (generate(GEN_ARCH_QWEN3MOE, 0, staged))
        test_staged_decode(staged);
    unlink(staged);
    rmdir(dir);
    CHECK(paged_skips > 0, "paged decode steps read ahead experts the VRAM cache held");
    printf("paged decode: %llu read-aheads of experts held in VRAM skipped\n",
           (unsigned long long)paged_skips);
    return check_summary("test-gpu-engine");
}
