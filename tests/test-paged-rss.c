/* test-paged-rss: a paged run's peak RSS stays within its RAM budget.
 *
 * Generates (faultline gen) a 128 MiB qwen3moe Q8_0 model, then runs
 * `faultline eval` over it with --ram-budget = a quarter of the file, in
 * uffd and explicit mode, and checks the child's peak RSS (wait4's
 * ru_maxrss) against
 *
 *   budget + RAM-tier bytes (the non-paged tensors, read up front)
 *          + staging (the pager's pinned read buffers)
 *          + FIXED_MIB (binary, libc, heap: KV cache at -c 64, scratch,
 *            logits, tokenizer, thread stacks)
 *
 * staging is what docs/pager.md specifies: 64 MiB / largest unit slots,
 * clamped to 2..16, each the unit's aligned read window rounded up to 2 MiB
 * (huge-page sized, mlocked). FIXED_MIB = 16: a fully resident run of a
 * 1.2 MiB test model peaks at ~10 MiB RSS, so 16 MiB leaves room for the
 * larger KV cache and scratch of this model and for allocator noise.
 *
 * The same bound is checked to be too small for a fully resident run of the
 * same file (--cpu-moe), so the measurement can fail. Not under ASan: its
 * shadow memory and quarantine make RSS meaningless (label nosanitize). */
#include "tests/test-paged-util.h"

#define FIXED_MIB 16
#define MIB (UINT64_C(1) << 20)
#define LIMIT_S 60.0

static char dir[] = "/tmp/test-paged-rss.XXXXXX";

/* The pager's staging, from its sizing rule (docs/pager.md, pager/io.c). */
static uint64_t staging_bytes(uint64_t unit)
{
    uint64_t window = unit + 2 * 4096; /* O_DIRECT alignment at both ends */
    uint64_t n = (64 * MIB) / window;
    n = n < 2 ? 2 : n > 16 ? 16 : n;
    return n * ((window + 2 * MIB - 1) & ~(2 * MIB - 1));
}

static struct t_run eval(const char *cli, const char *model, char **extra, int n_extra,
                         const char *json)
{
    char out[600], err[600];
    snprintf(out, sizeof(out), "%s/out.flrf", dir);
    snprintf(err, sizeof(err), "%s/err", dir);
    char *argv[32] = { (char *)cli, "eval", "-m", (char *)model, "-p", "The capital of France is",
                       "-n", "24", "-c", "64", "-t", "2", "--logits-out", out,
                       "--stats-json", (char *)json };
    int n = 16;
    for (int i = 0; i < n_extra; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    struct t_run r = t_run_cmd(argv, NULL, err, LIMIT_S);
    if (r.status != 0) {
        char *msg = check_read_file(err, NULL);
        fprintf(stderr, "eval exit %d: %s", r.status, msg ? msg : "\n");
        free(msg);
    }
    return r;
}

int main(void)
{
    t_chdir_source();
    const char *cli = t_cli();
    if (!mkdtemp(dir))
        return perror("mkdtemp"), 1;
    char model[600], json[600], budget_s[32];
    snprintf(model, sizeof(model), "%s/model.gguf", dir);
    snprintf(json, sizeof(json), "%s/stats.json", dir);
    char *gen[] = { (char *)cli, "gen", "--arch", "qwen3moe", "--type", "Q8_0", "--size", "128M",
                    "--seed", "7", "-q", "-o", model, NULL };
    struct t_run g = t_run_cmd(gen, NULL, NULL, LIMIT_S);
    CHECK(g.status == 0, "faultline gen failed (exit %d)", g.status);
    if (g.status != 0)
        return 1;
    struct t_plan plan;
    char *disk[] = { "--disk-moe" };
    if (t_plan_for(model, disk, 1, &plan))
        return 1;
    struct gguf_file *gf = NULL;
    struct fl_err err = { { 0 } };
    int64_t top_k = 0;
    if (gguf_open(model, &gf, &err) || gguf_get_int(gf, "qwen3moe.expert_used_count", &top_k) ||
        top_k <= 0)
        return fprintf(stderr, "%s: no expert_used_count %s\n", model, err.msg), 1;
    gguf_close(gf);
    const uint64_t budget = plan.file_size / 4;
    const uint64_t unit = plan.min_budget / (uint64_t)top_k;
    const uint64_t staging = staging_bytes(unit);
    const uint64_t bound = budget + plan.ram_bytes + staging + FIXED_MIB * MIB;
    snprintf(budget_s, sizeof(budget_s), "%" PRIu64, budget);
    printf("model %.1f MiB (RAM tier %.1f MiB, paged %.1f MiB), budget %.1f MiB\n",
           (double)plan.file_size / MIB, (double)plan.ram_bytes / MIB,
           (double)plan.disk_bytes / MIB, (double)budget / MIB);
    printf("bound = budget + RAM tier + staging %.1f MiB (unit %.0f KiB) + %d MiB = %.1f MiB\n",
           (double)staging / MIB, (double)unit / 1024, FIXED_MIB, (double)bound / MIB);
    CHECK(plan.file_size >= 4 * budget, "the model is not 4x the budget");

    const char *modes[] = { "uffd", "explicit" };
    for (int m = 0; m < 2; m++) {
        char *flags[] = { "--disk-moe", "--ram-budget", budget_s, "--pager", (char *)modes[m] };
        struct t_run r = eval(cli, model, flags, 5, json);
        uint64_t rss = (uint64_t)r.maxrss_kib * 1024, peak = 0, loads = 0;
        t_json_u64(json, "peak_resident", &peak);
        t_json_u64(json, "loads", &loads);
        CHECK(r.status == 0, "%s: paged eval failed", modes[m]);
        CHECK(rss <= bound, "%s: peak RSS %.1f MiB > bound %.1f MiB", modes[m], (double)rss / MIB,
              (double)bound / MIB);
        /* the budget was really used, else the bound proves nothing */
        CHECK(peak >= budget / 10 * 9 && peak <= budget && loads > 0,
              "%s: pager peak resident %" PRIu64 " of budget %" PRIu64 " (%" PRIu64 " loads)",
              modes[m], peak, budget, loads);
        printf("  paged, %-8s peak RSS %6.1f MiB <= %.1f MiB: %s (pager peak %.1f MiB, %" PRIu64
               " loads, %.2f s)\n", modes[m], (double)rss / MIB, (double)bound / MIB,
               rss <= bound ? "yes" : "NO", (double)peak / MIB, loads, r.seconds);
    }
    char *resident[] = { "--cpu-moe" };
    struct t_run r = eval(cli, model, resident, 1, json);
    uint64_t rss = (uint64_t)r.maxrss_kib * 1024;
    CHECK(r.status == 0 && rss > bound, "resident run: peak RSS %.1f MiB should exceed the "
          "paged bound %.1f MiB (else the check cannot fail)", (double)rss / MIB,
          (double)bound / MIB);
    printf("  resident (--cpu-moe): peak RSS %6.1f MiB (> bound: the check can fail)\n",
           (double)rss / MIB);
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    printf("%s\n", failures ? "FAILED" : "peak RSS within the budget's bound");
    return failures ? 1 : 0;
}
