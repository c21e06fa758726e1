/* test-paged-logits: paging must not change a single bit of the results.
 *
 * For one model (argv[1]) `faultline eval` runs once fully resident
 * (--cpu-moe; Q4_K weights repacked where the CPU has AVX-512, and once
 * more with --no-repack) and then paged at several RAM budgets (the minimum, about a
 * quarter and half of the paged bytes) and placements (--disk-moe,
 * --cpu-moe --n-disk-moe N, -ot rules that page some expert tensors and one
 * non-expert tensor), in uffd and explicit mode; every FLRF file must equal
 * the resident one byte for byte. Each paged run must really have paged
 * (loads > 0 in --stats-json) and stayed within its budget (peak_resident).
 * A budget below the minimum must be a one-line error with a non-zero exit. */
#include "tests/test-paged-util.h"

#define PROMPT "The capital of France is"
#define N_GEN "12"
#define LIMIT_S 60.0

struct ctx {
    const char *cli, *model, *dir;
    bool uffd_ok;
    int n_runs;
};

struct placement_case {
    const char *name;
    char *flags[4];
    int n_flags;
    int pcts[3];   /* budgets: 0 = the minimum, else this % of the paged bytes */
    int n_pcts;
};

/* --n-disk-moe N: N is the first layer count that pages something (deepseek2's
 * layer 0 is dense); set in main. */
static char n_disk_moe[8] = "1";

static const struct placement_case cases[] = {
    { "--disk-moe", { "--disk-moe" }, 1, { 0, 25, 50 }, 3 },
    { "--cpu-moe --n-disk-moe N", { "--cpu-moe", "--n-disk-moe", n_disk_moe }, 3, { 0, 50 }, 2 },
    { "-ot (gate/up experts and attn_output on disk)",
      { "-ot", "attn_output=disk,ffn_(gate|up)_exps=disk,exps=CPU" }, 2, { 0, 50 }, 2 },
};

/* Runs eval with the flags plus --pager/--ram-budget (when mode is set);
 * out/json/err are files in the test folder. Returns the child's status. */
static int run_eval(struct ctx *c, char *const *flags, int n_flags, const char *mode,
                    uint64_t budget, const char *out, const char *json, const char *err)
{
    char budget_s[32];
    snprintf(budget_s, sizeof(budget_s), "%" PRIu64, budget);
    char *argv[32];
    int n = 0;
    char *fixed[] = { (char *)c->cli, "eval", "-m", (char *)c->model, "-p", PROMPT, "-n", N_GEN,
                      "-t", "2", "--logits-out", (char *)out, "--stats-json", (char *)json };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        argv[n++] = fixed[i];
    for (int i = 0; i < n_flags; i++)
        argv[n++] = flags[i];
    if (mode) {
        argv[n++] = "--pager";
        argv[n++] = (char *)mode;
        argv[n++] = "--ram-budget";
        argv[n++] = budget_s;
    }
    argv[n] = NULL;
    struct t_run r = t_run_cmd(argv, NULL, err, LIMIT_S);
    c->n_runs++;
    CHECK(r.status != -1, "%s: eval did not finish within %.0f s", c->model, LIMIT_S);
    return r.status;
}

static void print_err_file(const char *err)
{
    char *b = check_read_file(err, NULL);
    if (b && *b)
        fprintf(stderr, "  stderr: %s", b);
    free(b);
}

