/* trace-live.c: the live half of `faultline trace`: starts the command
 * paused, attaches, lets it run, and turns the event stream into the
 * timeline, the top stalls and the per-thread view.
 *
 * The child must not run before the probes are in: it is forked, waits on a
 * pipe until the session is attached to its pid, then execs. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ebpf/cli-trace.h"
#include "ebpf/trace-bpf.h"
#include "ebpf/trace-file.h"
#include "ebpf/trace-json.h"

#define PF_RING 64
#define WAITERS 4096
#define HUGE_2M (2ull << 20)

struct waiter { uint64_t page; uint64_t ts; uint32_t tid; };

struct live {
    const struct trace_args *a;
    struct tr_session *session;
    bool region_known;
    struct tr_stats *st;
    struct tr_json *json;
    pid_t pid;
    uint64_t base;               /* region address of file offset 0; 0 = not known yet */
    struct waiter recent[PF_RING]; /* page faults before the base was known (raw addresses) */
    int n_recent;
    struct waiter w[WAITERS];    /* threads waiting on a page offset */
    bool roled[TR_MAX_THREADS];  /* thread i's role was looked at */
    struct rusage child_ru;      /* the launched command's, once it exited */
    double tracer_cpu;           /* our own CPU seconds while it ran */
};

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) { (void)sig; interrupted = 1; }

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void read_comm(pid_t pid, uint32_t tid, char *buf, size_t n)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%u/comm", (int)pid, tid);
    FILE *f = fopen(path, "r");
    buf[0] = 0;
    if (f && fgets(buf, (int)n, f))
        buf[strcspn(buf, "\n")] = 0;
    if (f)
        fclose(f);
}

/* A thread's name is its comm (from its FL_TR_THREAD event, else /proc);
 * helper threads also get the role their first event shows. */
static void name_thread(struct live *l, uint32_t tid, int type, const char *comm)
{
    const struct tr_thread *all;
    struct tr_thread *t = tr_stats_thread(l->st, tid);
    if (!t)
        return;
    int i = (int)(t - (tr_stats_n_threads(l->st, &all), all));
    if (comm) {
        snprintf(t->name, sizeof(t->name), "%.15s", comm);
        return;
    }
    if (!t->name[0])
        read_comm(l->pid, tid, t->name, sizeof(t->name));
    if (l->roled[i])
        return;
    l->roled[i] = true;
    const char *role = type == FL_TR_FAULT_BEGIN ? "fault" : type == FL_TR_READ_DONE ||
                       type == FL_TR_INSTALLED || type == FL_TR_LOADED ? "io" : NULL;
    char base[16];
    snprintf(base, sizeof(base), "%s", t->name[0] ? t->name : "?");
    if (tid != (uint32_t)l->pid && role)
        snprintf(t->name, sizeof(t->name), "%.9s/%s", base, role);
    else
        snprintf(t->name, sizeof(t->name), "%s", base);
}

static void waiter_put(struct live *l, uint64_t page, uint32_t tid, uint64_t ts)
{
    l->w[(page >> 12) % WAITERS] = (struct waiter){ page, ts, tid };
}

/* Without the region probe the base is inferred: a page fault and the
 * pager's fault_begin for the same page differ by it, and the pager maps
 * the file at a 2 MiB boundary. Then the faults seen so far are replayed. */
static void learn_base(struct live *l, uint64_t page_off)
{
    for (int i = l->n_recent - 1; i >= 0 && !l->base; i--) {
        uint64_t a = l->recent[i].page;
        if (a >= page_off && (a - page_off) % HUGE_2M == 0)
            l->base = a - page_off;
    }
    for (int i = 0; l->base && i < l->n_recent; i++)
        if (l->recent[i].page >= l->base)
            waiter_put(l, l->recent[i].page - l->base, l->recent[i].tid, l->recent[i].ts);
    if (l->base)
        l->n_recent = 0;
}

