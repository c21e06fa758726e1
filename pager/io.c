/* io.c: reads with io_uring (O_DIRECT where the file system allows it) into
 * pinned staging slots, and their installation into the region: UFFDIO_COPY
 * in uffd mode, a copy of the unit's exact bytes in explicit mode.
 *
 * One I/O thread owns the ring. Requesters queue units (residency.c) and
 * kick an eventfd whose read is itself an SQE, so the thread has one place
 * to sleep: io_uring_wait_cqe. */
#include <errno.h>
#include <fcntl.h>
#include <linux/stat.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pager/internal.h"
#include "pager/probes.h"

#define RING_DEPTH 128
#define SYNC_CHUNK (8ull << 20)
#define SYNC_QD 8
#define MAX_RETRIES 64
#define EFD_TAG ((uint64_t)1)
#define SLOT_BYTES (64ull << 20)   /* staging memory to aim for */

static int apply_hook(struct pager *p, uint64_t off, uint64_t len, int res)
{
    if (p->cfg.hooks.read_result)
        return p->cfg.hooks.read_result(p->cfg.hooks.ctx, off, len, res);
    return res;
}

/* Opens one file of the store: its size checked, and O_DIRECT where its
 * file system has it (*align: what it wants; 0 when it has none). */
static int open_file(struct pager *p, struct pg_file *f, uint64_t *align, struct fl_err *err)
{
    f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return fl_err_set(err, -errno, "%s: %s", f->path, strerror(errno));
    struct stat st;
    if (fstat(f->fd, &st) < 0)
        return fl_err_set(err, -errno, "%s: %s", f->path, strerror(errno));
    if ((uint64_t)st.st_size != f->size)
        return fl_err_set(err, -EINVAL, "%s: file is %llu bytes, its header was parsed from %llu",
                          f->path, (unsigned long long)st.st_size, (unsigned long long)f->size);
    *align = 0;
    if (p->cfg.direct == PAGER_DIRECT_OFF)
        return 0;
    struct statx sx;
    uint64_t al = 4096; /* what O_DIRECT wants where statx cannot say */
    if (statx(f->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
        (sx.stx_mask & STATX_DIOALIGN)) {
        if (sx.stx_dio_offset_align == 0) { /* the file system has no O_DIRECT */
            if (p->cfg.direct == PAGER_DIRECT_ON)
                return fl_err_set(err, -EINVAL, "%s: file system does not support O_DIRECT",
                                  f->path);
            return 0;
        }
        al = sx.stx_dio_offset_align > sx.stx_dio_mem_align ? sx.stx_dio_offset_align
                                                            : sx.stx_dio_mem_align;
    }
    f->dfd = open(f->path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (f->dfd < 0) {
        if (p->cfg.direct == PAGER_DIRECT_ON)
            return fl_err_set(err, -errno, "%s: O_DIRECT: %s", f->path, strerror(errno));
        return 0;
    }
    *align = al < p->page ? p->page : al;
    return 0;
}

/* Every file; O_DIRECT when all of them have it at an alignment their
 * places in the region keep. */
int pg_io_open(struct pager *p, struct fl_err *err)
{
    uint64_t align = 0;
    bool direct = p->cfg.direct != PAGER_DIRECT_OFF;
    for (int i = 0; i < p->n_files; i++) {
        uint64_t al = 0;
        int rc = open_file(p, &p->files[i], &al, err);
        if (rc)
            return rc;
        direct = direct && al && p->files[i].base % al == 0;
        align = al > align ? al : align;
    }
    p->dio_align = direct ? align : 0;
    p->direct = direct;
    return 0;
}

const struct pg_file *pg_file_at(const struct pager *p, uint64_t off)
{
    int lo = 0, hi = p->n_files - 1; /* the last file whose base is <= off */
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (p->files[mid].base <= off)
            lo = mid;
        else
            hi = mid - 1;
    }
    return &p->files[lo];
}

/* How much of the window [off, off + len) the file holds: it ends short at
 * the file's end. */
static uint64_t file_holds(const struct pg_file *f, uint64_t off, uint64_t len)
{
    const uint64_t end = f->base + f->size;
    return (off + len < end ? off + len : end) - off;
}

/* A staging buffer: hugetlb pages when the system has them reserved, else
 * plain pages rounded to the page size only (rounding every slot up to 2 MiB
 * would pin up to 16 x 2 MiB of RAM outside the budget for small experts). */
static void *slot_alloc(const struct pager *p, uint64_t size, uint64_t *map_len)
{
    const uint64_t huge = 2ull << 20, page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t len = (size + huge - 1) & ~(huge - 1);
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
    if (m == MAP_FAILED) {
        len = (size + page - 1) / page * page;
        m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        if (len >= huge)
            madvise(m, len, MADV_HUGEPAGE);
    }
    if (p->cfg.place_memory) /* before mlock: pinned pages do not move */
        p->cfg.place_memory(p->cfg.place_ctx, m, len);
    /* Pinned so that a staging buffer never faults or swaps mid-read; a
     * failure (RLIMIT_MEMLOCK) only costs speed. */
    (void)mlock(m, len);
    *map_len = len;
    return m;
}

/* Staging slots for units of up to `window` bytes: SLOT_BYTES' worth, 2..16. */
static int slot_count(uint64_t window)
{
    uint64_t n = SLOT_BYTES / (window ? window : 1);
    return n < 2 ? 2 : n > 16 ? 16 : (int)n;
}

uint64_t pager_staging_bytes(uint64_t unit_bytes)
{
    const uint64_t huge = 2ull << 20;
    /* O_DIRECT's alignment at both ends of each range (an expert's gate, up
     * and down slices are three) */
    uint64_t window = unit_bytes + 3 * 2 * 4096;
    return (uint64_t)slot_count(window) * ((window + huge - 1) & ~(huge - 1));
}

static int slots_init(struct pager *p)
{
    uint64_t size = p->max_unit_window;
    int n = slot_count(size);
    p->slots = calloc((size_t)n, sizeof(*p->slots));
    if (!p->slots)
        return -ENOMEM;
    p->n_slots = n;
    for (int i = 0; i < n; i++) {
        p->slots[i].buf = slot_alloc(p, size, &p->slots[i].map_len);
        p->slots[i].size = size;
        p->slots[i].reads = calloc(p->max_ranges, sizeof(struct pg_read));
        if (!p->slots[i].buf || !p->slots[i].reads)
            return -ENOMEM;
    }
    return 0;
}

void pg_io_close(struct pager *p)
{
    for (int i = 0; p->slots && i < p->n_slots; i++) {
        if (p->slots[i].buf)
            munmap(p->slots[i].buf, p->slots[i].map_len);
        free(p->slots[i].reads);
    }
    free(p->slots);
    p->slots = NULL;
    if (p->ring_ok)
        io_uring_queue_exit(&p->ring);
    p->ring_ok = false;
    if (p->io_efd >= 0)
        close(p->io_efd);
    for (int i = 0; p->files && i < p->n_files; i++) {
        if (p->files[i].dfd >= 0)
            close(p->files[i].dfd);
        if (p->files[i].fd >= 0)
            close(p->files[i].fd);
        p->files[i].fd = p->files[i].dfd = -1;
    }
    p->io_efd = -1;
}

/* --- synchronous reads (before the threads run, and for the bench) ------- */

struct sync_rd {
    uint64_t off, len, done;
    uint8_t *dst;
    const struct pg_file *file;
    int fd;
    int retries;
};

static void sync_submit(struct pager *p, struct sync_rd *r)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&p->ring);
    io_uring_prep_read(sqe, r->fd, r->dst + r->done, (unsigned)(r->len - r->done),
                       r->off - r->file->base + r->done);
    io_uring_sqe_set_data(sqe, r);
}

