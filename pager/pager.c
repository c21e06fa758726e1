/* pager.c: pager_open/pager_close and the small accessors; the work is in
 * region.c (layout, region, registration), io.c (reads and installs),
 * fault.c (userfaultfd handler and watchdog), residency.c (budget, LRU,
 * pins) and stats.c. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/host-memory.h"
#include "pager/internal.h"
#include "pager/probes.h"

#define DEFAULT_WATCHDOG_MS 10000
#define DEFAULT_AUTO_FRACTION 0.5

void pager_config_init(struct pager_config *c)
{
    memset(c, 0, sizeof(*c));
    c->auto_fraction = DEFAULT_AUTO_FRACTION;
    c->watchdog_ms = DEFAULT_WATCHDOG_MS;
}

static void resolve_budget(struct pager *p)
{
    if (p->cfg.ram_budget) {
        p->budget = p->cfg.ram_budget;
        return;
    }
    double frac = p->cfg.auto_fraction > 0 && p->cfg.auto_fraction <= 1 ? p->cfg.auto_fraction
                                                                         : DEFAULT_AUTO_FRACTION;
    p->budget = (uint64_t)((double)fl_mem_available() * frac);
}

/* uffd when asked or possible; explicit mode otherwise, said once. */
static int choose_mode(struct pager *p, struct fl_err *err)
{
    if (p->cfg.mode == PAGER_MODE_EXPLICIT)
        return 0;
    struct fl_err why = { { 0 } };
    int rc = pg_uffd_open(p, &why);
    if (rc == 0) {
        p->uffd_mode = true;
        return 0;
    }
    if (p->cfg.mode == PAGER_MODE_UFFD)
        return fl_err_set(err, rc, "%s: %s", p->path, why.msg);
    if (!p->cfg.quiet)
        fprintf(stderr, "faultline: %s; paging in explicit mode (prefetch/acquire, no faults)\n",
                why.msg);
    return 0;
}

static int check_budget(struct pager *p, struct fl_err *err)
{
    if (p->n_units == 0 || p->budget >= p->min_budget)
        return 0;
    return fl_err_set(err, -ENOMEM, "%s: RAM budget of %llu bytes is below the minimum of %llu "
                      "(%d experts in use per layer x the largest expert); raise --ram-budget",
                      p->path, (unsigned long long)p->budget, (unsigned long long)p->min_budget,
                      p->n_used);
}

static int open_steps(struct pager *p, struct fl_err *err)
{
    int rc;
    resolve_budget(p);
    if ((rc = pg_io_open(p, err)) < 0 || (rc = pg_ring_init(p, err)) < 0 ||
        (rc = choose_mode(p, err)) < 0 || (rc = pg_layout_build(p, err)) < 0 ||
        (rc = check_budget(p, err)) < 0)
        return rc;
    if ((rc = pg_res_init(p)) < 0)
        return fl_err_set(err, rc, "%s: out of memory", p->path);
    p->res_ok = true;
    pg_policy_init(p);
    if ((rc = pg_region_map(p, err)) < 0 || (rc = pg_region_read_ram(p, err)) < 0)
        return rc;
    if (p->uffd_mode && p->n_ranges &&
        ((rc = pg_uffd_setup(p, err)) < 0 || (rc = pg_fault_start(p, err)) < 0))
        return rc;
    if (p->n_units && (rc = pg_io_start(p, err)) < 0)
        return rc;
    if (p->n_units)
        pg_policy_warm(p);
    return 0;
}

/* The pager keeps its own copy of the table (the caller's may go). */
static int copy_layout(struct pager *p, const struct pager_layout *l)
{
    p->file_size = l->file_size;
    p->layout_used = l->n_used;
    p->n_ext = l->n_extents > 0 ? l->n_extents : 0;
    p->ext = malloc(sizeof(*p->ext) * ((size_t)p->n_ext + 1));
    if (!p->ext)
        return -ENOMEM;
    if (p->n_ext)
        memcpy(p->ext, l->extents, sizeof(*p->ext) * (size_t)p->n_ext);
    return 0;
}

/* What copy_layout and copy_files made, and p itself. */
static void free_tables(struct pager *p)
{
    for (int i = 0; p->files && i < p->n_files; i++)
        free(p->files[i].path);
    free(p->files);
    free(p->ext);
    free(p->path);
    free(p);
}

