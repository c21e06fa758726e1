/* region.c: the layout of paged units over the file, the anonymous region
 * that mirrors the file, the up-front reads of RAM-tier bytes and the
 * userfaultfd registration of the disk-tier pages. */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pager/internal.h"
#include "pager/probes.h"

#define HUGE_ALIGN (2ull << 20)

static int push_range(struct pager *p, uint32_t *cap, struct pg_range r)
{
    if (p->n_ranges == *cap) {
        uint32_t nc = *cap ? *cap * 2 : 64;
        struct pg_range *n = realloc(p->ranges, nc * sizeof(*n));
        if (!n)
            return -ENOMEM;
        p->ranges = n;
        *cap = nc;
    }
    p->ranges[p->n_ranges++] = r;
    return 0;
}

static int push_unit(struct pager *p, uint32_t *cap, int layer, int expert)
{
    if (p->n_units == *cap) {
        uint32_t nc = *cap ? *cap * 2 : 64;
        struct pg_unit *n = realloc(p->units, nc * sizeof(*n));
        if (!n)
            return -ENOMEM;
        p->units = n;
        *cap = nc;
    }
    struct pg_unit *u = &p->units[p->n_units++];
    memset(u, 0, sizeof(*u));
    u->layer = layer;
    u->expert = expert;
    u->first = p->n_ranges;
    u->lru_prev = u->lru_next = PG_NONE;
    return 0;
}

static int by_unit_cmp(const void *a, const void *b, void *ctx)
{
    const struct pager_extent *e = ctx;
    const int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    if (e[i].layer != e[j].layer)
        return e[i].layer < e[j].layer ? -1 : 1;
    if (e[i].expert != e[j].expert)
        return e[i].expert < e[j].expert ? -1 : 1;
    return i < j ? -1 : i > j; /* a unit's slices in the table's order */
}

static bool paged_slice(const struct pager_extent *e)
{
    return e->tier == PAGER_TIER_DISK && e->layer >= 0 && e->expert >= 0 && e->len > 0;
}

/* Units for the disk-tier expert slices: one per (layer, expert), in
 * layer then expert order. */
static int layout_experts(struct pager *p, uint32_t *ucap, uint32_t *rcap)
{
    int64_t n = 0;
    int64_t *idx = malloc(sizeof(int64_t) * ((size_t)p->n_ext + 1));
    if (!idx)
        return -ENOMEM;
    for (int64_t i = 0; i < p->n_ext; i++)
        if (paged_slice(&p->ext[i]))
            idx[n++] = i;
    qsort_r(idx, (size_t)n, sizeof(int64_t), by_unit_cmp, p->ext);
    int rc = 0;
    for (int64_t k = 0; k < n && rc == 0; k++) {
        const struct pager_extent *e = &p->ext[idx[k]];
        const bool first = k == 0 || e->layer != p->ext[idx[k - 1]].layer ||
                           e->expert != p->ext[idx[k - 1]].expert;
        if (first && (rc = push_unit(p, ucap, e->layer, e->expert)) < 0)
            break;
        const struct pg_range r = { e->off, e->len, p->n_units - 1, (int32_t)idx[k], e->kind };
        if ((rc = push_range(p, rcap, r)) == 0)
            p->units[p->n_units - 1].n++;
        p->unit_of[e->layer * p->n_expert + e->expert] = (int32_t)(p->n_units - 1);
    }
    free(idx);
    return rc;
}

/* Units for other disk-tier bytes: 2 MiB file-aligned chunks (uffd mode
 * only: explicit mode cannot page what nobody acquires, so it reads them). */
static int layout_chunks(struct pager *p, uint32_t *ucap, uint32_t *rcap)
{
    for (int64_t i = 0; p->uffd_mode && i < p->n_ext; i++) {
        const struct pager_extent *e = &p->ext[i];
        if (e->tier != PAGER_TIER_DISK || e->layer >= 0 || e->len == 0)
            continue;
        for (uint64_t o = e->off; o < e->off + e->len;) {
            uint64_t end = (o / PG_CHUNK + 1) * PG_CHUNK;
            if (end > e->off + e->len)
                end = e->off + e->len;
            if (push_unit(p, ucap, -1, -1) < 0)
                return -ENOMEM;
            struct pg_range r = { o, end - o, p->n_units - 1, (int32_t)i, PAGER_KIND_OTHER };
            if (push_range(p, rcap, r) < 0)
                return -ENOMEM;
            p->units[p->n_units - 1].n = 1;
            o = end;
        }
    }
    return 0;
}

