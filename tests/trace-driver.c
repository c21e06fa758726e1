/* trace-driver.c: a stand-in for a paged decode, to be traced.
 *
 * usage: trace-driver MODEL STATS.json [TOKENS [BUDGET_EXPERTS]]
 * Opens MODEL with every routed-expert tensor on disk, in uffd mode, under a
 * budget of BUDGET_EXPERTS (default 2 x n_expert_used) experts per layer's
 * worth, then for each of TOKENS "tokens" and each MoE layer picks
 * n_expert_used experts (skewed, as routers are), prefetches the next
 * layer's picks and reads every byte of the chosen experts (which faults the
 * absent ones in). Writes the pager's stats JSON to STATS.json and prints
 * "tokens/s: X" and "cpu ms/token: Y" (what scripts/bench-trace.sh compares). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "gguf/gguf.h"
#include "gguf/moe-layout.h"
#include "record/stats-json.h"
#include "pager/pager.h"
#include "plan/pager-layout.h"

struct drv { struct moe_layout *ml; bool *expert; };

static enum pager_tier tier(void *ctx, int64_t i)
{
    return ((struct drv *)ctx)->expert[i] ? PAGER_TIER_DISK : PAGER_TIER_RAM;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Skewed picks: expert e with weight ~ 1/(e+1), distinct. */
static void pick(int n_expert, int n_used, int32_t *out)
{
    for (int k = 0; k < n_used; k++) {
        int e;
        bool dup;
        do {
            double u = (double)(rnd() % 1000000) / 1e6;
            e = (int)((double)n_expert * u * u * u);
            dup = false;
            for (int j = 0; j < k; j++)
                dup |= out[j] == e;
        } while (dup);
        out[k] = e;
    }
}

static uint64_t touch_expert(const uint8_t *base, const struct moe_layer *ly, int e)
{
    uint64_t sum = 0;
    for (int r = 0; r < MOE_N_ROLES; r++) {
        const struct moe_expert_tensor *et = &ly->role[r];
        if (!et->t)
            continue;
        /* every byte, as a matvec over the expert's weights would */
        const uint8_t *p = base + moe_expert_offset(et, e);
        uint64_t i = 0, w;
        for (; i + 8 <= et->expert_bytes; i += 8) {
            memcpy(&w, p + i, 8);
            sum += w * 0x9e3779b97f4a7c15ull;
        }
        for (; i < et->expert_bytes; i++)
            sum += p[i];
    }
    return sum;
}

static int setup(const char *path, struct gguf_file **g, struct drv *d, struct fl_err *err)
{
    int rc = gguf_open(path, g, err);
    if (rc < 0 || (rc = moe_layout_compute(*g, &d->ml, err)) < 0)
        return rc;
    if (!d->ml->n_moe_layers)
        return fl_err_set(err, -EINVAL, "%s: no MoE layers", path);
    d->expert = calloc((size_t)gguf_n_tensors(*g), sizeof(bool));
    if (!d->expert)
        return -ENOMEM;
    for (int l = 0; l < d->ml->n_layer; l++)
        for (int r = 0; r < MOE_N_ROLES; r++)
            if (d->ml->layers[l].role[r].t)
                d->expert[d->ml->layers[l].role[r].t - gguf_tensor(*g, 0)] = true;
    return 0;
}

static double run(struct pager *p, const struct moe_layout *ml, int tokens)
{
    int32_t sel[64], next[64];
    const uint8_t *base = pager_base(p);
    uint64_t sum = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int t = 0; t < tokens; t++) {
        for (int l = 0; l < ml->n_layer; l++) {
            const struct moe_layer *ly = &ml->layers[l];
            if (!ly->is_moe)
                continue;
            int nu = ly->n_expert_used < 64 ? ly->n_expert_used : 64;
            pick(ly->n_expert, nu, sel);
            if (l + 1 < ml->n_layer && ml->layers[l + 1].is_moe) {
                pick(ml->layers[l + 1].n_expert, nu, next);
                pager_prefetch(p, l + 1, next, nu);
            }
            for (int k = 0; k < nu; k++)
                sum += touch_expert(base, ly, sel[k]);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (sum == 42)
        fputc(' ', stderr); /* keeps the reads */
    return (double)tokens / ((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: trace-driver MODEL STATS.json [TOKENS [BUDGET_EXPERTS]]\n");
        return 2;
    }
    int tokens = argc > 3 ? atoi(argv[3]) : 64, per_layer = argc > 4 ? atoi(argv[4]) : 0;
    struct fl_err err = { { 0 } };
    struct gguf_file *g = NULL;
    struct drv d = { 0 };
    struct pager *p = NULL;
    if (setup(argv[1], &g, &d, &err) < 0) {
        fprintf(stderr, "trace-driver: %s\n", err.msg);
        return 1;
    }
    uint64_t biggest = 0;
    for (int l = 0; l < d.ml->n_layer; l++)
        if (d.ml->layers[l].bytes_per_expert > biggest)
            biggest = d.ml->layers[l].bytes_per_expert;
    if (per_layer <= 0)
        per_layer = 2 * d.ml->n_expert_used;
    struct pager_config c;
    pager_config_init(&c);
    c.mode = PAGER_MODE_UFFD;
    c.quiet = true;
    /* page rounding: each of up to 4 slices may straddle two more pages */
    c.ram_budget = (uint64_t)per_layer * (biggest + 4 * 2 * 4096);
    struct pager_layout layout;
    int lrc = placement_pager_layout(g, tier, &d, &layout, &err);
    if (!lrc)
        lrc = pager_open(argv[1], &layout, &c, &p, &err);
    placement_pager_layout_free(&layout);
    if (lrc < 0) {
        fprintf(stderr, "trace-driver: %s\n", err.msg);
        return 1;
    }
    double tps = run(p, d.ml, tokens);
    pager_settle(p, 1000);
    FILE *f = fopen(argv[2], "w");
    int rc = f ? eng_stats_json_write(f, p, NULL) : -errno;
    if (f && fclose(f) != 0)
        rc = -EIO;
    int perr = pager_error(p, &err);
    pager_close(p);
    moe_layout_free(d.ml);
    free(d.expert);
    gguf_close(g);
    if (perr < 0 || rc < 0) {
        fprintf(stderr, "trace-driver: %s\n", perr < 0 ? err.msg : strerror(-rc));
        return 1;
    }
    /* CPU time includes the uprobe and tracepoint handlers run on our
     * behalf: a tracing cost that a busy machine's wall clock hides. */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
                 ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
    printf("tokens/s: %.1f\ncpu ms/token: %.3f\n", tps, cpu * 1e3 / tokens);
    return 0;
}
