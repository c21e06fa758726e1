/* test-reference: faultline against llama.cpp's reference outputs.
 *
 * For every tests/data/ref/<model>.<prompt>.flrf it runs `faultline eval`
 * (in process, through cli_eval) on tests/data/<model>.gguf with the prompt
 * of <model>.<prompt>.txt, and compares logits, greedy tokens and routing
 * with the reference. Cases whose architecture is not built into this
 * faultline are listed as skipped, so a new architecture joins by itself.
 *
 * Criteria (tests/data/ref/README.md, "Noise floor"):
 *  - F16 files, each case: mean KL <= 1e-4, top-1 >= 99 %, greedy tokens
 *    identical up to the first near-tie (0.1);
 *  - quantized files, per weight type: the median of the cases' mean KL <=
 *    2x the median of the noise floor's, and the mean top-1 >= the noise
 *    floor's mean top-1 - 3 points. The floor is read from the README table. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/arch.h"
#include "app/cli/commands.h"
#include "record/flref.h"
#include "gguf/gguf.h"

#define MAX_CASES 64

struct ref_case {
    char model[96], prompt_id[16], type[16];
    double floor_kl, floor_top1; /* from the README; < 0 when absent */
    bool ran;
    double mean_kl, top1;
    int routing_diff, gen_same, n_gen;
    bool gen_ok;
};

/* snprintf through va_list: paths here are short, and a truncated one just
 * fails to open, so GCC's truncation analysis need not see them. */
static __attribute__((format(printf, 3, 4))) void fmt(char *buf, size_t cap, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, cap, f, ap);
    va_end(ap);
}

static const char *src_dir(void)
{
    const char *d = getenv("FL_SOURCE_DIR");
    return d ? d : ".";
}

/* "| `qwen3moe-tiny-Q8_0 p1` | 0.357 | 0.065 | 10/10 | 0.0024 | 0/20 | 29/32 |" */
static void read_floor(struct ref_case *c)
{
    char path[1024], line[512], key[160];
    fmt(path, sizeof(path), "%s/tests/data/ref/README.md", src_dir());
    fmt(key, sizeof(key), "| `%s %s` |", c->model, c->prompt_id);
    c->floor_kl = c->floor_top1 = -1;
    FILE *f = fopen(path, "r");
    bool in_floor = false;
    while (f && fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "## ", 3))
            in_floor = strstr(line, "Noise floor") != NULL;
        if (!in_floor || strncmp(line, key, strlen(key)))
            continue;
        double mx, mean, kl;
        int a, b;
        if (sscanf(line + strlen(key), " %lf | %lf | %d/%d | %lf |", &mx, &mean, &a, &b, &kl) == 5 && b > 0) {
            c->floor_kl = kl;
            c->floor_top1 = (double)a / b;
        }
        break;
    }
    if (f)
        fclose(f);
}

/* The exact prompt bytes: the "prompt: " line of the .txt summary. */
static char *read_prompt(const struct ref_case *c)
{
    char path[1024], line[4096];
    fmt(path, sizeof(path), "%s/tests/data/ref/%s.%s.txt", src_dir(), c->model, c->prompt_id);
    FILE *f = fopen(path, "r");
    char *p = NULL;
    while (f && !p && fgets(line, sizeof(line), f))
        if (!strncmp(line, "prompt: ", 8)) {
            line[strcspn(line, "\n")] = 0;
            p = strdup(line + 8);
        }
    if (f)
        fclose(f);
    return p;
}

static int cmp_case(const void *a, const void *b)
{
    const struct ref_case *x = a, *y = b;
    int c = strcmp(x->model, y->model);
    return c ? c : strcmp(x->prompt_id, y->prompt_id);
}

