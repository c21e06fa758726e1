/* test-paged-util.h: what the paged-run suites share: running the CLI
 * ($FL_CLI) as a child with a time limit, its output captured in files,
 * comparing files byte for byte, reading numbers out of --stats-json, and
 * the placement plan (minimum budget, bytes per tier) for a set of flags. */
#ifndef FL_TEST_PAGED_UTIL_H
#define FL_TEST_PAGED_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "plan/placement.h"

extern char **environ;

#define CHECK_OUT stderr
#include "tests/check.h"

static inline void t_chdir_source(void)
{
    const char *src = getenv("FL_SOURCE_DIR");
    if (src && chdir(src) != 0)
        perror(src);
}

/* The CLI under test; exits 77 (skip) when it was not built. */
static inline const char *t_cli(void)
{
    const char *cli = getenv("FL_CLI");
    if (!cli || access(cli, X_OK) != 0) {
        printf("SKIP: no faultline CLI at %s (set FL_CLI)\n", cli ? cli : "(unset)");
        exit(77);
    }
    return cli;
}

static inline double t_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* How a child ended. */
struct t_run {
    int status;          /* exit code; 128+signal when killed by one; -1 when it timed out */
    double seconds;
    long maxrss_kib;     /* the child's peak RSS (getrusage of the waited child) */
};

/* Starts argv with stdout/stderr into out/err (NULL: /dev/null). */
static inline pid_t t_spawn(char *const argv[], const char *out, const char *err)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err ? err : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0)
        pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

/* Waits for pid at most limit seconds (then kills it: status -1). */
static inline struct t_run t_wait(pid_t pid, double t0, double limit)
{
    struct t_run r = { .status = -1 };
    struct rusage ru;
    int st = 0;
    for (;;) {
        pid_t w = wait4(pid, &st, WNOHANG, &ru);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return r;
        if (t_now() - t0 > limit) {
            kill(pid, SIGKILL);
            wait4(pid, &st, 0, &ru);
            r.seconds = t_now() - t0;
            return r;
        }
        usleep(2000);
    }
    r.seconds = t_now() - t0;
    r.maxrss_kib = ru.ru_maxrss;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

static inline struct t_run t_run_cmd(char *const argv[], const char *out, const char *err,
                                     double limit)
{
    double t0 = t_now();
    pid_t pid = t_spawn(argv, out, err);
    if (pid < 0) {
        struct t_run r = { .status = -1 };
        fprintf(stderr, "cannot start %s: %s\n", argv[0], strerror(errno));
        return r;
    }
    return t_wait(pid, t0, limit);
}

/* The whole file (NUL-terminated) or NULL; *len its size. */
/* 0 when both files exist and are byte-identical; else the first differing
 * offset + 1 (or -1 when one is missing, -2 when the sizes differ). */
static inline long t_cmp(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    char *x = check_read_file(a, &na), *y = check_read_file(b, &nb);
    long rc = 0;
    if (!x || !y)
        rc = -1;
    else if (na != nb)
        rc = -2;
    else
        for (size_t i = 0; i < na && !rc; i++)
            if (x[i] != y[i])
                rc = (long)i + 1;
    free(x);
    free(y);
    return rc;
}

/* Lines in a text file (a last line without '\n' counts); -1 when unreadable. */
static inline int t_count_lines(const char *path)
{
    size_t n = 0;
    char *b = check_read_file(path, &n);
    if (!b)
        return -1;
    int lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += b[i] == '\n';
    if (n && b[n - 1] != '\n')
        lines++;
    free(b);
    return lines;
}

/* The first `"key":NUMBER` in a --stats-json file (totals come first). */
static inline int t_json_u64(const char *path, const char *key, uint64_t *out)
{
    char *b = check_read_file(path, NULL), pat[64];
    if (!b)
        return -1;
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *p = strstr(b, pat);
    int rc = p ? 0 : -1;
    if (p)
        *out = strtoull(p + strlen(pat), NULL, 10);
    free(b);
    return rc;
}

/* What the placement module plans for these flags (the same flags the CLI
 * gets): the minimum budget and the bytes in each tier. */
struct t_plan {
    uint64_t min_budget, ram_bytes, disk_bytes, file_size;
};

static inline int t_plan_for(const char *model, char **flags, int n_flags, struct t_plan *out)
{
    struct fl_err err = { { 0 } };
    struct gguf_file *g = NULL;
    struct placement_plan *plan = NULL;
    struct placement_options o;
    placement_options_init(&o);
    int rc = gguf_open(model, &g, &err);
    for (int i = 0; !rc && i < n_flags; i++) {
        int took = placement_parse_flag(&o, n_flags, flags, &i, &err);
        if (took <= 0) /* the parser leaves i on the flag's last word; the loop moves on */
            rc = took < 0 ? took : -EINVAL;
    }
    struct placement_host host = { .have_gpu = false, .ram_available = UINT64_C(1) << 40 };
    if (!rc)
        rc = placement_plan_build(g, &o, &host, &plan, &err);
    if (!rc) {
        out->min_budget = placement_min_budget(plan);
        out->ram_bytes = placement_tier_bytes(plan, PL_TIER_RAM);
        out->disk_bytes = placement_tier_bytes(plan, PL_TIER_DISK);
        out->file_size = gguf_file_size(g);
    } else {
        fprintf(stderr, "%s: plan: %s\n", model, err.msg[0] ? err.msg : strerror(-rc));
    }
    placement_plan_free(plan);
    gguf_close(g);
    return rc;
}

#endif