static int by_off_cmp(const void *a, const void *b, void *ctx)
{
    const struct pg_range *r = ctx;
    uint64_t x = r[*(const uint32_t *)a].off;
    uint64_t y = r[*(const uint32_t *)b].off;
    return x < y ? -1 : x > y;
}

/* RAM pages: every page holding a byte outside the disk ranges. */
static int layout_ram_pages(struct pager *p)
{
    uint64_t pg = p->page, npages = (p->file_size + pg - 1) / pg;
    p->ram_pg = malloc(2 * sizeof(uint64_t) * (p->n_ranges + 1));
    if (!p->ram_pg)
        return -ENOMEM;
    uint64_t cur = 0; /* first byte not yet known to be disk */
    for (uint32_t k = 0; k <= p->n_ranges; k++) {
        uint64_t next = k < p->n_ranges ? p->ranges[p->by_off[k]].off : p->file_size;
        if (next > cur) { /* bytes [cur, next) are RAM */
            uint64_t a = cur / pg, b = (next + pg - 1) / pg;
            if (b > npages)
                b = npages;
            if (p->n_ram && p->ram_pg[2 * (p->n_ram - 1) + 1] >= a) {
                p->ram_pg[2 * (p->n_ram - 1) + 1] = b;
            } else {
                p->ram_pg[2 * p->n_ram] = a;
                p->ram_pg[2 * p->n_ram + 1] = b;
                p->n_ram++;
            }
        }
        if (k < p->n_ranges) {
            const struct pg_range *r = &p->ranges[p->by_off[k]];
            if (r->off + r->len > cur)
                cur = r->off + r->len;
        }
    }
    return 0;
}

bool pg_page_is_ram(const struct pager *p, uint64_t page_index)
{
    uint32_t lo = 0, hi = p->n_ram;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (p->ram_pg[2 * mid + 1] <= page_index)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->n_ram && p->ram_pg[2 * lo] <= page_index;
}

