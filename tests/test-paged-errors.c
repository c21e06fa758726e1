/* test-paged-errors: what a paged run does when its file changes under it.
 *
 * - Truncated in place mid-run (uffd and explicit mode, experts paged at the
 *   minimum budget so reads never stop; and in uffd mode with a non-expert
 *   tensor paged too, so the failure reaches a thread through a fault and
 *   SIGBUS rather than through acquire): the run must end within seconds,
 *   by exit (not a signal), with exactly one line on stderr.
 * - Replaced mid-run (another file renamed over the path): the run keeps
 *   its open file, finishes, and its logits equal an undisturbed run's.
 * - A budget far too small, and a file that is not a model: one line, exit 1. */
#include "tests/test-paged-util.h"

#define MODEL "tests/data/qwen3moe-tiny-F16.gguf"
#define OTHER "tests/data/qwen3moe-tiny-Q8_0.gguf"
#define LIMIT_S 60.0

static const char *cli;
static char dir[] = "/tmp/test-paged-errors.XXXXXX";
static char path_model[600], path_err[600], path_out[600];

static int copy_file(const char *from, const char *to)
{
    size_t n = 0;
    char *b = check_read_file(from, &n);
    FILE *f = b ? fopen(to, "wb") : NULL;
    int rc = f && fwrite(b, 1, n, f) == n ? 0 : -1;
    if (f && fclose(f))
        rc = -1;
    free(b);
    return rc;
}

/* eval over the copy with the given flags, N generated tokens, in the background. */
static pid_t start_eval(char *const *flags, int n_flags, const char *n_gen, const char *out)
{
    char *argv[32] = { (char *)cli, "eval", "-m", path_model, "-p", "The capital of France is",
                       "-n", (char *)n_gen, "-t", "2", "--logits-out", (char *)out };
    int n = 12;
    for (int i = 0; i < n_flags; i++)
        argv[n++] = flags[i];
    argv[n] = NULL;
    return t_spawn(argv, NULL, path_err);
}

/* Lets the run get going (past loading, into paging), then does `what`. */
static bool still_running_after(pid_t pid, double seconds)
{
    usleep((useconds_t)(seconds * 1e6));
    siginfo_t si = { 0 };  /* WNOWAIT: t_wait reaps it later, with its rusage */
    return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0;
}

static void truncated(const char *what, char *const *flags, int n_flags)
{
    if (copy_file(MODEL, path_model)) {
        CHECK(0, "cannot copy %s", MODEL);
        return;
    }
    double t0 = t_now();
    pid_t pid = start_eval(flags, n_flags, "3500", path_out);
    bool running = still_running_after(pid, 0.4);
    CHECK(running, "%s: the run ended before the file was truncated", what);
    int rc = truncate(path_model, 4096);
    CHECK(rc == 0, "truncate: %s", strerror(errno));
    struct t_run r = t_wait(pid, t0, LIMIT_S);
    char *msg = check_read_file(path_err, NULL);
    int lines = t_count_lines(path_err);
    CHECK(r.status != -1, "%s: still running %.0f s after the truncation (hang)", what, LIMIT_S);
    CHECK(r.status > 0 && r.status < 128, "%s: exit %d, expected an error exit (not a signal)",
          what, r.status);
    CHECK(lines == 1, "%s: %d lines on stderr, expected one:\n%s", what, lines, msg ? msg : "");
    printf("  %-44s exit %d after %.2f s: %s", what, r.status, r.seconds, msg ? msg : "\n");
    free(msg);
}

