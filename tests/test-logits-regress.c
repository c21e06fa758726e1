/* test-logits-regress: the logits of every forward path, byte for byte
 * against files an earlier build wrote (tests/data/regress/).
 *
 * A refactor of the forward passes, the backends or the pager must not
 * change one bit of what a run computes. For every tests/data model and a
 * generated model of each architecture x weight type (F16, Q8_0, Q4_K,
 * MXFP4; `faultline gen`, deterministic, into a temporary folder) this runs
 * `faultline eval --all-logits` in each mode below and compares the FLRF
 * file with the committed one:
 *   cpu          experts in RAM (--cpu-moe); the same bits with --no-repack,
 *                and paged from disk under a quarter of the paged bytes, in
 *                uffd and explicit mode (one reference for all four);
 *   gpu-*        (builds with the emulated CUDA device only: a real GPU's
 *                kernels round differently) the pass on the device with
 *                --gpu-experts copy / unified / cpu (also with
 *                --offload-min-batch 4, so the prompt takes the host experts
 *                to the device), every expert in VRAM (-ot exps=gpu),
 *                experts paged from disk through the VRAM cache, and -ngl 1
 *                (a CPU pass whose last layer's matrices are in VRAM).
 * A short prompt runs on every model; a long one (64+ tokens: attention's
 * F32 kernel, the GEMM paths) on a few.
 *
 * The data belongs to one CPU kernel level (the `cpu:` line of `faultline
 * version`): cases recorded for another level are skipped, and said so.
 * A CPU with AMX is held to the avx512 data (its tile kernels promise the
 * VNNI kernels' bits; the long prompt's products run on them).
 * `test-logits-regress --record` (re)writes the data for the machine's
 * level (or the one FL_CPU_FEATURES caps it at) with the CLI in $FL_CLI into
 * MANIFEST.new; identical results of one model share one file
 * (tests/data/regress/MANIFEST maps each case to its file). The avx2 data
 * holds the short prompt only (FL_REGRESS_PROMPTS=short). */
#include "tests/test-paged-util.h"

#define DATA "tests/data/regress"
#define SHORT_PROMPT "The cat sat"
#define LONG_PROMPT                                                                        \
    "It was the best of times, it was the worst of times, it was the age of wisdom, it "    \
    "was the age of foolishness, it was the epoch of belief, it was the epoch of doubt."
#define LIMIT_S 120.0

struct model {
    const char *name;
    const char *path;      /* tests/data file, or NULL: generated */
    const char *arch, *type;
    bool long_prompt;      /* also the long prompt */
};