/* Handles one completion: 1 = finished, 0 = resubmitted, <0 = error. */
static int sync_complete(struct pager *p, struct sync_rd *r, int res)
{
    res = apply_hook(p, r->off + r->done, r->len - r->done, res);
    const uint64_t want = file_holds(r->file, r->off, r->len);
    if (res == -EINTR || res == -EAGAIN) {
        pg_inc(&p->st.reads_retried, 1);
        if (++r->retries > MAX_RETRIES)
            return res;
    } else if (res < 0) {
        return res;
    } else if (res == 0 && r->done < want) {
        return -ENODATA;
    } else {
        r->done += (uint64_t)res;
        if (r->done >= want)
            return 1;
        pg_inc(&p->st.reads_retried, 1);
        if (p->dio_align && r->done % p->dio_align)
            r->fd = r->file->fd; /* an unaligned remainder goes through the page cache */
    }
    sync_submit(p, r);
    return 0;
}

int pg_read_sync(struct pager *p, uint64_t off, uint64_t len, uint8_t *dst, struct fl_err *err)
{
    struct sync_rd rd[SYNC_QD];
    for (int i = 0; i < SYNC_QD; i++)
        rd[i].done = UINT64_MAX; /* free */
    uint64_t next = off, end = off + len;
    int inflight = 0, rc = 0;
    bool aligned = p->direct && off % p->dio_align == 0 && (uintptr_t)dst % p->dio_align == 0;
    while ((next < end && rc == 0) || inflight > 0) {
        while (next < end && rc == 0 && inflight < SYNC_QD) {
            const struct pg_file *f = pg_file_at(p, next);
            if (next >= f->base + f->size) { /* between files: no bytes to read */
                next = f + 1 < p->files + p->n_files && f[1].base < end ? f[1].base : end;
                continue;
            }
            struct sync_rd *r = NULL;
            for (int i = 0; i < SYNC_QD && !r; i++)
                if (rd[i].done == UINT64_MAX)
                    r = &rd[i];
            uint64_t n = file_holds(f, next, end - next);
            n = n < SYNC_CHUNK ? n : SYNC_CHUNK;
            if (aligned) /* O_DIRECT lengths are whole blocks; EOF ends it short */
                n = (n + p->dio_align - 1) / p->dio_align * p->dio_align;
            *r = (struct sync_rd){ next, n, 0, dst + (next - off), f, aligned ? f->dfd : f->fd, 0 };
            sync_submit(p, r);
            next += n;
            inflight++;
        }
        if (!inflight)
            break;
        io_uring_submit(&p->ring);
        struct io_uring_cqe *cqe;
        int w = io_uring_wait_cqe(&p->ring, &cqe);
        if (w < 0) {
            if (w == -EINTR)
                continue;
            return fl_err_set(err, w, "%s: io_uring: %s", p->path, strerror(-w));
        }
        struct sync_rd *r = io_uring_cqe_get_data(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&p->ring, cqe);
        int c = sync_complete(p, r, res);
        if (c != 0) {
            inflight--;
            if (c < 0 && rc == 0)
                rc = fl_err_set(err, c == -ENODATA ? -EIO : c,
                                "%s: read of %s at offset %llu: %s", r->file->path,
                                pg_name_at(p, r->off + r->done),
                                (unsigned long long)(r->off - r->file->base + r->done),
                                c == -ENODATA ? "short read (file truncated?)" : strerror(-c));
            r->done = UINT64_MAX; /* free */
        }
    }
    return rc;
}