static void replaced(const char *what, char *const *flags, int n_flags)
{
    char ref[700], other[700];
    snprintf(ref, sizeof(ref), "%s/undisturbed.flrf", dir);
    snprintf(other, sizeof(other), "%s/other.gguf", dir);
    if (copy_file(MODEL, path_model) || copy_file(OTHER, other)) {
        CHECK(0, "cannot copy the models");
        return;
    }
    double t0 = t_now();
    struct t_run r = t_wait(start_eval(flags, n_flags, "400", ref), t0, LIMIT_S);
    CHECK(r.status == 0, "%s: the undisturbed run failed (exit %d)", what, r.status);
    t0 = t_now();
    pid_t pid = start_eval(flags, n_flags, "400", path_out);
    bool running = still_running_after(pid, 0.3);
    CHECK(rename(other, path_model) == 0, "rename: %s", strerror(errno));
    r = t_wait(pid, t0, LIMIT_S);
    long d = t_cmp(ref, path_out);
    CHECK(running, "%s: the run ended before the file was replaced", what);
    CHECK(r.status == 0, "%s: exit %d after the file was replaced", what, r.status);
    CHECK(d == 0, "%s: logits differ from the undisturbed run (%ld)", what, d);
    printf("  %-44s exit %d after %.2f s, logits %s\n", what, r.status, r.seconds,
           d == 0 ? "identical" : "DIFFERENT");
}

static void one_line_error(const char *what, char *const *argv_tail, int n_tail)
{
    char *argv[24] = { (char *)cli, "eval", "-p", "x", "--logits-out", path_out };
    int n = 6;
    for (int i = 0; i < n_tail; i++)
        argv[n++] = argv_tail[i];
    argv[n] = NULL;
    struct t_run r = t_run_cmd(argv, NULL, path_err, LIMIT_S);
    char *msg = check_read_file(path_err, NULL);
    CHECK(r.status > 0 && r.status < 128, "%s: exit %d, expected an error exit", what, r.status);
    CHECK(t_count_lines(path_err) == 1, "%s: expected one line on stderr:\n%s", what,
          msg ? msg : "");
    printf("  %-44s exit %d: %s", what, r.status, msg ? msg : "\n");
    free(msg);
}

int main(void)
{
    t_chdir_source();
    cli = t_cli();
    if (!mkdtemp(dir))
        return perror("mkdtemp"), 1;
    snprintf(path_model, sizeof(path_model), "%s/model.gguf", dir);
    snprintf(path_err, sizeof(path_err), "%s/stderr", dir);
    snprintf(path_out, sizeof(path_out), "%s/out.flrf", dir);
    struct t_plan plan;
    char *disk[] = { "--disk-moe" };
    if (t_plan_for(MODEL, disk, 1, &plan))
        return 1;
    char budget[32], budget_ot[32];
    snprintf(budget, sizeof(budget), "%" PRIu64, plan.min_budget);
    char *ot[] = { "-ot", "attn_output=disk,exps=disk" };
    if (t_plan_for(MODEL, ot, 2, &plan))
        return 1;
    snprintf(budget_ot, sizeof(budget_ot), "%" PRIu64, plan.min_budget);
    bool uffd = access("/dev/userfaultfd", R_OK | W_OK) == 0 || geteuid() == 0;
    if (!uffd)
        printf("uffd mode: skipped (no access to userfaultfd)\n");

    char *uffd_experts[] = { "--disk-moe", "--ram-budget", budget, "--pager", "uffd" };
    char *explicit_experts[] = { "--disk-moe", "--ram-budget", budget, "--pager", "explicit" };
    char *uffd_faults[] = { "-ot", "attn_output=disk,exps=disk", "--ram-budget", budget_ot,
                            "--pager", "uffd" };
    printf("file truncated mid-run:\n");
    if (uffd) {
        truncated("uffd, experts paged", uffd_experts, 5);
        truncated("uffd, attn_output faulted in too", uffd_faults, 6);
    }
    truncated("explicit, experts paged", explicit_experts, 5);

    printf("file replaced (renamed over) mid-run:\n");
    if (uffd)
        replaced("uffd, experts paged", uffd_experts, 5);
    replaced("explicit, experts paged", explicit_experts, 5);

    printf("bad input:\n");
    char *tiny[] = { "-m", MODEL, "--disk-moe", "--ram-budget", "4K" };
    one_line_error("--ram-budget 4K", tiny, 5);
    char *not_model[] = { "-m", "tests/data/trace-sample.json", "--ram-budget", "4K" };
    one_line_error("not a GGUF file", not_model, 4);
    char *bad_mode[] = { "-m", MODEL, "--pager", "sometimes" };
    one_line_error("--pager sometimes", bad_mode, 4);

    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    printf("%s\n", failures ? "FAILED" : "all errors clean");
    return failures ? 1 : 0;
}
