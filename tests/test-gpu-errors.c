/* test-gpu-errors: a GPU that fails in the middle of a run (emulated device
 * only: FL_CUDA_EMU_FAIL_OP makes its Nth kernel or copy fail as a faulting
 * kernel does, and every later call fail too, like a real sticky error).
 *
 * For each model and --gpu-experts mode, the CLI generates greedily with the
 * failure injected at op 1, 3, 4, 7, 11, ... (each the sum of the two
 * before) until a run no longer reaches
 * it. Every run must either end with exit 0 and exactly the text of a run
 * without failure (the failure came after the last op, or on a path the
 * GPU recovers from), or exit non-zero with a one-line error that names the
 * CUDA error: never a signal, a hang (60 s timeout) or different text with
 * exit 0. And the disk failing under the VRAM expert cache: the file is
 * truncated while a paged run keeps refilling an 11-slot cache (explicit and
 * uffd mode): the run must exit with one line on stderr within 60 s.
 * Without the emulator (a real device, or none) it skips. */
#include "tests/test-paged-util.h"

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
    for (; ok_after < 2 && a < 100000; a += b, b = a - b) { /* 1 3 4 7 11 18 ... */
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

/* eval over a copy of the model with the experts paged at the minimum RAM
 * budget and a 3M VRAM budget (the KV cache takes 2 MiB: 11 slots for 32
 * experts, so misses keep reading), the file
 * truncated 0.4 s in. */
static void truncated_under_cache(const char *cli, const char *pager_mode, const char *dir)
{
    const char *model = "tests/data/qwen3moe-tiny-F16.gguf";
    char copy[600], err[600], out[600], budget[32], cmd[1400];
    snprintf(copy, sizeof(copy), "%s/model.gguf", dir);
    snprintf(err, sizeof(err), "%s/err", dir);
    snprintf(out, sizeof(out), "%s/out.flrf", dir);
    snprintf(cmd, sizeof(cmd), "cp %s %s", model, copy);
    struct t_plan plan;
    char *disk[] = { "--disk-moe" };
    if (system(cmd) != 0 || t_plan_for(model, disk, 1, &plan)) {
        CHECK(0, "cannot copy or plan %s", model);
        return;
    }
    snprintf(budget, sizeof(budget), "%" PRIu64, plan.min_budget);
    char *argv[] = { (char *)cli, "eval", "-m", copy, "-p", "The capital of France is", "-n",
                     "3500", "-t", "2", "-c", "4096", "-ngl", "all", "--gpu-experts", "copy",
                     "--vram-budget", "3M", "--disk-moe", "--ram-budget", budget, "--pager",
                     (char *)pager_mode, "--logits-out", out, NULL };
    const double t0 = t_now();
    pid_t pid = t_spawn(argv, NULL, err);
    usleep(400000);
    siginfo_t si = { 0 };
    const bool running = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                         si.si_pid == 0;
    CHECK(running, "%s: the run ended before the file was truncated", pager_mode);
    CHECK(truncate(copy, 4096) == 0, "truncate: %s", strerror(errno));
    struct t_run r = t_wait(pid, t0, 60.0);
    char *msg = check_read_file(err, NULL);
    const int lines = t_count_lines(err);
    CHECK(r.status > 0 && r.status < 128, "%s: exit %d, expected an error exit (not a signal, "
          "not a hang)", pager_mode, r.status);
    CHECK(lines == 1, "%s: %d lines on stderr, expected one:\n%s", pager_mode, lines,
          msg ? msg : "");
    printf("file truncated under the VRAM cache (%s): exit %d after %.2f s: %s", pager_mode,
           r.status, r.seconds, msg ? msg : "\n");
    free(msg);
    unlink(copy);
    unlink(out);
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
    if (access("/dev/userfaultfd", R_OK | W_OK) == 0 || geteuid() == 0)
        truncated_under_cache(cli, "uffd", dir);
    truncated_under_cache(cli, "explicit", dir);
    char f[600];
    snprintf(f, sizeof(f), "%s/err", dir);
    unlink(f);
    snprintf(f, sizeof(f), "%s/out", dir);
    unlink(f);
    snprintf(f, sizeof(f), "%s/err", dir);
    unlink(f);
    rmdir(dir);
    return check_summary("test-gpu-errors");
#endif
}
