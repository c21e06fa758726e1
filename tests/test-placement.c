/* Placement rules on a real file (qwen3moe-tiny: 2 layers, 16 experts, top-4):
 * each flag's documented effect, the precedence between them, the minimum
 * budget derived from tensor sizes, and malformed flags. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "pager/pager.h"
#include "plan/placement.h"
#include "tests/check.h"

#define MODEL "tests/data/qwen3moe-tiny-F16.gguf"
#define GIB (1024ull * 1024 * 1024)
#define MIB (1024ull * 1024)

static struct gguf_file *model;

static struct placement_plan *plan_on(const char *const *args, int n,
                                      const struct placement_host *host)
{
    struct placement_options o;
    struct fl_err err = { "" };
    placement_options_init(&o);
    char *argv[32];
    for (int i = 0; i < n; i++)
        argv[i] = (char *)args[i];
    for (int i = 0; i < n; i++) {
        int rc = placement_parse_flag(&o, n, argv, &i, &err);
        CHECK(rc == 1, "flag %s not taken (%d: %s)", args[i], rc, err.msg);
    }
    struct placement_plan *p = NULL;
    int rc = placement_plan_build(model, &o, host, &p, &err);
    CHECK(rc == 0, "plan build failed: %s", err.msg);
    return p;
}

static struct placement_plan *plan_for(const char *const *args, int n, bool gpu)
{
    struct placement_host host = { .have_gpu = gpu, .ram_available = 24 * GIB,
                                   .vram_available = gpu ? 80 * GIB : 0 };
    return plan_on(args, n, &host);
}

static enum pl_tier tier_of(const struct placement_plan *p, const char *name)
{
    for (int64_t i = 0; i < gguf_n_tensors(model); i++)
        if (!strcmp(gguf_tensor(model, i)->name, name))
            return placement_tier(p, i);
    printf("FAIL no tensor %s\n", name);
    failures++;
    return PL_TIER_COUNT;
}

static const char *reason_of(const struct placement_plan *p, const char *name)
{
    for (int64_t i = 0; i < gguf_n_tensors(model); i++)
        if (!strcmp(gguf_tensor(model, i)->name, name))
            return placement_reason(p, i);
    return "";
}

static void test_defaults(void)
{
    const char *small[] = { "--ram-budget", "1M" };
    struct placement_plan *p = plan_for(small, 2, false);
    CHECK(tier_of(p, "blk.0.ffn_up_exps.weight") == PL_TIER_DISK, "experts paged when file > budget");
    CHECK(tier_of(p, "blk.1.ffn_down_exps.weight") == PL_TIER_DISK, "experts paged (layer 1)");
    CHECK(tier_of(p, "blk.0.attn_q.weight") == PL_TIER_RAM, "non-expert in RAM without a GPU");
    CHECK(tier_of(p, "output.weight") == PL_TIER_RAM, "output in RAM without a GPU");
    CHECK(placement_warning(p) == NULL, "no warning when nothing asked for a GPU");
    /* ffn_{gate,up,down}_exps are [128,64,16] / [64,128,16] F16: 16384 bytes per
     * expert = 4 pages, +1 page for a straddling slice; 3 tensors; top-4. */
    CHECK(placement_min_budget(p) == 4ull * 3 * (16384 + 4096), "min budget %llu",
          (unsigned long long)placement_min_budget(p));
    CHECK(placement_fits(p, NULL), "1M holds one layer's 4 experts");
    placement_plan_free(p);

    const char *big[] = { "--ram-budget", "64M" };
    p = plan_for(big, 2, false);
    CHECK(tier_of(p, "blk.0.ffn_up_exps.weight") == PL_TIER_RAM, "experts resident when file fits");
    CHECK(placement_tier_bytes(p, PL_TIER_DISK) == 0, "nothing paged");
    CHECK(placement_tier_bytes(p, PL_TIER_RAM) + placement_tier_bytes(p, PL_TIER_GPU) > 0, "bytes");
    placement_plan_free(p);
}