uint32_t pg_range_at(const struct pager *p, uint64_t off)
{
    uint32_t lo = 0, hi = p->n_ranges;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        const struct pg_range *r = &p->ranges[p->by_off[mid]];
        if (r->off + r->len <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void layout_sizes(struct pager *p)
{
    uint64_t pg = p->page, al = p->dio_align > pg ? p->dio_align : pg;
    uint64_t *layer_max = calloc((size_t)p->n_layers + 1, sizeof(uint64_t));
    for (uint32_t u = 0; u < p->n_units; u++) {
        struct pg_unit *un = &p->units[u];
        uint64_t window = 0;
        for (uint32_t k = un->first; k < un->first + un->n; k++) {
            const struct pg_range *r = &p->ranges[k];
            un->charge += (r->off + r->len + pg - 1) / pg * pg - r->off / pg * pg;
            window += (r->off + r->len + al - 1) / al * al - r->off / al * al;
        }
        if (un->n > p->max_ranges)
            p->max_ranges = un->n;
        if (window > p->max_unit_window)
            p->max_unit_window = window;
        int slot = un->layer >= 0 ? un->layer : p->n_layers;
        if (layer_max && un->charge > layer_max[slot])
            layer_max[slot] = un->charge;
    }
    for (int l = 0; layer_max && l <= p->n_layers; l++) {
        uint64_t need = layer_max[l] * (uint64_t)(l < p->n_layers ? p->n_used : 1);
        if (need > p->min_budget)
            p->min_budget = need;
    }
    free(layer_max);
}

static int ext_off_cmp(const void *a, const void *b, void *ctx)
{
    const struct pager_extent *e = ctx;
    const uint64_t x = e[*(const int64_t *)a].off, y = e[*(const int64_t *)b].off;
    return x < y ? -1 : x > y;
}

const char *pg_name_at(const struct pager *p, uint64_t off)
{
    int64_t lo = 0, hi = p->n_ext; /* the last extent starting at or before off */
    while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        if (p->ext[p->ext_by_off[mid]].off <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (int64_t k = lo - 1; k >= 0 && k >= lo - 64; k--) { /* overlapping slices: look back */
        const struct pager_extent *e = &p->ext[p->ext_by_off[k]];
        if (off >= e->off && off < e->off + e->len)
            return e->name ? e->name : "?";
    }
    return "(header)";
}

/* The files follow one another inside the region. */
static int files_check(const struct pager *p, struct fl_err *err)
{
    for (int i = 0; i < p->n_files; i++) {
        const struct pg_file *f = &p->files[i];
        const uint64_t from = i ? f[-1].base + f[-1].size : 0;
        if (f->base < from || f->size > p->file_size || f->base > p->file_size - f->size)
            return fl_err_set(err, -EINVAL, "%s: file %d of the layout (%s) overlaps another or "
                              "lies outside the region", p->path, i + 1, f->path);
    }
    return 0;
}

/* The table's extents lie in the files (each in one); the paged ones'
 * layers and experts size the unit map. */
static int layout_check(struct pager *p, struct fl_err *err)
{
    int rc = files_check(p, err);
    if (rc)
        return rc;
    for (int64_t i = 0; i < p->n_ext; i++) {
        const struct pager_extent *e = &p->ext[i];
        const struct pg_file *f = pg_file_at(p, e->off);
        if (e->off < f->base || e->len > f->size || e->off - f->base > f->size - e->len)
            return fl_err_set(err, -EINVAL, "%s: %s (bytes %llu..%llu) lies outside the file (%llu "
                              "bytes)", f->path, e->name ? e->name : "?",
                              (unsigned long long)(e->off - f->base),
                              (unsigned long long)(e->off - f->base + e->len),
                              (unsigned long long)f->size);
        if (!paged_slice(e))
            continue;
        if (e->layer + 1 > p->n_layers)
            p->n_layers = e->layer + 1;
        if (e->expert + 1 > p->n_expert)
            p->n_expert = e->expert + 1;
    }
    p->n_used = p->layout_used > 0 ? p->layout_used : 1;
    return 0;
}

int pg_layout_build(struct pager *p, struct fl_err *err)
{
    uint32_t ucap = 0, rcap = 0;
    int rc = layout_check(p, err);
    if (rc)
        return rc;
    rc = -ENOMEM;
    p->ext_by_off = malloc(sizeof(int64_t) * ((size_t)p->n_ext + 1));
    if (!p->ext_by_off)
        goto out;
    for (int64_t i = 0; i < p->n_ext; i++)
        p->ext_by_off[i] = i;
    qsort_r(p->ext_by_off, (size_t)p->n_ext, sizeof(int64_t), ext_off_cmp, p->ext);
    p->unit_of = malloc(sizeof(int32_t) * ((size_t)p->n_layers * (size_t)p->n_expert + 1));
    if (!p->unit_of)
        goto out;
    for (int64_t i = 0; i < (int64_t)p->n_layers * p->n_expert; i++)
        p->unit_of[i] = -1;
    if (layout_experts(p, &ucap, &rcap) < 0 || layout_chunks(p, &ucap, &rcap) < 0)
        goto out;
    p->by_off = malloc(sizeof(uint32_t) * (p->n_ranges + 1));
    if (!p->by_off)
        goto out;
    for (uint32_t k = 0; k < p->n_ranges; k++)
        p->by_off[k] = k;
    qsort_r(p->by_off, p->n_ranges, sizeof(uint32_t), by_off_cmp, p->ranges);
    if (layout_ram_pages(p) < 0)
        goto out;
    layout_sizes(p);
    rc = 0;
out:
    if (rc < 0)
        fl_err_set(err, rc, "%s: out of memory laying out the pager", p->path);
    return rc;
}

static void advise_huge(struct pager *p, uint64_t from, uint64_t to)
{
    uint64_t a = (from + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1), b = to & ~(HUGE_ALIGN - 1);
    if (b > a)
        madvise(p->base + a, b - a, MADV_HUGEPAGE);
}

/* RAM-tier weights in transparent huge pages: decode streams them from
 * DRAM, and 4 KiB pages cost the mat-vec kernels 15-30 % in TLB misses
 * (where THP is "madvise"-only, the default on many distributions, the
 * region would otherwise get none). Only whole aligned 2 MiB extents
 * between disk-tier ranges are advised, so the disk tier and the pages
 * around it keep their 4 KiB pages and VMAs exactly as before. */
static void advise_huge_ram_tier(struct pager *p)
{
    uint64_t at = 0;
    for (uint32_t k = 0; k < p->n_ranges; k++) {
        uint64_t a, end;
        pg_range_pages(p, &p->ranges[p->by_off[k]], &a, &end);
        advise_huge(p, at, a);
        at = end > at ? end : at;
    }
    advise_huge(p, at, p->map_size);
}

int pg_region_map(struct pager *p, struct fl_err *err)
{
    p->map_size = (p->file_size + p->page - 1) / p->page * p->page;
    if (p->map_size == 0)
        p->map_size = p->page;
    /* 2 MiB-aligned so that huge pages and chunk faults line up with the file. */
    p->map_raw_len = p->map_size + HUGE_ALIGN;
    void *raw = mmap(NULL, p->map_raw_len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        return fl_err_set(err, -errno, "%s: cannot reserve %llu bytes of address space: %s",
                          p->path, (unsigned long long)p->map_size, strerror(errno));
    p->map_raw = raw;
    p->base = (uint8_t *)(((uintptr_t)raw + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
    /* A forked child must not inherit a region whose missing pages would read as zeros. */
    madvise(p->base, p->map_size, MADV_DONTFORK);
    FL_PROBE_REGION(p->base, p->map_size);
    advise_huge_ram_tier(p);
    /* Disk-tier pages are installed and evicted 4 KiB at a time; a THP
     * would make resident memory exceed what the budget accounts for. */
    for (uint32_t k = 0; k < p->n_ranges; k++) {
        uint64_t a, b;
        pg_range_pages(p, &p->ranges[k], &a, &b);
        madvise(p->base + a, b - a, MADV_NOHUGEPAGE);
    }
    return 0;
}

void pg_region_unmap(struct pager *p)
{
    if (p->map_raw)
        munmap(p->map_raw, p->map_raw_len);
    p->map_raw = NULL;
    p->base = NULL;
}

/* Reads every RAM page straight into the region (before any registration),
 * in slices so that a progress report can follow a multi-GiB tier. */
int pg_region_read_ram(struct pager *p, struct fl_err *err)
{
    static const char step[] = "reading the RAM tier";
    const uint64_t slice = 64ull << 20;
    uint64_t total = 0, done = 0;
    for (uint32_t k = 0; k < p->n_ram; k++) {
        uint64_t a = p->ram_pg[2 * k] * p->page, b = p->ram_pg[2 * k + 1] * p->page;
        if (b > p->file_size)
            b = p->file_size;
        total += b > a ? b - a : 0;
    }
    for (uint32_t k = 0; k < p->n_ram; k++) {
        uint64_t a = p->ram_pg[2 * k] * p->page, b = p->ram_pg[2 * k + 1] * p->page;
        if (b > p->file_size)
            b = p->file_size;
        for (uint64_t at = a; at < b; at += slice) {
            const uint64_t n = b - at < slice ? b - at : slice;
            int rc = pg_read_sync(p, at, n, p->base + at, err);
            if (rc < 0)
                return rc;
            done += n;
            fl_progress_report(&p->cfg.progress, step, "B", done, total, false);
        }
    }
    fl_progress_report(&p->cfg.progress, step, "B", done, total, true);
    return 0;
}

int pager_drop_range(struct pager *p, uint64_t off, uint64_t len)
{
    if (off > p->file_size || len > p->file_size - off)
        return -EINVAL;
    const uint64_t a = (off + p->page - 1) / p->page * p->page;
    const uint64_t b = (off + len) / p->page * p->page;
    if (b <= a)
        return 0;
    /* the first disk range ending past a must start at or after b */
    const uint32_t k = pg_range_at(p, a);
    if (k < p->n_ranges && p->ranges[p->by_off[k]].off < b)
        return -EINVAL;
    if (madvise(p->base + a, b - a, MADV_DONTNEED) != 0 ||
        mprotect(p->base + a, b - a, PROT_NONE) != 0)
        return -errno;
    return 0;
}

/* Registers the page spans of the disk ranges for missing faults. */
int pg_uffd_setup(struct pager *p, struct fl_err *err)
{
    uint64_t span_a = 0, span_b = 0;
    for (uint32_t k = 0; k <= p->n_ranges; k++) {
        uint64_t a = 0, b = 0;
        if (k < p->n_ranges) {
            pg_range_pages(p, &p->ranges[p->by_off[k]], &a, &b);
            if (span_b > span_a && a <= span_b) {
                if (b > span_b)
                    span_b = b;
                continue;
            }
        }
        if (span_b > span_a) {
            struct uffdio_register reg = {
                .range = { (uintptr_t)(p->base + span_a), span_b - span_a },
                .mode = UFFDIO_REGISTER_MODE_MISSING,
            };
            if (ioctl(p->uffd, UFFDIO_REGISTER, &reg) < 0)
                return fl_err_set(err, -errno, "%s: userfaultfd register of %llu bytes at %llu: %s",
                                  p->path, (unsigned long long)(span_b - span_a),
                                  (unsigned long long)span_a, strerror(errno));
            if (!(reg.ioctls & (1ull << _UFFDIO_COPY)))
                return fl_err_set(err, -ENOTSUP, "%s: userfaultfd cannot copy into this region",
                                  p->path);
        }
        span_a = a;
        span_b = b;
    }
    return 0;
}
