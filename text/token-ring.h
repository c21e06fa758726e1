/* token-ring.h: the last tokens a sampler accepted, newest first. One
 * history for every step that looks back (the repeat penalties over their
 * window, DRY over its own), sized for the widest of them. */
#ifndef FL_TOKEN_RING_H
#define FL_TOKEN_RING_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

struct fl_token_ring {
    int32_t *ids;
    int32_t cap, n, head; /* head: where the next token goes */
};

/* Room for cap tokens (cap 0: a ring that keeps none). 0 or -ENOMEM. */
static inline int fl_token_ring_init(struct fl_token_ring *r, int32_t cap)
{
    *r = (struct fl_token_ring){ .cap = cap > 0 ? cap : 0 };
    if (r->cap && !(r->ids = malloc((size_t)r->cap * sizeof(*r->ids))))
        return -ENOMEM;
    return 0;
}

static inline void fl_token_ring_free(struct fl_token_ring *r)
{
    free(r->ids);
    r->ids = NULL;
    r->cap = r->n = r->head = 0;
}

static inline void fl_token_ring_clear(struct fl_token_ring *r)
{
    r->n = r->head = 0;
}

/* The i-th latest token (0: the last pushed); i < r->n. */
static inline int32_t fl_token_ring_latest(const struct fl_token_ring *r, int32_t i)
{
    int32_t at = r->head - 1 - i;
    return r->ids[at < 0 ? at + r->cap : at];
}

/* Appends id, dropping the oldest when full. */
static inline void fl_token_ring_push(struct fl_token_ring *r, int32_t id)
{
    if (!r->cap)
        return;
    r->ids[r->head] = id;
    r->head = r->head + 1 == r->cap ? 0 : r->head + 1;
    if (r->n < r->cap)
        r->n++;
}

#endif
