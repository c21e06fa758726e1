/* trace-bpf.c: loads faultline.bpf.c (through its bpftool skeleton),
 * attaches it to one process and reads its maps and ring buffer. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ebpf/faultline.skel.h"
#include "ebpf/trace-bpf.h"

struct tr_session {
    struct faultline_bpf *skel;
    struct ring_buffer *rb;
    struct bpf_link *links[24];
    int n_links;
    struct bpf_link *ioctl_link;  /* sys_enter_ioctl, until the region is known */
    struct tr_session_opts o;
};

/* libbpf's last warning, to quote when an attach fails; the rest is noise. */
static char last_warning[256];

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    if (getenv("FL_TRACE_VERBOSE")) {
        va_list aq;
        va_copy(aq, ap);
        vfprintf(stderr, fmt, aq);
        va_end(aq);
    }
    if (level == LIBBPF_WARN)
        vsnprintf(last_warning, sizeof(last_warning), fmt, ap);
    return 0;
}

/* CAP_PERFMON (38) and CAP_BPF (39) from CapEff, or CAP_SYS_ADMIN (21). */
static bool have_caps(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t eff = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "CapEff: %" SCNx64, &eff) == 1)
            break;
    if (f)
        fclose(f);
    uint64_t want = (1ull << 38) | (1ull << 39);
    return (eff & want) == want || (eff & (1ull << 21));
}

int tr_session_check(struct fl_err *err)
{
    if (!have_caps())
        return fl_err_set(err, -EPERM, "faultline trace: needs root, or CAP_BPF and CAP_PERFMON "
                          "(try: sudo faultline trace ...)");
    if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
        return fl_err_set(err, -ENOTSUP, "faultline trace: this kernel has no BTF "
                          "(/sys/kernel/btf/vmlinux; needs CONFIG_DEBUG_INFO_BTF=y)");
    /* libbpf attaches tracepoints through tracefs; mount it where missing. */
    if (access("/sys/kernel/tracing/events", F_OK) != 0 &&
        access("/sys/kernel/debug/tracing/events", F_OK) != 0 &&
        mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) != 0)
        return fl_err_set(err, -errno, "faultline trace: tracefs is not mounted and mounting it "
                          "on /sys/kernel/tracing failed: %s", strerror(errno));
    return 0;
}

/* A region that is registered with userfaultfd shows "um" in its VmFlags:
 * the only way to find it in a process that set it up before we came. */
static void region_from_smaps(struct tr_session *s)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/smaps", (int)s->o.pid);
    FILE *f = fopen(path, "r");
    uint64_t a = 0, b = 0, lo = 0, hi = 0;
    while (f && fgets(line, sizeof(line), f)) {
        uint64_t x, y;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " ", &x, &y) == 2) {
            a = x;
            b = y;
        } else if (!strncmp(line, "VmFlags:", 8) && strstr(line, " um")) {
            lo = lo && lo < a ? lo : a;
            hi = hi > b ? hi : b;
        }
    }
    if (f)
        fclose(f);
    if (hi) {
        s->skel->bss->region_lo = lo;
        s->skel->bss->region_hi = hi;
    }
}

static int attach_one(struct tr_session *s, struct bpf_program *prog, const char *usdt,
                      bool required, struct fl_err *err)
{
    struct bpf_link *l;
    if (usdt)
        l = bpf_program__attach_usdt(prog, s->o.pid, s->o.binary, "faultline", usdt, NULL);
    else
        l = bpf_program__attach(prog);
    if (!l) {
        int e = -errno;
        if (!required)
            return 0;
        if (usdt)
            return fl_err_set(err, e, "faultline trace: cannot attach to faultline:%s in %s: %s%s",
                              usdt, s->o.binary, strerror(-e),
                              e == -ENOENT ? " (not a faultline binary, or built without "
                              "probes?)" : "");
        return fl_err_set(err, e, "faultline trace: cannot attach %s: %s", bpf_program__name(prog),
                          strerror(-e));
    }
    s->links[s->n_links++] = l;
    if (prog == s->skel->progs.uffd_register)
        s->ioctl_link = l;
    return 0;
}