static int find_cases(struct ref_case *cases)
{
    char path[1024];
    fmt(path, sizeof(path), "%s/tests/data/ref", src_dir());
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAX_CASES) {
        size_t len = strlen(e->d_name);
        if (len < 9 || strcmp(e->d_name + len - 5, ".flrf"))
            continue;
        struct ref_case *c = &cases[n];
        memset(c, 0, sizeof(*c));
        char name[256];
        fmt(name, sizeof(name), "%.*s", (int)(len - 5), e->d_name);
        char *dot = strrchr(name, '.');
        if (!dot)
            continue;
        *dot = 0;
        fmt(c->model, sizeof(c->model), "%s", name);
        snprintf(c->prompt_id, sizeof(c->prompt_id), "%s", dot + 1);
        const char *dash = strrchr(c->model, '-');
        snprintf(c->type, sizeof(c->type), "%s", dash ? dash + 1 : "?");
        read_floor(c);
        n++;
    }
    closedir(d);
    qsort(cases, (size_t)n, sizeof(*cases), cmp_case);
    return n;
}

static bool arch_built(const char *model_path, char *arch, size_t cap)
{
    struct gguf_file *g;
    struct fl_err err;
    const char *a = "?";
    bool ok = false;
    if (gguf_open(model_path, &g, &err) == 0) {
        if (gguf_get_str(g, "general.architecture", &a) == 0)
            ok = eng_arch_find(a) != NULL;
        snprintf(arch, cap, "%s", a);
        gguf_close(g);
    } else {
        snprintf(arch, cap, "unreadable: %s", err.msg);
    }
    return ok;
}

static int compare_case(struct ref_case *c, const char *ours_f, const char *ours_r)
{
    char ref_f[1024], ref_r[1024];
    fmt(ref_f, sizeof(ref_f), "%s/tests/data/ref/%s.%s.flrf", src_dir(), c->model, c->prompt_id);
    fmt(ref_r, sizeof(ref_r), "%s/tests/data/ref/%s.%s.flrt", src_dir(), c->model, c->prompt_id);
    struct flref_logits ref = { 0 }, ours = { 0 };
    struct flref_routing rr = { 0 }, orr = { 0 };
    struct flref_cmp cmp = { 0 };
    struct fl_err err = { { 0 } };
    int rc = flref_logits_read(ref_f, &ref, &err);
    rc = rc ? rc : flref_logits_read(ours_f, &ours, &err);
    rc = rc ? rc : flref_compare(&ref, &ours, 0.1, &cmp, &err);
    rc = rc ? rc : flref_routing_read(ref_r, &rr, &err);
    rc = rc ? rc : flref_routing_read(ours_r, &orr, &err);
    if (!rc) {
        c->routing_diff = flref_routing_diff(&rr, &orr, ref.n_tokens + cmp.gen_same, NULL, NULL, &err);
        rc = c->routing_diff < 0 ? c->routing_diff : 0;
    }
    if (!rc) {
        c->ran = true;
        c->mean_kl = cmp.mean_kl;
        c->top1 = (double)cmp.top1_agree / cmp.n_pos;
        c->gen_same = cmp.gen_same;
        c->n_gen = cmp.n_gen;
        c->gen_ok = cmp.gen_ok;
    } else {
        printf("  %s %s: %s\n", c->model, c->prompt_id, err.msg);
    }
    flref_cmp_free(&cmp);
    flref_logits_free(&ref);
    flref_logits_free(&ours);
    flref_routing_free(&rr);
    flref_routing_free(&orr);
    return rc;
}

