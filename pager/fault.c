/* fault.c: the userfaultfd, its handler thread and the watchdog.
 *
 * A fault never resolves a single page: it queues a demand load of the
 * whole unit the page belongs to (an expert's bytes in every expert tensor
 * of its layer) and records the page as pending. The I/O thread installs the
 * unit with UFFDIO_COPY (DONTWAKE), counts each pending page's stall and then
 * wakes its thread, so a stall is counted before its thread runs on. On failure the
 * pending pages are poisoned (UFFDIO_POISON): the faulting thread retries,
 * meets the poison marker and receives SIGBUS. That is why the pager wants
 * UFFD_FEATURE_POISON (Linux 6.6): without it the only ways to release a
 * faulting thread are a copy of real data or zero pages. */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pager/internal.h"
#include "pager/probes.h"

/* Older uapi headers (Debian 12 ships 6.1's) lack the poison ioctl. */
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)
#endif
#ifndef _UFFDIO_POISON
#define _UFFDIO_POISON 0x08
struct uffdio_poison {
    struct uffdio_range range;
    __u64 mode;
    __s64 updated;
};
#define UFFDIO_POISON _IOWR(UFFDIO, _UFFDIO_POISON, struct uffdio_poison)
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

/* 0 and p->uffd set, or -errno with the reason in err (quietly: the caller
 * decides whether this is an error or a fall-back to explicit mode). */
int pg_uffd_open(struct pager *p, struct fl_err *err)
{
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && (errno == EPERM || errno == ENOSYS)) {
        int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
        if (dev >= 0) {
            fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
            close(dev);
        }
    }
    if (fd < 0)
        return fl_err_set(err, -errno, "userfaultfd unavailable (%s; needs root, "
                          "CAP_SYS_PTRACE or access to /dev/userfaultfd)", strerror(errno));
    struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_POISON };
    if (ioctl(fd, UFFDIO_API, &api) < 0) {
        int e = errno;
        close(fd);
        return fl_err_set(err, -(e == EINVAL ? ENOTSUP : e),
                          "userfaultfd lacks UFFD_FEATURE_POISON (Linux >= 6.6): %s", strerror(e));
    }
    p->uffd = fd;
    return 0;
}

void pg_poison_page(struct pager *p, uint64_t page_off)
{
    if (!p->uffd_mode)
        return;
    struct uffdio_poison po = { .range = { (uintptr_t)(p->base + page_off), p->page } };
    if (ioctl(p->uffd, UFFDIO_POISON, &po) < 0 && errno == EEXIST)
        pg_wake_range(p, page_off, p->page); /* data arrived meanwhile */
}

void pg_wake_range(struct pager *p, uint64_t off, uint64_t len)
{
    struct uffdio_range r = { (uintptr_t)(p->base + off), len };
    ioctl(p->uffd, UFFDIO_WAKE, &r);
}

static bool page_present(struct pager *p, uint64_t page_off)
{
    unsigned char v = 0;
    return mincore(p->base + page_off, p->page, &v) == 0 && (v & 1);
}

/* The unit owning a byte of the page at page_off, or PG_NONE. */
static uint32_t unit_of_page(struct pager *p, uint64_t page_off)
{
    uint32_t k = pg_range_at(p, page_off);
    if (k >= p->n_ranges || p->ranges[p->by_off[k]].off >= page_off + p->page)
        return PG_NONE;
    return p->ranges[p->by_off[k]].unit;
}

static void handle_fault(struct pager *p, uint64_t page_off)
{
    atomic_store(&p->hb_busy_off, page_off);
    atomic_store(&p->hb_busy_since, pg_now_ns());
    if (p->cfg.hooks.on_fault)
        p->cfg.hooks.on_fault(p->cfg.hooks.ctx, page_off);
    pg_inc(&p->st.faults, 1);
    pthread_mutex_lock(&p->mu);
    uint32_t u = unit_of_page(p, page_off);
    if (atomic_load(&p->failed)) {
        pg_poison_page(p, page_off);
    } else if (u == PG_NONE) {
        pg_fail(p, -EFAULT, "%s: fault at offset %llu outside the paged data", p->path,
                (unsigned long long)page_off);
        pg_poison_page(p, page_off);
    } else {
        struct pg_unit *n = &p->units[u];
        pg_inc(&n->st.faults, 1);
        FL_PROBE_FAULT_BEGIN(n->layer, n->expert, p->ranges[n->first].kind, n->charge, page_off);
        if (page_present(p, page_off)) {
            /* installed while the message waited, by this unit's load or by a
             * neighbour's sharing the page: its bytes are the file's either way */
            pg_wake_range(p, page_off, p->page);
        } else {
            if (n->state == PG_ABSENT || n->state == PG_QUEUED)
                pg_inc(&p->st.fault_loads, 1);
            pg_pending_add_locked(p, page_off, u);
            if (n->state != PG_LOADING)
                pg_request_locked(p, u, true);
        }
    }
    pthread_mutex_unlock(&p->mu);
    atomic_store(&p->hb_busy_since, 0);
}