/* --- the I/O thread ------------------------------------------------------- */

static void arm_kick(struct pager *p)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&p->ring);
    io_uring_prep_read(sqe, p->io_efd, &p->io_efd_buf, sizeof(p->io_efd_buf), 0);
    io_uring_sqe_set_data64(sqe, EFD_TAG);
}

void pg_io_kick(struct pager *p)
{
    uint64_t one = 1;
    if (p->io_efd >= 0 && write(p->io_efd, &one, sizeof(one)) < 0)
        return; /* the counter is saturated: the thread is awake anyway */
}

/* Reads what is left of rd: O_DIRECT while it is at a whole block. */
static void read_submit(struct pager *p, struct pg_read *rd)
{
    const int fd = p->direct && rd->done % p->dio_align == 0 ? rd->file->dfd : rd->file->fd;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&p->ring);
    io_uring_prep_read(sqe, fd, rd->buf + rd->done, (unsigned)(rd->len - rd->done),
                       rd->off - rd->file->base + rd->done);
    io_uring_sqe_set_data(sqe, rd);
    const struct pg_range *r = &p->ranges[rd->range];
    const struct pg_unit *u = &p->units[r->unit];
    FL_PROBE_READ_SUBMIT(u->layer, u->expert, r->kind, rd->len - rd->done, rd->off + rd->done);
}

/* Lays a unit's reads out in a free slot and submits them. */
static void slot_start(struct pager *p, struct pg_slot *s, uint32_t unit, bool refill)
{
    const struct pg_unit *u = &p->units[unit];
    uint64_t al = p->direct ? p->dio_align : p->page, pos = 0;
    s->busy = true;
    s->unit = unit;
    s->refill = refill;
    s->left = (int)u->n;
    s->err = 0;
    for (uint32_t k = 0; k < u->n; k++) {
        const struct pg_range *r = &p->ranges[u->first + k];
        struct pg_read *rd = &s->reads[k];
        uint64_t a = r->off / al * al, b = (r->off + r->len + al - 1) / al * al;
        *rd = (struct pg_read){ s, u->first + k, a, b - a, 0, s->buf + pos, pg_file_at(p, r->off) };
        pos += b - a;
        read_submit(p, rd);
    }
}

