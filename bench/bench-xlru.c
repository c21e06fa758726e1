/* bench-xlru.c: the VRAM expert cache's policies replayed on a routing
 * trace (not a test). The cache's hits and misses follow from its
 * bookkeeping (backend/cuda/expert-lru.h) and the order of acquires alone,
 * so they are measured here, on the CPU, from an FLRT file that `faultline
 * eval --routing-out` wrote: each position, layer by layer, holds its k
 * experts (as a decode step does) and then lets them go. Prints the hit
 * rate of LRU and of lfu-decay at several half-lives, for caches of a given
 * share of all experts.
 *   bench-xlru ROUTING.flrt [PERCENT ...]   (default 10 15 25 35 50) */
#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/expert-lru.h"
#include "record/flref.h"

/* Hit rate of one policy (half_life_tokens 0: LRU) with n_slots slots. */
static double replay(const struct flref_routing *r, int n_expert, int n_slots,
                     double half_life_tokens)
{
    struct fl_xlru *c;
    if (fl_xlru_create(n_slots, r->n_layers, n_expert, &c))
        return -1.0;
    if (half_life_tokens > 0 &&
        fl_xlru_set_lfu(c, half_life_tokens * r->n_layers * r->k)) {
        fl_xlru_destroy(c);
        return -1.0;
    }
    int slots[64];
    for (int p = 0; p < r->n_pos; p++)
        for (int l = 0; l < r->n_layers; l++) {
            const int32_t *ids = r->ids + ((size_t)p * r->n_layers + l) * r->k;
            int held = 0;
            for (int j = 0; j < r->k && j < 64; j++) {
                struct fl_xlru_res res;
                if (fl_xlru_acquire(c, l, ids[j], &res) == 0)
                    slots[held++] = res.slot;
            }
            for (int j = 0; j < held; j++)
                fl_xlru_release(c, slots[j]);
        }
    const struct fl_xlru_stats st = fl_xlru_stats(c);
    fl_xlru_destroy(c);
    const double n = (double)(st.hits + st.misses);
    return n > 0 ? (double)st.hits / n : 0.0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench-xlru ROUTING.flrt [PERCENT ...]\n");
        return 2;
    }
    struct flref_routing r = { 0 };
    struct fl_err err;
    if (flref_routing_read(argv[1], &r, &err)) {
        fprintf(stderr, "bench-xlru: %s\n", err.msg);
        return 1;
    }
    int n_expert = 0;
    for (size_t i = 0; i < (size_t)r.n_pos * r.n_layers * r.k; i++)
        n_expert = r.ids[i] + 1 > n_expert ? r.ids[i] + 1 : n_expert;
    static const double def[] = { 10, 15, 25, 35, 50 };
    const int n_pct = argc > 2 ? argc - 2 : (int)(sizeof(def) / sizeof(def[0]));
    static const double hl[] = { 0, 8, 32, 128, 512 }; /* tokens; 0: LRU */
    printf("%s: %d positions x %d MoE layers, top-%d of %d experts (%d keys)\n", argv[1], r.n_pos,
           r.n_layers, r.k, n_expert, r.n_layers * n_expert);
    printf("| cache | slots | LRU hit %% | lfu-decay 8 tok | lfu-decay 32 tok | lfu-decay 128 tok | lfu-decay 512 tok |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n_pct; i++) {
        const double pct = argc > 2 ? atof(argv[2 + i]) : def[i];
        int slots = (int)(pct / 100.0 * r.n_layers * n_expert);
        slots = slots < r.k ? r.k : slots;
        printf("| %4.0f %% | %5d |", pct, slots);
        for (size_t h = 0; h < sizeof(hl) / sizeof(hl[0]); h++)
            printf(" %8.1f |", 100.0 * replay(&r, n_expert, slots, hl[h]));
        printf("\n");
    }
    flref_routing_free(&r);
    return 0;
}