static int attach_all(struct tr_session *s, struct fl_err *err)
{
    struct faultline_bpf *k = s->skel;
    /* Each uprobe costs the traced thread a trap (~1 us), so only what an
     * output needs is attached (docs/trace.md, Overhead). A load fires one
     * loaded; read_submit, read_done and installed fire per slice (gate, up,
     * down) for the read latency and the installs: --detail only, like the
     * io_uring tracepoints (two BPF runs per slice, in the I/O path). The hit
     * probe fires per acquire: only when attaching late, where the pager's
     * acquire counts would include what came before (count_acquires). */
    bool d = s->o.detail, late = s->o.region_from_maps;
    struct { struct bpf_program *p; const char *usdt; bool req; } v[] = {
        { k->progs.fault_begin, "fault_begin", true }, { k->progs.fault_end, "fault_end", true },
        { k->progs.loaded, "loaded", true },
        { d ? k->progs.read_submit : NULL, "read_submit", true },
        { d ? k->progs.read_done : NULL, "read_done", true },
        { d ? k->progs.installed : NULL, "installed", true },
        { k->progs.prefetch, "prefetch", true },       { k->progs.evict, "evict", true },
        { k->progs.acquired, "acquired", true },       { k->progs.acquires, "acquires", true },
        { late ? k->progs.hit : NULL, "hit", true },   { k->progs.region, "region", false },
        /* Optional: copies exist only in CUDA builds. */
        { k->progs.copy_begin, "copy_begin", false },  { k->progs.copy_end, "copy_end", false },
        { k->progs.page_fault_user, NULL, true },
        { d ? k->progs.uring_submit : NULL, NULL, true },
        { d ? k->progs.uring_complete : NULL, NULL, true },
    };
    bool region_probe = false;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        if (!v[i].p)
            continue;
        int n = s->n_links, rc = attach_one(s, v[i].p, v[i].usdt, v[i].req, err);
        if (rc < 0)
            return rc;
        region_probe |= v[i].p == k->progs.region && s->n_links > n;
    }
    /* The region probe names the region before the pager's first fault. A
     * binary without it (an older faultline) is watched for its
     * UFFDIO_REGISTER ioctls instead: a syscall tracepoint that slows every
     * syscall of every task while attached, so only then. A late attach
     * (-p) has missed both and read the region from smaps. */
    if (region_probe || s->o.region_from_maps)
        return 0;
    return attach_one(s, k->progs.uffd_register, NULL, true, err);
}

static int on_rb(void *ctx, void *data, size_t len)
{
    struct tr_session *s = ctx;
    if (len >= sizeof(struct fl_tr_event) && s->o.on_event)
        s->o.on_event(s->o.ctx, data);
    return 0;
}

int tr_session_open(const struct tr_session_opts *o, struct tr_session **out, struct fl_err *err)
{
    int rc = tr_session_check(err);
    if (rc < 0)
        return rc;
    libbpf_set_print(libbpf_quiet);
    struct tr_session *s = calloc(1, sizeof(*s));
    if (!s)
        return fl_err_set(err, -ENOMEM, "faultline trace: out of memory");
    s->o = *o;
    s->skel = faultline_bpf__open();
    if (!s->skel) {
        rc = fl_err_set(err, -errno, "faultline trace: cannot open the BPF object: %s",
                        strerror(errno));
        goto fail;
    }
    s->skel->rodata->targ_tgid = (uint32_t)o->pid;
    s->skel->rodata->emit_events = o->events;
    s->skel->rodata->emit_detail = o->detail;
    s->skel->rodata->count_acquires = !o->region_from_maps;
    if ((rc = faultline_bpf__load(s->skel)) < 0) {
        rc = fl_err_set(err, rc, "faultline trace: the kernel refused the BPF programs: %s%s%s",
                        strerror(-rc), last_warning[0] ? "; libbpf: " : "", last_warning);
        char *nl = strchr(err->msg, '\n');
        if (nl)
            *nl = 0;
        goto fail;
    }
    if (o->region_from_maps)
        region_from_smaps(s);
    if ((rc = attach_all(s, err)) < 0)
        goto fail;
    s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), on_rb, s, NULL);
    if (!s->rb) {
        rc = fl_err_set(err, -errno, "faultline trace: ring buffer: %s", strerror(errno));
        goto fail;
    }
    *out = s;
    return 0;