static void on_event(void *ctx, const struct fl_tr_event *e)
{
    struct live *l = ctx;
    struct fl_tr_event ev = *e;
    uint32_t waiter = 0;
    uint64_t wait_ts = 0;
    if (ev.type == FL_TR_THREAD) {
        char comm[17];
        memcpy(comm, &ev.bytes, 16);
        comm[16] = 0;
        name_thread(l, ev.tid, ev.type, comm);
        return;
    }
    if (ev.type != FL_TR_URING_DONE) /* completions run on whatever CPU context */
        name_thread(l, ev.tid, ev.type, NULL);
    if (ev.type == FL_TR_REGION) {
        l->base = ev.offset;
        return;
    } else if (ev.type == FL_TR_PAGE_FAULT) {
        uint64_t page = ev.offset & ~4095ull;
        if (l->base) {
            ev.offset = page - l->base;
            waiter_put(l, ev.offset, ev.tid, ev.ts_ns);
        } else {
            l->recent[l->n_recent++ % PF_RING] = (struct waiter){ page, ev.ts_ns, ev.tid };
            if (l->n_recent > PF_RING)
                l->n_recent = PF_RING;
        }
    } else if (ev.type == FL_TR_FAULT_BEGIN) {
        /* The pager registers its region before its first fault. */
        if (!l->region_known && l->session)
            tr_session_region_known(l->session);
        l->region_known = true;
        if (!l->base && l->n_recent)
            learn_base(l, ev.offset);
    } else if (ev.type == FL_TR_FAULT_END) {
        struct waiter *w = &l->w[(ev.offset >> 12) % WAITERS];
        if (w->tid && w->page == ev.offset) {
            waiter = w->tid;
            wait_ts = w->ts;
            w->tid = 0;
        }
    }
    if (ev.type != FL_TR_URING_DONE)
        tr_stats_event(l->st, &ev, waiter);
    if (l->json)
        tr_json_event(l->json, &ev, waiter, wait_ts);
}

/* argv[0] as a path: as given when it has a '/', else found in PATH. */
static int find_exe(const char *name, char *out, size_t n)
{
    if (strchr(name, '/'))
        return realpath(name, out) ? 0 : -errno;
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, ":");
        char cand[PATH_MAX];
        snprintf(cand, sizeof(cand), "%.*s/%s", (int)len, p, name);
        if (access(cand, X_OK) == 0 && realpath(cand, out))
            return 0;
        p += len + (p[len] == ':');
    }
    (void)n;
    return -ENOENT;
}

static void command_line(const struct trace_args *a, pid_t pid, char *out, size_t n)
{
    out[0] = 0;
    if (a->cmd) {
        for (char **c = a->cmd; *c; c++)
            snprintf(out + strlen(out), n - strlen(out), "%s%s", c == a->cmd ? "" : " ", *c);
        return;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "r");
    size_t r = f ? fread(out, 1, n - 1, f) : 0;
    for (size_t i = 0; i < r; i++)
        out[i] = out[i] ? out[i] : ' ';
    out[r] = 0;
    if (f)
        fclose(f);
}

/* Forks the command stopped on a pipe; *go releases it. */
static pid_t spawn_paused(char **cmd, int *go)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(p[1]);
        signal(SIGINT, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        if (read(p[0], &c, 1) != 1)
            _exit(126);          /* the tracer gave up */
        execvp(cmd[0], cmd);
        fprintf(stderr, "faultline trace: cannot run %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    close(p[0]);
    if (pid < 0) {
        close(p[1]);
        return -1;
    }
    *go = p[1];
    return pid;
}

static bool target_alive(struct live *l, int *status)
{
    if (l->a->cmd) {
        pid_t r = wait4(l->pid, status, WNOHANG, &l->child_ru);
        return r == 0;
    }
    /* Attached: alive while /proc has it and it is not a zombie. */
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)l->pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

static double cpu_secs(const struct rusage *ru)
{
    return (double)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) +
           (double)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1e6;
}

static double self_cpu(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? cpu_secs(&ru) : 0.0;
}

static void run_loop(struct live *l, struct tr_session *s, int *status)
{
    double cpu0 = self_cpu();
    struct tr_stats *prev = tr_stats_new();
    uint64_t t0 = mono_ns(), tick = t0, every = (uint64_t)(l->a->interval * 1e9);
    bool alive = true;
    while (alive && !(interrupted && !l->a->cmd)) {
        tr_session_poll(s, 100);
        alive = target_alive(l, status);
        uint64_t now = mono_ns();
        if (every && !l->a->quiet && prev && now - tick >= every) {
            tr_session_collect(s, l->st);
            tr_stats_meta(l->st)->duration_ns = now - t0;
            tr_print_live(prev, l->st, (double)(now - tick) / 1e9, stderr, 5);
            tr_stats_copy(prev, l->st);
            tick = now;
        }
    }
    while (tr_session_poll(s, 0) > 0) /* drain what is left */
        ;
    tr_session_collect(s, l->st);
    tr_stats_meta(l->st)->duration_ns = mono_ns() - t0;
    tr_stats_free(prev);
    l->tracer_cpu = self_cpu() - cpu0;
}