static const struct model models[] = {
    { "qwen3moe-tiny-F16", "tests/data/qwen3moe-tiny-F16.gguf", NULL, NULL, false },
    { "qwen3moe-tiny-Q8_0", "tests/data/qwen3moe-tiny-Q8_0.gguf", NULL, NULL, false },
    { "mixtral-tiny-Q4_K_M", "tests/data/mixtral-tiny-Q4_K_M.gguf", NULL, NULL, true },
    { "deepseek2-tiny-F16", "tests/data/deepseek2-tiny-F16.gguf", NULL, NULL, true },
    { "gpt-oss-tiny-MXFP4", "tests/data/gpt-oss-tiny-MXFP4.gguf", NULL, NULL, true },
    { "gen-qwen3moe-F16", NULL, "qwen3moe", "F16", false },
    { "gen-qwen3moe-Q8_0", NULL, "qwen3moe", "Q8_0", false },
    { "gen-qwen3moe-Q4_K", NULL, "qwen3moe", "Q4_K", false },
    { "gen-qwen3moe-MXFP4", NULL, "qwen3moe", "MXFP4", false },
    { "gen-llama-F16", NULL, "llama", "F16", false },
    { "gen-llama-Q8_0", NULL, "llama", "Q8_0", false },
    { "gen-llama-Q4_K", NULL, "llama", "Q4_K", false },
    { "gen-llama-MXFP4", NULL, "llama", "MXFP4", false },
    { "gen-deepseek2-F16", NULL, "deepseek2", "F16", false },
    { "gen-deepseek2-Q8_0", NULL, "deepseek2", "Q8_0", false },
    { "gen-deepseek2-Q4_K", NULL, "deepseek2", "Q4_K", false },
    { "gen-deepseek2-MXFP4", NULL, "deepseek2", "MXFP4", false },
    { "gen-gpt-oss-F16", NULL, "gpt-oss", "F16", false },
    { "gen-gpt-oss-Q8_0", NULL, "gpt-oss", "Q8_0", false },
    { "gen-gpt-oss-Q4_K", NULL, "gpt-oss", "Q4_K", false },
    { "gen-gpt-oss-MXFP4", NULL, "gpt-oss", "MXFP4", false },
    /* the 2026 families (avx2 data from an AVX2 host; avx512 data, device modes too, from an AVX-512 one) */
    { "glm4moe-tiny-F16", "tests/data/glm4moe-tiny-F16.gguf", NULL, NULL, false },
    { "glm4moe-tiny-Q8_0", "tests/data/glm4moe-tiny-Q8_0.gguf", NULL, NULL, false },
    { "minimax-m2-tiny-F16", "tests/data/minimax-m2-tiny-F16.gguf", NULL, NULL, false },
    { "minimax-m2-tiny-Q8_0", "tests/data/minimax-m2-tiny-Q8_0.gguf", NULL, NULL, false },
    { "qwen35moe-tiny-F16", "tests/data/qwen35moe-tiny-F16.gguf", NULL, NULL, false },
    { "qwen35moe-tiny-Q8_0", "tests/data/qwen35moe-tiny-Q8_0.gguf", NULL, NULL, false },
    { "qwen3next-tiny-F16", "tests/data/qwen3next-tiny-F16.gguf", NULL, NULL, false },
    { "qwen3next-tiny-Q8_0", "tests/data/qwen3next-tiny-Q8_0.gguf", NULL, NULL, false },
    { "qwen3next-ssm-in-tiny-F16", "tests/data/qwen3next-ssm-in-tiny-F16.gguf", NULL, NULL, false },
    { "gen-glm4moe-Q8_0", NULL, "glm4moe", "Q8_0", false },
    { "gen-glm4moe-Q4_K", NULL, "glm4moe", "Q4_K", false },
    { "gen-glm4moe-MXFP4", NULL, "glm4moe", "MXFP4", false },
    { "gen-minimax-m2-Q8_0", NULL, "minimax-m2", "Q8_0", false },
    { "gen-minimax-m2-Q4_K", NULL, "minimax-m2", "Q4_K", false },
    { "gen-minimax-m2-MXFP4", NULL, "minimax-m2", "MXFP4", false },
    { "gen-qwen35moe-Q8_0", NULL, "qwen35moe", "Q8_0", false },
    { "gen-qwen35moe-Q4_K", NULL, "qwen35moe", "Q4_K", false },
    { "gen-qwen35moe-MXFP4", NULL, "qwen35moe", "MXFP4", false },
    { "gen-qwen3next-Q8_0", NULL, "qwen3next", "Q8_0", false },
    { "gen-qwen3next-Q4_K", NULL, "qwen3next", "Q4_K", false },
    { "gen-qwen3next-MXFP4", NULL, "qwen3next", "MXFP4", false },
    /* DeepSeek sparse attention (avx2 data from an AVX2 host) */
    { "deepseek32-tiny-F16", "tests/data/deepseek32-tiny-F16.gguf", NULL, NULL, false },
    { "glm-dsa-tiny-F16", "tests/data/glm-dsa-tiny-F16.gguf", NULL, NULL, false },
    { "gen-deepseek32-Q8_0", NULL, "deepseek32", "Q8_0", false },
    { "gen-deepseek32-Q4_K", NULL, "deepseek32", "Q4_K", false },
    { "gen-glm-dsa-MXFP4", NULL, "glm-dsa", "MXFP4", false },
    /* Kimi-Linear (avx2 data from an AVX2 host) */
    { "kimi-linear-tiny-F16", "tests/data/kimi-linear-tiny-F16.gguf", NULL, NULL, false },
    { "gen-kimi-linear-Q8_0", NULL, "kimi-linear", "Q8_0", false },
    { "gen-kimi-linear-Q4_K", NULL, "kimi-linear", "Q4_K", false },
    { "kimi-k3-tiny-F16", "tests/data/kimi-k3-tiny-F16.gguf", NULL, NULL, false },
    { "gen-kimi-k3-Q8_0", NULL, "kimi-k3", "Q8_0", false },
    { "gen-kimi-k3-Q4_K", NULL, "kimi-k3", "Q4_K", false },
    /* MiniMax-M3 (avx2 data from an AVX2 host) */
    { "minimax-m3-tiny-F16", "tests/data/minimax-m3-tiny-F16.gguf", NULL, NULL, false },
    { "gen-minimax-m3-Q8_0", NULL, "minimax-m3", "Q8_0", false },
    { "gen-minimax-m3-Q4_K", NULL, "minimax-m3", "Q4_K", false },
};
#define N_MODELS (int)(sizeof(models) / sizeof(models[0]))