/* UFFDIO_COPY of whole pages; pages that exist already (a neighbour shares
 * them, or a RAM page) are skipped: their bytes are the file's. DONTWAKE:
 * the faulting threads are woken by pending_resolve once their stall is
 * counted, so that whoever reads the statistics after an access returned
 * sees its stall (a thread woken here could finish the run first). */
static int install_copy(struct pager *p, uint64_t off, uint64_t len, const uint8_t *src)
{
    uint64_t done = 0;
    while (done < len) {
        struct uffdio_copy c = { .dst = (uintptr_t)(p->base + off + done),
                                 .src = (uintptr_t)(src + done), .len = len - done,
                                 .mode = UFFDIO_COPY_MODE_DONTWAKE };
        if (ioctl(p->uffd, UFFDIO_COPY, &c) == 0)
            break;
        if (c.copy > 0)
            done += (uint64_t)c.copy;
        if (errno == EEXIST)
            done += p->page;
        else if (errno != EAGAIN)
            return -errno;
    }
    return 0;
}

static int slot_install(struct pager *p, struct pg_slot *s)
{
    const struct pg_unit *u = &p->units[s->unit];
    for (uint32_t k = 0; k < u->n; k++) {
        const struct pg_range *r = &p->ranges[u->first + k];
        const struct pg_read *rd = &s->reads[k];
        int rc = 0;
        uint64_t a, b;
        pg_range_pages(p, r, &a, &b);
        if (p->uffd_mode) {
            rc = install_copy(p, a, b - a, rd->buf + (a - rd->off));
        } else {
            /* One call faults in the whole window instead of a trap per page. */
            madvise(p->base + a, b - a, MADV_POPULATE_WRITE);
            memcpy(p->base + r->off, rd->buf + (r->off - rd->off), r->len);
        }
        if (rc < 0) {
            s->err = rc;
            s->err_off = r->off;
            s->err_ext = r->ext;
            return rc;
        }
        FL_PROBE_INSTALLED(u->layer, u->expert, r->kind, r->len, r->off);
    }
    return 0;
}

/* One probe per unit load, not one per slice: the tracer's byte and load
 * counts need no more, and each attached probe is a trap (pager/probes.h). */
static void probe_loaded(struct pager *p, const struct pg_slot *s)
{
    const struct pg_unit *u = &p->units[s->unit];
    uint64_t bytes = 0;
    for (uint32_t k = 0; k < u->n; k++)
        bytes += s->reads[k].done;
    FL_PROBE_LOADED(u->layer, u->expert, p->ranges[u->first].kind, bytes,
                    p->ranges[u->first].off, s->refill);
}

static void slot_finish(struct pager *p, struct pg_slot *s)
{
    struct pg_unit *u = &p->units[s->unit];
    if (s->err == 0)
        slot_install(p, s);
    if (s->err == 0)
        probe_loaded(p, s);
    pthread_mutex_lock(&p->mu);
    if (s->err < 0) {
        const struct pager_extent *e = s->err_ext >= 0 && s->err_ext < p->n_ext
                                           ? &p->ext[s->err_ext] : NULL;
        const struct pg_file *f = pg_file_at(p, s->err_off);
        pg_fail(p, s->err == -ENODATA ? -EIO : s->err,
                "%s: read of tensor %s (layer %d expert %d) at offset %llu: %s", f->path,
                e && e->name ? e->name : "?", u->layer, u->expert,
                (unsigned long long)(s->err_off - f->base),
                s->err == -ENODATA ? "short read (file truncated?)" : strerror(-s->err));
    }
    pg_load_done_locked(p, s->unit, s->refill, s->err);
    pthread_mutex_unlock(&p->mu);
    s->busy = false;
}

