/* scratch.h: the host scratch of a forward pass, an arena whose chunks never
 * move while a pass holds pointers into them. On reset several chunks are
 * merged into one big enough for the whole last pass, so steady state is a
 * single allocation. */
#ifndef FL_SCRATCH_H
#define FL_SCRATCH_H

#include <stddef.h>

struct eng_arena;

int eng_arena_create(struct eng_arena **out); /* 0 or -ENOMEM */
void eng_arena_destroy(struct eng_arena *a);
void eng_arena_reset(struct eng_arena *a);    /* done by eng_forward */
/* 64-byte aligned, uninitialised, valid until the next reset. Never NULL:
 * aborts on out-of-memory (a forward pass cannot continue without it). */
void *eng_arena_alloc(struct eng_arena *a, size_t bytes);
/* One chunk of at least `bytes` from now on, between passes (-EBUSY
 * during one; -ENOMEM): a pass that needs no more never grows the arena,
 * so the memory it takes is what it touches, never a grown chunk's stale
 * tail beside a new one (a chunk's untouched pages cost nothing). */
int eng_arena_reserve(struct eng_arena *a, size_t bytes);
/* The most bytes live at once since the arena was created (what passes
 * needed: eng_cpu_scratch_bound's test), and the bytes its chunks span
 * now (what a reservation holds; it grows when a pass needs more). */
size_t eng_arena_high_water(const struct eng_arena *a);
size_t eng_arena_held(const struct eng_arena *a);

/* What a layer takes is given back after it: scratch stays at one layer's
 * worth instead of growing with the layer count (it competes with the
 * paged experts for RAM). */
struct eng_scratch_mark {
    void *chunk;
    size_t used, total;
};
struct eng_scratch_mark eng_scratch_mark(struct eng_arena *a);
void eng_scratch_release(struct eng_arena *a, struct eng_scratch_mark m);

#endif