/* PAGED: --ram-budget a quarter of the paged bytes (at least the minimum). */
enum { PAGED_NONE = 0, PAGED_UFFD, PAGED_EXPLICIT };

struct mode {
    const char *name;
    const char *flags[6];
    int paged;
    bool device;
};

static const struct mode modes[] = {
    { "cpu", { "--cpu-moe" }, PAGED_NONE, false },
    { "cpu-no-repack", { "--cpu-moe", "--no-repack" }, PAGED_NONE, false },
    { "cpu-paged-uffd", { "--disk-moe" }, PAGED_UFFD, false },
    { "cpu-paged-explicit", { "--disk-moe" }, PAGED_EXPLICIT, false },
    { "gpu-copy", { "--gpu-experts", "copy" }, PAGED_NONE, true },
    { "gpu-unified", { "--gpu-experts", "unified" }, PAGED_NONE, true },
    { "gpu-cpu", { "--gpu-experts", "cpu" }, PAGED_NONE, true },
    { "gpu-cpu-min-batch", { "--gpu-experts", "cpu", "--offload-min-batch", "4" }, PAGED_NONE, true },
    { "gpu-vram", { "-ot", "exps=gpu" }, PAGED_NONE, true },
    { "gpu-copy-paged", { "--gpu-experts", "copy", "--disk-moe" }, PAGED_EXPLICIT, true },
    { "gpu-ngl1", { "-ngl", "1" }, PAGED_NONE, true },
};
#define N_MODES (int)(sizeof(modes) / sizeof(modes[0]))

struct ctx {
    const char *cli, *tmp;
    char level[32];
    bool record, device, uffd_ok;
    FILE *manifest;          /* --record: the new MANIFEST */
    char *old_manifest;      /* the committed MANIFEST (NULL when recording) */
    int n_runs, n_skipped;
};

static int n_flags(const struct mode *m)
{
    int n = 0;
    while (n < 6 && m->flags[n])
        n++;
    return n;
}

/* The level word of `faultline version`'s "cpu: LEVEL (cpu: ...)" line. */
static int cpu_level(struct ctx *c)
{
    char out[512];
    snprintf(out, sizeof(out), "%s/version.txt", c->tmp);
    char *argv[] = { (char *)c->cli, "version", NULL };
    struct t_run r = t_run_cmd(argv, out, NULL, 30.0);
    char *b = check_read_file(out, NULL), *p = b ? strstr(b, "cpu: ") : NULL;
    if (r.status != 0 || !p || sscanf(p + 5, "%31s", c->level) != 1) {
        free(b);
        return -1;
    }
    free(b);
    /* the AMX kernels give the VNNI kernels' bits by design: an AMX host is
     * held to the avx512 data (products of 16+ tokens then run on tiles) */
    if (strcmp(c->level, "amx") == 0)
        snprintf(c->level, sizeof(c->level), "avx512");
    return 0;
}

/* The model's file: tests/data, or `faultline gen` into the temp folder. */
static int model_path(struct ctx *c, const struct model *m, char *path, size_t n)
{
    if (m->path) {
        snprintf(path, n, "%s", m->path);
        return 0;
    }
    snprintf(path, n, "%s/%s.gguf", c->tmp, m->name);
    if (access(path, R_OK) == 0)
        return 0;
    char *argv[] = { (char *)c->cli, "gen", "--arch", (char *)m->arch, "--type", (char *)m->type,
                     "--size", "16M", "--seed", "7", "-q", "-o", path, NULL };
    struct t_run r = t_run_cmd(argv, NULL, NULL, LIMIT_S);
    CHECK(r.status == 0, "%s: faultline gen failed (status %d)", m->name, r.status);
    return r.status == 0 ? 0 : -1;
}

