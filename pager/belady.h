/* belady.h: Belady's MIN, the offline optimum a cache policy is judged by
 * (bench-xlru prints it beside every policy it replays).
 *
 * The requests are the acquires in the engine's order, in groups: a group
 * is one MoE layer of one step, whose experts are all held at once (the
 * VRAM cache pins a layer's slots until its kernels ran; the pager pins a
 * wave). The cache holds `capacity` equal units (experts of one size: the
 * RAM budget / bytes per expert, or the VRAM cache's slots). On a miss
 * with the cache full, MIN evicts the resident key whose next request is
 * farthest ahead, never one its own group holds. That is optimal for the
 * number of loads (tests/test-belady.c checks it against an exhaustive
 * search). */
#ifndef FL_PAGER_BELADY_H
#define FL_PAGER_BELADY_H

#include <stddef.h>
#include <stdint.h>

/* keys[0..n) in [0, n_keys), group[0..n) non-decreasing. Returns the loads
 * (misses, the first use of a key included), or -EINVAL (a key out of
 * range, a group larger than the capacity, capacity < 1), -ENOMEM. */
int64_t fl_belady_loads(const int32_t *keys, const int32_t *group, size_t n, int32_t n_keys,
                        int capacity);

/* The popularity reference, for the same requests: the capacity - w most
 * requested keys held from the start (w: the largest group, the room its
 * other keys need), every other request a load, and each held key's first.
 * What a policy gets that knows each key's share of the requests in advance
 * but not their order: keeping the most popular is optimal when requests
 * are independent draws (the independent reference model), so the distance
 * from this to MIN is what only knowing the order of future requests wins.
 * Returns the loads, or -EINVAL (as fl_belady_loads), -ENOMEM. */
int64_t fl_static_top_loads(const int32_t *keys, const int32_t *group, size_t n, int32_t n_keys,
                            int capacity);

#endif
