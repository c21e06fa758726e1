/* pager-bench: measures the two ways the pager can install an expert slice,
 * on the real expert slices of a GGUF file (or of a synthetic file):
 *   read     O_DIRECT read of the slice's aligned window into a pinned
 *            buffer only (the floor both methods pay)
 *   copy     read into pinned staging, then UFFDIO_COPY into an anonymous
 *            region registered for missing faults (the pager's path)
 *   minor    read straight into a memfd's page cache through a second
 *            mapping, then UFFDIO_CONTINUE maps those pages into the region
 *            registered for minor faults (shmem memfd, and hugetlb memfd
 *            when huge pages are reserved)
 * Prints microseconds per slice and GB/s for each. One slice at a time
 * (QD 1): the per-slice latency is what a faulting thread waits for.
 *
 *   pager-bench MODEL.gguf [MAX_MIB]
 *   pager-bench --synthetic FILE_MIB SLICE_KIB [PATH]   (writes PATH, default /tmp) */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/moe-layout.h"

#define PG 4096ull
#define HP (2ull << 20)

struct slice { uint64_t off, len; };

struct bench {
    const char *path;
    int fd, dfd;
    uint64_t size, align;
    struct slice *s;
    int n;
    struct io_uring ring;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int uffd_new(uint64_t features)
{
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    struct uffdio_api api = { .api = UFFD_API, .features = features };
    if (fd < 0 || ioctl(fd, UFFDIO_API, &api) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* One read of [off, off+len) (aligned window) into dst; bytes or -errno. */
static int64_t read_at(struct bench *b, uint64_t off, uint64_t len, void *dst)
{
    uint64_t done = 0;
    int fd = b->dfd >= 0 ? b->dfd : b->fd;
    while (done < len && off + done < b->size) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&b->ring);
        io_uring_prep_read(sqe, fd, (uint8_t *)dst + done, (unsigned)(len - done), off + done);
        io_uring_submit(&b->ring);
        struct io_uring_cqe *cqe;
        if (io_uring_wait_cqe(&b->ring, &cqe) < 0)
            return -EIO;
        int res = cqe->res;
        io_uring_cqe_seen(&b->ring, cqe);
        if (res <= 0)
            return res < 0 ? res : (int64_t)done;
        done += (uint64_t)res;
        if (done % b->align)
            fd = b->fd;
    }
    return (int64_t)done;
}

static void window(const struct bench *b, const struct slice *s, uint64_t *a, uint64_t *e)
{
    *a = s->off / b->align * b->align;
    *e = (s->off + s->len + b->align - 1) / b->align * b->align;
}

/* Installs [a, e) of the region page by page where pages exist already. */
static int fill(int uffd, unsigned long ioc, uint8_t *region, const uint8_t *src, uint64_t a,
                uint64_t e)
{
    uint64_t done = 0;
    while (a + done < e) {
        int rc;
        int64_t got;
        if (ioc == UFFDIO_COPY) {
            struct uffdio_copy c = { (uintptr_t)(region + a + done), (uintptr_t)(src + done),
                                     e - a - done, 0, 0 };
            rc = ioctl(uffd, UFFDIO_COPY, &c);
            got = c.copy;
        } else {
            struct uffdio_continue c = { { (uintptr_t)(region + a + done), e - a - done }, 0, 0 };
            rc = ioctl(uffd, UFFDIO_CONTINUE, &c);
            got = c.mapped;
        }
        if (rc == 0)
            return 0;
        if (got > 0)
            done += (uint64_t)got;
        if (errno == EEXIST)
            done += PG;
        else if (errno != EAGAIN)
            return -errno;
    }
    return 0;
}

/* secs: the whole loop; inst: the part spent installing (COPY/CONTINUE). */
static void report(const char *name, const struct bench *b, double secs, double inst,
                   uint64_t bytes)
{
    printf("%-22s %6d slices %9.1f us/slice %7.2f GB/s   install %8.1f us/slice %7.2f GB/s\n",
           name, b->n, secs * 1e6 / b->n, (double)bytes / secs / 1e9, inst * 1e6 / b->n,
           inst > 0 ? (double)bytes / inst / 1e9 : 0.0);
}

static void *pinned(uint64_t len)
{
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    madvise(m, len, MADV_HUGEPAGE);
    mlock(m, len);
    return m;
}

static uint64_t max_window(const struct bench *b)
{
    uint64_t w = 0;
    for (int i = 0; i < b->n; i++) {
        uint64_t a, e;
        window(b, &b->s[i], &a, &e);
        w = e - a > w ? e - a : w;
    }
    return (w + HP - 1) / HP * HP;
}

static int bench_copy(struct bench *b, bool install)
{
    uint64_t wmax = max_window(b), bytes = 0, msize = (b->size + HP - 1) / HP * HP;
    uint8_t *buf = pinned(wmax);
    int uffd = install ? uffd_new(0) : -1;
    uint8_t *region = mmap(NULL, msize, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!buf || region == MAP_FAILED || (install && uffd < 0))
        return printf("%-22s skipped (%s)\n", install ? "copy" : "read", strerror(errno)), 0;
    madvise(region, msize, MADV_NOHUGEPAGE);
    struct uffdio_register reg = { { (uintptr_t)region, msize }, UFFDIO_REGISTER_MODE_MISSING, 0 };
    if (install && ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
        return printf("copy: register: %s\n", strerror(errno)), -1;
    double t0 = now_s(), inst = 0;
    for (int i = 0; i < b->n; i++) {
        uint64_t a, e;
        window(b, &b->s[i], &a, &e);
        int64_t got = read_at(b, a, e - a, buf);
        if (got < 0)
            return printf("read at %llu: %s\n", (unsigned long long)a, strerror((int)-got)), -1;
        bytes += b->s[i].len;
        double t1 = now_s();
        if (install && fill(uffd, UFFDIO_COPY, region, buf, a, e) < 0)
            return printf("UFFDIO_COPY: %s\n", strerror(errno)), -1;
        inst += now_s() - t1;
    }
    report(install ? "copy (UFFDIO_COPY)" : "read only", b, now_s() - t0, inst, bytes);
    munmap(region, msize);
    munmap(buf, wmax);
    if (uffd >= 0)
        close(uffd);
    return 0;
}

static int bench_minor(struct bench *b, bool huge)
{
    const char *name = huge ? "minor (hugetlb memfd)" : "minor (shmem memfd)";
    uint64_t msize = (b->size + HP - 1) / HP * HP, bytes = 0;
    int mfd = memfd_create("pager-bench", MFD_CLOEXEC | (huge ? MFD_HUGETLB : 0));
    int uffd = uffd_new(huge ? UFFD_FEATURE_MINOR_HUGETLBFS : UFFD_FEATURE_MINOR_SHMEM);
    if (mfd < 0 || uffd < 0 || ftruncate(mfd, (off_t)msize) < 0)
        return printf("%-22s skipped (%s)\n", name, strerror(errno)), 0;
    uint8_t *back = mmap(NULL, msize, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    uint8_t *region = mmap(NULL, msize, PROT_READ, MAP_SHARED, mfd, 0);
    struct uffdio_register reg = { { (uintptr_t)region, msize }, UFFDIO_REGISTER_MODE_MINOR, 0 };
    if (back == MAP_FAILED || region == MAP_FAILED || ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
        return printf("%-22s skipped (%s)\n", name, strerror(errno)), 0;
    /* hugetlb installs whole 2 MiB pages: windows must be 2 MiB aligned */
    uint64_t saved = b->align;
    if (huge)
        b->align = HP;
    double t0 = now_s(), inst = 0;
    int rc = 0;
    for (int i = 0; i < b->n && rc == 0; i++) {
        uint64_t a, e;
        window(b, &b->s[i], &a, &e);
        if (e > msize)
            e = msize;
        int64_t got = read_at(b, a, e - a, back + a);
        if (got < 0) {
            printf("%-22s skipped (read: %s; no huge pages reserved?)\n", name,
                   strerror((int)-got));
            rc = 1;
            break;
        }
        bytes += b->s[i].len;
        double t1 = now_s();
        if (fill(uffd, UFFDIO_CONTINUE, region, NULL, a, e) < 0) {
            printf("%-22s UFFDIO_CONTINUE: %s\n", name, strerror(errno));
            rc = 1;
        }
        inst += now_s() - t1;
    }
    if (rc == 0)
        report(name, b, now_s() - t0, inst, bytes);
    b->align = saved;
    munmap(back, msize);
    munmap(region, msize);
    close(mfd);
    close(uffd);
    return 0;
}

static int slices_from_model(struct bench *b, uint64_t max_bytes)
{
    struct gguf_file *g;
    struct moe_layout *ml;
    struct fl_err err = { { 0 } };
    if (gguf_open(b->path, &g, &err) < 0 || moe_layout_compute(g, &ml, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    if (gguf_n_parts(g) > 1) { /* its reads go to one file at the tensors' offsets */
        fprintf(stderr, "%s: a model split into %d files; pager-bench reads one file\n", b->path,
                gguf_n_parts(g));
        moe_layout_free(ml);
        gguf_close(g);
        return -1;
    }
    b->s = calloc(1 << 20, sizeof(*b->s));
    uint64_t total = 0;
    for (int l = 0; l < ml->n_layer && total < max_bytes; l++)
        for (int r = 0; r < MOE_N_ROLES; r++) {
            const struct moe_expert_tensor *et = &ml->layers[l].role[r];
            if (!et->t || r >= MOE_GATE_BIAS)
                continue;
            for (int e = 0; e < ml->layers[l].n_expert && total < max_bytes && b->n < (1 << 20);
                 e++) {
                b->s[b->n++] = (struct slice){ moe_expert_offset(et, e), et->expert_bytes };
                total += et->expert_bytes;
            }
        }
    if (b->n)
        printf("%s: %d expert slices, %.1f MiB, first slice %llu bytes\n", b->path, b->n,
               (double)total / (1 << 20), (unsigned long long)b->s[0].len);
    moe_layout_free(ml);
    gguf_close(g);
    return b->n ? 0 : -1;
}

static int synthetic(struct bench *b, uint64_t file_mib, uint64_t slice_kib, const char *dir)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/pager-bench-%d.bin", dir, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return perror(path), -1;
    uint8_t *chunk = malloc(1 << 20);
    for (uint64_t i = 0; i < 1 << 20; i++)
        chunk[i] = (uint8_t)(i * 131 + 7);
    for (uint64_t m = 0; m < file_mib; m++)
        if (write(fd, chunk, 1 << 20) != 1 << 20)
            return perror(path), -1;
    fsync(fd);
    close(fd);
    free(chunk);
    b->path = path;
    uint64_t slice = slice_kib << 10, n = (file_mib << 20) / slice;
    b->s = calloc(n, sizeof(*b->s));
    for (uint64_t i = 0; i < n; i++)
        b->s[b->n++] = (struct slice){ i * slice + 96, slice - 96 }; /* unaligned, as in GGUF */
    printf("%s: synthetic, %d slices of %llu KiB\n", path, b->n, (unsigned long long)slice_kib);
    return 0;
}

int main(int argc, char **argv)
{
    struct bench b = { 0 };
    b.dfd = -1;
    if (argc >= 4 && strcmp(argv[1], "--synthetic") == 0) {
        if (synthetic(&b, strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10),
                      argc > 4 ? argv[4] : "/tmp") < 0)
            return 1;
    } else if (argc >= 2 && argv[1][0] != '-') {
        b.path = argv[1];
        if (slices_from_model(&b, (argc > 2 ? strtoull(argv[2], NULL, 10) : 1024) << 20) < 0)
            return 1;
    } else {
        fprintf(stderr, "usage: pager-bench MODEL.gguf [MAX_MIB]\n"
                        "       pager-bench --synthetic FILE_MIB SLICE_KIB [DIR]\n");
        return 2;
    }
    b.fd = open(b.path, O_RDONLY | O_CLOEXEC);
    b.dfd = open(b.path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    struct stat st;
    if (b.fd < 0 || fstat(b.fd, &st) < 0 || io_uring_queue_init(8, &b.ring, 0) < 0)
        return perror(b.path), 1;
    b.size = (uint64_t)st.st_size;
    b.align = PG;
    printf("reads: %s\n", b.dfd >= 0 ? "O_DIRECT" : "buffered (no O_DIRECT here)");
    int rc = bench_copy(&b, false) | bench_copy(&b, true) | bench_minor(&b, false) |
             bench_minor(&b, true);
    if (strstr(b.path, "/pager-bench-"))
        unlink(b.path);
    return rc ? 1 : 0;
}