/* A quarter of the paged bytes, at least the minimum budget. */
static uint64_t paged_budget(const char *model, const struct mode *md)
{
    struct t_plan plan;
    char *flags[6];
    const int nf = n_flags(md);
    for (int i = 0; i < nf; i++)
        flags[i] = (char *)md->flags[i];
    /* the GPU flags are the CLI's, not placement's: plan the tiers alone */
    char *disk[] = { "--disk-moe" };
    if (t_plan_for(model, md->device ? disk : flags, md->device ? 1 : nf, &plan))
        return 0;
    const uint64_t q = plan.disk_bytes / 4;
    return q > plan.min_budget ? q : plan.min_budget;
}

/* Runs eval in one mode; 0 when it wrote `out`. */
static int run_eval(struct ctx *c, const char *model, const struct mode *md, bool long_prompt,
                    const char *out)
{
    char budget[32], err[700];
    char *argv[40];
    int n = 0;
    char *fixed[] = { (char *)c->cli, "eval", "-m", (char *)model, "-p",
                      long_prompt ? LONG_PROMPT : SHORT_PROMPT, "-n", long_prompt ? "1" : "3",
                      "-t", "2", "--all-logits", "--logits-out", (char *)out };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        argv[n++] = fixed[i];
    for (int i = 0; i < n_flags(md); i++)
        argv[n++] = (char *)md->flags[i];
    if (md->paged) {
        snprintf(budget, sizeof(budget), "%" PRIu64, paged_budget(model, md));
        argv[n++] = "--ram-budget";
        argv[n++] = budget;
        argv[n++] = "--pager";
        argv[n++] = md->paged == PAGED_UFFD ? "uffd" : "explicit";
    }
    argv[n] = NULL;
    snprintf(err, sizeof(err), "%s.err", out);
    /* CPU modes must not see the (emulated) device; device modes must */
    setenv("CUDA_VISIBLE_DEVICES", md->device ? "0" : "", 1);
    unlink(out);
    struct t_run r = t_run_cmd(argv, NULL, err, LIMIT_S);
    c->n_runs++;
    if (r.status != 0) {
        char *e = check_read_file(err, NULL);
        CHECK(false, "%s %s: eval exited %d: %s", model, md->name, r.status, e ? e : "");
        free(e);
        return -1;
    }
    return 0;
}

/* MANIFEST lines: "LEVEL MODEL MODE PROMPT FILE". The committed file for a
 * case, NULL when the manifest has none. */
static const char *manifest_file(const struct ctx *c, const char *model, const char *mode,
                                 const char *prompt, char *file, size_t n)
{
    char key[256];
    snprintf(key, sizeof(key), "%s %s %s %s ", c->level, model, mode, prompt);
    for (const char *p = c->old_manifest; p && *p;) {
        const char *eol = strchr(p, '\n');
        const size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > strlen(key) && !strncmp(p, key, strlen(key))) {
            snprintf(file, n, "%.*s", (int)(len - strlen(key)), p + strlen(key));
            return file;
        }
        p = eol ? eol + 1 : p + len;
    }
    return NULL;
}

/* --record: keep the result, sharing a file with an equal result of the
 * same model and prompt. */
static void record_case(struct ctx *c, const struct model *m, const char *prompt,
                        const char *mode, const char *out)
{
    char file[256], path[512];
    for (int i = 0; i < N_MODES; i++) {
        snprintf(file, sizeof(file), "%s.%s.%s.%s.flrf", c->level, m->name, prompt, modes[i].name);
        snprintf(path, sizeof(path), DATA "/%s", file);
        if (!strcmp(modes[i].name, mode) || t_cmp(path, out) == 0)
            break;
    }
    snprintf(path, sizeof(path), DATA "/%s", file);
    if (access(path, R_OK) != 0) {
        size_t len = 0;
        char *b = check_read_file(out, &len);
        FILE *f = b ? fopen(path, "wb") : NULL;
        CHECK(f && fwrite(b, 1, len, f) == len && fclose(f) == 0, "cannot write %s", path);
        free(b);
    }
    fprintf(c->manifest, "%s %s %s %s %s\n", c->level, m->name, mode, prompt, file);
}

