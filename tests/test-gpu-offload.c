/* test-gpu-offload: the host side of the GPU wiring, on any machine:
 *  - --gpu-experts / --offload-min-batch parsing through the session's flag
 *    parser, their defaults and their one-line errors;
 *  - the offload rule (where a MoE layer's experts run), against a table
 *    written from the text;
 *  - without a device: eng_gpu_open says -ENODEV, and the CLI given GPU
 *    flags prints one "no GPU" line and computes the very logits of a plain
 *    CPU run (that part is skipped where a device exists). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/gpu.h"
#include "app/cli/session-flags.h"
#include "app/session.h"
#include "tests/check.h"

static int parse(struct eng_session_params *p, const char *flag, const char *value,
                 struct fl_err *err)
{
    char *argv[] = { (char *)flag, (char *)value, NULL };
    int i = 0;
    int rc = eng_session_parse_flag(p, value ? 2 : 1, argv, &i, err);
    if (rc == 1 && i != (value ? 1 : 0))
        return -1000; /* did not step past the value */
    return rc;
}

static void test_flags(void)
{
    struct eng_session_params p;
    struct fl_err err = { { 0 } };
    eng_session_params_init(&p);
    CHECK(p.gpu_experts == ENG_GPU_EXPERTS_COPY && !p.gpu_flags && p.offload_min_batch == 0,
          "CLI defaults: copy, min batch 0 (= 32), no flags given");
    struct eng_session_params z = { 0 };
    CHECK(z.gpu_experts == ENG_GPU_EXPERTS_NONE, "zeroed params keep host experts off the GPU");
    static const struct { const char *v; enum eng_gpu_experts m; } modes[] = {
        { "copy", ENG_GPU_EXPERTS_COPY }, { "unified", ENG_GPU_EXPERTS_UNIFIED },
        { "cpu", ENG_GPU_EXPERTS_CPU },
    };
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        eng_session_params_init(&p);
        CHECK(parse(&p, "--gpu-experts", modes[i].v, &err) == 1, "--gpu-experts %s", modes[i].v);
        CHECK(p.gpu_experts == (int)modes[i].m && p.gpu_flags, "--gpu-experts %s sets the mode",
              modes[i].v);
        CHECK(!strcmp(eng_gpu_experts_name(modes[i].m), modes[i].v), "name of %s", modes[i].v);
    }
    const char *bad_modes[] = { "none", "COPY", "", "gpu" };
    for (size_t i = 0; i < sizeof(bad_modes) / sizeof(bad_modes[0]); i++) {
        err.msg[0] = '\0';
        CHECK(parse(&p, "--gpu-experts", bad_modes[i], &err) == -EINVAL &&
              strstr(err.msg, "copy, unified or cpu"), "--gpu-experts '%s' rejected: %s",
              bad_modes[i], err.msg);
    }
    CHECK(parse(&p, "--gpu-experts", NULL, &err) == -EINVAL, "--gpu-experts without a value");
    eng_session_params_init(&p);
    CHECK(parse(&p, "--offload-min-batch", "8", &err) == 1 && p.offload_min_batch == 8 &&
          p.gpu_flags, "--offload-min-batch 8");
    const char *bad_n[] = { "0", "-3", "abc", "12x", "", "99999999999" };
    for (size_t i = 0; i < sizeof(bad_n) / sizeof(bad_n[0]); i++) {
        err.msg[0] = '\0';
        CHECK(parse(&p, "--offload-min-batch", bad_n[i], &err) == -EINVAL &&
              strstr(err.msg, "--offload-min-batch"), "--offload-min-batch '%s' rejected: %s",
              bad_n[i], err.msg);
    }
    CHECK(parse(&p, "--offload-min-batch", NULL, &err) == -EINVAL, "--offload-min-batch alone");
    CHECK(p.offload_min_batch == 8, "a rejected value leaves the last good one");
    CHECK(parse(&p, "--not-a-gpu-flag", NULL, &err) == 0, "other flags are not taken");
}

/* The rule as the issue states it, one row per case. */
static void test_rule(void)
{
    enum { C = ENG_GPU_RUN_CPU, V = ENG_GPU_RUN_VRAM, X = ENG_GPU_RUN_CACHE };
    static const struct {
        enum eng_gpu_experts mode;
        bool ok, vram, cache;
        int64_t n_tok;
        int min_batch;
        int want;
    } rows[] = {
        /* experts on the gpu tier run there, whatever the mode and batch */
        { ENG_GPU_EXPERTS_CPU, true, true, false, 1, 32, V },
        { ENG_GPU_EXPERTS_NONE, true, true, false, 1, 32, V },
        { ENG_GPU_EXPERTS_COPY, true, true, true, 500, 32, V },
        /* no kernel (gpt-oss's activation, biases): the CPU, always */
        { ENG_GPU_EXPERTS_COPY, false, true, true, 1, 32, C },
        { ENG_GPU_EXPERTS_COPY, false, false, true, 64, 32, C },
        /* host experts: copy/unified through the cache at any batch */
        { ENG_GPU_EXPERTS_COPY, true, false, true, 1, 32, X },
        { ENG_GPU_EXPERTS_UNIFIED, true, false, true, 1, 32, X },
        { ENG_GPU_EXPERTS_UNIFIED, true, false, true, 100, 32, X },
        /* cpu: small batches on the CPU, from min_batch on the GPU */
        { ENG_GPU_EXPERTS_CPU, true, false, true, 1, 32, C },
        { ENG_GPU_EXPERTS_CPU, true, false, true, 31, 32, C },
        { ENG_GPU_EXPERTS_CPU, true, false, true, 32, 32, X },
        { ENG_GPU_EXPERTS_CPU, true, false, true, 4, 4, X },
        { ENG_GPU_EXPERTS_CPU, true, false, true, 3, 4, C },
        { ENG_GPU_EXPERTS_CPU, true, false, true, 32, 0, X }, /* 0: the default 32 */
        { ENG_GPU_EXPERTS_CPU, true, false, true, 31, 0, C },
        /* no cache (none fits the budget) or zeroed params: the CPU */
        { ENG_GPU_EXPERTS_COPY, true, false, false, 1, 32, C },
        { ENG_GPU_EXPERTS_CPU, true, false, false, 64, 32, C },
        { ENG_GPU_EXPERTS_NONE, true, false, true, 64, 32, C },
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int got = eng_gpu_decide(rows[i].mode, rows[i].ok, rows[i].vram, rows[i].cache,
                                 rows[i].n_tok, rows[i].min_batch);
        CHECK(got == rows[i].want, "rule row %zu (%s, ok %d, vram %d, cache %d, %lld tokens, "
              "min %d): got %d, want %d", i, eng_gpu_experts_name(rows[i].mode), rows[i].ok,
              rows[i].vram, rows[i].cache, (long long)rows[i].n_tok, rows[i].min_batch, got,
              rows[i].want);
    }
}

