/* test-gpu-errors: a GPU that fails in the middle of a run (emulated device
 * only: FL_CUDA_EMU_FAIL_OP makes its Nth kernel or copy fail as a faulting
 * kernel does, and every later call fail too, like a real sticky error).
 *
 * For each model and --gpu-experts mode, the CLI generates greedily with the
 * failure injected at op 1, 2, 3, 5, 8, ... until a run no longer reaches
 * it. Every run must either end with exit 0 and exactly the text of a run
 * without failure (the failure came after the last op, or on a path the
 * GPU recovers from), or exit non-zero with a one-line error that names the
 * CUDA error: never a signal, a hang (60 s timeout) or different text with
 * exit 0. Without the emulator (a real device, or none) it skips. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check.h"

#ifdef FL_CUDA_EMU

struct outcome {
    int status;      /* as system() */
    char *out, *err; /* stdout, stderr */
};

static struct outcome run_cli(const char *cli, const char *model, const char *mode, long fail_op,
                              const char *dir)
{
    char cmd[2048], o[512], e[512];
    snprintf(o, sizeof(o), "%s/out", dir);
    snprintf(e, sizeof(e), "%s/err", dir);
    snprintf(cmd, sizeof(cmd),
             "FL_CUDA_EMU_FAIL_OP=%ld timeout 60 %s run -m %s -p 'The quick brown fox' -n 6 -t 2 "
             "--temp 0 -ngl all --gpu-experts %s >%s 2>%s",
             fail_op, cli, model, mode, o, e);
    struct outcome r = { .status = system(cmd) };
    size_t n;
    r.out = check_read_file(o, &n);
    r.err = check_read_file(e, &n);
    return r;
}

/* The last non-empty line of s. */
static const char *last_line(char *s)
{
    size_t n = s ? strlen(s) : 0;
    while (n && s[n - 1] == '\n')
        s[--n] = 0;
    char *nl = s ? strrchr(s, '\n') : NULL;
    return nl ? nl + 1 : s ? s : "";
}

static void test_model(const char *cli, const char *model, const char *mode, const char *dir)
{
    struct outcome clean = run_cli(cli, model, mode, 0, dir);
    CHECK(clean.status == 0 && clean.out, "%s (%s): clean run failed", model, mode);
    int failed = 0, ok_after = 0;
    long a = 1, b = 2;
    for (; ok_after < 2 && a < 100000; a += b, b = a - b) { /* 1 2 3 5 8 13 ... */
        struct outcome r = run_cli(cli, model, mode, a, dir);
        const bool signalled = r.status == -1 || WIFSIGNALED(r.status) ||
                               (WIFEXITED(r.status) && WEXITSTATUS(r.status) >= 124);
        CHECK(!signalled, "%s (%s), op %ld fails: killed or timed out (status %d): %s", model,
              mode, a, r.status, last_line(r.err));
        if (!signalled && WEXITSTATUS(r.status) == 0) {
            CHECK(r.out && clean.out && !strcmp(r.out, clean.out),
                  "%s (%s), op %ld fails: exit 0 with other text", model, mode, a);
            ok_after++;
        } else if (!signalled) {
            const char *line = last_line(r.err);
            CHECK(strstr(line, "faultline") && strstr(line, "launch failure"),
                  "%s (%s), op %ld fails: last line \"%s\"", model, mode, a, line);
            failed++;
            ok_after = 0;
        }
        free(r.out);
        free(r.err);
    }
    CHECK(failed > 0, "%s (%s): no injected failure reached the CLI", model, mode);
    printf("%-40s %-5s %d runs stopped with a one-line CUDA error, then the run ends before op %ld\n",
           model, mode, failed, a);
    free(clean.out);
    free(clean.err);
}

#endif /* FL_CUDA_EMU */

int main(void)
{
#ifndef FL_CUDA_EMU
    printf("skipped: failures are injected by the emulated device only (FAULTLINE_CUDA_EMU)\n");
    return 77;
#else
    const char *src = getenv("FL_SOURCE_DIR");
    if (src && chdir(src) != 0)
        return 1;
    const char *cli = getenv("FL_CLI") ? getenv("FL_CLI") : "build/faultline";
    char dir[] = "/tmp/fl-gpu-errors-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    const char *models[] = { "tests/data/qwen3moe-tiny-F16.gguf", "tests/data/deepseek2-tiny-F16.gguf",
                             "tests/data/gpt-oss-tiny-MXFP4.gguf" };
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
        test_model(cli, models[i], "copy", dir);
        test_model(cli, models[i], "cpu", dir);
    }
    char f[600];
    snprintf(f, sizeof(f), "%s/out", dir);
    unlink(f);
    snprintf(f, sizeof(f), "%s/err", dir);
    unlink(f);
    rmdir(dir);
    return check_summary("test-gpu-errors");
#endif
}