/* Reads fault messages until none is waiting; handle == false poisons them. */
static int drain(struct pager *p, bool handle)
{
    struct uffd_msg msg[16];
    for (;;) {
        ssize_t n = read(p->uffd, msg, sizeof(msg));
        if (n < 0)
            return errno == EAGAIN ? 0 : -errno;
        for (ssize_t i = 0; i < n / (ssize_t)sizeof(msg[0]); i++) {
            if (msg[i].event != UFFD_EVENT_PAGEFAULT)
                continue;
            uint64_t off = (msg[i].arg.pagefault.address - (uintptr_t)p->base) & ~(p->page - 1);
            if (handle) {
                handle_fault(p, off);
            } else {
                pthread_mutex_lock(&p->mu);
                pg_poison_page(p, off);
                pthread_mutex_unlock(&p->mu);
            }
        }
    }
}

static void *fault_main(void *arg)
{
    struct pager *p = arg;
    if (p->cfg.bind_thread)
        p->cfg.bind_thread(p->cfg.place_ctx);
    struct pollfd pf[2] = { { p->uffd, POLLIN, 0 }, { p->stop_efd, POLLIN, 0 } };
    for (;;) {
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents)
            break;
        if (pf[0].revents & POLLIN && drain(p, true) < 0)
            break;
    }
    atomic_store(&p->handler_gone, true);
    return NULL;
}

/* Checks the handler and the oldest pending fault; true once failed. */
static bool wd_check(struct pager *p, uint64_t limit_ns)
{
    uint64_t since = atomic_load(&p->hb_busy_since), now = pg_now_ns(); /* in this order */
    if (since && now - since > limit_ns) {
        pthread_mutex_lock(&p->mu);
        pg_fail(p, -ETIMEDOUT, "%s: fault handler stuck for %llu ms on offset %llu", p->path,
                (unsigned long long)((now - since) / 1000000),
                (unsigned long long)atomic_load(&p->hb_busy_off));
        pg_poison_page(p, atomic_load(&p->hb_busy_off));
        pthread_mutex_unlock(&p->mu);
    } else if (atomic_load(&p->handler_gone) && !atomic_load(&p->stopping)) {
        pthread_mutex_lock(&p->mu);
        pg_fail(p, -EPIPE, "%s: fault handler thread exited", p->path);
        pthread_mutex_unlock(&p->mu);
    }
    pthread_mutex_lock(&p->mu);
    now = pg_now_ns(); /* after the lock: no entry can be newer than now */
    for (uint32_t i = 0; i < p->n_pend && !atomic_load(&p->failed); i++) {
        if (now - p->pend[i].t_ns > limit_ns)
            pg_fail(p, -ETIMEDOUT, "%s: read for the fault at offset %llu stalled for %llu ms",
                    p->path, (unsigned long long)p->pend[i].page_off,
                    (unsigned long long)((now - p->pend[i].t_ns) / 1000000));
    }
    pthread_mutex_unlock(&p->mu);
    return atomic_load(&p->failed) != 0;
}

static void *wd_main(void *arg)
{
    struct pager *p = arg;
    uint64_t limit = (uint64_t)p->cfg.watchdog_ms * 1000000;
    int tick = (int)(p->cfg.watchdog_ms / 4 ? p->cfg.watchdog_ms / 4 : 1);
    if (tick > 250)
        tick = 250;
    struct pollfd pf = { p->stop_efd, POLLIN, 0 };
    for (;;) {
        int r = poll(&pf, 1, tick);
        if (r > 0 || (r < 0 && errno != EINTR))
            break;
        /* Once failed, faults no live handler takes are poisoned here, so a
         * dead or stuck handler never leaves a thread waiting forever. */
        if (wd_check(p, limit))
            drain(p, false);
    }
    return NULL;
}

int pg_fault_start(struct pager *p, struct fl_err *err)
{
    p->stop_efd = eventfd(0, EFD_CLOEXEC);
    if (p->stop_efd < 0)
        return fl_err_set(err, -errno, "%s: eventfd: %s", p->path, strerror(errno));
    int rc = pthread_create(&p->fault_thread, NULL, fault_main, p);
    if (rc)
        return fl_err_set(err, -rc, "%s: cannot start the fault thread: %s", p->path, strerror(rc));
    p->fault_started = true;
    rc = pthread_create(&p->wd_thread, NULL, wd_main, p);
    if (rc)
        return fl_err_set(err, -rc, "%s: cannot start the watchdog: %s", p->path, strerror(rc));
    p->wd_started = true;
    return 0;
}

void pg_fault_stop(struct pager *p)
{
    atomic_store(&p->stopping, true);
    if (p->stop_efd >= 0) {
        uint64_t one = 1;
        if (write(p->stop_efd, &one, sizeof(one)) < 0)
            (void)0; /* cannot fail for a fresh eventfd */
    }
    if (p->fault_started)
        pthread_join(p->fault_thread, NULL);
    if (p->wd_started)
        pthread_join(p->wd_thread, NULL);
    p->fault_started = p->wd_started = false;
    if (p->stop_efd >= 0)
        close(p->stop_efd);
    p->stop_efd = -1;
}
