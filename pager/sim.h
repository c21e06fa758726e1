/* sim.h: the RAM cache's policies replayed on a routing trace, without a
 * file, threads or I/O (bench-xlru).
 *
 * A pager skeleton: one unit of unit_bytes per (layer, expert), the budget,
 * the list of unpinned resident units, and the very policy code the pager
 * runs (pager/policy.c), so the victims are the ones the pager would
 * choose. One pager_sim_layer call is one MoE layer of one step as the
 * engine drives the pager under `--prefetch router` (model/moe-route.c,
 * app/predict.c): the router's union goes to the pager at once (resident
 * experts are marked wanted and made most recent; the others are loaded in
 * the union's order, each load evicting the policy's victims, as the I/O
 * thread reserves room when a read starts), then every expert is acquired
 * and released, the resident ones first (eng_moe_resident_first). Timing
 * is not modelled: every read is done before the first acquire. */
#ifndef FL_PAGER_SIM_H
#define FL_PAGER_SIM_H

#include <stdint.h>

#include "pager/pager.h"

struct pager_sim;

struct pager_sim_config {
    int n_layers, n_expert, n_used;  /* n_used: top-k, the clock of the decays */
    uint64_t unit_bytes, budget;     /* every expert costs unit_bytes; budget >= unit_bytes */
    enum pager_cache cache;
    /* pinned-hot: the profile (as pager_config's); its hot set starts resident */
    const struct pager_hot_unit *hot;
    int n_hot;
    double hot_fraction;
    /* 0: the policy's own; else lfu-decay's / lfu-step's half-life in tokens */
    double half_life_tokens;
    double window_frac;              /* lfu-step: < 0 keeps the policy's own */
    int clock;                       /* the decays count 0: as the policy does, 1: layer
                                      * steps, 2: acquires */
};

struct pager_sim_stats {
    uint64_t acquires; /* one per expert of a layer's union */
    uint64_t ready;    /* resident when the router chose it (--stats' hit rate) */
    uint64_t loads;    /* reads: what the disk pays (pinned-hot's warm start too) */
    uint64_t rereads;  /* loaded for this layer, evicted by its own reads, read again */
};

/* -EINVAL (a budget below one unit, sizes out of range), -ENOMEM. */
int pager_sim_create(const struct pager_sim_config *cfg, struct pager_sim **out);
void pager_sim_destroy(struct pager_sim *s);
/* experts[0..n): the union the layer's router chose over the batch, in
 * ascending order (the engine's L->order). Ids out of range are skipped. */
void pager_sim_layer(struct pager_sim *s, int layer, const int32_t *experts, int n);
/* The same, each acquire counting uses[i] uses for the frequency policies
 * (the tokens of the batch that chose it) instead of one: what the pager
 * would do if the engine told it how many tokens each expert serves. */
void pager_sim_layer_uses(struct pager_sim *s, int layer, const int32_t *experts,
                          const int32_t *uses, int n);
struct pager_sim_stats pager_sim_stats(const struct pager_sim *s);

#endif