static void check_case(struct ctx *c, const struct model *m, const char *prompt,
                       const char *mode, const char *out)
{
    char file[256], path[512];
    if (!manifest_file(c, m->name, mode, prompt, file, sizeof(file))) {
        printf("skip %s %s %s: no data for CPU level %s\n", m->name, mode, prompt, c->level);
        c->n_skipped++;
        return;
    }
    snprintf(path, sizeof(path), DATA "/%s", file);
    const long d = t_cmp(path, out);
    CHECK(d == 0, "%s %s (%s prompt): logits differ from %s (%s)", m->name, mode, prompt, file,
          d == -1 ? "missing" : d == -2 ? "sizes differ" : "bytes differ");
    if (d > 0)
        fprintf(stderr, "  first difference at byte %ld\n", d - 1);
}

static void run_model(struct ctx *c, const struct model *m)
{
    char path[512], out[600];
    if (model_path(c, m, path, sizeof(path)))
        return;
    /* FL_REGRESS_PROMPTS=short: the short prompt only (data for a second level) */
    const char *only = getenv("FL_REGRESS_PROMPTS");
    const bool long_too = m->long_prompt && !(only && !strcmp(only, "short"));
    for (int p = 0; p < (long_too ? 2 : 1); p++) {
        const char *prompt = p ? "long" : "short";
        for (int i = 0; i < N_MODES; i++) {
            const struct mode *md = &modes[i];
            if (md->device && !c->device)
                continue;
            if (md->paged == PAGED_UFFD && !c->uffd_ok) {
                printf("skip %s %s: userfaultfd is not available\n", m->name, md->name);
                continue;
            }
            char file[256];
            if (!c->record && !manifest_file(c, m->name, md->name, prompt, file, sizeof(file))) {
                printf("skip %s %s %s: no data for CPU level %s\n", m->name, md->name, prompt,
                       c->level);
                c->n_skipped++;
                continue; /* nothing to compare with: not run */
            }
            snprintf(out, sizeof(out), "%s/%s.%s.%s.flrf", c->tmp, m->name, prompt, md->name);
            if (run_eval(c, path, md, p == 1, out))
                continue;
            if (c->record)
                record_case(c, m, prompt, md->name, out);
            else
                check_case(c, m, prompt, md->name, out);
        }
    }
}

static bool uffd_available(void)
{
    return geteuid() == 0 || access("/dev/userfaultfd", R_OK | W_OK) == 0;
}

int main(int argc, char **argv)
{
    t_chdir_source();
    struct ctx c = { .cli = t_cli(), .record = argc > 1 && !strcmp(argv[1], "--record"),
                     .uffd_ok = uffd_available() };
#ifdef FL_REGRESS_DEVICE
    c.device = true;
#endif
    char tmp[] = "/tmp/fl-regress-XXXXXX";
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    c.tmp = tmp;
    if (cpu_level(&c)) {
        fprintf(stderr, "cannot read the CPU level from '%s version'\n", c.cli);
        return 1;
    }
    if (c.record) {
        c.manifest = fopen(DATA "/MANIFEST.new", "w");
        if (!c.manifest) {
            perror(DATA "/MANIFEST.new");
            return 1;
        }
    } else if (!(c.old_manifest = check_read_file(DATA "/MANIFEST", NULL))) {
        fprintf(stderr, "%s/MANIFEST: cannot read it\n", DATA);
        return 1;
    }
    printf("CPU level %s, %s device modes\n", c.level, c.device ? "with" : "without");
    for (int i = 0; i < N_MODELS; i++)
        run_model(&c, &models[i]);
    if (c.record && c.manifest)
        fclose(c.manifest);
    printf("%d runs, %d case(s) skipped\n", c.n_runs, c.n_skipped);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
    free(c.old_manifest);
    return check_summary("test-logits-regress");
}