fail:
    tr_session_close(s);
    return rc;
}

int tr_session_poll(struct tr_session *s, int timeout_ms)
{
    /* Producers do not wake us (see emit() in faultline.bpf.c): wait for
     * the timeout, then take whatever is there. */
    int rc = ring_buffer__poll(s->rb, timeout_ms);
    if (rc < 0 && rc != -EINTR)
        return rc;
    int more = ring_buffer__consume(s->rb);
    return more < 0 ? more : (rc > 0 ? rc : 0) + more;
}

/* The per-CPU globals summed; FL_TG_ACQUIRES, the pager's count as of its
 * latest probe when counted from the pager (count_acquires), is the largest. */
static int collect_globals(struct tr_session *s, uint64_t *g)
{
    int n = libbpf_num_possible_cpus(), fd = bpf_map__fd(s->skel->maps.globals);
    if (n <= 0)
        return n < 0 ? n : -EINVAL;
    uint64_t *v = calloc((size_t)n, sizeof(*v));
    if (!v)
        return -ENOMEM;
    for (uint32_t i = 0; i < FL_TG_N; i++) {
        if (bpf_map_lookup_elem(fd, &i, v) != 0)
            continue;
        bool last = i == FL_TG_ACQUIRES && s->skel->rodata->count_acquires;
        g[i] = 0;
        for (int c = 0; c < n; c++)
            g[i] = last ? (v[c] > g[i] ? v[c] : g[i]) : g[i] + v[c];
    }
    free(v);
    return 0;
}

int tr_session_collect(struct tr_session *s, struct tr_stats *st)
{
    struct fl_tr_key key, next, *prev = NULL;
    int fd = bpf_map__fd(s->skel->maps.counts);
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
        struct fl_tr_counts c;
        key = next;
        prev = &key;
        if (bpf_map_lookup_elem(fd, &key, &c) != 0)
            continue;
        struct fl_tr_counts *d = tr_stats_counts(st, key.layer, key.expert, key.kind);
        if (!d)
            return -ENOMEM;
        *d = c;
    }
    fd = bpf_map__fd(s->skel->maps.hists);
    prev = NULL;
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
        struct fl_tr_hist h;
        key = next;
        prev = &key;
        if (bpf_map_lookup_elem(fd, &key, &h) != 0)
            continue;
        struct fl_tr_hist *d = tr_stats_hist(st, &key);
        if (!d)
            return -ENOMEM;
        *d = h;
    }
    return collect_globals(s, tr_stats_globals(st));
}

/* A syscall tracepoint puts every syscall of every task on the slow path
 * while attached: drop it as soon as the region is registered. */
void tr_session_region_known(struct tr_session *s)
{
    for (int i = 0; s->ioctl_link && i < s->n_links; i++)
        if (s->links[i] == s->ioctl_link) {
            bpf_link__destroy(s->links[i]);
            s->links[i] = s->links[--s->n_links];
            s->ioctl_link = NULL;
        }
}

void tr_session_close(struct tr_session *s)
{
    if (!s)
        return;
    ring_buffer__free(s->rb);
    for (int i = 0; i < s->n_links; i++)
        bpf_link__destroy(s->links[i]);
    faultline_bpf__destroy(s->skel);
    free(s);
}