/* One paged run compared with the resident reference. */
static void paged_run(struct ctx *c, const struct placement_case *pc, const char *mode,
                      uint64_t budget, const char *ref)
{
    char out[512], json[512], err[512];
    snprintf(out, sizeof(out), "%s/paged.flrf", c->dir);
    snprintf(json, sizeof(json), "%s/paged.json", c->dir);
    snprintf(err, sizeof(err), "%s/paged.err", c->dir);
    unlink(out);
    int st = run_eval(c, pc->flags, pc->n_flags, mode, budget, out, json, err);
    CHECK(st == 0, "%s %s --pager %s --ram-budget %" PRIu64 ": exit %d", c->model, pc->name,
          mode, budget, st);
    if (st != 0) {
        print_err_file(err);
        return;
    }
    long d = t_cmp(ref, out);
    uint64_t loads = 0, peak = 0;
    int jrc = t_json_u64(json, "loads", &loads) | t_json_u64(json, "peak_resident", &peak);
    CHECK(d == 0, "%s %s --pager %s --ram-budget %" PRIu64 ": logits differ from the resident "
          "run (%s %ld)", c->model, pc->name, mode, budget,
          d > 0 ? "first at byte" : "code", d > 0 ? d - 1 : d);
    CHECK(jrc == 0 && loads > 0, "%s %s --pager %s: nothing was paged (loads %" PRIu64 ")",
          c->model, pc->name, mode, loads);
    CHECK(peak <= budget, "%s %s --pager %s: peak resident %" PRIu64 " > budget %" PRIu64,
          c->model, pc->name, mode, peak, budget);
    printf("  %-46s %-8s budget %8" PRIu64 ": %s (%" PRIu64 " loads, peak %" PRIu64 ")\n",
           pc->name, mode, budget, d == 0 ? "identical" : "DIFFERENT", loads, peak);
}

/* userfaultfd may be unavailable (no privileges): then uffd runs are skipped. */
static bool probe_uffd(struct ctx *c, uint64_t budget)
{
    char out[512], json[512], err[512];
    snprintf(out, sizeof(out), "%s/probe.flrf", c->dir);
    snprintf(json, sizeof(json), "%s/probe.json", c->dir);
    snprintf(err, sizeof(err), "%s/probe.err", c->dir);
    char *flags[] = { "--disk-moe" };
    if (run_eval(c, flags, 1, "uffd", budget, out, json, err) == 0)
        return true;
    char *msg = check_read_file(err, NULL);
    bool no_uffd = msg && strstr(msg, "userfaultfd");
    printf("uffd mode: %s%s", no_uffd ? "skipped: " : "FAILED: ", msg ? msg : "?\n");
    CHECK(no_uffd, "%s: --pager uffd failed for another reason than userfaultfd", c->model);
    free(msg);
    return false;
}

/* A budget one byte below the minimum: one line on stderr, non-zero exit. */
static void too_small(struct ctx *c, uint64_t min, const char *mode)
{
    char out[512], json[512], err[512];
    snprintf(out, sizeof(out), "%s/small.flrf", c->dir);
    snprintf(json, sizeof(json), "%s/small.json", c->dir);
    snprintf(err, sizeof(err), "%s/small.err", c->dir);
    char *flags[] = { "--disk-moe" };
    int st = run_eval(c, flags, 1, mode, min - 1, out, json, err);
    int lines = t_count_lines(err);
    char *msg = check_read_file(err, NULL);
    CHECK(st != 0 && st < 128, "%s: budget %" PRIu64 " (min - 1), %s: exit %d, expected an error",
          c->model, min - 1, mode, st);
    CHECK(lines == 1, "%s: budget too small, %s: %d lines on stderr, expected one", c->model,
          mode, lines);
    CHECK(msg && strstr(msg, "budget"), "%s: the error does not mention the budget: %s",
          c->model, msg ? msg : "");
    printf("  budget min-1 (%s): exit %d: %s", mode, st, msg ? msg : "\n");
    free(msg);
}

/* The resident run rebuilt its Q4_K weights in the repacked layout when the
 * CPU kernels are AVX-512 (backend/cpu/repack.h); the paged runs read the
 * file layout. So "paged = resident" also holds the two layouts to the same
 * bits; here the resident run must equal one with --no-repack as well. */