static void test_precedence(void)
{
    const char *both[] = { "--cpu-moe", "--n-disk-moe", "1", "--ram-budget", "1M" };
    struct placement_plan *p = plan_for(both, 5, false);
    CHECK(tier_of(p, "blk.0.ffn_gate_exps.weight") == PL_TIER_DISK, "--n-disk-moe 1 pages layer 0");
    CHECK(tier_of(p, "blk.1.ffn_gate_exps.weight") == PL_TIER_RAM, "--cpu-moe keeps layer 1");
    CHECK(!strcmp(reason_of(p, "blk.1.ffn_gate_exps.weight"), "--cpu-moe"), "reason %s",
          reason_of(p, "blk.1.ffn_gate_exps.weight"));
    placement_plan_free(p);

    const char *ot[] = { "-ot", "blk\\.1\\.ffn_up=disk,attn_q=CPU", "--cpu-moe", "--ram-budget", "1M" };
    p = plan_for(ot, 5, false);
    CHECK(tier_of(p, "blk.1.ffn_up_exps.weight") == PL_TIER_DISK, "-ot beats --cpu-moe");
    CHECK(tier_of(p, "blk.0.ffn_up_exps.weight") == PL_TIER_RAM, "--cpu-moe for the rest");
    CHECK(strstr(reason_of(p, "blk.1.ffn_up_exps.weight"), "-ot") != NULL, "reason names -ot");
    placement_plan_free(p);

    const char *ncpu[] = { "--disk-moe", "--n-cpu-moe", "1", "--ram-budget", "64M" };
    p = plan_for(ncpu, 5, false);
    CHECK(tier_of(p, "blk.0.ffn_down_exps.weight") == PL_TIER_RAM, "--n-cpu-moe 1 keeps layer 0");
    CHECK(tier_of(p, "blk.1.ffn_down_exps.weight") == PL_TIER_DISK, "--disk-moe pages layer 1");
    placement_plan_free(p);
}

static void test_gpu(void)
{
    const char *cuda[] = { "-ot", "exps=CUDA0" };
    struct placement_plan *p = plan_for(cuda, 2, false);
    CHECK(tier_of(p, "blk.0.ffn_up_exps.weight") == PL_TIER_RAM, "gpu falls back to ram");
    CHECK(placement_warning(p) != NULL, "fallback warns");
    placement_plan_free(p);

    const char *ngl[] = { "-ngl", "1", "--cpu-moe" };
    p = plan_for(ngl, 3, true);
    CHECK(tier_of(p, "output.weight") == PL_TIER_GPU, "-ngl 1 puts the output layer on the GPU");
    CHECK(tier_of(p, "blk.1.attn_q.weight") == PL_TIER_RAM, "-ngl 1 leaves blk.1 on the host");
    CHECK(tier_of(p, "token_embd.weight") == PL_TIER_RAM, "input embedding stays on the host");
    placement_plan_free(p);

    const char *all[] = { "--cpu-moe" };
    p = plan_for(all, 1, true);
    CHECK(tier_of(p, "blk.0.attn_q.weight") == PL_TIER_GPU, "default: non-experts on the GPU");
    CHECK(tier_of(p, "blk.0.ffn_up_exps.weight") == PL_TIER_RAM, "--cpu-moe experts in RAM");
    placement_plan_free(p);

    const char *ro[] = { "--regex-offload", "attn_(q|k)\\.", "--ram-budget", "64M" };
    p = plan_for(ro, 4, true);
    CHECK(tier_of(p, "blk.0.attn_q.weight") == PL_TIER_GPU, "--regex-offload match on the GPU");
    CHECK(tier_of(p, "blk.0.attn_v.weight") == PL_TIER_RAM, "--regex-offload non-match on the host");
    placement_plan_free(p);
}

static void test_budget_too_small(void)
{
    const char *tiny[] = { "--disk-moe", "--ram-budget", "100K" };
    struct placement_plan *p = plan_for(tiny, 3, false);
    const char *why = NULL;
    CHECK(!placement_fits(p, &why), "100K cannot hold 4 experts");
    CHECK(why && strstr(why, "below"), "why: %s", why ? why : "(null)");
    placement_plan_free(p);
}

/* One expert of a layer: its slices of the layer's routed expert tensors. */
static uint64_t expert_bytes(int layer)
{
    uint64_t sum = 0;
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "blk.%d.ffn_", layer);
    for (int64_t i = 0; i < gguf_n_tensors(model); i++) {
        const struct gguf_tensor *t = gguf_tensor(model, i);
        if (!strncmp(t->name, prefix, strlen(prefix)) && strstr(t->name, "_exps."))
            sum += t->nbytes / 16; /* qwen3moe-tiny: 16 experts */
    }
    return sum;
}

/* Memory limits: the auto budget leaves room for the RAM tier and the
 * pager's staging; a plan over a memory cgroup's headroom is PL_OVER_CGROUP
 * (the session refuses it), over MemAvailable PL_OVER_RAM (a warning). */
