/* expert-lru.h: the bookkeeping of the VRAM expert cache, in plain host C
 * (no CUDA), so it is unit-tested on machines without a GPU.
 *
 * A fixed number of equal slots hold experts, keyed by (layer, expert).
 * acquire() finds an expert's slot, or claims one for it: a free slot
 * first, else the least recently used slot that nobody holds. Every
 * acquire pins its slot until the matching release, so the k experts of
 * one layer never evict each other while their copies and kernels are
 * being queued; a pinned slot is never handed out again. When every slot
 * is pinned, acquire fails with -EBUSY (the caller computes that expert
 * elsewhere, e.g. on the CPU). Not thread-safe: one forward pass owns it.
 * fl_xlru_set_lfu switches the choice among unheld occupied slots to the
 * pager's lfu-decay (pager/policy.h): the fewest uses, each use's weight
 * halving every half_life acquires, ties to the least recent.
 * fl_xlru_set_lfu_next switches it to the pager's lfu-next (the default of
 * both caches): use counts on a clock of layer steps (n_used per layer, so
 * a batch forgets at the pace of tokens), each acquire adding the tokens
 * that chose the expert (fl_xlru_acquire_uses), and the victim the expert
 * whose next use is expected farthest ahead (pager_lfu_next_distance). */
#ifndef FL_CUDA_EXPERT_LRU_H
#define FL_CUDA_EXPERT_LRU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fl_xlru;

struct fl_xlru_stats {
    uint64_t hits, misses, evictions, busy; /* busy: acquires refused with -EBUSY */
};

/* What acquire decided. On a miss the slot's previous occupant (if any) is
 * named so the caller can account for its eviction; the slot's bytes must
 * then be (re)filled before use. */
struct fl_xlru_res {
    int slot;
    bool hit;
    int evicted_layer, evicted_expert; /* -1 when the slot was free */
};

/* n_slots >= 1; keys are layer < n_layer, expert < n_expert. -EINVAL,
 * -ENOMEM. */
int fl_xlru_create(int n_slots, int n_layer, int n_expert, struct fl_xlru **out);
void fl_xlru_destroy(struct fl_xlru *c);
/* lfu-decay from now on (use counts start at zero); -EINVAL unless
 * half_life > 0, -ENOMEM. */
int fl_xlru_set_lfu(struct fl_xlru *c, double half_life);
/* lfu-next from now on (counts start at zero); n_used: the model's experts
 * per token. -EINVAL unless n_used >= 1, -ENOMEM. */
int fl_xlru_set_lfu_next(struct fl_xlru *c, int n_used);

/* Slot of (layer, expert), pinned and made most recently used. 0 or
 * -EINVAL (key out of range), -EBUSY (every slot pinned). */
int fl_xlru_acquire(struct fl_xlru *c, int layer, int expert, struct fl_xlru_res *res);
/* The same, counting `uses` uses (the tokens of the step that chose the
 * expert) for lfu-next; 0: a fill ahead of its use (a prefetch), which
 * neither counts nor moves the clock. acquire counts 1. */
int fl_xlru_acquire_uses(struct fl_xlru *c, int layer, int expert, uint32_t uses,
                         struct fl_xlru_res *res);
/* Unpins a slot acquired before (-EINVAL when it is not pinned). */
int fl_xlru_release(struct fl_xlru *c, int slot);
/* Forgets what a slot holds (its fill failed): it becomes free. The caller
 * must be its only holder (else -EBUSY); the pin is dropped too. */
int fl_xlru_invalidate(struct fl_xlru *c, int slot);

/* Slot holding (layer, expert), or -ENOENT; changes nothing. */
int fl_xlru_lookup(const struct fl_xlru *c, int layer, int expert);
/* The key a slot holds (false when free). */
bool fl_xlru_key(const struct fl_xlru *c, int slot, int *layer, int *expert);
int fl_xlru_slots(const struct fl_xlru *c);
int fl_xlru_pins(const struct fl_xlru *c, int slot);
struct fl_xlru_stats fl_xlru_stats(const struct fl_xlru *c);

/* How many slots of slot_bytes fit in a budget after keeping `reserve`
 * bytes for everything else (never more than `free_bytes - reserve`, the
 * memory the device says it has free); 0 when none fits. */
int64_t fl_xlru_slots_for_budget(size_t budget, size_t free_bytes, size_t reserve,
                                 size_t slot_bytes);

#endif