static int open_json(struct live *l, FILE **jf)
{
    *jf = NULL;
    if (!l->a->out)
        return 0;
    int rc;
    /* gzip when the final name ends in .gz (the temporary name does not) */
    *jf = tr_file_create(l->a->out_tmp ? l->a->out_tmp : l->a->out, tr_file_is_gz_name(l->a->out),
                         &rc);
    if (*jf)
        setvbuf(*jf, NULL, _IOFBF, 1 << 20); /* events come by the thousand */
    if (*jf && !(l->json = tr_json_begin(*jf, (uint32_t)l->pid, mono_ns())))
        rc = -ENOMEM;
    if (rc < 0) {
        fprintf(stderr, "faultline trace: %s: %s\n", l->a->out, strerror(-rc));
        return -1;
    }
    return 0;
}

static int exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ?
           128 + WTERMSIG(status) : 1;
}

int trace_live(const struct trace_args *a, bool *written)
{
    *written = false;
    struct fl_err err = { { 0 } };
    if (tr_session_check(&err) < 0) {  /* before starting anything */
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    char exe[PATH_MAX];
    int go = -1, status = 0, rc;
    if (a->cmd && (rc = find_exe(a->cmd[0], exe, sizeof(exe))) < 0) {
        fprintf(stderr, "faultline trace: cannot find %s: %s\n", a->cmd[0], strerror(-rc));
        return 1;
    }
    if (!a->cmd) {
        snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)a->pid);
        if (access(exe, F_OK) != 0) {
            fprintf(stderr, "faultline trace: no process %d\n", (int)a->pid);
            return 1;
        }
    }
    struct live *l = calloc(1, sizeof(*l));
    if (!l || !(l->st = tr_stats_new()))
        return 1;
    l->a = a;
    l->pid = a->cmd ? spawn_paused(a->cmd, &go) : a->pid;
    if (l->pid < 0) {
        fprintf(stderr, "faultline trace: fork: %s\n", strerror(errno));
        return 1;
    }
    struct tr_meta *m = tr_stats_meta(l->st);
    m->pid = (uint32_t)l->pid;
    command_line(a, l->pid, m->command, sizeof(m->command));
    FILE *jf = NULL;
    struct tr_session *s = NULL;
    /* Events always: the top stalls and per-thread view come from them. */
    struct tr_session_opts o = { .pid = l->pid, .binary = exe, .events = true,
                                 .detail = a->detail, .region_from_maps = !a->cmd,
                                 .on_event = on_event, .ctx = l };
    rc = open_json(l, &jf);
    if (rc == 0 && (rc = tr_session_open(&o, &s, &err)) < 0)
        fprintf(stderr, "%s\n", err.msg);
    if (go >= 0) {
        if (rc == 0 && write(go, "g", 1) != 1)
            rc = -EPIPE;
        close(go);           /* on failure the child sees EOF and exits */
    }
    l->session = s;
    if (rc == 0) {
        signal(SIGINT, on_sigint); /* launch: the child gets ^C too; we wait for it */
        signal(SIGPIPE, SIG_IGN);  /* a closed pipe on stderr must not lose the trace */
        run_loop(l, s, &status);
        tr_session_close(s);
        int r2 = l->json ? tr_json_end(l->json, l->st) : 0;
        if (jf && fclose(jf) != 0 && r2 == 0) /* a gzip file's last block is written here */
            r2 = -EIO;
        jf = NULL;
        if (r2 < 0)
            fprintf(stderr, "faultline trace: %s: %s\n", a->out, strerror(-r2));
        rc = trace_finish(a, l->st, stderr) || r2 < 0 ? -EIO : 0;
        /* What tracing cost: the probe handlers run on the command's CPU
         * time, draining and formatting the events on ours. */
        if (a->cmd)
            fprintf(stderr, "cpu: command %.3f s (probe handlers included), tracer %.3f s\n",
                    cpu_secs(&l->child_ru), l->tracer_cpu);
        if (a->out && r2 == 0)
            fprintf(stderr, "trace: %s (open in https://ui.perfetto.dev)\n", a->out);
    } else if (a->cmd) {
        waitpid(l->pid, &status, 0);
    }
    if (jf)
        fclose(jf);
    tr_stats_free(l->st);
    free(l);
    if (rc < 0)
        return 1;
    *written = true;
    return a->cmd ? exit_code(status) : 0;
}