static int run_case(struct ref_case *c, const char *tmpdir)
{
    char model[1024], arch[600], ours_f[1100], ours_r[1100];
    fmt(model, sizeof(model), "%s/tests/data/%s.gguf", src_dir(), c->model);
    if (!arch_built(model, arch, sizeof(arch))) {
        printf("  %-22s %s: SKIPPED (architecture %s not built in)\n", c->model, c->prompt_id, arch);
        return 0;
    }
    char *prompt = read_prompt(c);
    if (!prompt) {
        printf("  %s %s: no prompt line in its .txt\n", c->model, c->prompt_id);
        return -1;
    }
    fmt(ours_f, sizeof(ours_f), "%s/%s.%s.flrf", tmpdir, c->model, c->prompt_id);
    fmt(ours_r, sizeof(ours_r), "%s/%s.%s.flrt", tmpdir, c->model, c->prompt_id);
    char *argv[] = { "eval", "-m", model, "-p", prompt, "--logits-out", ours_f, "--routing-out",
                     ours_r, "--all-logits", "-t", "2", NULL };
    int rc = cli_eval(12, argv);
    free(prompt);
    if (rc) {
        printf("  %s %s: faultline eval failed (%d)\n", c->model, c->prompt_id, rc);
        return -1;
    }
    rc = compare_case(c, ours_f, ours_r);
    unlink(ours_f);
    unlink(ours_r);
    if (!rc)
        printf("  %-22s %s: mean KL %-9.3g top-1 %5.1f%%  greedy %2d/%d%s  routing diffs %d\n",
               c->model, c->prompt_id, c->mean_kl, 100 * c->top1, c->gen_same, c->n_gen,
               c->gen_same == c->n_gen ? "" : c->gen_ok ? " (near-tie)" : " (NO near-tie)",
               c->routing_diff);
    return rc;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int check_f16(const struct ref_case *c)
{
    int fail = !(c->mean_kl <= 1e-4) || c->top1 < 0.99 || !c->gen_ok;
    printf("  %-5s %s %s: KL %.3g <= 1e-4, top-1 %.1f%% >= 99%%, greedy ok %d\n", fail ? "FAIL" : "ok",
           c->model, c->prompt_id, c->mean_kl, 100 * c->top1, c->gen_ok);
    return fail;
}

/* Quantized types: the per-type medians and means against the floor. */
static int check_type(const struct ref_case *cases, int n, const char *type)
{
    double kl[MAX_CASES], fkl[MAX_CASES], top1 = 0, ftop1 = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (!cases[i].ran || strcmp(cases[i].type, type))
            continue;
        if (cases[i].floor_kl < 0) {
            printf("  FAIL  %s %s: no noise floor row in the README\n", cases[i].model, cases[i].prompt_id);
            return 1;
        }
        kl[m] = cases[i].mean_kl;
        fkl[m] = cases[i].floor_kl;
        top1 += cases[i].top1;
        ftop1 += cases[i].floor_top1;
        m++;
    }
    if (!m)
        return 0;
    const double mk = median(kl, m), fk = median(fkl, m);
    top1 /= m;
    ftop1 /= m;
    int fail = !(mk <= 2 * fk) || top1 < ftop1 - 0.03;
    printf("  %-5s %s (%d cases): median KL %.3g <= 2 x %.3g, mean top-1 %.1f%% >= %.1f%% - 3\n",
           fail ? "FAIL" : "ok", type, m, mk, fk, 100 * top1, 100 * ftop1);
    return fail;
}

int main(void)
{
    static struct ref_case cases[MAX_CASES];
    int n = find_cases(cases);
    if (n <= 0) {
        printf("no reference cases found under %s/tests/data/ref\n", src_dir());
        return 1;
    }
    char tmpdir[] = "/tmp/fl-test-reference-XXXXXX";
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    printf("%d reference cases\n", n);
    int failures = 0, ran = 0;
    for (int i = 0; i < n; i++) {
        failures += run_case(&cases[i], tmpdir) != 0;
        ran += cases[i].ran;
    }
    rmdir(tmpdir);
    printf("criteria:\n");
    const char *types_done[MAX_CASES];
    int n_types = 0;
    for (int i = 0; i < n; i++) {
        if (!cases[i].ran)
            continue;
        if (!strcmp(cases[i].type, "F16")) {
            failures += check_f16(&cases[i]);
            continue;
        }
        bool seen = false;
        for (int t = 0; t < n_types && !seen; t++)
            seen = !strcmp(types_done[t], cases[i].type);
        if (!seen) {
            types_done[n_types++] = cases[i].type;
            failures += check_type(cases, n, cases[i].type);
        }
    }
    printf("%d of %d cases ran, %d failure(s)\n", ran, n, failures);
    if (!ran)
        return 77;
    return failures ? 1 : 0;
}
