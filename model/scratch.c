/* scratch.c: the host scratch arena (model/scratch.h). */
#include "model/scratch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

struct arena_chunk {
    struct arena_chunk *next;
    size_t size, used;
    _Alignas(64) unsigned char data[];
};

struct eng_arena {
    struct arena_chunk *head;
    size_t total; /* bytes handed out since the last reset */
    size_t peak;  /* most bytes live at once since the last reset */
    size_t held;  /* bytes of the chunks now allocated */
    size_t high;  /* most bytes live at once since the arena was created */
};

int eng_arena_create(struct eng_arena **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : -ENOMEM;
}

static void free_chunks(struct arena_chunk *c)
{
    while (c) {
        struct arena_chunk *n = c->next;
        free(c);
        c = n;
    }
}

void eng_arena_destroy(struct eng_arena *a)
{
    if (!a)
        return;
    free_chunks(a->head);
    free(a);
}

static struct arena_chunk *alloc_chunk(size_t size)
{
    struct arena_chunk *c = aligned_alloc(64, (sizeof(*c) + size + 63) & ~(size_t)63);
    if (c) {
        c->next = NULL;
        c->size = size;
        c->used = 0;
    }
    return c;
}

/* During a pass: there is no way on without it. */
static struct arena_chunk *new_chunk(size_t size)
{
    struct arena_chunk *c = alloc_chunk(size);
    if (!c) {
        fprintf(stderr, "faultline: out of memory (%zu bytes of scratch)\n", size);
        abort();
    }
    return c;
}

void eng_arena_reset(struct eng_arena *a)
{
    if (a->head && a->head->next) {
        size_t want = (a->peak > a->total ? a->peak : a->total) + 4096;
        free_chunks(a->head);
        a->head = new_chunk(want);
        a->held = want;
    } else if (a->head) {
        a->head->used = 0;
    }
    a->total = 0;
    a->peak = 0;
}

void *eng_arena_alloc(struct eng_arena *a, size_t bytes)
{
    bytes = (bytes + 63) & ~(size_t)63;
    if (!a->head || a->head->size - a->head->used < bytes) {
        size_t size = a->head ? a->head->size * 2 : (size_t)1 << 20;
        if (size < bytes)
            size = bytes;
        struct arena_chunk *ch = new_chunk(size);
        ch->next = a->head;
        a->head = ch;
        a->held += size;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += bytes;
    a->total += bytes;
    if (a->total > a->peak)
        a->peak = a->total;
    if (a->peak > a->high)
        a->high = a->peak;
    return p;
}

size_t eng_arena_high_water(const struct eng_arena *a)
{
    return a->high;
}

size_t eng_arena_held(const struct eng_arena *a)
{
    return a->held;
}

int eng_arena_reserve(struct eng_arena *a, size_t bytes)
{
    if (a->total)
        return -EBUSY;
    if (a->head && !a->head->next && a->head->size >= bytes)
        return 0;
    struct arena_chunk *c = alloc_chunk(bytes);
    if (!c)
        return -ENOMEM;
    free_chunks(a->head);
    a->head = c;
    a->held = bytes;
    return 0;
}

struct eng_scratch_mark eng_scratch_mark(struct eng_arena *a)
{
    return (struct eng_scratch_mark){ .chunk = a->head, .used = a->head ? a->head->used : 0,
                                      .total = a->total };
}

void eng_scratch_release(struct eng_arena *a, struct eng_scratch_mark m)
{
    /* chunks opened since the mark are kept (the next layer needs as much)
     * but emptied; the marked chunk goes back to where it was */
    for (struct arena_chunk *ch = a->head; ch && ch != m.chunk; ch = ch->next)
        ch->used = 0;
    if (m.chunk)
        ((struct arena_chunk *)m.chunk)->used = m.used;
    a->total = m.total;
}