static void test_memory_limits(void)
{
    const uint64_t unit = expert_bytes(0), staging = pager_staging_bytes(unit);
    CHECK(unit > 0 && staging >= 2 * unit, "staging holds two experts at least");
    struct placement_host host = { .ram_available = 200 * MIB };
    const char *paged[] = { "--disk-moe" };
    struct placement_plan *p = plan_on(paged, 1, &host);
    uint64_t tier = placement_tier_bytes(p, PL_TIER_RAM);
    CHECK(placement_ram_budget(p) == 160 * MIB - tier - staging,
          "auto budget = 80 %% of 200 MiB - RAM tier - staging: %llu",
          (unsigned long long)placement_ram_budget(p));
    CHECK(placement_misfit(p, NULL) == PL_FITS, "the auto budget fits");
    placement_plan_free(p);

    /* all in RAM: the model (2.2 MiB) over 1 MiB */
    const char *resident[] = { "--cpu-moe" };
    host.ram_available = MIB;
    const char *why = NULL;
    p = plan_on(resident, 1, &host);
    CHECK(placement_misfit(p, &why) == PL_OVER_RAM, "over MemAvailable: PL_OVER_RAM");
    CHECK(why && strstr(why, "available") && strstr(why, "--disk-moe"), "why: %s",
          why ? why : "(null)");
    placement_plan_free(p);
    host.ram_cgroup_limit = 2 * MIB;
    p = plan_on(resident, 1, &host);
    CHECK(placement_misfit(p, &why) == PL_OVER_CGROUP, "over a cgroup's room: PL_OVER_CGROUP");
    CHECK(why && strstr(why, "cgroup") && strstr(why, "2.00 MiB"), "why: %s",
          why ? why : "(null)");
    placement_plan_free(p);

    /* paged with a budget over the room: counted no higher than the paged bytes */
    const char *big[] = { "--disk-moe", "--ram-budget", "1T" };
    uint64_t tier_paged = 0, disk = 0;
    p = plan_on(big, 3, &host);
    tier_paged = placement_tier_bytes(p, PL_TIER_RAM);
    disk = placement_tier_bytes(p, PL_TIER_DISK);
    CHECK(placement_misfit(p, &why) == PL_OVER_CGROUP && strstr(why, "--ram-budget"),
          "1T budget over 1 MiB: refused, why: %s", why ? why : "(null)");
    placement_plan_free(p);
    host.ram_available = tier_paged + disk + staging;
    p = plan_on(big, 3, &host);
    CHECK(placement_misfit(p, NULL) == PL_FITS, "1T budget, room for all the paged bytes: fits");
    placement_plan_free(p);
    host.ram_available--;
    p = plan_on(big, 3, &host);
    CHECK(placement_misfit(p, NULL) == PL_OVER_CGROUP, "one byte less: does not fit");
    placement_plan_free(p);

    /* a KV cache sized after the plan: fits in what the plan leaves, or not */
    host.ram_available = tier_paged + disk + staging + 1000;
    p = plan_on(big, 3, &host);
    char line[300];
    CHECK(placement_misfit_with(p, 1000, "kv", line, sizeof(line)) == PL_FITS, "1000 B fit");
    CHECK(placement_misfit_with(p, 1001, "kv", line, sizeof(line)) == PL_OVER_CGROUP &&
              !strncmp(line, "kv need 1001 B beside", 21) && strstr(line, "-c, -b or --ram-budget"),
          "1001 B do not: %s", line);
    placement_plan_free(p);
    host.ram_cgroup_limit = 0;
    p = plan_on(big, 3, &host);
    CHECK(placement_misfit_with(p, 1001, "kv", line, sizeof(line)) == PL_OVER_RAM &&
              strstr(line, "available"), "without a cgroup: PL_OVER_RAM: %s", line);
    placement_plan_free(p);
}

static void test_bad_flags(void)
{
    struct placement_options o;
    struct fl_err err = { "" };
    placement_options_init(&o);
    char *bad_budget[] = { "--ram-budget", "lots" };
    int i = 0;
    CHECK(placement_parse_flag(&o, 2, bad_budget, &i, &err) == -EINVAL, "bad budget refused");
    char *neg[] = { "--n-cpu-moe", "-1" };
    i = 0;
    CHECK(placement_parse_flag(&o, 2, neg, &i, &err) == -EINVAL, "negative count refused");
    char *missing[] = { "-ot" };
    i = 0;
    CHECK(placement_parse_flag(&o, 1, missing, &i, &err) == -EINVAL, "-ot without value refused");
    char *other[] = { "-m", "x" };
    i = 0;
    CHECK(placement_parse_flag(&o, 2, other, &i, &err) == 0 && i == 0, "-m is not ours");

    placement_options_init(&o);
    o.overrides[o.n_overrides++] = "exps=floppy";
    struct placement_host host = { .ram_available = GIB };
    struct placement_plan *p = NULL;
    CHECK(placement_plan_build(model, &o, &host, &p, &err) == -EINVAL, "unknown tier refused");
    CHECK(strstr(err.msg, "floppy") != NULL, "message names the tier: %s", err.msg);
    placement_options_init(&o);
    o.overrides[o.n_overrides++] = "ex(ps=ram";
    CHECK(placement_plan_build(model, &o, &host, &p, &err) == -EINVAL, "bad regex refused");
}

int main(void)
{
    struct fl_err err = { "" };
    if (gguf_open(MODEL, &model, &err)) {
        printf("FAIL cannot open %s: %s\n", MODEL, err.msg);
        return 1;
    }
    test_defaults();
    test_precedence();
    test_gpu();
    test_budget_too_small();
    test_memory_limits();
    test_bad_flags();
    gguf_close(model);
    return check_summary("test-placement");
}