/* The files: the layout's, or the one pager_open names. */
static int copy_files(struct pager *p, const char *path, const struct pager_layout *l)
{
    const struct pager_file one = { path, 0, l->file_size };
    const struct pager_file *f = l->n_files > 0 ? l->files : &one;
    p->n_files = l->n_files > 0 ? l->n_files : 1;
    p->files = calloc((size_t)p->n_files, sizeof(*p->files));
    if (!p->files)
        return -ENOMEM;
    for (int i = 0; i < p->n_files; i++) {
        p->files[i] = (struct pg_file){ strdup(f[i].path), -1, -1, f[i].base, f[i].size };
        if (!p->files[i].path)
            return -ENOMEM;
    }
    return 0;
}

int pager_open(const char *path, const struct pager_layout *layout,
               const struct pager_config *cfg, struct pager **out, struct fl_err *err)
{
    *out = NULL;
    struct pager *p = calloc(1, sizeof(*p));
    if (p)
        p->uffd = p->stop_efd = p->io_efd = -1;
    if (!p || !(p->path = strdup(path)) || copy_layout(p, layout) ||
        copy_files(p, path, layout)) {
        if (p)
            free_tables(p);
        return fl_err_set(err, -ENOMEM, "%s: out of memory", path);
    }
    if (cfg)
        p->cfg = *cfg;
    else
        pager_config_init(&p->cfg);
    if (p->cfg.watchdog_ms == 0)
        p->cfg.watchdog_ms = DEFAULT_WATCHDOG_MS;
    p->page = (uint64_t)sysconf(_SC_PAGESIZE);
    int rc = open_steps(p, err);
    if (rc < 0) {
        pager_close(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* The last acquire counts of the units that may have hits no probe reported
 * yet (pager/probes.h): the resident ones. An acquire of any other unit
 * waited and fired acquired, and a unit's hits before an eviction went with
 * its evict probe. */
static void probe_acquires(const struct pager *p)
{
    for (uint32_t u = 0; p->units && u < p->n_units; u++) {
        const struct pg_unit *n = &p->units[u];
        uint64_t acq = FL_PROBE_ACQ_COUNT(n->st);
        if (acq && n->state == PG_RESIDENT)
            FL_PROBE_ACQUIRES(n->layer, n->expert, p->ranges[n->first].kind,
                              p->ranges[n->first].off, acq, FL_PROBE_ACQ_COUNT(p->st));
    }
}

void pager_close(struct pager *p)
{
    if (!p)
        return;
    pg_fault_stop(p);
    pg_io_stop(p);
    probe_acquires(p);
    /* Unmap before closing the uffd: a region outliving its uffd would hand
     * out zero pages for every missing expert byte. */
    pg_region_unmap(p);
    if (p->uffd >= 0)
        close(p->uffd);
    pg_io_close(p);
    if (p->res_ok)
        pg_res_free(p);
    free(p->ranges);
    free(p->by_off);
    free(p->units);
    free(p->unit_of);
    free(p->ram_pg);
    free(p->ext_by_off);
    free_tables(p);
}

const uint8_t *pager_base(const struct pager *p) { return p->base; }
uint64_t pager_size(const struct pager *p) { return p->file_size; }
bool pager_uses_uffd(const struct pager *p) { return p->uffd_mode; }
bool pager_uses_direct_io(const struct pager *p) { return p->direct; }
uint64_t pager_budget(const struct pager *p) { return p->budget; }

int pager_set_budget(struct pager *p, uint64_t bytes)
{
    if (p->n_units && bytes < p->min_budget)
        return -EINVAL;
    pthread_mutex_lock(&p->mu);
    p->budget = bytes;
    if (p->res_ok)
        pg_res_fit_budget_locked(p);
    pthread_mutex_unlock(&p->mu);
    return 0;
}
uint64_t pager_min_budget(const struct pager *p) { return p->n_units ? p->min_budget : 0; }

int pager_error(struct pager *p, struct fl_err *err)
{
    int rc = atomic_load(&p->failed);
    if (rc && err) {
        pthread_mutex_lock(&p->mu);
        *err = p->errmsg;
        pthread_mutex_unlock(&p->mu);
    }
    return rc;
}

int pager_max_pinned(const struct pager *p)
{
    /* min_budget = n_used x the largest expert, so this many of the largest
     * fit the budget at once: the most a user may hold pinned. */
    uint64_t largest = p->n_units && p->n_used > 0 ? p->min_budget / (uint64_t)p->n_used : 0;
    uint64_t fit = largest ? p->budget / largest : 0;
    return largest ? (int)(fit < INT32_MAX ? fit : INT32_MAX) : 0;
}
