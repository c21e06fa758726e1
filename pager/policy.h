/* policy.h: choosing the cache policy (--cache). (pinned-hot's profile is a
 * --stats-json file: record/stats-json.h reads it.)
 *
 * The policies themselves run inside the pager (pager/policy.c, under its
 * lock): lru evicts the least recently used unpinned expert; lfu-decay the
 * one with the smallest use count, each use weighing 2^(-age / half-life)
 * with a half-life of 8 tokens' worth of acquires; pinned-hot never evicts
 * the profile's hottest experts (those that fit in hot_fraction of the
 * budget) while any other expert can go, and runs LRU over the rest;
 * lfu-step is lfu-decay batch-aware and with a longer memory: its clock
 * counts steps through the layers (n_used per layer), not acquires, so a
 * batch that acquires the union of many sequences' experts forgets at the
 * pace of tokens, and a use counts half after 32 tokens; an expert used
 * once can push out only the rarely used; lfu-next (the default) keeps
 * lfu-step's counts and evicts the expert whose next use is expected
 * farthest ahead: the chance a token uses it, from its count, and where
 * its layer stands in the cycle through the layers (Belady's choice under
 * that estimate). pager/sim.h replays them all offline, pager/belady.h gives the optimum they are judged by. */
#ifndef FL_PAGER_POLICY_H
#define FL_PAGER_POLICY_H

#include "base/error.h"
#include "pager/pager.h"

/* "lru", "lfu-decay", "lfu-step", "lfu-next" or "pinned-hot:STATS.json" (a previous run's
 * --stats-json). *profile gets the file name (pointing into s) or NULL.
 * -EINVAL with err for anything else. */
int pager_cache_parse(const char *s, enum pager_cache *out, const char **profile,
                      struct fl_err *err);

/* lfu-step's and lfu-next's memory: a use counts half after this many
 * tokens. The VRAM expert cache's lfu-next (backend/cuda/expert-lru.h)
 * keeps the same. */
#define PAGER_LFU_STEP_HALF_LIFE_TOKENS 32.0

/* lfu-next's estimate, shared by the pager and the VRAM cache. The rate
 * turns a decayed count into uses per token: 1 - the decay over one
 * token's steps (n_layers x n_used steps; half_life in steps), since one
 * use every token settles at a count of 1 / rate. */
double pager_lfu_next_rate(int n_layers, int n_used, double half_life);
/* How far ahead, in tokens, the next use of an expert of `layer` with
 * decayed use count `count` is expected (the policy evicts the largest),
 * while layer `now` acquires (-1: none yet; a layer below 0 counts as a
 * whole token away). */
double pager_lfu_next_distance(double count, double rate, int layer, int now, int n_layers);

#endif