static void check_repack(struct ctx *c, const char *err, const char *ref)
{
    char *msg = check_read_file(err, NULL);
    const bool repacked = msg && strstr(msg, "repacked for the CPU kernels");
    free(msg);
    char *vargv[] = { (char *)c->cli, "version", NULL };
    char vout[512];
    snprintf(vout, sizeof(vout), "%s/version.txt", c->dir);
    t_run_cmd(vargv, vout, NULL, LIMIT_S);
    char *ver = check_read_file(vout, NULL);
    const bool avx512 = ver && strstr(ver, "cpu: avx512 ");
    free(ver);
    if (strstr(c->model, "Q4_K") && avx512)
        CHECK(repacked, "%s: AVX-512 kernels but the resident run repacked nothing", c->model);
    if (!repacked) {
        printf("  resident run: nothing repacked (%s)\n",
               avx512 ? "no Q4_K matrix" : "kernels below AVX-512");
        return;
    }
    char out[512], json[512], err2[512];
    snprintf(out, sizeof(out), "%s/norepack.flrf", c->dir);
    snprintf(json, sizeof(json), "%s/norepack.json", c->dir);
    snprintf(err2, sizeof(err2), "%s/norepack.err", c->dir);
    char *flags[] = { "--cpu-moe", "--no-repack" };
    int st = run_eval(c, flags, 2, NULL, 0, out, json, err2);
    long d = st == 0 ? t_cmp(ref, out) : -1;
    CHECK(st == 0 && d == 0, "%s: --no-repack run (exit %d) differs from the repacked one (%ld)",
          c->model, st, d);
    printf("  resident run repacked Q4_K; --no-repack: %s\n", d == 0 ? "identical" : "DIFFERENT");
}

int main(int argc, char **argv)
{
    t_chdir_source();
    if (argc < 2) {
        fprintf(stderr, "usage: test-paged-logits MODEL.gguf\n");
        return 2;
    }
    char dir[] = "/tmp/test-paged-logits.XXXXXX";
    if (!mkdtemp(dir))
        return perror("mkdtemp"), 1;
    struct ctx c = { .cli = t_cli(), .model = argv[1], .dir = dir };
    char ref[512], json[512], err[512];
    snprintf(ref, sizeof(ref), "%s/resident.flrf", dir);
    snprintf(json, sizeof(json), "%s/resident.json", dir);
    snprintf(err, sizeof(err), "%s/resident.err", dir);
    char *resident[] = { "--cpu-moe", "--verbose" };
    int st = run_eval(&c, resident, 2, NULL, 0, ref, json, err);
    uint64_t loads = 1;
    size_t ref_len = 0;
    free(check_read_file(ref, &ref_len));
    CHECK(st == 0 && ref_len > 64, "%s: resident eval failed (exit %d)", c.model, st);
    CHECK(t_json_u64(json, "loads", &loads) == 0 && loads == 0,
          "%s: the --cpu-moe run paged (%" PRIu64 " loads)", c.model, loads);
    if (st != 0)
        return print_err_file(err), 1;
    printf("%s: resident run, %zu bytes of FLRF\n", c.model, ref_len);
    check_repack(&c, err, ref);

    for (int n = 1; n < 8; n++) {
        struct t_plan plan = { 0 };
        snprintf(n_disk_moe, sizeof(n_disk_moe), "%d", n);
        /* min_budget, not disk_bytes: a nextn block is on disk whatever N is */
        if (t_plan_for(c.model, (char **)cases[1].flags, cases[1].n_flags, &plan) ||
            plan.min_budget)
            break;
    }
    const char *modes[] = { "uffd", "explicit" };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const struct placement_case *pc = &cases[k];
        struct t_plan plan;
        if (t_plan_for(c.model, (char **)pc->flags, pc->n_flags, &plan)) {
            CHECK(0, "%s: no plan for %s", c.model, pc->name);
            continue;
        }
        CHECK(plan.disk_bytes > 0 && plan.min_budget > 0, "%s %s: nothing on disk", c.model,
              pc->name);
        if (k == 0) {
            c.uffd_ok = probe_uffd(&c, plan.min_budget);
            for (int m = c.uffd_ok ? 0 : 1; m < 2; m++)
                too_small(&c, plan.min_budget, modes[m]);
        }
        for (int b = 0; b < pc->n_pcts; b++) {
            uint64_t budget = plan.disk_bytes / 100 * (uint64_t)pc->pcts[b];
            if (budget < plan.min_budget)
                budget = plan.min_budget;
            for (int m = c.uffd_ok ? 0 : 1; m < 2; m++)
                paged_run(&c, pc, modes[m], budget, ref);
        }
    }
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    printf("%s: %d runs, %s\n", c.model, c.n_runs, failures ? "FAILED" : "all identical");
    return failures ? 1 : 0;
}