/* One read completion of the I/O thread. */
static void read_complete(struct pager *p, struct pg_read *rd, int res)
{
    struct pg_slot *s = rd->slot;
    const struct pg_range *r = &p->ranges[rd->range];
    res = apply_hook(p, rd->off + rd->done, rd->len - rd->done, res);
    const uint64_t want = file_holds(rd->file, rd->off, rd->len);
    if (res == -EINTR || res == -EAGAIN) {
        pg_inc(&p->st.reads_retried, 1);
        read_submit(p, rd);
        return;
    }
    if (res > 0) {
        rd->done += (uint64_t)res;
        pg_inc(&p->units[r->unit].st.bytes_read, (uint64_t)res);
        pg_inc(&p->st.bytes_read, (uint64_t)res);
        if (rd->done < want) { /* short read: ask for the rest */
            pg_inc(&p->st.reads_retried, 1);
            read_submit(p, rd);
            return;
        }
        memset(rd->buf + rd->done, 0, rd->len - rd->done); /* past EOF */
        FL_PROBE_READ_DONE(p->units[r->unit].layer, p->units[r->unit].expert, r->kind,
                           rd->done, rd->off);
    } else if (rd->done < want || res < 0) {
        if (s->err == 0) {
            s->err = res < 0 ? res : -ENODATA;
            s->err_off = rd->off + rd->done > r->off ? rd->off + rd->done : r->off;
            s->err_ext = r->ext;
        }
    }
    if (--s->left == 0)
        slot_finish(p, s);
}

static int free_slots(struct pager *p, struct pg_slot **first)
{
    int n = 0;
    *first = NULL;
    for (int i = 0; i < p->n_slots; i++) {
        if (!p->slots[i].busy) {
            if (!*first)
                *first = &p->slots[i];
            n++;
        }
    }
    return n;
}

/* Starts what the queues and the budget allow; returns the slots in use. */
static int start_loads(struct pager *p)
{
    struct pg_slot *s;
    int nfree;
    pthread_mutex_lock(&p->mu);
    while ((nfree = free_slots(p, &s)) > 0 && !atomic_load(&p->stopping)) {
        bool refill;
        /* The last free slot is kept for demand reads. */
        uint32_t u = pg_next_load_locked(p, nfree > 1, &refill);
        if (u == PG_NONE)
            break;
        s->busy = true;
        pthread_mutex_unlock(&p->mu);
        slot_start(p, s, u, refill);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return p->n_slots - free_slots(p, &s);
}

static void *io_main(void *arg)
{
    struct pager *p = arg;
    if (p->cfg.bind_thread)
        p->cfg.bind_thread(p->cfg.place_ctx);
    arm_kick(p);
    for (;;) {
        int busy = start_loads(p);
        if (atomic_load(&p->stopping) && busy == 0)
            break;
        io_uring_submit(&p->ring);
        struct io_uring_cqe *cqe;
        int w = io_uring_wait_cqe(&p->ring, &cqe);
        if (w < 0)
            continue; /* -EINTR */
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&p->ring, head, cqe) {
            uint64_t tag = io_uring_cqe_get_data64(cqe);
            int res = cqe->res;
            seen++;
            if (tag == EFD_TAG)
                arm_kick(p);
            else
                read_complete(p, (struct pg_read *)(uintptr_t)tag, res);
        }
        io_uring_cq_advance(&p->ring, seen);
    }
    return NULL;
}

int pg_io_start(struct pager *p, struct fl_err *err)
{
    if (slots_init(p) < 0)
        return fl_err_set(err, -ENOMEM, "%s: cannot allocate staging buffers", p->path);
    p->io_efd = eventfd(0, EFD_CLOEXEC);
    if (p->io_efd < 0)
        return fl_err_set(err, -errno, "%s: eventfd: %s", p->path, strerror(errno));
    int rc = pthread_create(&p->io_thread, NULL, io_main, p);
    if (rc)
        return fl_err_set(err, -rc, "%s: cannot start the I/O thread: %s", p->path, strerror(rc));
    p->io_started = true;
    return 0;
}

int pg_ring_init(struct pager *p, struct fl_err *err)
{
    int rc = io_uring_queue_init(RING_DEPTH, &p->ring, 0);
    if (rc < 0)
        return fl_err_set(err, rc, "%s: io_uring: %s", p->path, strerror(-rc));
    p->ring_ok = true;
    return 0;
}

void pg_io_stop(struct pager *p)
{
    if (!p->io_started)
        return;
    atomic_store(&p->stopping, true);
    pg_io_kick(p);
    pthread_join(p->io_thread, NULL);
    p->io_started = false;
}