static int run(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_lines(const char *path, const char *needle, int *total)
{
    char *t = check_read_file(path, NULL);
    int n = 0;
    *total = 0;
    for (char *line = t ? strtok(t, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "eval: ", 6))
            continue; /* eval's own summary */
        (*total)++;
        n += strstr(line, needle) != NULL;
    }
    free(t);
    return n;
}

static bool same_file(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    char *x = check_read_file(a, &na), *y = check_read_file(b, &nb);
    bool same = x && y && na == nb && na > 0 && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

/* The CLI with every GPU flag on a machine without a device. */
static void test_no_device_cli(const char *dir)
{
    const char *cli = getenv("FL_CLI") ? getenv("FL_CLI") : "build/faultline";
    const char *model = "tests/data/qwen3moe-tiny-Q8_0.gguf";
    char cmd[4096], ref[512], out[512], errf[512];
    snprintf(ref, sizeof(ref), "%s/cpu.flrf", dir);
    snprintf(out, sizeof(out), "%s/gpu.flrf", dir);
    snprintf(errf, sizeof(errf), "%s/stderr", dir);
    snprintf(cmd, sizeof(cmd), "%s eval -m %s -p 'x = y + 1;' -t 1 --logits-out %s 2>%s", cli,
             model, ref, errf);
    CHECK(run(cmd) == 0, "plain CPU eval: %s", cmd);
    int total = 0;
    CHECK(count_lines(errf, "GPU", &total) == 0, "a plain run says nothing about a GPU");
    const char *variants[] = {
        "--gpu-experts copy -ngl 99 --offload-min-batch 4 --vram-budget 1G",
        "--gpu-experts unified",
        "--gpu-experts cpu --offload-min-batch 1",
        "-ngl 99",
        "--vram-budget 2G -ngl all",
    };
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        snprintf(cmd, sizeof(cmd), "%s eval -m %s -p 'x = y + 1;' -t 1 %s --logits-out %s 2>%s",
                 cli, model, variants[i], out, errf);
        unlink(out);
        CHECK(run(cmd) == 0, "eval %s exits 0 without a device", variants[i]);
        int n = count_lines(errf, "no GPU", &total);
        CHECK(n == 1 && total == 1, "%s: one 'no GPU' line and no other warning "
              "(%d of %d lines)", variants[i], n, total);
        CHECK(same_file(ref, out), "%s: the logits of the CPU run, bit for bit", variants[i]);
    }
    snprintf(cmd, sizeof(cmd), "%s eval -m %s -p x --gpu-experts sometimes --logits-out %s 2>%s",
             cli, model, out, errf);
    CHECK(run(cmd) != 0, "a bad --gpu-experts fails");
    CHECK(count_lines(errf, "--gpu-experts", &total) >= 1, "and names the flag");
}

int main(void)
{
    const char *src = getenv("FL_SOURCE_DIR");
    if (src && chdir(src) != 0) {
        printf("cannot enter %s\n", src);
        return 1;
    }
    test_flags();
    test_rule();
    uint64_t vram = 0;
    const char *why = NULL;
    if (eng_gpu_detect(&vram, &why)) {
        printf("a CUDA device is present: the no-device checks are skipped here\n");
    } else {
        struct eng_gpu *g = NULL;
        struct fl_err err = { { 0 } };
        const struct eng_gpu_options o = { .experts = ENG_GPU_EXPERTS_COPY };
        CHECK(eng_gpu_open(NULL, NULL, NULL, &o, &g, &err) == -ENODEV && g == NULL &&
              strstr(err.msg, "no GPU"), "eng_gpu_open without a device: %s", err.msg);
        CHECK(why && *why, "detect says why there is no device");
        char dir[] = "/tmp/test-gpu-offload-XXXXXX";
        if (!mkdtemp(dir)) {
            CHECK(0, "mkdtemp");
        } else {
            test_no_device_cli(dir);
            char cmd[256];
            snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
            run(cmd);
        }
    }
    return check_summary("test-gpu-offload");
}
